/* bf16 (--dtype bf16): the fp32 -> bf16 rounding of codelets/bf16.h against
 * a reference that picks the nearer of the two neighbouring bf16 values
 * (ties to the even one; past the largest finite value, towards the next
 * power of two, i.e. infinity), on edge cases and 2^20 random bit patterns;
 * the cast codelet on strided tiles both ways (bitwise); and sw_gemm /
 * sw_gemm_bias with bf16 operands against a double-precision product of the
 * rounded operands (fp32 accumulation: the tolerance of test_gemm), every
 * transpose combination, strided column tiles, with every CPU GEMM backend
 * of the build (oneDNN multiplies bf16 where sw_gemm_bf16_native(); elsewhere,
 * and always with OpenBLAS, the operands are widened to fp32; each check
 * names which). The event counters must show every GEMM of a backend's round
 * as bf16, computed by the backend of the round, and none by the other. */
#include <string.h>

#include "bf16.h"
#include "testutil.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* the value of bf16 pattern b (as an fp32's upper half) for comparing
 * distances: infinity counts as 2^128, the next binade */
static double cmp_value(uint32_t hi16)
{
    if ((hi16 & 0x7fffu) == 0x7f80u) return (hi16 & 0x8000u) ? -0x1p128 : 0x1p128;
    return from_bits(hi16 << 16);
}

static uint16_t ref_round(uint32_t u)
{
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffff; /* NaN: checked apart */
    if ((u & 0x7fffffffu) == 0x7f800000u) return (uint16_t)(u >> 16);
    const uint32_t lo = u >> 16, hi = lo + 1; /* towards larger magnitude: the same sign */
    const double x = from_bits(u), dl = fabs(x - cmp_value(lo)), dh = fabs(x - cmp_value(hi));
    if (dl < dh) return (uint16_t)lo;
    if (dh < dl) return (uint16_t)hi;
    return (uint16_t)((lo & 1u) ? hi : lo);
}

static void test_rounding(void)
{
    static const uint32_t edge[] = {
        0x3f800000u, 0x3f808000u /* 1 + 2^-8: tie, down to even */, 0x3f818000u /* tie, up to even */,
        0x3f808001u, 0x3f807fffu, 0x80000000u, 0x00000000u, 0x00000001u, 0x00008000u, 0x00018000u,
        0x007fffffu, 0x7f7f7fffu, 0x7f7f8000u /* tie at the top: up to infinity */, 0x7f7fffffu /* FLT_MAX */,
        0xff7fffffu, 0x7f800000u, 0xff800000u, 0xbf808000u, 0xc0490fdbu /* -pi */};
    long bad = 0, n = 0;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, n++)
        bad += sw_bf16_from_f32(from_bits(edge[i])) != ref_round(edge[i]);
    uint64_t s = 88172645463325252ull;
    for (long i = 0; i < (1L << 20); i++, n++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        const uint32_t u = (uint32_t)(s >> 17);
        if ((u & 0x7fffffffu) > 0x7f800000u) { n--; continue; }
        bad += sw_bf16_from_f32(from_bits(u)) != ref_round(u);
    }
    char what[160];
    snprintf(what, sizeof what, "fp32 -> bf16 rounds to nearest even: %ld of %ld patterns differ", bad, n);
    tu_true(what, bad == 0);
    const uint16_t q = sw_bf16_from_f32(from_bits(0x7fa00001u)), nq = sw_bf16_from_f32(from_bits(0xff800001u));
    tu_true("NaN stays NaN (signalling ones quieted), sign kept",
            (q & 0x7f80u) == 0x7f80u && (q & 0x7fu) && (q & 0x40u) && !(q & 0x8000u) && (nq & 0x8000u) &&
                (nq & 0x7fu));
    long rt = 0;
    for (uint32_t b = 0; b < 0x10000u; b++)
        if ((b & 0x7fffu) <= 0x7f80u) rt += sw_bf16_from_f32(sw_f32_from_bf16((uint16_t)b)) != b;
    tu_true("every non-NaN bf16 value survives bf16 -> fp32 -> bf16", rt == 0);
}

/* the cast codelet on strided column tiles, fp32 -> bf16 -> fp32 */
static void test_cast(void)
{
    enum { R = 23, C = 41 };
    float *x = malloc(sizeof(float) * R * C);
    if (!x) exit(99);
    tu_rand(x, R * C, 5, 3.0f);
    x[0] = from_bits(0x3f808000u), x[1] = -0.0f, x[2] = INFINITY, x[3] = 1e-40f;
    sw_tensor *X = tu_tensor("x", R, C, x), *H = sw_tensor_new2d("x16", SW_BF16, R, C), *Y = tu_tensor("y", R, C, NULL);
    starpu_data_handle_t *xt = sw_tensor_tiles(X, SW_COLS, 3, STARPU_R), *ht = sw_tensor_tiles(H, SW_COLS, 3, STARPU_W);
    for (int j = 0; j < 3; j++) sw_cast(xt[j], ht[j]);
    starpu_data_handle_t *hr = sw_tensor_tiles(H, SW_ROWS, 2, STARPU_R), *yt = sw_tensor_tiles(Y, SW_ROWS, 2, STARPU_W);
    for (int i = 0; i < 2; i++) sw_cast(hr[i], yt[i]);
    uint16_t *h = malloc(sizeof(uint16_t) * R * C);
    if (!h) exit(99);
    sw_tensor_read_host(H, h);
    float *y = tu_read(Y);
    long bad16 = 0, bad32 = 0;
    for (int i = 0; i < R * C; i++) {
        bad16 += h[i] != sw_bf16_from_f32(x[i]);
        const float want = sw_f32_from_bf16(sw_bf16_from_f32(x[i]));
        bad32 += memcmp(&y[i], &want, sizeof want) != 0;
    }
    char what[160];
    snprintf(what, sizeof what, "cast fp32 -> bf16 on strided column tiles: %ld of %d differ", bad16, R * C);
    tu_true(what, bad16 == 0);
    snprintf(what, sizeof what, "cast bf16 -> fp32 on row tiles: %ld of %d differ", bad32, R * C);
    tu_true(what, bad32 == 0);
    free(x), free(h), free(y);
    sw_tensor_free(X), sw_tensor_free(H), sw_tensor_free(Y);
}

enum { M = 37, N = 53, K = 29 };

/* the rounded values, and their bf16 tensor */
static sw_tensor *rounded(const char *name, int64_t rows, int64_t cols, uint64_t seed, float **vals)
{
    float *x = malloc(sizeof(float) * (size_t)(rows * cols));
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(rows * cols));
    if (!x || !h) exit(99);
    tu_rand(x, rows * cols, seed, 1.0f);
    for (int64_t i = 0; i < rows * cols; i++) x[i] = sw_f32_from_bf16(h[i] = sw_bf16_from_f32(x[i]));
    sw_tensor *t = sw_tensor_new2d(name, SW_BF16, rows, cols);
    sw_tensor_write_host(t, h);
    free(h);
    *vals = x;
    return t;
}

static void ref_gemm(const float *A, int ta, const float *B, int tb, double *C, int m, int n, int k)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double)(ta ? A[l * m + i] : A[i * k + l]) * (tb ? B[j * k + l] : B[l * n + j]);
            C[i * n + j] = s;
        }
}

static void check(const char *what, sw_tensor *C, const double *ref)
{
    float *got = tu_read(C);
    char line[400];
    snprintf(line, sizeof line, "%s [%s]", what, tu_gemm_desc());
    tu_close(line, got, ref, M * N, 1e-5, 1e-5 * tu_maxabs(ref, M * N));
    free(got);
}

static void test_gemm(void *unused)
{
    (void)unused;
    double *ref = malloc(sizeof(double) * M * N);
    float *bias = malloc(sizeof(float) * N);
    if (!ref || !bias) exit(99);
    tu_rand(bias, N, 9, 1.0f);
    char what[160];
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            float *a, *b;
            sw_tensor *A = rounded("A", ta ? K : M, ta ? M : K, 1, &a), *B = rounded("B", tb ? N : K, tb ? K : N, 2, &b);
            sw_tensor *C = tu_tensor("C", M, N, NULL);
            sw_tensor_fill(C, NAN);
            tu_gemm(sw_tensor_whole(A, STARPU_R), ta, sw_tensor_whole(B, STARPU_R), tb, sw_tensor_whole(C, STARPU_W),
                    1.0f, 0.0f);
            ref_gemm(a, ta, b, tb, ref, M, N, K);
            snprintf(what, sizeof what, "bf16 gemm %dx%dx%d transA=%d transB=%d = double product of the bf16 values",
                     M, N, K, ta, tb);
            check(what, C, ref);
            sw_tensor_free(A), sw_tensor_free(B), sw_tensor_free(C);
            free(a), free(b);
        }
    /* C[:, Nj] = A (Bt row blocks)^T + bias[Nj], and C = sum_i A[:, Ki] B[Ki, :]: strided bf16 tiles */
    {
        float *a, *b, *bt;
        sw_tensor *A = rounded("A", M, K, 3, &a), *B = rounded("B", K, N, 4, &b), *Bt = rounded("Bt", N, K, 4, &bt);
        sw_tensor *bs = tu_tensor("bias", 1, N, bias), *C = tu_tensor("C", M, N, NULL);
        starpu_data_handle_t *Br = sw_tensor_tiles(Bt, SW_ROWS, 3, STARPU_R), *bb = sw_tensor_tiles(bs, SW_COLS, 3, STARPU_R);
        starpu_data_handle_t *Cc = sw_tensor_tiles(C, SW_COLS, 3, STARPU_W);
        for (int j = 0; j < 3; j++) tu_gemm_bias(sw_tensor_whole(A, STARPU_R), 0, Br[j], 1, bb[j], Cc[j]);
        ref_gemm(a, 0, bt, 1, ref, M, N, K);
        for (int i = 0; i < M * N; i++) ref[i] += bias[i % N];
        check("bf16 gemm_bias: strided C column blocks = A x (bf16 Bt row blocks)^T + bias", C, ref);
        starpu_data_handle_t *Ac = sw_tensor_tiles(A, SW_COLS, 2, STARPU_R), *Bk = sw_tensor_tiles(B, SW_ROWS, 2, STARPU_R);
        for (int i = 0; i < 2; i++)
            tu_gemm(Ac[i], 0, Bk[i], 0, sw_tensor_whole(C, i ? STARPU_RW : STARPU_W), 1.0f, i ? 1.0f : 0.0f);
        ref_gemm(a, 0, b, 0, ref, M, N, K);
        check("bf16 gemm: C = sum of strided bf16 A column blocks x B row blocks (beta 0, 1)", C, ref);
        sw_tensor_free(A), sw_tensor_free(B), sw_tensor_free(Bt), sw_tensor_free(bs), sw_tensor_free(C);
        free(a), free(b), free(bt);
    }
    free(ref), free(bias);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    test_rounding();
    test_cast();
    tu_each_gemm_backend("bf16 gemm", test_gemm, NULL, 1);
    return tu_finish();
}
