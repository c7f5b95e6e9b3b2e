# Native layer_norm for the replay VM: ``include "layer_norm/_native.pxi"``. Mean and variance in
# float64 (as the reference), two passes over a row that is in L1.
from libc.math cimport sqrt


cdef void native_layer_norm(const float* x, Py_ssize_t ldx, float* y, Py_ssize_t ldy, int M, int D,
                            const float* g, const float* b, double eps) noexcept nogil:
    cdef int m, d
    cdef double s, mean, var, t
    cdef float inv, mu
    cdef const float* xr
    cdef float* yr
    for m in range(M):
        xr = x + m * ldx
        yr = y + m * ldy
        s = 0
        for d in range(D):
            s += xr[d]
        mean = s / D
        var = 0
        for d in range(D):
            t = xr[d] - mean
            var += t * t
        var = var / D
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
