/* Helpers for the unit tests: plain programs, exit 0 = pass, 1 = fail,
 * 77 = skip, 99 = hard error (Automake's convention). Each check prints one
 * line. */
#ifndef STARWEAVE_TESTUTIL_H
#define STARWEAVE_TESTUTIL_H

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "starweave.h"

static int tu_passed, tu_failed;

/* ncuda: as sw_options.ncuda (-1: $STARPU_NCUDA, else every GPU) */
static inline void tu_init_ncuda(int *argc, char ***argv, int ncuda)
{
    sw_options opt;
    sw_options_default(&opt);
    opt.quiet = 1;
    opt.ncuda = ncuda;
    if (sw_init(argc, argv, &opt) != 0) {
        fprintf(stderr, "SKIP: StarPU could not start\n");
        exit(77);
    }
}

static inline void tu_init(int *argc, char ***argv) { tu_init_ncuda(argc, argv, -1); }

/* Deterministic values uniform in [-scale, scale) (xorshift). */
static inline void tu_rand(float *x, int64_t n, uint64_t seed, float scale)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = scale * (2.0f * (float)((s >> 40) & 0xffffff) / 16777216.0f - 1.0f);
    }
}

static inline sw_tensor *tu_tensor(const char *name, int64_t rows, int64_t cols, const float *data)
{
    sw_tensor *t = sw_tensor_new2d(name, SW_F32, rows, cols);
    if (data) sw_tensor_write_host(t, data);
    return t;
}

static inline float *tu_read(sw_tensor *t)
{
    float *x = malloc(sw_tensor_bytes(t));
    if (!x) { perror("malloc"); exit(99); }
    sw_tensor_read_host(t, x);
    return x;
}

/* Largest |x| over the finite values: a tolerance scaled by it stays finite
 * when the reference holds infinities (the lse of a fully masked row). */
static inline double tu_maxabs(const double *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* The rule for a pair where either value is not finite: they are compared
 * exactly, an infinity on either side must be the same infinity on the other
 * and NaN matches only NaN. (Through a tolerance, ref = -inf would give
 * limit = atol + rtol * inf = inf and pass any got.) */
static inline int tu_nonfinite_match(double got, double ref)
{
    return isnan(got) ? isnan(ref) : got == ref;
}

/* |got - ref| <= atol + rtol * |ref| element-wise where both are finite,
 * tu_nonfinite_match elsewhere; prints the worst. */
static inline int tu_close(const char *what, const float *got, const double *ref, int64_t n,
                           double rtol, double atol)
{
    double worst = 0; int64_t wi = 0; int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        const double g = got[i];
        double err, lim;
        if (isfinite(g) && isfinite(ref[i])) {
            err = fabs(g - ref[i]);
            lim = atol + rtol * fabs(ref[i]);
        } else {
            err = tu_nonfinite_match(g, ref[i]) ? 0 : INFINITY;
            lim = 0;
        }
        if (!(err <= lim)) ok = 0;
        double r = err / (lim > 0 ? lim : 1);
        if (!(r <= worst)) { worst = r; wi = i; }
    }
    if (ok) tu_passed++; else tu_failed++;
    printf("%s %s: %lld values, worst at %lld: got %.9g ref %.9g (err/limit %.3g)\n", ok ? "PASS" : "FAIL",
           what, (long long)n, (long long)wi, n ? got[wi] : 0.0, n ? ref[wi] : 0.0, worst);
    return ok;
}

static inline int tu_true(const char *what, int cond)
{
    if (cond) tu_passed++; else tu_failed++;
    printf("%s %s\n", cond ? "PASS" : "FAIL", what);
    return cond;
}

/* A precondition on the test's own reference or set-up, not a check of the
 * library: never counted in passed. If it does not hold, the test cannot
 * judge the library at all, so it stops with Automake's hard error (99). */
static inline void tu_require(const char *what, int cond)
{
    if (cond) {
        printf("ok (reference) %s\n", what);
        return;
    }
    printf("ERROR reference: %s\n", what);
    fflush(stdout);
    exit(99);
}

/* A call the library must refuse (a submit helper given mismatched
 * shapes): fn(arg) runs in a child process, which starts the runtime
 * itself (tu_init_child), so call this before tu_init: the parent forks
 * while it has no threads. Passes when the child exits with a non-zero
 * status within 60 s and its stderr holds `message`. */
static inline void tu_init_child(void)
{
    static char name[] = "refusal", *args[] = {name, NULL};
    int argc = 1;
    char **argv = args;
    tu_init(&argc, &argv);
}

static inline int tu_expect_refusal(const char *what, void (*fn)(void *), void *arg, const char *message)
{
    int fd[2];
    if (pipe(fd) != 0) { perror("pipe"); exit(99); }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(99); }
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        alarm(60);
        fn(arg);
        _exit(0); /* not refused */
    }
    close(fd[1]);
    char out[4096], sink[512];
    size_t n = 0;
    for (;;) { /* the whole of stderr, so that the child never blocks on a full pipe */
        ssize_t k = n < sizeof out - 1 ? read(fd[0], out + n, sizeof out - 1 - n) : read(fd[0], sink, sizeof sink);
        if (k <= 0) break;
        if (n < sizeof out - 1) n += (size_t)k;
    }
    out[n] = '\0';
    close(fd[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) { perror("waitpid"); exit(99); }
    const int refused = WIFEXITED(st) && WEXITSTATUS(st) != 0;
    const int ok = refused && strstr(out, message) != NULL;
    if (ok) tu_passed++; else tu_failed++;
    if (WIFEXITED(st))
        printf("%s %s: %s (exit %d), message \"%s\" %s\n", ok ? "PASS" : "FAIL", what,
               refused ? "refused" : "not refused", WEXITSTATUS(st), message,
               strstr(out, message) ? "printed" : "missing");
    else
        printf("FAIL %s: child killed by signal %d\n", what, WIFSIGNALED(st) ? WTERMSIG(st) : -1);
    if (!ok) printf("  child stderr:\n%s\n", out);
    return ok;
}

/* Central differences: g[i] = d loss(ctx) / d v[i] for i < n, where v is
 * part of what loss reads through ctx. */
static inline void tu_fd_grad(double (*loss)(const void *), const void *ctx, double *v, int64_t n, double *g)
{
    const double h = 1e-5;
    for (int64_t i = 0; i < n; i++) {
        double s = v[i];
        v[i] = s + h;
        double lp = loss(ctx);
        v[i] = s - h;
        double lm = loss(ctx);
        v[i] = s;
        g[i] = (lp - lm) / (2 * h);
    }
}

static inline void tu_to_double(double *d, const float *f, int64_t n)
{
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
}

/* Rounds over the CPU GEMM backends. A test submits its GEMMs through
 * tu_gemm / tu_gemm_bias (a direct sw_gemm_cpu call adds 1 to
 * *tu_gemm_count() itself) and writes tu_gemm_desc(), sw_gemm_describe of
 * the backend under test, into its lines. */
static inline int64_t *tu_gemm_count(void)
{
    static int64_t n; /* GEMMs the current round submitted */
    return &n;
}
enum { TU_GEMM_DESC = 160 };
static inline char *tu_gemm_desc(void)
{
    static char d[TU_GEMM_DESC];
    return d;
}
static inline void tu_gemm(starpu_data_handle_t A, int ta, starpu_data_handle_t B, int tb, starpu_data_handle_t C,
                           float alpha, float beta)
{
    ++*tu_gemm_count();
    sw_gemm(A, ta, B, tb, C, alpha, beta);
}
static inline void tu_gemm_bias(starpu_data_handle_t A, int ta, starpu_data_handle_t B, int tb,
                                starpu_data_handle_t bias, starpu_data_handle_t C)
{
    ++*tu_gemm_count();
    sw_gemm_bias(A, ta, B, tb, bias, C);
}

/* fn(arg) once with every CPU GEMM backend of the build (a SKIP line for
 * one it lacks; the backend is restored afterwards), then a check from the
 * event counters that the round's GEMMs all ran where they should: on the
 * backend asked for and none on the other, and with bf16 operands (bf16 !=
 * 0) every one a bf16 GEMM, computed by the backend asked for (on operands
 * widened to fp32 where it cannot multiply bf16: OpenBLAS always, oneDNN
 * without AVX512-BF16); and that sw_gemm_describe names the backend. */
static inline void tu_each_gemm_backend(const char *what, void (*fn)(void *), void *arg, int bf16)
{
    const sw_gemm_backend saved = sw_gemm_get_backend();
    for (int be = SW_GEMM_OPENBLAS; be <= SW_GEMM_ONEDNN; be++) {
        const char *name = sw_gemm_backend_name(be), *desc = tu_gemm_desc();
        char msg[256], line[512];
        if (sw_gemm_set_backend((sw_gemm_backend)be, msg, sizeof msg) < 0) {
            printf("SKIP %s with %s: %s\n", what, name, msg);
            continue;
        }
        sw_gemm_describe(tu_gemm_desc(), TU_GEMM_DESC);
        sw_counters_reset();
        *tu_gemm_count() = 0;
        fn(arg);
        starpu_task_wait_for_all();
        const int64_t n = *tu_gemm_count();
        const int dnn_runs = be == SW_GEMM_ONEDNN, widened = bf16 && !sw_gemm_bf16_native();
        const int64_t blas = sw_counter_get(SW_COUNT_GEMM_OPENBLAS), dnn = sw_counter_get(SW_COUNT_GEMM_ONEDNN),
                      b16 = sw_counter_get(SW_COUNT_GEMM_BF16), wide = sw_counter_get(SW_COUNT_GEMM_WIDENED);
        snprintf(line, sizeof line,
                 "%s with %s: counters gemm_openblas=%lld gemm_onednn=%lld gemm_bf16=%lld gemm_widened=%lld "
                 "(expected %lld, %lld, %lld, %lld: %s computed all %lld GEMMs%s), described as [%s]",
                 what, name, (long long)blas, (long long)dnn, (long long)b16, (long long)wide,
                 (long long)(dnn_runs ? 0 : n), (long long)(dnn_runs ? n : 0), (long long)(bf16 ? n : 0),
                 (long long)(widened ? n : 0), name, (long long)n,
                 widened ? ", widened" : bf16 ? ", bf16 natively" : "", desc);
        tu_true(line, n > 0 && blas == (dnn_runs ? 0 : n) && dnn == (dnn_runs ? n : 0) && b16 == (bf16 ? n : 0) &&
                          wide == (widened ? n : 0) && !strncmp(desc, name, strlen(name)) &&
                          desc[strlen(name)] == ' ');
    }
    sw_gemm_set_backend(saved, NULL, 0);
}

static inline int tu_finish(void)
{
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    sw_shutdown();
    return tu_failed ? 1 : 0;
}

/* For MPI tests: a check made on every rank; PASS printed by rank 0, FAIL
 * by every rank that fails. */
static inline int tu_check_ranks(const char *what, int cond)
{
    int me;
    SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    if (cond) tu_passed++; else tu_failed++;
    if (!cond) printf("FAIL rank %d: %s\n", me, what);
    else if (me == 0) printf("PASS %s\n", what);
    fflush(stdout);
    return cond;
}

/* For MPI tests, a requirement each rank checks alone (a GPU, say): 1 when
 * every rank meets it; otherwise every rank prints a SKIP line (rank 0 with
 * its reason `why`, or that another rank failed it; the scripts count one
 * line per rank) and 0 is returned: the caller shuts down and exits 77. */
static inline int tu_all_ranks_can(int ok, const char *why)
{
    if (sw_world_min(ok)) return 1;
    if (sw_rank() != 0) printf("SKIP (rank %d): as rank 0\n", sw_rank());
    else printf("SKIP: %s\n", ok ? "another rank cannot run this test" : why);
    fflush(stdout);
    return 0;
}

/* For MPI tests: one verdict summed over every rank, printed by rank 0. */
static inline int tu_finish_all(void)
{
    int local[2] = {tu_passed, tu_failed}, total[2], me;
    SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    SW_CHECK(MPI_Allreduce(local, total, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (me == 0) printf("%d passed, %d failed (all ranks)\n", total[0], total[1]);
    fflush(stdout);
    sw_shutdown();
    return total[1] ? 1 : 0;
}

#endif
