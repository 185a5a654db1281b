/* One training loop for the example programs (gpt_train, dit_train,
 * custom_model, encoder_mlm, encoder_regress): per step the host batch, the
 * micro-batches loaded, the step submitted, the loss read, the step's line
 * (and the CSV log), checkpoints saved, the trace's step marks; before it
 * the resume, after it the trace and the gradients' digests. The model is
 * the program's: the loop reaches it through the callbacks below, or through
 * its sw_pipeline (pipeline.h) when it has one.
 *
 *   train_loop t = {.prog = "custom_model", .steps = steps, .model = m, .load = load, .pipe = m->pipe};
 *   train_loop_run(&t);
 *
 * Every rank runs the loop (the step is collective); rank 0 prints. */
#ifndef SW_EXAMPLES_TRAIN_LOOP_H
#define SW_EXAMPLES_TRAIN_LOOP_H

#include <stdint.h>
#include <stdio.h>

#include <starweave.h>

typedef struct train_loop train_loop;
struct train_loop {
    const char *prog; /* names the program in its lines ("dit_train: resumed from ...") */
    int steps;        /* the last step run */
    void *model;      /* passed to the callbacks */
    /* the model's part: batch (may be NULL) makes the step's host data, outside the step's time; load
     * loads the micro-batches (timed); step and loss (NULL: sw_pipeline_step and sw_pipeline_loss of
     * pipe) submit the step and read its loss; after (may be NULL): once the step's line is printed
     * (samples, exports, more lines) */
    void (*batch)(void *model, int step);
    void (*load)(void *model, int step);
    void (*step)(void *model, int step);
    float (*loss)(void *model);
    void (*after)(void *model, int step, float loss);
    sw_pipeline *pipe;
    /* checkpoints (checkpoint.h): the registry and the model's fields; save (NULL: none) after the last
     * step and every save_every steps; resume (NULL: none) read by train_loop_resume */
    sw_params *params;
    const sw_ckpt_field *fields;
    int nfields;
    const char *save, *resume;
    int save_every;
    /* the reports: trace (FILE, FILE.paje, FILE.overlap.json, sw_trace_*) and dag (one step's task graph,
     * the first run) written by train_loop_report; the bubble per pipeline stage needs pp, micro (the
     * micro-batches per step), pp_virtual and pp_inflight (0: 1F1B's quota) */
    const char *trace, *dag;
    int pp, micro, pp_virtual, pp_inflight;
    /* the step's line on rank 0 (unless quiet): "step %2d  loss %.7f", then "  grad_norm %.7f" (the
     * registry's norm before clipping) with grad_norm, "  %.1f ms" with show_ms; with tokens (tokens per
     * step) gpt_train's "step %4d/%d  loss %.4f  %8.1f ms/step  %9.0f tokens/s". log (may be NULL):
     * "step,loss,ms,tokens_per_s" per step, flushed every step */
    int quiet, grad_norm, show_ms;
    int64_t tokens;
    FILE *log;
    int profile; /* sw_stats_enable(1) after the first step run (it warms up allocations and perf models) */
    /* filled: the last step already done (train_loop_resume), the first and last losses, the time of the
     * steps after the first run and of their submission, their count */
    int step0;
    float first, last;
    double total_ms, submit_ms;
    int timed;
    /* the first step run in the pipeline's final order (after sw_pipeline_replan re-planned it from the
     * measured step; else the second step run): the bubble report's steps */
    int settled;
};

/* Continues from t->resume's latest checkpoint (NULL: from step 0): loads it into t->params (re-sharded
 * from its layout: a line names both), sets and returns t->step0. training: refuse a checkpoint at or
 * past t->steps (exit 2). */
int train_loop_resume(train_loop *t, int training);

/* Steps t->step0 + 1 .. t->steps. A loss that is not finite (not in a simulated run) exits 1. Simulated,
 * rank 0 then prints the line bench/sim.sh reads (and the planners' --simulate through it):
 * "simulation: X simulated ms/step (steps a..b), ..." -- the mean of the steps after the first run. */
void train_loop_run(train_loop *t);

/* After train_loop_run: the trace (with the overlap per rank and step, and the bubble of each pipeline
 * stage) and the task graph, when asked for. Collective. */
void train_loop_report(const train_loop *t);

/* The last step's reduced, clipped gradients, "grad NAME sumsq abssum", from the ranks holding distinct
 * parts of each: TP rank 0 for a replicated one; the first rank of the gradient group, or with ZeRO
 * each rank its rows; parameters of other pipeline stages skipped (tests/encoder_compare.sh reads them). */
void train_print_grads(sw_params *p, const sw_ctx *x);

/* The traffic model of pipe beside the bytes every group sent over `steps` steps, and the counters of
 * what ran, on every rank. */
void train_traffic_report(sw_pipeline *pipe, const sw_comm *comm, int steps);

/* the step clock: StarPU's simulated clock in a simulated run (docs/simulation.md), else the wall
 * clock (ms); train_wall_ms: the wall clock always */
double train_now_ms(void);
double train_wall_ms(void);

#endif
