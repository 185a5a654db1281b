/* Shared by the codelet files: matrix-interface accessors and submission. */
#ifndef STARWEAVE_CODELET_UTIL_H
#define STARWEAVE_CODELET_UTIL_H

#include <starpu.h>
#include "starweave/runtime.h"
#include "starweave/trace.h"

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

/* Submit a task through starpu_task_insert, aborting with file:line on failure.
 * The completion callback (sw_stats_hook) gets the trace record of the task
 * as its argument (StarPU frees it after the callback); the prologue
 * callback, run when the task is ready, fills in its data size. Both NULL
 * when sw_stats and sw_trace are off. */
#define SW_INSERT(cl, ...)                                                                       \
    do {                                                                                         \
        void *sw_trace_rec_ = sw_trace_task_begin();                                             \
        SW_CHECK(starpu_task_insert((cl), __VA_ARGS__, STARPU_CALLBACK, sw_stats_hook(),         \
                                    STARPU_CALLBACK_ARG, sw_trace_rec_, STARPU_PROLOGUE_CALLBACK, \
                                    sw_trace_task_prologue(sw_trace_rec_),                       \
                                    STARPU_PROLOGUE_CALLBACK_ARG_NFREE, sw_trace_rec_, 0));      \
    } while (0)

#endif
