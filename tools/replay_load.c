/* optim replay's loader (replay.h): the variables of INIT, the gradients
 * of GRADS indexed by step and variable, and one step's pairs. optim
 * conformance --reference loads a reference file with it (the prefixes
 * "init/" and "grads/"). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define MAX_STEPS 100000000LL

int replay_fail(const replay *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", r->cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* Compares the NUL-terminated a with the first len bytes of b, as strcmp
 * would compare a with that prefix of b. */
static int cmp_prefix(const char *a, const char *b, size_t len)
{
    int c = strncmp(a, b, len);
    if (c) return c;
    return a[len] != '\0'; /* a is longer: it sorts after */
}

/* The variable called name[0..len), or -1: a binary search, since the
 * variables are created in INIT's order, sorted by name (strcmp). */
static long find_var(const replay *r, const char *name, size_t len)
{
    size_t lo = 0, hi = r->nvars;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_prefix(optim_var_name(r->vars[mid]), name, len);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The tensors of f named PREFIX...: *first and the count. Names sharing a
 * prefix are contiguous in f's sorted order. */
static size_t prefixed(const optim_st_file *f, const char *prefix, size_t *first)
{
    size_t n = optim_st_count(f), i = 0;
    while (i < n && !starts_with(optim_st_name(f, i), prefix)) i++;
    *first = i;
    while (i < n && starts_with(optim_st_name(f, i), prefix)) i++;
    return i - *first;
}

/* Parses "K/rest"; K is decimal without sign. Returns -1 if malformed. */
static int64_t parse_step(const char *name, const char **rest)
{
    int64_t k = 0;
    const char *p = name;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
        return -1; /* no leading zeros */
    for (; *p >= '0' && *p <= '9'; p++) {
        k = k * 10 + (*p - '0');
        if (k >= MAX_STEPS) return -1;
    }
    if (*p != '/' || !p[1]) return -1;
    *rest = p + 1;
    return k;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The step of GRADS tensor t (its name after the prefix), or -1. */
static int64_t step_of(const replay *r, size_t t, const char **rest)
{
    return parse_step(optim_st_name(r->grads, t) + strlen(r->grads_prefix), rest);
}

/* The number of steps: one past the largest K, every K below it named by
 * some tensor. */
static int count_steps(replay *r, size_t first, size_t n)
{
    int64_t max_k = -1;
    for (size_t t = first; t < first + n; t++) {
        const char *rest = NULL;
        int64_t k = step_of(r, t, &rest);
        if (k < 0)
            return replay_fail(r,
                               "%s tensor '%s': name must be %sSTEP/VARIABLE[/indices|/values] "
                               "with STEP a decimal number below %lld without leading zeros",
                               r->grads_label, optim_st_name(r->grads, t), r->grads_prefix,
                               (long long)MAX_STEPS);
        if (k > max_k) max_k = k;
    }
    if (max_k < 0)
        return replay_fail(r, "%s has no %s%s, expected at least one step", r->grads_label,
                           r->grads_prefix[0] ? "tensor under " : "tensors",
                           r->grads_prefix[0] ? r->grads_prefix : "");
    /* Find a step without any tensor before sizing tables by the largest
     * step (a file naming only steps 0 and 99999999 must not allocate). */
    int64_t *ks = malloc(n * sizeof *ks);
    if (!ks) return replay_fail(r, "out of memory");
    for (size_t t = 0; t < n; t++) {
        const char *rest;
        ks[t] = step_of(r, first + t, &rest);
    }
    qsort(ks, n, sizeof *ks, cmp_i64);
    int64_t expect = 0;
    for (size_t t = 0; t < n && ks[t] <= expect; t++)
        if (ks[t] == expect) expect++;
    free(ks);
    if (expect <= max_k)
        return replay_fail(r,
                           "%s step %lld has no gradient for any variable (no tensor %s%lld/...)",
                           r->grads_label, (long long)expect, r->grads_prefix, (long long)expect);
    r->steps = max_k + 1;
    return 0;
}

/* Records GRADS tensor t in r->refs. */
static int place(replay *r, size_t t)
{
    const char *rest = NULL, *name = optim_st_name(r->grads, t);
    int64_t k = step_of(r, t, &rest);
    long v = find_var(r, rest, strlen(rest));
    const char **slot = NULL;
    if (v >= 0) {
        slot = &r->refs[k * (int64_t)r->nvars + v].dense;
    } else if (ends_with(rest, "/indices") || ends_with(rest, "/values")) {
        int is_idx = ends_with(rest, "/indices");
        size_t stem = strlen(rest) - (is_idx ? 8 : 7);
        v = find_var(r, rest, stem);
        if (v >= 0) {
            grad_ref *g = &r->refs[k * (int64_t)r->nvars + v];
            slot = is_idx ? &g->indices : &g->values;
        }
    }
    if (v < 0) {
        size_t len = strlen(rest);
        if (ends_with(rest, "/indices")) len -= 8;
        else if (ends_with(rest, "/values")) len -= 7;
        return replay_fail(r, "%s tensor '%s': gradient for unknown variable '%.*s' (not in %s%s)",
                           r->grads_label, name, (int)len, rest, r->init_label, r->init_prefix);
    }
    if (*slot)
        return replay_fail(r, "%s tensors '%s' and '%s' are the same gradient", r->grads_label,
                           *slot, name);
    *slot = name;
    return 0;
}

static int index_grads(replay *r)
{
    size_t first, n = prefixed(r->grads, r->grads_prefix, &first);
    if (count_steps(r, first, n)) return 1;
    r->refs = calloc((size_t)r->steps * (r->nvars ? r->nvars : 1), sizeof *r->refs);
    if (!r->refs) return replay_fail(r, "out of memory for %lld steps", (long long)r->steps);
    for (size_t t = first; t < first + n; t++)
        if (place(r, t)) return 1;
    const char *gp = r->grads_prefix;
    for (int64_t k = 0; k < r->steps; k++) {
        int any = 0;
        for (size_t v = 0; v < r->nvars; v++) {
            grad_ref *g = &r->refs[k * (int64_t)r->nvars + v];
            const char *vn = optim_var_name(r->vars[v]);
            long long kk = (long long)k;
            if (g->dense && (g->indices || g->values))
                return replay_fail(
                    r, "%s step %lld: variable '%s' has both a dense and a sparse gradient",
                    r->grads_label, kk, vn);
            if (!g->dense && (!g->indices != !g->values))
                return replay_fail(r,
                                   "%s step %lld: sparse gradient of '%s' needs both "
                                   "'%s%lld/%s/indices' and '%s%lld/%s/values'",
                                   r->grads_label, kk, vn, gp, kk, vn, gp, kk, vn);
            any |= g->dense || g->indices;
        }
        if (!any)
            return replay_fail(r, "%s step %lld has no gradient for any variable", r->grads_label,
                               (long long)k);
    }
    return 0;
}

static int load_vars(replay *r)
{
    size_t first, plen = strlen(r->init_prefix);
    r->nvars = prefixed(r->init, r->init_prefix, &first);
    if (r->nvars == 0)
        return replay_fail(r, "%s has no %s%s, expected one per variable", r->init_label,
                           r->init_prefix[0] ? "tensor under " : "tensors", r->init_prefix);
    r->vars = calloc(r->nvars, sizeof *r->vars);
    r->pairs = calloc(r->nvars, sizeof *r->pairs);
    r->idx_buf = calloc(r->nvars, sizeof *r->idx_buf);
    if (!r->vars || !r->pairs || !r->idx_buf) return replay_fail(r, "out of memory");
    for (size_t i = 0; i < r->nvars; i++) {
        const char *name = optim_st_name(r->init, first + i);
        optim_tensor t;
        optim_error err;
        optim_st_get(r->init, name, &t);
        /* optim_var_create refuses a dtype a variable cannot have, with the list. */
        if (optim_var_create(&r->vars[i], name + plen, t.dtype, t.rank, t.shape, t.data, &err))
            return replay_fail(r, "%s tensor '%s': %s", r->init_label, name, err.msg);
        if (strcmp(name + plen, "iterations") == 0)
            return replay_fail(r, "%s tensor '%s': the name is reserved for the step counter%s",
                               r->init_label, name, r->init_prefix[0] ? "" : " in OUT");
    }
    /* "K/a/values" must name one thing: not both a sparse part of 'a' and
     * a dense gradient of a variable 'a/values'. */
    for (size_t i = 0; i < r->nvars; i++) {
        const char *name = optim_var_name(r->vars[i]);
        int idx = ends_with(name, "/indices"), val = ends_with(name, "/values");
        if ((idx || val) && find_var(r, name, strlen(name) - (idx ? 8 : 7)) >= 0)
            return replay_fail(r, "%s tensors '%s%s' and '%s%.*s' make %s names ambiguous",
                               r->init_label, r->init_prefix, name, r->init_prefix,
                               (int)(strlen(name) - (idx ? 8 : 7)), name, r->grads_label);
    }
    return 0;
}

int replay_load(replay *r) { return load_vars(r) || index_grads(r); }

static int make_pair(replay *r, int64_t k, size_t v)
{
    grad_ref *g = &r->refs[k * (int64_t)r->nvars + v];
    optim_grad_var *p = &r->pairs[v];
    p->var = r->vars[v];
    p->grad = optim_grad_none();
    if (g->dense) {
        optim_st_get(r->grads, g->dense, &p->grad.dense);
        p->grad.kind = OPTIM_GRAD_DENSE;
        return 0;
    }
    if (!g->indices) return 0;
    optim_tensor it, vt;
    optim_st_get(r->grads, g->indices, &it);
    optim_st_get(r->grads, g->values, &vt);
    if (it.dtype != OPTIM_I32 && it.dtype != OPTIM_I64)
        return replay_fail(r, "%s tensor '%s' has dtype %s, expected int32 or int64",
                           r->grads_label, g->indices, optim_dtype_name(it.dtype));
    if (it.rank != 1)
        return replay_fail(r, "%s tensor '%s' has rank %d, expected 1 (a list of row indices)",
                           r->grads_label, g->indices, (int)it.rank);
    int64_t n = it.shape[0];
    free(r->idx_buf[v]);
    r->idx_buf[v] = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!r->idx_buf[v]) return replay_fail(r, "out of memory");
    for (int64_t j = 0; j < n; j++)
        r->idx_buf[v][j] =
            it.dtype == OPTIM_I64 ? ((const int64_t *)it.data)[j] : ((const int32_t *)it.data)[j];
    p->grad = optim_grad_sparse(r->idx_buf[v], n, vt);
    return 0;
}

int replay_step(replay *r, int64_t k)
{
    for (size_t v = 0; v < r->nvars; v++)
        if (make_pair(r, k, v)) return 1;
    if (optim_apply_gradients(r->opt, r->pairs, r->nvars, 0))
        return replay_fail(r, "step %lld: %s", (long long)k, optim_errmsg(r->opt));
    return 0;
}

void replay_free(replay *r)
{
    for (size_t i = 0; i < r->nvars; i++) {
        if (r->vars) optim_var_destroy(r->vars[i]);
        if (r->idx_buf) free(r->idx_buf[i]);
    }
    optim_destroy(r->opt);
    if (r->grads != r->init) optim_st_free(r->grads);
    optim_st_free(r->init);
    free(r->vars);
    free(r->pairs);
    free(r->idx_buf);
    free(r->refs);
    memset(r, 0, sizeof *r);
}
