/* Element-wise adds and the column sum (bias gradients).
 *   add: x[r,c] + y[r,c] -> z[r,c];  axpy: y[r,c] += alpha x[r,c]
 *   bias_add: x[r,c] += bias[c];     colsum: y[c] = beta y + alpha sum_r x[r,c]
 *   copy_flat: y (+)= x element by element in row-major order, shapes may
 *   differ (a gradient into its slice of a flat bucket and back)
 *   copy_rows: y[row0 + r, c] = x[r, c] (new keys and values into a KV cache)
 *   zero: x[r,c] = 0 (a gradient that several tasks then add into) */
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"
#include "starweave/runtime.h"

static void same_shape(void *a, void *b)
{
    STARPU_ASSERT_MSG(SW_ROWS_OF(a) == SW_ROWS_OF(b) && SW_COLS_OF(a) == SW_COLS_OF(b),
                      "shapes differ: [%lld,%lld] vs [%lld,%lld]", (long long)SW_ROWS_OF(a),
                      (long long)SW_COLS_OF(a), (long long)SW_ROWS_OF(b), (long long)SW_COLS_OF(b));
}

/* buffers: x, y, z */
static void add_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    same_shape(buffers[0], buffers[1]);
    same_shape(buffers[0], buffers[2]);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]), ldz = SW_LD_OF(buffers[2]);
    const float *x = SW_F32_OF(buffers[0]), *y = SW_F32_OF(buffers[1]);
    float *z = SW_F32_OF(buffers[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx, *yr = y + r * ldy;
        float *zr = z + r * ldz;
        for (int64_t c = 0; c < C; c++) zr[c] = xr[c] + yr[c];
    }
}

/* buffers: x, y */
static void axpy_cpu(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    same_shape(buffers[0], buffers[1]);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        for (int64_t c = 0; c < C; c++) yr[c] += alpha * xr[c];
    }
}

/* buffers: x, bias */
static void bias_add_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ldx = SW_LD_OF(buffers[0]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C);
    float *x = SW_F32_OF(buffers[0]);
    const float *b = SW_F32_OF(buffers[1]);
    const int64_t inc = sw_vec_inc(buffers[1]);
    if (inc == 1) {
        for (int64_t r = 0; r < R; r++) {
            float *xr = x + r * ldx;
            for (int64_t c = 0; c < C; c++) xr[c] += b[c];
        }
    } else {
        for (int64_t r = 0; r < R; r++) {
            float *xr = x + r * ldx;
            for (int64_t c = 0; c < C; c++) xr[c] += b[c * inc];
        }
    }
}

struct colsum_args {
    float alpha, beta;
};

/* Columns in blocks whose double accumulators stay in L1; within a block the
 * rows stream through contiguous row segments. */
#define SW_COLSUM_BLOCK 512

/* buffers: x, y */
static void colsum_cpu(void *buffers[], void *cl_arg)
{
    struct colsum_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ldx = SW_LD_OF(buffers[0]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    const int64_t inc = sw_vec_inc(buffers[1]);
    double acc[SW_COLSUM_BLOCK];
    for (int64_t c0 = 0; c0 < C; c0 += SW_COLSUM_BLOCK) {
        const int64_t nc = C - c0 < SW_COLSUM_BLOCK ? C - c0 : SW_COLSUM_BLOCK;
        for (int64_t c = 0; c < nc; c++) acc[c] = 0.0;
        for (int64_t r = 0; r < R; r++) {
            const float *xr = x + r * ldx + c0;
            for (int64_t c = 0; c < nc; c++) acc[c] += (double)xr[c];
        }
        float *yc = y + c0 * inc;
        /* beta == 0: y is write-only, its old contents (maybe NaN) are not read */
        if (a.beta == 0.0f)
            for (int64_t c = 0; c < nc; c++) yc[c * inc] = (float)((double)a.alpha * acc[c]);
        else
            for (int64_t c = 0; c < nc; c++)
                yc[c * inc] = (float)((double)a.beta * yc[c * inc] + (double)a.alpha * acc[c]);
    }
}

#ifdef STARWEAVE_USE_CUDA
static void add_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    same_shape(buffers[0], buffers[1]);
    same_shape(buffers[0], buffers[2]);
    SW_CUDA_CHECK(sw_cuda_add(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]), SW_LD_OF(buffers[1]),
                              SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]), SW_ROWS_OF(buffers[0]),
                              SW_COLS_OF(buffers[0]), starpu_cuda_get_local_stream()));
}

static void axpy_cuda(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    same_shape(buffers[0], buffers[1]);
    SW_CUDA_CHECK(sw_cuda_axpy(alpha, SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                               SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                               starpu_cuda_get_local_stream()));
}

static void bias_add_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C);
    SW_CUDA_CHECK(sw_cuda_bias_add(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   sw_vec_inc(buffers[1]), SW_ROWS_OF(buffers[0]), C, starpu_cuda_get_local_stream()));
}

static void colsum_cuda(void *buffers[], void *cl_arg)
{
    struct colsum_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_NUMEL_OF(buffers[1]) == C);
    SW_CUDA_CHECK(sw_cuda_colsum(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                 sw_vec_inc(buffers[1]), SW_ROWS_OF(buffers[0]), C, a.alpha, a.beta,
                                 starpu_cuda_get_local_stream()));
}

static void copy_flat_cuda(void *buffers[], void *cl_arg)
{
    int accumulate;
    starpu_codelet_unpack_args(cl_arg, &accumulate);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t RY = SW_ROWS_OF(buffers[1]), CY = SW_COLS_OF(buffers[1]);
    STARPU_ASSERT_MSG(R * C == RY * CY, "copy_flat: %lld elements into %lld", (long long)(R * C), (long long)(RY * CY));
    SW_CUDA_CHECK(sw_cuda_copy_flat(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), R, C, SW_F32_OF(buffers[1]),
                                    SW_LD_OF(buffers[1]), RY, CY, accumulate, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(add_model, "sw_add");
/* buffers: x (R), y (W, or RW when accumulating) */
static void copy_flat_cpu(void *buffers[], void *cl_arg)
{
    int accumulate;
    starpu_codelet_unpack_args(cl_arg, &accumulate);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ldx = SW_LD_OF(buffers[0]);
    const int64_t RY = SW_ROWS_OF(buffers[1]), CY = SW_COLS_OF(buffers[1]), ldy = SW_LD_OF(buffers[1]);
    STARPU_ASSERT_MSG(R * C == RY * CY, "copy_flat: %lld elements into %lld", (long long)(R * C), (long long)(RY * CY));
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    /* in runs contiguous in both x and y (a whole row where the shapes
     * agree): no division per element, and the inner loop vectorises --
     * it runs over every gradient once per micro-batch */
    int64_t yr = 0, yc = 0; /* where x's next element lands in y */
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx;
        for (int64_t c = 0; c < C;) {
            int64_t n = C - c < CY - yc ? C - c : CY - yc;
            float *restrict d = y + yr * ldy + yc;
            const float *restrict v = xr + c;
            if (accumulate)
                for (int64_t i = 0; i < n; i++) d[i] += v[i];
            else
                memcpy(d, v, (size_t)n * sizeof *d);
            c += n;
            if ((yc += n) == CY) yc = 0, yr++;
        }
    }
}

SW_PERFMODEL(copy_flat_model, "sw_copy_flat");
static struct starpu_codelet copy_flat_cl = {
    .cpu_funcs = {copy_flat_cpu},
    .cpu_funcs_name = {"copy_flat_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {copy_flat_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &copy_flat_model,
    .name = "copy_flat",
};

void sw_copy_flat(starpu_data_handle_t x, starpu_data_handle_t y, int accumulate)
{
    SW_SAME_NUMEL("sw_copy_flat", x, y);
    SW_INSERT(&copy_flat_cl, STARPU_R, x, accumulate ? STARPU_RW : STARPU_W, y, STARPU_VALUE, &accumulate,
              sizeof accumulate);
}

/* buffers: x (R), y (RW: its other rows kept); the row offset in cl_arg */
#ifdef STARWEAVE_USE_CUDA
static void copy_rows_cuda(void *buffers[], void *cl_arg)
{
    int64_t row0;
    starpu_codelet_unpack_args(cl_arg, &row0);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    SW_CUDA_CHECK(sw_cuda_copy_flat(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), R, C, SW_F32_OF(buffers[1]) + row0 * ldy,
                                    ldy, R, C, 0, starpu_cuda_get_local_stream()));
}
#endif

static void copy_rows_cpu(void *buffers[], void *cl_arg)
{
    int64_t row0;
    starpu_codelet_unpack_args(cl_arg, &row0);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ldx = SW_LD_OF(buffers[0]);
    const int64_t ldy = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < R; r++) memcpy(y + (row0 + r) * ldy, x + r * ldx, sizeof(float) * (size_t)C);
}

SW_PERFMODEL(copy_rows_model, "sw_copy_rows");
static struct starpu_codelet copy_rows_cl = {
    .cpu_funcs = {copy_rows_cpu},
    .cpu_funcs_name = {"copy_rows_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {copy_rows_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_RW},
    .model = &copy_rows_model,
    .name = "copy_rows",
};

void sw_copy_rows(starpu_data_handle_t x, starpu_data_handle_t y, int64_t row0)
{
    const int64_t R = (int64_t)starpu_matrix_get_ny(x), RY = (int64_t)starpu_matrix_get_ny(y);
    if (starpu_matrix_get_nx(x) != starpu_matrix_get_nx(y) || row0 < 0 || row0 + R > RY)
        sw_usage_error("sw_copy_rows: %lld x %lld rows at row %lld of %lld x %lld", (long long)R,
                       (long long)starpu_matrix_get_nx(x), (long long)row0, (long long)RY,
                       (long long)starpu_matrix_get_nx(y));
    SW_INSERT(&copy_rows_cl, STARPU_R, x, STARPU_RW, y, STARPU_VALUE, &row0, sizeof row0);
}

/* buffers: x (W); the padding past the columns is left alone */
static void zero_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    float *x = SW_F32_OF(buffers[0]);
    for (int64_t r = 0; r < R; r++) memset(x + r * ld, 0, sizeof(float) * (size_t)C);
}
#ifdef STARWEAVE_USE_CUDA
static void zero_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const size_t ld = sizeof(float) * (size_t)SW_LD_OF(buffers[0]), width = sizeof(float) * (size_t)SW_COLS_OF(buffers[0]);
    SW_CUDA_CHECK(cudaMemset2DAsync(SW_F32_OF(buffers[0]), ld, 0, width, (size_t)SW_ROWS_OF(buffers[0]),
                                    starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(zero_model, "sw_zero");
static struct starpu_codelet zero_cl = {
    .cpu_funcs = {zero_cpu},
    .cpu_funcs_name = {"zero_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {zero_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 1,
    .modes = {STARPU_W},
    .model = &zero_model,
    .name = "zero",
};

void sw_zero(starpu_data_handle_t x) { SW_INSERT(&zero_cl, STARPU_W, x); }

SW_PERFMODEL(axpy_model, "sw_axpy");
SW_PERFMODEL(bias_add_model, "sw_bias_add");
SW_PERFMODEL(colsum_model, "sw_colsum");

static struct starpu_codelet add_cl = {
    .cpu_funcs = {add_cpu},
    .cpu_funcs_name = {"add_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {add_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &add_model,
    .name = "add",
};

static struct starpu_codelet axpy_cl = {
    .cpu_funcs = {axpy_cpu},
    .cpu_funcs_name = {"axpy_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {axpy_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_RW},
    .model = &axpy_model,
    .name = "axpy",
};

static struct starpu_codelet bias_add_cl = {
    .cpu_funcs = {bias_add_cpu},
    .cpu_funcs_name = {"bias_add_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {bias_add_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_RW, STARPU_R},
    .model = &bias_add_model,
    .name = "bias_add",
};

/* y is W or RW depending on beta: modes come from the insert call. */
static struct starpu_codelet colsum_cl = {
    .cpu_funcs = {colsum_cpu},
    .cpu_funcs_name = {"colsum_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {colsum_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &colsum_model,
    .name = "colsum",
};

void sw_add(starpu_data_handle_t x, starpu_data_handle_t y, starpu_data_handle_t z)
{
    SW_SAME_SHAPE("sw_add", x, y);
    SW_SAME_SHAPE("sw_add", x, z);
    SW_INSERT(&add_cl, STARPU_R, x, STARPU_R, y, STARPU_W, z);
}

void sw_axpy(float alpha, starpu_data_handle_t x, starpu_data_handle_t y)
{
    SW_SAME_SHAPE("sw_axpy", x, y);
    SW_INSERT(&axpy_cl, STARPU_R, x, STARPU_RW, y, STARPU_VALUE, &alpha, sizeof alpha);
}

void sw_bias_add(starpu_data_handle_t x, starpu_data_handle_t bias)
{
    SW_ONE_PER_COL("sw_bias_add", bias, x);
    SW_INSERT(&bias_add_cl, STARPU_RW, x, STARPU_R, bias);
}

void sw_colsum(starpu_data_handle_t x, starpu_data_handle_t y, float alpha, float beta)
{
    SW_ONE_PER_COL("sw_colsum", y, x);
    struct colsum_args a = {alpha, beta};
    SW_INSERT(&colsum_cl, STARPU_R, x, beta == 0.0f ? STARPU_W : STARPU_RW, y, STARPU_VALUE, &a, sizeof a);
}
