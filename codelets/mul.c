/* Element-wise product.
 *   mul: x[r,c] * y[r,c] -> z[r,c] */

#include "codelet_util.h"
#include "starweave/ops.h"

/* buffers: x, y, z */
static void mul_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    for (int i = 1; i < 3; i++) STARPU_ASSERT(SW_ROWS_OF(buffers[i]) == R && SW_COLS_OF(buffers[i]) == C);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]), ldz = SW_LD_OF(buffers[2]);
    const float *x = SW_F32_OF(buffers[0]), *y = SW_F32_OF(buffers[1]);
    float *z = SW_F32_OF(buffers[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx, *yr = y + r * ldy;
        float *zr = z + r * ldz;
        for (int64_t c = 0; c < C; c++) zr[c] = xr[c] * yr[c];
    }
}

#ifdef STARWEAVE_USE_CUDA
static void mul_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    for (int i = 1; i < 3; i++) STARPU_ASSERT(SW_ROWS_OF(buffers[i]) == R && SW_COLS_OF(buffers[i]) == C);
    SW_CUDA_CHECK(sw_cuda_mul(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]), SW_LD_OF(buffers[1]),
                              SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]), R, C, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(mul_model, "sw_mul");

static struct starpu_codelet mul_cl = {
    .cpu_funcs = {mul_cpu},
    .cpu_funcs_name = {"mul_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {mul_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &mul_model,
    .name = "mul",
};

void sw_mul(starpu_data_handle_t x, starpu_data_handle_t y, starpu_data_handle_t z)
{
    SW_SAME_SHAPE("sw_mul", x, y);
    SW_SAME_SHAPE("sw_mul", x, z);
    SW_INSERT(&mul_cl, STARPU_R, x, STARPU_R, y, STARPU_W, z);
}
