/* Table-driven option parsing for the tool's commands (tools/options.h). */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Prints "optim CMD: MESSAGE" on stderr in one write where it fits 8 KiB,
 * so that the lines of ranks sharing a terminal do not interleave. */
int optim_tool_fail(const char *cmd, const char *fmt, ...)
{
    char line[8192];
    int n = snprintf(line, sizeof line, "optim %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n + 1 < sizeof line) {
        line[n] = '\n';
        fwrite(line, 1, (size_t)n + 1, stderr);
        return 1;
    }
    va_start(ap, fmt); /* too long for one write: in pieces */
    fprintf(stderr, "optim %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int parse_int(const char *s, double lo, double hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE || (double)v < lo || (double)v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_list(const char *s, double lo, double hi, tool_int_list *out)
{
    tool_int_list l = {{0}, 0};
    while (*s) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno == ERANGE || (double)v < lo || (double)v > hi || l.n == TOOL_LIST_MAX)
            return -1;
        if (*end && *end != ',') return -1;
        l.v[l.n++] = v;
        s = *end ? end + 1 : end;
        if (*end && !*s) return -1; /* trailing comma */
    }
    *out = l;
    return 0;
}

static int set_value(const char *cmd, tool_option *o, const char *val)
{
    char *end;
    long long i;
    double d;
    switch (o->kind) {
    case TOOL_INT:
        if (parse_int(val, o->lo, o->hi, &i))
            return optim_tool_fail(cmd, "%s '%s': expected a whole number from %.0f to %.0f",
                                   o->name, val, o->lo, o->hi);
        *(long long *)o->target = i;
        break;
    case TOOL_REAL:
        errno = 0;
        d = strtod(val, &end);
        if (!*val || *end || errno == ERANGE || !isfinite(d) || d < o->lo || d > o->hi)
            return optim_tool_fail(cmd, "%s '%s': expected a number from %g to %g", o->name, val,
                                   o->lo, o->hi);
        *(double *)o->target = d;
        break;
    case TOOL_TEXT: *(const char **)o->target = val; break;
    case TOOL_LIST:
        if (parse_list(val, o->lo, o->hi, o->target))
            return optim_tool_fail(
                cmd, "%s '%s': expected up to %d comma-separated whole numbers from %.0f to %.0f",
                o->name, val, TOOL_LIST_MAX, o->lo, o->hi);
        break;
    }
    o->given = 1;
    return 0;
}

tool_option *optim_tool_find(tool_option *opts, size_t n, const char *name)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(opts[k].name, name) == 0) return &opts[k];
    return NULL;
}

int optim_tool_parse(const char *cmd, tool_option *opts, size_t n, int argc, char **argv,
                     char **pos, size_t max_pos, size_t *n_pos)
{
    *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 2;
        if (strncmp(a, "--", 2) != 0) {
            if (*n_pos == max_pos)
                return optim_tool_fail(cmd, "unexpected argument '%s' (try 'optim %s --help')", a,
                                       cmd);
            pos[(*n_pos)++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        tool_option *o = NULL;
        for (size_t k = 0; k < n && !o; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, a, len) == 0) o = &opts[k];
        if (!o)
            return optim_tool_fail(cmd, "unknown argument '%.*s' (try 'optim %s --help')", (int)len,
                                   a, cmd);
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else return optim_tool_fail(cmd, "%s needs a value (try 'optim %s --help')", a, cmd);
        if (set_value(cmd, o, val)) return 1;
    }
    return 0;
}

void optim_tool_usage(FILE *f, const tool_option *opts, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        char head[64];
        snprintf(head, sizeof head, "%s %s", opts[k].name, opts[k].metavar);
        fprintf(f, "  %-26s ", head);
        for (const char *h = opts[k].help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n') fprintf(f, "  %-26s ", "");
        }
        fputc('\n', f);
    }
}
