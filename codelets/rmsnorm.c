/* RMSNorm over the columns of each row, y = w * x * rstd,
 * rstd = 1 / sqrt(mean(x^2) + eps), computed in fp32.
 *   fwd: x[r,c], w[c] -> y[r,c], rstd[r]
 *   bwd: dy[r,c], x, w, rstd -> dx[r,c] (= or +=), dw_part[c]
 * dw_part, the column sum over the tile's rows, accumulates in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

/* buffers: x, w, y, rstd */
static void rmsnorm_fwd_cpu(void *buffers[], void *cl_arg)
{
    float eps;
    starpu_codelet_unpack_args(cl_arg, &eps);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[2]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[2]) == R && SW_COLS_OF(buffers[2]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[3]) == R);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[2]), *rstd = SW_F32_OF(buffers[3]);
    const int64_t incr = sw_vec_inc(buffers[3]);
    float *tw;
    const float *w = sw_vec_in(buffers[1], &tw);
    const float invC = 1.0f / (float)C;

    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        sw_vf sq = {0}, v;
        int64_t c = 0;
        for (; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(v, xr + c);
            sq += v * v;
        }
        float ss = sw_vsum(&sq);
        for (; c < C; c++) ss += xr[c] * xr[c];
        const float s = 1.0f / sqrtf(ss * invC + eps);
        for (c = 0; c < C; c++) yr[c] = w[c] * (xr[c] * s);
        rstd[r * incr] = s;
    }
    free(tw);
}

struct rms_bwd_args {
    int accumulate;
};

/* buffers: dy, x, w, rstd, dx, dw_part */
static void rmsnorm_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct rms_bwd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[1]), C = SW_COLS_OF(buffers[1]);
    const int64_t lddy = SW_LD_OF(buffers[0]), ldx = SW_LD_OF(buffers[1]), lddx = SW_LD_OF(buffers[4]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[0]) == R && SW_COLS_OF(buffers[0]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[4]) == R && SW_COLS_OF(buffers[4]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[2]) == C && SW_NUMEL_OF(buffers[5]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[3]) == R);
    const float *dy = SW_F32_OF(buffers[0]), *x = SW_F32_OF(buffers[1]), *rstd = SW_F32_OF(buffers[3]);
    const int64_t incr = sw_vec_inc(buffers[3]);
    float *dx = SW_F32_OF(buffers[4]);
    float *tw;
    const float *w = sw_vec_in(buffers[2], &tw);
    double *dw = calloc((size_t)C, sizeof(double));
    STARPU_ASSERT_MSG(dw, "out of memory");
    const float invC = 1.0f / (float)C;

    for (int64_t r = 0; r < R; r++) {
        const float *dyr = dy + r * lddy, *xr = x + r * ldx;
        float *dxr = dx + r * lddx;
        const float s = rstd[r * incr];
        /* g = dy * w; dx = s * g - x * s^3 * mean(g * x) */
        sw_vf acc = {0}, vx, vdy, vw;
        int64_t c = 0;
        for (; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(vx, xr + c);
            SW_VLOAD(vdy, dyr + c);
            SW_VLOAD(vw, w + c);
            acc += vdy * vw * vx;
        }
        float t = sw_vsum(&acc);
        for (; c < C; c++) t += dyr[c] * w[c] * xr[c];
        const float k = s * s * s * t * invC;
        if (a.accumulate) {
            for (c = 0; c < C; c++) {
                dxr[c] += s * dyr[c] * w[c] - k * xr[c];
                dw[c] += (double)(dyr[c] * xr[c] * s);
            }
        } else {
            for (c = 0; c < C; c++) {
                dxr[c] = s * dyr[c] * w[c] - k * xr[c];
                dw[c] += (double)(dyr[c] * xr[c] * s);
            }
        }
    }
    float *dwp = SW_F32_OF(buffers[5]);
    const int64_t incw = sw_vec_inc(buffers[5]);
    for (int64_t c = 0; c < C; c++) dwp[c * incw] = (float)dw[c];
    free(dw);
    free(tw);
}

#ifdef STARWEAVE_USE_CUDA
/* buffers as rmsnorm_fwd_cpu */
static void rmsnorm_fwd_cuda(void *buffers[], void *cl_arg)
{
    float eps;
    starpu_codelet_unpack_args(cl_arg, &eps);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[2]) == R && SW_COLS_OF(buffers[2]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[3]) == R);
    SW_CUDA_CHECK(sw_cuda_rmsnorm_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                      sw_vec_inc(buffers[1]), SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]),
                                      SW_F32_OF(buffers[3]), sw_vec_inc(buffers[3]), R, C, eps,
                                      starpu_cuda_get_local_stream()));
}

/* buffers as rmsnorm_bwd_cpu */
static void rmsnorm_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct rms_bwd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[1]), C = SW_COLS_OF(buffers[1]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[0]) == R && SW_COLS_OF(buffers[0]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[4]) == R && SW_COLS_OF(buffers[4]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[2]) == C && SW_NUMEL_OF(buffers[5]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[3]) == R);
    SW_CUDA_CHECK(sw_cuda_rmsnorm_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                      SW_LD_OF(buffers[1]), SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]),
                                      SW_F32_OF(buffers[3]), sw_vec_inc(buffers[3]), SW_F32_OF(buffers[4]),
                                      SW_LD_OF(buffers[4]), SW_F32_OF(buffers[5]), sw_vec_inc(buffers[5]), R, C,
                                      a.accumulate, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(rmsnorm_fwd_model, "sw_rmsnorm_fwd");
SW_PERFMODEL(rmsnorm_bwd_model, "sw_rmsnorm_bwd");

static struct starpu_codelet rmsnorm_fwd_cl = {
    .cpu_funcs = {rmsnorm_fwd_cpu},
    .cpu_funcs_name = {"rmsnorm_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {rmsnorm_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_R, STARPU_W, STARPU_W},
    .model = &rmsnorm_fwd_model,
    .name = "rmsnorm_fwd",
};

/* dx is W or RW depending on accumulate: modes come from the insert call. */
static struct starpu_codelet rmsnorm_bwd_cl = {
    .cpu_funcs = {rmsnorm_bwd_cpu},
    .cpu_funcs_name = {"rmsnorm_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {rmsnorm_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &rmsnorm_bwd_model,
    .name = "rmsnorm_bwd",
};

void sw_rmsnorm_fwd(starpu_data_handle_t x, starpu_data_handle_t w, starpu_data_handle_t y,
                    starpu_data_handle_t rstd, float eps)
{
    SW_ONE_PER_COL("sw_rmsnorm_fwd", w, x);
    SW_SAME_SHAPE("sw_rmsnorm_fwd", x, y);
    SW_ONE_PER_ROW("sw_rmsnorm_fwd", rstd, x);
    SW_INSERT(&rmsnorm_fwd_cl, STARPU_R, x, STARPU_R, w, STARPU_W, y, STARPU_W, rstd, STARPU_VALUE, &eps,
              sizeof eps);
}

void sw_rmsnorm_bwd(starpu_data_handle_t dy, starpu_data_handle_t x, starpu_data_handle_t w,
                    starpu_data_handle_t rstd, starpu_data_handle_t dx,
                    starpu_data_handle_t dw_part, int accumulate)
{
    SW_SAME_SHAPE("sw_rmsnorm_bwd", x, dy);
    SW_SAME_SHAPE("sw_rmsnorm_bwd", x, dx);
    SW_ONE_PER_COL("sw_rmsnorm_bwd", w, x);
    SW_ONE_PER_COL("sw_rmsnorm_bwd", dw_part, x);
    SW_ONE_PER_ROW("sw_rmsnorm_bwd", rstd, x);
    struct rms_bwd_args a = {accumulate != 0};
    SW_INSERT(&rmsnorm_bwd_cl, STARPU_R, dy, STARPU_R, x, STARPU_R, w, STARPU_R, rstd,
              a.accumulate ? STARPU_RW : STARPU_W, dx, STARPU_W, dw_part, STARPU_VALUE, &a, sizeof a);
}
