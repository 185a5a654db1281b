/* What gpt.c and generate.c share: the decoder's spec, a block's
 * parameters and the model (private to the library). */
#ifndef STARWEAVE_GPT_INTERNAL_H
#define STARWEAVE_GPT_INTERNAL_H

#include "starweave/gpt.h"

/* the layers of the decoder (gpt.c's specs: GPT-2's and LLaMA's) */
typedef struct decoder_spec {
    int rms;                 /* RMSNorm (else LayerNorm) */
    int bias;                /* linears have biases */
    int swiglu;              /* SwiGLU MLP (else GeLU) */
    int rope;                /* rotary positions (else learned positions) */
    int tied;                /* LM head tied to the token embedding */
    const char *names[7];    /* per block: norm1 qkv proj norm2 fc fc2; final norm */
} decoder_spec;

/* the parameters of one block */
typedef struct gpt_layer {
    sw_norm ln1, ln2;
    sw_linear qkv, proj, fc, fc2;
} gpt_layer;

struct sw_gpt {
    sw_gpt_config c;
    const decoder_spec *spec;
    sw_ctx x;
    sw_params *params;
    sw_attention *attn;
    sw_embedding emb;
    gpt_layer *layer;
    sw_norm lnf;
    sw_blocks *blocks;                    /* this stage's (sw_pipeline_blocks) */
    int head_w;                           /* the LM head's weight: wte (tied) or its own */
    sw_pipeline *pipe;                    /* the step driver: this stage's blocks, the micro-batches */
    sw_lm_head *head;                     /* the last stage's */
    sw_tensor **tokens, **targets;        /* per micro-batch: [T,1] int32 */
    sw_tensor *lnf_out, *lnf_mean, *lnf_rstd; /* the last stage's */
};

/* y = res + fc2(act(fc(norm2(res)))) on x's rows (dropout keyed by step
 * and layer l); y NULL: stop after the activation. ln2g: the gathered norm
 * output (sp), else ln2. */
void sw_gpt_mlp_forward(sw_gpt *m, sw_ctx *x, int step, int l, sw_tensor *res, sw_tensor *ln2, sw_tensor *mean,
                        sw_tensor *rstd, sw_tensor *ln2g, sw_tensor *fc, sw_tensor *act, sw_tensor *y);

#endif
