/* Collectives as graph nodes, NCCL backend (comm_nccl.h): one CUDA codelet
 * per collective, issuing the NCCL call on the StarPU worker's stream.
 *
 * Like comm.c, this file is the only place that talks to NCCL, and it talks
 * to MPI only to hand each group its NCCL unique id. The codelets live here
 * rather than in codelets/: they need the communicators (not mere buffers
 * and an argument struct) and are not ops a graph builder submits. */
#include "config.h"

#include "starweave/comm_nccl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <nccl.h>

#include "codelet_util.h"
#include "starweave/ops.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

static void nccl_fail(const char *file, int line, const char *call, ncclResult_t r) __attribute__((noreturn));
static void nccl_fail(const char *file, int line, const char *call, ncclResult_t r)
{
    fprintf(stderr, "starweave: rank %d: %s:%d: %s: %s\n", sw_rank(), file, line, call, ncclGetErrorString(r));
    sw_fail(file, line, call, (long)r);
}

#define NCCL_CHECK(call)                                                  \
    do {                                                                  \
        ncclResult_t sw_nccl_rc_ = (call);                                \
        if (sw_nccl_rc_ != ncclSuccess) nccl_fail(__FILE__, __LINE__, #call, sw_nccl_rc_); \
    } while (0)

/* Collective tasks are labelled SW_PHASE_COMM in the trace (as comm.c's):
 * the overlap report counts them as communication, not compute. */
#define NCCL_INSERT(...)                                      \
    do {                                                      \
        sw_trace_ctx nccl_saved_ = sw_trace_get_ctx();        \
        sw_trace_set_phase(SW_PHASE_COMM, nccl_saved_.layer); \
        SW_INSERT(__VA_ARGS__);                               \
        sw_trace_set_ctx(nccl_saved_);                        \
    } while (0)

struct sw_nccl {
    const sw_mesh *mesh;
    int worker, device;                        /* the CUDA worker running the collectives, its GPU */
    ncclComm_t comm[SW_GROUP_COUNT];           /* NULL for groups of one rank */
    starpu_data_handle_t token[SW_GROUP_COUNT]; /* per communicator: its calls in submission order */
    starpu_data_handle_t order;                /* every call of the context in submission order */
    long calls[SW_GROUP_COUNT];
    double sent[SW_GROUP_COUNT];               /* payload bytes, as sw_nccl_traffic counts them */
};

/* What a collective task needs besides its buffers. */
struct nccl_args {
    ncclComm_t comm;
    int dtype;        /* sw_dtype */
    int op;           /* sw_reduce_op */
    int root;         /* broadcast */
    int p, me;        /* group size, rank in the group */
    int64_t rows;     /* allgather / reduce-scatter: rows of the full tensor; alltoall: rows of in */
    int64_t cols;     /* columns (of in for the all-to-all) */
    int scatter_dim, gather_dim;
    int to, from;     /* ring shift: destination and source ranks in the group */
    int nparts;       /* all-to-all of parts: parts per member */
};

static ncclDataType_t nccl_type(int dtype) { return dtype == SW_I32 ? ncclInt32 : ncclFloat32; }
static ncclRedOp_t nccl_op(int op) { return op == SW_MAX ? ncclMax : ncclSum; }
static size_t esize(int dtype) { return dtype == SW_I32 ? sizeof(int32_t) : sizeof(float); }

/* Base of a whole-tensor buffer, which is contiguous (ld == cols). */
static char *contiguous(void *buf)
{
    STARPU_ASSERT_MSG(SW_ROWS_OF(buf) <= 1 || SW_LD_OF(buf) == SW_COLS_OF(buf), "NCCL buffer must be contiguous");
    return (char *)STARPU_MATRIX_GET_PTR(buf);
}

/* ---------------- CUDA functions of the collective codelets ---------------- */

/* Tiles of a handle (column blocks) may be strided; NCCL wants contiguous
 * buffers, so such a buffer travels through a stream-ordered staging copy. */
static int dense(void *buf) { return SW_ROWS_OF(buf) <= 1 || SW_LD_OF(buf) == SW_COLS_OF(buf); }

static void copy_2d(char *dst, int64_t dld, const char *src, int64_t sld, void *shape_of, cudaStream_t s)
{
    SW_CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)dld * sizeof(float), src, (size_t)sld * sizeof(float),
                                    (size_t)SW_COLS_OF(shape_of) * sizeof(float), (size_t)SW_ROWS_OF(shape_of),
                                    cudaMemcpyDeviceToDevice, s));
}

/* A contiguous buffer holding buf's value: buf itself when dense and not
 * forced, else a staging copy (*staged set, freed by the caller). */
static char *send_buffer(void *buf, int force, char **staged, cudaStream_t s)
{
    char *p = (char *)STARPU_MATRIX_GET_PTR(buf);
    *staged = NULL;
    if (dense(buf) && !force) return p;
    SW_CUDA_CHECK(cudaMallocAsync((void **)staged, (size_t)SW_NUMEL_OF(buf) * sizeof(float), s));
    copy_2d(*staged, SW_COLS_OF(buf), p, SW_LD_OF(buf), buf, s);
    return *staged;
}

/* Where to receive buf's value: buf itself when dense, else staging that
 * recv_done copies into buf and frees. */
static char *recv_buffer(void *buf, char **staged, cudaStream_t s)
{
    *staged = NULL;
    if (dense(buf)) return (char *)STARPU_MATRIX_GET_PTR(buf);
    SW_CUDA_CHECK(cudaMallocAsync((void **)staged, (size_t)SW_NUMEL_OF(buf) * sizeof(float), s));
    return *staged;
}

static void recv_done(void *buf, char *staged, cudaStream_t s)
{
    if (!staged) return;
    copy_2d((char *)STARPU_MATRIX_GET_PTR(buf), SW_LD_OF(buf), staged, SW_COLS_OF(buf), buf, s);
    SW_CUDA_CHECK(cudaFreeAsync(staged, s));
}

static void free_staged(char *staged, cudaStream_t s)
{
    if (staged) SW_CUDA_CHECK(cudaFreeAsync(staged, s));
}

/* buffers: t (RW), token, order */
static void allreduce_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    char *t = contiguous(buffers[0]);
    NCCL_CHECK(ncclAllReduce(t, t, (size_t)SW_NUMEL_OF(buffers[0]), nccl_type(a.dtype), nccl_op(a.op), a.comm,
                             starpu_cuda_get_local_stream()));
}

/* Row counts of the members: equal (one ncclAllGather / ncclReduceScatter)
 * or StarPU's block split with sizes one apart (one call per member). */
static int equal_split(int64_t rows, int p) { return rows % p == 0; }

/* buffers: in (R) or nothing (in place), out (W or RW), token, order.
 * Member i's rows land at out rows [first_i, first_i + n_i). */
static void allgather_common(char *in, char *out, const struct nccl_args *a)
{
    cudaStream_t s = starpu_cuda_get_local_stream();
    const size_t row = (size_t)a->cols * esize(a->dtype);
    if (equal_split(a->rows, a->p)) {
        const size_t count = (size_t)(a->rows / a->p) * (size_t)a->cols;
        /* in place: the send buffer is the member's own slot of out */
        NCCL_CHECK(ncclAllGather(in ? in : out + (size_t)a->me * count * esize(a->dtype), out, count,
                                 nccl_type(a->dtype), a->comm, s));
        return;
    }
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < a->p; i++) {
        int64_t first, n;
        sw_tile_range(a->rows, a->p, i, &first, &n);
        char *dst = out + (size_t)first * row;
        const char *src = (i == a->me && in) ? in : dst;
        NCCL_CHECK(ncclBroadcast(src, dst, (size_t)n * (size_t)a->cols, nccl_type(a->dtype), i, a->comm, s));
    }
    NCCL_CHECK(ncclGroupEnd());
}

static void allgather_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    allgather_common(contiguous(buffers[0]), contiguous(buffers[1]), &a);
}

static void allgather_inplace_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    allgather_common(NULL, contiguous(buffers[0]), &a);
}

/* buffers: in[N, cols] (R), out[n_me, cols] (W), token, order */
static void reduce_scatter_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    char *in = contiguous(buffers[0]), *out = contiguous(buffers[1]);
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (equal_split(a.rows, a.p)) {
        NCCL_CHECK(ncclReduceScatter(in, out, (size_t)(a.rows / a.p) * (size_t)a.cols, nccl_type(a.dtype),
                                     nccl_op(a.op), a.comm, s));
        return;
    }
    const size_t row = (size_t)a.cols * esize(a.dtype);
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < a.p; i++) {
        int64_t first, n;
        sw_tile_range(a.rows, a.p, i, &first, &n);
        /* the receive buffer is only written on the root */
        NCCL_CHECK(ncclReduce(in + (size_t)first * row, out, (size_t)n * (size_t)a.cols, nccl_type(a.dtype),
                              nccl_op(a.op), i, a.comm, s));
    }
    NCCL_CHECK(ncclGroupEnd());
}

/* buffers: t (RW), token, order */
static void broadcast_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    char *t = contiguous(buffers[0]);
    NCCL_CHECK(ncclBroadcast(t, t, (size_t)SW_NUMEL_OF(buffers[0]), nccl_type(a.dtype), a.root, a.comm,
                             starpu_cuda_get_local_stream()));
}

/* buffers: in[R, C] (R), out (W), token, order. Part j is a [pr, pc] block:
 * of in at rows j*pr (scatter rows) or columns j*pc (scatter cols), pitch C;
 * of out at rows j*pr or columns j*pc, pitch out's columns. Parts that are
 * not contiguous travel through stream-ordered staging buffers. */
static void alltoall_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    char *in = contiguous(buffers[0]), *out = contiguous(buffers[1]);
    cudaStream_t s = starpu_cuda_get_local_stream();
    const size_t es = esize(a.dtype);
    const int p = a.p, me = a.me;
    const int64_t C = a.cols, pr = a.scatter_dim == 0 ? a.rows / p : a.rows, pc = a.scatter_dim == 1 ? C / p : C;
    const int64_t ocols = a.gather_dim == 1 ? pc * p : pc;
    const size_t part = (size_t)(pr * pc), part_bytes = part * es;
#define IN_PART(j) (in + ((a.scatter_dim == 0 ? (size_t)(j) * (size_t)(pr * C) : (size_t)(j) * (size_t)pc) * es))
#define OUT_PART(j) (out + ((a.gather_dim == 0 ? (size_t)(j) * (size_t)(pr * ocols) : (size_t)(j) * (size_t)pc) * es))
    const int pack_in = pc != C, unpack_out = pc != ocols;
    char *sendbuf = NULL, *recvbuf = NULL;
    if (pack_in) SW_CUDA_CHECK(cudaMallocAsync((void **)&sendbuf, part_bytes * (size_t)p, s));
    if (unpack_out) SW_CUDA_CHECK(cudaMallocAsync((void **)&recvbuf, part_bytes * (size_t)p, s));
    for (int j = 0; j < p; j++) {
        if (j == me) { /* the local part, block to block */
            SW_CUDA_CHECK(cudaMemcpy2DAsync(OUT_PART(j), (size_t)ocols * es, IN_PART(j), (size_t)C * es,
                                            (size_t)pc * es, (size_t)pr, cudaMemcpyDeviceToDevice, s));
        } else if (pack_in) {
            SW_CUDA_CHECK(cudaMemcpy2DAsync(sendbuf + (size_t)j * part_bytes, (size_t)pc * es, IN_PART(j),
                                            (size_t)C * es, (size_t)pc * es, (size_t)pr, cudaMemcpyDeviceToDevice, s));
        }
    }
    NCCL_CHECK(ncclGroupStart());
    for (int j = 0; j < p; j++) {
        if (j == me) continue;
        NCCL_CHECK(ncclSend(pack_in ? sendbuf + (size_t)j * part_bytes : IN_PART(j), part, nccl_type(a.dtype), j,
                            a.comm, s));
        NCCL_CHECK(ncclRecv(unpack_out ? recvbuf + (size_t)j * part_bytes : OUT_PART(j), part, nccl_type(a.dtype), j,
                            a.comm, s));
    }
    NCCL_CHECK(ncclGroupEnd());
    if (unpack_out)
        for (int j = 0; j < p; j++)
            if (j != me)
                SW_CUDA_CHECK(cudaMemcpy2DAsync(OUT_PART(j), (size_t)ocols * es, recvbuf + (size_t)j * part_bytes,
                                                (size_t)pc * es, (size_t)pc * es, (size_t)pr,
                                                cudaMemcpyDeviceToDevice, s));
#undef IN_PART
#undef OUT_PART
    if (sendbuf) SW_CUDA_CHECK(cudaFreeAsync(sendbuf, s));
    if (recvbuf) SW_CUDA_CHECK(cudaFreeAsync(recvbuf, s));
}

/* buffers: send (R) and recv (W), or one buffer (RW, in place: the outgoing
 * value is staged first), token, order */
static void ring_shift_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    cudaStream_t s = starpu_cuda_get_local_stream();
    const int inplace = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 3;
    void *sb = buffers[0], *rb = inplace ? buffers[0] : buffers[1];
    char *ss, *rs;
    char *src = send_buffer(sb, inplace, &ss, s), *dst = recv_buffer(rb, &rs, s);
    const size_t n = (size_t)SW_NUMEL_OF(sb);
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(src, n, ncclFloat32, a.to, a.comm, s));
    NCCL_CHECK(ncclRecv(dst, n, ncclFloat32, a.from, a.comm, s));
    NCCL_CHECK(ncclGroupEnd());
    recv_done(rb, rs, s);
    free_staged(ss, s);
}

/* buffers: send[j*n + i] (R) for the p members j and n parts i, then
 * recv[j*n + i] (W), token, order. The local parts are copied; the others
 * go out in one group call (a send and a receive per member and part). */
static void alltoall_parts_cuda(void *buffers[], void *cl_arg)
{
    struct nccl_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    cudaStream_t s = starpu_cuda_get_local_stream();
    const int n = a.nparts, np = n * a.p;
    void **send = buffers, **recv = buffers + np;
    char **stage = calloc((size_t)(2 * np), sizeof *stage), **ptr = calloc((size_t)(2 * np), sizeof *ptr);
    if (!stage || !ptr) sw_fail(__FILE__, __LINE__, "calloc(alltoall staging)", -ENOMEM);
    for (int k = 0; k < np; k++) {
        if (k / n == a.me) {
            copy_2d((char *)STARPU_MATRIX_GET_PTR(recv[k]), SW_LD_OF(recv[k]), (char *)STARPU_MATRIX_GET_PTR(send[k]),
                    SW_LD_OF(send[k]), send[k], s);
            continue;
        }
        ptr[k] = send_buffer(send[k], 0, &stage[k], s);
        ptr[np + k] = recv_buffer(recv[k], &stage[np + k], s);
    }
    NCCL_CHECK(ncclGroupStart());
    for (int k = 0; k < np; k++) {
        const int j = k / n;
        if (j == a.me) continue;
        NCCL_CHECK(ncclSend(ptr[k], (size_t)SW_NUMEL_OF(send[k]), ncclFloat32, j, a.comm, s));
        NCCL_CHECK(ncclRecv(ptr[np + k], (size_t)SW_NUMEL_OF(recv[k]), ncclFloat32, j, a.comm, s));
    }
    NCCL_CHECK(ncclGroupEnd());
    for (int k = 0; k < np; k++) {
        recv_done(recv[k], stage[np + k], s);
        free_staged(stage[k], s);
    }
    free(stage);
    free(ptr);
}

/* ---------------- codelets: CUDA only, the collective's data then the two tokens ---------------- */

SW_PERFMODEL(nccl_allreduce_model, "sw_nccl_allreduce");
SW_PERFMODEL(nccl_allgather_model, "sw_nccl_allgather");
SW_PERFMODEL(nccl_allgather_inplace_model, "sw_nccl_allgather_inplace");
SW_PERFMODEL(nccl_reduce_scatter_model, "sw_nccl_reduce_scatter");
SW_PERFMODEL(nccl_broadcast_model, "sw_nccl_broadcast");
SW_PERFMODEL(nccl_alltoall_model, "sw_nccl_alltoall");
SW_PERFMODEL(nccl_ring_shift_model, "sw_nccl_ring_shift");
SW_PERFMODEL(nccl_alltoall_parts_model, "sw_nccl_alltoall_parts");

static struct starpu_codelet allreduce_cl = {
    .cuda_funcs = {allreduce_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = 3,
    .modes = {STARPU_RW, STARPU_RW, STARPU_RW},
    .model = &nccl_allreduce_model,
    .name = "nccl_allreduce",
};

static struct starpu_codelet allgather_cl = {
    .cuda_funcs = {allgather_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_W, STARPU_RW, STARPU_RW},
    .model = &nccl_allgather_model,
    .name = "nccl_allgather",
};

static struct starpu_codelet allgather_inplace_cl = {
    .cuda_funcs = {allgather_inplace_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = 3,
    .modes = {STARPU_RW, STARPU_RW, STARPU_RW},
    .model = &nccl_allgather_inplace_model,
    .name = "nccl_allgather_inplace",
};

static struct starpu_codelet reduce_scatter_cl = {
    .cuda_funcs = {reduce_scatter_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_W, STARPU_RW, STARPU_RW},
    .model = &nccl_reduce_scatter_model,
    .name = "nccl_reduce_scatter",
};

static struct starpu_codelet broadcast_cl = {
    .cuda_funcs = {broadcast_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = 3,
    .modes = {STARPU_RW, STARPU_RW, STARPU_RW},
    .model = &nccl_broadcast_model,
    .name = "nccl_broadcast",
};

static struct starpu_codelet alltoall_cl = {
    .cuda_funcs = {alltoall_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_W, STARPU_RW, STARPU_RW},
    .model = &nccl_alltoall_model,
    .name = "nccl_alltoall",
};

/* two buffers and the tokens, or one (in place) and the tokens */
static struct starpu_codelet ring_shift_cl = {
    .cuda_funcs = {ring_shift_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &nccl_ring_shift_model,
    .name = "nccl_ring_shift",
};

static struct starpu_codelet alltoall_parts_cl = {
    .cuda_funcs = {alltoall_parts_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &nccl_alltoall_parts_model,
    .name = "nccl_alltoall_parts",
};

/* ---------------- context ---------------- */

int sw_nccl_check(char *msg, size_t n)
{
    char dummy[1];
    if (!msg || n == 0) {
        msg = dummy;
        n = sizeof dummy;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
    if (starpu_cuda_worker_get_count() == 0) {
        snprintf(msg, n, "no CUDA worker (%d GPU(s) visible to CUDA%s)", ndev,
                 ndev > 0 ? "; STARPU_NCUDA or sw_options.ncuda may be 0" : "");
        return -1;
    }
    /* NCCL refuses two ranks of a communicator on one device */
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int local = ls ? atoi(ls) : 1;
    if (ndev < local) {
        snprintf(msg, n, "%d ranks on this node need a GPU each, found %d", local, ndev);
        return -1;
    }
    return 0;
}

sw_nccl *sw_nccl_create(const sw_mesh *m)
{
    char why[256];
    if (sw_nccl_check(why, sizeof why) != 0) {
        fprintf(stderr, "starweave: rank %d: sw_nccl_create: %s\n", sw_rank(), why);
        sw_fail(__FILE__, __LINE__, "sw_nccl_create", -ENODEV);
    }
    sw_nccl *c = calloc(1, sizeof *c);
    if (!c) sw_fail(__FILE__, __LINE__, "calloc(sw_nccl)", -ENOMEM);
    c->mesh = m;
    int ids[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) < 1)
        sw_fail(__FILE__, __LINE__, "starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER)", -ENODEV);
    c->worker = ids[0];
    c->device = starpu_worker_get_devid(c->worker);
    /* the communicators belong to the worker's device */
    SW_CUDA_CHECK(cudaSetDevice(c->device));
    /* Every rank walks the groups in the same order, and a group's init only
     * waits for that group's members, who are at the same step: no cycle. */
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        const int p = sw_mesh_size(m, (sw_group)g), r = sw_mesh_rank(m, (sw_group)g);
        if (p < 2) continue;
        ncclUniqueId id;
        memset(&id, 0, sizeof id);
        if (r == 0) NCCL_CHECK(ncclGetUniqueId(&id));
        SW_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, sw_mesh_comm(m, (sw_group)g)));
        NCCL_CHECK(ncclCommInitRank(&c->comm[g], p, id, r));
        starpu_void_data_register(&c->token[g]);
    }
    starpu_void_data_register(&c->order);
    return c;
}

void sw_nccl_destroy(sw_nccl *c)
{
    if (!c) return;
    /* blocking unregisters: every collective task has finished (its NCCL
     * kernel included, the tasks being asynchronous CUDA tasks) */
    for (int g = 0; g < SW_GROUP_COUNT; g++)
        if (c->token[g]) starpu_data_unregister(c->token[g]);
    starpu_data_unregister(c->order);
    SW_CUDA_CHECK(cudaSetDevice(c->device));
    for (int g = 0; g < SW_GROUP_COUNT; g++)
        if (c->comm[g]) NCCL_CHECK(ncclCommDestroy(c->comm[g]));
    free(c);
}

const sw_mesh *sw_nccl_mesh(const sw_nccl *c) { return c->mesh; }
int sw_nccl_worker(const sw_nccl *c) { return c->worker; }
long sw_nccl_calls(const sw_nccl *c, sw_group g) { return (unsigned)g < SW_GROUP_COUNT ? c->calls[g] : 0; }
double sw_nccl_sent_bytes(const sw_nccl *c, sw_group g) { return (unsigned)g < SW_GROUP_COUNT ? c->sent[g] : 0; }

/* ---------------- collectives ---------------- */

static int group_size(sw_nccl *c, sw_group g, const char *what)
{
    const int p = sw_mesh_size(c->mesh, g);
    if (p < 1) sw_fail(__FILE__, __LINE__, what, -EINVAL);
    return p;
}

static void check_dtype(const sw_tensor *t, const char *what, int allow_i32)
{
    if (t->dtype == SW_F32 || (allow_i32 && t->dtype == SW_I32)) return;
    fprintf(stderr, "starweave: %s: tensor %s is not %s\n", what, t->name, allow_i32 ? "fp32 or int32" : "fp32");
    sw_fail(__FILE__, __LINE__, what, -EINVAL);
}

/* part must be this member's rows of full (sw_tile_range) */
static void check_rows(const char *what, sw_nccl *c, sw_group g, const sw_tensor *full, const sw_tensor *part)
{
    const int p = group_size(c, g, what), r = sw_mesh_rank(c->mesh, g);
    if (full->rows < p) {
        fprintf(stderr, "starweave: %s: %s has %lld rows, fewer than the group size %d\n", what, full->name,
                (long long)full->rows, p);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
    int64_t first, count;
    sw_tile_range(full->rows, p, r, &first, &count);
    if (part->rows != count || part->cols != full->cols) {
        fprintf(stderr, "starweave: %s: %s is [%lld, %lld], expected [%lld, %lld] (rows %lld..%lld of %s)\n", what,
                part->name, (long long)part->rows, (long long)part->cols, (long long)count, (long long)full->cols,
                (long long)first, (long long)(first + count - 1), full->name);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
}

/* Bytes of the row chunks of full other than chunk `skip` (sw_tile_range):
 * what this member sends in a ring all-gather (skip = me + 1) or
 * reduce-scatter (skip = me). */
static double ring_bytes(const sw_tensor *full, int p, int skip)
{
    int64_t first, n;
    sw_tile_range(full->rows, p, ((skip % p) + p) % p, &first, &n);
    return (double)(full->rows - n) * (double)full->cols * (double)sw_dtype_size(full->dtype);
}

static struct nccl_args args_of(sw_nccl *c, sw_group g, int dtype)
{
    struct nccl_args a;
    memset(&a, 0, sizeof a); /* padding bytes are packed too */
    a.comm = c->comm[g];
    a.dtype = dtype;
    a.p = sw_mesh_size(c->mesh, g);
    a.me = sw_mesh_rank(c->mesh, g);
    c->calls[g]++;
    return a;
}

void sw_nccl_allreduce(sw_nccl *c, sw_group g, sw_tensor *t, sw_reduce_op op)
{
    check_dtype(t, "sw_nccl_allreduce", 1);
    if (group_size(c, g, "sw_nccl_allreduce") == 1) return;
    struct nccl_args a = args_of(c, g, (int)t->dtype);
    a.op = (int)op;
    c->sent[g] += 2.0 * (a.p - 1) / a.p * (double)sw_tensor_bytes(t);
    NCCL_INSERT(&allreduce_cl, STARPU_RW, sw_tensor_whole(t, STARPU_RW), STARPU_RW, c->token[g], STARPU_RW, c->order,
                STARPU_VALUE, &a, sizeof a, STARPU_EXECUTE_ON_WORKER, c->worker);
}

void sw_nccl_allgather(sw_nccl *c, sw_group g, sw_tensor *in, sw_tensor *out)
{
    check_dtype(in, "sw_nccl_allgather", 0);
    check_dtype(out, "sw_nccl_allgather", 0);
    check_rows("sw_nccl_allgather", c, g, out, in);
    starpu_data_handle_t src = sw_tensor_whole(in, STARPU_R);
    if (group_size(c, g, "sw_nccl_allgather") == 1) {
        sw_copy_flat(src, sw_tensor_whole(out, STARPU_W), 0);
        return;
    }
    struct nccl_args a = args_of(c, g, SW_F32);
    a.rows = out->rows;
    a.cols = out->cols;
    c->sent[g] += ring_bytes(out, a.p, a.me + 1);
    NCCL_INSERT(&allgather_cl, STARPU_R, src, STARPU_W, sw_tensor_whole(out, STARPU_W), STARPU_RW, c->token[g],
                STARPU_RW, c->order, STARPU_VALUE, &a, sizeof a, STARPU_EXECUTE_ON_WORKER, c->worker);
}

void sw_nccl_allgather_inplace(sw_nccl *c, sw_group g, sw_tensor *t)
{
    check_dtype(t, "sw_nccl_allgather_inplace", 0);
    const int p = group_size(c, g, "sw_nccl_allgather_inplace");
    if (p == 1) return;
    if (t->rows < p) {
        fprintf(stderr, "starweave: sw_nccl_allgather_inplace: tensor %s has %lld rows, fewer than the group (%d)\n",
                t->name, (long long)t->rows, p);
        sw_fail(__FILE__, __LINE__, "sw_nccl_allgather_inplace", -EINVAL);
    }
    struct nccl_args a = args_of(c, g, SW_F32);
    a.rows = t->rows;
    a.cols = t->cols;
    c->sent[g] += ring_bytes(t, a.p, a.me + 1);
    NCCL_INSERT(&allgather_inplace_cl, STARPU_RW, sw_tensor_whole(t, STARPU_RW), STARPU_RW, c->token[g], STARPU_RW,
                c->order, STARPU_VALUE, &a, sizeof a, STARPU_EXECUTE_ON_WORKER, c->worker);
}

void sw_nccl_reduce_scatter(sw_nccl *c, sw_group g, sw_tensor *in, sw_tensor *out, sw_reduce_op op)
{
    check_dtype(in, "sw_nccl_reduce_scatter", 0);
    check_dtype(out, "sw_nccl_reduce_scatter", 0);
    check_rows("sw_nccl_reduce_scatter", c, g, in, out);
    starpu_data_handle_t src = sw_tensor_whole(in, STARPU_R);
    if (group_size(c, g, "sw_nccl_reduce_scatter") == 1) {
        sw_copy_flat(src, sw_tensor_whole(out, STARPU_W), 0);
        return;
    }
    struct nccl_args a = args_of(c, g, SW_F32);
    a.op = (int)op;
    a.rows = in->rows;
    a.cols = in->cols;
    c->sent[g] += ring_bytes(in, a.p, a.me);
    NCCL_INSERT(&reduce_scatter_cl, STARPU_R, src, STARPU_W, sw_tensor_whole(out, STARPU_W), STARPU_RW, c->token[g],
                STARPU_RW, c->order, STARPU_VALUE, &a, sizeof a, STARPU_EXECUTE_ON_WORKER, c->worker);
}

void sw_nccl_broadcast(sw_nccl *c, sw_group g, sw_tensor *t, int root)
{
    check_dtype(t, "sw_nccl_broadcast", 1);
    const int p = group_size(c, g, "sw_nccl_broadcast");
    if (root < 0 || root >= p) sw_fail(__FILE__, __LINE__, "sw_nccl_broadcast: bad root", -EINVAL);
    if (p == 1) return;
    struct nccl_args a = args_of(c, g, (int)t->dtype);
    a.root = root;
    if (a.me == root) c->sent[g] += (double)(p - 1) * (double)sw_tensor_bytes(t);
    NCCL_INSERT(&broadcast_cl, STARPU_RW, sw_tensor_whole(t, STARPU_RW), STARPU_RW, c->token[g], STARPU_RW, c->order,
                STARPU_VALUE, &a, sizeof a, STARPU_EXECUTE_ON_WORKER, c->worker);
}

void sw_nccl_alltoall(sw_nccl *c, sw_group g, sw_tensor *in, sw_tensor *out, int scatter_dim, int gather_dim)
{
    static const char *dn[2] = {"rows", "cols"};
    const char *what = "sw_nccl_alltoall";
    check_dtype(in, what, 0);
    check_dtype(out, what, 0);
    const int p = group_size(c, g, what);
    if ((scatter_dim != 0 && scatter_dim != 1) || (gather_dim != 0 && gather_dim != 1)) {
        fprintf(stderr, "starweave: %s: scatter_dim %d and gather_dim %d must be 0 (rows) or 1 (cols)\n", what,
                scatter_dim, gather_dim);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
    if (in == out) sw_fail(__FILE__, __LINE__, "sw_nccl_alltoall: in and out must be different tensors", -EINVAL);
    const int64_t split = scatter_dim == 0 ? in->rows : in->cols;
    if (split % p != 0) {
        fprintf(stderr, "starweave: %s: %s [%lld, %lld]: its %lld %s (scatter_dim %d) are not divisible by the group "
                "size %d (%s)\n", what, in->name, (long long)in->rows, (long long)in->cols, (long long)split,
                dn[scatter_dim], scatter_dim, p, sw_group_name(g));
        sw_fail(__FILE__, __LINE__, "sw_nccl_alltoall: split dim not divisible by the group size", -EINVAL);
    }
    const int64_t pr = scatter_dim == 0 ? in->rows / p : in->rows, pc = scatter_dim == 1 ? in->cols / p : in->cols;
    const int64_t orows = gather_dim == 0 ? pr * p : pr, ocols = gather_dim == 1 ? pc * p : pc;
    if (out->rows != orows || out->cols != ocols) {
        fprintf(stderr, "starweave: %s: %s is [%lld, %lld], expected [%lld, %lld] (%s [%lld, %lld], scatter %s, "
                "gather %s, group size %d)\n", what, out->name, (long long)out->rows, (long long)out->cols,
                (long long)orows, (long long)ocols, in->name, (long long)in->rows, (long long)in->cols,
                dn[scatter_dim], dn[gather_dim], p);
        sw_fail(__FILE__, __LINE__, "sw_nccl_alltoall: out has the wrong shape", -EINVAL);
    }
    starpu_data_handle_t src = sw_tensor_whole(in, STARPU_R);
    if (p == 1) {
        sw_copy_flat(src, sw_tensor_whole(out, STARPU_W), 0);
        return;
    }
    struct nccl_args a = args_of(c, g, SW_F32);
    a.rows = in->rows;
    a.cols = in->cols;
    a.scatter_dim = scatter_dim;
    a.gather_dim = gather_dim;
    c->sent[g] += (double)(p - 1) / p * (double)sw_tensor_bytes(in);
    NCCL_INSERT(&alltoall_cl, STARPU_R, src, STARPU_W, sw_tensor_whole(out, STARPU_W), STARPU_RW, c->token[g],
                STARPU_RW, c->order, STARPU_VALUE, &a, sizeof a, STARPU_EXECUTE_ON_WORKER, c->worker);
}

static double handle_bytes(starpu_data_handle_t h)
{
    return (double)starpu_matrix_get_nx(h) * starpu_matrix_get_ny(h) * starpu_matrix_get_elemsize(h);
}

static void check_f32_handle(starpu_data_handle_t h, const char *what)
{
    if (starpu_data_get_interface_id(h) == STARPU_MATRIX_INTERFACE_ID && starpu_matrix_get_elemsize(h) == sizeof(float))
        return;
    fprintf(stderr, "starweave: %s: a handle is not an fp32 matrix\n", what);
    sw_fail(__FILE__, __LINE__, what, -EINVAL);
}

void sw_nccl_ring_shift_handles(sw_nccl *c, sw_group g, starpu_data_handle_t send, starpu_data_handle_t recv, int shift)
{
    const char *what = "sw_nccl_ring_shift";
    const int p = group_size(c, g, what);
    check_f32_handle(send, what);
    if (recv) {
        check_f32_handle(recv, what);
        if (starpu_matrix_get_nx(send) != starpu_matrix_get_nx(recv) ||
            starpu_matrix_get_ny(send) != starpu_matrix_get_ny(recv)) {
            fprintf(stderr, "starweave: %s: send [%u, %u] and recv [%u, %u] differ\n", what, starpu_matrix_get_ny(send),
                    starpu_matrix_get_nx(send), starpu_matrix_get_ny(recv), starpu_matrix_get_nx(recv));
            sw_fail(__FILE__, __LINE__, what, -EINVAL);
        }
    }
    const int k = ((shift % p) + p) % p;
    if (k == 0) {
        if (recv) sw_copy(recv, send);
        return;
    }
    struct nccl_args a = args_of(c, g, SW_F32);
    a.to = (a.me + k) % p;
    a.from = (a.me - k + p) % p;
    c->sent[g] += handle_bytes(send);
    struct starpu_data_descr d[4] = {{send, recv ? STARPU_R : STARPU_RW}, {recv, STARPU_W}, {c->token[g], STARPU_RW},
                                     {c->order, STARPU_RW}};
    if (!recv) d[1] = d[2], d[2] = d[3];
    NCCL_INSERT(&ring_shift_cl, STARPU_DATA_MODE_ARRAY, d, recv ? 4 : 3, STARPU_VALUE, &a, sizeof a,
                STARPU_EXECUTE_ON_WORKER, c->worker);
}

void sw_nccl_ring_shift(sw_nccl *c, sw_group g, sw_tensor *send, sw_tensor *recv, int shift)
{
    check_dtype(send, "sw_nccl_ring_shift", 0);
    check_dtype(recv, "sw_nccl_ring_shift", 0);
    sw_nccl_ring_shift_handles(c, g, sw_tensor_whole(send, send == recv ? STARPU_RW : STARPU_R),
                               send == recv ? NULL : sw_tensor_whole(recv, STARPU_W), shift);
}

void sw_nccl_alltoall_parts(sw_nccl *c, sw_group g, int n, starpu_data_handle_t *send, starpu_data_handle_t *recv)
{
    const char *what = "sw_nccl_alltoall_parts";
    const int p = group_size(c, g, what), np = n * p;
    if (n < 1) sw_fail(__FILE__, __LINE__, "sw_nccl_alltoall_parts: n must be positive", -EINVAL);
    if (p == 1) {
        for (int i = 0; i < n; i++) sw_copy(recv[i], send[i]);
        return;
    }
    struct starpu_data_descr *d = malloc(sizeof *d * (size_t)(2 * np + 2));
    if (!d) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
    struct nccl_args a = args_of(c, g, SW_F32);
    a.nparts = n;
    for (int k = 0; k < np; k++) {
        check_f32_handle(send[k], what);
        check_f32_handle(recv[k], what);
        d[k] = (struct starpu_data_descr){send[k], STARPU_R};
        d[np + k] = (struct starpu_data_descr){recv[k], STARPU_W};
        if (k / n != a.me) c->sent[g] += handle_bytes(send[k]);
    }
    d[2 * np] = (struct starpu_data_descr){c->token[g], STARPU_RW};
    d[2 * np + 1] = (struct starpu_data_descr){c->order, STARPU_RW};
    NCCL_INSERT(&alltoall_parts_cl, STARPU_DATA_MODE_ARRAY, d, 2 * np + 2, STARPU_VALUE, &a, sizeof a,
                STARPU_EXECUTE_ON_WORKER, c->worker);
    free(d);
}
