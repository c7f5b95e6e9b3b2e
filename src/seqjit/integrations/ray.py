"""Batch inference over Ray Data: callable classes for ``Dataset.map_batches``, one model per actor.

    import ray
    from seqjit.integrations.ray import map_g2p, map_translate

    words = ray.data.read_parquet("words.parquet")           # a string column "word"
    words = map_g2p(words, "attention", actors=8, threads=1)  # + phonemes, unknown, score, error
    pairs = map_translate(ray.data.read_text("en.txt"), "opus-mt-en-de/", column="text", actors=4)

which is ``map_batches`` with an actor pool; by hand::

    ds.map_batches(G2PPredictor, fn_constructor_kwargs=dict(model="attention", threads=1),
                   compute=ray.data.ActorPoolStrategy(size=8), num_cpus=1, batch_format="pyarrow")

Each actor loads the model once (a bundled G2P name works wherever seqjit is installed; a model
directory must be readable at the same path on every node) and decodes a batch as the single-machine
commands decode a pool of lines: the rows sorted by length and cut into batches of at most
``max_batch_tokens`` padded tokens and ``max_batch_size`` rows. A row that cannot be decoded keeps
its place with empty outputs and its reason in the ``error`` column (``""`` for a good row), by the
rules of ``seqjit g2p`` / ``seqjit translate``; a row that arrives with a non-empty ``error`` is
passed through undecoded.

Outputs are a function of the batch alone, so when Ray restarts an actor that died and retries its
batch, the retried rows equal the lost ones; with a row-index column the caller restores input
order and drops a row that comes back twice (:mod:`seqjit.commands.ray_run` does).

Batches may be ``pyarrow.Table`` (``batch_format="pyarrow"``, what ``map_*`` use), pandas
DataFrames or dicts of NumPy arrays; the result has the same form. Only ``map_*`` import Ray;
``import seqjit`` never does.
"""
from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

from seqjit.text.batching import Record, token_batches
from seqjit.text.lines import BLANK, check_source_line, parse_ids, resolve_max_length
from seqjit.text.translation import codec_for, load_any, target_language

RAY_EXTRA = "pip install 'seqjit[ray]'"
#: rows per batch of ``map_*`` (the single-machine commands' pool of lines)
DEFAULT_BATCH_ROWS = 2048
#: test hook: a file holding a row index; see :func:`_crash_hook`
CRASH_FILE_ENV = "SEQJIT_RAY_CRASH_FILE"
#: how many times a batch is run again after its actor died
DEFAULT_RETRIES = 3


def import_ray():
    """``ray`` with Ray Data, or a ModuleNotFoundError that names the extra to install."""
    try:
        import ray
        import ray.data  # noqa: F401  (pyarrow and pandas come with it)
    except ImportError as exc:
        raise ModuleNotFoundError(f"Ray Data is not installed (import {exc.name or 'ray'} failed): {RAY_EXTRA}") from None
    return ray


# -- the map_batches callables ---------------------------------------------------------------------
class G2PPredictor:
    """Words in column ``column`` -> ``phonemes`` (space-separated ARPAbet), ``score`` (sum of
    log-probabilities; NaN for a bad row), ``unknown`` (the characters read as ``<unk>``),
    ``spelled`` (the letters the model read), ``truncated`` (cut short by the length limit), ``error``.
    ``lexicon``: a dictionary consulted before the model, as ``G2P(lexicon=...)`` takes it
    (``"cmudict"`` or a lexicon file's path, readable at that path on every node; None: the model
    answers every word); a word it holds gets its first listed pronunciation, score NaN, as ``seqjit
    g2p`` writes it."""

    def __init__(self, model="attention", *, column: str = "word", beam_size: int = 1, max_length: int | None = None,
                 max_batch_tokens: int = 4096, max_batch_size: int = 256, fold_accents: bool = True,
                 threads: int | None = 1, backend: str | None = None, lexicon: str | None = None):
        from seqjit.g2p import G2P

        _check_options(beam_size=beam_size, max_length=max_length, max_batch_tokens=max_batch_tokens,
                       max_batch_size=max_batch_size, threads=threads)
        _set_threads(threads)
        extra = {} if backend is None else {"backend": backend}
        self.g2p = G2P(model, fold_accents=fold_accents, lexicon=lexicon, **extra)
        self.column, self.max_batch_tokens, self.max_batch_size = column, max_batch_tokens, max_batch_size
        self.options = dict(beam_size=beam_size, max_length=max_length, max_batch_size=max_batch_size)

    def _word(self, value) -> tuple:
        """``(word, letters)`` of one row, or ValueError saying what is wrong (seqjit g2p's rules)."""
        if value is None:
            raise ValueError("missing word (null)")
        if not isinstance(value, str):
            raise ValueError(f"not a word: a {type(value).__name__}")
        if not value.strip():
            raise ValueError("empty line (no word)")
        word = value.strip()
        return word, len(self.g2p.spell(word)[0])

    def _run(self, words) -> list:
        """A Pronunciation per word; a word that fails alone gives its message (str)."""
        try:
            return self.g2p.predict(words, **self.options)
        except ValueError as exc:
            if len(words) == 1:
                return [str(exc).removeprefix("words[0]: ")]
            return [self._run([word])[0] for word in words]  # find the word at fault

    def __call__(self, batch):
        _crash_hook(batch)
        values = column_values(batch, self.column)
        records = []
        for i, (value, error) in enumerate(zip(values, _given_errors(batch, len(values)))):
            word = length = None
            if not error:
                try:
                    word, length = self._word(value)
                except ValueError as exc:
                    error = str(exc)
            records.append(Record(i, i + 1, word, length or 0, error or None))
        n = len(records)
        phonemes, unknown, spelled = [""] * n, [""] * n, [""] * n
        score, truncated, errors = [math.nan] * n, [False] * n, [r.error or "" for r in records]
        for chunk in token_batches([r for r in records if r.error is None], self.max_batch_tokens, self.max_batch_size):
            for r, result in zip(chunk, self._run([r.item for r in chunk])):
                if isinstance(result, str):
                    errors[r.index] = result
                    continue
                phonemes[r.index] = " ".join(result.phonemes)
                unknown[r.index] = "".join(dict.fromkeys(result.unknown))
                spelled[r.index], score[r.index], truncated[r.index] = result.spelled, result.score, result.truncated
        return with_columns(batch, {"phonemes": (phonemes, "string"), "score": (score, "float64"),
                                    "unknown": (unknown, "string"), "spelled": (spelled, "string"),
                                    "truncated": (truncated, "bool"), "error": (errors, "string")})


class TranslatePredictor:
    """Sources in column ``column`` -> ``ids`` (generated ids, end token excluded), ``output`` (the
    line ``seqjit translate`` writes: detokenised text, or the ids), ``score``, ``error``.

    A source is a string (a line of token ids, or text when the model directory has SentencePiece
    files or a Hugging Face ``tokenizer.json`` and ``ids`` is False) or a sequence of integer ids.
    The output language of a many-to-many model: ``target_lang`` (``deu_Latn``, read with the
    directory's tokenizer.json, as ``seqjit translate --target-lang``) or its token id ``forced_bos_id``."""

    def __init__(self, model, *, column: str = "text", ids: bool = False, beam_size: int = 1,
                 max_length: int | None = None, max_batch_tokens: int = 4096, max_batch_size: int = 256,
                 threads: int | None = 1, target_lang: str | None = None, forced_bos_id: int | None = None):
        _check_options(beam_size=beam_size, max_length=max_length, max_batch_tokens=max_batch_tokens,
                       max_batch_size=max_batch_size, threads=threads)
        if target_lang is not None and forced_bos_id is not None:
            raise ValueError("give target_lang or forced_bos_id, not both")
        _set_threads(threads)
        directory = Path(model)
        self.model = load_any(directory)
        self.codec = codec_for(directory, self.model, ids=ids)  # as seqjit translate decides
        self.max_positions = getattr(self.model.config, "max_positions", None)
        forced = target_language(directory, self.model, self.codec, target_lang)
        if forced_bos_id is not None:
            forced = dict(forced_bos_id=forced_bos_id)
        self.options = dict(beam_size=beam_size, max_length=resolve_max_length(max_length, self.max_positions),
                            return_scores=True, **forced)
        self.column, self.max_batch_tokens, self.max_batch_size = column, max_batch_tokens, max_batch_size

    def _source(self, value) -> list | None:
        """Token ids of one source (None: a blank text line), or ValueError saying what is wrong."""
        if value is None:
            raise ValueError("missing source (null)")
        if isinstance(value, str):
            if self.codec is not None and not value.strip():
                return None
            ids = self.codec.encode(value) if self.codec is not None else parse_ids(value)
        else:
            ids = list(value)
            if not ids:
                raise ValueError("empty source: no token ids")
            for position, v in enumerate(ids, 1):
                if isinstance(v, bool) or not isinstance(v, (int, _np().integer)):
                    raise ValueError(f"token {position} ({v!r}) is not an integer token id")
            ids = [int(v) for v in ids]
        check_source_line(ids, self.model, self.max_positions)
        return ids

    def _run(self, items) -> list:
        """Generated ids and score per source; a source that fails alone gives its message (str)."""
        try:
            results = self.model.generate(items, max_batch_size=len(items), **self.options)
            return [(r.ids[0], float(r.scores[0])) for r in results]
        except (ValueError, TypeError, IndexError) as exc:
            if len(items) == 1:
                return [str(exc)]
            return [self._run([item])[0] for item in items]  # find the source at fault

    def __call__(self, batch):
        _crash_hook(batch)
        values = column_values(batch, self.column)
        records = []
        for i, (value, error) in enumerate(zip(values, _given_errors(batch, len(values)))):
            if not error:
                try:
                    ids = self._source(value)
                except ValueError as exc:
                    error = str(exc)
                else:  # None: a blank text line, a blank output that is not an error
                    records.append(Record(i, i + 1, error=BLANK) if ids is None else Record(i, i + 1, ids, len(ids)))
                    continue
            records.append(Record(i, i + 1, error=error))
        n = len(records)
        out_ids, output, score = [[] for _ in range(n)], [""] * n, [math.nan] * n
        errors = [r.error or "" for r in records]
        for chunk in token_batches([r for r in records if r.error is None], self.max_batch_tokens, self.max_batch_size):
            for r, result in zip(chunk, self._run([r.item for r in chunk])):
                if isinstance(result, str):
                    errors[r.index] = result
                    continue
                ids, score[r.index] = [int(i) for i in result[0]], result[1]
                out_ids[r.index] = ids
                output[r.index] = self.codec.decode(ids) if self.codec is not None else " ".join(map(str, ids))
        return with_columns(batch, {"ids": (out_ids, "ids"), "output": (output, "string"), "score": (score, "float64"),
                                    "error": (errors, "string")})


# -- Ray Data wiring -------------------------------------------------------------------------------
def map_g2p(dataset, model="attention", *, actors: int | None = None, threads: int = 1,
            batch_size: int | None = DEFAULT_BATCH_ROWS, retries: int = DEFAULT_RETRIES, **options):
    """``dataset`` with :class:`G2PPredictor`'s columns added, by ``actors`` actors of ``threads``
    CPUs each (default: as many as the cluster's CPUs hold); a batch whose actor dies is run again
    on a restarted actor, up to ``retries`` times; ``options``: the predictor's."""
    return _map(dataset, G2PPredictor, dict(model=model, threads=threads, **options), actors, threads, batch_size,
                retries)


def map_translate(dataset, model, *, actors: int | None = None, threads: int = 1,
                  batch_size: int | None = DEFAULT_BATCH_ROWS, retries: int = DEFAULT_RETRIES, **options):
    """``dataset`` with :class:`TranslatePredictor`'s columns added (see :func:`map_g2p`)."""
    return _map(dataset, TranslatePredictor, dict(model=str(model), threads=threads, **options), actors, threads,
                batch_size, retries)


def default_actors(threads: int) -> int:
    """As many actors of ``threads`` CPUs as the connected cluster's CPUs hold (at least one)."""
    ray = import_ray()
    return max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)


def _map(dataset, cls, kwargs, actors, threads, batch_size, retries):
    ray = import_ray()
    if actors is None:
        actors = default_actors(threads)
    _check_options(actors=actors, threads=threads)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be a non-negative integer, got {retries!r}")
    # a dead actor is always restarted (max_restarts -1, Ray Data's default); its batch is retried a
    # bounded number of times (Ray Data's default is without limit: a batch that kills every actor
    # it runs on would then loop for ever instead of failing the job). Ray 2.60 has no named
    # parameter for this and warns that the remote-args form will go in Ray 2.64.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        return dataset.map_batches(cls, fn_constructor_kwargs=kwargs, compute=ray.data.ActorPoolStrategy(size=actors),
                                   num_cpus=threads, batch_size=batch_size, batch_format="pyarrow", max_restarts=-1,
                                   max_task_retries=retries)


# -- batches of any form ---------------------------------------------------------------------------
def column_names(batch) -> list:
    return list(batch.column_names) if hasattr(batch, "column_names") else list(batch.keys())


def column_values(batch, name: str) -> list:
    """Column ``name`` of a pyarrow Table, pandas DataFrame or dict of arrays, as Python values."""
    if name not in column_names(batch):
        raise KeyError(f"the batch has no column {name!r} (it has {', '.join(map(repr, column_names(batch)))})")
    if hasattr(batch, "column_names"):
        return batch.column(name).to_pylist()
    return [v.tolist() if hasattr(v, "tolist") else v for v in batch[name]]


def with_columns(batch, columns: dict):
    """``batch`` with ``columns`` (name -> (values, "string" | "float64" | "bool" | "ids")) set or added."""
    if hasattr(batch, "column_names"):
        import pyarrow as pa

        types = {"string": pa.string(), "float64": pa.float64(), "bool": pa.bool_(), "ids": pa.list_(pa.int64())}
        for name, (values, kind) in columns.items():
            array = pa.array(values, type=types[kind])
            names = batch.column_names
            batch = batch.set_column(names.index(name), name, array) if name in names else batch.append_column(name, array)
        return batch
    np = _np()
    out = dict(batch) if isinstance(batch, dict) else batch.copy()
    for name, (values, kind) in columns.items():
        if kind == "ids":
            array = np.empty(len(values), dtype=object)
            array[:] = [np.asarray(v, dtype=np.int64) for v in values]
        else:
            array = np.asarray(values, dtype={"float64": np.float64, "bool": bool}.get(kind, object))
        out[name] = array
    return out


def _given_errors(batch, n: int) -> list:
    if "error" not in column_names(batch):
        return [""] * n
    return ["" if e is None else str(e) for e in column_values(batch, "error")]


# -- helpers ---------------------------------------------------------------------------------------
def _np():
    import numpy

    return numpy


def _check_options(**values) -> None:
    for name, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _set_threads(threads: int | None) -> None:
    if threads is not None:  # None: leave the process's setting (a driver checking the options)
        from seqjit import set_num_threads

        set_num_threads(threads)


def _crash_hook(batch) -> None:
    """Test hook: when the environment names a file (``SEQJIT_RAY_CRASH_FILE``) holding a row index
    and this batch's ``index`` column holds that row, the process takes the file away (a rename:
    only one process can, so it fires once) and exits at once, as a killed worker does."""
    path = os.environ.get(CRASH_FILE_ENV)
    if not path or not os.path.isfile(path) or "index" not in column_names(batch):
        return
    try:
        target = int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return
    if target in column_values(batch, "index"):
        try:
            os.rename(path, path + ".fired")
        except OSError:
            return  # another process fired first
        os._exit(1)
