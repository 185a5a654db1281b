/* LayerNorm over the columns of each row.
 *   fwd: x[r,c], w[c], b[c] -> y[r,c], mean[r], rstd[r]
 *   bwd: dy[r,c], x, w, mean, rstd -> dx[r,c] (= or +=), dw_part[c], db_part[c]
 * Row statistics in fp32 (two passes for the variance); the weight-gradient
 * column sums over the tile's rows accumulate in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

/* buffers: x, w, b, y, mean, rstd */
static void layernorm_fwd_cpu(void *buffers[], void *cl_arg)
{
    float eps;
    starpu_codelet_unpack_args(cl_arg, &eps);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[3]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C && SW_NUMEL_OF(buffers[2]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[3]) == R && SW_COLS_OF(buffers[3]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[4]) == R && SW_NUMEL_OF(buffers[5]) == R);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[3]), *mean = SW_F32_OF(buffers[4]), *rstd = SW_F32_OF(buffers[5]);
    const int64_t incm = sw_vec_inc(buffers[4]), incr = sw_vec_inc(buffers[5]);
    float *tw, *tb;
    const float *w = sw_vec_in(buffers[1], &tw), *b = sw_vec_in(buffers[2], &tb);
    const float invC = 1.0f / (float)C;

    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        sw_vf acc = {0}, v;
        int64_t c = 0;
        for (; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(v, xr + c);
            acc += v;
        }
        float sum = sw_vsum(&acc);
        for (; c < C; c++) sum += xr[c];
        const float m = sum * invC;
        /* two passes: the variance of the centred values does not cancel */
        sw_vf sq = {0};
        for (c = 0; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(v, xr + c);
            v -= m;
            sq += v * v;
        }
        float ss = sw_vsum(&sq);
        for (; c < C; c++) ss += (xr[c] - m) * (xr[c] - m);
        const float s = 1.0f / sqrtf(ss * invC + eps);
        for (c = 0; c < C; c++) yr[c] = (xr[c] - m) * s * w[c] + b[c];
        mean[r * incm] = m;
        rstd[r * incr] = s;
    }
    free(tw);
    free(tb);
}

struct ln_bwd_args {
    int accumulate;
};

/* buffers: dy, x, w, mean, rstd, dx, dw_part, db_part */
static void layernorm_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct ln_bwd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[1]), C = SW_COLS_OF(buffers[1]);
    const int64_t lddy = SW_LD_OF(buffers[0]), ldx = SW_LD_OF(buffers[1]), lddx = SW_LD_OF(buffers[5]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[0]) == R && SW_COLS_OF(buffers[0]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[5]) == R && SW_COLS_OF(buffers[5]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[2]) == C && SW_NUMEL_OF(buffers[6]) == C &&
                  SW_NUMEL_OF(buffers[7]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[3]) == R && SW_NUMEL_OF(buffers[4]) == R);
    const float *dy = SW_F32_OF(buffers[0]), *x = SW_F32_OF(buffers[1]);
    const float *mean = SW_F32_OF(buffers[3]), *rstd = SW_F32_OF(buffers[4]);
    const int64_t incm = sw_vec_inc(buffers[3]), incr = sw_vec_inc(buffers[4]);
    float *dx = SW_F32_OF(buffers[5]);
    float *tw;
    const float *w = sw_vec_in(buffers[2], &tw);
    double *dw = calloc((size_t)(2 * C), sizeof(double));
    STARPU_ASSERT_MSG(dw, "out of memory");
    double *db = dw + C;
    const float invC = 1.0f / (float)C;

    for (int64_t r = 0; r < R; r++) {
        const float *dyr = dy + r * lddy, *xr = x + r * ldx;
        float *dxr = dx + r * lddx;
        const float m = mean[r * incm], s = rstd[r * incr];
        /* g = dy * w; dx = s * (g - mean(g) - xhat * mean(g * xhat)) */
        sw_vf a1 = {0}, a2 = {0}, vx, vdy, vw;
        int64_t c = 0;
        for (; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(vx, xr + c);
            SW_VLOAD(vdy, dyr + c);
            SW_VLOAD(vw, w + c);
            sw_vf g = vdy * vw;
            a1 += g;
            a2 += g * ((vx - m) * s);
        }
        float t1 = sw_vsum(&a1), t2 = sw_vsum(&a2);
        for (; c < C; c++) {
            float g = dyr[c] * w[c];
            t1 += g;
            t2 += g * ((xr[c] - m) * s);
        }
        const float mg = t1 * invC, mgx = t2 * invC;
        if (a.accumulate) {
            for (c = 0; c < C; c++) {
                float xh = (xr[c] - m) * s;
                dxr[c] += s * (dyr[c] * w[c] - mg - xh * mgx);
                dw[c] += (double)(dyr[c] * xh);
                db[c] += (double)dyr[c];
            }
        } else {
            for (c = 0; c < C; c++) {
                float xh = (xr[c] - m) * s;
                dxr[c] = s * (dyr[c] * w[c] - mg - xh * mgx);
                dw[c] += (double)(dyr[c] * xh);
                db[c] += (double)dyr[c];
            }
        }
    }
    float *dwp = SW_F32_OF(buffers[6]), *dbp = SW_F32_OF(buffers[7]);
    const int64_t incw = sw_vec_inc(buffers[6]), incb = sw_vec_inc(buffers[7]);
    for (int64_t c = 0; c < C; c++) {
        dwp[c * incw] = (float)dw[c];
        dbp[c * incb] = (float)db[c];
    }
    free(dw);
    free(tw);
}

#ifdef STARWEAVE_USE_CUDA
/* buffers as layernorm_fwd_cpu */
static void layernorm_fwd_cuda(void *buffers[], void *cl_arg)
{
    float eps;
    starpu_codelet_unpack_args(cl_arg, &eps);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C && SW_NUMEL_OF(buffers[2]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[3]) == R && SW_COLS_OF(buffers[3]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[4]) == R && SW_NUMEL_OF(buffers[5]) == R);
    SW_CUDA_CHECK(sw_cuda_layernorm_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                        sw_vec_inc(buffers[1]), SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]),
                                        SW_F32_OF(buffers[3]), SW_LD_OF(buffers[3]), SW_F32_OF(buffers[4]),
                                        sw_vec_inc(buffers[4]), SW_F32_OF(buffers[5]), sw_vec_inc(buffers[5]), R, C,
                                        eps, starpu_cuda_get_local_stream()));
}

/* buffers as layernorm_bwd_cpu */
static void layernorm_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct ln_bwd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[1]), C = SW_COLS_OF(buffers[1]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[0]) == R && SW_COLS_OF(buffers[0]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[5]) == R && SW_COLS_OF(buffers[5]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[2]) == C && SW_NUMEL_OF(buffers[6]) == C &&
                  SW_NUMEL_OF(buffers[7]) == C);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[3]) == R && SW_NUMEL_OF(buffers[4]) == R);
    SW_CUDA_CHECK(sw_cuda_layernorm_bwd(
        SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]), SW_LD_OF(buffers[1]),
        SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]), SW_F32_OF(buffers[3]), sw_vec_inc(buffers[3]),
        SW_F32_OF(buffers[4]), sw_vec_inc(buffers[4]), SW_F32_OF(buffers[5]), SW_LD_OF(buffers[5]),
        SW_F32_OF(buffers[6]), sw_vec_inc(buffers[6]), SW_F32_OF(buffers[7]), sw_vec_inc(buffers[7]), R, C,
        a.accumulate, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(layernorm_fwd_model, "sw_layernorm_fwd");
SW_PERFMODEL(layernorm_bwd_model, "sw_layernorm_bwd");

static struct starpu_codelet layernorm_fwd_cl = {
    .cpu_funcs = {layernorm_fwd_cpu},
    .cpu_funcs_name = {"layernorm_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {layernorm_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 6,
    .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W},
    .model = &layernorm_fwd_model,
    .name = "layernorm_fwd",
};

/* dx is W or RW depending on accumulate: modes come from the insert call. */
static struct starpu_codelet layernorm_bwd_cl = {
    .cpu_funcs = {layernorm_bwd_cpu},
    .cpu_funcs_name = {"layernorm_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {layernorm_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &layernorm_bwd_model,
    .name = "layernorm_bwd",
};

void sw_layernorm_fwd(starpu_data_handle_t x, starpu_data_handle_t w, starpu_data_handle_t b,
                      starpu_data_handle_t y, starpu_data_handle_t mean, starpu_data_handle_t rstd,
                      float eps)
{
    SW_ONE_PER_COL("sw_layernorm_fwd", w, x);
    SW_ONE_PER_COL("sw_layernorm_fwd", b, x);
    SW_SAME_SHAPE("sw_layernorm_fwd", x, y);
    SW_ONE_PER_ROW("sw_layernorm_fwd", mean, x);
    SW_ONE_PER_ROW("sw_layernorm_fwd", rstd, x);
    SW_INSERT(&layernorm_fwd_cl, STARPU_R, x, STARPU_R, w, STARPU_R, b, STARPU_W, y, STARPU_W, mean,
              STARPU_W, rstd, STARPU_VALUE, &eps, sizeof eps);
}

void sw_layernorm_bwd(starpu_data_handle_t dy, starpu_data_handle_t x, starpu_data_handle_t w,
                      starpu_data_handle_t mean, starpu_data_handle_t rstd,
                      starpu_data_handle_t dx, starpu_data_handle_t dw_part,
                      starpu_data_handle_t db_part, int accumulate)
{
    SW_SAME_SHAPE("sw_layernorm_bwd", x, dy);
    SW_SAME_SHAPE("sw_layernorm_bwd", x, dx);
    SW_ONE_PER_COL("sw_layernorm_bwd", w, x);
    SW_ONE_PER_COL("sw_layernorm_bwd", dw_part, x);
    SW_ONE_PER_COL("sw_layernorm_bwd", db_part, x);
    SW_ONE_PER_ROW("sw_layernorm_bwd", mean, x);
    SW_ONE_PER_ROW("sw_layernorm_bwd", rstd, x);
    struct ln_bwd_args a = {accumulate != 0};
    SW_INSERT(&layernorm_bwd_cl, STARPU_R, dy, STARPU_R, x, STARPU_R, w, STARPU_R, mean, STARPU_R, rstd,
              a.accumulate ? STARPU_RW : STARPU_W, dx, STARPU_W, dw_part, STARPU_W, db_part, STARPU_VALUE,
              &a, sizeof a);
}
