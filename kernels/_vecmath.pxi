# Vectorisable float32 exp / erf / tanh / sigmoid for Cython kernels: ``include "../_vecmath.pxi"``.
#
# The C twins of kernels/_vecmath.py (same Cephes / Abramowitz & Stegun formulas and constants).
# They use only arithmetic, compares and an int->float bit cast (memcpy), so gcc -O3 vectorises
# a loop calling them even for the baseline x86-64 target: rounding to an integer uses the
# 1.5 * 2**23 "magic number" addition instead of floorf (a libm call without SSE4.1). Every
# constant is cast to float: a bare Cython float literal is a C double and would promote the
# arithmetic to double.
#
# gcc refuses to if-convert (and so to vectorise) a loop with any branch on a float compare under its
# default -ftrapping-math, even when both arms are plain arithmetic; the pragma below turns that off
# for this module (no kernel relies on floating-point traps). Other compilers ignore it.
cdef extern from *:
    """
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC optimize ("no-trapping-math")
    #endif
    """

from libc.string cimport memcpy


cdef inline float _vm_bits_to_f32(int bits) noexcept nogil:
    cdef float f
    memcpy(&f, &bits, 4)
    return f


cdef inline float exp_f32(float x) noexcept nogil:
    """e**x (0 below -87.34, where the result would be denormal; inf above 88.37)."""
    cdef float xc = x
    if xc < <float>-87.3365447504:
        xc = <float>-87.3365447504
    if xc > <float>88.7228391117:  # n reaches 128 there: 2**n is inf (overflow from 88.37 on)
        xc = <float>88.7228391117
    cdef float magic = <float>12582912.0  # 1.5 * 2**23: adding it rounds to an integer
    cdef float n = (xc * <float>1.44269504088896341 + magic) - magic
    cdef float f = xc - n * <float>0.693359375 - n * <float>-2.12194440e-4
    cdef float z = f * f
    cdef float p = (((((<float>1.9875691500e-4 * f + <float>1.3981999507e-3) * f
                       + <float>8.3334519073e-3) * f + <float>4.1665795894e-2) * f
                     + <float>1.6666665459e-1) * f + <float>5.0000001201e-1) * z + f + <float>1.0
    cdef float r = p * _vm_bits_to_f32((<int>n + 127) << 23)
    if x < <float>-87.3365447504:
        r = <float>0.0
    return r


cdef inline float tanh_f32(float x) noexcept nogil:
    cdef float a = x if x >= 0 else -x
    cdef float e = exp_f32(<float>-2.0 * a)
    cdef float big = (<float>1.0 - e) / (<float>1.0 + e)
    cdef float z = x * x
    cdef float small = ((((<float>-5.70498872745e-3 * z + <float>2.06390887954e-2) * z
                          + <float>-5.37397155531e-2) * z + <float>1.33314422036e-1) * z
                        + <float>-3.33332819422e-1) * z * a + a
    cdef float r = small if a < <float>0.625 else big
    return -r if x < 0 else r


cdef inline float erf_f32(float x) noexcept nogil:
    cdef float a = x if x >= 0 else -x
    cdef float z = a * a
    cdef float small = ((((((<float>7.853861353153693e-5 * z + <float>-8.010193625184903e-4) * z
                            + <float>5.188327685732524e-3) * z + <float>-2.685381193529856e-2) * z
                          + <float>1.128358514861418e-1) * z + <float>-3.761262582423300e-1) * z
                        + <float>1.128379165726710) * a
    cdef float t = <float>1.0 / (<float>1.0 + <float>0.3275911 * a)
    cdef float poly = ((((<float>1.061405429 * t + <float>-1.453152027) * t + <float>1.421413741) * t
                        + <float>-0.284496736) * t + <float>0.254829592) * t
    cdef float big = <float>1.0 - poly * exp_f32(-z)
    cdef float r = small if a < <float>1.0 else big
    return -r if x < 0 else r


cdef inline float sigmoid_f32(float x) noexcept nogil:
    return <float>1.0 / (<float>1.0 + exp_f32(-x))
