/* Checkpoints: one file per rank per step, a `latest` pointer replaced
 * atomically once every rank's file is in place (see checkpoint.h). */
#include "starweave/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starweave/mesh.h"
#include "starweave/runtime.h"

#define MAGIC "SWCKPT03"

/* what must match between the saving and the resuming run: the model's
 * fields (given by the caller), the parallel layout, the parameters */
enum { MAX_FIELDS = 16 };
typedef struct ckpt_field {
    char name[32];
    int64_t value;
} ckpt_field;
typedef struct ckpt_header {
    char magic[8];
    int32_t nfields, rank, step, pad;
    ckpt_field field[MAX_FIELDS]; /* the model's, then layout fields, then the parameter count */
    uint64_t seed;
} ckpt_header;
/* then per parameter: its name and this rank's shape */
typedef struct ckpt_param {
    char name[48];
    int64_t rows, cols;
} ckpt_param;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

/* index of the first layout field: the ones after it get the advice to
 * resume with the same layout */
static int header_of(sw_params *p, const sw_ckpt_field *model, int nmodel, int step, ckpt_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, 8);
    if (nmodel > MAX_FIELDS - 8) sw_fail(__FILE__, __LINE__, "sw_checkpoint: more than 8 model fields", -22);
    const sw_mesh *mesh = sw_params_comm(p) ? sw_comm_mesh(sw_params_comm(p)) : NULL;
    int n = 0;
    for (int i = 0; i < nmodel; i++, n++) {
        snprintf(h->field[n].name, sizeof h->field[n].name, "%s", model[i].name);
        h->field[n].value = model[i].value;
    }
    int layout = n;
    const struct { const char *name; sw_group g; } groups[] = {
        {"tp", SW_GROUP_TP}, {"dp", SW_GROUP_DP}, {"ulysses", SW_GROUP_ULYSSES}, {"ring", SW_GROUP_RING}};
    snprintf(h->field[n].name, sizeof h->field[n].name, "number of ranks");
    h->field[n++].value = sw_world_size();
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++, n++) {
        snprintf(h->field[n].name, sizeof h->field[n].name, "%s", groups[i].name);
        h->field[n].value = mesh ? sw_mesh_size(mesh, groups[i].g) : 1;
    }
    snprintf(h->field[n].name, sizeof h->field[n].name, "zero");
    h->field[n++].value = sw_params_get_config(p)->zero;
    snprintf(h->field[n].name, sizeof h->field[n].name, "parameters");
    h->field[n++].value = sw_params_count(p);
    h->nfields = n, h->rank = sw_rank(), h->step = step;
    h->seed = sw_params_get_config(p)->seed;
    return layout;
}

static void params_of(sw_params *p, ckpt_param *out)
{
    for (int i = 0; i < sw_params_count(p); i++) {
        memset(&out[i], 0, sizeof out[i]);
        snprintf(out[i].name, sizeof out[i].name, "%s", sw_params_desc(p, i)->name);
        out[i].rows = sw_params_value(p, i)->rows, out[i].cols = sw_params_value(p, i)->cols;
    }
}

/* The three tensors saved per parameter, in file order (with ZeRO-1 the
 * moments are this rank's rows only). */
static sw_tensor *saved_tensor(sw_params *p, int i, int which)
{
    return which == 0 ? sw_params_value(p, i) : which == 1 ? sw_params_adam_m(p, i) : sw_params_adam_v(p, i);
}

/* The saved tensors after the header and the parameter table: copied out
 * of (to_file) or into the registry, in file order; returns their bytes
 * (buf NULL: only counts). */
static size_t copy_tensors(sw_params *p, char *buf, int to_file)
{
    size_t off = 0;
    for (int i = 0; i < sw_params_count(p); i++)
        for (int which = 0; which < 3; which++) {
            sw_tensor *t = saved_tensor(p, i, which);
            if (buf && to_file) sw_tensor_read_host(t, buf + off);
            else if (buf) sw_tensor_write_host(t, buf + off);
            off += sw_tensor_bytes(t);
        }
    return off;
}

/* Every rank learns whether any failed; those that did print why. */
static void agree_or_exit(const char *err, int code)
{
    int bad = err[0] != 0, any = 0;
    SW_CHECK(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (!any) return;
    if (bad) fprintf(stderr, "starweave: error: %s\n", err);
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

int sw_checkpoint_save(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir, int step)
{
    char err[PATH_MAX + 128] = "", sdir[PATH_MAX], path[PATH_MAX + 32];
    step_dir(sdir, sizeof sdir, dir, step);
    if (sw_rank() == 0) {
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            snprintf(err, sizeof err, "checkpoint: cannot create %s: %s", dir, strerror(errno));
        else if (mkdir(sdir, 0755) != 0 && errno != EEXIST)
            snprintf(err, sizeof err, "checkpoint: cannot create %s: %s", sdir, strerror(errno));
    }
    agree_or_exit(err, 1);

    /* header, parameter table, then param, m, v of every parameter, then the checksum */
    ckpt_header h;
    header_of(p, model, nmodel, step, &h);
    size_t table = sizeof(ckpt_param) * (size_t)sw_params_count(p);
    size_t total = sizeof h + table + copy_tensors(p, NULL, 1) + sizeof(uint64_t);
    char *buf = malloc(total);
    if (!buf) sw_fail(__FILE__, __LINE__, "malloc(checkpoint)", -ENOMEM);
    memcpy(buf, &h, sizeof h);
    params_of(p, (ckpt_param *)(buf + sizeof h));
    size_t off = sizeof h + table + copy_tensors(p, buf + sizeof h + table, 1);
    uint64_t sum = fnv1a(FNV_START, buf, off);
    memcpy(buf + off, &sum, sizeof sum);
    snprintf(path, sizeof path, "%s/rank-%05d.ckpt", sdir, h.rank);
    write_atomic(path, sdir, buf, total, err, sizeof err);
    free(buf);
    agree_or_exit(err, 1);

    /* every rank's file is in place: now point `latest` at this step */
    if (sw_rank() == 0) {
        char line[32];
        int n = snprintf(line, sizeof line, "step-%08d\n", step);
        snprintf(path, sizeof path, "%s/latest", dir);
        write_atomic(path, dir, line, (size_t)n, err, sizeof err);
    }
    agree_or_exit(err, 1);
    return 0;
}

/* "name: checkpoint A, this run B" for the first field that differs */
static int mismatch(char *err, size_t n, const char *path, const ckpt_header *f, const ckpt_header *me, int layout)
{
    if (f->nfields != me->nfields) {
        snprintf(err, n, "checkpoint %s does not match this run: %d fields in the checkpoint, %d here", path,
                 f->nfields, me->nfields);
        return 1;
    }
    for (int i = 0; i < me->nfields; i++)
        if (strcmp(f->field[i].name, me->field[i].name) != 0 || f->field[i].value != me->field[i].value) {
            snprintf(err, n, "checkpoint %s does not match this run: %s %lld in the checkpoint, %lld here%s", path,
                     me->field[i].name, (long long)f->field[i].value, (long long)me->field[i].value,
                     i >= layout && i < me->nfields - 1 ? " (resume with the parallel layout it was saved with)" : "");
            return 1;
        }
    if (f->seed != me->seed) {
        snprintf(err, n, "checkpoint %s does not match this run: seed %llu in the checkpoint, %llu here", path,
                 (unsigned long long)f->seed, (unsigned long long)me->seed);
        return 1;
    }
    return 0;
}

/* the first parameter whose name or shape differs */
static int param_mismatch(char *err, size_t n, const char *path, const ckpt_param *f, const ckpt_param *me, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(f[i].name, me[i].name) != 0 || f[i].rows != me[i].rows || f[i].cols != me[i].cols) {
            snprintf(err, n, "checkpoint %s does not match this run: parameter %d is %s [%lld,%lld] in the checkpoint, "
                     "%s [%lld,%lld] here", path, i, f[i].name, (long long)f[i].rows, (long long)f[i].cols,
                     me[i].name, (long long)me[i].rows, (long long)me[i].cols);
            return 1;
        }
    return 0;
}

int sw_checkpoint_load(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir)
{
    char err[2 * PATH_MAX] = "", path[PATH_MAX + 64], name[64] = "";
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f) snprintf(err, sizeof err, "checkpoint: cannot open %s: %s", path, strerror(errno));
    else {
        if (!fgets(name, sizeof name, f) || strncmp(name, "step-", 5) != 0)
            snprintf(err, sizeof err, "checkpoint: %s does not name a step", path);
        fclose(f);
        name[strcspn(name, "\n")] = 0;
    }
    agree_or_exit(err, 2);

    ckpt_header me;
    int layout = header_of(p, model, nmodel, 0, &me);
    int np = sw_params_count(p);
    size_t table = sizeof(ckpt_param) * (size_t)np;
    ckpt_param *mine = malloc(table + 1);
    if (!mine) sw_fail(__FILE__, __LINE__, "malloc(checkpoint)", -ENOMEM);
    params_of(p, mine);
    snprintf(path, sizeof path, "%s/%s/rank-%05d.ckpt", dir, name, me.rank);
    size_t want = sizeof me + table + copy_tensors(p, NULL, 0) + sizeof(uint64_t);
    char *buf = NULL;
    struct stat st;
    if (stat(path, &st) != 0) snprintf(err, sizeof err, "checkpoint: cannot open %s: %s", path, strerror(errno));
    else if ((size_t)st.st_size < sizeof me)
        snprintf(err, sizeof err, "checkpoint %s is truncated (%lld bytes)", path, (long long)st.st_size);
    else if (!(buf = malloc((size_t)st.st_size))) snprintf(err, sizeof err, "checkpoint: out of memory");
    else {
        FILE *in = fopen(path, "rb");
        size_t got = in ? fread(buf, 1, (size_t)st.st_size, in) : 0;
        if (in) fclose(in);
        ckpt_header fh;
        memcpy(&fh, buf, sizeof fh);
        uint64_t sum;
        if (got != (size_t)st.st_size) snprintf(err, sizeof err, "checkpoint: cannot read %s", path);
        else if (memcmp(fh.magic, MAGIC, 8) != 0) snprintf(err, sizeof err, "%s is not a starweave checkpoint", path);
        else if (fh.rank != me.rank)
            snprintf(err, sizeof err, "checkpoint %s holds rank %d, not %d", path, fh.rank, me.rank);
        else if (mismatch(err, sizeof err, path, &fh, &me, layout)) {
        } else if ((size_t)st.st_size < sizeof me + table)
            snprintf(err, sizeof err, "checkpoint %s is truncated (%lld bytes)", path, (long long)st.st_size);
        else if (param_mismatch(err, sizeof err, path, (const ckpt_param *)(buf + sizeof me), mine, np)) {
        } else if ((size_t)st.st_size != want)
            snprintf(err, sizeof err, "checkpoint %s is truncated or padded: %lld bytes, expected %zu", path,
                     (long long)st.st_size, want);
        else if (memcpy(&sum, buf + want - sizeof sum, sizeof sum), sum != fnv1a(FNV_START, buf, want - sizeof sum))
            snprintf(err, sizeof err, "checkpoint %s is corrupt (checksum mismatch)", path);
        else
            me.step = fh.step;
    }
    agree_or_exit(err, 2);

    copy_tensors(p, buf + sizeof me + table, 0);
    free(buf);
    free(mine);
    return me.step;
}
