/* bench/sim.sh's SW_SIM_FOLD_DIR (docs/simulation.md, "Where the wall time
 * goes"): preloaded into SimGrid's smpirun, puts the file SMPI folds every
 * rank's shared allocations onto (a mkstemp of "/tmp/simgrid-shmalloc-
 * XXXXXX", the directory fixed in SimGrid 3.32) in that directory instead.
 * SMPI maps each 64 MiB block of a folded allocation onto the file with
 * MAP_POPULATE; on a disk's /tmp the kernel then fills one page-table entry
 * per 4 KiB of every simulated rank's memory, the system half of a big
 * simulation's CPU time. On a tmpfs mounted with huge=always the file's
 * pages are 2 MiB and each is mapped by one entry: 512 times fewer. Nothing
 * else changes (the same mappings, the same simulation). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mkstemp(char *tmpl)
{
    static int (*real)(char *);
    if (!real) real = (int (*)(char *))dlsym(RTLD_NEXT, "mkstemp");
    static const char prefix[] = "/tmp/simgrid-shmalloc-";
    const char *dir = getenv("SW_SIM_FOLD_DIR");
    if (dir && *dir && !strncmp(tmpl, prefix, sizeof prefix - 1)) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/simgrid-shmalloc-%s", dir, tmpl + sizeof prefix - 1) <
            sizeof path) {
            int fd = real(path);
            /* SMPI unlinks the name it gave (which no longer names the
             * file) and keeps only the descriptor: unlink the file here */
            if (fd >= 0) unlink(path);
            return fd;
        }
    }
    return real(tmpl);
}
