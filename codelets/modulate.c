/* adaLN modulation and the gated residual, per-sequence vectors broadcast
 * over rows in [s, b] order (row r belongs to sequence r % B, B = the
 * vectors' rows; the tile's rows are whole positions):
 *   modulate fwd: y = x * (1 + scale[b]) + shift[b]
 *   modulate bwd: dx = dy * (1 + scale[b]); dshift[b] = sum_r dy;
 *                 dscale[b] = sum_r dy * x (over the rows of sequence b)
 *   gate fwd:     out = res + gate[b] * branch
 *   gate bwd:     dbranch = gate[b] * dy; dgate[b] = sum_r dy * branch
 * The sums run in double, over the rows in order (the CUDA kernels too).
 * The layers (graphs/layers/dit.c) pass the h-column chunks of the modulation
 * [B, k h] as strided handles. */
#include "codelet_util.h"
#include "starweave/ops.h"

#include <stdlib.h>

#define M_(i) SW_F32_OF(buffers[i]), SW_LD_OF(buffers[i])

/* buffers: x [n,h] (R), shift [B,h] (R), scale [B,h] (R), y [n,h] (W) */
static void modulate_fwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t n = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), B = SW_ROWS_OF(buffers[1]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldsh = SW_LD_OF(buffers[1]), ldsc = SW_LD_OF(buffers[2]);
    const int64_t ldy = SW_LD_OF(buffers[3]);
    const float *x = SW_F32_OF(buffers[0]), *sh = SW_F32_OF(buffers[1]), *sc = SW_F32_OF(buffers[2]);
    float *y = SW_F32_OF(buffers[3]);
    for (int64_t r = 0; r < n; r++) {
        const int64_t b = r % B;
        for (int64_t c = 0; c < C; c++) y[r * ldy + c] = x[r * ldx + c] * (1.0f + sc[b * ldsc + c]) + sh[b * ldsh + c];
    }
}

/* sums over the rows of each sequence, in one pass over the rows:
 * sum[b,c] = sum_{r % B == b} a[r,c] (when sum) and prod[b,c] = the same of
 * a[r,c] * m[r,c] (when prod). Each runs in double over its rows in order,
 * as the CUDA kernels; the rows are walked in memory order (column by
 * column, B rows apart, nearly every element was a cache miss) */
static void seq_sums(const float *a, int64_t lda, const float *m, int64_t ldm, int64_t n, int64_t C, int64_t B,
                     float *sum, int64_t lds, float *prod, int64_t ldp)
{
    double *acc = calloc((size_t)(2 * B * C), sizeof *acc);
    STARPU_ASSERT_MSG(acc, "modulate, gate: out of memory for the sums");
    double *as = acc, *ap = acc + B * C;
    for (int64_t r = 0; r < n; r++) {
        const float *ar = a + r * lda;
        double *s = as + (r % B) * C, *q = ap + (r % B) * C;
        if (sum)
            for (int64_t c = 0; c < C; c++) s[c] += (double)ar[c];
        if (prod) {
            const float *mr = m + r * ldm;
            for (int64_t c = 0; c < C; c++) q[c] += (double)ar[c] * mr[c];
        }
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            if (sum) sum[b * lds + c] = (float)as[b * C + c];
            if (prod) prod[b * ldp + c] = (float)ap[b * C + c];
        }
    free(acc);
}

/* buffers: x (R), scale (R), dy (R), dx (W), dshift (W), dscale (W) */
static void modulate_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t n = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), B = SW_ROWS_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]), *sc = SW_F32_OF(buffers[1]), *dy = SW_F32_OF(buffers[2]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldsc = SW_LD_OF(buffers[1]), lddy = SW_LD_OF(buffers[2]);
    float *dx = SW_F32_OF(buffers[3]);
    const int64_t lddx = SW_LD_OF(buffers[3]);
    for (int64_t r = 0; r < n; r++) {
        const int64_t b = r % B;
        for (int64_t c = 0; c < C; c++) dx[r * lddx + c] = dy[r * lddy + c] * (1.0f + sc[b * ldsc + c]);
    }
    seq_sums(dy, lddy, x, ldx, n, C, B, M_(4), M_(5));
}

/* buffers: res [n,h] (R), gate [B,h] (R), branch [n,h] (R), out [n,h] (W) */
static void gate_fwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t n = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), B = SW_ROWS_OF(buffers[1]);
    const float *res = SW_F32_OF(buffers[0]), *g = SW_F32_OF(buffers[1]), *br = SW_F32_OF(buffers[2]);
    const int64_t ldr = SW_LD_OF(buffers[0]), ldg = SW_LD_OF(buffers[1]), ldb = SW_LD_OF(buffers[2]);
    float *out = SW_F32_OF(buffers[3]);
    const int64_t ldo = SW_LD_OF(buffers[3]);
    for (int64_t r = 0; r < n; r++) {
        const int64_t b = r % B;
        for (int64_t c = 0; c < C; c++) out[r * ldo + c] = res[r * ldr + c] + g[b * ldg + c] * br[r * ldb + c];
    }
}

/* buffers: branch (R), gate (R), dy (R), dbranch (W), dgate (W) */
static void gate_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t n = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), B = SW_ROWS_OF(buffers[1]);
    const float *br = SW_F32_OF(buffers[0]), *g = SW_F32_OF(buffers[1]), *dy = SW_F32_OF(buffers[2]);
    const int64_t ldb = SW_LD_OF(buffers[0]), ldg = SW_LD_OF(buffers[1]), lddy = SW_LD_OF(buffers[2]);
    float *db = SW_F32_OF(buffers[3]);
    const int64_t lddb = SW_LD_OF(buffers[3]);
    for (int64_t r = 0; r < n; r++) {
        const int64_t b = r % B;
        for (int64_t c = 0; c < C; c++) db[r * lddb + c] = g[b * ldg + c] * dy[r * lddy + c];
    }
    seq_sums(dy, lddy, br, ldb, n, C, B, NULL, 0, M_(4));
}

#ifdef STARWEAVE_USE_CUDA
static void modulate_fwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_modulate_fwd(M_(0), M_(1), M_(2), M_(3), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                       SW_ROWS_OF(buffers[1]), starpu_cuda_get_local_stream()));
}
static void modulate_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_modulate_bwd(M_(0), M_(1), M_(2), M_(3), M_(4), M_(5), SW_ROWS_OF(buffers[0]),
                                       SW_COLS_OF(buffers[0]), SW_ROWS_OF(buffers[1]), starpu_cuda_get_local_stream()));
}
static void gate_fwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_gate_fwd(M_(0), M_(1), M_(2), M_(3), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                   SW_ROWS_OF(buffers[1]), starpu_cuda_get_local_stream()));
}
static void gate_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_gate_bwd(M_(0), M_(1), M_(2), M_(3), M_(4), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                   SW_ROWS_OF(buffers[1]), starpu_cuda_get_local_stream()));
}
#undef M_
#define SW_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define SW_CUDA_FUNCS(f)
#endif

SW_PERFMODEL(modulate_fwd_model, "sw_modulate_fwd");
SW_PERFMODEL(modulate_bwd_model, "sw_modulate_bwd");
SW_PERFMODEL(gate_fwd_model, "sw_gate_fwd");
SW_PERFMODEL(gate_bwd_model, "sw_gate_bwd");

static struct starpu_codelet modulate_fwd_cl = {
    .cpu_funcs = {modulate_fwd_cpu}, .cpu_funcs_name = {"modulate_fwd_cpu"}, SW_CUDA_FUNCS(modulate_fwd_cuda)
    .nbuffers = 4, .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W}, .model = &modulate_fwd_model,
    .name = "modulate_fwd",
};
static struct starpu_codelet modulate_bwd_cl = {
    .cpu_funcs = {modulate_bwd_cpu}, .cpu_funcs_name = {"modulate_bwd_cpu"}, SW_CUDA_FUNCS(modulate_bwd_cuda)
    .nbuffers = 6, .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W},
    .model = &modulate_bwd_model, .name = "modulate_bwd",
};
static struct starpu_codelet gate_fwd_cl = {
    .cpu_funcs = {gate_fwd_cpu}, .cpu_funcs_name = {"gate_fwd_cpu"}, SW_CUDA_FUNCS(gate_fwd_cuda)
    .nbuffers = 4, .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W}, .model = &gate_fwd_model, .name = "gate_fwd",
};
static struct starpu_codelet gate_bwd_cl = {
    .cpu_funcs = {gate_bwd_cpu}, .cpu_funcs_name = {"gate_bwd_cpu"}, SW_CUDA_FUNCS(gate_bwd_cuda)
    .nbuffers = 5, .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W}, .model = &gate_bwd_model,
    .name = "gate_bwd",
};

/* rows [n,h] whole positions of the per-sequence vector [B,h] */
static void check_rows(const char *op, const char *rn, starpu_data_handle_t rows, const char *vn,
                       starpu_data_handle_t vec)
{
    SW_REQUIRE_MATRIX(op, rows);
    SW_REQUIRE_MATRIX(op, vec);
    const unsigned long n = starpu_matrix_get_ny(rows), B = starpu_matrix_get_ny(vec);
    if (starpu_matrix_get_nx(rows) != starpu_matrix_get_nx(vec) || B == 0 || n % B != 0)
        sw_failf(__FILE__, __LINE__, "%s: %s [%lu,%lu] must be whole positions of the per-sequence %s [%lu,%lu]", op,
                 rn, SW_DIMS(rows), vn, SW_DIMS(vec));
}

void sw_modulate_fwd(starpu_data_handle_t x, starpu_data_handle_t shift, starpu_data_handle_t scale,
                     starpu_data_handle_t y)
{
    check_rows("sw_modulate_fwd", "x", x, "shift", shift);
    SW_SAME_SHAPE("sw_modulate_fwd", shift, scale);
    SW_SAME_SHAPE("sw_modulate_fwd", x, y);
    SW_INSERT(&modulate_fwd_cl, STARPU_R, x, STARPU_R, shift, STARPU_R, scale, STARPU_W, y);
}

void sw_modulate_bwd(starpu_data_handle_t x, starpu_data_handle_t scale, starpu_data_handle_t dy,
                     starpu_data_handle_t dx, starpu_data_handle_t dshift, starpu_data_handle_t dscale)
{
    check_rows("sw_modulate_bwd", "x", x, "scale", scale);
    SW_SAME_SHAPE("sw_modulate_bwd", x, dy);
    SW_SAME_SHAPE("sw_modulate_bwd", x, dx);
    SW_SAME_SHAPE("sw_modulate_bwd", scale, dshift);
    SW_SAME_SHAPE("sw_modulate_bwd", scale, dscale);
    SW_INSERT(&modulate_bwd_cl, STARPU_R, x, STARPU_R, scale, STARPU_R, dy, STARPU_W, dx, STARPU_W, dshift, STARPU_W,
              dscale);
}

void sw_gate_fwd(starpu_data_handle_t res, starpu_data_handle_t gate, starpu_data_handle_t branch,
                 starpu_data_handle_t out)
{
    check_rows("sw_gate_fwd", "res", res, "gate", gate);
    SW_SAME_SHAPE("sw_gate_fwd", res, branch);
    SW_SAME_SHAPE("sw_gate_fwd", res, out);
    SW_INSERT(&gate_fwd_cl, STARPU_R, res, STARPU_R, gate, STARPU_R, branch, STARPU_W, out);
}

void sw_gate_bwd(starpu_data_handle_t branch, starpu_data_handle_t gate, starpu_data_handle_t dy,
                 starpu_data_handle_t dbranch, starpu_data_handle_t dgate)
{
    check_rows("sw_gate_bwd", "branch", branch, "gate", gate);
    SW_SAME_SHAPE("sw_gate_bwd", branch, dy);
    SW_SAME_SHAPE("sw_gate_bwd", branch, dbranch);
    SW_SAME_SHAPE("sw_gate_bwd", gate, dgate);
    SW_INSERT(&gate_bwd_cl, STARPU_R, branch, STARPU_R, gate, STARPU_R, dy, STARPU_W, dbranch, STARPU_W, dgate);
}
