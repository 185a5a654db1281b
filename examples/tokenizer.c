/* llm.c's tokenizer table (see tokenizer.h), read byte by byte, little-endian,
 * as llm.c's train_gpt2.py write_tokenizer writes it and llmc/tokenizer.h
 * reads it. */
#include "tokenizer.h"
#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEADER_BYTES (256 * 4)

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
    if (!buf) return data_fail(msg, msglen, "cannot open tokenizer file '%s': %s", path, strerror(errno));
    int rc = -1;
    if (len < 4 || le32(buf) != TOKENIZER_LLMC_MAGIC) {
        data_fail(msg, msglen,
             "tokenizer file '%s' is not llm.c's tokenizer table: it must begin with the int32 magic 20240328 "
             "(starweave-prepare-data and llm.c's train_gpt2.py write gpt2_tokenizer.bin)",
             path);
        goto out;
    }
    if (len < HEADER_BYTES) {
        data_fail(msg, msglen, "tokenizer file '%s' is truncated: %zu bytes, its header is 256 int32 (1024 bytes)", path,
             len);
        goto out;
    }
    int32_t version = le32(buf + 4), vocab = le32(buf + 8);
    if (version != 1 && version != 2) {
        data_fail(msg, msglen, "tokenizer file '%s' has version %d: versions 1 and 2 are read", path, version);
        goto out;
    }
    if (vocab < 1) {
        data_fail(msg, msglen, "tokenizer file '%s' holds %d tokens: at least 1", path, vocab);
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
            data_fail(msg, msglen,
                 "tokenizer file '%s' is truncated: its header counts %d tokens, the file ends after %d (%zu bytes)",
                 path, vocab, i, len);
            goto out;
        }
        size_t k = buf[at++];
        if (k == 0) {
            data_fail(msg, msglen, "tokenizer file '%s': token %d has length 0 (every token has 1 to 255 bytes)", path, i);
            goto out;
        }
        if (k > len - at) {
            data_fail(msg, msglen,
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
        data_fail(msg, msglen, "tokenizer file '%s' has %zu bytes after its %d tokens: not a tokenizer table of %d tokens",
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

/* ---- --prompt-text: the prompt's GPT-2 token ids from the encoder ---- */

#ifndef SW_PREPARE_DATA_NAME /* the installed name (configure's program transform) */
#define SW_PREPARE_DATA_NAME "starweave-prepare-data"
#endif

const char *prompt_encoder_find(char *buf, size_t buflen, const char **how)
{
    const char *env = getenv("SW_PREPARE_DATA");
    if (env && *env) {
        *how = "$SW_PREPARE_DATA";
        return env;
    }
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
#if defined(SW_BUILDDIR) && defined(SW_SRCDIR)
        /* gpt_train of the build tree (libtool's examples/.libs/lt-gpt_train
         * included): the source tree's tools/prepare-data */
        size_t b = strlen(SW_BUILDDIR);
        if (!strncmp(exe, SW_BUILDDIR, b) && exe[b] == '/') {
            *how = "the source tree's, gpt_train running from the build tree";
            snprintf(exe, sizeof exe, "%s/tools/prepare-data", SW_SRCDIR);
            if (!realpath(exe, buf)) snprintf(buf, buflen, "%s", exe); /* PATH_MAX <= buflen */
            return buf;
        }
#endif
        /* installed: beside gpt_train (the same bindir) */
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, buflen, "%s/%s", exe, SW_PREPARE_DATA_NAME);
            if (access(buf, X_OK) == 0) {
                *how = "beside gpt_train";
                return buf;
            }
        }
    }
    *how = "from PATH";
    return SW_PREPARE_DATA_NAME;
}

/* the first line of s (at most 300 bytes), for messages */
static const char *first_line(char *s)
{
    s[strcspn(s, "\n")] = 0;
    if (strlen(s) > 300) strcpy(s + 297, "...");
    return s;
}

int prompt_encode(const char *encoder, const char *how, const char *text, int vocab, int32_t **ids, int *n,
                  char *msg, size_t msglen)
{
    *ids = NULL;
    *n = 0;
    int out[2], err[2];
    if (pipe(out) != 0) return data_fail(msg, msglen, "--prompt-text: pipe: %s", strerror(errno));
    if (pipe(err) != 0) {
        close(out[0]), close(out[1]);
        return data_fail(msg, msglen, "--prompt-text: pipe: %s", strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addclose(&fa, err[0]);
    posix_spawn_file_actions_addclose(&fa, out[1]);
    posix_spawn_file_actions_addclose(&fa, err[1]);
    /* no shell: the text is one argument, whatever its quotes or $(...) */
    char *argv[] = {(char *)encoder, (char *)"--encode", (char *)text, NULL};
    extern char **environ;
    pid_t pid;
    int rc = posix_spawnp(&pid, encoder, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]), close(err[1]);
    if (rc != 0) {
        close(out[0]), close(err[0]);
        return data_fail(msg, msglen,
                    "--prompt-text: cannot run the encoder '%s' (%s): %s; install starweave-prepare-data "
                    "(its --encode TEXT prints the token ids) or name it with SW_PREPARE_DATA=PROGRAM",
                    encoder, how, strerror(rc));
    }
    /* both pipes read to their ends (a child blocked on a full stderr pipe
     * would never finish), at most 120 s in all */
    size_t cap[2] = {4096, 4096}, len[2] = {0, 0};
    char *buf[2] = {malloc(cap[0]), malloc(cap[1])};
    struct pollfd pf[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2, timed_out = 0;
    if (!buf[0] || !buf[1]) { perror("malloc"); exit(1); }
    const time_t t0 = time(NULL);
    while (open_fds > 0) {
        int left = 120 - (int)(time(NULL) - t0);
        if (left <= 0) { timed_out = 1; break; }
        int r = poll(pf, 2, left * 1000);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { timed_out = r == 0; break; }
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !pf[i].revents) continue;
            if (len[i] + 1 >= cap[i]) {
                cap[i] *= 2;
                if (!(buf[i] = realloc(buf[i], cap[i]))) { perror("realloc"); exit(1); }
            }
            ssize_t got = read(pf[i].fd, buf[i] + len[i], cap[i] - len[i] - 1);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) { close(pf[i].fd); pf[i].fd = -1; open_fds--; continue; }
            len[i] += (size_t)got;
        }
    }
    if (timed_out) kill(pid, SIGKILL);
    for (int i = 0; i < 2; i++) {
        if (pf[i].fd >= 0) close(pf[i].fd);
        buf[i][len[i]] = 0;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    rc = -1;
    if (timed_out)
        data_fail(msg, msglen, "--prompt-text: the encoder '%s' (%s) did not finish in 120 s (killed)", encoder, how);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char what[64];
        if (WIFEXITED(status)) snprintf(what, sizeof what, "exited %d", WEXITSTATUS(status));
        else snprintf(what, sizeof what, "was killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        data_fail(msg, msglen, "--prompt-text: the encoder '%s' (%s) %s (it must exit 0): %s", encoder, how, what,
             len[1] ? first_line(buf[1]) : "nothing on stderr");
    } else {
        /* its output: token ids separated by spaces, one line */
        int max = 0;
        for (const char *s = buf[0]; *s;) {
            while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
            if (!*s) break;
            if (*n == max) {
                max = max ? 2 * max : 64;
                if (!(*ids = realloc(*ids, sizeof(int32_t) * (size_t)max))) { perror("realloc"); exit(1); }
            }
            char *end;
            errno = 0;
            long v = strtol(s, &end, 10);
            if (end == s || errno || (*end && !strchr(" \t\r\n", *end))) {
                data_fail(msg, msglen, "--prompt-text: the output of the encoder '%s' (%s) is not token ids separated "
                     "by spaces: '%s'", encoder, how, first_line(buf[0]));
                goto out;
            }
            if (v < 0 || v >= vocab) {
                data_fail(msg, msglen, "--prompt-text: token %d of the encoded prompt is %ld, not below vocab (%d): "
                     "every id must be in [0, %d) (the encoder '%s' (%s) is GPT-2's BPE, ids below 50257)",
                     *n, v, vocab, vocab, encoder, how);
                goto out;
            }
            (*ids)[(*n)++] = (int32_t)v;
            s = end;
        }
        if (*n == 0)
            data_fail(msg, msglen, "--prompt-text: the encoder '%s' (%s) printed no token ids for the prompt '%s' "
                 "(it must print at least one)", encoder, how, text);
        else
            rc = 0;
    }
out:
    if (rc) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    free(buf[0]);
    free(buf[1]);
    return rc;
}
