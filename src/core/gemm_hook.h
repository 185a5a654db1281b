/* The codelets' CPU GEMM backend, chosen by sw_init from sw_options.gemm
 * or $SW_GEMM: the runtime sits below the codelets (docs/layout.md) and
 * calls none of them by name, so codelets/gemm.c registers these when it
 * is linked (a constructor). A program that links no GEMM starts without
 * them, and its banner says "CPU GEMM none". Private to the library. */
#ifndef STARWEAVE_GEMM_HOOK_H
#define STARWEAVE_GEMM_HOOK_H

#include <stddef.h>

typedef struct sw_gemm_hooks {
    int (*parse)(const char *name);                /* a backend's name -> its value, -1 for anything else */
    int (*set)(int backend, char *msg, size_t n);  /* 0, or -1 with the rule in msg */
    void (*describe)(char *out, size_t n);         /* the backend in use, as the banner says it */
} sw_gemm_hooks;

void sw_gemm_hooks_register(const sw_gemm_hooks *h) __attribute__((visibility("hidden")));

#endif
