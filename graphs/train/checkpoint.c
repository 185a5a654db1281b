/* Checkpoints that re-shard: each rank's file holds the pieces of the
 * tensors it holds with their global rectangles; a loading rank reads the
 * overlapping pieces of whichever files cover what it holds (see
 * checkpoint.h for the file format). */
#define _GNU_SOURCE /* renameat2 (RENAME_EXCHANGE) */
#include "starweave/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <time.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "train_internal.h"
#include "starweave/mesh.h"
#include "starweave/runtime.h"

#define MAGIC "SWCKPT05"
#define MAGIC_FAMILY "SWCKPT" /* every format version's magic starts so */

enum {
    MAX_FIELDS = 16,
    MAX_MODEL_FIELDS = 8,
    LAYOUT_FIELDS = 7, /* number of ranks, tp, ulysses, ring, dp, pp, zero */
    MAX_PIECES = 3,    /* a TP slice's blocks (sw_slice): at most 3 rectangles */
    KINDS = 3,         /* value, AdamW m, AdamW v */
    MAX_RANKS = 1 << 20,
    MAX_PARAMS = 1 << 20,
};
static const char *const layout_names[LAYOUT_FIELDS] = {"number of ranks", "tp", "ulysses", "ring", "dp", "pp", "zero"};
static const char *const kind_names[KINDS] = {"value", "AdamW m", "AdamW v"};

/* the file's header: 680 bytes */
typedef struct ckpt_field {
    char name[32];
    int64_t value;
} ckpt_field;
typedef struct ckpt_header {
    char magic[8];
    int32_t nfields, rank, step, nmodel;
    /* the model's nmodel fields, the layout's LAYOUT_FIELDS, then "parameters": how many this file holds */
    ckpt_field field[MAX_FIELDS];
    uint64_t seed;
    /* the save's id, the same in every file of one save and drawn anew for
     * each: a step's files from two saves (two runs into one directory)
     * are refused together, not loaded as a mix */
    uint64_t save_id;
} ckpt_header;

/* a rectangle of a tensor's global [rows, cols]; in the file, with the
 * offset of its row-major data from the file's start */
typedef struct ckpt_piece {
    int64_t row0, col0, rows, cols;
    uint64_t offset;
} ckpt_piece;
/* one tensor held by the file: 192 bytes */
typedef struct ckpt_entry {
    char name[48]; /* the parameter's */
    int32_t kind, npieces;
    int64_t rows, cols; /* global shape */
    ckpt_piece piece[MAX_PIECES];
} ckpt_entry;
_Static_assert(sizeof(ckpt_header) == 680 && sizeof(ckpt_entry) == 192, "the file format's record sizes");

/* a piece this rank holds: its global rectangle and where it starts in the held tensor */
typedef struct held_piece {
    ckpt_piece global;
    int64_t local_row0, local_col0;
} held_piece;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- what this rank holds ---- */

static sw_tensor *held_tensor(sw_params *p, int i, int kind)
{
    return kind == 0 ? sw_params_value(p, i) : kind == 1 ? sw_params_adam_m(p, i) : sw_params_adam_v(p, i);
}

/* parameter i is held here (a pipeline stage holds only its own) */
static int held(sw_params *p, int i) { return sw_params_value(p, i) != NULL; }

static const sw_mesh *mesh_of(const sw_params *p)
{
    return sw_params_comm(p) ? sw_comm_mesh(sw_params_comm(p)) : NULL;
}

/* The rows of parameter i's TP slice (its local rows, lrows) that `kind`
 * holds: all of them, or this rank's ZeRO share sw_tile_range(lrows,
 * gradient group size, rank in it) -- the moments with ZeRO-1/2/3, the
 * value too with ZeRO-3 (params.c's rule; a tensor shorter than the slice
 * is such a share). */
static void held_rows(sw_params *p, int i, int kind, int64_t lrows, int64_t *first, int64_t *count)
{
    sw_tensor *t = held_tensor(p, i, kind);
    *first = 0, *count = lrows;
    if (t->rows == lrows) return;
    const sw_mesh *mesh = mesh_of(p);
    sw_group g = sw_params_get_config(p)->grad_group;
    sw_tile_range(lrows, mesh ? sw_mesh_size(mesh, g) : 1, mesh ? sw_mesh_rank(mesh, g) : 0, first, count);
    if (*count != t->rows)
        sw_failf(__FILE__, __LINE__, "checkpoint: %s of %s has %lld rows, not ZeRO's share %lld of %lld",
                 kind_names[kind], sw_params_desc(p, i)->name, (long long)t->rows, (long long)*count,
                 (long long)lrows);
}

/* The global rectangles of parameter i's `kind` held here, at most one per
 * TP block (sw_slice): the held local rows [first, first + count) mapped
 * through the blocks, rows for dim 0 and columns for dim 1. Returns how many. */
static int held_pieces(sw_params *p, int i, int kind, held_piece out[MAX_PIECES])
{
    const sw_param_desc *d = sw_params_desc(p, i);
    const sw_slice *s = &d->slice;
    sw_tensor *t = held_tensor(p, i, kind);
    int64_t lrows, lcols, first, count;
    sw_slice_shape(d, &lrows, &lcols);
    if (t->cols != lcols || t->rows > lrows || t->dtype != SW_F32 || s->n < 0 || s->n > MAX_PIECES)
        sw_failf(__FILE__, __LINE__, "checkpoint: %s of %s is not this rank's fp32 slice [%lld,%lld] of [%lld,%lld]",
                 kind_names[kind], d->name, (long long)lrows, (long long)lcols, (long long)d->rows, (long long)d->cols);
    held_rows(p, i, kind, lrows, &first, &count);
    int n = 0;
    if (s->n == 0) { /* replicated: the local rows are the global rows */
        out[n++] = (held_piece){{first, 0, count, d->cols, 0}, 0, 0};
        return n;
    }
    int64_t at = 0; /* the block's first local row (dim 0) or column (dim 1) */
    for (int b = 0; b < s->n; at += s->count[b], b++) {
        if (s->dim == 1) {
            out[n++] = (held_piece){{first, s->start[b], count, s->count[b], 0}, 0, at};
            continue;
        }
        int64_t lo = max64(at, first), hi = min64(at + s->count[b], first + count);
        if (hi > lo) out[n++] = (held_piece){{s->start[b] + lo - at, 0, hi - lo, d->cols, 0}, lo - first, 0};
    }
    return n;
}

static int held_count(sw_params *p)
{
    int n = 0;
    for (int i = 0; i < sw_params_count(p); i++) n += held(p, i);
    return n;
}

static sw_ckpt_layout layout_of(sw_params *p)
{
    const sw_mesh *mesh = mesh_of(p);
    sw_mesh_dims d = mesh ? sw_mesh_get_dims(mesh) : (sw_mesh_dims){1, 1, 1, 1, 1};
    return (sw_ckpt_layout){sw_world_size(), d.tp, d.ulysses, d.ring, d.dp, d.pp, sw_params_get_config(p)->zero};
}

static void set_field(ckpt_field *f, const char *name, int64_t value)
{
    snprintf(f->name, sizeof f->name, "%s", name);
    f->value = value;
}

/* this rank's header: the model's fields, the layout, the parameters held */
static void header_of(sw_params *p, const sw_ckpt_field *model, int nmodel, int step, ckpt_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, 8);
    if (nmodel < 0 || nmodel > MAX_MODEL_FIELDS)
        sw_failf(__FILE__, __LINE__, "sw_checkpoint: %d model fields (at most %d)", nmodel, MAX_MODEL_FIELDS);
    int n = 0;
    for (int i = 0; i < nmodel; i++) set_field(&h->field[n++], model[i].name, model[i].value);
    sw_ckpt_layout l = layout_of(p);
    const int layout[LAYOUT_FIELDS] = {l.ranks, l.tp, l.ulysses, l.ring, l.dp, l.pp, l.zero};
    for (int i = 0; i < LAYOUT_FIELDS; i++) set_field(&h->field[n++], layout_names[i], layout[i]);
    set_field(&h->field[n++], "parameters", held_count(p));
    h->nfields = n, h->nmodel = nmodel, h->rank = sw_rank(), h->step = step;
    h->seed = sw_params_get_config(p)->seed;
}

static sw_ckpt_layout layout_of_header(const ckpt_header *h)
{
    const ckpt_field *f = &h->field[h->nmodel];
    return (sw_ckpt_layout){(int)f[0].value, (int)f[1].value, (int)f[2].value, (int)f[3].value,
                            (int)f[4].value, (int)f[5].value, (int)f[6].value};
}

/* Every rank learns whether any failed, and all exit with `code` if one
 * did; the lowest failing rank prints its reason (once, not once a rank). */
static void agree_or_exit(const char *err, int code)
{
    int first = sw_world_min(err[0] ? sw_rank() : INT_MAX);
    if (first == INT_MAX) return;
    if (first == sw_rank()) fprintf(stderr, "starweave: error: %s\n", err);
    fflush(stderr);
    sw_shutdown();
    exit(code);
}

static void step_dir(char *out, size_t n, const char *dir, int step)
{
    snprintf(out, n, "%s/step-%08d", dir, step);
}

/* write data to path atomically: temporary, fsync, rename, fsync of the directory */
static int write_atomic(const char *path, const char *dirpath, const void *data, size_t n, char *err, size_t errn)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return snprintf(err, errn, "checkpoint: cannot create %s: %s", tmp, strerror(errno)), -1;
    const char *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, errn, "checkpoint: cannot write %s: %s", tmp, strerror(errno));
            close(fd);
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0)
        return snprintf(err, errn, "checkpoint: cannot sync %s: %s", tmp, strerror(errno)), -1;
    if (rename(tmp, path) != 0)
        return snprintf(err, errn, "checkpoint: cannot rename %s: %s", tmp, strerror(errno)), -1;
    int dfd = open(dirpath, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static size_t piece_bytes(const ckpt_piece *c) { return sizeof(float) * (size_t)c->rows * (size_t)c->cols; }

/* ---- save ---- */

/* the step's staging directory: every rank writes its file there; it
 * becomes DIR/step-NNNNNNNN only when every file is in place */
static void staging_dir(char *out, size_t n, const char *dir, int step)
{
    snprintf(out, n, "%s/step-%08d.tmp", dir, step);
}

/* what an interrupted save left in the staging directory: its regular
 * files (another save's rank files and temporaries) unlinked; anything
 * else (a directory) stays, and the rank whose file it blocks fails */
static void clear_staging(const char *sdir)
{
    DIR *d = opendir(sdir);
    if (!d) return;
    char path[PATH_MAX + 300];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", sdir, e->d_name);
        unlink(path); /* fails on a directory: left */
    }
    closedir(d);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) != 0 ? -1 : 0;
}

/* a replaced step directory removed with what it holds */
static int remove_tree(const char *path) { return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* DIR/latest names DIR/step-NNNNNNNN (whose name is `name`) */
static int latest_names(const char *dir, const char *name)
{
    char path[PATH_MAX + 16], line[64] = "";
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int named = fgets(line, sizeof line, f) && (line[strcspn(line, "\n")] = 0, !strcmp(line, name));
    fclose(f);
    return named;
}

/* Rank 0 commits the save: the staging directory, complete, takes the
 * step's name in one rename. In a directory that already holds the step
 * (a used directory, an earlier run's save of the same step), the two are
 * exchanged atomically (renameat2's RENAME_EXCHANGE), so the name always
 * holds one complete save, and the earlier one is then removed; where the
 * file system cannot exchange, an earlier save that `latest` does not name
 * is removed first, and one that it names is kept and the save refused. */
static int commit_step(const char *dir, const char *stage, const char *sdir, int step, char *err, size_t errn)
{
    if (rename(stage, sdir) == 0) return 0;
    if (errno != EEXIST && errno != ENOTEMPTY)
        return snprintf(err, errn, "checkpoint: cannot rename %s to %s: %s", stage, sdir, strerror(errno)), -1;
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, stage, AT_FDCWD, sdir, RENAME_EXCHANGE) == 0) {
        remove_tree(stage); /* the earlier save, now under the staging name */
        return 0;
    }
#endif
    char name[32];
    snprintf(name, sizeof name, "step-%08d", step);
    if (latest_names(dir, name))
        return snprintf(err, errn, "checkpoint: %s, which %s/latest names, cannot be replaced atomically on this "
                        "file system (%s): save into another directory", sdir, dir, strerror(errno)), -1;
    if (remove_tree(sdir) != 0 || rename(stage, sdir) != 0)
        return snprintf(err, errn, "checkpoint: cannot replace %s: %s", sdir, strerror(errno)), -1;
    return 0;
}

/* A number every rank of this save shares, drawn by rank 0 (time, process,
 * step): two 31-bit halves, each agreed as the minimum over the ranks of
 * rank 0's value and INT_MAX elsewhere. */
static uint64_t new_save_id(int step)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed[3] = {(uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, (uint64_t)getpid(),
                        (uint64_t)step};
    uint64_t r = fnv1a(FNV_START, seed, sizeof seed);
    int mine0 = sw_rank() == 0, half[2];
    for (int i = 0; i < 2; i++)
        half[i] = sw_world_min(mine0 ? (int)((r >> (32 * i)) % (uint64_t)INT_MAX) : INT_MAX);
    return (uint64_t)half[0] | (uint64_t)half[1] << 31;
}

int sw_checkpoint_save(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir, int step)
{
    char err[2 * PATH_MAX + 128] = "", sdir[PATH_MAX], stage[PATH_MAX], path[PATH_MAX + 32];
    step_dir(sdir, sizeof sdir, dir, step);
    staging_dir(stage, sizeof stage, dir, step);
    if (sw_rank() == 0) {
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            snprintf(err, sizeof err, "checkpoint: cannot create %s: %s", dir, strerror(errno));
        else if (mkdir(stage, 0755) != 0 && errno != EEXIST)
            snprintf(err, sizeof err, "checkpoint: cannot create %s: %s", stage, strerror(errno));
        else
            clear_staging(stage);
    }
    agree_or_exit(err, 1);

    /* the table: every held tensor's pieces, their data laid out in order after it */
    ckpt_header h;
    header_of(p, model, nmodel, step, &h);
    h.save_id = new_save_id(step);
    int nentries = KINDS * held_count(p);
    ckpt_entry *entries = sw_xcalloc((size_t)nentries, sizeof *entries);
    held_piece (*pieces)[MAX_PIECES] = sw_xcalloc((size_t)nentries, sizeof *pieces);
    size_t off = sizeof h + sizeof *entries * (size_t)nentries;
    for (int i = 0, e = 0; i < sw_params_count(p); i++)
        for (int kind = 0; held(p, i) && kind < KINDS; kind++, e++) {
            ckpt_entry *x = &entries[e];
            snprintf(x->name, sizeof x->name, "%s", sw_params_desc(p, i)->name);
            x->kind = kind, x->rows = sw_params_desc(p, i)->rows, x->cols = sw_params_desc(p, i)->cols;
            x->npieces = held_pieces(p, i, kind, pieces[e]);
            for (int k = 0; k < x->npieces; k++) {
                x->piece[k] = pieces[e][k].global;
                x->piece[k].offset = off;
                off += piece_bytes(&x->piece[k]);
            }
        }
    size_t total = off + sizeof(uint64_t);
    char *buf = malloc(total);
    if (!buf) sw_fail(__FILE__, __LINE__, "malloc(checkpoint)", -ENOMEM);
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, entries, sizeof *entries * (size_t)nentries);
    /* each held tensor copied out, then its pieces' rectangles into place */
    for (int i = 0, e = 0; i < sw_params_count(p); i++)
        for (int kind = 0; held(p, i) && kind < KINDS; kind++, e++) {
            sw_tensor *t = held_tensor(p, i, kind);
            float *host = malloc(sw_tensor_bytes(t));
            if (!host) sw_fail(__FILE__, __LINE__, "malloc(checkpoint)", -ENOMEM);
            sw_tensor_read_host(t, host);
            for (int k = 0; k < entries[e].npieces; k++) {
                const held_piece *hp = &pieces[e][k];
                float *dst = (float *)(buf + entries[e].piece[k].offset);
                for (int64_t r = 0; r < hp->global.rows; r++)
                    memcpy(dst + r * hp->global.cols, host + (hp->local_row0 + r) * t->cols + hp->local_col0,
                           sizeof(float) * (size_t)hp->global.cols);
            }
            free(host);
        }
    uint64_t sum = fnv1a(FNV_START, buf, off);
    memcpy(buf + off, &sum, sizeof sum);
    snprintf(path, sizeof path, "%s/rank-%05d.ckpt", stage, h.rank);
    write_atomic(path, stage, buf, total, err, sizeof err);
    free(buf);
    free(pieces);
    free(entries);
    agree_or_exit(err, 1);

    /* every rank's file is in place: the step committed as a whole, then
     * `latest` pointed at it (a crash before leaves the previous step) */
    if (sw_rank() == 0 && commit_step(dir, stage, sdir, step, err, sizeof err) == 0) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) fsync(dfd), close(dfd);
        char line[32];
        int n = snprintf(line, sizeof line, "step-%08d\n", step);
        snprintf(path, sizeof path, "%s/latest", dir);
        write_atomic(path, dir, line, (size_t)n, err, sizeof err);
    }
    agree_or_exit(err, 1);
    return 0;
}

/* ---- load ---- */

/* one file of the step: its header and table, open for reading pieces */
typedef struct ckpt_file {
    int fd;
    ckpt_header h;
    int nentries;
    ckpt_entry *entries;
} ckpt_file;

static int read_exact(int fd, void *dst, size_t n, off_t at)
{
    char *d = dst;
    while (n > 0) {
        ssize_t r = pread(fd, d, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        d += r, n -= (size_t)r, at += r;
    }
    return 0;
}

/* The header's own consistency: the format version, the field counts and
 * the layout's values. first: NULL for the step's rank 0 file, which gives
 * the number of files and the step; the others must agree with it. */
static int check_header(const ckpt_header *h, const char *path, const ckpt_header *first, char *err, size_t n)
{
    if (memcmp(h->magic, MAGIC_FAMILY, 6) != 0)
        return snprintf(err, n, "checkpoint: %s is not a starweave checkpoint", path), -1;
    if (memcmp(h->magic, MAGIC, 8) != 0)
        return snprintf(err, n, "checkpoint %s is in format %.8s, and this starweave reads %s (pieces with their "
                        "global offsets, which re-shard): resume it with the starweave that wrote it", path,
                        h->magic, MAGIC), -1;
    if (h->nmodel < 0 || h->nmodel > MAX_MODEL_FIELDS || h->nfields != h->nmodel + LAYOUT_FIELDS + 1)
        return snprintf(err, n, "checkpoint %s is corrupt (%d fields, %d of the model)", path, h->nfields,
                        h->nmodel), -1;
    const ckpt_field *l = &h->field[h->nmodel];
    for (int i = 0; i < LAYOUT_FIELDS; i++)
        if (l[i].value < 0 || l[i].value > MAX_RANKS)
            return snprintf(err, n, "checkpoint %s is corrupt (%s %lld)", path, layout_names[i],
                            (long long)l[i].value), -1;
    if (l[0].value < 1) return snprintf(err, n, "checkpoint %s is corrupt (number of ranks 0)", path), -1;
    int64_t params = l[LAYOUT_FIELDS].value;
    if (params < 0 || params > MAX_PARAMS)
        return snprintf(err, n, "checkpoint %s is corrupt (%lld parameters)", path, (long long)params), -1;
    if (first && (l[0].value != first->field[first->nmodel].value || h->step != first->step ||
                  h->save_id != first->save_id))
        return snprintf(err, n, "checkpoint %s is of another save than the step's rank 0 file (number of ranks %lld, "
                        "step %d, save %016llx there; %lld, %d, %016llx here)", path,
                        (long long)first->field[first->nmodel].value, first->step,
                        (unsigned long long)first->save_id, (long long)l[0].value, h->step,
                        (unsigned long long)h->save_id), -1;
    return 0;
}

/* The table's consistency: kinds, pieces inside the global shape, their
 * data laid out in order after the table; *end: where the data end. */
static int check_table(const ckpt_file *f, const char *path, uint64_t *end, char *err, size_t n)
{
    uint64_t off = sizeof f->h + sizeof *f->entries * (uint64_t)f->nentries;
    for (int e = 0; e < f->nentries; e++) {
        const ckpt_entry *x = &f->entries[e];
        int bad = x->kind < 0 || x->kind >= KINDS || x->npieces < 1 || x->npieces > MAX_PIECES || x->rows < 1 ||
                  x->cols < 1 || memchr(x->name, 0, sizeof x->name) == NULL;
        for (int k = 0; !bad && k < x->npieces; k++) {
            const ckpt_piece *c = &x->piece[k];
            bad = c->row0 < 0 || c->col0 < 0 || c->rows < 1 || c->cols < 1 || c->row0 + c->rows > x->rows ||
                  c->col0 + c->cols > x->cols || c->offset != off;
            off += piece_bytes(c);
        }
        if (bad)
            return snprintf(err, n, "checkpoint %s is corrupt (its table's entry %d is inconsistent)", path, e), -1;
    }
    *end = off;
    return 0;
}

/* FNV-1a of the file's first `n` bytes, read in chunks */
static int checksum_of(int fd, uint64_t n, uint64_t *sum)
{
    enum { CHUNK = 1 << 20 };
    char *chunk = malloc(CHUNK);
    if (!chunk) return -1;
    uint64_t h = FNV_START;
    for (uint64_t at = 0; at < n;) {
        size_t len = n - at < CHUNK ? (size_t)(n - at) : CHUNK;
        if (read_exact(fd, chunk, len, (off_t)at) != 0) {
            free(chunk);
            return -1;
        }
        h = fnv1a(h, chunk, len);
        at += len;
    }
    free(chunk);
    *sum = h;
    return 0;
}

/* Opens the step's file `index` and reads its header and table (checked);
 * the rank whose turn it is (index modulo the world size) also verifies
 * the whole file's checksum, so that every file is verified once. */
static int open_file(ckpt_file *f, const char *sdir, int index, const ckpt_header *first, char *err, size_t n)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/rank-%05d.ckpt", sdir, index);
    struct stat st;
    f->fd = open(path, O_RDONLY);
    if (f->fd < 0 || fstat(f->fd, &st) != 0)
        return snprintf(err, n, "checkpoint: cannot open %s: %s", path, strerror(errno)), -1;
    uint64_t size = (uint64_t)st.st_size, end;
    if (size < sizeof f->h + sizeof(uint64_t) || read_exact(f->fd, &f->h, sizeof f->h, 0) != 0)
        return snprintf(err, n, "checkpoint %s is truncated (%llu bytes)", path, (unsigned long long)size), -1;
    if (check_header(&f->h, path, first, err, n) != 0) return -1;
    f->nentries = KINDS * (int)f->h.field[f->h.nmodel + LAYOUT_FIELDS].value;
    uint64_t table = sizeof *f->entries * (uint64_t)f->nentries;
    if (size < sizeof f->h + table + sizeof(uint64_t))
        return snprintf(err, n, "checkpoint %s is truncated (%llu bytes)", path, (unsigned long long)size), -1;
    f->entries = sw_xcalloc((size_t)f->nentries, sizeof *f->entries);
    if (read_exact(f->fd, f->entries, (size_t)table, sizeof f->h) != 0)
        return snprintf(err, n, "checkpoint: cannot read %s: %s", path, strerror(errno)), -1;
    if (check_table(f, path, &end, err, n) != 0) return -1;
    if (size != end + sizeof(uint64_t))
        return snprintf(err, n, "checkpoint %s is truncated or padded: %llu bytes, expected %llu", path,
                        (unsigned long long)size, (unsigned long long)(end + sizeof(uint64_t))), -1;
    if (index % sw_world_size() != sw_rank()) return 0;
    uint64_t sum, stored;
    if (checksum_of(f->fd, end, &sum) != 0 || read_exact(f->fd, &stored, sizeof stored, (off_t)end) != 0)
        return snprintf(err, n, "checkpoint: cannot read %s: %s", path, strerror(errno)), -1;
    if (sum != stored) return snprintf(err, n, "checkpoint %s is corrupt (checksum mismatch)", path), -1;
    return 0;
}

/* "name: checkpoint A, this run B" for the first model field that differs,
 * or the seed */
static int mismatch(char *err, size_t n, const char *sdir, const ckpt_header *f, const ckpt_header *me)
{
    if (f->nmodel != me->nmodel)
        return snprintf(err, n, "checkpoint %s does not match this run: %d model fields in the checkpoint, %d here",
                        sdir, f->nmodel, me->nmodel), 1;
    for (int i = 0; i < me->nmodel; i++)
        if (strncmp(f->field[i].name, me->field[i].name, sizeof f->field[i].name) != 0 ||
            f->field[i].value != me->field[i].value)
            return snprintf(err, n, "checkpoint %s does not match this run: %s %lld in the checkpoint, %lld here", sdir,
                            me->field[i].name, (long long)f->field[i].value, (long long)me->field[i].value), 1;
    if (f->seed != me->seed)
        return snprintf(err, n, "checkpoint %s does not match this run: seed %llu in the checkpoint, %llu here", sdir,
                        (unsigned long long)f->seed, (unsigned long long)me->seed), 1;
    return 0;
}

/* the part of rectangle a inside b (rows or cols 0: none) */
static ckpt_piece intersect(const ckpt_piece *a, const ckpt_piece *b)
{
    ckpt_piece c = {max64(a->row0, b->row0), max64(a->col0, b->col0), 0, 0, 0};
    c.rows = max64(0, min64(a->row0 + a->rows, b->row0 + b->rows) - c.row0);
    c.cols = max64(0, min64(a->col0 + a->cols, b->col0 + b->cols) - c.col0);
    return c;
}

/* every element of rectangle c (global) of held piece hp is marked in covered */
static int all_covered(const unsigned char *covered, int64_t tcols, const held_piece *hp, const ckpt_piece *c)
{
    for (int64_t r = c->row0; r < c->row0 + c->rows; r++) {
        const unsigned char *row = covered + (hp->local_row0 + r - hp->global.row0) * tcols + hp->local_col0 -
                                   hp->global.col0;
        for (int64_t col = c->col0; col < c->col0 + c->cols; col++)
            if (!row[col]) return 0;
    }
    return 1;
}

/* Rectangle c (global) of file piece fp into held piece hp of the host
 * copy `host` (tcols columns): the rows of c read whole from the file,
 * their columns of c copied; marked in covered. */
static int read_overlap(int fd, const ckpt_piece *fp, const held_piece *hp, const ckpt_piece *c, float *host,
                        unsigned char *covered, int64_t tcols)
{
    size_t band = sizeof(float) * (size_t)c->rows * (size_t)fp->cols;
    float *rows = malloc(band);
    if (!rows) return -1;
    if (read_exact(fd, rows, band, (off_t)(fp->offset + sizeof(float) * (size_t)((c->row0 - fp->row0) * fp->cols)))) {
        free(rows);
        return -1;
    }
    for (int64_t r = 0; r < c->rows; r++) {
        int64_t at = (hp->local_row0 + c->row0 + r - hp->global.row0) * tcols + hp->local_col0 + c->col0 -
                     hp->global.col0;
        memcpy(host + at, rows + r * fp->cols + (c->col0 - fp->col0), sizeof(float) * (size_t)c->cols);
        memset(covered + at, 1, (size_t)c->cols);
    }
    free(rows);
    return 0;
}

/* Parameter i's `kind`: the overlapping pieces of every file read into this
 * rank's pieces, then written to the tensor if every element was covered;
 * else the tensor and the uncovered region named in err. */
static int load_tensor(sw_params *p, int i, int kind, ckpt_file *files, int nfiles, const char *sdir, char *err,
                       size_t n)
{
    const sw_param_desc *d = sw_params_desc(p, i);
    sw_tensor *t = held_tensor(p, i, kind);
    held_piece mine[MAX_PIECES];
    int nmine = held_pieces(p, i, kind, mine), found = 0, rc = 0;
    float *host = sw_xcalloc((size_t)(t->rows * t->cols), sizeof(float));
    unsigned char *covered = sw_xcalloc((size_t)(t->rows * t->cols), 1);
    for (int f = 0; f < nfiles && rc == 0; f++)
        for (int e = 0; e < files[f].nentries && rc == 0; e++) {
            const ckpt_entry *x = &files[f].entries[e];
            if (x->kind != kind || strncmp(x->name, d->name, sizeof x->name) != 0) continue;
            found = 1;
            if (x->rows != d->rows || x->cols != d->cols) {
                snprintf(err, n, "checkpoint %s does not match this run: parameter %s is [%lld,%lld] in the "
                         "checkpoint (rank-%05d.ckpt), [%lld,%lld] here", sdir, d->name, (long long)x->rows,
                         (long long)x->cols, f, (long long)d->rows, (long long)d->cols);
                rc = -1;
            }
            for (int k = 0; k < x->npieces && rc == 0; k++)
                for (int m = 0; m < nmine && rc == 0; m++) {
                    ckpt_piece c = intersect(&x->piece[k], &mine[m].global);
                    if (c.rows == 0 || c.cols == 0 || all_covered(covered, t->cols, &mine[m], &c)) continue;
                    if (read_overlap(files[f].fd, &x->piece[k], &mine[m], &c, host, covered, t->cols) != 0) {
                        snprintf(err, n, "checkpoint: cannot read %s/rank-%05d.ckpt: %s", sdir, f, strerror(errno));
                        rc = -1;
                    }
                }
        }
    /* the uncovered elements' bounding box, in global coordinates */
    int64_t missing = 0, r0 = INT64_MAX, r1 = -1, c0 = INT64_MAX, c1 = -1;
    for (int m = 0; m < nmine && rc == 0; m++)
        for (int64_t r = 0; r < mine[m].global.rows; r++)
            for (int64_t c = 0; c < mine[m].global.cols; c++)
                if (!covered[(mine[m].local_row0 + r) * t->cols + mine[m].local_col0 + c]) {
                    missing++;
                    r0 = min64(r0, mine[m].global.row0 + r), r1 = max64(r1, mine[m].global.row0 + r);
                    c0 = min64(c0, mine[m].global.col0 + c), c1 = max64(c1, mine[m].global.col0 + c);
                }
    if (missing > 0) {
        snprintf(err, n, "checkpoint %s does not cover this run's %s of %s [%lld,%lld]: %lld element(s) within rows "
                 "%lld-%lld, columns %lld-%lld are in none of its %d file(s)%s", sdir, kind_names[kind], d->name,
                 (long long)d->rows, (long long)d->cols, (long long)missing, (long long)r0, (long long)r1,
                 (long long)c0, (long long)c1, nfiles, found ? "" : " (no file holds this tensor)");
        rc = -1;
    }
    if (rc == 0) sw_tensor_write_host(t, host);
    free(covered);
    free(host);
    return rc;
}

int sw_checkpoint_load(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir)
{
    return sw_checkpoint_load_layout(p, model, nmodel, dir, NULL, NULL);
}

int sw_checkpoint_load_layout(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir,
                              sw_ckpt_layout *saved, sw_ckpt_layout *here)
{
    char err[2 * PATH_MAX] = "", path[PATH_MAX + 64], name[64] = "", sdir[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *latest = fopen(path, "r");
    if (!latest) snprintf(err, sizeof err, "checkpoint: cannot open %s: %s", path, strerror(errno));
    else {
        if (!fgets(name, sizeof name, latest) || strncmp(name, "step-", 5) != 0)
            snprintf(err, sizeof err, "checkpoint: %s does not name a step", path);
        fclose(latest);
        name[strcspn(name, "\n")] = 0;
    }
    agree_or_exit(err, 2);
    snprintf(sdir, sizeof sdir, "%s/%s", dir, name);

    /* every file of the step: rank 0's gives their number; all checked,
     * each one's checksum by one rank */
    ckpt_file first = {.fd = -1}, *files = &first;
    int nfiles = 1;
    if (open_file(&first, sdir, 0, NULL, err, sizeof err) == 0) {
        nfiles = (int)first.h.field[first.h.nmodel].value;
        files = sw_xcalloc((size_t)nfiles, sizeof *files);
        files[0] = first;
        for (int f = 1; f < nfiles; f++) files[f].fd = -1;
        for (int f = 1; f < nfiles && !err[0]; f++) open_file(&files[f], sdir, f, &first.h, err, sizeof err);
    }
    agree_or_exit(err, 2);

    ckpt_header me;
    header_of(p, model, nmodel, 0, &me);
    for (int f = 0; f < nfiles && !mismatch(err, sizeof err, sdir, &files[f].h, &me); f++) {
    }
    agree_or_exit(err, 2);

    /* every tensor this rank holds, from the pieces that overlap it */
    for (int i = 0; i < sw_params_count(p) && !err[0]; i++)
        for (int kind = 0; held(p, i) && kind < KINDS && !err[0]; kind++)
            load_tensor(p, i, kind, files, nfiles, sdir, err, sizeof err);
    for (int f = 0; f < nfiles; f++) {
        if (files[f].fd >= 0) close(files[f].fd);
        free(files[f].entries);
    }
    int step = files[0].h.step;
    if (saved) *saved = layout_of_header(&files[0].h);
    if (here) *here = layout_of(p);
    if (files != &first) free(files);
    agree_or_exit(err, 2);
    return step;
}
