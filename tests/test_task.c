/* A codelet of the user's own, submitted through sw_task_submit /
 * SW_TASK_INSERT (runtime.h), shows up like the library's tasks: in the
 * exported trace JSON with its name, phase, layer, step and FLOPs, in the
 * task graph and in sw_stats; its own completion and prologue callbacks
 * still run; it computes what it should. sw_set_task_priority gives the
 * tasks submitted after it that priority, unless they set their own;
 * sw_set_task_priority_base is added to either.
 * Temporaries' buffers (home node -1, as the bf16 GEMM operands) are
 * reused: a second and third one of the same size take no page faults. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "testutil.h"

/* y[r,c] = alpha * y[r,c] + 1, on a row-major matrix buffer */
static void scale_cpu(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    float *y = (float *)STARPU_MATRIX_GET_PTR(buffers[0]);
    const unsigned rows = STARPU_MATRIX_GET_NY(buffers[0]), cols = STARPU_MATRIX_GET_NX(buffers[0]),
                   ld = STARPU_MATRIX_GET_LD(buffers[0]);
    for (unsigned r = 0; r < rows; r++)
        for (unsigned c = 0; c < cols; c++) y[r * ld + c] = alpha * y[r * ld + c] + 1.0f;
}

static struct starpu_codelet user_scale_cl = {
    .cpu_funcs = {scale_cpu},
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .name = "user_scale",
};

/* the same kernel under another name, for the task with callbacks of its own */
static struct starpu_codelet user_scale_cb_cl = {
    .cpu_funcs = {scale_cpu},
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .name = "user_scale_cb",
};

/* records the priority of the task running it */
static atomic_int seen_priority;
static void probe_cpu(void *buffers[], void *cl_arg)
{
    (void)buffers, (void)cl_arg;
    atomic_store(&seen_priority, starpu_task_get_current()->priority);
}
static struct starpu_codelet probe_cl = {.cpu_funcs = {probe_cpu}, .nbuffers = 0, .name = "priority_probe"};

/* the priority a probe task ran with, submitted with its own (STARPU_PRIORITY) if own != 0 */
static int probe(int own)
{
    atomic_store(&seen_priority, -100);
    if (own) SW_TASK_INSERT(&probe_cl, STARPU_PRIORITY, own);
    else SW_TASK_INSERT(&probe_cl, STARPU_NAME, "priority_probe");
    starpu_task_wait_for_all();
    return atomic_load(&seen_priority);
}

static atomic_int callbacks, prologues;
static void own_callback(void *arg) { atomic_fetch_add(&callbacks, *(int *)arg); }
static void own_prologue(void *arg) { atomic_fetch_add(&prologues, *(int *)arg); }

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* the JSON event of task `name`: its {"name":...} object up to its args' end */
static const char *event_of(const char *json, const char *name, char *buf, size_t n)
{
    char key[64];
    snprintf(key, sizeof key, "{\"name\":\"%s\",", name);
    const char *p = json ? strstr(json, key) : NULL;
    if (!p) return NULL;
    const char *e = strstr(p, "}}");
    size_t len = e ? (size_t)(e - p) + 2 : strlen(p);
    if (len >= n) len = n - 1;
    memcpy(buf, p, len);
    buf[len] = 0;
    return buf;
}

/* writes its buffer whole, counting the page faults the writes took */
static atomic_long touch_faults;
static void touch_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 1,
           (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
    getrusage(RUSAGE_THREAD, &r1);
    atomic_store(&touch_faults, r1.ru_minflt - r0.ru_minflt);
}
static struct starpu_codelet touch_cl = {
    .cpu_funcs = {touch_cpu}, .nbuffers = 1, .modes = {STARPU_W}, .name = "touch"};

/* the page faults of writing an 8 MiB temporary, unregistered after it */
static long temp_faults(void)
{
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, -1, 0, 8 << 20, 1);
    SW_TASK_INSERT(&touch_cl, STARPU_W, h);
    starpu_data_unregister_submit(h);
    starpu_task_wait_for_all();
    return atomic_load(&touch_faults);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    tu_true("sw_task_submit(NULL) is -EINVAL", sw_task_submit(NULL) == -EINVAL);

    enum { R = 4, C = 8 };
    float init[R * C];
    for (int i = 0; i < R * C; i++) init[i] = (float)i;
    sw_tensor *a = tu_tensor("a", R, C, init), *b = tu_tensor("b", R, C, init);

    sw_trace_enable(1);
    sw_trace_dag_enable(1);
    sw_stats_enable(1);
    sw_trace_mark_step(1);

    /* starpu_task_insert's arguments, through SW_TASK_INSERT */
    sw_trace_set_phase(SW_PHASE_FORWARD, 3);
    float alpha = 2.0f;
    SW_TASK_INSERT(&user_scale_cl, STARPU_RW, sw_tensor_whole(a, STARPU_RW), STARPU_VALUE, &alpha, sizeof alpha,
                   STARPU_FLOPS, (double)(2 * R * C));

    /* a task built by hand with callbacks of its own, through sw_task_submit */
    sw_trace_set_phase(SW_PHASE_BACKWARD, 5);
    static int one = 1;
    float beta = -1.0f;
    struct starpu_task *t = starpu_task_build(&user_scale_cb_cl, STARPU_RW, sw_tensor_whole(b, STARPU_RW),
                                              STARPU_VALUE, &beta, sizeof beta, STARPU_CALLBACK_WITH_ARG_NFREE,
                                              own_callback, &one, STARPU_PROLOGUE_CALLBACK, own_prologue,
                                              STARPU_PROLOGUE_CALLBACK_ARG_NFREE, &one, 0);
    tu_require("starpu_task_build", t != NULL);
    tu_true("sw_task_submit returns 0", sw_task_submit(t) == 0);
    starpu_task_wait_for_all();
    sw_trace_set_phase(SW_PHASE_NONE, -1);

    float *ga = tu_read(a), *gb = tu_read(b);
    int ok = 1;
    for (int i = 0; i < R * C; i++) ok &= ga[i] == 2.0f * init[i] + 1.0f && gb[i] == -init[i] + 1.0f;
    tu_true("the user codelets computed y = alpha y + 1", ok);
    tu_true("the task's own completion callback ran once", atomic_load(&callbacks) == 1);
    tu_true("the task's own prologue callback ran once", atomic_load(&prologues) == 1);

    sw_stat st[16];
    int ns = sw_stats_get(st, 16), seen = 0;
    for (int i = 0; i < ns; i++) seen += !strcmp(st[i].name, "user_scale") && st[i].count == 1;
    tu_true("sw_stats counts user_scale once", seen == 1);

    char json[] = "/tmp/starweave-test_task-XXXXXX";
    int fd = mkstemp(json);
    tu_require("mkstemp", fd >= 0);
    close(fd);
    char dot[sizeof json + 4];
    snprintf(dot, sizeof dot, "%s.dot", json);
    tu_require("sw_trace_write", sw_trace_write(json, NULL, NULL) == 0);
    tu_require("sw_trace_dag_write", sw_trace_dag_write(dot) == 0);
    char *text = slurp(json), *graph = slurp(dot);
    char ev[1024];
    const char *e1 = event_of(text, "user_scale", ev, sizeof ev);
    printf("trace event: %s\n", e1 ? e1 : "(none)");
    tu_true("the trace JSON has user_scale, phase forward, layer 3, step 1, its FLOPs",
            e1 && strstr(e1, "\"cat\":\"forward\"") && strstr(e1, "\"phase\":\"forward\",\"layer\":3,\"step\":1") &&
                strstr(e1, "\"flops\":64") && strstr(e1, "\"bytes\":128"));
    const char *e2 = event_of(text, "user_scale_cb", ev, sizeof ev);
    printf("trace event: %s\n", e2 ? e2 : "(none)");
    tu_true("the trace JSON has user_scale_cb (own callbacks), phase backward, layer 5",
            e2 && strstr(e2, "\"phase\":\"backward\",\"layer\":5,\"step\":1"));
    tu_true("the task graph has both tasks",
            graph && strstr(graph, "user_scale\\nL3") && strstr(graph, "user_scale_cb\\nL5"));
    free(text);
    free(graph);
    remove(json);
    remove(dot);
    free(ga);
    free(gb);

    sw_trace_enable(0);
    tu_true("tasks run at StarPU's default priority (0) by default", probe(0) == 0);
    tu_true("sw_set_task_priority(3) returns the priority it replaces (0)", sw_set_task_priority(3) == 0);
    tu_true("then a task runs at priority 3", probe(0) == 3);
    tu_true("and one that sets its own (STARPU_PRIORITY 2) at 2", probe(2) == 2);
    tu_true("sw_set_task_priority(0) returns 3", sw_set_task_priority(0) == 3);
    tu_true("then a task runs at 0 again", probe(0) == 0);
    tu_true("sw_set_task_priority_base(40) returns the base it replaces (0)", sw_set_task_priority_base(40) == 0);
    tu_true("then a task runs at 40, one that sets 2 at 42", probe(0) == 40 && probe(2) == 42);
    sw_set_task_priority(-2);
    tu_true("and with sw_set_task_priority(-2) at 38", probe(0) == 38);
    sw_set_task_priority(0);
    tu_true("sw_set_task_priority_base(0) returns 40, a task then runs at 0", sw_set_task_priority_base(0) == 40 && probe(0) == 0);

    const long f1 = temp_faults(), f2 = temp_faults(), f3 = temp_faults();
    char what[256];
    snprintf(what, sizeof what,
             "sw_init set STARPU_LIMIT_CPU_MEM (%s MiB), under which StarPU reuses temporaries' buffers: writing "
             "three 8 MiB ones in turn took %ld, %ld and %ld page faults (2048 if 4 KiB pages, each)",
             getenv("STARPU_LIMIT_CPU_MEM") ? getenv("STARPU_LIMIT_CPU_MEM") : "unset", f1, f2, f3);
    tu_true(what, getenv("STARPU_LIMIT_CPU_MEM") && f2 < 64 && f3 < 64);
    sw_tensor_free(a);
    sw_tensor_free(b);
    return tu_finish();
}
