/* The int8 products of one opus-mt-en-de-sized Marian decoder step, in C on kernels/linear_int8/_qgemm.h,
   without the rest of seqjit: where the batch-1 and batch-16 step time goes, and how far it is from the
   weight-read floor. Build and run from the repository root:

       gcc -O3 -ffp-contract=fast -fopenmp -I kernels/linear_int8 benchmarks/int8/decode_step.c -lm -o /tmp/decode_step
       /tmp/decode_step [M=1] [ROUNDS=10] [THREADS=1]

   A step: for each of 6 decoder layers the merged self-attention Q/K/V (1536 x 512), its output projection,
   the cross-attention query and output projections (512 x 512 each), fc1 (2048 x 512), fc2 (512 x 2048);
   then the output projection (58101 x 512): 51.8 MB of int8 weights, more than the 32 MB L3, so every step
   reads them from memory. M rows of activations (the batch) are quantized per row before each product.

   Variants, each with its own copy of the weights, run interleaved (10 steps each per round, the first 2
   not counted) so that the machine's load affects them alike; reported: median step time and its parts.
     - pages: 4 KB or 2 MB (transparent huge pages: madvise(MADV_HUGEPAGE) before the weights are written);
     - alignment: weights 64-byte aligned, or 16 bytes off (as NumPy's heap arrays can be);
     - stream: which products pass SJQ_STREAM (prefetch weights ahead in every tile, not only 1-row tiles).
   Then the floor: a 145000 x 512 (74 MB) int8 matrix-vector product, 4 KB and 2 MB pages, THREADS threads
   (column halves), its read bandwidth, and step bytes / that bandwidth. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <omp.h>
#include "_qgemm.h"

typedef struct { long N, K; int8_t *w; float *s; } Mat;
typedef struct { const char *name; int huge; long off; long stream_min; Mat m[40]; int nm; } Variant;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) { qsort(v, n, sizeof *v, cmp); return v[n / 2]; }

static char *arena(long bytes, int huge) {
    char *p = aligned_alloc(1 << 21, (bytes + (4 << 20)) & ~((2L << 20) - 1));
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static Mat matrix(char *base, long *used, long N, long K) {
    Mat m = {N, K, (int8_t *)base + *used, malloc(N * sizeof(float))};
    *used += (N * K + 4095) & ~4095L;
    for (long i = 0; i < N * K; i++) m.w[i] = (int8_t)(rand() % 255 - 127);
    for (long i = 0; i < N; i++) m.s[i] = 1e-3f;
    return m;
}

static void build(Variant *v) {
    static const long shapes[6][2] = {{1536, 512}, {512, 512}, {512, 512}, {512, 512}, {2048, 512}, {512, 2048}};
    char *base = arena(80L << 20, v->huge) + v->off;
    long used = 0;
    srand(1);
    v->nm = 0;
    for (int l = 0; l < 6; l++)
        for (int i = 0; i < 6; i++) v->m[v->nm++] = matrix(base, &used, shapes[i][0], shapes[i][1]);
    v->m[v->nm++] = matrix(base, &used, 58101, 512);
}

static int isa;
static float *x, *y, *xs;
static int8_t *qx;
static int32_t *xsum;

static void product(const Mat *m, long M, int flags) {
    for (long j = 0; j < M; j++) xs[j] = sjq_quantize_row(isa, x + j * m->K, m->K, qx + j * m->K, &xsum[j]);
    sjq_columns(isa | flags, qx, m->K, xsum, xs, M, m->K, m->w, m->s, NULL, y, m->N, NULL, 0, 0, m->N);
}

static double step_bytes(const Variant *v) {
    double b = 0;
    for (int i = 0; i < v->nm; i++) b += (double)v->m[i].N * v->m[i].K;
    return b;
}

static double floor_bandwidth(int huge, int threads, int reps) {
    const long N = 145000, K = 512;
    char *base = arena(N * K, huge);
    long used = 0;
    Mat m = matrix(base, &used, N, K);
    double *t = malloc(reps * sizeof *t);
    for (int j = 0; j < K; j++) x[j] = (float)rand() / RAND_MAX - 0.5f;
    xs[0] = sjq_quantize_row(isa, x, K, qx, xsum);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
#pragma omp parallel num_threads(threads)
        {
            int n = omp_get_num_threads(), i = omp_get_thread_num();
            long c0 = N * i / n / 8 * 8, c1 = i == n - 1 ? N : N * (i + 1) / n / 8 * 8;
            sjq_columns(isa | SJQ_STREAM, qx, K, xsum, xs, 1, K, m.w, m.s, NULL, y, N, NULL, 0, c0, c1);
        }
        t[r] = now() - t0;
    }
    double bw = (double)N * K / median(t, reps);
    free(t);
    free(base);
    return bw;
}

int main(int argc, char **argv) {
    long M = argc > 1 ? atol(argv[1]) : 1;
    int rounds = argc > 2 ? atoi(argv[2]) : 10, threads = argc > 3 ? atoi(argv[3]) : 1;
    static Variant v[] = {
        {"4 KB pages, 64-byte aligned, stream >= 2 MB", 0, 0, 2L << 20},
        {"4 KB pages, 16 bytes off, stream >= 2 MB", 0, 16, 2L << 20},
        {"4 KB pages, 64-byte aligned, stream >= 256 KB", 0, 0, 256L << 10},
        {"2 MB pages, 64-byte aligned, stream >= 256 KB", 1, 0, 256L << 10},
    };
    const int V = sizeof v / sizeof v[0], STEPS = 10, SKIP = 2;
    isa = sjq_detect();
    x = malloc(sizeof(float) * M * 2048);
    y = malloc(sizeof(float) * M * 145000);
    xs = malloc(sizeof(float) * M);
    qx = malloc(M * 2048);
    xsum = malloc(sizeof(int32_t) * M);
    for (long i = 0; i < M * 2048; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < V; i++) build(&v[i]);
    int n = rounds * (STEPS - SKIP);
    double *t_dec = malloc(V * n * sizeof(double)), *t_out = malloc(V * n * sizeof(double)),
           *t_step = malloc(V * n * sizeof(double));
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < V; i++)
            for (int s = 0; s < STEPS; s++) {
                double t0 = now(), t1;
                for (int j = 0; j < v[i].nm - 1; j++) {
                    const Mat *m = &v[i].m[j];
                    product(m, M, m->N * m->K >= v[i].stream_min ? SJQ_STREAM : 0);
                }
                t1 = now();
                product(&v[i].m[v[i].nm - 1], M, SJQ_STREAM);
                if (s >= SKIP) {
                    int k = i * n + r * (STEPS - SKIP) + s - SKIP;
                    t_dec[k] = t1 - t0;
                    t_out[k] = now() - t1;
                    t_step[k] = now() - t0;
                }
            }
    double bytes = step_bytes(&v[0]), base = 0;
    printf("M = %ld, %.1f MB of int8 weights per step, %d rounds x %d steps per variant (medians)\n", M, bytes / 1e6,
           rounds, STEPS - SKIP);
    for (int i = 0; i < V; i++) {
        double d = median(t_dec + i * n, n), o = median(t_out + i * n, n), st = median(t_step + i * n, n);
        if (i == 0) base = st;
        printf("  %-48s step %7.1f us (decoder layers %7.1f, output projection %7.1f)  %.2fx  %5.1f GB/s\n",
               v[i].name, 1e6 * st, 1e6 * d, 1e6 * o, base / st, bytes / st / 1e9);
    }
    for (int huge = 0; huge < 2; huge++) {
        double bw = floor_bandwidth(huge, threads, 15);
        printf("floor, %s pages, %d thread(s): 74 MB int8 GEMV reads %.1f GB/s -> step >= %.1f us (M = 1)\n",
               huge ? "2 MB" : "4 KB", threads, bw / 1e9, 1e6 * bytes / bw);
    }
    return 0;
}
