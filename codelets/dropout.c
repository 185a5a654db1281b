/* Dropout with a counter-based mask: element (r, c) of the tile is kept iff
 * sw_dropout_keep(seed, step, layer, op, (row0 + r) * ld_global + col0 + c, p),
 * so any tiling of the same tensor draws the same mask and the backward
 * regenerates it instead of storing it.
 *   fwd: x[r,c] -> y[r,c] = keep ? x / (1 - p) : 0   (p == 0: copy)
 *   bwd: grad[r,c] (dy in, dx = keep ? dy / (1 - p) : 0 out) */
#include <string.h>

#include "codelet_util.h"
#include "philox.h"
#include "starweave/ops.h"

struct dropout_args {
    sw_rng_key key;
    float p;
};

/* out[r,c] = keep(r,c) ? in[r,c] * scale : 0; in and out may be the same. */
static void dropout_apply(const float *in, int64_t ldi, float *out, int64_t ldo, int64_t R, int64_t C,
                          const struct dropout_args *a)
{
    const sw_rng_key k = a->key;
    const float p = a->p;
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *ir = in + r * ldi;
        float *orow = out + r * ldo;
        int64_t g = k.row0 + r;
        if (k.batch_global > 0) g = g / k.batch_local * k.batch_global + k.batch0 + g % k.batch_local;
        const uint64_t base = (uint64_t)(g * k.ld_global + k.col0);
        for (int64_t c = 0; c < C; c++) {
            int keep = sw_dropout_keep(k.seed, k.step, k.layer, k.op, base + (uint64_t)c, p);
            orow[c] = keep ? ir[c] * scale : 0.0f;
        }
    }
}

/* buffers: x, y */
static void dropout_fwd_cpu(void *buffers[], void *cl_arg)
{
    struct dropout_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    if (a.p == 0.0f) {
        for (int64_t r = 0; r < R; r++) memcpy(y + r * ldy, x + r * ldx, sizeof(float) * (size_t)C);
        return;
    }
    dropout_apply(x, ldx, y, ldy, R, C, &a);
}

/* buffers: grad */
static void dropout_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct dropout_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    if (a.p == 0.0f) return;
    float *g = SW_F32_OF(buffers[0]);
    const int64_t ld = SW_LD_OF(buffers[0]);
    dropout_apply(g, ld, g, ld, SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]), &a);
}

#ifdef STARWEAVE_USE_CUDA
static sw_cuda_rng cuda_rng(const sw_rng_key *k)
{
    sw_cuda_rng r = {k->seed, k->step, k->layer, k->op, k->row0, k->col0, k->ld_global,
                     k->batch0, k->batch_local, k->batch_global};
    return r;
}

/* buffers: x, y */
static void dropout_fwd_cuda(void *buffers[], void *cl_arg)
{
    struct dropout_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (a.p == 0.0f) { /* a copy, as on the CPU */
        if (R > 0 && C > 0)
            SW_CUDA_CHECK(cudaMemcpy2DAsync(SW_F32_OF(buffers[1]), sizeof(float) * (size_t)ldy, SW_F32_OF(buffers[0]),
                                            sizeof(float) * (size_t)ldx, sizeof(float) * (size_t)C, (size_t)R,
                                            cudaMemcpyDeviceToDevice, s));
        return;
    }
    const float scale = a.p < 1.0f ? 1.0f / (1.0f - a.p) : 0.0f;
    SW_CUDA_CHECK(sw_cuda_dropout(SW_F32_OF(buffers[0]), ldx, SW_F32_OF(buffers[1]), ldy, R, C, cuda_rng(&a.key),
                                  a.p, scale, s));
}

/* buffers: grad */
static void dropout_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct dropout_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    if (a.p == 0.0f) return;
    float *g = SW_F32_OF(buffers[0]);
    const int64_t ld = SW_LD_OF(buffers[0]);
    const float scale = a.p < 1.0f ? 1.0f / (1.0f - a.p) : 0.0f;
    SW_CUDA_CHECK(sw_cuda_dropout(g, ld, g, ld, SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]), cuda_rng(&a.key), a.p,
                                  scale, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(dropout_fwd_model, "sw_dropout_fwd");
SW_PERFMODEL(dropout_bwd_model, "sw_dropout_bwd");

static struct starpu_codelet dropout_fwd_cl = {
    .cpu_funcs = {dropout_fwd_cpu},
    .cpu_funcs_name = {"dropout_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {dropout_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &dropout_fwd_model,
    .name = "dropout_fwd",
};

static struct starpu_codelet dropout_bwd_cl = {
    .cpu_funcs = {dropout_bwd_cpu},
    .cpu_funcs_name = {"dropout_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {dropout_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .model = &dropout_bwd_model,
    .name = "dropout_bwd",
};

void sw_dropout_fwd(starpu_data_handle_t x, starpu_data_handle_t y, float p, const sw_rng_key *key)
{
    SW_SAME_SHAPE("sw_dropout_fwd", x, y);
    struct dropout_args a;
    memset(&a, 0, sizeof a); /* padding bytes are copied too */
    a.key = *key;
    a.p = p;
    SW_INSERT(&dropout_fwd_cl, STARPU_R, x, STARPU_W, y, STARPU_VALUE, &a, sizeof a);
}

void sw_dropout_bwd(starpu_data_handle_t grad, float p, const sw_rng_key *key)
{
    struct dropout_args a;
    memset(&a, 0, sizeof a);
    a.key = *key;
    a.p = p;
    SW_INSERT(&dropout_bwd_cl, STARPU_RW, grad, STARPU_VALUE, &a, sizeof a);
}
