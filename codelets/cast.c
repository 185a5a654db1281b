/* Casts between fp32 and bf16 (--dtype bf16: the GEMM operands). The
 * direction follows the element sizes of the two buffers (4 -> 2: round to
 * nearest even, 2 -> 4: exact, see bf16.h); both have the same shape and
 * may be strided tiles. */
#include "bf16.h"
#include "codelet_util.h"
#include "starweave/ops.h"
#ifdef STARWEAVE_USE_CUDA
#include "cuda/kernels.h"
#endif

#define ELEM_OF(buf) STARPU_MATRIX_GET_ELEMSIZE(buf)

static void cast_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t lds = SW_LD_OF(buffers[0]), ldd = SW_LD_OF(buffers[1]);
    if (ELEM_OF(buffers[0]) == sizeof(float)) {
        const float *s = SW_F32_OF(buffers[0]);
        uint16_t *d = (uint16_t *)STARPU_MATRIX_GET_PTR(buffers[1]);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) d[r * ldd + c] = sw_bf16_from_f32(s[r * lds + c]);
        sw_counter_add(SW_COUNT_CAST_BF16, R * C);
    } else {
        const uint16_t *s = (const uint16_t *)STARPU_MATRIX_GET_PTR(buffers[0]);
        float *d = SW_F32_OF(buffers[1]);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) d[r * ldd + c] = sw_f32_from_bf16(s[r * lds + c]);
    }
}

#ifdef STARWEAVE_USE_CUDA
static void cast_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    void *s = (void *)STARPU_MATRIX_GET_PTR(buffers[0]), *d = (void *)STARPU_MATRIX_GET_PTR(buffers[1]);
    if (ELEM_OF(buffers[0]) == sizeof(float)) sw_counter_add(SW_COUNT_CAST_BF16, R * C);
    SW_CUDA_CHECK(ELEM_OF(buffers[0]) == sizeof(float)
                      ? sw_cuda_cast_to_bf16((const float *)s, SW_LD_OF(buffers[0]), (uint16_t *)d,
                                             SW_LD_OF(buffers[1]), R, C, starpu_cuda_get_local_stream())
                      : sw_cuda_cast_from_bf16((const uint16_t *)s, SW_LD_OF(buffers[0]), (float *)d,
                                               SW_LD_OF(buffers[1]), R, C, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(cast_model, "sw_cast");
static struct starpu_codelet cast_cl = {
    .cpu_funcs = {cast_cpu},
    .cpu_funcs_name = {"cast_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {cast_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &cast_model,
    .name = "cast",
};

void sw_cast(starpu_data_handle_t src, starpu_data_handle_t dst)
{
    SW_SAME_SHAPE("sw_cast", src, dst);
    const size_t es = starpu_matrix_get_elemsize(src), ed = starpu_matrix_get_elemsize(dst);
    if (!((es == 4 && ed == 2) || (es == 2 && ed == 4)))
        sw_failf(__FILE__, __LINE__, "sw_cast: fp32 <-> bf16 only (element sizes %zu -> %zu)", es, ed);
    SW_INSERT(&cast_cl, STARPU_R, src, STARPU_W, dst);
}

starpu_data_handle_t sw_cast_bf16_temp(starpu_data_handle_t src)
{
    starpu_data_handle_t t;
    starpu_matrix_data_register(&t, -1, 0, starpu_matrix_get_nx(src), starpu_matrix_get_nx(src),
                                starpu_matrix_get_ny(src), sizeof(uint16_t));
    sw_cast(src, t);
    return t;
}
