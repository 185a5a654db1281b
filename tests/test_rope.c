/* sw_rope: rotary position embedding in place, forward and inverse.
 * The reference is double except for the angle, which the API defines in
 * fp32 as PyTorch forms it (inv_freq = 1 / theta^((float)(2i) / d) rounded
 * to fp32, angle = (float)p * inv_freq in fp32); its cos, sin and the
 * rotation are double. Checked, on whole tensors and on grids of tiles
 * whose row offsets are not multiples of the batch (row0 > 0, pos0 > 0) and
 * whose column blocks are whole heads of a wider matrix (ld > cols):
 *   - the forward against the reference;
 *   - the inverse of a gradient g against central differences of the
 *     double loss sum(rope(x) * g) (the transpose of the rotation), and the
 *     identity <rope(x), g> = <x, rope^-1(g)>;
 *   - rope^-1(rope(x)) = x;
 *   - q and k column blocks of a fused qkv matrix rotated, v untouched;
 *   - a d that does not divide the columns, or an odd d, refused at submission. */
#include <string.h>

#include "testutil.h"

/* |got - ref| <= AREL max|ref| (forward, inverse vs finite differences, the
 * q and k blocks), RT_AREL max|x| for the round trip (two rotations): the
 * error is absolute, from the cancellation in a cos - b sin and 1-ulp
 * cosf/sinf, so no relative term. Measured over 8 seeds and the 4 cases:
 * worst |got - ref| / max|ref| 9.1e-8 (one rotation), 1.8e-7 (round trip). */
static const double AREL = 1e-6, RT_AREL = 2e-6;
/* |<rope(x), g> - <x, rope^-1(g)>| <= DOT_REL sum |x_i| |g_i|: worst 6.9e-9. */
static const double DOT_REL = 7e-8;

typedef struct {
    const char *name;
    int64_t rows;     /* rows of the tensor */
    int heads, d, batch;
    float theta;
    int64_t base_row0; /* global row of the tensor's row 0 */
    int64_t pos0;
    int nr, nc;        /* a grid of tiles: row sizes, column sizes in heads */
    int64_t row_sizes[4];
    int col_heads[4];
} rope_case;

/* cos and sin of every (row, i) of a case, from the fp32 angle */
typedef struct {
    const rope_case *c;
    int64_t cols;
    double *cs, *sn; /* [rows, d/2] */
    const double *x, *g; /* the loss's point and weights (finite differences) */
    double *tmp;         /* [rows, cols] */
} ref_table;

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        perror("calloc");
        exit(99);
    }
    return p;
}

static ref_table ref_new(const rope_case *c)
{
    const int64_t half = c->d / 2;
    ref_table t = {.c = c, .cols = (int64_t)c->heads * c->d};
    t.cs = xmalloc(sizeof(double) * (size_t)(c->rows * half));
    t.sn = xmalloc(sizeof(double) * (size_t)(c->rows * half));
    t.tmp = xmalloc(sizeof(double) * (size_t)(c->rows * t.cols));
    for (int64_t r = 0; r < c->rows; r++) {
        const int64_t p = c->pos0 + (c->base_row0 + r) / c->batch;
        for (int64_t i = 0; i < half; i++) {
            const float e = (float)(2 * i) / (float)c->d;
            const float inv = 1.0f / (float)pow((double)c->theta, (double)e);
            const float angle = (float)p * inv;
            t.cs[r * half + i] = cos((double)angle);
            t.sn[r * half + i] = sin((double)angle);
        }
    }
    return t;
}

static void ref_free(ref_table *t)
{
    free(t->cs), free(t->sn), free(t->tmp);
}

/* y = R x (inverse: R^T x), double */
static void ref_apply(const ref_table *t, const double *x, double *y, int inverse)
{
    const int d = t->c->d, half = d / 2;
    for (int64_t r = 0; r < t->c->rows; r++)
        for (int h = 0; h < t->c->heads; h++)
            for (int i = 0; i < half; i++) {
                const int64_t ia = r * t->cols + (int64_t)h * d + i, ib = ia + half;
                const double c = t->cs[r * half + i], s = inverse ? -t->sn[r * half + i] : t->sn[r * half + i];
                y[ia] = x[ia] * c - x[ib] * s;
                y[ib] = x[ia] * s + x[ib] * c;
            }
}

static double ref_loss(const void *p)
{
    const ref_table *t = p;
    ref_apply(t, t->x, t->tmp, 0);
    double l = 0;
    for (int64_t i = 0; i < t->c->rows * t->cols; i++) l += t->tmp[i] * t->g[i];
    return l;
}

/* rotates T on the case's grid of tiles (or whole) */
static void rope_tiles(const rope_case *c, sw_tensor *T, int grid, int inverse)
{
    if (!grid) {
        sw_rope(sw_tensor_whole(T, STARPU_RW), c->d, c->theta, c->base_row0, c->batch, c->pos0, inverse);
        return;
    }
    int64_t col_sizes[4];
    for (int j = 0; j < c->nc; j++) col_sizes[j] = (int64_t)c->col_heads[j] * c->d;
    starpu_data_handle_t *h = sw_tensor_grid(T, c->nr, c->row_sizes, c->nc, col_sizes, STARPU_RW);
    int64_t row0 = c->base_row0;
    for (int i = 0; i < c->nr; i++) {
        for (int j = 0; j < c->nc; j++) sw_rope(h[i * c->nc + j], c->d, c->theta, row0, c->batch, c->pos0, inverse);
        row0 += c->row_sizes[i];
    }
}

static void test_case(const rope_case *c)
{
    const int64_t cols = (int64_t)c->heads * c->d, n = c->rows * cols;
    float *x = xmalloc(sizeof(float) * (size_t)n), *g = xmalloc(sizeof(float) * (size_t)n);
    tu_rand(x, n, 61, 1.0f);
    tu_rand(g, n, 62, 1.0f);
    double *xd = xmalloc(sizeof(double) * (size_t)n), *gd = xmalloc(sizeof(double) * (size_t)n);
    double *y_ref = xmalloc(sizeof(double) * (size_t)n), *dx_ref = xmalloc(sizeof(double) * (size_t)n);
    tu_to_double(xd, x, n);
    tu_to_double(gd, g, n);
    ref_table t = ref_new(c);
    ref_apply(&t, xd, y_ref, 0);
    t.x = xd, t.g = gd; /* tu_fd_grad moves xd[i] */
    tu_fd_grad(ref_loss, &t, xd, n, dx_ref);
    const double ymax = tu_maxabs(y_ref, n), dxmax = tu_maxabs(dx_ref, n), xmax = tu_maxabs(xd, n);
    char what[256];

    for (int grid = 0; grid <= 1; grid++) {
        const char *how = grid ? "grid of tiles" : "whole";
        sw_tensor *X = tu_tensor("x", c->rows, cols, x), *G = tu_tensor("g", c->rows, cols, g);
        sw_tensor *RT = tu_tensor("roundtrip", c->rows, cols, x);
        rope_tiles(c, X, grid, 0);
        rope_tiles(c, G, grid, 1);
        rope_tiles(c, RT, grid, 0);
        rope_tiles(c, RT, grid, 1);
        float *y = tu_read(X), *dx = tu_read(G), *rt = tu_read(RT);
        snprintf(what, sizeof what, "rope %s, %s: fwd", c->name, how);
        tu_close(what, y, y_ref, n, 0.0, AREL * ymax);
        snprintf(what, sizeof what, "rope %s, %s: inverse(g) vs finite differences of sum(rope(x) g)", c->name, how);
        tu_close(what, dx, dx_ref, n, 0.0, AREL * dxmax);
        snprintf(what, sizeof what, "rope %s, %s: inverse(fwd(x)) = x", c->name, how);
        tu_close(what, rt, xd, n, 0.0, RT_AREL * xmax);
        double lhs = 0, rhs = 0, scale = 0;
        for (int64_t i = 0; i < n; i++) {
            lhs += (double)y[i] * gd[i];
            rhs += xd[i] * (double)dx[i];
            scale += fabs(xd[i]) * fabs(gd[i]);
        }
        snprintf(what, sizeof what, "rope %s, %s: <fwd(x), g> = <x, inverse(g)> (%.9g vs %.9g, |diff|/scale %.2g)",
                 c->name, how, lhs, rhs, fabs(lhs - rhs) / scale);
        tu_true(what, fabs(lhs - rhs) <= DOT_REL * scale);
        free(y), free(dx), free(rt);
        sw_tensor_free(X), sw_tensor_free(G), sw_tensor_free(RT);
    }

    /* a fused [q | k | v] matrix, q with the case's heads, k and v with
     * half as many (grouped-query): q and k rotated as column blocks, v untouched */
    if (c->heads % 2 == 0) {
        const int64_t ck = cols / 2, wide = cols + 2 * ck;
        float *qkv = xmalloc(sizeof(float) * (size_t)(c->rows * wide));
        for (int64_t r = 0; r < c->rows; r++) {
            memcpy(qkv + r * wide, x + r * cols, sizeof(float) * (size_t)cols);
            memcpy(qkv + r * wide + cols, g + r * cols, sizeof(float) * (size_t)ck);      /* k: g's first heads */
            memcpy(qkv + r * wide + cols + ck, g + r * cols + ck, sizeof(float) * (size_t)ck); /* v */
        }
        sw_tensor *QKV = tu_tensor("qkv", c->rows, wide, qkv);
        starpu_data_handle_t *b = sw_tensor_split(QKV, SW_COLS, 3, (int64_t[]){cols, ck, ck}, STARPU_RW);
        sw_rope(b[0], c->d, c->theta, c->base_row0, c->batch, c->pos0, 0);
        sw_rope(b[1], c->d, c->theta, c->base_row0, c->batch, c->pos0, 0);
        float *got = tu_read(QKV);
        /* k's reference: g's first heads rotated (the rotation acts on each head alone) */
        double *gy = xmalloc(sizeof(double) * (size_t)n);
        ref_apply(&t, gd, gy, 0);
        float *gq = xmalloc(sizeof(float) * (size_t)n), *gk = xmalloc(sizeof(float) * (size_t)(c->rows * ck));
        double *kref = xmalloc(sizeof(double) * (size_t)(c->rows * ck));
        int64_t v_changed = 0;
        for (int64_t r = 0; r < c->rows; r++) {
            memcpy(gq + r * cols, got + r * wide, sizeof(float) * (size_t)cols);
            memcpy(gk + r * ck, got + r * wide + cols, sizeof(float) * (size_t)ck);
            memcpy(kref + r * ck, gy + r * cols, sizeof(double) * (size_t)ck);
            v_changed += memcmp(got + r * wide + cols + ck, g + r * cols + ck, sizeof(float) * (size_t)ck) != 0;
        }
        snprintf(what, sizeof what, "rope %s, q column block of a fused qkv", c->name);
        tu_close(what, gq, y_ref, n, 0.0, AREL * ymax);
        snprintf(what, sizeof what, "rope %s, k column block of a fused qkv", c->name);
        tu_close(what, gk, kref, c->rows * ck, 0.0, AREL * tu_maxabs(kref, c->rows * ck));
        snprintf(what, sizeof what, "rope %s, v column block untouched (%lld rows differ)", c->name,
                 (long long)v_changed);
        tu_true(what, v_changed == 0);
        free(qkv), free(got), free(gy), free(gq), free(gk), free(kref);
        sw_tensor_free(QKV);
    }
    ref_free(&t);
    free(x), free(g), free(xd), free(gd), free(y_ref), free(dx_ref);
}

static void refuse_cols(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 6, 20, NULL);
    sw_rope(sw_tensor_whole(x, STARPU_RW), 8, 10000.0f, 0, 2, 0, 0);
}

static void refuse_odd(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 6, 20, NULL);
    sw_rope(sw_tensor_whole(x, STARPU_RW), 5, 10000.0f, 0, 2, 0, 0);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_rope with d = 8 on 20 columns", refuse_cols, NULL,
                      "sw_rope: x [6,20] with d=8, theta=10000, row0=0, batch=2, pos0=0: its columns must be a "
                      "whole number of heads of d");
    tu_expect_refusal("sw_rope with an odd d", refuse_odd, NULL,
                      "sw_rope: x [6,20] with d=5, theta=10000, row0=0, batch=2, pos0=0: the head dim d must be "
                      "positive and even");
    tu_init(&argc, &argv);
    /* name, rows, heads, d, batch, theta, base_row0, pos0, grid rows, grid cols, row sizes, column heads */
    const rope_case cases[] = {
        {"d=16, 4 heads, batch 3, 41 rows from row 2, pos0 7", 41, 4, 16, 3, 10000.0f, 2, 7, 3, 3, {10, 17, 14},
         {2, 1, 1}},
        {"d=128 (theta 5e5), 2 heads, batch 2, pos0 8000", 10, 2, 128, 2, 500000.0f, 1, 8000, 2, 2, {3, 7}, {1, 1}},
        {"d=64, 6 heads, batch 1, pos0 100", 9, 6, 64, 1, 10000.0f, 0, 100, 2, 2, {4, 5}, {4, 2}},
        {"d=2, 3 heads, batch 4, 13 rows from row 5", 13, 3, 2, 4, 10000.0f, 5, 0, 2, 3, {6, 7}, {1, 1, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_case(&cases[i]);
    return tu_finish();
}
