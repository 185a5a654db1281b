/* gpt_train --plan and dit_train --plan, --verify, --simulate and --check-config (docs/planner.md): one
 * path for both programs over the rows of either planner (plan_row), the program named by plan_prog. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan_main.h"

plan_opts plan_o = {.top = 20, .verify_bottom = 2, .verify_steps = 4, .nodes = 1};

/* the model's flags of cfg, as gpt_train reads them (the layout's come from sw_plan_flags) */
static void model_flags(const sw_gpt_config *c, char *out, size_t n)
{
    snprintf(out, n, "--model %s --layers %d --hidden %d --heads %d --kv-heads %d --vocab %d --ffn %d --seq %d "
             "--max-pos %d --batch %d --tiles %d --dtype %s --seed %d", sw_model_name(c->model), c->layers, c->hidden,
             c->heads, c->kv_heads, c->vocab, c->ffn, c->seq, c->max_pos, c->batch, c->tiles,
             c->dtype == SW_BF16 ? "bf16" : "fp32", (int)c->seed);
}

static void start_runtime(void)
{
    sw_options o;
    sw_options_default(&o);
    o.ncpus = 1;
    o.quiet = 1;
    int argc = 1;
    char *args[] = {"gpt_train", NULL}, **argv = args;
    if (sw_init(&argc, &argv, &o) != 0) exit(1);
}

/* --check-config: the flags (checked by gpt_train's parse already: sw_gpt_config_check), the world
 * (sw_mesh_check, as sw_mesh_create), then every rank's model described as sw_gpt_create describes
 * it (the pipeline's schedule rules refuse there), nothing allocated */
static int check_config(const sw_gpt_config *cfg, int world)
{
    char msg[256];
    sw_mesh_dims d = {cfg->tp, cfg->ulysses, cfg->ring, cfg->dp, cfg->pp};
    if (sw_mesh_check(&d, world, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    for (int r = 0; r < world; r++) sw_gpt_plan_rank(cfg, r, NULL, NULL); /* no runtime needed: nothing allocated */
    printf("check-config: accepted on %d ranks\n", world);
    return 0;
}

/* Spearman's rank correlation of x and y (n values, ties averaged) */
static void ranks_of(const double *v, int n, double *r)
{
    for (int i = 0; i < n; i++) {
        int less = 0, eq = 0;
        for (int j = 0; j < n; j++) less += v[j] < v[i], eq += v[j] == v[i];
        r[i] = less + (eq + 1) / 2.0;
    }
}
static double spearman(const double *x, const double *y, int n)
{
    double rx[64], ry[64], mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    ranks_of(x, n, rx), ranks_of(y, n, ry);
    for (int i = 0; i < n; i++) mx += rx[i] / n, my += ry[i] / n;
    for (int i = 0; i < n; i++)
        sxy += (rx[i] - mx) * (ry[i] - my), sxx += (rx[i] - mx) * (rx[i] - mx), syy += (ry[i] - my) * (ry[i] - my);
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

/* the program planned: its name, the model's flags as it reads them, how to run it */
typedef struct plan_prog {
    const char *name;   /* "gpt_train", "dit_train" */
    const char *argv0;  /* the program itself (--verify runs it) */
    char model[512];    /* the model's flags */
    char run_flags[64]; /* what a run of it adds beside STARPU_NCPU (gpt_train: --ncpus N --log /dev/null) */
    int world, ncpus;   /* ranks; CPU workers per rank of a run here (cores / ranks per node, at least 1) */
    int batch;          /* the global batch (--sim-ranks' stand-ins cut it) */
    int layers;         /* the model's depth (--sim-layers extrapolates to it) */
    char sim_flags[64]; /* what a simulated run adds (gpt_train under the machine's coll_offload 1: MPI's collectives) */
} plan_prog;

/* one layout as the tables read it, from either planner's entry (sw_plan_entry, sw_plan_dit_entry) */
typedef struct plan_row {
    char flags[256], why[256]; /* the program's flags of the layout; refused: the rule, dropped: the bytes */
    int legal, fits, need_rank;
    double need, ms, compute_ms, comm_ms, bubble_ms, overhead_ms, cores_ms;
} plan_row;

/* the fields both entry types share, into a row (a macro: the two entry types are distinct structs) */
#define PLAN_ROW(r, x)                                                                                             \
    ((r)->legal = (x)->legal, (r)->fits = (x)->fits, (r)->need_rank = (x)->need_rank, (r)->need = (x)->need,       \
     (r)->ms = (x)->ms, (r)->compute_ms = (x)->compute_ms, (r)->comm_ms = (x)->comm_ms,                            \
     (r)->bubble_ms = (x)->bubble_ms, (r)->overhead_ms = (x)->overhead_ms, (r)->cores_ms = (x)->cores_ms,          \
     snprintf((r)->why, sizeof (r)->why, "%s", (x)->why))

/* mpirun binds each rank to one core where the ranks are no more than the cores: a rank of several workers
 * (1 rank on this 2-core VM) ran them on one core, at half its speed; such ranks run unbound */
static const char *verify_bind(const plan_prog *p) { return p->ncpus > 1 ? " --bind-to none" : ""; }

/* one layout run for real: ms/step (steps 2..: gpt_train's summary line, dit_train's mean), the run's model
 * of memory (MiB; gpt_train: what it needs, dit_train: sw_dit_bytes at creation) and StarPU's allocator at
 * creation (dit_train's; -1: not printed), StarPU's peak (MiB), each the most of any rank */
static int run_one(const plan_prog *p, const char *layout, double *ms, double *model, double *alloc, double *peak)
{
    char cmd[2048], line[1024];
    snprintf(cmd, sizeof cmd, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 STARPU_WORKERS_NOBIND=1 "
             "STARPU_MPI_NOBIND=1 STARPU_NCPU=%d mpirun --oversubscribe%s -np %d -x STARPU_WORKERS_NOBIND -x "
             "STARPU_MPI_NOBIND -x STARPU_NCPU %s %s %s %s --steps %d --memory-report 2>&1 < /dev/null", p->ncpus,
             verify_bind(p), p->world, p->argv0, p->model, layout, p->run_flags, plan_o.verify_steps);
    *ms = NAN, *model = 0, *alloc = -1, *peak = 0;
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        double a, b, v;
        int r, s0, s1;
        char *at;
        if (sscanf(line, "gpt_train: loss %lf -> %lf after %d steps, %lf ms/step", &a, &b, &s0, &v) == 4) *ms = v;
        if (sscanf(line, "mean step time (steps %d .. %d): %lf ms", &s0, &s1, &v) == 3) *ms = v;
        if (sscanf(line, "memory: rank %d: the model needs %lf MiB", &r, &v) == 2) *model = fmax(*model, v);
        if (sscanf(line, "memory: rank %d created: allocator %lf bytes, model %lf bytes", &r, &a, &b) == 3)
            *alloc = fmax(*alloc, a / SW_MIB), *model = fmax(*model, b / SW_MIB);
        if (!strncmp(line, "memory: rank ", 13) && (at = strstr(line, ": peak ")) && sscanf(at, ": peak %lf", &v) == 1)
            *peak = fmax(*peak, v);
    }
    int rc = pclose(f);
    return rc == 0 && isfinite(*ms) ? 0 : -1;
}

/* ---------------------------------------------------- --simulate N */

/* snprintf into n bytes of buf, refusing what does not fit (a path too long); FMT: into an array */
#define FMT_N(buf, n, ...)                                                                              \
    do {                                                                                                \
        if (snprintf(buf, n, __VA_ARGS__) >= (int)(n))                                                  \
            sw_usage_error("--simulate: a command or path longer than %zu characters", (size_t)(n));   \
    } while (0)
#define FMT(buf, ...) FMT_N(buf, sizeof buf, __VA_ARGS__)

#ifndef SW_SRCDIR
#define SW_SRCDIR "."
#endif
#ifndef SW_BUILDDIR
#define SW_BUILDDIR "."
#endif

/* 1 if dir is a simulation build with the program (configure saw StarPU's SimGrid: docs/simulation.md) */
static int is_sim_build(const char *dir, const char *prog)
{
    char path[1200], line[256];
    FMT(path, "%s/examples/%s", dir, prog);
    if (access(path, X_OK) != 0) return 0;
    FMT(path, "%s/config.h", dir);
    FILE *f = fopen(path, "r");
    int yes = 0;
    while (f && !yes && fgets(line, sizeof line, f)) yes = !strncmp(line, "#define STARWEAVE_SIMGRID 1", 27);
    if (f) fclose(f);
    return yes;
}

/* runs cmd (sh), its output into log; the exit status */
static int run_logged(const char *cmd, const char *log)
{
    char full[4096];
    FMT(full, "(%s) > '%s' 2>&1 < /dev/null", cmd, log);
    fflush(stdout);
    int rc = system(full);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* the first line of log starting with prefix (its rest in out), 1 if found */
static int log_line(const char *log, const char *prefix, char *out, size_t n)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        if (!strncmp(line, prefix, strlen(prefix))) {
            line[strcspn(line, "\n")] = 0;
            snprintf(out, n, "%s", line + strlen(prefix));
            found = 1;
        }
    if (f) fclose(f);
    return found;
}

/* the ranks simulated: the world, or --sim-ranks' stand-in of it */
static int sim_world(const plan_prog *p) { return plan_o.sim_ranks ? plan_o.sim_ranks : p->world; }

/* a layout's value of an integer flag (1 where its flags do not have it) */
static int flag_of(const char *flags, const char *name)
{
    const char *at = strstr(flags, name);
    return at ? atoi(at + strlen(name)) : 1;
}

/* the layout's flags as simulated: on --sim-ranks N below the world, its N-rank stand-in -- the data-parallel
 * group and the global batch cut by world / N (after the layout's flags: the last one counts), so that every
 * rank keeps its shapes and every other group its size. 0, or -1 with why in note where they do not divide */
static int sim_standin(const plan_prog *p, const char *layout, char *out, size_t n, char *note, size_t nn)
{
    const int cut = p->world / sim_world(p), dp = flag_of(layout, "--dp ");
    if (cut == 1) {
        FMT_N(out, n, "%s", layout);
        return 0;
    }
    if (dp % cut || p->batch % cut) {
        snprintf(note, nn, "no %d-rank stand-in: its dp (%d) and the batch (%d) must be multiples of world / sim-ranks "
                 "(%d)", sim_world(p), dp, p->batch, cut);
        return -1;
    }
    FMT_N(out, n, "%s --dp %d --batch %d", layout, dp / cut, p->batch / cut);
    return 0;
}

/* the simulation's setup, shared by --simulate and --simulate-verified: the build, a temporary directory,
 * the platform */
typedef struct sim_ctx {
    char build[1024], dir[64], plat[1100];
    int cores; /* >0: the node's workers share its cores, so many (calibrated with --cpu-time); 0: a core each */
} sim_ctx;

/* the simulation build and the platform; 0 (said, with what happens instead: `instead`) when there is no
 * simulation build or the world needs a calibration this machine cannot run */
static int sim_open(sim_ctx *s, const plan_prog *p, const sw_plan_machine *mc, const char *instead)
{
    plan_opts *o = &plan_o;
    const char *env = getenv("SW_SIM_BUILD");
    FMT(s->build, "%s", o->sim_build ? o->sim_build : env && *env ? env : SW_SRCDIR "/build-sim");
    if (!is_sim_build(s->build, p->name)) {
        printf("plan: simulation: no simulation build with examples/%s in %s (docs/simulation.md: "
               "autotools/build-starpu.sh --simgrid, configure --with-starpu=PREFIX there; or --sim-build DIR, "
               "SW_SIM_BUILD): %s\n", p->name, s->build, instead);
        return 0;
    }
    if (!o->sim_calibration && sim_world(p) > 4) {
        printf("plan: simulation: each layout's sizes need a calibration (a real run; this machine runs at most 4 "
               "ranks, the world simulated is %d): give --sim-calibration DIR (bench/calibrate.sh): %s\n",
               sim_world(p), instead);
        return 0;
    }
    FMT(s->dir, "/tmp/sw-plan-sim.XXXXXX");
    if (!mkdtemp(s->dir)) sw_usage_error("--simulate: cannot make a temporary directory in /tmp");
    char cmd[4096], log[1100], line[1024];
    FMT(s->plat, "%s/platform", s->dir);
    /* the node's workers share its cores where they outnumber them (4 ranks on this machine's 2 cores), as the
     * runs do: the platform says so and each layout is calibrated by its tasks' time on their cores
     * (bench/calibrate.sh --cpu-time); not with a calibration given, whose times may hold the waits */
    s->cores = !o->sim_calibration && mc->cores >= 1 && o->ranks_per_node * p->ncpus > mc->cores ? (int)mc->cores : 0;
    char cores[32] = "";
    if (s->cores) FMT(cores, "--cores %d", s->cores);
    const int nodes = sim_world(p) / o->ranks_per_node; /* whole nodes (plan_world): the stand-in's fewer */
    /* the platform prices the network as the estimate does: the machine's link figures, unless a preset is named */
    if (o->sim_preset)
        FMT(cmd, "sh '%s/bench/sim-platform.sh' --nodes %d --ranks-per-node %d --cpus %d --preset '%s' %s "
                 "--out '%s'", SW_SRCDIR, nodes, o->ranks_per_node, p->ncpus, o->sim_preset, cores, s->plat);
    else
        FMT(cmd, "sh '%s/bench/sim-platform.sh' --nodes %d --ranks-per-node %d --cpus %d --intra-bw %g "
                 "--intra-lat %g --inter-bw %g --inter-lat %g %s --out '%s'", SW_SRCDIR, nodes, o->ranks_per_node,
                 p->ncpus, mc->intra_gbs, mc->intra_us, mc->inter_gbs, mc->inter_us, cores, s->plat);
    FMT(log, "%s/platform.log", s->dir);
    if (run_logged(cmd, log) != 0) {
        FILE *f = fopen(log, "r");
        while (f && fgets(line, sizeof line, f)) fputs(line, stdout);
        if (f) fclose(f);
        sw_usage_error("--simulate: bench/sim-platform.sh failed (%s)", cmd);
    }
    return 1;
}

/* what calibrated the simulated figures, and where they were simulated (one line) */
static void sim_say(const sim_ctx *s, const plan_prog *p, const char *what)
{
    plan_opts *o = &plan_o;
    const char *cost = getenv("STARPU_SIMGRID_SCHED_COST");
    char cores[96];
    if (s->cores) FMT(cores, "the node's %d workers sharing its %d cores", o->ranks_per_node * p->ncpus, s->cores);
    else FMT(cores, "a core per worker");
    printf("plan: simulation: %s through the simulated task graph (bench/sim.sh, 3 steps, %s; platform: %d node(s) "
           "x %d rank(s), %d CPU worker(s) each, %s, %s; STARPU_SIMGRID_SCHED_COST=%s), each %s%s\n", what, s->build,
           sim_world(p) / o->ranks_per_node, o->ranks_per_node, p->ncpus,
           o->sim_preset ? o->sim_preset : "the machine's link figures", cores,
           cost && *cost ? cost : "0 (sim.sh's default: the calibration's measured cost per task charged instead)",
           o->sim_calibration ? "with the calibration given (--sim-calibration)"
                              : "calibrated by a real run of that layout's own task sizes on this machine "
                                "(bench/calibrate.sh, 10 steps",
           o->sim_calibration ? "" : s->cores ? ", --cpu-time: the tasks' time on their cores)" : ")");
    if (sim_world(p) < p->world)
        printf("plan: simulation: STAND-INS: the world of %d ranks simulated on %d (--sim-ranks), each layout's "
               "data-parallel group and the global batch cut by %d: every rank's shapes kept, its data-parallel "
               "collectives over fewer ranks, ZeRO's shards and optimizer update those of the smaller group\n",
               p->world, sim_world(p), p->world / sim_world(p));
}

/* one layout through the simulated graph at nd depths (layers[i] layers; 0: the model's own): its calibration
 * (a real run of its sizes at the last depth, unless --sim-calibration: a block's task sizes are the same at
 * every depth, and one calibration prices them alike), then bench/sim.sh at each depth; ms[i] the simulated
 * ms/step. 0 when every depth was simulated, else -1 with the reason in note. */
static int sim_layout(const sim_ctx *s, const plan_prog *p, const char *layout, const int *layers, int nd, double *ms,
                      const char *tag, char *note, size_t n)
{
    plan_opts *o = &plan_o;
    char cmd[4096], log[1100], cal[1100], host[64], env[32], rest[1024], depth[24] = "", lay[320];
    if (sim_standin(p, layout, lay, sizeof lay, note, n)) return -1;
    if (o->sim_calibration) FMT(cal, "%s", o->sim_calibration);
    else FMT(cal, "%s/cal-%s", s->dir, tag);
    FMT(host, "%s", getenv("SW_SIM_HOST") && o->sim_calibration ? getenv("SW_SIM_HOST") : "");
    if (!*host) FMT(host, "plan-%s", tag);
    FMT(env, "STARPU_NCPU=%d", p->ncpus); /* dit_train's workers (gpt_train's --ncpus says the same) */
    if (layers[nd - 1]) FMT(depth, "--layers %d", layers[nd - 1]); /* after the model's flags: the last one counts */
    if (!o->sim_calibration) {
        FMT(cmd, "%s sh '%s/bench/calibrate.sh' --build '%s' --calibration '%s' --host %s --np %d %s examples/%s %s "
                 "%s %s %s --steps 10", env, SW_SRCDIR, SW_BUILDDIR, cal, host, sim_world(p), s->cores ? "--cpu-time" : "",
                 p->name, p->model, depth, lay, p->run_flags);
        FMT(log, "%s/cal-%s.log", s->dir, tag);
        int rc = run_logged(cmd, log);
        if (rc != 0) {
            snprintf(note, n, "calibration failed (exit %d; %.200s)", rc, cmd);
            return -1;
        }
    }
    for (int i = 0; i < nd; i++) {
        depth[0] = 0;
        if (layers[i]) FMT(depth, "--layers %d", layers[i]);
        FMT(cmd, "%s sh '%s/bench/sim.sh' --build '%s' --calibration '%s' --host %s --platform '%s' %s examples/%s %s "
                 "%s %s %s %s --steps 3", env, SW_SRCDIR, s->build, cal, host, s->plat,
                 o->sim_estimate ? "--estimate --list-args '--steps 1'" : "", p->name, p->model, depth, lay,
                 p->run_flags, p->sim_flags);
        FMT(log, "%s/sim-%s-l%d.log", s->dir, tag, layers[i]);
        int rc = run_logged(cmd, log);
        if (rc == 0 && log_line(log, "simulation: ", rest, sizeof rest) && sscanf(rest, "%lf", &ms[i]) == 1 && ms[i] > 0)
            continue;
        if (log_line(log, "sim: error: ", rest, sizeof rest)) snprintf(note, n, "not simulated (exit %d): %.240s", rc, rest);
        else snprintf(note, n, "not simulated (exit %d; its output: %.200s)", rc, log);
        return -1;
    }
    return 0;
}

/* one layout through the simulated graph at the model's depth: the simulated ms/step, or NAN (why in note) */
static double sim_one(const sim_ctx *s, const plan_prog *p, const char *layout, const char *tag, char *note, size_t n)
{
    const int depth = 0;
    double ms;
    return sim_layout(s, p, layout, &depth, 1, &ms, tag, note, n) ? NAN : ms;
}

static void sim_close(const sim_ctx *s)
{
    char cmd[200];
    if (!getenv("SW_PLAN_KEEP")) {
        FMT(cmd, "rm -rf '%s'", s->dir);
        if (system(cmd) != 0) fprintf(stderr, "plan: could not remove %s\n", s->dir);
    } else printf("plan: simulation: the calibrations, platform and logs kept in %s (SW_PLAN_KEEP)\n", s->dir);
}

typedef struct sim_row {
    int rank;          /* in the estimate's table (1-based) */
    double est, sim;   /* ms/step: the estimate, the simulated graph (NAN: none) */
    char note[300];    /* why there is no simulated figure; --sim-layers: the two depths' steps */
} sim_row;

/* a layout through the simulated graph at --sim-layers A,B, its step extrapolated linearly to the model's depth
 * (the blocks repeat: a step is what the depth does not change plus a block's time per layer; the two depths
 * rounded up to the pipeline's blocks, pp x virtual chunks, which each stage holds alike); at the model's own
 * depth where B reaches it. The two steps in note. */
static double sim_extrapolated(const sim_ctx *s, const plan_prog *p, const char *layout, const char *tag, char *note,
                               size_t n)
{
    const plan_opts *o = &plan_o;
    const int q = flag_of(layout, "--pp ") * flag_of(layout, "--pp-virtual ");
    int d[2] = {(o->sim_la + q - 1) / q * q, (o->sim_lb + q - 1) / q * q};
    if (d[1] <= d[0]) d[1] = d[0] + q;
    if (d[1] >= p->layers) return sim_one(s, p, layout, tag, note, n);
    double ms[2];
    if (sim_layout(s, p, layout, d, 2, ms, tag, note, n)) return NAN;
    snprintf(note, n, "extrapolated from %d layers (%.3f ms) and %d (%.3f ms)", d[0], ms[0], d[1], ms[1]);
    return ms[0] + (ms[1] - ms[0]) * (p->layers - d[0]) / (d[1] - d[0]);
}

static int cmp_sim(const void *a, const void *b)
{
    const sim_row *x = a, *y = b;
    int nx = isnan(x->sim), ny = isnan(y->sim);
    if (nx != ny) return nx - ny;
    double kx = nx ? x->est : x->sim, ky = ny ? y->est : y->sim;
    return kx < ky ? -1 : kx > ky ? 1 : x->rank - y->rank;
}

/* --simulate N: the top N layouts of the estimate through the simulated task graph, a table ranked by the
 * simulated step with the estimate beside it. Without a simulation build: says so. */
static void simulate_top(const plan_row *e, int fit, const plan_prog *p, const sw_plan_machine *mc)
{
    sim_ctx s;
    if (!sim_open(&s, p, mc, "ranked by the estimate alone")) return;
    int n = plan_o.simulate < fit ? plan_o.simulate : fit;
    sim_row *rows = calloc((size_t)(n > 0 ? n : 1), sizeof *rows);
    if (!rows) sw_usage_error("--simulate: out of memory");
    char what[64];
    FMT(what, "the top %d layouts", n);
    sim_say(&s, p, what);
    if (plan_o.sim_la)
        printf("plan: simulation: EXTRAPOLATED: each at %d and %d layers (--sim-layers; rounded up to its pipeline's "
               "blocks), its step extrapolated linearly to the model's %d\n", plan_o.sim_la, plan_o.sim_lb, p->layers);
    if (*p->sim_flags) printf("plan: simulation: each run with %s (the machine's coll_offload 1)\n", p->sim_flags);
    if (plan_o.sim_estimate)
        printf("plan: simulation: task sizes the calibration lacks take regression ESTIMATES (--sim-estimate: "
               "bench/sim.sh --estimate)\n");
    for (int i = 0; i < n; i++) {
        char tag[16];
        FMT(tag, "%d", i);
        printf("plan: simulation: %d of %d: %s\n", i + 1, n, e[i].flags); /* progress: minutes each at scale */
        rows[i].rank = i + 1, rows[i].est = e[i].ms;
        rows[i].sim = plan_o.sim_la ? sim_extrapolated(&s, p, e[i].flags, tag, rows[i].note, sizeof rows[i].note)
                                    : sim_one(&s, p, e[i].flags, tag, rows[i].note, sizeof rows[i].note);
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_sim);
    printf("plan: simulated: %4s %4s %12s %14s %8s  layout (%s flags)\n", "sim", "est", "estimate ms", "simulated ms",
           "sim/est", p->name);
    int done = 0;
    for (int i = 0; i < n; i++) {
        const sim_row *r = &rows[i];
        const char *fl = e[r->rank - 1].flags;
        if (isnan(r->sim)) {
            printf("plan: simulated: %4s %4d %12.3f %14s %8s  %s: %s\n", "-", r->rank, r->est, "-", "-", fl, r->note);
            continue;
        }
        done++;
        printf("plan: simulated: %4d %4d %12.3f %14.3f %8.2f  %s%s%s%s\n", done, r->rank, r->est, r->sim, r->sim / r->est,
               fl, *r->note ? " (" : "", r->note, *r->note ? ")" : "");
    }
    if (done) printf("plan: simulation: best by the simulated graph: rank %d of the estimate (%.3f simulated ms/step)\n",
                     rows[0].rank, rows[0].sim);
    free(rows);
    sim_close(&s);
}

/* the planner's flags checked (exit 2), the world's size returned */
static int plan_world(void)
{
    plan_opts *o = &plan_o;
    if (o->nodes < 1) sw_usage_error("plan-nodes must be at least 1 (plan-nodes = %d)", o->nodes);
    if (o->ranks < 0 || o->ranks_per_node < 0)
        sw_usage_error("plan-ranks (%d) and plan-ranks-per-node (%d) must not be negative", o->ranks, o->ranks_per_node);
    if (!o->ranks && !o->ranks_per_node) sw_usage_error("--plan and --check-config need the world: --plan-ranks N, or "
                                                        "--plan-ranks-per-node R (and --plan-nodes N)");
    int world = o->ranks ? o->ranks : o->ranks_per_node * o->nodes;
    if (!o->ranks_per_node) o->ranks_per_node = world / o->nodes;
    if (o->ranks_per_node * o->nodes != world)
        sw_usage_error("plan-ranks (%d) must equal plan-ranks-per-node x plan-nodes (%d x %d)", world,
                       o->ranks_per_node, o->nodes);
    if (o->mem_mib < 0) sw_usage_error("plan-mem-mib must not be negative (plan-mem-mib = %d)", o->mem_mib);
    if (o->simulate < 0) sw_usage_error("simulate must not be negative (simulate = %d)", o->simulate);
    if (o->simulate_verified && !o->verify && !o->verify_spread)
        sw_usage_error("--simulate-verified simulates the layouts --verify K or --verify-spread N runs: give one of them "
                       "(verify = %d, verify-spread = %d)", o->verify, o->verify_spread);
    if (o->top < 1 || o->verify < 0 || o->verify_bottom < 0 || o->verify_steps < 2)
        sw_usage_error("plan-top must be positive (%d), verify and verify-bottom not negative (%d, %d), verify-steps "
                       "at least 2 (%d)", o->top, o->verify, o->verify_bottom, o->verify_steps);
    if (o->verify_spread < 0 || o->verify_spread > 64)
        sw_usage_error("verify-spread must be 0 to 64 (verify-spread = %d)", o->verify_spread);
    if (o->sim_layers) {
        char end;
        if (sscanf(o->sim_layers, "%d,%d%c", &o->sim_la, &o->sim_lb, &end) != 2 || o->sim_la < 1 || o->sim_lb <= o->sim_la)
            sw_usage_error("sim-layers must be two depths A,B with 1 <= A < B (sim-layers = %s)", o->sim_layers);
        if (!o->simulate) sw_usage_error("--sim-layers sets the depths of --simulate N's runs: give --simulate (simulate = 0)");
    }
    if (o->sim_ranks && (!o->simulate || o->sim_ranks < 0 || o->sim_ranks > world || world % o->sim_ranks ||
                         o->sim_ranks % o->ranks_per_node))
        sw_usage_error("sim-ranks must go with --simulate and divide the world into whole nodes: a positive divisor of "
                       "plan-ranks (%d) and a multiple of plan-ranks-per-node (%d) (sim-ranks = %d, simulate = %d)",
                       world, o->ranks_per_node, o->sim_ranks, o->simulate);
    if (o->sim_estimate && !o->simulate && !o->simulate_verified)
        sw_usage_error("--sim-estimate applies to the simulated runs: give --simulate N or --simulate-verified");
    if ((o->verify || o->verify_spread) && world > 4)
        sw_usage_error("--verify runs the layouts on this machine: at most 4 ranks (plan-ranks = %d)", world);
    return world;
}

/* the model's shapes its other kernels are measured at (sw_plan_machine_kernels; vocab 0: no cross-entropy) */
typedef struct {
    int hidden, head_dim, seq, ffn, vocab, swiglu;
} kernel_shape;

/* the machine: the file's figures, this machine's measured where the file lacks the first seven (the
 * runtime started for the measurement; sw_shutdown after the search) */

static void plan_machine(sw_plan_machine *mc, const kernel_shape *k)
{
    plan_opts *o = &plan_o;
    char msg[512];
    memset(mc, 0, sizeof *mc);
    if (o->machine && sw_plan_machine_read(mc, o->machine, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    start_runtime();
    if (!(mc->gemm_gflops > 0) || !(mc->cores > 0) || !(mc->intra_gbs > 0) || !(mc->inter_gbs > 0) || !(mc->task_us > 0)) {
        sw_plan_machine_here(mc, NULL, k->hidden); /* this machine, then the file's figures over it */
        sw_plan_machine_kernels(mc, k->head_dim, k->seq, k->ffn, k->vocab, k->swiglu);
        if (o->machine) sw_plan_machine_read(mc, o->machine, msg, sizeof msg);
    }
}

/* the layouts run for real: the table's indices (of fit) --verify K [--verify-bottom B] or --verify-spread N
 * picks; their count */
static int verify_picks(int fit, int *pick)
{
    plan_opts *o = &plan_o;
    int np = 0;
    if (o->verify_spread) /* first, last and evenly between: a range of predicted times to rank */
        for (int k = 0; k < o->verify_spread && k < fit; k++) {
            int i = o->verify_spread > 1 && fit > 1 ? (int)lround((double)k * (fit - 1) / (o->verify_spread - 1)) : 0;
            if (!np || i != pick[np - 1]) pick[np++] = i;
        }
    else {
        for (int i = 0; i < fit && np < o->verify && np < 32; i++) pick[np++] = i;
        for (int i = fit - o->verify_bottom; i < fit && np < 64; i++)
            if (i >= o->verify) pick[np++] = i;
    }
    return np;
}

/* Spearman, the layouts within 20 % and the largest error of ok verified layouts; what: the prediction
 * ("predicted", "the estimate", "the simulated graph") */
static void verify_summary(const char *what, const double *pred, const double *meas, int ok)
{
    if (ok < 2) return;
    int within = 0;
    double worst = 0;
    for (int i = 0; i < ok; i++) {
        double err = fabs(pred[i] - meas[i]) / meas[i];
        within += err <= 0.2, worst = fmax(worst, err);
    }
    printf("verify: Spearman rank correlation of %s and measured ms/step: %.3f (%d layouts); %d of %d within 20 %%, "
           "the largest error %.0f %%\n", what, spearman(pred, meas, ok), ok, within, ok, 100 * worst);
}

/* --verify K / --verify-spread N: the picked layouts run for real here, predicted beside measured; with
 * --simulate-verified each also through the simulated graph (calibrated by a real run of its own sizes) */
static void verify(const plan_row *e, int fit, const plan_prog *p, const sw_plan_machine *mc)
{
    int pick[64], np = verify_picks(fit, pick), ok = 0, oks = 0;
    double pred[64], meas[64], spred[64], smeas[64];
    sim_ctx s;
    const int sim = plan_o.simulate_verified && sim_open(&s, p, mc, "verified against the estimate alone");
    if (sim) sim_say(&s, p, "every layout verified");
    printf("verify: %d layouts run on this machine (%d steps each, steps 2.. timed, %d CPU worker(s) per rank%s%s)\n",
           np, plan_o.verify_steps, p->ncpus, *verify_bind(p) ? ", ranks unbound: mpirun" : "", verify_bind(p));
    if (sim)
        printf("verify: %4s %12s %12s %12s %8s %8s %12s %12s %12s %12s  %s\n", "rank", "estimate ms", "simulated ms",
               "measured ms", "est err", "sim err", "model MiB", "run's model", "allocator", "StarPU peak", "layout");
    else
        printf("verify: %4s %12s %12s %8s %12s %12s %12s %12s  %s\n", "rank", "predicted ms", "measured ms", "error",
               "model MiB", "run's model", "allocator", "StarPU peak", "layout");
    for (int k = 0; k < np; k++) {
        const plan_row *x = &e[pick[k]];
        double ms, model, alloc, peak, sms = NAN;
        char note[300] = "", tag[16], meas_c[16] = "-", err_c[16] = "-", sim_c[24] = "", serr_c[24] = "";
        char need_c[16], model_c[16] = "-", alloc_c[16] = "-", peak_c[16] = "-";
        fflush(stdout);
        const int ran = run_one(p, x->flags, &ms, &model, &alloc, &peak) == 0;
        /* the run's model as precise as the run prints it: dit_train's in bytes, gpt_train's in MiB to 2 places */
        const int digits = alloc >= 0 ? 3 : 2;
        FMT(need_c, "%.*f", digits, x->need / SW_MIB);
        if (sim) { /* after the measured run: the calibration is a real run too, not beside it */
            FMT(tag, "v%d", pick[k] + 1);
            sms = sim_one(&s, p, x->flags, tag, note, sizeof note);
            FMT(sim_c, " %12s", "-");
            FMT(serr_c, " %8s", "-");
            if (!isnan(sms)) FMT(sim_c, " %12.1f", sms);
        }
        if (ran) {
            FMT(meas_c, "%.1f", ms);
            FMT(err_c, "%.1f%%", 100 * (x->ms - ms) / ms);
            FMT(model_c, "%.*f", digits, model);
            FMT(peak_c, "%.2f", peak);
            if (alloc >= 0) FMT(alloc_c, "%.3f", alloc);
            pred[ok] = x->ms, meas[ok] = ms, ok++;
            if (!isnan(sms)) {
                spred[oks] = sms, smeas[oks] = ms, oks++;
                FMT(serr_c, " %7.1f%%", 100 * (sms - ms) / ms);
            }
        }
        printf("verify: %4d %12.1f%s %12s %8s%s %12s %12s %12s %12s  %s%s%s%s\n", pick[k] + 1, x->ms, sim_c, meas_c,
               err_c, serr_c, need_c, model_c, alloc_c, peak_c, x->flags, ran ? "" : " (the run failed)",
               *note ? ": " : "", note);
    }
    if (!sim) verify_summary("predicted", pred, meas, ok);
    else {
        verify_summary("the estimate", pred, meas, ok);
        verify_summary("the simulated graph", spred, smeas, oks);
        sim_close(&s);
    }
}

/* the machine (plan_machine: the runtime started), the run's workers per rank, and the search's header: the
 * model (p->model set), the world, the budget and the machine's figures */
static void plan_start(plan_prog *p, sw_plan_machine *mc, const kernel_shape *k)
{
    plan_opts *o = &plan_o;
    if (o->sim_la && o->sim_lb >= p->layers)
        sw_usage_error("sim-layers' depths (%d, %d) must be below the model's layers (%d): there --simulate runs the "
                       "model itself", o->sim_la, o->sim_lb, p->layers);
    plan_machine(mc, k);
    p->ncpus = mc->cores / o->ranks_per_node >= 1 ? (int)(mc->cores / o->ranks_per_node) : 1;
    printf("plan: %s %s on %d ranks (%d per node x %d nodes), memory budget %s\n", p->name, p->model, p->world,
           o->ranks_per_node, o->nodes, o->mem_mib ? "" : "none");
    if (o->mem_mib) printf("plan: memory budget %d MiB per rank\n", o->mem_mib);
    sw_plan_machine_print(mc, stdout, "plan: machine: ");
}

/* the rest, the same for both programs: the counts, --plan-list, the refusals (exit 2), the ranked table, the
 * dropped ones; then (the runtime shut down) --simulate and --verify. Frees e. */
static int plan_report(const plan_prog *p, plan_row *e, int n, const sw_plan_machine *mc)
{
    plan_opts *o = &plan_o;
    int legal = 0, fit = 0;
    for (int i = 0; i < n; i++) legal += e[i].legal, fit += e[i].legal && e[i].fits;
    printf("plan: %d candidate layouts, %d legal (the rules %s refuses flags by), %d fit the budget\n", n, legal,
           p->name, fit);
    if (o->list) {
        FILE *f = fopen(o->list, "w");
        if (!f) sw_usage_error("cannot write plan-list '%s'", o->list);
        for (int i = 0; i < n; i++)
            if (e[i].legal && e[i].fits)
                fprintf(f, "fits\t%s\tneed %.0f bytes on rank %d, %.3f ms/step\n", e[i].flags, e[i].need,
                        e[i].need_rank, e[i].ms);
            else fprintf(f, "%s\t%s\t%s\n", e[i].legal ? "dropped" : "illegal", e[i].flags, e[i].why);
        fclose(f);
    }
    fflush(stdout);
    if (!legal) sw_usage_error("no legal layout of this model on %d ranks (e.g. %s)", p->world, n ? e[0].why : "none");
    if (!fit) /* sorted: the first dropped one needs the least */
        sw_usage_error("no layout fits the memory budget of %d MiB per rank: the smallest need found is %.2f MiB "
                       "(%.0f bytes, rank %d), with %s", o->mem_mib, e[0].need / SW_MIB, e[0].need, e[0].need_rank,
                       e[0].flags);
    printf("plan: %4s %10s %9s %9s %9s %9s %9s %10s  layout (%s flags)\n", "rank", "ms/step", "compute", "comm",
           "bubble", "tasks", "cores", "MiB/rank", p->name);
    for (int i = 0; i < fit && i < o->top; i++)
        printf("plan: %4d %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f  %s\n", i + 1, e[i].ms, e[i].compute_ms,
               e[i].comm_ms, e[i].bubble_ms, e[i].overhead_ms, e[i].cores_ms, e[i].need / SW_MIB, e[i].flags);
    if (fit > o->top) printf("plan: ... %d more that fit (--plan-top)\n", fit - o->top);
    for (int i = fit, shown = 0; i < legal && shown < 5; i++, shown++)
        printf("plan: dropped: %s: %s\n", e[i].flags, e[i].why);
    if (legal - fit > 5) printf("plan: ... %d more dropped (--plan-list FILE lists every one)\n", legal - fit - 5);
    sw_shutdown();
    if (o->simulate) simulate_top(e, fit, p, mc);
    if (o->verify || o->verify_spread) verify(e, fit, p, mc); /* the top K and a few from the bottom, or a spread */
    free(e);
    return 0;
}

/* rows: the n entries x of either planner as rows (flags_of: that planner's flags of one entry) */
#define PLAN_ROWS(rows, x, n, flags_of)                                                                       \
    do {                                                                                                      \
        if (!((rows) = calloc((size_t)((n) > 0 ? (n) : 1), sizeof *(rows)))) sw_usage_error("out of memory"); \
        for (int i_ = 0; i_ < (n); i_++) {                                                                    \
            PLAN_ROW(&(rows)[i_], &(x)[i_]);                                                                  \
            flags_of(&(x)[i_], (rows)[i_].flags, sizeof (rows)[i_].flags);                                    \
        }                                                                                                     \
    } while (0)

static void gpt_flags_of(const sw_plan_entry *e, char *out, size_t n) { sw_plan_flags(&e->cfg, out, n); }

int plan_main(const sw_gpt_config *cfg, const char *argv0)
{
    plan_prog p = {.name = "gpt_train", .argv0 = argv0, .world = plan_world(), .layers = cfg->layers,
                   .batch = cfg->batch};
    if (plan_o.check_config) return check_config(cfg, p.world);
    sw_plan_machine mc;
    model_flags(cfg, p.model, sizeof p.model);
    plan_start(&p, &mc, &(kernel_shape){cfg->hidden, cfg->hidden / cfg->heads, cfg->seq, cfg->ffn,
                                        cfg->vocab_padded > 0 ? cfg->vocab_padded : cfg->vocab, cfg->model == SW_MODEL_LLAMA});
    snprintf(p.run_flags, sizeof p.run_flags, "--ncpus %d --log /dev/null", p.ncpus);
    /* the collectives as the estimate prices them: progressing beside the workers, MPI's own algorithms */
    if (mc.coll_offload) snprintf(p.sim_flags, sizeof p.sim_flags, "--collective-algo mpi");
    int n = 0;
    sw_plan_entry *e = sw_plan_layouts(cfg, &(sw_plan_world){plan_o.ranks_per_node, plan_o.nodes}, NULL, &mc,
                                       plan_o.mem_mib * SW_MIB, &n);
    plan_row *rows;
    PLAN_ROWS(rows, e, n, gpt_flags_of);
    free(e);
    return plan_report(&p, rows, n, &mc);
}

/* ------------------------------------------------------ dit_train --plan */

/* the DiT's model flags, as dit_train reads them (the layout's come from sw_plan_dit_flags) */
static void dit_model_flags(const sw_dit_config *c, char *out, size_t n)
{
    snprintf(out, n, "--frames %d --height %d --width %d --channels %d --patch %d --hidden %d --heads %d --layers %d "
             "--cond-len %d --cond-dim %d --batch %d --dtype %s --seed %d", c->frames, c->height, c->width, c->channels,
             c->patch, c->hidden, c->heads, c->layers, c->cond_len, c->cond_dim, c->batch,
             c->dtype == SW_BF16 ? "bf16" : "fp32", (int)c->seed);
}

int plan_dit_main(const sw_dit_config *cfg, int pp, const char *argv0)
{
    plan_prog p = {.name = "dit_train", .argv0 = argv0, .world = plan_world(), .layers = cfg->layers,
                   .batch = cfg->batch};
    if (plan_o.check_config) { /* after dit_train's rules (its check_flags): the world, then every rank's model
                                * described as sw_dit_create describes it (the layers and the pipeline refuse there) */
        char msg[512];
        sw_mesh_dims d = {cfg->tp, cfg->ulysses, cfg->ring, cfg->dp, pp};
        if (sw_mesh_check(&d, p.world, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
        for (int r = 0; r < p.world; r++) sw_dit_plan_rank(cfg, pp, r, NULL, NULL, NULL); /* nothing allocated, no runtime */
        printf("check-config: accepted on %d ranks\n", p.world);
        return 0;
    }
    sw_plan_machine mc;
    dit_model_flags(cfg, p.model, sizeof p.model);
    /* the DiT's attention over a frame's patches (spatial; the temporal one over the frames is shorter), its
     * MLP GELU over 4 hidden, no cross-entropy */
    plan_start(&p, &mc, &(kernel_shape){cfg->hidden, cfg->hidden / cfg->heads, (cfg->height / cfg->patch) * (cfg->width / cfg->patch),
                                        4 * cfg->hidden, 0, 0}); /* dit_train's workers: STARPU_NCPU in its runs' environment (no flag) */
    int n = 0;
    sw_plan_dit_entry *e = sw_plan_dit_layouts(cfg, &(sw_plan_world){plan_o.ranks_per_node, plan_o.nodes}, NULL, &mc,
                                               plan_o.mem_mib * SW_MIB, &n);
    plan_row *rows;
    PLAN_ROWS(rows, e, n, sw_plan_dit_flags);
    free(e);
    return plan_report(&p, rows, n, &mc);
}
