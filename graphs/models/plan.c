/* The planner (plan.h, docs/planner.md): enumeration by the programs' rules,
 * memory and traffic from the library's models (sw_gpt_plan_rank), a
 * deterministic estimate from a machine's figures. */
#define _GNU_SOURCE /* pthread_setaffinity_np, sched_getcpu */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "layers/layer_util.h"
#include "step/schedule.h"
#include "starweave/plan.h"
#include "starweave/mesh.h"
#include "starweave/ops.h"
#include "starweave/runtime.h"

/* ------------------------------------------------------------ machine */

int sw_plan_machine_read(sw_plan_machine *m, const char *path, char *msg, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(msg, n, "cannot read machine file '%s'", path);
        return -1;
    }
    char line[512];
    int ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p) continue;
        char key[64], src[256] = "";
        double v;
        int used = 0;
        if (sscanf(p, "%63s %lf%n", key, &v, &used) != 2 || !(v >= 0) || !isfinite(v)) {
            snprintf(msg, n, "machine file '%s' line %d: must be KEY VALUE [SOURCE] with a VALUE not negative", path, ln);
            fclose(f);
            return -1;
        }
        const char *rest = p + used;
        rest += strspn(rest, " \t");
        size_t len = strcspn(rest, "\n");
        if (len) snprintf(src, sizeof src, "%.*s", (int)len, rest);
        else snprintf(src, sizeof src, "typed in %s", path);
        struct { const char *k; double *v; char *s; size_t sn; } keys[] = {
            {"gemm_gflops", &m->gemm_gflops, m->gemm_src, sizeof m->gemm_src},
            {"cores", &m->cores, m->cores_src, sizeof m->cores_src},
            {"intra_gbs", &m->intra_gbs, m->intra_src, sizeof m->intra_src},
            {"intra_us", &m->intra_us, m->intra_src, sizeof m->intra_src},
            {"inter_gbs", &m->inter_gbs, m->inter_src, sizeof m->inter_src},
            {"inter_us", &m->inter_us, m->inter_src, sizeof m->inter_src},
            {"task_us", &m->task_us, m->task_src, sizeof m->task_src},
            {"gemm_half_rows", &m->gemm_half_rows, m->rows_src, sizeof m->rows_src},
            {"adam_ns", &m->adam_ns, m->adam_src, sizeof m->adam_src},
            {"p2p_spin", &m->p2p_spin, m->spin_src, sizeof m->spin_src},
            {"elem_ns", &m->elem_ns, m->elem_src, sizeof m->elem_src},
            {"coll_offload", &m->coll_offload, m->coll_src, sizeof m->coll_src},
            {"gemm_shared", &m->gemm_shared, m->shared_src, sizeof m->shared_src},
            {"attn_gflops", &m->attn_gflops, m->attn_src, sizeof m->attn_src},
            {"attn_probs_gflops", &m->attn_probs_gflops, m->attn_probs_src, sizeof m->attn_probs_src},
            {"ce_ns", &m->ce_ns, m->ce_src, sizeof m->ce_src},
            {"act_ns", &m->act_ns, m->act_src, sizeof m->act_src},
            {"adaln_ns", &m->adaln_ns, m->adaln_src, sizeof m->adaln_src},
            {"copy_ns", &m->copy_ns, m->copy_src, sizeof m->copy_src},
        };
        size_t k = 0;
        while (k < sizeof keys / sizeof keys[0] && strcmp(keys[k].k, key)) k++;
        if (k == sizeof keys / sizeof keys[0]) {
            snprintf(msg, n, "machine file '%s' line %d: unknown key '%s' (gemm_gflops, cores, intra_gbs, intra_us, "
                     "inter_gbs, inter_us, task_us, gemm_half_rows, adam_ns, p2p_spin, elem_ns, coll_offload, gemm_shared, attn_gflops, "
                     "attn_probs_gflops, ce_ns, act_ns, adaln_ns, copy_ns)", path, ln, key);
            fclose(f);
            return -1;
        }
        if (v == 0 && k < 7) { /* the keys after the first seven may be 0: the term left out */
            snprintf(msg, n, "machine file '%s' line %d: %s must be positive (%g)", path, ln, key, v);
            fclose(f);
            return -1;
        }
        if ((keys[k].v == &m->coll_offload && v != 0 && v != 1) || (keys[k].v == &m->gemm_shared && v > 1)) {
            snprintf(msg, n, "machine file '%s' line %d: %s must be %s (%g)", path, ln, key,
                     keys[k].v == &m->coll_offload ? "0 or 1" : "at most 1 (a fraction of the rate)", v);
            fclose(f);
            return -1;
        }
        *keys[k].v = v;
        snprintf(keys[k].s, keys[k].sn, "%s", src);
    }
    fclose(f);
    return 0;
}

/* StarPU's history model of codelet `name` under dir (codelets/45/NAME.HOST):
 * GFLOP/s by the codelet's FLOPs over every recorded size, weighted by its
 * samples; 0 if none */
static double perfmodel_gflops(const char *dir, const char *name, char *file, size_t fn)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/codelets/45", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    double flops = 0, us = 0;
    const size_t nl = strlen(name);
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, name, nl) || e->d_name[nl] != '.') continue; /* sw_gemm_bias.* is another codelet */
        char p[1400], line[512];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        FILE *f = fopen(p, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f)) {
            char hash[32];
            double size, fl, mean, dev, sum, sum2, cnt;
            if (sscanf(line, "%31s %lf %lf %lf %lf %lf %lf %lf", hash, &size, &fl, &mean, &dev, &sum, &sum2, &cnt) == 8 &&
                strspn(hash, "0123456789abcdef") == 8 && fl > 0 && mean > 0 && cnt > 0) {
                flops += fl * cnt, us += mean * cnt;
                snprintf(file, fn, "%s", p);
            }
        }
        fclose(f);
    }
    closedir(d);
    return us > 0 ? flops / us / 1e3 : 0;
}

/* The kernels' rates, timed inside a StarPU task: on a worker, where the
 * codelets run -- timed on the main thread, they shared its core with the
 * worker polling for tasks, and AdamW came out at 18-32 ns per parameter
 * against 1.3 in a program of its own (2026-11-28) */
typedef struct {
    int N, K, cores;
    double rate[2], secs[2], adam_ns, elem_ns, shared;
    int runs[2], adam_reps, pinned, loads;
} kernel_rates;

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* GEMM operands for up to 256 rows x N x K in the three forms a linear layer's tasks call -- forward Y = X W^T
 * ([M, K] x [N, K]^T), backward dX = dY W and dW = dY^T X -- whose rates differ (oneDNN's backward forms are
 * slower). `sets` of them one after the other in memory (together at least mib MiB): each run takes the
 * next, so that it reads its operands from memory as a task does whose operands other tasks wrote (the same
 * GEMM on operands in cache is faster than the tasks run it: BENCHMARKS.md, "The planner's machine as the
 * tasks run it") */
typedef struct {
    float *buf;
    size_t per;
    int sets, next, N, K;
} gemm_operands;

static void operands_init(gemm_operands *o, int N, int K, double mib)
{
    o->N = N, o->K = K, o->next = 0;
    o->per = 2 * ((size_t)256 * K + (size_t)K * N) + (size_t)256 * N; /* X, W, Y, dX, dW */
    o->sets = (int)fmax(1, ceil(mib * 1024 * 1024 / (4.0 * (double)o->per)));
    o->buf = sw_xcalloc(o->per * (size_t)o->sets, sizeof *o->buf);
    for (size_t i = 0; i < o->per * (size_t)o->sets; i++) o->buf[i] = (float)(i % 7) * 0.1f;
}

/* one GEMM of each form at M rows: 3 x 2 M N K FLOPs */
static void operands_gemm(gemm_operands *o, int M)
{
    const int N = o->N, K = o->K;
    float *x = o->buf + o->per * (size_t)o->next, *w = x + (size_t)256 * K, *y = w + (size_t)K * N, *dx = y + (size_t)256 * N,
          *dw = dx + (size_t)256 * K;
    o->next = (o->next + 1) % o->sets;
    sw_gemm_cpu(0, 1, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N, SW_F32);
    sw_gemm_cpu(0, 0, M, K, N, 1.0f, y, N, w, K, 0.0f, dx, K, SW_F32);
    sw_gemm_cpu(1, 0, N, K, M, 1.0f, y, N, x, K, 0.0f, dw, K, SW_F32);
}

/* sw_gemm_cpu's rate (GFLOP/s) at M rows of o, its three forms together: the best of 5 rounds of at least
 * 30 ms and 3 runs; the rounds' seconds and runs into secs and runs */
static double gemm_best_rate(gemm_operands *o, int M, double *secs, int *runs)
{
    double best = 0;
    *secs = 0, *runs = 0;
    for (int round = 0; round < 5; round++) {
        struct timespec t0;
        int reps = 0;
        double s = 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            operands_gemm(o, M);
            reps++;
            s = seconds_since(&t0);
        } while (s < 0.03 || reps < 3);
        best = fmax(best, 3 * 2.0 * M * o->N * (double)o->K * reps / s / 1e9);
        *secs += s, *runs += reps;
    }
    return best;
}

/* the load of another core: a GEMM run again and again on a thread bound to that core (cpu) until told to
 * stop; pinned says whether the binding took. Unbound, the thread inherited the measuring worker's binding
 * and shared its core: half the rate, whatever the cores (BENCHMARKS.md) */
typedef struct {
    int N, K, cpu, pinned, *stop;
} gemm_load;

static int bind_to(pthread_t t, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t, sizeof set, &set) == 0;
}

static void *gemm_spin(void *arg)
{
    gemm_load *l = arg;
    l->pinned = bind_to(pthread_self(), l->cpu);
    gemm_operands o;
    operands_init(&o, l->N, l->K, 16); /* a load of its own, past its core's cache */
    while (!__atomic_load_n(l->stop, __ATOMIC_ACQUIRE)) operands_gemm(&o, 256);
    free(o.buf);
    return NULL;
}

static void measure_kernels(void *buffers[], void *arg)
{
    (void)buffers;
    kernel_rates *k = arg;
    /* the measuring thread on the core it runs on, for the measurement (its binding restored after) */
    pthread_t self = pthread_self();
    cpu_set_t was;
    int me = sched_getcpu(), saved = pthread_getaffinity_np(self, sizeof was, &was) == 0;
    if (me >= 0) bind_to(self, me);
    /* the GEMM at 16 and 256 rows: the rate's dependence on the rows of a tile */
    int rows[2] = {16, 256};
    gemm_operands o;
    operands_init(&o, k->N, k->K, 64);
    /* each rate the best of 5 rounds of at least 30 ms: a round that shared the core (with the other
     * hyperthread's work, say) says nothing of the kernel (one run of 0.15 s gave 30.6 GFLOP/s at 16 rows,
     * the next 62.2, on 2026-11-28) */
    for (int j = 0; j < 2; j++) {
        operands_gemm(&o, rows[j]); /* warm-up */
        k->rate[j] = gemm_best_rate(&o, rows[j], &k->secs[j], &k->runs[j]);
    }
    /* the same 256-row GEMM while every other core of the node runs one: what a core keeps of its rate when
     * all compute at once (cores that are one physical core's hyperthreads share its units) */
    k->shared = 0, k->pinned = 0;
    cpu_set_t allowed; /* the process's cores: the main thread's (StarPU binds its workers, not it) */
    if (k->cores > 1 && me >= 0 && sched_getaffinity(getpid(), sizeof allowed, &allowed) == 0) {
        int stop = 0, nth = 0;
        gemm_load load[63];
        pthread_t th[63];
        for (int cpu = 0; cpu < CPU_SETSIZE && nth < k->cores - 1 && nth < 63; cpu++) {
            if (cpu == me || !CPU_ISSET(cpu, &allowed)) continue;
            load[nth] = (gemm_load){.N = k->N, .K = k->K, .cpu = cpu, .stop = &stop};
            if (pthread_create(&th[nth], NULL, gemm_spin, &load[nth]) == 0) nth++;
            else break;
        }
        double secs;
        int runs;
        double best = gemm_best_rate(&o, 256, &secs, &runs);
        __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < nth; i++) pthread_join(th[i], NULL), k->pinned += load[i].pinned;
        if (nth == k->cores - 1 || nth == 63) k->shared = best;
        k->loads = nth;
    }
    free(o.buf);
    if (saved) pthread_setaffinity_np(self, sizeof was, &was);
    /* the optimizer: AdamW's update (decoupled weight decay) over 4M parameters, p g m v in fp32, one
     * thread: the fastest of 9 passes after an untimed one (the first touches the moments' fresh pages) */
    const size_t P = (size_t)1 << 22;
    float *p = sw_xcalloc(P, sizeof *p), *g = sw_xcalloc(P, sizeof *g), *mm = sw_xcalloc(P, sizeof *mm),
          *v = sw_xcalloc(P, sizeof *v);
    for (size_t i = 0; i < P; i++) g[i] = (float)(i % 11) * 1e-3f, p[i] = 0.01f;
    double best = 0;
    for (int pass = 0; pass < 10; pass++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t i = 0; i < P; i++) {
            mm[i] = 0.9f * mm[i] + 0.1f * g[i];
            v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
            p[i] -= 1e-4f * (mm[i] / (sqrtf(v[i]) + 1e-8f) + 0.1f * p[i]);
        }
        double s = seconds_since(&t0);
        if (pass > 0 && (best == 0 || s < best)) best = s;
    }
    k->adam_ns = best * 1e9 / (double)P, k->adam_reps = 9;
    /* a memory-bound pass over an activation: an RMSNorm forward (each row's sum of squares, then the row
     * scaled by the weight) over the same 4M elements in rows of N, the fastest of 9 after a first */
    best = 0;
    for (int pass = 0; pass < 10; pass++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t r = 0; r + (size_t)k->N <= P; r += (size_t)k->N) {
            float ss = 0;
            for (int i = 0; i < k->N; i++) ss += g[r + i] * g[r + i];
            const float inv = 1.0f / sqrtf(ss / (float)k->N + 1e-5f);
            for (int i = 0; i < k->N; i++) v[r + i] = g[r + i] * inv * p[i];
        }
        double s = seconds_since(&t0);
        if (pass > 0 && (best == 0 || s < best)) best = s;
    }
    k->elem_ns = best * 1e9 / (double)(P / (size_t)k->N * (size_t)k->N);
    free(p), free(g), free(mm), free(v);
}
/* run in simulation too: the figures are this machine's either way */
static struct starpu_codelet measure_cl = {
    .cpu_funcs = {measure_kernels}, .nbuffers = 0, .name = "sw_plan_measure", .flags = STARPU_CODELET_SIMGRID_EXECUTE};

void sw_plan_machine_here(sw_plan_machine *m, const char *dir, int hidden)
{
    memset(m, 0, sizeof *m);
    char file[1400] = "", home[1024];
    const char *dirs[3] = {dir, getenv("STARPU_PERF_MODEL_DIR"), NULL};
    const char *sh = getenv("STARPU_HOME") ? getenv("STARPU_HOME") : getenv("HOME");
    if (sh) snprintf(home, sizeof home, "%s/.starpu/sampling", sh), dirs[2] = home;
    for (int i = 0; i < 3 && !m->gemm_gflops; i++)
        if (dirs[i] && (m->gemm_gflops = perfmodel_gflops(dirs[i], "sw_gemm", file, sizeof file)) > 0)
            snprintf(m->gemm_src, sizeof m->gemm_src, "measured: StarPU's history model %s", file);
    /* the attention tiles from a calibration given (dir, STARPU_PERF_MODEL_DIR): the rates the simulated
     * graph runs them at, the same in every run (measured now, the two kinds' ratio moves with the load,
     * and near-tied layouts with it: docs/planner.md); not from a home's sampling directory, which holds
     * every run's tiles. In the estimate's count (backward twice the forward) from the codelets' own FLOPs:
     * forward 4 per pair, the flash backward 10 (it recomputes the probabilities), the other 8 */
    for (int i = 0; i < 2 && !(m->attn_gflops > 0); i++) {
        if (!dirs[i]) continue;
        double r[4];
        const char *cl[4] = {"sw_attn_fwd", "sw_attn_bwd", "sw_attn_probs_fwd", "sw_attn_probs_bwd"};
        for (int k = 0; k < 4; k++) r[k] = perfmodel_gflops(dirs[i], cl[k], file, sizeof file);
        if (r[0] > 0 && r[1] > 0 && r[2] > 0 && r[3] > 0) {
            m->attn_gflops = 12.0 / (4.0 / r[0] + 10.0 / r[1]);
            m->attn_probs_gflops = 12.0 / (4.0 / r[2] + 8.0 / r[3]);
            snprintf(m->attn_src, sizeof m->attn_src, "measured: StarPU's history models of sw_attn_fwd and _bwd in %s "
                     "(%.1f and %.1f GFLOP/s by their FLOPs)", dirs[i], r[0], r[1]);
            snprintf(m->attn_probs_src, sizeof m->attn_probs_src, "measured: StarPU's history models of "
                     "sw_attn_probs_fwd and _bwd in %s (%.1f and %.1f GFLOP/s by their FLOPs)", dirs[i], r[2], r[3]);
        }
    }
    /* one worker's kernels, now, in a task of their own */
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    kernel_rates k = {.N = hidden > 0 ? hidden : 768, .K = hidden > 0 ? hidden : 768, .cores = nc > 0 ? (int)nc : 1};
    struct starpu_task *task = starpu_task_create();
    task->cl = &measure_cl, task->cl_arg = &k, task->synchronous = 1;
    if (starpu_task_submit(task) != 0) measure_kernels(NULL, &k); /* no worker: here */
    const double *rate = k.rate;
    /* rate(M) = R M / (M + H): from the two rates, H = 4096 (1 - q) / (256 q - 16), q = rate(16) / rate(256) */
    double q = rate[0] / rate[1], H = q >= 1 ? 0 : q <= 1.0 / 16 ? 1e4 : 4096 * (1 - q) / (256 * q - 16);
    m->gemm_half_rows = H;
    snprintf(m->rows_src, sizeof m->rows_src, "measured now: sw_gemm_cpu at 16 and 256 rows x %d x %d, forward and "
             "backward forms, operands from memory, one worker, best of 5 rounds: %.1f and %.1f GFLOP/s (%d and %d runs)", k.N, k.K, rate[0], rate[1], k.runs[0], k.runs[1]);
    if (m->gemm_gflops > 0 && m->gemm_gflops * 3 < rate[1]) {
        /* a history is every run recorded under that home, loaded ones included: said, not silently used */
        size_t l = strlen(m->gemm_src);
        snprintf(m->gemm_src + l, sizeof m->gemm_src - l, " -- WARNING: %.1fx below %.1f measured now",
                 rate[1] / m->gemm_gflops, rate[1]);
        fprintf(stderr, "plan: warning: StarPU's history model of sw_gemm (%s) gives %.2f GFLOP/s, %.1fx below sw_gemm_cpu "
                "measured now at 256 rows (%.1f GFLOP/s): its runs were probably made under load; plan with STARPU_HOME "
                "set to an empty directory (the GEMM then measured at start) or with --plan-machine FILE\n",
                file, m->gemm_gflops, rate[1] / m->gemm_gflops, rate[1]);
    }
    if (!m->gemm_gflops) {
        m->gemm_gflops = rate[1] * (256 + H) / 256;
        snprintf(m->gemm_src, sizeof m->gemm_src, "measured now: sw_gemm_cpu 256x%dx%d, forward and backward forms, operands from memory, one worker, %d runs in %.2f s, "
                 "best round %.1f GFLOP/s, extrapolated to many rows (no StarPU model of sw_gemm found)", k.N, k.K, k.runs[1],
                 k.secs[1], rate[1]);
    }
    m->gemm_shared = k.shared > 0 ? fmin(1, k.shared / rate[1]) : 1;
    if (k.shared > 0)
        snprintf(m->shared_src, sizeof m->shared_src, "measured now: sw_gemm_cpu at 256 rows, best of 5 rounds, %.1f GFLOP/s "
                 "while the node's %d other core(s) ran the same GEMM (%d of them bound each to a core of its own), "
                 "against %.1f alone", k.shared, k.cores - 1, k.pinned, rate[1]);
    else if (k.cores > 1)
        snprintf(m->shared_src, sizeof m->shared_src, "not measured: %d of the node's %d other core(s) could take a load "
                 "(the process's cores, the measuring worker's known)", k.loads, k.cores - 1);
    else snprintf(m->shared_src, sizeof m->shared_src, "one core: nothing shares it");
    m->adam_ns = k.adam_ns;
    snprintf(m->adam_src, sizeof m->adam_src, "measured now: an AdamW loop of the planner's over 4194304 fp32 "
             "parameters, one worker, the fastest of %d passes after a first (not the codelet)", k.adam_reps);
    /* priced (left out until gemm_shared was measured on a core of its own: beside that artifact's 0.5 it
     * made --verify's ranking at 4 ranks worse, W124, 2026-11-29) */
    m->elem_ns = k.elem_ns;
    snprintf(m->elem_src, sizeof m->elem_src, "measured now: the planner's RMSNorm forward over 4M elements in rows of %d, "
             "one worker, the fastest of 9 passes after a first", k.N);
    m->cores = k.cores;
    snprintf(m->cores_src, sizeof m->cores_src, "counted (sysconf, online CPUs of this node)");
    m->intra_gbs = m->inter_gbs = 0.83, m->intra_us = m->inter_us = 16;
    snprintf(m->intra_src, sizeof m->intra_src, "measured in BENCHMARKS.md (bench/sim-platform.sh --preset vm-measured: "
             "2 ranks of this VM through shared memory), not by the planner");
    snprintf(m->inter_src, sizeof m->inter_src, "the same vm-measured figures (this machine has one node)");
    m->coll_offload = 0;
    snprintf(m->coll_src, sizeof m->coll_src, "gpt_train's default --collective-algo auto: buckets over 4 MiB reduced by "
             "StarPU-MPI's ring or direct algorithm, whose tasks take the workers");
    m->p2p_spin = 1;
    snprintf(m->spin_src, sizeof m->spin_src, "typed from docs/simulation.md's traces (StarPU-MPI's progression thread "
             "polls without sleeping while a receive is posted): ASSUMPTION, one core");
    { /* StarPU's cost per task as the graphs' tasks have it (sw_task_cost_us): submitted and run on this
       * runtime's worker(s), now */
        const int N = 2000;
        m->task_us = sw_task_cost_us(0, N);
        snprintf(m->task_src, sizeof m->task_src, "measured now: %d StarPU tasks, each reading two 128x128 tiles and "
                 "writing a temporary of its own, submitted and run in %.3f s (%u CPU worker(s))", N,
                 m->task_us * N * 1e-6, starpu_cpu_worker_get_count());
    }
}

/* The model's other kernels as the library's codelets run them: tasks on a worker, each timed from its
 * submission to its end, the best of 5 after a first. Left at 0 (the estimate then prices the attention at
 * the GEMM rate and leaves the others out) in simulation, where codelets do not run. */
typedef enum { OPS_ATTN, OPS_ATTN_PROBS, OPS_CE, OPS_ACT, OPS_ADALN, OPS_ADAM, OPS_COPY } ops_kind;

typedef struct {
    sw_tensor *t[11];
    sw_attn_args at;
    sw_adamw_args ad;
    int64_t vocab;
    int swiglu;
} ops_bench;

static void ops_submit(ops_kind kind, ops_bench *b)
{
    starpu_data_handle_t h[11];
    for (int i = 0; i < 11; i++) h[i] = b->t[i] ? sw_tensor_whole(b->t[i], STARPU_RW) : NULL;
    switch (kind) {
    case OPS_ATTN: /* q k v o lse dout dq dk dv */
        sw_attn_fwd(h[0], h[1], h[2], h[3], h[4], &b->at);
        sw_attn_bwd(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], &b->at);
        break;
    case OPS_ATTN_PROBS: /* the same and probs */
        sw_attn_probs_fwd(h[0], h[1], h[2], h[3], h[4], h[9], &b->at);
        sw_attn_probs_bwd(h[0], h[1], h[2], h[9], h[5], h[6], h[7], h[8], &b->at);
        break;
    case OPS_CE: /* logits mx se tgt targets */
        sw_ce_max(h[0], h[1], 0, b->vocab);
        sw_ce_target(h[0], h[4], h[3], 0);
        sw_ce_sumexp(h[0], h[1], h[2], 0, b->vocab);
        sw_ce_bwd(h[0], h[1], h[2], h[4], 0, b->vocab, 1.0f);
        break;
    case OPS_ACT: /* x (gate) y (up) dy dgate dup */
        if (b->swiglu) sw_swiglu_fwd(h[0], h[1], h[2]), sw_swiglu_bwd(h[0], h[1], h[2], h[3], h[4]);
        else sw_gelu_fwd(h[0], h[1]), sw_gelu_bwd(h[0], h[1]);
        break;
    case OPS_ADALN: /* x shift scale y dy dx dshift dscale (then x y dx as res branch out and dbranch) */
        sw_modulate_fwd(h[0], h[1], h[2], h[3]);
        sw_modulate_bwd(h[0], h[2], h[4], h[5], h[6], h[7]);
        sw_gate_fwd(h[0], h[1], h[3], h[8]);
        sw_gate_bwd(h[3], h[1], h[4], h[5], h[6]);
        break;
    case OPS_ADAM: /* param grad m v */
        sw_adamw(h[0], h[1], h[2], h[3], &b->ad);
        break;
    case OPS_COPY: /* grad bucket: a gradient bucket's first micro-batch (copied in) and a later one (added) */
        sw_copy_flat(h[0], h[1], 0);
        sw_copy_flat(h[0], h[1], 1);
        break;
    }
}

/* the best of 5 timed runs (after a first) of kind's tasks on b's tensors, seconds; the tensors freed */
static double ops_time(ops_kind kind, ops_bench *b)
{
    double best = 0;
    for (int i = 0; i < 11; i++)
        if (b->t[i]) sw_tensor_fill(b->t[i], i == 4 && kind == OPS_CE ? 0.0f : 0.01f * (float)(i + 1));
    for (int rep = 0; rep < 6; rep++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ops_submit(kind, b);
        starpu_task_wait_for_all();
        double s = seconds_since(&t0);
        if (rep > 0 && (best == 0 || s < best)) best = s;
    }
    for (int i = 0; i < 11; i++)
        if (b->t[i]) sw_tensor_free(b->t[i]), b->t[i] = NULL;
    return best;
}

void sw_plan_machine_kernels(sw_plan_machine *m, int head_dim, int seq, int ffn, int vocab, int swiglu)
{
    if (sw_simulated() || head_dim < 1 || seq < 1 || ffn < 1) return;
    ops_bench b;
    /* the attention tiles, forward and backward, causal, at the model's head dim over min(seq, 1024) rows and
     * heads enough for some 50 MFLOP forward, their FLOPs counted as the estimate counts them (half the
     * square, 4 d per pair forward, backward twice the forward): the flash tiles (recomputation selective
     * and full, and Ring: the backward recomputes the probabilities) and the tiles that keep the
     * probabilities (none) */
    int S = seq < 1024 ? seq : 1024, nh = (int)fmax(1, ceil(5e7 / (2.0 * S * S * head_dim)));
    const int calibrated = m->attn_gflops > 0 && m->attn_probs_gflops > 0; /* sw_plan_machine_here's */
    const double flops = 3.0 * 0.5 * 4.0 * S * (double)S * nh * head_dim;
    const char *an[10] = {"plan.q", "plan.k", "plan.v", "plan.o", "plan.lse", "plan.dout", "plan.dq", "plan.dk", "plan.dv", "plan.probs"};
    double *rate[2] = {&m->attn_gflops, &m->attn_probs_gflops};
    char *src[2] = {m->attn_src, m->attn_probs_src};
    for (int v = 0; v < 2 && !calibrated; v++) {
        memset(&b, 0, sizeof b);
        b.at = (sw_attn_args){.batch = 1, .nh = nh, .d = head_dim, .sq = S, .sk = S, .causal = 1,
                              .scale = 1.0f / sqrtf((float)head_dim), .heads_total = nh, .seq_total = S};
        for (int i = 0; i < 9 + v; i++)
            b.t[i] = sw_tensor_new2d(an[i], SW_F32, i == 9 ? (int64_t)nh * S : S, i == 9 ? S : i == 4 ? nh : (int64_t)nh * head_dim);
        double s = ops_time(v ? OPS_ATTN_PROBS : OPS_ATTN, &b);
        *rate[v] = flops / s / 1e9;
        snprintf(src[v], sizeof m->attn_src, "measured now: sw_attn%s_fwd and _bwd, %d heads of %d x %d, causal, one worker, "
                 "best of 5: %.2f ms", v ? "_probs" : "", nh, S, head_dim, s * 1e3);
    }
    /* the cross-entropy's passes (maximum, target, sum of exponentials, gradient) over 256 rows of logits */
    int64_t vb = vocab < 8192 ? vocab : 8192;
    if (vb > 0) {
        memset(&b, 0, sizeof b);
        b.vocab = vb;
        b.t[0] = sw_tensor_new2d("plan.logits", SW_F32, 256, vb);
        b.t[1] = sw_tensor_new2d("plan.mx", SW_F32, 256, 1), b.t[2] = sw_tensor_new2d("plan.se", SW_F32, 256, 1);
        b.t[3] = sw_tensor_new2d("plan.tgt", SW_F32, 256, 1), b.t[4] = sw_tensor_new2d("plan.targets", SW_I32, 256, 1);
        double s = ops_time(OPS_CE, &b);
        m->ce_ns = s * 1e9 / (256.0 * (double)vb);
        snprintf(m->ce_src, sizeof m->ce_src, "measured now: sw_ce_max, _target, _sumexp and _bwd over 256 x %lld logits, "
                 "one worker, best of 5: %.2f ms", (long long)vb, s * 1e3);
    }
    /* the MLP's activation forward and backward over 256 rows of the model's ffn */
    memset(&b, 0, sizeof b);
    b.swiglu = swiglu;
    for (int i = 0; i < (swiglu ? 5 : 2); i++) b.t[i] = sw_tensor_new2d("plan.act", SW_F32, 256, ffn);
    double s = ops_time(OPS_ACT, &b);
    m->act_ns = s * 1e9 / (256.0 * ffn);
    snprintf(m->act_src, sizeof m->act_src, "measured now: sw_%s_fwd and _bwd over 256 x %d, one worker, best of 5: %.2f ms",
             swiglu ? "swiglu" : "gelu", ffn, s * 1e3);
    /* the DiT's adaLN modulation and gated residual, forward and backward, over 1024 rows of ffn / 4 (the
     * hidden) of 4 sequences */
    const int64_t ah = ffn / 4 > 0 ? ffn / 4 : 1;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < 9; i++) b.t[i] = sw_tensor_new2d("plan.adaln", SW_F32, i == 1 || i == 2 || i == 6 || i == 7 ? 4 : 1024, ah);
    s = ops_time(OPS_ADALN, &b);
    m->adaln_ns = s * 1e9 / (1024.0 * (double)ah);
    snprintf(m->adaln_src, sizeof m->adaln_src, "measured now: sw_modulate_fwd, _bwd, sw_gate_fwd and _bwd over 1024 x %lld "
             "of 4 sequences, one worker, best of 5: %.2f ms", (long long)ah, s * 1e3);
    /* the gradient buckets' passes: a copy and an add over 16M elements (64 MiB each: a model's gradients
     * stream from memory, not from a cache; at 4M this machine copied at twice the rate), per element and pass */
    const int64_t cr = 16384, cc = 1024;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < 2; i++) b.t[i] = sw_tensor_new2d("plan.bucket", SW_F32, cr, cc);
    s = ops_time(OPS_COPY, &b);
    m->copy_ns = s * 1e9 / (2.0 * (double)(cr * cc));
    snprintf(m->copy_src, sizeof m->copy_src, "measured now: sw_copy_flat copying and adding %lld elements, one "
             "worker, best of 5: %.2f ms", (long long)(cr * cc), s * 1e3);
    /* the optimizer: the AdamW codelet over 4M parameters (the planner's own loop, measure_kernels, is what
     * is left where codelets do not run) */
    memset(&b, 0, sizeof b);
    b.ad = (sw_adamw_args){.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1};
    for (int i = 0; i < 4; i++) b.t[i] = sw_tensor_new2d("plan.adam", SW_F32, 4096, 1024);
    s = ops_time(OPS_ADAM, &b);
    m->adam_ns = s * 1e9 / (4096.0 * 1024);
    snprintf(m->adam_src, sizeof m->adam_src, "measured now: the AdamW codelet over 4194304 fp32 parameters, one worker, "
             "best of 5: %.2f ms", s * 1e3);
}

/* one optional figure's line: "WHAT V UNIT per worker: SOURCE", or what the estimate does without it */
static void term(FILE *f, const char *prefix, double v, const char *what, const char *unit, const char *src,
                 const char *absent)
{
    if (v > 0) fprintf(f, "%s%s %.3g %s per worker: %s\n", prefix, what, v, unit, src);
    else fprintf(f, "%s%s\n", prefix, absent);
}

void sw_plan_machine_print(const sw_plan_machine *m, FILE *f, const char *prefix)
{
    fprintf(f, "%sGEMM %.2f GFLOP/s per worker: %s\n", prefix, m->gemm_gflops, m->gemm_src);
    fprintf(f, "%scores per node %.0f: %s\n", prefix, m->cores, m->cores_src);
    fprintf(f, "%sintra-node link %.3g GB/s, %.3g us: %s\n", prefix, m->intra_gbs, m->intra_us, m->intra_src);
    fprintf(f, "%sinter-node link %.3g GB/s, %.3g us: %s\n", prefix, m->inter_gbs, m->inter_us, m->inter_src);
    fprintf(f, "%scost per task %.3g us: %s\n", prefix, m->task_us, m->task_src);
    if (m->gemm_half_rows > 0)
        fprintf(f, "%sGEMM at half rate with %.3g rows per tile: %s\n", prefix, m->gemm_half_rows, m->rows_src);
    else fprintf(f, "%sGEMM rate independent of the rows per tile (gemm_half_rows not given)\n", prefix);
    term(f, prefix, m->adam_ns, "optimizer", "ns per parameter", m->adam_src, "optimizer's pass left out (adam_ns not given)");
    if (m->p2p_spin > 0)
        fprintf(f, "%sprogression thread polling %.3g core(s) under point-to-point layouts: %s\n", prefix, m->p2p_spin,
                m->spin_src);
    else fprintf(f, "%sprogression threads' polling left out (p2p_spin not given)\n", prefix);
    if (m->gemm_shared > 0 && m->gemm_shared < 1)
        fprintf(f, "%sGEMM at %.3g of the rate while every core of the node computes: %s\n", prefix, m->gemm_shared, m->shared_src);
    else fprintf(f, "%sGEMM rate kept while every core computes (gemm_shared %s)%s%s\n", prefix, m->gemm_shared >= 1 ? "1" : "not given",
                 m->shared_src[0] ? ": " : "", m->shared_src);
    fprintf(f, "%scollectives %s: %s\n", prefix, m->coll_offload ? "progress beside the workers" : "reduce on the workers",
            m->coll_src);
    if (m->elem_ns > 0)
        fprintf(f, "%sactivation pass %.3g ns per element per worker: %s\n", prefix, m->elem_ns, m->elem_src);
    else fprintf(f, "%sthe blocks' norms and residual adds left out (elem_ns not given)%s%s\n", prefix,
                 m->elem_src[0] ? ": activation pass " : "", m->elem_src);
    term(f, prefix, m->attn_gflops, "attention tiles", "GFLOP/s", m->attn_src, "attention tiles at the GEMM rate (attn_gflops not given)");
    term(f, prefix, m->attn_probs_gflops, "attention tiles keeping the probabilities (recompute none)", "GFLOP/s",
         m->attn_probs_src, "attention tiles keeping the probabilities at attn_gflops' rate (attn_probs_gflops not given)");
    term(f, prefix, m->ce_ns, "cross-entropy", "ns per logit", m->ce_src, "cross-entropy left out (ce_ns not given)");
    term(f, prefix, m->act_ns, "MLP activation", "ns per element", m->act_src, "MLP activation left out (act_ns not given)");
    term(f, prefix, m->adaln_ns, "adaLN modulation and gated residual", "ns per element", m->adaln_src,
         "the DiT's adaLN modulation and gated residual left out (adaln_ns not given)");
    term(f, prefix, m->copy_ns, "gradient buckets' copy", "ns per element and pass", m->copy_src,
         "the gradient buckets' copies left out (copy_ns not given)");
}

/* -------------------------------------------------------------- rules */

int sw_plan_check(sw_gpt_config *cfg, int world, char *msg, size_t n)
{
    if (sw_gpt_config_check(cfg, msg, n) != 0) return -1;
    sw_mesh_dims d = {cfg->tp, cfg->ulysses, cfg->ring, cfg->dp, cfg->pp};
    if (sw_mesh_check(&d, world, msg, n) != 0) return -1;
    /* the pipeline's rules: the function sw_pipeline_create refuses by (graphs/step/schedule.c) */
    if (sw_schedule_check(cfg->pp, cfg->pp_virtual > 1 ? cfg->pp_virtual : 1, cfg->grad_accum, cfg->pp_inflight,
                          cfg->zero_bubble, msg, n) != 0)
        return -1;
    return 0;
}

void sw_plan_space_default(sw_plan_space *s)
{
    memset(s, 0, sizeof *s);
    const int zero[] = {0, 1, 2, 3, -1}, rec[] = {SW_RECOMPUTE_NONE, SW_RECOMPUTE_SELECTIVE, SW_RECOMPUTE_FULL, -1},
              v[] = {1, 2, -1, -1};
    memcpy(s->zero, zero, sizeof zero), memcpy(s->recompute, rec, sizeof rec), memcpy(s->virtual_, v, sizeof v);
    s->max_accum = 8;
    s->sp = 1;
    s->inflight = 1;
}

void sw_plan_flags(const sw_gpt_config *c, char *out, size_t n)
{
    int at = snprintf(out, n, "--tp %d%s --ulysses %d --ring %d --dp %d --pp %d", c->tp, c->sp ? " --sp" : "",
                      c->ulysses, c->ring, c->dp, c->pp);
    if (c->ring > 1 && !c->zigzag && at < (int)n) at += snprintf(out + at, n - at, " --no-zigzag");
    if (c->pp_virtual > 1 && at < (int)n) at += snprintf(out + at, n - at, " --pp-virtual %d", c->pp_virtual);
    if (c->pp_inflight && at < (int)n) at += snprintf(out + at, n - at, " --pp-inflight %d", c->pp_inflight);
    if (at < (int)n)
        snprintf(out + at, n - at, " --zero %d --grad-accum %d --recompute %s", c->zero, c->grad_accum,
                 sw_recompute_name(c->recompute));
}

/* ------------------------------------------------------------ estimate */

/* the extent of the ranks a group spans (it fits in a node when at most ranks_per_node) */
static int group_span(const sw_gpt_config *c, int g)
{
    int T = c->tp, U = c->ulysses, R = c->ring, D = c->dp, P = c->pp;
    switch (g) {
    case SW_GROUP_TP: return T;
    case SW_GROUP_ULYSSES: return T * U;
    case SW_GROUP_RING: case SW_GROUP_SP: case SW_GROUP_TP_SP: return T * U * R;
    case SW_GROUP_DP: case SW_GROUP_SP_DP: return T * U * R * D;
    default: return T * U * R * D * P;
    }
}

/* messages per step of a group (each pays the latency), from the layers' structure: a tensor-parallel
 * block all-reduces (or gathers and scatters) twice forward and twice backward, Ulysses exchanges q, k,
 * v and the output both ways, Ring shifts K/V ring - 1 times forward and twice that backward, the
 * gradient buckets once per step, ZeRO-3 gathers each block forward and backward, the pipeline sends an
 * activation and a gradient per micro-batch and chunk */
static double messages(const sw_gpt_config *c, int g, int layers_here, double param_bytes)
{
    double K = c->grad_accum, V = c->pp_virtual > 1 ? c->pp_virtual : 1;
    switch (g) {
    case SW_GROUP_TP: return K * (layers_here * (c->sp ? 6.0 : 4.0) + 5.0);
    case SW_GROUP_ULYSSES: case SW_GROUP_SP: return K * layers_here * 8.0;
    case SW_GROUP_RING: return K * layers_here * 3.0 * (c->ring - 1);
    case SW_GROUP_DP: case SW_GROUP_SP_DP:
        return ceil(param_bytes / (c->bucket_mb * SW_MIB)) + 1 + (c->zero == 3 ? K * 2.0 * layers_here : 0);
    case SW_GROUP_PP: return 2.0 * K * V;
    default: return 1;
    }
}

/* What of the data-parallel group's ms (its traffic's time) stays on the step. The gradient reduction's tasks
 * of StarPU-MPI's ring and direct algorithms reduce on the rank's workers: with one worker they take it from
 * the backward and nothing overlaps (W124 on 2 ranks of 1 worker: dp 2 3.7 s against tp 2's 1.2 s). With
 * workers to spare, or collectives that progress beside the workers (coll_offload: MPI's own algorithms,
 * NCCL), the buckets run under the last micro-batch's backward and ZeRO-3's gathers under the whole
 * compute; ZeRO-1/2's all-gather of the updated values follows the optimizer with nothing to run under
 * (simulated: Megatron's LLaMA-7B ZeRO-1 rank idle 122 ms a step, torchtitan's ZeRO-3 38), its share of the
 * traffic -- one all-gather to one reduce-scatter, ZeRO-2's a reduce-scatter per micro-batch -- stays */
static double dp_exposed(const sw_plan_machine *mc, double ms, int zero, double K, double compute, double workers)
{
    if (workers <= 1 && !mc->coll_offload) return ms;
    double gather = zero == 1 ? ms / 2 : zero == 2 ? ms / (1 + K) : 0, rest = ms - gather;
    return gather + fmax(0.05 * rest, rest - (zero == 3 ? compute : 2.0 / 3.0 * compute / K));
}

/* the fraction of its GEMM rate a worker keeps: gemm_shared where the node's workers fill its cores (cores
 * sharing a physical core's units compute at about half the rate each when both run GEMMs), else all of it */
static double gemm_share(const sw_plan_world *w, const sw_plan_machine *mc, double workers)
{
    return w->ranks_per_node * workers >= mc->cores && mc->gemm_shared > 0 ? mc->gemm_shared : 1;
}

/* a GEMM task of the FLOPs of m rows of the hidden x hidden GEMM the rate's dependence was measured on runs
 * at m / (m + gemm_half_rows) of the rate */
static double gemm_eff(const sw_plan_machine *mc, double m) { return mc->gemm_half_rows > 0 ? m / (m + mc->gemm_half_rows) : 1; }

/* A block's GEMMs per micro-batch (seconds at one worker): each linear layer's tasks are [rows, in] x [in,
 * out / tiles] (linear.c: the output features split into tiles, tp splitting out for the column-parallel
 * layers and in for the row-parallel ones), forward, backward's two, and full recomputation's forward again,
 * each task at the rate of its FLOPs as rows of the hidden x hidden GEMM (a tile's rows alone mis-sized them:
 * a 1-layer LLaMA-7B at tp 1 and at tp 8 simulated its GEMMs at the same 74.2 GFLOP/s). Under sp the
 * column-parallel forward takes the gathered rows rank by rank as they arrive: tasks of 1 / tp of the rows
 * (that LLaMA-7B at tp 8 + sp simulated 192 such GEMMs at 57.5 GFLOP/s where without sp 24 took 74.2) */
static double block_gemm_s(const sw_gpt_config *c, const sw_plan_machine *mc, double Tm)
{
    double h = c->hidden, F = c->ffn, kvd = h * c->kv_heads / c->heads, n = c->tiles > 0 ? c->tiles : 1;
    double fwd = c->recompute == SW_RECOMPUTE_FULL ? 2 : 1;
    /* q k v, the output projection, the MLP's first (LLaMA: gate), its second, and LLaMA's up */
    const struct { double in, out; int column; } l[5] = {{h, h + 2 * kvd, 1}, {h, h, 0}, {h, F, 1}, {F, h, 0}, {h, F, 1}};
    double sec = 0;
    for (int i = 0; i < (c->model == SW_MODEL_LLAMA ? 5 : 4); i++) {
        double flops = 2.0 * Tm * l[i].in * l[i].out / c->tp, m = flops / n / (2.0 * h * h);
        double mf = l[i].column && c->sp && c->tp > 1 ? m / c->tp : m;
        sec += fwd * flops / gemm_eff(mc, mf) + 2.0 * flops / gemm_eff(mc, m);
    }
    return sec / (mc->gemm_gflops * 1e9);
}

/* the head's GEMMs (forward and backward's two) per micro-batch, its vocabulary over tp and the tiles */
static double head_gemm_s(const sw_gpt_config *c, const sw_plan_machine *mc, double Tm)
{
    double flops = 2.0 * Tm * c->hidden * (c->vocab_padded / c->tp);
    return 3.0 * flops / gemm_eff(mc, flops / (c->tiles > 0 ? c->tiles : 1) / (2.0 * c->hidden * c->hidden)) /
           (mc->gemm_gflops * 1e9);
}

/* The gradient buckets' passes (ms) over `bytes` of them (sw_params_buckets_bytes): each micro-batch's
 * backward copies (the first) or adds (the rest) the rank's gradients into them, and the last copies the
 * all-reduced sums back (zero 0 over a gradient group of `group` > 1 ranks): K + 1 passes; buckets that only
 * sum micro-batches take K, the last micro-batch's gradient adding the others' sum to itself (W124 at
 * Ulysses 2 x 2 micro-batches, simulated before that: 444 such tasks, 359 of the step's 2662 ms) */
static double bucket_ms(const sw_plan_machine *mc, double K, int zero, int group, double bytes, double workers)
{
    return (K + (zero == 0 && group > 1)) * bytes / 4.0 * mc->copy_ns / 1e6 / workers;
}

/* one stage's time (ms) at world rank `rank`: its parts into e */
static double stage_ms(const sw_gpt_config *c, const sw_plan_world *w, const sw_plan_machine *mc, int rank,
                       sw_gpt_memory mem, sw_traffic t, sw_plan_entry *e)
{
    int world = c->tp * c->ulysses * c->ring * c->dp * c->pp, stage = rank / (world / c->pp);
    int cp = c->ulysses * c->ring, last = stage == c->pp - 1, layers_here = c->layers / c->pp;
    double K = c->grad_accum, B = (double)c->batch / (c->dp * K), Tm = (double)c->seq * B / cp; /* rows per micro */
    double h = c->hidden, F = c->ffn, s = c->seq;
    /* one block's attention FLOPs forward on this rank per micro-batch, over tp and the sequence (causal:
     * about half the square is computed, masked tiles are skipped); recomputation redoes it all (full) or the
     * probabilities' half (selective) */
    double attn = 0.5 * 4.0 * B * s * s * h / (c->tp * cp);
    double redo = c->recompute == SW_RECOMPUTE_FULL ? attn : c->recompute == SW_RECOMPUTE_SELECTIVE ? 0.5 * attn : 0;
    /* the rank's workers as a run gets them (cores / ranks per node, at least one), each on a core of its own
     * here: where the node's threads outnumber its cores, estimate() bounds the step by the node's cores */
    double workers = fmax(1, floor(mc->cores / w->ranks_per_node));
    double shared = gemm_share(w, mc, workers);
    /* the attention's tiles at their measured rate: without recomputation (and Ring, whose tiles merge) those
     * that keep the probabilities (attn_probs_gflops), else the flash tiles, whose backward recomputes them
     * (attn_gflops: selective recomputation's redo is in it); else at the rate of a GEMM of the rank's rows
     * of a micro-batch over the tiles */
    double arate = c->recompute == SW_RECOMPUTE_NONE && c->ring == 1 && mc->attn_probs_gflops > 0 ? mc->attn_probs_gflops
                                                                                                 : mc->attn_gflops;
    if (arate > 0 && c->recompute == SW_RECOMPUTE_SELECTIVE) redo = 0;
    double rate = (arate > 0 ? arate : mc->gemm_gflops * gemm_eff(mc, Tm / (c->tiles > 0 ? c->tiles : 1))) * 1e9 * workers * shared;
    double gemm_ms =
        K * (layers_here * block_gemm_s(c, mc, Tm) + (last ? head_gemm_s(c, mc, Tm) : 0)) / (workers * shared) * 1e3;
    /* the optimizer's pass over the parameters this rank updates: its stage's blocks (and the embedding or the
     * tied head at the ends) over tp, over the gradient group with ZeRO */
    double kvd = h * c->kv_heads / c->heads, wblock = 2 * h * h + 2 * h * kvd + (c->model == SW_MODEL_LLAMA ? 3 : 2) * h * F;
    double params = (layers_here * wblock + (stage == 0 || last ? (double)c->vocab_padded * h : 0)) / c->tp;
    if (c->zero >= 1) params /= c->ulysses * c->ring * c->dp;
    double optimizer = params * mc->adam_ns / 1e6 / workers;
    /* the blocks' memory-bound passes over [rows, hidden] activations: two norms forward and backward, the two
     * residual adds and their gradients -- about 8 passes of an RMSNorm forward per block and micro-batch (7.7
     * by the codelets' calibrated times in a simulated LLaMA-7B block) -- over the rank's rows: its share of
     * the sequence under sequence parallelism, every row of the tensor-parallel group without (each rank
     * repeats them: a 1-layer LLaMA-7B at tp 16 without sp simulated some 150 ms of them per step) */
    double elem = K * layers_here * 8.0 * (c->sp ? Tm / c->tp : Tm) * h * mc->elem_ns / 1e6 / workers;
    /* the MLP's activation (forward, backward, full recomputation's forward again: a third each) over the
     * rank's rows of ffn / tp, and the head's cross-entropy passes over its rows of the vocabulary over tp */
    double act = K * layers_here * (c->recompute == SW_RECOMPUTE_FULL ? 4.0 / 3.0 : 1) * Tm * F / c->tp * mc->act_ns / 1e6 / workers;
    double ce = last ? K * Tm * ((double)c->vocab_padded / c->tp) * mc->ce_ns / 1e6 / workers : 0;
    double compute = gemm_ms + K * layers_here * (3.0 * attn + redo) / rate * 1e3 + optimizer + elem + act + ce +
                     bucket_ms(mc, K, c->zero, c->ulysses * c->ring * c->dp, mem.buckets, workers);
    double attn_ms = K * layers_here * 3.0 * attn / rate * 1e3;
    /* tasks: per block and micro-batch about 40 kinds of op forward and backward, each on `tiles` tiles */
    double tasks = K * (layers_here * 40.0 * c->tiles + (last ? 10.0 * c->tiles : 0)) + 4.0 * mem.state / 4e6;
    double overhead = tasks * mc->task_us / 1e3 / (workers < 1 ? 1 : workers);
    double comm = 0, traffic = 0;
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        double bytes = t.forward[g] + t.backward[g];
        if (bytes <= 0) continue;
        traffic += bytes;
        int intra = group_span(c, g) <= w->ranks_per_node;
        double gbs = intra ? mc->intra_gbs : mc->inter_gbs, us = intra ? mc->intra_us : mc->inter_us;
        double ms = bytes / (gbs * 1e9) * 1e3 + messages(c, g, layers_here, mem.state / 4.0) * us / 1e3;
        /* what overlaps (the graph's structure): Ring's shifts run under the attention tiles; the gradient
         * buckets under the last micro-batch's backward; ZeRO-3's gathers ahead of the block computing;
         * tensor-parallel, Ulysses and pipeline messages sit on the critical path */
        if (g == SW_GROUP_RING) ms = fmax(0, ms - attn_ms);
        else if (g == SW_GROUP_DP || g == SW_GROUP_SP_DP) ms = dp_exposed(mc, ms, c->zero, K, compute, workers);
        comm += ms;
    }
    e->compute_ms = compute, e->comm_ms = comm, e->overhead_ms = overhead, e->traffic = fmax(e->traffic, traffic);
    return compute + comm + overhead;
}

/* The node's cores (GPT and DiT): where a node's ranks' threads outnumber its cores, the step is at least the
 * work of all the node's ranks (work[stage]: each stage's compute and tasks at a core per worker) over its
 * cores, every thread time-sliced -- the workers and, under point-to-point messages (spin), each rank's
 * progression thread polling (p2p_spin cores) -- plus the communication; 0 where the threads fit */
static double cores_bound(const sw_plan_world *w, const sw_plan_machine *mc, int world, int per, const double *work,
                          int spin, double comm_ms)
{
    double run_workers = fmax(1, floor(mc->cores / w->ranks_per_node));
    double threads = run_workers + (spin ? mc->p2p_spin : 0);
    if (w->ranks_per_node * threads <= mc->cores) return 0;
    double node = 0;
    for (int n = 0; n * w->ranks_per_node < world; n++) {
        double sum = 0;
        for (int r = n * w->ranks_per_node; r < (n + 1) * w->ranks_per_node && r < world; r++)
            sum += work[r / per < 256 ? r / per : 255];
        node = fmax(node, sum * threads / mc->cores);
    }
    return node + comm_ms;
}

/* mems, ts: each stage's first rank's memory and traffic models (sw_gpt_plan_rank) */
static void estimate(sw_plan_entry *e, const sw_plan_world *w, const sw_plan_machine *mc, const sw_gpt_memory *mems,
                     const sw_traffic *ts)
{
    const sw_gpt_config *c = &e->cfg;
    int world = c->tp * c->ulysses * c->ring * c->dp * c->pp, per = world / c->pp;
    double worst = 0, work[256]; /* each stage's compute and tasks (ms at a core per worker); pp <= layers */
    sw_plan_entry best = *e;
    for (int p = 0; p < c->pp; p++) {
        sw_plan_entry x = *e;
        double ms = stage_ms(c, w, mc, p * per, mems[p], ts[p], &x);
        work[p < 256 ? p : 255] = x.compute_ms + x.overhead_ms;
        if (ms >= worst) worst = ms, best = x;
    }
    double V = c->pp_virtual > 1 ? c->pp_virtual : 1;
    e->compute_ms = best.compute_ms, e->comm_ms = best.comm_ms, e->overhead_ms = best.overhead_ms;
    e->traffic = best.traffic;
    /* the pipeline's fill and drain: (pp - 1) / (K V) of a stage's step */
    e->bubble_ms = worst * (c->pp - 1) / (c->grad_accum * V);
    e->ms = worst + e->bubble_ms;
    /* the node's cores: where its ranks' threads outnumber them, the step is at least the work of all the
     * node's ranks (each rank's compute and tasks at a core per worker) over its cores, every thread
     * time-sliced -- the workers and, under point-to-point layouts (pipeline, Ring), each rank's progression
     * thread polling (p2p_spin cores). A pipeline's idle stages leave their cores to the busy one: this bound,
     * not a share per stage, prices 4 stages of one micro-batch on 2 cores. */
    e->cores_ms = cores_bound(w, mc, world, per, work, c->pp > 1 || c->ring > 1, best.comm_ms);
    if (e->cores_ms > e->ms) e->ms = e->cores_ms;
}

/* ---------------------------------------------------------- the search */

static int cmp_entry(const void *a, const void *b)
{
    const sw_plan_entry *x = a, *y = b;
    int cx = x->legal ? (x->fits ? 0 : 1) : 2, cy = y->legal ? (y->fits ? 0 : 1) : 2;
    if (cx != cy) return cx - cy;
    double kx = cx == 0 ? x->ms : x->need, ky = cy == 0 ? y->ms : y->need;
    return kx < ky ? -1 : kx > ky ? 1 : 0;
}

/* One candidate of the search space, for the GPT's planner and the DiT's: the mesh (tp x Ulysses x Ring x
 * dp x pp = the world), sequence parallelism, the ZeRO stage, chunks, micro-batches, the in-flight quota
 * (inflight: at the micro-batches) and recomputation */
typedef struct {
    int tp, sp, ulysses, ring, dp, pp, zero, virtual_, accum, inflight, recompute;
} layout_point;

/* every candidate of the space sp over `world` ranks, in the order both planners list them; inflight: also
 * the in-flight quota where a pipeline has several micro-batches */
static layout_point *layout_points(int world, const sw_plan_space *sp, int inflight, int *count)
{
    int n = 0, cap = 256;
    layout_point *out = sw_xcalloc((size_t)cap, sizeof *out);
    for (int tp = 1; tp <= world; tp++)
    for (int u = 1; u <= world / tp; u++)
    for (int r = 1; r <= world / (tp * u); r++)
    for (int pp = 1; pp <= world / (tp * u * r); pp++) {
        if (world % (tp * u * r * pp)) continue;
        int dp = world / (tp * u * r * pp), gg = u * r * dp;
        for (int spf = 0; spf <= (sp->sp && tp > 1); spf++)
        for (int zi = 0; zi < 5 && sp->zero[zi] >= 0; zi++) {
            if (gg == 1 && sp->zero[zi] > 0) continue; /* a group of 1: plain training (a duplicate) */
            for (int vi = 0; vi < 4 && sp->virtual_[vi] >= 0; vi++) {
                if (pp == 1 && sp->virtual_[vi] > 1) continue;
                for (int K = 1; K <= sp->max_accum; K *= 2)
                for (int q = 0; q <= (inflight && pp > 1 && K > 1); q++)
                for (int ri = 0; ri < 4 && sp->recompute[ri] >= 0; ri++) {
                    if (n == cap) out = realloc(out, sizeof *out * (size_t)(cap *= 2));
                    if (!out) sw_fail(__FILE__, __LINE__, "realloc(plan)", -12);
                    out[n++] = (layout_point){tp, spf, u, r, dp, pp, sp->zero[zi], sp->virtual_[vi], K, q,
                                              sp->recompute[ri]};
                }
            }
        }
    }
    *count = n;
    return out;
}

sw_plan_entry *sw_plan_layouts(const sw_gpt_config *base, const sw_plan_world *w, const sw_plan_space *sp,
                       const sw_plan_machine *mc, double budget, int *count)
{
    sw_plan_space def;
    if (!sp) sw_plan_space_default(&def), sp = &def;
    int world = w->ranks_per_node * w->nodes, n = 0;
    layout_point *pt = layout_points(world, sp, sp->inflight, &n);
    sw_plan_entry *out = sw_xcalloc((size_t)(n ? n : 1), sizeof *out);
    for (int i = 0; i < n; i++) {
        const layout_point *x = &pt[i];
        sw_plan_entry *e = &out[i];
        e->cfg = *base;
        sw_gpt_config *c = &e->cfg;
        c->tp = x->tp, c->sp = x->sp, c->ulysses = x->ulysses, c->ring = x->ring, c->dp = x->dp, c->pp = x->pp;
        c->zero = x->zero, c->pp_virtual = x->virtual_ > 1 ? x->virtual_ : 0;
        c->grad_accum = x->accum, c->pp_inflight = x->inflight ? x->accum : 0, c->recompute = x->recompute;
        c->tp_recompute_allgather = 0, c->offload = 0;
        e->legal = sw_plan_check(c, world, e->why, sizeof e->why) == 0;
    }
    free(pt);
    for (int i = 0; i < n; i++) {
        sw_plan_entry *e = &out[i];
        if (!e->legal) continue;
        const sw_gpt_config *c = &e->cfg;
        int per = world / c->pp;
        e->need = -1;
        /* each stage's first rank described once, its memory and traffic kept for the estimate */
        sw_gpt_memory *mems = sw_xcalloc((size_t)c->pp, sizeof *mems);
        sw_traffic *ts = sw_xcalloc((size_t)c->pp, sizeof *ts);
        for (int p = 0; p < c->pp; p++)
            for (int k = 0; k < per; k = world <= 8 || k == per - 1 ? k + 1 : per - 1) { /* big worlds: ends */
                sw_gpt_memory mem;
                sw_gpt_plan_rank(c, p * per + k, &mem, k ? NULL : &ts[p]);
                if (!k) mems[p] = mem;
                if (mem.need > e->need) e->need = mem.need, e->need_rank = p * per + k;
            }
        e->fits = budget <= 0 || e->need <= budget;
        if (!e->fits)
            snprintf(e->why, sizeof e->why, "needs %.0f bytes (%.1f MiB) on rank %d, more than the budget %.0f bytes "
                     "(%.1f MiB)", e->need, e->need / SW_MIB, e->need_rank, budget, budget / SW_MIB);
        else estimate(e, w, mc, mems, ts);
        free(mems), free(ts);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_entry);
    *count = n;
    return out;
}

/* ------------------------------------------------------------- the DiT */

int sw_plan_dit_check(const sw_dit_config *cfg, int pp, int world, char *msg, size_t n)
{
    if (sw_dit_config_check(cfg, pp, msg, n) != 0) return -1;
    sw_mesh_dims d = {cfg->tp, cfg->ulysses, cfg->ring, cfg->dp, pp};
    return sw_mesh_check(&d, world, msg, n) != 0 ? -1 : 0;
}

void sw_plan_dit_flags(const sw_plan_dit_entry *e, char *out, size_t n)
{
    const sw_dit_config *c = &e->cfg;
    int at = snprintf(out, n, "--tp %d%s --ulysses %d --ring %d --dp %d --pp %d", c->tp, c->sp ? " --sp" : "",
                      c->ulysses, c->ring, c->dp, e->pp);
    if (c->pp_virtual > 1 && at < (int)n) at += snprintf(out + at, n - at, " --pp-virtual %d", c->pp_virtual);
    if (at < (int)n)
        snprintf(out + at, n - at, " --zero %d --micro %d --recompute %s", c->zero, c->micro,
                 sw_recompute_name(c->recompute));
}

/* the extent of the ranks a group spans, as group_span (tp innermost) */
static int dit_span(const sw_dit_config *c, int pp, int g)
{
    int T = c->tp, U = c->ulysses, R = c->ring, D = c->dp;
    switch (g) {
    case SW_GROUP_TP: return T;
    case SW_GROUP_ULYSSES: return T * U;
    case SW_GROUP_RING: case SW_GROUP_SP: case SW_GROUP_TP_SP: return T * U * R;
    case SW_GROUP_DP: case SW_GROUP_SP_DP: return T * U * R * D;
    default: return T * U * R * D * pp;
    }
}

/* messages per step of a group, from the DiT's structure: a tensor-parallel block reduces (or gathers and
 * scatters) around each of its four branches forward and backward, Ulysses exchanges q, k, v and the
 * output of both grid attentions both ways, Ring shifts K/V ring - 1 times forward and twice that backward
 * (temporal attention), the gradient buckets once per step, ZeRO-3 gathers each block forward and backward,
 * the pipeline sends an activation and a gradient per micro-batch and chunk, and the conditioning */
static double dit_messages(const sw_dit_config *c, int pp, int g, int layers_here, double param_bytes)
{
    double K = c->micro, V = c->pp_virtual > 1 ? c->pp_virtual : 1;
    switch (g) {
    case SW_GROUP_TP: return K * (layers_here * (c->sp ? 12.0 : 8.0) + 5.0);
    case SW_GROUP_ULYSSES: case SW_GROUP_SP: return K * layers_here * 16.0;
    case SW_GROUP_RING: return K * layers_here * 3.0 * (c->ring - 1);
    case SW_GROUP_DP: case SW_GROUP_SP_DP:
        return ceil(param_bytes / (25.0 * SW_MIB)) + 1 + (c->zero == 3 ? K * 2.0 * layers_here : 0);
    case SW_GROUP_PP: return 2.0 * K * V + (pp > 1 ? 2.0 * K : 0);
    default: return 1;
    }
}

/* one DiT stage's time (ms) at world rank `rank` (need: its state bytes; t its traffic): parts into e */
static double dit_stage_ms(const sw_plan_dit_entry *e0, const sw_plan_world *w, const sw_plan_machine *mc, int rank,
                           double state, double buckets, sw_traffic t, sw_plan_dit_entry *e)
{
    const sw_dit_config *c = &e0->cfg;
    const int pp = e0->pp, world = c->tp * c->ulysses * c->ring * c->dp * pp, stage = rank / (world / pp);
    const int cp = c->ulysses * c->ring, last = stage == pp - 1, first = stage == 0, layers_here = c->layers / pp;
    const double S = (double)(c->height / c->patch) * (c->width / c->patch), F = c->frames, h = c->hidden;
    const double ppc = (double)c->patch * c->patch * c->channels, L = c->cond_len, Dc = c->cond_dim;
    const double K = c->micro, B = (double)c->batch / (c->dp * K), Tm = F * S * B / cp; /* the rank's rows per micro */
    /* one block's forward FLOPs on this rank per micro-batch: the GEMMs of the four branches (spatial and
     * temporal qkv 3h and proj h, cross q and proj h, MLP 4h both ways: 36 T h^2) and the conditioning's K/V
     * split over tp; the adaLN's modulation per sample; attention over tp and the rank's part of the sequence:
     * spatial within a frame (S^2 per frame), temporal across frames (F^2 per patch), cross to cond_len keys,
     * none causal (every pair computed) */
    double gemm = (36.0 * Tm * h * h + 4.0 * L * B * Dc * h) / c->tp + 2.0 * B * h * 12.0 * h;
    double attn = 4.0 * B * h * (F * S * S + S * F * F) / (c->tp * cp) + 4.0 * Tm * L * h / c->tp;
    double ends = 3.0 * ((first ? 2.0 * Tm * ppc * h + 2.0 * B * (SW_DIT_FREQ * h + h * h) : 0) +
                         (last ? 2.0 * Tm * h * ppc + 2.0 * B * h * 2.0 * h : 0));
    double workers = fmax(1, floor(mc->cores / w->ranks_per_node));
    /* gemm_shared left out: at bench/plan.sh's DiT shape (steps of tens of ms, not bound by GEMMs) it made the
     * ranking worse (Spearman 0.786 and 0.333 at 2 and 4 ranks against 0.929 and 0.762, 2026-11-29) */
    double rate = mc->gemm_gflops * 1e9 * workers * gemm_eff(mc, Tm / 2 /* the DiT's 2 tiles */);
    /* the attention (flash tiles) at attn_gflops where the machine gives it; recomputation's redo: full, the
     * block's forward again; selective, half the attention's forward -- in the flash tiles' measured rate
     * already (their backward recomputes the probabilities); the MLP's GELU over 4 hidden */
    double arate = mc->attn_gflops > 0 ? mc->attn_gflops * 1e9 * workers : rate;
    double gemm_redo = c->recompute == SW_RECOMPUTE_FULL ? gemm : 0;
    double attn_redo = c->recompute == SW_RECOMPUTE_FULL ? attn : c->recompute == SW_RECOMPUTE_SELECTIVE && !(mc->attn_gflops > 0) ? 0.5 * attn : 0;
    double act = K * layers_here * (c->recompute == SW_RECOMPUTE_FULL ? 4.0 / 3.0 : 1) * Tm * 4.0 * h / c->tp * mc->act_ns / 1e6 / workers;
    /* the block's passes over the rank's rows of h (split over tp under sp): four adaLN modulations and
     * gated residuals forward and backward (adaln_ns), and four RMSNorms, a forward's pass and a backward's
     * two (elem_ns); full recomputation runs the forward's again */
    const double redo = c->recompute == SW_RECOMPUTE_FULL ? 4.0 / 3.0 : 1, rows = c->sp ? Tm / c->tp : Tm;
    double passes = K * layers_here * redo * 4.0 * rows * h * (mc->adaln_ns + 3.0 * mc->elem_ns) / 1e6 / workers;
    /* the optimizer's pass over the parameters this rank updates: its state (value, gradient, two moments,
     * fp32: sw_params_bytes of the described model, ZeRO's sharding in it) over 16 bytes */
    double optimizer = state / 16.0 * mc->adam_ns / 1e6 / workers;
    double compute = K * (layers_here * (3.0 * gemm + gemm_redo) + ends) / rate * 1e3 +
                     K * layers_here * (3.0 * attn + attn_redo) / arate * 1e3 + act + passes + optimizer +
                     bucket_ms(mc, K, c->zero, c->ulysses * c->ring * c->dp, buckets, workers);
    double attn_ms = K * layers_here * 3.0 * attn / arate * 1e3;
    /* tasks: per block and micro-batch about 80 kinds of op (four branches) forward and backward, on 2 tiles */
    double tasks = K * (layers_here * 80.0 * 2 + (last ? 20.0 : 0)) + 4.0 * state / 16e6;
    double overhead = tasks * mc->task_us / 1e3 / workers;
    double comm = 0, traffic = 0;
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        double bytes = t.forward[g] + t.backward[g];
        if (bytes <= 0) continue;
        traffic += bytes;
        int intra = dit_span(c, pp, g) <= w->ranks_per_node;
        double gbs = intra ? mc->intra_gbs : mc->inter_gbs, us = intra ? mc->intra_us : mc->inter_us;
        double ms = bytes / (gbs * 1e9) * 1e3 + dit_messages(c, pp, g, layers_here, state / 4.0) * us / 1e3;
        /* what overlaps, as for the GPT: Ring under the attention, the data-parallel group's (dp_exposed) */
        if (g == SW_GROUP_RING) ms = fmax(0, ms - attn_ms);
        else if (g == SW_GROUP_DP || g == SW_GROUP_SP_DP) ms = dp_exposed(mc, ms, c->zero, K, compute, workers);
        comm += ms;
    }
    e->compute_ms = compute, e->comm_ms = comm, e->overhead_ms = overhead, e->traffic = fmax(e->traffic, traffic);
    return compute + comm + overhead;
}

/* the step: the slowest stage, the pipeline's fill and drain, the node's cores (as estimate()) */
static void dit_estimate(sw_plan_dit_entry *e, const sw_plan_world *w, const sw_plan_machine *mc, const double *states,
                         const double *buckets,
                         const sw_traffic *ts)
{
    const sw_dit_config *c = &e->cfg;
    const int pp = e->pp, world = c->tp * c->ulysses * c->ring * c->dp * pp, per = world / pp;
    double worst = 0, work[SW_DIT_MAX_LAYERS + 1]; /* pp <= layers <= SW_DIT_MAX_LAYERS */
    sw_plan_dit_entry best = *e;
    for (int p = 0; p < pp; p++) {
        sw_plan_dit_entry x = *e;
        double ms = dit_stage_ms(e, w, mc, p * per, states[p], buckets[p], ts[p], &x);
        work[p] = x.compute_ms + x.overhead_ms;
        if (ms >= worst) worst = ms, best = x;
    }
    double V = c->pp_virtual > 1 ? c->pp_virtual : 1;
    e->compute_ms = best.compute_ms, e->comm_ms = best.comm_ms, e->overhead_ms = best.overhead_ms;
    e->traffic = best.traffic;
    e->bubble_ms = worst * (pp - 1) / (c->micro * V);
    e->ms = worst + e->bubble_ms;
    /* point-to-point messages (the progression thread polling): the pipeline's, and Ring's where its traffic model
     * has any -- the DiT's Ring splits whole frames, its temporal attention exchanges over the sp group's
     * all-to-all as Ulysses does, and the ring group sends nothing */
    double ring_bytes = 0;
    for (int p = 0; p < pp; p++) ring_bytes += ts[p].forward[SW_GROUP_RING] + ts[p].backward[SW_GROUP_RING];
    e->cores_ms = cores_bound(w, mc, world, per, work, pp > 1 || ring_bytes > 0, best.comm_ms);
    if (e->cores_ms > e->ms) e->ms = e->cores_ms;
}

static int cmp_dit(const void *a, const void *b)
{
    const sw_plan_dit_entry *x = a, *y = b;
    int cx = x->legal ? (x->fits ? 0 : 1) : 2, cy = y->legal ? (y->fits ? 0 : 1) : 2;
    if (cx != cy) return cx - cy;
    double kx = cx == 0 ? x->ms : x->need, ky = cy == 0 ? y->ms : y->need;
    return kx < ky ? -1 : kx > ky ? 1 : 0;
}

sw_plan_dit_entry *sw_plan_dit_layouts(const sw_dit_config *base, const sw_plan_world *w, const sw_plan_space *sp,
                                       const sw_plan_machine *mc, double budget, int *count)
{
    sw_plan_space def;
    if (!sp) sw_plan_space_default(&def), sp = &def;
    int world = w->ranks_per_node * w->nodes, n = 0;
    layout_point *pt = layout_points(world, sp, 0, &n);
    sw_plan_dit_entry *out = sw_xcalloc((size_t)(n ? n : 1), sizeof *out);
    for (int i = 0; i < n; i++) {
        const layout_point *x = &pt[i];
        sw_plan_dit_entry *e = &out[i];
        e->cfg = *base, e->pp = x->pp;
        sw_dit_config *c = &e->cfg;
        c->tp = x->tp, c->sp = x->sp, c->ulysses = x->ulysses, c->ring = x->ring, c->dp = x->dp, c->zero = x->zero;
        c->pp_virtual = x->virtual_ > 1 ? x->virtual_ : 1, c->micro = x->accum;
        c->recompute = x->recompute, c->recompute_every = 1, c->offload = 0;
        e->legal = sw_plan_dit_check(c, x->pp, world, e->why, sizeof e->why) == 0;
    }
    free(pt);
    for (int i = 0; i < n; i++) {
        sw_plan_dit_entry *e = &out[i];
        if (!e->legal) continue;
        const int pp = e->pp, per = world / pp;
        e->need = -1;
        double *states = sw_xcalloc((size_t)pp, sizeof *states), *buckets = sw_xcalloc((size_t)pp, sizeof *buckets);
        sw_traffic *ts = sw_xcalloc((size_t)pp, sizeof *ts);
        for (int p = 0; p < pp; p++)
            for (int k = 0; k < per; k = world <= 8 || k == per - 1 ? k + 1 : per - 1) { /* big worlds: ends */
                double state, bucket, need = sw_dit_plan_rank(&e->cfg, pp, p * per + k, &state, &bucket, k ? NULL : &ts[p]);
                if (!k) states[p] = state, buckets[p] = bucket;
                if (need > e->need) e->need = need, e->need_rank = p * per + k;
            }
        e->fits = budget <= 0 || e->need <= budget;
        if (!e->fits)
            snprintf(e->why, sizeof e->why, "needs %.0f bytes (%.1f MiB) on rank %d, more than the budget %.0f bytes "
                     "(%.1f MiB)", e->need, e->need / SW_MIB, e->need_rank, budget, budget / SW_MIB);
        else dit_estimate(e, w, mc, states, buckets, ts);
        free(states), free(buckets), free(ts);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_dit);
    *count = n;
    return out;
}
