# Native beam-search step for the replay VM and the "cython" backend of this family:
# ``include "beam/_native.pxi"`` after ``_vecmath.pxi`` (exp_f32). The semantics are those of
# kernels/beam/reference.py and seqjit/decoding/beam.py (transformers' beam search), per source:
#
# - sj_log_softmax_row: a row of logits becomes its log-softmax in place, computed as
#   seqjit.decoding.processors.log_softmax does (max shifted out; +inf entries share probability
#   one); a row holding NaN is reported (the caller raises NonFiniteLogits);
# - sj_process_row: the score processors in transformers' order (repetition penalty, no-repeat
#   n-grams, minimum length, suppressed tokens, a forced token), over the history [start token] +
#   tokens[:t];
# - sj_beam_topk_source: the k2 best of logp[b, v] + run_scores[b] over a source's K rows, best first,
#   ties to the lower flat index b * V + v, NaN last (numpy's stable argsort of the negated totals);
# - sj_beam_advance_source: one step's bookkeeping from those candidates (running beams, finished
#   hypotheses, the early-stopping test); returns the status improvable + 2 * (every candidate ends).
from libc.math cimport log, logf, INFINITY, NAN
from libc.stdint cimport int64_t, int32_t

DEF SJ_BEAM_MAXK = 128   # the widest beam the native step keeps (wider beams run the Python loop)
DEF SJ_NEG = -1.0e9      # beam.py's _NEG: the score of a beam that is not there


cdef inline bint sj_beam_better(float a, int64_t ia, float b, int64_t ib) noexcept nogil:
    """Whether (a, ia) ranks before (b, ib): larger first, NaN last, ties to the lower index."""
    if a != a:
        return b != b and ia < ib
    if b != b:
        return True
    return a > b or (a == b and ia < ib)


cdef extern from "activations/native_act.h" nogil:
    int sj_log_softmax_f32(float* s, Py_ssize_t n)


cdef inline int sj_log_softmax_row(float* row, Py_ssize_t V) noexcept nogil:
    """The row's log-softmax in place; returns 1 (row untouched) when it holds NaN. A row holding
    +inf reads it as probability one, shared evenly by its +inf entries (processors._certain).
    Compiled per instruction set (activations/native_act_body.h: log_softmax_f32): the max, the
    sum of exp(x - max) in float64 over 8 lanes and the shift vectorise (Marian beam 4, 64 rows of
    58101 logits a step: the scalar loop here took as long as the decoder step)."""
    return sj_log_softmax_f32(row, V)


cdef void sj_process_row(float* row, Py_ssize_t V, const int64_t* tokens, int t, int64_t start_id,
                         float repetition_penalty, int ngram, int eos, int min_length,
                         const int64_t* banned, int n_banned, int64_t forced, float* scratch) noexcept nogil:
    """The score processors on one row of log-probabilities; ``tokens[:t]`` the row's tokens so far
    (after ``start_id``); ``forced`` (-1: none) the token this step must take (processors.apply_forced:
    every other score -inf, its own 0); ``scratch`` holds t + 1 floats."""
    cdef int j, s, L = t + 1, n = ngram, q
    cdef int64_t tok, first
    cdef float val
    cdef bint same
    if repetition_penalty != 1:
        # every history entry reads the original score first, so a repeated token changes once
        for j in range(L):
            tok = start_id if j == 0 else tokens[j - 1]
            if 0 <= tok < V:
                val = row[tok]
                scratch[j] = val * repetition_penalty if val < 0 else val / repetition_penalty
        for j in range(L):
            tok = start_id if j == 0 else tokens[j - 1]
            if 0 <= tok < V:
                row[tok] = scratch[j]
    if n == 1:
        for j in range(L):
            tok = start_id if j == 0 else tokens[j - 1]
            if 0 <= tok < V:
                row[tok] = -INFINITY
    elif n > 1 and L + 1 >= n:
        # h[s .. s+n-2] == h[L-n+1 .. L-1] bans h[s+n-1], for s in [0, L-n]
        for s in range(L - n + 1):
            same = True
            for q in range(n - 1):
                first = start_id if s + q == 0 else tokens[s + q - 1]
                if first != tokens[L - n + q]:  # L - n + 1 + q >= 1: a generated token
                    same = False
                    break
            if same:
                tok = tokens[s + n - 2]  # h[s + n - 1]
                if 0 <= tok < V:
                    row[tok] = -INFINITY
    if t < min_length and 0 <= eos < V:
        row[eos] = -INFINITY
    for j in range(n_banned):
        if 0 <= banned[j] < V:
            row[banned[j]] = -INFINITY
    if 0 <= forced < V:
        for j in range(V):
            row[j] = -INFINITY
        row[forced] = 0


cdef int sj_beam_topk_source(const float* logp, Py_ssize_t ld, int K, Py_ssize_t V, const float* run_scores,
                             int k2, float* out_scores, int64_t* out_index) noexcept nogil:
    """The ``k2`` best candidates of one source (rows ``logp + b * ld``, b < K); returns how many
    there were (min(k2, K * V))."""
    cdef int cnt = 0, p, b
    cdef Py_ssize_t v, v0, v1, BLOCK = 64
    cdef int64_t j
    cdef float x, thr, rs
    cdef const float* row
    cdef bint hit
    for b in range(K):
        row = logp + b * ld
        rs = run_scores[b]
        v0 = 0
        while v0 < V:
            v1 = v0 + BLOCK if v0 + BLOCK < V else V
            if cnt == k2:
                # a block is skipped whole when no total in it beats the current k2-th best
                thr = out_scores[k2 - 1]
                if thr == thr:
                    hit = False
                    for v in range(v0, v1):
                        hit |= (row[v] + rs) > thr
                    if not hit:
                        v0 = v1
                        continue
            for v in range(v0, v1):
                x = row[v] + rs
                j = b * V + v
                if cnt == k2 and not sj_beam_better(x, j, out_scores[k2 - 1], out_index[k2 - 1]):
                    continue
                p = cnt if cnt < k2 else k2 - 1
                while p > 0 and sj_beam_better(x, j, out_scores[p - 1], out_index[p - 1]):
                    out_scores[p] = out_scores[p - 1]
                    out_index[p] = out_index[p - 1]
                    p -= 1
                out_scores[p] = x
                out_index[p] = j
                if cnt < k2:
                    cnt += 1
            v0 = v1
    return cnt


cdef int sj_beam_advance_source(const float* cand_scores, const int64_t* cand_index, Py_ssize_t vocab, int t,
                                int max_len, int64_t eos, float divisor, int K,
                                const int64_t* run_in, int64_t* run_out, float* run_scores,
                                const int64_t* fin_in, int64_t* fin_out, int64_t* fin_len, float* fin_scores,
                                int32_t* fin_done, int64_t* parent, int64_t* tokens) noexcept nogil:
    """One step's bookkeeping of one source (see kernels/beam/reference.py: beam_advance): token
    histories ``[K, max_len]`` read from ``*_in`` and written to ``*_out`` (positions <= t);
    ``parent[k]`` the beam (0..K-1) new beam k continues, ``tokens[k]`` its new token. Returns
    improvable + 2 * (every candidate ends)."""
    cdef int K2 = 2 * K, c, k, m, best, p, all_end = 1, improvable = 0
    cdef int64_t cbeam[2 * SJ_BEAM_MAXK]
    cdef int64_t ctok[2 * SJ_BEAM_MAXK]
    cdef int ends[2 * SJ_BEAM_MAXK]
    cdef float masked[2 * SJ_BEAM_MAXK]
    cdef int taken[3 * SJ_BEAM_MAXK]
    cdef float merged[3 * SJ_BEAM_MAXK]
    cdef int pick[SJ_BEAM_MAXK]
    cdef int keep[SJ_BEAM_MAXK]
    cdef int64_t old_len[SJ_BEAM_MAXK]
    cdef int32_t old_done[SJ_BEAM_MAXK]
    cdef float x, best_running, worst, w
    cdef float neg = <float>SJ_NEG
    for c in range(K2):
        cbeam[c] = cand_index[c] // vocab
        ctok[c] = cand_index[c] - cbeam[c] * vocab
        ends[c] = ctok[c] == eos or t + 1 >= max_len
        if not ends[c]:
            all_end = 0
        masked[c] = cand_scores[c] + neg if ends[c] else cand_scores[c]
    # running beams: the K best candidates that do not end (ending ones pushed down by NEG)
    for c in range(K2):
        taken[c] = 0
    for k in range(K):
        best = -1
        for c in range(K2):
            if not taken[c] and (best < 0 or sj_beam_better(masked[c], c, masked[best], best)):
                best = c
        taken[best] = 1
        pick[k] = best
    # finished hypotheses: the K best of the kept ones and the ending candidates among the first K
    for k in range(K):
        merged[k] = fin_scores[k]
        old_len[k] = fin_len[k]
        old_done[k] = fin_done[k]
    for c in range(K2):
        x = cand_scores[c] / divisor
        if not ends[c] or c >= K:
            x = x + neg
        merged[K + c] = x
    for m in range(K + K2):
        taken[m] = 0
    for k in range(K):
        best = -1
        for m in range(K + K2):
            if not taken[m] and (best < 0 or sj_beam_better(merged[m], m, merged[best], best)):
                best = m
        taken[best] = 1
        keep[k] = best
    for k in range(K):
        m = keep[k]
        fin_scores[k] = merged[m]
        if m < K:
            fin_len[k] = old_len[m]
            fin_done[k] = old_done[m]
            for p in range(t + 1):
                fin_out[k * max_len + p] = fin_in[m * max_len + p]
        else:
            c = m - K
            fin_len[k] = t + 1
            fin_done[k] = 1 if (ends[c] and c < K) else 0
            for p in range(t):
                fin_out[k * max_len + p] = run_in[cbeam[c] * max_len + p]
            fin_out[k * max_len + t] = ctok[c]
    for k in range(K):
        c = pick[k]
        for p in range(t):
            run_out[k * max_len + p] = run_in[cbeam[c] * max_len + p]
        run_out[k * max_len + t] = ctok[c]
        run_scores[k] = masked[c]
        parent[k] = cbeam[c]
        tokens[k] = ctok[c]
    best_running = run_scores[0] / divisor
    worst = fin_scores[0]
    for k in range(1, K):
        if fin_scores[k] < worst:
            worst = fin_scores[k]
    for k in range(K):
        w = worst if fin_done[k] else neg
        if best_running > w:
            improvable = 1
    return improvable + 2 * all_end
