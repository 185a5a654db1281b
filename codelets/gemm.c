/* GEMM through CBLAS: C[m,n] = alpha op(A) op(B) + beta C (+ bias row).
 * OpenBLAS runs single-threaded inside the task; parallelism comes from
 * tiling in the graph builders. */
#include <cblas.h>
#include <string.h>

#include "codelet_util.h"
#include "starweave/ops.h"

struct gemm_args {
    int transA, transB;
    float alpha, beta;
};

static void gemm_dims(void *buffers[], const struct gemm_args *g, int *m, int *n, int *k)
{
    *m = (int)(g->transA ? SW_COLS_OF(buffers[0]) : SW_ROWS_OF(buffers[0]));
    *k = (int)(g->transA ? SW_ROWS_OF(buffers[0]) : SW_COLS_OF(buffers[0]));
    *n = (int)(g->transB ? SW_ROWS_OF(buffers[1]) : SW_COLS_OF(buffers[1]));
}

static void gemm_cpu(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans, g.transB ? CblasTrans : CblasNoTrans,
                m, n, k, g.alpha, SW_F32_OF(buffers[0]), (int)SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                (int)SW_LD_OF(buffers[1]), g.beta, SW_F32_OF(buffers[2]), (int)SW_LD_OF(buffers[2]));
}

/* buffers: A, B, bias[1,n], C */
static void gemm_bias_cpu(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    const float *bias = SW_F32_OF(buffers[2]);
    float *c = SW_F32_OF(buffers[3]);
    int64_t ldc = SW_LD_OF(buffers[3]);
    for (int i = 0; i < m; i++) memcpy(c + i * ldc, bias, sizeof(float) * (size_t)n);
    cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans, g.transB ? CblasTrans : CblasNoTrans,
                m, n, k, 1.0f, SW_F32_OF(buffers[0]), (int)SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                (int)SW_LD_OF(buffers[1]), 1.0f, c, (int)ldc);
}

SW_PERFMODEL(gemm_model, "sw_gemm");
SW_PERFMODEL(gemm_bias_model, "sw_gemm_bias");

/* C's mode depends on beta: with STARPU_VARIABLE_NBUFFERS the modes come
 * from each starpu_task_insert call (a fixed codelet mode must match). */
static struct starpu_codelet gemm_cl = {
    .cpu_funcs = {gemm_cpu},
    .cpu_funcs_name = {"gemm_cpu"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gemm_model,
    .name = "gemm",
};

static struct starpu_codelet gemm_bias_cl = {
    .cpu_funcs = {gemm_bias_cpu},
    .cpu_funcs_name = {"gemm_bias_cpu"},
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W},
    .model = &gemm_bias_model,
    .name = "gemm_bias",
};

static double gemm_flops(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB)
{
    double m = transA ? starpu_matrix_get_nx(A) : starpu_matrix_get_ny(A);
    double k = transA ? starpu_matrix_get_ny(A) : starpu_matrix_get_nx(A);
    double n = transB ? starpu_matrix_get_ny(B) : starpu_matrix_get_nx(B);
    return 2.0 * m * n * k;
}

void sw_gemm(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB,
             starpu_data_handle_t C, float alpha, float beta)
{
    struct gemm_args g = {transA, transB, alpha, beta};
    SW_INSERT(&gemm_cl, STARPU_R, A, STARPU_R, B, beta == 0.0f ? STARPU_W : STARPU_RW, C,
              STARPU_VALUE, &g, sizeof g, STARPU_FLOPS, gemm_flops(A, transA, B, transB));
}

void sw_gemm_bias(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB,
                  starpu_data_handle_t bias, starpu_data_handle_t C)
{
    struct gemm_args g = {transA, transB, 1.0f, 1.0f};
    SW_INSERT(&gemm_bias_cl, STARPU_R, A, STARPU_R, B, STARPU_R, bias, STARPU_W, C, STARPU_VALUE, &g,
              sizeof g, STARPU_FLOPS, gemm_flops(A, transA, B, transB));
}
