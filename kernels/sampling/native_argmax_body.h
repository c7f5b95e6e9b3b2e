/* Body of native_argmax.h, included once per instruction set with SJ_NAME(x) naming the variant (no
   include guard: that is the point). Lanes of SJ_AM_VL floats, SJ_AM_U vectors per block: each lane
   of each vector keeps its own running maximum and the index where it first reached it (strictly
   greater replaces, so ties keep the earlier index); the row's first maximum is then the smallest
   kept index among the lanes holding the largest value (-0.0 and 0.0 compare equal, as in the
   scalar loop). NaN lanes are OR-ed together and reported as -1 at the end. The tail past the last
   block runs one element at a time after the blocks (its elements come later, so they win only
   when strictly greater). */
#if defined(__AVX512F__)
#define SJ_AM_VL 16
#elif defined(__AVX2__)
#define SJ_AM_VL 8
#else
#define SJ_AM_VL 4
#endif
#define SJ_AM_U 4

typedef float SJ_NAME(am_v) __attribute__((vector_size(SJ_AM_VL * 4)));
typedef float SJ_NAME(am_vu) __attribute__((vector_size(SJ_AM_VL * 4), aligned(4)));
typedef int SJ_NAME(am_i) __attribute__((vector_size(SJ_AM_VL * 4)));

static ptrdiff_t SJ_NAME(argmax_row)(const float *x, ptrdiff_t n) {
    const ptrdiff_t block = SJ_AM_VL * SJ_AM_U, nb = n / block * block;
    float top = n > 0 ? x[0] : 0.0f;
    ptrdiff_t best = 0, start = 0;
    if (nb > 0 && n <= 0x7fffffff) {  /* int32 lane indices */
        SJ_NAME(am_v) t[SJ_AM_U];
        SJ_NAME(am_i) at[SJ_AM_U], lane, bad = {0};
        for (int l = 0; l < SJ_AM_VL; l++)
            lane[l] = l;
#pragma GCC unroll 4
        for (int u = 0; u < SJ_AM_U; u++) {
            t[u] = *(const SJ_NAME(am_vu) *)(x + u * SJ_AM_VL);
            at[u] = lane + u * SJ_AM_VL;
            bad |= t[u] != t[u];
        }
        for (ptrdiff_t i = block; i < nb; i += block) {
#pragma GCC unroll 4
            for (int u = 0; u < SJ_AM_U; u++) {
                const SJ_NAME(am_v) v = *(const SJ_NAME(am_vu) *)(x + i + u * SJ_AM_VL);
                const SJ_NAME(am_i) g = v > t[u];
                bad |= v != v;
                t[u] = (SJ_NAME(am_v))(((SJ_NAME(am_i))v & g) | ((SJ_NAME(am_i))t[u] & ~g));
                at[u] = ((lane + (int)(i + u * SJ_AM_VL)) & g) | (at[u] & ~g);
            }
        }
        int any_bad = 0;
        for (int l = 0; l < SJ_AM_VL; l++)
            any_bad |= bad[l];
        if (any_bad)
            return -1;
        top = t[0][0];
        for (int u = 0; u < SJ_AM_U; u++)
            for (int l = 0; l < SJ_AM_VL; l++)
                top = t[u][l] > top ? t[u][l] : top;
        best = n;
        for (int u = 0; u < SJ_AM_U; u++)
            for (int l = 0; l < SJ_AM_VL; l++)
                if (t[u][l] == top && at[u][l] < best)
                    best = at[u][l];
        start = nb;
    }
    for (ptrdiff_t i = start; i < n; i++) {
        const float v = x[i];
        if (v != v)
            return -1;
        if (v > top) {
            top = v;
            best = i;
        }
    }
    return best;
}

#undef SJ_AM_VL
#undef SJ_AM_U
