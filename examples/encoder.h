/* The BERT-style trunk of the two encoder examples (encoder_mlm,
 * encoder_regress), from the public headers: learned positions, pre-LN
 * blocks y = h + mlp(ln2(h)), h = x + attention(ln1(x)) (GeLU, 4h),
 * bidirectional attention (dropout 0.1), a final LayerNorm; the head is the
 * program's. A program's model begins with the trunk (struct encoder as its
 * first member), so that the block ops, handed the model, read the trunk:
 *
 *   encoder_begin(&m->e, &f, lr, pad, &argc, &argv);  the runtime, mesh, context, registry, embedding
 *   ... parameters of its own before the blocks (token types) ...
 *   encoder_blocks(&m->e);                            the blocks, the final norm (then the head's unit)
 *   ... the head's parameters ...
 *   encoder_finish(&m->e, &model_ops, m);             allocation, the step driver
 */
#ifndef SW_EXAMPLES_ENCODER_H
#define SW_EXAMPLES_ENCODER_H

#include <starweave.h>
#include "cli.h"

enum { ENC_LAYERS = 2, ENC_HIDDEN = 64, ENC_HEADS = 4, ENC_VOCAB = 256, ENC_SEQ = 32, ENC_BATCH = 8 };

typedef struct { sw_norm ln1, ln2; sw_linear qkv, proj, fc, fc2; } enc_block;
typedef struct encoder {
    sw_ctx x;
    sw_params *p;
    sw_attention *attn;
    sw_embedding emb;
    enc_block blk[ENC_LAYERS];
    sw_norm final_norm;
    sw_pipeline *pipe;
    sw_tensor *nf, *nf_mean, *nf_rstd; /* the final norm's output, mean, rstd */
    sw_mesh *mesh;
    sw_comm *world, *comm; /* comm NULL: one rank */
    int vocab_padded;
} encoder;

/* the flags both programs take, and their table's lines */
typedef struct encoder_flags { int steps, tp, sp, dp, ulysses, ring, micro; } encoder_flags;
#define ENCODER_FLAGS(f) \
    CLI_INT("--steps", &(f)->steps, "20", 1, CLI_INT_MAX, "N", "training steps"), \
    CLI_INT("--tp", &(f)->tp, "1", 1, CLI_INT_MAX, "T", "tensor-parallel degree"), \
    CLI_BOOL("--sp", &(f)->sp, "sequence parallelism (with --tp)"), \
    CLI_INT("--dp", &(f)->dp, "1", 1, CLI_INT_MAX, "D", "data-parallel degree"), \
    CLI_INT("--ulysses", &(f)->ulysses, "1", 1, CLI_INT_MAX, "U", "DeepSpeed-Ulysses degree"), \
    CLI_INT("--ring", &(f)->ring, "1", 1, CLI_INT_MAX, "R", "Ring attention degree"), \
    CLI_INT("--micro", &(f)->micro, "1", 1, CLI_INT_MAX, "K", "micro-batches per step; K x dp must divide the batch of 8")

/* The runtime (sw_init), the mesh, the context (seq 32, batch 8, dropout 0.1, seed 1234), the registry
 * (AdamW at lr, clip 1), attention (key_padding: --pad), the embedding with learned positions. */
void encoder_begin(encoder *e, const encoder_flags *f, float lr, int key_padding, int *argc, char ***argv);
/* The blocks (unit l each) and the final norm; leaves the registry on the unit after the blocks. */
void encoder_blocks(encoder *e);
/* Allocates the parameters, makes the step driver (model: the program's, beginning with e) and the
 * final norm's tensors. */
void encoder_finish(encoder *e, const sw_model_ops *ops, void *model);
/* Frees the trunk, the comm and the mesh, stops the runtime. */
void encoder_destroy(encoder *e);

#endif
