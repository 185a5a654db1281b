/* Rotary position embedding, in place (GPT-NeoX / Hugging Face LLaMA "rotate_half").
 *   x[n, heads*d] (RW), rows in [s, b] order: row r is at position p = pos0 + (row0 + r) / batch
 * Each head's columns i and i + d/2 (i < d/2) are rotated by the angle
 * p * theta^(-2i/d): (a, b) -> (a cos - b sin, a sin + b cos); inverse
 * rotates by minus the angle (the transpose: the backward).
 * The angle is rounded as the PyTorch oracle rounds it: inv_freq =
 * 1 / theta^((float)(2i) / (float)d) in fp32 (sw_rope_inv_freq, fastmath.h)
 * and angle = (float)p * inv_freq in fp32, then cosf/sinf (the CUDA kernel
 * evaluates the same formula).
 * The rows of one position share their cos/sin: the table is recomputed
 * only when the position changes (every batch rows). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "codelet_util.h"
#include "fastmath.h"
#include "starweave/ops.h"

struct rope_args {
    int d;
    float theta;
    int64_t row0;
    int batch;
    int64_t pos0;
    int inverse;
};

/* buffers: x */
static void rope_cpu(void *buffers[], void *cl_arg)
{
    struct rope_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    STARPU_ASSERT(a.d > 0 && a.d % 2 == 0 && C % a.d == 0 && a.batch > 0);
    float *x = SW_F32_OF(buffers[0]);
    const int64_t half = a.d / 2, heads = C / a.d;
    float *inv = malloc(sizeof(float) * 3 * (size_t)half);
    STARPU_ASSERT_MSG(inv, "out of memory");
    float *cs = inv + half, *sn = cs + half;
    for (int64_t i = 0; i < half; i++) inv[i] = sw_rope_inv_freq(a.theta, i, a.d);
    int64_t table_pos = -1;
    for (int64_t r = 0; r < R; r++) {
        const int64_t p = a.pos0 + (a.row0 + r) / a.batch;
        if (p != table_pos) {
            for (int64_t i = 0; i < half; i++) {
                const float angle = (float)p * inv[i];
                cs[i] = cosf(angle);
                sn[i] = a.inverse ? -sinf(angle) : sinf(angle);
            }
            table_pos = p;
        }
        float *xr = x + r * ld;
        for (int64_t h = 0; h < heads; h++) {
            float *u = xr + h * a.d, *v = u + half;
            for (int64_t i = 0; i < half; i++) {
                const float s = u[i], t = v[i];
                u[i] = s * cs[i] - t * sn[i];
                v[i] = s * sn[i] + t * cs[i];
            }
        }
    }
    free(inv);
}

#ifdef STARWEAVE_USE_CUDA
static void rope_cuda(void *buffers[], void *cl_arg)
{
    struct rope_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(a.d > 0 && a.d % 2 == 0 && C % a.d == 0 && a.batch > 0);
    SW_CUDA_CHECK(sw_cuda_rope(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_ROWS_OF(buffers[0]), C, a.d, a.theta,
                               a.row0, a.batch, a.pos0, a.inverse, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(rope_model, "sw_rope");

static struct starpu_codelet rope_cl = {
    .cpu_funcs = {rope_cpu},
    .cpu_funcs_name = {"rope_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {rope_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .model = &rope_model,
    .name = "rope",
};

/* Refuses, at submission, arguments the kernel cannot apply: a message
 * naming the op, the shape and the rule, then sw_fail. */
static void rope_check(starpu_data_handle_t x, int d, float theta, int64_t row0, int batch, int64_t pos0)
{
    const long long rows = starpu_matrix_get_ny(x), cols = starpu_matrix_get_nx(x);
    const char *rule = NULL;
    if (d <= 0 || d % 2 != 0) rule = "the head dim d must be positive and even";
    else if (cols % d != 0) rule = "its columns must be a whole number of heads of d";
    else if (batch <= 0) rule = "batch must be positive";
    else if (row0 < 0 || pos0 < 0) rule = "row0 and pos0 must not be negative";
    else if (!(theta > 0.0f) || isinf(theta)) rule = "theta must be positive and finite";
    if (!rule) return;
    fprintf(stderr, "starweave: sw_rope: x [%lld,%lld] with d=%d, theta=%g, row0=%lld, batch=%d, pos0=%lld: %s\n",
            rows, cols, d, (double)theta, (long long)row0, batch, (long long)pos0, rule);
    sw_fail(__FILE__, __LINE__, "sw_rope", -EINVAL);
}

void sw_rope(starpu_data_handle_t x, int d, float theta, int64_t row0, int batch, int64_t pos0, int inverse)
{
    rope_check(x, d, theta, row0, batch, pos0);
    struct rope_args a = {d, theta, row0, batch, pos0, inverse != 0};
    SW_INSERT(&rope_cl, STARPU_RW, x, STARPU_VALUE, &a, sizeof a);
}
