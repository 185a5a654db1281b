/* Global gradient-norm clipping, in two ops.
 *   sumsq: out[1,1] = (accumulate ? out : 0) + alpha * sum x[r,c]^2 (in double)
 *   clip:  x[r,c] *= min(1, max_norm / (sqrt(n2) + 1e-6)), n2 [1,1] the squared norm */
#include <math.h>

#include "codelet_util.h"
#include "starweave/ops.h"

struct sumsq_args {
    double alpha;
    int accumulate;
};

/* the sum of squares of x in row-major order, in double (the CUDA kernel's
 * threads sum strided pieces, then thread 0 adds them in order) */
static double sumsq_of(void *xb)
{
    const int64_t R = SW_ROWS_OF(xb), C = SW_COLS_OF(xb), ld = SW_LD_OF(xb);
    const float *x = SW_F32_OF(xb);
    double acc = 0.0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) acc += (double)x[r * ld + c] * (double)x[r * ld + c];
    return acc;
}

/* buffers: x (R), out [1,1] (W, or RW when accumulate) */
static void sumsq_cpu(void *buffers[], void *cl_arg)
{
    struct sumsq_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *out = SW_F32_OF(buffers[1]);
    double v = a.alpha * sumsq_of(buffers[0]);
    out[0] = (float)(a.accumulate ? (double)out[0] + v : v);
}

static float clip_scale(float n2, float max_norm)
{
    float s = max_norm / (sqrtf(n2) + 1e-6f);
    return s < 1.0f ? s : 1.0f;
}

/* buffers: x (RW), n2 [1,1] (R) */
static void clip_cpu(void *buffers[], void *cl_arg)
{
    float max_norm;
    starpu_codelet_unpack_args(cl_arg, &max_norm);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    float *x = SW_F32_OF(buffers[0]);
    const float s = clip_scale(SW_F32_OF(buffers[1])[0], max_norm);
    if (s == 1.0f) return;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) x[r * ld + c] *= s;
}

#ifdef STARWEAVE_USE_CUDA
static void sumsq_cuda(void *buffers[], void *cl_arg)
{
    struct sumsq_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    SW_CUDA_CHECK(sw_cuda_sumsq(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_ROWS_OF(buffers[0]),
                                SW_COLS_OF(buffers[0]), SW_F32_OF(buffers[1]), a.alpha, a.accumulate,
                                starpu_cuda_get_local_stream()));
}

static void clip_cuda(void *buffers[], void *cl_arg)
{
    float max_norm;
    starpu_codelet_unpack_args(cl_arg, &max_norm);
    SW_CUDA_CHECK(sw_cuda_clip(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_ROWS_OF(buffers[0]),
                               SW_COLS_OF(buffers[0]), SW_F32_OF(buffers[1]), max_norm, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(sumsq_model, "sw_sumsq");
SW_PERFMODEL(clip_model, "sw_clip");

/* out's mode comes from each insert call (W or RW) */
static struct starpu_codelet sumsq_cl = {
    .cpu_funcs = {sumsq_cpu},
    .cpu_funcs_name = {"sumsq_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {sumsq_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sumsq_model,
    .name = "sumsq",
};

static struct starpu_codelet clip_cl = {
    .cpu_funcs = {clip_cpu},
    .cpu_funcs_name = {"clip_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {clip_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_RW, STARPU_R},
    .model = &clip_model,
    .name = "clip",
};

static void scalar_shape(const char *op, starpu_data_handle_t h)
{
    SW_REQUIRE_MATRIX(op, h);
    if (starpu_matrix_get_ny(h) != 1 || starpu_matrix_get_nx(h) != 1)
        sw_failf(__FILE__, __LINE__, "%s: the squared norm must be [1,1], got [%lu,%lu]", op, SW_DIMS(h));
}

void sw_sumsq(starpu_data_handle_t x, starpu_data_handle_t out, double alpha, int accumulate)
{
    scalar_shape("sw_sumsq", out);
    struct sumsq_args a = {alpha, accumulate ? 1 : 0};
    SW_INSERT(&sumsq_cl, STARPU_R, x, accumulate ? STARPU_RW : STARPU_W, out, STARPU_VALUE, &a, sizeof a);
}

void sw_clip(starpu_data_handle_t x, starpu_data_handle_t n2, float max_norm)
{
    scalar_shape("sw_clip", n2);
    SW_INSERT(&clip_cl, STARPU_RW, x, STARPU_R, n2, STARPU_VALUE, &max_norm, sizeof max_norm);
}
