/* gpt_train --tokenizer: llm.c's token-to-bytes table (gpt2_tokenizer.bin,
 * written by tools/prepare-data or llm.c's train_gpt2.py), so that
 * samples of a BPE vocabulary print as text. Decoding only: a prompt stays
 * token ids (tokenizing needs GPT-2's BPE: starweave-prepare-data --encode). */
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

#define TOKENIZER_LLMC_MAGIC 20240328

#endif
