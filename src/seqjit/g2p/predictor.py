"""Run a G2P model: words in, ARPAbet phonemes out (with attention weights when asked).

    from seqjit.g2p import G2P
    g2p = G2P("attention")                  # a bundled model: "gru", "attention", "transformer"
    g2p.predict(["seqjit"])[0].phonemes      # ['S', 'EH1', 'K', 'JH', 'IH0', 'T']
    G2P("path/to/model_dir")                # any G2P model directory (config, weights, g2p.json)
    G2P(lexicon="cmudict").predict(["read"])[0].hypotheses   # dictionary first: both of its readings
    G2P(lexicon="cmudict").read_text("I read 3 books.")      # sentences: seqjit.g2p.text
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from seqjit.errors import ModelFormatError
from seqjit.g2p.vocab import Vocab

MODELS_DIR = Path(__file__).parent / "models"
BUNDLED = ("gru", "attention", "transformer")
TITLES = {"gru": "GRU seq2seq", "attention": "Bahdanau attention", "transformer": "Transformer"}
DEFAULT_MODEL = "attention"  # the lowest error rates of the three (README)
#: the bundled models run on the Cython kernels by default: nothing to compile at start-up (Numba's
#: cold first calls added 15-30 s to a fresh install's first run), and at these sizes (hidden 128-256,
#: vocabularies under 80) decoding is per-call overhead, where the two backends measure the same
DEFAULT_BACKEND = "cython"
#: the most phonemes the default length limit (2 x letters + 4) asks for: seqjit's own default
#: ``max_length``; more only when ``max_length`` is given
DEFAULT_LENGTH_CAP = 256


def model_dir(model) -> Path:
    """The directory of a bundled model name or a path."""
    if isinstance(model, str) and model in BUNDLED:
        directory = MODELS_DIR / model
        if not (directory / "config.json").is_file():
            raise ModelFormatError(f"the bundled model {model!r} is missing from {directory} (a broken install?)")
        return directory
    directory = Path(model)
    if not directory.is_dir():
        raise ModelFormatError(f"{model!r} is neither a bundled G2P model ({', '.join(BUNDLED)}) nor a model directory")
    return directory


@dataclass
class Pronunciation:
    """One word's result: ``phonemes``; ``unknown``: characters read as ``<unk>``; ``score``: the sum
    of the phonemes' log-probabilities (beam search: divided by length ** length_penalty);
    ``attention`` ``[len(phonemes), len(word)]`` (attention models, when asked: for the Transformer
    the last decoder layer's cross-attention averaged over heads); ``spelled``: the letters the model
    read (lower-cased, accents folded); ``hypotheses``: the n-best ``(phonemes, score)``, best first;
    ``truncated``: decoding stopped at ``max_length`` before the end token (phonemes cut short);
    ``lengths``: each hypothesis's tokens, the end token included (the length of a beam score);
    ``source``: ``"model"``, or ``"lexicon"`` for a word the lexicon holds (then ``hypotheses`` are
    all its listed pronunciations, first listed first, and the scores NaN: no model ran)."""

    word: str
    phonemes: list
    unknown: list
    score: float
    attention: np.ndarray | None = field(default=None, repr=False)  # a repr shows the result, not the matrix
    spelled: str = ""
    hypotheses: list = field(default_factory=list)
    truncated: bool = False
    lengths: list = field(default_factory=list, repr=False)  # each hypothesis's output tokens, end token included
    source: str = "model"  # or "lexicon"


class G2P:
    """A G2P model. ``fold_accents`` (default True): a letter the model does not know is read
    without its accents (``café`` as ``cafe``; :func:`seqjit.g2p.vocab.without_accents`).
    ``lexicon``: a dictionary consulted before the model (:mod:`seqjit.g2p.lexicon`): ``"cmudict"``,
    a lexicon file, or a :class:`~seqjit.g2p.lexicon.Lexicon`; None (default): the model answers
    every word (what the test-split error rates measure)."""

    def __init__(self, model=DEFAULT_MODEL, *, backend=DEFAULT_BACKEND, fold_accents: bool = True, lexicon=None):
        import seqjit

        from seqjit.g2p.lexicon import Lexicon

        self.lexicon = Lexicon.resolve(lexicon)
        self.directory = model_dir(model)
        self.name = model if isinstance(model, str) and model in BUNDLED else self.directory.name
        self.fold_accents = bool(fold_accents)
        self.vocab = Vocab.load(self.directory)
        self.model = seqjit.load(self.directory, backend=backend)
        if (self.model.source_vocab_size, self.model.target_vocab_size) != (self.vocab.src_size, self.vocab.tgt_size):
            raise ModelFormatError(f"{self.directory}: g2p.json has {self.vocab.src_size} source and {self.vocab.tgt_size} "
                                   f"target symbols, the model {self.model.source_vocab_size} and {self.model.target_vocab_size}")

    @property
    def arch(self) -> str:
        return self.model.arch

    @property
    def has_attention(self) -> bool:
        return self.arch != "rnn_seq2seq"

    @property
    def max_positions(self) -> int | None:
        """The most letters a word may have and the most phonemes (end token included) decoded for
        it (the Transformer's position table); None when the model has no such limit."""
        return getattr(self.model.config, "max_positions", None)

    def spell(self, word: str) -> tuple[list, list, str]:
        """``(source ids, characters read as <unk>, letters read)`` of ``word``; ValueError when it
        is empty or longer than :attr:`max_positions`."""
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"a word must be a non-empty string, got {word!r}")
        ids, unknown, spelled = self.vocab.spell(word.strip(), fold_accents=self.fold_accents)
        if self.max_positions is not None and len(ids) > self.max_positions:
            raise ValueError(f"the word has {len(ids)} letters, more than the model's {self.max_positions} positions "
                             "(max_positions)")
        return ids, unknown, spelled

    def read_text(self, text: str, **predict_options) -> list:
        """The sentences of ``text`` (:class:`seqjit.g2p.text.Sentence`): cut into words, numbers read
        aloud, each word pronounced (the lexicon first, when there is one); ``Sentence.line()`` gives
        its phonemes with word boundaries. ``predict_options``: those of :meth:`predict`."""
        from seqjit.g2p.text import read_text

        return read_text(self, text, **predict_options)

    def predict(self, words, *, beam_size: int = 1, max_length: int | None = None, return_attention: bool = False,
                max_batch_size: int = 256, num_hypotheses: int = 1) -> list:
        """:class:`Pronunciation` of each word (a string of at least one character, at most
        :attr:`max_positions` letters). ``max_length``: most phonemes per word, end token included
        (default 2 x the longest word's letters + 4, at most :data:`DEFAULT_LENGTH_CAP` and
        :attr:`max_positions`: a model without positions would otherwise run 60,000 steps for a
        30,000-letter word);
        ``num_hypotheses``: the n-best kept in :attr:`Pronunciation.hypotheses` (<= ``beam_size``)."""
        if isinstance(words, str):
            raise TypeError("words must be a list of strings, got one string (wrap it in a list)")
        listed, encoded = {}, {}  # index -> the lexicon's pronunciations / the model's input
        for i, word in enumerate(words):
            prons = self.lexicon.lookup(word) if self.lexicon is not None and isinstance(word, str) else None
            if prons is not None:
                listed[i] = prons
                continue
            try:
                encoded[i] = self.spell(word)
            except ValueError as exc:
                raise ValueError(f"words[{i}]: {exc}") from None
        modelled = iter(self._decode([words[i] for i in encoded], list(encoded.values()), beam_size=beam_size,
                                     max_length=max_length, return_attention=return_attention,
                                     max_batch_size=max_batch_size, num_hypotheses=num_hypotheses))
        return [_listed(words[i], listed[i]) if i in listed else next(modelled) for i in range(len(words))]

    def _decode(self, words, encoded, *, beam_size, max_length, return_attention, max_batch_size, num_hypotheses):
        """The model's :class:`Pronunciation` of ``words``, spelled as ``encoded`` (:meth:`spell`)."""
        if not encoded:
            return []
        limit = max_length
        if limit is None:
            limit = min(2 * max(len(ids) for ids, _, _ in encoded) + 4, DEFAULT_LENGTH_CAP)
            if self.max_positions is not None:
                limit = min(limit, self.max_positions)
        elif self.max_positions is not None and limit > self.max_positions:
            raise ValueError(f"max_length {limit} exceeds the model's {self.max_positions} positions (max_positions)")
        attention = bool(return_attention) and self.has_attention
        results = self.model.generate([ids for ids, _, _ in encoded], beam_size=beam_size, max_length=limit,
                                      num_hypotheses=num_hypotheses, return_attention=attention, return_scores=True,
                                      max_batch_size=max_batch_size)
        out = []
        for word, (ids, unknown, spelled), result in zip(words, encoded, results):
            phonemes = self.vocab.decode(result.ids[0])
            weights = None
            if attention:
                weights = np.asarray(result.attention[0])
                if weights.ndim == 4:  # transformer: [steps, layers, heads, S]
                    weights = weights[:, -1].mean(axis=1)
                weights = weights[: len(phonemes), : len(ids)]
            scores = result.scores or [float("nan")] * len(result.ids)
            hypotheses = [(self.vocab.decode(h), float(sc)) for h, sc in zip(result.ids, scores)]
            # a hypothesis that ended with the end token has at most max_length - 1 tokens
            out.append(Pronunciation(word.strip(), phonemes, unknown, hypotheses[0][1], weights, spelled, hypotheses,
                                     truncated=len(result.ids[0]) >= limit,
                                     lengths=[len(h) if len(h) >= limit else len(h) + 1 for h in result.ids]))
        return out


def _listed(word: str, prons: list) -> Pronunciation:
    """The result of a word the lexicon holds: its pronunciations, first listed first (no model score)."""
    nan = float("nan")
    return Pronunciation(word.strip(), prons[0], [], nan, spelled=word.strip().lower(),
                         hypotheses=[(p, nan) for p in prons], lengths=[len(p) + 1 for p in prons], source="lexicon")
