"""Peer attention engines for :func:`seqjit.demos.attention_kernel.run_engine` (``"attention_peers:torch_sdpa"``):
they live here, outside the package, because the installed seqjit never imports torch."""
import os


def torch_sdpa():
    """(callable(q, k, v, causal) -> array, label): torch's scaled_dot_product_attention at
    ``SEQJIT_DEMO_THREADS`` threads."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(int(os.environ.get("SEQJIT_DEMO_THREADS", "1")))

    def run(q, k, v, causal):
        t = [torch.from_numpy(x) for x in (q, k, v)]
        return F.scaled_dot_product_attention(*t, is_causal=causal).numpy()

    return run, "torch SDPA"
