/* gpt_train --tokenizer: llm.c's token-to-bytes table (gpt2_tokenizer.bin,
 * written by tools/prepare-data or llm.c's train_gpt2.py), so that
 * samples of a BPE vocabulary print as text. Decoding only: tokenizing
 * needs GPT-2's BPE, which --prompt-text asks of starweave-prepare-data
 * --encode (prompt_encode). */
#ifndef GPT_TRAIN_TOKENIZER_H
#define GPT_TRAIN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct token_table {
    int vocab;              /* tokens in the table */
    int eot;                /* the end-of-text token's id */
    unsigned char *bytes;   /* every token's bytes, one after another */
    size_t *start;          /* token i: bytes[start[i] .. start[i + 1]) */
} token_table;

/* Loads `path` into t (token_table_free releases it). The file: 256 int32
 * (magic 20240328, version 1 or 2, vocabulary size, version 2: the
 * end-of-text id; version 1's is 50256), then per token a length byte (1 to
 * 255) and that many bytes, up to the end of the file. Returns 0, or -1
 * with a message naming the file and the rule broken in msg. */
int token_table_load(const char *path, token_table *t, char *msg, size_t msglen);
void token_table_free(token_table *t);
/* Writes token id's bytes to f: text as it is, control bytes other than
 * newline and tab as \xNN; an id outside the table as <id>. */
void token_table_print(const token_table *t, int32_t id, FILE *f);

/* --prompt-text's encoder, a program run as ENCODER --encode TEXT that
 * prints TEXT's token ids separated by spaces: $SW_PREPARE_DATA if set;
 * else, gpt_train running from its build tree, the source tree's
 * tools/prepare-data; else starweave-prepare-data (the installed name)
 * beside gpt_train; else that name from PATH. *how says which (for
 * messages); buf holds the path where one is built. */
const char *prompt_encoder_find(char *buf, size_t buflen, const char **how);
/* Runs `encoder` --encode `text` (posix_spawnp, no shell: the text is one
 * argument), its stdin /dev/null, and reads the ids it prints into *ids
 * (malloc'd, *n of them). Returns 0, or -1 with the rule broken in msg: the
 * encoder cannot be run, exits non-zero (its first line of stderr quoted),
 * is killed or takes over 120 s, prints something other than ids, no id,
 * or an id outside [0, vocab). */
int prompt_encode(const char *encoder, const char *how, const char *text, int vocab, int32_t **ids, int *n,
                  char *msg, size_t msglen);

#define TOKENIZER_LLMC_MAGIC 20240328

#endif
