/* Private to the runtime's files in src/core (runtime.c: start and stop;
 * tasks.c: submission, priorities, counters, statistics; refuse.c: errors
 * and refusals): the runtime's state, one per process. */
#ifndef STARWEAVE_RUNTIME_INTERNAL_H
#define STARWEAVE_RUNTIME_INTERNAL_H

typedef struct sw_runtime_state {
    int started;
    int rank, size;
    unsigned task_where; /* sw_set_task_where */
    int task_priority;   /* sw_set_task_priority */
    int priority_base;   /* sw_set_task_priority_base */
    int offload_node, offload_budget_mb, memory_budget_mb;
    char offload_dir[4096];
    int pinned; /* home buffers page-locked (CUDA workers) */
} sw_runtime_state;
extern sw_runtime_state sw_rt __attribute__((visibility("hidden")));

/* an integer from the environment, fallback where unset or empty */
int sw_env_int(const char *name, int fallback) __attribute__((visibility("hidden")));

/* the simulation's charge per task (tasks.c), in microseconds (0: none) */
void sw_task_sim_cost_set(double us, double polled_us) __attribute__((visibility("hidden")));

/* a step begins (sw_trace_mark_step): the calibration's first step left out (tasks.c) */
void sw_calibration_step(void) __attribute__((visibility("hidden")));
/* shutdown: the calibration's time off the CPU written (SW_CALIBRATE_CPU_TIME, tasks.c) */
void sw_calibration_end(void) __attribute__((visibility("hidden")));

/* the watcher thread of refusals (refuse.c), started and stopped with StarPU-MPI */
void sw_refuse_watch_start(int thread_level) __attribute__((visibility("hidden")));
void sw_refuse_watch_stop(void) __attribute__((visibility("hidden")));

#endif
