/** @file
 * Layers: the parallel building blocks a model is made of. Each is a
 * forward/backward pair that only submits tasks; its parallel behaviour
 * comes from the layer context it is given (the mesh's groups and degrees),
 * never from the model. Shapes: T = tokens of a micro-batch on this rank
 * (seq/(ulysses*ring) * B, rows in [s, b] order), l = this rank's rows of
 * the residual stream (T/tp with sequence parallelism, else T), h = hidden.
 *
 * Tensor parallelism (Megatron-LM) uses the f/g operators of mappings.h:
 * a column-parallel linear splits its output features and starts with f,
 * a row-parallel one splits its input features and ends with g (bias added
 * once, after the reduction); with sequence parallelism f is a row
 * all-gather (the GEMM of each chunk depends on that chunk only: on the
 * local one at once, on the others when the gather delivers them, which
 * is when it ends where MPI or NCCL runs it) and g a reduce-scatter, and
 * norms, dropout and residual adds run on the l rows.
 * The tiling (`tiles` row/column tiles per op) is fixed by the
 * configuration, never by the workers, so results are bit-identical for
 * every scheduler and worker count. */
#ifndef STARWEAVE_LAYERS_H
#define STARWEAVE_LAYERS_H

#include <stdint.h>
#include "starweave/comm.h"
#include "starweave/mappings.h"
#include "starweave/ops.h"
#include "starweave/params.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Dropout op ids in the RNG key (layer = block index; embedding uses layer 0xFFFF). */
enum {
    SW_DROP_EMBED = 0,      /**< the embedding's dropout */
    SW_DROP_ATTN_PROBS = 1, /**< attention's, on the probabilities */
    SW_DROP_ATTN_OUT = 2,   /**< the residual dropout after attention */
    SW_DROP_MLP_OUT = 3     /**< the residual dropout after the MLP */
};
/** The RNG key's layer of the embedding's dropout. */
#define SW_DROP_EMBED_LAYER 0xFFFFu

/* ------------------------------------------------------ layer context */

/** What the layers of a model share: sizes, degrees, tiling, dropout
 * (sw_ctx_init). Start from sw_ctx_config_default and set what differs:
 * a field left out of an initializer is 0, which is no degree (tp, ulysses,
 * ring, dp, grad_accum and tiles must be at least 1, refused otherwise).
 * grad_accum, tiles and seed are given here once: the registry's fields of
 * the same names (sw_params_config) left 0 take these at sw_ctx_init, and a
 * registry value that is not 0 must equal this one (refused, exit 2). */
typedef struct sw_ctx_config {
    ///@{
    int seq, batch;          /**< sequence length, global batch (sequences per step) */
    ///@}
    ///@{
    int tp, sp;              /**< tensor-parallel degree, sequence parallelism */
    ///@}
    int tp_recompute_allgather; /**< sp: gather norm outputs again in backward instead of keeping them */
    ///@{
    int ulysses, ring, zigzag; /**< context parallelism (zigzag: ring rank r holds chunks r and 2R-1-r) */
    ///@}
    ///@{
    int dp, grad_accum;      /**< data parallelism; micro-batches per step */
    ///@}
    int tiles;               /**< row/column tiles per op */
    uint64_t seed;           /**< dropout masks */
    float dropout;           /**< residual and embedding dropout */
    /** 1: the weight-gradient GEMMs (and bias sums) at priority -1, below every forward and
     * input-gradient task, so that a pipeline stage runs them where it would otherwise wait
     * (Zero Bubble's split, ZB-H1); only where no gradient is reduced during the backward
     * (no dp, ulysses or ring): there dW goes first, for its bucket's all-reduce */
    int dw_last;
    /** 1: Zero Bubble's split (ZB-H1; the step driver, pipeline.h): a block's linears keep their output
     * gradient per micro slot (sw_linear_defer_weight_grads) and leave their weight gradients to a unit
     * of their own in the pipeline's schedule; only with tp, ulysses, ring and dp 1 */
    int zero_bubble;
    /** column tiles of the ops that split columns (0: tiles): a context of fewer rows than tiles (a
     * decode step's) still splits its GEMMs' and activations' columns */
    int col_tiles;
} sw_ctx_config;

/** Fills c with the defaults: tp, ulysses, ring, dp, grad_accum and tiles
 * 1; sp, zigzag, seed, dropout and the rest 0; seq and batch 0 (the
 * caller sets them: refused while 0). */
void sw_ctx_config_default(sw_ctx_config *c);

struct sw_scratch;
/** \struct sw_ctx_log
 * Private to the layers (graphs/layers/layer_util.h): which linear wrote which
 * tensor last, and each replicated linear's rows. */
struct sw_ctx_log;
/** \struct sw_wdefer
 * Private to the layers and the step driver (graphs/step/pipeline.c): Zero
 * Bubble's weight-gradient work deferred from a B unit to its W unit. */
struct sw_wdefer;

/** Where this rank's tokens are, and the groups the layers use. Filled by
 * sw_ctx_init; read-only for layers and models. */
typedef struct sw_ctx {
    sw_ctx_config c;         /**< the configuration */
    sw_comm *comm;           /**< NULL on one rank */
    sw_params *params;       /**< the parameter registry the layers register into */
    sw_tp tp;                /**< TP group (f/g operators) */
    ///@{
    int ulysses, ring;       /**< Ulysses and ring degrees */
    int ulysses_rank, ring_rank; /**< this rank's place in each */
    int zigzag;              /**< the zigzag layout of the ring's positions */
    ///@}
    sw_group grad_group;     /**< gradient group: dp, or ulysses x ring x dp */
    ///@{
    int grad_size, grad_rank, dp_rank; /**< its size and this rank's place; this rank's place in dp */
    ///@}
    ///@{
    int B, micro;            /**< sequences per micro-batch, the current micro-batch */
    ///@}
    ///@{
    int tokens, resid_rows, row0, attn_rows; /**< tokens, residual rows and the first of them, attention-space rows (ulysses tokens) */
    ///@}
    int row_tiles;           /**< tiles (of rows: at most the rows of a rank) */
    int col_tiles;           /**< column tiles (sw_ctx_config.col_tiles, else tiles) */
    /** this rank's positions: runs of consecutive global positions (1, or 2 with zigzag) */
    int nruns;
    ///@{
    int64_t lr_i0[2], lr_p0[2], lr_n[2]; /**< first local position, its global position, length */
    ///@}
    /** row pieces of the T rows (k = 0) and of the l rows (k = 1): the tiles
     * cut where a run of positions ends (for position-dependent ops) */
    int npieces[2];
    ///@{
    /** each row piece's size, its first row in the [s, b] rows of the whole
     * sequence (the dropout key), its first row in its run, and the global
     * position the run starts at */
    int64_t *pc_size[2], *pc_key[2], *pc_off[2], *pc_pos[2];
    ///@}
    struct sw_scratch *scratch; /**< the scratch tensors (sw_scratch) */
    /** key lengths of this rank's sequences (sw_ctx_load_key_lengths), [grad_accum * B]: micro-batch
     * k's B at k * B; 0 where not loaded; NULL before the first load */
    int32_t *key_len;
    /** private to the layers: which linear wrote which tensor last (sw_attention_forward checks its
     * QKV linear by it) and each replicated linear's rows (the traffic model's rule) */
    struct sw_ctx_log *log;
    /** private to the layers and the step driver (Zero Bubble's split): the list the current B unit
     * leaves its weight gradients in (NULL: computed at once) */
    struct sw_wdefer *wdefer;
    /** private, as wdefer: where the next linear backward keeps its output gradient for its W unit */
    sw_tensor *wdy;
} sw_ctx;

/** The rules on the rows (divisibility by the degrees, tiles): on a
 * violation writes "rule (values)" into msg and returns -1. */
int sw_ctx_config_check(const sw_ctx_config *c, char *msg, size_t n);
/** Checks the configuration and the degrees against the mesh of comm (exit
 * 2 on every rank on a violation) and lays out the rows. Given a registry
 * for the first time (params not NULL; a later context on the same
 * registry, such as generation's, is not checked) also checks it against
 * the context (exit 2): its
 * grad_group must be the context's gradient group (SW_GROUP_DP, or
 * SW_GROUP_SP_DP with ulysses or ring: sw_ctx.grad_group), and its grad_accum,
 * tiles and seed either 0 (they take the context's) or equal to the
 * context's. */
void sw_ctx_init(sw_ctx *x, const sw_ctx_config *c, sw_comm *comm, sw_params *params);
/** Frees the context's scratch tensors and row pieces. */
void sw_ctx_destroy(sw_ctx *x);
/** A scratch tensor shared by every layer (StarPU orders the reuse), one per
 * (name, shape), created on first use. */
sw_tensor *sw_scratch(sw_ctx *x, const char *name, int64_t rows, int64_t cols);
/** Zero Bubble's split (sw_ctx_config.zero_bubble): the next linear
 * backward on x keeps its output gradient dy in `keep` (dy's shape: a
 * tensor the block keeps per micro slot, declared by its keep so that the
 * memory model counts it) and leaves its weight gradients (dW, and db) to
 * the step driver's W unit for this micro-batch, which computes them from
 * `keep` and the linear's input (a tensor of the saved set: the slot is
 * held until W has run). Where the driver is not splitting (no split, or
 * outside the blocks' backward) the next linear computes them at once as
 * always and `keep` is unused. */
void sw_linear_defer_weight_grads(sw_ctx *x, sw_tensor *keep);
/** End of a step's backward: the scratch is dead until the next step. */
void sw_scratch_invalidate(sw_ctx *x);
/** Bytes of the scratch tensors created so far (the working set the layers
 * share; it reaches its size during the first step). */
double sw_scratch_bytes(const sw_ctx *x);
/** Global position of local position i (rows i*B .. i*B + B - 1). */
int64_t sw_ctx_position(const sw_ctx *x, int64_t i);
/** First global batch column of micro-batch k on this rank. */
int sw_ctx_micro_batch_first(const sw_ctx *x, int k);
/** Makes k the current micro-batch. */
void sw_ctx_set_micro_batch(sw_ctx *x, int k);
/** Generation: the rows of x hold positions pos .. pos + seq - 1 from now
 * on (0 at sw_ctx_init). Only for a context whose rank holds whole
 * sequences (ulysses = ring = 1, no sp): exit 2 otherwise. */
void sw_ctx_set_first_position(sw_ctx *x, int64_t pos);
/** Blocking, for programs: writes this rank's rows of micro-batch k of the
 * global batch tok/tgt ([seq*batch] int32 in [s, b] order) into tokens and
 * targets ([T,1] int32) and makes k the current micro-batch. tgt and
 * targets NULL: tokens only (a model whose targets are not per token). */
void sw_ctx_load_tokens(sw_ctx *x, int k, const int32_t *tok, const int32_t *tgt, sw_tensor *tokens,
                        sw_tensor *targets);
/** Host side, before the step that uses them is submitted: the key lengths
 * of the global batch len[batch] for micro-batch k (each in [1, seq]: key
 * position p of sequence b is visible iff p < len[b], BERT-style padding at
 * the end); this rank keeps its micro-batch's B sequences'. Attention layers
 * with key_padding read them (sw_attention_config). Exit 2 on a violation. */
void sw_ctx_load_key_lengths(sw_ctx *x, int k, const int32_t *len);
/** Dropout RNG key of row piece i of the l rows (sw_ctx.npieces[1] pieces). */
sw_rng_key sw_ctx_drop_key(const sw_ctx *x, int step, unsigned layer, unsigned op, int i, int64_t cols);
/** Positions of ring rank rr's block, in ring-block order, as runs (first
 * position, length); returns their number (1, or 2 with zigzag). */
int sw_ctx_ring_runs(const sw_ctx *x, int rr, int64_t p0[2], int64_t n[2]);
/** Row piece i of the T rows (k = 0) or of the l rows (k = 1) of t. */
starpu_data_handle_t sw_ctx_piece(const sw_ctx *x, int k, sw_tensor *t, int i, enum starpu_data_access_mode mode);

/* ------------------------------------------------------------- linear */

/** y = x W^T + b, W [out, in]. COLUMN: out split over TP, f before;
 * ROW: in split, g after, bias once after the reduction; REPLICATED: no
 * split, on the rows it is given.
 *
 * A replicated linear's weight gradient depends on whose rows it was
 * given, and the layer tells it from their number (x_local's rows at its
 * forward and backward), so no mode says it:
 *  - l rows (sw_ctx.resid_rows: this rank's rows of the residual stream): with sp
 *    each TP rank holds other rows, so the gradient is summed over TP;
 *  - T rows (sw_ctx.tokens: all of this rank's tokens, e.g. gathered by f, or
 *    the l rows without sp): every TP rank holds the same rows, no sum;
 *  - B rows (sw_ctx.B: one row per sequence, the same on every rank that
 *    holds part of the sequences, e.g. sw_pool_forward's of heads.h): no
 *    sum over TP, and scaled by 1/(ulysses*ring) because the registry's
 *    sum over the gradient group (ulysses x ring x dp) would count them
 *    once per Ulysses/Ring rank.
 * The registry then sums it over the gradient group. Any other row count
 * is refused (exit 2), and so is a count that two of these rules share
 * but which the rules treat differently (e.g. B = l under sp: seq =
 * ulysses*ring*tp). */
typedef enum {
    SW_LINEAR_COLUMN,    /**< out split over TP, f before */
    SW_LINEAR_ROW,       /**< in split, g after, bias once after the reduction */
    SW_LINEAR_REPLICATED /**< no split, on the rows it is given (l, T or B: the gradient's rule from them) */
} sw_linear_mode;
/** A linear layer y = x W^T + b (sw_linear_add). */
typedef struct sw_linear {
    ///@{
    int w, b;                /**< parameter indices; b < 0: no bias */
    ///@}
    sw_linear_mode mode;     /**< how TP splits it */
    ///@{
    int64_t in, out;         /**< global features */
    ///@}
    int n;                   /**< output column tiles of the GEMM (column/replicated) */
    int sized;               /**< sizes given (else equal tiles) */
    int64_t sizes[64];       /**< their sizes (n <= 64) */
} sw_linear;

/** Registers name_w [out, in] (N(0, std)) and, with bias, name_b [out] (0).
 * out_slice: column mode's output rows of this rank (NULL: even split);
 * n_tiles/tile_sizes: the output column tiles (0/NULL: `tiles` equal ones). */
sw_linear sw_linear_add(sw_ctx *x, const char *name, sw_linear_mode mode, int64_t in, int64_t out, int bias, float std,
                        const sw_slice *out_slice, int n_tiles, const int64_t *tile_sizes);
/** A column-parallel linear of two stacked outputs, W = [W1; W2] [2 out, in]
 * (SwiGLU's gate and up): each rank holds its 1/t of both, so its output is
 * [T, 2 out/t] = its part of W1 x | its part of W2 x. */
sw_linear sw_linear_add_gated(sw_ctx *x, const char *name, int64_t in, int64_t out, float std);
/** column: y[T, out/t] from x_local [l, in]; with sp x_gathered [T, in]
 * receives f's all-gather (kept by the caller for backward, or a scratch
 * with tp_recompute_allgather); without, pass x_local. replicated: y[n,
 * out] from x_local [n, in], n = l, T or B (the gradient's rule above);
 * x_gathered unused. */
void sw_linear_forward(sw_ctx *x, const sw_linear *l, sw_tensor *x_local, sw_tensor *x_gathered, sw_tensor *y);
/** row: returns the tensor holding y [l, out] (a scratch) from x [T, in/t] */
sw_tensor *sw_linear_row_forward(sw_ctx *x, const sw_linear *l, sw_tensor *in);
/** column/replicated backward: weight gradients from dy [T, out/t] and the
 * input (gathered again with tp_recompute_allgather); returns dx_local
 * [l, in] (a scratch) through f's backward */
sw_tensor *sw_linear_backward(sw_ctx *x, const sw_linear *l, sw_tensor *dy, sw_tensor *x_local,
                              sw_tensor *x_gathered);
/** row backward: dy [l, out] -> dx [T, in/t] */
void sw_linear_row_backward(sw_ctx *x, const sw_linear *l, sw_tensor *dy, sw_tensor *in, sw_tensor *dx);

/* -------------------------------------------------------------- norms */

/** A LayerNorm or RMSNorm layer (sw_norm_add). */
typedef struct sw_norm {
    ///@{
    int w, b;                /**< parameter indices; b < 0: RMSNorm (no bias, no mean) */
    ///@}
    float eps;               /**< added to the variance (mean square) */
} sw_norm;
/** Registers name_w [h] (1) and, for LayerNorm, name_b [h] (0). */
sw_norm sw_norm_add(sw_ctx *x, const char *name, int64_t h, int rms, float eps);
/** y[l,h] = norm(x); mean, rstd [l,1] saved (mean NULL for RMSNorm) */
void sw_norm_forward(sw_ctx *x, const sw_norm *n, sw_tensor *in, sw_tensor *y, sw_tensor *mean, sw_tensor *rstd);
/** dx[l,h] (+= with accumulate) from dy; parameter gradients summed over
 * the local rows (and over TP with sp) */
void sw_norm_backward(sw_ctx *x, const sw_norm *n, sw_tensor *dy, sw_tensor *in, sw_tensor *mean, sw_tensor *rstd,
                      sw_tensor *dx, int accumulate);

/* --------------------------------------------------------- activation */

/** out[T,f] = gelu(in[T,f]) on `tiles` column tiles */
void sw_gelu_forward(sw_ctx *x, sw_tensor *in, sw_tensor *out);
/** grad[T,f] (RW): dout on entry, din = dout * gelu'(in) on return */
void sw_gelu_backward(sw_ctx *x, sw_tensor *in, sw_tensor *grad);

/** SwiGLU (LLaMA's MLP): act[T,F] = silu(gate) * up, from fc[T,2F] = gate | up
 * (a column-parallel linear registered with sw_linear_add_gated) */
void sw_swiglu_forward(sw_ctx *x, sw_tensor *fc, sw_tensor *act);
/** dfc[T,2F] = dgate | dup from dact[T,F] */
void sw_swiglu_backward(sw_ctx *x, sw_tensor *fc, sw_tensor *dact, sw_tensor *dfc);

/* ------------------------------------------------------- residual add */

/** out[l,h] = res + dropout(branch); the mask keyed by (layer, op) */
void sw_residual_forward(sw_ctx *x, int step, int layer, int op, sw_tensor *res, sw_tensor *branch, sw_tensor *out);
/** the branch's gradient from the output's dout [l,h]: dout itself, or its dropped copy (a scratch) */
sw_tensor *sw_residual_backward(sw_ctx *x, int step, int layer, int op, sw_tensor *dout);

/* ---------------------------------------------------------- embedding */

/** The token and position embedding (sw_embedding_add). */
typedef struct sw_embedding {
    ///@{
    int wte, wpe;            /**< parameter indices; wpe < 0: no learned positions */
    ///@}
    ///@{
    int vocab, vocab_padded; /**< real and padded (multiple of 128 tp) vocabulary */
    ///@}
    int tied;                /**< set when the LM head reads wte: where it runs on this rank's stage,
                                its backward writes dwte first and the embedding's adds to it (else the
                                embedding's writes it) */
} sw_embedding;
/** the vocabulary padded to a multiple of 128 tp (vocab-parallel slices of 128-multiples) */
int sw_vocab_padded(int vocab, int tp);
/** Registers wte [vocab_padded, h] (vocab-parallel rows, N(0, std), padding
 * rows 0) and, with max_pos > 0, wpe [max_pos, h] (N(0, std)). */
sw_embedding sw_embedding_add(sw_ctx *x, int vocab, int vocab_padded, int64_t h, int max_pos, float std);
/** x0[l,h] = dropout(wte[tokens] + wpe[pos]); tokens [T,1] */
void sw_embedding_forward(sw_ctx *x, const sw_embedding *e, int step, sw_tensor *tokens, sw_tensor *x0);
/** dwte, dwpe from dx0 [l,h] (consumed) */
void sw_embedding_backward(sw_ctx *x, const sw_embedding *e, int step, sw_tensor *tokens, sw_tensor *dx0);

/** An extra embedding table of a name of one's own (BERT's token types,
 * segment ids): sw_embedding_table_add. */
typedef struct sw_embedding_table {
    int w;                   /**< the table's parameter index */
    int rows;                /**< its rows (ids in [0, rows)) */
    int64_t h;               /**< its columns: the hidden size */
} sw_embedding_table;
/** Registers name [rows, h] (N(0, std); std 0: zeros), replicated on every
 * rank (a small table). Refused (exit 2): an empty name or one of 48
 * characters or more, rows or h below 1, std below 0, a name already
 * registered (sw_params_add). */
sw_embedding_table sw_embedding_table_add(sw_ctx *x, const char *name, int rows, int64_t h, float std);
/** x0[l,h] += table[ids] on this rank's l rows (after sw_embedding_forward:
 * x0 = dropout(wte[tokens] + wpe[pos]) + table[ids]); ids [T,1] int32
 * (loaded like tokens, sw_ctx_load_tokens); an id outside [0, rows) adds
 * nothing. No communication. */
void sw_embedding_table_forward(sw_ctx *x, const sw_embedding_table *e, sw_tensor *ids, sw_tensor *x0);
/** dtable from dx0 [l,h] (read, not changed; call it before
 * sw_embedding_backward): the rows' gradients scattered by id, summed over
 * TP with sp (each TP rank holds other rows; without sp every TP rank
 * holds the same rows and the same gradient); the registry sums it over
 * the gradient group as wpe's. */
void sw_embedding_table_backward(sw_ctx *x, const sw_embedding_table *e, sw_tensor *ids, sw_tensor *dx0);

/* ------------------------------------------- LM head and cross-entropy */

/** The LM head and its cross-entropy (opaque): sw_lm_head_create. */
typedef struct sw_lm_head sw_lm_head;
/** Registers the LM head's own weight name [vocab_padded, h] (vocab-parallel
 * rows, N(0, std), padding rows 0) and returns its parameter index (an
 * untied head). */
int sw_lm_head_add_weight(sw_ctx *x, const char *name, int vocab, int vocab_padded, int64_t h, float std);
/** logits[T, Vp/t] = f(x) W^T, W [Vp, h] vocab-parallel: the embedding's
 * wte (tied), or its own parameter (sw_lm_head_add_weight). The loss is
 * the mean cross-entropy over the global batch (vocab-parallel: three
 * [T,1] all-reduces). weight: W's parameter index.
 *
 * With an ignore index (sw_lm_head_set_ignore_index) or row weights
 * (sw_lm_head_load_weights), Megatron's and PyTorch's semantics: the
 * loss is sum_i w_i ce_i / sum_i w_i over the counted rows of the GLOBAL
 * batch -- every micro-batch, every dp, Ulysses and Ring rank -- where a
 * row whose target is the ignore index has w_i = 0 (no loss, no
 * gradient) and w_i is its loaded weight, else 1. The count sum_i w_i
 * comes from sw_lm_head_count, once per step before the step's first
 * micro-batch (all micro-batches' targets loaded); it adds one [1,1]
 * all-reduce over the gradient group per step. No counted row (every
 * target ignored, or all weights 0): the loss is NaN, as PyTorch's mean
 * over no row, and the gradients 0. Without either, the mean over all
 * rows as before, bit for bit. */
sw_lm_head *sw_lm_head_create(sw_ctx *x, int weight, int vocab, int vocab_padded, int64_t h);
/** The head described, none of its tensors allocated: for sw_lm_head_traffic
 * (and sw_lm_head_set_ignore_index, sw_lm_head_destroy) where the model is
 * only planned (sw_gpt_plan_rank: a head too big for this machine). */
sw_lm_head *sw_lm_head_describe(sw_ctx *x, int weight, int vocab, int vocab_padded);
/** Rows whose target is ignore_index count for nothing (PyTorch's
 * ignore_index; -100 is its default). It must lie outside [0, vocab)
 * (refused, exit 2: it would drop a real token); SW_CE_IGNORE_NONE (the
 * default): no ignore index. The model's loader must then accept that
 * target (sw_gpt_load_micro_batch does with sw_gpt_config.ignore_index). */
void sw_lm_head_set_ignore_index(sw_lm_head *hd, int ignore_index);
/** The ignore index (SW_CE_IGNORE_NONE: none). */
int sw_lm_head_ignore_index(const sw_lm_head *hd);
/** Row weights of micro-batch k (in [0, grad-accum)): w[seq*batch] for the
 * whole global batch in [s, b] order, as the targets (this rank takes its
 * rows); finite and >= 0 (refused, exit 2 on every rank, with the value).
 * They stay until loaded again. */
void sw_lm_head_load_weights(sw_ctx *x, sw_lm_head *hd, int k, const float *w);
/** The step's count of counted rows: targets[k] [T,1] for each of the
 * grad-accum micro-batches, already loaded; call once per step before the
 * step's first sw_lm_head_forward (the pipeline driver interleaves heads
 * and micro-batches: e.g. from the model's head_forward at micro-batch 0).
 * A no-op without an ignore index and row weights. Forgotten: the head's
 * forward and backward refuse (exit 2). */
void sw_lm_head_count(sw_ctx *x, sw_lm_head *hd, sw_tensor *const *targets);
/** Frees the head's tensors (blocking). NULL: no-op. */
void sw_lm_head_destroy(sw_lm_head *hd);
/** Bytes the head allocates in context x: the logits [T, Vp/t], f's
 * gathered input (sp), the per-row statistics, the loss; with an ignore
 * index (not SW_CE_IGNORE_NONE) each micro-batch's row weights and the
 * count (row weights loaded with sw_lm_head_load_weights add [T,1] per
 * micro-batch). */
double sw_lm_head_bytes(const sw_ctx *x, int vocab_padded, int64_t h, int ignore_index);
/** [1,1]: the mean loss once the step's last micro-batch has gone forward
 * (NULL for a NULL head: a model's sw_model_ops.loss on a stage without its head) */
sw_tensor *sw_lm_head_loss(sw_lm_head *hd);
/** Logits from in [l,h] (through f) and the cross-entropy against
 * targets [T,1] into the loss (sw_lm_head_loss; weighted: this
 * micro-batch's sum_i w_i ce_i over the step's count). */
void sw_lm_head_forward(sw_ctx *x, sw_lm_head *hd, sw_tensor *in, sw_tensor *targets);
/** The backward of the head and its loss: returns din [l,h] (a scratch) */
sw_tensor *sw_lm_head_backward(sw_ctx *x, sw_lm_head *hd, sw_tensor *targets);

/* ---------------------------------------------------------- attention */

/** One drop-in attention layer (yunchang's LongContextAttention): the
 * parallel mode is data -- local, Ulysses (heads exchanged by all-to-all),
 * Ring (K/V blocks around the ring group, zigzag), or both (USP) -- taken
 * from the context. Input: the column-parallel QKV projection's output
 * [T, (aq + 2 ak) d] (this TP rank's query heads aq and K/V heads ak);
 * output [T, aq d]. */
typedef struct sw_attention_config {
    ///@{
    int heads, kv_heads, head_dim; /**< global */
    ///@}
    int causal;              /**< 1: causal mask */
    float dropout;           /**< on the probabilities */
    int keep_probs;          /**< recompute none: keep the probabilities (ring 1 only) */
    float rope_theta;        /**< > 0: rotary positions on q and k (base theta), 0: none */
    /** 1: key-padding mask: sequence b's keys at positions from its key length on are masked (the
     * lengths from sw_ctx_load_key_lengths, per micro-batch; at most SW_ATTN_MAX_SEQS sequences per
     * micro-batch). Queries at padded positions still attend to the valid keys (as BERT does): a model
     * leaves them out of its loss (ignore index). Works under every parallel mode. */
    int key_padding;
} sw_attention_config;
/** Fills c with the defaults: heads, kv_heads and head_dim 0 (the caller
 * sets heads and head_dim; kv_heads 0 means heads), not causal, no
 * dropout, no kept probabilities, no rotary positions, no key padding. */
void sw_attention_config_default(sw_attention_config *c);
/** An attention layer (opaque): sw_attention_create. */
typedef struct sw_attention sw_attention;
/** What a block keeps for attention's backward. */
typedef struct sw_attn_saved {
    sw_tensor *qkv;          /**< [T, (aq+2ak)d] the QKV projection's output (a scratch with Ulysses) */
    sw_tensor *qkv_u;        /**< attention space [Tr, (hq+2hk)d] (= qkv without Ulysses) */
    ///@{
    sw_tensor *att, *att_u;  /**< [T, aq d], [Tr, hq d] (= att without Ulysses) */
    ///@}
    ///@{
    sw_tensor *lse, *probs;  /**< [Tr, hq]; keep_probs: [B hq seq, seq] */
    ///@}
} sw_attn_saved;
struct sw_saved;

/** The attention layer of context x (kv_heads 0: = heads). */
sw_attention *sw_attention_create(sw_ctx *x, const sw_attention_config *c);
/** Frees the layer. */
void sw_attention_destroy(sw_attention *a);
/** The attention's QKV projection: a column-parallel linear name_w [(heads +
 * 2 kv_heads) head_dim, in] (and name_b with bias) registered with the
 * attention's slice (sw_attention_qkv_slice) and output tiles
 * (sw_attention_qkv_tiles) -- the way to register it. A QKV linear made
 * otherwise (sw_linear_add with an even slice: the shapes fit, the heads
 * do not) is refused by sw_attention_forward (exit 2) when the linear
 * wrote k->qkv, and by sw_attention_sum_kv_grads and
 * sw_attention_traffic, which are given it. */
sw_linear sw_attention_qkv_add(sw_ctx *x, const sw_attention *a, const char *name, int64_t in, int bias, float std);
/** The QKV weight's slice (this rank's q, k and v heads: rows of [(a+2k)d, h]). */
sw_slice sw_attention_qkv_slice(const sw_attention *a, int dim);
/** The QKV GEMM's output column tiles: their number, their sizes in *sizes. */
int sw_attention_qkv_tiles(const sw_attention *a, const int64_t **sizes);
int64_t sw_attention_qkv_cols(const sw_attention *a); /**< (aq + 2 ak) d */
int64_t sw_attention_out_cols(const sw_attention *a); /**< aq d */
/** Allocates a block's kept tensors into s. */
void sw_attention_keep(sw_attention *a, struct sw_saved *s, sw_attn_saved *k);
/** Attention from k->qkv [T, (aq+2ak)d] into k->att [T, aq d], writing
 * the tensors of k that backward reads (rotary positions on q and k first
 * when rope_theta > 0). Where the last sw_linear_forward into k->qkv was
 * a linear of another slice or other output tiles than
 * sw_attention_qkv_add's: refused (exit 2), the rule and both slices
 * printed. */
void sw_attention_forward(sw_ctx *x, sw_attention *a, int step, int layer, const sw_attn_saved *k);
/** datt [T, aq d] -> dqkv [T, (aq+2ak)d] */
void sw_attention_backward(sw_ctx *x, sw_attention *a, int step, int layer, const sw_attn_saved *k, sw_tensor *datt,
                           sw_tensor *dqkv);
/** K/V heads replicated over tp/kv_heads ranks: sums the K/V parts of the
 * QKV weight and bias gradients among the sharers (after its backward). */
void sw_attention_sum_kv_grads(sw_ctx *x, sw_attention *a, const sw_linear *qkv);
/** attention FLOPs submitted by the last forward (4 d per visible pair) */
double sw_attention_flops(const sw_attention *a);

/** A layer's key/value cache for generation (opaque): sw_kv_cache_create. */
typedef struct sw_kv_cache sw_kv_cache;
/** The cache of one attention layer a for `batch` sequences of at most
 * max_len positions: this rank's K and V heads ([max_len batch, ak d] each,
 * rows in [s, b] order), zeroed. */
sw_kv_cache *sw_kv_cache_create(const sw_attention *a, int batch, int max_len);
/** Frees the cache. NULL: no-op. */
void sw_kv_cache_destroy(sw_kv_cache *kv);
/** Generation: the attention of the L = x->c.seq new positions p0 .. p0 +
 * L - 1 (x's first position, sw_ctx_set_first_position) of x->B sequences.
 * qkv [L B, (aq+2ak)d] (RW: q and k rotated first when rope_theta > 0); its
 * k and v rows are appended to the cache at positions p0 .., then att [L B,
 * aq d] = causal attention of the q rows against every cached position up
 * to their own (no dropout). x: a context of the same tensor-parallel
 * degree as a's, one sequence piece per rank (ulysses = ring = 1, no sp),
 * batch/dp = the cache's batch; p0 + L at most its max_len (exit 2). */
void sw_attention_cached_forward(sw_ctx *x, const sw_attention *a, sw_kv_cache *kv, sw_tensor *qkv, sw_tensor *att);

/* ------------------------------------------------------ traffic model */

///@{
/** Each adds to t what its layer sends per training step (every
 * micro-batch's forward and backward; sw_traffic in comm.h), from its
 * shapes and the context's degrees, as sw_comm_traffic will count it.
 * A model sums its layers', the registry's (sw_params_traffic) and the
 * block policy's (sw_blocks_traffic). */
void sw_linear_traffic(const sw_ctx *x, const sw_linear *l, sw_traffic *t);
void sw_norm_traffic(const sw_ctx *x, const sw_norm *n, sw_traffic *t);
void sw_embedding_traffic(const sw_ctx *x, const sw_embedding *e, sw_traffic *t);
void sw_embedding_table_traffic(const sw_ctx *x, const sw_embedding_table *e, sw_traffic *t);
void sw_lm_head_traffic(const sw_ctx *x, const sw_lm_head *hd, sw_traffic *t);
///@}
/** The traffic model of the attention of one block, and the K/V gradient sums of its QKV linear */
void sw_attention_traffic(const sw_ctx *x, const sw_attention *a, const sw_linear *qkv, sw_traffic *t);

#ifdef __cplusplus
}
#endif
#endif
