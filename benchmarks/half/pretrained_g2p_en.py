"""A real pretrained model in 16 bits: g2p-en 2.1's GRU seq2seq (``checkpoint20.npz``, trained by its
author on CMUdict, shipped inside the ``g2p_en`` wheel), run by seqjit in float32, float16 and
bfloat16 over the bundled G2P data's test words; the share of words whose greedy phonemes are
identical to float32 (issue 39 asks >= 99.5 %), and float32 against g2p-en's own NumPy decoder on the
first words (the conversion is right). Only the npz is read: g2p_en is not imported (it needs nltk).

    pip download g2p_en==2.1.0 --no-deps -d /tmp/w && unzip -o /tmp/w/g2p_en-*.whl -d /tmp/w
    PYTHONPATH=src python3 benchmarks/half/pretrained_g2p_en.py --checkpoint /tmp/w/g2p_en/checkpoint20.npz
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

import seqjit

GRAPHEMES = ["<pad>", "<unk>", "</s>"] + list("abcdefghijklmnopqrstuvwxyz")
PAD, UNK, END, START, EOS = 0, 1, 2, 2, 3  # source ids (</s> = 2); target <s> = 2, </s> = 3
MAX_PHONEMES = 20  # g2p-en's own decoding limit


def load(checkpoint) -> seqjit.models.base.Seq2SeqModel:
    """The g2p-en GRU as a seqjit rnn_seq2seq (its encoder's last state starts the decoder)."""
    v = np.load(checkpoint)
    names = {"enc_emb": "encoder.embedding.weight", "dec_emb": "decoder.embedding.weight",
             "fc_w": "decoder.out.weight", "fc_b": "decoder.out.bias"}
    for side in ("enc", "dec"):
        full = "encoder" if side == "enc" else "decoder"
        for part in ("w_ih", "w_hh", "b_ih", "b_hh"):
            kind, mat = part.split("_")
            names[f"{side}_{part}"] = f"{full}.rnn.{'weight' if kind == 'w' else 'bias'}_{mat}_l0"
    state = {names[k]: v[k].astype(np.float32) for k in v.files}
    return seqjit.from_torch(state, arch="rnn_seq2seq", pad_id=PAD, decoder_start_id=START, eos_id=EOS,
                             suppress_pad_token=False)


def reference(checkpoint, word: str) -> list:
    """g2p-en's own decoder (g2p_en/g2p.py ``predict``), restated in NumPy: greedy, 20 steps at most."""
    v = {k: np.asarray(x, np.float32) for k, x in np.load(checkpoint).items()}

    def cell(x, h, p):
        gi, gh = x @ v[f"{p}_w_ih"].T + v[f"{p}_b_ih"], h @ v[f"{p}_w_hh"].T + v[f"{p}_b_hh"]
        H = h.shape[-1]
        r = 1 / (1 + np.exp(-(gi[:, :H] + gh[:, :H])))
        z = 1 / (1 + np.exp(-(gi[:, H:2 * H] + gh[:, H:2 * H])))
        n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        return (1 - z) * n + z * h

    h = np.zeros((1, v["enc_w_hh"].shape[1]), np.float32)
    for i in [GRAPHEMES.index(c) if c in GRAPHEMES else UNK for c in word] + [END]:
        h = cell(v["enc_emb"][[i]], h, "enc")
    out, token = [], START
    for _ in range(MAX_PHONEMES):
        h = cell(v["dec_emb"][[token]], h, "dec")
        token = int((h @ v["fc_w"].T + v["fc_b"]).argmax())
        if token == EOS:
            break
        out.append(token)
    return out


def sources(words) -> list:
    return [[GRAPHEMES.index(c) if c in GRAPHEMES else UNK for c in w] + [END] for w in words]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    spec = importlib.util.find_spec("g2p_en")
    default = Path(spec.origin).with_name("checkpoint20.npz") if spec and spec.origin else None
    p.add_argument("--checkpoint", type=Path, default=default, required=default is None)
    p.add_argument("--check", type=int, default=300, help="words checked against g2p-en's own decoder")
    args = p.parse_args(argv)
    from seqjit.g2p.data import load_split

    words = [w for w, _ in load_split("test") if w.isalpha() and w.islower()]
    fp32 = load(args.checkpoint)
    src = sources(words)

    def ids(model):
        return [r.ids[0][:-1] if r.ids[0][-1:] == [EOS] else r.ids[0]
                for r in model.generate(src, max_length=MAX_PHONEMES + 1)]

    want = ids(fp32)
    agree = sum(want[i][:MAX_PHONEMES] == reference(args.checkpoint, w) for i, w in enumerate(words[:args.check]))
    print(f"g2p-en checkpoint, {len(words)} test words; seqjit float32 equals g2p-en's decoder on {agree} of "
          f"{min(args.check, len(words))}")
    for fmt in ("float16", "bfloat16"):
        half = seqjit.quantize(fp32, fmt)
        got = ids(half)
        same = sum(a == b for a, b in zip(want, got))
        print(f"{fmt}: {same} of {len(words)} words ({same / len(words):.2%}) identical to float32 "
              f"(16-bit: {', '.join(n for n, w in half.weights.items() if w.dtype == np.uint16)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
