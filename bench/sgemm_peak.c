/* Single-core sgemm throughput (one OpenBLAS thread), the roofline of one
 * StarPU worker. Prints "sgemm_gflops_1core <value>". */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    if (n <= 0) { fprintf(stderr, "usage: sgemm_peak [n > 0]\n"); return 2; }
    openblas_set_num_threads(1);
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    if (!a || !b || !c) return 1;
    for (long i = 0; i < (long)n * n; i++) a[i] = b[i] = 1.0f / (1 + i % 7), c[i] = 0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double g = 2.0 * n * n * (double)n / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    printf("sgemm_gflops_1core %.1f (n = %d, best of 5)\n", best, n);
    free(a); free(b); free(c);
    return 0;
}
