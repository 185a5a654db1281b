/** @file
 * sw_tensor: a named, shaped, typed tensor on one StarPU handle (row-major),
 * with row-block / column-block tiles as StarPU asynchronous partitions. */
#ifndef STARWEAVE_TENSOR_H
#define STARWEAVE_TENSOR_H

#include <stdint.h>
#include <starpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types. SW_BF16: bfloat16 storage (codelets/bf16.h), for GEMM operands (ops.h) */
typedef enum {
    SW_F32 = 0, /**< fp32 */
    SW_I32 = 1, /**< int32 (token ids, targets) */
    SW_BF16 = 2 /**< bfloat16 */
} sw_dtype;
/** The dimension of the matrix view a tiling splits. */
typedef enum {
    SW_ROWS = 0, /**< row blocks (dim 0) */
    SW_COLS = 1  /**< column blocks (dim 1) */
} sw_split;

/** Most dimensions of a tensor's shape (sw_tensor_new aborts above). */
#define SW_MAX_DIMS 4
/** Most tilings of one tensor (sw_plan; the tiling functions abort above). */
#define SW_MAX_PLANS 6

struct sw_tensor;

/** Where a handle lies in its tensor: rows [r0, r1) and columns [c0, c1) of
 * t. The whole tensor's handle and every tile carry theirs as StarPU user
 * data (starpu_data_get_user_data): sw_trace's task graph tells from it
 * which accesses through different tilings overlap. */
typedef struct sw_block {
    struct sw_tensor *t; /**< the tensor */
    ///@{
    int64_t r0, r1, c0, c1; /**< rows [r0, r1) and columns [c0, c1) of t */
    ///@}
} sw_block;

/** A tiling: nr x nc blocks, row block i = rows [rb[i], rb[i+1]), column
 * block j = columns [cb[j], cb[j+1]); children in row-major block order,
 * blocks[k] the place of children[k]. */
typedef struct sw_plan {
    ///@{
    int nr, nc; /**< row blocks and column blocks */
    ///@}
    ///@{
    int64_t *rb, *cb; /**< row and column block bounds (nr + 1 and nc + 1 entries) */
    ///@}
    starpu_data_handle_t *children; /**< the nr * nc tiles' handles */
    sw_block *blocks; /**< where each child lies */
} sw_plan;

/** A tensor: its shape, its StarPU handle, its home buffer and its tilings
 * (sw_tensor_new and the other constructors fill it; read its fields,
 * change none). */
typedef struct sw_tensor {
    char name[64]; /**< name in traces and messages */
    int ndim; /**< dimensions of shape (1 .. SW_MAX_DIMS) */
    int64_t shape[SW_MAX_DIMS]; /**< the extents, the last one the columns */
    sw_dtype dtype; /**< element type */
    ///@{
    int64_t rows, cols;           /**< matrix view: rows = prod(shape[0..ndim-2]), cols = shape[ndim-1] */
    ///@}
    starpu_data_handle_t handle;  /**< StarPU matrix: nx = cols, ny = rows, ld = cols */
    sw_block whole;               /**< handle's user data: the whole of t */
    void *data;                   /**< home buffer (starpu_malloc in main RAM, or on the offload node) */
    int node;                     /**< its memory node */
    /* submission-time partition state (see tensor.c) */
    sw_plan plans[SW_MAX_PLANS];  /**< the tilings made so far */
    int nplans;                   /**< tilings in plans */
    int rw_plan;                  /**< plan index partitioned read-write, or -1 */
    unsigned ro_mask;             /**< plans partitioned read-only (parent still readable) */
} sw_tensor;

/** Bytes of one element of dt: 2 for SW_BF16, 4 for SW_F32 and SW_I32. */
size_t sw_dtype_size(sw_dtype dt);

/** New tensor with its home buffer in main RAM. */
sw_tensor *sw_tensor_new(const char *name, sw_dtype dt, int ndim, const int64_t *shape);
/** New tensor [rows, cols] (sw_tensor_new with ndim 2). */
sw_tensor *sw_tensor_new2d(const char *name, sw_dtype dt, int64_t rows, int64_t cols);
/** An fp32 tensor whose home is the offload node (sw_options.offload): tasks
 * use a copy that StarPU allocates where they run (main RAM with the disk
 * node, the GPU with CUDA workers, whose offload node is pinned main RAM),
 * within sw_options.offload_budget_mb, and may evict. Use it whole (StarPU reads
 * each tile of a partitioned one from the offload node on its own).
 * Bring it back after sw_tensor_wont_use with starpu_data_prefetch_on_node. */
sw_tensor *sw_tensor_new_offload(const char *name, int64_t rows, int64_t cols);
/** Its value is not needed for a while: StarPU writes it
 * home when idle and evicts it first (ordered after the tasks submitted
 * before on the tensor). Bring it back with starpu_data_prefetch_on_node,
 * which is not ordered: call it once the writers have run. */
void sw_tensor_wont_use(sw_tensor *t);
/** Blocking: waits for the submitted tasks on t, unregisters and frees it. */
void sw_tensor_free(sw_tensor *t);
/** Contents no longer needed: StarPU may drop every copy (asynchronous). */
void sw_tensor_invalidate(sw_tensor *t);

/** Elements of t (rows * cols). */
int64_t sw_tensor_numel(const sw_tensor *t);
/** Bytes of t's data (elements times sw_dtype_size). */
size_t sw_tensor_bytes(const sw_tensor *t);

/** Handle of the whole tensor for a task of the given access mode; submits
 * the unpartitioning that this needs. */
starpu_data_handle_t sw_tensor_whole(sw_tensor *t, enum starpu_data_access_mode mode);
/** The nparts tiles of t split along rows or columns, for tasks of the given
 * access mode; submits the (un)partitioning that this needs. Read tiles of
 * several splits may be live together; a write invalidates the others. */
starpu_data_handle_t *sw_tensor_tiles(sw_tensor *t, sw_split split, int nparts,
                                      enum starpu_data_access_mode mode);
/** Tiles of explicit sizes along one dim (sizes[0..nparts-1], summing to
 * the extent), such as the q | k | v column blocks of a grouped-query
 * projection. */
starpu_data_handle_t *sw_tensor_split(sw_tensor *t, sw_split split, int nparts, const int64_t *sizes,
                                      enum starpu_data_access_mode mode);
/** nr x nc grid of blocks, block (i, j) is element i * nc + j; sizes of the
 * row / column blocks given, or NULL for StarPU's equal block split. */
starpu_data_handle_t *sw_tensor_grid(sw_tensor *t, int nr, const int64_t *row_sizes, int nc,
                                     const int64_t *col_sizes, enum starpu_data_access_mode mode);
/** First row (SW_ROWS) or column (SW_COLS) of tile i, and its extent. */
void sw_tile_range(int64_t n, int nparts, int i, int64_t *first, int64_t *count);

/** Blocking host access, for programs and tests (never inside a builder):
 * copies src (sw_tensor_bytes of t, row-major) into t. */
void sw_tensor_write_host(sw_tensor *t, const void *src);
/** Blocking host access (never inside a builder): copies t into dst
 * (sw_tensor_bytes of t, row-major). */
void sw_tensor_read_host(sw_tensor *t, void *dst);
/** Blocking host access (never inside a builder): sets every element of
 * the fp32 tensor t to value. */
void sw_tensor_fill(sw_tensor *t, float value);

#ifdef __cplusplus
}
#endif
#endif
