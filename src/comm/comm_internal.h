/* What comm.c and collectives.c share: the communication context, the
 * macros its collectives submit with, and the helpers that send, receive
 * and number their messages (private to src/comm). */
#ifndef STARWEAVE_COMM_INTERNAL_H
#define STARWEAVE_COMM_INTERNAL_H

#include "starweave/comm.h"

#include <starpu_mpi.h>

#include "codelet_util.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"


/* Tasks that serve a collective (reductions, gates) are labelled
 * SW_PHASE_COMM in the trace, so that the overlap report does not count a
 * collective's own work as computation hiding it. */
#define COMM_INSERT(...)                                    \
    do {                                                    \
        sw_trace_ctx comm_saved_ = sw_trace_get_ctx();      \
        sw_trace_set_phase(SW_PHASE_COMM, comm_saved_.layer); \
        SW_INSERT(__VA_ARGS__);                             \
        sw_trace_set_ctx(comm_saved_);                      \
    } while (0)

struct sw_comm {
    const sw_mesh *mesh;
    sw_comm_algo algo;
    size_t small_bytes;
    int64_t next_tag[SW_GROUP_COUNT]; /* first tag of the next collective */
    int64_t tag_ub[SW_GROUP_COUNT];   /* wrap bound: <= the communicator's MPI_TAG_UB */
    int64_t mpi_tag_ub[SW_GROUP_COUNT];
    int64_t sent_bytes[SW_GROUP_COUNT]; /* bytes this rank has sent, per group, counted where they leave:
                                         * its send requests, and the MPI calls' arguments (comm_nbc.c) */
    long calls[SW_GROUP_COUNT];        /* collectives submitted on a group of 2 or more */
    const char *op;                    /* the collective being submitted, for sw_trace */
    int64_t op_base;                   /* its first tag: a request's chunk is tag - op_base */
    struct sw_nccl *nccl;              /* GPU builds: the collectives go to NCCL */
    int nccl_owned;                    /* created by sw_comm_set_backend, destroyed with c */
    /* the collectives MPI runs (comm_nbc.h), where MPI_THREAD_MULTIPLE:
     * per group of 2 or more, a duplicate of its communicator (MPI matches
     * collectives by call order: this context's alone) and the token that
     * orders them; NULL token: not available */
    MPI_Comm nbc_comm[SW_GROUP_COUNT];
    starpu_data_handle_t token[SW_GROUP_COUNT];
    /* point-to-point (sw_send, sw_recv) on a group of 2 or more: a
     * duplicate of its communicator, and per member the messages sent to
     * it and received from it so far (the next tag of each pair) */
    MPI_Comm p2p_comm[SW_GROUP_COUNT];
    /* StarPU-MPI's messages of the collectives: a communicator of their
     * own, so that in simulation it names StarPU-MPI's thread as each
     * rank's sender (src/core/sim_smpi.cc), where the mesh's names main */
    MPI_Comm coll_comm[SW_GROUP_COUNT];
    int64_t *p2p_sent[SW_GROUP_COUNT], *p2p_received[SW_GROUP_COUNT];
    int is_virtual;                    /* made by sw_comm_virtual: no communicator, for the models only */
    int virtual_nbc;                   /* sw_comm_virtual: 1 where a real context would let MPI run collectives */
};

/* GPU builds: a context handed an NCCL one passes each collective on. */
#ifdef STARWEAVE_USE_CUDA
#include "starweave/comm_nccl.h"
#define VIA_NCCL(call)       \
    do {                     \
        if (c->nccl) {       \
            call;            \
            return;          \
        }                    \
    } while (0)
#else
#define VIA_NCCL(call) ((void)0)
#endif

static inline int mod(int a, int p) { return ((a % p) + p) % p; }

/* a collective of `kind` submitted on g: counted where it communicates */
static inline void count_collective(const sw_comm *c, sw_group g, sw_counter kind)
{
    if (sw_mesh_size(c->mesh, g) > 1) sw_counter_add(kind, 1);
}

/* comm.c: a collective's tags (see there), the checks and temporaries
 * of its operands, and its messages (every send counts its bytes) */
int64_t sw_comm_take_tags(sw_comm *c, sw_group g, int64_t n);
void sw_comm_check_f32(const sw_tensor *t, const char *what);
starpu_data_handle_t sw_comm_temp_like(starpu_data_handle_t h);
void sw_comm_isend(sw_comm *c, sw_group g, starpu_data_handle_t h, int dest, int64_t tag, MPI_Comm comm);
/* reports operands a and b that break `rule`, then fails (sw_fail) */
void sw_comm_shape_fail(const char *what, const sw_tensor *a, const sw_tensor *b, const char *rule);
void sw_comm_irecv_after(sw_comm *c, sw_group g, starpu_data_handle_t after, starpu_data_handle_t h, int src,
                         int64_t tag, MPI_Comm comm);

#endif
