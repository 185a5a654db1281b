/* Pooling over a sequence, on rows in [s, b] order (row i*B + b is local
 * position i of sequence b; B = the output's rows):
 *   fwd: y[b,c] = alpha * sum_{i = p0 .. p0+np-1} x[i*B + b, c] (in double;
 *        np = 0 writes zeros)
 *   bwd: dx[i*B + b, c] = alpha * dy[b,c] for i in p0 .. p0+np-1, else 0
 * Mean pooling is every position with alpha = 1/seq, first-token pooling
 * position 0 alone with alpha 1 (the layer, graphs/layers/heads.c, picks them).
 * With per-sequence lengths (sw_pool_fwd_len, a padded batch) only the
 * positions i whose global position is below len[b] count, and sequence b
 * is scaled by alpha / len[b] (in double); without them nothing changes. */
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "starweave/ops.h"

struct pool_args {
    int64_t p0, np;
    float alpha;
    int on;              /* 0: no lengths, the rest unused */
    sw_pool_lengths L;
};

/* global position of local position i (the last run starting at or before it) */
static inline int64_t pool_pos(const sw_pool_lengths *L, int64_t i)
{
    int j = 0;
    while (j + 1 < L->nruns && i >= L->i0[j + 1]) j++;
    return L->pos0[j] + i - L->i0[j];
}

/* buffers: x [n,h] (R), y [B,h] (W) */
static void pool_fwd_cpu(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t B = SW_ROWS_OF(buffers[1]), C = SW_COLS_OF(buffers[1]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    if (!a.on) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t c = 0; c < C; c++) {
                double s = 0.0;
                for (int64_t i = a.p0; i < a.p0 + a.np; i++) s += (double)x[(i * B + b) * ldx + c];
                y[b * ldy + c] = (float)((double)a.alpha * s);
            }
        return;
    }
    for (int64_t b = 0; b < B; b++) {
        const double scale = (double)a.alpha / (double)a.L.len[b];
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t i = a.p0; i < a.p0 + a.np; i++)
                if (pool_pos(&a.L, i) < a.L.len[b]) s += (double)x[(i * B + b) * ldx + c];
            y[b * ldy + c] = (float)(scale * s);
        }
    }
}

/* buffers: dy [B,h] (R), dx [n,h] (W) */
static void pool_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t B = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), n = SW_ROWS_OF(buffers[1]);
    const int64_t ldy = SW_LD_OF(buffers[0]), ldx = SW_LD_OF(buffers[1]);
    const float *dy = SW_F32_OF(buffers[0]);
    float *dx = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < n; r++) {
        const int64_t i = r / B, b = r % B;
        const int in = i >= a.p0 && i < a.p0 + a.np && (!a.on || pool_pos(&a.L, i) < a.L.len[b]);
        const float scale = a.on ? (float)((double)a.alpha / (double)a.L.len[b]) : a.alpha;
        for (int64_t c = 0; c < C; c++) dx[r * ldx + c] = in ? scale * dy[b * ldy + c] : 0.0f;
    }
}

#ifdef STARWEAVE_USE_CUDA
_Static_assert(SW_CUDA_POOL_RUNS == SW_POOL_MAX_RUNS && SW_CUDA_POOL_SEQS == SW_ATTN_MAX_SEQS,
               "the CUDA pooling's lengths hold what sw_pool_lengths does");
static sw_cuda_pool_len cuda_len(const struct pool_args *a)
{
    sw_cuda_pool_len L = {.on = a->on, .nruns = a->L.nruns};
    memcpy(L.i0, a->L.i0, sizeof L.i0), memcpy(L.pos0, a->L.pos0, sizeof L.pos0);
    memcpy(L.len, a->L.len, sizeof L.len);
    return L;
}

static void pool_fwd_cuda(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const sw_cuda_pool_len L = cuda_len(&a);
    SW_CUDA_CHECK(sw_cuda_pool_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]), a.p0, a.np,
                                   a.alpha, &L, starpu_cuda_get_local_stream()));
}

static void pool_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const sw_cuda_pool_len L = cuda_len(&a);
    SW_CUDA_CHECK(sw_cuda_pool_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                   SW_ROWS_OF(buffers[1]), a.p0, a.np, a.alpha, &L, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(pool_fwd_model, "sw_pool_fwd");
SW_PERFMODEL(pool_bwd_model, "sw_pool_bwd");

static struct starpu_codelet pool_fwd_cl = {
    .cpu_funcs = {pool_fwd_cpu},
    .cpu_funcs_name = {"pool_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {pool_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &pool_fwd_model,
    .name = "pool_fwd",
};

static struct starpu_codelet pool_bwd_cl = {
    .cpu_funcs = {pool_bwd_cpu},
    .cpu_funcs_name = {"pool_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {pool_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &pool_bwd_model,
    .name = "pool_bwd",
};

/* rows of the sequence side a whole number of positions, the range inside them */
static void check_pool(const char *op, starpu_data_handle_t seq, starpu_data_handle_t pooled, int64_t p0, int64_t np)
{
    SW_REQUIRE_MATRIX(op, seq);
    SW_REQUIRE_MATRIX(op, pooled);
    int64_t n = starpu_matrix_get_ny(seq), B = starpu_matrix_get_ny(pooled);
    if (starpu_matrix_get_nx(seq) != starpu_matrix_get_nx(pooled) || B == 0 || n % B != 0)
        sw_failf(__FILE__, __LINE__, "%s: rows [%lu,%lu] must be whole positions of pooled [%lu,%lu]", op, SW_DIMS(seq),
                 SW_DIMS(pooled));
    if (p0 < 0 || np < 0 || p0 + np > n / B)
        sw_failf(__FILE__, __LINE__, "%s: positions %ld .. %ld outside the %ld positions of the rows", op, (long)p0,
                 (long)(p0 + np), (long)(n / B));
}

/* the lengths: runs that start at local position 0 and increase, a length per pooled row */
static void check_lengths(const char *op, starpu_data_handle_t pooled, const sw_pool_lengths *L)
{
    if (!L) return;
    const int64_t B = starpu_matrix_get_ny(pooled);
    if (L->nruns < 1 || L->nruns > SW_POOL_MAX_RUNS || L->i0[0] != 0)
        sw_failf(__FILE__, __LINE__, "%s: lengths: 1 .. %d runs from local position 0 (%d runs, first at %ld)", op,
                 SW_POOL_MAX_RUNS, L->nruns, (long)L->i0[0]);
    for (int j = 1; j < L->nruns; j++)
        if (L->i0[j] <= L->i0[j - 1])
            sw_failf(__FILE__, __LINE__, "%s: lengths: runs must start at increasing positions (%ld after %ld)", op,
                     (long)L->i0[j], (long)L->i0[j - 1]);
    if (B > SW_ATTN_MAX_SEQS)
        sw_failf(__FILE__, __LINE__, "%s: lengths: at most %d sequences (%ld)", op, SW_ATTN_MAX_SEQS, (long)B);
    for (int64_t b = 0; b < B; b++)
        if (L->len[b] < 1)
            sw_failf(__FILE__, __LINE__, "%s: lengths: every length must be at least 1 (len[%ld] = %d)", op, (long)b,
                     (int)L->len[b]);
}

static struct pool_args pool_args_of(int64_t p0, int64_t np, float alpha, const sw_pool_lengths *L)
{
    struct pool_args a;
    memset(&a, 0, sizeof a);
    a.p0 = p0, a.np = np, a.alpha = alpha, a.on = L != NULL;
    if (L) a.L = *L;
    return a;
}

void sw_pool_fwd_len(starpu_data_handle_t x, starpu_data_handle_t y, int64_t p0, int64_t np, float alpha,
                     const sw_pool_lengths *L)
{
    check_pool("sw_pool_fwd", x, y, p0, np);
    check_lengths("sw_pool_fwd", y, L);
    struct pool_args a = pool_args_of(p0, np, alpha, L);
    SW_INSERT(&pool_fwd_cl, STARPU_R, x, STARPU_W, y, STARPU_VALUE, &a, sizeof a);
}

void sw_pool_bwd_len(starpu_data_handle_t dy, starpu_data_handle_t dx, int64_t p0, int64_t np, float alpha,
                     const sw_pool_lengths *L)
{
    check_pool("sw_pool_bwd", dx, dy, p0, np);
    check_lengths("sw_pool_bwd", dy, L);
    struct pool_args a = pool_args_of(p0, np, alpha, L);
    SW_INSERT(&pool_bwd_cl, STARPU_R, dy, STARPU_W, dx, STARPU_VALUE, &a, sizeof a);
}

void sw_pool_fwd(starpu_data_handle_t x, starpu_data_handle_t y, int64_t p0, int64_t np, float alpha)
{
    sw_pool_fwd_len(x, y, p0, np, alpha, NULL);
}

void sw_pool_bwd(starpu_data_handle_t dy, starpu_data_handle_t dx, int64_t p0, int64_t np, float alpha)
{
    sw_pool_bwd_len(dy, dx, p0, np, alpha, NULL);
}
