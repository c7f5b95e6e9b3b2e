# Beam search to the end in one native call: ``include "_native_beam.pxi"`` in _native_vm.pyx.
# The step kernels (log-softmax, score processors, top-2K, bookkeeping) are kernels/beam/_native.pxi;
# this file is the loop around them and the decoder-state reorder. Driven by
# seqjit.decoding.native_beam, which says what each array holds.

include "beam/_native.pxi"

from libc.math cimport pow

#: the widest beam the native step keeps (seqjit.decoding.native_beam: wider beams run the Python loop)
MAX_BEAM = SJ_BEAM_MAXK


cdef void _reorder_rows(char* base, Py_ssize_t row_bytes, Py_ssize_t chunks, Py_ssize_t chunk_bytes,
                        Py_ssize_t used_bytes, const int64_t* parent, int K, Py_ssize_t first_row,
                        char* scratch) noexcept nogil:
    """Rows ``first_row + k`` (k < K) of one state array take the content of rows
    ``first_row + parent[k]``: only the first ``used_bytes`` of each of a row's ``chunks`` chunks
    (``chunk_bytes`` apart: a KV cache's heads, of which the first t + 1 positions are in use), only
    for the rows that move; gathered into ``scratch`` first, so a row read after it was written is
    never wrong."""
    cdef int k, n = 0
    cdef Py_ssize_t c
    for k in range(K):
        if parent[k] != k:
            for c in range(chunks):
                memcpy(scratch + (n * chunks + c) * used_bytes,
                       base + (first_row + parent[k]) * row_bytes + c * chunk_bytes, used_bytes)
            n += 1
    n = 0
    for k in range(K):
        if parent[k] != k:
            for c in range(chunks):
                memcpy(base + (first_row + k) * row_bytes + c * chunk_bytes,
                       scratch + (n * chunks + c) * used_bytes, used_bytes)
            n += 1


def log_softmax_rows(cnp.ndarray x):
    """Each row of ``x`` (float32 [R, V], C-contiguous) to its log-softmax in place, by the beam
    step's kernel (for tests); returns the indices of the rows holding NaN, left untouched."""
    if x.ndim != 2 or x.dtype.num != cnp.NPY_FLOAT32 or not x.flags.c_contiguous:
        raise ValueError("x must be a C-contiguous float32 [R, V] array")
    cdef float* p = <float*>cnp.PyArray_DATA(x)
    cdef Py_ssize_t r, R = x.shape[0], V = x.shape[1]
    return [r for r in range(R) if sj_log_softmax_row(p + r * V, V)]


cdef struct _BeamSources:
    # one step's per-source work (log-softmax, processors, top-2K, advance) over sources [0, mid) as
    # part 0 and [mid, S) as part 1, so a run holding the team of two splits it (each part its own
    # candidate and history buffers and its own counts)
    int S, K, V, mid, t, max_len, eos, min_length, start_id, ngram, nb, cur
    Py_ssize_t ld, T, plane
    float* lg
    int64_t* runt
    int64_t* fint
    float* rsc
    float* fsc
    int64_t* fln
    int32_t* fdn
    int32_t* act
    int64_t* bn
    int64_t* pv
    int64_t* parent
    int64_t forced
    int64_t* pfx  # per source, its target_prefix [S, pw] (-1 past it), or NULL
    Py_ssize_t pw
    float repetition_penalty, divisor
    float* cand_s[2]
    int64_t* cand_i[2]
    float* hist[2]
    int n_improvable[2]
    int all_end[2]
    int rc[2]
    int nan_row[2]


cdef struct _Reorder:
    # one step's state reorder over sources [0, mid) as part 0 and [mid, S) as part 1 (each part
    # its own half of the scratch), so a run holding the team of two splits the copies
    int S, K, mid, n_state, t
    char** bases
    Py_ssize_t* row_bytes
    int64_t* lay
    int32_t* act
    int64_t* parent
    char* scr[2]


cdef void _reorder_sources(void* ctx, int part) noexcept nogil:
    """Part ``part`` of a step's reorder (_Reorder): the state rows of each active source follow
    their beams (positions 0 .. t - 1 of a time axis are in use)."""
    cdef _Reorder* j = <_Reorder*>ctx
    cdef int i, s, s0 = 0 if part == 0 else j.mid, s1 = j.mid if part == 0 else j.S
    cdef Py_ssize_t used
    for i in range(j.n_state):
        used = j.lay[i * 3 + 2] * j.t if j.lay[i * 3 + 2] else j.lay[i * 3 + 1]
        for s in range(s0, s1):
            if j.act[s]:
                _reorder_rows(j.bases[i], j.row_bytes[i], j.lay[i * 3], j.lay[i * 3 + 1], used,
                              j.parent + s * j.K, j.K, <Py_ssize_t>s * j.K, j.scr[part])


cdef void _beam_sources(void* ctx, int part) noexcept nogil:
    """Part ``part`` of a step's per-source work (_BeamSources): the sources of one part touch only
    their own rows of every array, so the two parts may run at once."""
    cdef _BeamSources* j = <_BeamSources*>ctx
    cdef int s, k, b, status, K = j.K
    cdef int64_t forced
    cdef Py_ssize_t T = j.T, plane = j.plane, ld = j.ld
    cdef int s0 = 0 if part == 0 else j.mid, s1 = j.mid if part == 0 else j.S
    j.n_improvable[part], j.all_end[part], j.rc[part], j.nan_row[part] = 0, 1, 0, 0
    for s in range(s0, s1):
        for k in range(K):
            j.parent[s * K + k] = k
        if not j.act[s]:
            continue
        forced = j.forced
        if j.t < j.pw and j.pfx[s * j.pw + j.t] >= 0:  # a prefix token: forced last, over the rule's
            forced = j.pfx[s * j.pw + j.t]
        for b in range(s * K, s * K + K):
            if sj_log_softmax_row(j.lg + b * ld, j.V):
                j.rc[part], j.nan_row[part] = ERR_NAN, b
                return
            sj_process_row(j.lg + b * ld, j.V, j.runt + j.cur * plane + b * T, j.t, j.start_id,
                           j.repetition_penalty, j.ngram, j.eos, j.min_length, j.bn, j.nb, forced, j.hist[part])
        if sj_beam_topk_source(j.lg + s * K * ld, ld, K, j.V, j.rsc + s * K, 2 * K, j.cand_s[part],
                               j.cand_i[part]) == 0 or j.cand_s[part][0] == -INFINITY:
            # every continuation -inf: an error unless the source has finished hypotheses to return
            for k in range(K):
                if j.fdn[s * K + k]:
                    break
            else:
                j.rc[part], j.nan_row[part] = ERR_NONE_LEFT, s
                return
        status = sj_beam_advance_source(
            j.cand_s[part], j.cand_i[part], j.V, j.t, j.max_len, j.eos, j.divisor, K,
            j.runt + j.cur * plane + s * K * T, j.runt + (1 - j.cur) * plane + s * K * T, j.rsc + s * K,
            j.fint + j.cur * plane + s * K * T, j.fint + (1 - j.cur) * plane + s * K * T,
            j.fln + s * K, j.fsc + s * K, j.fdn + s * K, j.parent + s * K, j.pv + s * K)
        if not (status & 2):
            j.all_end[part] = 0
        if status & 1:
            j.n_improvable[part] += 1
        else:  # frozen: its finished hypotheses in both buffers, whichever ends up current
            j.act[s] = 0
            memcpy(j.fint + j.cur * plane + s * K * T, j.fint + (1 - j.cur) * plane + s * K * T,
                   K * T * sizeof(int64_t))


def beam(Program step, Program writeback, cnp.ndarray logits, cnp.ndarray prev, cnp.ndarray stepv,
         tuple state, cnp.ndarray layout, cnp.ndarray run_tokens, cnp.ndarray run_scores,
         cnp.ndarray fin_tokens, cnp.ndarray fin_len, cnp.ndarray fin_scores, cnp.ndarray fin_done,
         cnp.ndarray active, cnp.ndarray banned, int cur, int t0, int max_len, int eos, int min_length,
         int start_id, double repetition_penalty, int ngram, double length_penalty, cnp.ndarray scratch,
         int nthreads, int stop_active, int64_t forced_bos=-1, int64_t forced_eos=-1, cnp.ndarray prefix=None):
    """Beam search over ``S = active.shape[0]`` sources of ``K`` beams (state rows ``s * K + k``),
    from step ``t0`` until every source is done or at most ``stop_active`` sources are still active.

    ``step`` reads ``prev`` [S*K] and ``stepv`` [] and writes ``logits`` [S*K, V]; ``writeback``
    copies the recurrent state back. ``forced_bos`` / ``forced_eos`` (-1: none): the token step 0 /
    step max_len - 1 must take (the end token when both apply, as processors.apply_forced);
    ``prefix`` (None or int64 [S, P], -1 past a source's prefix): source s's token at step t < P, over
    those rules (a ``target_prefix``; it must hold no end token). ``state``: the decoder state arrays (C-contiguous, batch first)
    that move with their beam; ``layout`` int64 [len(state), 3]: chunks per row, chunk bytes, bytes
    per time step (0: no time axis, the whole chunk is used). ``run_tokens``/``fin_tokens`` int64
    [2, S, K, max_len] (buffer ``cur`` holds the histories), ``run_scores``/``fin_scores`` float32
    [S, K], ``fin_len`` int64 [S, K], ``fin_done``/``active`` int32. A source that can no longer
    improve is frozen (its rows still run; their results are ignored).

    Returns ``(t, cur, finished)``: the next step, the history buffer in use, and whether decoding is
    over (max_len reached, every candidate ended, or no source can improve)."""
    cdef int S = <int>active.shape[0], K = <int>run_scores.shape[1], V = <int>logits.shape[1]
    cdef Py_ssize_t ld = logits.strides[0] // 4, T = max_len
    cdef float* lg = <float*>cnp.PyArray_DATA(logits)
    cdef int64_t* pv = <int64_t*>cnp.PyArray_DATA(prev)
    cdef int64_t* sv = <int64_t*>cnp.PyArray_DATA(stepv)
    cdef int64_t* runt = <int64_t*>cnp.PyArray_DATA(run_tokens)
    cdef int64_t* fint = <int64_t*>cnp.PyArray_DATA(fin_tokens)
    cdef float* rsc = <float*>cnp.PyArray_DATA(run_scores)
    cdef float* fsc = <float*>cnp.PyArray_DATA(fin_scores)
    cdef int64_t* fln = <int64_t*>cnp.PyArray_DATA(fin_len)
    cdef int32_t* fdn = <int32_t*>cnp.PyArray_DATA(fin_done)
    cdef int32_t* act = <int32_t*>cnp.PyArray_DATA(active)
    cdef int64_t* bn = <int64_t*>cnp.PyArray_DATA(banned)
    cdef int nb = <int>banned.shape[0]
    cdef int64_t* lay = <int64_t*>cnp.PyArray_DATA(layout)
    cdef char* scr = <char*>cnp.PyArray_DATA(scratch)
    cdef int n_state = <int>len(state), i
    cdef Py_ssize_t plane = <Py_ssize_t>S * K * T
    if S == 0 or K < 1 or K > SJ_BEAM_MAXK or 2 * K > <Py_ssize_t>K * V:
        raise ValueError(f"beam: {S} sources of {K} beams over {V} tokens is outside what the native step takes")
    if logits.shape[0] != S * K or logits.strides[1] != 4 or logits.dtype.num != cnp.NPY_FLOAT32:
        raise ValueError("logits must be float32 [S*K, V] with contiguous rows")
    if layout.shape[0] != n_state or layout.shape[1] != 3:
        raise ValueError("layout must be int64 [len(state), 3]")
    cdef Py_ssize_t pw = _forced_width(prefix, S, V)
    cdef Py_ssize_t half = K * max([(<cnp.ndarray>a).strides[0] for a in state] + [8])
    if scratch.dtype.num != cnp.NPY_UINT8 or scratch.ndim != 1 or scratch.shape[0] < 2 * half:
        raise ValueError(f"scratch must be uint8 [>= {2 * half}]: two halves of K rows of the widest state array")
    cdef char** bases = <char**>malloc((n_state + 1) * sizeof(char*))
    cdef Py_ssize_t* row_bytes = <Py_ssize_t*>malloc((n_state + 1) * sizeof(Py_ssize_t))
    cdef float* cand_s = <float*>malloc(2 * 2 * K * sizeof(float))
    cdef int64_t* cand_i = <int64_t*>malloc(2 * 2 * K * sizeof(int64_t))
    cdef int64_t* parent = <int64_t*>malloc(<Py_ssize_t>S * K * sizeof(int64_t))
    cdef float* hist = <float*>malloc(2 * (T + 2) * sizeof(float))
    if not (bases and row_bytes and cand_s and cand_i and parent and hist):
        free(bases); free(row_bytes); free(cand_s); free(cand_i); free(parent); free(hist)
        raise MemoryError()
    for i in range(n_state):
        arr = <cnp.ndarray>state[i]
        bases[i] = <char*>cnp.PyArray_DATA(arr)
        row_bytes[i] = arr.strides[0]
    cdef int t = t0, s, rc = 0, team, n_improvable, all_end, finished = 0, nan_row = 0, part
    cdef _BeamSources job
    job.S, job.K, job.V, job.mid, job.max_len, job.eos, job.min_length = S, K, V, (S + 1) // 2, max_len, eos, min_length
    job.start_id, job.ngram, job.nb, job.ld, job.T, job.plane = start_id, ngram, nb, ld, T, plane
    job.lg, job.runt, job.fint, job.rsc, job.fsc, job.fln, job.fdn = lg, runt, fint, rsc, fsc, fln, fdn
    job.act, job.bn, job.pv, job.parent, job.repetition_penalty = act, bn, pv, parent, <float>repetition_penalty
    job.pw = pw
    job.pfx = <int64_t*>cnp.PyArray_DATA(prefix) if pw else NULL
    cdef _Reorder reorder
    reorder.S, reorder.K, reorder.mid, reorder.n_state = S, K, (S + 1) // 2, n_state
    reorder.bases, reorder.row_bytes, reorder.lay, reorder.act, reorder.parent = bases, row_bytes, lay, act, parent
    reorder.scr[0], reorder.scr[1] = scr, scr + half
    for part in range(2):
        job.cand_s[part], job.cand_i[part], job.hist[part] = cand_s + part * 2 * K, cand_i + part * 2 * K, hist + part * (T + 2)
    with nogil:
        team = step._hold_team(nthreads)
        writeback.team_nt = step.team_nt
        while t < max_len:
            rc = step._run_held(nthreads, team)
            if rc:
                break
            job.t, job.cur, job.divisor = t, cur, <float>pow(<double>(t + 1), length_penalty)
            job.forced = forced_eos if (t == max_len - 1 and forced_eos >= 0) else (forced_bos if t == 0 else -1)
            if step.team_nt == TEAM and S > 1:  # the run holds the team: the sources in two halves
                sj_team_run(_beam_sources, &job)
            else:
                _beam_sources(&job, 0)
                _beam_sources(&job, 1)
            n_improvable = job.n_improvable[0] + job.n_improvable[1]
            all_end = job.all_end[0] and job.all_end[1]
            for part in range(2):  # the first NaN row in source order, as one thread would stop at
                if job.rc[part] and not rc:
                    rc, nan_row = job.rc[part], job.nan_row[part]
            if rc:
                break
            cur = 1 - cur
            t += 1
            if t >= max_len or all_end or n_improvable == 0:
                finished = 1
                break
            sv[0] += 1
            if writeback.n:
                rc = writeback._run(nthreads)
                if rc:
                    break
            # the state rows follow their beams, the sources in two halves when the run holds the team
            reorder.t = t
            if step.team_nt == TEAM and S > 1:
                sj_team_run(_reorder_sources, &reorder)
            else:
                _reorder_sources(&reorder, 0)
                _reorder_sources(&reorder, 1)
            if n_improvable <= stop_active:
                break
        writeback.team_nt = 1
        step._free_team(team)
    free(bases); free(row_bytes); free(cand_s); free(cand_i); free(parent); free(hist)
    if rc == ERR_NAN or rc == ERR_NONE_LEFT:
        raise_nan(t, nan_row, rc)
    if rc:
        (step if step.err else writeback).raise_error()
    return t, cur, bool(finished)
