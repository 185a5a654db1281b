/* Training data for gpt_train: a token stream loaded from a file, whatever
 * its format, as int32 tokens. The format is detected by the file's header
 * (or its index's), never guessed from the name:
 *   - llm.c token shard: 256 int32 header (magic 20240520, version 1, token
 *     count), then uint16 tokens;
 *   - Megatron-LM indexed dataset: PREFIX.idx (magic "MMIDIDX\0\0") beside
 *     PREFIX.bin; --data names PREFIX, PREFIX.bin or PREFIX.idx; the
 *     sequences are concatenated in index order;
 *   - a text file: raw bytes, each byte a token. A file without a known
 *     header that is named .bin or .idx, or holds a NUL byte (binary: token
 *     ids, a corrupt header), is refused, not read as bytes. */
#ifndef GPT_TRAIN_DATA_H
#define GPT_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef enum { DATA_RAW_BYTES, DATA_LLMC_SHARD, DATA_MEGATRON } data_format;

typedef struct data_tokens {
    int32_t *tok;       /* n tokens, each in [0, vocab) */
    size_t n;
    data_format format;
} data_tokens;

/* Loads the tokens of `path` into d (d->tok malloc'd; data_free releases
 * it). Every token is checked against vocab: 0 <= token < vocab (raw bytes
 * are checked only where vocab < 256). Returns 0, or -1 with a message
 * naming the file and the rule broken in msg (nothing to free then). */
int data_load(const char *path, int vocab, data_tokens *d, char *msg, size_t msglen);
void data_free(data_tokens *d);
/* The whole file (malloc'd, *n bytes); NULL with errno set when it cannot be opened or read. */
unsigned char *data_slurp(const char *path, size_t *n);
/* Writes the message (printf's format) into msg and returns -1: the loaders' and the tokenizer's
 * refusals. */
int data_fail(char *msg, size_t msglen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *data_format_name(data_format f);

/* The llm.c shard's and Megatron index's constants, for tests and tools. */
#define DATA_LLMC_MAGIC 20240520
#define DATA_LLMC_HEADER_INTS 256

#endif
