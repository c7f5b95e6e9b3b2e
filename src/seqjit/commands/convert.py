"""``seqjit convert SRC OUT``: write a seqjit model directory from another format.

- SRC a Hugging Face directory (``config.json`` with ``model_type`` + ``model.safetensors``; the families of
  :data:`seqjit.convert.FROM_HF`):
  :func:`seqjit.from_hf`; its tokenizer files (``source.spm``, ``target.spm``, ``vocab.json``,
  ``target_vocab.json``, ``tokenizer_config.json``, ``tokenizer.json``) are copied too, so ``seqjit translate`` reads text.
  Like ``config.json`` they are read as model files are (:mod:`seqjit.models.files`: regular files
  inside SRC, of bounded size), all before anything is written.
- SRC a ``.safetensors`` file holding a PyTorch state dict (read with safetensors' NumPy API, never
  unpickled): :func:`seqjit.from_torch` with ``--arch`` and ``--config`` (a JSON object, inline or
  in a file) giving what the weights cannot tell; or, with ``--from joeynmt`` / ``--from opennmt``,
  a JoeyNMT or OpenNMT-py RNN model's state dict with the toolkit's own options as ``--config``
  (JoeyNMT: the YAML's ``model:`` section as JSON; OpenNMT-py: ``vars(checkpoint["opt"])``):
  :func:`seqjit.convert.from_joeynmt`, :func:`seqjit.convert.from_opennmt`; SRC may also be the
  toolkit's checkpoint (``torch.load(weights_only=True)``), and the toolkit's vocabularies become
  ``word_vocab.json`` (:mod:`seqjit.convert.toolkit_files`, :mod:`seqjit.convert.toolkit_vocab`).
- SRC a Keras 3 ``.keras`` / ``.h5`` file with ``--from keras`` (an LSTM/GRU encoder-decoder with
  attention, read with h5py, nothing executed): :func:`seqjit.convert.from_keras`; ``--config``
  gives ``decoder_start_id`` and ``eos_id``.

OUT must not exist or be an empty directory, unless ``--force``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from seqjit.commands.messages import quoted
from seqjit.errors import ConfigError
from seqjit.models.files import CONFIG_MAX_BYTES, model_file, read_json, read_limited, write_replacing

TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json",
                   "special_tokens_map.json", "tokenizer.json")
#: the largest tokenizer file copied (the .spm models and vocab.json of a Marian model are 1-2 MiB; NLLB-200's
#: tokenizer.json about 17 MiB)
TOKENIZER_MAX_BYTES = 64 << 20


def register(subparsers) -> None:
    from seqjit.convert import FROM_TORCH

    p = subparsers.add_parser(
        "convert", help="convert a Hugging Face directory, a toolkit checkpoint, a Keras file or a PyTorch state dict (.safetensors) "
             "to a seqjit model",
        description="Write a seqjit model directory (config.json + model.safetensors) to OUT from SRC: a Hugging Face "
                    "directory (MarianMT, BART, mBART, M2M100/NLLB, Pegasus, T5; its tokenizer files are copied too), a "
                    ".safetensors file holding a PyTorch state dict (give --arch and --config), a JoeyNMT or OpenNMT-py "
                    "checkpoint (--from) or a Keras file (--from keras). Nothing is ever unpickled.")
    p.add_argument("src", metavar="SRC", help="a Hugging Face model directory, or a .safetensors state dict")
    p.add_argument("out", metavar="OUT", help="the seqjit model directory to write")
    p.add_argument("--arch", default=None, help=f"architecture of a state dict: {', '.join(sorted(FROM_TORCH))}")
    p.add_argument("--from", dest="source", default="torch", choices=("torch", "joeynmt", "opennmt", "keras"),
                   help="who wrote the state dict: seqjit's PyTorch names (--arch), or a JoeyNMT / OpenNMT-py RNN "
                        "model, whose options --config then holds; keras: SRC is a .keras/.h5 file and --config "
                        "gives decoder_start_id and eos_id")
    p.add_argument("--config", default=None, metavar="JSON_OR_PATH",
                   help="a state dict's config: a JSON object, inline or in a file (e.g. '{\"nhead\": 8}')")
    p.add_argument("--src-vocab", default=None, metavar="PATH",
                   help="--from joeynmt/opennmt: the source vocabulary file (JoeyNMT src_vocab.txt, OpenNMT-py's "
                        "vocab file); default: JoeyNMT's beside SRC, OpenNMT-py's inside its checkpoint")
    p.add_argument("--tgt-vocab", default=None, metavar="PATH",
                   help="--from joeynmt/opennmt: the target vocabulary file (JoeyNMT trg_vocab.txt)")
    p.add_argument("--src-spm", default=None, metavar="PATH",
                   help="--from joeynmt/opennmt: the source SentencePiece model (default: the one the options name "
                        "(JoeyNMT tokenizer_cfg.model_file, OpenNMT-py src_subword_model), read only from the "
                        "directory of the checkpoint or config naming it)")
    p.add_argument("--tgt-spm", default=None, metavar="PATH",
                   help="--from joeynmt/opennmt: the target SentencePiece model (as --src-spm)")
    p.add_argument("--dtype", default=None, choices=("float32", "float64"), help="weight dtype (default: float32)")
    p.add_argument("--force", action="store_true", help="write into OUT even when it is not empty")
    p.add_argument("--quantize", default=None, choices=("int8", "float16", "bfloat16"),
                   help="int8: store the linear weights and the RNN matrices as int8 with per-row (per gate row) "
                        "float32 scales; float16, bfloat16: store the linear weights and a Transformer's "
                        "embedding tables in 16 bits (seqjit.quantize; docs/half_precision.md)")
    p.set_defaults(func=run)


def parse_config(text: str | None) -> dict:
    """``--config``: a JSON object given inline, or the path of a file holding one."""
    if text is None:
        return {}
    stripped = text.strip()
    where = "--config"
    if not stripped.startswith(("{", "[")):
        path = Path(text)
        if not os.path.isfile(path):  # False (not OSError) for a name too long to be a file, a FIFO, a device
            raise ValueError(f"--config {quoted(text)} is neither a JSON object nor an existing file")
        stripped = _config_text(path)
        where = f"--config file {path}"
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    except RecursionError:  # [[[[...]]]] thousands deep
        raise ValueError(f"{where} is nested too deeply to be a config") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a JSON object (name -> value), got {type(data).__name__}")
    return data


def _config_text(path: Path) -> str:
    """A ``--config`` file's text: a regular file (a FIFO never blocks) of at most CONFIG_MAX_BYTES."""
    try:
        return read_limited(path, CONFIG_MAX_BYTES).decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ValueError(f"--config file {path} is not UTF-8 text: {exc}") from None


def config_dir(text: str | None):
    """The directory of a ``--config`` file (where the file names it holds are found); None inline."""
    if text is None or text.strip().startswith(("{", "[")) or not os.path.isfile(text):
        return None
    return Path(text).parent


def toolkit_config(text: str | None):
    """A toolkit's ``--config``: a YAML file (JoeyNMT's config.yaml; needs PyYAML), else a JSON object
    inline or in a file (:func:`parse_config`); None when not given."""
    if text is not None and Path(text).suffix in (".yaml", ".yml") and Path(text).is_file():
        try:
            import yaml
        except ModuleNotFoundError:
            raise ModuleNotFoundError(f"--config {text} is YAML: pip install 'seqjit[yaml]' (PyYAML), or give it as JSON") from None
        try:
            data = yaml.safe_load(_config_text(Path(text)))
        except yaml.YAMLError as exc:
            raise ValueError(f"--config file {text} is not valid YAML: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise ValueError(f"--config file {text} must hold a mapping, got {type(data).__name__}")
        return data
    return None if text is None else parse_config(text)


def _hf_config(directory: Path):
    """SRC's ``config.json`` (a regular file inside SRC, at most CONFIG_MAX_BYTES), or None when absent."""
    path = model_file(directory, "config.json")
    if not os.path.lexists(path):
        return None
    return read_json(path)


def _tokenizer_files(directory: Path) -> dict:
    """name -> bytes of SRC's tokenizer files, read (before anything is written) as model files are:
    regular files inside SRC of bounded size; a missing one is skipped."""
    files = {}
    for name in TOKENIZER_FILES:
        path = model_file(directory, name)
        if os.path.lexists(path):
            files[name] = read_limited(path, TOKENIZER_MAX_BYTES)
    return files


def check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"OUT {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ValueError(f"OUT {out} exists and is not empty; choose another directory or pass --force to write into it")


def convert(src, out, *, arch=None, config=None, dtype=None, force=False, quantize=None, source="torch",
            src_vocab=None, tgt_vocab=None, src_spm=None, tgt_spm=None) -> tuple:
    """Convert ``src`` into directory ``out``; returns (model, kind, copied tokenizer file names)."""
    import seqjit

    src, out = Path(src), Path(out)
    if not src.exists():
        raise FileNotFoundError(f"{src} does not exist")
    if src.resolve() == out.resolve():
        raise ValueError("SRC and OUT are the same path")
    check_out(out, force)
    tokenizer = {}  # name -> bytes, copied from a Hugging Face directory
    vocab = None  # a toolkit's vocabularies (seqjit.convert.toolkit_vocab)
    if any(f is not None for f in (src_vocab, tgt_vocab, src_spm, tgt_spm)) and source not in ("joeynmt", "opennmt"):
        raise ValueError("--src-vocab, --tgt-vocab, --src-spm and --tgt-spm apply to --from joeynmt or --from opennmt")
    if src.is_dir():
        data = _hf_config(src)
        if data is not None and "architecture" in data and "model_type" not in data:
            raise ValueError(f"{src} is already a seqjit model directory (config.json names architecture "
                             f"{data['architecture']!r}); copy it instead")
        if data is None or "model_type" not in data:
            raise ValueError(f"{src} is neither a Hugging Face model directory (config.json with model_type) nor a "
                             ".safetensors state dict")
        if arch is not None or config is not None:
            raise ValueError("--arch and --config apply to a .safetensors state dict; a Hugging Face directory "
                             "carries its own config")
        tokenizer = _tokenizer_files(src)
        model = seqjit.from_hf(src, dtype=dtype or "float32")
        kind = f"Hugging Face {data['model_type']}"
    elif source == "keras":
        from seqjit.convert import from_keras

        if arch is not None:
            raise ValueError("--arch applies to --from torch; a Keras model is always attention_seq2seq")
        extra = {"dtype": dtype} if dtype is not None else {}
        model = from_keras(src, **{**parse_config(config), **extra})
        kind = "Keras model"
    elif source in ("joeynmt", "opennmt"):
        model, kind, vocab = _toolkit(src, source, arch, config, dtype, (src_vocab, tgt_vocab, src_spm, tgt_spm))
    elif src.suffix == ".safetensors":
        if arch is None:
            from seqjit.convert import FROM_TORCH

            raise ValueError(f"{src} is a state dict: give its architecture with --arch ({', '.join(sorted(FROM_TORCH))})")
        options = parse_config(config)
        if dtype is not None:
            if options.get("dtype", dtype) != dtype:
                raise ValueError(f"--dtype {dtype} contradicts dtype {options['dtype']!r} in --config")
            options["dtype"] = dtype
        from seqjit.models.io import read_safetensors

        state_dict, _ = read_safetensors(src, verify=False)
        try:
            model = seqjit.from_torch(state_dict, arch=arch, **options)
        except TypeError as exc:  # an option the importer does not take
            raise ConfigError(f"--config: {exc}") from None
        kind = f"PyTorch state dict ({len(state_dict)} tensors)"
    else:
        raise ValueError(f"{src} is neither a Hugging Face model directory (config.json with model_type) nor a "
                         ".safetensors state dict")
    if quantize is not None:
        model = seqjit.quantize(model, quantize)
    if vocab is not None:  # before anything is written
        from seqjit.convert import toolkit_vocab

        toolkit_vocab.check_sizes(vocab, src_vocab_size=model.source_vocab_size, tgt_vocab_size=model.target_vocab_size)
    model.save(out)
    for name, raw in tokenizer.items():
        write_replacing(out / name, raw)  # a link planted in OUT (--force) is replaced, never written through
    written = list(tokenizer)
    if vocab is not None:
        written += toolkit_vocab.write(out, vocab, src_vocab_size=model.source_vocab_size,
                                       tgt_vocab_size=model.target_vocab_size)
    return model, kind, written


def _toolkit(src: Path, source: str, arch, config, dtype, files) -> tuple:
    """(model, kind, vocabularies or None) from a JoeyNMT or OpenNMT-py checkpoint or exported state
    dict, the toolkit's options and its vocabularies (:mod:`seqjit.convert.toolkit_files`); ``files``:
    the paths given as --src-vocab, --tgt-vocab, --src-spm, --tgt-spm (None: not given)."""
    import seqjit.convert as convert_api
    from seqjit.convert.toolkit_files import read_toolkit

    if arch is not None:
        raise ValueError(f"--arch applies to --from torch; a {source} model is always attention_seq2seq")
    src_vocab, tgt_vocab, src_spm, tgt_spm = files
    state_dict, options, vocab, kind = read_toolkit(src, source, toolkit_config(config), src_vocab=src_vocab,
                                                    tgt_vocab=tgt_vocab, src_spm=src_spm, tgt_spm=tgt_spm,
                                                    config_dir=config_dir(config))
    extra = {"dtype": dtype} if dtype is not None else {}
    model = getattr(convert_api, f"from_{source}")(state_dict, options, **extra)
    return model, kind, vocab


def run(args) -> int:
    model, kind, copied = convert(args.src, args.out, arch=args.arch, config=args.config, dtype=args.dtype,
                                  force=args.force, quantize=args.quantize, source=getattr(args, "source", "torch"),
                                  src_vocab=args.src_vocab, tgt_vocab=args.tgt_vocab,
                                  src_spm=getattr(args, "src_spm", None), tgt_spm=getattr(args, "tgt_spm", None))
    out = Path(args.out)
    params = sum(int(w.size) for w in model.weights.values())
    quantization = getattr(model.config, "quantization", "none")
    dtype = getattr(model.config, "dtype", "float32") + ("" if quantization == "none" else f", {quantization} weights")
    print(f"converted {args.src} ({kind}) -> {model.arch} model, {params:,} parameters, {dtype}")
    if kind.startswith("PyTorch state dict"):  # a state dict does not say its special ids
        given = parse_config(args.config)
        defaulted = [f"{name} {getattr(model.config, name)}" for name in ("pad_id", "decoder_start_id", "eos_id")
                     if name not in given and hasattr(model.config, name)]
        if defaulted:
            print(f"  special ids by default: {', '.join(defaulted)} (not in --config; a model trained with other ids "
                  "decodes garbage: give them there)")
    for name in ("config.json", "model.safetensors", *copied):
        print(f"  wrote {out / name} ({(out / name).stat().st_size:,} bytes)")
    if copied and "word_vocab.json" in copied:
        print(f"  seqjit translate --model {out} reads text with the toolkit's vocabularies")
    elif getattr(args, "source", "torch") in ("joeynmt", "opennmt"):
        print("  no vocabularies found (give --src-vocab/--tgt-vocab): seqjit translate reads token ids (--ids)")
    if copied and "source.spm" in copied:
        print(f"  seqjit translate --model {out} reads text with its SentencePiece files")
    elif copied and "tokenizer.json" in copied:
        print(f"  seqjit translate --model {out} reads text with its tokenizer.json (pip install 'seqjit[hf-tokenizers]')")
    return 0
