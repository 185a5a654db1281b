/** @file
 * Layers of a diffusion transformer (DiT, Open-Sora's STDiT), each usable by
 * any model: adaLN-Zero modulation, a timestep embedding, SiLU, patch
 * embedding and un-patchify of latents, cross-attention to a conditioning
 * sequence and the conditioning's K/V projection, and attention over another grouping of the same tokens
 * (spatial / temporal).
 *
 * Rows follow the layers' layout (layers.h): the residual stream's l rows
 * are in [s, b] order, row i*B + b being local position i of sequence b of
 * the micro-batch. A per-sequence tensor [B, n] (the conditioning vector,
 * the modulation's shift, scale and gate, the timestep) is broadcast over
 * the rows: row r uses row r % B of it. Such tensors are the same on every
 * rank holding part of the sequences (computed alike from per-sequence
 * inputs), so their linears are SW_LINEAR_REPLICATED; the
 * gradients they receive from the rows are each rank's partial sums over
 * its positions, all-reduced (sw_adaln_backward) over the ranks holding the
 * sequences' other positions (TP with sp, Ulysses, Ring) before those
 * linears' backward.
 *
 * Video tokens: a sample's latents [frames, height, width, channels] become
 * frames * (height/p) * (width/p) tokens, frame-major: position
 * f * S + s holds patch s (row-major over the patch grid) of frame f, S =
 * (height/p) (width/p) patches per frame (sw_patchify).
 *
 * The DiT model made of them is dit_model.h's. */
#ifndef STARWEAVE_DIT_H
#define STARWEAVE_DIT_H

#include "starweave/blocks.h"
#include "starweave/layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- SiLU */

/** out = silu(in) = in sigmoid(in) on `tiles` column tiles (same shapes, any rows) */
void sw_silu_forward(sw_ctx *x, sw_tensor *in, sw_tensor *out);
/** grad (RW): dout on entry, din = dout * silu'(in) on return */
void sw_silu_backward(sw_ctx *x, sw_tensor *in, sw_tensor *grad);

/* ------------------------------------------------------ adaLN-Zero */

/** adaLN-Zero's modulation linear (sw_adaln_add): mod[B, chunks h] = c W^T + b
 * from a per-sequence conditioning c [B, cond], W and b initialised to zero
 * (so a modulated block starts as the identity: shift = scale = gate = 0).
 * DiT's six chunks per block: shift, scale, gate of the attention branch,
 * then of the MLP branch (DiT applies SiLU to c first: sw_silu_forward,
 * once per model, c being the same for every block). */
typedef struct sw_adaln {
    sw_linear lin;           /**< SW_LINEAR_REPLICATED [chunks h, cond] */
    int chunks;              /**< the h-column chunks of mod */
    int64_t h;               /**< hidden size: columns of one chunk */
} sw_adaln;
/** Registers name_w [chunks h, cond] and name_b [chunks h], both zero. */
sw_adaln sw_adaln_add(sw_ctx *x, const char *name, int64_t cond, int64_t h, int chunks);
/** mod [B, chunks h] = c [B, cond] W^T + b */
void sw_adaln_forward(sw_ctx *x, const sw_adaln *a, sw_tensor *c, sw_tensor *mod);
/** From dmod [B, chunks h] (RW: every chunk written by the sw_modulate_backward
 * and sw_gate_backward calls that read mod, each rank's partial sums):
 * all-reduces dmod over the ranks holding the sequences' other positions,
 * then the linear's weight gradients; returns dc [B, cond] (a scratch, the
 * same on those ranks). */
sw_tensor *sw_adaln_backward(sw_ctx *x, const sw_adaln *a, sw_tensor *dmod, sw_tensor *c);
/** Adds the all-reduce of dmod (per micro-batch) to t. */
void sw_adaln_traffic(const sw_ctx *x, const sw_adaln *a, sw_traffic *t);

/** out[l,h] = in * (1 + scale) + shift, shift = chunk `shift` of mod [B, k h],
 * scale = chunk `scale`, broadcast over the rows of each sequence (in is
 * usually a norm's output) */
void sw_modulate_forward(sw_ctx *x, sw_tensor *in, sw_tensor *mod, int shift, int scale, sw_tensor *out);
/** din[l,h] (W) = dout * (1 + scale); chunks `shift` and `scale` of dmod [B, k h]
 * (W) = this rank's sums over each sequence's rows of dout and of dout * in
 * (sw_adaln_backward all-reduces them) */
void sw_modulate_backward(sw_ctx *x, sw_tensor *dout, sw_tensor *in, sw_tensor *mod, int shift, int scale,
                          sw_tensor *din, sw_tensor *dmod);
/** out[l,h] = res + gate * branch, gate = chunk `gate` of mod [B, k h] (the
 * gated residual of adaLN-Zero; res's gradient is dout itself) */
void sw_gate_forward(sw_ctx *x, sw_tensor *res, sw_tensor *branch, sw_tensor *mod, int gate, sw_tensor *out);
/** dbranch[l,h] (W) = gate * dout; chunk `gate` of dmod (W) = this rank's sums
 * over each sequence's rows of dout * branch */
void sw_gate_backward(sw_ctx *x, sw_tensor *dout, sw_tensor *branch, sw_tensor *mod, int gate, sw_tensor *dbranch,
                      sw_tensor *dmod);

/* ------------------------------------------------- timestep embedding */

/** A timestep embedding (opaque; DiT's TimestepEmbedder): sinusoidal
 * features of a per-sequence scalar t, freqs_i = exp(-ln(max_period) i / half),
 * half = freq_dim / 2, features [cos(t freqs) | sin(t freqs)] (a zero
 * column more when freq_dim is odd), then fc2(silu(fc1(features))). No
 * gradient to t. */
typedef struct sw_timestep_embedder sw_timestep_embedder;
/** Registers name_fc1 [h, freq_dim] and name_fc2 [h, h] (weights N(0, std),
 * biases 0; SW_LINEAR_REPLICATED) and makes its tensors.
 * max_period: 10000 in DiT. Register it in SW_UNIT_BEFORE (the default
 * unit): its output conditions every block, so its backward runs after the
 * blocks', as the embedding's does. */
sw_timestep_embedder *sw_timestep_embedder_create(sw_ctx *x, const char *name, int freq_dim, int64_t h,
                                                  float max_period, float std);
/** The same registration, no tensor made (nothing allocated: the memory
 * models of a layout, sw_dit_plan_rank); only destroy may follow. */
sw_timestep_embedder *sw_timestep_embedder_describe(sw_ctx *x, const char *name, int freq_dim, int64_t h,
                                                    float max_period, float std);
/** Frees its tensors (blocking). NULL: no-op. */
void sw_timestep_embedder_destroy(sw_timestep_embedder *te);
/** Bytes sw_timestep_embedder_create(x, ., freq_dim, h, ...) allocates in
 * context x, from the shapes alone (its parameters are the registry's,
 * sw_params_bytes): per micro-batch of the step the features [B, freq_dim],
 * fc1's output and its SiLU [B, h] each, and once the SiLU's gradient
 * [B, h], fp32. */
double sw_timestep_embedder_bytes(const sw_ctx *x, int freq_dim, int64_t h);
/** The two linears (their parameter indices). */
const sw_linear *sw_timestep_embedder_linear(const sw_timestep_embedder *te, int which);
/** out [B, h] from t [B, 1] fp32 (sw_ctx_load_seq_targets loads it); the
 * intermediate tensors stay until the backward, one set per micro-batch of
 * the step (the context's micro: several may be in flight, as on a
 * pipeline stage) */
void sw_timestep_embedder_forward(sw_ctx *x, sw_timestep_embedder *te, sw_tensor *t, sw_tensor *out);
/** The weight gradients from dout [B, h] (the same on every rank sharing the sequences) */
void sw_timestep_embedder_backward(sw_ctx *x, sw_timestep_embedder *te, sw_tensor *dout);

/* -------------------------------------------- patch embedding (host side) */

/** The latents of one sample and the patch size. */
typedef struct sw_patch_dims {
    ///@{
    int frames, height, width, channels; /**< latents [frames, height, width, channels] per sample */
    ///@}
    int patch;               /**< p: divides height and width */
} sw_patch_dims;
/** Tokens per sample: frames (height/p) (width/p); -1 (and the rule in msg) on bad dims. */
int64_t sw_patch_tokens(const sw_patch_dims *d, char *msg, size_t n);
/** Host side: latents [batch][frames][height][width][channels] to tokens
 * [tokens * batch, p p channels] in [s, b] order (row s * batch + b), the
 * token s = (f, i, j) = f S + i (width/p) + j holding patch (i, j) of frame f,
 * its columns (u, v, c) = (u p + v) channels + c for pixel (i p + u, j p + v).
 * Load them with sw_ctx_load_floats and apply a linear (patch embedding).
 * Exit 2 on bad dims. */
void sw_patchify(const sw_patch_dims *d, int batch, const float *latents, float *tokens);
/** The inverse (un-patchify: the model's per-token predictions back to
 * latents); as a permutation it is also patchify's backward. */
void sw_unpatchify(const sw_patch_dims *d, int batch, const float *tokens, float *latents);
/** Blocking, for programs: writes micro-batch k's sequences of a global
 * per-sequence conditioning [len * batch, f] fp32 in [s, b] order (row
 * p * batch + b) into cond [len * B, f] (every position, on every rank). */
void sw_ctx_load_cond(sw_ctx *x, int k, const float *in, int64_t len, int64_t f, sw_tensor *cond);

/* ------------------------------------------------------ cross-attention */

/** Cross-attention (opaque): queries from the tokens, keys and values from
 * a conditioning sequence of cond_len positions per sequence, non-causal,
 * multi-head. Inputs: q [T, aq d], the column-parallel query projection of
 * the tokens (aq = heads / tp); kv [cond_len B, 2 aq d] = k heads | v heads,
 * the column-parallel projection of the conditioning rows (sw_ctx_load_cond)
 * by sw_cross_kv_forward (below). Output [T, aq d]. No communication: with
 * Ulysses or Ring each rank's queries see the whole conditioning, and the
 * K/V gradients are each rank's part (sw_cross_kv_backward: the registry
 * sums the K/V weight gradient over the gradient group; the conditioning's
 * gradient is partial likewise). */
typedef struct sw_cross_attention sw_cross_attention;
/** What cross-attention keeps for its backward. */
typedef struct sw_cross_saved {
    sw_tensor *q;            /**< [T, aq d] */
    sw_tensor *kv;           /**< [cond_len B, 2 aq d] */
    sw_tensor *att;          /**< [T, aq d] the output */
    sw_tensor *lse;          /**< [T, aq] */
} sw_cross_saved;
/** heads (divisible by tp), head_dim, cond_len >= 1 (exit 2 otherwise) */
sw_cross_attention *sw_cross_attention_create(sw_ctx *x, int heads, int head_dim, int cond_len);
/** Frees the layer. It allocates no tensor at creation: what it keeps is
 * in the block's saved sets (sw_cross_attention_keep, counted by the memory
 * model of the blocks), its gradients are the caller's. */
void sw_cross_attention_destroy(sw_cross_attention *a);
/** Allocates the kept tensors into s. */
void sw_cross_attention_keep(sw_cross_attention *a, sw_saved *s, sw_cross_saved *k);
/** k->att from k->q and k->kv (the caller wrote them) */
void sw_cross_attention_forward(sw_ctx *x, sw_cross_attention *a, const sw_cross_saved *k);
/** datt [T, aq d] -> dq [T, aq d], dkv [cond_len B, 2 aq d] (written) */
void sw_cross_attention_backward(sw_ctx *x, sw_cross_attention *a, const sw_cross_saved *k, sw_tensor *datt,
                                 sw_tensor *dq, sw_tensor *dkv);

/** Cross-attention's K/V projection of the conditioning (sw_cross_kv_add;
 * Megatron's linear_kv of its cross-attention): kv [n, 2 h/t] = cond
 * [n, cond_dim] W^T (+ b), W = [Wk; Wv] [2h, cond_dim], h = heads x
 * head_dim, column-parallel over TP: each rank holds its heads' rows of Wk
 * and of Wv, so its kv is k heads | v heads of its aq = heads / tp heads,
 * as sw_cross_attention reads it. The rows are the conditioning's, any n
 * (cond_len B for sw_cross_attention, sw_ctx_load_cond), the same on every
 * rank. No communication, so no traffic function:
 *  - the weight gradient (and the bias's) is written (not added) once per
 *    micro-batch, as sw_linear_backward's: this rank's part from its
 *    dkv, i.e. from its own queries with Ulysses or Ring (TP with sp: the
 *    gathered queries, the whole of its heads'); the registry sums the
 *    micro-batches and the gradient group (which must hold the sequence
 *    ranks: grad_group SW_GROUP_SP_DP with ulysses x ring > 1);
 *  - dcond is this rank's part likewise: its heads' and its queries'. A
 *    conditioning made by the model's own layers (an encoder's output,
 *    replicated over TP) takes the sum over TP first (sw_allreduce over
 *    SW_GROUP_TP: Megatron's f backward); over the sequence ranks it stays
 *    partial, as the gradients of that encoder's weights may (the
 *    registry's sum over the gradient group completes them).
 * With dtype bf16 the GEMMs read the bf16 weight copy and bf16 operands,
 * as sw_linear_forward/backward do; with ZeRO-3 the weight is the unit's
 * gathered value: call these in its unit's forward / backward. */
typedef struct sw_cross_kv {
    sw_linear lin;           /**< SW_LINEAR_COLUMN [2h, cond_dim], k | v heads of each rank (name_w, name_b) */
    int64_t h;               /**< heads x head_dim: K's (V's) global features */
} sw_cross_kv;
/** Registers name_w [2h, cond_dim] (N(0, std)) and, with bias, name_b [2h]
 * (0): rows 0 .. h - 1 the keys', h .. 2h - 1 the values'; h divisible by
 * tp (exit 2 otherwise). */
sw_cross_kv sw_cross_kv_add(sw_ctx *x, const char *name, int64_t cond_dim, int64_t h, int bias, float std);
/** kv [n, 2 h/t] (W) = cond [n, cond_dim] W^T + b */
void sw_cross_kv_forward(sw_ctx *x, const sw_cross_kv *l, sw_tensor *cond, sw_tensor *kv);
/** From dkv [n, 2 h/t]: dW = dkv^T cond and db = the column sums of dkv
 * (this rank's parts, written; see above); dcond [n, cond_dim] (W) = dkv W,
 * this rank's part, or NULL when not needed (a conditioning of data). */
void sw_cross_kv_backward(sw_ctx *x, const sw_cross_kv *l, sw_tensor *cond, sw_tensor *dkv, sw_tensor *dcond);

/* ------------------------------------- spatial and temporal attention */

/** Which tokens attend to each other (frame-major tokens, position f S + s). */
typedef enum {
    SW_AXIS_SPATIAL,  /**< sequences = (frame, sample), length S: the patches of one frame */
    SW_AXIS_TEMPORAL  /**< sequences = (patch position, sample), length frames: one position across frames */
} sw_attn_axis;
/** Non-causal self-attention over a grouping of a video's tokens (opaque):
 * the context's seq is frames * patches; the rows are permuted between
 * the frame-major order and the grouping's (temporal: the rows already are
 * [frame, (patch, sample)], no permutation; spatial: rows permuted to
 * [patch, (frame, sample)] and back), and the attention tile runs with the
 * grouping's sequences as its batch. Input: the QKV projection [T, 3 aq d]
 * (q heads | k heads | v heads, aq = heads / tp); output [T, aq d].
 * Tensor parallelism (heads split) and Megatron's sp (rows gathered by the
 * QKV linear) apply. With the sequence split over N = ulysses x ring ranks
 * (contiguous blocks: no zigzag) each rank holds frames / N whole frames:
 * spatial attention stays local; temporal attention switches the split
 * from frames to patches by an all-to-all over SW_GROUP_SP (Open-Sora's
 * _AllToAll, scatter patches and gather frames; back after, and the
 * backward the same way), so it needs patches divisible by N. Refused
 * (exit 2): zigzag, frames not divisible by N, and for temporal patches not
 * divisible by N. */
typedef struct sw_grid_attention sw_grid_attention;
/** What it keeps for its backward. */
typedef struct sw_grid_saved {
    sw_tensor *qkv;          /**< [T, 3 aq d] the QKV projection's output (frame-major) */
    sw_tensor *qkv_g;        /**< the rows of the grouping's order (= qkv for temporal on one rank) */
    sw_tensor *att;          /**< [T, aq d] the output (frame-major) */
    sw_tensor *att_g;        /**< in the grouping's order (= att for temporal on one rank) */
    sw_tensor *lse;          /**< [T, aq] in the grouping's order */
} sw_grid_saved;
/** frames * patches must be the context's seq; heads divisible by tp; the
 * split rules above (exit 2 otherwise) */
sw_grid_attention *sw_grid_attention_create(sw_ctx *x, sw_attn_axis axis, int frames, int patches, int heads,
                                            int head_dim);
/** Frees the layer. Like cross-attention it allocates no tensor at
 * creation: the saved sets hold what it keeps, and its working tensors
 * (the all-to-all buffers, the gradients in the grouping's order) are the
 * context's scratch (sw_scratch_bytes). */
void sw_grid_attention_destroy(sw_grid_attention *a);
/** Allocates the kept tensors into s. */
void sw_grid_attention_keep(sw_grid_attention *a, sw_saved *s, sw_grid_saved *k);
/** k->att from k->qkv */
void sw_grid_attention_forward(sw_ctx *x, sw_grid_attention *a, const sw_grid_saved *k);
/** Adds the temporal attention's all-to-alls over a split sequence (qkv and
 * the output forward, their gradients backward; none for spatial) to t. */
void sw_grid_attention_traffic(const sw_ctx *x, const sw_grid_attention *a, sw_traffic *t);
/** datt [T, aq d] -> dqkv [T, 3 aq d] (written) */
void sw_grid_attention_backward(sw_ctx *x, sw_grid_attention *a, const sw_grid_saved *k, sw_tensor *datt,
                                sw_tensor *dqkv);

#ifdef __cplusplus
}
#endif
#endif
