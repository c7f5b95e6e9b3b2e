/* The native linear's decode-shape kernels (native_gemv.h) per instruction-set variant below
   AVX-512, on one thread: "out_in" (dot products, W [N, K]) and "in_out" (broadcasts, W [K, N]) at
   1-1024 rows, weights hot in cache; then one row streaming 512 MB of weights from memory beside a
   plain vector read of the same bytes (the bandwidth a one-row product can reach).

       cc -O3 -ffp-contract=fast -I kernels -o /tmp/gemv_variants benchmarks/gemm/gemv_variants.c && taskset -c 1 /tmp/gemv_variants
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "linear/native_gemv.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static double best_of(int reps, void (*f)(void *), void *arg) {
    double best = 1e9;
    for (int r = 0; r < reps; r++) { double t0 = now(); f(arg); double dt = now() - t0; if (dt < best) best = dt; }
    return best;
}
typedef struct { int M, K, N, layout; float *x, *w, *y; } job;
static void run(void *p) {
    job *j = p;
    if (j->layout) sj_gemv_rows_in_out(j->x, j->K, j->M, j->w, j->K, j->N, NULL, j->y, j->N, 0, j->N);
    else sj_gemv_rows(j->x, j->K, j->M, j->w, j->K, NULL, j->y, j->N, 0, j->N);
}

int main(void) {
    const int shapes[][3] = {{1, 128, 384}, {1, 512, 512}, {1, 512, 2048}, {4, 512, 512}, {16, 512, 512},
                             {256, 256, 768}, {1024, 256, 768}};
    const int ns = sizeof shapes / sizeof shapes[0];
    for (int isa = sj_gemv_best() < 1 ? sj_gemv_best() : 1; isa >= 0; isa--) {
        sj_gemv_isa = isa;
        for (int s = 0; s < ns; s++)
            for (int layout = 0; layout < 2; layout++) {
                job j = {shapes[s][0], shapes[s][1], shapes[s][2], layout};
                if (layout == 0 && j.M > SJ_GEMV_MAX_ROWS) continue;  /* out_in serves 1-4 rows */
                j.x = malloc(4L * j.M * j.K), j.w = malloc(4L * j.K * j.N), j.y = malloc(4L * j.M * j.N);
                for (long i = 0; i < (long)j.M * j.K; i++) j.x[i] = (i % 13) * 0.01f;
                for (long i = 0; i < (long)j.K * j.N; i++) j.w[i] = (i % 7) * 0.01f;
                double flop = 2.0 * j.M * j.K * j.N, reps = 2e8 / flop;
                double t = best_of(reps < 5 ? 5 : reps > 2000 ? 2000 : (int)reps, run, &j);
                printf("%s %-6s %4d x %4d x %4d: %7.1f GFLOP/s\n", isa ? "avx2" : "base", layout ? "in_out" : "out_in",
                       j.M, j.K, j.N, flop / t / 1e9);
                free(j.x), free(j.w), free(j.y);
            }
    }
    /* one row, weights streamed from memory */
    const int K = 512, N = 2048;
    const long per = (long)K * N, copies = (512L << 20) / (per * 4);
    float *w = aligned_alloc(64, 4L * per * copies), *x = calloc(K, 4), *y = calloc(N, 4);
    for (long i = 0; i < per * copies; i++) w[i] = 1e-3f;
    typedef float v8 __attribute__((vector_size(32)));
    double tb = 1e9; float sink = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
        const v8 *p = (const v8 *)w;
        for (long i = 0; i < per * copies / 8; i += 4) { s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3]; }
        v8 s = s0 + s1 + s2 + s3; sink += s[0];
        double dt = now() - t0; if (dt < tb) tb = dt;
    }
    printf("read bandwidth (vector sum): %.1f GB/s (%g)\n", per * copies * 4 / tb / 1e9, sink);
    for (int isa = sj_gemv_best() < 1 ? sj_gemv_best() : 1; isa >= 0; isa--) {
        sj_gemv_isa = isa;
        double t0 = now();
        for (int r = 0; r < 3; r++)
            for (long c = 0; c < copies; c++) sj_gemv_rows(x, K, 1, w + per * c, K, NULL, y, N, 0, N);
        printf("%s out_in one row from memory: %.1f GB/s\n", isa ? "avx2" : "base", 3.0 * copies * per * 4 / (now() - t0) / 1e9);
    }
    return 0;
}
