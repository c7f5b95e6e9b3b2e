/* Compile the kernel body named by SJ_ISA_BODY (a header path, relative to kernels/) once per
   instruction set: ``SJ_NAME(x)`` names the variant ``sj_<x>_base``, ``_avx2`` (AVX2 + FMA) and
   ``_avx512``; linear/native_gemv.h's SJ_DISPATCH picks one by CPU features at run time, so the
   module needs no -m flags and runs on any x86-64 (elsewhere only the portable variant is built).
   No include guard: each kernel header includes this once with its own body. */
#define SJ_NAME(x) sj_##x##_base
#include SJ_ISA_BODY
#undef SJ_NAME

#if defined(__GNUC__) && defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define SJ_NAME(x) sj_##x##_avx2
#include SJ_ISA_BODY
#undef SJ_NAME
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")
#define SJ_NAME(x) sj_##x##_avx512
#include SJ_ISA_BODY
#undef SJ_NAME
#pragma GCC pop_options
#endif
#undef SJ_ISA_BODY
