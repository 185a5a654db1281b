/** @file
 * Weight files of other tools, in and out: Hugging Face safetensors
 * (GPT-2 and LLaMA under the `transformers` names) and llm.c's GPT-2
 * checkpoint (gpt2_124M.bin). A model trained elsewhere can be fine-tuned
 * here, and one trained here evaluated there.
 *
 * The format of a file is told by its first bytes, never by its name:
 * safetensors begins with an 8-byte little-endian header length followed
 * by '{' (a JSON header: each tensor's dtype, shape and data offsets); an
 * llm.c checkpoint begins with a 256-int32 header whose first int is
 * 20240326.
 *
 * Names and layouts (starweave's parameters: gpt.h; its linear weights
 * are [out, in], y = x W^T):
 * - GPT-2 safetensors: `wte.weight` [V, h], `wpe.weight` [max_pos, h],
 *   `h.N.ln_1.{weight,bias}`, `h.N.attn.c_attn.{weight,bias}`,
 *   `h.N.attn.c_proj.*`, `h.N.ln_2.*`, `h.N.mlp.c_fc.*`, `h.N.mlp.c_proj.*`,
 *   `ln_f.*`. GPT-2's Conv1D stores [in, out]: every block weight is
 *   transposed both ways. c_attn's columns are q | k | v, heads in order,
 *   as starweave's qkv rows. A `transformer.` prefix is accepted on load;
 *   the causal-mask buffers (`.attn.bias`, `.attn.masked_bias`) and a tied
 *   `lm_head.weight` are skipped. No grouped-query attention (HF GPT-2 has
 *   none).
 * - LLaMA safetensors: `model.embed_tokens.weight`,
 *   `model.layers.N.self_attn.{q,k,v,o}_proj.weight` (q, k and v stacked
 *   into starweave's qkv rows, GQA as k_proj's rows say),
 *   `model.layers.N.mlp.{gate,up,down}_proj.weight` (gate then up rows:
 *   starweave's gate_up), `model.layers.N.{input,post_attention}_layernorm.weight`,
 *   `model.norm.weight`, `lm_head.weight` (a file without it -- tied
 *   word embeddings -- gives the head the embedding; it is always
 *   written). Hugging Face's rotary layout
 *   (rotate_half: each head's columns i and i + d/2 rotated together) is
 *   starweave's, so q_proj and k_proj rows are taken as they are (Meta's
 *   original checkpoints pair columns 2i and 2i + 1: convert_llama_weights_to_hf
 *   permutes those, not these).
 * - llm.c: header ints magic 20240326, version 3 (fp32) or 5 (bf16:
 *   gpt2_124M_bf16.bin), maxT, V, L, NH, C, Vp; then wte [Vp, C], wpe
 *   [maxT, C], ln1w [L, C], ln1b, qkvw [L, 3C, C], qkvb [L, 3C], attprojw
 *   [L, C, C], attprojb, ln2w, ln2b, fcw [L, 4C, C], fcb [L, 4C], fcprojw
 *   [L, C, 4C], fcprojb [L, C], lnfw [C], lnfb [C], little endian fp32
 *   (version 3) or bf16 (version 5). llm.c's weights are [out, in] like
 *   starweave's: no transposition. GPT-2 only.
 *
 * Vocabulary: a file holds V real rows (safetensors) or Vp >= V rows
 * (llm.c: V padded to a multiple of 128). starweave pads V to a multiple of
 * 128 * tp itself: its first V rows come from the file, the padding rows
 * are 0 (llm.c's padding rows are skipped on load and written as 0).
 *
 * The model comes from the flags, never from the file: a file whose model
 * differs (layers, hidden, vocab, max-pos, ffn, heads or kv-heads where
 * the file tells them, the model kind) is refused naming the field, the
 * model's value and the file's. */
#ifndef STARWEAVE_WEIGHTS_H
#define STARWEAVE_WEIGHTS_H

#include <stddef.h>

/** The model whose weights these are (gpt.h): all this header needs of it
 * (C11 allows the same typedef twice). */
typedef struct sw_gpt sw_gpt;

#ifdef __cplusplus
extern "C" {
#endif

/** Weight file formats. */
typedef enum sw_weights_format {
    SW_WEIGHTS_SAFETENSORS = 0, /**< Hugging Face safetensors (GPT-2 or LLaMA names) */
    SW_WEIGHTS_LLMC = 1,        /**< llm.c's GPT-2 checkpoint (magic 20240326), fp32 (version 3) */
    SW_WEIGHTS_LLMC_BF16 = 2    /**< the same, bf16 (version 5: llm.c's gpt2_124M_bf16.bin) */
} sw_weights_format;

/** "safetensors", "llmc", "llmc-bf16". */
const char *sw_weights_format_name(int format);
/** The format of a name of sw_weights_format_name; -1 for anything else. */
int sw_weights_format_parse(const char *name);
/** The format of the file at path from its first bytes (an llm.c file of
 * version 5 is SW_WEIGHTS_LLMC_BF16, of any other version SW_WEIGHTS_LLMC);
 * -1 with the reason in msg (unreadable, too short, neither header). Reads
 * only. */
int sw_weights_detect(const char *path, char *msg, size_t msglen);

/** Loads the weights of the file at path into the model's parameters (its
 * AdamW moments stay as they are: 0 after sw_gpt_create). Collective over
 * MPI_COMM_WORLD: every rank reads the file (it must be visible to all)
 * and writes the part of each parameter it holds -- its tensor-parallel
 * slice, its ZeRO-3 rows, its pipeline stage's parameters -- so any
 * layout loads the same values. Blocking. Refused before anything is
 * written, with the reason printed once and exit 2 on every rank: an
 * unreadable file, a wrong magic, a truncated file, a malformed header, an
 * unknown dtype, a missing or unexpected tensor, a shape mismatch (the
 * tensor and both shapes), a model mismatch (see above). */
void sw_weights_load(sw_gpt *m, const char *path);

/** Writes the model's parameters to path in `format`: safetensors and
 * llmc as fp32 (F32, version 3), llmc-bf16 as bf16 (version 5), each fp32
 * parameter rounded to nearest, ties to even, NaN kept a NaN and values
 * past the largest bf16 rounded to infinity (codelets/bf16.h's
 * sw_bf16_from_f32, PyTorch's and llm.c's train_gpt2.py's rounding). Collective
 * over MPI_COMM_WORLD: each parameter is assembled on rank 0 from the parts
 * the ranks hold (a sum of every rank's part over MPI, each element
 * divided by the number of ranks holding it: exact for the replicas), and
 * rank 0 writes the file through a temporary name, fsync and rename.
 * Blocking. A model that the format cannot hold (llm.c: LLaMA,
 * grouped-query attention, ffn != 4 hidden; safetensors GPT-2: grouped-
 * query attention) is refused (exit 2 on every rank); a file that cannot
 * be written stops every rank with exit 1. */
void sw_weights_save(sw_gpt *m, const char *path, int format);

#ifdef __cplusplus
}
#endif
#endif
