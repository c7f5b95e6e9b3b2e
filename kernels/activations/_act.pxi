# Scalar activations and the row loops that apply them, for Cython kernels (activations, and the
# linear GEMM epilogue): ``include "../activations/_act.pxi"``. Codes as in spec.ACTIVATIONS.
# float32 uses the vectorisable polynomials of kernels/_vecmath.pxi; double uses libm. The switch
# on ``code`` sits outside the loops (gcc does not unswitch it, and a branch inside the loop stops
# vectorisation), so every activation gets its own straight-line loop.
from libc.math cimport erf as _libm_erf, tanh as _libm_tanh, exp as _libm_exp

include "../_vecmath.pxi"

cdef enum:  # activation codes (spec.ACTIVATIONS)
    _NONE = 0
    _RELU = 1
    _GELU = 2
    _GELU_TANH = 3
    _SILU = 4
    _TANH = 5


cdef inline float act_relu_f32(float v) noexcept nogil:
    return 0 if v < 0 else v


cdef inline float act_gelu_f32(float v) noexcept nogil:
    return <float>0.5 * v * (<float>1.0 + erf_f32(v * <float>0.7071067811865476))


cdef inline float act_gelu_tanh_f32(float v) noexcept nogil:
    return <float>0.5 * v * (<float>1.0 + tanh_f32(<float>0.7978845608028654 * (v + <float>0.044715 * v * v * v)))


cdef inline float act_silu_f32(float v) noexcept nogil:
    return v * sigmoid_f32(v)


cdef inline float act_tanh_f32(float v) noexcept nogil:
    return tanh_f32(v)


cdef inline float act_f32(float v, int code) noexcept nogil:
    """One value (not for inner loops: see act_row_f32)."""
    if code == _RELU:
        return act_relu_f32(v)
    if code == _GELU:
        return act_gelu_f32(v)
    if code == _GELU_TANH:
        return act_gelu_tanh_f32(v)
    if code == _SILU:
        return act_silu_f32(v)
    if code == _TANH:
        return act_tanh_f32(v)
    return v


cdef inline void act_row_f32(const float* src, const float* bias, float* dst, Py_ssize_t n,
                             int code) noexcept nogil:
    """dst[i] = act(src[i] (+ bias[i] when bias is not NULL)); dst may be src."""
    cdef Py_ssize_t i
    if bias == NULL:
        if code == _NONE:
            for i in range(n):
                dst[i] = src[i]
        elif code == _RELU:
            for i in range(n):
                dst[i] = act_relu_f32(src[i])
        elif code == _GELU:
            for i in range(n):
                dst[i] = act_gelu_f32(src[i])
        elif code == _GELU_TANH:
            for i in range(n):
                dst[i] = act_gelu_tanh_f32(src[i])
        elif code == _SILU:
            for i in range(n):
                dst[i] = act_silu_f32(src[i])
        elif code == _TANH:
            for i in range(n):
                dst[i] = act_tanh_f32(src[i])
    else:
        if code == _NONE:
            for i in range(n):
                dst[i] = src[i] + bias[i]
        elif code == _RELU:
            for i in range(n):
                dst[i] = act_relu_f32(src[i] + bias[i])
        elif code == _GELU:
            for i in range(n):
                dst[i] = act_gelu_f32(src[i] + bias[i])
        elif code == _GELU_TANH:
            for i in range(n):
                dst[i] = act_gelu_tanh_f32(src[i] + bias[i])
        elif code == _SILU:
            for i in range(n):
                dst[i] = act_silu_f32(src[i] + bias[i])
        elif code == _TANH:
            for i in range(n):
                dst[i] = act_tanh_f32(src[i] + bias[i])


cdef inline double act_relu_f64(double v) noexcept nogil:
    return 0 if v < 0 else v


cdef inline double act_gelu_f64(double v) noexcept nogil:
    return 0.5 * v * (1.0 + _libm_erf(v * 0.7071067811865476))


cdef inline double act_gelu_tanh_f64(double v) noexcept nogil:
    return 0.5 * v * (1.0 + _libm_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))


cdef inline double act_silu_f64(double v) noexcept nogil:
    return v / (1.0 + _libm_exp(-v))


cdef inline double act_tanh_f64(double v) noexcept nogil:
    return _libm_tanh(v)


cdef inline double act_f64(double v, int code) noexcept nogil:
    """One value (not for inner loops: see act_row_f64)."""
    if code == _RELU:
        return act_relu_f64(v)
    if code == _GELU:
        return act_gelu_f64(v)
    if code == _GELU_TANH:
        return act_gelu_tanh_f64(v)
    if code == _SILU:
        return act_silu_f64(v)
    if code == _TANH:
        return act_tanh_f64(v)
    return v


cdef inline void act_row_f64(const double* src, const double* bias, double* dst, Py_ssize_t n,
                             int code) noexcept nogil:
    """dst[i] = act(src[i] (+ bias[i] when bias is not NULL)); dst may be src."""
    cdef Py_ssize_t i
    if bias == NULL:
        if code == _NONE:
            for i in range(n):
                dst[i] = src[i]
        elif code == _RELU:
            for i in range(n):
                dst[i] = act_relu_f64(src[i])
        elif code == _GELU:
            for i in range(n):
                dst[i] = act_gelu_f64(src[i])
        elif code == _GELU_TANH:
            for i in range(n):
                dst[i] = act_gelu_tanh_f64(src[i])
        elif code == _SILU:
            for i in range(n):
                dst[i] = act_silu_f64(src[i])
        elif code == _TANH:
            for i in range(n):
                dst[i] = act_tanh_f64(src[i])
    else:
        if code == _NONE:
            for i in range(n):
                dst[i] = src[i] + bias[i]
        elif code == _RELU:
            for i in range(n):
                dst[i] = act_relu_f64(src[i] + bias[i])
        elif code == _GELU:
            for i in range(n):
                dst[i] = act_gelu_f64(src[i] + bias[i])
        elif code == _GELU_TANH:
            for i in range(n):
                dst[i] = act_gelu_tanh_f64(src[i] + bias[i])
        elif code == _SILU:
            for i in range(n):
                dst[i] = act_silu_f64(src[i] + bias[i])
        elif code == _TANH:
            for i in range(n):
                dst[i] = act_tanh_f64(src[i] + bias[i])
