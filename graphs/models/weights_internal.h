/* What weights.c, weights_load.c and weights_save.c share: the formats' constants,
 * the table of a parameter's parts, a file's directory, and the helpers that
 * read, convert and agree across ranks (private to graphs/models). */
#ifndef STARWEAVE_WEIGHTS_INTERNAL_H
#define STARWEAVE_WEIGHTS_INTERNAL_H

#include "starweave/weights.h"
#include "starweave/gpt.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

enum { DT_UNKNOWN = -1, DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2 };
static inline size_t dtype_size(int dt) { return dt == DT_F32 ? 4 : 2; }

/* llm.c's checkpoint, fp32 (version 3) or bf16 (version 5): the same names and layout */
static inline int is_llmc(int format) { return format == SW_WEIGHTS_LLMC || format == SW_WEIGHTS_LLMC_BF16; }
/* the dtype a format writes its tensors in */
static inline int written_dtype(int format) { return format == SW_WEIGHTS_LLMC_BF16 ? DT_BF16 : DT_F32; }

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

static inline int64_t part_rows(const part *p) { return p->ndim == 1 ? 1 : p->transpose ? p->shape[1] : p->shape[0]; }
static inline int64_t part_numel(const part *p) { return p->ndim == 1 ? p->shape[0] : p->shape[0] * p->shape[1]; }

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

/* a reader's refusal: the reason in err (ERR_LEN bytes), -1 returned */
#define FAIL(...) return snprintf(err, ERR_LEN, __VA_ARGS__), -1

/* weights.c: dtype conversion, the parts of parameter i in `format` (see
 * there), a file's directory, reads at an offset, and the ranks' agreement */
void sw_weights_to_f32(int dt, const unsigned char *src, float *dst, int64_t n);
void sw_weights_from_f32(int dt, const float *src, unsigned char *dst, int64_t n);
int sw_weights_parts_of(const sw_gpt_config *c, int format, int i, int64_t rows, int64_t cols, part out[MAX_PARTS]);
int sw_weights_file_open(weight_file *f, const char *path, char *err);
void sw_weights_file_close(weight_file *f);
int sw_weights_read_at(int fd, void *dst, size_t n, uint64_t at);
void sw_weights_agree_or_exit(const char *err, int code);

#endif
