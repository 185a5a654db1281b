/** @file
 * Models: GPT-2, built from the public layers (layers.h), the parameter
 * registry (params.h) and the block policies (blocks.h). Builders never
 * wait and never touch raw pointers. */
#ifndef STARWEAVE_GPT_H
#define STARWEAVE_GPT_H

#include <stddef.h>
#include <stdint.h>
#include "starweave/blocks.h"
#include "starweave/checkpoint.h"
#include "starweave/comm.h"
#include "starweave/layers.h"
#include "starweave/params.h"
#include "starweave/pipeline.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The models (sw_gpt_config.model).
 *
 * GPT-2: learned positions, pre-LN blocks, 4h GeLU MLP, tied LM head,
 * vocabulary padded to a multiple of 128 * tp (rows >= vocab of wte stay
 * 0); optional grouped-query attention (kv_heads < heads).
 *
 * Tensor parallelism (Megatron-LM) over the mesh's TP group: QKV and fc are
 * column-parallel (heads and the 4h dimension split), proj and fc2
 * row-parallel (bias added once, after the reduction), embedding and LM
 * head vocab-parallel, cross-entropy from three [T,1] all-reduces. K/V
 * heads are split when kv_heads >= tp and replicated (tp / kv_heads copies)
 * otherwise. With sp, norms, dropout and residual adds run on the T/tp rows
 * of this rank (the f/g operators of mappings.h).
 *
 * LLaMA-style (SW_MODEL_LLAMA): the same pre-norm decoder with other
 * layers -- RMSNorm, rotary positions on q and k (no learned positions),
 * SwiGLU MLP of `ffn` features, no biases, untied LM head -- and every
 * strategy of sw_gpt_config. */
enum {
    SW_MODEL_GPT2 = 0, /**< GPT-2 */
    SW_MODEL_LLAMA = 1 /**< LLaMA-style */
};

/** A model's configuration (sw_gpt_config_default, sw_gpt_config_check). */
typedef struct sw_gpt_config {
    int model;              /**< SW_MODEL_GPT2 (default) or SW_MODEL_LLAMA */
    int ffn;                /**< MLP features; 0: 4 hidden (GPT-2), 8/3 hidden rounded up to 64 (LLaMA) */
    float rope_theta;       /**< LLaMA: rotary base (10000) */
    ///@{
    int layers, hidden, heads; /**< blocks, hidden size, attention heads */
    ///@}
    int kv_heads;           /**< K/V heads; 0: = heads */
    int vocab;              /**< real vocabulary */
    int ignore_index;       /**< targets equal to it count for nothing in the loss (PyTorch's -100; outside
                                 [0, vocab)); SW_CE_IGNORE_NONE (the default): none (sw_lm_head_set_ignore_index) */
    int vocab_padded;       /**< set by sw_gpt_config_check */
    int max_pos;            /**< rows of wpe; seq <= max_pos */
    ///@{
    int seq, batch;         /**< sequence length, global batch (sequences per step) */
    ///@}
    float dropout;          /**< embedding, attention-probability and residual dropout */
    float ln_eps;           /**< the norms' epsilon */
    uint64_t seed;          /**< parameter init and dropout masks */
    int tiles;              /**< row/column tiles per op (fixed, so results do not depend on workers) */
    ///@{
    float lr, beta1, beta2, adam_eps, weight_decay; /**< AdamW's hyperparameters */
    ///@}
    float clip_grad;        /**< > 0: gradients scaled to a global L2 norm of at most clip_grad (0: off) */
    int tp;                 /**< tensor-parallel degree (1: none) */
    int sp;                 /**< sequence parallelism (needs seq % tp == 0) */
    int tp_recompute_allgather; /**< sp: keep only the local norm outputs, gather them again in backward */
    int dp;                 /**< data-parallel degree: batch is the global batch, split over dp ranks */
    int grad_accum;         /**< micro-batches per step and rank (batch / (dp * grad_accum) sequences each) */
    float bucket_mb;        /**< gradient bucket size for the dp all-reduce (MiB; the first bucket is at most 1 MiB) */
    /** Pipeline parallelism (pipeline.h): pp stages of layers/pp blocks each,
     * the mesh's outermost dimension; the grad_accum micro-batches of a step
     * flow through them, each stage holding the saved activations of at most
     * pp_inflight of them (0: pp - stage, 1F1B's memory; grad_accum: GPipe's). */
    int pp;
    int pp_inflight;        /**< micro-batches in flight per stage (0: 1F1B) */
    /** chunks per stage (Megatron's interleaved virtual stages: stage s runs chunks s, s + pp, ... of
     * layers / (pp pp_virtual) blocks; 0 or 1: one); with pp_virtual > 1 the default quota is
     * (pp_virtual - 1) pp + pp - stage chunks' saved sets, pp_inflight Q gives Q pp_virtual */
    int pp_virtual;
    /** weight-gradient GEMMs at the lowest task priority (sw_ctx_config.dw_last): a priority, not a split */
    int dw_last;
    /** Zero Bubble's split, ZB-H1 (sw_ctx_config.zero_bubble): each backward through a stage's blocks is two
     * units of the pipeline's schedule, B (input gradients) and W (weight gradients), W placed where the
     * stage would wait; the blocks keep their linears' output gradients per micro slot until W (counted in
     * the memory model); tp, ulysses, ring and dp 1, recompute none or selective, no offload */
    int zero_bubble;
    /** ZeRO stage over the gradient group (dp, or ulysses x ring x dp), sharding the rows of
     * each parameter with at least as many rows as the group has ranks: 1 AdamW moments and
     * update (gradients reduce-scattered, parameters all-gathered after the update); 2 also
     * the gradients (each unit's reduce-scattered as its backward ends, only the shard kept);
     * 3 also the values (sharded at rest, each unit all-gathered into a pool before its
     * forward and its backward). 0: none; a group of 1 makes every stage plain training */
    int zero;
    int zero_prefetch;      /**< ZeRO-3: units gathered ahead of the one computing (the pool holds
                               zero_prefetch + 1 units; default 1) */
    ///@{
    /** Context parallelism over the mesh's Ulysses x Ring group (USP, Ulysses
     * inside): each of the ulysses*ring ranks holds seq/(ulysses*ring)
     * positions of every sequence of the micro-batch. Ulysses exchanges
     * Q, K, V by all-to-all (sequence gathered, heads scattered) around
     * attention; Ring attention passes K/V blocks around the ring group and
     * merges partial outputs by log-sum-exp. Gradients are summed over
     * ulysses x ring x dp (and ZeRO-1 shards over them). Degrees (1: none). */
    int ulysses, ring;      /* degrees (1: none) */
    ///@}
    int zigzag;             /**< with ring > 1: ring rank r holds sequence chunks r and 2 ring - 1 - r of 2 ring
                               (causal load balance; default 1) */
    /** Activation memory (Megatron's recomputation, Open-Sora's gc_step):
     * SW_RECOMPUTE_NONE keeps the attention probabilities [B hq, s, s] for
     * backward (the s^2 term; ring = 1 only); SELECTIVE (default) keeps
     * Q, K, V, the attention output and its log-sum-exp and recomputes the
     * scores, softmax and dropout in backward; FULL keeps only the input of
     * every recompute_every-th block and resubmits the forward of each group
     * of recompute_every blocks before its backward. Dropout masks come from
     * the counter-based RNG, so every mode computes the same values. An
     * sw_recompute. */
    int recompute;          /* sw_recompute */
    int recompute_every;    /**< FULL: blocks per checkpoint (default 1) */
    /** Activation offload (needs sw_init with sw_options.offload; recompute
     * none or selective): blocks compute into a working set of two; after a
     * block's forward, what it keeps (but its input, the residual stream) is
     * copied into tensors on the offload node, marked "won't use" (StarPU
     * writes them there and evicts their main-RAM copies first when main RAM
     * reaches sw_options.offload_budget_mb); in backward, last block first,
     * they are copied back before the block's backward, and the block
     * below's are prefetched while it runs. A budget below two blocks' saved
     * activations is refused. */
    int offload;
    /** Mixed precision (--dtype bf16): SW_BF16 runs every GEMM on bf16
     * operands with fp32 accumulation -- the weights' bf16 copies, cast
     * from the fp32 master weights at the first forward of each step, and
     * bf16 casts of the activations and gradients entering the GEMM, made
     * right before it -- while the master weights, gradients, optimizer
     * states, norms, softmax, attention and the saved activations stay fp32
     * (the memory model is that of fp32). SW_F32 (the default): fp32 GEMMs. */
    int dtype;
} sw_gpt_config;

/** Fills c with the defaults: a small GPT-2 (2 layers, hidden 128, 4 heads,
 * vocabulary 256, seq and max_pos 64, batch 8, 4 tiles), no dropout, ln_eps
 * 1e-5, seed 1234, AdamW lr 1e-3 (0.9, 0.999, 1e-8, no weight decay), no
 * parallelism (degrees 1, zigzag on), 25 MiB buckets, selective
 * recomputation, fp32; the rest 0. */
void sw_gpt_config_default(sw_gpt_config *c);
/** Checks every constraint; on violation writes "rule (values)" into msg and
 * returns -1. Fills vocab_padded. */
int sw_gpt_config_check(sw_gpt_config *c, char *msg, size_t msglen);

/** Model's name: "gpt2", "llama". */
const char *sw_model_name(int model);
/** The model of a name of sw_model_name; -1 for anything else. */
int sw_model_parse(const char *name);

/** Parameters per layer. Parameters in a fixed order (export, checkpoints, tests). GPT-2:
 * wte [Vp,h], wpe [max_pos,h], then per layer l:
 * ln1_w [h], ln1_b [h], qkv_w [(a+2k)d,h], qkv_b [(a+2k)d], proj_w [h,h], proj_b [h],
 * ln2_w [h], ln2_b [h], fc_w [4h,h], fc_b [4h], fc2_w [h,4h], fc2_b [h];
 * then lnf_w [h], lnf_b [h] (a heads, k kv heads, d = h/a). Linear weights
 * are [out, in]: y = x W^T + b. qkv output columns: [q (a*d) | k (k*d) |
 * v (k*d)], head j at columns j*d .. j*d+d-1 of each; query head j uses
 * K/V head j / (a/k). These are the global shapes (tp = 1).
 * LLaMA: wte [Vp,h], then per layer l: attn_norm_w [h], qkv_w, proj_w,
 * mlp_norm_w [h], gate_up_w [2 ffn, h] (gate rows, then up rows), down_w
 * [h, ffn]; then norm_w [h], lm_head [Vp,h]. */
enum {
    SW_GPT_LAYER_PARAMS = 12,  /**< GPT-2's parameters per layer */
    SW_LLAMA_LAYER_PARAMS = 6  /**< LLaMA's parameters per layer */
};
/** The number of parameters of the model of c (the fixed order of SW_GPT_LAYER_PARAMS). */
int sw_gpt_num_params(const sw_gpt_config *c);
/** Global shape of parameter `index` in that order, and its name (namelen bytes). */
void sw_gpt_param_shape(const sw_gpt_config *c, int index, int64_t *rows, int64_t *cols, char *name,
                        size_t namelen);
/** The shape of this TP rank's slice of parameter `index` (replicated
 * parameters: the global shape). */
void sw_gpt_local_shape(const sw_gpt_config *c, int tp_rank, int index, int64_t *rows, int64_t *cols);
/** This TP rank's slice of parameter `index`: extraction from the global
 * tensor (row-major, global shape). Replicated parameters are the global
 * tensor itself. */
void sw_gpt_slice(const sw_gpt_config *c, int tp_rank, int index, const float *global, float *local);

/** A model (opaque): sw_gpt_create. */
typedef struct sw_gpt sw_gpt;

/** Creates the model and its tensors. Parameters initialised as GPT-2
 * (normal(0, 0.02), residual projections 0.02/sqrt(2L), LN 1/0, biases 0)
 * from the seed, the same global values for every tp (each rank keeps its
 * slice); AdamW moments 0 -- written by tasks it submits (wait for them,
 * e.g. starpu_task_wait_for_all, to time a first step alone). comm: the
 * collectives context of a mesh whose TP degree is c->tp (NULL when tp is
 * 1). A configuration that breaks a rule stops every rank with exit 2. */
sw_gpt *sw_gpt_create(const sw_gpt_config *c, sw_comm *comm);
/** Frees the model and its tensors. NULL: no-op. */
void sw_gpt_destroy(sw_gpt *m);
/** The model's configuration (vocab_padded and kv_heads filled). */
const sw_gpt_config *sw_gpt_get_config(const sw_gpt *m);
/** the model's parameter registry (checkpoints, the services) */
sw_params *sw_gpt_params(sw_gpt *m);
/** The model's fields a checkpoint must match (model, layers, hidden, heads,
 * kv-heads, ffn, padded vocabulary, max-pos): fills out, returns 8. */
int sw_gpt_checkpoint_fields(const sw_gpt *m, sw_ckpt_field out[8]);
/** This rank's slice of parameter `index`. */
sw_tensor *sw_gpt_param(sw_gpt *m, int index);
/** The gradient of this rank's slice of parameter `index`. */
sw_tensor *sw_gpt_grad(sw_gpt *m, int index);
/** The gradient of parameter `index` summed over dp, as the update used it:
 * with ZeRO-1 only this rank's rows (from *first_row) are summed, after
 * sw_gpt_update; otherwise the whole gradient (*first_row = 0). */
sw_tensor *sw_gpt_reduced_grad(sw_gpt *m, int index, int64_t *first_row);
/** AdamW's first moment of parameter `index` (this rank's slice; with ZeRO its shard of it). */
sw_tensor *sw_gpt_adam_m(sw_gpt *m, int index);
/** AdamW's second moment of parameter `index` (this rank's slice; with ZeRO its shard of it). */
sw_tensor *sw_gpt_adam_v(sw_gpt *m, int index);
/** tokens: [seq*B] int32 in [s, b] order (row = pos*B + b) of the
 * current micro-batch, B = batch / (dp * grad_accum) sequences, the same on
 * every TP rank: batch columns sw_gpt_micro_batch_first() .. + B - 1 of the
 * global batch. */
sw_tensor *sw_gpt_tokens(sw_gpt *m);
/** targets, as sw_gpt_tokens: [seq*B] int32 in [s, b] order of the current
 * micro-batch. */
sw_tensor *sw_gpt_targets(sw_gpt *m);
/** [1,1] mean cross-entropy over the global batch once the step's last
 * micro-batch has gone forward; acquire it to read. */
sw_tensor *sw_gpt_loss(sw_gpt *m);

/** Data parallelism and gradient accumulation: a step is grad_accum
 * forward+backward pairs, one per micro-batch k = 0 .. grad_accum-1 (set it
 * before writing the micro-batch's tokens), then one update. Gradients are
 * summed over the micro-batches in flat buckets (reverse parameter order)
 * and, after the last one, each bucket is all-reduced over the DP group as
 * soon as its gradients are final, while backward goes on. */
void sw_gpt_set_micro_batch(sw_gpt *m, int k);
/** B: sequences per micro-batch on this rank (batch / (dp * grad_accum)). */
int sw_gpt_micro_batch_size(const sw_gpt *m);
/** first global batch column of micro-batch k on this rank */
int sw_gpt_micro_batch_first(const sw_gpt *m, int k);
/** Blocking, for programs: writes this rank's micro-batch k of the global
 * batch tok/tgt ([seq*batch] int32, [s, b] order) into sw_gpt_tokens and
 * sw_gpt_targets (micro-batch k's own: waits for their readers of the
 * previous step), and makes k the current micro-batch. A token or target
 * outside [0, vocab) anywhere in the batch (a target equal to the config's
 * ignore_index is accepted), or k outside [0, grad_accum), is refused (the
 * rule and the value; exit 2 on every rank). With an ignore index, load
 * every micro-batch of the step before micro-batch 0's sw_gpt_forward:
 * the loss's count of counted rows is taken from all of them then. */
void sw_gpt_load_micro_batch(sw_gpt *m, int k, const int32_t *tok, const int32_t *tgt);

/** Submits training step `step` (1-based; also keys the dropout masks) on
 * this rank's stage: every micro-batch's forward and backward (load them
 * first: sw_gpt_load_micro_batch for k = 0 .. grad_accum - 1), the gradient
 * reduction and the update (the step driver, pipeline.h). */
void sw_gpt_step(sw_gpt *m, int step);
/** The model's step driver. */
sw_pipeline *sw_gpt_pipeline(sw_gpt *m);
/** Without pipeline stages (pp 1), for programs that look between the
 * halves of a micro-batch: submit the forward (loss) of the current
 * micro-batch for training step `step`. */
void sw_gpt_forward(sw_gpt *m, int step);
/** Without pipeline stages: submit the backward (every gradient) of the
 * current micro-batch for training step `step`. */
void sw_gpt_backward(sw_gpt *m, int step);
/** Submit the AdamW update for training step `step`. */
void sw_gpt_update(sw_gpt *m, int step);
/** Blocking: loss of the last submitted forward. */
float sw_gpt_read_loss(sw_gpt *m);

/** Saved activations of block `layer` on this rank, in bytes: the memory
 * model's (sw_blocks_saved_model: the shapes a block declares it keeps;
 * docs/memory.md gives them as formulas), and the bytes of the
 * tensors registered as the block's (the library's bookkeeping, not a
 * measurement: tensors shared by several blocks, such as the working set
 * that full recomputation fills again in backward, are not counted; with
 * offload, the block's tensors on the offload node). tests/test_memory
 * measures the same bytes through StarPU's allocator. Dropout masks are
 * never saved (regenerated from the counter-based RNG); only
 * SW_RECOMPUTE_NONE has a term in seq^2 (the probabilities). */
sw_block_memory sw_gpt_saved_bytes(const sw_gpt *m, int layer);

/** What this rank is certain to hold, in bytes (docs/memory.md): */
typedef struct sw_gpt_memory {
    double state;  /**< parameters, gradients, AdamW moments, ZeRO shards, buckets, the pool (sw_params_bytes) */
    double pool;   /**< of it, the ZeRO-2/3 pool (sw_params_pool_bytes) */
    double buckets; /**< of it, the gradient buckets (sw_params_buckets_bytes) */
    double saved;  /**< what this stage's blocks keep for backward, for the micro-batches it holds at
                        once: the residual stream and the saved sets (with full recomputation the kept
                        inputs and one group's working sets; with offload the inputs and the two working
                        sets, the rest lives on the offload node) -- sw_blocks_bytes less its dx */
    double logits; /**< the LM head's logits (last stage) */
    double other;  /**< the other tensors the model allocates at creation: the residual stream's gradient,
                        the micro-batches' tokens and targets, the final norm's output, the head's gathered
                        input and per-row statistics, the loss */
    double need;   /**< state + saved + logits + other: sw_gpt_create refuses a model whose need exceeds
                        sw_memory_available_per_rank (the memory budget, where one is given) */
    double scratch; /**< not in need: the layers' shared working set allocated so far (sw_scratch_bytes;
                        0 before the first step) */
} sw_gpt_memory;
/** The memory model of this rank (sw_gpt_memory), as sw_gpt_create checked it. */
sw_gpt_memory sw_gpt_memory_model(const sw_gpt *m);
/** The same for a configuration, checked (exit 2 on every rank where it
 * does not fit, as sw_gpt_create) with nothing allocated. Collective. */
sw_gpt_memory sw_gpt_memory_plan(const sw_gpt_config *cfg, sw_comm *comm);

/** The planner's view (plan.h) of world rank `rank` of cfg's layout, which
 * this process does not run: the memory model sw_gpt_memory_plan gives that
 * rank (mem; without the refusal) and the traffic model sw_gpt_traffic gives
 * it (t), from the model described on a virtual mesh (sw_mesh_virtual,
 * sw_comm_virtual), nothing allocated. Local, after sw_init; either pointer
 * may be NULL. A configuration sw_gpt_config_check refuses: exit 2. */
void sw_gpt_plan_rank(const sw_gpt_config *cfg, int rank, sw_gpt_memory *mem, sw_traffic *t);
/** The traffic model of the step (layers.h, "traffic model"): what this
 * rank sends per training step on each group, forward and backward apart,
 * summed from the model's layers, block policy and registry; compare with
 * sw_comm_traffic(). */
void sw_gpt_traffic(sw_gpt *m, sw_traffic *t);
/** Attention FLOPs this rank submitted in its last forward: 4 d per visible
 * (query, key) pair of the submitted tiles, fully masked tiles skipped
 * (Ring attention's load balance). */
double sw_gpt_attention_flops(const sw_gpt *m);
/** Global position of local position i (0 .. seq/(ulysses*ring) - 1) of
 * this rank's rows (rows i*B .. i*B + B - 1). */
int64_t sw_gpt_position(const sw_gpt *m, int64_t i);

/** FLOPs of one training step (forward + backward, matmuls and attention). */
double sw_gpt_step_flops(const sw_gpt_config *c);

/* ---------------------------------------------------------- generation */

/** Generation with a KV cache (opaque): sw_gpt_generator_create. The
 * model's layers and current parameters on a context of the new positions
 * of this rank's sequences: tensor-parallel as in training (q and K/V
 * heads split, the vocab-parallel head), each dp rank its own sequences. */
typedef struct sw_gpt_generator sw_gpt_generator;
/** A generator of `batch` sequences (per dp rank) of at most max_len
 * positions, prompt included: one KV cache per layer. Refused (exit 2):
 * pp, ulysses or ring above 1, ZeRO-3, max_len beyond GPT-2's learned
 * positions. */
sw_gpt_generator *sw_gpt_generator_create(sw_gpt *m, int batch, int max_len);
/** Frees the generator. NULL: no-op. */
void sw_gpt_generator_destroy(sw_gpt_generator *g);
/** Submits L positions of every sequence after those fed so far (the
 * tokens written from the host first, after the previous feed's readers:
 * sample between feeds, as decoding does, and nothing waits): tok[i B
 * + b] is sequence b's token at position pos + i (L > 1: a prompt, in one
 * pass; 1: a decode step); each layer appends their keys and values to its
 * cache and attends to every cached position up to its own. Writes the
 * logits of the last position (sw_gpt_generator_logits). Tokens outside
 * the vocabulary, or more positions than max_len: exit 2. */
void sw_gpt_generator_feed(sw_gpt_generator *g, const int32_t *tok, int L);
/** Blocking: next[b], the token after sequence b's last position fed
 * (sw_lm_sample of the logits at the position fed so far: greedy at
 * temperature 0, else top_k/temperature; the same on every tensor-parallel
 * rank). */
void sw_gpt_generator_sample(sw_gpt_generator *g, float temperature, int top_k, uint64_t seed, int32_t *next);
/** [batch, vocab_padded / tp] this rank's vocabulary rows of the logits of the last position fed. */
sw_tensor *sw_gpt_generator_logits(sw_gpt_generator *g);
/** Positions fed so far. */
int sw_gpt_generator_position(const sw_gpt_generator *g);
/** Starts over at position 0 (the caches are overwritten as positions are fed again). */
void sw_gpt_generator_reset(sw_gpt_generator *g);

#ifdef __cplusplus
}
#endif
#endif
