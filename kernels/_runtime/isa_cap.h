/* The instruction-set level every native kernel dispatcher runs at: the best this CPU has, capped by
   $SEQJIT_ISA ("avx512", "avx2" or "baseline"), so one host runs, and tests, every variant below its
   best. Levels: 2 AVX-512 (F, BW, DQ, VL: x86-64-v4), 1 AVX2 + FMA (x86-64-v3), 0 the x86-64
   baseline (SSE2). The variable is read once per module, at its first dispatch; unset or empty
   means no cap, a cap above the CPU's best means the CPU's best, and any other value also means no
   cap here (seqjit.kernels checks the variable when it is imported and raises ConfigError for it, so
   that case is never met through seqjit). Other machines than x86-64 run level 0 only.
   No state is shared between modules: each extension including this header keeps its own copy,
   and all compute the same level from the same CPU and variable. */
#ifndef SJ_ISA_CAP_H
#define SJ_ISA_CAP_H
#include <stdlib.h>
#include <string.h>

enum { SJ_ISA_BASE = 0, SJ_ISA_AVX2 = 1, SJ_ISA_AVX512 = 2 };

/* the best level this CPU (and its OS) runs */
static inline int sj_isa_cpu(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    static int cpu = -1;
    if (cpu < 0) {
        __builtin_cpu_init();
        int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        cpu = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") ? SJ_ISA_AVX512
            : v3 ? SJ_ISA_AVX2 : SJ_ISA_BASE;
    }
    return cpu;
#else
    return SJ_ISA_BASE;
#endif
}

/* the level $SEQJIT_ISA allows (SJ_ISA_AVX512 when unset, empty or unknown), read on the first call */
static inline int sj_isa_cap(void) {
    static int cap = -1;
    if (cap < 0) {
        const char *s = getenv("SEQJIT_ISA");
        cap = s == NULL ? SJ_ISA_AVX512
            : strcmp(s, "baseline") == 0 ? SJ_ISA_BASE
            : strcmp(s, "avx2") == 0 ? SJ_ISA_AVX2 : SJ_ISA_AVX512;
    }
    return cap;
}

/* the level the dispatchers use: the CPU's best, capped */
static inline int sj_isa_level(void) {
    int cpu = sj_isa_cpu(), cap = sj_isa_cap();
    return cpu < cap ? cpu : cap;
}

static inline const char *sj_isa_name(int level) {
    return level >= SJ_ISA_AVX512 ? "avx512" : level == SJ_ISA_AVX2 ? "avx2" : "baseline";
}
#endif
