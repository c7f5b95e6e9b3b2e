# Native layer_norm for the replay VM: ``include "layer_norm/_native.pxi"``. Mean and variance in
# float64 (as the reference), two passes over a row that is in L1, each over 8 independent lanes.
from libc.math cimport sqrt


cdef inline double _sum_lanes(const float* x, int n, double shift) noexcept nogil:
    """sum(x - shift) in float64 over 8 lanes (independent adds: vectorised, no long chain)."""
    cdef double acc[8]
    cdef int j, d, nv = n - n % 8
    for j in range(8):
        acc[j] = 0
    for d in range(0, nv, 8):
        for j in range(8):
            acc[j] += x[d + j] - shift
    for d in range(nv, n):
        acc[0] += x[d] - shift
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))


cdef inline double _sq_lanes(const float* x, int n, double mean) noexcept nogil:
    cdef double acc[8]
    cdef double t
    cdef int j, d, nv = n - n % 8
    for j in range(8):
        acc[j] = 0
    for d in range(0, nv, 8):
        for j in range(8):
            t = x[d + j] - mean
            acc[j] += t * t
    for d in range(nv, n):
        t = x[d] - mean
        acc[0] += t * t
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))


cdef void native_layer_norm(const float* x, Py_ssize_t ldx, float* y, Py_ssize_t ldy, int M, int D,
                            const float* g, const float* b, double eps) noexcept nogil:
    cdef int m, d
    cdef double mean, var
    cdef float inv, mu
    cdef const float* xr
    cdef float* yr
    for m in range(M):
        xr = x + m * ldx
        yr = y + m * ldy
        mean = _sum_lanes(xr, D, 0.0) / D
        var = _sq_lanes(xr, D, mean) / D
        inv = <float>(1.0 / sqrt(var + eps))
        mu = <float>mean
        if g != NULL and b != NULL:
            for d in range(D):
                yr[d] = (xr[d] - mu) * inv * g[d] + b[d]
        elif g != NULL:
            for d in range(D):
                yr[d] = (xr[d] - mu) * inv * g[d]
        elif b != NULL:
            for d in range(D):
                yr[d] = (xr[d] - mu) * inv + b[d]
        else:
            for d in range(D):
                yr[d] = (xr[d] - mu) * inv
