/* Weight files of other tools (weights.h): Hugging Face safetensors (GPT-2
 * and LLaMA names) and llm.c's GPT-2 checkpoint, in and out.
 *
 * Both directions go through one table: each of starweave's parameters
 * (gpt.h order) is made of up to three file tensors ("parts"), each
 * filling a band of its rows, maybe transposed (GPT-2's Conv1D). Loading
 * reads a file's directory (name, dtype, shape, offset of every tensor),
 * checks the model and every shape against the table, then builds each
 * parameter's global tensor and writes this rank's part of it. Saving
 * assembles each global tensor on rank 0 and writes the parts back.
 *
 * This file: the dtypes, the table, a file's directory and the detection
 * of its format; loading is weights_load.c, saving weights_save.c. */
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
#include "weights_internal.h"

/* ------------------------------------------------------------ dtypes */

static const char *const dtype_names[] = {"F32", "BF16", "F16"};

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
void sw_weights_to_f32(int dt, const unsigned char *src, float *dst, int64_t n)
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
void sw_weights_from_f32(int dt, const float *src, unsigned char *dst, int64_t n)
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
int sw_weights_parts_of(const sw_gpt_config *c, int format, int i, int64_t rows, int64_t cols, part out[MAX_PARTS])
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

/* ------------------------------------------------ a file's directory */

void sw_weights_file_close(weight_file *f)
{
    if (f->fd >= 0) close(f->fd);
    free(f->t);
    f->fd = -1, f->t = NULL, f->n = 0;
}

int sw_weights_read_at(int fd, void *dst, size_t n, uint64_t at)
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

/* safetensors: u64 header length n, n bytes of JSON {name: {dtype, shape,
 * data_offsets: [begin, end)}, "__metadata__": {...}}, then the data, the
 * offsets counted from its start */
static int read_safetensors(weight_file *f, char *err)
{
    unsigned char b[8];
    if (f->size < 8 || sw_weights_read_at(f->fd, b, 8, 0) != 0) FAIL("%s: truncated: %llu bytes", f->path, (unsigned long long)f->size);
    uint64_t n = le64(b);
    if (n > SAFETENSORS_MAX_HEADER || n > f->size - 8)
        FAIL("%s: truncated safetensors file: the header is %llu bytes long, the file %llu bytes", f->path,
             (unsigned long long)n, (unsigned long long)f->size);
    char *js = malloc(n ? n : 1);
    if (!js) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
    if (sw_weights_read_at(f->fd, js, n, 8) != 0) {
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
    if (f->size < sizeof b || sw_weights_read_at(f->fd, b, sizeof b, 0) != 0)
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
    if (size < 9 || sw_weights_read_at(fd, b, 9, 0) != 0)
        FAIL("%s: truncated: %llu bytes, too short for any weight file", path, (unsigned long long)size);
    int32_t magic = le32(b);
    if (magic == LLMC_MAGIC) return le32(b + 4) == LLMC_BF16 ? SW_WEIGHTS_LLMC_BF16 : SW_WEIGHTS_LLMC;
    if (b[8] == '{' && le64(b) >= 2) return SW_WEIGHTS_SAFETENSORS;
    if (magic == LLMC_TOKENS_MAGIC) FAIL("%s: an llm.c token shard (magic %d), not weights", path, LLMC_TOKENS_MAGIC);
    FAIL("%s: wrong magic: neither safetensors (an 8-byte header length, then '{') nor an llm.c GPT-2 checkpoint "
         "(int32 magic %d; this file's first int32 is %d)", path, LLMC_MAGIC, magic);
}

int sw_weights_file_open(weight_file *f, const char *path, char *err)
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

/* Every rank learns whether any failed, and all exit with `code` if one
 * did; the lowest failing rank prints its reason (once). */
void sw_weights_agree_or_exit(const char *err, int code)
{
    int first = sw_world_min(err[0] ? sw_rank() : INT_MAX);
    if (first == INT_MAX) return;
    if (first == sw_rank()) fprintf(stderr, "starweave: error: weights %s\n", err);
    fflush(stderr);
    sw_shutdown();
    exit(code);
}
