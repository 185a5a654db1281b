/* The example programs' command line: a table of flags read from argv, its
 * refusals and its --help (cli.h says why not getopt_long). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starweave.h"
#include "cli.h"

/* Before sw_init the runtime does not know the rank: the launcher's variable
 * (Open MPI's; PMI's elsewhere), 0 without a launcher. */
static int launch_rank(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_RANK");
    if (!v) v = getenv("PMI_RANK");
    return v ? atoi(v) : 0;
}

static const cli_flag *lookup(const cli_flag *flags, const char *name, size_t len)
{
    for (const cli_flag *f = flags; f->name; f++)
        if (f->type != CLI_SECTION && strlen(f->name) == len && !strncmp(f->name, name, len)) return f;
    return NULL;
}

/* Levenshtein distance of a[0 .. la) and b (short strings: flag names) */
static size_t distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64) return (size_t)-1;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up, row[j] = best;
        }
    }
    return row[lb];
}

/* The flag a typo most likely meant: the one the typed name begins (--zer:
 * --zero), else the nearest within 2 edits and under half the typed name's
 * length (--tpp: --tp; --foo: none); NULL when none is near. */
static const char *nearest(const cli_flag *flags, const char *name, size_t len)
{
    const char *best = NULL, *prefix_of = NULL;
    size_t bestd = (size_t)-1;
    int prefixes = 0;
    for (const cli_flag *f = flags; f->name; f++) {
        if (f->type == CLI_SECTION) continue;
        if (len > 2 && strlen(f->name) > len && !strncmp(f->name, name, len)) prefixes++, prefix_of = f->name;
        size_t d = distance(name, len, f->name);
        if (d < bestd) bestd = d, best = f->name;
    }
    if (prefixes == 1) return prefix_of;
    size_t typed = len > 2 && name[0] == '-' && name[1] == '-' ? len - 2 : len;
    return bestd <= 2 && 2 * bestd < typed ? best : NULL;
}

/* "none|selective|full" -> "none, selective or full" */
static void choice_list(const char *choices, char *out, size_t n)
{
    size_t k = 0, bars = 0, seen = 0;
    for (const char *c = choices; *c; c++) bars += *c == '|';
    for (const char *c = choices; *c && k + 5 < n; c++) {
        if (*c != '|') { out[k++] = *c; continue; }
        const char *sep = ++seen == bars ? " or " : ", ";
        for (; *sep && k + 1 < n; sep++) out[k++] = *sep;
    }
    out[k] = 0;
}

static void range_error(const cli_flag *f, const char *v)
{
    int open_above = f->type == CLI_INT ? f->max >= CLI_INT_MAX : f->max >= CLI_NO_MAX;
    if (open_above)
        sw_usage_error("%s must be %s %g (got %s)", f->name, f->min_open ? "greater than" : "at least", f->min, v);
    sw_usage_error("%s must be in %c%g, %g] (got %s)", f->name, f->min_open ? '(' : '[', f->min, f->max, v);
}

/* Reads the text v into f's destination, or refuses it */
static void set_value(const cli_flag *f, const char *v)
{
    char *end;
    errno = 0;
    switch (f->type) {
    case CLI_INT: {
        long x = strtol(v, &end, 10);
        if (errno || *end || end == v || x < -INT_MAX || x > INT_MAX) sw_usage_error("%s expects an integer, got '%s'", f->name, v);
        if ((double)x < f->min || (double)x > f->max) range_error(f, v);
        *(int *)f->dest = (int)x;
        return;
    }
    case CLI_FLOAT:
    case CLI_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || *end || end == v || !isfinite(x)) sw_usage_error("%s expects a number, got '%s'", f->name, v);
        if (x < f->min || (f->min_open && x == f->min) || x > f->max) range_error(f, v);
        if (f->type == CLI_FLOAT) *(float *)f->dest = (float)x;
        else *(double *)f->dest = x;
        return;
    }
    case CLI_STRING: *(const char **)f->dest = v; return;
    case CLI_CHOICE: {
        int i = 0;
        for (const char *c = f->choices; *c; i++) {
            size_t n = strcspn(c, "|");
            if (strlen(v) == n && !strncmp(c, v, n)) {
                *(int *)f->dest = i;
                return;
            }
            c += n + (c[n] == '|');
        }
        char list[256];
        choice_list(f->choices, list, sizeof list);
        sw_usage_error("%s expects %s, got '%s'", f->name, list, v);
    }
    case CLI_BOOL: *(int *)f->dest = 1; return;
    case CLI_SECTION: return;
    }
}

void cli_help(FILE *out, const char *synopsis, const char *about, const cli_flag *flags)
{
    fprintf(out, "usage: %s\n", synopsis);
    if (about) fputs(about, out), fputc('\n', out);
    for (const cli_flag *f = flags; f->name; f++) {
        if (f->type == CLI_SECTION) {
            fprintf(out, "%s:\n", f->name);
            continue;
        }
        char left[96];
        const char *meta = f->meta ? f->meta : f->type == CLI_CHOICE ? f->choices : "";
        if (f->implicit) snprintf(left, sizeof left, "  %s [%s]", f->name, meta);
        else snprintf(left, sizeof left, "  %s%s%s", f->name, *meta ? " " : "", meta);
        int col = fprintf(out, "%s", left);
        fprintf(out, "%*s", col < 20 ? 20 - col : 2, "");
        for (const char *h = f->help ? f->help : ""; *h; h++) {
            fputc(*h, out);
            if (*h == '\n') fprintf(out, "%20s", "");
        }
        if (f->def && f->type != CLI_BOOL) fprintf(out, " (%s)", f->def);
        fputc('\n', out);
    }
    fprintf(out, "  --help            this text\n");
}

void cli_parse(const char *prog, const char *synopsis, const char *about, const cli_flag *flags, int argc, char **argv)
{
    for (const cli_flag *f = flags; f->name; f++)
        if (f->def && f->type != CLI_SECTION) set_value(f, f->def);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { /* where a flag may stand (not as a value) */
            if (launch_rank() == 0) cli_help(stdout, synopsis, about, flags), fflush(stdout);
            exit(0);
        }
        if (a[0] != '-') sw_usage_error("%s: unexpected argument '%s'; see --help", prog, a);
        const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL; /* --name=value */
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_flag *f = lookup(flags, a, len);
        if (!f) {
            const char *near = nearest(flags, a, len);
            sw_usage_error("%s: unknown option %.*s%s%s%s; see --help", prog, (int)len, a, near ? " (did you mean " : "",
                           near ? near : "", near ? "?)" : "");
        }
        if (f->type == CLI_BOOL) {
            if (eq) sw_usage_error("%s: %s takes no value (got '%s'); see --help", prog, f->name, eq + 1);
            set_value(f, "");
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        /* the next argument is the value unless it is a flag (values never start with --) */
        if (!v && i + 1 < argc && strncmp(argv[i + 1], "--", 2)) v = argv[++i];
        if (!v && f->implicit) v = f->implicit;
        if (!v) sw_usage_error("%s: %s needs a value; see --help", prog, f->name);
        set_value(f, v);
    }
}
