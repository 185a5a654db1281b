/* Runtime singleton: the only place that starts and stops StarPU / StarPU-MPI. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "config.h"

#include "starweave/runtime.h"
#include "starweave/trace.h"
#include "p2p.h"
#include "runtime_internal.h"
#include "gemm_hook.h"
#include "sim_smpi.h"

#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <starpu_expert.h>
#include <starpu_mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

sw_runtime_state sw_rt = {.size = 1, .offload_node = -1};

static const sw_gemm_hooks *gemm_hooks; /* codelets/gemm.c's, when it is linked */
void sw_gemm_hooks_register(const sw_gemm_hooks *h) { gemm_hooks = h; }


/* what the offload disk node may hold (an accounting limit: the unistd
 * backend creates files as buffers are evicted) */
#define SW_OFFLOAD_DISK_BYTES ((starpu_ssize_t)64 << 30)
/* a simulated rank without a memory budget: StarPU's main-RAM limit (MiB), 1 PiB */
#define SW_SIM_UNLIMITED_MB (1L << 30)

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
    opt->gemm = 0 /* SW_GEMM_AUTO (ops.h) */;
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

/* SW_SIM_TASK_US-like variable NAME: microseconds from 0 to 1e6, FALLBACK when unset or empty */
static double sim_us(const char *name, double fallback)
{
    const char *us = getenv(name);
    if (!us || !*us) return fallback;
    char *end = NULL;
    double v = strtod(us, &end);
    if (*end || !(v >= 0) || v > 1e6)
        sw_usage_error("%s must be a number of microseconds from 0 to 1e6 (%s = %s)", name, name, us);
    return v;
}

/* StarPU's cost per task on worker 0 of rank 0 while a StarPU-MPI receive is pending there: StarPU-MPI's
 * progression thread polls without sleeping while it waits, on the core the rank's worker runs on where ranks
 * share a node, and the tasks pay for it (docs/simulation.md, "The cost per task while a request is
 * pending"). Every rank takes part: rank 1 sends the message rank 0 waits for once rank 0 has measured
 * (MPI_Barrier from this thread, so MPI_THREAD_MULTIPLE). -1 on one rank, or without that thread level. */
static double task_cost_polled_us(int n, int thread_level)
{
    if (sw_rt.size < 2 || thread_level < MPI_THREAD_MULTIPLE) return -1;
    MPI_Comm comm;
    SW_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    float v = 0;
    starpu_data_handle_t h;
    starpu_variable_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)&v, sizeof v);
    double us = -1;
    if (sw_rt.rank == 0) {
        SW_CHECK(starpu_mpi_irecv_detached(h, 1, 0, comm, NULL, NULL));
        us = sw_task_cost_us(1, n);
    }
    SW_CHECK(MPI_Barrier(comm));
    if (sw_rt.rank == 1) SW_CHECK(starpu_mpi_isend_detached(h, 0, 0, comm, NULL, NULL));
    starpu_mpi_wait_for_all(comm);
    starpu_data_unregister(h);
    SW_CHECK(MPI_Comm_free(&comm));
    return us;
}

/* The runtime's cost per task, for the simulation (docs/simulation.md,
 * "The same step every time", "The cost per task while a request is
 * pending"). A real run of bench/calibrate.sh (SW_CALIBRATE_TASK_COST=FILE)
 * measures it on a CPU worker of rank 0, with no request pending and, on
 * two ranks or more, with a StarPU-MPI receive pending, and writes both to
 * FILE; a simulated run charges SW_SIM_TASK_US, or SW_SIM_TASK_POLLED_US
 * while the rank has point-to-point requests outstanding (p2p.h; bench/sim.sh
 * passes the file's figures), on its workers' clocks, once per task. */
static void record_or_charge_task_cost(int thread_level)
{
    if (sw_simulated()) {
        double us = sim_us("SW_SIM_TASK_US", 0);
        sw_task_sim_cost_set(us, sim_us("SW_SIM_TASK_POLLED_US", us));
        return;
    }
    const char *path = getenv("SW_CALIBRATE_TASK_COST");
    if (!path || !*path) return;
    const int n = 2000;
    double us = sw_rt.rank == 0 ? sw_task_cost_us(1, n) : -1, polled = task_cost_polled_us(n, thread_level);
    if (sw_rt.rank != 0) return;
    FILE *f = us > 0 ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "starweave: cannot record the cost per task in %s (%s)\n", path,
                us > 0 ? strerror(errno) : "not measured");
        return;
    }
    fprintf(f, "%.3f us per task: %d tasks of a codelet doing nothing, each reading two 128x128 tiles and writing a "
               "temporary, on one CPU worker of %u (sw_task_cost_us)\n",
            us, n, starpu_cpu_worker_get_count());
    if (polled > 0)
        fprintf(f, "%.3f us per task while a StarPU-MPI receive is pending (its progression thread polling), the "
                   "same tasks\n", polled);
    fclose(f);
}

int sw_env_int(const char *name, int fallback)
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

/* StarPU measures the buses on its first run in a STARPU_HOME and writes
 * what it measured to files (bus/HOST.*) that later runs read. Processes of
 * a node that start together on a home without those files all measure and
 * write them at once, and one may read a file another is still writing:
 * StarPU then aborts in _starpu_load_bus_performance_files (CI saw it on a
 * fresh build's test_nccl, 2 ranks). So one process at a time measures: the
 * one that takes a lock beside the files; the others wait until StarPU's last
 * file (the platform description, written after the others) is there, or
 * until the lock is free. The holder keeps the lock until its StarPU is up
 * (the caller closes the returned descriptor); nobody waits on the holder
 * itself, so a collective inside StarPU-MPI's start (FxT's sync point)
 * cannot deadlock. Paths as StarPU 1.3 builds them: $STARPU_PERF_MODEL_DIR
 * or $STARPU_HOME (else $HOME)/.starpu/sampling, then bus/, the host name
 * from $STARPU_HOSTNAME or gethostname up to the first dot. Returns the
 * lock's descriptor, or -1 when there is nothing to wait for. */
static int bus_calibration_turn(void)
{
    char dir[4096], host[256], last[4400], lock[4400];
    const char *models = getenv("STARPU_PERF_MODEL_DIR"), *home = getenv("STARPU_HOME");
    if (!home || !*home) home = getenv("HOME");
    if (models && *models) snprintf(dir, sizeof dir, "%s/bus", models);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.starpu/sampling/bus", home);
    else return -1;
    const char *forced = getenv("STARPU_HOSTNAME");
    if (forced && *forced) snprintf(host, sizeof host, "%s", forced);
    else {
        if (gethostname(host, sizeof host - 1) != 0) return -1;
        host[sizeof host - 1] = 0;
        char *dot = strchr(host, '.');
        if (dot) *dot = 0;
    }
    snprintf(last, sizeof last, "%s/%s.platform.v4.xml", dir, host);
    if (access(last, F_OK) == 0) return -1;
    /* StarPU creates the directory as it does (each component, 0755) */
    for (char *p = dir + 1;; p++) {
        if (*p == '/' || !*p) {
            const char c = *p;
            *p = 0;
            if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
            *p = c;
            if (!c) break;
        }
    }
    snprintf(lock, sizeof lock, "%s/%s.starweave-lock", dir, host);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    /* a calibration takes well under a second here, some seconds on a node
     * of GPUs; past two minutes something else is wrong: go on */
    for (int waited_ms = 0; waited_ms < 120000; waited_ms += 10) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (access(last, F_OK) == 0) break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    close(fd);
    return -1;
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
    int local_size = sw_env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    if (local_size > 1) {
        setenv("STARPU_WORKERS_NOBIND", "1", 0);
        setenv("STARPU_MPI_NOBIND", "1", 0);
    }
    /* StarPU owns the cores: BLAS runs single-threaded inside each task. */
    openblas_set_num_threads(1);

    struct starpu_conf conf;
    SW_CHECK(starpu_conf_init(&conf));
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    /* the cores this process may run on: mpirun binds each rank to one core where the ranks are no more than
     * the cores (its default --bind-to core), one rank included */
    long allowed = ncores;
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0 && CPU_COUNT(&cpus) < ncores)
        allowed = CPU_COUNT(&cpus);
#ifdef STARWEAVE_USE_CUDA
    /* each CUDA worker has a driver thread of its own on a core */
    const int ngpu = choose_cuda_workers(&conf, &opt, sw_env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0), local_size);
#else
    const int ngpu = 0;
    conf.ncuda = 0;
#endif
    if (opt.ncpus > 0)
        conf.ncpus = opt.ncpus;
    else if (getenv("STARPU_NCPU") == NULL) { /* StarPU-MPI would otherwise reserve a core */
        long n = (allowed < ncores / local_size ? allowed : ncores / local_size) - ngpu;
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
    if (!sw_simulated() && conf.ncpus > 0 && conf.ncpus + ngpu > allowed) {
        int r = 0;
        SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
        if (r == 0)
            fprintf(stderr, "starweave: %d CPU worker(s)%s share %ld core(s): the process may run on %ld of the "
                    "node's %ld (mpirun binds each rank to one core where the ranks are no more than the cores: "
                    "--bind-to none, or --map-by slot:PE=%d)\n", conf.ncpus, ngpu ? " and CUDA drivers" : "",
                    allowed, allowed, ncores, conf.ncpus + ngpu);
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
    /* simulated: this machine's memory is not the simulated node's. The
     * simulated rank has the memory budget where one is given, else no
     * limit (StarPU would count the folded buffers against the memory of
     * the host the calibration ran on, hwloc's, and refuse a model larger) */
    if (!getenv("STARPU_LIMIT_CPU_MEM") && (sw_simulated() || mem_kb >= 1024)) {
        char mb[32];
        snprintf(mb, sizeof mb, "%ld", !sw_simulated() ? (long)(mem_kb / 1024.0)
                                       : opt.memory_budget_mb > 0 ? (long)opt.memory_budget_mb
                                                                  : SW_SIM_UNLIMITED_MB);
        setenv("STARPU_LIMIT_CPU_MEM", mb, 1);
    }
    const int bus_lock = sw_simulated() ? -1 : bus_calibration_turn();
    int rc = starpu_mpi_init_conf(argc, argv, 0, MPI_COMM_WORLD, &conf);
    if (bus_lock >= 0) close(bus_lock);
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
                  : sw_env_int("SW_IDLE_SLEEP_US", local_size > 1 ? SW_IDLE_SLEEP_US_SHARED : 0);
    if (idle_us > 0) {
        idle_sleep_ns = (long)(idle_us < 999999 ? idle_us : 999999) * 1000;
        idle_always = (long)local_size * (long)starpu_cpu_worker_get_count() > ncores;
        if (starpu_idle_hook_register(idle_hook, NULL) < 0) fprintf(stderr, "starweave: no idle hook slot\n");
    }
    SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &sw_rt.rank));
    SW_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &sw_rt.size));
    sw_refuse_watch_start(provided);
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
    record_or_charge_task_cost(provided);
    /* the codelets' CPU GEMM backend, from opt.gemm or $SW_GEMM, through
     * the hooks codelets/gemm.c registers (gemm_hook.h: the runtime sits
     * below the codelets and calls none of them by name) */
    char gemm_what[128] = "none";
    if (gemm_hooks) {
        int gemm = opt.gemm;
        const char *gemm_env = getenv("SW_GEMM");
        if (gemm == 0 /* SW_GEMM_AUTO (ops.h) */ && gemm_env && *gemm_env && (gemm = gemm_hooks->parse(gemm_env)) < 0)
            sw_usage_error("SW_GEMM must be auto, openblas or onednn (SW_GEMM = %s)", gemm_env);
        char gemm_msg[256];
        if (gemm_hooks->set(gemm, gemm_msg, sizeof gemm_msg) < 0) sw_usage_error("%s", gemm_msg);
        gemm_hooks->describe(gemm_what, sizeof gemm_what);
    }
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
    sw_calibration_end();
    sw_memory_watch(0);
#ifdef STARWEAVE_USE_CUDA
    starpu_cublas_shutdown();
#endif
    sw_refuse_watch_stop();
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

double sw_memory_available_per_rank(void)
{
    /* simulated: the simulated rank's memory is the budget's, this
     * machine's is not it (the buffers are folded) */
    if (sw_simulated()) return sw_rt.memory_budget_mb * SW_MIB;
    int local = sw_env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
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
