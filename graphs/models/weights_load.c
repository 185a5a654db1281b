/* Loading a weight file into a GPT (weights.h; the formats: weights.c):
 * check the model and every shape against the table, then build each
 * parameter's global tensor and write this rank's part of it. */
#include "weights_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bf16.h"
#include "layers/layer_util.h"
#include "starweave/runtime.h"

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
        int n = sw_weights_parts_of(c, f->format, i, rows, cols, parts);
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


/* ---------------------------------------------------------------- load */

/* parameter i's global [rows, cols] from its parts in the file (zero elsewhere: the padded vocabulary) */
static void read_global(weight_file *f, const sw_gpt_config *c, int i, int64_t rows, int64_t cols, float *g)
{
    part parts[MAX_PARTS];
    int n = sw_weights_parts_of(c, f->format, i, rows, cols, parts);
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
        if (sw_weights_read_at(f->fd, raw, (size_t)numel * dtype_size(t->dtype), t->offset) != 0)
            sw_failf(__FILE__, __LINE__, "weights %s: cannot read tensor '%s': %s", f->path, p->name, strerror(errno));
        sw_weights_to_f32(t->dtype, raw, v, numel);
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
    if (sw_weights_file_open(&f, path, err) == 0 && check_model(&f, c, err) == 0) check_parts(&f, c, err);
    sw_weights_agree_or_exit(err, 2);
    for (int i = 0; i < sw_params_count(p); i++) {
        sw_tensor *t = sw_params_value(p, i);
        if (!t) continue; /* another pipeline stage's */
        const sw_param_desc *d = sw_params_desc(p, i);
        int64_t lrows, lcols;
        sw_slice_shape(d, &lrows, &lcols);
        const int64_t first = sw_params_value_first_row(p, i);
        if (t->dtype != SW_F32 || t->cols != lcols || first + t->rows > lrows)
            sw_failf(__FILE__, __LINE__, "weights: %s is not this rank's fp32 part of [%lld, %lld]", d->name,
                     (long long)lrows, (long long)lcols);
        float *g = malloc(sizeof(float) * (size_t)(d->rows * d->cols)), *local = malloc(sizeof(float) * (size_t)(lrows * lcols));
        if (!g || !local) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
        read_global(&f, c, i, d->rows, d->cols, g);
        sw_slice_extract(d, g, local);
        sw_tensor_write_host(t, local + first * lcols); /* this rank's ZeRO-3 rows, or all */
        free(g);
        free(local);
    }
    sw_weights_file_close(&f);
}
