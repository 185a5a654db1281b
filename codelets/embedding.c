/* Token + position embedding, forward and backward (scatter-add).
 * Rows are tokens in [s, b] order: global row g = row0 + r has position
 * pos0 + g / batch. Token ids outside [vocab0, vocab0 + rows(wte)) take no
 * wte row (vocab-parallel slice); the position embedding is added to every
 * row regardless, and its gradient is scattered from every row. */
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

struct emb_args {
    int64_t row0, pos0, vocab0;
    int batch, zero_wpe, with_wpe;
    int zero_wte, has_wpe; /* dwte written (not added to); a wpe buffer is there */
};

/* buffers: tokens[n,1] (R), wte[V,C] (R), [wpe[P,C] (R) when has_wpe], x[n,C] (W) */
static void emb_fwd_cpu(void *buffers[], void *cl_arg)
{
    struct emb_args e;
    starpu_codelet_unpack_args(cl_arg, &e);
    const int32_t *tok = SW_I32_OF(buffers[0]);
    int64_t ts = sw_vec_inc(buffers[0]);
    void *xb = buffers[e.has_wpe ? 3 : 2];
    const float *wte = SW_F32_OF(buffers[1]), *wpe = e.has_wpe ? SW_F32_OF(buffers[2]) : NULL;
    float *x = SW_F32_OF(xb);
    int64_t nv = SW_ROWS_OF(buffers[1]), ldte = SW_LD_OF(buffers[1]), ldpe = e.has_wpe ? SW_LD_OF(buffers[2]) : 0;
    int64_t n = SW_ROWS_OF(xb), c = SW_COLS_OF(xb), ldx = SW_LD_OF(xb);
    for (int64_t r = 0; r < n; r++) {
        int64_t pos = e.pos0 + (e.row0 + r) / e.batch;
        int64_t id = (int64_t)tok[r * ts] - e.vocab0;
        const float *pe = e.with_wpe ? wpe + pos * ldpe : NULL;
        float *xr = x + r * ldx;
        int in_range = id >= 0 && id < nv;
        const float *te = in_range ? wte + id * ldte : NULL;
        if (in_range && e.with_wpe) for (int64_t j = 0; j < c; j++) xr[j] = te[j] + pe[j];
        else if (in_range) for (int64_t j = 0; j < c; j++) xr[j] = te[j];
        else if (e.with_wpe) for (int64_t j = 0; j < c; j++) xr[j] = pe[j];
        else for (int64_t j = 0; j < c; j++) xr[j] = 0.0f;
    }
}

/* buffers: tokens (R), dx[n,C] (R), dwte[V,C] (RW, or W with zero_wte), [dwpe[P,C] (W or RW) when has_wpe] */
static void emb_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct emb_args e;
    starpu_codelet_unpack_args(cl_arg, &e);
    const int32_t *tok = SW_I32_OF(buffers[0]);
    int64_t ts = sw_vec_inc(buffers[0]);
    const float *dx = SW_F32_OF(buffers[1]);
    float *dwte = SW_F32_OF(buffers[2]), *dwpe = e.has_wpe ? SW_F32_OF(buffers[3]) : NULL;
    int64_t n = SW_ROWS_OF(buffers[1]), c = SW_COLS_OF(buffers[1]), ldx = SW_LD_OF(buffers[1]);
    int64_t nv = SW_ROWS_OF(buffers[2]), ldte = SW_LD_OF(buffers[2]);
    int64_t np = e.has_wpe ? SW_ROWS_OF(buffers[3]) : 0, cp = e.has_wpe ? SW_COLS_OF(buffers[3]) : 0;
    int64_t ldpe = e.has_wpe ? SW_LD_OF(buffers[3]) : 0;
    if (e.zero_wpe)
        for (int64_t p = 0; p < np; p++) memset(dwpe + p * ldpe, 0, sizeof(float) * (size_t)cp);
    if (e.zero_wte)
        for (int64_t v = 0; v < nv; v++) memset(dwte + v * ldte, 0, sizeof(float) * (size_t)SW_COLS_OF(buffers[2]));
    for (int64_t r = 0; r < n; r++) {
        int64_t pos = e.pos0 + (e.row0 + r) / e.batch;
        int64_t id = (int64_t)tok[r * ts] - e.vocab0;
        const float *g = dx + r * ldx;
        if (dwpe) {
            float *pe = dwpe + pos * ldpe;
            for (int64_t j = 0; j < c; j++) pe[j] += g[j];
        }
        if (id >= 0 && id < nv) {
            float *te = dwte + id * ldte;
            for (int64_t j = 0; j < c; j++) te[j] += g[j];
        }
    }
}

#ifdef STARWEAVE_USE_CUDA
static sw_cuda_emb cuda_emb(const struct emb_args *e)
{
    sw_cuda_emb c = {e->row0, e->pos0, e->vocab0, e->batch, e->zero_wpe, e->with_wpe, e->zero_wte, e->has_wpe};
    return c;
}

/* buffers as emb_fwd_cpu */
static void emb_fwd_cuda(void *buffers[], void *cl_arg)
{
    struct emb_args e;
    starpu_codelet_unpack_args(cl_arg, &e);
    void *xb = buffers[e.has_wpe ? 3 : 2];
    SW_CUDA_CHECK(sw_cuda_embedding_fwd(SW_I32_OF(buffers[0]), sw_vec_inc(buffers[0]), SW_F32_OF(buffers[1]),
                                        SW_ROWS_OF(buffers[1]), SW_LD_OF(buffers[1]),
                                        e.has_wpe ? SW_F32_OF(buffers[2]) : NULL, e.has_wpe ? SW_LD_OF(buffers[2]) : 0,
                                        SW_F32_OF(xb), SW_ROWS_OF(xb), SW_COLS_OF(xb), SW_LD_OF(xb), cuda_emb(&e),
                                        starpu_cuda_get_local_stream()));
}

/* buffers as emb_bwd_cpu */
static void emb_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct emb_args e;
    starpu_codelet_unpack_args(cl_arg, &e);
    SW_CUDA_CHECK(sw_cuda_embedding_bwd(SW_I32_OF(buffers[0]), sw_vec_inc(buffers[0]), SW_F32_OF(buffers[1]),
                                        SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]), SW_LD_OF(buffers[1]),
                                        SW_F32_OF(buffers[2]), SW_ROWS_OF(buffers[2]), SW_LD_OF(buffers[2]),
                                        e.has_wpe ? SW_F32_OF(buffers[3]) : NULL, e.has_wpe ? SW_ROWS_OF(buffers[3]) : 0,
                                        e.has_wpe ? SW_COLS_OF(buffers[3]) : 0, e.has_wpe ? SW_LD_OF(buffers[3]) : 0,
                                        cuda_emb(&e), starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(emb_fwd_model, "sw_embedding_fwd");
SW_PERFMODEL(emb_bwd_model, "sw_embedding_bwd");

static struct starpu_codelet emb_fwd_cl = {
    .cpu_funcs = {emb_fwd_cpu},
    .cpu_funcs_name = {"emb_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {emb_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS, /* wpe is optional */
    .model = &emb_fwd_model,
    .name = "embedding_fwd",
};

/* dwte's and dwpe's modes depend on the zero flags, and dwpe is optional:
 * modes come from each insert call. */
static struct starpu_codelet emb_bwd_cl = {
    .cpu_funcs = {emb_bwd_cpu},
    .cpu_funcs_name = {"emb_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {emb_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &emb_bwd_model,
    .name = "embedding_bwd",
};

void sw_embedding_fwd(starpu_data_handle_t tokens, starpu_data_handle_t wte,
                      starpu_data_handle_t wpe, starpu_data_handle_t x,
                      int64_t row0, int batch, int64_t pos0, int64_t vocab0, int with_wpe)
{
    struct emb_args e = {row0, pos0, vocab0, batch, 0, wpe && with_wpe ? 1 : 0, 0, wpe != NULL};
    if (wpe)
        SW_INSERT(&emb_fwd_cl, STARPU_R, tokens, STARPU_R, wte, STARPU_R, wpe, STARPU_W, x,
                  STARPU_VALUE, &e, sizeof e);
    else
        SW_INSERT(&emb_fwd_cl, STARPU_R, tokens, STARPU_R, wte, STARPU_W, x, STARPU_VALUE, &e, sizeof e);
}

void sw_embedding_bwd(starpu_data_handle_t tokens, starpu_data_handle_t dx,
                      starpu_data_handle_t dwte, starpu_data_handle_t dwpe,
                      int64_t row0, int batch, int64_t pos0, int64_t vocab0, int zero)
{
    struct emb_args e = {row0, pos0, vocab0, batch, dwpe && (zero & SW_EMB_ZERO_WPE) ? 1 : 0, 1,
                         (zero & SW_EMB_ZERO_WTE) ? 1 : 0, dwpe != NULL};
    enum starpu_data_access_mode te = e.zero_wte ? STARPU_W : STARPU_RW;
    if (dwpe)
        SW_INSERT(&emb_bwd_cl, STARPU_R, tokens, STARPU_R, dx, te, dwte, e.zero_wpe ? STARPU_W : STARPU_RW, dwpe,
                  STARPU_VALUE, &e, sizeof e);
    else
        SW_INSERT(&emb_bwd_cl, STARPU_R, tokens, STARPU_R, dx, te, dwte, STARPU_VALUE, &e, sizeof e);
}
