/* AdamW, PyTorch semantics (torch.optim.AdamW, decoupled weight decay):
 *   p = p * (1 - lr*wd); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   denom = sqrt(v) / sqrt(1 - b2^step) + eps; p -= lr / (1 - b1^step) * m / denom.
 * All four handles have the same shape and may be (strided) tiles. */
#include <math.h>

#include "codelet_util.h"
#include "starweave/ops.h"

/* The scalars as PyTorch forms them (Python floats), then used in fp32;
 * shared by the CPU and the CUDA function. */
static void adamw_scalars(const sw_adamw_args *a, float *b1, float *b2, float *c1, float *c2, float *eps,
                          float *decay, float *step_size, float *bc2_sqrt)
{
    double bc1 = 1.0 - pow((double)a->beta1, (double)a->step);
    double bc2 = 1.0 - pow((double)a->beta2, (double)a->step);
    *decay = (float)(1.0 - (double)a->lr * (double)a->weight_decay);
    *step_size = (float)((double)a->lr / bc1);
    *bc2_sqrt = (float)sqrt(bc2);
    *b1 = a->beta1;
    *b2 = a->beta2;
    *c1 = 1.0f - a->beta1;
    *c2 = 1.0f - a->beta2;
    *eps = a->eps;
}

/* buffers: param (RW), grad (R), m (RW), v (RW) */
static void adamw_cpu(void *buffers[], void *cl_arg)
{
    sw_adamw_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *p = SW_F32_OF(buffers[0]), *m = SW_F32_OF(buffers[2]), *v = SW_F32_OF(buffers[3]);
    const float *g = SW_F32_OF(buffers[1]);
    int64_t rows = SW_ROWS_OF(buffers[0]), cols = SW_COLS_OF(buffers[0]);
    int64_t ldp = SW_LD_OF(buffers[0]), ldg = SW_LD_OF(buffers[1]), ldm = SW_LD_OF(buffers[2]),
            ldv = SW_LD_OF(buffers[3]);
    float b1, b2, c1, c2, eps, decay, step_size, bc2_sqrt;
    adamw_scalars(&a, &b1, &b2, &c1, &c2, &eps, &decay, &step_size, &bc2_sqrt);
    for (int64_t r = 0; r < rows; r++) {
        float *pr = p + r * ldp, *mr = m + r * ldm, *vr = v + r * ldv;
        const float *gr = g + r * ldg;
        for (int64_t c = 0; c < cols; c++) {
            float gc = gr[c];
            float mc = b1 * mr[c] + c1 * gc;
            float vc = b2 * vr[c] + c2 * gc * gc;
            mr[c] = mc;
            vr[c] = vc;
            float denom = sqrtf(vc) / bc2_sqrt + eps;
            pr[c] = pr[c] * decay - step_size * (mc / denom);
        }
    }
}

#ifdef STARWEAVE_USE_CUDA
static void adamw_cuda(void *buffers[], void *cl_arg)
{
    sw_adamw_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sw_cuda_adamw_scalars k;
    adamw_scalars(&a, &k.b1, &k.b2, &k.c1, &k.c2, &k.eps, &k.decay, &k.step_size, &k.bc2_sqrt);
    SW_CUDA_CHECK(sw_cuda_adamw(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                SW_LD_OF(buffers[1]), SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]),
                                SW_F32_OF(buffers[3]), SW_LD_OF(buffers[3]), SW_ROWS_OF(buffers[0]),
                                SW_COLS_OF(buffers[0]), k, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(adamw_model, "sw_adamw");

static struct starpu_codelet adamw_cl = {
    .cpu_funcs = {adamw_cpu},
    .cpu_funcs_name = {"adamw_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {adamw_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 4,
    .modes = {STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW},
    .model = &adamw_model,
    .name = "adamw",
};

void sw_adamw(starpu_data_handle_t param, starpu_data_handle_t grad, starpu_data_handle_t m,
              starpu_data_handle_t v, const sw_adamw_args *a)
{
    SW_SAME_SHAPE("sw_adamw", param, grad);
    SW_SAME_SHAPE("sw_adamw", param, m);
    SW_SAME_SHAPE("sw_adamw", param, v);
    sw_adamw_args args = *a;
    SW_INSERT(&adamw_cl, STARPU_RW, param, STARPU_R, grad, STARPU_RW, m, STARPU_RW, v, STARPU_VALUE,
              &args, sizeof args);
}
