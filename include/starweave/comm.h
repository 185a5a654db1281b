/** @file
 * Collectives as task-graph nodes (CPU backend on StarPU-MPI; GPU builds
 * can switch a context to NCCL with sw_comm_set_backend).
 *
 * Every collective only submits. Up to SW_COMM_MPI_BYTES (where MPI runs
 * at MPI_THREAD_MULTIPLE) a collective is one task that starts MPI's
 * non-blocking collective and ends when it completes (comm_nbc.c; counter
 * SW_COUNT_MPI_COLLECTIVE). Above that, and for broadcasts and ring shifts,
 * it is StarPU-MPI detached point-to-point requests on data handles (the
 * tensor's tiles, or temporaries registered with home node -1 and released
 * with starpu_data_unregister_submit) plus reduction tasks; StarPU orders
 * the requests after the tasks that produce their data and the tasks that
 * use the results after the requests, so compute on one chunk may start as
 * soon as that chunk is there (counter SW_COUNT_P2P_SEND).
 *
 * Tags are deterministic: each group of the mesh has a sequence counter in
 * the sw_comm context, advanced by the same amount by the same calls on
 * every rank, and wrapped below the communicator's MPI_TAG_UB. Hence the
 * rule: collectives on one group are called in the same order on every
 * member of that group (different groups may interleave freely), and one
 * mesh is used through a single sw_comm. Submission is single-threaded
 * (one thread submits through a given sw_comm).
 *
 * Tensors are fp32 (SW_F32); shapes are written [rows, cols] (the tensor's
 * matrix view). */
#ifndef STARWEAVE_COMM_H
#define STARWEAVE_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "starweave/mesh.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The reduction of a collective. */
typedef enum {
    SW_SUM = 0, /**< element-wise sum */
    SW_MAX = 1  /**< element-wise maximum */
} sw_reduce_op;

/** Collective algorithm. RING: the all-reduce as reduce-scatter then
 * all-gather around the group, 2(p-1) steps on p row (or column) chunks,
 * bandwidth-optimal, in StarPU-MPI requests and reduction tasks.
 * DIRECT: every rank sends its whole buffer to every other rank and one
 * task reduces the p buffers in rank order, one step. MPI: one task starts
 * MPI's own non-blocking collective (MPI_Iallreduce, MPI_Iallgatherv,
 * MPI_Ireduce_scatter) and the graph goes on without holding a worker; the
 * task ends when idle workers see the request complete (needs
 * MPI_THREAD_MULTIPLE; all-reduce, all-gather, reduce-scatter, and the
 * all-to-all of row blocks).
 * AUTO: MPI up to SW_COMM_MPI_BYTES where available (its latency is MPI's
 * plus a task's; the StarPU-MPI decomposition hands every message between
 * StarPU-MPI's thread and a worker, which costs an OS time slice where
 * ranks share cores: BENCHMARKS.md, "Collective latency"); above it, for
 * the all-reduce, RING from the small-message threshold up and DIRECT
 * below (at p = 2 at least 4 MiB), and the decomposition in chunks for the
 * others (so the chunks' consumers start as each arrives). RING and DIRECT
 * also choose the decomposition for the all-gather and reduce-scatter. A
 * tensor with fewer rows and fewer columns than the group size is never
 * reduced by RING. */
typedef enum {
    SW_ALGO_AUTO = 0,  /**< MPI, RING or DIRECT by size (above) */
    SW_ALGO_RING = 1,  /**< reduce-scatter then all-gather around the group */
    SW_ALGO_DIRECT = 2, /**< every rank's whole buffer to every other rank */
    SW_ALGO_MPI = 3    /**< MPI's own non-blocking collective in one task */
} sw_comm_algo;

/** Default AUTO threshold (bytes): all-reduces below it use DIRECT. */
#define SW_COMM_SMALL_BYTES ((size_t)64 * 1024)
/** AUTO: collectives up to this size (the full tensor's bytes) run in MPI. */
#define SW_COMM_MPI_BYTES ((size_t)4 * 1024 * 1024)

/** A collectives context (opaque): sw_comm_create, sw_comm_destroy. */
typedef struct sw_comm sw_comm;

/** Context for the collectives on the groups of m (m must outlive it).
 * Collective over the world: call it on every rank, in the same order
 * relative to other contexts (it duplicates each group's communicator for
 * the collectives MPI runs). Never returns NULL. */
sw_comm *sw_comm_create(const sw_mesh *m);
/** A context for the models only (sw_comm_bytes and the layers' traffic
 * models) on a mesh of sw_mesh_virtual: no communicator, nothing
 * submitted through it; its byte counts are those sw_comm_create's context
 * would give (whether MPI runs a collective is sw_nbc_available's, as
 * there; before MPI is initialised, as with MPI_THREAD_MULTIPLE -- only
 * some collectives' byte counts depend on it, never the memory model).
 * Local; free with sw_comm_destroy. */
sw_comm *sw_comm_virtual(const sw_mesh *m);
/** Frees the context, on every rank: waits for the collectives MPI runs and
 * an NCCL backend's (submitted StarPU-MPI requests do not refer to it).
 * NULL: no-op. */
void sw_comm_destroy(sw_comm *c);
/** Backend of c's collectives (sw_comm_set_backend). */
typedef enum {
    /** NCCL where every rank can use it and the world has two ranks or more, else MPI */
    SW_BACKEND_AUTO = 0,
    /** StarPU-MPI requests plus reduction tasks (the default; data in main RAM) */
    SW_BACKEND_MPI = 1,
    /** GPU builds (configure --enable-cuda): one CUDA task per collective
     * issuing the NCCL call on a CUDA worker's stream (comm_nccl.h), for
     * data that lives on GPUs; every rank needs a CUDA worker and a GPU of
     * its own */
    SW_BACKEND_NCCL = 2
} sw_comm_backend;
/** Backend of c's collectives. MPI: StarPU-MPI requests plus reduction tasks
 * (the default; data in main RAM). NCCL (GPU builds, configure
 * --enable-cuda): one CUDA task per collective issuing the NCCL call on a
 * CUDA worker's stream (comm_nccl.h), for data that lives on GPUs; every
 * rank needs a CUDA worker and a GPU of its own. AUTO: NCCL where every
 * rank can use it and the world has two ranks or more, else MPI.
 * Collective over the mesh's world: call it on every rank, once, before any
 * collective of c. Returns the backend in use; where NCCL was asked for and
 * some rank cannot use it, returns -1 on every rank with the reason (that
 * of the lowest such rank, or "built without the GPU backend") in msg (n
 * bytes) and c stays on MPI. */
int sw_comm_set_backend(sw_comm *c, sw_comm_backend b, char *msg, size_t n);
/** "mpi" or "nccl": the backend c's collectives use now. */
const char *sw_comm_backend_name(const sw_comm *c);
/** Algorithm choice for sw_allreduce: must be the same on every rank of a
 * group. */
void sw_comm_set_algo(sw_comm *c, sw_comm_algo algo);
/** AUTO's threshold (SW_COMM_SMALL_BYTES by default): must be the same on
 * every rank of a group. */
void sw_comm_set_small_bytes(sw_comm *c, size_t bytes);
/** The mesh c was created on. */
const sw_mesh *sw_comm_mesh(const sw_comm *c);
/** Tag bookkeeping, for tests: set the bound under which g's tags wrap (the
 * communicator's MPI_TAG_UB unless lowered; a value above it is clamped)
 * and restart g's tags at 0 -- on every member, with no collective of g in
 * flight. */
void sw_comm_set_tag_ub(sw_comm *c, sw_group g, int64_t ub);
/** Tag bookkeeping, for tests: the first tag of g's next collective. */
int64_t sw_comm_next_tag(const sw_comm *c, sw_group g);
/** Traffic of this rank on g since the context was created: the bytes it
 * sent, counted where they leave (the buffers of the point-to-point sends
 * its collectives submitted; for a collective MPI runs, the bytes its MPI
 * call was handed for other ranks, counted when the task makes the call;
 * NCCL's calls by their arguments), and the number of collectives (those
 * that communicate: groups of 2 or more). Exact integers in a double. */
void sw_comm_traffic(const sw_comm *c, sw_group g, double *sent_bytes, long *calls);
/** The kinds of collective of the traffic model (sw_comm_bytes). */
typedef enum {
    SW_COLL_ALLREDUCE, /**< sw_allreduce */
    SW_COLL_ALLGATHER, /**< sw_allgather, sw_allgather_inplace */
    SW_COLL_REDUCE_SCATTER, /**< sw_reduce_scatter */
    SW_COLL_ALLTOALL, /**< sw_alltoall */
    SW_COLL_RING_SHIFT, /**< sw_ring_shift (by 1) */
    SW_COLL_SEND       /**< sw_send */
} sw_coll;
/** The traffic model: the bytes this rank sends on g for one collective of
 * `kind` over an fp32 tensor [rows, cols] -- the local tensor for an
 * all-reduce, an all-to-all and a ring shift (by 1), the full (gathered)
 * one for an all-gather and a reduce-scatter -- as sw_comm_traffic will
 * count it, with the algorithm c would run: a direct all-reduce sends
 * (p-1) N, a ring all-reduce 2 N less this rank's chunk and its right
 * neighbour's, an all-gather N less its right neighbour's chunk, a
 * reduce-scatter N less its own, an all-to-all N less its own part. A
 * collective MPI runs (its algorithm is MPI's choice) is counted as the
 * bytes its call hands MPI for other ranks: the whole buffer of an
 * all-reduce, its own block of an all-gather, every block but its own of a
 * reduce-scatter or an all-to-all. 0 for c NULL or a group of one.
 * This is a model computed from shapes; sw_comm_traffic's count is not:
 * it adds up the send requests' buffers and the MPI calls' arguments. */
double sw_comm_bytes(const sw_comm *c, sw_group g, sw_coll kind, int64_t rows, int64_t cols);
/** A traffic model's sum: bytes this rank sends per training step on each
 * group, forward and backward apart (full recomputation sends a block's
 * forward traffic again in backward). The layers, the registry and the
 * block policies each add their share (layers.h, params.h, blocks.h). */
typedef struct sw_traffic {
    ///@{
    double forward[SW_GROUP_COUNT], backward[SW_GROUP_COUNT]; /**< bytes per group (sw_group), forward and backward */
    ///@}
} sw_traffic;

/** What this rank sent on every group (sw_comm_traffic, counted where the
 * bytes leave) beside `model` (summed from the layers' models) times
 * `steps`, one line per group, groups without traffic included:
 *   traffic: rank R tp group: sent S bytes in C collectives over N steps, model M
 * Both are exact byte counts (M printed with one decimal: a fraction would
 * be a model error). Local: call it on every rank; it waits for every
 * submitted task first. Returns the number of groups where S != M. */
int sw_comm_traffic_report(const sw_comm *c, const sw_traffic *model, int steps, FILE *out);

/** Blocking, on the host, collective over group g (every member calls it,
 * in the same order as its other blocking collectives): v[0 .. n) becomes
 * the sum over the group's members -- integers, so every member gets the
 * same sums. For decisions every rank must take alike between steps (the
 * pipeline's measured costs, sw_pipeline_replan); not a step's traffic,
 * not counted. */
void sw_comm_sum_host(const sw_comm *c, sw_group g, long long *v, int n);

/** Blocking, on the host, collective over group g (every member calls it,
 * between steps): the point-to-point hop from each member to the next
 * (group rank + 1) -- half the shortest of `rounds` round trips of `bytes`
 * bytes, MPI's own on a duplicate of the group's communicator (StarPU's
 * clock: in a simulation SimGrid's). Each member first answers the
 * previous one's pings, then pings the next, so no round trip waits on
 * another's. Returns microseconds (0 on the last member). Like
 * sw_comm_sum_host: not a step's traffic, not counted. */
double sw_comm_hop_host(const sw_comm *c, sw_group g, size_t bytes, int rounds);

/** t[rows, cols] (RW) becomes op over the group of every member's t; every
 * member gets bit-identical values. Same shape on every member. */
void sw_allreduce(sw_comm *c, sw_group g, sw_tensor *t, sw_reduce_op op);

/** Along rows (dim 0 of the matrix view), with N rows in all and group size p:
 * member i holds rows [first_i, first_i + n_i) where sw_tile_range(N, p, i,
 * &first_i, &n_i) (StarPU's block split: sizes differ by at most one), so
 * N >= p.
 * all-gather: in[n_me, cols] (R) -> out[N, cols] (W), the members' in
 * stacked in rank order. */
void sw_allgather(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out);
/** all-gather in place: t[N, cols] (RW) holds this member's rows
 * [first_me, first_me + n_me) on entry and every member's on return (ZeRO-1's
 * parameter gather after each member updated its rows). */
void sw_allgather_inplace(sw_comm *c, sw_group g, sw_tensor *t);
/** reduce-scatter: in[N, cols] (R) -> out[n_me, cols] (W) = op over the
 * group of rows [first_me, first_me + n_me) of every member's in. */
void sw_reduce_scatter(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out, sw_reduce_op op);

/** t (same shape everywhere) takes the value of root's t (root: rank in g). */
void sw_broadcast(sw_comm *c, sw_group g, sw_tensor *t, int root);

/** Ring shift (Ring attention's K/V rotation): send goes to the member
 * (me + shift) mod p of g and recv (W) receives from (me - shift) mod p.
 * send and recv have the same shape on every member; send == recv is
 * allowed (the outgoing value is copied to a temporary first). A shift
 * that is 0 mod p, or p == 1, copies send into recv locally (a task). One
 * tag per call. */
void sw_ring_shift(sw_comm *c, sw_group g, sw_tensor *send, sw_tensor *recv, int shift);
/** The same on handles of the same shape (tiles, or column blocks of a
 * wider tensor); recv NULL: in place on send. */
void sw_ring_shift_handles(sw_comm *c, sw_group g, starpu_data_handle_t send, starpu_data_handle_t recv, int shift);

/** Point-to-point, e.g. between pipeline stages: t [rows, cols] (R) goes to
 * member `dest` of g (not this rank), as one StarPU-MPI request that
 * starts when t's earlier writers are done. The messages between two
 * members are matched in call order (the j-th sw_send from a to b with the
 * j-th sw_recv at b from a), on a communicator of their own, so only the
 * two members call. Counted as one collective of g and by
 * SW_COUNT_SEND; the traffic model is SW_COLL_SEND (the tensor's bytes). */
void sw_send(sw_comm *c, sw_group g, sw_tensor *t, int dest);
/** t (W; the shape sw_send was given) receives the matching sw_send of
 * member src of g, after t's earlier readers and writers. */
void sw_recv(sw_comm *c, sw_group g, sw_tensor *t, int src);
/** Point-to-point channels between two members. */
enum {
    SW_P2P_CHANNELS = 64,      /**< channels 0 .. SW_P2P_CHANNELS - 1 (sw_send_on) */
    SW_P2P_MODEL_CHANNELS = 32 /**< a model's own: 0 .. 31; 32 .. 63 are the pipeline driver's (pipeline.h) */
};
/** sw_send on channel `channel`: the messages of each channel are matched
 * in call order on their own, never with another channel's (sw_send is
 * channel 0). The pipeline driver sends on channels SW_P2P_MODEL_CHANNELS
 * and up over the pp group (each chunk's activations and gradients on a
 * channel of their own between a pair of neighbours, so the two ends need
 * only agree on the order within a chunk and direction): a model's own
 * sends on that group use channels below SW_P2P_MODEL_CHANNELS and never
 * shift the driver's matching. */
void sw_send_on(sw_comm *c, sw_group g, int channel, sw_tensor *t, int dest);
/** sw_recv on channel `channel` (see sw_send_on). */
void sw_recv_on(sw_comm *c, sw_group g, int channel, sw_tensor *t, int src);

/** All-to-all on the matrix view, dims 0 (rows) and 1 (cols): in (R) is split
 * along scatter_dim into p equal parts, part j goes to member j, and the p
 * parts received are concatenated in rank order along gather_dim in out (W).
 * With in [R, C] and scatter cols: parts [R, C/p]; scatter rows: [R/p, C];
 * out is [p * part rows, part cols] for gather rows and [part rows, p * part
 * cols] for gather cols. The Ulysses exchange is [s/p, h] -> [s, h/p]
 * (scatter cols, gather rows) and back [s, h/p] -> [s/p, h] (scatter rows,
 * gather cols). The split dim of in must be divisible by p (abort with a
 * message otherwise); in != out. The parts are tiles of in and out (column
 * tiles are strided), the local part is copied by a task. One tag per call. */
void sw_alltoall(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out, int scatter_dim, int gather_dim);
/** All-to-all on handles, n parts per member: send[j*n + i] (R) goes to
 * member j and is received into member j's recv[me*n + i] (W); send[me*n + i]
 * is copied into recv[me*n + i] by a task. Parts from and to one member have
 * the same shapes (e.g. Ulysses' q, k and v column blocks as three parts).
 * n tags per call. */
void sw_alltoall_parts(sw_comm *c, sw_group g, int n, starpu_data_handle_t *send, starpu_data_handle_t *recv);

#ifdef __cplusplus
}
#endif
#endif
