/* The communication context (communicators, tags, traffic counts), the
 * point-to-point requests every collective is made of, and the broadcast,
 * ring shift and send/receive (see comm.h; collectives.c: the others). */
#include "starweave/comm.h"
#include "core/sim_smpi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <starpu_mpi.h>

#include "codelet_util.h"
#include "comm_nbc.h"
#include "core/p2p.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"
#include "comm_internal.h"

#ifdef STARWEAVE_USE_CUDA
void sw_comm_use_nccl(sw_comm *c, sw_nccl *n)
{
    if (c->nccl_owned) sw_nccl_destroy(c->nccl);
    c->nccl = n;
    c->nccl_owned = 0;
}
#endif

sw_comm *sw_comm_create(const sw_mesh *m)
{
    sw_comm *c = calloc(1, sizeof *c);
    if (!c) sw_fail(__FILE__, __LINE__, "calloc(sw_comm)", -ENOMEM);
    c->mesh = m;
    c->algo = SW_ALGO_AUTO;
    c->small_bytes = SW_COMM_SMALL_BYTES;
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        MPI_Comm comm = sw_mesh_comm(m, (sw_group)g);
        int *ub = NULL, flag = 0;
        SW_CHECK(MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag));
        /* Open MPI caches MPI_TAG_UB on MPI_COMM_WORLD only, not on split
         * communicators; the bound is the same for every communicator */
        if (!flag || !ub) SW_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
        /* the standard guarantees at least 32767 */
        c->mpi_tag_ub[g] = c->tag_ub[g] = (flag && ub) ? *ub : 32767;
        c->next_tag[g] = 0;
        c->nbc_comm[g] = c->p2p_comm[g] = c->coll_comm[g] = MPI_COMM_NULL;
        if (sw_mesh_size(m, (sw_group)g) > 1) {
            SW_CHECK(MPI_Comm_dup(comm, &c->p2p_comm[g]));
            sw_sim_comm_made(c->p2p_comm[g]); /* simulated: StarPU-MPI's thread sends there */
            SW_CHECK(MPI_Comm_dup(comm, &c->coll_comm[g]));
            sw_sim_comm_made(c->coll_comm[g]);
            size_t counts = (size_t)sw_mesh_size(m, (sw_group)g) * SW_P2P_CHANNELS;
            c->p2p_sent[g] = calloc(counts, sizeof(int64_t));
            c->p2p_received[g] = calloc(counts, sizeof(int64_t));
            if (!c->p2p_sent[g] || !c->p2p_received[g]) sw_fail(__FILE__, __LINE__, "calloc(p2p counts)", -ENOMEM);
        }
        if (sw_nbc_available() && sw_mesh_size(m, (sw_group)g) > 1) {
            SW_CHECK(MPI_Comm_dup(comm, &c->nbc_comm[g]));
#ifdef STARPU_SIMGRID
            sw_nbc_sim_serve(c->nbc_comm[g]);
#endif
            starpu_void_data_register(&c->token[g]);
        }
    }
    sw_nbc_attach();
    return c;
}

sw_comm *sw_comm_virtual(const sw_mesh *m)
{
    sw_comm *c = calloc(1, sizeof *c);
    if (!c) sw_fail(__FILE__, __LINE__, "calloc(sw_comm)", -ENOMEM);
    c->mesh = m;
    c->algo = SW_ALGO_AUTO;
    c->small_bytes = SW_COMM_SMALL_BYTES;
    for (int g = 0; g < SW_GROUP_COUNT; g++) c->nbc_comm[g] = c->p2p_comm[g] = MPI_COMM_NULL;
    c->is_virtual = 1;
    int inited = 0;
    MPI_Initialized(&inited);
    c->virtual_nbc = inited ? sw_nbc_available() : 1; /* before MPI: as a run with MPI_THREAD_MULTIPLE (its memory
                                                        * model is the same either way; only bytes differ) */
    return c;
}

void sw_comm_destroy(sw_comm *c)
{
    if (!c) return;
    if (c->is_virtual) { /* sw_comm_virtual's: nothing but itself */
        free(c);
        return;
    }
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        free(c->p2p_sent[g]);
        free(c->p2p_received[g]);
        if (c->p2p_comm[g] != MPI_COMM_NULL) {
            /* a detached request's communicator must outlive it */
            starpu_mpi_wait_for_all(c->p2p_comm[g]);
            starpu_mpi_wait_for_all(c->coll_comm[g]);
            SW_CHECK(MPI_Comm_free(&c->p2p_comm[g]));
            SW_CHECK(MPI_Comm_free(&c->coll_comm[g]));
        }
        if (!c->token[g]) continue;
        starpu_data_unregister(c->token[g]); /* waits for the group's collectives */
#ifdef STARPU_SIMGRID
        sw_nbc_sim_stop(c->nbc_comm[g]);
#endif
        SW_CHECK(MPI_Comm_free(&c->nbc_comm[g]));
    }
    sw_nbc_detach();
#ifdef STARWEAVE_USE_CUDA
    if (c->nccl_owned) sw_nccl_destroy(c->nccl);
#endif
    free(c);
}

const char *sw_comm_backend_name(const sw_comm *c) { return c->nccl ? "nccl" : "mpi"; }

int sw_comm_set_backend(sw_comm *c, sw_comm_backend b, char *msg, size_t n)
{
    char dummy[1];
    if (!msg || n == 0) msg = dummy, n = sizeof dummy;
    msg[0] = 0;
    if (b == SW_BACKEND_MPI) return SW_BACKEND_MPI;
#ifdef STARWEAVE_USE_CUDA
    /* agree on the verdict: the lowest rank that cannot use NCCL tells why */
    MPI_Comm world = sw_mesh_comm(c->mesh, SW_GROUP_WORLD);
    int me, size;
    SW_CHECK(MPI_Comm_rank(world, &me));
    SW_CHECK(MPI_Comm_size(world, &size));
    char why[256] = "";
    int mine = sw_nccl_check(why, sizeof why) != 0 ? me : size, first;
    SW_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world));
    if (first < size) {
        SW_CHECK(MPI_Bcast(why, (int)sizeof why, MPI_CHAR, first, world));
        if (b == SW_BACKEND_AUTO) return SW_BACKEND_MPI;
        snprintf(msg, n, "rank %d cannot use NCCL: %s", first, why);
        return -1;
    }
    if (b == SW_BACKEND_AUTO && size < 2) return SW_BACKEND_MPI;
    c->nccl = sw_nccl_create(c->mesh);
    c->nccl_owned = 1;
    return SW_BACKEND_NCCL;
#else
    (void)c;
    if (b == SW_BACKEND_AUTO) return SW_BACKEND_MPI;
    snprintf(msg, n, "built without the GPU backend (configure --enable-cuda)");
    return -1;
#endif
}
void sw_comm_set_algo(sw_comm *c, sw_comm_algo algo) { c->algo = algo; }
void sw_comm_set_small_bytes(sw_comm *c, size_t bytes) { c->small_bytes = bytes; }
const sw_mesh *sw_comm_mesh(const sw_comm *c) { return c->mesh; }

void sw_comm_set_tag_ub(sw_comm *c, sw_group g, int64_t ub)
{
    if ((unsigned)g >= SW_GROUP_COUNT || ub < 0) sw_fail(__FILE__, __LINE__, "sw_comm_set_tag_ub", -EINVAL);
    c->tag_ub[g] = ub < c->mpi_tag_ub[g] ? ub : c->mpi_tag_ub[g];
    c->next_tag[g] = 0;
}

void sw_comm_traffic(const sw_comm *c, sw_group g, double *sent_bytes, long *calls)
{
    *sent_bytes = (unsigned)g < SW_GROUP_COUNT ? (double)__atomic_load_n(&c->sent_bytes[g], __ATOMIC_RELAXED) : 0;
    *calls = (unsigned)g < SW_GROUP_COUNT ? c->calls[g] : 0;
#ifdef STARWEAVE_USE_CUDA
    if (c->nccl) {
        *sent_bytes += sw_nccl_sent_bytes(c->nccl, g);
        *calls += sw_nccl_calls(c->nccl, g);
    }
#endif
}

void sw_comm_sum_host(const sw_comm *c, sw_group g, long long *v, int n)
{
    SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_LONG_LONG, MPI_SUM, sw_mesh_comm(c->mesh, g)));
}

double sw_comm_hop_host(const sw_comm *c, sw_group g, size_t bytes, int rounds)
{
    MPI_Comm dup; /* a context of its own: no message of StarPU-MPI's (same communicator) can match these */
    SW_CHECK(MPI_Comm_dup(sw_mesh_comm(c->mesh, g), &dup));
    int me, size;
    SW_CHECK(MPI_Comm_rank(dup, &me));
    SW_CHECK(MPI_Comm_size(dup, &size));
    char *buf = calloc(bytes ? bytes : 1, 1);
    if (!buf) sw_fail(__FILE__, __LINE__, "calloc(hop buffer)", -ENOMEM);
    double best = -1;
    for (int i = 0; i < rounds && me > 0; i++) { /* the previous member's pings, answered at once */
        SW_CHECK(MPI_Recv(buf, (int)bytes, MPI_BYTE, me - 1, 0, dup, MPI_STATUS_IGNORE));
        SW_CHECK(MPI_Send(buf, (int)bytes, MPI_BYTE, me - 1, 1, dup));
    }
    for (int i = 0; i < rounds && me < size - 1; i++) { /* then this member's own, to the next */
        const double t0 = starpu_timing_now();
        SW_CHECK(MPI_Send(buf, (int)bytes, MPI_BYTE, me + 1, 0, dup));
        SW_CHECK(MPI_Recv(buf, (int)bytes, MPI_BYTE, me + 1, 1, dup, MPI_STATUS_IGNORE));
        const double half = (starpu_timing_now() - t0) / 2;
        if (best < 0 || half < best) best = half;
    }
    free(buf);
    SW_CHECK(MPI_Comm_free(&dup));
    return best > 0 ? best : 0;
}

int sw_comm_traffic_report(const sw_comm *c, const sw_traffic *model, int steps, FILE *out)
{
    int bad = 0;
    starpu_task_wait_for_all(); /* a collective MPI runs is counted when its task runs */
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        double sent = 0, expect = (model->forward[g] + model->backward[g]) * steps;
        long calls = 0;
        if (c) sw_comm_traffic(c, (sw_group)g, &sent, &calls);
        bad += sent != expect;
        fprintf(out, "traffic: rank %d %s group: sent %.0f bytes in %ld collectives over %d steps, model %.1f\n",
                sw_rank(), sw_group_name((sw_group)g), sent, calls, steps, expect);
    }
    fflush(out);
    return bad;
}

int64_t sw_comm_next_tag(const sw_comm *c, sw_group g)
{
    return (unsigned)g < SW_GROUP_COUNT ? c->next_tag[g] : -1;
}

/* n consecutive tags for one collective on g; wraps to 0 before passing the
 * upper bound. Every member advances the same way, so tags match; a wrapped
 * tag is reused only after 2^31 (or TAG_UB) later tags, long after its
 * message was received. */
int64_t sw_comm_take_tags(sw_comm *c, sw_group g, int64_t n)
{
    c->calls[g]++;
    if (n > c->tag_ub[g] + 1) sw_fail(__FILE__, __LINE__, "collective needs more tags than MPI_TAG_UB", -ERANGE);
    if (c->next_tag[g] + n - 1 > c->tag_ub[g]) c->next_tag[g] = 0;
    int64_t base = c->next_tag[g];
    c->next_tag[g] += n;
    c->op_base = base;
    return base;
}

/* ---------------- helpers ---------------- */

void sw_comm_check_f32(const sw_tensor *t, const char *what)
{
    if (t->dtype != SW_F32) {
        fprintf(stderr, "starweave: %s: tensor %s is not fp32\n", what, t->name);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
}

/* Temporary with StarPU-allocated storage, shaped like matrix handle h. */
starpu_data_handle_t sw_comm_temp_like(starpu_data_handle_t h)
{
    starpu_data_handle_t t;
    uint32_t nx = starpu_matrix_get_nx(h), ny = starpu_matrix_get_ny(h);
    starpu_matrix_data_register(&t, -1, 0, nx, nx, ny, sizeof(float));
    return t;
}

/* detached requests submitted and not yet completed: sw_p2p_pending (core/p2p.h) */

/* a detached request's completion: the count, then its trace record (or NULL) */
static void p2p_done(void *rec)
{
    __atomic_sub_fetch(&sw_p2p_pending, 1, __ATOMIC_RELAXED);
    if (rec) sw_trace_comm_done(rec);
}

/* every send of a collective on g goes through here: it counts the bytes */
void sw_comm_isend(sw_comm *c, sw_group g, starpu_data_handle_t h, int dest, int64_t tag, MPI_Comm comm)
{
    const int64_t bytes = (int64_t)starpu_matrix_get_nx(h) * starpu_matrix_get_ny(h) * starpu_matrix_get_elemsize(h);
    __atomic_add_fetch(&c->sent_bytes[g], bytes, __ATOMIC_RELAXED);
    sw_counter_add(SW_COUNT_P2P_SEND, 1);
    void *tr = sw_trace_comm_begin(c->op, sw_group_name(g), (int)(tag - c->op_base), comm, dest, 1, tag, h);
    __atomic_add_fetch(&sw_p2p_pending, 1, __ATOMIC_RELAXED);
    SW_CHECK(starpu_mpi_isend_detached(h, dest, (starpu_mpi_tag_t)tag, comm, p2p_done, tr));
}

static void gate_cpu(void *buffers[], void *cl_arg) { (void)buffers; (void)cl_arg; }
static struct starpu_codelet gate_cl = {
    .flags = STARPU_CODELET_SIMGRID_EXECUTE, /* simulated: run (empty), no model to calibrate */
    .cpu_funcs = {gate_cpu},
    .cpu_funcs_name = {"gate_cpu"},
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .name = "comm_gate",
};

/* Receive into h once `after` is ready (NULL: at once). StarPU-MPI's
 * progression thread polls without sleeping while any receive is posted,
 * and a whole training step is submitted at once: receives posted at
 * submission keep it spinning through the step, on the core the rank's
 * worker computes on. An empty task that reads `after` (this rank's own
 * contribution to the same collective) and writes h delays the posting
 * until this rank has reached the collective. (Not benchmarked on its own:
 * in interleaved trial runs its effect on step time was within this VM's
 * run-to-run noise.) */
void sw_comm_irecv_after(sw_comm *c, sw_group g, starpu_data_handle_t after, starpu_data_handle_t h, int src,
                        int64_t tag, MPI_Comm comm)
{
    if (after) COMM_INSERT(&gate_cl, STARPU_R, after, STARPU_W, h);
    void *tr = sw_trace_comm_begin(c->op, sw_group_name(g), (int)(tag - c->op_base), comm, src, 0, tag, h);
    __atomic_add_fetch(&sw_p2p_pending, 1, __ATOMIC_RELAXED);
    SW_CHECK(starpu_mpi_irecv_detached(h, src, (starpu_mpi_tag_t)tag, comm, p2p_done, tr));
}

/* ---------------- broadcast ---------------- */

void sw_broadcast(sw_comm *c, sw_group g, sw_tensor *t, int root)
{
    count_collective(c, g, SW_COUNT_BROADCAST);
    VIA_NCCL(sw_nccl_broadcast(c->nccl, g, t, root));
    sw_comm_check_f32(t, "sw_broadcast");
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p < 1 || root < 0 || root >= p) sw_fail(__FILE__, __LINE__, "sw_broadcast: bad group or root", -EINVAL);
    if (p == 1) return;
    const MPI_Comm comm = c->coll_comm[g];
    const int64_t tag = sw_comm_take_tags(c, g, 1);
    c->op = "broadcast";
    if (r == root) {
        starpu_data_handle_t h = sw_tensor_whole(t, STARPU_R);
        for (int k = 1; k < p; k++) sw_comm_isend(c, g, h, mod(root + k, p), tag, comm);
    } else {
        sw_comm_irecv_after(c, g, NULL, sw_tensor_whole(t, STARPU_W), root, tag, comm); /* after t's earlier uses */
    }
}

/* ---------------- ring shift ---------------- */

void sw_comm_shape_fail(const char *what, const sw_tensor *a, const sw_tensor *b, const char *rule)
{
    fprintf(stderr, "starweave: %s: %s [%lld, %lld] and %s [%lld, %lld]: %s\n", what, a->name, (long long)a->rows,
            (long long)a->cols, b->name, (long long)b->rows, (long long)b->cols, rule);
    sw_fail(__FILE__, __LINE__, what, -EINVAL);
}

void sw_ring_shift(sw_comm *c, sw_group g, sw_tensor *send, sw_tensor *recv, int shift)
{
    sw_comm_check_f32(send, "sw_ring_shift");
    sw_comm_check_f32(recv, "sw_ring_shift");
    if (send->rows != recv->rows || send->cols != recv->cols)
        sw_comm_shape_fail("sw_ring_shift", send, recv, "shapes differ");
    /* in place: written, so any read-only tiling of send must go first */
    sw_ring_shift_handles(c, g, sw_tensor_whole(send, send == recv ? STARPU_RW : STARPU_R),
                          send == recv ? NULL : sw_tensor_whole(recv, STARPU_W), shift);
}

void sw_ring_shift_handles(sw_comm *c, sw_group g, starpu_data_handle_t send, starpu_data_handle_t recv, int shift)
{
    count_collective(c, g, SW_COUNT_RING_SHIFT);
    VIA_NCCL(sw_nccl_ring_shift_handles(c->nccl, g, send, recv, shift));
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p < 1) sw_fail(__FILE__, __LINE__, "sw_ring_shift: group out of range", -EINVAL);
    const int k = mod(shift, p);
    if (k == 0) {
        if (recv) sw_copy(recv, send);
        return;
    }
    const MPI_Comm comm = c->coll_comm[g];
    const int64_t tag = sw_comm_take_tags(c, g, 1);
    c->op = "ring_shift";
    starpu_data_handle_t src = send, tmp = NULL;
    if (!recv) {
        /* in place: the receive must not wait for the send to leave (a
         * cycle around the ring): send from a copy */
        tmp = sw_comm_temp_like(send);
        sw_copy(tmp, send);
        src = tmp;
        recv = send;
    }
    sw_comm_isend(c, g, src, mod(r + k, p), tag, comm);
    sw_comm_irecv_after(c, g, src, recv, mod(r - k, p), tag, comm);
    if (tmp) starpu_data_unregister_submit(tmp);
}

/* ---------------- point-to-point ---------------- */

/* the tag of the next message between this rank and member `peer` of g,
 * one way (sent or received), on `channel`: the pair's own count on that
 * channel, so that only the two ranks involved need to agree on it (tags
 * count * SW_P2P_CHANNELS + channel: the channels never match each other) */
static int64_t pair_tag(sw_comm *c, sw_group g, int peer, int channel, int sending, const char *what)
{
    const int p = sw_mesh_size(c->mesh, g), me = sw_mesh_rank(c->mesh, g);
    if (p < 2 || peer < 0 || peer >= p || peer == me) {
        fprintf(stderr, "starweave: %s: member %d of the %s group (%d members, this rank %d): a member other than "
                        "this rank is needed\n", what, peer, sw_group_name(g), p, me);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
    if (channel < 0 || channel >= SW_P2P_CHANNELS)
        sw_usage_error("%s: channel %d: must be in 0 .. %d", what, channel, SW_P2P_CHANNELS - 1);
    int64_t *count = &(sending ? c->p2p_sent : c->p2p_received)[g][(size_t)peer * SW_P2P_CHANNELS + (size_t)channel];
    const int64_t tag = *count % ((c->mpi_tag_ub[g] + 1) / SW_P2P_CHANNELS) * SW_P2P_CHANNELS + channel;
    ++*count;
    c->op = sending ? "send" : "recv";
    c->op_base = tag;
    return tag;
}

void sw_send_on(sw_comm *c, sw_group g, int channel, sw_tensor *t, int dest)
{
    sw_comm_check_f32(t, "sw_send");
    const int64_t tag = pair_tag(c, g, dest, channel, 1, "sw_send");
    c->calls[g]++;
    sw_counter_add(SW_COUNT_SEND, 1);
    sw_comm_isend(c, g, sw_tensor_whole(t, STARPU_R), dest, tag, c->p2p_comm[g]);
}

void sw_recv_on(sw_comm *c, sw_group g, int channel, sw_tensor *t, int src)
{
    sw_comm_check_f32(t, "sw_recv");
    const int64_t tag = pair_tag(c, g, src, channel, 0, "sw_recv");
    sw_comm_irecv_after(c, g, NULL, sw_tensor_whole(t, STARPU_W), src, tag, c->p2p_comm[g]);
}

void sw_send(sw_comm *c, sw_group g, sw_tensor *t, int dest) { sw_send_on(c, g, 0, t, dest); }

void sw_recv(sw_comm *c, sw_group g, sw_tensor *t, int src) { sw_recv_on(c, g, 0, t, src); }
