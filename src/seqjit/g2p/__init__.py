"""Grapheme-to-phoneme with the bundled models (one per architecture), trained on the CMU dictionary.

:class:`G2P` runs a model, a :class:`Lexicon` first when given one (:mod:`seqjit.g2p.lexicon`);
:meth:`G2P.read_text` reads sentences (:mod:`seqjit.g2p.text`); :mod:`seqjit.g2p.data` holds the
dictionary split, :mod:`seqjit.g2p.evaluate` the test-set error rates. The (PyTorch) training
script is not installed: benchmarks/g2p/training/.
"""
from seqjit.g2p.lexicon import Lexicon
from seqjit.g2p.predictor import BUNDLED, DEFAULT_MODEL, G2P, Pronunciation

__all__ = ["G2P", "Pronunciation", "Lexicon", "BUNDLED", "DEFAULT_MODEL"]
