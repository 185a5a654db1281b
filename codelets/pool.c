/* Pooling over a sequence, on rows in [s, b] order (row i*B + b is local
 * position i of sequence b; B = the output's rows):
 *   fwd: y[b,c] = alpha * sum_{i = p0 .. p0+np-1} x[i*B + b, c] (in double;
 *        np = 0 writes zeros)
 *   bwd: dx[i*B + b, c] = alpha * dy[b,c] for i in p0 .. p0+np-1, else 0
 * Mean pooling is every position with alpha = 1/seq, first-token pooling
 * position 0 alone with alpha 1 (the layer, graphs/heads.c, picks them). */
#include <stdlib.h>

#include "codelet_util.h"
#include "starweave/ops.h"

struct pool_args {
    int64_t p0, np;
    float alpha;
};

/* buffers: x [n,h] (R), y [B,h] (W) */
static void pool_fwd_cpu(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t B = SW_ROWS_OF(buffers[1]), C = SW_COLS_OF(buffers[1]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t i = a.p0; i < a.p0 + a.np; i++) s += (double)x[(i * B + b) * ldx + c];
            y[b * ldy + c] = (float)((double)a.alpha * s);
        }
}

/* buffers: dy [B,h] (R), dx [n,h] (W) */
static void pool_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t B = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), n = SW_ROWS_OF(buffers[1]);
    const int64_t ldy = SW_LD_OF(buffers[0]), ldx = SW_LD_OF(buffers[1]);
    const float *dy = SW_F32_OF(buffers[0]);
    float *dx = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < n; r++) {
        const int64_t i = r / B, b = r % B;
        const int in = i >= a.p0 && i < a.p0 + a.np;
        for (int64_t c = 0; c < C; c++) dx[r * ldx + c] = in ? a.alpha * dy[b * ldy + c] : 0.0f;
    }
}

#ifdef STARWEAVE_USE_CUDA
static void pool_fwd_cuda(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    SW_CUDA_CHECK(sw_cuda_pool_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]), a.p0, a.np,
                                   a.alpha, starpu_cuda_get_local_stream()));
}

static void pool_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    SW_CUDA_CHECK(sw_cuda_pool_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                   SW_ROWS_OF(buffers[1]), a.p0, a.np, a.alpha, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(pool_fwd_model, "sw_pool_fwd");
SW_PERFMODEL(pool_bwd_model, "sw_pool_bwd");

static struct starpu_codelet pool_fwd_cl = {
    .cpu_funcs = {pool_fwd_cpu},
    .cpu_funcs_name = {"pool_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {pool_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &pool_fwd_model,
    .name = "pool_fwd",
};

static struct starpu_codelet pool_bwd_cl = {
    .cpu_funcs = {pool_bwd_cpu},
    .cpu_funcs_name = {"pool_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {pool_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &pool_bwd_model,
    .name = "pool_bwd",
};

/* rows of the sequence side a whole number of positions, the range inside them */
static void check_pool(const char *op, starpu_data_handle_t seq, starpu_data_handle_t pooled, int64_t p0, int64_t np)
{
    SW_REQUIRE_MATRIX(op, seq);
    SW_REQUIRE_MATRIX(op, pooled);
    int64_t n = starpu_matrix_get_ny(seq), B = starpu_matrix_get_ny(pooled);
    if (starpu_matrix_get_nx(seq) != starpu_matrix_get_nx(pooled) || B == 0 || n % B != 0)
        sw_failf(__FILE__, __LINE__, "%s: rows [%lu,%lu] must be whole positions of pooled [%lu,%lu]", op, SW_DIMS(seq),
                 SW_DIMS(pooled));
    if (p0 < 0 || np < 0 || p0 + np > n / B)
        sw_failf(__FILE__, __LINE__, "%s: positions %ld .. %ld outside the %ld positions of the rows", op, (long)p0,
                 (long)(p0 + np), (long)(n / B));
}

void sw_pool_fwd(starpu_data_handle_t x, starpu_data_handle_t y, int64_t p0, int64_t np, float alpha)
{
    check_pool("sw_pool_fwd", x, y, p0, np);
    struct pool_args a = {p0, np, alpha};
    SW_INSERT(&pool_fwd_cl, STARPU_R, x, STARPU_W, y, STARPU_VALUE, &a, sizeof a);
}

void sw_pool_bwd(starpu_data_handle_t dy, starpu_data_handle_t dx, int64_t p0, int64_t np, float alpha)
{
    check_pool("sw_pool_bwd", dx, dy, p0, np);
    struct pool_args a = {p0, np, alpha};
    SW_INSERT(&pool_bwd_cl, STARPU_R, dy, STARPU_W, dx, STARPU_VALUE, &a, sizeof a);
}
