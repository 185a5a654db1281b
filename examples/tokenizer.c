/* llm.c's tokenizer table (see tokenizer.h), read byte by byte, little-endian,
 * as llm.c's train_gpt2.py write_tokenizer writes it and llmc/tokenizer.h
 * reads it. */
#include "tokenizer.h"
#include "data.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_BYTES (256 * 4)

static int fail(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return -1;
}

static int32_t le32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

void token_table_free(token_table *t)
{
    free(t->bytes);
    free(t->start);
    memset(t, 0, sizeof *t);
}

int token_table_load(const char *path, token_table *t, char *msg, size_t msglen)
{
    memset(t, 0, sizeof *t);
    size_t len = 0;
    unsigned char *buf = data_slurp(path, &len);
    if (!buf) return fail(msg, msglen, "cannot open tokenizer file '%s': %s", path, strerror(errno));
    int rc = -1;
    if (len < 4 || le32(buf) != TOKENIZER_LLMC_MAGIC) {
        fail(msg, msglen,
             "tokenizer file '%s' is not llm.c's tokenizer table: it must begin with the int32 magic 20240328 "
             "(starweave-prepare-data and llm.c's train_gpt2.py write gpt2_tokenizer.bin)",
             path);
        goto out;
    }
    if (len < HEADER_BYTES) {
        fail(msg, msglen, "tokenizer file '%s' is truncated: %zu bytes, its header is 256 int32 (1024 bytes)", path,
             len);
        goto out;
    }
    int32_t version = le32(buf + 4), vocab = le32(buf + 8);
    if (version != 1 && version != 2) {
        fail(msg, msglen, "tokenizer file '%s' has version %d: versions 1 and 2 are read", path, version);
        goto out;
    }
    if (vocab < 1) {
        fail(msg, msglen, "tokenizer file '%s' holds %d tokens: at least 1", path, vocab);
        goto out;
    }
    t->vocab = vocab;
    t->eot = version == 2 ? le32(buf + 12) : 50256; /* version 1: GPT-2's, as llm.c assumes */
    t->start = malloc(sizeof(size_t) * ((size_t)vocab + 1));
    t->bytes = malloc(len - HEADER_BYTES + 1);
    if (!t->start || !t->bytes) { perror("malloc"); exit(1); }
    size_t at = HEADER_BYTES, n = 0;
    for (int32_t i = 0; i < vocab; i++) {
        if (at >= len) {
            fail(msg, msglen,
                 "tokenizer file '%s' is truncated: its header counts %d tokens, the file ends after %d (%zu bytes)",
                 path, vocab, i, len);
            goto out;
        }
        size_t k = buf[at++];
        if (k == 0) {
            fail(msg, msglen, "tokenizer file '%s': token %d has length 0 (every token has 1 to 255 bytes)", path, i);
            goto out;
        }
        if (k > len - at) {
            fail(msg, msglen,
                 "tokenizer file '%s' is truncated: token %d of %d has %zu bytes, the file ends %zu bytes after "
                 "its length",
                 path, i, vocab, k, len - at);
            goto out;
        }
        t->start[i] = n;
        memcpy(t->bytes + n, buf + at, k);
        n += k;
        at += k;
    }
    t->start[vocab] = n;
    if (at != len) {
        fail(msg, msglen, "tokenizer file '%s' has %zu bytes after its %d tokens: not a tokenizer table of %d tokens",
             path, len - at, vocab, vocab);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    if (rc) token_table_free(t);
    return rc;
}

void token_table_print(const token_table *t, int32_t id, FILE *f)
{
    if (id < 0 || id >= t->vocab) {
        fprintf(f, "<%d>", id);
        return;
    }
    for (size_t i = t->start[id]; i < t->start[id + 1]; i++) {
        unsigned char b = t->bytes[i];
        if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) fprintf(f, "\\x%02x", b);
        else fputc(b, f);
    }
}
