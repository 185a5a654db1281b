/* The simulation build's check of every task's calibrated time
 * (docs/simulation.md, "Sizes never run here").
 *
 * StarPU with SimGrid takes each task's time from its codelet's
 * history-based model, looked up by the task's footprint (a hash of its
 * buffers' shapes). A footprint never calibrated used to stop StarPU with
 * an assertion naming only the codelet. Every codelet's model
 * (codelet_util.h's SW_PERFMODEL) computes its footprint here in the
 * simulation build, looks it up first, and where there is no time:
 *
 * - by default prints what to calibrate (codelet, bytes, flops, footprint)
 *   and ends the program with exit status 2;
 * - with SW_SIM_MISSING=FILE (bench/sim.sh --estimate's first pass) appends
 *   "symbol footprint bytes flops" to FILE, once per footprint, and lets
 *   the task take the time of the footprint SW_SIM_SUBSTITUTE=FILE names
 *   for its codelet ("symbol footprint" lines: one measured footprint per
 *   codelet): that pass only lists what the run needs (the task graph does
 *   not depend on the times), bench/perfmodel_merge.py --estimate then
 *   writes regression estimates for those footprints and the second pass
 *   runs on them. */
#include "config.h"

#include <starpu.h>

#ifdef STARPU_SIMGRID
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint32_t sw_sim_footprint(struct starpu_task *task);
uint32_t sw_sim_work_footprint(struct starpu_task *task);
uint32_t sw_work_footprint(struct starpu_task *task); /* codelets/attention.c */

/* footprints already written to SW_SIM_MISSING (per process: every
 * simulated rank shares it; a footprint may be listed by several ranks) */
#define SEEN_SLOTS 65536
static uint64_t seen[SEEN_SLOTS];

static int seen_before(const char *sym, uint32_t fp)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *c = sym; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    uint64_t key = (h << 32 | fp) | 1; /* never 0 (an empty slot) */
    for (size_t i = (size_t)(key % SEEN_SLOTS), n = 0; n < SEEN_SLOTS; i = (i + 1) % SEEN_SLOTS, n++) {
        if (seen[i] == key) return 1;
        if (!seen[i]) {
            seen[i] = key;
            return 0;
        }
    }
    return 1; /* full: listed duplicates are merged later anyway */
}

/* SW_SIM_SUBSTITUTE's lines, read once: in the first pass every task of
 * these shapes lacks a time, and reading the file again for each (as this
 * did) cost an open and a scan per task */
static struct sub {
    char name[256];
    uint32_t fp;
} *subs;
static int nsubs = -1; /* -1: not read yet */

/* the footprint SW_SIM_SUBSTITUTE names for sym; 0 and *found = 0 if none */
static uint32_t substitute(const char *sym, int *found)
{
    if (nsubs < 0) {
        const char *path = getenv("SW_SIM_SUBSTITUTE");
        FILE *f = path ? fopen(path, "r") : NULL;
        char name[256];
        unsigned fp;
        int cap = 0;
        nsubs = 0;
        while (f && fscanf(f, "%255s %x", name, &fp) == 2) {
            if (nsubs == cap) {
                struct sub *n = realloc(subs, sizeof *subs * (size_t)(cap = cap ? 2 * cap : 64));
                if (!n) break;
                subs = n;
            }
            snprintf(subs[nsubs].name, sizeof subs[nsubs].name, "%s", name);
            subs[nsubs++].fp = (uint32_t)fp;
        }
        if (f) fclose(f);
    }
    *found = 0;
    for (int i = 0; i < nsubs; i++) /* the first line for sym, as the scan of the file did */
        if (!strcmp(subs[i].name, sym)) {
            *found = 1;
            return subs[i].fp;
        }
    return 0;
}

/* fp, once the calibration is found to have a time for it (else what to calibrate, or --estimate's list) */
static uint32_t sim_checked(struct starpu_task *task, uint32_t fp)
{
    struct starpu_perfmodel *model = task->cl ? task->cl->model : NULL;
    if (!model || !model->symbol) return fp;
    int w = starpu_worker_get_id();
    struct starpu_perfmodel_arch *arch = starpu_worker_get_perf_archtype(w < 0 ? 0 : w, STARPU_NMAX_SCHED_CTXS);
    double t = starpu_perfmodel_history_based_expected_perf(model, arch, fp);
    if (t == t && t > 0) return fp; /* calibrated (or estimated by bench/sim.sh --estimate) */
    size_t bytes = 0;
    for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++) bytes += starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
    const char *missing = getenv("SW_SIM_MISSING");
    if (missing && *missing) {
        if (!seen_before(model->symbol, fp)) {
            FILE *f = fopen(missing, "a");
            if (f) {
                fprintf(f, "%s %08x %zu %.17g\n", model->symbol, fp, bytes, task->flops);
                fclose(f);
            }
        }
        int found;
        uint32_t other = substitute(model->symbol, &found);
        if (found) return other;
        fprintf(stderr,
                "starweave: simulation: codelet '%s' has no measured size at all in the calibration (host '%s'): no "
                "regression can be fitted for it; calibrate it (bench/calibrate.sh with a layout that runs it)\n",
                model->symbol, getenv("STARPU_HOSTNAME") ? getenv("STARPU_HOSTNAME") : "?");
        fflush(stderr);
        _exit(2);
    }
    const char *host = getenv("STARPU_HOSTNAME");
    const char *dir = getenv("STARPU_PERF_MODEL_DIR");
    fprintf(stderr,
            "starweave: simulation: codelet '%s' has no calibrated time for a task of %zu bytes, %.6g flops (footprint "
            "%08x) on host '%s' in %s: calibrate this shape and layout (bench/calibrate.sh), or let bench/sim.sh "
            "--estimate fit one from the sizes measured (a regression, printed as an estimate)\n",
            model->symbol, bytes, task->flops, fp, host ? host : "(STARPU_HOSTNAME unset)", dir ? dir : "~/.starpu");
    fflush(stderr);
    fflush(stdout);
    _exit(2); /* at once on every rank: one simulation process holds them all */
}
uint32_t sw_sim_footprint(struct starpu_task *task) { return sim_checked(task, starpu_task_data_footprint(task)); }
uint32_t sw_sim_work_footprint(struct starpu_task *task) { return sim_checked(task, sw_work_footprint(task)); }
#endif
