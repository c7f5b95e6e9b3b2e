"""The G2P tests compare seqjit with the PyTorch modules the bundled models were trained as; those
live outside the installed package (benchmarks/g2p/training/torch_models.py), so put that folder on
``sys.path`` (``import torch_models``)."""
import sys
from pathlib import Path

TRAINING = Path(__file__).resolve().parents[2] / "benchmarks" / "g2p" / "training"
if str(TRAINING) not in sys.path:
    sys.path.insert(0, str(TRAINING))
