/* GEMM through CBLAS (CPU) and cuBLAS (CUDA): C[m,n] = alpha op(A) op(B) +
 * beta C (+ bias row). OpenBLAS runs single-threaded inside the task;
 * parallelism comes from tiling in the graph builders. */
#include <cblas.h>
#include <string.h>

#include "codelet_util.h"
#include "starweave/ops.h"
#ifdef STARWEAVE_USE_CUDA
#include <starpu_cublas_v2.h>

#include "simd.h"
#endif

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

#ifdef STARWEAVE_USE_CUDA
/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
 * gets B first, with the worker's handle (bound to its stream by
 * starpu_cublas_init). fp32 throughout: cuBLAS's default math mode uses no
 * TF32. */
static void gemm_cublas(const struct gemm_args *g, int m, int n, int k, const float *A, int lda, const float *B,
                        int ldb, float beta, float *C, int ldc)
{
    cublasStatus_t st = cublasSgemm(starpu_cublas_get_local_handle(), g->transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    g->transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &g->alpha, B, ldb, A, lda,
                                    &beta, C, ldc);
    if (st != CUBLAS_STATUS_SUCCESS) STARPU_CUBLAS_REPORT_ERROR(st);
}

static void gemm_cuda(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    gemm_cublas(&g, m, n, k, SW_F32_OF(buffers[0]), (int)SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                (int)SW_LD_OF(buffers[1]), g.beta, SW_F32_OF(buffers[2]), (int)SW_LD_OF(buffers[2]));
}

static void gemm_bias_cuda(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    float *c = SW_F32_OF(buffers[3]);
    const int64_t ldc = SW_LD_OF(buffers[3]);
    SW_CUDA_CHECK(sw_cuda_bias_rows(c, ldc, SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]), m, n,
                                    starpu_cuda_get_local_stream()));
    gemm_cublas(&g, m, n, k, SW_F32_OF(buffers[0]), (int)SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                (int)SW_LD_OF(buffers[1]), 1.0f, c, (int)ldc);
}
#endif

SW_PERFMODEL(gemm_model, "sw_gemm");
SW_PERFMODEL(gemm_bias_model, "sw_gemm_bias");

/* C's mode depends on beta: with STARPU_VARIABLE_NBUFFERS the modes come
 * from each starpu_task_insert call (a fixed codelet mode must match). */
static struct starpu_codelet gemm_cl = {
    .cpu_funcs = {gemm_cpu},
    .cpu_funcs_name = {"gemm_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {gemm_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gemm_model,
    .name = "gemm",
};

static struct starpu_codelet gemm_bias_cl = {
    .cpu_funcs = {gemm_bias_cpu},
    .cpu_funcs_name = {"gemm_bias_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {gemm_bias_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
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
