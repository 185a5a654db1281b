/* The parameter registry and its services (see params.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "core/check.h"
#include "train_internal.h"
#include "params_internal.h"
#include "philox.h"
#include "starweave/mesh.h"
#include "starweave/ops.h"
#include "starweave/params.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

sw_slice sw_slice_even(int dim, int64_t n, int t, int r)
{
    sw_slice s = {0, 0, {0}, {0}, {0}};
    if (t <= 1) return s;
    s.n = 1, s.dim = dim, s.start[0] = r * (n / t), s.count[0] = n / t;
    return s;
}

/* the registry and parameter index i in range (exit 2 otherwise) */
static void check_index(const char *fn, const sw_params *p, int i)
{
    sw_check_ptr(fn, "p", p);
    if (i < 0 || i >= p->n) sw_usage_error("%s: i: parameter index out of range [0, %d) (%d)", fn, p->n, i);
}

void sw_params_config_default(sw_params_config *c)
{
    sw_check_ptr("sw_params_config_default", "c", c);
    memset(c, 0, sizeof *c);
    c->dtype = SW_F32, c->bucket_mb = 25.0f, c->grad_group = SW_GROUP_DP;
    c->lr = 1e-3f, c->beta1 = 0.9f, c->beta2 = 0.999f, c->adam_eps = 1e-8f, c->weight_decay = 0.01f;
    c->zero_pool = 2, c->pp_chunks = 1;
}

sw_params *sw_params_new(const sw_params_config *c, sw_comm *comm)
{
    sw_check_ptr("sw_params_new", "c", c);
    sw_params *p = sw_xcalloc(1, sizeof *p);
    p->c = *c;
    p->comm = comm;
    const sw_mesh *mesh = comm ? sw_comm_mesh(comm) : NULL;
    p->tp_rank = mesh ? sw_mesh_rank(mesh, SW_GROUP_TP) : 0;
    p->gn = mesh ? sw_mesh_size(mesh, c->grad_group) : 1;
    p->gr = mesh ? sw_mesh_rank(mesh, c->grad_group) : 0;
    p->pp = mesh ? sw_mesh_size(mesh, SW_GROUP_PP) : 1;
    p->stage = mesh ? sw_mesh_stage(mesh) : 0;
    p->unit = SW_UNIT_BEFORE;
    return p;
}

void sw_params_set_unit(sw_params *p, int unit)
{
    if (unit < SW_UNIT_AFTER) sw_usage_error("sw_params_set_unit: unit %d is neither a block index (>= 0) nor "
                                             "SW_UNIT_BEFORE (%d) nor SW_UNIT_AFTER (%d)", unit, SW_UNIT_BEFORE, SW_UNIT_AFTER);
    p->unit = unit;
}

void sw_params_share(sw_params *p, int i, int unit)
{
    if (i < 0 || i >= p->n || p->p[i].unit != SW_UNIT_BEFORE || unit != SW_UNIT_AFTER)
        sw_usage_error("sw_params_share: only a parameter of what comes before the blocks (SW_UNIT_BEFORE) can be "
                       "shared, with what comes after them (SW_UNIT_AFTER) (parameter %d of %d, unit %d)", i, p->n, unit);
    p->p[i].also = unit;
}

int sw_params_stage_of(int layer, int layers, int pp, int chunks)
{
    int V = chunks > 1 ? chunks : 1;
    return pp > 1 && layers >= pp * V ? layer / (layers / (pp * V)) % pp : 0;
}

int sw_params_unit_stage(const sw_params *p, int unit)
{
    if (unit == SW_UNIT_BEFORE) return 0;
    if (unit == SW_UNIT_AFTER) return p->pp - 1;
    return sw_params_stage_of(unit, block_count(p), p->pp, p->c.pp_chunks);
}

int sw_params_unit_chunk(const sw_params *p, int unit)
{
    int V = p->c.pp_chunks > 1 ? p->c.pp_chunks : 1, L = block_count(p);
    if (unit == SW_UNIT_BEFORE) return 0;
    if (unit == SW_UNIT_AFTER || L < p->pp * V) return V - 1;
    return unit / (L / (p->pp * V)) / p->pp;
}

int sw_params_runs_unit(const sw_params *p, int unit) { return sw_params_unit_stage(p, unit) == p->stage; }

int sw_params_held(const sw_params *p, int i)
{
    check_index("sw_params_held", p, i);
    return p->p[i].held;
}

int sw_params_allocated(const sw_params *p, int i)
{
    check_index("sw_params_allocated", p, i);
    return p->p[i].value != NULL;
}

/* 1 when this stage runs `unit` in its chunk `chunk` */
static int unit_in_chunk(const sw_params *p, int unit, int chunk)
{
    return sw_params_runs_unit(p, unit) && sw_params_unit_chunk(p, unit) == chunk;
}

/* which parameters this rank's stage holds (every one without pipeline);
 * from the units alone, so the models of the bytes may ask before
 * sw_params_allocate */
void sw_params_place(sw_params *p)
{
    int L = block_count(p), V = p->c.pp_chunks > 1 ? p->c.pp_chunks : 1;
    if (p->pp > 1 && L % (p->pp * V))
        sw_usage_error("the blocks (%d) must be divisible by the pipeline stages times their chunks (pp %d x %d)", L,
                       p->pp, V);
    for (int k = 0; k < p->n; k++) {
        entry *q = &p->p[k];
        int a = sw_params_unit_stage(p, q->unit), b = q->also == NO_UNIT ? a : sw_params_unit_stage(p, q->also);
        q->held = a == p->stage || b == p->stage;
        q->ends = a != b;
    }
}

int sw_params_add(sw_params *p, const sw_param_desc *d)
{
    for (int i = 0; i < p->n; i++)
        if (!strncmp(p->p[i].d.name, d->name, sizeof d->name))
            sw_usage_error("sw_params_add: name: \"%.*s\" is already registered (parameter %d)", (int)sizeof d->name,
                           d->name, i);
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->p = realloc(p->p, sizeof *p->p * (size_t)p->cap);
        if (!p->p) { perror("starweave: realloc"); abort(); }
    }
    memset(&p->p[p->n], 0, sizeof p->p[p->n]);
    p->p[p->n].d = *d;
    p->p[p->n].unit = p->unit;
    p->p[p->n].also = NO_UNIT;
    p->p[p->n].held = 1;
    return p->n++;
}

int sw_params_count(const sw_params *p) { return p->n; }
const sw_param_desc *sw_params_desc(const sw_params *p, int i) { check_index("sw_params_desc", p, i); return &p->p[i].d; }
const sw_params_config *sw_params_get_config(const sw_params *p) { return &p->c; }
sw_comm *sw_params_comm(const sw_params *p) { return p->comm; }
sw_tensor *sw_params_value(sw_params *p, int i)
{
    check_index("sw_params_value", p, i);
    const entry *q = &p->p[i];
    if (q->cur_w16 && q->packed) /* gathered as its bf16 copy only (gathered16): no fp32 value to read */
        sw_usage_error("sw_params_value: parameter %s: ZeRO-3 with bf16 gathers only the bf16 copy of a GEMM "
                       "weight; a weight an op reads in fp32 too must say so (sw_param_desc.fp32_reads = 1)",
                       q->d.name);
    return q->cur_value ? q->cur_value : q->value;
}
int sw_params_value_sharded(const sw_params *p, int i)
{
    const entry *q = &p->p[i];
    return q->pooled_value && !q->cur_value && !q->cur_w16;
}

void sw_params_check_units(const sw_params *p, const char *fn, int layers)
{
    const int named = block_count(p);
    if (named == layers || (p->pp < 2 && p->c.zero < 2)) return;
    sw_usage_error("%s: the parameters' units name %d block(s), the model has %d: register block l's parameters "
                   "after sw_params_set_unit(p, l), and what follows the blocks after sw_params_set_unit(p, "
                   "SW_UNIT_AFTER) (pipeline stages and ZeRO-2/3 place and gather parameters by unit: pp %d, "
                   "ZeRO-%d)", fn, named, layers, p->pp, p->c.zero);
}

sw_tensor *sw_params_grad(sw_params *p, int i)
{
    check_index("sw_params_grad", p, i);
    return p->p[i].cur_grad ? p->p[i].cur_grad : p->p[i].grad;
}
sw_tensor *sw_params_adam_m(sw_params *p, int i) { check_index("sw_params_adam_m", p, i); return p->p[i].m; }
sw_tensor *sw_params_adam_v(sw_params *p, int i) { check_index("sw_params_adam_v", p, i); return p->p[i].v; }
sw_tensor *sw_params_grad_norm2(sw_params *p) { return p->norm2; }
sw_tensor *sw_params_gemm_weight(const sw_params *p, int i)
{
    check_index("sw_params_gemm_weight", p, i);
    const entry *q = &p->p[i];
    if (q->cur_w16 || q->cur_value) return q->cur_w16 ? q->cur_w16 : q->cur_value;
    return q->w16 ? q->w16 : q->value;
}

sw_tensor *sw_params_reduced_grad(sw_params *p, int i, int64_t *first_row)
{
    check_index("sw_params_reduced_grad", p, i);
    int64_t count;
    int64_t rows, cols;
    *first_row = 0;
    if (!p->p[i].shard) return p->p[i].grad;
    sw_slice_shape(&p->p[i].d, &rows, &cols);
    sw_tile_range(rows, p->gn, p->gr, first_row, &count);
    return p->p[i].shard;
}

void sw_slice_shape(const sw_param_desc *d, int64_t *rows, int64_t *cols)
{
    *rows = d->rows, *cols = d->cols;
    if (d->slice.n == 0) return;
    int64_t n = 0;
    for (int i = 0; i < d->slice.n; i++) n += d->slice.count[i];
    if (d->slice.dim == 0) *rows = n;
    else *cols = n;
}

void sw_slice_extract(const sw_param_desc *d, const float *global, float *local)
{
    const sw_slice *s = &d->slice;
    int64_t rows = d->rows, cols = d->cols;
    if (s->n == 0) {
        memcpy(local, global, sizeof(float) * (size_t)(rows * cols));
        return;
    }
    if (s->dim == 0) {
        for (int i = 0; i < s->n; local += s->count[i] * cols, i++)
            memcpy(local, global + s->start[i] * cols, sizeof(float) * (size_t)(s->count[i] * cols));
        return;
    }
    int64_t lc = 0;
    for (int i = 0; i < s->n; i++) lc += s->count[i];
    for (int64_t row = 0; row < rows; row++) {
        float *dst = local + row * lc;
        for (int i = 0; i < s->n; dst += s->count[i], i++)
            memcpy(dst, global + row * cols + s->start[i], sizeof(float) * (size_t)s->count[i]);
    }
}

/* Initial values, as tasks on the workers (one per tensor): drawn on the
 * main thread, a large model's start-up took seconds while the idle
 * workers spun on the same cores (BENCHMARKS.md, "W124 start-up"). Element (r, c)
 * of parameter k's local slice is element g = R * cols + C of the global
 * [rows, cols] parameter (R, C through the slice's runs): normal(0, std) by Box-Muller on the
 * counter-based uniforms 2g and 2g + 1, the same under any slicing or sharding, with
 * global rows from init_rows on 0 (when 0 < init_rows < rows: the padded
 * vocabulary); or the constant init_value. zero: all 0 (moments). */
struct init_args {
    sw_param_desc d;
    uint64_t seed;
    int k, zero;
    int64_t row0; /* the tensor's row 0 is local row row0 of the TP slice (a ZeRO-3 value at rest) */
};

/* the global row of local row i */
static int64_t global_row(const sw_slice *s, int64_t i)
{
    if (s->n == 0 || s->dim != 0) return i;
    int r = 0;
    while (r < s->n - 1 && i >= s->count[r]) i -= s->count[r++];
    return s->start[r] + i;
}

/* n normal draws of elements g0 .. g0 + n - 1 into x: the uniforms first,
 * in a loop the compiler vectorises, then the scalar logf/cosf */
static void normal_run(const struct init_args *a, uint64_t g0, int64_t n, float *x)
{
    enum { CHUNK = 256 };
    float u1[CHUNK], u2[CHUNK];
    for (int64_t j0 = 0; j0 < n; j0 += CHUNK) {
        const int m = (int)(n - j0 < CHUNK ? n - j0 : CHUNK);
        for (int j = 0; j < m; j++) {
            const uint64_t g = g0 + (uint64_t)(j0 + j);
            u1[j] = sw_philox_uniform(a->seed, 0, (uint32_t)a->k, 0xFFFE, 2 * g);
            u2[j] = sw_philox_uniform(a->seed, 0, (uint32_t)a->k, 0xFFFE, 2 * g + 1);
        }
        for (int j = 0; j < m; j++)
            x[j0 + j] = a->d.init_std * sqrtf(-2.0f * logf(1.0f - u1[j])) * cosf(6.28318530718f * u2[j]);
    }
}

static void param_init_cpu(void *buffers[], void *cl_arg)
{
    struct init_args args;
    starpu_codelet_unpack_args(cl_arg, &args);
    const struct init_args *a = &args;
    const sw_param_desc *d = &a->d;
    const sw_slice *s = &d->slice;
    float *x = SW_F32_OF(buffers[0]);
    const int64_t rows = SW_ROWS_OF(buffers[0]), cols = SW_COLS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    const int64_t zero_from =
        d->init_std > 0.0f && d->init_rows > 0 && d->init_rows < d->rows ? d->init_rows : d->rows;
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * ld;
        const int64_t gr = global_row(s, r + a->row0);
        const int zero = a->zero || gr >= zero_from;
        if (zero || d->init_std <= 0.0f) {
            for (int64_t c = 0; c < cols; c++) row[c] = zero ? 0.0f : d->init_value;
            continue;
        }
        if (s->n == 0 || s->dim == 0) {
            normal_run(a, (uint64_t)(gr * d->cols), cols, row);
            continue;
        }
        for (int i = 0, c = 0; i < s->n; c += (int)s->count[i++]) /* the column runs */
            normal_run(a, (uint64_t)(gr * d->cols + s->start[i]), s->count[i], row + c);
    }
}

SW_PERFMODEL(param_init_model, "sw_param_init");
static struct starpu_codelet param_init_cl = {
    .cpu_funcs = {param_init_cpu},
    .cpu_funcs_name = {"param_init_cpu"},
    .nbuffers = 1,
    .modes = {STARPU_W},
    .model = &param_init_model,
    .name = "param_init",
};

static void submit_init(const sw_params *p, int k, sw_tensor *t, int zero, int64_t row0)
{
    struct init_args a;
    memset(&a, 0, sizeof a);
    a.d = p->p[k].d, a.seed = p->c.seed, a.k = k, a.zero = zero, a.row0 = row0;
    SW_INSERT(&param_init_cl, STARPU_W, sw_tensor_whole(t, STARPU_W), STARPU_VALUE, &a, sizeof a);
}

/* bytes of parameter k's local gradient (the slice of this TP rank) */
static double local_bytes(const sw_params *p, int k, int64_t *rows, int64_t *cols)
{
    sw_slice_shape(&p->p[k].d, rows, cols);
    return 4.0 * (double)*rows * (double)*cols;
}

/* the buckets hold the gradients this rank has whole (not ZeRO-2/3's pooled ones) */
static int bucketed(const sw_params *p, int k) { return p->p[k].held && !grad_pooled(p, k); }

/* bucket b starts at parameter `first` (held) and goes down, as far as the
 * held parameters run: returns the parameter below its last; *bytes
 * (optional): its size */
static int bucket_end(const sw_params *p, int b, int first, double *bytes)
{
    double limit = p->c.bucket_mb * SW_MIB, cap = b == 0 && limit > SW_MIB ? SW_MIB : limit, sum = 0;
    int64_t r, c;
    int k = first;
    while (k >= 0 && bucketed(p, k) && (k == first || sum + local_bytes(p, k, &r, &c) <= cap)) sum += local_bytes(p, k--, &r, &c);
    if (bytes) *bytes = sum;
    return k;
}

/* Gradient buckets, in reverse parameter order (backward produces the last
 * parameters' gradients first): at most bucket_mb MiB each, the first at
 * most 1 MiB so that the first reduction starts early (as PyTorch DDP does,
 * whose bucket_cap_mb is in MiB too). They sum micro-batches and carry the
 * all-reduce (not with ZeRO-1, which reduce-scatters in the update). */
static void create_buckets(sw_params *p)
{
    const sw_params_config *c = &p->c;
    if (c->grad_accum == 1 && (p->gn == 1 || c->zero)) return;
    int n = p->n;
    p->bucket = sw_xcalloc((size_t)n, sizeof *p->bucket);
    p->bucket_first = sw_xcalloc((size_t)n, sizeof(int));
    p->bucket_count = sw_xcalloc((size_t)n, sizeof(int));
    p->bucket_done = sw_xcalloc((size_t)n, sizeof(int));
    p->bucket_sizes = sw_xcalloc((size_t)n, sizeof *p->bucket_sizes);
    for (int k = n - 1; k >= 0;) {
        if (!bucketed(p, k)) {
            k--;
            continue;
        }
        int b = p->nbuckets++, first = k;
        k = bucket_end(p, b, first, NULL);
        int count = first - k;
        p->bucket_first[b] = first;
        p->bucket_count[b] = count;
        p->bucket_sizes[b] = sw_xcalloc((size_t)count, sizeof(int64_t));
        int64_t total = 0;
        for (int i = 0; i < count; i++) total += p->bucket_sizes[b][i] = sw_tensor_numel(p->p[first - i].grad);
        char name[32];
        snprintf(name, sizeof name, "grad_bucket%d", b);
        p->bucket[b] = sw_tensor_new2d(name, SW_F32, 1, total);
    }
}

/* the bytes of the buckets create_buckets makes, from the descriptions */
double sw_params_buckets_bytes(const sw_params *p)
{
    sw_params_place((sw_params *)p); /* only what this stage holds (idempotent) */
    if (p->c.grad_accum == 1 && (p->gn == 1 || p->c.zero)) return 0;
    double sum = 0, bytes;
    for (int b = 0, k = p->n - 1; k >= 0;)
        if (!bucketed(p, k)) k--;
        else k = bucket_end(p, b++, k, &bytes), sum += bytes;
    return sum;
}

void sw_params_allocate(sw_params *p)
{
    sw_check_ptr("sw_params_allocate", "p", p);
    if (p->c.tiles < 1 || p->c.grad_accum < 1)
        sw_usage_error("sw_params_allocate: tiles (%d) and grad_accum (%d) must be at least 1 (0: give the registry "
                       "to sw_ctx_init first, which sets them to the context's)", p->c.tiles, p->c.grad_accum);
    sw_params_place(p);
    if (p->c.zero < 0 || p->c.zero > 3) sw_usage_error("zero must be 0, 1, 2 or 3 (zero = %d)", p->c.zero);
    if (p->c.zero >= 2 && p->gn > 1 && sw_ncuda() > 0)
        sw_usage_error("ZeRO-%d's pool lives in main RAM (views of its buffers): not with CUDA workers (%d) yet; use "
                       "--zero 1", p->c.zero, sw_ncuda());
    for (int k = 0; k < p->n; k++) {
        entry *q = &p->p[k];
        if (!q->held) continue;
        const sw_param_desc *d = &q->d;
        int64_t lrows, lcols, first_row = 0;
        char name[64];
        sw_slice_shape(d, &lrows, &lcols);
        q->pooled_value = value_pooled(p, k);
        q->pooled_grad = grad_pooled(p, k);
        /* ZeRO-1/2/3: the moments (ZeRO-2/3 the gradient, ZeRO-3 the value) of this rank's rows only */
        int64_t mrows = lrows;
        if (zero_sharded(p, lrows)) sw_tile_range(lrows, p->gn, p->gr, &first_row, &mrows);
        q->value = sw_tensor_new2d(d->name, SW_F32, q->pooled_value ? mrows : lrows, lcols);
        snprintf(name, sizeof name, "d.%s", d->name);
        if (!q->pooled_grad) q->grad = sw_tensor_new2d(name, SW_F32, lrows, lcols);
        if (p->c.dtype == SW_BF16 && d->gemm && !q->pooled_value) {
            snprintf(name, sizeof name, "bf16.%s", d->name);
            q->w16 = sw_tensor_new2d(name, SW_BF16, lrows, lcols);
        }
        if (mrows < lrows) {
            snprintf(name, sizeof name, "dshard.%s", d->name);
            q->shard = sw_tensor_new2d(name, SW_F32, mrows, lcols);
        }
        if (gathered16(p, k)) {
            snprintf(name, sizeof name, "bf16pk.%s", d->name);
            q->packed = sw_tensor_new2d(name, SW_F32, mrows, lcols / 2);
        }
        snprintf(name, sizeof name, "m.%s", d->name);
        q->m = sw_tensor_new2d(name, SW_F32, mrows, lcols);
        snprintf(name, sizeof name, "v.%s", d->name);
        q->v = sw_tensor_new2d(name, SW_F32, mrows, lcols);
        submit_init(p, k, q->value, 0, q->pooled_value ? first_row : 0);
        submit_init(p, k, q->m, 1, 0);
        submit_init(p, k, q->v, 1, 0);
    }
    create_buckets(p);
    sw_zero_pool_create(p);
    if (p->c.clip_grad > 0) p->norm2 = sw_tensor_new2d("grad_norm2", SW_F32, 1, 1);
}

void sw_params_destroy(sw_params *p)
{
    if (!p) return;
    sw_zero_pool_destroy(p);
    for (int k = 0; k < p->n; k++) {
        entry *q = &p->p[k];
        sw_tensor *t[] = {q->value, q->grad, q->m, q->v, q->w16, q->shard, q->packed};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) sw_tensor_free(t[i]);
    }
    for (int b = 0; b < p->nbuckets; b++) {
        sw_tensor_free(p->bucket[b]);
        free(p->bucket_sizes[b]);
    }
    free(p->bucket);
    free(p->bucket_first);
    free(p->bucket_count);
    free(p->bucket_done);
    free(p->bucket_sizes);
    sw_tensor_free(p->norm2);
    free(p->p);
    free(p);
}

double sw_params_bytes(const sw_params *p)
{
    sw_params_place((sw_params *)p); /* only what this stage holds (idempotent) */
    double bytes = 0;
    for (int k = 0; k < p->n; k++) {
        int64_t rows, cols, mrows, first;
        if (!p->p[k].held) continue;
        sw_slice_shape(&p->p[k].d, &rows, &cols);
        mrows = rows;
        if (zero_sharded(p, rows)) sw_tile_range(rows, p->gn, p->gr, &first, &mrows);
        /* value (ZeRO-3: its rows), gradient (ZeRO-2/3: none whole), ZeRO
         * gradient shard, moments m and v of the rows, bf16 copy (ZeRO-3: in the pool) */
        double value = value_pooled(p, k) ? (double)mrows : (double)rows;
        double grad = grad_pooled(p, k) ? 0 : (double)rows, shard = mrows < rows ? (double)mrows : 0;
        bytes += 4.0 * (double)cols * (value + grad + shard + 2.0 * (double)mrows);
        if (p->c.dtype == SW_BF16 && p->p[k].d.gemm && !value_pooled(p, k)) bytes += 2.0 * (double)(rows * cols);
        if (gathered16(p, k)) bytes += 2.0 * (double)(mrows * cols); /* the packed bf16 rows */
    }
    if (p->c.clip_grad > 0) bytes += 4.0; /* the gradients' squared norm */
    return bytes + sw_params_buckets_bytes(p) + sw_params_pool_bytes(p);
}

void sw_params_traffic(const sw_params *p, sw_traffic *t)
{
    const sw_params_config *c = &p->c;
    double *g = t->backward;
    if (p->gn > 1 && !c->zero) /* the buckets' all-reduces */
        for (int b = 0, k = p->n - 1; k >= 0; b++) {
            double bytes;
            if (!p->p[k].held) {
                k--, b--;
                continue;
            }
            k = bucket_end(p, b, k, &bytes);
            g[c->grad_group] += sw_comm_bytes(p->comm, c->grad_group, SW_COLL_ALLREDUCE, 1, (int64_t)(bytes / 4));
        }
    for (int k = 0; k < p->n; k++) { /* a weight both end stages hold: its gradient summed between them */
        int64_t rows, cols;
        local_bytes(p, k, &rows, &cols);
        if (p->p[k].held && p->p[k].ends)
            g[SW_GROUP_PP_ENDS] += sw_comm_bytes(p->comm, SW_GROUP_PP_ENDS, SW_COLL_ALLREDUCE, rows, cols);
    }
    /* ZeRO: a sharded gradient reduce-scattered (ZeRO-2/3's pooled ones at
     * the end of every micro-batch's backward of their unit), the value
     * gathered after the update (not ZeRO-3: at the next use, the block
     * service's and step driver's traffic), or the whole gradient all-reduced */
    for (int k = 0; k < p->n && p->gn > 1 && c->zero; k++) {
        int64_t rows, cols;
        if (!p->p[k].held) continue;
        local_bytes(p, k, &rows, &cols);
        double rs = sw_comm_bytes(p->comm, c->grad_group, SW_COLL_REDUCE_SCATTER, rows, cols);
        if (!zero_sharded(p, rows)) {
            g[c->grad_group] += sw_comm_bytes(p->comm, c->grad_group, SW_COLL_ALLREDUCE, rows, cols);
            continue;
        }
        g[c->grad_group] += grad_pooled(p, k) ? c->grad_accum * rs : rs;
        if (!value_pooled(p, k)) g[c->grad_group] += sw_comm_bytes(p->comm, c->grad_group, SW_COLL_ALLGATHER, rows, cols);
    }
    if (c->clip_grad > 0) g[SW_GROUP_WORLD] += sw_comm_bytes(p->comm, SW_GROUP_WORLD, SW_COLL_ALLREDUCE, 1, 1);
}

void sw_params_cast_bf16(sw_params *p)
{
    for (int k = 0; k < p->n; k++)
        if (p->p[k].w16)
            sw_cast(sw_tensor_whole(p->p[k].value, STARPU_R), sw_tensor_whole(p->p[k].w16, STARPU_W));
}

/* Sum this micro-batch's gradients (of the parameters of chunk `chunk`
 * of this stage, or all of them: -1) into the buckets; once the last
 * micro-batch's are in, all-reduce each bucket over the gradient group
 * (its reduction depends only on the copies of its own gradients, so it
 * starts while the backward of earlier layers goes on) and copy the sums
 * back into the gradients. Buckets that are not all-reduced (ZeRO, or a
 * gradient group of one) only sum the micro-batches: the last one's
 * gradient adds the bucket's sum of the others to itself instead (one
 * pass, where adding it to the bucket and copying the bucket back took
 * two; the same sums, bit for bit: a + b = b + a). */
void sw_params_reduce_grads_chunk(sw_params *p, int micro, int chunk)
{
    sw_params_reduce_grads_some(p, micro, chunk, NULL, 0);
}

/* mask NULL: every parameter (of the chunk); else those k with !mask[k] == !want (Zero Bubble's split: the
 * weight gradients a W unit writes are summed after it, the rest after the B unit) */
void sw_params_reduce_grads_some(sw_params *p, int micro, int chunk, const unsigned char *mask, int want)
{
    if (!p->nbuckets) return;
    int last = micro == p->c.grad_accum - 1, reduced = p->gn > 1 && !p->c.zero;
    for (int b = 0; b < p->nbuckets; b++) {
        int n = p->bucket_count[b], first = p->bucket_first[b];
        for (int i = 0; i < n; i++) {
            const entry *q = &p->p[first - i];
            if (chunk >= 0 && !unit_in_chunk(p, q->unit, chunk) && (q->also == NO_UNIT || !unit_in_chunk(p, q->also, chunk)))
                continue;
            if (mask && !mask[first - i] != !want) continue;
            if (last && !reduced) /* the sum of the others added to the last (see above; !reduced: K > 1) */
                sw_copy_flat(sw_tensor_split(p->bucket[b], SW_COLS, n, p->bucket_sizes[b], STARPU_R)[i],
                             sw_tensor_whole(q->grad, STARPU_RW), 1);
            else
                sw_copy_flat(sw_tensor_whole(q->grad, STARPU_R),
                             sw_tensor_split(p->bucket[b], SW_COLS, n, p->bucket_sizes[b], micro ? STARPU_RW : STARPU_W)[i],
                             micro > 0);
            p->bucket_done[b] += last;
        }
        if (p->bucket_done[b] < n) continue;
        p->bucket_done[b] = 0; /* every member's last micro-batch is in: the next step starts over */
        if (!reduced) continue; /* the gradients hold the sums already */
        sw_allreduce(p->comm, p->c.grad_group, p->bucket[b], SW_SUM);
        for (int i = 0; i < n; i++)
            sw_copy_flat(sw_tensor_split(p->bucket[b], SW_COLS, n, p->bucket_sizes[b], STARPU_R)[i],
                         sw_tensor_whole(p->p[first - i].grad, STARPU_W), 0);
    }
}

void sw_params_reduce_grads(sw_params *p, int micro) { sw_params_reduce_grads_chunk(p, micro, -1); }

/* the gradient AdamW reads: ZeRO-1's shard (reduce-scattered over the
 * group), else the whole gradient (all-reduced here with ZeRO-1 when it
 * has too few rows to shard; the buckets did it otherwise) */
static sw_tensor *reduce_for_update(sw_params *p, entry *q)
{
    if (q->ends) sw_allreduce(p->comm, SW_GROUP_PP_ENDS, q->grad, SW_SUM);
    if (q->pooled_grad) return q->shard; /* reduce-scattered as its unit's backward ended */
    if (q->shard) {
        sw_reduce_scatter(p->comm, p->c.grad_group, q->grad, q->shard, SW_SUM);
        return q->shard;
    }
    if (p->c.zero && p->gn > 1) sw_allreduce(p->comm, p->c.grad_group, q->grad, SW_SUM);
    return q->grad;
}

/* This rank's ZeRO rows of t: block gr of a split in gn row blocks. In
 * simulation [rows before | its rows | rows after] instead: there all the
 * ranks live in one process, and gn blocks of every parameter are gn
 * StarPU handles on each rank -- gn^2 in the process (GPT-2 1.5B at 1
 * layer, dp 512 ZeRO-2: past this machine's 24 GB before its first step;
 * dp 128 3.7 GB) -- while the all-gather that follows runs on the whole
 * tensor where MPI runs the collectives (src/comm/collectives.c). */
static starpu_data_handle_t zero_rows(sw_params *p, sw_tensor *t)
{
    if (!sw_simulated()) return sw_tensor_tiles(t, SW_ROWS, p->gn, STARPU_RW)[p->gr];
    int64_t first, count, sizes[3];
    sw_tile_range(t->rows, p->gn, p->gr, &first, &count);
    int n = 0;
    if (first > 0) sizes[n++] = first;
    const int mine = n;
    sizes[n++] = count;
    if (t->rows > first + count) sizes[n++] = t->rows - first - count;
    return sw_tensor_split(t, SW_ROWS, n, sizes, STARPU_RW)[mine];
}

/* AdamW on q from gradient g (ZeRO-1/2: this rank's rows, then every
 * rank's gathered; ZeRO-3: the value at rest is those rows, gathered at
 * its unit's next forward) */
static void adamw(sw_params *p, entry *q, sw_tensor *g, const sw_adamw_args *a)
{
    int P = p->c.tiles;
    sw_tensor *t = q->value;
    if (q->shard && !q->pooled_value) {
        sw_adamw(zero_rows(p, t), sw_tensor_whole(g, STARPU_R),
                 sw_tensor_whole(q->m, STARPU_RW), sw_tensor_whole(q->v, STARPU_RW), a);
        sw_allgather_inplace(p->comm, p->c.grad_group, t);
    } else if (t->rows < P) {
        sw_adamw(sw_tensor_whole(t, STARPU_RW), sw_tensor_whole(g, STARPU_R), sw_tensor_whole(q->m, STARPU_RW),
                 sw_tensor_whole(q->v, STARPU_RW), a);
    } else {
        for (int i = 0; i < P; i++)
            sw_adamw(sw_tensor_tiles(t, SW_ROWS, P, STARPU_RW)[i], sw_tensor_tiles(g, SW_ROWS, P, STARPU_R)[i],
                     sw_tensor_tiles(q->m, SW_ROWS, P, STARPU_RW)[i], sw_tensor_tiles(q->v, SW_ROWS, P, STARPU_RW)[i],
                     a);
    }
}

/* norm2 (+)= this rank's share of |g|^2: each TP block weighted by 1 / the
 * TP ranks holding it, a gradient every member of the group holds (not a
 * ZeRO shard) by 1 / the group's size, so the world's sum counts every
 * element once. g is the local gradient, or its ZeRO rows. */
static void add_sumsq(sw_params *p, entry *q, sw_tensor *g, int *first)
{
    const sw_slice *s = &q->d.slice;
    int t = p->comm ? sw_mesh_size(sw_comm_mesh(p->comm), SW_GROUP_TP) : 1;
    double group = (q->shard ? 1.0 : 1.0 / p->gn) / (q->ends ? 2.0 : 1.0); /* a tied weight: on two stages */
    /* pieces of g along the slice's dim, each inside one block: the blocks,
     * cut to the ZeRO rows [r0, r0 + nr) when the blocks are row blocks */
    int n = 0, share[3];
    int64_t sizes[3], r0 = 0, nr = g->rows, at = 0;
    int64_t lrows, lcols;
    sw_slice_shape(&q->d, &lrows, &lcols);
    if (q->shard) sw_tile_range(lrows, p->gn, p->gr, &r0, &nr);
    for (int b = 0; b < s->n; at += s->count[b], b++) {
        int64_t lo = at, hi = at + s->count[b];
        if (q->shard && s->dim == 0) lo = lo > r0 ? lo : r0, hi = hi < r0 + nr ? hi : r0 + nr;
        if (hi <= lo) continue;
        sizes[n] = hi - lo, share[n++] = s->share[b] > 1 ? s->share[b] : 1;
    }
    if (s->n == 0) sizes[0] = 0, share[0] = t, n = 1;
    for (int i = 0; i < n; i++) {
        starpu_data_handle_t h = n == 1 ? sw_tensor_whole(g, STARPU_R)
                                        : sw_tensor_split(g, s->dim ? SW_COLS : SW_ROWS, n, sizes, STARPU_R)[i];
        sw_sumsq(h, sw_tensor_whole(p->norm2, *first ? STARPU_W : STARPU_RW), group / share[i], !*first);
        *first = 0;
    }
}

/* the next step's first reduce-scatter of each unit writes the shards */
static void new_step(sw_params *p)
{
    for (int i = 0; p->units && i < p->nunits; i++) p->units[i].reductions = 0;
}

static void update(sw_params *p, int step)
{
    const sw_params_config *c = &p->c;
    sw_adamw_args a = {c->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay, step};
    sw_trace_set_phase(SW_PHASE_OPTIMIZER, -1);
    if (c->clip_grad <= 0) {
        for (int k = 0; k < p->n; k++)
            if (p->p[k].held) adamw(p, &p->p[k], reduce_for_update(p, &p->p[k]), &a);
        new_step(p);
        return;
    }
    sw_tensor **g = sw_xcalloc((size_t)p->n, sizeof *g);
    int first = 1;
    for (int k = 0; k < p->n; k++) {
        if (!p->p[k].held) continue;
        g[k] = reduce_for_update(p, &p->p[k]);
        add_sumsq(p, &p->p[k], g[k], &first);
    }
    if (sw_params_comm(p) && sw_mesh_size(sw_comm_mesh(p->comm), SW_GROUP_WORLD) > 1)
        sw_allreduce(p->comm, SW_GROUP_WORLD, p->norm2, SW_SUM);
    for (int k = 0; k < p->n; k++) {
        if (!g[k]) continue;
        sw_clip(sw_tensor_whole(g[k], STARPU_RW), sw_tensor_whole(p->norm2, STARPU_R), c->clip_grad);
        adamw(p, &p->p[k], g[k], &a);
    }
    free(g);
    new_step(p);
}

/* The update's tasks run at priority -2, below every backward task (dW
 * drops to -1 with dw_last): a unit's update is ready as soon as its last
 * gradient is, and on a pipeline stage it would otherwise delay the rest of
 * the last micro-batch's backward, whose input gradient the previous stage
 * waits for -- every stage's cooldown grew by its update (docs/simulation.md,
 * "The pipeline judged"). */
void sw_params_update(sw_params *p, int step)
{
    const int prio = sw_set_task_priority(-2);
    update(p, step);
    sw_set_task_priority(prio);
}
