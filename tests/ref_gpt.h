/* Plain serial double-precision reference of the starweave GPT-2 model
 * (graphs/models/gpt.c, include/starweave/gpt.h), for the model tests.
 * No StarPU, no threads: straight loops, llm.c style forward/backward pairs.
 *
 * Model: tokens/targets [T = seq*batch] in [s, b] order (row = pos*batch + b).
 * x = drop(wte[tok] + wpe[pos]) (layer 0xFFFF, op 0, index row*h + col);
 * per layer l: a = LN1(x); qkv = a qkv_w^T + qkv_b, columns [q (heads*d) |
 * k (kv*d) | v (kv*d)] with kv = kv_heads (0: heads); causal attention per
 * (b, query head j) with K/V head j / (heads/kv), scale 1/sqrt(d), softmax,
 * dropout on the probabilities (layer l, op 1, index
 * ((b*heads + j)*seq + qpos)*seq + kpos); x += drop(o proj_w^T +
 * proj_b) (op 2); x += drop(gelu_tanh(LN2(x) fc_w^T + fc_b) fc2_w^T + fc2_b)
 * (op 3); logits = LNf(x) wte^T over [T, Vp]; loss = mean cross-entropy over
 * the real vocabulary columns. Masks: sw_dropout_keep(seed, step, layer, op,
 * idx, p), kept values scaled by 1/(1-p). AdamW with PyTorch semantics on
 * every parameter. Parameters in gpt.h order (ref_gpt_param_numel).
 * cfg->dtype SW_BF16 (--dtype bf16): the operands of the linears' and the LM
 * head's GEMMs (forward, dx and dW) rounded to bf16 as codelets/bf16.h's
 * sw_bf16_from_f32 rounds their fp32 values (ties to even); everything else,
 * attention's products included, and every sum stay in double. */
#ifndef STARWEAVE_REF_GPT_H
#define STARWEAVE_REF_GPT_H

#include <stdint.h>
#include "starweave/gpt.h"

/* Number of parameter tensors (2 + 12 * layers + 2) and their sizes, with
 * cfg->vocab_padded as the rows of wte. */
int ref_gpt_num_params(const sw_gpt_config *cfg);
int64_t ref_gpt_param_numel(const sw_gpt_config *cfg, int index);

/* Saved activations of one forward, consumed by the backward. */
typedef struct ref_gpt_acts ref_gpt_acts;
ref_gpt_acts *ref_gpt_acts_new(const sw_gpt_config *cfg);
void ref_gpt_acts_free(ref_gpt_acts *a);

/* Forward of training step `step` (1-based, keys the dropout masks): returns
 * the mean loss and saves the activations in acts. */
double ref_gpt_forward(const sw_gpt_config *cfg, double *const *params, const int32_t *tokens,
                       const int32_t *targets, int step, ref_gpt_acts *acts);
/* Gradients of the loss of the last forward on acts (same params, tokens,
 * targets and step) into grads[i] (overwritten, sizes ref_gpt_param_numel). */
void ref_gpt_backward(const sw_gpt_config *cfg, double *const *params, const int32_t *tokens,
                      const int32_t *targets, int step, ref_gpt_acts *acts, double **grads);
/* bf16: the rounded GEMM operands that are activations or gradients (not
 * parameters) since the last reset, in *rounded; returns how many of them,
 * of magnitude >= 2^-8 of their tensor's largest, lie within 2^-20 of their
 * own magnitude (16 fp32 ulps) of a bf16 rounding boundary: there the
 * library's fp32 value, a few ulps from ours, may round to the other bf16
 * neighbour (2^-8 away) and move the results by far more than 1e-5, so a
 * test at fp32 tolerances judges the library only on data where this is 0. */
int64_t ref_gpt_bf16_near_ties(int64_t *rounded);
void ref_gpt_bf16_reset_stats(void);

/* One AdamW step (PyTorch torch.optim.AdamW semantics, cfg->weight_decay on
 * every parameter): p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps). */
void ref_gpt_adamw(const sw_gpt_config *cfg, double **params, double *const *grads, double **m,
                   double **v, int step);

#endif
