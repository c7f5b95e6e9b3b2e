/* Software prefetch of a block of rows, for kernels whose next operand is small, scattered and read
   from memory, where the hardware prefetcher has no stream to follow (attention's next (batch,
   head) K/V block in a decode step, a few KB each, evicted by the step's weights). */
#ifndef SJ_PREFETCH_H
#define SJ_PREFETCH_H
#include <stddef.h>

/* every 64-byte line of rows [0, n) of ``len`` floats, ``stride`` floats apart, into L1 */
static inline void sj_prefetch_rows(const float *p, ptrdiff_t n, ptrdiff_t stride, ptrdiff_t len) {
    for (ptrdiff_t r = 0; r < n; r++, p += stride)
        for (ptrdiff_t j = 0; j < len; j += 16)
            __builtin_prefetch(p + j, 0, 3);
}
#endif
