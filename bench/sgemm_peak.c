/* Single-core GEMM throughput of every CPU GEMM backend of the build (one
 * thread, the kernel sw_gemm tasks call: sw_gemm_cpu), the roofline of one
 * StarPU worker: on a W124 tile (C[64, 2304] = A[64, 768] B^T, the QKV
 * projection of one row tile) and at n^3. Prints "sgemm_gflops_1core
 * BACKEND TILE N3 (library, ISA)" per backend, then "sgemm_best_gflops_1core
 * BACKEND GFLOPS" (the best tile rate), and, where the CPU runs bf16 GEMMs
 * natively (sw_gemm_bf16_native), "bf16_gflops_1core onednn TILE N3".
 * usage: sgemm_peak [n]   (default 1024) */
#include <cblas.h>
#include <starweave.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* C[m,n] = A[m,k] B[n,k]^T, row-major, as the layers call it */
static void gemm(sw_dtype dt, int m, int n, int k, const void *a, const void *b, float *c)
{
    sw_gemm_cpu(0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n, dt);
}

/* best of 7 timed calls after one warm-up, GFLOP/s */
static double rate(sw_dtype dt, int m, int n, int k)
{
    const size_t es = dt == SW_BF16 ? sizeof(uint16_t) : sizeof(float);
    char *a = malloc(es * (size_t)m * k), *b = malloc(es * (size_t)n * k);
    float *c = malloc(sizeof(float) * (size_t)m * n);
    if (!a || !b || !c) { perror("malloc"); exit(1); }
    for (long i = 0; i < (long)m * k; i++) { /* 1/(1 + i%7) as fp32, or its upper half (a bf16 near it) */
        const float x = 1.0f / (1 + i % 7);
        memcpy(a + i * es, (const char *)&x + sizeof(float) - es, es);
    }
    for (long i = 0; i < (long)n * k; i++) {
        const float x = 1.0f / (1 + i % 5);
        memcpy(b + i * es, (const char *)&x + sizeof(float) - es, es);
    }
    gemm(dt, m, n, k, a, b, c);
    double best = 0;
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        gemm(dt, m, n, k, a, b, c);
        double g = 2.0 * m * n * (double)k / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    free(a), free(b), free(c);
    return best;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    if (n <= 0) { fprintf(stderr, "usage: sgemm_peak [n > 0]\n"); return 2; }
    openblas_set_num_threads(1);
    const sw_gemm_backend backends[2] = {SW_GEMM_OPENBLAS, SW_GEMM_ONEDNN};
    double tile[2] = {0, 0};
    int best = 0;
    for (int i = 0; i < 2; i++) { /* the backends of this build, described as sw_init reports them */
        char what[160];
        if (sw_gemm_set_backend(backends[i], NULL, 0) < 0) continue;
        sw_gemm_describe(what, sizeof what);
        tile[i] = rate(SW_F32, 64, 2304, 768);
        const double cube = rate(SW_F32, n, n, n);
        printf("sgemm_gflops_1core %s tile_64x2304x768 %.1f n%d %.1f (%s)\n", sw_gemm_backend_name(backends[i]),
               tile[i], n, cube, what);
        if (tile[i] > tile[best]) best = i;
        if (sw_gemm_bf16_native())
            printf("bf16_gflops_1core %s tile_64x2304x768 %.1f n%d %.1f\n", sw_gemm_backend_name(backends[i]),
                   rate(SW_BF16, 64, 2304, 768), n, rate(SW_BF16, n, n, n));
    }
    printf("sgemm_best_gflops_1core %s %.1f\n", sw_gemm_backend_name(backends[best]), tile[best]);
    return 0;
}
