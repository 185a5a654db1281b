/* Runtime singleton: the only place that starts and stops StarPU / StarPU-MPI. */
#include "config.h"

#include "starweave/ops.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"
#include "p2p.h"
#include "sim_smpi.h"

#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <starpu_expert.h>
#include <starpu_mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <unistd.h>

static struct {
    int started;
    int rank, size;
    unsigned task_where; /* sw_set_task_where */
    int task_priority;   /* sw_set_task_priority */
    int priority_base;   /* sw_set_task_priority_base */
    int offload_node, offload_budget_mb, memory_budget_mb;
    char offload_dir[4096];
    int pinned; /* home buffers page-locked (CUDA workers) */
} sw_rt = {.size = 1, .offload_node = -1};

/* the watcher thread of refusals (below, "refusals") */
static void refuse_watch_start(int thread_level);
static void refuse_watch_stop(void);

/* what the offload disk node may hold (an accounting limit: the unistd
 * backend creates files as buffers are evicted) */
#define SW_OFFLOAD_DISK_BYTES ((starpu_ssize_t)64 << 30)

void sw_options_default(sw_options *opt)
{
    opt->ncpus = -1;
    opt->sched = NULL;
    opt->quiet = 0;
    opt->idle_sleep_us = -1;
    opt->ncuda = -1;
    opt->offload = 0;
    opt->offload_budget_mb = 0;
    opt->memory_budget_mb = 0;
    opt->gemm = SW_GEMM_AUTO;
}

#ifdef STARWEAVE_USE_CUDA
/* CUDA workers for this rank, set in conf: $STARPU_NCUDA /
 * $STARPU_WORKERS_CUDAID as StarPU read them, unless opt->ncuda >= 0 asks
 * for a number; by default every GPU. Ranks sharing a node (and not told
 * otherwise by the environment) take GPUs of their own: n each, from local
 * rank * n on (mod the GPUs), n = 1 by default; each rank's NCCL
 * communicators then sit on their own device, which NCCL requires. Returns
 * the number of GPUs the rank will use (0 on a machine without), for the
 * CPU worker count. */
static int choose_cuda_workers(struct starpu_conf *conf, const sw_options *opt, int local_rank, int local_size)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0; /* no driver or no device */
    int want = opt->ncuda;
    if (want < 0 && (getenv("STARPU_NCUDA") || getenv("STARPU_WORKERS_CUDAID"))) /* read by starpu_conf_init */
        return conf->ncuda >= 0 && conf->ncuda < ndev ? conf->ncuda : ndev;
    if (ndev > STARPU_MAXCUDADEVS) ndev = STARPU_MAXCUDADEVS;
    if (want < 0 && local_size == 1) { /* StarPU's default: every GPU */
        conf->ncuda = -1;
        return ndev;
    }
    if (want < 0) want = 1;
    if (want > ndev) want = ndev;
    conf->ncuda = want;
    if (local_size > 1 && want > 0) {
        conf->use_explicit_workers_cuda_gpuid = 1;
        for (int i = 0; i < want && i < STARPU_NMAXWORKERS; i++)
            conf->workers_cuda_gpuid[i] = (unsigned)((local_rank * want + i) % ndev);
    }
    return want;
}
#endif

/* Debian's OpenBLAS 0.3.21 does not know recent Xeons and falls back to its
 * SSE3 "Prescott" kernels, a fraction of the AVX-512 kernels' speed
 * (docs/runtime-notes.md, "OpenBLAS core type"). OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded,
 * before any code of ours runs, and a library may not re-execute its
 * caller: say what to set. The project's launchers (autotools/quickstart.sh,
 * make check) set it through autotools/openblas-coretype.sh. */
static void advise_openblas_core(void)
{
    if (getenv("OPENBLAS_CORETYPE")) return;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0) return;
    __builtin_cpu_init();
    const char *want = __builtin_cpu_supports("avx512bf16") ? "Cooperlake"
                       : __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
    if (!want) return;
    fprintf(stderr, "starweave: OpenBLAS runs its generic Prescott kernels on this CPU (GEMMs about 4x slower); "
                    "start the program with OPENBLAS_CORETYPE=%s in its environment (mpirun -x OPENBLAS_CORETYPE)\n",
            want);
}

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return (v && *v) ? atoi(v) : fallback;
}

/* Idle CPU workers of Debian's StarPU (non-blocking drivers) spin without
 * ever yielding, and so does the StarPU-MPI progression thread while a
 * request is pending. When ranks share a node, mpirun binds each rank to
 * one core, so the two spin on the same core and the kernel switches them
 * only at its scheduler tick: every hand-off between them (a received
 * chunk -> its reduction task -> the next send) waits a tick or two. An
 * idle worker that sleeps a little instead leaves the core to the
 * progression thread and wakes up (preempting it) within the sleep time.
 * The worker sleeps only while the rank has point-to-point requests
 * outstanding (p2p.h): without them the progression thread has
 * nothing to do, and a sleeping worker only delays the next task -- and
 * the collectives MPI runs (comm_nbc.c), whose requests idle workers test.
 * Where the node's ranks have more workers than it has cores, idle workers
 * always sleep: spinning ones take the cores from the working threads of
 * other ranks. bench/idle.sh measures the three choices (BENCHMARKS.md,
 * "Collective latency"). */
int sw_p2p_pending; /* p2p.h: kept by src/comm/comm.c */
static long idle_sleep_ns;
static int idle_always; /* more workers on the node than cores */
static unsigned idle_hook(void *arg)
{
    (void)arg;
    if (!idle_always && !__atomic_load_n(&sw_p2p_pending, __ATOMIC_RELAXED)) return 0;
    struct timespec ts = {0, idle_sleep_ns};
    nanosleep(&ts, NULL);
    return 0;
}

/* a field of a meminfo file in kB ("MemTotal: N kB", or in a NUMA node's
 * "Node 0 MemTotal: N kB"); 0 where unreadable */
static double meminfo_kb(const char *path, const char *field)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    const size_t n = strlen(field);
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, field);
        if (at && at[n] == ':' && sscanf(at + n + 1, "%lf", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

int sw_init(int *argc, char ***argv, const sw_options *user)
{
    sw_options opt;
    if (user) opt = *user; else sw_options_default(&opt);
    if (sw_rt.started) return -EALREADY;
    if (opt.offload_budget_mb < 0) /* (before MPI: every rank is given the same options) */
        sw_usage_error("offload-budget-mb must not be negative (offload-budget-mb = %d)", opt.offload_budget_mb);

    /* Ranks sharing a node must not pin their workers onto the same cores
     * (a 2-rank ring all-reduce hangs or crawls when they do). */
    int local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    if (local_size > 1) {
        setenv("STARPU_WORKERS_NOBIND", "1", 0);
        setenv("STARPU_MPI_NOBIND", "1", 0);
    }
    /* StarPU owns the cores: BLAS runs single-threaded inside each task. */
    openblas_set_num_threads(1);

    struct starpu_conf conf;
    SW_CHECK(starpu_conf_init(&conf));
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef STARWEAVE_USE_CUDA
    /* each CUDA worker has a driver thread of its own on a core */
    const int ngpu = choose_cuda_workers(&conf, &opt, env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0), local_size);
#else
    const int ngpu = 0;
    conf.ncuda = 0;
#endif
    if (opt.ncpus > 0)
        conf.ncpus = opt.ncpus;
    else if (getenv("STARPU_NCPU") == NULL) { /* StarPU-MPI would otherwise reserve a core */
        long n = ncores / local_size - ngpu;
        conf.ncpus = n > 0 ? (int)n : 1;
    }
    /* StarPU-MPI binds its progression thread to a core that no worker (nor
     * CUDA driver thread) holds. When they hold every core -- the default
     * above on one rank per node: a worker per core -- there is none left,
     * and StarPU binds it onto worker 0's core anyway, printing four lines
     * of warnings on every run. The thread sleeps while no request is
     * pending; unbound, the kernel runs it wherever there is room, as for
     * ranks sharing a node. */
    if (conf.ncpus >= 0 && (long)conf.ncpus + ngpu >= ncores) setenv("STARPU_MPI_NOBIND", "1", 0);
    /* starpu_conf_init already read the environment; what sw_options sets
     * explicitly (--ncpus, --sched) wins over it */
    conf.precedence_over_environment_variables = 1;
    conf.nopencl = 0;
    if (opt.sched) conf.sched_policy_name = opt.sched;
    else if (getenv("STARPU_SCHED") == NULL) conf.sched_policy_name = "lws";

    /* MPI is started here at MPI_THREAD_MULTIPLE (StarPU-MPI would ask for
     * SERIALIZED), so that the mesh and the benchmarks' plain-MPI baselines
     * may call MPI while StarPU-MPI has requests in flight. */
    int mpi_inited = 0, provided = MPI_THREAD_MULTIPLE;
    /* Simulated: StarPU's main (starpu_simgrid_wrap.h renames the
     * program's) initialised the rank's SMPI process, which became
     * StarPU-MPI's progression thread and started main in an actor of its
     * own: that actor joins the rank's MPI process (src/core/sim_smpi.cc). */
    if (sw_simulated() && sw_sim_adopt_main() != 0) {
        fprintf(stderr, "starweave: simulated, but the program was not started by starpu_smpirun through StarPU's "
                        "main (docs/simulation.md)\n");
        return -ENOTSUP;
    }
    if (!sw_simulated()) {
        SW_CHECK(MPI_Initialized(&mpi_inited));
        if (!mpi_inited) SW_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
        else SW_CHECK(MPI_Query_thread(&provided));
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        fprintf(stderr, "starweave: the MPI library gives thread level %d, StarPU-MPI needs at least "
                        "MPI_THREAD_SERIALIZED (%d)\n", provided, MPI_THREAD_SERIALIZED);
        return -ENOTSUP;
    }
    /* offload from GPUs goes to pinned main RAM, otherwise to a disk node */
    const int offload_to_ram = opt.offload && ngpu > 0;
    sw_rt.pinned = ngpu > 0;
    if (opt.offload_budget_mb > 0) { /* read by StarPU's memory manager at init */
        char mb[32];
        snprintf(mb, sizeof mb, "%d", opt.offload_budget_mb);
        setenv(offload_to_ram ? "STARPU_LIMIT_CUDA_MEM" : "STARPU_LIMIT_CPU_MEM", mb, 1);
    }
    /* StarPU keeps the main-RAM buffers it frees (temporaries: the bf16
     * GEMM operands) for reuse only under a main-RAM limit; without one it
     * frees each and allocates the next anew, whose first touches fault
     * (tests/test_task counts the faults; BENCHMARKS.md the cost). Unless
     * set, the limit is this rank's share of the node, at most what StarPU
     * sees (NUMA node 0's memory; it warns above it). */
    double mem_kb = meminfo_kb("/proc/meminfo", "MemTotal") / local_size,
           numa_kb = meminfo_kb("/sys/devices/system/node/node0/meminfo", "MemTotal");
    if (numa_kb > 0 && numa_kb < mem_kb) mem_kb = numa_kb;
    /* simulated: this machine's memory is not the simulated node's */
    if (!sw_simulated() && !getenv("STARPU_LIMIT_CPU_MEM") && mem_kb >= 1024) {
        char mb[32];
        snprintf(mb, sizeof mb, "%ld", (long)(mem_kb / 1024.0));
        setenv("STARPU_LIMIT_CPU_MEM", mb, 1);
    }
    int rc = starpu_mpi_init_conf(argc, argv, 0, MPI_COMM_WORLD, &conf);
    if (rc != 0) {
        fprintf(stderr, "starweave: starpu_mpi_init_conf failed: %s (%d)\n",
                rc == -ENODEV ? "no worker available" : strerror(-rc), rc);
        return rc;
    }
#ifdef STARPU_SIMGRID
    /* The buffers StarPU allocates in main RAM (temporaries, StarPU-MPI's
     * receive buffers) are folded like the tensors' home buffers
     * (src/core/tensor.c): a model far larger than this machine is simulated on
     * it. StarPU still counts them (STARPU_MALLOC_COUNT). */
    starpu_malloc_on_node_set_default_flags(STARPU_MAIN_RAM,
                                            STARPU_MALLOC_PINNED | STARPU_MALLOC_COUNT | STARPU_MALLOC_SIMULATION_FOLDED);
#endif
    int idle_us = opt.idle_sleep_us >= 0 ? opt.idle_sleep_us
                  : env_int("SW_IDLE_SLEEP_US", local_size > 1 ? SW_IDLE_SLEEP_US_SHARED : 0);
    if (idle_us > 0) {
        idle_sleep_ns = (long)(idle_us < 999999 ? idle_us : 999999) * 1000;
        idle_always = (long)local_size * (long)starpu_cpu_worker_get_count() > ncores;
        if (starpu_idle_hook_register(idle_hook, NULL) < 0) fprintf(stderr, "starweave: no idle hook slot\n");
    }
    SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &sw_rt.rank));
    SW_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &sw_rt.size));
    refuse_watch_start(provided);
    sw_rt.offload_budget_mb = opt.offload_budget_mb;
    sw_rt.memory_budget_mb = opt.memory_budget_mb;
    sw_rt.offload_node = -1;
    if (offload_to_ram) {
        sw_rt.offload_node = STARPU_MAIN_RAM;
    } else if (opt.offload) {
        /* out-of-core: the unistd backend keeps one file per evicted buffer in the directory */
        const char *tmp = getenv("TMPDIR");
        snprintf(sw_rt.offload_dir, sizeof sw_rt.offload_dir, "%s/starweave-offload.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(sw_rt.offload_dir)) {
            int err = errno;
            fprintf(stderr, "starweave: cannot create the offload directory %s: %s\n", sw_rt.offload_dir, strerror(err));
            return -err;
        }
        sw_rt.offload_node = starpu_disk_register(&starpu_disk_unistd_ops, sw_rt.offload_dir, SW_OFFLOAD_DISK_BYTES);
        if (sw_rt.offload_node < 0) {
            fprintf(stderr, "starweave: starpu_disk_register(%s) failed (%d)\n", sw_rt.offload_dir, sw_rt.offload_node);
            rmdir(sw_rt.offload_dir);
            return sw_rt.offload_node;
        }
    }
#ifdef STARWEAVE_USE_CUDA
    /* one cuBLAS handle per CUDA worker, bound to the worker's stream
     * (starpu_cublas_get_local_handle); nothing to do without CUDA workers */
    starpu_cublas_init();
#endif
    sw_rt.started = 1;
    /* said once, even with quiet: every value read on the host is meaningless */
    if (sw_simulated() && sw_rt.rank == 0)
        fprintf(stderr, "starweave: SIMULATED run (StarPU with SimGrid, %d simulated rank(s)): codelets are not "
                        "executed, tasks take their calibrated models' times on the simulated clock; losses and "
                        "other computed values are not computed\n", sw_rt.size);
    if (sw_rt.rank == 0 && !sw_simulated()) advise_openblas_core();
    int gemm = opt.gemm;
    const char *gemm_env = getenv("SW_GEMM");
    if (gemm == SW_GEMM_AUTO && gemm_env && *gemm_env && (gemm = sw_gemm_backend_parse(gemm_env)) < 0)
        sw_usage_error("SW_GEMM must be auto, openblas or onednn (SW_GEMM = %s)", gemm_env);
    char gemm_msg[256], gemm_what[128];
    if (sw_gemm_set_backend((sw_gemm_backend)gemm, gemm_msg, sizeof gemm_msg) < 0) sw_usage_error("%s", gemm_msg);
    sw_gemm_describe(gemm_what, sizeof gemm_what);
    if (!opt.quiet && sw_rt.rank == 0) {
        struct starpu_sched_policy *pol = starpu_sched_ctx_get_sched_policy(0);
#ifdef STARWEAVE_USE_CUDA
        fprintf(stderr, "starweave: %d rank(s), %u CPU + %u CUDA worker(s) per rank, scheduler %s, CPU GEMM %s\n",
                sw_rt.size, starpu_cpu_worker_get_count(), starpu_cuda_worker_get_count(),
                pol ? pol->policy_name : "?", gemm_what);
#else
        fprintf(stderr, "starweave: %d rank(s), %u CPU worker(s) per rank, scheduler %s, CPU GEMM %s\n",
                sw_rt.size, starpu_cpu_worker_get_count(), pol ? pol->policy_name : "?", gemm_what);
#endif
    }
    return 0;
}

void sw_shutdown(void)
{
    if (!sw_rt.started) return;
    starpu_task_wait_for_all();
    sw_memory_watch(0);
#ifdef STARWEAVE_USE_CUDA
    starpu_cublas_shutdown();
#endif
    refuse_watch_stop();
    if (sw_simulated()) sw_sim_world_release(); /* StarPU-MPI's barrier on MPI_COMM_WORLD follows */
    starpu_mpi_shutdown();
    if (sw_rt.offload_node > STARPU_MAIN_RAM) rmdir(sw_rt.offload_dir); /* StarPU removed its files */
    sw_rt.offload_node = -1;
    sw_rt.started = 0;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !sw_simulated()) MPI_Finalize(); /* simulated: the rank's SMPI process finalizes */
}

/* ---- memory per node ---- */
#define SW_MAX_NODES 8
static struct {
    pthread_t thread;
    volatile int on;
    double peak[SW_MAX_NODES], in[SW_MAX_NODES], out[SW_MAX_NODES];
} mw;

static double node_used(unsigned node)
{
    return (double)(starpu_memory_get_total(node) - starpu_memory_get_available(node));
}

static void *memory_sampler(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 500000};
    unsigned n = starpu_memory_nodes_get_count();
    while (mw.on) {
        for (unsigned k = 0; k < n && k < SW_MAX_NODES; k++)
            if (node_used(k) > mw.peak[k]) mw.peak[k] = node_used(k);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* adds the bus counters (which reading resets) to the nodes' totals */
static void collect_bus_bytes(void)
{
    for (int b = 0; b < starpu_bus_get_count(); b++) {
        struct starpu_profiling_bus_info info;
        if (starpu_bus_get_profiling_info(b, &info) != 0) continue;
        int src = starpu_bus_get_src(b), dst = starpu_bus_get_dst(b);
        if (src < SW_MAX_NODES) mw.out[src] += (double)info.transferred_bytes;
        if (dst < SW_MAX_NODES) mw.in[dst] += (double)info.transferred_bytes;
    }
}

void sw_memory_watch(int on)
{
    if (on == mw.on) return;
    if (on) {
        collect_bus_bytes();
        memset(&mw, 0, sizeof mw);
        mw.on = 1;
        /* simulated: no sampling thread beside SimGrid's actors (it would
         * sleep on the real clock); the peaks are those seen when asked */
        if (!sw_simulated() && pthread_create(&mw.thread, NULL, memory_sampler, NULL) != 0) mw.on = 0;
    } else {
        mw.on = 0;
        if (!sw_simulated()) pthread_join(mw.thread, NULL);
    }
}

int sw_memory_nodes(sw_node_memory *out, int max)
{
    collect_bus_bytes();
    int n = (int)starpu_memory_nodes_get_count();
    if (n > max) n = max;
    if (n > SW_MAX_NODES) n = SW_MAX_NODES;
    for (int k = 0; k < n; k++) {
        memset(&out[k], 0, sizeof out[k]);
        starpu_memory_node_get_name((unsigned)k, out[k].name, sizeof out[k].name);
        out[k].used = node_used((unsigned)k);
        out[k].peak = mw.peak[k] > out[k].used ? mw.peak[k] : out[k].used;
        out[k].total = (double)starpu_memory_get_total((unsigned)k);
        out[k].bytes_in = mw.in[k];
        out[k].bytes_out = mw.out[k];
    }
    return n;
}

/* ---- event counters (runtime.h) ---- */
static int64_t counters[SW_COUNTER_COUNT];
static const char *const counter_names[SW_COUNTER_COUNT] = {
    "gemm_openblas", "gemm_onednn", "gemm_cublas", "gemm_bf16", "cast_bf16", "allreduce", "allgather",
    "reduce_scatter", "alltoall", "broadcast", "ring_shift", "mpi_collective", "mpi_deferred", "p2p_send",
    "task_priority", "send", "gemm_widened", "late_w"};

void sw_counter_add(sw_counter c, int64_t n)
{
    if ((unsigned)c < SW_COUNTER_COUNT) __atomic_add_fetch(&counters[c], n, __ATOMIC_RELAXED);
}
int64_t sw_counter_get(sw_counter c)
{
    return (unsigned)c < SW_COUNTER_COUNT ? __atomic_load_n(&counters[c], __ATOMIC_RELAXED) : 0;
}
const char *sw_counter_name(sw_counter c) { return (unsigned)c < SW_COUNTER_COUNT ? counter_names[c] : NULL; }
void sw_counters_print(FILE *out)
{
    char line[1024];
    int at = snprintf(line, sizeof line, "counters: rank %d:", sw_rank());
    for (int c = 0; c < SW_COUNTER_COUNT && at < (int)sizeof line; c++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %s=%lld", counter_names[c],
                       (long long)sw_counter_get((sw_counter)c));
    fprintf(out, "%s\n", line);
    fflush(out);
}
void sw_counters_reset(void)
{
    for (int c = 0; c < SW_COUNTER_COUNT; c++) __atomic_store_n(&counters[c], 0, __ATOMIC_RELAXED);
}

/* ---- per-codelet statistics ---- */
#define SW_MAX_STATS 64
static struct {
    int on;
    pthread_mutex_t lock;
    int n;
    sw_stat s[SW_MAX_STATS];
} sw_stats = {0, PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};

static void stats_task_done(void *arg)
{
    (void)arg;
    struct starpu_task *t = starpu_task_get_current();
    if (!t || !t->cl || !t->profiling_info) return;
    double us = starpu_timing_timespec_delay_us(&t->profiling_info->start_time, &t->profiling_info->end_time);
    const char *name = t->cl->name ? t->cl->name : "?";
    pthread_mutex_lock(&sw_stats.lock);
    int i = 0;
    while (i < sw_stats.n && strcmp(sw_stats.s[i].name, name) != 0) i++;
    if (i < SW_MAX_STATS) {
        if (i == sw_stats.n) sw_stats.s[sw_stats.n++] = (sw_stat){name, 0, 0.0};
        sw_stats.s[i].count++;
        sw_stats.s[i].total_us += us;
    }
    pthread_mutex_unlock(&sw_stats.lock);
}

/* One completion callback serves both: its argument is the trace record
 * that SW_INSERT attaches (NULL when tracing was off at submission). */
static void task_done(void *arg)
{
    if (sw_stats.on) stats_task_done(NULL);
    if (arg) sw_trace_task_end(arg);
}

void (*sw_stats_hook(void))(void *) { return sw_stats.on || sw_trace_enabled() ? task_done : NULL; }

/* the calling thread's cost meter (sw_task_meter) */
static _Thread_local long long *task_meter;

void sw_task_meter(long long *meter)
{
    task_meter = meter;
    if (meter && !starpu_profiling_status_get()) starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
}

void sw_task_meter_stop(void)
{
    task_meter = NULL;
    starpu_profiling_status_set(sw_stats.on || sw_trace_enabled() ? STARPU_PROFILING_ENABLE : STARPU_PROFILING_DISABLE);
}

/* the task's execution time into a meter */
static void meter_task_done(long long *meter)
{
    struct starpu_task *t = starpu_task_get_current();
    if (!meter || !t || !t->profiling_info) return;
    double us = starpu_timing_timespec_delay_us(&t->profiling_info->start_time, &t->profiling_info->end_time);
    __atomic_fetch_add(meter, (long long)(us * 1e3), __ATOMIC_RELAXED);
}

/* A task that came with callbacks of its own: they run after starweave's,
 * from one record that is the argument of both (StarPU frees it with the
 * task; the trace record and the task's own arguments are freed here). */
struct chained_task {
    void (*done)(void *); /* task_done, or NULL */
    void *rec;            /* the trace record, or NULL */
    long long *meter;     /* sw_task_meter's, or NULL */
    void (*callback)(void *), (*prologue)(void *);
    void *callback_arg, *prologue_arg;
    int free_callback_arg, free_prologue_arg;
};

static void chained_prologue(void *arg)
{
    struct chained_task *c = arg;
    void (*trace_prologue)(void *) = sw_trace_task_prologue(c->rec);
    if (trace_prologue) trace_prologue(c->rec);
    if (c->prologue) c->prologue(c->prologue_arg);
}

static void chained_done(void *arg)
{
    struct chained_task *c = arg;
    if (c->done) c->done(c->rec);
    meter_task_done(c->meter);
    free(c->rec);
    if (c->callback) c->callback(c->callback_arg);
    if (c->free_callback_arg) free(c->callback_arg);
    if (c->free_prologue_arg) free(c->prologue_arg);
}

int sw_task_submit(struct starpu_task *task)
{
    if (!task || !task->cl) return -EINVAL;
    if (task->where == -1) task->where = sw_task_where(task->cl);
    if (!task->priority && sw_rt.task_priority) {
        task->priority = sw_rt.task_priority;
        sw_counter_add(SW_COUNT_TASK_PRIORITY, 1);
    }
    task->priority += sw_rt.priority_base;
    void *rec = sw_trace_task_begin(); /* NULL when tracing is off */
    void (*done)(void *) = sw_stats_hook();
    if (!task->callback_func && !task->prologue_callback_func && !task_meter) {
        task->callback_func = done;
        task->callback_arg = rec;
        task->callback_arg_free = rec != NULL;
        task->prologue_callback_func = sw_trace_task_prologue(rec);
        task->prologue_callback_arg = rec;
        task->prologue_callback_arg_free = 0;
    } else if (done || rec || task_meter) {
        struct chained_task *c = malloc(sizeof *c);
        if (!c) sw_fail(__FILE__, __LINE__, "malloc(chained task)", -ENOMEM);
        *c = (struct chained_task){done, rec, task_meter, task->callback_func, task->prologue_callback_func,
                                   task->callback_arg, task->prologue_callback_arg, task->callback_arg_free,
                                   task->prologue_callback_arg_free};
        task->callback_func = chained_done;
        task->callback_arg = c;
        task->callback_arg_free = 1;
        task->prologue_callback_func = chained_prologue;
        task->prologue_callback_arg = c;
        task->prologue_callback_arg_free = 0;
    }
    sw_trace_dag_task(task);
    return starpu_task_submit(task);
}

void sw_stats_enable(int on)
{
    sw_stats.on = on;
    /* the trace needs profiling on as well */
    starpu_profiling_status_set(on || sw_trace_enabled() ? STARPU_PROFILING_ENABLE : STARPU_PROFILING_DISABLE);
}

void sw_stats_reset(void)
{
    pthread_mutex_lock(&sw_stats.lock);
    sw_stats.n = 0;
    pthread_mutex_unlock(&sw_stats.lock);
}

static int by_total_desc(const void *a, const void *b)
{
    double x = ((const sw_stat *)a)->total_us, y = ((const sw_stat *)b)->total_us;
    return (x < y) - (x > y);
}

int sw_stats_get(sw_stat *out, int max)
{
    pthread_mutex_lock(&sw_stats.lock);
    int n = sw_stats.n < max ? sw_stats.n : max;
    memcpy(out, sw_stats.s, sizeof(sw_stat) * (size_t)n);
    pthread_mutex_unlock(&sw_stats.lock);
    qsort(out, (size_t)n, sizeof *out, by_total_desc);
    return n;
}

int sw_rank(void) { return sw_rt.rank; }
int sw_world_size(void) { return sw_rt.size; }
#ifdef STARPU_SIMGRID
int sw_simulated(void) { return 1; }
#else
int sw_simulated(void) { return 0; }
#endif
int sw_offload_node(void) { return sw_rt.offload_node; }
int sw_offload_budget_mb(void) { return sw_rt.offload_budget_mb; }
int sw_memory_budget_mb(void) { return sw_rt.memory_budget_mb; }
int sw_home_pinned(void) { return sw_rt.pinned; }

int sw_compute_node(void)
{
    int id;
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &id, 1) < 1) return STARPU_MAIN_RAM;
    return (int)starpu_worker_get_memory_node((unsigned)id);
}
int sw_ncpus(void) { return (int)starpu_cpu_worker_get_count(); }
int sw_ncuda(void) { return sw_rt.started ? (int)starpu_cuda_worker_get_count() : 0; }

int sw_world_min(int v)
{
    int m = v;
    if (sw_rt.started && sw_rt.size > 1) SW_CHECK(MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return m;
}

void sw_set_task_where(unsigned where) { sw_rt.task_where = where; }
int sw_set_task_priority(int priority)
{
    int old = sw_rt.task_priority;
    sw_rt.task_priority = priority;
    return old;
}

int sw_set_task_priority_base(int base)
{
    int old = sw_rt.priority_base;
    sw_rt.priority_base = base;
    return old;
}

int32_t sw_task_where(const struct starpu_codelet *cl)
{
    unsigned w = sw_rt.task_where, can = 0;
    if (!w || !cl) return -1;
    if ((w & STARPU_CPU) && cl->cpu_funcs[0]) can |= STARPU_CPU;
    if ((w & STARPU_CUDA) && cl->cuda_funcs[0]) can |= STARPU_CUDA;
    return can ? (int32_t)can : -1;
}

static void abort_all(int status) __attribute__((noreturn));
static void abort_all(int status)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized && sw_rt.size > 1) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

void sw_fail(const char *file, int line, const char *call, long code)
{
    fprintf(stderr, "starweave: rank %d: %s:%d: %s failed with code %ld%s%s\n", sw_rt.rank, file,
            line, call, code, code < 0 ? ": " : "", code < 0 ? strerror((int)-code) : "");
    fflush(stderr);
    abort_all(1);
}

/* ---- refusals: one message, exit 2 on every rank, wherever detected ----
 *
 * A rule checked on every rank (a configuration, a layer's arguments under
 * data parallelism) is broken on every rank at about the same moment; a
 * rule only some ranks can see (one pipeline stage's parameters, one data
 * shard's tokens) is broken on those alone while the others wait for them
 * in a collective. A refusal cannot tell which from where it stands, so it
 * asks: the refusing rank tells every other rank, on a communicator of its
 * own, and waits for theirs (SW_REFUSE_WAIT_S at most; never a barrier).
 *   - every rank refused: rank 0 has printed the message; the ranks shut
 *     down together (StarPU-MPI's barrier, MPI_Finalize: each rank exits 2
 *     on its own, as a launcher or a wrapper sees it);
 *   - some did not: the lowest refusing rank prints and sends "end" to
 *     every rank; each rank's watcher thread (which polls the communicator
 *     every SW_REFUSE_POLL_MS) ends its process with exit 2 -- also the one
 *     waiting in a receive from a stage that will never send.
 * Nothing StarPU prints at shutdown (the handles a refused model leaves
 * registered) follows the message. Without MPI_THREAD_MULTIPLE (no
 * watcher thread) the refusing rank prints and MPI_Abort(2)s. */
#define SW_REFUSE_WAIT_S 2.0
#define SW_REFUSE_POLL_MS 20
enum { REFUSE_TAG_REFUSING = 1, REFUSE_TAG_END = 2 };
static struct {
    MPI_Comm comm; /* MPI_COMM_NULL: no watcher */
    pthread_t watcher;
    volatile int watching;
    volatile int refusing; /* this rank is in the refusal path */
    int heard;             /* ranks whose refusal notice arrived */
    int lowest;            /* the lowest of them (size: none) */
    pthread_mutex_t lock;
} rf = {.comm = MPI_COMM_NULL, .lock = PTHREAD_MUTEX_INITIALIZER};

/* StarPU's own warnings at shutdown (handles still registered): a refused
 * model leaves its tensors registered, and the warning would bury the
 * rule. _starpu_silent is StarPU's switch (STARPU_SILENT, read at init);
 * weak, so that a StarPU without it only costs the warning. */
extern int _starpu_silent __attribute__((weak));

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* the out-of-core directory, its files included (a process that ends
 * without StarPU's shutdown leaves them) */
static void remove_offload_dir(void)
{
    if (sw_rt.offload_node <= STARPU_MAIN_RAM || !sw_rt.offload_dir[0]) return;
    DIR *d = opendir(sw_rt.offload_dir);
    if (d) {
        struct dirent *e;
        char path[sizeof sw_rt.offload_dir + 256];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", sw_rt.offload_dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(sw_rt.offload_dir);
}

/* ends this process with exit 2 now: what it printed is flushed; no
 * destructor runs (StarPU's workers may still be running tasks) */
static void end_now(void) __attribute__((noreturn));
static void end_now(void)
{
    fflush(stdout);
    fflush(stderr);
    remove_offload_dir();
    _exit(2);
}

/* the clean end of a refusal (sw_shutdown) waits for the tasks submitted
 * so far; ranks that refused at different points of their graphs (a
 * receive submitted whose send never was) would wait forever: after
 * SW_REFUSE_SHUTDOWN_S the process ends anyway, with the same exit 2 */
#define SW_REFUSE_SHUTDOWN_S 10
static void *shutdown_watchdog(void *arg)
{
    (void)arg;
    sleep_ms(SW_REFUSE_SHUTDOWN_S * 1000L);
    end_now();
}

static void clean_end(void) __attribute__((noreturn));
static void clean_end(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, shutdown_watchdog, NULL) == 0) pthread_detach(t);
    if (&_starpu_silent) _starpu_silent = 1;
    sw_shutdown();
    exit(2);
}

static void *refuse_watch(void *arg)
{
    (void)arg;
    int buf = 0;
    MPI_Request req;
    MPI_Status st;
    double first = 0;
    MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, rf.comm, &req);
    while (rf.watching) {
        int done = 0;
        MPI_Test(&req, &done, &st);
        if (done) {
            if (st.MPI_TAG == REFUSE_TAG_END) end_now(); /* the refusing rank printed the rule */
            pthread_mutex_lock(&rf.lock);
            rf.heard++;
            if (st.MPI_SOURCE < rf.lowest) rf.lowest = st.MPI_SOURCE;
            pthread_mutex_unlock(&rf.lock);
            if (first == 0) first = now_s();
            MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, rf.comm, &req);
            continue;
        }
        /* another rank refused, this one did not: the refusing rank ends
         * it; should its "end" never come, the job ends anyway */
        if (first > 0 && !rf.refusing && now_s() - first > 4 * SW_REFUSE_WAIT_S) end_now();
        sleep_ms(SW_REFUSE_POLL_MS);
    }
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return NULL;
}

static void refuse_watch_start(int thread_level)
{
    /* simulated: SMPI knows only its actors, a thread of ours may not call
     * MPI (a refusal then MPI_Aborts, which ends the simulation) */
    if (sw_rt.size < 2 || thread_level < MPI_THREAD_MULTIPLE || sw_simulated()) return;
    SW_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &rf.comm));
    rf.heard = 0;
    rf.lowest = sw_rt.size;
    rf.watching = 1;
    if (pthread_create(&rf.watcher, NULL, refuse_watch, NULL) != 0) {
        rf.watching = 0;
        MPI_Comm_free(&rf.comm);
        rf.comm = MPI_COMM_NULL;
    }
}

static void refuse_watch_stop(void)
{
    if (rf.comm == MPI_COMM_NULL) return;
    rf.watching = 0;
    pthread_join(rf.watcher, NULL);
    MPI_Comm_free(&rf.comm);
    rf.comm = MPI_COMM_NULL;
}

static void print_refusal(const char *msg)
{
    fprintf(stderr, "starweave: error: %s\n", msg);
    fflush(stderr);
}

/* the refusal path of sw_usage_error and sw_failf: msg printed once, exit 2
 * on every rank */
static void refuse(const char *msg) __attribute__((noreturn));
static void refuse(const char *msg)
{
    static int entered;
    if (__atomic_exchange_n(&entered, 1, __ATOMIC_SEQ_CST)) /* another thread of this rank refuses: it ends us */
        for (;;) sleep_ms(1000);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Finalized(&finalized);
    const int mpi = sw_rt.started && inited && !finalized;
    if (!mpi || sw_rt.size == 1) {
        /* one rank, or before sw_init (where every rank checks the same
         * arguments: rank 0 speaks for all) */
        if ((sw_rt.started ? sw_rt.rank : env_int("OMPI_COMM_WORLD_RANK", 0)) == 0) print_refusal(msg);
        if (sw_rt.started && starpu_worker_get_id() < 0) clean_end();
        if (sw_rt.started) end_now();
        exit(2);
    }
    const int rank = sw_rt.rank, size = sw_rt.size;
    if (rf.comm == MPI_COMM_NULL) { /* no watcher thread: rank 0 speaks at once, another rank after a wait */
        if (rank != 0) sleep_ms((long)(SW_REFUSE_WAIT_S * 1000));
        print_refusal(msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
        end_now();
    }
    rf.refusing = 1;
    MPI_Request *req = calloc((size_t)size, sizeof *req);
    for (int r = 0; req && r < size; r++)
        if (r == rank) req[r] = MPI_REQUEST_NULL;
        else MPI_Isend(&sw_rt.rank, 1, MPI_INT, r, REFUSE_TAG_REFUSING, rf.comm, &req[r]);
    if (rank == 0) print_refusal(msg);
    const double t0 = now_s();
    int heard = 0, lowest = size;
    for (;;) {
        pthread_mutex_lock(&rf.lock);
        heard = rf.heard, lowest = rf.lowest;
        pthread_mutex_unlock(&rf.lock);
        if (heard == size - 1 || now_s() - t0 > SW_REFUSE_WAIT_S) break;
        sleep_ms(5);
    }
    if (req) {
        int done = 0;
        for (int k = 0; k < 200 && !done; k++) { /* sends to ranks that refused are received; the others' may wait */
            MPI_Testall(size, req, &done, MPI_STATUSES_IGNORE);
            if (!done) sleep_ms(5);
        }
    }
    if (heard == size - 1 && starpu_worker_get_id() < 0) { /* every rank refused: shut down together */
        refuse_watch_stop();
        clean_end();
    }
    /* some ranks did not refuse: the lowest refusing rank speaks and ends
     * every rank; a higher one waits for it to (and ends all if it does not) */
    if (lowest < rank) sleep_ms((long)(2 * SW_REFUSE_WAIT_S * 1000));
    if (rank != 0) print_refusal(msg);
    for (int r = 0; req && r < size; r++)
        if (r == rank) req[r] = MPI_REQUEST_NULL;
        else MPI_Isend(&sw_rt.rank, 1, MPI_INT, r, REFUSE_TAG_END, rf.comm, &req[r]);
    int done = 0;
    for (int k = 0; req && k < 100 && !done; k++) { /* delivered before this process ends */
        MPI_Testall(size, req, &done, MPI_STATUSES_IGNORE);
        if (!done) sleep_ms(5);
    }
    end_now();
}

static void vrefuse(const char *fmt, va_list ap) __attribute__((noreturn));
static void vrefuse(const char *fmt, va_list ap)
{
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    refuse(msg);
}

void sw_failf(const char *file, int line, const char *fmt, ...)
{
    (void)file, (void)line; /* the message names the call and its arguments */
    va_list ap;
    va_start(ap, fmt);
    vrefuse(fmt, ap);
}

void sw_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrefuse(fmt, ap);
}

double sw_memory_available_per_rank(void)
{
    int local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    double bytes = meminfo_kb("/proc/meminfo", "MemAvailable") * 1024.0 / (local > 0 ? local : 1);
    /* StarPU counts this rank's home buffers against its own view of the
     * node's memory (hwloc's, which can be less than MemTotal), except
     * under an offload budget, where they are not counted */
    starpu_ssize_t counted = sw_rt.started && sw_offload_budget_mb() <= 0 ? starpu_memory_get_available(STARPU_MAIN_RAM) : -1;
    if (counted > 0 && (bytes <= 0 || (double)counted < bytes)) bytes = (double)counted;
    double budget = sw_rt.memory_budget_mb * SW_MIB;
    if (budget > 0 && (bytes <= 0 || budget < bytes)) bytes = budget;
    return bytes;
}
