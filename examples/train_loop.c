/* The example programs' training loop (train_loop.h): resume, the steps,
 * their lines, checkpoints, the trace and the gradients' digests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_loop.h"

double train_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double train_now_ms(void)
{
    return sw_simulated() ? starpu_timing_now() / 1e3 : train_wall_ms();
}

/* simulated, on rank 0: the line bench/sim.sh reads (and the planners' --simulate through it), the mean
 * of the steps after the first run; clock0 and wall0 taken as the loop started */
static void sim_line(const train_loop *t, double clock0, double wall0)
{
    if (sw_rank() != 0 || !sw_simulated()) return;
    printf("simulation: %.3f simulated ms/step (steps %d..%d), %d steps in %.3f simulated ms, %.1f s of wall time, "
           "%d simulated rank(s); losses not computed\n", t->timed > 0 ? t->total_ms / t->timed : 0, t->step0 + 2,
           t->steps, t->steps - t->step0, train_now_ms() - clock0, (train_wall_ms() - wall0) / 1e3, sw_world_size());
}

/* A checkpoint's layout, as the re-shard line names it: "4 ranks: tp 2, ulysses 1, ring 1, dp 2, pp 1, ZeRO-1" */
static void layout_text(const sw_ckpt_layout *l, char *out, size_t n)
{
    char zero[16] = "no ZeRO";
    if (l->zero) snprintf(zero, sizeof zero, "ZeRO-%d", l->zero);
    snprintf(out, n, "%d rank%s: tp %d, ulysses %d, ring %d, dp %d, pp %d, %s", l->ranks, l->ranks == 1 ? "" : "s",
             l->tp, l->ulysses, l->ring, l->dp, l->pp, zero);
}

int train_loop_resume(train_loop *t, int training)
{
    t->step0 = 0;
    if (!t->resume) return 0;
    const int say = !t->quiet && sw_rank() == 0;
    sw_ckpt_layout saved, here;
    t->step0 = sw_checkpoint_load_layout(t->params, t->fields, t->nfields, t->resume, &saved, &here);
    if (say) printf("%s: resumed from %s after step %d\n", t->prog, t->resume, t->step0);
    if (say && memcmp(&saved, &here, sizeof saved) != 0) {
        char from[128], to[128];
        layout_text(&saved, from, sizeof from);
        layout_text(&here, to, sizeof to);
        printf("%s: re-sharded the checkpoint from layout %s to layout %s\n", t->prog, from, to);
    }
    if (training && t->step0 >= t->steps)
        sw_usage_error("the checkpoint is at step %d, nothing left of --steps %d", t->step0, t->steps);
    return t->step0;
}

/* the step's line on rank 0 */
static void print_line(const train_loop *t, int step, float loss, double ms)
{
    if (t->tokens && sw_simulated())
        printf("step %4d/%d  loss (not computed)  %8.1f simulated ms/step  %9.0f simulated tokens/s\n", step,
               t->steps, ms, t->tokens / (ms / 1e3));
    else if (t->tokens)
        printf("step %4d/%d  loss %.4f  %8.1f ms/step  %9.0f tokens/s\n", step, t->steps, loss, ms,
               t->tokens / (ms / 1e3));
    else if (sw_simulated())
        printf("step %2d  loss (not computed)  %.1f simulated ms\n", step, ms);
    else {
        printf("step %2d  loss %.7f", step, loss);
        if (t->grad_norm) { /* the registry's squared norm before clipping */
            float n2;
            sw_tensor_read_host(sw_params_grad_norm2(t->params), &n2);
            printf("  grad_norm %.7f", sqrtf(n2));
        }
        if (t->show_ms) printf("  %.1f ms", ms);
        printf("\n");
    }
}

/* The costs the pipeline's order comes from (sw_pipeline_schedule_costs), each time they change: the
 * guess for the first two steps, the second step's measured costs for the later ones. Returns what it
 * showed. */
static int print_costs(const train_loop *t, int shown)
{
    int measured = sw_pipeline_schedule_costs(t->pipe, 0, NULL, NULL, NULL);
    if (measured == shown) return shown;
    printf("schedule: costs");
    for (int s = 0; s < (measured ? t->pp : 1); s++) {
        double f, b, w;
        sw_pipeline_schedule_costs(t->pipe, s, &f, &b, &w);
        if (measured) printf("%s stage %d", s ? "," : "", s);
        printf(" F %.3g B %.3g", f, b);
        if (w > 0) printf(" W %.3g", w);
        if (measured && s < t->pp - 1) printf(" hop %.3g", sw_pipeline_schedule_hop(t->pipe, s));
        if (measured) printf(" ms");
    }
    printf(measured == 1 ? " (measured in the run's second step: the order of the later steps)\n"
           : measured == 3 ? " (measured in the run's second step; the guess's order ends sooner under them than "
                             "the one simulated from them, and stays)\n"
           : measured == 4 ? " (measured in the run's second step: the order of the later steps, from the patient "
                             "simulation -- a W only where it delays no input on its way)\n"
           : measured ? " (measured in the run's second step; no order of them fits the quotas and pools: the "
                        "guess's order stays)\n"
                      : " (guess)\n");
    if (sw_pipeline_late_w(t->pipe, 0) || sw_pipeline_late_w(t->pipe, t->pp - 1)) { /* Zero Bubble's split */
        printf("schedule: W units after the last forward:");
        for (int s = 0; s < t->pp; s++) printf("%s stage %d %d", s ? "," : "", s, sw_pipeline_late_w(t->pipe, s));
        printf("\n");
    }
    return measured;
}

void train_loop_run(train_loop *t)
{
    const int me = sw_rank();
    int costs_shown = -1;
    const double wall0 = train_wall_ms(), clock0 = train_now_ms();
    t->total_ms = t->submit_ms = 0, t->timed = 0, t->first = t->last = 0, t->settled = t->step0 + 2;
    if (t->trace) sw_trace_enable(1);
    if (t->pipe && t->pp > 1 && !t->quiet && me == 0) costs_shown = print_costs(t, costs_shown); /* the guess */
    for (int step = t->step0 + 1; step <= t->steps; step++) {
        const int first = step == t->step0 + 1;
        sw_trace_mark_step(step);
        if (t->dag) sw_trace_dag_enable(first); /* the first step's submission */
        if (t->batch) t->batch(t->model, step);
        const double t0 = train_now_ms();
        t->load(t->model, step); /* this rank's part of every micro-batch */
        const double ts = train_now_ms();
        if (t->step) t->step(t->model, step);
        else sw_pipeline_step(t->pipe, step); /* every micro-batch's forward and backward on this stage, the update */
        if (!first) t->submit_ms += train_now_ms() - ts;
        sw_trace_dag_enable(0);
        float loss;
        if (t->loss) loss = t->loss(t->model);
        else sw_tensor_read_host(sw_pipeline_loss(t->pipe), &loss);
        starpu_task_wait_for_all();
        const double ms = train_now_ms() - t0;
        /* after the measured step: the schedule from its costs, the later steps' (the bubble's, when there are) */
        if (t->pipe && sw_pipeline_replan(t->pipe) && step < t->steps) t->settled = step + 1;
        if (sw_simulated()) loss = NAN; /* not computed: the codelets did not run */
        if (!sw_simulated() && !isfinite(loss)) {
            fprintf(stderr, "%s: loss is %g at step %d\n", t->prog, loss, step);
            exit(1);
        }
        if (t->save && (step == t->steps || (t->save_every > 0 && step % t->save_every == 0))) {
            sw_checkpoint_save(t->params, t->fields, t->nfields, t->save, step);
            if (!t->quiet && me == 0) printf("%s: checkpoint of step %d in %s\n", t->prog, step, t->save);
        }
        if (first) {
            t->first = loss;
            if (t->profile) sw_stats_enable(1); /* the first step warms up allocations and perf models */
        } else {
            t->total_ms += ms, t->timed++;
        }
        t->last = loss;
        if (t->log) { /* flushed every step: a killed run keeps the steps it logged */
            fprintf(t->log, "%d,%.9g,%.3f,%.1f\n", step, loss, ms, t->tokens / (ms / 1e3));
            fflush(t->log);
        }
        if (!t->quiet && me == 0) print_line(t, step, loss, ms);
        if (t->pipe && t->pp > 1 && !t->quiet && me == 0) costs_shown = print_costs(t, costs_shown);
        if (t->after) t->after(t->model, step, loss);
        fflush(stdout); /* every step: a killed run's output keeps the steps it printed */
    }
    sim_line(t, clock0, wall0);
}

/* Pipeline stages: per stage, the share of each step in the final order
 * (t->settled on: after the re-planning from the measured step, or after
 * the first) in which its workers did not compute -- idle, or waiting for
 * the neighbouring stages -- beside 1F1B's bubble (p - 1) / (m + p - 1)
 * and the interleaved schedule's (p - 1) / (v m + p - 1). */
static void print_bubble(const train_loop *t, const sw_overlap *rows, int n)
{
    const int pp = t->pp, per_stage = sw_world_size() / pp, V = t->pp_virtual > 1 ? t->pp_virtual : 1, m = t->micro;
    for (int s = 0; s < pp; s++) {
        double sum = 0;
        int count = 0;
        for (int i = 0; i < n; i++)
            if (rows[i].rank / per_stage == s && rows[i].step >= t->settled && rows[i].wall_us > 0)
                sum += 1 - rows[i].compute_us / rows[i].wall_us, count++;
        if (count)
            printf("bubble: stage %d: %.1f%% of the step without compute (steps %d.., %d rank-steps), "
                   "1F1B's (p - 1) / (m + p - 1) = %.1f%%, interleaved (p - 1) / (v m + p - 1) = %.1f%% (v = %d; "
                   "quota %s)\n", s, 100 * sum / count, t->settled, count, 100.0 * (pp - 1) / (m + pp - 1),
                   100.0 * (pp - 1) / (V * m + pp - 1), V, t->pp_inflight ? "given" : "1F1B");
    }
}

/* The merged trace of every rank, its Paje twin and the overlap report;
 * the overlap per rank and step printed by rank 0 (and with pipeline
 * stages, the bubble of each). Collective. */
static void write_trace(const train_loop *t)
{
    const char *path = t->trace;
    char paje[4096], overlap[4096];
    snprintf(paje, sizeof paje, "%s.paje", path);
    snprintf(overlap, sizeof overlap, "%s.overlap.json", path);
    if (sw_trace_write(path, paje, overlap) != 0) {
        if (sw_rank() == 0) fprintf(stderr, "%s: could not write the trace %s\n", t->prog, path);
        return;
    }
    if (sw_rank() != 0) return;
    enum { ROWS = 512 };
    sw_overlap rows[ROWS];
    int n = sw_trace_overlap(rows, ROWS);
    if (n > ROWS) n = ROWS;
    printf("overlap: %4s %5s %10s %10s %10s %10s %10s %9s\n", "rank", "step", "wall ms", "compute ms", "comm ms",
           "overlap ms", "idle ms", "comm hid");
    for (int i = 0; i < n; i++)
        printf("overlap: %4d %5s %10.1f %10.1f %10.1f %10.1f %10.1f %8.1f%%\n", rows[i].rank,
               rows[i].step < 0 ? "all" : (snprintf(paje, sizeof paje, "%d", rows[i].step), paje),
               rows[i].wall_us / 1e3, rows[i].compute_us / 1e3, rows[i].comm_us / 1e3, rows[i].overlap_us / 1e3,
               rows[i].idle_us / 1e3, 100 * rows[i].overlap_share);
    if (t->pp > 1) print_bubble(t, rows, n);
    printf("%s: trace of %d rank(s) in %s (Chrome/Perfetto JSON), %s.paje (ViTE), %s.overlap.json\n", t->prog,
           sw_world_size(), path, path, path);
}

/* The task graph recorded (one step), every rank's, in one dot file. Collective. */
static void write_dag(const train_loop *t)
{
    if (sw_trace_dag_write(t->dag) != 0) {
        if (sw_rank() == 0) fprintf(stderr, "%s: could not write the task graph %s\n", t->prog, t->dag);
        return;
    }
    long tasks, requests, edges, messages;
    sw_trace_dag_counts(&tasks, &requests, &edges, &messages);
    if (sw_rank() == 0)
        printf("%s: task graph of step %d in %s: %ld nodes (%ld tasks, %ld requests), %ld edges, %ld messages\n",
               t->prog, t->step0 + 1, t->dag, tasks + requests, tasks, requests, edges, messages);
}

void train_loop_report(const train_loop *t)
{
    if (t->trace) write_trace(t);
    if (t->dag) write_dag(t);
}

void train_print_grads(sw_params *p, const sw_ctx *x)
{
    for (int i = 0; i < sw_params_count(p); i++) {
        int64_t first, rows, cols;
        if (!sw_params_held(p, i)) continue; /* another pipeline stage's */
        sw_tensor *g = sw_params_reduced_grad(p, i, &first);
        sw_slice_shape(sw_params_desc(p, i), &rows, &cols);
        if (g->rows == rows && (x->ulysses_rank || x->ring_rank || x->dp_rank)) continue; /* the whole of it: the first rank's */
        float *v = malloc(sw_tensor_bytes(g));
        if (!v) { perror("malloc"); exit(1); }
        double s2 = 0, s1 = 0;
        sw_tensor_read_host(g, v);
        for (int64_t j = 0; j < g->rows * g->cols; j++) s2 += (double)v[j] * v[j], s1 += fabs(v[j]);
        if (sw_params_desc(p, i)->slice.n || x->tp.rank == 0) printf("grad %s %.9e %.9e\n", sw_params_desc(p, i)->name, s2, s1);
        free(v);
    }
}

void train_traffic_report(sw_pipeline *pipe, const sw_comm *comm, int steps)
{
    sw_traffic model; /* layers, blocks, stages, registry */
    sw_pipeline_traffic(pipe, &model);
    sw_comm_traffic_report(comm, &model, steps, stdout);
    sw_counters_print(stdout);
}
