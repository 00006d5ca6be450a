/* Table-driven command-line options, shared by the commands that take
 * many (train, compare). Each option is a row: its name, its kind, where
 * its value goes and its help line; --name VALUE and --name=VALUE both
 * work. Adding an option is adding a row. Internal to tools/. */
#ifndef OPTIM_TOOLS_OPTIONS_H
#define OPTIM_TOOLS_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum tool_opt_kind {
    TOOL_INT, /* long long in [lo, hi] */
    TOOL_REAL, /* double in [lo, hi] (finite) */
    TOOL_TEXT, /* const char *, the argument itself */
    TOOL_LIST /* tool_int_list: comma-separated whole numbers in [lo, hi], "" for none */
} tool_opt_kind;

#define TOOL_LIST_MAX 8
typedef struct tool_int_list {
    int64_t v[TOOL_LIST_MAX];
    size_t n;
} tool_int_list;

typedef struct tool_option {
    const char *name; /* "--epochs" */
    const char *metavar; /* "N" */
    tool_opt_kind kind;
    void *target;
    double lo, hi;
    const char *help; /* may hold '\n' for more lines */
    int given; /* set by the parser */
} tool_option;

/* Parses argv into the table's targets. Arguments not starting with "--"
 * go to pos (up to max_pos; *n_pos their count). Returns 0, 1 after a
 * message on stderr ("optim CMD: ..."), or 2 for --help / -h. */
int optim_tool_parse(const char *cmd, tool_option *opts, size_t n, int argc, char **argv,
                     char **pos, size_t max_pos, size_t *n_pos);

/* The option rows of a usage text. */
void optim_tool_usage(FILE *f, const tool_option *opts, size_t n);

/* The option named name (NULL if none). */
tool_option *optim_tool_find(tool_option *opts, size_t n, const char *name);

/* "optim CMD: message" on stderr; returns 1. */
int optim_tool_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
