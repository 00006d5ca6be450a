/* CSV tables of numbers (optim/csv.h). */
#include "optim/csv.h"

#include "core/internal.h"
#include "io/npy_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct optim_csv {
    int64_t rows, cols;
    char **names; /* cols names, or NULL */
    double *v;
    size_t cap;
};

typedef struct line {
    const char *p;
    size_t n;
    int64_t number; /* 1-based */
} line;

/* The finite number that is all of field[0 .. n) (spaces around it allowed). */
static int number(const char *field, size_t n, double *out)
{
    char buf[128];
    while (n && (field[n - 1] == ' ' || field[n - 1] == '\t')) n--;
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, field, n);
    buf[n] = '\0';
    char *end;
    *out = strtod(buf, &end);
    return end != buf && *end == '\0' && isfinite(*out);
}

/* The end of the field starting at s within l. */
static const char *field_end(const line *l, const char *s)
{
    const char *c = memchr(s, ',', (size_t)(l->p + l->n - s));
    return c ? c : l->p + l->n;
}

static int64_t count_fields(const line *l)
{
    int64_t k = 1;
    for (size_t i = 0; i < l->n; i++) k += l->p[i] == ',';
    return k;
}

static int header(optim_csv *t, const line *l, const char *src, optim_error *err)
{
    t->names = calloc((size_t)t->cols, sizeof *t->names);
    if (!t->names) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", src);
    const char *s = l->p;
    for (int64_t j = 0; j < t->cols; j++) {
        const char *e = field_end(l, s), *a = s;
        while (a < e && *a == ' ') a++;
        const char *b = e;
        while (b > a && b[-1] == ' ') b--;
        if (b - a >= 2 && *a == '"' && b[-1] == '"') a++, b--;
        t->names[j] = malloc((size_t)(b - a) + 1);
        if (!t->names[j]) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", src);
        memcpy(t->names[j], a, (size_t)(b - a));
        t->names[j][b - a] = '\0';
        s = e + 1;
    }
    return OPTIM_OK;
}

/* Appends l's numbers; *bad: l has a field that is not one (for the header test). */
static int record(optim_csv *t, const line *l, const char *src, int quiet, int *bad,
                  optim_error *err)
{
    if (count_fields(l) != t->cols)
        return optim__err(err, OPTIM_EFORMAT, "%s: line %lld has %lld fields, expected %lld", src,
                          (long long)l->number, (long long)count_fields(l), (long long)t->cols);
    if (t->cap - (size_t)(t->rows * t->cols) < (size_t)t->cols) {
        size_t cap = t->cap ? 2 * t->cap : (size_t)t->cols * 64;
        double *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return optim__err(err, OPTIM_ENOMEM, "%s: out of memory at line %lld", src,
                              (long long)l->number);
        t->v = v, t->cap = cap;
    }
    double *row = t->v + t->rows * t->cols;
    const char *s = l->p;
    for (int64_t j = 0; j < t->cols; j++) {
        const char *e = field_end(l, s);
        if (!number(s, (size_t)(e - s), &row[j])) {
            *bad = 1;
            if (quiet) return OPTIM_OK;
            return optim__err(
                err, OPTIM_EFORMAT, "%s: line %lld, column %lld: '%.*s' is not a finite number",
                src, (long long)l->number, (long long)j + 1, (int)(e - s > 40 ? 40 : e - s), s);
        }
        s = e + 1;
    }
    t->rows++;
    return OPTIM_OK;
}

static int parse_lines(optim_csv *t, const char *buf, size_t len, const char *src, optim_error *err)
{
    line l = {buf, 0, 0};
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - buf) : len;
        l = (line){buf + at, end - at, l.number + 1};
        at = end + 1;
        if (l.n && l.p[l.n - 1] == '\r') l.n--;
        if (l.n == 0) continue;
        if (memchr(l.p, '\0', l.n))
            return optim__err(err, OPTIM_EFORMAT, "%s: line %lld has a NUL byte", src,
                              (long long)l.number);
        int bad = 0, rc, first = t->cols == 0;
        if (first) t->cols = count_fields(&l);
        if ((rc = record(t, &l, src, first, &bad, err))) return rc;
        if (first && bad && (rc = header(t, &l, src, err))) return rc;
    }
    if (t->rows == 0) return optim__err(err, OPTIM_EFORMAT, "%s: no rows of numbers", src);
    return OPTIM_OK;
}

int optim_csv_parse(const char *buf, size_t len, const char *source, optim_csv **out,
                    optim_error *err)
{
    if (out) *out = NULL;
    if (!out || (!buf && len))
        return optim__err(err, OPTIM_EINVAL, "optim_csv_parse: %s is NULL", out ? "buf" : "out");
    const char *src = source ? source : "csv buffer";
    optim_csv *t = calloc(1, sizeof *t);
    if (!t) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", src);
    int rc = parse_lines(t, buf, len, src, err);
    if (rc) optim_csv_free(t);
    else *out = t;
    return rc;
}

int optim_csv_read(const char *path, optim_csv **out, optim_error *err)
{
    if (out) *out = NULL;
    if (!path || !out)
        return optim__err(err, OPTIM_EINVAL, "optim_csv_read: %s is NULL", path ? "out" : "path");
    unsigned char *buf;
    size_t len;
    int rc = optim__read_whole(path, &buf, &len, err);
    if (rc) return rc;
    rc = optim_csv_parse((const char *)buf, len, path, out, err);
    free(buf);
    return rc;
}

void optim_csv_free(optim_csv *t)
{
    if (!t) return;
    for (int64_t j = 0; t->names && j < t->cols; j++) free(t->names[j]);
    free(t->names);
    free(t->v);
    free(t);
}

int64_t optim_csv_rows(const optim_csv *t) { return t ? t->rows : 0; }
int64_t optim_csv_cols(const optim_csv *t) { return t ? t->cols : 0; }
const char *optim_csv_name(const optim_csv *t, int64_t j)
{
    return t && t->names && j >= 0 && j < t->cols ? t->names[j] : NULL;
}
const double *optim_csv_values(const optim_csv *t) { return t ? t->v : NULL; }
