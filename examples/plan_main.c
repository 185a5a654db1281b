/* gpt_train --plan, --verify and --check-config (docs/planner.md). */
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

/* runs one layout for real: ms/step (steps 2..), the model's need and StarPU's peak (MiB, the most of any rank) */
static int run_one(const char *argv0, const char *model, const sw_plan_entry *e, int world, int ncpus, double *ms,
                   double *need, double *peak)
{
    char layout[256], cmd[2048], line[1024];
    sw_plan_flags(&e->cfg, layout, sizeof layout);
    snprintf(cmd, sizeof cmd, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 STARPU_WORKERS_NOBIND=1 "
             "STARPU_MPI_NOBIND=1 mpirun --oversubscribe -np %d -x STARPU_WORKERS_NOBIND -x STARPU_MPI_NOBIND "
             "%s %s %s --ncpus %d --steps %d --log /dev/null --memory-report 2>&1 < /dev/null", world, argv0, model,
             layout, ncpus, plan_o.verify_steps);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    *ms = NAN, *need = 0, *peak = 0;
    while (fgets(line, sizeof line, p)) {
        double a, b, v;
        int r, s;
        char *at;
        if (sscanf(line, "gpt_train: loss %lf -> %lf after %d steps, %lf ms/step", &a, &b, &s, &v) == 4) *ms = v;
        if (sscanf(line, "memory: rank %d: the model needs %lf MiB", &r, &v) == 2 && v > *need) *need = v;
        if (!strncmp(line, "memory: rank ", 13) && (at = strstr(line, ": peak ")) && sscanf(at, ": peak %lf", &v) == 1 &&
            v > *peak)
            *peak = v;
    }
    int rc = pclose(p);
    return rc == 0 && isfinite(*ms) ? 0 : -1;
}

/* ---------------------------------------------------- --simulate N */

/* snprintf into an array, refusing what does not fit (a path too long) */
#define FMT(buf, ...)                                                                          \
    do {                                                                                       \
        if (snprintf(buf, sizeof buf, __VA_ARGS__) >= (int)sizeof buf)                         \
            sw_usage_error("--simulate: a command or path longer than %zu characters", sizeof buf); \
    } while (0)

#ifndef SW_SRCDIR
#define SW_SRCDIR "."
#endif
#ifndef SW_BUILDDIR
#define SW_BUILDDIR "."
#endif

/* 1 if dir is a simulation build with gpt_train (configure saw StarPU's SimGrid: docs/simulation.md) */
static int is_sim_build(const char *dir)
{
    char path[1200], line[256];
    FMT(path, "%s/examples/gpt_train", dir);
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

typedef struct sim_row {
    int rank;          /* in the estimate's table (1-based) */
    double est, sim;   /* ms/step: the estimate, the simulated graph (NAN: none) */
    char note[300];    /* why there is no simulated figure */
} sim_row;

static int cmp_sim(const void *a, const void *b)
{
    const sim_row *x = a, *y = b;
    int nx = isnan(x->sim), ny = isnan(y->sim);
    if (nx != ny) return nx - ny;
    double kx = nx ? x->est : x->sim, ky = ny ? y->est : y->sim;
    return kx < ky ? -1 : kx > ky ? 1 : x->rank - y->rank;
}

/* --simulate N: the top N layouts of the estimate through the simulated task graph (bench/sim.sh on a
 * platform of the machine's link figures, bench/sim-platform.sh), each calibrated by a real run of its
 * own (bench/calibrate.sh, at most 4 ranks here) unless --sim-calibration names a calibration; a table
 * ranked by the simulated step with the estimate beside it. Without a simulation build: says so. */
static void simulate_top(const sw_plan_entry *e, int fit, const char *model, const sw_plan_machine *mc, int world)
{
    plan_opts *o = &plan_o;
    char simb[1024];
    const char *env = getenv("SW_SIM_BUILD");
    FMT(simb, "%s", o->sim_build ? o->sim_build : env && *env ? env : SW_SRCDIR "/build-sim");
    if (!is_sim_build(simb)) {
        printf("plan: simulation: no simulation build with examples/gpt_train in %s (docs/simulation.md: "
               "autotools/build-starpu.sh --simgrid, configure --with-starpu=PREFIX there; or --sim-build DIR, "
               "SW_SIM_BUILD): ranked by the estimate alone\n", simb);
        return;
    }
    if (!o->sim_calibration && world > 4) {
        printf("plan: simulation: each layout's sizes need a calibration (a real run; this machine runs at most 4 "
               "ranks, the world is %d): give --sim-calibration DIR (bench/calibrate.sh): ranked by the estimate "
               "alone\n", world);
        return;
    }
    char tmp[] = "/tmp/sw-plan-sim.XXXXXX";
    if (!mkdtemp(tmp)) sw_usage_error("--simulate: cannot make a temporary directory in /tmp");
    int ncpus = mc->cores / o->ranks_per_node >= 1 ? (int)(mc->cores / o->ranks_per_node) : 1;
    char cmd[4096], log[1100], line[1024], plat[1100];
    FMT(plat, "%s/platform", tmp);
    /* the platform prices the network as the estimate does: the machine's link figures, unless a preset is named */
    if (o->sim_preset)
        FMT(cmd, "sh '%s/bench/sim-platform.sh' --nodes %d --ranks-per-node %d --cpus %d --preset '%s' "
                 "--out '%s'", SW_SRCDIR, o->nodes, o->ranks_per_node, ncpus, o->sim_preset, plat);
    else
        FMT(cmd, "sh '%s/bench/sim-platform.sh' --nodes %d --ranks-per-node %d --cpus %d --intra-bw %g "
                 "--intra-lat %g --inter-bw %g --inter-lat %g --out '%s'", SW_SRCDIR, o->nodes, o->ranks_per_node,
                 ncpus, mc->intra_gbs, mc->intra_us, mc->inter_gbs, mc->inter_us, plat);
    FMT(log, "%s/platform.log", tmp);
    if (run_logged(cmd, log) != 0) {
        FILE *f = fopen(log, "r");
        while (f && fgets(line, sizeof line, f)) fputs(line, stdout);
        if (f) fclose(f);
        sw_usage_error("--simulate: bench/sim-platform.sh failed (%s)", cmd);
    }
    int n = o->simulate < fit ? o->simulate : fit;
    sim_row *rows = calloc((size_t)(n > 0 ? n : 1), sizeof *rows);
    if (!rows) sw_usage_error("--simulate: out of memory");
    printf("plan: simulation: the top %d layouts through the simulated task graph (bench/sim.sh, %s; platform: %d node(s) "
           "x %d rank(s), %d CPU worker(s) each, %s), each %s\n", n, simb, o->nodes, o->ranks_per_node, ncpus,
           o->sim_preset ? o->sim_preset : "the machine's link figures",
           o->sim_calibration ? "with the calibration given (--sim-calibration)"
                              : "calibrated by a real run of its own on this machine (bench/calibrate.sh, 10 steps)");
    for (int i = 0; i < n; i++) {
        sim_row *r = &rows[i];
        r->rank = i + 1, r->est = e[i].ms, r->sim = NAN;
        char fl[256], cal[1100], host[64];
        sw_plan_flags(&e[i].cfg, fl, sizeof fl);
        if (o->sim_calibration) FMT(cal, "%s", o->sim_calibration);
        else FMT(cal, "%s/cal%d", tmp, i);
        FMT(host, "%s", getenv("SW_SIM_HOST") && o->sim_calibration ? getenv("SW_SIM_HOST") : "");
        if (!*host) FMT(host, "plan-%d", i);
        if (!o->sim_calibration) {
            FMT(cmd, "sh '%s/bench/calibrate.sh' --build '%s' --calibration '%s' --host %s --np %d "
                     "examples/gpt_train %s %s --ncpus %d --steps 10 --quiet --log /dev/null", SW_SRCDIR, SW_BUILDDIR,
                     cal, host, world, model, fl, ncpus);
            FMT(log, "%s/cal%d.log", tmp, i);
            int rc = run_logged(cmd, log);
            if (rc != 0) {
                FMT(r->note, "calibration failed (exit %d; %s)", rc, cmd);
                continue;
            }
        }
        FMT(cmd, "sh '%s/bench/sim.sh' --build '%s' --calibration '%s' --host %s --platform '%s' "
                 "examples/gpt_train %s %s --ncpus %d --steps 3 --log /dev/null", SW_SRCDIR, simb, cal, host, plat, model,
                 fl, ncpus);
        FMT(log, "%s/sim%d.log", tmp, i);
        int rc = run_logged(cmd, log);
        char rest[1024];
        double v;
        if (rc == 0 && log_line(log, "simulation: ", rest, sizeof rest) && sscanf(rest, "%lf", &v) == 1 && v > 0)
            r->sim = v;
        else if (log_line(log, "sim: error: ", rest, sizeof rest))
            FMT(r->note, "not simulated (exit %d): %.240s", rc, rest);
        else FMT(r->note, "not simulated (exit %d; its output: %s)", rc, log);
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_sim);
    printf("plan: simulated: %4s %4s %12s %14s %8s  %s\n", "sim", "est", "estimate ms", "simulated ms", "sim/est",
           "layout (gpt_train flags)");
    int done = 0;
    for (int i = 0; i < n; i++) {
        const sim_row *r = &rows[i];
        char fl[256];
        sw_plan_flags(&e[r->rank - 1].cfg, fl, sizeof fl);
        if (isnan(r->sim)) {
            printf("plan: simulated: %4s %4d %12.3f %14s %8s  %s: %s\n", "-", r->rank, r->est, "-", "-", fl, r->note);
            continue;
        }
        done++;
        printf("plan: simulated: %4d %4d %12.3f %14.3f %8.2f  %s\n", done, r->rank, r->est, r->sim, r->sim / r->est, fl);
    }
    if (done) printf("plan: simulation: best by the simulated graph: rank %d of the estimate (%.3f simulated ms/step)\n",
                     rows[0].rank, rows[0].sim);
    free(rows);
    if (!getenv("SW_PLAN_KEEP")) {
        FMT(cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) fprintf(stderr, "plan: could not remove %s\n", tmp);
    } else printf("plan: simulation: the calibrations, platform and logs kept in %s (SW_PLAN_KEEP)\n", tmp);
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
    if (o->top < 1 || o->verify < 0 || o->verify_bottom < 0 || o->verify_steps < 2)
        sw_usage_error("plan-top must be positive (%d), verify and verify-bottom not negative (%d, %d), verify-steps "
                       "at least 2 (%d)", o->top, o->verify, o->verify_bottom, o->verify_steps);
    if (o->verify_spread < 0 || o->verify_spread > 64)
        sw_usage_error("verify-spread must be 0 to 64 (verify-spread = %d)", o->verify_spread);
    if ((o->verify || o->verify_spread) && world > 4)
        sw_usage_error("--verify runs the layouts on this machine: at most 4 ranks (plan-ranks = %d)", world);
    return world;
}

/* the machine: the file's figures, this machine's measured where the file lacks the first seven (the
 * runtime started for the measurement; sw_shutdown after the search) */
static void plan_machine(sw_plan_machine *mc, int hidden)
{
    plan_opts *o = &plan_o;
    char msg[512];
    memset(mc, 0, sizeof *mc);
    if (o->machine && sw_plan_machine_read(mc, o->machine, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    start_runtime();
    if (!(mc->gemm_gflops > 0) || !(mc->cores > 0) || !(mc->intra_gbs > 0) || !(mc->inter_gbs > 0) || !(mc->task_us > 0)) {
        sw_plan_machine_here(mc, NULL, hidden); /* this machine, then the file's figures over it */
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

/* Spearman, the layouts within 20 % and the largest error of ok verified layouts */
static void verify_summary(const double *pred, const double *meas, int ok)
{
    if (ok < 2) return;
    int within = 0;
    double worst = 0;
    for (int i = 0; i < ok; i++) {
        double err = fabs(pred[i] - meas[i]) / meas[i];
        within += err <= 0.2, worst = fmax(worst, err);
    }
    printf("verify: Spearman rank correlation of predicted and measured ms/step: %.3f (%d layouts); %d of %d "
           "within 20 %%, the largest error %.0f %%\n", spearman(pred, meas, ok), ok, within, ok, 100 * worst);
}

int plan_main(const sw_gpt_config *cfg, const char *argv0)
{
    plan_opts *o = &plan_o;
    int world = plan_world();
    if (o->check_config) return check_config(cfg, world);

    sw_plan_machine mc;
    plan_machine(&mc, cfg->hidden);
    char model[512];
    model_flags(cfg, model, sizeof model);
    printf("plan: %s on %d ranks (%d per node x %d nodes), memory budget %s\n", model, world, o->ranks_per_node,
           o->nodes, o->mem_mib ? "" : "none");
    if (o->mem_mib) printf("plan: memory budget %d MiB per rank\n", o->mem_mib);
    sw_plan_machine_print(&mc, stdout, "plan: machine: ");
    sw_plan_world w = {o->ranks_per_node, o->nodes};
    int n = 0;
    sw_plan_entry *e = sw_plan_layouts(cfg, &w, NULL, &mc, o->mem_mib * SW_MIB, &n);
    int legal = 0, fit = 0;
    for (int i = 0; i < n; i++) legal += e[i].legal, fit += e[i].legal && e[i].fits;
    printf("plan: %d candidate layouts, %d legal (the rules gpt_train refuses flags by), %d fit the budget\n", n, legal,
           fit);
    if (o->list) {
        FILE *f = fopen(o->list, "w");
        if (!f) sw_usage_error("cannot write plan-list '%s'", o->list);
        for (int i = 0; i < n; i++) {
            char fl[256];
            sw_plan_flags(&e[i].cfg, fl, sizeof fl);
            if (e[i].legal && e[i].fits)
                fprintf(f, "fits\t%s\tneed %.0f bytes on rank %d, %.3f ms/step\n", fl, e[i].need, e[i].need_rank, e[i].ms);
            else fprintf(f, "%s\t%s\t%s\n", e[i].legal ? "dropped" : "illegal", fl, e[i].why);
        }
        fclose(f);
    }
    fflush(stdout);
    if (!legal) sw_usage_error("no legal layout of this model on %d ranks (e.g. %s)", world, n ? e[0].why : "none");
    if (!fit) { /* sorted: the first dropped one needs the least */
        char fl[256];
        sw_plan_flags(&e[0].cfg, fl, sizeof fl);
        sw_usage_error("no layout fits the memory budget of %d MiB per rank: the smallest need found is %.2f MiB "
                       "(%.0f bytes, rank %d), with %s", o->mem_mib, e[0].need / SW_MIB, e[0].need, e[0].need_rank, fl);
    }
    printf("plan: %4s %10s %9s %9s %9s %9s %9s %10s  %s\n", "rank", "ms/step", "compute", "comm", "bubble", "tasks",
           "cores", "MiB/rank", "layout (gpt_train flags)");
    for (int i = 0; i < fit && i < o->top; i++) {
        char fl[256];
        sw_plan_flags(&e[i].cfg, fl, sizeof fl);
        printf("plan: %4d %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f  %s\n", i + 1, e[i].ms, e[i].compute_ms,
               e[i].comm_ms, e[i].bubble_ms, e[i].overhead_ms, e[i].cores_ms, e[i].need / SW_MIB, fl);
    }
    if (fit > o->top) printf("plan: ... %d more that fit (--plan-top)\n", fit - o->top);
    for (int i = fit, shown = 0; i < legal && shown < 5; i++, shown++) {
        char fl[256];
        sw_plan_flags(&e[i].cfg, fl, sizeof fl);
        printf("plan: dropped: %s: %s\n", fl, e[i].why);
    }
    if (legal - fit > 5) printf("plan: ... %d more dropped (--plan-list FILE lists every one)\n", legal - fit - 5);
    sw_shutdown();

    if (o->simulate) simulate_top(e, fit, model, &mc, world);
    if (o->verify || o->verify_spread) { /* the top K and a few from the bottom, or a spread, run for real here */
        int pick[64], np = verify_picks(fit, pick);
        double pred[64], meas[64];
        int ok = 0, ncpus = mc.cores / o->ranks_per_node >= 1 ? (int)(mc.cores / o->ranks_per_node) : 1;
        printf("verify: %d layouts run on this machine (%d steps each, steps 2.. timed, %d CPU worker(s) per rank)\n",
               np, o->verify_steps, ncpus);
        printf("verify: %4s %12s %12s %8s %12s %12s %12s  %s\n", "rank", "predicted ms", "measured ms", "error",
               "model MiB", "run's model", "StarPU peak", "layout");
        for (int k = 0; k < np; k++) {
            const sw_plan_entry *x = &e[pick[k]];
            double ms, need, peak;
            char fl[256];
            sw_plan_flags(&x->cfg, fl, sizeof fl);
            fflush(stdout);
            if (run_one(argv0, model, x, world, ncpus, &ms, &need, &peak) != 0) {
                printf("verify: %4d %12.1f %12s %8s %12.2f %12s %12s  %s (the run failed)\n", pick[k] + 1, x->ms, "-",
                       "-", x->need / SW_MIB, "-", "-", fl);
                continue;
            }
            pred[ok] = x->ms, meas[ok] = ms, ok++;
            printf("verify: %4d %12.1f %12.1f %7.1f%% %12.2f %12.2f %12.2f  %s\n", pick[k] + 1, x->ms, ms,
                   100 * (x->ms - ms) / ms, x->need / SW_MIB, need, peak, fl);
        }
        verify_summary(pred, meas, ok);
    }
    free(e);
    return 0;
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

/* runs one DiT layout for real: ms/step (dit_train's mean of steps 2..), the model's bytes at creation and
 * StarPU's allocator's then (the most of any rank, MiB), StarPU's peak of main RAM (MiB) */
static int run_dit(const char *argv0, const char *model, const sw_plan_dit_entry *e, int world, int ncpus, double *ms,
                   double *model_mib, double *alloc_mib, double *peak)
{
    char layout[256], cmd[2048], line[1024];
    sw_plan_dit_flags(e, layout, sizeof layout);
    snprintf(cmd, sizeof cmd, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 STARPU_WORKERS_NOBIND=1 "
             "STARPU_MPI_NOBIND=1 STARPU_NCPU=%d mpirun --oversubscribe -np %d -x STARPU_WORKERS_NOBIND -x "
             "STARPU_MPI_NOBIND -x STARPU_NCPU %s %s %s --steps %d --memory-report 2>&1 < /dev/null", ncpus, world,
             argv0, model, layout, plan_o.verify_steps);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    *ms = NAN, *model_mib = 0, *alloc_mib = 0, *peak = 0;
    while (fgets(line, sizeof line, p)) {
        double a, b, v;
        int r, s0, s1;
        char *at;
        if (sscanf(line, "mean step time (steps %d .. %d): %lf ms", &s0, &s1, &v) == 3) *ms = v;
        if (sscanf(line, "memory: rank %d created: allocator %lf bytes, model %lf bytes", &r, &a, &b) == 3)
            *alloc_mib = fmax(*alloc_mib, a / SW_MIB), *model_mib = fmax(*model_mib, b / SW_MIB);
        if (!strncmp(line, "memory: rank ", 13) && (at = strstr(line, ": peak ")) && sscanf(at, ": peak %lf", &v) == 1 &&
            v > *peak)
            *peak = v;
    }
    int rc = pclose(p);
    return rc == 0 && isfinite(*ms) ? 0 : -1;
}

int plan_dit_main(const sw_dit_config *cfg, int pp, const char *argv0)
{
    plan_opts *o = &plan_o;
    int world = plan_world();
    char msg[512];
    if (o->simulate) sw_usage_error("--simulate is gpt_train's (dit_train --plan ranks by the estimate)");
    if (o->check_config) { /* after dit_train's rules (its check_flags): the world, then every rank's model described
                            * as sw_dit_create describes it (the layers and the pipeline refuse there) */
        sw_mesh_dims d = {cfg->tp, cfg->ulysses, cfg->ring, cfg->dp, pp};
        if (sw_mesh_check(&d, world, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
        for (int r = 0; r < world; r++) sw_dit_plan_rank(cfg, pp, r, NULL, NULL); /* nothing allocated, no runtime */
        printf("check-config: accepted on %d ranks\n", world);
        return 0;
    }
    sw_plan_machine mc;
    plan_machine(&mc, cfg->hidden);
    char model[512];
    dit_model_flags(cfg, model, sizeof model);
    printf("plan: dit_train %s on %d ranks (%d per node x %d nodes), memory budget %s\n", model, world,
           o->ranks_per_node, o->nodes, o->mem_mib ? "" : "none");
    if (o->mem_mib) printf("plan: memory budget %d MiB per rank\n", o->mem_mib);
    sw_plan_machine_print(&mc, stdout, "plan: machine: ");
    sw_plan_world w = {o->ranks_per_node, o->nodes};
    int n = 0;
    sw_plan_dit_entry *e = sw_plan_dit_layouts(cfg, &w, NULL, &mc, o->mem_mib * SW_MIB, &n);
    int legal = 0, fit = 0;
    for (int i = 0; i < n; i++) legal += e[i].legal, fit += e[i].legal && e[i].fits;
    printf("plan: %d candidate layouts, %d legal (the rules dit_train refuses flags by), %d fit the budget\n", n, legal,
           fit);
    if (o->list) {
        FILE *f = fopen(o->list, "w");
        if (!f) sw_usage_error("cannot write plan-list '%s'", o->list);
        for (int i = 0; i < n; i++) {
            char fl[256];
            sw_plan_dit_flags(&e[i], fl, sizeof fl);
            if (e[i].legal && e[i].fits)
                fprintf(f, "fits\t%s\tneed %.0f bytes on rank %d, %.3f ms/step\n", fl, e[i].need, e[i].need_rank, e[i].ms);
            else fprintf(f, "%s\t%s\t%s\n", e[i].legal ? "dropped" : "illegal", fl, e[i].why);
        }
        fclose(f);
    }
    fflush(stdout);
    if (!legal) sw_usage_error("no legal layout of this model on %d ranks (e.g. %s)", world, n ? e[0].why : "none");
    if (!fit) { /* sorted: the first dropped one needs the least */
        char fl[256];
        sw_plan_dit_flags(&e[0], fl, sizeof fl);
        sw_usage_error("no layout fits the memory budget of %d MiB per rank: the smallest need found is %.2f MiB "
                       "(%.0f bytes, rank %d), with %s", o->mem_mib, e[0].need / SW_MIB, e[0].need, e[0].need_rank, fl);
    }
    printf("plan: %4s %10s %9s %9s %9s %9s %9s %10s  %s\n", "rank", "ms/step", "compute", "comm", "bubble", "tasks",
           "cores", "MiB/rank", "layout (dit_train flags)");
    for (int i = 0; i < fit && i < o->top; i++) {
        char fl[256];
        sw_plan_dit_flags(&e[i], fl, sizeof fl);
        printf("plan: %4d %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f  %s\n", i + 1, e[i].ms, e[i].compute_ms,
               e[i].comm_ms, e[i].bubble_ms, e[i].overhead_ms, e[i].cores_ms, e[i].need / SW_MIB, fl);
    }
    if (fit > o->top) printf("plan: ... %d more that fit (--plan-top)\n", fit - o->top);
    for (int i = fit, shown = 0; i < legal && shown < 5; i++, shown++) {
        char fl[256];
        sw_plan_dit_flags(&e[i], fl, sizeof fl);
        printf("plan: dropped: %s: %s\n", fl, e[i].why);
    }
    if (legal - fit > 5) printf("plan: ... %d more dropped (--plan-list FILE lists every one)\n", legal - fit - 5);
    sw_shutdown();
    if (o->verify || o->verify_spread) {
        int pick[64], np = verify_picks(fit, pick), ok = 0;
        int ncpus = mc.cores / o->ranks_per_node >= 1 ? (int)(mc.cores / o->ranks_per_node) : 1;
        double pred[64], meas[64];
        printf("verify: %d layouts run on this machine (%d steps each, steps 2.. timed, %d CPU worker(s) per rank)\n",
               np, o->verify_steps, ncpus);
        printf("verify: %4s %12s %12s %8s %12s %12s %12s %12s  %s\n", "rank", "predicted ms", "measured ms", "error",
               "model MiB", "run's model", "allocator", "StarPU peak", "layout");
        for (int k = 0; k < np; k++) {
            const sw_plan_dit_entry *x = &e[pick[k]];
            double ms, mm, am, peak;
            char fl[256];
            sw_plan_dit_flags(x, fl, sizeof fl);
            fflush(stdout);
            if (run_dit(argv0, model, x, world, ncpus, &ms, &mm, &am, &peak) != 0) {
                printf("verify: %4d %12.1f %12s %8s %12.3f %12s %12s %12s  %s (the run failed)\n", pick[k] + 1, x->ms,
                       "-", "-", x->need / SW_MIB, "-", "-", "-", fl);
                continue;
            }
            pred[ok] = x->ms, meas[ok] = ms, ok++;
            printf("verify: %4d %12.1f %12.1f %7.1f%% %12.3f %12.3f %12.3f %12.2f  %s\n", pick[k] + 1, x->ms, ms,
                   100 * (x->ms - ms) / ms, x->need / SW_MIB, mm, am, peak, fl);
        }
        verify_summary(pred, meas, ok);
    }
    free(e);
    return 0;
}
