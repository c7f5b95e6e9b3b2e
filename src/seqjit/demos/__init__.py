"""Demonstrations of seqjit's kernels run by the command line (``seqjit demo --kernel``:
:mod:`seqjit.demos.attention_kernel`). The bundled G2P models' demo is :mod:`seqjit.g2p.demo`."""
