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

#include "starweave/runtime.h"

#define MAGIC "SWCKPT02"

/* what must match between the saving and the resuming run */
typedef struct ckpt_header {
    char magic[8];
    int32_t layers, hidden, heads, kv_heads, vocab_padded, max_pos, tp, dp, zero, world, rank, nparams, step;
    int32_t ulysses, ring, zigzag;
    uint64_t seed;
} ckpt_header;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

static ckpt_header header_of(sw_gpt *m, int step)
{
    const sw_gpt_config *c = sw_gpt_get_config(m);
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.layers = c->layers, h.hidden = c->hidden, h.heads = c->heads, h.kv_heads = c->kv_heads;
    h.vocab_padded = c->vocab_padded, h.max_pos = c->max_pos, h.tp = c->tp, h.dp = c->dp, h.zero = c->zero;
    h.ulysses = c->ulysses, h.ring = c->ring, h.zigzag = c->ring > 1 && c->zigzag;
    h.world = sw_world_size(), h.rank = sw_rank(), h.nparams = sw_gpt_num_params(c), h.step = step;
    h.seed = c->seed;
    return h;
}

/* The three tensors saved per parameter, in file order (with ZeRO-1 the
 * moments are this rank's rows only). */
static sw_tensor *saved_tensor(sw_gpt *m, int i, int which)
{
    return which == 0 ? sw_gpt_param(m, i) : which == 1 ? sw_gpt_adam_m(m, i) : sw_gpt_adam_v(m, i);
}

/* The saved tensors between the header and the checksum: copied out of
 * (to_file) or into the model, in file order; returns their bytes (buf
 * NULL: only counts). */
static size_t copy_tensors(sw_gpt *m, char *buf, int to_file)
{
    size_t off = 0;
    for (int i = 0; i < sw_gpt_num_params(sw_gpt_get_config(m)); i++)
        for (int which = 0; which < 3; which++) {
            sw_tensor *t = saved_tensor(m, i, which);
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

int sw_checkpoint_save(sw_gpt *m, const char *dir, int step)
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

    /* header, then param, m, v of every parameter, then the checksum */
    ckpt_header h = header_of(m, step);
    size_t total = sizeof h + copy_tensors(m, NULL, 1) + sizeof(uint64_t);
    char *buf = malloc(total);
    if (!buf) sw_fail(__FILE__, __LINE__, "malloc(checkpoint)", -ENOMEM);
    memcpy(buf, &h, sizeof h);
    size_t off = sizeof h + copy_tensors(m, buf + sizeof h, 1);
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
static int mismatch(char *err, size_t n, const char *path, const ckpt_header *f, const ckpt_header *me)
{
    struct { const char *name; int32_t a, b; } fields[] = {
        {"layers", f->layers, me->layers}, {"hidden", f->hidden, me->hidden}, {"heads", f->heads, me->heads},
        {"kv-heads", f->kv_heads, me->kv_heads}, {"padded vocabulary", f->vocab_padded, me->vocab_padded},
        {"max-pos", f->max_pos, me->max_pos}, {"number of ranks", f->world, me->world}, {"tp", f->tp, me->tp},
        {"dp", f->dp, me->dp}, {"ulysses", f->ulysses, me->ulysses}, {"ring", f->ring, me->ring},
        {"zigzag", f->zigzag, me->zigzag}, {"zero", f->zero, me->zero}, {"parameters", f->nparams, me->nparams}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].a != fields[i].b) {
            snprintf(err, n, "checkpoint %s does not match this run: %s %d in the checkpoint, %d here%s", path,
                     fields[i].name, fields[i].a, fields[i].b,
                     i >= 6 && i <= 12 ? " (resume with the parallel layout it was saved with)" : "");
            return 1;
        }
    if (f->seed != me->seed) {
        snprintf(err, n, "checkpoint %s does not match this run: seed %llu in the checkpoint, %llu here", path,
                 (unsigned long long)f->seed, (unsigned long long)me->seed);
        return 1;
    }
    return 0;
}

int sw_checkpoint_load(sw_gpt *m, const char *dir)
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

    ckpt_header me = header_of(m, 0);
    snprintf(path, sizeof path, "%s/%s/rank-%05d.ckpt", dir, name, me.rank);
    size_t want = sizeof me + copy_tensors(m, NULL, 0) + sizeof(uint64_t);
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
        else if (mismatch(err, sizeof err, path, &fh, &me)) {
        } else if ((size_t)st.st_size != want)
            snprintf(err, sizeof err, "checkpoint %s is truncated or padded: %lld bytes, expected %zu", path,
                     (long long)st.st_size, want);
        else if (memcpy(&sum, buf + want - sizeof sum, sizeof sum), sum != fnv1a(FNV_START, buf, want - sizeof sum))
            snprintf(err, sizeof err, "checkpoint %s is corrupt (checksum mismatch)", path);
        else
            me.step = fh.step;
    }
    agree_or_exit(err, 2);

    copy_tensors(m, buf + sizeof me, 0);
    free(buf);
    return me.step;
}
