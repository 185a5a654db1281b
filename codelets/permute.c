/* A permutation of rows: x [n1 n2 n3, C] viewed as rows (i1, i2, i3) goes to
 * y with the first two row axes swapped,
 *   y[(i2 n1 + i1) n3 + i3] = x[(i1 n2 + i2) n3 + i3]
 * (a copy; its inverse, and so its backward, swaps back: n1 and n2
 * exchanged). The video attention (graphs/layers/dit.c) switches the tokens of
 * frame-major rows [frame, patch, sample] to [patch, frame, sample] with
 * it. */
#include <string.h>

#include "codelet_util.h"
#include "starweave/ops.h"

struct swap_args {
    int64_t n1, n2, n3;
};

/* buffers: x (R), y (W) */
static void swap_rows_cpu(void *buffers[], void *cl_arg)
{
    struct swap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t C = SW_COLS_OF(buffers[0]), ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t i1 = 0; i1 < a.n1; i1++)
        for (int64_t i2 = 0; i2 < a.n2; i2++)
            for (int64_t i3 = 0; i3 < a.n3; i3++)
                memcpy(y + ((i2 * a.n1 + i1) * a.n3 + i3) * ldy, x + ((i1 * a.n2 + i2) * a.n3 + i3) * ldx,
                       sizeof(float) * (size_t)C);
}

#ifdef STARWEAVE_USE_CUDA
static void swap_rows_cuda(void *buffers[], void *cl_arg)
{
    struct swap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    SW_CUDA_CHECK(sw_cuda_swap_rows(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                    SW_LD_OF(buffers[1]), a.n1, a.n2, a.n3, SW_COLS_OF(buffers[0]),
                                    starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(swap_rows_model, "sw_swap_rows");

static struct starpu_codelet swap_rows_cl = {
    .cpu_funcs = {swap_rows_cpu},
    .cpu_funcs_name = {"swap_rows_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {swap_rows_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &swap_rows_model,
    .name = "swap_rows",
};

void sw_swap_rows(starpu_data_handle_t x, starpu_data_handle_t y, int64_t n1, int64_t n2, int64_t n3)
{
    SW_SAME_SHAPE("sw_swap_rows", x, y);
    if (n1 < 1 || n2 < 1 || n3 < 1 || (unsigned long)(n1 * n2 * n3) != starpu_matrix_get_ny(x))
        sw_failf(__FILE__, __LINE__, "sw_swap_rows: x [%lu,%lu] must have n1 n2 n3 = %ld x %ld x %ld rows", SW_DIMS(x),
                 (long)n1, (long)n2, (long)n3);
    struct swap_args a = {n1, n2, n3};
    SW_INSERT(&swap_rows_cl, STARPU_R, x, STARPU_W, y, STARPU_VALUE, &a, sizeof a);
}
