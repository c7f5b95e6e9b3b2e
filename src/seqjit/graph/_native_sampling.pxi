# Native sampling for the replay VM (included by _native_vm.pyx): :func:`sample` runs a decode by
# sampling (or a few greedy steps, for streaming) the way :func:`greedy` runs greedy search, each
# row's token drawn by kernels/sampling/_native.pxi with the draw of (seed, source row, step) from
# kernels/sampling/native_philox.h: the stream the Python loop (seqjit.decoding.greedy) draws from.
# :func:`sample_rows` and :func:`philox_uniforms` run the same row sampler and draw on given arrays
# (for the kernel tests).
include "sampling/_native.pxi"


cdef int _check_rows(str name, cnp.ndarray a, int rows, int dtype) except -1:
    if a.ndim != 1 or a.shape[0] != rows or a.dtype.num != dtype or not a.flags.c_contiguous:
        raise ValueError(f"{name} must be a contiguous 1-d {np.dtype(np.int64 if dtype == cnp.NPY_INT64 else np.float64)} "
                         f"array of {rows} rows, got {a.dtype} {list((<object>a).shape)}")
    return 0


cdef int _check_sampling(int V, double temperature, Py_ssize_t topk, double topp) except -1:
    if not temperature > 0 or temperature == INFINITY:
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    if topk < 0:
        raise ValueError(f"topk must be >= 0, got {topk}")
    if not (0 < topp <= 1):
        raise ValueError(f"topp must be in (0, 1], got {topp}")
    return 0


def sample(Program step, Program writeback, cnp.ndarray logits, cnp.ndarray prev, cnp.ndarray stepv,
           cnp.ndarray ids, cnp.ndarray lengths, cnp.ndarray scores, cnp.ndarray banned,
           int eos, int min_length, int start, int nthreads, int stop_alive, cnp.ndarray sources,
           unsigned long long seed, double temperature, Py_ssize_t topk, double topp, int until=-1):
    """:func:`greedy` with the token of each row drawn as :func:`seqjit.decoding.processors.sample`
    draws it (``temperature``, ``topk``, ``topp``), from the draw of (``seed``, ``sources[b]``, t):
    ``sources`` [B] int64 is each row's index in the caller's batch. ``topk == 1`` takes the greedy
    token (the first maximum) instead. ``scores[b]`` (when not empty) gains the log-probability of
    each token under the processed scores (no temperature or filter), as the Python loop scores it.
    Runs steps ``start`` .. ``until - 1`` (``until`` -1: to the end) and returns the next step."""
    cdef int B = <int>logits.shape[0], V = <int>logits.shape[1], T = <int>ids.shape[1]
    if logits.ndim != 2 or logits.strides[1] != 4 or logits.dtype.num != cnp.NPY_FLOAT32:
        raise ValueError("logits must be float32 with contiguous rows")
    if ids.ndim != 2 or ids.shape[0] != B or ids.dtype.num != cnp.NPY_INT64 or not ids.flags.c_contiguous:
        raise ValueError(f"ids must be a contiguous int64 [{B}, T] array, got {ids.dtype} {list((<object>ids).shape)}")
    _check_rows("prev", prev, B, cnp.NPY_INT64)
    _check_rows("lengths", lengths, B, cnp.NPY_INT64)
    _check_rows("sources", sources, B, cnp.NPY_INT64)
    if scores.shape[0]:
        _check_rows("scores", scores, B, cnp.NPY_FLOAT64)
    if stepv.ndim != 0 or stepv.dtype.num != cnp.NPY_INT64:
        raise ValueError("stepv must be an int64 scalar array")
    _check_rows("banned", banned, banned.shape[0], cnp.NPY_INT64)
    if banned.shape[0] and (banned.min() < 0 or banned.max() >= V):
        raise ValueError(f"banned tokens must lie in [0, {V}), got {banned.min()} .. {banned.max()}")
    if not 0 <= eos < V:
        raise ValueError(f"eos must lie in [0, {V}), got {eos}")
    if B and sources.min() < 0:
        raise ValueError(f"sources must be >= 0, got {sources.min()}")
    if not 0 <= start <= T:
        raise ValueError(f"start must lie in [0, {T}], got {start}")
    _check_sampling(V, temperature, topk, topp)
    cdef int end = T if until < 0 or until > T else until
    cdef Py_ssize_t ld = logits.strides[0] // 4
    cdef float* lg = <float*>cnp.PyArray_DATA(logits)
    cdef int64_t* pv = <int64_t*>cnp.PyArray_DATA(prev)
    cdef int64_t* sv = <int64_t*>cnp.PyArray_DATA(stepv)
    cdef int64_t* out = <int64_t*>cnp.PyArray_DATA(ids)
    cdef int64_t* ln = <int64_t*>cnp.PyArray_DATA(lengths)
    cdef int64_t* src = <int64_t*>cnp.PyArray_DATA(sources)
    cdef double* sc = <double*>cnp.PyArray_DATA(scores) if scores.shape[0] else NULL
    cdef int64_t* bn = <int64_t*>cnp.PyArray_DATA(banned)
    cdef int nb = <int>banned.shape[0]
    cdef int t, b, v, alive, rc = 0, k, team
    cdef Py_ssize_t best
    cdef float* row
    cdef float top, x
    cdef double total
    cdef SjCand* cand = <SjCand*>malloc(max(V, 1) * sizeof(SjCand))
    cdef float* buf = <float*>malloc(max(V, 1) * sizeof(float))
    if cand == NULL or buf == NULL:
        free(cand)
        free(buf)
        raise MemoryError()
    with nogil:
        team = step._hold_team(nthreads)
        writeback.team_nt = step.team_nt
        for t in range(start, end):
            rc = step._run_held(nthreads, team)
            if rc:
                break
            alive = 0
            for b in range(B):
                if ln[b] > 0:
                    pv[b] = eos
                    continue
                row = lg + b * ld
                for k in range(nb):
                    row[bn[k]] = -INFINITY
                if t < min_length:
                    row[eos] = -INFINITY
                if topk == 1:
                    best, top = 0, row[0]
                    for v in range(V):  # first maximum; a NaN wins, as with numpy.argmax
                        x = row[v]
                        if x != x:
                            best = v
                            break
                        if x > top:
                            best, top = v, x
                else:
                    best = sj_sample_row(row, V, temperature, topk, topp, sj_philox_uniform(seed, src[b], t),
                                         cand, buf)
                if sc != NULL:  # log_softmax(row)[best] (processors.token_log_probs)
                    top = row[0]
                    for v in range(V):
                        if row[v] > top:
                            top = row[v]
                    total = 0
                    for v in range(V):
                        total += exp_f32(row[v] - top)
                    sc[b] += (row[best] - top) - log(total)
                out[b * T + t] = best
                pv[b] = best
                if best == eos or t + 1 == T:
                    ln[b] = t + 1
                else:
                    alive += 1
            sv[0] += 1
            if writeback.n:
                rc = writeback._run(nthreads)
                if rc:
                    break
            if alive == 0 or alive <= stop_alive:
                break
        writeback.team_nt = 1
        step._free_team(team)
    free(cand)
    free(buf)
    if rc:
        (step if step.err else writeback).raise_error()
    return sv[0]


def sample_rows(scores, double temperature, Py_ssize_t topk, double topp, unsigned long long seed, sources,
                long long step):
    """int64 [R]: the token :func:`sample` draws for each row of the processed ``scores`` [R, V]
    (float32) at ``step``, row r being source ``sources[r]``."""
    cdef cnp.ndarray s = np.ascontiguousarray(scores, dtype=np.float32)
    cdef cnp.ndarray rows = np.ascontiguousarray(sources, dtype=np.int64)
    if s.ndim != 2 or s.shape[1] < 1:
        raise ValueError(f"scores must be a float32 [R, V] array with V >= 1, got shape {list(np.shape(scores))}")
    cdef Py_ssize_t R = s.shape[0], V = s.shape[1], r
    _check_rows("sources", rows, R, cnp.NPY_INT64)
    if step < 0 or (R and rows.min() < 0):
        raise ValueError("sources and step must be >= 0")
    _check_sampling(V, temperature, topk, topp)
    cdef cnp.ndarray out = np.zeros(R, np.int64)
    cdef float* sp = <float*>cnp.PyArray_DATA(s)
    cdef int64_t* src = <int64_t*>cnp.PyArray_DATA(rows)
    cdef int64_t* op = <int64_t*>cnp.PyArray_DATA(out)
    cdef SjCand* cand = <SjCand*>malloc(V * sizeof(SjCand))
    cdef float* buf = <float*>malloc(V * sizeof(float))
    if cand == NULL or buf == NULL:
        free(cand)
        free(buf)
        raise MemoryError()
    with nogil:
        for r in range(R):
            op[r] = sj_sample_row(sp + r * V, V, temperature, topk, topp, sj_philox_uniform(seed, src[r], step),
                                  cand, buf)
    free(cand)
    free(buf)
    return out


def philox_uniforms(unsigned long long seed, sources, long long step):
    """float64 [R]: the draw of each source row in ``sources`` at ``step`` (native_philox.h)."""
    cdef cnp.ndarray rows = np.ascontiguousarray(sources, dtype=np.int64)
    cdef cnp.ndarray out = np.zeros(rows.shape[0], np.float64)
    cdef Py_ssize_t r
    for r in range(rows.shape[0]):
        (<double*>cnp.PyArray_DATA(out))[r] = sj_philox_uniform(seed, <uint64_t>(<int64_t*>cnp.PyArray_DATA(rows))[r],
                                                                <uint64_t>step)
    return out


def philox4x32(ctr, key, int rounds=10):
    """Philox4x32-``rounds`` of one counter (4 uint32) under ``key`` (2 uint32): a list of 4 ints."""
    cdef uint32_t c[4]
    cdef uint32_t kk[2]
    cdef uint32_t o[4]
    cdef int i
    for i in range(4):
        c[i] = <uint32_t>ctr[i]
    for i in range(2):
        kk[i] = <uint32_t>key[i]
    sj_philox4x32(c, kk, rounds, o)
    return [o[0], o[1], o[2], o[3]]
