/* Private helpers every folder above src/core/ shares: the checks of a
 * configuration and of a call's arguments (docs/own-model.md, "Misuse"),
 * and allocation that cannot fail quietly. */
#ifndef STARWEAVE_CORE_CHECK_H
#define STARWEAVE_CORE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "starweave/runtime.h"
#include "starweave/tensor.h"

/* configuration checks: on a violated rule, "rule (values)" into msg (of
 * size n) and return -1 from the checking function */
#define SW_RULE(cond, ...)                      \
    do {                                        \
        if (!(cond)) {                          \
            snprintf(msg, n, __VA_ARGS__);      \
            return -1;                          \
        }                                       \
    } while (0)

/* Argument checks at submission (docs/own-model.md, "Misuse"): host-side
 * and cheap; on misuse "fn: arg: rule (values)" and exit 2 on every rank
 * (each checks the same thing), before anything is submitted. */
/* arg is not NULL (a context, a layer handle, a saved set) */
static inline void sw_check_ptr(const char *fn, const char *arg, const void *v)
{
    if (!v) sw_usage_error("%s: %s: must not be NULL", fn, arg);
}
/* t is a tensor [rows, cols] */
static inline void sw_check_tensor(const char *fn, const char *arg, const sw_tensor *t, int64_t rows, int64_t cols)
{
    if (!t) sw_usage_error("%s: %s: must be a tensor [%lld, %lld] (NULL)", fn, arg, (long long)rows, (long long)cols);
    if (t->rows != rows || t->cols != cols)
        sw_usage_error("%s: %s: must be a tensor [%lld, %lld] ([%lld, %lld] given)", fn, arg, (long long)rows,
                       (long long)cols, (long long)t->rows, (long long)t->cols);
}

static inline void *sw_xcalloc(size_t n, size_t size)
{
    void *v = calloc(n ? n : 1, size);
    if (!v) { perror("starweave: calloc"); abort(); }
    return v;
}

static inline void *sw_xrealloc(void *p, size_t size)
{
    void *v = realloc(p, size ? size : 1);
    if (!v) { perror("starweave: realloc"); abort(); }
    return v;
}

#endif
