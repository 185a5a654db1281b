/* sw_trace on real tasks and messages (alone, or under mpirun through
 * tests/test_trace.sh): two steps of tiled GEMMs labelled forward/backward
 * with layers, plus (2 ranks or more) a direct and a ring all-reduce per
 * step; then the merged trace is written as Chrome JSON, Paje and an overlap
 * report, and the files are read back and checked:
 *  - the JSON parses (a small parser below); every rank has a process_name,
 *    every worker of every rank a thread_name, every rank task events;
 *  - the GEMM events of each rank are exactly the GEMMs it submitted (count,
 *    phase, layer, step, flops and bytes of the tile shapes), and sw_stats
 *    counts the same tasks;
 *  - no two events of one worker track overlap;
 *  - every communication event has bytes > 0 and a peer that is another
 *    rank; the bytes of each rank's sends equal sw_comm_traffic's count;
 *    sends are matched with receives on the transfer track;
 *  - the Paje file: a header of %EventDef blocks with the definitions used,
 *    every event line has its definition's field count, times never go
 *    back, containers exist before use, push/pop balance per container;
 *  - the overlap rows: 0 <= overlap <= comm, overlap <= compute,
 *    compute, comm <= wall, idle >= 0, compute + comm - overlap + idle =
 *    wall (no OFFLOAD tasks here); the JSON report has the same rows;
 *  - the task graph of step 0 (dot, read back by a small reader below):
 *    as many tasks and requests per rank as the trace has in step 0, every
 *    request matched, acyclic, every dependency from an earlier submission
 *    to a later one of the same rank, each forward GEMM tile before the
 *    backward GEMM that reads its tile (1 rank: those 4 edges only);
 *  - the task graph of a small case whose dependencies are known exactly:
 *    writes of row tiles, reads of column tiles of the same tensor, a copy
 *    (passed through), a whole write after the reads (edges implied by
 *    others left out).
 *   test_trace [OUTPUT_PREFIX]   files: PREFIX.json, PREFIX.paje, PREFIX.overlap.json, PREFIX.dot,
 *                                PREFIX.blocks.dot */
#include <ctype.h>
#include <string.h>

#include "starweave/trace.h"
#include "testutil.h"

/* ---------------- a small JSON parser (RFC 8259 syntax) ---------------- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
typedef struct jv {
    int type;
    double num;
    char *str;
    struct jv *item;  /* array items or object values */
    char **key;       /* object keys */
    int n;
} jv;

typedef struct jp {
    const char *s;
    int err;
} jp;

static void jws(jp *p)
{
    while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r') p->s++;
}

static int jparse(jp *p, jv *v, int depth);

static char *jstring(jp *p)
{
    if (*p->s != '"') return p->err = 1, NULL;
    p->s++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    if (!out) exit(99);
    for (;;) {
        unsigned char ch = (unsigned char)*p->s++;
        if (ch == '"') break;
        if (ch < 0x20) return free(out), p->err = 1, NULL; /* raw control characters are not allowed */
        if (ch == '\\') {
            char e = *p->s++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++)
                    if (!isxdigit((unsigned char)p->s[i])) return free(out), p->err = 1, NULL;
                p->s += 4;
                ch = '?';
            } else if (strchr("\"\\/bfnrt", e) && e) {
                ch = (unsigned char)(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'b' || e == 'f' || e == 'r' ? ' ' : e);
            } else {
                return free(out), p->err = 1, NULL;
            }
        }
        if (n + 2 > cap) {
            char *q = realloc(out, cap *= 2);
            if (!q) exit(99);
            out = q;
        }
        out[n++] = (char)ch;
    }
    out[n] = 0;
    return out;
}

static int jnumber(jp *p, jv *v)
{
    const char *s = p->s;
    if (*s == '-') s++;
    if (*s == '0') s++;
    else if (isdigit((unsigned char)*s)) while (isdigit((unsigned char)*s)) s++;
    else return p->err = 1;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s)) return p->err = 1;
        while (isdigit((unsigned char)*s)) s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!isdigit((unsigned char)*s)) return p->err = 1;
        while (isdigit((unsigned char)*s)) s++;
    }
    v->type = J_NUM;
    v->num = strtod(p->s, NULL);
    p->s = s;
    return 0;
}

static void jpush(jv *v, const jv *item, char *key)
{
    jv *it = realloc(v->item, sizeof *it * (size_t)(v->n + 1));
    char **k = realloc(v->key, sizeof *k * (size_t)(v->n + 1));
    if (!it || !k) exit(99);
    v->item = it;
    v->key = k;
    v->item[v->n] = *item;
    v->key[v->n] = key;
    v->n++;
}

static int jparse(jp *p, jv *v, int depth)
{
    memset(v, 0, sizeof *v);
    if (depth > 64) return p->err = 1;
    jws(p);
    char ch = *p->s;
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        v->type = ch == '{' ? J_OBJ : J_ARR;
        p->s++;
        jws(p);
        if (*p->s == close) return p->s++, 0;
        for (;;) {
            char *key = NULL;
            jws(p);
            if (v->type == J_OBJ) {
                if (!(key = jstring(p))) return p->err = 1;
                jws(p);
                if (*p->s++ != ':') return free(key), p->err = 1;
            }
            jv item;
            if (jparse(p, &item, depth + 1)) return free(key), p->err = 1;
            jpush(v, &item, key);
            jws(p);
            if (*p->s == ',') {
                p->s++;
                continue;
            }
            if (*p->s == close) return p->s++, 0;
            return p->err = 1;
        }
    }
    if (ch == '"') {
        v->type = J_STR;
        return (v->str = jstring(p)) ? 0 : (p->err = 1);
    }
    if (!strncmp(p->s, "true", 4) || !strncmp(p->s, "null", 4)) {
        v->type = p->s[0] == 't' ? J_BOOL : J_NULL;
        v->num = p->s[0] == 't';
        p->s += 4;
        return 0;
    }
    if (!strncmp(p->s, "false", 5)) {
        v->type = J_BOOL;
        p->s += 5;
        return 0;
    }
    return jnumber(p, v);
}

static void jfree(jv *v)
{
    for (int i = 0; i < v->n; i++) {
        jfree(&v->item[i]);
        if (v->key) free(v->key[i]);
    }
    free(v->item);
    free(v->key);
    free(v->str);
}

static const jv *jget(const jv *o, const char *key)
{
    if (!o || o->type != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->key[i], key)) return &o->item[i];
    return NULL;
}

static double jnum(const jv *o, const char *key, double dflt)
{
    const jv *v = jget(o, key);
    return v && v->type == J_NUM ? v->num : dflt;
}

static const char *jstr(const jv *o, const char *key)
{
    const jv *v = jget(o, key);
    return v && v->type == J_STR ? v->str : "";
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) exit(99);
    s[n] = 0;
    fclose(f);
    return s;
}

/* whole document parsed, nothing after it */
static int json_load(const char *path, jv *doc)
{
    char *s = slurp(path);
    if (!s) return 0;
    jp p = {s, 0};
    int ok = jparse(&p, doc, 0) == 0 && !p.err;
    if (ok) {
        jws(&p);
        ok = *p.s == 0;
    }
    free(s);
    return ok;
}

/* ---------------- the workload ---------------- */

#define N 384    /* GEMM size */
#define TILES 4  /* row tiles per GEMM: one task each */
#define STEPS 2
#define GEMMS_PER_RANK (STEPS * 2 * TILES)

static int me, world;

static void gemm_tiles(sw_tensor *a, sw_tensor *b, sw_tensor *c)
{
    starpu_data_handle_t *at = sw_tensor_tiles(a, SW_ROWS, TILES, STARPU_R);
    starpu_data_handle_t bw = sw_tensor_whole(b, STARPU_R);
    starpu_data_handle_t *ct = sw_tensor_tiles(c, SW_ROWS, TILES, STARPU_W);
    for (int i = 0; i < TILES; i++) sw_gemm(at[i], 0, bw, 0, ct[i], 1.0f, 0.0f);
}

/* ---------------- checks of the Chrome JSON ---------------- */

typedef struct ev {
    int pid, tid;
    double ts, dur;
} ev;

static int cmp_ev(const void *x, const void *y)
{
    const ev *a = x, *b = y;
    if (a->pid != b->pid) return a->pid - b->pid;
    if (a->tid != b->tid) return a->tid - b->tid;
    return (a->ts > b->ts) - (a->ts < b->ts);
}

static void check_json(const char *path, const int *nworkers, const double *sent)
{
    jv doc;
    if (!tu_true("Chrome trace JSON parses", json_load(path, &doc))) return;
    const jv *evs = jget(&doc, "traceEvents");
    if (!tu_true("traceEvents is an array", evs && evs->type == J_ARR)) return;
    long ntasks_m, ncomm_m;
    int nranks_m;
    sw_trace_counts(&ntasks_m, &ncomm_m, &nranks_m);

    int *has_proc = calloc((size_t)world, sizeof(int)), *task_ev = calloc((size_t)world, sizeof(int));
    int *gemm_ev = calloc((size_t)world, sizeof(int)), *gemm_ok = calloc((size_t)world, sizeof(int));
    int *labels = calloc((size_t)world * STEPS * 2, sizeof(int));
    double *sent_seen = calloc((size_t)world, sizeof(double));
    int maxw = 0;
    for (int r = 0; r < world; r++) maxw = nworkers[r] > maxw ? nworkers[r] : maxw;
    int *has_thread = calloc((size_t)(world * maxw + 1), sizeof(int));
    ev *wev = malloc(sizeof *wev * (size_t)(evs->n + 1));
    if (!has_proc || !task_ev || !gemm_ev || !gemm_ok || !labels || !sent_seen || !has_thread || !wev) exit(99);
    int nwev = 0, ncomm = 0, comm_ok = 1, nxfer = 0, xfer_ok = 1, x_ok = 1, ncomm_tasks = 0, comm_phase_ok = 1;
    const double tile_flops = 2.0 * (N / TILES) * N * N;
    const double tile_bytes = 4.0 * ((N / TILES) * N + N * N + (N / TILES) * N);
    for (int i = 0; i < evs->n; i++) {
        const jv *e = &evs->item[i];
        const char *ph = jstr(e, "ph"), *name = jstr(e, "name"), *cat = jstr(e, "cat");
        int pid = (int)jnum(e, "pid", -1), tid = (int)jnum(e, "tid", -1);
        const jv *args = jget(e, "args");
        if (!strcmp(ph, "M")) {
            if (!strcmp(name, "process_name") && pid >= 0 && pid < world) has_proc[pid] = 1;
            if (!strcmp(name, "thread_name") && pid >= 0 && pid < world && tid >= 0 && tid < nworkers[pid])
                has_thread[pid * maxw + tid] = 1;
            continue;
        }
        if (strcmp(ph, "X") != 0) continue;
        double ts = jnum(e, "ts", -1), dur = jnum(e, "dur", -1);
        if (!(ts >= 0 && dur >= 0)) x_ok = 0;
        if (!strcmp(cat, "mpi")) {
            ncomm++;
            int peer = (int)jnum(args, "peer", -1);
            double bytes = jnum(args, "bytes", -1);
            if (!(bytes > 0 && peer >= 0 && peer < world && peer != pid && pid >= 0 && pid < world)) comm_ok = 0;
            if (!strcmp(jstr(args, "dir"), "send") && pid >= 0 && pid < world) sent_seen[pid] += bytes;
        } else if (!strcmp(cat, "transfer")) {
            nxfer++;
            int src = (int)jnum(args, "src", -1), dst = (int)jnum(args, "dst", -1);
            if (!(jnum(args, "bytes", -1) > 0 && src >= 0 && dst >= 0 && src < world && dst < world && src != dst))
                xfer_ok = 0;
        } else if (pid >= 0 && pid < world) { /* a task on a worker track */
            task_ev[pid]++;
            if (tid < 0 || tid >= nworkers[pid]) x_ok = 0;
            wev[nwev++] = (ev){pid, tid, ts, dur};
            if (!strncmp(name, "comm_", 5)) {
                ncomm_tasks++;
                comm_phase_ok &= !strcmp(jstr(args, "phase"), "comm");
            }
            if (!strcmp(name, "gemm")) {
                gemm_ev[pid]++;
                const char *phase = jstr(args, "phase");
                int layer = (int)jnum(args, "layer", -9), step = (int)jnum(args, "step", -9);
                int fwd = !strcmp(phase, "forward"), bwd = !strcmp(phase, "backward");
                /* forward tiles: layer 0; backward: layer 1 (see main) */
                if ((fwd && layer == 0) || (bwd && layer == 1)) {
                    if (step >= 0 && step < STEPS) labels[(pid * STEPS + step) * 2 + bwd]++;
                }
                if (jnum(args, "flops", -1) == tile_flops && jnum(args, "bytes", -1) == tile_bytes) gemm_ok[pid]++;
            }
        }
    }
    int procs = 1, threads = 1, tasks = 1, gemms = 1, gemm_args = 1, lab = 1, sent_ok = 1;
    for (int r = 0; r < world; r++) {
        procs &= has_proc[r];
        tasks &= task_ev[r] > 0;
        gemms &= gemm_ev[r] == GEMMS_PER_RANK;
        gemm_args &= gemm_ok[r] == GEMMS_PER_RANK;
        for (int w = 0; w < nworkers[r]; w++) threads &= has_thread[r * maxw + w];
        for (int s = 0; s < STEPS * 2; s++) lab &= labels[r * STEPS * 2 + s] == TILES;
        if (world > 1) sent_ok &= sent_seen[r] == sent[r] && sent[r] > 0;
    }
    char what[256];
    snprintf(what, sizeof what, "every rank (%d) has a process_name and task events", world);
    tu_true(what, procs && tasks);
    tu_true("every worker of every rank has a thread_name", threads);
    snprintf(what, sizeof what, "each rank's trace holds exactly its %d GEMM tasks", GEMMS_PER_RANK);
    tu_true(what, gemms);
    tu_true("GEMM events carry phase/layer/step as set at submission (4 per rank, step, phase)", lab);
    snprintf(what, sizeof what, "GEMM events carry flops %.0f (STARPU_FLOPS) and bytes %.0f (buffer sizes)", tile_flops,
             tile_bytes);
    tu_true(what, gemm_args);
    tu_true("complete events have ts >= 0, dur >= 0 and tasks sit on worker tracks", x_ok);
    qsort(wev, (size_t)nwev, sizeof *wev, cmp_ev);
    int overlap = 0;
    for (int i = 1; i < nwev; i++)
        if (wev[i].pid == wev[i - 1].pid && wev[i].tid == wev[i - 1].tid && wev[i].ts < wev[i - 1].ts + wev[i - 1].dur - 1e-6)
            overlap++;
    snprintf(what, sizeof what, "no two of the %d task events overlap on one worker track", nwev);
    tu_true(what, overlap == 0);
    snprintf(what, sizeof what, "task and request events in the file match the merged trace (%ld, %ld)", ntasks_m, ncomm_m);
    tu_true(what, nwev == ntasks_m && ncomm == ncomm_m && nranks_m == world);
    if (world > 1) {
        snprintf(what, sizeof what, "%d communication events, each with bytes > 0 and a peer rank", ncomm);
        tu_true(what, ncomm > 0 && comm_ok);
        tu_true("bytes of each rank's send events = sw_comm_traffic's sent bytes", sent_ok);
        snprintf(what, sizeof what, "%d transfers (each send matched with its receive), with bytes, src != dst", nxfer);
        tu_true(what, nxfer > 0 && nxfer * 2 == ncomm && xfer_ok);
        snprintf(what, sizeof what, "the collectives' %d tasks (comm_*) are labelled phase comm", ncomm_tasks);
        tu_true(what, ncomm_tasks > 0 && comm_phase_ok);
    } else {
        tu_true("one rank: no communication events", ncomm == 0 && nxfer == 0);
    }
    free(has_proc);
    free(task_ev);
    free(gemm_ev);
    free(gemm_ok);
    free(labels);
    free(sent_seen);
    free(has_thread);
    free(wev);
    jfree(&doc);
}

/* ---------------- checks of the Paje file ---------------- */

#define PJ_MAX_DEF 64
typedef struct pj_def {
    char name[64];
    int nfields, time_field, cont_field, alias_field;
} pj_def;

/* splits a Paje line into fields (double-quoted strings are one field) */
static int pj_fields(char *line, char **f, int max)
{
    int n = 0;
    char *s = line;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        if (n == max) return -1;
        if (*s == '"') {
            f[n++] = ++s;
            while (*s && *s != '"') s++;
            if (*s != '"') return -1;
            *s++ = 0;
        } else {
            f[n++] = s;
            while (*s && *s != ' ' && *s != '\t' && *s != '\n') s++;
            if (*s) *s++ = 0;
        }
    }
    return n;
}

typedef struct pj_cont {
    char alias[32];
    int depth;
} pj_cont;

static void check_paje(const char *path)
{
    char *text = slurp(path);
    if (!tu_true("Paje file readable", text != NULL)) return;
    pj_def defs[PJ_MAX_DEF];
    memset(defs, 0, sizeof defs);
    int in_def = -1, header_ok = 1, events = 0, bad_lines = 0, backwards = 0, unknown_cont = 0, bad_pop = 0;
    int in_header = 1, pushes = 0;
    double last_t = -1;
    pj_cont *cont = NULL;
    int ncont = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '%') {
            if (!in_header) header_ok = 0; /* definitions come first */
            char kw[32], name[64];
            int id;
            if (sscanf(line, "%%%31s %63s %d", kw, name, &id) == 3 && !strcmp(kw, "EventDef")) {
                if (in_def >= 0 || id < 0 || id >= PJ_MAX_DEF || defs[id].name[0]) header_ok = 0;
                else {
                    in_def = id;
                    snprintf(defs[id].name, sizeof defs[id].name, "%s", name);
                    defs[id].time_field = defs[id].cont_field = defs[id].alias_field = -1;
                }
            } else if (sscanf(line, "%%%31s", kw) == 1 && !strcmp(kw, "EndEventDef")) {
                if (in_def < 0) header_ok = 0;
                in_def = -1;
            } else if (in_def >= 0 && sscanf(line, "%% %63s", name) == 1) {
                pj_def *d = &defs[in_def];
                if (!strcmp(name, "Time")) d->time_field = d->nfields + 1;
                if (!strcmp(name, "Container")) d->cont_field = d->nfields + 1;
                if (!strcmp(name, "Alias")) d->alias_field = d->nfields + 1;
                d->nfields++;
            } else {
                header_ok = 0;
            }
            continue;
        }
        in_header = 0;
        char *f[16];
        int nf = pj_fields(line, f, 16);
        int id = nf > 0 ? atoi(f[0]) : -1;
        if (nf <= 0 || id < 0 || id >= PJ_MAX_DEF || !defs[id].name[0] || nf != defs[id].nfields + 1) {
            bad_lines++;
            continue;
        }
        const pj_def *d = &defs[id];
        events++;
        if (d->time_field > 0) {
            double t = strtod(f[d->time_field], NULL);
            if (t < last_t) backwards++;
            last_t = t;
        }
        int is_create = !strcmp(d->name, "PajeCreateContainer");
        if (d->cont_field > 0 && strcmp(f[d->cont_field], "0") != 0) {
            int found = -1;
            for (int i = 0; i < ncont; i++)
                if (!strcmp(cont[i].alias, f[d->cont_field])) found = i;
            if (found < 0) unknown_cont++;
            else if (!strcmp(d->name, "PajePushState")) cont[found].depth++, pushes++;
            else if (!strcmp(d->name, "PajePopState") && --cont[found].depth < 0) bad_pop++;
        }
        if (is_create && d->alias_field > 0) {
            pj_cont *p = realloc(cont, sizeof *p * (size_t)(ncont + 1));
            if (!p) exit(99);
            cont = p;
            snprintf(cont[ncont].alias, sizeof cont[ncont].alias, "%s", f[d->alias_field]);
            cont[ncont++].depth = 0;
        }
    }
    static const char *need[] = {"PajeDefineContainerType", "PajeDefineStateType", "PajeDefineEntityValue",
                                 "PajeCreateContainer", "PajeDestroyContainer", "PajePushState", "PajePopState"};
    for (size_t k = 0; k < sizeof need / sizeof *need; k++) {
        int found = 0;
        for (int i = 0; i < PJ_MAX_DEF; i++) found |= !strcmp(defs[i].name, need[k]);
        header_ok &= found;
    }
    for (int i = 0; i < ncont; i++) bad_pop += cont[i].depth != 0;
    long ntasks, ncomm;
    sw_trace_counts(&ntasks, &ncomm, NULL);
    tu_true("Paje header: %EventDef blocks for the container, state and value definitions used", header_ok && in_def < 0);
    char what[256];
    snprintf(what, sizeof what, "Paje: %d event lines, each with its definition's field count (%d bad)", events, bad_lines);
    tu_true(what, events > 0 && bad_lines == 0);
    snprintf(what, sizeof what, "Paje: times never go back (%d did)", backwards);
    tu_true(what, backwards == 0);
    snprintf(what, sizeof what, "Paje: %d containers, all created before use (%d unknown)", ncont, unknown_cont);
    tu_true(what, ncont > world && unknown_cont == 0);
    snprintf(what, sizeof what, "Paje: %d states pushed (= %ld tasks + %ld requests), push/pop balanced", pushes, ntasks, ncomm);
    tu_true(what, pushes == ntasks + ncomm && bad_pop == 0);
    free(cont);
    free(text);
}

/* ---------------- checks of the task graph (dot) ---------------- */

typedef struct dot_graph {
    int n, ne, nmsg, nranks;
    int *rank, *idx, *task, *base; /* per node; base: first node of each rank */
    char (*op)[40];
    int *from, *to, *dashed;       /* per edge, node numbers */
} dot_graph;

static void dot_free(dot_graph *g)
{
    free(g->rank), free(g->idx), free(g->task), free(g->base), free(g->op);
    free(g->from), free(g->to), free(g->dashed);
}

static int line_has(const char *line, const char *what)
{
    const char *end = strchr(line, '\n'), *p = strstr(line, what);
    return p && (!end || p < end);
}

static int *grow_int(int *p, int n)
{
    int *q = realloc(p, sizeof *q * (size_t)(n + 1));
    if (!q) exit(99);
    return q;
}

/* what sw_trace_dag_write writes: node lines "r<rank>_<i> [label=\"op...",
 * edge lines "r<a>_<i> -> r<b>_<j>" ([style=dashed]: a message). Returns
 * 0 when a node is out of order or an edge names no node. */
static int dot_read(const char *path, dot_graph *g)
{
    memset(g, 0, sizeof *g);
    char *text = slurp(path);
    if (!text || strncmp(text, "digraph ", 8) != 0) return free(text), 0;
    int ok = 1;
    for (int pass = 0; pass < 2; pass++)
        for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            int r, i, r2, j;
            char op[40];
            if (pass == 0 && sscanf(line, "r%d_%d [label=\"%39[^\\\"]", &r, &i, op) == 3) {
                ok &= r == (g->n ? g->rank[g->n - 1] + (i == 0) : 0) && i == (i == 0 ? 0 : g->idx[g->n - 1] + 1);
                g->rank = grow_int(g->rank, g->n), g->idx = grow_int(g->idx, g->n), g->task = grow_int(g->task, g->n);
                char(*o)[40] = realloc(g->op, sizeof *o * (size_t)(g->n + 1));
                if (!o) exit(99);
                g->op = o;
                g->rank[g->n] = r, g->idx[g->n] = i, g->task[g->n] = line_has(line, "shape=box");
                snprintf(g->op[g->n], sizeof g->op[g->n], "%s", op);
                if (i == 0) g->base = grow_int(g->base, g->nranks), g->base[g->nranks++] = g->n;
                g->n++;
            } else if (pass == 1 && sscanf(line, "r%d_%d -> r%d_%d", &r, &i, &r2, &j) == 4) {
                if (r < 0 || r2 < 0 || r >= g->nranks || r2 >= g->nranks) return free(text), 0;
                int a = g->base[r] + i, b = g->base[r2] + j;
                ok &= a < g->n && b < g->n && g->rank[a] == r && g->rank[b] == r2 && g->idx[a] == i && g->idx[b] == j;
                g->from = grow_int(g->from, g->ne), g->to = grow_int(g->to, g->ne), g->dashed = grow_int(g->dashed, g->ne);
                g->from[g->ne] = a, g->to[g->ne] = b;
                g->dashed[g->ne] = line_has(line, "style=dashed");
                g->nmsg += g->dashed[g->ne++];
            }
        }
    free(text);
    return ok;
}

static int dot_has(const dot_graph *g, int a, int b)
{
    for (int e = 0; e < g->ne; e++)
        if (g->from[e] == a && g->to[e] == b && !g->dashed[e]) return 1;
    return 0;
}

/* dependencies within a rank go forward in submission order; no cycle
 * through the messages either (Kahn) */
static int dot_forward_acyclic(const dot_graph *g)
{
    int ok = 1, *indeg = calloc((size_t)g->n + 1, sizeof(int)), *q = malloc(sizeof(int) * ((size_t)g->n + 1));
    if (!indeg || !q) exit(99);
    for (int e = 0; e < g->ne; e++) {
        indeg[g->to[e]]++;
        if (!g->dashed[e]) ok &= g->rank[g->from[e]] == g->rank[g->to[e]] && g->from[e] < g->to[e];
    }
    int nq = 0, done = 0;
    for (int v = 0; v < g->n; v++)
        if (!indeg[v]) q[nq++] = v;
    while (done < nq) {
        int v = q[done++];
        for (int e = 0; e < g->ne; e++)
            if (g->from[e] == v && --indeg[g->to[e]] == 0) q[nq++] = g->to[e];
    }
    free(indeg);
    free(q);
    return ok && done == g->n;
}

/* The graph of step 0 against the trace's own records of step 0. */
static void check_dag(const char *path)
{
    dot_graph g;
    int parsed = dot_read(path, &g);
    tu_true("task graph: the dot file reads back (nodes in submission order, edges between nodes)", parsed);
    if (!parsed) return dot_free(&g);
    int n = sw_trace_overlap(NULL, 0);
    sw_overlap *o = calloc((size_t)n + 1, sizeof *o);
    long *tasks = calloc((size_t)world, sizeof(long)), *reqs = calloc((size_t)world, sizeof(long));
    if (!o || !tasks || !reqs) exit(99);
    sw_trace_overlap(o, n);
    int same = g.nranks == world;
    for (int v = 0; v < g.n; v++) {
        if (g.task[v]) tasks[g.rank[v]]++;
        else reqs[g.rank[v]]++;
    }
    for (int i = 0; i < n; i++)
        if (o[i].step == 0) same &= tasks[o[i].rank] == o[i].ntasks && reqs[o[i].rank] == o[i].ncomm;
    long nt, nr, ne, nm, all_tasks = 0, all_reqs = 0;
    for (int r = 0; r < world; r++) all_tasks += tasks[r], all_reqs += reqs[r];
    sw_trace_dag_counts(&nt, &nr, &ne, &nm);
    char what[256];
    snprintf(what, sizeof what, "task graph: %ld tasks and %ld requests, per rank as many as the trace has in step 0",
             all_tasks, all_reqs);
    tu_true(what, same && nt == all_tasks && nr == all_reqs && ne + nm == g.ne && nm == g.nmsg);
    tu_true("task graph: every request is matched (messages = requests / 2)", 2 * g.nmsg == all_reqs);
    tu_true("task graph: acyclic, dependencies from earlier to later submissions of one rank", dot_forward_acyclic(&g));
    int deps = 1;
    for (int r = 0; r < world; r++)
        for (int i = 0; i < TILES; i++)
            deps &= !strcmp(g.op[g.base[r] + i], "gemm") && dot_has(&g, g.base[r] + i, g.base[r] + TILES + i);
    tu_true("task graph: forward GEMM of tile i -> backward GEMM reading tile i, every rank", deps);
    if (world == 1) tu_true("task graph, 1 rank: those 4 edges only", g.ne == TILES);
    free(o), free(tasks), free(reqs);
    dot_free(&g);
}

/* Known dependencies: z's 4 row tiles written (nodes 0-3), its 2 column
 * tiles read into w's (4, 5: each after all 4 writes), w copied to v
 * (not a node), v read (6: after 4 and 5 through the copy), z written
 * whole (7: after the readers 4, 5; the edges from 0-3 are implied).
 * Every rank on its own. Collective. */
static void dag_blocks(sw_comm *comm, const char *path)
{
    sw_tensor *x = sw_tensor_new2d("x", SW_F32, 8, 8), *y = sw_tensor_new2d("y", SW_F32, 8, 8);
    sw_tensor *z = sw_tensor_new2d("z", SW_F32, 8, 8), *w = sw_tensor_new2d("w", SW_F32, 8, 8);
    sw_tensor *v = sw_tensor_new2d("v", SW_F32, 8, 8), *u = sw_tensor_new2d("u", SW_F32, 8, 8);
    sw_tensor_fill(x, 1.0f);
    sw_tensor_fill(y, 1.0f);
    sw_trace_reset();
    sw_trace_dag_enable(1);
    starpu_data_handle_t *xr = sw_tensor_tiles(x, SW_ROWS, 4, STARPU_R), yw = sw_tensor_whole(y, STARPU_R);
    starpu_data_handle_t *zr = sw_tensor_tiles(z, SW_ROWS, 4, STARPU_W);
    for (int i = 0; i < 4; i++) sw_gemm(xr[i], 0, yw, 0, zr[i], 1.0f, 0.0f);
    starpu_data_handle_t *zc = sw_tensor_tiles(z, SW_COLS, 2, STARPU_R), *wc = sw_tensor_tiles(w, SW_COLS, 2, STARPU_W);
    for (int j = 0; j < 2; j++) sw_add(zc[j], zc[j], wc[j]);
    sw_ring_shift(comm, SW_GROUP_WORLD, w, v, 0); /* a shift by 0: a copy */
    sw_add(sw_tensor_whole(v, STARPU_R), sw_tensor_whole(v, STARPU_R), sw_tensor_whole(u, STARPU_W));
    sw_add(sw_tensor_whole(x, STARPU_R), sw_tensor_whole(x, STARPU_R), sw_tensor_whole(z, STARPU_W));
    sw_trace_dag_enable(0);
    int rc = sw_trace_dag_write(path);
    tu_check_ranks("sw_trace_dag_write returns 0 (known dependencies)", rc == 0);
    if (me == 0 && rc == 0) {
        dot_graph g;
        int ok = dot_read(path, &g) && g.nranks == world && g.n == 8 * world && g.ne == 12 * world && g.nmsg == 0;
        for (int r = 0; ok && r < world; r++) {
            int b = g.base[r];
            for (int i = 0; i < 4; i++) ok &= dot_has(&g, b + i, b + 4) && dot_has(&g, b + i, b + 5);
            ok &= dot_has(&g, b + 4, b + 6) && dot_has(&g, b + 5, b + 6);
            ok &= dot_has(&g, b + 4, b + 7) && dot_has(&g, b + 5, b + 7);
        }
        tu_true("task graph of known dependencies: tiles of two splits overlap, a copy passes them on, implied edges "
                "left out (12 edges per rank)", ok);
        dot_free(&g);
    }
    sw_tensor *all[] = {x, y, z, w, v, u};
    for (int i = 0; i < 6; i++) sw_tensor_free(all[i]);
}

/* ---------------- checks of the overlap report ---------------- */

static void check_overlap(const char *path)
{
    int n = sw_trace_overlap(NULL, 0);
    sw_overlap *o = calloc((size_t)n + 1, sizeof *o);
    if (!o) exit(99);
    sw_trace_overlap(o, n);
    const double eps = 1e-6;
    int ok = 1, whole = 0, steps = 0, comm_rows = 0;
    for (int i = 0; i < n; i++) {
        const sw_overlap *r = &o[i];
        double busy = r->compute_us + r->comm_us - r->overlap_us;
        ok &= r->overlap_us >= 0 && r->overlap_us <= r->comm_us + eps && r->overlap_us <= r->compute_us + eps;
        ok &= r->compute_us <= r->wall_us + eps && r->comm_us <= r->wall_us + eps && r->idle_us >= 0;
        ok &= fabs(busy + r->idle_us - r->wall_us) <= 1e-6 * (1 + r->wall_us);
        ok &= r->overlap_share >= 0 && r->overlap_share <= 1 + eps;
        whole += r->step == -1 && r->ntasks > 0;
        steps += r->step >= 0;
        comm_rows += r->step == -1 && r->comm_us > 0;
        printf("# overlap rank %d step %2d: wall %9.1f us compute %9.1f comm %9.1f overlap %8.1f (%.0f%%) idle %9.1f\n",
               r->rank, r->step, r->wall_us, r->compute_us, r->comm_us, r->overlap_us, 100 * r->overlap_share, r->idle_us);
    }
    char what[256];
    snprintf(what, sizeof what, "overlap: %d rows consistent (0 <= overlap <= comm, compute; busy + idle = wall)", n);
    tu_true(what, n > 0 && ok);
    snprintf(what, sizeof what, "overlap: a whole-trace row per rank and %d per-step rows", STEPS);
    tu_true(what, whole == world && steps == world * STEPS);
    if (world > 1) tu_true("overlap: every rank has communication time", comm_rows == world);
    jv doc;
    int parsed = json_load(path, &doc);
    const jv *rows = parsed ? jget(&doc, "overlap") : NULL;
    int same = rows && rows->type == J_ARR && rows->n == n && (int)jnum(&doc, "ranks", -1) == world;
    for (int i = 0; same && i < n; i++)
        same = (int)jnum(&rows->item[i], "rank", -9) == o[i].rank && (int)jnum(&rows->item[i], "step", -9) == o[i].step &&
               fabs(jnum(&rows->item[i], "comm_us", -1) - o[i].comm_us) < 1e-3 &&
               fabs(jnum(&rows->item[i], "overlap_us", -1) - o[i].overlap_us) < 1e-3;
    tu_true("overlap JSON parses and holds the same rows", parsed && same);
    if (parsed) jfree(&doc);
    free(o);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    me = sw_rank();
    world = sw_world_size();
    const char *prefix = argc > 1 ? argv[1] : "test_trace";
    char json[512], paje[512], ovl[512], dot[512], blocks[512];
    snprintf(json, sizeof json, "%s.json", prefix);
    snprintf(dot, sizeof dot, "%s.dot", prefix);
    snprintf(blocks, sizeof blocks, "%s.blocks.dot", prefix);
    snprintf(paje, sizeof paje, "%s.paje", prefix);
    snprintf(ovl, sizeof ovl, "%s.overlap.json", prefix);

    sw_mesh *mesh = sw_mesh_create(NULL);
    sw_comm *comm = sw_comm_create(mesh);
    sw_tensor *a = sw_tensor_new2d("a", SW_F32, N, N), *b = sw_tensor_new2d("b", SW_F32, N, N);
    sw_tensor *c = sw_tensor_new2d("c", SW_F32, N, N), *d = sw_tensor_new2d("d", SW_F32, N, N);
    sw_tensor *s = sw_tensor_new2d("s", SW_F32, 64, 64);
    sw_tensor_fill(a, 0.5f);
    sw_tensor_fill(b, 0.25f);
    sw_stats_enable(1);
    sw_trace_enable(1);
    for (int step = 0; step < STEPS; step++) {
        sw_trace_mark_step(step);
        sw_trace_dag_enable(step == 0);
        sw_trace_set_phase(SW_PHASE_FORWARD, 0);
        gemm_tiles(a, b, c);
        sw_trace_set_phase(SW_PHASE_BACKWARD, 1);
        gemm_tiles(c, b, d);
        if (world > 1) {
            /* c (after the backward GEMMs read it), and s, which no GEMM
             * touches: its ring all-reduce may overlap them */
            sw_comm_set_algo(comm, SW_ALGO_DIRECT);
            sw_allreduce(comm, SW_GROUP_WORLD, c, SW_SUM);
            sw_tensor_fill(s, (float)(me + 1));
            sw_comm_set_algo(comm, SW_ALGO_RING);
            sw_allreduce(comm, SW_GROUP_WORLD, s, SW_SUM);
        }
    }
    sw_trace_set_phase(SW_PHASE_NONE, -1);
    sw_trace_dag_enable(0);
    int rc = sw_trace_write(json, paje, ovl);
    tu_check_ranks("sw_trace_write returns 0", rc == 0);
    int drc = sw_trace_dag_write(dot);
    tu_check_ranks("sw_trace_dag_write returns 0", drc == 0);

    /* the collectives still compute the right thing with tracing on */
    if (world > 1) {
        float *sv = tu_read(s);
        int ok = 1;
        for (int i = 0; i < 64 * 64; i++) ok &= sv[i] == (float)(world * (world + 1) / 2);
        tu_check_ranks("ring all-reduce result with tracing on", ok);
        free(sv);
    }
    /* sw_stats still counts every task (same completion callback) */
    sw_stat st[64];
    int ns = sw_stats_get(st, 64);
    long gemm_stats = 0;
    for (int i = 0; i < ns; i++)
        if (!strcmp(st[i].name, "gemm")) gemm_stats = st[i].count;
    tu_check_ranks("sw_stats counts the GEMM tasks alongside the trace", gemm_stats == GEMMS_PER_RANK);

    /* what rank 0 needs to check the merged files: workers and sent bytes per rank */
    int nw = (int)starpu_worker_get_count();
    double sent;
    long calls;
    sw_comm_traffic(comm, SW_GROUP_WORLD, &sent, &calls);
    int *nworkers = calloc((size_t)world, sizeof(int));
    double *sent_all = calloc((size_t)world, sizeof(double));
    if (!nworkers || !sent_all) exit(99);
    SW_CHECK(MPI_Gather(&nw, 1, MPI_INT, nworkers, 1, MPI_INT, 0, MPI_COMM_WORLD));
    SW_CHECK(MPI_Gather(&sent, 1, MPI_DOUBLE, sent_all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (me == 0 && rc == 0) {
        check_json(json, nworkers, sent_all);
        check_paje(paje);
        check_overlap(ovl);
    }
    if (me == 0 && rc == 0 && drc == 0) check_dag(dot);
    free(nworkers);
    free(sent_all);
    dag_blocks(comm, blocks);
    sw_tensor_free(a);
    sw_tensor_free(b);
    sw_tensor_free(c);
    sw_tensor_free(d);
    sw_tensor_free(s);
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
