# Native sampling of one row for the replay VM: ``include "sampling/_native.pxi"``.
#
# The C form of :func:`seqjit.decoding.processors.sample` for one row of processed scores (the banned
# tokens already -inf), with the draw ``u`` of kernels/sampling/philox.py: the same float64 steps in
# the same order, so the same token (a sum may round differently from NumPy's pairwise sums and SIMD
# exp by an ulp, which changes a token only when ``u`` falls within an ulp of a cumulative boundary).
#
# - ``x = (row - max(row)) / temperature`` (float64, as processors._tempered: the max shifted out
#   first, 0 when it is not finite);
# - top-k (``0 < k < V``): tokens scoring below the k-th largest are dropped (ties with it kept); the
#   k-th largest is found on the float32 row (division by a positive number keeps order and ties);
# - top-p (``topp < 1``): the kept tokens sorted best first (ties by index); a token is dropped when
#   the cumulative probability before it is at least ``topp`` (the first always kept); over a large
#   vocabulary only the tokens that can be in the nucleus are sorted;
# - the inverse CDF in vocabulary order: the first kept token whose cumulative probability reaches
#   ``u`` times the total (token 0 when that is 0, as counting ``cumulative < draw`` gives).
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport qsort
from libc.math cimport exp as c_exp

cdef extern from "sampling/native_philox.h" nogil:
    void sj_philox4x32(const uint32_t* ctr, const uint32_t* key, int rounds, uint32_t* out)
    double sj_philox_uniform(uint64_t seed, uint64_t row, uint64_t step)

cdef struct SjCand:
    double v
    Py_ssize_t j


cdef int _cand_by_value(const void* a, const void* b) noexcept nogil:
    """Best first, ties by index (numpy.argsort(-x, kind="stable"))."""
    cdef const SjCand* x = <const SjCand*>a
    cdef const SjCand* y = <const SjCand*>b
    if x.v > y.v:
        return -1
    if x.v < y.v:
        return 1
    return -1 if x.j < y.j else (1 if x.j > y.j else 0)


cdef int _cand_by_index(const void* a, const void* b) noexcept nogil:
    cdef const SjCand* x = <const SjCand*>a
    cdef const SjCand* y = <const SjCand*>b
    return -1 if x.j < y.j else (1 if x.j > y.j else 0)


DEF SJ_INSERT_MAX_K = 64
DEF SJ_NUCLEUS_SORT_MIN = 64  # top-p over more tokens than this sorts only those that can be in the nucleus


cdef float sj_kth_largest(const float* row, Py_ssize_t V, Py_ssize_t k, float* buf) noexcept nogil:
    """The k-th largest of ``row`` (1 <= k <= V, with multiplicity): ``numpy.partition(row, V - k)[V - k]``.
    ``buf``: V floats of scratch. A sorted list of the k best for small k, else a quickselect."""
    cdef Py_ssize_t n = 0, j, p, lo, hi, i, target
    cdef float x, pivot, tmp
    if k <= SJ_INSERT_MAX_K:
        for j in range(V):
            x = row[j]
            if n == k and not x > buf[k - 1]:
                continue
            p = n if n < k else k - 1
            while p > 0 and x > buf[p - 1]:
                buf[p] = buf[p - 1]
                p -= 1
            buf[p] = x
            if n < k:
                n += 1
        return buf[k - 1]
    memcpy(buf, row, V * sizeof(float))
    lo, hi, target = 0, V - 1, V - k
    while lo < hi:
        pivot = buf[lo + (hi - lo) // 2]
        i, j = lo, hi
        while i <= j:
            while buf[i] < pivot:
                i += 1
            while buf[j] > pivot:
                j -= 1
            if i <= j:
                tmp = buf[i]
                buf[i] = buf[j]
                buf[j] = tmp
                i += 1
                j -= 1
        if target <= j:
            hi = j
        elif target >= i:
            lo = i
        else:
            break
    return buf[target]


cdef inline double _row_max(const SjCand* c, Py_ssize_t n) noexcept nogil:
    """The largest value, 0 when it is not finite (processors._shifted_lse)."""
    cdef double m = -INFINITY
    cdef Py_ssize_t i
    for i in range(n):
        if c[i].v > m:
            m = c[i].v
    return m if (m > -INFINITY and m < INFINITY) else 0.0


cdef Py_ssize_t sj_sample_row(const float* row, Py_ssize_t V, double temperature, Py_ssize_t k, double topp,
                              double u, SjCand* cand, float* buf) noexcept nogil:
    """The token of one row (see the comment at the top); ``cand``: V SjCand, ``buf``: V floats of scratch."""
    cdef Py_ssize_t n = 0, i, j, w
    cdef float kth, top = -INFINITY
    cdef double m, s, lse, p, cum, draw, cut, shift
    # processors._tempered: the row shifted by its max (0 when that is not finite), then divided
    for j in range(V):
        if row[j] > top:
            top = row[j]
    shift = top if (top != INFINITY and top != -INFINITY) else 0
    if 0 < k < V:
        kth = sj_kth_largest(row, V, k, buf)
        for j in range(V):
            if row[j] >= kth:
                cand[n].v = (<double>row[j] - shift) / temperature
                cand[n].j = j
                n += 1
    else:
        for j in range(V):
            cand[j].v = (<double>row[j] - shift) / temperature
            cand[j].j = j
        n = V
    if topp < 1.0:
        m = _row_max(cand, n)
        s = 0
        for i in range(n):
            s += c_exp(cand[i].v - m)
        lse = log(s)
        if n > SJ_NUCLEUS_SORT_MIN and topp < 1.0 - 1e-6:
            # tokens of probability below (1 - topp) / (2 n) hold less than (1 - topp) / 2 in all, so
            # the tokens above it hold more than topp and the nucleus ends among them: only they are
            # sorted (the rest is dropped by top-p anyway)
            cut = m + lse + log((1.0 - topp) / (2.0 * n))
            w = 0
            for i in range(n):
                if cand[i].v >= cut:
                    cand[w] = cand[i]
                    w += 1
            n = w
        qsort(cand, n, sizeof(SjCand), _cand_by_value)
        cum = 0
        w = 0
        for i in range(n):
            p = c_exp((cand[i].v - m) - lse)
            cum = cum + p
            if i == 0 or not (cum - p >= topp):
                cand[w] = cand[i]
                w += 1
        n = w
        qsort(cand, n, sizeof(SjCand), _cand_by_index)
    # the kept tokens' softmax and its inverse CDF, in vocabulary order
    m = _row_max(cand, n)
    s = 0
    for i in range(n):
        s += c_exp(cand[i].v - m)
    lse = log(s)
    cum = 0
    for i in range(n):
        cand[i].v = c_exp((cand[i].v - m) - lse)
        cum = cum + cand[i].v
    draw = u * cum
    if not draw > 0:
        return 0
    cum = 0
    for i in range(n):
        cum = cum + cand[i].v
        if cum >= draw:
            return cand[i].j
    return cand[n - 1].j
