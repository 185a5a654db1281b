/* The collectives that reduce or gather: all-reduce, all-gather,
 * reduce-scatter, all-to-all, and the bytes each sends (sw_comm_bytes),
 * decomposed into point-to-point requests (comm.c) and reduction tasks,
 * or handed to MPI (comm_nbc.c) or NCCL.
 *
 * The reduction codelets live here rather than in codelets/: they exist
 * only to serve the collectives' decomposition (op chosen at run time,
 * variable number of buffers) and are not ops a graph builder submits. */
#include "comm_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm_nbc.h"

/* AUTO's threshold at p = 2 when the context's is lower (see sw_allreduce). */
#define SW_COMM_P2_DIRECT_BYTES ((size_t)4 * 1024 * 1024)

/* ---------------- reduction codelets ---------------- */

static inline float apply(int op, float a, float b)
{
    return op == SW_MAX ? (b > a ? b : a) : a + b;
}

/* buffers: x (R), y (RW): y = op(y, x) */
static void reduce2_cpu(void *buffers[], void *cl_arg)
{
    int op;
    starpu_codelet_unpack_args(cl_arg, &op);
    const int64_t R = SW_ROWS_OF(buffers[1]), C = SW_COLS_OF(buffers[1]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[0]) == R && SW_COLS_OF(buffers[0]) == C);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        if (op == SW_MAX)
            for (int64_t i = 0; i < C; i++) yr[i] = apply(SW_MAX, yr[i], xr[i]);
        else
            for (int64_t i = 0; i < C; i++) yr[i] += xr[i];
    }
}

/* buffers: x (R), y (R), z (W): z = op(x, y) */
static void reduce3_cpu(void *buffers[], void *cl_arg)
{
    int op;
    starpu_codelet_unpack_args(cl_arg, &op);
    const int64_t R = SW_ROWS_OF(buffers[2]), C = SW_COLS_OF(buffers[2]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[0]) == R && SW_COLS_OF(buffers[0]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]), ldz = SW_LD_OF(buffers[2]);
    const float *x = SW_F32_OF(buffers[0]), *y = SW_F32_OF(buffers[1]);
    float *z = SW_F32_OF(buffers[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx, *yr = y + r * ldy;
        float *zr = z + r * ldz;
        for (int64_t i = 0; i < C; i++) zr[i] = apply(op, xr[i], yr[i]);
    }
}

struct reducen_args {
    int op, me, p;
};

/* buffers: local (RW), then the p-1 other members' buffers (R) in rank
 * order without me: local = op over ranks 0..p-1, left to right, so every
 * member performs the same operations on the same values. */
static void reducen_cpu(void *buffers[], void *cl_arg)
{
    struct reducen_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const float *src[a.p];
    int64_t ld[a.p];
    for (int k = 0, b = 1; k < a.p; k++) {
        void *buf = buffers[k == a.me ? 0 : b++];
        STARPU_ASSERT(SW_ROWS_OF(buf) == R && SW_COLS_OF(buf) == C);
        src[k] = SW_F32_OF(buf);
        ld[k] = SW_LD_OF(buf);
    }
    float *y = SW_F32_OF(buffers[0]);
    const int64_t ldy = SW_LD_OF(buffers[0]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t i = 0; i < C; i++) {
            float s = src[0][r * ld[0] + i];
            for (int k = 1; k < a.p; k++) s = apply(a.op, s, src[k][r * ld[k] + i]);
            y[r * ldy + i] = s;
        }
}

SW_PERFMODEL(reduce2_model, "sw_comm_reduce2");
SW_PERFMODEL(reduce3_model, "sw_comm_reduce3");
SW_PERFMODEL(reducen_model, "sw_comm_reducen");

static struct starpu_codelet reduce2_cl = {
    .cpu_funcs = {reduce2_cpu},
    .cpu_funcs_name = {"reduce2_cpu"},
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_RW},
    .model = &reduce2_model,
    .name = "comm_reduce2",
};

static struct starpu_codelet reduce3_cl = {
    .cpu_funcs = {reduce3_cpu},
    .cpu_funcs_name = {"reduce3_cpu"},
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &reduce3_model,
    .name = "comm_reduce3",
};

static struct starpu_codelet reducen_cl = {
    .cpu_funcs = {reducen_cpu},
    .cpu_funcs_name = {"reducen_cpu"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &reducen_model,
    .name = "comm_reducen",
};

static void reduce2(starpu_data_handle_t x, starpu_data_handle_t y, int op)
{
    COMM_INSERT(&reduce2_cl, STARPU_R, x, STARPU_RW, y, STARPU_VALUE, &op, sizeof op);
}

static void reduce3(starpu_data_handle_t x, starpu_data_handle_t y, starpu_data_handle_t z, int op)
{
    COMM_INSERT(&reduce3_cl, STARPU_R, x, STARPU_R, y, STARPU_W, z, STARPU_VALUE, &op, sizeof op);
}

/* ---------------- all-reduce ---------------- */

/* Ring on p chunks ch[0..p-1]: reduce-scatter (after step s, the chunk
 * received is r-s-2; after p-1 steps rank r holds chunk r fully reduced),
 * then all-gather (step s sends chunk r-s, receives r-s-1). Every message
 * goes to the right neighbour, so (source, tag) is unique per step. */
static void allreduce_ring(sw_comm *c, sw_group g, starpu_data_handle_t *ch, int op)
{
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    const MPI_Comm comm = c->coll_comm[g];
    const int right = mod(r + 1, p), left = mod(r - 1, p);
    const int64_t base = sw_comm_take_tags(c, g, 2 * (int64_t)(p - 1));
    c->op = "allreduce_ring";
    for (int s = 0; s < p - 1; s++) {
        starpu_data_handle_t cs = ch[mod(r - s - 1, p)], cr = ch[mod(r - s - 2, p)];
        sw_comm_isend(c, g, cs, right, base + s, comm);
        starpu_data_handle_t tmp = sw_comm_temp_like(cr);
        sw_comm_irecv_after(c, g, cs, tmp, left, base + s, comm);
        reduce2(tmp, cr, op);
        starpu_data_unregister_submit(tmp);
    }
    for (int s = 0; s < p - 1; s++) {
        sw_comm_isend(c, g, ch[mod(r - s, p)], right, base + (p - 1) + s, comm);
        sw_comm_irecv_after(c, g, NULL, ch[mod(r - s - 1, p)], left, base + (p - 1) + s, comm); /* waits for its reduction */
    }
}

/* Every member sends its whole buffer to every other member; one task
 * reduces the p buffers in rank order. */
static void allreduce_direct(sw_comm *c, sw_group g, sw_tensor *t, int op)
{
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    const MPI_Comm comm = c->coll_comm[g];
    const int64_t tag = sw_comm_take_tags(c, g, 1);
    c->op = "allreduce_direct";
    starpu_data_handle_t h = sw_tensor_whole(t, STARPU_RW);
    struct starpu_data_descr *d = malloc(sizeof *d * (size_t)p);
    if (!d) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
    d[0].handle = h;
    d[0].mode = STARPU_RW;
    for (int k = 1; k < p; k++) { /* sends first: peers' receives can match at once */
        int q = mod(r + k, p);
        sw_comm_isend(c, g, h, q, tag, comm);
    }
    for (int q = 0, b = 1; q < p; q++) {
        if (q == r) continue;
        d[b].handle = sw_comm_temp_like(h);
        d[b].mode = STARPU_R;
        sw_comm_irecv_after(c, g, h, d[b].handle, q, tag, comm);
        b++;
    }
    struct reducen_args a = {op, r, p};
    COMM_INSERT(&reducen_cl, STARPU_DATA_MODE_ARRAY, d, p, STARPU_VALUE, &a, sizeof a);
    for (int b = 1; b < p; b++) starpu_data_unregister_submit(d[b].handle);
    free(d);
}

/* whether MPI runs a collective of `bytes` (the full tensor) on g */
static int via_mpi(const sw_comm *c, sw_group g, double bytes)
{
    return (c->token[g] || (c->virtual_nbc && sw_mesh_size(c->mesh, g) > 1)) && (c->algo == SW_ALGO_MPI || (c->algo == SW_ALGO_AUTO && bytes <= SW_COMM_MPI_BYTES));
}

/* Submits MPI's collective on g (see via_mpi), its bytes counted by the
 * task from the MPI call's arguments (sw_comm_bytes says which), and
 * traced (when on) as an exchange with every other member: a send and a
 * receive per peer, one tag, from the data's readiness to completion. */
static void submit_via_mpi(sw_comm *c, sw_group g, sw_nbc_kind kind, sw_tensor *in, sw_tensor *out, int op)
{
    static const char *const names[] = {"allreduce_mpi", "allgather_mpi", "reduce_scatter_mpi", "alltoall_mpi",
                                        "allgather_inplace_mpi"};
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    const int64_t tag = sw_comm_take_tags(c, g, 1);
    starpu_data_handle_t hi = sw_tensor_whole(in, out ? STARPU_R : STARPU_RW);
    starpu_data_handle_t ho = out ? sw_tensor_whole(out, STARPU_W) : NULL;
    void **recs = NULL;
    for (int k = 1, n = 0; k < p; k++) {
        void *send = sw_trace_comm_begin(names[kind], sw_group_name(g), -1, sw_mesh_comm(c->mesh, g), mod(r + k, p), 1,
                                         tag, hi);
        void *recv = sw_trace_comm_begin(names[kind], sw_group_name(g), -1, sw_mesh_comm(c->mesh, g), mod(r - k, p), 0,
                                         tag, ho ? ho : hi);
        if (!send) continue; /* not traced */
        if (!recs && !(recs = calloc(2 * (size_t)p, sizeof *recs))) sw_fail(__FILE__, __LINE__, "calloc", -ENOMEM);
        recs[n++] = send, recs[n++] = recv;
    }
    sw_trace_ctx saved = sw_trace_get_ctx(); /* the records keep the caller's phase, the task is the collective's */
    sw_trace_set_phase(SW_PHASE_COMM, saved.layer);
    sw_nbc_submit(kind, c->nbc_comm[g], c->token[g], hi, ho, op, recs, &c->sent_bytes[g]);
    sw_trace_set_ctx(saved);
}

/* The algorithm sw_allreduce runs for a [rows, cols] tensor on g (p members) */
enum { DIRECT, RING_ROWS, RING_COLS, VIA_MPI };
static int allreduce_algo(const sw_comm *c, sw_group g, int p, int64_t rows, int64_t cols)
{
    if (via_mpi(c, g, (double)(rows * cols) * sizeof(float))) return VIA_MPI;
    size_t small = c->small_bytes;
    if (p == 2 && small < SW_COMM_P2_DIRECT_BYTES) small = SW_COMM_P2_DIRECT_BYTES;
    int ring = c->algo == SW_ALGO_RING || (c->algo == SW_ALGO_AUTO && (size_t)(rows * cols) * sizeof(float) >= small);
    return !ring ? DIRECT : rows >= p ? RING_ROWS : cols >= p ? RING_COLS : DIRECT;
}

void sw_allreduce(sw_comm *c, sw_group g, sw_tensor *t, sw_reduce_op op)
{
    count_collective(c, g, SW_COUNT_ALLREDUCE);
    VIA_NCCL(sw_nccl_allreduce(c->nccl, g, t, op));
    sw_comm_check_f32(t, "sw_allreduce");
    const int p = sw_mesh_size(c->mesh, g);
    if (p < 1) sw_fail(__FILE__, __LINE__, "sw_allreduce: group out of range", -EINVAL);
    if (p == 1) return;
    /* At p = 2 the ring moves as many bytes as DIRECT (half the buffer
     * each way, twice), but its second message depends on the reduction
     * task: the send can only be posted once the rank's worker has run it,
     * while the StarPU-MPI thread, polling for that second message, shares
     * the core with the worker (mpirun binds a rank to one core; both
     * threads spin). Each such hand-off waits for an OS scheduler tick, so
     * AUTO keeps DIRECT up to SW_COMM_P2_DIRECT_BYTES at p = 2. */
    switch (allreduce_algo(c, g, p, t->rows, t->cols)) {
    case VIA_MPI: submit_via_mpi(c, g, SW_NBC_ALLREDUCE, t, NULL, (int)op); break;
    case RING_ROWS: allreduce_ring(c, g, sw_tensor_tiles(t, SW_ROWS, p, STARPU_RW), (int)op); break;
    case RING_COLS: /* column chunks: strided, which MPI and the codelet handle */
        allreduce_ring(c, g, sw_tensor_tiles(t, SW_COLS, p, STARPU_RW), (int)op);
        break;
    default: allreduce_direct(c, g, t, (int)op);
    }
}

/* bytes of chunk i of n elements split in p (sw_tile_range), times `unit` */
static double chunk_bytes(int64_t n, int p, int i, double unit)
{
    int64_t first, count;
    sw_tile_range(n, p, mod(i, p), &first, &count);
    return (double)count * unit;
}

double sw_comm_bytes(const sw_comm *c, sw_group g, sw_coll kind, int64_t rows, int64_t cols)
{
    if (!c || (unsigned)g >= SW_GROUP_COUNT) return 0;
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    const double n = (double)rows * (double)cols * sizeof(float);
    if (p < 2) return 0;
#ifdef STARWEAVE_USE_CUDA
    if (c->nccl && kind == SW_COLL_ALLREDUCE) return 2.0 * (p - 1) / p * n; /* as sw_nccl_traffic counts it */
#endif
    switch (kind) {
    case SW_COLL_ALLREDUCE: { /* the ring sends every chunk but its own, then every chunk but its right neighbour's */
        switch (allreduce_algo(c, g, p, rows, cols)) {
        case VIA_MPI: return n; /* the buffer handed to MPI */
        case RING_ROWS: return 2 * n - chunk_bytes(rows, p, r, n / rows) - chunk_bytes(rows, p, r + 1, n / rows);
        case RING_COLS: return 2 * n - chunk_bytes(cols, p, r, n / cols) - chunk_bytes(cols, p, r + 1, n / cols);
        case DIRECT: return (p - 1) * n;
        default: return 2.0 * (p - 1) / p * n;
        }
    }
    case SW_COLL_ALLGATHER: /* via MPI: its own block handed over; the ring forwards all but one */
        return via_mpi(c, g, n) ? chunk_bytes(rows, p, r, n / rows) : n - chunk_bytes(rows, p, r + 1, n / rows);
    case SW_COLL_REDUCE_SCATTER: return n - chunk_bytes(rows, p, r, n / rows);
    case SW_COLL_ALLTOALL: return (p - 1) * n / p;
    case SW_COLL_RING_SHIFT: return n;
    case SW_COLL_SEND: return n;
    }
    return 0;
}

/* ---------------- all-gather, reduce-scatter (rows) ---------------- */

static void check_rows(const char *what, sw_comm *c, sw_group g, const sw_tensor *full, const sw_tensor *part)
{
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p < 1) sw_fail(__FILE__, __LINE__, what, -EINVAL);
    int64_t first, count;
    if (full->rows < p) {
        fprintf(stderr, "starweave: %s: %s has %lld rows, fewer than the group size %d\n", what, full->name,
                (long long)full->rows, p);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
    sw_tile_range(full->rows, p, r, &first, &count);
    if (part->rows != count || part->cols != full->cols) {
        fprintf(stderr, "starweave: %s: %s is [%lld, %lld], expected [%lld, %lld] (rows %lld..%lld of %s)\n",
                what, part->name, (long long)part->rows, (long long)part->cols, (long long)count,
                (long long)full->cols, (long long)first, (long long)(first + count - 1), full->name);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
}

/* Ring all-gather into the p row tiles o: step s sends chunk r-s (the first
 * from `mine`, this rank's chunk wherever it is) and receives chunk r-s-1.
 * Sending the first message from the input itself rather than from its
 * copy in o avoids a send that waits for a task, i.e. a scheduler hand-off
 * between the worker and the StarPU-MPI thread (see sw_allreduce); later
 * steps forward what the previous step received (no task in between). */
static void allgather_ring(sw_comm *c, sw_group g, starpu_data_handle_t *o, starpu_data_handle_t mine,
                           const char *name)
{
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    const MPI_Comm comm = c->coll_comm[g];
    const int right = mod(r + 1, p), left = mod(r - 1, p);
    const int64_t base = sw_comm_take_tags(c, g, p - 1);
    c->op = name;
    for (int s = 0; s < p - 1; s++) {
        starpu_data_handle_t out = s == 0 ? mine : o[mod(r - s, p)];
        sw_comm_isend(c, g, out, right, base + s, comm);
        sw_comm_irecv_after(c, g, out, o[mod(r - s - 1, p)], left, base + s, comm);
    }
}

void sw_allgather(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out)
{
    count_collective(c, g, SW_COUNT_ALLGATHER);
    VIA_NCCL(sw_nccl_allgather(c->nccl, g, in, out));
    sw_comm_check_f32(in, "sw_allgather");
    sw_comm_check_f32(out, "sw_allgather");
    check_rows("sw_allgather", c, g, out, in);
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    starpu_data_handle_t src = sw_tensor_whole(in, STARPU_R);
    if (p == 1) {
        sw_copy(sw_tensor_whole(out, STARPU_W), src);
        return;
    }
    if (via_mpi(c, g, (double)sw_tensor_bytes(out))) {
        submit_via_mpi(c, g, SW_NBC_ALLGATHER, in, out, 0);
        return;
    }
    starpu_data_handle_t *o = sw_tensor_tiles(out, SW_ROWS, p, STARPU_W);
    allgather_ring(c, g, o, src, "allgather");
    sw_copy(o[r], src);
}

void sw_allgather_inplace(sw_comm *c, sw_group g, sw_tensor *t)
{
    count_collective(c, g, SW_COUNT_ALLGATHER);
    VIA_NCCL(sw_nccl_allgather_inplace(c->nccl, g, t));
    sw_comm_check_f32(t, "sw_allgather_inplace");
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p == 1) return;
    if (t->rows < p) {
        fprintf(stderr, "starweave: sw_allgather_inplace: tensor %s has %lld rows, fewer than the group (%d)\n", t->name,
                (long long)t->rows, p);
        sw_fail(__FILE__, __LINE__, "sw_allgather_inplace", -EINVAL);
    }
    /* In simulation, MPI's all-gather where MPI runs the collectives (as
     * sw_comm_bytes' model already assumes): the ring's sends are
     * StarPU-MPI's, whose matrix datatype SMPI treats as derived and
     * copies into a private buffer per message, alive until received --
     * ZeRO-1's all-gather of the updated parameters at 64 simulated ranks
     * of LLaMA-7B (tp 8, dp 8) held over 23 GB of such copies in this one
     * process and was killed for memory. MPI's all-gather from and into
     * folded memory copies nothing. (Real runs keep the ring.) */
    if (sw_simulated() && via_mpi(c, g, (double)sw_tensor_bytes(t))) {
        submit_via_mpi(c, g, SW_NBC_ALLGATHER_INPLACE, t, NULL, 0);
        return;
    }
    starpu_data_handle_t *o = sw_tensor_tiles(t, SW_ROWS, p, STARPU_RW);
    allgather_ring(c, g, o, o[r], "allgather_inplace");
}

void sw_reduce_scatter(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out, sw_reduce_op op)
{
    count_collective(c, g, SW_COUNT_REDUCE_SCATTER);
    VIA_NCCL(sw_nccl_reduce_scatter(c->nccl, g, in, out, op));
    sw_comm_check_f32(in, "sw_reduce_scatter");
    sw_comm_check_f32(out, "sw_reduce_scatter");
    check_rows("sw_reduce_scatter", c, g, in, out);
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p == 1) {
        sw_copy(sw_tensor_whole(out, STARPU_W), sw_tensor_whole(in, STARPU_R));
        return;
    }
    if (via_mpi(c, g, (double)sw_tensor_bytes(in))) {
        submit_via_mpi(c, g, SW_NBC_REDUCE_SCATTER, in, out, (int)op);
        return;
    }
    const MPI_Comm comm = c->coll_comm[g];
    const int right = mod(r + 1, p), left = mod(r - 1, p);
    const int64_t base = sw_comm_take_tags(c, g, p - 1);
    c->op = "reduce_scatter";
    starpu_data_handle_t dst_final = sw_tensor_whole(out, STARPU_W);
    starpu_data_handle_t *it = sw_tensor_tiles(in, SW_ROWS, p, STARPU_R);
    /* Same schedule as the all-reduce's first half, except that in stays
     * untouched: the partial sums travel in temporaries. */
    starpu_data_handle_t acc = NULL;
    for (int s = 0; s < p - 1; s++) {
        starpu_data_handle_t cr = it[mod(r - s - 2, p)];
        sw_comm_isend(c, g, s == 0 ? it[mod(r - s - 1, p)] : acc, right, base + s, comm);
        starpu_data_handle_t tmp = sw_comm_temp_like(cr);
        sw_comm_irecv_after(c, g, s == 0 ? it[mod(r - s - 1, p)] : acc, tmp, left, base + s, comm);
        starpu_data_handle_t dst = s == p - 2 ? dst_final : sw_comm_temp_like(cr);
        reduce3(cr, tmp, dst, (int)op);
        starpu_data_unregister_submit(tmp);
        if (acc) starpu_data_unregister_submit(acc);
        acc = dst;
    }
}

/* ---------------- all-to-all ---------------- */

static void alltoall_parts(sw_comm *c, sw_group g, int n, starpu_data_handle_t *send, starpu_data_handle_t *recv);

void sw_alltoall(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out, int scatter_dim, int gather_dim)
{
    count_collective(c, g, SW_COUNT_ALLTOALL);
    VIA_NCCL(sw_nccl_alltoall(c->nccl, g, in, out, scatter_dim, gather_dim));
    static const char *dn[2] = {"rows", "cols"};
    sw_comm_check_f32(in, "sw_alltoall");
    sw_comm_check_f32(out, "sw_alltoall");
    const int p = sw_mesh_size(c->mesh, g);
    if (p < 1) sw_fail(__FILE__, __LINE__, "sw_alltoall: group out of range", -EINVAL);
    if ((scatter_dim != 0 && scatter_dim != 1) || (gather_dim != 0 && gather_dim != 1)) {
        fprintf(stderr, "starweave: sw_alltoall: scatter_dim %d and gather_dim %d must be 0 (rows) or 1 (cols)\n",
                scatter_dim, gather_dim);
        sw_fail(__FILE__, __LINE__, "sw_alltoall", -EINVAL);
    }
    if (in == out) sw_comm_shape_fail("sw_alltoall", in, out, "in and out must be different tensors");
    const int64_t split = scatter_dim == 0 ? in->rows : in->cols;
    if (split % p != 0) {
        fprintf(stderr, "starweave: sw_alltoall: %s [%lld, %lld]: its %lld %s (scatter_dim %d) are not divisible by "
                "the group size %d (%s)\n", in->name, (long long)in->rows, (long long)in->cols, (long long)split,
                dn[scatter_dim], scatter_dim, p, sw_group_name(g));
        sw_fail(__FILE__, __LINE__, "sw_alltoall: split dim not divisible by the group size", -EINVAL);
    }
    const int64_t pr = scatter_dim == 0 ? in->rows / p : in->rows, pc = scatter_dim == 1 ? in->cols / p : in->cols;
    const int64_t orows = gather_dim == 0 ? pr * p : pr, ocols = gather_dim == 1 ? pc * p : pc;
    if (out->rows != orows || out->cols != ocols) {
        fprintf(stderr, "starweave: sw_alltoall: %s is [%lld, %lld], expected [%lld, %lld] (%s [%lld, %lld], "
                "scatter %s, gather %s, group size %d)\n", out->name, (long long)out->rows, (long long)out->cols,
                (long long)orows, (long long)ocols, in->name, (long long)in->rows, (long long)in->cols,
                dn[scatter_dim], dn[gather_dim], p);
        sw_fail(__FILE__, __LINE__, "sw_alltoall: out has the wrong shape", -EINVAL);
    }
    if (p == 1) {
        sw_copy(sw_tensor_whole(out, STARPU_W), sw_tensor_whole(in, STARPU_R));
        return;
    }
    if (scatter_dim == 0 && gather_dim == 0 && via_mpi(c, g, (double)sw_tensor_bytes(in))) { /* contiguous blocks */
        submit_via_mpi(c, g, SW_NBC_ALLTOALL, in, out, 0);
        return;
    }
    alltoall_parts(c, g, 1, sw_tensor_tiles(in, scatter_dim == 0 ? SW_ROWS : SW_COLS, p, STARPU_R),
                      sw_tensor_tiles(out, gather_dim == 0 ? SW_ROWS : SW_COLS, p, STARPU_W));
}

void sw_alltoall_parts(sw_comm *c, sw_group g, int n, starpu_data_handle_t *send, starpu_data_handle_t *recv)
{
    count_collective(c, g, SW_COUNT_ALLTOALL);
    VIA_NCCL(sw_nccl_alltoall_parts(c->nccl, g, n, send, recv));
    alltoall_parts(c, g, n, send, recv);
}

static void alltoall_parts(sw_comm *c, sw_group g, int n, starpu_data_handle_t *send, starpu_data_handle_t *recv)
{
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p < 1) sw_fail(__FILE__, __LINE__, "sw_alltoall: group out of range", -EINVAL);
    for (int i = 0; i < n; i++) /* the local parts */
        sw_copy(recv[r * n + i], send[r * n + i]);
    if (p == 1) return;
    const MPI_Comm comm = c->coll_comm[g];
    const int64_t tag = sw_comm_take_tags(c, g, n);
    c->op = "alltoall";
    /* one message per (source, destination, part): (source, tag) is unique */
    for (int k = 1; k < p; k++) {
        int q = mod(r + k, p);
        for (int i = 0; i < n; i++) sw_comm_isend(c, g, send[q * n + i], q, tag + i, comm);
    }
    for (int k = 1; k < p; k++) {
        int q = mod(r - k, p);
        for (int i = 0; i < n; i++) sw_comm_irecv_after(c, g, send[r * n + i], recv[q * n + i], q, tag + i, comm);
    }
}
