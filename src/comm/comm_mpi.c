/* Baseline all-reduce: one StarPU task calling MPI_Allreduce (comm_mpi.h).
 *
 * FOR BENCHMARKS ONLY. The codelet below blocks the worker that runs it
 * inside MPI_Allreduce until every rank of the communicator has arrived and
 * the reduction is done; it exists only as the baseline that the task-graph
 * collectives of comm.c (StarPU-MPI detached requests + reduction tasks,
 * which never block a worker) are compared with. Calling MPI from a worker
 * thread is allowed because sw_init starts MPI at MPI_THREAD_MULTIPLE
 * (StarPU-MPI's progression thread calls MPI concurrently). */
#include "starweave/comm_mpi.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "codelet_util.h"
#include "starweave/runtime.h"

struct allreduce_mpi_args {
    MPI_Comm comm;
    int dtype; /* sw_dtype */
};

/* buffers: t (RW, the whole tensor: contiguous, ld == cols) */
static void allreduce_mpi_cpu(void *buffers[], void *cl_arg)
{
    struct allreduce_mpi_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(R <= 1 || SW_LD_OF(buffers[0]) == C);
    const MPI_Datatype type = a.dtype == SW_I32 ? MPI_INT : MPI_FLOAT;
    const size_t esize = a.dtype == SW_I32 ? sizeof(int32_t) : sizeof(float);
    char *ptr = (char *)STARPU_MATRIX_GET_PTR(buffers[0]);
    /* MPI counts are int: large buffers go in pieces (the same pieces on
     * every rank, since the shapes are equal) */
    for (int64_t done = 0, n = R * C; done < n;) {
        int64_t k = n - done < INT_MAX ? n - done : INT_MAX;
        int rc = MPI_Allreduce(MPI_IN_PLACE, ptr + (size_t)done * esize, (int)k, type, MPI_SUM, a.comm);
        if (rc != MPI_SUCCESS) sw_fail(__FILE__, __LINE__, "MPI_Allreduce", rc);
        done += k;
    }
}

SW_PERFMODEL(allreduce_mpi_model, "sw_comm_allreduce_mpi");

static struct starpu_codelet allreduce_mpi_cl = {
    .cpu_funcs = {allreduce_mpi_cpu},
    .cpu_funcs_name = {"allreduce_mpi_cpu"},
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .model = &allreduce_mpi_model,
    .name = "comm_allreduce_mpi",
};

void sw_allreduce_mpi(MPI_Comm comm, sw_tensor *t)
{
    if (t->dtype != SW_F32 && t->dtype != SW_I32) {
        fprintf(stderr, "starweave: sw_allreduce_mpi: tensor %s has an unsupported dtype\n", t->name);
        sw_fail(__FILE__, __LINE__, "sw_allreduce_mpi", -EINVAL);
    }
    if (comm == MPI_COMM_NULL) sw_fail(__FILE__, __LINE__, "sw_allreduce_mpi: MPI_COMM_NULL", -EINVAL);
    struct allreduce_mpi_args a = {comm, (int)t->dtype};
    SW_INSERT(&allreduce_mpi_cl, STARPU_RW, sw_tensor_whole(t, STARPU_RW), STARPU_VALUE, &a, sizeof a);
}
