/* sw_tensor: one StarPU matrix handle per tensor; tiles are asynchronous
 * partitions planned once per (split, nparts) and switched at submission
 * time, so StarPU orders the switch after the tasks that used the previous
 * view and before the tasks that use the next one. */
#include "starweave/tensor.h"
#include "starweave/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Home buffers are not counted against a main-memory budget
 * (sw_options.offload_budget_mb): it is for the data StarPU allocates. With
 * CUDA workers they are pinned: StarPU's copies to and from the GPUs are
 * then asynchronous (the offload node is main RAM there). */
#define SW_MALLOC_FLAGS \
    ((sw_offload_budget_mb() > 0 ? 0 : STARPU_MALLOC_COUNT) | (sw_home_pinned() ? STARPU_MALLOC_PINNED : 0) | SW_FOLDED)
/* Simulated (docs/simulation.md): no codelet reads or writes the buffers,
 * so StarPU folds them (every page maps one shared page, or SMPI's shared
 * malloc under starpu_smpirun): large models fit this machine. */
#ifdef STARPU_SIMGRID
#define SW_FOLDED STARPU_MALLOC_SIMULATION_FOLDED
#else
#define SW_FOLDED 0
#endif

size_t sw_dtype_size(sw_dtype dt)
{
    return dt == SW_BF16 ? sizeof(uint16_t) : dt == SW_F32 ? sizeof(float) : sizeof(int32_t);
}

static sw_tensor *tensor_create(const char *name, sw_dtype dt, int ndim, const int64_t *shape, int node)
{
    if (ndim < 1 || ndim > SW_MAX_DIMS) {
        fprintf(stderr, "starweave: tensor %s: ndim %d outside 1..%d\n", name, ndim, SW_MAX_DIMS);
        abort();
    }
    sw_tensor *t = calloc(1, sizeof *t);
    if (!t) { perror("starweave: calloc"); abort(); }
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->dtype = dt;
    t->rows = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0 || shape[i] > (int64_t)UINT32_MAX) {
            fprintf(stderr, "starweave: tensor %s: dimension %d is %lld\n", name, i, (long long)shape[i]);
            abort();
        }
        t->shape[i] = shape[i];
        if (i < ndim - 1) t->rows *= shape[i];
    }
    t->cols = shape[ndim - 1];
    t->rw_plan = -1;
    /* Home node = main RAM: tiles of every split then alias the parent's
     * buffer, so switching splits costs no copy. Offload tensors live on
     * the offload node; tasks read and write their main-RAM copies. */
    size_t bytes = (size_t)(t->rows * t->cols) * sw_dtype_size(dt);
    t->node = node;
    if (node == STARPU_MAIN_RAM ? starpu_malloc_flags(&t->data, bytes, SW_MALLOC_FLAGS) != 0
                                : !(t->data = (void *)starpu_malloc_on_node(node, bytes))) {
        fprintf(stderr, "starweave: tensor %s: cannot allocate %zu bytes on memory node %d\n", name, bytes, node);
        abort();
    }
    starpu_matrix_data_register(&t->handle, node, (uintptr_t)t->data, (uint32_t)t->cols,
                                (uint32_t)t->cols, (uint32_t)t->rows, sw_dtype_size(dt));
    starpu_data_set_name(t->handle, t->name);
    t->whole = (sw_block){t, 0, t->rows, 0, t->cols};
    starpu_data_set_user_data(t->handle, &t->whole);
    return t;
}

sw_tensor *sw_tensor_new(const char *name, sw_dtype dt, int ndim, const int64_t *shape)
{
    return tensor_create(name, dt, ndim, shape, STARPU_MAIN_RAM);
}

sw_tensor *sw_tensor_new_offload(const char *name, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    if (sw_offload_node() < 0) {
        fprintf(stderr, "starweave: tensor %s: no offload node (sw_options.offload)\n", name);
        abort();
    }
    return tensor_create(name, SW_F32, 2, shape, sw_offload_node());
}

void sw_tensor_wont_use(sw_tensor *t) { starpu_data_wont_use(sw_tensor_whole(t, STARPU_R)); }

sw_tensor *sw_tensor_new2d(const char *name, sw_dtype dt, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    return sw_tensor_new(name, dt, 2, shape);
}

int64_t sw_tensor_numel(const sw_tensor *t) { return t->rows * t->cols; }
size_t sw_tensor_bytes(const sw_tensor *t) { return (size_t)sw_tensor_numel(t) * sw_dtype_size(t->dtype); }

static void unpartition(sw_tensor *t, int p)
{
    starpu_data_unpartition_submit(t->handle, (unsigned)(t->plans[p].nr * t->plans[p].nc),
                                   t->plans[p].children, -1);
}

/* Back to "parent valid, nothing partitioned" for a writer, or to "parent
 * readable" for a reader. */
static void make_parent_valid(sw_tensor *t, int for_write)
{
    if (t->rw_plan >= 0) {
        unpartition(t, t->rw_plan);
        t->rw_plan = -1;
    }
    if (for_write) {
        for (int p = 0; p < t->nplans; p++)
            if (t->ro_mask & (1u << p)) unpartition(t, p);
        t->ro_mask = 0;
    }
}

static int is_write(enum starpu_data_access_mode mode)
{
    return (mode & STARPU_W) != 0;
}

starpu_data_handle_t sw_tensor_whole(sw_tensor *t, enum starpu_data_access_mode mode)
{
    make_parent_valid(t, is_write(mode));
    return t->handle;
}

/* Block (id / nc, id % nc) of the plan passed in filter_arg_ptr. */
static void filter_grid(void *father_interface, void *child_interface, struct starpu_data_filter *f, unsigned id,
                        unsigned nchunks)
{
    (void)nchunks;
    const sw_plan *pl = f->filter_arg_ptr;
    struct starpu_matrix_interface *father = father_interface, *child = child_interface;
    int i = (int)id / pl->nc, j = (int)id % pl->nc;
    size_t es = father->elemsize;
    child->id = father->id;
    child->nx = (uint32_t)(pl->cb[j + 1] - pl->cb[j]); /* StarPU's x axis is our column axis */
    child->ny = (uint32_t)(pl->rb[i + 1] - pl->rb[i]);
    child->elemsize = es;
    child->allocsize = (size_t)child->nx * child->ny * es;
    if (father->dev_handle) {
        size_t offset = ((size_t)pl->rb[i] * father->ld + (size_t)pl->cb[j]) * es;
        if (father->ptr) child->ptr = father->ptr + offset;
        child->ld = father->ld;
        child->dev_handle = father->dev_handle;
        child->offset = father->offset + offset;
    }
}

/* boundaries of n blocks over extent: sizes given, or StarPU's block split */
static int64_t *bounds(const char *name, int64_t extent, int n, const int64_t *sizes)
{
    if (n < 1 || n > extent) {
        fprintf(stderr, "starweave: tensor %s: %d tiles of extent %lld\n", name, n, (long long)extent);
        abort();
    }
    int64_t *b = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!b) { perror("starweave: malloc"); abort(); }
    b[0] = 0;
    for (int i = 0; i < n; i++) {
        int64_t first, count = 0;
        if (sizes) count = sizes[i];
        else sw_tile_range(extent, n, i, &first, &count);
        if (count < 1) {
            fprintf(stderr, "starweave: tensor %s: tile %d of %d has size %lld\n", name, i, n, (long long)count);
            abort();
        }
        b[i + 1] = b[i] + count;
    }
    if (b[n] != extent) {
        fprintf(stderr, "starweave: tensor %s: tile sizes sum to %lld, extent is %lld\n", name, (long long)b[n],
                (long long)extent);
        abort();
    }
    return b;
}

/* plan boundaries b against n blocks of the given sizes, or of StarPU's
 * equal split when sizes is NULL (no allocation: this runs for every tile
 * lookup, i.e. several times per submitted task) */
static int same_split(const int64_t *b, int nb, int n, const int64_t *sizes, int64_t extent)
{
    if (nb != n) return 0;
    for (int i = 0; i < n; i++) {
        int64_t first = b[i], count = sizes ? sizes[i] : 0;
        if (!sizes) sw_tile_range(extent, n, i, &first, &count);
        if (first != b[i] || b[i + 1] - b[i] != count) return 0;
    }
    return 1;
}

static int find_plan(sw_tensor *t, int nr, const int64_t *rsizes, int nc, const int64_t *csizes)
{
    for (int p = 0; p < t->nplans; p++) {
        sw_plan *pl = &t->plans[p];
        if (same_split(pl->rb, pl->nr, nr, rsizes, t->rows) && same_split(pl->cb, pl->nc, nc, csizes, t->cols))
            return p;
    }
    int64_t *rb = bounds(t->name, t->rows, nr, rsizes), *cb = bounds(t->name, t->cols, nc, csizes);
    if (t->nplans == SW_MAX_PLANS) {
        fprintf(stderr, "starweave: tensor %s: more than %d tilings\n", t->name, SW_MAX_PLANS);
        abort();
    }
    sw_plan *pl = &t->plans[t->nplans];
    pl->nr = nr;
    pl->nc = nc;
    pl->rb = rb;
    pl->cb = cb;
    pl->children = malloc(sizeof(starpu_data_handle_t) * (size_t)(nr * nc));
    pl->blocks = malloc(sizeof(sw_block) * (size_t)(nr * nc));
    if (!pl->children || !pl->blocks) { perror("starweave: malloc"); abort(); }
    struct starpu_data_filter f;
    memset(&f, 0, sizeof f);
    f.filter_func = filter_grid;
    f.nchildren = (unsigned)(nr * nc);
    f.filter_arg_ptr = pl;
    starpu_data_partition_plan(t->handle, &f, pl->children);
    for (int k = 0; k < nr * nc; k++) {
        int i = k / nc, j = k % nc;
        pl->blocks[k] = (sw_block){t, rb[i], rb[i + 1], cb[j], cb[j + 1]};
        starpu_data_set_user_data(pl->children[k], &pl->blocks[k]);
    }
    return t->nplans++;
}

static int nchildren(const sw_tensor *t, int p) { return t->plans[p].nr * t->plans[p].nc; }

static starpu_data_handle_t *tiles_of_plan(sw_tensor *t, int p, enum starpu_data_access_mode mode)
{
    unsigned n = (unsigned)nchildren(t, p);
    if (t->rw_plan == p) return t->plans[p].children;
    if (t->rw_plan >= 0) {
        unpartition(t, t->rw_plan);
        t->rw_plan = -1;
    }
    if (!is_write(mode)) {
        if (!(t->ro_mask & (1u << p))) {
            starpu_data_partition_readonly_submit(t->handle, n, t->plans[p].children);
            t->ro_mask |= 1u << p;
        }
        return t->plans[p].children;
    }
    for (int q = 0; q < t->nplans; q++)
        if (q != p && (t->ro_mask & (1u << q))) unpartition(t, q);
    if (t->ro_mask & (1u << p))
        starpu_data_partition_readwrite_upgrade_submit(t->handle, n, t->plans[p].children);
    else
        starpu_data_partition_submit(t->handle, n, t->plans[p].children);
    t->ro_mask = 0;
    t->rw_plan = p;
    return t->plans[p].children;
}

starpu_data_handle_t *sw_tensor_split(sw_tensor *t, sw_split split, int nparts, const int64_t *sizes,
                                      enum starpu_data_access_mode mode)
{
    int p = split == SW_ROWS ? find_plan(t, nparts, sizes, 1, NULL) : find_plan(t, 1, NULL, nparts, sizes);
    return tiles_of_plan(t, p, mode);
}

starpu_data_handle_t *sw_tensor_grid(sw_tensor *t, int nr, const int64_t *row_sizes, int nc,
                                     const int64_t *col_sizes, enum starpu_data_access_mode mode)
{
    return tiles_of_plan(t, find_plan(t, nr, row_sizes, nc, col_sizes), mode);
}

starpu_data_handle_t *sw_tensor_tiles(sw_tensor *t, sw_split split, int nparts,
                                      enum starpu_data_access_mode mode)
{
    return sw_tensor_split(t, split, nparts, NULL, mode);
}

void sw_tile_range(int64_t n, int nparts, int i, int64_t *first, int64_t *count)
{
    unsigned chunk;
    size_t offset;
    starpu_filter_nparts_compute_chunk_size_and_offset((unsigned)n, (unsigned)nparts, 1, (unsigned)i,
                                                       1, &chunk, &offset);
    *first = (int64_t)offset;
    *count = (int64_t)chunk;
}

static void release_plans(sw_tensor *t)
{
    make_parent_valid(t, 1);
    for (int p = 0; p < t->nplans; p++) {
        starpu_data_partition_clean(t->handle, (unsigned)(t->plans[p].nr * t->plans[p].nc), t->plans[p].children);
        free(t->plans[p].children);
        free(t->plans[p].blocks);
        free(t->plans[p].rb);
        free(t->plans[p].cb);
    }
    t->nplans = 0;
}

void sw_tensor_free(sw_tensor *t)
{
    if (!t) return;
    release_plans(t);
    /* waits for the tasks on this tensor only: the buffer is ours to free */
    starpu_data_unregister(t->handle);
    if (t->node == STARPU_MAIN_RAM) starpu_free_flags(t->data, sw_tensor_bytes(t), SW_MALLOC_FLAGS);
    else starpu_free_on_node(t->node, (uintptr_t)t->data, sw_tensor_bytes(t));
    free(t);
}

/* the order-only write's end */
static void release_ram(void *h) { starpu_data_release_on_node(h, STARPU_MAIN_RAM); }

/* StarPU 1.3's starpu_data_invalidate_submit clears the handle's
 * "initialized" flag when it is submitted, and starpu_data_partition_submit
 * on a handle without a value skips its switch task ("No need for
 * coherency", datawizard/filters.c): the tiles' tasks submitted next would
 * then wait for nothing submitted before on the whole handle -- neither the
 * invalidation nor the readers still pending, such as a detached send of
 * the tensor (StarPU-MPI holds it until the request completes) or the last
 * micro-batch's GEMMs -- and overwrite the buffer under them (the tiles
 * alias it). An empty write access right after the invalidation (an
 * acquire in write mode in main memory: nothing copied, no worker) marks
 * the handle written again at submission, so the next partitioning submits
 * its switch task, ordered after the invalidation and everything before
 * it; the main-memory copy is valid again (with no value: a switch task that
 * reads an invalidated parent would stop StarPU, "the handle does not have
 * a valid value"). docs/runtime-notes.md. */
void sw_tensor_invalidate(sw_tensor *t)
{
    starpu_data_handle_t h = sw_tensor_whole(t, STARPU_W);
    starpu_data_invalidate_submit(h);
    if (t->nplans) SW_CHECK(starpu_data_acquire_on_node_cb(h, STARPU_MAIN_RAM, STARPU_W, release_ram, h));
}

static void host_copy(sw_tensor *t, void *buf, int to_tensor)
{
    starpu_data_handle_t h = sw_tensor_whole(t, to_tensor ? STARPU_W : STARPU_R);
    SW_CHECK(starpu_data_acquire(h, to_tensor ? STARPU_W : STARPU_R));
    char *ptr = (char *)starpu_data_get_local_ptr(h);
    size_t row = (size_t)t->cols * sw_dtype_size(t->dtype);
    /* ld == cols for a whole tensor, so this is one contiguous block */
    if (to_tensor) memcpy(ptr, buf, row * (size_t)t->rows);
    else memcpy(buf, ptr, row * (size_t)t->rows);
    starpu_data_release(h);
}

void sw_tensor_write_host(sw_tensor *t, const void *src) { host_copy(t, (void *)src, 1); }
void sw_tensor_read_host(sw_tensor *t, void *dst) { host_copy(t, dst, 0); }

void sw_tensor_fill(sw_tensor *t, float value)
{
    starpu_data_handle_t h = sw_tensor_whole(t, STARPU_W);
    SW_CHECK(starpu_data_acquire(h, STARPU_W));
    float *ptr = (float *)starpu_data_get_local_ptr(h);
    for (int64_t i = 0; i < sw_tensor_numel(t); i++) ptr[i] = value;
    starpu_data_release(h);
}
