/* sw_gemm / sw_gemm_bias against a double-precision reference: all four
 * transpose combinations, beta 0 (C write-only: NaN contents ignored) and
 * beta 1, odd sizes, and strided column blocks of A, B and C -- with every
 * CPU GEMM backend of the build (OpenBLAS; oneDNN where built, SKIP
 * otherwise). sw_gemm_cpu on the calling thread runs one shape with each
 * leading dimension in turn widened (submatrices of wider buffers): a
 * oneDNN primitive cached without lda, ldb or ldc in its key would be
 * reused with the first call's strides. The event counters must show that
 * the backend asked for computed every GEMM of its round and the other
 * backend none. */
#include <string.h>

#include "testutil.h"

enum { M = 37, N = 53, K = 29 };

/* C = alpha op(A) op(B) + beta C0 (C0 ignored when beta == 0); A is stored
 * [k,m] when ta else [m,k], B [n,k] when tb else [k,n], all contiguous. */
static void ref_gemm(const float *A, int ta, const float *B, int tb, const float *C0, double alpha,
                     double beta, double *C, int m, int n, int k)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++) {
                double a = ta ? A[l * m + i] : A[i * k + l];
                double b = tb ? B[j * k + l] : B[l * n + j];
                s += a * b;
            }
            C[i * n + j] = alpha * s + (beta != 0 ? beta * C0[i * n + j] : 0.0);
        }
}

static void check(const char *what, sw_tensor *C, const double *ref)
{
    float *got = tu_read(C);
    int64_t n = sw_tensor_numel(C);
    char line[300];
    snprintf(line, sizeof line, "%s [%s]", what, tu_gemm_desc());
    tu_close(line, got, ref, n, 1e-5, 1e-5 * tu_maxabs(ref, n));
    free(got);
}

static float *rnd(int64_t n, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)n);
    if (!x) exit(99);
    tu_rand(x, n, seed, 1.0f);
    return x;
}

/* every form once, with the current backend */
static void all_forms(const float *a, const float *b, const float *c0, const float *bias, double *ref)
{
    char what[128];
    /* whole matrices: every transpose combination, beta 0 and 1 */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                sw_tensor *A = tu_tensor("A", ta ? K : M, ta ? M : K, a);
                sw_tensor *B = tu_tensor("B", tb ? N : K, tb ? K : N, b);
                sw_tensor *C = tu_tensor("C", M, N, beta ? c0 : NULL);
                if (!beta) sw_tensor_fill(C, NAN);
                tu_gemm(sw_tensor_whole(A, STARPU_R), ta, sw_tensor_whole(B, STARPU_R), tb,
                        sw_tensor_whole(C, beta ? STARPU_RW : STARPU_W), 0.75f, (float)beta);
                ref_gemm(a, ta, b, tb, c0, 0.75, beta, ref, M, N, K);
                snprintf(what, sizeof what, "gemm %dx%dx%d transA=%d transB=%d alpha=0.75 beta=%d", M, N, K,
                         ta, tb, beta);
                check(what, C, ref);
                sw_tensor_free(A);
                sw_tensor_free(B);
                sw_tensor_free(C);
            }

    /* C = sum_i A[:, Ki] B[Ki, :]: strided column blocks of A, beta 0 then 1 */
    {
        sw_tensor *A = tu_tensor("A", M, K, a), *B = tu_tensor("B", K, N, b), *C = tu_tensor("C", M, N, NULL);
        sw_tensor_fill(C, NAN);
        starpu_data_handle_t *Ac = sw_tensor_tiles(A, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *Br = sw_tensor_tiles(B, SW_ROWS, 2, STARPU_R);
        for (int i = 0; i < 2; i++)
            tu_gemm(Ac[i], 0, Br[i], 0, sw_tensor_whole(C, i ? STARPU_RW : STARPU_W), 1.0f, i ? 1.0f : 0.0f);
        ref_gemm(a, 0, b, 0, NULL, 1, 0, ref, M, N, K);
        check("gemm: C = sum of strided A column blocks x B row blocks (beta 0, 1)", C, ref);
        sw_tensor_free(A);
        sw_tensor_free(B);
        sw_tensor_free(C);
    }
    /* C[:, Nj] = A B[:, Nj]: strided B and C column blocks */
    {
        sw_tensor *A = tu_tensor("A", M, K, a), *B = tu_tensor("B", K, N, b), *C = tu_tensor("C", M, N, NULL);
        sw_tensor_fill(C, NAN);
        starpu_data_handle_t *Bc = sw_tensor_tiles(B, SW_COLS, 3, STARPU_R);
        starpu_data_handle_t *Cc = sw_tensor_tiles(C, SW_COLS, 3, STARPU_W);
        for (int j = 0; j < 3; j++) tu_gemm(sw_tensor_whole(A, STARPU_R), 0, Bc[j], 0, Cc[j], 1.0f, 0.0f);
        ref_gemm(a, 0, b, 0, NULL, 1, 0, ref, M, N, K);
        check("gemm: strided C column blocks = A x strided B column blocks", C, ref);
        sw_tensor_free(A);
        sw_tensor_free(B);
        sw_tensor_free(C);
    }
    /* C[Mi, :] = (At[:, Mi])^T B + C0[Mi, :]: transA on strided column blocks, beta 1 */
    {
        sw_tensor *At = tu_tensor("At", K, M, a), *B = tu_tensor("B", K, N, b), *C = tu_tensor("C", M, N, c0);
        starpu_data_handle_t *Ac = sw_tensor_tiles(At, SW_COLS, 3, STARPU_R);
        starpu_data_handle_t *Cr = sw_tensor_tiles(C, SW_ROWS, 3, STARPU_RW);
        for (int i = 0; i < 3; i++) tu_gemm(Ac[i], 1, sw_tensor_whole(B, STARPU_R), 0, Cr[i], -0.5f, 1.0f);
        ref_gemm(a, 1, b, 0, c0, -0.5, 1, ref, M, N, K);
        check("gemm: C row blocks += -0.5 strided At column blocks^T x B (transA, beta 1)", C, ref);
        sw_tensor_free(At);
        sw_tensor_free(B);
        sw_tensor_free(C);
    }
    /* C = sum_i A[:, Ki] (Bt[:, Ki])^T: transB on strided column blocks */
    {
        sw_tensor *A = tu_tensor("A", M, K, a), *Bt = tu_tensor("Bt", N, K, b), *C = tu_tensor("C", M, N, NULL);
        sw_tensor_fill(C, NAN);
        starpu_data_handle_t *Ac = sw_tensor_tiles(A, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *Bc = sw_tensor_tiles(Bt, SW_COLS, 2, STARPU_R);
        for (int i = 0; i < 2; i++)
            tu_gemm(Ac[i], 0, Bc[i], 1, sw_tensor_whole(C, i ? STARPU_RW : STARPU_W), 1.0f, i ? 1.0f : 0.0f);
        ref_gemm(a, 0, b, 1, NULL, 1, 0, ref, M, N, K);
        check("gemm: C = sum of strided A column blocks x strided Bt column blocks^T (transB)", C, ref);
        sw_tensor_free(A);
        sw_tensor_free(Bt);
        sw_tensor_free(C);
    }
    /* both transposed: strided C column blocks C[:, Nj] = 2 At^T (Bt[Nj, :])^T */
    {
        sw_tensor *At = tu_tensor("At", K, M, a), *Bt = tu_tensor("Bt", N, K, b), *C = tu_tensor("C", M, N, NULL);
        sw_tensor_fill(C, NAN);
        starpu_data_handle_t *Br = sw_tensor_tiles(Bt, SW_ROWS, 2, STARPU_R);
        starpu_data_handle_t *Cc = sw_tensor_tiles(C, SW_COLS, 2, STARPU_W);
        for (int j = 0; j < 2; j++) tu_gemm(sw_tensor_whole(At, STARPU_R), 1, Br[j], 1, Cc[j], 2.0f, 0.0f);
        ref_gemm(a, 1, b, 1, NULL, 2, 0, ref, M, N, K);
        check("gemm: strided C column blocks = 2 At^T x (Bt row blocks)^T (both transposed)", C, ref);
        sw_tensor_free(At);
        sw_tensor_free(Bt);
        sw_tensor_free(C);
    }

    /* gemm_bias: whole, and strided column blocks with bias blocks (transB 0 and 1) */
    for (int tb = 0; tb < 2; tb++)
        for (int tiles = 1; tiles <= 3; tiles += 2) {
            sw_tensor *A = tu_tensor("A", M, K, a), *B = tu_tensor("B", tb ? N : K, tb ? K : N, b);
            sw_tensor *bs = tu_tensor("bias", 1, N, bias), *C = tu_tensor("C", M, N, NULL);
            sw_tensor_fill(C, NAN);
            starpu_data_handle_t *Bt = sw_tensor_tiles(B, tb ? SW_ROWS : SW_COLS, tiles, STARPU_R);
            starpu_data_handle_t *bt = sw_tensor_tiles(bs, SW_COLS, tiles, STARPU_R);
            starpu_data_handle_t *Ct = sw_tensor_tiles(C, SW_COLS, tiles, STARPU_W);
            for (int j = 0; j < tiles; j++) tu_gemm_bias(sw_tensor_whole(A, STARPU_R), 0, Bt[j], tb, bt[j], Ct[j]);
            ref_gemm(a, 0, b, tb, NULL, 1, 0, ref, M, N, K);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) ref[i * N + j] += bias[j];
            snprintf(what, sizeof what, "gemm_bias: %d column tile(s), transB=%d", tiles, tb);
            check(what, C, ref);
            sw_tensor_free(A);
            sw_tensor_free(B);
            sw_tensor_free(bs);
            sw_tensor_free(C);
        }
    /* gemm_bias with transA and row tiles of C (bias whole) */
    {
        sw_tensor *At = tu_tensor("At", K, M, a), *B = tu_tensor("B", K, N, b);
        sw_tensor *bs = tu_tensor("bias", 1, N, bias), *C = tu_tensor("C", M, N, NULL);
        sw_tensor_fill(C, NAN);
        starpu_data_handle_t *Ac = sw_tensor_tiles(At, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *Cr = sw_tensor_tiles(C, SW_ROWS, 2, STARPU_W);
        for (int i = 0; i < 2; i++)
            tu_gemm_bias(Ac[i], 1, sw_tensor_whole(B, STARPU_R), 0, sw_tensor_whole(bs, STARPU_R), Cr[i]);
        ref_gemm(a, 1, b, 0, NULL, 1, 0, ref, M, N, K);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) ref[i * N + j] += bias[j];
        check("gemm_bias: transA on strided column blocks, C row tiles", C, ref);
        sw_tensor_free(At);
        sw_tensor_free(B);
        sw_tensor_free(bs);
        sw_tensor_free(C);
    }

}

/* One shape, LM x LN x LK, each transpose combination, alpha -0.5, beta 1,
 * through sw_gemm_cpu on this thread four times: every leading dimension
 * tight, then lda, ldb and ldc in turn PAD wider (the operands submatrices
 * of wider buffers, whose padding is NaN in A and B and a sentinel in C that
 * must stay). Shape, transposes, alpha and beta repeat exactly: only the
 * leading dimensions tell a call from the tight one before it. */
enum { LM = 11, LN = 13, LK = 9, PAD = 5 };
static void leading_dims(void)
{
    float *a = rnd(LM * LK, 5), *b = rnd(LK * LN, 6), *c0 = rnd(LM * LN, 7);
    double ref[LM * LN];
    float got[LM * LN];
    const float sentinel = 1234.5f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int ra = ta ? LK : LM, ca = ta ? LM : LK, rb = tb ? LN : LK, cb = tb ? LK : LN;
            ref_gemm(a, ta, b, tb, c0, -0.5, 1, ref, LM, LN, LK);
            for (int v = 0; v < 4; v++) {
                const int lda = ca + (v == 1 ? PAD : 0), ldb = cb + (v == 2 ? PAD : 0), ldc = LN + (v == 3 ? PAD : 0);
                float *A = malloc(sizeof(float) * ra * (ca + PAD)), *B = malloc(sizeof(float) * rb * (cb + PAD));
                float *C = malloc(sizeof(float) * LM * (LN + PAD));
                if (!A || !B || !C) exit(99);
                for (int i = 0; i < ra * (ca + PAD); i++) A[i] = NAN;
                for (int i = 0; i < rb * (cb + PAD); i++) B[i] = NAN;
                for (int i = 0; i < LM * (LN + PAD); i++) C[i] = sentinel;
                for (int r = 0; r < ra; r++) memcpy(A + r * lda, a + r * ca, sizeof(float) * ca);
                for (int r = 0; r < rb; r++) memcpy(B + r * ldb, b + r * cb, sizeof(float) * cb);
                for (int r = 0; r < LM; r++) memcpy(C + r * ldc, c0 + r * LN, sizeof(float) * LN);
                ++*tu_gemm_count();
                sw_gemm_cpu(ta, tb, LM, LN, LK, -0.5f, A, lda, B, ldb, 1.0f, C, ldc, SW_F32);
                int kept = 1;
                for (int r = 0; r < LM; r++) {
                    memcpy(got + r * LN, C + r * ldc, sizeof(float) * LN);
                    for (int j = LN; j < ldc; j++) kept &= C[r * ldc + j] == sentinel;
                }
                for (int i = LM * ldc; i < LM * (LN + PAD); i++) kept &= C[i] == sentinel;
                char what[300];
                snprintf(what, sizeof what,
                         "sw_gemm_cpu %dx%dx%d transA=%d transB=%d alpha=-0.5 beta=1, lda %d ldb %d ldc %d (%s) [%s]",
                         LM, LN, LK, ta, tb, lda, ldb, ldc,
                         (const char *[]){"all tight", "lda widened", "ldb widened", "ldc widened"}[v], tu_gemm_desc());
                tu_close(what, got, ref, LM * LN, 1e-5, 1e-5 * tu_maxabs(ref, LM * LN));
                if (v == 3) {
                    snprintf(what, sizeof what, "sw_gemm_cpu transA=%d transB=%d ldc %d: C's padding untouched [%s]",
                             ta, tb, ldc, tu_gemm_desc());
                    tu_true(what, kept);
                }
                free(A);
                free(B);
                free(C);
            }
        }
    free(a);
    free(b);
    free(c0);
}

/* one backend's round: every form, then the leading dimensions */
struct forms_args {
    const float *a, *b, *c0, *bias;
    double *ref;
};
static void forms_and_leading_dims(void *arg)
{
    const struct forms_args *f = arg;
    all_forms(f->a, f->b, f->c0, f->bias, f->ref);
    leading_dims();
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    float *a = rnd(M * K, 1), *b = rnd(K * N, 2), *c0 = rnd(M * N, 3), *bias = rnd(N, 4);
    double *ref = malloc(sizeof(double) * M * N);
    if (!ref) exit(99);
    struct forms_args fa = {a, b, c0, bias, ref};
    tu_each_gemm_backend("gemm", forms_and_leading_dims, &fa, 0);
    free(a);
    free(b);
    free(c0);
    free(bias);
    free(ref);
    return tu_finish();
}
