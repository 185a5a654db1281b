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
#endif

/* Row-major view of a StarPU matrix buffer: rows = ny, cols = nx, ld. */
#define SW_ROWS_OF(buf) ((int64_t)STARPU_MATRIX_GET_NY(buf))
#define SW_COLS_OF(buf) ((int64_t)STARPU_MATRIX_GET_NX(buf))
#define SW_LD_OF(buf) ((int64_t)STARPU_MATRIX_GET_LD(buf))
#define SW_F32_OF(buf) ((float *)STARPU_MATRIX_GET_PTR(buf))
#define SW_I32_OF(buf) ((int32_t *)STARPU_MATRIX_GET_PTR(buf))
#define SW_NUMEL_OF(buf) (SW_ROWS_OF(buf) * SW_COLS_OF(buf))

/* ---- shapes, checked by the submit helpers before they submit ----
 * The kernels take their loop bounds from one buffer and assume the others
 * match: a mismatch found in a worker could only abort there, or go
 * unnoticed. A helper checks its handles first and refuses a mismatch
 * through sw_failf, naming the op, the arguments and their shapes
 * [rows,cols] = [ny,nx]. The macros pass the arguments' names. */
#define SW_DIMS(h) (unsigned long)starpu_matrix_get_ny(h), (unsigned long)starpu_matrix_get_nx(h)

/* h is a matrix handle (every helper's handles are) */
#define SW_REQUIRE_MATRIX(op, h) sw_require_matrix_(__FILE__, __LINE__, op, #h, h)
static inline void sw_require_matrix_(const char *file, int line, const char *op, const char *name,
                                      starpu_data_handle_t h)
{
    if (!h || starpu_data_get_interface_id(h) != STARPU_MATRIX_INTERFACE_ID)
        sw_failf(file, line, "%s: %s is not a StarPU matrix handle", op, name);
}

/* a and b have the same shape */
#define SW_SAME_SHAPE(op, a, b) sw_same_shape_(__FILE__, __LINE__, op, #a, a, #b, b)
static inline void sw_same_shape_(const char *file, int line, const char *op, const char *na,
                                  starpu_data_handle_t a, const char *nb, starpu_data_handle_t b)
{
    sw_require_matrix_(file, line, op, na, a);
    sw_require_matrix_(file, line, op, nb, b);
    if (starpu_matrix_get_ny(a) != starpu_matrix_get_ny(b) || starpu_matrix_get_nx(a) != starpu_matrix_get_nx(b))
        sw_failf(file, line, "%s: %s [%lu,%lu] and %s [%lu,%lu] differ in shape", op, na, SW_DIMS(a), nb, SW_DIMS(b));
}

/* v ([1,n] or [n,1]) holds one value per row (SW_ONE_PER_ROW) or per column of x */
#define SW_ONE_PER_ROW(op, v, x) sw_one_per_(__FILE__, __LINE__, op, #v, v, 1, #x, x)
#define SW_ONE_PER_COL(op, v, x) sw_one_per_(__FILE__, __LINE__, op, #v, v, 0, #x, x)
static inline void sw_one_per_(const char *file, int line, const char *op, const char *vname, starpu_data_handle_t v,
                               int per_row, const char *xname, starpu_data_handle_t x)
{
    sw_require_matrix_(file, line, op, vname, v);
    sw_require_matrix_(file, line, op, xname, x);
    const unsigned long want = per_row ? starpu_matrix_get_ny(x) : starpu_matrix_get_nx(x);
    const unsigned long have = (unsigned long)starpu_matrix_get_ny(v) * starpu_matrix_get_nx(v);
    if (have != want)
        sw_failf(file, line, "%s: %s [%lu,%lu] must hold one value per %s of %s [%lu,%lu] (%lu != %lu)", op, vname,
                 SW_DIMS(v), per_row ? "row" : "column", xname, SW_DIMS(x), have, want);
}

/* a and b hold as many elements (shapes may differ) */
#define SW_SAME_NUMEL(op, a, b) sw_same_numel_(__FILE__, __LINE__, op, #a, a, #b, b)
static inline void sw_same_numel_(const char *file, int line, const char *op, const char *na,
                                  starpu_data_handle_t a, const char *nb, starpu_data_handle_t b)
{
    sw_require_matrix_(file, line, op, na, a);
    sw_require_matrix_(file, line, op, nb, b);
    const unsigned long ea = (unsigned long)starpu_matrix_get_ny(a) * starpu_matrix_get_nx(a),
                        eb = (unsigned long)starpu_matrix_get_ny(b) * starpu_matrix_get_nx(b);
    if (ea != eb)
        sw_failf(file, line, "%s: %s [%lu,%lu] and %s [%lu,%lu] differ in size (%lu != %lu elements)", op, na,
                 SW_DIMS(a), nb, SW_DIMS(b), ea, eb);
}

/* History-based perf model named after the codelet. In the simulation
 * build its footprint is StarPU's own, computed by src/sim_model.c, which
 * first checks that the calibration has a time for it (else: what to
 * calibrate, exit 2). SW_PERFMODEL_BY_WORK: a codelet whose work differs
 * at one shape (a causal attention tile's visible pairs depend on its
 * positions: a Ring step's earlier block is all visible, a diagonal one
 * half) is footprinted by its buffers and its FLOPs (sw_work_footprint),
 * so that each kind has a time of its own -- one shared time made the
 * simulated Ring tiles cost the mean of both, and a size never run took
 * the FLOPs of the first tile seen. */
uint32_t sw_work_footprint(struct starpu_task *task);
#ifdef STARPU_SIMGRID
uint32_t sw_sim_footprint(struct starpu_task *task);
uint32_t sw_sim_work_footprint(struct starpu_task *task);
#define SW_PERFMODEL(var, sym) \
    static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym, .footprint = sw_sim_footprint}
#define SW_PERFMODEL_BY_WORK(var, sym) \
    static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym, .footprint = sw_sim_work_footprint}
#else
#define SW_PERFMODEL(var, sym) \
    static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym}
#define SW_PERFMODEL_BY_WORK(var, sym) \
    static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym, .footprint = sw_work_footprint}
#endif

/* Submit a task as starpu_task_insert does, through sw_task_submit
 * (runtime.h): recorded by sw_trace, its task graph and sw_stats, run where
 * sw_set_task_where allows; aborts with file:line on failure. */
#define SW_INSERT(cl, ...) SW_TASK_INSERT(cl, __VA_ARGS__)

#endif
