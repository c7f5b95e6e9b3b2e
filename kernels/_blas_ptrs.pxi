# BLAS for Cython kernels without a build- or run-time dependency on scipy: ``include "../_blas_ptrs.pxi"``
# (``include "_blas_ptrs.pxi"`` from the native VM). ``sgemm``, ``dgemm``, ``sgemv`` and ``dgemv`` are
# function pointers with scipy.linalg.cython_blas's signatures: at import they are taken from scipy's
# OpenBLAS when scipy is installed (the ``blas`` extra: pip install 'seqjit[blas]'), otherwise they
# point at the portable loops of _sj_blas_fallback.h (same results, slower). ``blas_source()`` says
# which; ``_select_blas(use_scipy)`` switches, for tests (not thread-safe against running kernels).
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer

ctypedef void (*_sj_sgemm_t)(char*, char*, int*, int*, int*, float*, float*, int*, float*, int*, float*,
                             float*, int*) noexcept nogil
ctypedef void (*_sj_dgemm_t)(char*, char*, int*, int*, int*, double*, double*, int*, double*, int*, double*,
                             double*, int*) noexcept nogil
ctypedef void (*_sj_sgemv_t)(char*, int*, int*, float*, float*, int*, float*, int*, float*, float*,
                             int*) noexcept nogil
ctypedef void (*_sj_dgemv_t)(char*, int*, int*, double*, double*, int*, double*, int*, double*, double*,
                             int*) noexcept nogil

cdef extern from "_sj_blas_fallback.h" nogil:
    void sj_sgemm_fallback(char*, char*, int*, int*, int*, float*, float*, int*, float*, int*, float*, float*, int*)
    void sj_dgemm_fallback(char*, char*, int*, int*, int*, double*, double*, int*, double*, int*, double*,
                           double*, int*)
    void sj_sgemv_fallback(char*, int*, int*, float*, float*, int*, float*, int*, float*, float*, int*)
    void sj_dgemv_fallback(char*, int*, int*, double*, double*, int*, double*, int*, double*, double*, int*)
    int sj_fb_pick()
    const char* sj_isa_name(int level)

cdef _sj_sgemm_t sgemm = <_sj_sgemm_t>sj_sgemm_fallback
cdef _sj_dgemm_t dgemm = <_sj_dgemm_t>sj_dgemm_fallback
cdef _sj_sgemv_t sgemv = <_sj_sgemv_t>sj_sgemv_fallback
cdef _sj_dgemv_t dgemv = <_sj_dgemv_t>sj_dgemv_fallback
#: True while the pointers are scipy's OpenBLAS
cdef bint have_scipy_blas = False


cdef void* _sj_capi(dict table, str name) except NULL:
    capsule = table[name]
    return PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule))


def blas_fallback_isa() -> str:
    """The instruction-set variant of the portable fallback's blocked kernels: "avx512", "avx2" or
    "baseline" (the CPU's best under $SEQJIT_ISA; chosen here if no call chose it yet)."""
    return sj_isa_name(sj_fb_pick()).decode()


def _select_blas(bint use_scipy):
    """Point the BLAS calls at scipy's OpenBLAS (when ``use_scipy`` and scipy is installed) or at the
    portable fallback; returns :func:`blas_source`'s answer."""
    global sgemm, dgemm, sgemv, dgemv, have_scipy_blas
    table = None
    if use_scipy:
        try:
            from scipy.linalg import cython_blas
            table = cython_blas.__pyx_capi__
        except ImportError:
            table = None
    if table is not None:
        sgemm = <_sj_sgemm_t>_sj_capi(table, "sgemm")
        dgemm = <_sj_dgemm_t>_sj_capi(table, "dgemm")
        sgemv = <_sj_sgemv_t>_sj_capi(table, "sgemv")
        dgemv = <_sj_dgemv_t>_sj_capi(table, "dgemv")
        have_scipy_blas = True
    else:
        sgemm = <_sj_sgemm_t>sj_sgemm_fallback
        dgemm = <_sj_dgemm_t>sj_dgemm_fallback
        sgemv = <_sj_sgemv_t>sj_sgemv_fallback
        dgemv = <_sj_dgemv_t>sj_dgemv_fallback
        have_scipy_blas = False
    return blas_source()


def blas_source():
    """``"scipy"`` when this module's BLAS calls go to scipy's OpenBLAS, ``"fallback"`` otherwise."""
    return "scipy" if have_scipy_blas else "fallback"


_select_blas(True)
