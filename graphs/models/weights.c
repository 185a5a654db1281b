/* Weight files of other tools (weights.h): Hugging Face safetensors (GPT-2
 * and LLaMA names) and llm.c's GPT-2 checkpoint, in and out.
 *
 * Both directions go through one table: each of starweave's parameters
 * (gpt.h order) is made of up to three file tensors ("parts"), each
 * filling a band of its rows, maybe transposed (GPT-2's Conv1D). Loading
 * reads a file's directory (name, dtype, shape, offset of every tensor),
 * checks the model and every shape against the table, then builds each
 * parameter's global tensor and writes this rank's part of it. Saving
 * assembles each global tensor on rank 0 and writes the parts back. */
#include "starweave/weights.h"
#include "starweave/gpt.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bf16.h"
#include "layers/layer_util.h"
#include "starweave/runtime.h"

#define LLMC_MAGIC 20240326
#define LLMC_TOKENS_MAGIC 20240520 /* llm.c's token shards: data, not weights */
enum {
    LLMC_HEADER_INTS = 256,
    LLMC_F32 = 3,            /* llm.c's checkpoint versions: fp32 */
    LLMC_BF16 = 5,           /* bf16 (train_gpt2.py's write_model) */
    LLMC_PAD = 128,          /* llm.c pads the vocabulary to a multiple of 128 */
    MAX_PARTS = 3,
    NAME_LEN = 160,
    ERR_LEN = PATH_MAX + 512,
};
#define SAFETENSORS_MAX_HEADER (100u << 20) /* the format's own limit on the JSON header */

/* ------------------------------------------------------------ dtypes */

enum { DT_UNKNOWN = -1, DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2 };
static const char *const dtype_names[] = {"F32", "BF16", "F16"};
static size_t dtype_size(int dt) { return dt == DT_F32 ? 4 : 2; }

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);          /* inf, nan */
    else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);     /* normal: bias 15 -> 127 */
    else if (!man) bits = sign;                                        /* zero */
    else {                                                             /* subnormal: normalise */
        int e = -1;
        do man <<= 1, e++; while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* n little-endian elements of dtype dt at src, widened to fp32 */
static void to_f32(int dt, const unsigned char *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *b = src + (size_t)i * dtype_size(dt);
        uint32_t bits;
        if (dt == DT_F32) bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        else if (dt == DT_BF16) bits = ((uint32_t)b[0] | (uint32_t)b[1] << 8) << 16;
        else {
            dst[i] = half_to_float((uint16_t)(b[0] | b[1] << 8));
            continue;
        }
        memcpy(&dst[i], &bits, 4);
    }
}

/* fp32 to little endian bytes of dtype dt: F32 as it is, BF16 rounded to
 * nearest, ties to even, NaN kept a NaN (codelets/bf16.h) */
static void from_f32(int dt, const float *src, unsigned char *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == DT_BF16) {
            const uint16_t b = sw_bf16_from_f32(src[i]);
            dst[2 * i] = (unsigned char)b, dst[2 * i + 1] = (unsigned char)(b >> 8);
            continue;
        }
        uint32_t bits;
        memcpy(&bits, &src[i], 4);
        for (int k = 0; k < 4; k++) dst[4 * i + k] = (unsigned char)(bits >> (8 * k));
    }
}

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | b[k];
    return v;
}
static int32_t le32(const unsigned char *b)
{
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

/* ------------------------------------------- the table of the formats */

/* llm.c's checkpoint, fp32 (version 3) or bf16 (version 5): the same names and layout */
static int is_llmc(int format) { return format == SW_WEIGHTS_LLMC || format == SW_WEIGHTS_LLMC_BF16; }
/* the dtype a format writes its tensors in */
static int written_dtype(int format) { return format == SW_WEIGHTS_LLMC_BF16 ? DT_BF16 : DT_F32; }

/* A file tensor filling rows [row0, row0 + its rows) of a parameter's
 * global [rows, cols]: file shape [rows_k, cols], or [cols, rows_k] when
 * transposed (Conv1D); a vector is 1-D [cols]. */
typedef struct part {
    char name[NAME_LEN];
    int ndim;
    int64_t shape[2];
    int64_t row0;
    int transpose;
} part;

static part vec(const char *name, int64_t n) { part p = {"", 1, {n, 0}, 0, 0}; snprintf(p.name, NAME_LEN, "%s", name); return p; }
static part mat(const char *name, int64_t r, int64_t c, int64_t row0, int transpose)
{
    part p = {"", 2, {r, c}, row0, transpose};
    snprintf(p.name, NAME_LEN, "%s", name);
    return p;
}

/* GPT-2's per-layer parameters (gpt.h order): the transformers suffix,
 * Conv1D (transposed), llm.c's tensor */
static const struct { const char *hf; int conv1d; const char *llmc; } gpt2_layer[SW_GPT_LAYER_PARAMS] = {
    {"ln_1.weight", 0, "ln1w"},        {"ln_1.bias", 0, "ln1b"},         {"attn.c_attn.weight", 1, "qkvw"},
    {"attn.c_attn.bias", 0, "qkvb"},   {"attn.c_proj.weight", 1, "attprojw"}, {"attn.c_proj.bias", 0, "attprojb"},
    {"ln_2.weight", 0, "ln2w"},        {"ln_2.bias", 0, "ln2b"},         {"mlp.c_fc.weight", 1, "fcw"},
    {"mlp.c_fc.bias", 0, "fcb"},       {"mlp.c_proj.weight", 1, "fcprojw"}, {"mlp.c_proj.bias", 0, "fcprojb"},
};

/* The parts of parameter i of model c in `format`; returns how many. The
 * parameter's global shape is [rows, cols] (sw_gpt_param_shape). */
static int parts_of(const sw_gpt_config *c, int format, int i, int64_t rows, int64_t cols, part out[MAX_PARTS])
{
    const int64_t V = c->vocab, h = c->hidden, d = c->hidden / c->heads;
    char name[NAME_LEN];
    const int L = c->layers;
    if (c->model == SW_MODEL_LLAMA) {
        if (i == 0) return out[0] = mat("model.embed_tokens.weight", V, h, 0, 0), 1;
        if (i == 1 + SW_LLAMA_LAYER_PARAMS * L) return out[0] = vec("model.norm.weight", h), 1;
        if (i == 2 + SW_LLAMA_LAYER_PARAMS * L) return out[0] = mat("lm_head.weight", V, h, 0, 0), 1;
        int l = (i - 1) / SW_LLAMA_LAYER_PARAMS, k = (i - 1) % SW_LLAMA_LAYER_PARAMS;
#define LNAME(s) (snprintf(name, sizeof name, "model.layers.%d.%s", l, s), name)
        switch (k) {
        case 0: return out[0] = vec(LNAME("input_layernorm.weight"), h), 1;
        case 1:
            out[0] = mat(LNAME("self_attn.q_proj.weight"), c->heads * d, h, 0, 0);
            out[1] = mat(LNAME("self_attn.k_proj.weight"), c->kv_heads * d, h, c->heads * d, 0);
            out[2] = mat(LNAME("self_attn.v_proj.weight"), c->kv_heads * d, h, (c->heads + c->kv_heads) * d, 0);
            return 3;
        case 2: return out[0] = mat(LNAME("self_attn.o_proj.weight"), h, h, 0, 0), 1;
        case 3: return out[0] = vec(LNAME("post_attention_layernorm.weight"), h), 1;
        case 4:
            out[0] = mat(LNAME("mlp.gate_proj.weight"), c->ffn, h, 0, 0);
            out[1] = mat(LNAME("mlp.up_proj.weight"), c->ffn, h, c->ffn, 0);
            return 2;
        default: return out[0] = mat(LNAME("mlp.down_proj.weight"), h, c->ffn, 0, 0), 1;
        }
#undef LNAME
    }
    const int llmc = is_llmc(format);
    if (i == 0) return out[0] = mat(llmc ? "wte" : "wte.weight", V, h, 0, 0), 1;
    if (i == 1) return out[0] = mat(llmc ? "wpe" : "wpe.weight", rows, h, 0, 0), 1;
    if (i >= 2 + SW_GPT_LAYER_PARAMS * L) {
        int last = i == 3 + SW_GPT_LAYER_PARAMS * L;
        return out[0] = vec(llmc ? (last ? "lnfb" : "lnfw") : (last ? "ln_f.bias" : "ln_f.weight"), h), 1;
    }
    int l = (i - 2) / SW_GPT_LAYER_PARAMS, k = (i - 2) % SW_GPT_LAYER_PARAMS;
    if (llmc) snprintf(name, sizeof name, "%s[%d]", gpt2_layer[k].llmc, l);
    else snprintf(name, sizeof name, "h.%d.%s", l, gpt2_layer[k].hf);
    if (rows == 1) return out[0] = vec(name, cols), 1;
    /* Conv1D stores [in, out] = starweave's [out, in] transposed; llm.c stores [out, in] */
    int t = !llmc && gpt2_layer[k].conv1d;
    return out[0] = t ? mat(name, cols, rows, 0, 1) : mat(name, rows, cols, 0, 0), 1;
}

static int64_t part_rows(const part *p) { return p->ndim == 1 ? 1 : p->transpose ? p->shape[1] : p->shape[0]; }
static int64_t part_numel(const part *p) { return p->ndim == 1 ? p->shape[0] : p->shape[0] * p->shape[1]; }

/* ------------------------------------------------ a file's directory */

typedef struct file_tensor {
    char name[NAME_LEN];
    char dtype_name[16];
    int dtype;               /* DT_*, or DT_UNKNOWN (refused only if the tensor is read) */
    int ndim;
    int64_t shape[8];
    uint64_t offset;         /* from the file's start */
    int used;
} file_tensor;

typedef struct weight_file {
    const char *path;
    int format;
    int fd;
    uint64_t size;
    int n;
    file_tensor *t;
    int32_t llmc[8];         /* llm.c: magic, version, maxT, V, L, NH, C, Vp */
} weight_file;

static void file_close(weight_file *f)
{
    if (f->fd >= 0) close(f->fd);
    free(f->t);
    f->fd = -1, f->t = NULL, f->n = 0;
}

static int read_at(int fd, void *dst, size_t n, uint64_t at)
{
    char *d = dst;
    while (n > 0) {
        ssize_t r = pread(fd, d, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        d += r, n -= (size_t)r, at += (uint64_t)r;
    }
    return 0;
}

static file_tensor *add_tensor(weight_file *f, const char *name, int dt, int ndim, const int64_t *shape, uint64_t offset)
{
    f->t = realloc(f->t, sizeof *f->t * (size_t)(f->n + 1));
    if (!f->t) sw_fail(__FILE__, __LINE__, "realloc(weights)", -ENOMEM);
    file_tensor *t = &f->t[f->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dt >= 0 ? dtype_names[dt] : "?");
    t->dtype = dt, t->ndim = ndim, t->offset = offset;
    for (int k = 0; k < ndim && k < 8; k++) t->shape[k] = shape[k];
    return t;
}

#define FAIL(...) return snprintf(err, ERR_LEN, __VA_ARGS__), -1

/* safetensors: u64 header length n, n bytes of JSON {name: {dtype, shape,
 * data_offsets: [begin, end)}, "__metadata__": {...}}, then the data, the
 * offsets counted from its start */
static int read_safetensors(weight_file *f, char *err)
{
    unsigned char b[8];
    if (f->size < 8 || read_at(f->fd, b, 8, 0) != 0) FAIL("%s: truncated: %llu bytes", f->path, (unsigned long long)f->size);
    uint64_t n = le64(b);
    if (n > SAFETENSORS_MAX_HEADER || n > f->size - 8)
        FAIL("%s: truncated safetensors file: the header is %llu bytes long, the file %llu bytes", f->path,
             (unsigned long long)n, (unsigned long long)f->size);
    char *js = malloc(n ? n : 1);
    if (!js) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
    if (read_at(f->fd, js, n, 8) != 0) {
        free(js);
        FAIL("%s: cannot read the safetensors header: %s", f->path, strerror(errno));
    }
    json_error_t je;
    json_t *root = json_loadb(js, n, JSON_REJECT_DUPLICATES, &je);
    free(js);
    if (!root || !json_is_object(root)) {
        if (root) json_decref(root);
        FAIL("%s: malformed safetensors header: %s (line %d, column %d)", f->path, root ? "not a JSON object" : je.text,
             je.line, je.column);
    }
    const uint64_t data0 = 8 + n;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
        if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) || json_array_size(off) != 2 ||
            json_array_size(sh) > 8 || strlen(key) >= NAME_LEN) {
            snprintf(err, ERR_LEN, "%s: malformed safetensors header: tensor '%s' lacks dtype, shape or data_offsets", f->path, key);
            rc = -1;
            break;
        }
        int dtype = DT_UNKNOWN;
        for (int k = 0; k < 3; k++)
            if (!strcmp(json_string_value(dt), dtype_names[k])) dtype = k;
        int64_t shape[8], numel = 1;
        int ndim = (int)json_array_size(sh), bad = 0;
        for (int k = 0; k < ndim; k++) {
            json_t *e = json_array_get(sh, (size_t)k);
            shape[k] = json_is_integer(e) ? json_integer_value(e) : -1;
            if (shape[k] < 0 || (shape[k] && numel > INT64_MAX / 8 / shape[k])) bad = 1;
            else numel *= shape[k];
        }
        json_t *b0 = json_array_get(off, 0), *b1 = json_array_get(off, 1);
        int64_t begin = json_is_integer(b0) ? json_integer_value(b0) : -1, end = json_is_integer(b1) ? json_integer_value(b1) : -1;
        if (bad || begin < 0 || end < begin) {
            snprintf(err, ERR_LEN, "%s: malformed safetensors header: tensor '%s' has a bad shape or data_offsets", f->path, key);
            rc = -1;
            break;
        }
        if (dtype != DT_UNKNOWN && (uint64_t)(end - begin) != (uint64_t)numel * dtype_size(dtype)) {
            snprintf(err, ERR_LEN, "%s: malformed safetensors header: tensor '%s' (%s, %lld elements) has data_offsets "
                     "[%lld, %lld): %lld bytes, not %lld", f->path, key, dtype_names[dtype], (long long)numel,
                     (long long)begin, (long long)end, (long long)(end - begin), (long long)numel * (long long)dtype_size(dtype));
            rc = -1;
            break;
        }
        if (data0 + (uint64_t)end > f->size) {
            snprintf(err, ERR_LEN, "%s: truncated: tensor '%s' ends at byte %llu, the file has %llu bytes", f->path, key,
                     (unsigned long long)(data0 + (uint64_t)end), (unsigned long long)f->size);
            rc = -1;
            break;
        }
        file_tensor *t = add_tensor(f, key, dtype, ndim, shape, data0 + (uint64_t)begin);
        snprintf(t->dtype_name, sizeof t->dtype_name, "%.15s", json_string_value(dt));
    }
    json_decref(root);
    return rc;
}

/* llm.c: 256 int32 (magic, version, maxT, V, L, NH, C, Vp), then the 16
 * tensors, each stacked over the layers; listed per layer ("qkvw[3]") */
static int read_llmc(weight_file *f, char *err)
{
    unsigned char b[4 * LLMC_HEADER_INTS];
    if (f->size < sizeof b || read_at(f->fd, b, sizeof b, 0) != 0)
        FAIL("%s: truncated: %llu bytes, shorter than llm.c's 1024-byte header", f->path, (unsigned long long)f->size);
    int32_t *hd = f->llmc;
    for (int k = 0; k < 8; k++) hd[k] = le32(b + 4 * k);
    if (hd[1] != LLMC_F32 && hd[1] != LLMC_BF16)
        FAIL("%s: llm.c checkpoint version %d: only 3 (fp32) and 5 (bf16) are read", f->path, hd[1]);
    const int64_t maxT = hd[2], V = hd[3], L = hd[4], NH = hd[5], C = hd[6], Vp = hd[7];
    if (maxT <= 0 || V <= 0 || L <= 0 || NH <= 0 || C <= 0 || Vp < V || L > 100000 || C > (1 << 20) || Vp > (1 << 28) ||
        maxT > (1 << 24))
        FAIL("%s: corrupt llm.c header: maxT %lld, V %lld, L %lld, NH %lld, C %lld, Vp %lld (positive, Vp >= V)", f->path,
             (long long)maxT, (long long)V, (long long)L, (long long)NH, (long long)C, (long long)Vp);
    const int dt = hd[1] == LLMC_F32 ? DT_F32 : DT_BF16;
    const size_t es = dtype_size(dt);
    uint64_t at = sizeof b;
    int64_t s2[2];
    s2[0] = V, s2[1] = C;
    add_tensor(f, "wte", dt, 2, s2, at); /* the first V of its Vp rows */
    at += (uint64_t)(Vp * C) * es;
    s2[0] = maxT;
    add_tensor(f, "wpe", dt, 2, s2, at);
    at += (uint64_t)(maxT * C) * es;
    /* per layer: [rows, cols] of each stacked tensor (rows 1: a vector of cols) */
    const int64_t lr[SW_GPT_LAYER_PARAMS] = {1, 1, 3 * C, 1, C, 1, 1, 1, 4 * C, 1, C, 1};
    const int64_t lc[SW_GPT_LAYER_PARAMS] = {C, C, C, 3 * C, C, C, C, C, C, 4 * C, 4 * C, C};
    for (int k = 0; k < SW_GPT_LAYER_PARAMS; k++) {
        for (int l = 0; l < L; l++) {
            char name[NAME_LEN];
            snprintf(name, sizeof name, "%s[%d]", gpt2_layer[k].llmc, l);
            s2[0] = lr[k] == 1 ? lc[k] : lr[k], s2[1] = lc[k];
            add_tensor(f, name, dt, lr[k] == 1 ? 1 : 2, s2, at + (uint64_t)(l * lr[k] * lc[k]) * es);
        }
        at += (uint64_t)(L * lr[k] * lc[k]) * es;
    }
    s2[0] = C;
    add_tensor(f, "lnfw", dt, 1, s2, at);
    at += (uint64_t)C * es;
    add_tensor(f, "lnfb", dt, 1, s2, at);
    at += (uint64_t)C * es;
    if (f->size < at)
        FAIL("%s: truncated llm.c checkpoint: its header (L %lld, C %lld, maxT %lld, Vp %lld) needs %llu bytes, the "
             "file has %llu", f->path, (long long)L, (long long)C, (long long)maxT, (long long)Vp,
             (unsigned long long)at, (unsigned long long)f->size);
    if (f->size > at)
        FAIL("%s: %llu bytes after the parameters its llm.c header describes (L %lld, C %lld, maxT %lld, Vp %lld): "
             "not a GPT-2 checkpoint of that header", f->path, (unsigned long long)(f->size - at), (long long)L,
             (long long)C, (long long)maxT, (long long)Vp);
    return 0;
}

/* the format from the first bytes: an llm.c magic, or a safetensors header length then '{' */
static int detect(const char *path, int fd, uint64_t size, char *err)
{
    unsigned char b[9] = {0};
    if (size < 9 || read_at(fd, b, 9, 0) != 0)
        FAIL("%s: truncated: %llu bytes, too short for any weight file", path, (unsigned long long)size);
    int32_t magic = le32(b);
    if (magic == LLMC_MAGIC) return le32(b + 4) == LLMC_BF16 ? SW_WEIGHTS_LLMC_BF16 : SW_WEIGHTS_LLMC;
    if (b[8] == '{' && le64(b) >= 2) return SW_WEIGHTS_SAFETENSORS;
    if (magic == LLMC_TOKENS_MAGIC) FAIL("%s: an llm.c token shard (magic %d), not weights", path, LLMC_TOKENS_MAGIC);
    FAIL("%s: wrong magic: neither safetensors (an 8-byte header length, then '{') nor an llm.c GPT-2 checkpoint "
         "(int32 magic %d; this file's first int32 is %d)", path, LLMC_MAGIC, magic);
}

static int file_open(weight_file *f, const char *path, char *err)
{
    memset(f, 0, sizeof *f);
    f->path = path, f->fd = open(path, O_RDONLY);
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) != 0) FAIL("%s: cannot open: %s", path, strerror(errno));
    f->size = (uint64_t)st.st_size;
    if ((f->format = detect(path, f->fd, f->size, err)) < 0) return -1;
    return is_llmc(f->format) ? read_llmc(f, err) : read_safetensors(f, err);
}

const char *sw_weights_format_name(int format)
{
    return format == SW_WEIGHTS_SAFETENSORS ? "safetensors"
           : format == SW_WEIGHTS_LLMC      ? "llmc"
           : format == SW_WEIGHTS_LLMC_BF16 ? "llmc-bf16"
                                            : "?";
}

int sw_weights_format_parse(const char *name)
{
    if (!strcmp(name, "safetensors")) return SW_WEIGHTS_SAFETENSORS;
    if (!strcmp(name, "llmc")) return SW_WEIGHTS_LLMC;
    if (!strcmp(name, "llmc-bf16")) return SW_WEIGHTS_LLMC_BF16;
    return -1;
}

int sw_weights_detect(const char *path, char *msg, size_t msglen)
{
    char err[ERR_LEN] = "";
    int fd = open(path, O_RDONLY), format = -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) snprintf(err, sizeof err, "%s: cannot open: %s", path, strerror(errno));
    else format = detect(path, fd, (uint64_t)st.st_size, err);
    if (fd >= 0) close(fd);
    if (format < 0 && msg && msglen) snprintf(msg, msglen, "%s", err);
    return format;
}

/* ---------------------------------------------------- checks on load */

static file_tensor *find(weight_file *f, const char *name, int gpt2)
{
    for (int k = 0; k < f->n; k++)
        if (!strcmp(f->t[k].name, name)) return &f->t[k];
    if (gpt2 && f->format == SW_WEIGHTS_SAFETENSORS) /* GPT2LMHeadModel's names: transformer.h.0... */
        for (int k = 0; k < f->n; k++)
            if (!strncmp(f->t[k].name, "transformer.", 12) && !strcmp(f->t[k].name + 12, name)) return &f->t[k];
    return NULL;
}

/* find, and a LLaMA file without lm_head.weight (tie_word_embeddings: the
 * head is the embedding) gives its embedding for the head */
static file_tensor *resolve(weight_file *f, const char *name, int gpt2)
{
    file_tensor *t = find(f, name, gpt2);
    if (!t && !gpt2 && !strcmp(name, "lm_head.weight")) t = find(f, "model.embed_tokens.weight", 0);
    return t;
}

static void shape_text(int ndim, const int64_t *s, char *out, size_t n)
{
    int at = snprintf(out, n, "[");
    for (int k = 0; k < ndim && at < (int)n; k++) at += snprintf(out + at, n - (size_t)at, "%s%lld", k ? ", " : "", (long long)s[k]);
    if (at < (int)n) snprintf(out + at, n - (size_t)at, "]");
}

/* 1 + the largest N of tensors named PREFIX N . ..., 0 if none */
static int count_layers(const weight_file *f, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (int k = 0; k < f->n; k++) {
        const char *s = f->t[k].name;
        if (!strncmp(s, "transformer.", 12) && !strncmp(prefix, "h.", 2)) s += 12;
        if (strncmp(s, prefix, pl) || s[pl] < '0' || s[pl] > '9') continue;
        int l = atoi(s + pl);
        if (l + 1 > n) n = l + 1;
    }
    return n;
}

#define MISMATCH(field, flag, mine, theirs)                                                                       \
    do {                                                                                                           \
        if ((int64_t)(mine) != (int64_t)(theirs))                                                                  \
            FAIL("%s: model mismatch: %s is %lld here (%s) but %lld in the file", f->path, field, (long long)(mine), \
                 flag, (long long)(theirs));                                                                       \
    } while (0)

/* The model of the file against the configuration: the kind, then each
 * field the file tells (from the llm.c header, or from the shapes) */
static int check_model(weight_file *f, const sw_gpt_config *c, char *err)
{
    const int llama = c->model == SW_MODEL_LLAMA;
    if (is_llmc(f->format)) {
        const int32_t *hd = f->llmc;
        if (llama) FAIL("%s: an llm.c GPT-2 checkpoint, but the model is llama (--model): llm.c's format holds GPT-2 only", f->path);
        MISMATCH("layers", "--layers", c->layers, hd[4]);
        MISMATCH("hidden", "--hidden", c->hidden, hd[6]);
        MISMATCH("heads", "--heads", c->heads, hd[5]);
        MISMATCH("vocab", "--vocab", c->vocab, hd[3]);
        MISMATCH("max-pos", "--max-pos, default seq", c->max_pos, hd[2]);
        MISMATCH("ffn", "--ffn; llm.c's is 4 hidden", c->ffn, 4 * (int64_t)hd[6]);
        MISMATCH("kv-heads", "--kv-heads; llm.c has no grouped-query attention", c->kv_heads, hd[5]);
        return 0;
    }
    file_tensor *gpt = find(f, "wte.weight", 1), *lla = find(f, "model.embed_tokens.weight", 0);
    if (!gpt && !lla)
        FAIL("%s: holds neither GPT-2's wte.weight nor LLaMA's model.embed_tokens.weight: not a GPT-2 or LLaMA "
             "model under the transformers names", f->path);
    if (!llama && !gpt) FAIL("%s: a llama model (model.embed_tokens.weight), but the model is gpt2 (--model)", f->path);
    if (llama && !lla) FAIL("%s: a gpt2 model (wte.weight), but the model is llama (--model)", f->path);
    file_tensor *emb = llama ? lla : gpt;
    if (emb->ndim == 2) {
        MISMATCH("hidden", "--hidden", c->hidden, emb->shape[1]);
        MISMATCH("vocab", "--vocab", c->vocab, emb->shape[0]);
    }
    MISMATCH("layers", "--layers", c->layers, count_layers(f, llama ? "model.layers." : "h."));
    if (llama) {
        file_tensor *g = find(f, "model.layers.0.mlp.gate_proj.weight", 0), *k = find(f, "model.layers.0.self_attn.k_proj.weight", 0);
        if (g && g->ndim == 2) MISMATCH("ffn", "--ffn", c->ffn, g->shape[0]);
        const int64_t d = c->hidden / c->heads;
        if (k && k->ndim == 2 && k->shape[0] % d == 0) MISMATCH("kv-heads", "--kv-heads", c->kv_heads, k->shape[0] / d);
    } else {
        file_tensor *p = find(f, "wpe.weight", 1), *fc = find(f, "h.0.mlp.c_fc.weight", 1);
        if (p && p->ndim == 2) MISMATCH("max-pos", "--max-pos, default seq", c->max_pos, p->shape[0]);
        if (fc && fc->ndim == 2) MISMATCH("ffn", "--ffn", c->ffn, fc->shape[1]);
        if (c->kv_heads != c->heads)
            FAIL("%s: Hugging Face GPT-2 has no grouped-query attention: kv-heads (%d) must equal heads (%d)", f->path,
                 c->kv_heads, c->heads);
    }
    return 0;
}

/* tensors that a file may hold beside the parameters: GPT-2's causal-mask
 * buffers and tied head, LLaMA's rotary frequencies */
static int skippable(const char *name, int llama)
{
    size_t n = strlen(name);
#define ENDS(s) (n >= strlen(s) && !strcmp(name + n - strlen(s), s))
    if (llama) return ENDS(".rotary_emb.inv_freq");
    return ENDS(".attn.bias") || ENDS(".attn.masked_bias") || !strcmp(name, "lm_head.weight");
#undef ENDS
}

/* every part of every parameter: present, of its shape and a known dtype;
 * and nothing else in the file */
static int check_parts(weight_file *f, const sw_gpt_config *c, char *err)
{
    const int np = sw_gpt_num_params(c), gpt2 = c->model == SW_MODEL_GPT2;
    for (int i = 0; i < np; i++) {
        int64_t rows, cols;
        char pname[64];
        sw_gpt_param_shape(c, i, &rows, &cols, pname, sizeof pname);
        part parts[MAX_PARTS];
        int n = parts_of(c, f->format, i, rows, cols, parts);
        for (int k = 0; k < n; k++) {
            const part *p = &parts[k];
            file_tensor *t = resolve(f, p->name, gpt2);
            if (!t) FAIL("%s: missing tensor '%s' (%s of the model)", f->path, p->name, pname);
            char want[64], have[64];
            shape_text(p->ndim, p->shape, want, sizeof want);
            shape_text(t->ndim, t->shape, have, sizeof have);
            if (strcmp(want, have))
                FAIL("%s: shape mismatch: tensor '%s' is %s in the file, the model's %s needs %s", f->path, p->name,
                     have, pname, want);
            if (t->dtype == DT_UNKNOWN)
                FAIL("%s: tensor '%s' has dtype %s: only F32, BF16 and F16 are read", f->path, p->name, t->dtype_name);
            t->used = 1;
        }
    }
    for (int k = 0; k < f->n; k++)
        if (!f->t[k].used && !skippable(f->t[k].name, !gpt2))
            FAIL("%s: unexpected tensor '%s': not a parameter of a %s model of %d layers", f->path, f->t[k].name,
                 sw_model_name(c->model), c->layers);
    return 0;
}

/* Every rank learns whether any failed, and all exit with `code` if one
 * did; the lowest failing rank prints its reason (once). */
static void agree_or_exit(const char *err, int code)
{
    int first = sw_world_min(err[0] ? sw_rank() : INT_MAX);
    if (first == INT_MAX) return;
    if (first == sw_rank()) fprintf(stderr, "starweave: error: weights %s\n", err);
    fflush(stderr);
    sw_shutdown();
    exit(code);
}

/* ---------------------------------------------------------------- load */

/* parameter i's global [rows, cols] from its parts in the file (zero elsewhere: the padded vocabulary) */
static void read_global(weight_file *f, const sw_gpt_config *c, int i, int64_t rows, int64_t cols, float *g)
{
    part parts[MAX_PARTS];
    int n = parts_of(c, f->format, i, rows, cols, parts);
    memset(g, 0, sizeof(float) * (size_t)(rows * cols));
    for (int k = 0; k < n; k++) {
        const part *p = &parts[k];
        const file_tensor *t = resolve(f, p->name, c->model == SW_MODEL_GPT2);
        const int64_t numel = part_numel(p), r = part_rows(p);
        if (p->row0 + r > rows || (p->ndim == 2 && (p->transpose ? p->shape[0] : p->shape[1]) != cols))
            sw_failf(__FILE__, __LINE__, "weights: part %s does not fit parameter %d [%lld, %lld]", p->name, i,
                     (long long)rows, (long long)cols);
        unsigned char *raw = malloc((size_t)numel * dtype_size(t->dtype));
        float *v = malloc(sizeof(float) * (size_t)numel);
        if (!raw || !v) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
        if (read_at(f->fd, raw, (size_t)numel * dtype_size(t->dtype), t->offset) != 0)
            sw_failf(__FILE__, __LINE__, "weights %s: cannot read tensor '%s': %s", f->path, p->name, strerror(errno));
        to_f32(t->dtype, raw, v, numel);
        float *dst = g + p->row0 * cols;
        if (!p->transpose) memcpy(dst, v, sizeof(float) * (size_t)numel);
        else /* file [cols, r] -> [r, cols] */
            for (int64_t a = 0; a < cols; a++)
                for (int64_t b = 0; b < r; b++) dst[b * cols + a] = v[a * r + b];
        free(raw);
        free(v);
    }
}

void sw_weights_load(sw_gpt *m, const char *path)
{
    const sw_gpt_config *c = sw_gpt_get_config(m);
    sw_params *p = sw_gpt_params(m);
    char err[ERR_LEN] = "";
    weight_file f;
    if (file_open(&f, path, err) == 0 && check_model(&f, c, err) == 0) check_parts(&f, c, err);
    agree_or_exit(err, 2);
    for (int i = 0; i < sw_params_count(p); i++) {
        sw_tensor *t = sw_params_value(p, i);
        if (!t) continue; /* another pipeline stage's */
        const sw_param_desc *d = sw_params_desc(p, i);
        int64_t lrows, lcols;
        sw_shard_shape(d, &lrows, &lcols);
        const int64_t first = sw_params_value_first_row(p, i);
        if (t->dtype != SW_F32 || t->cols != lcols || first + t->rows > lrows)
            sw_failf(__FILE__, __LINE__, "weights: %s is not this rank's fp32 part of [%lld, %lld]", d->name,
                     (long long)lrows, (long long)lcols);
        float *g = malloc(sizeof(float) * (size_t)(d->rows * d->cols)), *local = malloc(sizeof(float) * (size_t)(lrows * lcols));
        if (!g || !local) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
        read_global(&f, c, i, d->rows, d->cols, g);
        sw_shard_extract(d, g, local);
        sw_tensor_write_host(t, local + first * lcols); /* this rank's ZeRO-3 rows, or all */
        free(g);
        free(local);
    }
    file_close(&f);
}

/* ---------------------------------------------------------------- save */

/* This rank's part of parameter i (local rows [first, first + n) of its TP
 * shard) added into the global g, and 1 into cnt where it lands. */
static void place(const sw_param_desc *d, const float *local, int64_t first, int64_t n, double *g, double *cnt)
{
    const sw_shard *s = &d->shard;
    int64_t lrows, lcols;
    sw_shard_shape(d, &lrows, &lcols);
    for (int64_t r = first; r < first + n; r++) {
        const float *src = local + (r - first) * lcols;
        if (s->n == 0 || s->dim == 1) { /* the global row r; columns through the blocks */
            int64_t at = 0;
            for (int b = 0; b < (s->n ? s->n : 1); b++) {
                int64_t c0 = s->n ? s->start[b] : 0, nc = s->n ? s->count[b] : d->cols;
                for (int64_t j = 0; j < nc; j++) g[r * d->cols + c0 + j] += src[at + j], cnt[r * d->cols + c0 + j] += 1;
                at += nc;
            }
            continue;
        }
        int64_t at = 0, gr = -1; /* dim 0: the block holding local row r */
        for (int b = 0; b < s->n && gr < 0; at += s->count[b], b++)
            if (r < at + s->count[b]) gr = s->start[b] + r - at;
        for (int64_t j = 0; j < d->cols; j++) g[gr * d->cols + j] += src[j], cnt[gr * d->cols + j] += 1;
    }
}

/* Parameter i's global values on rank 0 (into out, [rows, cols]): every
 * rank's part summed over MPI, each element divided by the ranks holding
 * it (sums of up to 2^29 equal fp32 values are exact in double, and so is
 * the division; the sums start from -0.0 so that a -0 stays one, and a NaN
 * stays the NaN it was). Collective. */
static void assemble(sw_params *p, int i, float *out)
{
    const sw_param_desc *d = sw_params_desc(p, i);
    const int64_t numel = d->rows * d->cols;
    double *g = malloc(sizeof *g * (size_t)numel), *cnt = calloc((size_t)numel, sizeof *cnt);
    if (!g || !cnt) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
    for (int64_t k = 0; k < numel; k++) g[k] = -0.0; /* the additive identity: -0 + -0 stays -0, unlike 0 + -0 */
    sw_tensor *t = sw_params_value(p, i);
    if (t) {
        float *local = malloc(sw_tensor_bytes(t));
        if (!local) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
        sw_tensor_read_host(t, local);
        place(d, local, sw_params_value_first_row(p, i), t->rows, g, cnt);
        free(local);
    }
    if (sw_world_size() > 1) {
        const int64_t chunk = 1 << 24;
        for (int64_t at = 0; at < numel; at += chunk) {
            int n = (int)(numel - at < chunk ? numel - at : chunk), root = sw_rank() == 0;
            SW_CHECK(MPI_Reduce(root ? MPI_IN_PLACE : g + at, g + at, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
            SW_CHECK(MPI_Reduce(root ? MPI_IN_PLACE : cnt + at, cnt + at, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
        }
    }
    if (sw_rank() == 0)
        for (int64_t k = 0; k < numel; k++) {
            if (cnt[k] < 1)
                sw_failf(__FILE__, __LINE__, "weights: element %lld of %s is held by no rank", (long long)k, d->name);
            out[k] = (float)(g[k] / cnt[k]);
        }
    free(g);
    free(cnt);
}

static int write_at(int fd, const void *src, size_t n, uint64_t at)
{
    const char *s = src;
    while (n > 0) {
        ssize_t w = pwrite(fd, s, n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w, n -= (size_t)w, at += (uint64_t)w;
    }
    return 0;
}

/* The file's layout for model c: its header bytes, and each part's offset
 * (parameter order, parts in order); returns the header's size. */
static size_t layout(const sw_gpt_config *c, int format, unsigned char **header, uint64_t *offsets)
{
    const int np = sw_gpt_num_params(c);
    const uint64_t es = dtype_size(written_dtype(format));
    if (is_llmc(format)) {
        const int64_t C = c->hidden, L = c->layers, Vp = (c->vocab + LLMC_PAD - 1) / LLMC_PAD * LLMC_PAD;
        unsigned char *h = calloc(4 * LLMC_HEADER_INTS, 1);
        if (!h) sw_fail(__FILE__, __LINE__, "calloc(weights)", -ENOMEM);
        const int32_t version = format == SW_WEIGHTS_LLMC_BF16 ? LLMC_BF16 : LLMC_F32;
        const int32_t v[8] = {LLMC_MAGIC, version, c->max_pos, c->vocab, c->layers, c->heads, c->hidden, (int32_t)Vp};
        for (int k = 0; k < 8; k++)
            for (int b = 0; b < 4; b++) h[4 * k + b] = (unsigned char)((uint32_t)v[k] >> (8 * b));
        /* the stacked tensors' starts, as read_llmc lays them out */
        const int64_t lsize[SW_GPT_LAYER_PARAMS] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
        uint64_t base[SW_GPT_LAYER_PARAMS], at = 4 * LLMC_HEADER_INTS;
        offsets[0] = at, at += es * (uint64_t)(Vp * C);
        offsets[1] = at, at += es * (uint64_t)(c->max_pos * C);
        for (int k = 0; k < SW_GPT_LAYER_PARAMS; k++) base[k] = at, at += es * (uint64_t)(L * lsize[k]);
        for (int l = 0; l < L; l++)
            for (int k = 0; k < SW_GPT_LAYER_PARAMS; k++)
                offsets[2 + SW_GPT_LAYER_PARAMS * l + k] = base[k] + es * (uint64_t)(l * lsize[k]);
        offsets[np - 2] = at, at += es * (uint64_t)C;
        offsets[np - 1] = at;
        *header = h;
        return 4 * LLMC_HEADER_INTS;
    }
    json_t *root = json_object(), *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t at = 0;
    int o = 0;
    for (int i = 0; i < np; i++) {
        int64_t rows, cols;
        char pname[64];
        sw_gpt_param_shape(c, i, &rows, &cols, pname, sizeof pname);
        part parts[MAX_PARTS];
        int n = parts_of(c, format, i, rows, cols, parts);
        for (int k = 0; k < n; k++, o++) {
            json_t *e = json_object(), *shape = json_array(), *off = json_array();
            for (int s = 0; s < parts[k].ndim; s++) json_array_append_new(shape, json_integer(parts[k].shape[s]));
            uint64_t bytes = 4 * (uint64_t)part_numel(&parts[k]);
            json_array_append_new(off, json_integer((json_int_t)at));
            json_array_append_new(off, json_integer((json_int_t)(at + bytes)));
            json_object_set_new(e, "dtype", json_string("F32"));
            json_object_set_new(e, "shape", shape);
            json_object_set_new(e, "data_offsets", off);
            json_object_set_new(root, parts[k].name, e);
            offsets[o] = at, at += bytes;
        }
    }
    char *js = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!js) sw_fail(__FILE__, __LINE__, "json_dumps(weights)", -ENOMEM);
    size_t n = strlen(js), padded = (n + 7) / 8 * 8; /* the data 8-byte aligned, the header padded with spaces */
    unsigned char *h = malloc(8 + padded);
    if (!h) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
    for (int b = 0; b < 8; b++) h[b] = (unsigned char)((uint64_t)padded >> (8 * b));
    memcpy(h + 8, js, n);
    memset(h + 8 + n, ' ', padded - n);
    free(js);
    for (int k = 0; k < o; k++) offsets[k] += 8 + padded;
    *header = h;
    return 8 + padded;
}

/* a model the format cannot hold: refused on every rank alike */
static void check_saveable(const sw_gpt_config *c, int format)
{
    if (format != SW_WEIGHTS_SAFETENSORS && !is_llmc(format))
        sw_usage_error("sw_weights_save: format %d is neither safetensors (%d), llmc (%d) nor llmc-bf16 (%d)", format,
                       SW_WEIGHTS_SAFETENSORS, SW_WEIGHTS_LLMC, SW_WEIGHTS_LLMC_BF16);
    if (is_llmc(format) && c->model != SW_MODEL_GPT2)
        sw_usage_error("weights: llm.c's checkpoint format holds GPT-2 only, not %s (--weights-format safetensors)",
                       sw_model_name(c->model));
    if (is_llmc(format) && c->ffn != 4 * c->hidden)
        sw_usage_error("weights: llm.c's GPT-2 has ffn = 4 hidden (%d), not %d", 4 * c->hidden, c->ffn);
    if (c->model == SW_MODEL_GPT2 && c->kv_heads != c->heads)
        sw_usage_error("weights: %s GPT-2 has no grouped-query attention: kv-heads (%d) must equal heads (%d)",
                       is_llmc(format) ? "llm.c's" : "Hugging Face", c->kv_heads, c->heads);
}

void sw_weights_save(sw_gpt *m, const char *path, int format)
{
    const sw_gpt_config *c = sw_gpt_get_config(m);
    sw_params *p = sw_gpt_params(m);
    check_saveable(c, format);
    const int np = sw_gpt_num_params(c), me = sw_rank(), dt = written_dtype(format);
    const size_t es = dtype_size(dt);
    char err[ERR_LEN] = "", tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = -1;
    unsigned char *header = NULL;
    uint64_t *offsets = sw_xcalloc((size_t)np * MAX_PARTS, sizeof *offsets);
    if (me == 0) {
        size_t hn = layout(c, format, &header, offsets);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) snprintf(err, sizeof err, "%s: cannot create: %s", tmp, strerror(errno));
        else if (write_at(fd, header, hn, 0) != 0) snprintf(err, sizeof err, "%s: cannot write: %s", tmp, strerror(errno));
        free(header);
    }
    agree_or_exit(err, 1);
    starpu_task_wait_for_all(); /* the values as the last submitted update left them */
    for (int i = 0, o = 0; i < np; i++) {
        const sw_param_desc *d = sw_params_desc(p, i);
        float *g = me == 0 ? malloc(sizeof(float) * (size_t)(d->rows * d->cols)) : NULL;
        if (me == 0 && !g) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
        assemble(p, i, g);
        part parts[MAX_PARTS];
        int n = parts_of(c, format, i, d->rows, d->cols, parts);
        for (int k = 0; k < n; k++, o++) {
            if (me != 0 || err[0]) continue;
            const part *pt = &parts[k];
            const int64_t numel = part_numel(pt), r = part_rows(pt), cols = d->cols;
            /* llm.c's wte: Vp rows, the padding ones 0 */
            const int64_t pad = is_llmc(format) && i == 0 ? ((c->vocab + LLMC_PAD - 1) / LLMC_PAD * LLMC_PAD - c->vocab) * cols : 0;
            float *v = calloc((size_t)(numel + pad), sizeof *v);
            unsigned char *raw = malloc(es * (size_t)(numel + pad));
            if (!v || !raw) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
            const float *src = g + pt->row0 * cols;
            if (!pt->transpose) memcpy(v, src, sizeof(float) * (size_t)numel);
            else
                for (int64_t a = 0; a < cols; a++)
                    for (int64_t b = 0; b < r; b++) v[a * r + b] = src[b * cols + a];
            from_f32(dt, v, raw, numel + pad);
            if (write_at(fd, raw, es * (size_t)(numel + pad), offsets[o]) != 0)
                snprintf(err, sizeof err, "%s: cannot write: %s", tmp, strerror(errno));
            free(v);
            free(raw);
        }
        free(g);
    }
    free(offsets);
    if (me == 0 && !err[0]) {
        if (fsync(fd) != 0 || close(fd) != 0) snprintf(err, sizeof err, "%s: cannot sync: %s", tmp, strerror(errno));
        else if (rename(tmp, path) != 0) snprintf(err, sizeof err, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        fd = -1;
    }
    if (fd >= 0) close(fd);
    agree_or_exit(err, 1);
}
