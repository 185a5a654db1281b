/* Saving a GPT's parameters in a weight file (weights.h; the formats:
 * weights.c): assemble each global tensor on rank 0, write the parts. */
#include "weights_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bf16.h"
#include "layers/layer_util.h"
#include "starweave/runtime.h"

/* ---------------------------------------------------------------- save */

/* This rank's part of parameter i (local rows [first, first + n) of its TP
 * slice) added into the global g, and 1 into cnt where it lands. */
static void place(const sw_param_desc *d, const float *local, int64_t first, int64_t n, double *g, double *cnt)
{
    const sw_slice *s = &d->slice;
    int64_t lrows, lcols;
    sw_slice_shape(d, &lrows, &lcols);
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
        int n = sw_weights_parts_of(c, format, i, rows, cols, parts);
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
    sw_weights_agree_or_exit(err, 1);
    starpu_task_wait_for_all(); /* the values as the last submitted update left them */
    for (int i = 0, o = 0; i < np; i++) {
        const sw_param_desc *d = sw_params_desc(p, i);
        float *g = me == 0 ? malloc(sizeof(float) * (size_t)(d->rows * d->cols)) : NULL;
        if (me == 0 && !g) sw_fail(__FILE__, __LINE__, "malloc(weights)", -ENOMEM);
        assemble(p, i, g);
        part parts[MAX_PARTS];
        int n = sw_weights_parts_of(c, format, i, d->rows, d->cols, parts);
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
            sw_weights_from_f32(dt, v, raw, numel + pad);
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
    sw_weights_agree_or_exit(err, 1);
}
