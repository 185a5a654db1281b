/* sw_trace's task graph: every submission recorded with its data
 * accesses while sw_trace_dag_enable is on, the dependencies StarPU infers
 * rebuilt from them, gathered on rank 0 and written as Graphviz dot. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "starweave/tensor.h"
#include "trace_internal.h"

enum { DAG_TASK, DAG_SEND, DAG_RECV, DAG_COPY }; /* copies: passed through, not drawn */

typedef struct dag_node {
    int32_t rank, kind, phase, layer, step;
    int32_t msg; /* a request: its comm_rec in dag.comms */
    char name[40];
} dag_node;

typedef struct dag_edge {
    int32_t from, to; /* nodes of one rank, from < to */
} dag_edge;

/* an access still able to be depended on: rows [r0, r1), columns [c0, c1) */
typedef struct dag_acc {
    int64_t r0, r1, c0, c1;
    int32_t node, write;
} dag_acc;

/* one datum (a tensor with its tiles, or a temporary) and its live accesses */
typedef struct dag_datum {
    const void *key;
    vec acc;
} dag_datum;

static struct {
    atomic_int on;
    pthread_mutex_t lock;  /* submission may happen on several threads */
    vec nodes, edges;      /* edges grouped by destination, in node order */
    vec comms;             /* the requests' records (posted_us: node index once packed) */
    vec preds;             /* scratch: the dependencies of the node being recorded */
    dag_datum *data;       /* open addressing on key */
    size_t ndata, cap;
    long counts[4];        /* written on rank 0: tasks, requests, edges, messages */
} dag = {
    .lock = PTHREAD_MUTEX_INITIALIZER, .nodes = {.elem = sizeof(dag_node)}, .edges = {.elem = sizeof(dag_edge)},
    .comms = {.elem = sizeof(comm_rec)}, .preds = {.elem = sizeof(int32_t)},
};

void sw_trace_dag_enable(int on) { atomic_store(&dag.on, on != 0); }
int sw_trace_dag_enabled(void) { return atomic_load(&dag.on); }

void sw_trace_dag_clear(void)
{
    pthread_mutex_lock(&dag.lock);
    dag.nodes.n = dag.edges.n = dag.comms.n = 0;
    for (size_t i = 0; i < dag.cap; i++) vec_free(&dag.data[i].acc);
    free(dag.data);
    dag.data = NULL;
    dag.ndata = dag.cap = 0;
    pthread_mutex_unlock(&dag.lock);
}

static size_t dag_slot(const dag_datum *data, size_t cap, const void *key)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 32) & (cap - 1);
    while (data[i].key && data[i].key != key) i = (i + 1) & (cap - 1);
    return i;
}

/* the history of key (created empty); valid until the next call */
static dag_datum *dag_datum_of(const void *key)
{
    if (2 * (dag.ndata + 1) > dag.cap) {
        size_t cap = dag.cap ? 2 * dag.cap : 1024;
        dag_datum *d = calloc(cap, sizeof *d);
        if (!d) sw_fail(__FILE__, __LINE__, "calloc(task graph data)", -ENOMEM);
        for (size_t i = 0; i < dag.cap; i++)
            if (dag.data[i].key) d[dag_slot(d, cap, dag.data[i].key)] = dag.data[i];
        free(dag.data);
        dag.data = d;
        dag.cap = cap;
    }
    dag_datum *d = &dag.data[dag_slot(dag.data, dag.cap, key)];
    if (!d->key) {
        d->key = key;
        d->acc = (vec){.elem = sizeof(dag_acc)};
        dag.ndata++;
    }
    return d;
}

/* user data of the temporaries seen: never written through */
static const char dag_temp_mark;

/* Where h lies: a tensor's block (src/core/tensor.c), keyed by the tensor; any
 * other handle, a temporary, is the whole of itself. StarPU may give a
 * new temporary the address of one unregistered before: the new one has
 * no user data yet, and its history starts afresh. */
static sw_block dag_block(starpu_data_handle_t h, const void **key)
{
    void *ud = starpu_data_get_user_data(h);
    if (ud && ud != (void *)&dag_temp_mark) {
        const sw_block *b = ud;
        *key = b->t;
        return *b;
    }
    if (!ud) {
        dag_datum_of(h)->acc.n = 0;
        starpu_data_set_user_data(h, (void *)&dag_temp_mark);
    }
    *key = h;
    return (sw_block){NULL, 0, 1, 0, 1};
}

static int32_t dag_begin(int kind, const char *name)
{
    dag_node *n = vec_push(&dag.nodes);
    const sw_trace_ctx cur = sw_trace_get_ctx();
    *n = (dag_node){.kind = kind, .phase = cur.phase, .layer = cur.layer, .step = cur.step, .msg = -1};
    copy_name(n->name, sizeof n->name, name);
    dag.preds.n = 0;
    return (int32_t)(dag.nodes.n - 1);
}

/* StarPU's sequential consistency, by blocks: the access depends on every
 * live access it overlaps of which one writes; a write drops the accesses
 * it covers (what overlaps them later overlaps the write, which depends on
 * them). */
static void dag_access(int32_t node, starpu_data_handle_t h, enum starpu_data_access_mode mode)
{
    int write = (mode & (STARPU_W | STARPU_REDUX)) != 0;
    if (!h || (!write && !(mode & STARPU_R))) return; /* SCRATCH: the task's own buffer */
    const void *key;
    sw_block b = dag_block(h, &key);
    dag_datum *d = dag_datum_of(key);
    dag_acc *a = d->acc.p;
    size_t k = 0;
    for (size_t i = 0; i < d->acc.n; i++) {
        int overlap = a[i].r0 < b.r1 && b.r0 < a[i].r1 && a[i].c0 < b.c1 && b.c0 < a[i].c1;
        if (overlap && (write || a[i].write) && a[i].node != node) *(int32_t *)vec_push(&dag.preds) = a[i].node;
        int covered = write && b.r0 <= a[i].r0 && a[i].r1 <= b.r1 && b.c0 <= a[i].c0 && a[i].c1 <= b.c1;
        if (!covered) a[k++] = a[i];
    }
    d->acc.n = k;
    *(dag_acc *)vec_push(&d->acc) = (dag_acc){b.r0, b.r1, b.c0, b.c1, node, write};
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static void dag_end(int32_t node)
{
    int32_t *p = dag.preds.p;
    size_t n = dag.preds.n;
    if (n) qsort(p, n, sizeof *p, cmp_i32);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || p[i] != p[i - 1]) *(dag_edge *)vec_push(&dag.edges) = (dag_edge){p[i], node};
}

void sw_trace_dag_task(struct starpu_task *t)
{
    if (!atomic_load(&dag.on)) return;
    pthread_mutex_lock(&dag.lock);
    int32_t node = dag_begin(DAG_TASK, t->cl && t->cl->name ? t->cl->name : t->name);
    for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(t); i++)
        dag_access(node, STARPU_TASK_GET_HANDLE(t, i), STARPU_TASK_GET_MODE(t, i));
    dag_end(node);
    pthread_mutex_unlock(&dag.lock);
}

void sw_trace_dag_copy(starpu_data_handle_t dst, starpu_data_handle_t src)
{
    if (!atomic_load(&dag.on)) return;
    pthread_mutex_lock(&dag.lock);
    int32_t node = dag_begin(DAG_COPY, "copy");
    dag_access(node, src, STARPU_R);
    dag_access(node, dst, STARPU_W);
    dag_end(node);
    pthread_mutex_unlock(&dag.lock);
}

void sw_copy_then(starpu_data_handle_t dst, starpu_data_handle_t src, void (*done)(void *), void *arg)
{
    /* refused here rather than inside StarPU's copy: two matrices of one shape and element size */
    if (starpu_data_get_interface_id(dst) == STARPU_MATRIX_INTERFACE_ID &&
        starpu_data_get_interface_id(src) == STARPU_MATRIX_INTERFACE_ID) {
        const unsigned long dr = starpu_matrix_get_ny(dst), dc = starpu_matrix_get_nx(dst);
        const unsigned long sr = starpu_matrix_get_ny(src), sc = starpu_matrix_get_nx(src);
        const size_t de = starpu_matrix_get_elemsize(dst), se = starpu_matrix_get_elemsize(src);
        if (dr != sr || dc != sc || de != se)
            sw_failf(__FILE__, __LINE__, "sw_copy: dst [%lu,%lu] and src [%lu,%lu] differ in shape or element size "
                     "(%zu, %zu bytes)", dr, dc, sr, sc, de, se);
    }
    sw_trace_dag_copy(dst, src);
    SW_CHECK(starpu_data_cpy(dst, src, 1, done, arg));
}

void sw_copy(starpu_data_handle_t dst, starpu_data_handle_t src) { sw_copy_then(dst, src, NULL, NULL); }

/* StarPU-MPI orders a send as a reader of h, a receive as a writer */
void sw_trace_dag_request(const char *collective, const char *group, int chunk, MPI_Comm comm, int peer, int is_send,
                        int64_t tag, starpu_data_handle_t h)
{
    comm_rec r;
    memset(&r, 0, sizeof r);
    sw_trace_comm_rec_fill(&r, collective, group, chunk, comm, peer, is_send, tag, h);
    pthread_mutex_lock(&dag.lock);
    int32_t node = dag_begin(is_send ? DAG_SEND : DAG_RECV, collective);
    ((dag_node *)dag.nodes.p)[node].msg = (int32_t)dag.comms.n;
    *(comm_rec *)vec_push(&dag.comms) = r;
    dag_access(node, h, is_send ? STARPU_R : STARPU_W);
    dag_end(node);
    pthread_mutex_unlock(&dag.lock);
}

typedef struct dag_head {
    int32_t rank, reduced;
    int64_t nnodes, nedges, ncomms;
} dag_head;

#define SW_DAG_REDUCE_BYTES ((size_t)64 << 20) /* ancestor bitsets: up to 23170 nodes */

/* This rank's graph as drawn: copies contracted (their predecessors become
 * their successors'), nodes renumbered, edges implied by others dropped;
 * packed as head, nodes, edges, request records. Holds the lock. */
static char *dag_pack(int me, size_t *size)
{
    const size_t N = dag.nodes.n, E = dag.edges.n;
    const dag_node *nd = dag.nodes.p;
    const dag_edge *ed = dag.edges.p;
    /* predecessors among the drawn nodes: cp[cs[v] .. cs[v+1]) */
    size_t *cs = malloc(sizeof *cs * (N + 1));
    int32_t *id = malloc(sizeof *id * (N + 1));
    if (!cs || !id) sw_fail(__FILE__, __LINE__, "malloc(task graph)", -ENOMEM);
    vec cp = {.elem = sizeof(int32_t)};
    int32_t nv = 0;
    for (size_t v = 0, e = 0; v < N; v++) {
        cs[v] = cp.n;
        for (; e < E && (size_t)ed[e].to == v; e++) {
            size_t p = (size_t)ed[e].from;
            if (nd[p].kind != DAG_COPY) *(int32_t *)vec_push(&cp) = (int32_t)p;
            else
                for (size_t q = cs[p]; q < cs[p + 1]; q++) *(int32_t *)vec_push(&cp) = ((int32_t *)cp.p)[q];
        }
        size_t n = cp.n - cs[v], k = 0;
        int32_t *seg = n ? (int32_t *)cp.p + cs[v] : NULL;
        if (n) qsort(seg, n, sizeof *seg, cmp_i32);
        for (size_t i = 0; i < n; i++)
            if (i == 0 || seg[i] != seg[k - 1]) seg[k++] = seg[i];
        cp.n = cs[v] + k;
        cs[v + 1] = cp.n;
        id[v] = nd[v].kind == DAG_COPY ? -1 : nv++;
    }
    /* transitive reduction: with the predecessors in decreasing order, one
     * is implied when it is an ancestor of a later one; anc: the ancestors
     * of each drawn node, one bit per node */
    const size_t W = ((size_t)nv + 63) / 64;
    int reduce = (size_t)nv * W * 8 <= SW_DAG_REDUCE_BYTES;
    uint64_t *anc = reduce ? calloc((size_t)nv * W + 1, sizeof *anc) : NULL;
    if (reduce && !anc) sw_fail(__FILE__, __LINE__, "calloc(task graph ancestors)", -ENOMEM);
    vec out = {.elem = sizeof(dag_edge)};
    for (size_t v = 0; v < N; v++) {
        if (id[v] < 0) continue;
        size_t n = cs[v + 1] - cs[v];
        const int32_t *seg = n ? (int32_t *)cp.p + cs[v] : NULL;
        uint64_t *row = reduce ? anc + (size_t)id[v] * W : NULL;
        for (size_t i = n; i-- > 0;) {
            int32_t p = id[seg[i]];
            if (reduce) {
                if (row[p / 64] >> (p % 64) & 1) continue;
                const uint64_t *pr = anc + (size_t)p * W;
                for (size_t w = 0; w < W; w++) row[w] |= pr[w];
                row[p / 64] |= (uint64_t)1 << (p % 64);
            }
            *(dag_edge *)vec_push(&out) = (dag_edge){p, id[v]};
        }
    }
    free(anc);
    vec_free(&cp);
    free(cs);

    dag_head h = {me, reduce, nv, (int64_t)out.n, (int64_t)dag.comms.n};
    *size = sizeof h + (size_t)nv * sizeof(dag_node) + out.n * sizeof(dag_edge) + dag.comms.n * sizeof(comm_rec);
    char *blob = malloc(*size), *p = blob;
    if (!blob) sw_fail(__FILE__, __LINE__, "malloc(task graph blob)", -ENOMEM);
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    comm_rec *cr = dag.comms.p;
    for (size_t v = 0; v < N; v++) {
        if (id[v] < 0) continue;
        dag_node x = nd[v];
        x.rank = me;
        if (x.msg >= 0) { /* the matching of sends with receives orders by posted_us */
            cr[x.msg].rank = me;
            cr[x.msg].posted_us = id[v];
        }
        memcpy(p, &x, sizeof x);
        p += sizeof x;
    }
    if (out.n) memcpy(p, out.p, out.n * sizeof(dag_edge));
    p += out.n * sizeof(dag_edge);
    if (dag.comms.n) memcpy(p, cr, dag.comms.n * sizeof(comm_rec));
    vec_free(&out);
    free(id);
    return blob;
}

/* bench/plot_trace.py's PHASE_COLORS, by sw_phase */
static const char *dag_colors[SW_PHASE_COUNT] = {"#b0b0b0", "#3b75af", "#d1495b", "#66a61e",
                                                 "#8e6c8a", "#7f7f7f", "#f0a202"};

static int dag_dot(const char *path, const char *all, const int *displs, int nranks)
{
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    long *cnt = dag.counts;
    memset(dag.counts, 0, sizeof dag.counts);
    vec comms = {.elem = sizeof(comm_rec)};
    int lo = -1, hi = -1, reduced = 1;
    fputs("digraph starweave {\n"
          "// starweave task graph (sw_trace_dag_write): a cluster per rank; node r<rank>_<i> is the rank's i-th\n"
          "// submission (boxes: tasks, ellipses: MPI requests), filled by phase; solid edges: StarPU's implicit\n"
          "// data dependencies, dashed: a message, from its send to its matching receive\n"
          "node [style=filled, fontname=\"Helvetica\", fontsize=10];\n",
          f);
    for (int r = 0; r < nranks; r++) {
        const char *q = all + displs[r];
        dag_head h;
        memcpy(&h, q, sizeof h);
        q += sizeof h;
        long ntasks = 0;
        fprintf(f, "subgraph cluster_r%d {\nlabel=\"rank %d\";\n", r, r);
        for (int64_t i = 0; i < h.nnodes; i++, q += sizeof(dag_node)) {
            dag_node n;
            memcpy(&n, q, sizeof n);
            sw_trace_clean_name(n.name);
            if (n.step >= 0 && (lo < 0 || n.step < lo)) lo = n.step;
            if (n.step > hi) hi = n.step;
            char layer[16] = "";
            if (n.layer >= 0) snprintf(layer, sizeof layer, "\\nL%d", n.layer);
            sw_phase ph = (unsigned)n.phase < SW_PHASE_COUNT ? (sw_phase)n.phase : SW_PHASE_NONE;
            if (n.kind == DAG_TASK) {
                ntasks++;
                fprintf(f, "r%d_%lld [label=\"%s%s\", shape=box, fillcolor=\"%s\", tooltip=\"%s (%s, layer %d, step %d)\"];\n",
                        r, (long long)i, n.name, layer, dag_colors[ph], n.name, sw_phase_name(ph), n.layer, n.step);
            } else {
                const char *dir = n.kind == DAG_SEND ? "send to" : "recv from";
                const comm_rec *c = (const comm_rec *)(all + displs[r] + sizeof h + h.nnodes * sizeof(dag_node) +
                                                       h.nedges * sizeof(dag_edge)) + n.msg;
                comm_rec cr;
                memcpy(&cr, c, sizeof cr);
                fprintf(f, "r%d_%lld [label=\"%s\\n%s %d%s\", shape=ellipse, fillcolor=\"%s\", "
                        "tooltip=\"%s %s %d, %s, tag %lld (%s, layer %d, step %d)\"];\n",
                        r, (long long)i, n.name, dir, cr.peer, layer, dag_colors[SW_PHASE_COMM], n.name, dir, cr.peer,
                        cr.group, (long long)cr.tag, sw_phase_name(ph), n.layer, n.step);
            }
        }
        fprintf(f, "}\n// rank %d: %ld tasks, %lld requests, %lld edges\n", r, ntasks, (long long)(h.nnodes - ntasks),
                (long long)h.nedges);
        cnt[0] += ntasks;
        cnt[1] += (long)(h.nnodes - ntasks);
        cnt[2] += (long)h.nedges;
        reduced &= h.reduced;
        for (int64_t i = 0; i < h.nedges; i++, q += sizeof(dag_edge)) {
            dag_edge e;
            memcpy(&e, q, sizeof e);
            fprintf(f, "r%d_%d -> r%d_%d;\n", r, e.from, r, e.to);
        }
        for (int64_t i = 0; i < h.ncomms; i++, q += sizeof(comm_rec)) memcpy(vec_push(&comms), q, sizeof(comm_rec));
    }
    size_t nx;
    xfer *x = sw_trace_match_transfers(comms.p, comms.n, &nx);
    for (size_t i = 0; i < nx; i++)
        fprintf(f, "r%d_%.0f -> r%d_%.0f [style=dashed, color=\"%s\"];\n", x[i].send->rank, x[i].send->posted_us,
                x[i].recv->rank, x[i].recv->posted_us, dag_colors[SW_PHASE_COMM]);
    cnt[3] = (long)nx;
    char steps[32];
    if (hi > lo) snprintf(steps, sizeof steps, "steps %d..%d", lo, hi);
    else snprintf(steps, sizeof steps, "step %d", lo);
    fprintf(f, "label=\"starweave task graph, %s: %ld tasks, %ld requests, %ld edges, %zu messages%s\";\n", steps,
            cnt[0], cnt[1], cnt[2], nx, reduced ? "" : " (edges implied by others kept)");
    fprintf(f, "// edges implied by others %s\n}\n", reduced ? "left out" : "kept: too many nodes to reduce");
    free(x);
    vec_free(&comms);
    return fclose(f) == 0 ? 0 : -errno;
}

int sw_trace_dag_write(const char *dot_path)
{
    int me, n;
    SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    SW_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    size_t sz;
    pthread_mutex_lock(&dag.lock);
    char *blob = dag_pack(me, &sz);
    pthread_mutex_unlock(&dag.lock);
    MPI_Comm comm; /* private, as in sw_trace_collect */
    SW_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    int *displs;
    char *all = sw_trace_gather_blobs(comm, me, n, blob, sz, &displs);
    SW_CHECK(MPI_Comm_free(&comm));
    free(blob);
    int rc = me == 0 ? dag_dot(dot_path, all, displs, n) : 0;
    free(all);
    free(displs);
    SW_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return rc;
}

void sw_trace_dag_counts(long *ntasks, long *nrequests, long *nedges, long *nmessages)
{
    if (ntasks) *ntasks = dag.counts[0];
    if (nrequests) *nrequests = dag.counts[1];
    if (nedges) *nedges = dag.counts[2];
    if (nmessages) *nmessages = dag.counts[3];
}
