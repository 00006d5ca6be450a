/*
 * doc_tables - the parameter tables of docs/optimizers.md, generated from
 * the class tables through the public API (optim/optimizer_class.h).
 *
 *   build/doc_tables [FILE]      FILE (default stdin) with every region
 *                                between "<!-- params: NAME -->" and
 *                                "<!-- end params -->" replaced by the table
 *                                of class NAME; to stdout
 *   build/doc_tables --all       the table of every built-in class
 *
 * Regenerate the doc (tests/test_doc_tables.sh fails when it drifts):
 *   build/doc_tables docs/optimizers.md > /tmp/o.md && mv /tmp/o.md docs/optimizers.md
 *
 * A row per declared parameter (optim_class.params), after rows for the base
 * options the class gives a default (learning_rate, weight_decay). Exit status 0, 1
 * for a file that cannot be read, 2 for a bad region or an unknown class.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizers.h"

#define BEGIN_MARK "<!-- params: "
#define END_MARK "<!-- end params -->"

/* Python's repr of a float: the shortest text that reads back, with ".0"
 * for whole values. */
static void put_number(double v)
{
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) != v) continue;
        /* Python writes 100.0, not 1e+02: no exponent below 1e16. */
        int e = v != 0 && isfinite(v) ? (int)floor(log10(fabs(v))) : 0;
        if (e >= prec && e < 16) snprintf(buf, sizeof buf, "%.*g", e + 1, v);
        break;
    }
    fputs(buf, stdout);
    if (!strpbrk(buf, ".eninf")) fputs(".0", stdout);
}

static const char *type_name(optim_param_type t)
{
    switch (t) {
    case OPTIM_PARAM_FLOAT: return "float";
    case OPTIM_PARAM_BOOL: return "bool";
    case OPTIM_PARAM_INT: return "int";
    case OPTIM_PARAM_STRING: return "string";
    case OPTIM_PARAM_PATTERNS: return "list of patterns";
    }
    return "(a type this tool does not know: update scripts/doc_tables.c)";
}

static const char *const *choices_of(const optim_class *cls, size_t i)
{
    if (cls->version < 2 || !cls->param_choices) return NULL;
    return cls->param_choices[i];
}

static void put_default(const optim_class *cls, size_t i)
{
    const optim_param *p = &cls->params[i];
    const char *const *choices = choices_of(cls, i);
    if (isnan(p->default_value)) fputs("null", stdout);
    else if (p->type == OPTIM_PARAM_BOOL) fputs(p->default_value != 0 ? "true" : "false", stdout);
    else if (p->type == OPTIM_PARAM_STRING && choices)
        printf("`%s`", choices[(size_t)p->default_value]);
    else if (p->type == OPTIM_PARAM_INT || (p->flags & OPTIM_PARAM_COUNT))
        printf("%.0f", p->default_value);
    else put_number(p->default_value);
}

static void put_bound(const optim_param *p, double v)
{
    if (p->type == OPTIM_PARAM_INT || (p->flags & OPTIM_PARAM_COUNT)) printf("%.0f", v);
    else printf("%.17g", v);
}

/* [min, max] as text: "any", ">= 0", "(0, 1]"... */
static void put_interval(const optim_param *p)
{
    int lo = isfinite(p->min), hi = isfinite(p->max);
    int lo_x = (p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) != 0;
    int hi_x = (p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) != 0;
    if (!lo && !hi) {
        fputs("any", stdout);
    } else if (lo && hi) {
        fputs(lo_x ? "(" : "[", stdout);
        put_bound(p, p->min);
        fputs(", ", stdout);
        put_bound(p, p->max);
        fputs(hi_x ? ")" : "]", stdout);
    } else {
        fputs(lo ? (lo_x ? "> " : ">= ") : (hi_x ? "< " : "<= "), stdout);
        put_bound(p, lo ? p->min : p->max);
    }
}

static void put_range(const optim_class *cls, size_t i)
{
    const optim_param *p = &cls->params[i];
    const char *const *choices = choices_of(cls, i);
    if (p->type == OPTIM_PARAM_BOOL) {
        fputs("true or false", stdout);
    } else if (p->type == OPTIM_PARAM_STRING) {
        fputs("one of", stdout);
        for (size_t k = 0; choices && choices[k]; k++) printf("%s `%s`", k ? "," : "", choices[k]);
    } else {
        put_interval(p);
    }
    if (p->flags & OPTIM_PARAM_NULLABLE) fputs(", or null", stdout);
}

static const char *generation_of(uint32_t flags)
{
    if (flags & OPTIM_PARAM_LEGACY_ONLY) return "legacy only";
    if (flags & OPTIM_PARAM_KERAS3_ONLY) return "Keras 3 only";
    return "";
}

static void put_notes(uint32_t flags)
{
    const char *sep = "";
    if (flags & OPTIM_PARAM_DYNAMIC) {
        fputs("hyperparameter (variable, callable, schedule)", stdout);
        sep = "; ";
    }
    if (flags & OPTIM_PARAM_COUNT) printf("%swhole values written without `.0`", sep);
}

static void put_row(const optim_class *cls, size_t i)
{
    const optim_param *p = &cls->params[i];
    printf("| %s | %s | ", p->name, type_name(p->type));
    put_default(cls, i);
    fputs(" | ", stdout);
    put_range(cls, i);
    printf(" | %s | ", generation_of(p->flags));
    put_notes(p->flags);
    fputs(" |\n", stdout);
}

/* A name-pattern-list key (class table version 4's pattern_params). */
static void put_pattern_row(const optim_param *p)
{
    printf("| %s | %s | %s | Python regular expressions%s | %s | |\n", p->name, type_name(p->type),
           isnan(p->default_value) ? "null" : "[]",
           (p->flags & OPTIM_PARAM_NULLABLE) ? ", or null" : "; null reads as []",
           generation_of(p->flags));
}

static void put_table(const optim_class *cls)
{
    puts("| key | type | default | range | generation | notes |");
    puts("|---|---|---|---|---|---|");
    if (cls->default_learning_rate > 0) {
        fputs("| learning_rate | float | ", stdout);
        put_number(cls->default_learning_rate);
        puts(" | >= 0 |  | hyperparameter (variable, callable, schedule); a base option |");
    }
    if (cls->default_weight_decay > 0) {
        fputs("| weight_decay | float | ", stdout);
        put_number(cls->default_weight_decay);
        puts(" | >= 0, or null | Keras 3 only | a base option, with the class's default |");
    }
    for (size_t i = 0; i < cls->n_params; i++) put_row(cls, i);
    if (cls->version < 4) return;
    for (size_t i = 0; i < cls->n_pattern_params; i++) put_pattern_row(&cls->pattern_params[i]);
}

#define OPTIM__BUILTIN_PTR(sym) &sym,
static const optim_class *const builtins[] = {OPTIM_BUILTIN_CLASSES(OPTIM__BUILTIN_PTR)};
#define N_BUILTINS (sizeof builtins / sizeof builtins[0])

/* The built-in class registered under name, or NULL. */
static const optim_class *builtin_named(const char *name)
{
    const optim_class *cls = optim_find_class(name);
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (cls && cls == builtins[i]) return cls;
    return NULL;
}

static int print_all(void)
{
    for (size_t i = 0; i < N_BUILTINS; i++) {
        const optim_class *cls = builtin_named(builtins[i]->name);
        if (!cls) {
            fprintf(stderr, "doc_tables: built-in '%s' is not registered\n", builtins[i]->name);
            return 2;
        }
        printf("%s%s -->\n", BEGIN_MARK, cls->name);
        put_table(cls);
        puts(END_MARK);
    }
    return 0;
}

/* The class name of a begin marker line (into name, at most cap bytes), or
 * 0 when line is not one. */
static int marker_name(const char *line, char *name, size_t cap)
{
    size_t n = strlen(BEGIN_MARK);
    if (strncmp(line, BEGIN_MARK, n) != 0) return 0;
    const char *end = strstr(line + n, " -->");
    if (!end || (size_t)(end - line - n) >= cap) return 0;
    memcpy(name, line + n, (size_t)(end - line - n));
    name[end - line - n] = '\0';
    return 1;
}

/* Copies in to stdout, regions regenerated. *lineno counts lines read. */
static int rewrite(FILE *in, const char *path)
{
    char line[4096], name[128];
    long lineno = 0, region = 0;
    while (fgets(line, sizeof line, in)) {
        lineno++;
        if (region) {
            if (strncmp(line, END_MARK, strlen(END_MARK)) != 0) continue;
            region = 0;
        } else if (marker_name(line, name, sizeof name)) {
            const optim_class *cls = builtin_named(name);
            if (!cls) {
                fprintf(stderr, "doc_tables: %s:%ld: class '%s' is not a built-in optimizer\n",
                        path, lineno, name);
                return 2;
            }
            fputs(line, stdout);
            put_table(cls);
            region = lineno;
            continue;
        }
        fputs(line, stdout);
    }
    if (region) {
        fprintf(stderr, "doc_tables: %s:%ld: region opened here has no '%s'\n", path, region,
                END_MARK);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--all") == 0) return print_all();
    if (argc > 2 || (argc == 2 && argv[1][0] == '-' && argv[1][1])) {
        fprintf(stderr, "usage: doc_tables [FILE] | doc_tables --all\n");
        return 2;
    }
    const char *path = argc == 2 ? argv[1] : "-";
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!in) {
        perror(path);
        return 1;
    }
    int rc = rewrite(in, path);
    if (in != stdin) fclose(in);
    return rc;
}
