/* gpt_train --plan, --verify and --check-config (docs/planner.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int plan_main(const sw_gpt_config *cfg, const char *argv0)
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
    if (o->top < 1 || o->verify < 0 || o->verify_bottom < 0 || o->verify_steps < 2)
        sw_usage_error("plan-top must be positive (%d), verify and verify-bottom not negative (%d, %d), verify-steps "
                       "at least 2 (%d)", o->top, o->verify, o->verify_bottom, o->verify_steps);
    if (o->verify && world > 4)
        sw_usage_error("--verify runs the layouts on this machine: at most 4 ranks (plan-ranks = %d)", world);
    if (o->check_config) return check_config(cfg, world);

    char msg[512];
    sw_plan_machine mc;
    memset(&mc, 0, sizeof mc);
    if (o->machine && sw_plan_machine_read(&mc, o->machine, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    start_runtime();
    if (!(mc.gemm_gflops > 0) || !(mc.cores > 0) || !(mc.intra_gbs > 0) || !(mc.inter_gbs > 0) || !(mc.task_us > 0)) {
        sw_plan_machine_here(&mc, NULL, cfg->hidden); /* this machine, then the file's figures over it */
        if (o->machine) sw_plan_machine_read(&mc, o->machine, msg, sizeof msg);
    }
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
    printf("plan: %4s %10s %9s %9s %9s %9s %10s  %s\n", "rank", "ms/step", "compute", "comm", "bubble", "tasks",
           "MiB/rank", "layout (gpt_train flags)");
    for (int i = 0; i < fit && i < o->top; i++) {
        char fl[256];
        sw_plan_flags(&e[i].cfg, fl, sizeof fl);
        printf("plan: %4d %10.3f %9.3f %9.3f %9.3f %9.3f %10.3f  %s\n", i + 1, e[i].ms, e[i].compute_ms, e[i].comm_ms,
               e[i].bubble_ms, e[i].overhead_ms, e[i].need / SW_MIB, fl);
    }
    if (fit > o->top) printf("plan: ... %d more that fit (--plan-top)\n", fit - o->top);
    for (int i = fit, shown = 0; i < legal && shown < 5; i++, shown++) {
        char fl[256];
        sw_plan_flags(&e[i].cfg, fl, sizeof fl);
        printf("plan: dropped: %s: %s\n", fl, e[i].why);
    }
    if (legal - fit > 5) printf("plan: ... %d more dropped (--plan-list FILE lists every one)\n", legal - fit - 5);
    sw_shutdown();

    if (o->verify) { /* the top K and a few from the bottom, run for real on this machine */
        int pick[64], np = 0;
        for (int i = 0; i < fit && np < o->verify && np < 32; i++) pick[np++] = i;
        for (int i = fit - o->verify_bottom; i < fit && np < 64; i++)
            if (i >= o->verify) pick[np++] = i;
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
        if (ok >= 2) printf("verify: Spearman rank correlation of predicted and measured ms/step: %.3f (%d layouts)\n",
                            spearman(pred, meas, ok), ok);
    }
    free(e);
    return 0;
}
