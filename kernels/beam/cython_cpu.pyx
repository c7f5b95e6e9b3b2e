# cython: language_level=3
"""Cython CPU beam-search step: the C functions of ``_native.pxi`` that the native beam loop runs
(seqjit.graph._native_vm.beam), callable on arrays with the signatures of :mod:`.reference`, so they
are tested against it kernel by kernel.
"""
import numpy as np

include "../_vecmath.pxi"
include "_native.pxi"


MAX_K = SJ_BEAM_MAXK


def _checked(name, arr, dtype, shape):
    if not isinstance(arr, np.ndarray) or arr.dtype != dtype or tuple(arr.shape) != tuple(shape) \
            or not arr.flags.c_contiguous:
        got = f"{arr.dtype} {list(arr.shape)}" if isinstance(arr, np.ndarray) else type(arr).__name__
        raise ValueError(f"{name} must be a C-contiguous {np.dtype(dtype).name} array of shape {list(shape)}, got {got}")
    return arr


def _shape2(arr):
    """The shape of a 2-d array, or (0, 0): _checked then names the argument."""
    shape = np.shape(arr)
    return shape if len(shape) == 2 else (0, 0)


def beam_topk(logp, run_scores, active, k2, out_scores=None, out_index=None):
    """The ``k2`` best candidates of each active source (see :mod:`.reference`)."""
    run_scores = _checked("run_scores", run_scores, np.float32, _shape2(run_scores))
    n_src, K = run_scores.shape
    logp = _checked("logp", logp, np.float32, (n_src * K, _shape2(logp)[1]))
    active = np.asarray(active)
    if active.shape != (n_src,):
        raise ValueError(f"active must have shape [{n_src}], got {list(active.shape)}")
    vocab = logp.shape[1]
    if not 1 <= k2 <= K * vocab or k2 > 2 * SJ_BEAM_MAXK:
        raise ValueError(f"k2 must lie in [1, {min(K * vocab, 2 * SJ_BEAM_MAXK)}], got {k2}")
    out_scores = np.zeros((n_src, k2), np.float32) if out_scores is None else \
        _checked("out_scores", out_scores, np.float32, (n_src, k2))
    out_index = np.zeros((n_src, k2), np.int64) if out_index is None else \
        _checked("out_index", out_index, np.int64, (n_src, k2))
    cdef float[:, ::1] lp = logp
    cdef float[:, ::1] rs = run_scores
    cdef float[:, ::1] os = out_scores
    cdef int64_t[:, ::1] oi = out_index
    cdef int s
    for s in range(n_src):
        if active[s]:
            if vocab:
                sj_beam_topk_source(&lp[s * K, 0], vocab, K, vocab, &rs[s, 0], k2, &os[s, 0], &oi[s, 0])
    return out_scores, out_index


def beam_advance(cand_scores, cand_index, vocab, t, max_len, eos_id, divisor, run_tokens_in, run_tokens_out,
                 run_scores, fin_tokens_in, fin_tokens_out, fin_len, fin_scores, fin_done, active, status,
                 src_rows, tokens):
    """One step's bookkeeping per active source (see :mod:`.reference`); arrays updated in place."""
    run_scores = _checked("run_scores", run_scores, np.float32, _shape2(run_scores))
    n_src, K = run_scores.shape
    if not 1 <= K <= SJ_BEAM_MAXK:
        raise ValueError(f"beam width must lie in [1, {SJ_BEAM_MAXK}], got {K}")
    if not 0 <= t < max_len:
        raise ValueError(f"t must lie in [0, {max_len}), got {t}")
    _checked("cand_scores", cand_scores, np.float32, (n_src, 2 * K))
    _checked("cand_index", cand_index, np.int64, (n_src, 2 * K))
    if cand_index.size and (cand_index.min() < 0 or cand_index.max() >= K * vocab):
        raise ValueError(f"cand_index must lie in [0, {K * vocab})")
    for name, arr in (("run_tokens_in", run_tokens_in), ("run_tokens_out", run_tokens_out),
                      ("fin_tokens_in", fin_tokens_in), ("fin_tokens_out", fin_tokens_out)):
        _checked(name, arr, np.int64, (n_src, K, max_len))
    _checked("fin_len", fin_len, np.int64, (n_src, K))
    _checked("fin_scores", fin_scores, np.float32, (n_src, K))
    _checked("fin_done", fin_done, np.int32, (n_src, K))
    _checked("active", active, np.int32, (n_src,))
    _checked("status", status, np.int64, (n_src,))
    _checked("src_rows", src_rows, np.int64, (n_src * K,))
    _checked("tokens", tokens, np.int64, (n_src * K,))
    cdef float[:, ::1] cs = cand_scores, rsc = run_scores, fsc = fin_scores
    cdef int64_t[:, ::1] ci = cand_index, fln = fin_len
    cdef int64_t[:, :, ::1] ri = run_tokens_in, ro = run_tokens_out, fi = fin_tokens_in, fo = fin_tokens_out
    cdef int32_t[:, ::1] fd = fin_done
    cdef int32_t[::1] act = active
    cdef int64_t[::1] st = status, rows = src_rows, tok = tokens
    cdef int64_t parent[SJ_BEAM_MAXK]
    cdef int s, k, code
    ro[...] = ri
    fo[...] = fi
    for s in range(n_src):
        st[s] = 0
        for k in range(K):
            rows[s * K + k] = s * K + k
        if not act[s]:
            continue
        code = sj_beam_advance_source(&cs[s, 0], &ci[s, 0], vocab, t, max_len, eos_id, <float>divisor, K,
                                      &ri[s, 0, 0], &ro[s, 0, 0], &rsc[s, 0], &fi[s, 0, 0], &fo[s, 0, 0],
                                      &fln[s, 0], &fsc[s, 0], &fd[s, 0], parent, &tok[s * K])
        st[s] = code
        act[s] = code & 1
        for k in range(K):
            rows[s * K + k] = s * K + parent[k]
