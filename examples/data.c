/* gpt_train's data: text as raw bytes, llm.c token shards and Megatron-LM indexed
 * datasets, loaded into one int32 token stream (see data.h). Every value
 * in the files is little-endian and decoded byte by byte. */
#include "data.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llm.c (karpathy/llm.c, dev/data/data_common.py write_datafile, and
 * llmc/dataloader.h): a header of 256 int32, header[0] = 20240520,
 * header[1] = 1 (version: uint16 tokens; version 2 is llm.c's uint32 Llama
 * 3 shards, not read here), header[2] = the number of tokens; then the
 * tokens as uint16, so that the file has 1024 + 2 * header[2] bytes. */
#define LLMC_HEADER_BYTES (DATA_LLMC_HEADER_INTS * 4)

/* Megatron-LM's indexed dataset, as megatron/core/datasets/indexed_dataset.py
 * writes it (_IndexWriter) and reads it (_IndexReader), all little-endian:
 *   .idx: the 9 bytes "MMIDIDX\x00\x00"; version uint64 = 1 ("<Q"); the dtype
 *         code uint8 ("<B": DType 1 uint8, 2 int8, 3 int16, 4 int32,
 *         5 int64, 6 float64, 7 float32, 8 uint16); the sequence count
 *         uint64; the document count uint64 (34 bytes so far); then
 *         sequence_lengths int32[sequence count] (tokens per sequence),
 *         sequence_pointers int64[sequence count] (byte offset of each
 *         sequence in the .bin), document_indices int64[document count]
 *         (sequence indices bounding the documents, starting at 0, so the
 *         document count is the number of documents + 1); a multimodal
 *         index appends sequence_modes int8[sequence count].
 *   .bin: the tokens of every sequence in the dtype, no header; sequence i
 *         is sequence_lengths[i] items at byte sequence_pointers[i].
 * The training stream here is the sequences concatenated in index order
 * (what Megatron's GPTDataset samples from, before its shuffling). Only
 * the integer dtypes hold token ids; the float ones are refused. */
static const unsigned char megatron_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
#define MEGATRON_HEADER_BYTES 34

static const struct {
    const char *name;
    int size;      /* bytes per item */
    int is_signed; /* 0 unsigned, 1 signed, -1 floating point */
} megatron_dtype[9] = {
    {NULL, 0, 0},     {"uint8", 1, 0},   {"int8", 1, 1},    {"int16", 2, 1},  {"int32", 4, 1},
    {"int64", 8, 1},  {"float64", 8, -1}, {"float32", 4, -1}, {"uint16", 2, 0},
};

const char *data_format_name(data_format f)
{
    switch (f) {
    case DATA_LLMC_SHARD: return "llm.c token shard";
    case DATA_MEGATRON: return "Megatron indexed dataset";
    default: return "raw bytes";
    }
}

void data_free(data_tokens *d)
{
    free(d->tok);
    d->tok = NULL;
    d->n = 0;
}

int data_fail(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* One item of `bytes` bytes, sign-extended where signed. */
static int64_t item(const unsigned char *p, int bytes, int is_signed)
{
    uint64_t v = le(p, bytes);
    if (is_signed && bytes < 8 && (v >> (8 * bytes - 1) & 1)) v |= ~(uint64_t)0 << (8 * bytes);
    return (int64_t)v;
}

unsigned char *data_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    errno = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 20;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) { perror("realloc"); exit(1); }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0; /* a directory: EISDIR */
    fclose(f);
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    *n = len;
    return buf;
}

/* The first bytes of a file (fewer if it is shorter); -1 if it cannot be opened. */
static long head(const char *path, unsigned char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return (long)got;
}

static int is_megatron_index(const char *path)
{
    unsigned char h[sizeof megatron_magic];
    return head(path, h, sizeof h) == (long)sizeof h && !memcmp(h, megatron_magic, sizeof h);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int32_t *alloc_tokens(size_t n)
{
    int32_t *t = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!t) { perror("malloc"); exit(1); }
    return t;
}

/* A token out of [0, vocab): the first one, with its value and position in the stream. */
static int bad_token(int64_t v, size_t pos, const char *what, int vocab, char *msg, size_t msglen)
{
    if (v < 0)
        return data_fail(msg, msglen, "token %lld at position %zu of the data %s must not be negative", (long long)v, pos,
                    what);
    return data_fail(msg, msglen, "token %lld at position %zu of the data %s must be below vocab (%d)", (long long)v, pos,
                what, vocab);
}

static int load_llmc(const char *path, const unsigned char *buf, size_t len, int vocab, data_tokens *d, char *msg,
                     size_t msglen)
{
    if (len < LLMC_HEADER_BYTES)
        return data_fail(msg, msglen,
                    "data file '%s' begins with llm.c's magic 20240520 but its header is truncated: %zu bytes, an "
                    "llm.c token shard's header is 256 int32 (1024 bytes)",
                    path, len);
    int32_t version = (int32_t)le(buf + 4, 4), count = (int32_t)le(buf + 8, 4);
    if (version != 1)
        return data_fail(msg, msglen,
                    "data file '%s' is an llm.c token shard (magic 20240520) of version %d: only version 1 (uint16 "
                    "tokens) is read",
                    path, version);
    size_t body = len - LLMC_HEADER_BYTES;
    if (count < 0 || body != 2 * (size_t)count)
        return data_fail(msg, msglen,
                    "data file '%s' is an llm.c token shard whose header counts %d tokens (1024 + 2 x %d bytes) but it "
                    "has %zu bytes: the file size must be 1024 + 2 x the header's token count",
                    path, count, count, len);
    char what[1100];
    snprintf(what, sizeof what, "'%s' (llm.c token shard)", path);
    d->tok = alloc_tokens((size_t)count);
    d->n = (size_t)count;
    for (size_t i = 0; i < d->n; i++) {
        int64_t v = (int64_t)le(buf + LLMC_HEADER_BYTES + 2 * i, 2);
        if (v >= vocab) {
            data_free(d);
            return bad_token(v, i, what, vocab, msg, msglen);
        }
        d->tok[i] = (int32_t)v;
    }
    d->format = DATA_LLMC_SHARD;
    return 0;
}

static int load_megatron(const char *idx_path, const char *bin_path, int vocab, data_tokens *d, char *msg,
                         size_t msglen)
{
    size_t ilen, blen;
    unsigned char *idx = data_slurp(idx_path, &ilen);
    if (!idx) return data_fail(msg, msglen, "cannot read the Megatron index '%s': %s", idx_path, strerror(errno));
    unsigned char *bin = NULL;
    int rc = -1;
    if (ilen < MEGATRON_HEADER_BYTES || memcmp(idx, megatron_magic, sizeof megatron_magic)) {
        data_fail(msg, msglen,
             "Megatron index '%s' is truncated or not an index: %zu bytes, its header is 34 (the magic "
             "\"MMIDIDX\\x00\\x00\", version, dtype code, sequence and document counts)",
             idx_path, ilen);
        goto out;
    }
    uint64_t version = le(idx + 9, 8);
    unsigned code = idx[17];
    uint64_t nseq = le(idx + 18, 8), ndoc = le(idx + 26, 8);
    if (version != 1) {
        data_fail(msg, msglen, "Megatron index '%s' has version %llu: only version 1 is read", idx_path,
             (unsigned long long)version);
        goto out;
    }
    if (code < 1 || code > 8) {
        data_fail(msg, msglen, "Megatron index '%s' has dtype code %u: Megatron's codes are 1 to 8", idx_path, code);
        goto out;
    }
    if (megatron_dtype[code].is_signed < 0) {
        data_fail(msg, msglen,
             "Megatron index '%s' has dtype code %u (%s): tokens must be integers (codes 1-5 and 8: uint8, int8, "
             "int16, int32, int64, uint16)",
             idx_path, code, megatron_dtype[code].name);
        goto out;
    }
    /* the arrays, with or without a multimodal index's sequence modes */
    const uint64_t limit = (uint64_t)1 << 48;
    uint64_t need = nseq < limit && ndoc < limit ? MEGATRON_HEADER_BYTES + 12 * nseq + 8 * ndoc : UINT64_MAX;
    if (need == UINT64_MAX || (ilen != need && ilen != need + nseq)) {
        data_fail(msg, msglen,
             "Megatron index '%s' counts %llu sequences and %llu documents, so it must have 34 + 12 x %llu + 8 x "
             "%llu bytes (+ %llu for sequence modes), but it has %zu",
             idx_path, (unsigned long long)nseq, (unsigned long long)ndoc, (unsigned long long)nseq,
             (unsigned long long)ndoc, (unsigned long long)nseq, ilen);
        goto out;
    }
    bin = data_slurp(bin_path, &blen);
    if (!bin) {
        data_fail(msg, msglen, "cannot open data file '%s' (the tokens of the Megatron index '%s'): %s", bin_path,
             idx_path, strerror(errno));
        goto out;
    }
    const unsigned char *sizes = idx + MEGATRON_HEADER_BYTES, *pointers = sizes + 4 * nseq;
    const int isz = megatron_dtype[code].size, sgn = megatron_dtype[code].is_signed;
    size_t total = 0;
    for (uint64_t s = 0; s < nseq; s++) {
        int64_t size = item(sizes + 4 * s, 4, 1), ptr = item(pointers + 8 * s, 8, 1);
        if (size < 0 || ptr < 0 || (uint64_t)ptr > blen || (uint64_t)size > (blen - (uint64_t)ptr) / (uint64_t)isz) {
            data_fail(msg, msglen,
                 "Megatron dataset '%s': sequence %llu (%lld tokens of %d bytes at byte %lld) must lie inside the "
                 "%zu bytes of '%s'",
                 idx_path, (unsigned long long)s, (long long)size, isz, (long long)ptr, blen, bin_path);
            goto out;
        }
        total += (size_t)size;
    }
    char what[2100];
    snprintf(what, sizeof what, "'%s' (Megatron indexed dataset, %s)", bin_path, megatron_dtype[code].name);
    d->tok = alloc_tokens(total);
    d->n = 0;
    for (uint64_t s = 0; s < nseq; s++) {
        int64_t size = item(sizes + 4 * s, 4, 1), ptr = item(pointers + 8 * s, 8, 1);
        for (int64_t i = 0; i < size; i++) {
            int64_t v = item(bin + ptr + i * isz, isz, sgn);
            if (v < 0 || v >= vocab) {
                bad_token(v, d->n, what, vocab, msg, msglen);
                data_free(d);
                goto out;
            }
            d->tok[d->n++] = (int32_t)v;
        }
    }
    d->format = DATA_MEGATRON;
    rc = 0;
out:
    free(idx);
    free(bin);
    return rc;
}

/* PREFIX -> PREFIX.idx / PREFIX.bin */
static void with_suffix(char *out, size_t n, const char *prefix, size_t prefix_len, const char *suffix)
{
    snprintf(out, n, "%.*s%s", (int)prefix_len, prefix, suffix);
}

int data_load(const char *path, int vocab, data_tokens *d, char *msg, size_t msglen)
{
    memset(d, 0, sizeof *d);
    size_t plen = strlen(path);
    if (plen > 1000) return data_fail(msg, msglen, "data path too long (%zu characters, at most 1000)", plen);
    char idx[1008], bin[1008];
    unsigned char h[sizeof megatron_magic];
    long got = head(path, h, sizeof h);
    if (got < 0) {
        int err = errno;
        /* --data PREFIX: a Megatron dataset's two files beside each other */
        with_suffix(idx, sizeof idx, path, plen, ".idx");
        with_suffix(bin, sizeof bin, path, plen, ".bin");
        if (is_megatron_index(idx)) return load_megatron(idx, bin, vocab, d, msg, msglen);
        if (head(idx, h, 1) >= 0)
            return data_fail(msg, msglen,
                        "cannot open data file '%s', and '%s' beside it is not a Megatron index (it must begin with "
                        "\"MMIDIDX\\x00\\x00\")",
                        path, idx);
        if (head(bin, h, 1) >= 0)
            return data_fail(msg, msglen,
                        "Megatron dataset '%s': '%s' has no index '%s' beside it (the .idx, beginning with "
                        "\"MMIDIDX\\x00\\x00\", describes the sequences of the .bin)",
                        path, bin, idx);
        return data_fail(msg, msglen, "cannot open data file '%s': %s", path, strerror(err));
    }
    /* --data PREFIX.idx: the index itself */
    if (got == (long)sizeof h && !memcmp(h, megatron_magic, sizeof h)) {
        size_t stem = ends_with(path, ".idx") ? plen - 4 : plen;
        with_suffix(bin, sizeof bin, path, stem, ".bin");
        return load_megatron(path, bin, vocab, d, msg, msglen);
    }
    /* --data PREFIX.bin with a Megatron index PREFIX.idx beside it */
    if (ends_with(path, ".bin")) {
        with_suffix(idx, sizeof idx, path, plen - 4, ".idx");
        if (is_megatron_index(idx)) return load_megatron(idx, path, vocab, d, msg, msglen);
    }
    size_t len;
    unsigned char *buf = data_slurp(path, &len);
    if (!buf) return data_fail(msg, msglen, "cannot read data file '%s': %s", path, strerror(errno));
    int rc = 0;
    if (len >= 4 && le(buf, 4) == DATA_LLMC_MAGIC) {
        rc = load_llmc(path, buf, len, vocab, d, msg, msglen);
    } else if (len == 0) {
        rc = data_fail(msg, msglen, "data file '%s' is empty", path);
    } else if (ends_with(path, ".bin") || ends_with(path, ".idx")) {
        /* a token file (llm.c's or Megatron's name) whose header is not
         * known: a corrupt header, not text to read byte by byte */
        rc = data_fail(msg, msglen,
                       "data file '%s' is named %s but has no known header (its first 4 bytes as int32: %lld; an "
                       "llm.c token shard begins with 20240520, a Megatron .bin needs its .idx beside it, an .idx "
                       "begins with \"MMIDIDX\\x00\\x00\"): raw bytes are read only from text files",
                       path, path + plen - 4, len >= 4 ? (long long)(int32_t)le(buf, 4) : -1LL);
    } else if (memchr(buf, 0, len) != NULL) {
        /* a NUL byte: a binary file (token ids, a corrupt header), not text */
        rc = data_fail(msg, msglen,
                       "data file '%s' has no known header and is not text (a NUL byte at offset %zu): raw bytes are "
                       "read only from text files (an llm.c token shard begins with 20240520, a Megatron index with "
                       "\"MMIDIDX\\x00\\x00\")",
                       path, (size_t)((const unsigned char *)memchr(buf, 0, len) - buf));
    } else {
        d->tok = alloc_tokens(len);
        d->n = len;
        d->format = DATA_RAW_BYTES;
        for (size_t i = 0; i < len; i++) {
            if (buf[i] >= vocab) {
                rc = data_fail(msg, msglen, "byte %u at offset %zu of the data must be below vocab (%d)", buf[i], i, vocab);
                data_free(d);
                break;
            }
            d->tok[i] = buf[i];
        }
    }
    free(buf);
    return rc;
}
