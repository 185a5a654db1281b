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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* SMPI reserves each folded allocation with an anonymous mmap of its size,
 * then maps the file's blocks over it from its start: a 2 MiB page of the
 * file is mapped by one entry only where the address is 2 MiB aligned, and
 * the kernel aligns an anonymous mapping so only when its length is a
 * multiple of 2 MiB (the tensors' are not). So anonymous mappings of 4 MiB
 * and more that let the kernel choose the address start on a 2 MiB
 * boundary here (the slack around them unmapped at once: the mapping is
 * the one asked for, placed elsewhere). */
#define HUGE_2M ((size_t)2 << 20)
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real) real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    if (addr || !(flags & MAP_ANONYMOUS) || (flags & MAP_FIXED) || len < 2 * HUGE_2M) return real(addr, len, prot, flags, fd, off);
    size_t span = len + HUGE_2M;
    char *p = real(NULL, span, prot, flags, fd, off);
    if (p == MAP_FAILED) return real(addr, len, prot, flags, fd, off);
    char *a = (char *)(((uintptr_t)p + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    size_t tail = (size_t)(p + span - (a + len));
    if (tail) munmap(a + len, tail);
    return a;
}

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
