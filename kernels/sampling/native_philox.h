/* Philox4x32-10 and the sampling draw in C: the native side of kernels/sampling/philox.py (which is
 * the specification: the key, counter and uniform layout are defined there). Header-only, static
 * inline, no state: the draw of (seed, row, step) is a pure function of the three. */
#ifndef SJ_NATIVE_PHILOX_H
#define SJ_NATIVE_PHILOX_H

#include <stdint.h>

#define SJ_PHILOX_M0 0xD2511F53u
#define SJ_PHILOX_M1 0xCD9E8D57u
#define SJ_PHILOX_W0 0x9E3779B9u
#define SJ_PHILOX_W1 0xBB67AE85u

/* out = Philox4x32-rounds(ctr) under key (out may alias ctr). */
static inline void sj_philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < rounds; r++) {
        if (r) {
            k0 += SJ_PHILOX_W0;
            k1 += SJ_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)SJ_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)SJ_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* The sampling draw of source row `row` at step `step` under `seed`: a double in [0, 1). */
static inline double sj_philox_uniform(uint64_t seed, uint64_t row, uint64_t step)
{
    uint32_t ctr[4] = {(uint32_t)step, (uint32_t)(step >> 32), (uint32_t)row, (uint32_t)(row >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t out[4];
    sj_philox4x32(ctr, key, 10, out);
    uint64_t bits = (((uint64_t)out[0] << 32) | out[1]) >> 11;
    return (double)bits * (1.0 / 9007199254740992.0);  /* 2**-53 */
}

#endif
