/* This host's roofline: FMA peak (GFLOP/s) and read bandwidth (GB/s), on 1 and 2 threads.
   Built and run by benchmarks/gemm/decode_shapes.py (cc -O2 -march=native -pthread); prints one JSON
   line. Peak: 12 independent FMA chains on the widest vectors (AVX-512 where -march=native has it),
   enough to cover FMA latency x units. Bandwidth: a vector sum over 32 MB of a 512 MB buffer (each
   thread its own half), a different part each time, the way a decode step streams weights that do
   not fit the caches. Both are the best of many short runs (a few ms), as the kernels are timed,
   so that on a shared host they see the same quiet moments. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX__)
#define LANES 8
#else
#define LANES 4
#endif
typedef float vf __attribute__((vector_size(LANES * 4)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define ITERS 1000000L
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
static void *fma_loop(void *out) {
    vf b = {0}, c = {0};
    for (int i = 0; i < LANES; i++) { b[i] = 0.999999f; c[i] = 1e-7f; }
#define DECL(j) vf a##j = b * (float)j;
    CHAINS(DECL)
    for (long i = 0; i < ITERS; i++) {
#define STEP(j) a##j = a##j * b + c;
        CHAINS(STEP)
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
    }
#define SUM(j) + a##j
    vf s = b CHAINS(SUM);
    *(float *)out = s[0];
    return NULL;
}

typedef struct { const float *p; size_t n; float s; } part;
static void *read_loop(void *arg) {
    part *q = arg;
    vf s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (size_t i = 0; i + 4 * LANES <= q->n; i += 4 * LANES) {
        s0 += *(const vf *)(q->p + i); s1 += *(const vf *)(q->p + i + LANES);
        s2 += *(const vf *)(q->p + i + 2 * LANES); s3 += *(const vf *)(q->p + i + 3 * LANES);
    }
    s0 += s1 + s2 + s3;
    q->s = s0[0];
    return NULL;
}

static double run(int threads, void *(*fn)(void *), void **args) {
    pthread_t t[2];
    double t0 = now();
    for (int i = 1; i < threads; i++) pthread_create(&t[i], NULL, fn, args[i]);
    fn(args[0]);
    for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
    return now() - t0;
}

int main(void) {
    double peak[3] = {0}, bw[3] = {0};
    float out[2];
    const size_t n = (512u << 20) / 4, chunk = (32u << 20) / 4;
    float *buf = aligned_alloc(64, n * 4);
    for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
    for (int threads = 1; threads <= 2; threads++) {
        void *fa[2] = {&out[0], &out[1]};
        part parts[2];
        void *ra[2] = {&parts[0], &parts[1]};
        for (int rep = 0; rep < 40; rep++) {
            double dt = run(threads, fma_loop, fa);
            double g = threads * ITERS * 12.0 * LANES * 2 / dt / 1e9;
            if (g > peak[threads]) peak[threads] = g;
            const float *c = buf + (size_t)(rep % (n / chunk)) * chunk;
            for (int i = 0; i < threads; i++) { parts[i].p = c + i * (chunk / threads); parts[i].n = chunk / threads; }
            dt = run(threads, read_loop, ra);
            g = chunk * 4.0 / dt / 1e9;
            if (g > bw[threads]) bw[threads] = g;
        }
    }
    printf("{\"lanes\": %d, \"peak_1t\": %.1f, \"peak_2t\": %.1f, \"read_1t\": %.1f, \"read_2t\": %.1f}\n",
           LANES, peak[1], peak[2], bw[1], bw[2]);
    return 0;
}
