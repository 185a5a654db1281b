/* One command line for the example programs (gpt_train, dit_train,
 * custom_model, encoder_mlm, encoder_regress, collectives): each program
 * declares its flags in one table -- name, type, where the value goes, its
 * default, its range, its help text -- and cli_parse reads argv against it:
 *
 *   int steps = 0, sp = 0;
 *   const cli_flag flags[] = {
 *       CLI_INT("--steps", &steps, "20", 1, CLI_INT_MAX, "N", "training steps"),
 *       CLI_BOOL("--sp", &sp, "sequence parallelism"),
 *       CLI_END};
 *   cli_parse("encoder_mlm", "[mpirun -np N] encoder_mlm [options]", NULL, flags, argc, argv);
 *
 * Refused, with the rule and the value, exit 2 (sw_usage_error: rank 0
 * prints, every rank exits by itself -- the parse runs before sw_init and
 * every rank parses the same argv, so no rank waits for another): an
 * unknown flag (the nearest valid one named: "unknown option --zer (did you
 * mean --zero?)"), a positional argument, a value that is not a number of
 * the flag's type or lies outside its range, a choice not among its values,
 * a missing value -- the first of them in argv. --help (or -h) where a flag
 * may stand: the text generated from the same table, on rank 0, exit 0.
 *
 * Why not getopt_long: it accepts any unique prefix of a flag, so `--zer 3`
 * would silently mean `--zero 3` (and a prefix that is unique today becomes
 * ambiguous when a flag is added); its optional arguments exist only as
 * `--pad=7`, while the programs' tests and docs write `--pad 7`; it prints
 * its own messages on every rank and knows nothing of types, ranges or help
 * text, so the table would be needed anyway. The loop over argv is then a
 * few lines more than getopt_long's setup. */
#ifndef SW_EXAMPLES_CLI_H
#define SW_EXAMPLES_CLI_H

#include <limits.h>
#include <stdio.h>

typedef enum cli_type {
    CLI_INT,     /* int *: a decimal integer in [min, max] */
    CLI_FLOAT,   /* float *: a finite number in [min, max] ((min, max] with min_open) */
    CLI_DOUBLE,  /* double *: likewise */
    CLI_STRING,  /* const char **: any text (a file, a directory, a list the program reads itself) */
    CLI_BOOL,    /* int *: 1 when given; takes no value */
    CLI_CHOICE,  /* int *: the index of the value among choices ("none|selective|full") */
    CLI_SECTION, /* no flag: a heading of --help */
} cli_type;

typedef struct cli_flag {
    const char *name;     /* "--steps"; CLI_SECTION: the heading; NULL ends the table */
    cli_type type;
    void *dest;           /* where the value goes (the type above) */
    const char *def;      /* the default as text, read like a value before argv (NULL: dest keeps what the
                           * program put there, e.g. a sentinel its help text explains); --help shows it */
    double min, max;      /* CLI_INT, CLI_FLOAT, CLI_DOUBLE: the range, both ends in */
    int min_open;         /* CLI_FLOAT, CLI_DOUBLE: min itself is out */
    const char *choices;  /* CLI_CHOICE: the values, '|' between them */
    const char *implicit; /* CLI_INT: the value when the flag comes without one (`--pad` = `--pad 1`); a value
                           * follows it unless the next argument is a flag; NULL: the value is required */
    const char *meta;     /* the value's name in --help (N, X, FILE) */
    const char *help;     /* '\n' continues on the next line */
} cli_flag;

#define CLI_INT_MAX ((double)INT_MAX)
#define CLI_INT_MIN ((double)-INT_MAX)
#define CLI_NO_MAX 1e300 /* a float range open above */

/* The destination's type is checked: a pointer of another type is a compile error (-Werror) */
#define CLI_INT(name, dest, def, min, max, meta, help) \
    {name, CLI_INT, (void *)(1 ? (dest) : (int *)0), def, min, max, 0, NULL, NULL, meta, help}
#define CLI_INT_OPT(name, dest, implicit, min, max, meta, help) \
    {name, CLI_INT, (void *)(1 ? (dest) : (int *)0), NULL, min, max, 0, NULL, implicit, meta, help}
#define CLI_FLOAT(name, dest, def, min, max, meta, help) \
    {name, CLI_FLOAT, (void *)(1 ? (dest) : (float *)0), def, min, max, 0, NULL, NULL, meta, help}
#define CLI_DOUBLE_ABOVE(name, dest, def, min, max, meta, help) \
    {name, CLI_DOUBLE, (void *)(1 ? (dest) : (double *)0), def, min, max, 1, NULL, NULL, meta, help}
#define CLI_DOUBLE(name, dest, def, min, max, meta, help) \
    {name, CLI_DOUBLE, (void *)(1 ? (dest) : (double *)0), def, min, max, 0, NULL, NULL, meta, help}
#define CLI_STRING(name, dest, def, meta, help) \
    {name, CLI_STRING, (void *)(1 ? (dest) : (const char **)0), def, 0, 0, 0, NULL, NULL, meta, help}
#define CLI_BOOL(name, dest, help) {name, CLI_BOOL, (void *)(1 ? (dest) : (int *)0), NULL, 0, 0, 0, NULL, NULL, NULL, help}
#define CLI_CHOICE(name, dest, def, choices, help) \
    {name, CLI_CHOICE, (void *)(1 ? (dest) : (int *)0), def, 0, 0, 0, choices, NULL, NULL, help}
#define CLI_CHOICE_META(name, dest, choices, meta, help) \
    {name, CLI_CHOICE, (void *)(1 ? (dest) : (int *)0), NULL, 0, 0, 0, choices, NULL, meta, help}
#define CLI_HEADING(title) {title, CLI_SECTION, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, NULL}
#define CLI_END {NULL, CLI_SECTION, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, NULL}

/* Reads argv[1 ..] into the table's destinations (the defaults first), or
 * refuses (exit 2) or prints --help (exit 0). prog names the program in the
 * messages, synopsis follows "usage: " in --help, about (may be NULL) is the
 * paragraph under it and ends with a newline. Returns only on success. */
void cli_parse(const char *prog, const char *synopsis, const char *about, const cli_flag *flags, int argc, char **argv);

/* Writes the --help text of the table to f. */
void cli_help(FILE *f, const char *synopsis, const char *about, const cli_flag *flags);

#endif
