/* sw_trace's outputs from the merged trace (trace.c): Chrome/Perfetto
 * JSON, Paje for ViTE, and the overlap report. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "trace_internal.h"

/* ---------------- Chrome / Perfetto JSON ---------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

/* Microseconds printed from whole nanoseconds, so that one event's end and
 * the next one's start on a track, equal or ordered, stay so in the file. */
static long long ns_of(double us) { return llround(us * 1000.0); }
static void json_us(FILE *f, long long ns)
{
    if (ns < 0) {
        fputc('-', f);
        ns = -ns;
    }
    fprintf(f, "%lld.%03lld", ns / 1000, ns % 1000);
}

static void json_x(FILE *f, const char *name, const char *cat, double start, double end, int pid, int tid)
{
    long long a = ns_of(start), b = ns_of(end);
    if (b < a) b = a;
    fputs(",\n{\"name\":", f);
    json_str(f, name);
    fputs(",\"cat\":", f);
    json_str(f, cat);
    fputs(",\"ph\":\"X\",\"ts\":", f);
    json_us(f, a);
    fputs(",\"dur\":", f);
    json_us(f, b - a);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"args\":{", pid, tid);
}

static void json_meta(FILE *f, int *first, const char *what, int pid, int tid, const char *name, int sort)
{
    fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", *first ? "" : ",",
            what, pid, tid);
    json_str(f, name);
    fputs("}}", f);
    fprintf(f, ",\n{\"name\":\"%s_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            what[0] == 'p' ? "process" : "thread", pid, tid, sort);
    *first = 0;
}

#define SW_TRACE_COMM_TID 100000 /* comm lanes' thread ids: after any worker id */

static int nlanes_of_rank(int rank)
{
    int nl = 0;
    const comm_rec *c = sw_trace_m.mcomms.p;
    for (size_t i = 0; i < sw_trace_m.mcomms.n; i++)
        if (c[i].rank == rank && c[i].lane + 1 > nl) nl = c[i].lane + 1;
    return nl;
}

/* greedy lanes for the transfers (sorted by start) */
static int *transfer_lanes(const xfer *x, size_t nx, int *nlanes)
{
    int *lane = malloc(sizeof *lane * (nx + 1));
    double *end = malloc(sizeof *end * (nx + 1));
    if (!lane || !end) sw_fail(__FILE__, __LINE__, "malloc(transfer lanes)", -ENOMEM);
    int nl = 0;
    for (size_t i = 0; i < nx; i++) {
        double a = x[i].send->posted_us, b = x[i].recv->done_us > a ? x[i].recv->done_us : a;
        int l = 0;
        while (l < nl && end[l] > a) l++;
        if (l == nl) nl++;
        end[l] = b;
        lane[i] = l;
    }
    free(end);
    *nlanes = nl;
    return lane;
}

static int cmp_xfer(const void *x, const void *y)
{
    const xfer *a = x, *b = y;
    return (a->send->posted_us > b->send->posted_us) - (a->send->posted_us < b->send->posted_us);
}

int sw_trace_write_json(const char *path)
{
    if (sw_trace_m.nranks == 0) return 0; /* not rank 0, or not collected */
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    size_t nx;
    xfer *x = sw_trace_match_transfers(sw_trace_m.mcomms.p, sw_trace_m.mcomms.n, &nx);
    if (nx) qsort(x, nx, sizeof *x, cmp_xfer);
    int nxl;
    int *xl = transfer_lanes(x, nx, &nxl);

    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"starweave sw_trace\"},\"traceEvents\":[", f);
    int first = 1;
    char name[64];
    for (int r = 0; r < sw_trace_m.nranks; r++) {
        snprintf(name, sizeof name, "rank %d", r);
        json_meta(f, &first, "process_name", r, 0, name, r);
        for (int w = 0; w < sw_trace_m.nworkers[r]; w++) json_meta(f, &first, "thread_name", r, w, sw_trace_m.wnames[sw_trace_m.wname_first[r] + w], w);
        for (int l = 0, nl = nlanes_of_rank(r); l < nl; l++) {
            snprintf(name, sizeof name, "MPI requests %d", l);
            json_meta(f, &first, "thread_name", r, SW_TRACE_COMM_TID + l, name, SW_TRACE_COMM_TID + l);
        }
    }
    const int xpid = sw_trace_m.nranks;
    if (nx) {
        json_meta(f, &first, "process_name", xpid, 0, "transfers", xpid);
        for (int l = 0; l < nxl; l++) {
            snprintf(name, sizeof name, "transfers %d", l);
            json_meta(f, &first, "thread_name", xpid, l, name, l);
        }
    }
    if (first) fputs("\n{\"name\":\"empty\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{}}", f);

    const task_rec *t = sw_trace_m.mtasks.p;
    for (size_t i = 0; i < sw_trace_m.mtasks.n; i++) {
        json_x(f, t[i].name, sw_phase_name((sw_phase)t[i].phase), t[i].start_us, t[i].end_us, t[i].rank, t[i].worker);
        fputs("\"op\":", f);
        json_str(f, t[i].name);
        fprintf(f, ",\"phase\":\"%s\",\"layer\":%d,\"step\":%d,\"bytes\":%.0f,\"flops\":%.0f,\"prio\":%d}}",
                sw_phase_name((sw_phase)t[i].phase), t[i].layer, t[i].step, t[i].bytes, t[i].flops, t[i].prio);
    }
    const comm_rec *c = sw_trace_m.mcomms.p;
    for (size_t i = 0; i < sw_trace_m.mcomms.n; i++) {
        snprintf(name, sizeof name, "%s %s %d", c[i].coll, c[i].is_send ? "send to" : "recv from", c[i].peer);
        json_x(f, name, "mpi", c[i].posted_us, c[i].done_us, c[i].rank, SW_TRACE_COMM_TID + c[i].lane);
        fputs("\"op\":", f);
        json_str(f, c[i].coll);
        fprintf(f, ",\"dir\":\"%s\",\"peer\":%d,\"chunk\":%d,\"bytes\":%.0f,\"tag\":%lld,\"group\":",
                c[i].is_send ? "send" : "recv", c[i].peer, c[i].chunk, c[i].bytes, (long long)c[i].tag);
        json_str(f, c[i].group);
        fprintf(f, ",\"phase\":\"%s\",\"layer\":%d,\"step\":%d,\"submitted_us\":%.3f}}",
                sw_phase_name((sw_phase)c[i].phase), c[i].layer, c[i].step, c[i].submit_us);
    }
    for (size_t i = 0; i < nx; i++) {
        const comm_rec *s = x[i].send, *q = x[i].recv;
        snprintf(name, sizeof name, "%s %d->%d", s->coll, s->rank, q->rank);
        json_x(f, name, "transfer", s->posted_us, q->done_us, xpid, xl[i]);
        fputs("\"op\":", f);
        json_str(f, s->coll);
        fprintf(f, ",\"src\":%d,\"dst\":%d,\"peer\":%d,\"chunk\":%d,\"bytes\":%.0f,\"tag\":%lld,\"group\":", s->rank,
                q->rank, q->rank, s->chunk, s->bytes, (long long)s->tag);
        json_str(f, s->group);
        fprintf(f, ",\"step\":%d}}", s->step);
    }
    const mark_rec *m = sw_trace_m.mmarks.p;
    for (size_t i = 0; i < sw_trace_m.mmarks.n; i++) {
        fprintf(f, ",\n{\"name\":\"step %d\",\"cat\":\"step\",\"ph\":\"i\",\"s\":\"p\",\"ts\":", m[i].step);
        json_us(f, ns_of(m[i].t_us));
        fprintf(f, ",\"pid\":%d,\"tid\":0,\"args\":{\"step\":%d}}", m[i].rank, m[i].step);
    }
    fputs("\n]}\n", f);
    free(x);
    free(xl);
    return fclose(f) == 0 ? 0 : -errno;
}

/* ---------------- Paje ---------------- */

typedef struct pj_ev {
    double t;
    size_t seq;
    char *line;
} pj_ev;

typedef struct pj_buf {
    pj_ev *ev;
    size_t n, cap;
} pj_buf;

static void pj_add(pj_buf *b, double t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pj_add(pj_buf *b, double t, const char *fmt, ...)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        pj_ev *p = realloc(b->ev, sizeof *p * cap);
        if (!p) sw_fail(__FILE__, __LINE__, "realloc(paje)", -ENOMEM);
        b->ev = p;
        b->cap = cap;
    }
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *line = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!line) sw_fail(__FILE__, __LINE__, "malloc(paje line)", -ENOMEM);
    vsnprintf(line, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    b->ev[b->n] = (pj_ev){t, b->n, line};
    b->n++;
}

static int cmp_pj(const void *x, const void *y)
{
    const pj_ev *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* distinct names -> entity value aliases */
typedef struct pj_vals {
    char (*name)[40];
    size_t n;
} pj_vals;

static size_t pj_val(pj_vals *v, const char *name)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->name[i], name) == 0) return i;
    char(*p)[40] = realloc(v->name, sizeof *p * (v->n + 1));
    if (!p) sw_fail(__FILE__, __LINE__, "realloc(paje values)", -ENOMEM);
    v->name = p;
    copy_name(v->name[v->n], sizeof v->name[v->n], name);
    return v->n++;
}

/* Paje names are quoted strings: keep them free of quotes. */
void sw_trace_clean_name(char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\n' || *s == '\\') *s = '_';
}

static const char pj_header[] =
    "%EventDef PajeDefineContainerType 0\n%  Alias string\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeDefineStateType 1\n%  Alias string\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeDefineEntityValue 2\n%  Alias string\n%  Type string\n%  Name string\n%  Color color\n%EndEventDef\n"
    "%EventDef PajeDefineLinkType 3\n%  Alias string\n%  Type string\n%  StartContainerType string\n"
    "%  EndContainerType string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeDefineEventType 4\n%  Alias string\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeCreateContainer 5\n%  Time date\n%  Alias string\n%  Type string\n%  Container string\n"
    "%  Name string\n%EndEventDef\n"
    "%EventDef PajeDestroyContainer 6\n%  Time date\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajePushState 7\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n%EndEventDef\n"
    "%EventDef PajePopState 8\n%  Time date\n%  Type string\n%  Container string\n%EndEventDef\n"
    "%EventDef PajeStartLink 9\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n"
    "%  StartContainer string\n%  Key string\n%EndEventDef\n"
    "%EventDef PajeEndLink 10\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n"
    "%  EndContainer string\n%  Key string\n%EndEventDef\n"
    "%EventDef PajeNewEvent 11\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n%EndEventDef\n";

static const char *pj_colors[] = {"0.12 0.47 0.71", "1.0 0.5 0.05", "0.17 0.63 0.17", "0.84 0.15 0.16",
                                  "0.58 0.4 0.74", "0.55 0.34 0.29", "0.89 0.47 0.76", "0.5 0.5 0.5",
                                  "0.74 0.74 0.13", "0.09 0.75 0.81"};

int sw_trace_write_paje(const char *path)
{
    if (sw_trace_m.nranks == 0) return 0;
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    pj_buf b = {0};
    pj_vals tv = {0}, cv = {0};
    const task_rec *t = sw_trace_m.mtasks.p;
    const comm_rec *c = sw_trace_m.mcomms.p;
    /* Times in ms (StarPU's own Paje traces use ms). Containers exist from
     * 0 to the end of the trace; their creation sorts first (time 0, lowest
     * sequence numbers). */
    const double end_ms = sw_trace_m.end_us / 1000.0;
    pj_add(&b, 0, "5 0.000000 p P 0 \"program\"\n");
    for (int r = 0; r < sw_trace_m.nranks; r++) {
        pj_add(&b, 0, "5 0.000000 r%d R p \"rank %d\"\n", r, r);
        for (int w = 0; w < sw_trace_m.nworkers[r]; w++) {
            char wn[SW_TRACE_NAME];
            copy_name(wn, sizeof wn, sw_trace_m.wnames[sw_trace_m.wname_first[r] + w]);
            sw_trace_clean_name(wn);
            pj_add(&b, 0, "5 0.000000 r%dw%d W r%d \"%s\"\n", r, w, r, wn);
        }
        for (int l = 0, nl = nlanes_of_rank(r); l < nl; l++)
            pj_add(&b, 0, "5 0.000000 r%dc%d C r%d \"MPI requests %d\"\n", r, l, r, l);
    }
    for (size_t i = 0; i < sw_trace_m.mtasks.n; i++) {
        size_t v = pj_val(&tv, t[i].name);
        pj_add(&b, t[i].start_us / 1000.0, "7 %.6f WS r%dw%d t%zu\n", t[i].start_us / 1000.0, t[i].rank, t[i].worker, v);
        pj_add(&b, t[i].end_us / 1000.0, "8 %.6f WS r%dw%d\n", t[i].end_us / 1000.0, t[i].rank, t[i].worker);
    }
    for (size_t i = 0; i < sw_trace_m.mcomms.n; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s %s", c[i].coll, c[i].is_send ? "send" : "recv");
        size_t v = pj_val(&cv, nm);
        double a = c[i].posted_us / 1000.0, z = c[i].done_us / 1000.0;
        pj_add(&b, a, "7 %.6f CS r%dc%d c%zu\n", a, c[i].rank, c[i].lane, v);
        pj_add(&b, z, "8 %.6f CS r%dc%d\n", z, c[i].rank, c[i].lane);
    }
    /* links carry a plain name: ViTE accepts entity values of state types only */
    size_t nx;
    xfer *x = sw_trace_match_transfers(sw_trace_m.mcomms.p, sw_trace_m.mcomms.n, &nx);
    for (size_t i = 0; i < nx; i++) {
        const comm_rec *s = x[i].send, *q = x[i].recv;
        double a = s->posted_us / 1000.0, z = q->done_us / 1000.0;
        if (z < a) z = a; /* clock alignment error: a link may not end before it starts */
        pj_add(&b, a, "9 %.6f L p \"message\" r%dc%d k%zu\n", a, s->rank, s->lane, i);
        pj_add(&b, z, "10 %.6f L p \"message\" r%dc%d k%zu\n", z, q->rank, q->lane, i);
    }
    free(x);
    const mark_rec *m = sw_trace_m.mmarks.p;
    for (size_t i = 0; i < sw_trace_m.mmarks.n; i++) {
        double a = m[i].t_us / 1000.0 > 0 ? m[i].t_us / 1000.0 : 0; /* a mark may precede the first record */
        pj_add(&b, a, "11 %.6f E r%d \"step %d\"\n", a, m[i].rank, m[i].step);
    }
    /* destruction last: children before parents */
    for (int r = 0; r < sw_trace_m.nranks; r++) {
        for (int w = 0; w < sw_trace_m.nworkers[r]; w++) pj_add(&b, end_ms, "6 %.6f W r%dw%d\n", end_ms, r, w);
        for (int l = 0, nl = nlanes_of_rank(r); l < nl; l++) pj_add(&b, end_ms, "6 %.6f C r%dc%d\n", end_ms, r, l);
        pj_add(&b, end_ms, "6 %.6f R r%d\n", end_ms, r);
    }
    pj_add(&b, end_ms, "6 %.6f P p\n", end_ms);
    qsort(b.ev, b.n, sizeof *b.ev, cmp_pj);

    fputs(pj_header, f);
    fputs("0 P 0 \"Program\"\n0 R P \"Rank\"\n0 W R \"Worker\"\n0 C R \"Communication\"\n", f);
    fputs("1 WS W \"Task\"\n1 CS C \"MPI request\"\n3 L P C C \"Transfer\"\n4 E R \"Step\"\n", f);
    for (size_t i = 0; i < tv.n; i++) {
        sw_trace_clean_name(tv.name[i]);
        fprintf(f, "2 t%zu WS \"%s\" \"%s\"\n", i, tv.name[i], pj_colors[i % (sizeof pj_colors / sizeof *pj_colors)]);
    }
    for (size_t i = 0; i < cv.n; i++) {
        sw_trace_clean_name(cv.name[i]);
        fprintf(f, "2 c%zu CS \"%s\" \"%s\"\n", i, cv.name[i], strstr(cv.name[i], "send") ? "0.9 0.6 0.1" : "0.2 0.6 0.9");
    }
    for (size_t i = 0; i < b.n; i++) {
        fputs(b.ev[i].line, f);
        free(b.ev[i].line);
    }
    free(b.ev);
    free(tv.name);
    free(cv.name);
    return fclose(f) == 0 ? 0 : -errno;
}

/* ---------------- overlap report ---------------- */

typedef struct ival {
    double a, b;
} ival;

static int cmp_ival(const void *x, const void *y)
{
    const ival *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

/* sorts and merges v in place into disjoint intervals; returns the count */
static size_t ival_union(ival *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_ival);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].a <= v[k].b) {
            if (v[i].b > v[k].b) v[k].b = v[i].b;
        } else {
            v[++k] = v[i];
        }
    }
    return k + 1;
}

static double ival_len(const ival *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i].b - v[i].a;
    return s;
}

/* measure of the intersection of two disjoint sorted lists */
static double ival_inter(const ival *x, size_t nx, const ival *y, size_t ny)
{
    double s = 0;
    size_t i = 0, j = 0;
    while (i < nx && j < ny) {
        double a = x[i].a > y[j].a ? x[i].a : y[j].a, b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (b > a) s += b - a;
        if (x[i].b < y[j].b) i++;
        else j++;
    }
    return s;
}

/* one row: rank, and step (or every step with step == -1); cv, mv, av:
 * scratch of one interval per record */
static sw_overlap overlap_row(int rank, int step, ival *cv, ival *mv, ival *av)
{
    sw_overlap o = {.rank = rank, .step = step};
    size_t nc = 0, nm = 0, na = 0;
    double lo = 1e300, hi = -1e300;
    const task_rec *t = sw_trace_m.mtasks.p;
    for (size_t i = 0; i < sw_trace_m.mtasks.n; i++) {
        if (t[i].rank != rank || (step != -1 && t[i].step != step)) continue;
        o.ntasks++;
        if (t[i].start_us < lo) lo = t[i].start_us;
        if (t[i].end_us > hi) hi = t[i].end_us;
        ival v = {t[i].start_us, t[i].end_us};
        av[na++] = v;
        /* a collective's own tasks (reductions) are part of its cost, not
         * computation that hides it */
        if (t[i].phase == SW_PHASE_COMM) mv[nm++] = v;
        else if (t[i].phase != SW_PHASE_OFFLOAD) cv[nc++] = v;
    }
    const comm_rec *c = sw_trace_m.mcomms.p;
    for (size_t i = 0; i < sw_trace_m.mcomms.n; i++) {
        if (c[i].rank != rank || (step != -1 && c[i].step != step)) continue;
        o.ncomm++;
        if (c[i].posted_us < lo) lo = c[i].posted_us;
        if (c[i].done_us > hi) hi = c[i].done_us;
        mv[nm++] = av[na++] = (ival){c[i].posted_us, c[i].done_us};
    }
    if (o.ntasks + o.ncomm == 0) return o;
    nc = ival_union(cv, nc);
    nm = ival_union(mv, nm);
    na = ival_union(av, na);
    o.wall_us = hi - lo;
    o.compute_us = ival_len(cv, nc);
    o.comm_us = ival_len(mv, nm);
    o.overlap_us = ival_inter(cv, nc, mv, nm);
    o.idle_us = o.wall_us - ival_len(av, na);
    if (o.idle_us < 0) o.idle_us = 0; /* rounding */
    o.overlap_share = o.comm_us > 0 ? o.overlap_us / o.comm_us : 0;
    return o;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

int sw_trace_overlap(sw_overlap *out, int max)
{
    if (sw_trace_m.nranks == 0) return 0;
    size_t nrec = sw_trace_m.mtasks.n + sw_trace_m.mcomms.n;
    ival *cv = malloc(sizeof *cv * (nrec + 1)), *mv = malloc(sizeof *mv * (nrec + 1));
    ival *av = malloc(sizeof *av * (nrec + 1));
    int *steps = malloc(sizeof *steps * (nrec + 1));
    if (!cv || !mv || !av || !steps) sw_fail(__FILE__, __LINE__, "malloc(overlap)", -ENOMEM);
    int rows = 0;
    for (int r = 0; r < sw_trace_m.nranks; r++) {
        /* the steps this rank has records in */
        size_t ns = 0;
        const task_rec *t = sw_trace_m.mtasks.p;
        const comm_rec *c = sw_trace_m.mcomms.p;
        for (size_t i = 0; i < sw_trace_m.mtasks.n; i++)
            if (t[i].rank == r && t[i].step >= 0) steps[ns++] = t[i].step;
        for (size_t i = 0; i < sw_trace_m.mcomms.n; i++)
            if (c[i].rank == r && c[i].step >= 0) steps[ns++] = c[i].step;
        qsort(steps, ns, sizeof *steps, cmp_int);
        if (rows < max) out[rows] = overlap_row(r, -1, cv, mv, av);
        rows++;
        for (size_t i = 0; i < ns; i++) {
            if (i > 0 && steps[i] == steps[i - 1]) continue;
            if (rows < max) out[rows] = overlap_row(r, steps[i], cv, mv, av);
            rows++;
        }
    }
    free(cv);
    free(mv);
    free(av);
    free(steps);
    return rows;
}

int sw_trace_write_overlap_json(const char *path)
{
    if (sw_trace_m.nranks == 0) return 0;
    int n = sw_trace_overlap(NULL, 0);
    sw_overlap *o = malloc(sizeof *o * (size_t)(n + 1));
    if (!o) sw_fail(__FILE__, __LINE__, "malloc(overlap rows)", -ENOMEM);
    sw_trace_overlap(o, n);
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        free(o);
        return -e;
    }
    fprintf(f, "{\"ranks\":%d,\"units\":\"us\",\"overlap\":[", sw_trace_m.nranks);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n{\"rank\":%d,\"step\":%d,\"tasks\":%ld,\"requests\":%ld,\"wall_us\":%.3f,\"compute_us\":%.3f,"
                   "\"comm_us\":%.3f,\"overlap_us\":%.3f,\"idle_us\":%.3f,\"overlap_share\":%.6f}",
                i ? "," : "", o[i].rank, o[i].step, o[i].ntasks, o[i].ncomm, o[i].wall_us, o[i].compute_us,
                o[i].comm_us, o[i].overlap_us, o[i].idle_us, o[i].overlap_share);
    fputs("\n]}\n", f);
    free(o);
    return fclose(f) == 0 ? 0 : -errno;
}

int sw_trace_write(const char *json_path, const char *paje_path, const char *overlap_json_path)
{
    int rc = sw_trace_collect();
    if (rc == 0 && json_path) rc = sw_trace_write_json(json_path);
    if (rc == 0 && paje_path) rc = sw_trace_write_paje(paje_path);
    if (rc == 0 && overlap_json_path) rc = sw_trace_write_overlap_json(overlap_json_path);
    /* every rank returns rank 0's verdict */
    SW_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return rc;
}
