/* Single-core sgemm throughput of every CPU GEMM backend of the build (one
 * thread), the roofline of one StarPU worker: on a W124 tile (C[64, 2304]
 * = A[64, 768] B^T, the QKV projection of one row tile) and at n^3. Prints
 * "sgemm_gflops_1core BACKEND TILE N3 (library, ISA)" per backend, then
 * "sgemm_best_gflops_1core BACKEND GFLOPS" (the best tile rate).
 * usage: sgemm_peak [n]   (default 1024) */
#include "config.h"

#include <cblas.h>
#include <starweave.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef STARWEAVE_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
void omp_set_num_threads(int n);
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* C[m,n] = A[m,k] B[n,k]^T, row-major, as the layers call it */
static void gemm(int backend, int m, int n, int k, const float *a, const float *b, float *c)
{
#ifdef STARWEAVE_HAVE_ONEDNN
    if (backend == 1) {
        dnnl_sgemm('N', 'T', m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
        return;
    }
#endif
    (void)backend;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
}

/* best of 7 timed calls after one warm-up, GFLOP/s */
static double rate(int backend, int m, int n, int k)
{
    float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)n * k);
    float *c = malloc(sizeof(float) * (size_t)m * n);
    if (!a || !b || !c) { perror("malloc"); exit(1); }
    for (long i = 0; i < (long)m * k; i++) a[i] = 1.0f / (1 + i % 7);
    for (long i = 0; i < (long)n * k; i++) b[i] = 1.0f / (1 + i % 5);
    gemm(backend, m, n, k, a, b, c);
    double best = 0;
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        gemm(backend, m, n, k, a, b, c);
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
    char what[2][128] = {"", ""};
    int nb = 0;
    for (int be = 0; be < 2; be++) /* the backends of this build, described as sw_init reports them */
        if (sw_gemm_set_backend(be ? SW_GEMM_ONEDNN : SW_GEMM_OPENBLAS, NULL, 0) >= 0)
            sw_gemm_describe(what[be], sizeof what[be]), nb = be + 1;
#ifdef STARWEAVE_HAVE_ONEDNN
    omp_set_num_threads(1);
#endif
    int best = 0;
    double tile[2] = {0, 0};
    for (int be = 0; be < nb; be++) {
        tile[be] = rate(be, 64, 2304, 768);
        double cube = rate(be, n, n, n);
        printf("sgemm_gflops_1core %s tile_64x2304x768 %.1f n%d %.1f (%s)\n", sw_gemm_backend_name(be ? SW_GEMM_ONEDNN : SW_GEMM_OPENBLAS), tile[be], n,
               cube, what[be]);
        if (tile[be] > tile[best]) best = be;
    }
    printf("sgemm_best_gflops_1core %s %.1f\n", sw_gemm_backend_name(best ? SW_GEMM_ONEDNN : SW_GEMM_OPENBLAS),
           tile[best]);
    return 0;
}
