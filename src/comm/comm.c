/* Collectives as graph nodes: StarPU-MPI detached point-to-point requests
 * on tiles and temporaries, plus reduction tasks (see comm.h).
 *
 * The reduction codelets live here rather than in codelets/: they exist
 * only to serve the collectives' decomposition (op chosen at run time,
 * variable number of buffers) and are not ops a graph builder submits. */
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
void sw_comm_use_nccl(sw_comm *c, sw_nccl *n)
{
    if (c->nccl_owned) sw_nccl_destroy(c->nccl);
    c->nccl = n;
    c->nccl_owned = 0;
}
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
            sw_sim_comm_speaker(c->nbc_comm[g], sw_nbc_sim_speaker()); /* its collectives' actor */
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
static int64_t take_tags(sw_comm *c, sw_group g, int64_t n)
{
    c->calls[g]++;
    if (n > c->tag_ub[g] + 1) sw_fail(__FILE__, __LINE__, "collective needs more tags than MPI_TAG_UB", -ERANGE);
    if (c->next_tag[g] + n - 1 > c->tag_ub[g]) c->next_tag[g] = 0;
    int64_t base = c->next_tag[g];
    c->next_tag[g] += n;
    c->op_base = base;
    return base;
}

/* AUTO's threshold at p = 2 when the context's is lower (see sw_allreduce). */
#define SW_COMM_P2_DIRECT_BYTES ((size_t)4 * 1024 * 1024)

static int mod(int a, int p) { return ((a % p) + p) % p; }

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

/* ---------------- helpers ---------------- */

static void check_f32(const sw_tensor *t, const char *what)
{
    if (t->dtype != SW_F32) {
        fprintf(stderr, "starweave: %s: tensor %s is not fp32\n", what, t->name);
        sw_fail(__FILE__, __LINE__, what, -EINVAL);
    }
}

/* Temporary with StarPU-allocated storage, shaped like matrix handle h. */
static starpu_data_handle_t temp_like(starpu_data_handle_t h)
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
static void isend(sw_comm *c, sw_group g, starpu_data_handle_t h, int dest, int64_t tag, MPI_Comm comm)
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
static void irecv_after(sw_comm *c, sw_group g, starpu_data_handle_t after, starpu_data_handle_t h, int src,
                        int64_t tag, MPI_Comm comm)
{
    if (after) COMM_INSERT(&gate_cl, STARPU_R, after, STARPU_W, h);
    void *tr = sw_trace_comm_begin(c->op, sw_group_name(g), (int)(tag - c->op_base), comm, src, 0, tag, h);
    __atomic_add_fetch(&sw_p2p_pending, 1, __ATOMIC_RELAXED);
    SW_CHECK(starpu_mpi_irecv_detached(h, src, (starpu_mpi_tag_t)tag, comm, p2p_done, tr));
}

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
    const int64_t base = take_tags(c, g, 2 * (int64_t)(p - 1));
    c->op = "allreduce_ring";
    for (int s = 0; s < p - 1; s++) {
        starpu_data_handle_t cs = ch[mod(r - s - 1, p)], cr = ch[mod(r - s - 2, p)];
        isend(c, g, cs, right, base + s, comm);
        starpu_data_handle_t tmp = temp_like(cr);
        irecv_after(c, g, cs, tmp, left, base + s, comm);
        reduce2(tmp, cr, op);
        starpu_data_unregister_submit(tmp);
    }
    for (int s = 0; s < p - 1; s++) {
        isend(c, g, ch[mod(r - s, p)], right, base + (p - 1) + s, comm);
        irecv_after(c, g, NULL, ch[mod(r - s - 1, p)], left, base + (p - 1) + s, comm); /* waits for its reduction */
    }
}

/* Every member sends its whole buffer to every other member; one task
 * reduces the p buffers in rank order. */
static void allreduce_direct(sw_comm *c, sw_group g, sw_tensor *t, int op)
{
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    const MPI_Comm comm = c->coll_comm[g];
    const int64_t tag = take_tags(c, g, 1);
    c->op = "allreduce_direct";
    starpu_data_handle_t h = sw_tensor_whole(t, STARPU_RW);
    struct starpu_data_descr *d = malloc(sizeof *d * (size_t)p);
    if (!d) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
    d[0].handle = h;
    d[0].mode = STARPU_RW;
    for (int k = 1; k < p; k++) { /* sends first: peers' receives can match at once */
        int q = mod(r + k, p);
        isend(c, g, h, q, tag, comm);
    }
    for (int q = 0, b = 1; q < p; q++) {
        if (q == r) continue;
        d[b].handle = temp_like(h);
        d[b].mode = STARPU_R;
        irecv_after(c, g, h, d[b].handle, q, tag, comm);
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
    static const char *const names[] = {"allreduce_mpi", "allgather_mpi", "reduce_scatter_mpi", "alltoall_mpi"};
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    const int64_t tag = take_tags(c, g, 1);
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

/* a collective of `kind` submitted on g: counted where it communicates */
static void count_collective(const sw_comm *c, sw_group g, sw_counter kind)
{
    if (sw_mesh_size(c->mesh, g) > 1) sw_counter_add(kind, 1);
}

void sw_allreduce(sw_comm *c, sw_group g, sw_tensor *t, sw_reduce_op op)
{
    count_collective(c, g, SW_COUNT_ALLREDUCE);
    VIA_NCCL(sw_nccl_allreduce(c->nccl, g, t, op));
    check_f32(t, "sw_allreduce");
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
    const int64_t base = take_tags(c, g, p - 1);
    c->op = name;
    for (int s = 0; s < p - 1; s++) {
        starpu_data_handle_t out = s == 0 ? mine : o[mod(r - s, p)];
        isend(c, g, out, right, base + s, comm);
        irecv_after(c, g, out, o[mod(r - s - 1, p)], left, base + s, comm);
    }
}

void sw_allgather(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out)
{
    count_collective(c, g, SW_COUNT_ALLGATHER);
    VIA_NCCL(sw_nccl_allgather(c->nccl, g, in, out));
    check_f32(in, "sw_allgather");
    check_f32(out, "sw_allgather");
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
    check_f32(t, "sw_allgather_inplace");
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p == 1) return;
    if (t->rows < p) {
        fprintf(stderr, "starweave: sw_allgather_inplace: tensor %s has %lld rows, fewer than the group (%d)\n", t->name,
                (long long)t->rows, p);
        sw_fail(__FILE__, __LINE__, "sw_allgather_inplace", -EINVAL);
    }
    starpu_data_handle_t *o = sw_tensor_tiles(t, SW_ROWS, p, STARPU_RW);
    allgather_ring(c, g, o, o[r], "allgather_inplace");
}

void sw_reduce_scatter(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out, sw_reduce_op op)
{
    count_collective(c, g, SW_COUNT_REDUCE_SCATTER);
    VIA_NCCL(sw_nccl_reduce_scatter(c->nccl, g, in, out, op));
    check_f32(in, "sw_reduce_scatter");
    check_f32(out, "sw_reduce_scatter");
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
    const int64_t base = take_tags(c, g, p - 1);
    c->op = "reduce_scatter";
    starpu_data_handle_t dst_final = sw_tensor_whole(out, STARPU_W);
    starpu_data_handle_t *it = sw_tensor_tiles(in, SW_ROWS, p, STARPU_R);
    /* Same schedule as the all-reduce's first half, except that in stays
     * untouched: the partial sums travel in temporaries. */
    starpu_data_handle_t acc = NULL;
    for (int s = 0; s < p - 1; s++) {
        starpu_data_handle_t cr = it[mod(r - s - 2, p)];
        isend(c, g, s == 0 ? it[mod(r - s - 1, p)] : acc, right, base + s, comm);
        starpu_data_handle_t tmp = temp_like(cr);
        irecv_after(c, g, s == 0 ? it[mod(r - s - 1, p)] : acc, tmp, left, base + s, comm);
        starpu_data_handle_t dst = s == p - 2 ? dst_final : temp_like(cr);
        reduce3(cr, tmp, dst, (int)op);
        starpu_data_unregister_submit(tmp);
        if (acc) starpu_data_unregister_submit(acc);
        acc = dst;
    }
}

/* ---------------- broadcast ---------------- */

void sw_broadcast(sw_comm *c, sw_group g, sw_tensor *t, int root)
{
    count_collective(c, g, SW_COUNT_BROADCAST);
    VIA_NCCL(sw_nccl_broadcast(c->nccl, g, t, root));
    check_f32(t, "sw_broadcast");
    const int p = sw_mesh_size(c->mesh, g), r = sw_mesh_rank(c->mesh, g);
    if (p < 1 || root < 0 || root >= p) sw_fail(__FILE__, __LINE__, "sw_broadcast: bad group or root", -EINVAL);
    if (p == 1) return;
    const MPI_Comm comm = c->coll_comm[g];
    const int64_t tag = take_tags(c, g, 1);
    c->op = "broadcast";
    if (r == root) {
        starpu_data_handle_t h = sw_tensor_whole(t, STARPU_R);
        for (int k = 1; k < p; k++) isend(c, g, h, mod(root + k, p), tag, comm);
    } else {
        irecv_after(c, g, NULL, sw_tensor_whole(t, STARPU_W), root, tag, comm); /* after t's earlier uses */
    }
}

/* ---------------- ring shift ---------------- */

static void shape_fail(const char *what, const sw_tensor *a, const sw_tensor *b, const char *rule)
{
    fprintf(stderr, "starweave: %s: %s [%lld, %lld] and %s [%lld, %lld]: %s\n", what, a->name, (long long)a->rows,
            (long long)a->cols, b->name, (long long)b->rows, (long long)b->cols, rule);
    sw_fail(__FILE__, __LINE__, what, -EINVAL);
}

void sw_ring_shift(sw_comm *c, sw_group g, sw_tensor *send, sw_tensor *recv, int shift)
{
    check_f32(send, "sw_ring_shift");
    check_f32(recv, "sw_ring_shift");
    if (send->rows != recv->rows || send->cols != recv->cols)
        shape_fail("sw_ring_shift", send, recv, "shapes differ");
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
    const int64_t tag = take_tags(c, g, 1);
    c->op = "ring_shift";
    starpu_data_handle_t src = send, tmp = NULL;
    if (!recv) {
        /* in place: the receive must not wait for the send to leave (a
         * cycle around the ring): send from a copy */
        tmp = temp_like(send);
        sw_copy(tmp, send);
        src = tmp;
        recv = send;
    }
    isend(c, g, src, mod(r + k, p), tag, comm);
    irecv_after(c, g, src, recv, mod(r - k, p), tag, comm);
    if (tmp) starpu_data_unregister_submit(tmp);
}

/* ---------------- all-to-all ---------------- */

static void alltoall_parts(sw_comm *c, sw_group g, int n, starpu_data_handle_t *send, starpu_data_handle_t *recv);

void sw_alltoall(sw_comm *c, sw_group g, sw_tensor *in, sw_tensor *out, int scatter_dim, int gather_dim)
{
    count_collective(c, g, SW_COUNT_ALLTOALL);
    VIA_NCCL(sw_nccl_alltoall(c->nccl, g, in, out, scatter_dim, gather_dim));
    static const char *dn[2] = {"rows", "cols"};
    check_f32(in, "sw_alltoall");
    check_f32(out, "sw_alltoall");
    const int p = sw_mesh_size(c->mesh, g);
    if (p < 1) sw_fail(__FILE__, __LINE__, "sw_alltoall: group out of range", -EINVAL);
    if ((scatter_dim != 0 && scatter_dim != 1) || (gather_dim != 0 && gather_dim != 1)) {
        fprintf(stderr, "starweave: sw_alltoall: scatter_dim %d and gather_dim %d must be 0 (rows) or 1 (cols)\n",
                scatter_dim, gather_dim);
        sw_fail(__FILE__, __LINE__, "sw_alltoall", -EINVAL);
    }
    if (in == out) shape_fail("sw_alltoall", in, out, "in and out must be different tensors");
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
    const int64_t tag = take_tags(c, g, n);
    c->op = "alltoall";
    /* one message per (source, destination, part): (source, tag) is unique */
    for (int k = 1; k < p; k++) {
        int q = mod(r + k, p);
        for (int i = 0; i < n; i++) isend(c, g, send[q * n + i], q, tag + i, comm);
    }
    for (int k = 1; k < p; k++) {
        int q = mod(r - k, p);
        for (int i = 0; i < n; i++) irecv_after(c, g, send[r * n + i], recv[q * n + i], q, tag + i, comm);
    }
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
    check_f32(t, "sw_send");
    const int64_t tag = pair_tag(c, g, dest, channel, 1, "sw_send");
    c->calls[g]++;
    sw_counter_add(SW_COUNT_SEND, 1);
    isend(c, g, sw_tensor_whole(t, STARPU_R), dest, tag, c->p2p_comm[g]);
}

void sw_recv_on(sw_comm *c, sw_group g, int channel, sw_tensor *t, int src)
{
    check_f32(t, "sw_recv");
    const int64_t tag = pair_tag(c, g, src, channel, 0, "sw_recv");
    irecv_after(c, g, NULL, sw_tensor_whole(t, STARPU_W), src, tag, c->p2p_comm[g]);
}

void sw_send(sw_comm *c, sw_group g, sw_tensor *t, int dest) { sw_send_on(c, g, 0, t, dest); }

void sw_recv(sw_comm *c, sw_group g, sw_tensor *t, int src) { sw_recv_on(c, g, 0, t, src); }
