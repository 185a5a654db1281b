/* Shared by the codelet files: matrix-interface accessors and submission. */
#ifndef STARWEAVE_CODELET_UTIL_H
#define STARWEAVE_CODELET_UTIL_H

#include <errno.h>
#include "config.h"

#include <starpu.h>
#include "starweave/runtime.h"
#include "starweave/trace.h"

#ifdef STARWEAVE_USE_CUDA
#include "cuda/kernels.h"
/* A kernel launch (or CUDA call) that failed: report with file:line, abort. */
#define SW_CUDA_CHECK(call)                                                   \
    do {                                                                      \
        cudaError_t sw_cuda_rc_ = (call);                                     \
        if (sw_cuda_rc_ != cudaSuccess) STARPU_CUDA_REPORT_ERROR(sw_cuda_rc_); \
    } while (0)
/* Worker types a task may run on (sw_set_task_where, runtime.h). */
#define SW_INSERT_WHERE(cl) STARPU_EXECUTE_WHERE, (unsigned long long)sw_task_where(cl),
#else
#define SW_INSERT_WHERE(cl)
#endif

/* Row-major view of a StarPU matrix buffer: rows = ny, cols = nx, ld. */
#define SW_ROWS_OF(buf) ((int64_t)STARPU_MATRIX_GET_NY(buf))
#define SW_COLS_OF(buf) ((int64_t)STARPU_MATRIX_GET_NX(buf))
#define SW_LD_OF(buf) ((int64_t)STARPU_MATRIX_GET_LD(buf))
#define SW_F32_OF(buf) ((float *)STARPU_MATRIX_GET_PTR(buf))
#define SW_I32_OF(buf) ((int32_t *)STARPU_MATRIX_GET_PTR(buf))
#define SW_NUMEL_OF(buf) (SW_ROWS_OF(buf) * SW_COLS_OF(buf))

/* History-based perf model named after the codelet. */
#define SW_PERFMODEL(var, sym) \
    static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym}

/* Submit a task as starpu_task_insert does (build, then submit), aborting
 * with file:line on failure; in between, sw_trace's task graph sees its
 * accesses (a no-op when off). STARPU_NAME NULL: starpu_task_build names
 * its tasks "task_build", starpu_task_insert leaves the name unset.
 * The completion callback (sw_stats_hook) gets the trace record of the task
 * as its argument (StarPU frees it after the callback); the prologue
 * callback, run when the task is ready, fills in its data size. Both NULL
 * when sw_stats and sw_trace are off. */
#define SW_INSERT(cl, ...)                                                                           \
    do {                                                                                             \
        void *sw_trace_rec_ = sw_trace_task_begin();                                                 \
        struct starpu_task *sw_task_ = starpu_task_build(                                            \
            (cl), STARPU_NAME, NULL, __VA_ARGS__, SW_INSERT_WHERE(cl) STARPU_CALLBACK, sw_stats_hook(),  \
            STARPU_CALLBACK_ARG,                                                                      \
            sw_trace_rec_, STARPU_PROLOGUE_CALLBACK, sw_trace_task_prologue(sw_trace_rec_),            \
            STARPU_PROLOGUE_CALLBACK_ARG_NFREE, sw_trace_rec_, 0);                                    \
        if (!sw_task_) sw_fail(__FILE__, __LINE__, "starpu_task_build(" #cl ")", -EINVAL);           \
        sw_trace_dag_task(sw_task_);                                                                 \
        SW_CHECK(starpu_task_submit(sw_task_));                                                      \
    } while (0)

#endif
