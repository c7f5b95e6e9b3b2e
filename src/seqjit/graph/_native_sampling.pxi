# Native sampling for the replay VM (included by _native_vm.pyx): :func:`sample` runs a decode by
# sampling (or a few greedy steps, for streaming) the way :func:`greedy` runs greedy search, each
# row's token drawn by kernels/sampling/_native.pxi with the draw of (seed, source row, step) from
# kernels/sampling/native_philox.h: the stream the Python loop (seqjit.decoding.greedy) draws from.
# :class:`Stepper` runs one step per call (for streaming). :func:`sample_rows` and
# :func:`philox_uniforms` run the same row sampler and draw on given arrays (for the kernel tests).
include "sampling/_native.pxi"
from libc.stdint cimport INT64_MAX


cdef int _check_rows(str name, cnp.ndarray a, int rows, int dtype) except -1:
    if a.ndim != 1 or a.shape[0] != rows or a.dtype.num != dtype or not a.flags.c_contiguous:
        raise ValueError(f"{name} must be a contiguous 1-d {np.dtype(np.int64 if dtype == cnp.NPY_INT64 else np.float64)} "
                         f"array of {rows} rows, got {a.dtype} {list((<object>a).shape)}")
    return 0


cdef bint _outside(cnp.ndarray a, int64_t lo, int64_t hi):
    """Whether a value of the contiguous int64 ``a`` lies outside [lo, hi) (a C loop: numpy's
    reductions cost microseconds per call, a batch-1 decode's whole budget for Python)."""
    cdef int64_t* p = <int64_t*>cnp.PyArray_DATA(a)
    cdef Py_ssize_t i
    for i in range(a.shape[0]):
        if p[i] < lo or p[i] >= hi:
            return True
    return False


cdef int _check_sampling(int V, double temperature, Py_ssize_t topk, double topp) except -1:
    if not temperature > 0 or temperature == INFINITY:
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    if topk < 0:
        raise ValueError(f"topk must be >= 0, got {topk}")
    if not (0 < topp <= 1):
        raise ValueError(f"topp must be in (0, 1], got {topp}")
    return 0


cdef struct SjChoice:
    # how a row's token is chosen (see sample): the banned tokens, the end token and min_length, the
    # sampling filter, the seed
    int64_t* banned
    int nb, eos, min_length
    double temperature, topp
    Py_ssize_t topk
    unsigned long long seed


cdef Py_ssize_t _choose(float* row, int V, int t, int64_t source, const SjChoice* o, SjCand* cand, float* buf,
                        double* logp) noexcept nogil:
    """Row ``row``'s token at step ``t`` (its banned tokens set to -inf first), or -1 when the row
    holds NaN (the caller raises NonFiniteLogits), -2 when it is -inf everywhere after the bans
    (NothingGenerable); a row holding +inf reads it as probability one,
    shared by its +inf entries (processors._certain). ``*logp`` (when not NULL) gains the token's
    log-probability under the processed scores (processors.token_log_probs)."""
    cdef Py_ssize_t best, v
    cdef int k
    cdef float top, x
    cdef double lse
    top = -INFINITY
    for v in range(V):
        x = row[v]
        if x != x:
            return -1
        if x > top:
            top = x
    if top == INFINITY:
        for v in range(V):
            row[v] = 0 if row[v] == INFINITY else -INFINITY
    for k in range(o.nb):
        row[o.banned[k]] = -INFINITY
    if t < o.min_length:
        row[o.eos] = -INFINITY
    if o.topk == 1:
        best, top = 0, row[0]
        for v in range(V):  # the first maximum, as numpy.argmax
            if row[v] > top:
                best, top = v, row[v]
        if top == -INFINITY:
            return -2
    else:
        top = -INFINITY
        for v in range(V):
            if row[v] > top:
                top = row[v]
        if top == -INFINITY:
            return -2
        best = sj_sample_row(row, V, o.temperature, o.topk, o.topp, sj_philox_uniform(o.seed, source, t), cand, buf)
    if logp != NULL:  # the row's normaliser, compiled per instruction set (linear/_native.pxi)
        lse = sj_lse_f32(row, V, &top)
        logp[0] += (row[best] - top) - lse
    return best


cdef int _check_choice(SjChoice* o, int V, cnp.ndarray banned, int eos, int min_length, double temperature,
                       Py_ssize_t topk, double topp, unsigned long long seed) except -1:
    _check_rows("banned", banned, banned.shape[0], cnp.NPY_INT64)
    if _outside(banned, 0, V):
        raise ValueError(f"banned tokens must lie in [0, {V}), got {banned.min()} .. {banned.max()}")
    if not 0 <= eos < V:
        raise ValueError(f"eos must lie in [0, {V}), got {eos}")
    _check_sampling(V, temperature, topk, topp)
    o.banned = <int64_t*>cnp.PyArray_DATA(banned)
    o.nb, o.eos, o.min_length = <int>banned.shape[0], eos, min_length
    o.temperature, o.topk, o.topp, o.seed = temperature, topk, topp, seed
    return 0


cdef int _check_logits(cnp.ndarray logits, cnp.ndarray prev, cnp.ndarray stepv) except -1:
    if logits.ndim != 2 or logits.strides[1] != 4 or logits.dtype.num != cnp.NPY_FLOAT32:
        raise ValueError("logits must be float32 with contiguous rows")
    _check_rows("prev", prev, <int>logits.shape[0], cnp.NPY_INT64)
    if stepv.ndim != 0 or stepv.dtype.num != cnp.NPY_INT64:
        raise ValueError("stepv must be an int64 scalar array")
    return 0


def sample(Program step, Program writeback, cnp.ndarray logits, cnp.ndarray prev, cnp.ndarray stepv,
           cnp.ndarray ids, cnp.ndarray lengths, cnp.ndarray scores, cnp.ndarray banned,
           int eos, int min_length, int start, int nthreads, int stop_alive, cnp.ndarray sources,
           unsigned long long seed, double temperature, Py_ssize_t topk, double topp, cnp.ndarray forced=None):
    """:func:`greedy` (``forced``: as there) with the token of each row drawn as :func:`seqjit.decoding.processors.sample`
    draws it (``temperature``, ``topk``, ``topp``), from the draw of (``seed``, ``sources[b]``, t):
    ``sources`` [B] int64 is each row's index in the caller's batch. ``topk == 1`` takes the greedy
    token (the first maximum) instead. ``scores[b]`` (when not empty) gains the log-probability of
    each token under the processed scores (no temperature or filter), as the Python loop scores it."""
    _check_logits(logits, prev, stepv)
    cdef int B = <int>logits.shape[0], V = <int>logits.shape[1], T = <int>ids.shape[1]
    if ids.ndim != 2 or ids.shape[0] != B or ids.dtype.num != cnp.NPY_INT64 or not ids.flags.c_contiguous:
        raise ValueError(f"ids must be a contiguous int64 [{B}, T] array, got {ids.dtype} {list((<object>ids).shape)}")
    _check_rows("lengths", lengths, B, cnp.NPY_INT64)
    _check_rows("sources", sources, B, cnp.NPY_INT64)
    if scores.shape[0]:
        _check_rows("scores", scores, B, cnp.NPY_FLOAT64)
    if _outside(sources, 0, INT64_MAX):
        raise ValueError(f"sources must be >= 0, got {sources.min()}")
    if not 0 <= start <= T:
        raise ValueError(f"start must lie in [0, {T}], got {start}")
    cdef SjChoice o
    _check_choice(&o, V, banned, eos, min_length, temperature, topk, topp, seed)
    cdef Py_ssize_t ld = logits.strides[0] // 4
    cdef float* lg = <float*>cnp.PyArray_DATA(logits)
    cdef int64_t* pv = <int64_t*>cnp.PyArray_DATA(prev)
    cdef int64_t* sv = <int64_t*>cnp.PyArray_DATA(stepv)
    cdef int64_t* out = <int64_t*>cnp.PyArray_DATA(ids)
    cdef int64_t* ln = <int64_t*>cnp.PyArray_DATA(lengths)
    cdef int64_t* src = <int64_t*>cnp.PyArray_DATA(sources)
    cdef double* sc = <double*>cnp.PyArray_DATA(scores) if scores.shape[0] else NULL
    cdef int t, b, alive, rc = 0, team, nan_row = 0
    cdef Py_ssize_t best
    cdef int fw = _forced_width(forced, B, V)
    cdef int64_t* fp = <int64_t*>cnp.PyArray_DATA(forced) if fw else NULL
    cdef SjCand* cand = <SjCand*>malloc(max(V, 1) * sizeof(SjCand))
    cdef float* buf = <float*>malloc(max(V, 1) * sizeof(float))
    if cand == NULL or buf == NULL:
        free(cand)
        free(buf)
        raise MemoryError()
    with nogil:
        team = step._hold_team(nthreads)
        writeback.team_nt = step.team_nt
        for t in range(start, T):
            rc = step._run_held(nthreads, team)
            if rc:
                break
            alive = 0
            for b in range(B):
                if ln[b] > 0:
                    pv[b] = eos
                    continue
                if t < fw and fp[b * fw + t] >= 0:  # a prefix token
                    if sj_argmax_row(lg + b * ld, V) < 0:
                        rc, nan_row = ERR_NAN, b
                        break
                    best = fp[b * fw + t]
                    out[b * T + t] = best
                    pv[b] = best
                    if t + 1 == T:
                        ln[b] = t + 1
                    else:
                        alive += 1
                    continue
                best = _choose(lg + b * ld, V, t, src[b], &o, cand, buf, (sc + b) if sc != NULL else NULL)
                if best < 0:
                    rc, nan_row = (ERR_NAN if best == -1 else ERR_NONE_LEFT), b
                    break
                out[b * T + t] = best
                pv[b] = best
                if best == eos or t + 1 == T:
                    ln[b] = t + 1
                else:
                    alive += 1
            if rc:
                break
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
    if rc == ERR_NAN or rc == ERR_NONE_LEFT:
        raise_nan(t, nan_row, rc)
    if rc:
        (step if step.err else writeback).raise_error()
    return sv[0]


cdef class Stepper:
    """One source decoded a token per call (for streaming): :meth:`next` runs the step program, chooses
    the token as :func:`sample` does (greedy with ``topk == 1``), feeds it back and runs
    ``writeback``. The arguments are :func:`sample`'s, checked once; ``logits`` has one row.
    ``forced`` (None or int64 [1, P]): the token at step t < P is ``forced[0, t]`` where that is not -1
    (a ``target_prefix``, as in :func:`greedy`: log-probability 0, never the last unless at
    ``max_length``)."""

    cdef Program step, writeback
    cdef cnp.ndarray logits, prev, stepv, banned, forced
    cdef int64_t* fp
    cdef int fw
    cdef SjChoice o
    cdef SjCand* cand
    cdef float* buf
    cdef int V, nthreads, T
    cdef int64_t source
    cdef readonly int t
    cdef readonly bint done

    def __cinit__(self):
        self.cand, self.buf = NULL, NULL

    def __init__(self, Program step, Program writeback, cnp.ndarray logits, cnp.ndarray prev, cnp.ndarray stepv,
                 cnp.ndarray banned, int eos, int min_length, int max_length, int nthreads, long long source,
                 unsigned long long seed, double temperature, Py_ssize_t topk, double topp, cnp.ndarray forced=None):
        _check_logits(logits, prev, stepv)
        if logits.shape[0] != 1:
            raise ValueError(f"logits must have one row (one source), got {logits.shape[0]}")
        if source < 0 or max_length < 1:
            raise ValueError(f"source must be >= 0 and max_length >= 1, got {source} and {max_length}")
        self.V = <int>logits.shape[1]
        self.fw = _forced_width(forced, 1, self.V)
        self.forced = forced
        self.fp = <int64_t*>cnp.PyArray_DATA(forced) if self.fw else NULL
        _check_choice(&self.o, self.V, banned, eos, min_length, temperature, topk, topp, seed)
        self.step, self.writeback, self.logits, self.prev, self.stepv, self.banned = \
            step, writeback, logits, prev, stepv, banned
        self.nthreads, self.T, self.source, self.t, self.done = nthreads, max_length, source, 0, False
        self.cand = <SjCand*>malloc(self.V * sizeof(SjCand))
        self.buf = <float*>malloc(self.V * sizeof(float))
        if self.cand == NULL or self.buf == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.cand)
        free(self.buf)

    def next(self):
        """``(token, log-probability, is_last)`` of the next step; StopIteration after the last."""
        cdef int rc = 0, team, t = self.t
        cdef Py_ssize_t best = 0
        cdef double logp = 0
        cdef bint prefixed = t < self.fw and self.fp[t] >= 0
        if self.done:
            raise StopIteration
        with nogil:
            team = self.step._hold_team(self.nthreads)
            self.writeback.team_nt = self.step.team_nt
            rc = self.step._run_held(self.nthreads, team)
            if rc == 0 and prefixed:  # a prefix token: a NaN step is still an error
                best = self.fp[t]
                if sj_argmax_row(<float*>cnp.PyArray_DATA(self.logits), self.V) < 0:
                    rc = ERR_NAN
            elif rc == 0:
                best = _choose(<float*>cnp.PyArray_DATA(self.logits), self.V, t, self.source, &self.o,
                               self.cand, self.buf, &logp)
                if best < 0:
                    rc = ERR_NAN if best == -1 else ERR_NONE_LEFT
            if rc == 0:
                (<int64_t*>cnp.PyArray_DATA(self.prev))[0] = best
                (<int64_t*>cnp.PyArray_DATA(self.stepv))[0] += 1
                if self.writeback.n:
                    rc = self.writeback._run(self.nthreads)
            self.writeback.team_nt = 1
            self.step._free_team(team)
        if rc:
            self.done = True
            if rc == ERR_NAN or rc == ERR_NONE_LEFT:
                raise_nan(t, 0, rc)
            (self.step if self.step.err else self.writeback).raise_error()
        self.t = t + 1
        self.done = (best == self.o.eos and not prefixed) or self.t >= self.T
        return best, logp, self.done


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


def log_sum_exp_rows(cnp.ndarray x):
    """(log(sum exp(row - max)) as float64 [R], max as float32 [R]) of each row of ``x`` (float32
    [R, V], C-contiguous): the scores' normaliser of the greedy and sampling loops, for tests."""
    if x.ndim != 2 or x.dtype.num != cnp.NPY_FLOAT32 or not x.flags.c_contiguous:
        raise ValueError("x must be a C-contiguous float32 [R, V] array")
    cdef Py_ssize_t r, R = x.shape[0], V = x.shape[1]
    lse, top = np.empty(R, np.float64), np.empty(R, np.float32)
    cdef double[::1] lv = lse
    cdef float[::1] tv = top
    cdef float* p = <float*>cnp.PyArray_DATA(x)
    for r in range(R):
        lv[r] = sj_lse_f32(p + r * V, V, &tv[r])
    return lse, top


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
