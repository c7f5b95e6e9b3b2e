# Native attention for the replay VM (decode and short encoder shapes): ``include "attention/_native.pxi"``.
# One (batch, head, query) row at a time: scores over the visible keys (the prefix rule of spec.py),
# softmax, weighted sum of v. Strides in elements for the batch, head and length axes; the last
# axis is contiguous. ``scores`` is scratch of at least Lk floats.
from libc.stdint cimport int64_t


cdef inline float _dot_lanes(const float* a, const float* b, int n) noexcept nogil:
    cdef float acc[8]
    cdef int j, k
    cdef int nv = n - n % 8
    cdef float s = 0
    for j in range(8):
        acc[j] = 0
    for k in range(0, nv, 8):
        for j in range(8):
            acc[j] += a[k + j] * b[k + j]
    for j in range(8):
        s += acc[j]
    for k in range(nv, n):
        s += a[k] * b[k]
    return s


cdef void native_attention(const float* q, Py_ssize_t qb, Py_ssize_t qh, Py_ssize_t ql,
                           const float* k, Py_ssize_t kb, Py_ssize_t kh, Py_ssize_t kl,
                           const float* v, Py_ssize_t vb, Py_ssize_t vh, Py_ssize_t vl,
                           float* o, Py_ssize_t ob, Py_ssize_t oh, Py_ssize_t ol,
                           const int64_t* lengths, int B, int H, int Lq, int Lk, int D, int Dv,
                           bint causal, float scale, float* scores) noexcept nogil:
    cdef int b, h, i, j, d, vis
    cdef float top, total, w, inv
    cdef const float* qr
    cdef const float* vr
    cdef float* orow
    for b in range(B):
        for h in range(H):
            for i in range(Lq):
                vis = Lk
                if lengths != NULL and lengths[b] < vis:
                    vis = <int>lengths[b]
                if causal and i + Lk - Lq + 1 < vis:
                    vis = i + Lk - Lq + 1
                orow = o + b * ob + h * oh + i * ol
                for d in range(Dv):
                    orow[d] = 0
                if vis <= 0:
                    continue
                qr = q + b * qb + h * qh + i * ql
                top = -3.4e38
                for j in range(vis):
                    scores[j] = _dot_lanes(qr, k + b * kb + h * kh + j * kl, D) * scale
                    if scores[j] > top:
                        top = scores[j]
                total = 0
                for j in range(vis):
                    scores[j] = exp_f32(scores[j] - top)
                    total += scores[j]
                inv = <float>1.0 / total
                for j in range(vis):
                    w = scores[j] * inv
                    vr = v + b * vb + h * vh + j * vl
                    for d in range(Dv):
                        orow[d] += w * vr[d]
