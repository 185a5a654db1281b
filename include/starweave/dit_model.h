/** @file
 * The DiT model (graphs/models/dit_model.c): Open-Sora's STDiT made of the
 * layers of dit.h and run by the step driver (pipeline.h) in every layout. */
#ifndef STARWEAVE_DIT_MODEL_H
#define STARWEAVE_DIT_MODEL_H

#include <stdint.h>
#include "starweave/blocks.h"
#include "starweave/checkpoint.h"
#include "starweave/dit.h"
#include "starweave/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The DiT model of examples/dit_train (graphs/models/dit_model.c, where its
 * equations are written out): a spatial-temporal video diffusion
 * transformer (Open-Sora's STDiT) from the layers of dit.h. Per sample the
 * latents [frames, height, width, channels] are patchified into
 * frames (height/patch) (width/patch) tokens of patch^2 channels; the patch
 * embedding plus fixed sin-cos positions; a timestep embedder; blocks of
 * four adaLN-Zero-modulated branches (spatial attention, temporal attention,
 * cross-attention to a conditioning sequence [cond_len, cond_dim], a GeLU
 * MLP), RMSNorm before each; a modulated final norm and linear; the MSE of
 * the prediction against the noise (DDPM's epsilon objective). Every layout
 * of the step driver applies (sw_pipeline: tp with sp, Ulysses, Ring, dp,
 * ZeRO, pipeline stages, recomputation, offload). */
/** The DiT's limits and constants */
enum {
    SW_DIT_MAX_LAYERS = 16, /**< blocks at most */
    SW_DIT_MAX_MICRO = 64,  /**< micro-batches per step at most */
    SW_DIT_FREQ = 256       /**< the timestep embedder's frequencies */
};
/** The DiT's shape, training and layout (sw_dit_config_default: dit_train's defaults) */
typedef struct sw_dit_config {
    int frames;          /**< latent frames per sample */
    int height;          /**< latent height */
    int width;           /**< latent width */
    int channels;        /**< latent channels */
    int patch;           /**< patch size, dividing height and width */
    int hidden;          /**< hidden size: even, divisible by heads */
    int heads;           /**< attention heads, divisible by tp */
    int layers;          /**< blocks (at most SW_DIT_MAX_LAYERS) */
    int cond_len;        /**< positions of the conditioning sequence */
    int cond_dim;        /**< features of the conditioning sequence */
    int batch;           /**< samples per step */
    int micro;           /**< micro-batches per step (at most SW_DIT_MAX_MICRO) */
    int tp;              /**< tensor-parallel degree */
    int sp;              /**< sequence parallelism (with tp) */
    int ulysses;         /**< DeepSpeed-Ulysses degree */
    int ring;            /**< Ring attention degree */
    int dp;              /**< data-parallel degree */
    int zero;            /**< ZeRO stage (0-3) */
    int pp_virtual;      /**< interleaved chunks per pipeline stage (the stages: the mesh's) */
    int recompute;       /**< sw_recompute */
    int recompute_every; /**< full recomputation: keep every K-th block's input */
    int offload;         /**< the saved sets to the offload node */
    sw_dtype dtype;      /**< SW_BF16: the linears' GEMMs on bf16 operands */
    float lr;            /**< AdamW's learning rate (weight decay 0.01, clip 1) */
    float init_std;      /**< the weights' N(0, init_std) */
    float adaln_std;     /**< > 0: the adaLN weights N(0, adaln_std), not adaLN-Zero's zeros (tests) */
    uint64_t seed;       /**< the init's and the noise's */
} sw_dit_config;
/** A DiT (opaque): sw_dit_create. */
typedef struct sw_dit sw_dit;

/** The defaults of examples/dit_train (a 2-block model of 4 frames of 8 x 8 x 4 latents, one rank). */
void sw_dit_config_default(sw_dit_config *c);
/** The rules a DiT layout must satisfy with pp pipeline stages (the mesh's): the shape's (patch divides
 * height and width, heads hidden, tp heads), the sequence split in whole frames (frames and patches per
 * frame divisible by ulysses x ring), micro x dp divides batch, the limits above, the layer context's
 * (sw_ctx_config_check on the DiT's context) and the pipeline's (blocks divisible by pp x chunks, a 1F1B
 * schedule that fits: sw_schedule_check). dit_train refuses flags by it, the planner judges layouts by
 * it. 0, or -1 with the rule and the values in msg. */
int sw_dit_config_check(const sw_dit_config *c, int pp, char *msg, size_t n);
/** The memory model of rank `rank` of the layout c over pp stages (tp ulysses ring dp pp ranks): the
 * bytes sw_dit_bytes would give after sw_dit_create on that rank (StarPU's allocator's count at creation),
 * from the model described on a virtual mesh (sw_mesh_virtual, sw_comm_virtual), nothing allocated; state
 * (or NULL): of it the parameter state (sw_params_bytes); buckets (or NULL): of that the gradient buckets
 * (sw_params_buckets_bytes); t (or NULL): that rank's traffic model per step (sw_pipeline_traffic's sum).
 * Local, no runtime needed; c must pass sw_dit_config_check (the layers refuse otherwise, exit 2). */
double sw_dit_plan_rank(const sw_dit_config *c, int pp, int rank, double *state, double *buckets, sw_traffic *t);
/** Registers and allocates this rank's parameters (comm NULL: one rank), makes the step driver and the
 * model's tensors, loads the position embedding. The layout's rules (frames and patches per frame
 * divisible by ulysses x ring, heads by tp, batch by dp x micro) are the caller's to check. Collective. */
sw_dit *sw_dit_create(const sw_dit_config *c, sw_comm *comm);
/** Frees the model, its tensors and its registry (not the comm). */
void sw_dit_destroy(sw_dit *m);
/** The conditioning of every micro-batch, global [cond_len batch, cond_dim] in [s, b] order (this rank's part taken). */
void sw_dit_load_cond(sw_dit *m, const float *cond);
/** Micro-batch k's global inputs (this rank's part taken): the patchified x_t and the target noise
 * [seq batch, patch^2 channels] in [s, b] order, the timesteps [batch] */
void sw_dit_load_micro_batch(sw_dit *m, int k, const float *tokens, const float *target, const float *t);
/** The forward diffusion of a step, as dit_train trains: per sample b a timestep t[b] in 0 .. 999 and noise
 * eps ~ N(0, 1) from (seed, step, b), x_t = sqrt(a_t) x0 + sqrt(1 - a_t) eps; x0, eps, xt [batch, vol]. */
void sw_dit_noise(uint64_t seed, int step, int batch, int64_t vol, const float *x0, float *eps, float *xt, float *t);
/** a_t of DDPM's linear schedule: prod_{s <= t} (1 - beta_s), beta_s = 1e-4 + (0.02 - 1e-4) s / 999 */
double sw_dit_alpha_bar(int t);
/** N(0, 1) from a counter (splitmix64, Box-Muller): the same on every rank */
float sw_dit_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t i);
/** Submits the step: every micro-batch's forward and backward, the update (sw_pipeline_step). */
void sw_dit_step(sw_dit *m, int step);
/** [1,1] the step's loss (sw_pipeline_loss) */
sw_tensor *sw_dit_loss(sw_dit *m);
/** The model's parameter registry (checkpoints, gradients, exports) */
sw_params *sw_dit_params(sw_dit *m);
/** The model's layer context (its layout: ranks, rows) */
sw_ctx *sw_dit_ctx(sw_dit *m);
/** The model's step driver (its traffic model: sw_pipeline_traffic) */
sw_pipeline *sw_dit_pipeline(sw_dit *m);
/** The fields a checkpoint of this model must match (at most 8): its shape */
int sw_dit_checkpoint_fields(const sw_dit *m, sw_ckpt_field *f);
/** The memory model: the bytes of the whole model at creation on this rank (parameter state, the
 * blocks, the model's own tensors, the layers'), which StarPU's allocator counts to the byte */
double sw_dit_bytes(sw_dit *m);
/** The blocks' bytes (residual stream, saved sets, gradient; sw_pipeline_blocks_bytes) */
double sw_dit_blocks_bytes(sw_dit *m);
/** Block l's saved activations: the memory model's and the registered tensors' bytes */
sw_block_memory sw_dit_saved_bytes(sw_dit *m, int l);

#ifdef __cplusplus
}
#endif
#endif
