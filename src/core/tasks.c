/* Task submission (sw_task_submit, where and priorities), the event
 * counters, the per-codelet statistics and the task meter of the pipeline's
 * costs: what every task the library submits goes through. */
#include "config.h"

#include "runtime_internal.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"
#include "p2p.h"
#include "sim_smpi.h"

#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <starpu_mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- event counters (runtime.h) ---- */
static int64_t counters[SW_COUNTER_COUNT];
static const char *const counter_names[SW_COUNTER_COUNT] = {
    "gemm_openblas", "gemm_onednn", "gemm_cublas", "gemm_bf16", "cast_bf16", "allreduce", "allgather",
    "reduce_scatter", "alltoall", "broadcast", "ring_shift", "mpi_collective", "mpi_deferred", "p2p_send",
    "task_priority", "send", "gemm_widened", "late_w", "sim_exchange"};

void sw_counter_add(sw_counter c, int64_t n)
{
    if ((unsigned)c < SW_COUNTER_COUNT) __atomic_add_fetch(&counters[c], n, __ATOMIC_RELAXED);
}
int64_t sw_counter_get(sw_counter c)
{
    return (unsigned)c < SW_COUNTER_COUNT ? __atomic_load_n(&counters[c], __ATOMIC_RELAXED) : 0;
}
const char *sw_counter_name(sw_counter c) { return (unsigned)c < SW_COUNTER_COUNT ? counter_names[c] : NULL; }
void sw_counters_print(FILE *out)
{
    char line[1024];
    int at = snprintf(line, sizeof line, "counters: rank %d:", sw_rank());
    for (int c = 0; c < SW_COUNTER_COUNT && at < (int)sizeof line; c++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %s=%lld", counter_names[c],
                       (long long)sw_counter_get((sw_counter)c));
    fprintf(out, "%s\n", line);
    fflush(out);
}
void sw_counters_reset(void)
{
    for (int c = 0; c < SW_COUNTER_COUNT; c++) __atomic_store_n(&counters[c], 0, __ATOMIC_RELAXED);
}

/* ---- per-codelet statistics ---- */
#define SW_MAX_STATS 64
static struct {
    int on;
    pthread_mutex_t lock;
    int n;
    sw_stat s[SW_MAX_STATS];
} sw_stats = {0, PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};

static void stats_task_done(void *arg)
{
    (void)arg;
    struct starpu_task *t = starpu_task_get_current();
    if (!t || !t->cl || !t->profiling_info) return;
    double us = starpu_timing_timespec_delay_us(&t->profiling_info->start_time, &t->profiling_info->end_time);
    const char *name = t->cl->name ? t->cl->name : "?";
    pthread_mutex_lock(&sw_stats.lock);
    int i = 0;
    while (i < sw_stats.n && strcmp(sw_stats.s[i].name, name) != 0) i++;
    if (i < SW_MAX_STATS) {
        if (i == sw_stats.n) sw_stats.s[sw_stats.n++] = (sw_stat){name, 0, 0.0};
        sw_stats.s[i].count++;
        sw_stats.s[i].total_us += us;
    }
    pthread_mutex_unlock(&sw_stats.lock);
}

/* Simulated: the runtime's cost per task (seconds) that the calibration
 * measured on the real machine (sw_task_cost_us; SW_SIM_TASK_US, set by
 * bench/sim.sh), charged on the simulated clock of the worker that ran the
 * task, after it and before its successors are released -- where a real
 * worker spends it -- as computation on the worker's cores (sw_sim_execute),
 * which the platform may share with the node's other workers. While the
 * rank has point-to-point requests outstanding (p2p.h), the figure
 * measured with a StarPU-MPI receive pending (SW_SIM_TASK_POLLED_US):
 * StarPU-MPI's progression thread then polls on the worker's core, and the
 * real tasks pay for it. Fixed figures:
 * StarPU's own charge of its scheduler's time (STARPU_SIMGRID_SCHED_COST)
 * measures this process's thread while it simulates, and made the
 * simulated step differ from run to run (docs/simulation.md, "The same
 * step every time"). 0: nothing charged. */
static double sim_task_s, sim_task_polled_s;

void sw_task_sim_cost_set(double us, double polled_us)
{
    sim_task_s = us > 0 ? us * 1e-6 : 0;
    sim_task_polled_s = polled_us > 0 ? polled_us * 1e-6 : 0;
}

/* Calibration (bench/calibrate.sh): with SW_CALIBRATE_SKIP_FIRST=1 the
 * tasks of a real run's first step record no sample in StarPU's history
 * models. That step pays one-time costs inside the codelets -- the first
 * touch of every buffer, oneDNN's generation of its kernels -- which later
 * steps, and a simulated step, do not have (docs/simulation.md, "The first
 * step left out, every later sample kept"). StarPU records a task's time when
 * its codelet's model has `benchmarking` set, which it sets from
 * STARPU_CALIBRATE when it loads the model, at the model's first task: so a
 * model is loaded here before its first task of that step and its flag
 * cleared, and every flag is restored when the next step begins
 * (sw_trace_mark_step), once that step's tasks have all ended. */
static struct {
    int state; /* 0: before the run's first step, 1: during it (not recording), 2: after */
    int n;
    struct starpu_perfmodel *model[512];
    unsigned benchmarking[512];
    long tasks;
    pthread_mutex_t lock; /* a task may be submitted from a callback */
} warm = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void warm_task(struct starpu_perfmodel *m)
{
    pthread_mutex_lock(&warm.lock);
    int i = 0;
    while (i < warm.n && warm.model[i] != m) i++;
    if (i == warm.n && i < (int)(sizeof warm.model / sizeof *warm.model)) {
        if (!m->is_loaded) { /* StarPU loads a model when it dumps it */
            FILE *f = fopen("/dev/null", "w");
            if (f) starpu_perfmodel_dump_xml(f, m), fclose(f);
        }
        if (m->is_loaded) {
            warm.model[warm.n] = m, warm.benchmarking[warm.n] = m->benchmarking, warm.n++;
            m->benchmarking = 0;
        }
    }
    if (i < warm.n) warm.tasks++; /* else recorded as before */
    pthread_mutex_unlock(&warm.lock);
}

void sw_calibration_step(void)
{
    if (warm.state == 0) {
        const char *v = getenv("SW_CALIBRATE_SKIP_FIRST");
        if (v && *v && strcmp(v, "0") && strcmp(v, "1"))
            sw_usage_error("SW_CALIBRATE_SKIP_FIRST must be 0 or 1 (SW_CALIBRATE_SKIP_FIRST = %s)", v);
        warm.state = v && !strcmp(v, "1") && !sw_simulated() ? 1 : 2;
    } else if (warm.state == 1) {
        starpu_task_wait_for_all();
        pthread_mutex_lock(&warm.lock);
        for (int i = 0; i < warm.n; i++) warm.model[i]->benchmarking = warm.benchmarking[i];
        warm.state = 2;
        pthread_mutex_unlock(&warm.lock);
        if (sw_rt.rank == 0)
            fprintf(stderr, "starweave: calibration: the first step's %ld tasks of %d codelets recorded no samples "
                            "(SW_CALIBRATE_SKIP_FIRST=1)\n", warm.tasks, warm.n);
    }
}

/* Calibration where the ranks' workers outnumber the cores (bench/calibrate.sh
 * --cpu-time: SW_CALIBRATE_CPU_TIME=FILE). A worker there loses its core
 * now and then in mid-task to another rank's thread, and StarPU records the
 * wait in the task's time. The simulation of such a run shares the cores
 * between the workers itself (bench/sim-platform.sh --cores) and wants each
 * task's time on its core. So the worker notes its thread's CPU time and the
 * clock when it pops a task and again when the task has ended (the
 * completion callback, on the same thread): what the clock gained over the
 * CPU time is the task's time off the CPU. It is summed per model and size
 * (footprint) over the samples StarPU recorded (the model's `benchmarking`
 * set at the task's end), written to FILE at shutdown, one line per size:
 * "symbol footprint samples microseconds first-sample's-microseconds" (StarPU
 * drops a history's first sample of a size); bench/calibrate.sh subtracts it
 * from the samples (bench/perfmodel_merge.py --off-cpu). Codelets that call
 * MPI themselves (STARPU_CODELET_SIMGRID_EXECUTE) are left out: they wait
 * off the CPU for their peers, which is their time. */
#define OFFCPU_SLOTS 4096
static struct {
    pthread_once_t once;
    const char *path; /* NULL: off */
    pthread_mutex_t lock;
    struct offcpu_slot {
        const struct starpu_perfmodel *model;
        uint32_t footprint;
        long n;
        double us, first_us;
    } slot[OFFCPU_SLOTS];
    int used;
} offcpu = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local struct {
    int on;
    uint32_t footprint;
    struct timespec cpu, wall;
} popped;

static void offcpu_init(void)
{
    const char *v = getenv("SW_CALIBRATE_CPU_TIME");
    if (v && *v && !sw_simulated()) {
        offcpu.path = v;
        starpu_profiling_status_set(STARPU_PROFILING_ENABLE); /* the codelet's own time, below */
    }
}

/* the worker pops the task: its footprint (computed now, while its handles live: a temporary is unregistered
 * before the completion callback runs) and the two clocks */
static void offcpu_pop(void *arg)
{
    struct starpu_task *t = arg;
    const int w = starpu_worker_get_id();
    popped.on = 0;
    if (w < 0 || starpu_worker_get_type(w) != STARPU_CPU_WORKER) return;
    popped.footprint = starpu_task_footprint(t->cl->model, t, starpu_worker_get_perf_archtype(w, t->sched_ctx), 0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &popped.cpu);
    clock_gettime(CLOCK_MONOTONIC, &popped.wall);
    popped.on = 1;
}

static void offcpu_task_done(void)
{
    struct starpu_task *t = starpu_task_get_current();
    if (!popped.on || !t || !t->cl || !t->cl->model || !t->cl->model->benchmarking || !t->profiling_info) return;
    popped.on = 0;
    struct timespec cpu, wall;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    clock_gettime(CLOCK_MONOTONIC, &wall);
    /* the window from the pop to here holds StarPU's handling of the task besides the codelet: the codelet's
     * share of the window's time off the CPU is taken as its share of the window */
    struct starpu_profiling_task_info *pi = t->profiling_info;
    const double window = starpu_timing_timespec_delay_us(&popped.wall, &wall),
                 codelet = starpu_timing_timespec_delay_us(&pi->start_time, &pi->end_time),
                 on = starpu_timing_timespec_delay_us(&popped.cpu, &cpu);
    double off = window > 0 && codelet > 0 ? (window - on) * (codelet < window ? codelet / window : 1) : 0;
    if (off < 0) off = 0;
    const struct starpu_perfmodel *m = t->cl->model;
    unsigned h = (unsigned)(((uintptr_t)m >> 4) ^ popped.footprint * 2654435761u) % OFFCPU_SLOTS;
    pthread_mutex_lock(&offcpu.lock);
    for (int k = 0; k < OFFCPU_SLOTS; k++, h = (h + 1) % OFFCPU_SLOTS) {
        struct offcpu_slot *s = &offcpu.slot[h];
        if (!s->model) {
            if (offcpu.used >= OFFCPU_SLOTS / 2) break; /* full: a sample left as StarPU measured it */
            s->model = m, s->footprint = popped.footprint, offcpu.used++;
        }
        if (s->model == m && s->footprint == popped.footprint) {
            if (!s->n++) s->first_us = off;
            s->us += off;
            break;
        }
    }
    pthread_mutex_unlock(&offcpu.lock);
}

void sw_calibration_end(void)
{
    if (!offcpu.path) return;
    FILE *f = fopen(offcpu.path, "a"); /* appended: bench/calibrate.sh --runs K sums the runs' lines */
    if (!f) {
        fprintf(stderr, "starweave: cannot record the tasks' time off the CPU in %s (%s)\n", offcpu.path,
                strerror(errno));
        return;
    }
    long n = 0;
    double us = 0;
    for (int k = 0; k < OFFCPU_SLOTS; k++) {
        const struct offcpu_slot *s = &offcpu.slot[k];
        if (!s->model) continue;
        fprintf(f, "%s %08x %ld %.3f %.3f\n", s->model->symbol, s->footprint, s->n, s->us, s->first_us);
        n += s->n, us += s->us;
    }
    fclose(f);
    fprintf(stderr, "starweave: calibration: rank %d: %ld samples spent %.1f ms off the CPU (SW_CALIBRATE_CPU_TIME)\n",
            sw_rt.rank, n, us * 1e-3);
}

/* One completion callback serves all: its argument is the trace record
 * that SW_INSERT attaches (NULL when tracing was off at submission). */
static void task_done(void *arg)
{
    if (sw_stats.on) stats_task_done(NULL);
    if (arg) sw_trace_task_end(arg);
    if (offcpu.path) offcpu_task_done();
    double s = __atomic_load_n(&sw_p2p_pending, __ATOMIC_RELAXED) > 0 ? sim_task_polled_s : sim_task_s;
    if (s > 0) sw_sim_execute(s);
}

static void (*done_hook(void))(void *)
{
    return sw_stats.on || sw_trace_enabled() || sim_task_s > 0 || sim_task_polled_s > 0 || offcpu.path ? task_done
                                                                                                      : NULL;
}

/* the calling thread's cost meter (sw_task_meter) */
static _Thread_local long long *task_meter;

void sw_task_meter(long long *meter)
{
    task_meter = meter;
    if (meter && !starpu_profiling_status_get()) starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
}

void sw_task_meter_stop(void)
{
    task_meter = NULL;
    starpu_profiling_status_set(sw_stats.on || sw_trace_enabled() || offcpu.path ? STARPU_PROFILING_ENABLE
                                                                                 : STARPU_PROFILING_DISABLE);
}

/* the task's execution time into a meter */
static void meter_task_done(long long *meter)
{
    struct starpu_task *t = starpu_task_get_current();
    if (!meter || !t || !t->profiling_info) return;
    double us = starpu_timing_timespec_delay_us(&t->profiling_info->start_time, &t->profiling_info->end_time);
    __atomic_fetch_add(meter, (long long)(us * 1e3), __ATOMIC_RELAXED);
}

/* A task that came with callbacks of its own: they run after starweave's,
 * from one record that is the argument of both (StarPU frees it with the
 * task; the trace record and the task's own arguments are freed here). */
struct chained_task {
    void (*done)(void *); /* task_done, or NULL */
    void *rec;            /* the trace record, or NULL */
    long long *meter;     /* sw_task_meter's, or NULL */
    void (*callback)(void *), (*prologue)(void *);
    void *callback_arg, *prologue_arg;
    int free_callback_arg, free_prologue_arg;
};

static void chained_prologue(void *arg)
{
    struct chained_task *c = arg;
    void (*trace_prologue)(void *) = sw_trace_task_prologue(c->rec);
    if (trace_prologue) trace_prologue(c->rec);
    if (c->prologue) c->prologue(c->prologue_arg);
}

static void chained_done(void *arg)
{
    struct chained_task *c = arg;
    if (c->done) c->done(c->rec);
    meter_task_done(c->meter);
    free(c->rec);
    if (c->callback) c->callback(c->callback_arg);
    if (c->free_callback_arg) free(c->callback_arg);
    if (c->free_prologue_arg) free(c->prologue_arg);
}

static void noop(void *buffers[], void *arg) { (void)buffers, (void)arg; }
static struct starpu_codelet noop_cl = {.cpu_funcs = {noop}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_W},
                                        .name = "sw_task_cost"};

double sw_task_cost_us(int one_worker, int n)
{
    if (sw_simulated() || n < 1) return -1; /* simulated, the noop has no time to take */
    const int worker = one_worker ? starpu_worker_get_by_type(STARPU_CPU_WORKER, 0) : -1;
    if (one_worker && worker < 0) return -1;
    /* as the graphs' tasks have it: each reads two tiles and writes a temporary of its own (registered for it,
     * unregistered after it, as the layers' scratch); empty tasks left out the data's handling */
    const int T = 128;
    float *in = calloc((size_t)2 * T * T, sizeof *in);
    if (!in) return -1;
    starpu_data_handle_t a, b;
    starpu_matrix_data_register(&a, STARPU_MAIN_RAM, (uintptr_t)in, T, T, T, sizeof *in);
    starpu_matrix_data_register(&b, STARPU_MAIN_RAM, (uintptr_t)(in + T * T), T, T, T, sizeof *in);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int i = 0;
    for (; i < n; i++) {
        starpu_data_handle_t tmp;
        starpu_matrix_data_register(&tmp, -1, 0, T, T, T, sizeof *in);
        /* worker -1: any worker (StarPU's insert ignores it) */
        int rc = starpu_task_insert(&noop_cl, STARPU_R, a, STARPU_R, b, STARPU_W, tmp, STARPU_EXECUTE_ON_WORKER, worker, 0);
        starpu_data_unregister_submit(tmp);
        if (rc != 0) break;
    }
    starpu_task_wait_for_all();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    starpu_data_unregister(a), starpu_data_unregister(b);
    free(in);
    return i < n ? -1 : ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3) / n;
}

int sw_task_submit(struct starpu_task *task)
{
    if (!task || !task->cl) return -EINVAL;
    if (task->where == -1) task->where = sw_task_where(task->cl);
    if (!task->priority && sw_rt.task_priority) {
        task->priority = sw_rt.task_priority;
        sw_counter_add(SW_COUNT_TASK_PRIORITY, 1);
    }
    task->priority += sw_rt.priority_base;
    pthread_once(&offcpu.once, offcpu_init);
    if (offcpu.path && task->cl->model && !task->prologue_callback_pop_func &&
        !(task->cl->flags & STARPU_CODELET_SIMGRID_EXECUTE)) {
        task->prologue_callback_pop_func = offcpu_pop;
        task->prologue_callback_pop_arg = task;
        task->prologue_callback_pop_arg_free = 0;
    }
    void *rec = sw_trace_task_begin(); /* NULL when tracing is off */
    void (*done)(void *) = done_hook();
    if (!task->callback_func && !task->prologue_callback_func && !task_meter) {
        task->callback_func = done;
        task->callback_arg = rec;
        task->callback_arg_free = rec != NULL;
        task->prologue_callback_func = sw_trace_task_prologue(rec);
        task->prologue_callback_arg = rec;
        task->prologue_callback_arg_free = 0;
    } else if (done || rec || task_meter) {
        struct chained_task *c = malloc(sizeof *c);
        if (!c) sw_fail(__FILE__, __LINE__, "malloc(chained task)", -ENOMEM);
        *c = (struct chained_task){done, rec, task_meter, task->callback_func, task->prologue_callback_func,
                                   task->callback_arg, task->prologue_callback_arg, task->callback_arg_free,
                                   task->prologue_callback_arg_free};
        task->callback_func = chained_done;
        task->callback_arg = c;
        task->callback_arg_free = 1;
        task->prologue_callback_func = chained_prologue;
        task->prologue_callback_arg = c;
        task->prologue_callback_arg_free = 0;
    }
    sw_trace_dag_task(task);
    if (warm.state == 1 && task->cl->model) warm_task(task->cl->model);
    return starpu_task_submit(task);
}

void sw_stats_enable(int on)
{
    sw_stats.on = on;
    /* the trace needs profiling on as well */
    starpu_profiling_status_set(on || sw_trace_enabled() || offcpu.path ? STARPU_PROFILING_ENABLE
                                                                        : STARPU_PROFILING_DISABLE);
}

void sw_stats_reset(void)
{
    pthread_mutex_lock(&sw_stats.lock);
    sw_stats.n = 0;
    pthread_mutex_unlock(&sw_stats.lock);
}

static int by_total_desc(const void *a, const void *b)
{
    double x = ((const sw_stat *)a)->total_us, y = ((const sw_stat *)b)->total_us;
    return (x < y) - (x > y);
}

int sw_stats_get(sw_stat *out, int max)
{
    pthread_mutex_lock(&sw_stats.lock);
    int n = sw_stats.n < max ? sw_stats.n : max;
    memcpy(out, sw_stats.s, sizeof(sw_stat) * (size_t)n);
    pthread_mutex_unlock(&sw_stats.lock);
    qsort(out, (size_t)n, sizeof *out, by_total_desc);
    return n;
}


void sw_set_task_where(unsigned where) { sw_rt.task_where = where; }
int sw_set_task_priority(int priority)
{
    int old = sw_rt.task_priority;
    sw_rt.task_priority = priority;
    return old;
}

int sw_set_task_priority_base(int base)
{
    int old = sw_rt.priority_base;
    sw_rt.priority_base = base;
    return old;
}

int32_t sw_task_where(const struct starpu_codelet *cl)
{
    unsigned w = sw_rt.task_where, can = 0;
    if (!w || !cl) return -1;
    if ((w & STARPU_CPU) && cl->cpu_funcs[0]) can |= STARPU_CPU;
    if ((w & STARPU_CUDA) && cl->cuda_funcs[0]) can |= STARPU_CUDA;
    return can ? (int32_t)can : -1;
}
