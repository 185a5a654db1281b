/** @file
 * Collectives as task-graph nodes, NCCL backend (GPU builds: configure
 * --enable-cuda; this header is installed only there).
 *
 * Same semantics, shapes and calling rule as comm.h (see there): every
 * member of a group calls the group's collectives in the same order; each
 * call only submits. Each collective is one task whose CUDA function
 * issues the NCCL call (ncclAllReduce, ncclAllGather, ...) on the StarPU
 * CUDA worker's stream (STARPU_CUDA_ASYNC); StarPU moves the data to that
 * GPU first, and the tasks that read the result run after the collective.
 *
 * One NCCL communicator per mesh group of two or more ranks, created by
 * sw_nccl_create on the rank's first CUDA worker (the unique id is broadcast
 * over the group's MPI communicator, sw_mesh_comm); groups of one rank need
 * none (a collective there is a local copy or nothing). NCCL wants one
 * device per rank and communicator: with several ranks on a node, sw_init
 * gives each rank its own GPU (sw_options.ncuda).
 *
 * Ordering: NCCL matches the calls on a communicator by order, so every
 * collective task accesses its communicator's token handle STARPU_RW, which
 * makes StarPU run them in submission order on every rank. Every task also
 * accesses one token of the whole sw_nccl STARPU_RW: the NCCL kernels of all
 * communicators run on the one stream of the chosen CUDA worker, so two
 * ranks that ran collectives of different communicators in different orders
 * would each wait inside a kernel for the other; in submission order (the
 * same program order on every rank) they cannot. NCCL kernels are
 * serialised on that stream anyway, so this costs no concurrency.
 *
 * Tensors are fp32 (SW_F32); sw_nccl_allreduce and sw_nccl_broadcast also
 * take SW_I32 (sum). With two ranks every member gets bit-identical sums;
 * with more, NCCL reduces in an order of its own, the same on every member
 * (not the CPU backend's order). */
#ifndef STARWEAVE_COMM_NCCL_H
#define STARWEAVE_COMM_NCCL_H

#include <stddef.h>

#include "starweave/comm.h"
#include "starweave/mesh.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An NCCL collectives context (opaque): sw_nccl_create, sw_nccl_destroy. */
typedef struct sw_nccl sw_nccl;

/** Local check, no communication: 0 if this rank can use NCCL (GPU build, at
 * least one CUDA worker, and a GPU for each rank of the node), else -1 with
 * the reason in msg (n bytes, may
 * be NULL/0). Ranks may disagree (a rank without GPU): agree on the
 * verdict (e.g. MPI_Allreduce) before sw_nccl_create. */
int sw_nccl_check(char *msg, size_t n);

/** Collective over every group of m: creates the NCCL communicators, in the
 * same group order on every rank (m must outlive the context). Fails with a
 * message on every rank where sw_nccl_check fails. Never returns NULL. */
sw_nccl *sw_nccl_create(const sw_mesh *m);
/** Waits for the context's collectives, then destroys the communicators.
 * Call on every rank, before sw_mesh_destroy and sw_shutdown. NULL: no-op. */
void sw_nccl_destroy(sw_nccl *c);
/** The mesh c was created on. */
const sw_mesh *sw_nccl_mesh(const sw_nccl *c);
/** StarPU id of the CUDA worker that runs this rank's collectives. */
int sw_nccl_worker(const sw_nccl *c);
/** Collectives this rank has submitted on g (groups of two or more). */
long sw_nccl_calls(const sw_nccl *c, sw_group g);

/** As sw_allreduce: t (RW) becomes op over the group of every member's t. */
void sw_nccl_allreduce(sw_nccl *c, sw_group g, sw_tensor *t, sw_reduce_op op);
/** As sw_allgather: in[n_me, cols] (R) -> out[N, cols] (W), rank order, row
 * counts as sw_tile_range(N, p, i) (ncclAllGather when they are equal,
 * else one ncclBroadcast per member in a group call). */
void sw_nccl_allgather(sw_nccl *c, sw_group g, sw_tensor *in, sw_tensor *out);
/** As sw_allgather_inplace: t[N, cols] (RW). */
void sw_nccl_allgather_inplace(sw_nccl *c, sw_group g, sw_tensor *t);
/** As sw_reduce_scatter: in[N, cols] (R) -> out[n_me, cols] (W)
 * (ncclReduceScatter when the row counts are equal, else ncclReduce per
 * member in a group call). */
void sw_nccl_reduce_scatter(sw_nccl *c, sw_group g, sw_tensor *in, sw_tensor *out, sw_reduce_op op);
/** As sw_broadcast: t (RW) takes root's value (root: rank in g). */
void sw_nccl_broadcast(sw_nccl *c, sw_group g, sw_tensor *t, int root);
/** As sw_alltoall (dims 0 = rows, 1 = cols; the split dim divisible by p):
 * ncclSend/ncclRecv in a group call; column parts are packed into and
 * unpacked from contiguous buffers with cudaMemcpy2DAsync. */
void sw_nccl_alltoall(sw_nccl *c, sw_group g, sw_tensor *in, sw_tensor *out, int scatter_dim, int gather_dim);
/** As sw_ring_shift: an ncclSend to (me + shift) mod p and an ncclRecv
 * from (me - shift) mod p in one group call; strided tiles travel through
 * staging buffers. */
void sw_nccl_ring_shift(sw_nccl *c, sw_group g, sw_tensor *send, sw_tensor *recv, int shift);
/** As sw_ring_shift_handles (recv NULL: in place): an ncclSend to
 * (me + shift) mod p and an ncclRecv from (me - shift) mod p in one group
 * call; strided tiles travel through staging buffers. */
void sw_nccl_ring_shift_handles(sw_nccl *c, sw_group g, starpu_data_handle_t send, starpu_data_handle_t recv,
                                int shift);
/** As sw_alltoall_parts: send[j*n + i] (R) to member j's recv[me*n + i] (W);
 * one task, its sends and receives in one group call. */
void sw_nccl_alltoall_parts(sw_nccl *c, sw_group g, int n, starpu_data_handle_t *send, starpu_data_handle_t *recv);
/** Payload bytes this rank's collectives on g sent, counted as the
 * point-to-point schedule of the CPU backend's algorithm would send them
 * (ring all-reduce 2(p-1)/p of the buffer, ring all-gather/reduce-scatter
 * the chunks forwarded, broadcast (p-1) buffers from the root, all-to-all
 * and ring shift the parts sent): NCCL picks its own algorithm and
 * protocol, so this is the algorithmic volume, not bytes on the wire. */
double sw_nccl_sent_bytes(const sw_nccl *c, sw_group g);

/** From now on the collectives of c (comm.h) are those of n (same mesh):
 * graph builders written against comm.h then run on NCCL unchanged, and
 * sw_comm_traffic reports n's counts. NULL goes back to StarPU-MPI. Call
 * on every rank alike, between collectives. */
void sw_comm_use_nccl(sw_comm *c, sw_nccl *n);

#ifdef __cplusplus
}
#endif
#endif
