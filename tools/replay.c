/* optim replay CONFIG INIT GRADS OUT (docs/command.md).
 *
 * Creates the optimizer from CONFIG, one variable per tensor of INIT (sorted
 * by name), applies the steps recorded in GRADS (K/NAME dense, or
 * K/NAME/indices + K/NAME/values sparse) for K = 0..max, and writes every
 * variable, every slot (NAME/SLOT) and `iterations` to OUT. Any bad input:
 * one line on stderr, exit status 1, OUT untouched. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "optim/optim.h"

#define MAX_STEPS 100000000LL

typedef struct grad_ref {
    const char *dense, *indices, *values; /* tensor names in GRADS, or NULL */
} grad_ref;

typedef struct replay {
    optim_optimizer *opt;
    optim_st_file *init, *grads;
    optim_var **vars;
    size_t nvars;
    grad_ref *refs; /* [steps][nvars] */
    int64_t steps;
    optim_grad_var *pairs;
    int64_t **idx_buf; /* per variable, converted indices */
} replay;

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("optim replay: ", stderr);
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

static int index_grads(replay *r)
{
    size_t n = optim_st_count(r->grads);
    int64_t max_k = -1;
    for (size_t t = 0; t < n; t++) {
        const char *rest = NULL, *name = optim_st_name(r->grads, t);
        int64_t k = parse_step(name, &rest);
        if (k < 0)
            return fail("GRADS tensor '%s': name must be STEP/VARIABLE[/indices|/values] with STEP "
                        "a decimal number below %lld without leading zeros",
                        name, (long long)MAX_STEPS);
        if (k > max_k) max_k = k;
    }
    if (max_k < 0) return fail("GRADS has no tensors, expected at least one step");
    /* Find a step without any tensor before sizing tables by the largest
     * step (a file naming only steps 0 and 99999999 must not allocate). */
    int64_t *ks = malloc(n * sizeof *ks);
    if (!ks) return fail("out of memory");
    for (size_t t = 0; t < n; t++) {
        const char *rest;
        ks[t] = parse_step(optim_st_name(r->grads, t), &rest);
    }
    qsort(ks, n, sizeof *ks, cmp_i64);
    int64_t expect = 0;
    for (size_t t = 0; t < n && ks[t] <= expect; t++)
        if (ks[t] == expect) expect++;
    free(ks);
    if (expect <= max_k)
        return fail("GRADS step %lld has no gradient for any variable", (long long)expect);
    r->steps = max_k + 1;
    r->refs = calloc((size_t)r->steps * (r->nvars ? r->nvars : 1), sizeof *r->refs);
    if (!r->refs) return fail("out of memory for %lld steps", (long long)r->steps);
    for (size_t t = 0; t < n; t++) {
        const char *rest = NULL, *name = optim_st_name(r->grads, t);
        int64_t k = parse_step(name, &rest);
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
            return fail("GRADS tensor '%s': gradient for unknown variable '%.*s' (not in INIT)",
                        name, (int)len, rest);
        }
        if (*slot) return fail("GRADS tensors '%s' and '%s' are the same gradient", *slot, name);
        *slot = name;
    }
    for (int64_t k = 0; k < r->steps; k++) {
        int any = 0;
        for (size_t v = 0; v < r->nvars; v++) {
            grad_ref *g = &r->refs[k * (int64_t)r->nvars + v];
            const char *vn = optim_var_name(r->vars[v]);
            if (g->dense && (g->indices || g->values))
                return fail("GRADS step %lld: variable '%s' has both a dense and a sparse gradient",
                            (long long)k, vn);
            if (!g->dense && (!g->indices != !g->values))
                return fail(
                    "GRADS step %lld: sparse gradient of '%s' needs both '%lld/%s/indices' and "
                    "'%lld/%s/values'",
                    (long long)k, vn, (long long)k, vn, (long long)k, vn);
            any |= g->dense || g->indices;
        }
        if (!any) return fail("GRADS step %lld has no gradient for any variable", (long long)k);
    }
    return 0;
}

static int load_vars(replay *r)
{
    r->nvars = optim_st_count(r->init);
    if (r->nvars == 0) return fail("INIT has no tensors, expected one per variable");
    r->vars = calloc(r->nvars, sizeof *r->vars);
    r->pairs = calloc(r->nvars, sizeof *r->pairs);
    r->idx_buf = calloc(r->nvars, sizeof *r->idx_buf);
    if (!r->vars || !r->pairs || !r->idx_buf) return fail("out of memory");
    for (size_t i = 0; i < r->nvars; i++) {
        const char *name = optim_st_name(r->init, i);
        optim_tensor t;
        optim_error err;
        optim_st_get(r->init, name, &t);
        /* optim_var_create refuses a dtype a variable cannot have, with the list. */
        if (optim_var_create(&r->vars[i], name, t.dtype, t.rank, t.shape, t.data, &err))
            return fail("INIT tensor '%s': %s", name, err.msg);
        if (strcmp(name, "iterations") == 0)
            return fail(
                "INIT tensor 'iterations': the name is reserved for the step counter in OUT");
    }
    /* "K/a/values" must name one thing: not both a sparse part of 'a' and
     * a dense gradient of a variable 'a/values'. */
    for (size_t i = 0; i < r->nvars; i++) {
        const char *name = optim_var_name(r->vars[i]);
        int idx = ends_with(name, "/indices"), val = ends_with(name, "/values");
        if ((idx || val) && find_var(r, name, strlen(name) - (idx ? 8 : 7)) >= 0)
            return fail("INIT tensors '%s' and '%.*s' make GRADS names ambiguous", name,
                        (int)(strlen(name) - (idx ? 8 : 7)), name);
    }
    return 0;
}

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
        return fail("GRADS tensor '%s' has dtype %s, expected int32 or int64", g->indices,
                    optim_dtype_name(it.dtype));
    if (it.rank != 1)
        return fail("GRADS tensor '%s' has rank %d, expected 1 (a list of row indices)", g->indices,
                    (int)it.rank);
    int64_t n = it.shape[0];
    free(r->idx_buf[v]);
    r->idx_buf[v] = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!r->idx_buf[v]) return fail("out of memory");
    for (int64_t j = 0; j < n; j++)
        r->idx_buf[v][j] =
            it.dtype == OPTIM_I64 ? ((const int64_t *)it.data)[j] : ((const int32_t *)it.data)[j];
    p->grad = optim_grad_sparse(r->idx_buf[v], n, vt);
    return 0;
}

static int write_out(replay *r, const char *path)
{
    optim_st_writer *w;
    optim_error err;
    if (optim_st_writer_create(&w, &err)) return fail("%s", err.msg);
    int rc = 0;
    for (size_t i = 0; i < r->nvars && !rc; i++) {
        optim_tensor t = optim_var_tensor(r->vars[i]);
        if (optim_st_writer_add(w, optim_var_name(r->vars[i]), &t, &err)) rc = fail("%s", err.msg);
    }
    size_t nw = optim_weights_count(r->opt);
    optim_tensor *weights = calloc(nw, sizeof *weights);
    if (!weights && !rc) rc = fail("out of memory");
    if (!rc) optim_get_weights(r->opt, weights, nw);
    /* weights[0] is iterations; the slots are named VAR/SLOT already. */
    for (size_t i = 0; i < nw && !rc; i++) {
        const char *name = optim_weight_name(r->opt, i);
        if (optim_st_writer_add(w, name, &weights[i], &err))
            rc = fail("cannot write '%s' to OUT: %s (OUT names every variable and every optimizer "
                      "weight; two of them share this name)",
                      name, err.msg);
    }
    free(weights);
    if (!rc && optim_st_writer_save(w, path, &err)) rc = fail("%s", err.msg);
    optim_st_writer_destroy(w);
    return rc;
}

/* The variables that get a gradient at some step (those the optimizer
 * makes slots for), into out; returns how many. */
static size_t with_gradients(const replay *r, optim_var **out)
{
    size_t m = 0;
    for (size_t v = 0; v < r->nvars; v++)
        for (int64_t k = 0; k < r->steps; k++) {
            const grad_ref *g = &r->refs[k * (int64_t)r->nvars + v];
            if (g->dense || g->indices) {
                out[m++] = r->vars[v];
                break;
            }
        }
    return m;
}

/* The first of names[0..n) that an earlier one equals, or NULL (the
 * names in an open-addressing table: sorting 400k names was a tenth of a
 * 100k-variable replay). Sets *oom if there is no memory for the table. */
static const char *first_repeated(const char *const *names, size_t n, int *oom)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    const char **table = calloc(cap, sizeof *table), *dup = NULL;
    *oom = !table;
    for (size_t i = 0; table && !dup && i < n; i++) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (const char *c = names[i]; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        size_t at = (size_t)h & (cap - 1);
        while (table[at] && strcmp(table[at], names[i]) != 0) at = (at + 1) & (cap - 1);
        if (table[at]) dup = names[i];
        table[at] = names[i];
    }
    free(table);
    return dup;
}

/* ---- OUT's header size, known before the first step ---------------------- */

/* One tensor of OUT: its name, its header entry's bytes less the digits of
 * its two data offsets, and its data bytes. */
typedef struct out_entry {
    const char *name;
    uint64_t len, nbytes;
} out_entry;

static uint64_t digits(uint64_t v)
{
    uint64_t n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

/* The entry {"NAME":{"dtype":"F32","shape":[..],"data_offsets":[,]}} as the
 * safetensors writer spells it (its JSON escapes for the name). */
static out_entry make_entry(const char *name, const optim_tensor *t)
{
    out_entry e = {name, 2 + strlen(":{\"dtype\":\"\",\"shape\":[],\"data_offsets\":[,]}"),
                   (uint64_t)optim_tensor_numel(t) * optim_dtype_size(t->dtype)};
    for (const char *c = name; *c; c++)
        e.len += *c == '"' || *c == '\\' ? 2 : (unsigned char)*c < 0x20 ? 6 : 1;
    e.len += t->dtype == OPTIM_BF16 ? 4 : 3; /* F32, F64, F16, I32, I64; BF16 */
    for (int32_t k = 0; k < t->rank; k++) e.len += digits((uint64_t)t->shape[k]) + (k > 0);
    return e;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const out_entry *)a)->name, ((const out_entry *)b)->name);
}

/* OUT's header bytes: "{", the entries (name order) with ",", "}", padded to
 * a multiple of 8. Exact; sorts e only when the bounds without the data
 * offsets' digits leave the answer open. */
static uint64_t header_size(out_entry *e, size_t n)
{
    uint64_t base = 2 + (n ? n - 1 : 0), total = 0;
    for (size_t i = 0; i < n; i++) base += e[i].len, total += e[i].nbytes;
    uint64_t lo = base + 2 * (uint64_t)n, hi = base + 2 * (uint64_t)n * digits(total);
    if (lo > OPTIM_ST_MAX_HEADER || (hi + 7) / 8 * 8 <= OPTIM_ST_MAX_HEADER)
        return (lo + 7) / 8 * 8;
    qsort(e, n, sizeof *e, cmp_entry);
    uint64_t size = base, off = 0;
    for (size_t i = 0; i < n; i++)
        size += digits(off) + digits(off + e[i].nbytes), off += e[i].nbytes;
    return (size + 7) / 8 * 8;
}

/* Refuses before any step an OUT whose header would be above the safetensors
 * limit (the writer would refuse it only after the whole run). probe is an
 * optimizer from the same config, built for the variables with gradients. */
static int check_out_size(const replay *r, optim_optimizer *probe)
{
    size_t nw = optim_weights_count(probe), n = r->nvars + nw;
    out_entry *e = malloc(n * sizeof *e);
    optim_tensor *w = calloc(nw ? nw : 1, sizeof *w);
    int rc = e && w ? 0 : fail("out of memory");
    if (!rc) optim_get_weights(probe, w, nw);
    for (size_t i = 0; !rc && i < n; i++) {
        optim_tensor t = i < r->nvars ? optim_var_tensor(r->vars[i]) : w[i - r->nvars];
        e[i] = make_entry(
            i < r->nvars ? optim_var_name(r->vars[i]) : optim_weight_name(probe, i - r->nvars), &t);
    }
    uint64_t size = rc ? 0 : header_size(e, n);
    if (size > OPTIM_ST_MAX_HEADER)
        rc = fail("OUT would need a safetensors header of at least %llu bytes for its %zu tensors "
                  "(%zu variables and %zu optimizer weights), above the limit of %u bytes; refused "
                  "before any step: replay fewer variables, or give them shorter names",
                  (unsigned long long)size, n, r->nvars, nw, OPTIM_ST_MAX_HEADER);
    free(e);
    free(w);
    return rc;
}

/* OUT holds every variable and every optimizer weight under its name: an
 * INIT tensor named like a weight ("a/m" beside a variable "a") is refused
 * before any step. The names are those of a second optimizer from the same
 * config, built for the variables that get gradients. If that build fails,
 * the steps themselves report the reason. */
static int check_names(replay *r, const char *config)
{
    optim_error err;
    optim_optimizer *probe;
    if (optim_from_json(&probe, config, &err)) return fail("CONFIG: %s", err.msg);
    optim_var **used = malloc(r->nvars * sizeof *used);
    int rc = used ? 0 : fail("out of memory");
    int built = !rc && optim_build(probe, used, with_gradients(r, used)) == 0;
    size_t nw = built ? optim_weights_count(probe) : 0, n = r->nvars + nw;
    const char **names = built ? malloc(n * sizeof *names) : NULL;
    if (built && !names) rc = fail("out of memory");
    free(used);
    for (size_t i = 0; names && !rc && i < n; i++)
        if (!(names[i] = i < r->nvars ? optim_var_name(r->vars[i])
                                      : optim_weight_name(probe, i - r->nvars)))
            rc = fail("out of memory");
    int oom = 0;
    const char *dup = names && !rc ? first_repeated(names, n, &oom) : NULL;
    if (oom) rc = fail("out of memory");
    if (dup)
        rc = fail("INIT tensor '%s' has the name of one of the optimizer's weights (OUT holds "
                  "both under their names); rename the variable",
                  dup);
    if (built && !rc) rc = check_out_size(r, probe);
    free(names);
    optim_destroy(probe);
    return rc;
}

static int run(replay *r, char **argv)
{
    optim_error err;
    char *config = optim_tool_read_text(argv[0], &err);
    if (!config) return fail("CONFIG %s", err.msg);
    int rc = optim_from_json(&r->opt, config, &err);
    if (rc) {
        free(config);
        return fail("CONFIG %s: %s", argv[0], err.msg);
    }
    if (optim_st_read(argv[1], &r->init, &err)) rc = fail("INIT %s", err.msg);
    else if (optim_st_read(argv[2], &r->grads, &err)) rc = fail("GRADS %s", err.msg);
    else rc = load_vars(r) || index_grads(r) || check_names(r, config);
    free(config);
    if (rc) return 1;
    for (int64_t k = 0; k < r->steps; k++) {
        for (size_t v = 0; v < r->nvars; v++)
            if (make_pair(r, k, v)) return 1;
        if (optim_apply_gradients(r->opt, r->pairs, r->nvars, 0))
            return fail("step %lld: %s", (long long)k, optim_errmsg(r->opt));
    }
    return write_out(r, argv[3]);
}

int optim_cmd_replay(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: optim replay CONFIG INIT GRADS OUT\n");
        return 2;
    }
    replay r;
    memset(&r, 0, sizeof r);
    int rc = run(&r, argv);
    for (size_t i = 0; i < r.nvars; i++) {
        if (r.vars) optim_var_destroy(r.vars[i]);
        if (r.idx_buf) free(r.idx_buf[i]);
    }
    optim_destroy(r.opt);
    optim_st_free(r.init);
    optim_st_free(r.grads);
    free(r.vars);
    free(r.pairs);
    free(r.idx_buf);
    free(r.refs);
    return rc;
}
