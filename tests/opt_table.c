/* Drivers of the optimizer conformance tables (opt_table.h). */
#include "opt_table.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double dense_init(int i) { return 0.5 - 0.3 * i; }
static double dense_grad(int k, int i)
{
    return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k;
}
static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
static int64_t table_index(int k, int j)
{
    static const int64_t idx[4][4] = {{1, 4, 1, 1}, {0, 4, 5, 4}, {2, 2, 3, 1}, {4, 0, 4, 1}};
    return idx[k][j];
}
static double table_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c); }

static int64_t long_index(int k, int j)
{
    static const int64_t idx[3][4] = {{1, 4, 1, 1}, {0, 4, 3, 4}, {2, 2, 3, 1}};
    return idx[k % 3][j];
}
static double long_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c) - 0.02 * k; }

static double shrink_grad(int k, int i)
{
    return (sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.03 * (k % 4)) * exp(-0.15 * k);
}
static int64_t adam_index(int k, int j)
{
    static const int64_t idx[3][5] = {{1, 4, 1, 1, 0}, {0, 4, 5, 4, 2}, {2, 2, 3, 1, 5}};
    return idx[k % 3][j];
}
static double adam_val(int k, int j, int c)
{
    return cos(1.1 * k + 0.7 * j + 0.3 * c) * exp(-0.1 * k);
}

static int64_t idle5_index(int k, int j)
{
    static const int64_t idx[4][4] = {{1, 4, 1, 1}, {0, 4, 2, 4}, {2, 2, 3, 1}, {0, 0, 4, 3}};
    return idx[k][j];
}
static double idle5_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c) + 0.05; }

const ot_sparse OT_SPARSE_IDLE5 = {6, 3, 4, 4, idle5_index, idle5_val, table_init};
const ot_dense OT_DENSE_SHRINK = {9, 25, dense_init, shrink_grad, 0, NULL};
const ot_sparse OT_SPARSE_ADAM = {7, 3, 21, 5, adam_index, adam_val, table_init};
const ot_dense OT_DENSE = {7, 25, dense_init, dense_grad, 0, NULL};
const ot_sparse OT_SPARSE = {6, 3, 4, 4, table_index, table_val, table_init};
const ot_sparse OT_SPARSE_LONG = {6, 3, 24, 4, long_index, long_val, table_init};

/* One of eight rotating buffers. */
static char *next_buf(void)
{
    static char bufs[8][2048];
    static int slot;
    return bufs[slot++ % 8];
}

const char *ot_fmt(const char *fmt, ...)
{
    char *b = next_buf();
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, 2048, fmt, ap);
    va_end(ap);
    assert_in_range(n, 0, 2047);
    return b;
}

const char *ot_gen(const char *json, int legacy)
{
    size_t n = strlen(json);
    if (!legacy) return json;
    if (n < 3 || strcmp(json + n - 2, "}}") != 0)
        fail_msg("ot_gen: not a class_name/config object: %s", json);
    /* "{" then the config's keys: a comma unless the config is empty. */
    return ot_fmt("%.*s%s" OT_LEGACY "}}", (int)(n - 2), json, json[n - 3] == '{' ? "" : ", ");
}

double ot_value(void *user) { return *(double *)user; }

void ot_step(optim_optimizer *opt, optim_grad_var *p, size_t n)
{
    assert_ok(optim_apply_gradients(opt, p, n, 0), opt);
}

/* A tensor of w's dtype and shape holding g (buf: scratch of numel slots). */
static optim_tensor tensor_like(optim_dtype dt, int32_t rank, const int64_t *shape, const double *g,
                                int64_t n, void *buf)
{
    optim_test_fill(buf, dt, g, n);
    return optim_tensor_make(dt, buf, rank, shape);
}

optim_grad ot_grad_like(const optim_var *w, const double *g, void *buf)
{
    return optim_grad_dense(tensor_like(optim_var_dtype(w), optim_var_rank(w), optim_var_shape(w),
                                        g, optim_var_numel(w), buf));
}

void ot_step_dense(optim_optimizer *opt, optim_var *w, const double *g)
{
    int64_t n = optim_var_numel(w);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    assert_non_null(buf);
    optim_grad_var p = {ot_grad_like(w, g, buf), w};
    ot_step(opt, &p, 1);
    free(buf);
}

double ot_scalar_step(const char *json, optim_dtype dt, double w, double g)
{
    optim_optimizer *opt = optim_test_make(json);
    optim_var *v = optim_test_var("v", dt, 0, NULL, &w);
    ot_step_dense(opt, v, &g);
    double r = optim_var_get(v, 0);
    optim_test_free(opt, v);
    return r;
}

void ot_step_row(optim_optimizer *opt, optim_var *w, int64_t row, const double *vals)
{
    int32_t rank = optim_var_rank(w);
    int64_t shape[OPTIM_MAX_RANK], n = 1;
    memcpy(shape, optim_var_shape(w), sizeof(int64_t) * (size_t)rank);
    shape[0] = 1;
    for (int d = 1; d < rank; d++) n *= shape[d];
    void *buf = malloc((size_t)n * 8);
    assert_non_null(buf);
    optim_grad_var p = {
        optim_grad_sparse(&row, 1, tensor_like(optim_var_dtype(w), rank, shape, vals, n, buf)), w};
    ot_step(opt, &p, 1);
    free(buf);
}

void ot_expect_step_refused(optim_optimizer *opt, optim_var *w, double g, int code,
                            const char *needle)
{
    int64_t n = optim_var_numel(w), it = optim_iterations(opt);
    size_t bytes = (size_t)n * optim_dtype_size(optim_var_dtype(w));
    double *gs = malloc(sizeof(double) * (size_t)(n ? n : 1));
    void *before = malloc(bytes ? bytes : 1), *buf = malloc((size_t)(n ? n : 1) * 8);
    assert_true(gs && before && buf);
    for (int64_t i = 0; i < n; i++) gs[i] = g;
    memcpy(before, optim_var_data(w), bytes);
    optim_grad_var p = {optim_grad_dense(tensor_like(optim_var_dtype(w), optim_var_rank(w),
                                                     optim_var_shape(w), gs, n, buf)),
                        w};
    assert_eq(optim_apply_gradients(opt, &p, 1, 0), code);
    assert_contains(optim_errmsg(opt), needle);
    assert_eq(optim_iterations(opt), it);
    assert_memory_equal(optim_var_data(w), before, bytes);
    free(gs);
    free(before);
    free(buf);
}

double ot_tol(const ot_case *c, optim_dtype dt, int which)
{
    static const double dflt[4] = {2e-5, 2e-6, 1e-12, 1e-13};
    int i = (dt == OPTIM_F32 ? 0 : 2) + which;
    int set = c->tol[0] || c->tol[1] || c->tol[2] || c->tol[3];
    return set ? c->tol[i] : dflt[i];
}

/* The value an F32 variable holds for x, where f32. */
static double rnd(int f32, double x) { return f32 ? (double)(float)x : x; }

/* The dense problem's variable "w" of dtype dt holding x. */
static optim_var *dense_var(const ot_dense *d, optim_dtype dt, const double *x)
{
    int64_t n = d->n;
    return d->shape ? optim_test_var("w", dt, d->rank, d->shape, x)
                    : optim_test_var("w", dt, 1, &n, x);
}

optim_var *ot_run_dense(optim_optimizer *opt, const ot_dense *d, optim_dtype dt)
{
    double *x = malloc(sizeof(double) * (size_t)d->n);
    assert_non_null(x);
    for (int i = 0; i < d->n; i++) x[i] = d->init(i);
    optim_var *w = dense_var(d, dt, x);
    for (int k = 0; k < d->steps; k++) {
        for (int i = 0; i < d->n; i++) x[i] = d->grad(k, i);
        ot_step_dense(opt, w, x);
    }
    free(x);
    assert_eq(optim_iterations(opt), d->steps);
    return w;
}

static void state_ptrs(const ot_case *c, double *st, int stride, double **p)
{
    for (int i = 0; i < c->nstate; i++) p[i] = st + (size_t)i * (size_t)stride;
}

static void init_state(const ot_case *c, double **p, int n, int f32)
{
    for (int i = 0; i < c->nstate; i++)
        for (int e = 0; e < n; e++) p[i][e] = rnd(f32, c->state_init[i]);
}

/* The hyperparameters of the reference for dt. */
static const void *case_hp(const ot_case *c, optim_dtype dt)
{
    return c->round32 && c->hp32 && dt == OPTIM_F32 ? c->hp32 : c->hp;
}

void ot_ref_dense(const ot_dense *d, const ot_case *c, double *w, double *st)
{
    double *g = malloc(sizeof(double) * (size_t)d->n), *p[OT_MAX_STATE];
    assert_non_null(g);
    state_ptrs(c, st, d->n, p);
    init_state(c, p, d->n, 0);
    for (int i = 0; i < d->n; i++) w[i] = d->init(i);
    for (int k = 0; k < d->steps; k++) {
        for (int i = 0; i < d->n; i++) g[i] = d->grad(k, i);
        c->ref(c->hp, k, w, p, g, d->n);
    }
    free(g);
}

void ot_check_state(optim_optimizer *opt, optim_var *w, const ot_case *c, const double *ref_w,
                    const double *ref_st, int n)
{
    optim_dtype dt = optim_var_dtype(w);
    double rtol = ot_tol(c, dt, 0), atol = ot_tol(c, dt, 1);
    char what[600];
    snprintf(what, sizeof what, "%s %s of %s", optim_dtype_name(dt), optim_var_name(w), c->json);
    optim_test_var_close(w, ref_w, n, rtol, atol, what, __FILE__, __LINE__);
    for (int i = 0; i < c->nstate; i++) {
        if (!c->slots[i]) continue;
        optim_var *s = optim_get_slot(opt, w, c->slots[i]);
        if (!s) fail_msg("%s: no slot '%s'", c->json, c->slots[i]);
        assert_eq(optim_var_dtype(s), dt);
        double a = c->state_atol[i] == OT_ATOL_0 ? 0 : c->state_atol[i] ? c->state_atol[i] : atol;
        snprintf(what, sizeof what, "%s slot '%s' of %s", optim_dtype_name(dt), c->slots[i],
                 c->json);
        optim_test_var_close(s, ref_st + (size_t)i * (size_t)n, c->state_n[i] ? c->state_n[i] : n,
                             rtol, a, what, __FILE__, __LINE__);
    }
    const char *names[OT_MAX_STATE + 1];
    int ns = optim_get_slot_names(opt, names, OT_MAX_STATE + 1), want = 0;
    for (int i = 0; c->exact_slots && i < c->nstate; i++)
        if (c->slots[i]) {
            if (want >= ns) fail_msg("%s: %d slots, expected '%s' too", c->json, ns, c->slots[i]);
            assert_string_equal(names[want++], c->slots[i]);
        }
    if (c->exact_slots) assert_eq(ns, want);
    if (c->absent && optim_get_slot(opt, w, c->absent))
        fail_msg("%s: unexpected slot '%s'", c->json, c->absent);
}

/* `steps` steps of the dense problem on a new variable of opt of dtype dt
 * beside the reference for dt; before step k, set (if any) changes the
 * hyperparameters (the reference's, case_hp). Compares w, and the case's
 * slots if slots, after every step if every, else after the last. */
static optim_var *run_beside_ref(optim_optimizer *opt, const ot_dense *d, int steps,
                                 const ot_case *c, optim_dtype dt,
                                 void (*set)(optim_optimizer *, void *, int), int every, int slots)
{
    int n = d->n, r32 = c->round32 && dt == OPTIM_F32;
    double *w = malloc(sizeof(double) * (size_t)(n * (2 + c->nstate))), *g = w + n,
           *p[OT_MAX_STATE];
    assert_non_null(w);
    state_ptrs(c, g + n, n, p);
    init_state(c, p, n, r32);
    for (int i = 0; i < n; i++) w[i] = rnd(r32, d->init(i));
    optim_var *x = dense_var(d, dt, w);
    char what[600];
    for (int k = 0; k < steps; k++) {
        if (set) set(opt, (void *)case_hp(c, dt), k);
        for (int i = 0; i < n; i++) g[i] = rnd(r32, d->grad(k, i));
        c->ref(case_hp(c, dt), k, w, p, g, n);
        ot_step_dense(opt, x, g);
        if (!every && k < steps - 1) continue;
        if (slots) ot_check_state(opt, x, c, w, g + n, n);
        snprintf(what, sizeof what, "%s w after step %d of %s", optim_dtype_name(dt), k,
                 c->json ? c->json : "");
        if (!slots)
            optim_test_var_close(x, w, n, ot_tol(c, dt, 0), ot_tol(c, dt, 1), what, __FILE__,
                                 __LINE__);
    }
    free(w);
    assert_eq(optim_iterations(opt), steps);
    return x;
}

void ot_check_dense(const ot_dense *d, ot_case c)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(c.json);
        optim_test_free(opt, run_beside_ref(opt, d, d->steps, &c, dt, NULL, c.every_step, 1));
    }
}

optim_var *ot_check_dynamic(optim_optimizer *opt, const ot_dense *d, int steps, const ot_case *c,
                            optim_dtype dt, void (*set)(optim_optimizer *opt, void *hp, int k))
{
    return run_beside_ref(opt, d, steps, c, dt, set, 1, 0);
}

void ot_check_f32(const ot_dense *d, int steps, const ot_case *c, int sparse)
{
    int n = d->n;
    float *w = malloc(sizeof(float) * (size_t)(n * (2 + c->nstate))), *g = w + n, *p[OT_MAX_STATE];
    double *x = malloc(sizeof(double) * (size_t)n);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n), shape[2] = {n, 1};
    assert_true(w && x && idx);
    for (int s = 0; s < c->nstate; s++) {
        p[s] = g + n + (size_t)s * (size_t)n;
        for (int i = 0; i < n; i++) p[s][i] = (float)c->state_init[s];
    }
    for (int i = 0; i < n; i++) x[i] = d->init(i), w[i] = (float)x[i], idx[i] = i;
    optim_optimizer *opt = optim_test_make(c->json);
    optim_var *v = optim_test_var("w", OPTIM_F32, 2, shape, x);
    for (int k = 0; k < steps; k++) {
        for (int i = 0; i < n; i++) g[i] = (float)d->grad(k, i);
        c->ref32(c->hp, k, w, p, g, n);
        optim_tensor t = optim_tensor_make(OPTIM_F32, g, 2, shape);
        optim_grad_var pg = {sparse ? optim_grad_sparse(idx, n, t) : optim_grad_dense(t), v};
        ot_step(opt, &pg, 1);
        assert_var_floats(v, w, n);
        for (int s = 0; s < c->nstate; s++)
            if (c->slots[s]) assert_var_floats(optim_get_slot(opt, v, c->slots[s]), p[s], n);
    }
    optim_test_free(opt, v);
    free(w);
    free(x);
    free(idx);
}

optim_var *ot_run_sparse(optim_optimizer *opt, const ot_sparse *s, optim_dtype dt, int as_dense)
{
    return ot_run_sparse_with(opt, s, dt, as_dense, NULL, NULL, 0, NULL);
}

optim_var *ot_run_sparse_with(optim_optimizer *opt, const ot_sparse *s, optim_dtype dt,
                              int as_dense, optim_var *extra, const double *extra_g, int32_t rank,
                              const int64_t *vshape)
{
    int cw = s->cols ? s->cols : 1;
    int n = s->rows * cw, nv = s->nidx * cw, f = dt == OPTIM_F32;
    double *init = calloc((size_t)(2 * n + nv), sizeof(double)), *dense = init + n,
           *vals = dense + n;
    float *fd = calloc((size_t)(n + nv), sizeof(float)), *fv = fd + n;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)s->nidx);
    void *ebuf = malloc(extra ? (size_t)optim_var_numel(extra) * 8 + 8 : 8);
    assert_true(init && fd && idx && ebuf);
    for (int i = 0; i < n; i++) init[i] = s->init(i / cw, i % cw);
    int64_t shape[OPTIM_MAX_RANK] = {s->rows, cw}, vs[OPTIM_MAX_RANK];
    if (vshape) memcpy(shape, vshape, sizeof(int64_t) * (size_t)rank);
    else rank = s->cols ? 2 : 1;
    memcpy(vs, shape, sizeof vs);
    vs[0] = s->nidx;
    optim_var *v = optim_test_var("table", dt, rank, shape, init);
    for (int k = 0; k < s->steps; k++) {
        memset(dense, 0, sizeof(double) * (size_t)n);
        memset(fd, 0, sizeof(float) * (size_t)n);
        for (int j = 0; j < s->nidx; j++) {
            idx[j] = s->index(k, j);
            for (int c = 0; c < cw; c++) {
                vals[j * cw + c] = s->val(k, j, c);
                fv[j * cw + c] = (float)vals[j * cw + c];
                /* The dense equivalent sums duplicates in order, in the dtype. */
                dense[idx[j] * cw + c] += vals[j * cw + c];
                fd[idx[j] * cw + c] += fv[j * cw + c];
            }
        }
        optim_grad_var p[2] = {
            {as_dense ? optim_grad_dense(
                            optim_tensor_make(dt, f ? (void *)fd : (void *)dense, rank, shape))
                      : optim_grad_sparse(
                            idx, s->nidx,
                            optim_tensor_make(dt, f ? (void *)fv : (void *)vals, rank, vs)),
             v},
            {optim_grad_none(), extra}};
        if (extra)
            p[1].grad = optim_grad_dense(tensor_like(optim_var_dtype(extra), optim_var_rank(extra),
                                                     optim_var_shape(extra), extra_g,
                                                     optim_var_numel(extra), ebuf));
        ot_step(opt, p, extra ? 2 : 1);
    }
    free(ebuf);
    free(init);
    free(fd);
    free(idx);
    return v;
}

void ot_ref_sparse(const ot_sparse *s, const ot_case *c, int rows_only, optim_dtype dt, double *w,
                   double *st)
{
    int cols = s->cols ? s->cols : 1, n = s->rows * cols, r32 = c->round32 && dt == OPTIM_F32;
    double *g = malloc(sizeof(double) * (size_t)n), *p[OT_MAX_STATE], *q[OT_MAX_STATE];
    char *touched = malloc((size_t)s->rows);
    const void *hp = case_hp(c, dt);
    assert_true(g && touched);
    state_ptrs(c, st, n, p);
    init_state(c, p, n, r32);
    for (int i = 0; i < n; i++) w[i] = rnd(r32, s->init(i / cols, i % cols));
    for (int k = 0; k < s->steps; k++) {
        memset(g, 0, sizeof(double) * (size_t)n);
        memset(touched, 0, (size_t)s->rows);
        for (int j = 0; j < s->nidx; j++) {
            int64_t r = s->index(k, j);
            touched[r] = 1;
            for (int cc = 0; cc < cols; cc++) g[r * cols + cc] += rnd(r32, s->val(k, j, cc));
        }
        for (int i = 0; r32 && i < n; i++) g[i] = rnd(1, g[i]);
        if (!rows_only && !c->idle) {
            c->ref(hp, k, w, p, g, n);
            continue;
        }
        for (int r = 0; r < s->rows; r++) {
            for (int i = 0; i < c->nstate; i++) q[i] = p[i] + r * cols;
            if (touched[r]) c->ref(hp, k, w + r * cols, q, g + r * cols, cols);
            else if (c->idle) c->idle(hp, k, w + r * cols, q, cols);
        }
    }
    free(g);
    free(touched);
}

/* Rows that no step indexes hold their first values (ref: the reference's
 * w and state, where they never move) bit for bit, in x and its slots. */
static void unindexed_rows_kept(optim_optimizer *opt, optim_var *x, const ot_case *c,
                                const ot_sparse *s, const double *ref, double *want)
{
    int cols = s->cols ? s->cols : 1, n = s->rows * cols, f32 = optim_var_dtype(x) == OPTIM_F32;
    char *seen = calloc((size_t)s->rows, 1);
    assert_non_null(seen);
    for (int k = 0; k < s->steps; k++)
        for (int j = 0; j < s->nidx; j++) seen[s->index(k, j)] = 1;
    for (int i = -1; i < c->nstate; i++) {
        optim_var *v = i < 0 ? x : c->slots[i] ? optim_get_slot(opt, x, c->slots[i]) : NULL;
        for (int e = 0; v && e < n; e++) /* indexed rows: their own values (not compared here) */
            want[e] = seen[e / cols] ? optim_var_get(v, e)
                                     : rnd(f32, ref[(size_t)(i + 1) * (size_t)n + (size_t)e]);
        if (v)
            optim_test_var_close(v, want, n, 0, 0, i < 0 ? "unindexed rows of w" : c->slots[i],
                                 __FILE__, __LINE__);
    }
    free(seen);
}

void ot_check_sparse(const ot_sparse *s, ot_case c, int rows_only)
{
    int n = s->rows * (s->cols ? s->cols : 1);
    double *w = malloc(sizeof(double) * (size_t)(n * (2 + c.nstate)));
    assert_non_null(w);
    OPTIM_FOR_DTYPES(dt)
    {
        ot_ref_sparse(s, &c, rows_only, dt, w, w + n);
        optim_optimizer *opt = optim_test_make(c.json);
        optim_var *x = ot_run_sparse(opt, s, dt, 0);
        ot_check_state(opt, x, &c, w, w + n, n);
        if (rows_only && !c.idle) unindexed_rows_kept(opt, x, &c, s, w, w + n * (1 + c.nstate));
        optim_test_free(opt, x);
    }
    free(w);
}

/* The named slots of a in o1 and b in o2 bit for bit (absent in both: skipped). */
static void slots_bitwise(optim_optimizer *o1, optim_var *a, optim_optimizer *o2, optim_var *b,
                          const char *const *slots)
{
    for (int i = 0; slots && slots[i]; i++) {
        optim_var *x = optim_get_slot(o1, a, slots[i]), *y = optim_get_slot(o2, b, slots[i]);
        if (x || y) assert_vars_bitwise(x, y);
    }
}

void ot_check_sparse_equals_dense(const ot_sparse *s, const char *json, const char *const *slots)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *o1 = optim_test_make(json), *o2 = optim_test_make(json);
        optim_var *sv = ot_run_sparse(o1, s, dt, 0), *dv = ot_run_sparse(o2, s, dt, 1);
        assert_vars_bitwise(sv, dv);
        slots_bitwise(o1, sv, o2, dv, slots);
        optim_destroy(o1);
        optim_test_free(o2, sv, dv);
    }
}

/* Whether row r (had: the first step reached it) is one a rule of this kind is about. */
static int rule_row(int kind, int r, int had, int row)
{
    return kind == OT_FIRST ? had
        : kind == OT_LEFT   ? had && r != row
        : kind == OT_ROW    ? r == row
                            : !had && r != row;
}

/* The rules of the first step (first) or the second on x; was[i]: rule i's
 * weight before the second step. */
static void apply_rules(optim_optimizer *opt, optim_var *x, const ot_rule *rules, int nrules,
                        int first, int all_had, int row, int cols, double was[][64])
{
    int f32 = optim_var_dtype(x) == OPTIM_F32, n = (int)optim_var_numel(x);
    for (int i = 0; i < nrules; i++) {
        const ot_rule *u = &rules[i];
        optim_var *v = u->slot ? optim_get_slot(opt, x, u->slot) : x;
        if (!v) fail_msg("no slot '%s'", u->slot);
        for (int e = 0; e < n && (u->rows == OT_FIRST) == first; e++) {
            if (!rule_row(u->rows, e / cols, all_had || e / cols == 0, row)) continue;
            double now = optim_var_get(v, e), start = u->slot ? 0 : e + 1;
            double before = u->rows == OT_FIRST || u->rows == OT_NEVER ? start : was[i][e];
            double want = u->what == OT_SCALED
                ? (f32 ? (double)((float)before * (float)u->factor) : before * u->factor)
                : u->what == OT_CLOSE ? before * u->factor
                : u->what == OT_IS    ? u->factor
                                      : before;
            int ok = u->what == OT_LESS ? now < before
                : u->what == OT_MOVED   ? now != before
                : u->what == OT_CLOSE   ? fabs(now - want) <= (f32 ? 1e-6 : 1e-14) * fabs(want)
                                        : now == want;
            if (!ok)
                fail_msg("%s, element %d (rule %d): %a (%.17g), expected %s %a (%.17g)",
                         u->slot ? u->slot : "w", e, i, now, now,
                         (const char *[]){"==", "==", "close to", "<", "!=", "=="}[u->what], want,
                         want);
        }
    }
}

void ot_check_rows_left_out(const char *json, optim_dtype dt, int rows, int cols,
                            const double *hist, int row, const double *vals, const ot_rule *rules,
                            int nrules)
{
    double init[64], ones[64], was[8][64];
    assert_in_range(rows * cols, 1, 64);
    assert_in_range(nrules, 0, 8);
    for (int i = 0; i < rows * cols; i++) init[i] = i + 1, ones[i] = 1;
    optim_optimizer *opt = optim_test_make(json);
    optim_var *x = optim_test_var("e", dt, 2, (int64_t[2]){rows, cols}, init);
    if (hist) ot_step_dense(opt, x, hist);
    else ot_step_row(opt, x, 0, ones);
    apply_rules(opt, x, rules, nrules, 1, hist != NULL, row, cols, was);
    for (int i = 0; i < nrules; i++) {
        optim_var *v = rules[i].slot ? optim_get_slot(opt, x, rules[i].slot) : x;
        for (int e = 0; v && e < rows * cols; e++) was[i][e] = optim_var_get(v, e);
    }
    ot_step_row(opt, x, row, vals);
    apply_rules(opt, x, rules, nrules, 0, hist != NULL, row, cols, was);
    optim_test_free(opt, x);
}

/* One thread against `threads`: the big F32 vector and, mixed, a small F64
 * vector and rows of an F32 table (sparse, index 7 twice). */
static void check_threads(const char *json, int threads, int steps, double shrink,
                          const char *const *slots, int mixed)
{
    const int64_t n = 100003; /* many chunks, ragged end */
    const int64_t n1 = 1000, es[2] = {500, 8}, rs[2] = {3, 8};
    int64_t idx[3] = {7, 499, 7};
    double *init = malloc((size_t)n * sizeof *init), gd[1000];
    float *g = malloc((size_t)n * sizeof *g), rows[24];
    assert_true(init && g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * (double)i);
    for (int i = 0; i < 24; i++) rows[i] = (float)(0.1 * i - 1);
    const int nv = mixed ? 3 : 1;
    optim_var *vars[2][4] = {{NULL}};
    optim_optimizer *opts[2];
    for (int t = 0; t < 2; t++) {
        opts[t] = optim_test_make(json);
        assert_ok(optim_set_num_threads(opts[t], t ? threads : 1), opts[t]);
        vars[t][0] = optim_test_var("big", OPTIM_F32, 1, &n, init);
        if (mixed) {
            vars[t][1] = optim_test_var("small", OPTIM_F64, 1, &n1, init);
            vars[t][2] = optim_test_var("emb", OPTIM_F32, 2, es, init);
        }
        for (int k = 0; k < steps; k++) {
            for (int64_t i = 0; i < n; i++)
                g[i] = (float)(cos(0.37 * (double)i + k) / (1 + shrink * k));
            for (int i = 0; i < 1000; i++) gd[i] = cos(0.11 * i - k);
            optim_grad_var p[3] = {
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), vars[t][0]},
                {optim_grad_dense(optim_tensor_make(OPTIM_F64, gd, 1, &n1)), vars[t][1]},
                {optim_grad_sparse(idx, 3, optim_tensor_make(OPTIM_F32, rows, 2, rs)), vars[t][2]},
            };
            ot_step(opts[t], p, (size_t)nv);
        }
    }
    for (int j = 0; j < nv; j++) assert_vars_bitwise(vars[0][j], vars[1][j]);
    slots_bitwise(opts[0], vars[0][0], opts[1], vars[1][0], slots);
    for (int t = 0; t < 2; t++) optim_test_free_(opts[t], vars[t]);
    free(init);
    free(g);
}

void ot_check_threads(const char *json, int threads, int steps, double shrink,
                      const char *const *slots)
{
    check_threads(json, threads, steps, shrink, slots, 0);
}

void ot_check_threads_mixed(const char *json, int threads, int steps, const char *const *slots)
{
    check_threads(json, threads, steps, 0, slots, 1);
}

void ot_check_keras_single_step(const char *json, const double *want)
{
    const double init[4] = {1, 2, 3, 4}, g[4] = {1, 6, 7, 2};
    int64_t n = 4;
    optim_optimizer *opt = optim_test_make(json);
    optim_var *v = optim_test_var("vars", OPTIM_F32, 1, &n, init);
    ot_step_dense(opt, v, g);
    assert_var_close(v, want, 4, 1e-4, 1e-4);
    optim_test_free(opt, v);
}

void ot_check_keras_golden(const char *json, optim_dtype dt, const double *golden, int cols)
{
    double ones[10], first[10], grads[10], want[10];
    for (int i = 0; i < 10; i++) ones[i] = 1, first[i] = 0.01, grads[i] = 0.1 * (i + 1);
    int64_t n = 10;
    optim_optimizer *opt = optim_test_make(json);
    optim_var *x = optim_test_var("x", dt, 1, &n, ones);
    ot_step_dense(opt, x, first);
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 10; i++) want[i] = golden[k * cols + (cols > 1 ? i : 0)];
        assert_var_close(x, want, 10, 5e-4, 5e-4);
        ot_step_dense(opt, x, grads);
    }
    optim_test_free(opt, x);
}

void ot_check_keras_weight_decay(const char *json, optim_dtype dt)
{
    const double two = 2.0, zero = 0.0, want = 1.9760959;
    optim_var *v[4];
    const char *names[4] = {"var1", "exclude", "var3", "var1"};
    for (int i = 0; i < 4; i++) v[i] = optim_test_var(names[i], dt, 0, NULL, &two);
    optim_optimizer *o[4];
    for (int i = 0; i < 4; i++) o[i] = optim_test_make(json);
    optim_tensor gz =
        optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)&(float){0} : (void *)&zero, 0, NULL);
    const char *pat[1] = {"exclude"};
    assert_ok(optim_exclude_from_weight_decay(o[1], NULL, 0, pat, 1), o[1]);
    assert_ok(optim_exclude_from_weight_decay(o[2], &v[2], 1, NULL, 0), o[2]);
    optim_grad_var p[3][2] = {{{optim_grad_dense(gz), v[0]}},
                              {{optim_grad_dense(gz), v[0]}, {optim_grad_dense(gz), v[1]}},
                              {{optim_grad_dense(gz), v[0]}, {optim_grad_dense(gz), v[2]}}};
    for (int i = 0; i < 3; i++) ot_step(o[i], p[i], i ? 2 : 1);
    for (int k = 0; k < 3; k++) ot_step_dense(o[3], v[3], &zero);
    assert_close(optim_var_get(v[0], 0), want, 0, 1e-6);
    assert_close(optim_var_get(v[3], 0), want, 0, 1e-6);
    assert_eq(optim_var_get(v[1], 0), 2.0);
    assert_eq(optim_var_get(v[2], 0), 2.0);
    for (int i = 0; i < 4; i++) {
        optim_test_free(o[i], v[i]);
    }
}

cJSON *ot_config(optim_optimizer *opt)
{
    char *s = optim_get_config(opt);
    assert_non_null(s);
    cJSON *c = cJSON_Parse(s);
    optim_free(s);
    assert_non_null(c);
    return c;
}

void ot_assert_keys(const cJSON *c, const char *const *keys, size_t n)
{
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, c)
    {
        if (i >= n || strcmp(it->string, keys[i]) != 0)
            fail_msg("config key %zu is '%s', expected '%s'", i, it->string,
                     i < n ? keys[i] : "(end)");
        i++;
    }
    assert_eq(i, n);
}

cJSON *ot_config_of(const char *json, const char *name, const char *const *keys, size_t n)
{
    optim_optimizer *opt = optim_test_make(json);
    cJSON *c = ot_config(opt);
    optim_destroy(opt);
    if (keys) ot_assert_keys(c, keys, n);
    const cJSON *got = cJSON_GetObjectItemCaseSensitive(c, "name");
    if (name) assert_string_equal(cJSON_IsString(got) ? got->valuestring : "(no name)", name);
    return c;
}

double ot_num(const cJSON *c, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    if (!cJSON_IsNumber(v)) fail_msg("config key '%s' is not a number", key);
    return v->valuedouble;
}

void ot_expect_numbers(const cJSON *c, ...)
{
    va_list ap;
    va_start(ap, c);
    for (const char *key; (key = va_arg(ap, const char *));) {
        double want = va_arg(ap, double), got = ot_num(c, key);
        if (got != want) {
            va_end(ap);
            fail_msg("config key '%s' is %a (%.17g), expected %a (%.17g)", key, got, got, want,
                     want);
        }
    }
    va_end(ap);
}

void ot_check_round_trip(const char *json)
{
    optim_optimizer *a = optim_test_make(json);
    char *s1 = optim_serialize(a);
    assert_non_null(s1);
    optim_optimizer *b = optim_test_make(s1);
    char *s2 = optim_serialize(b);
    assert_string_equal(s1, s2);
    optim_free(s1);
    optim_free(s2);
    optim_destroy(a);
    optim_destroy(b);
}

/* get_config of the optimizer made from json (optim_free it). */
static char *config_string(const char *json)
{
    optim_optimizer *opt = optim_test_make(json);
    char *cfg = optim_get_config(opt);
    optim_destroy(opt);
    assert_non_null(cfg);
    return cfg;
}

void ot_expect_config(const char *json, const char *want)
{
    char *cfg = config_string(json);
    assert_string_equal(cfg, want);
    optim_free(cfg);
    ot_check_round_trip(json);
}

void ot_expect_serialized_as_given(const char *json, optim_generation gen)
{
    optim_optimizer *opt = optim_test_make(json);
    assert_int_equal(optim_generation_of(opt), gen);
    char *s = optim_serialize(opt);
    assert_string_equal(s, json);
    optim_free(s);
    optim_destroy(opt);
}

void ot_expect_config_has(const char *json, const char *needle)
{
    char *cfg = config_string(json);
    assert_contains(cfg, needle);
    optim_free(cfg);
}

void ot_expect_refused(const char *json, int code, const char *needle1, const char *needle2)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("%s: %s\n", json, rc ? err.msg : "accepted");
    assert_status(rc, code, &err);
    assert_null(opt);
    if (needle1) assert_contains(err.msg, needle1);
    if (needle2) assert_contains(err.msg, needle2);
}

void ot_expect_refused_gens(const char *json, int code, const char *needle1, const char *needle2)
{
    for (int legacy = 0; legacy < 2; legacy++)
        ot_expect_refused(ot_gen(json, legacy), code, needle1, needle2);
}

void ot_expect_slot_names(optim_optimizer *opt, ...)
{
    const char *names[16];
    int n = optim_get_slot_names(opt, names, 16), i = 0;
    va_list ap;
    va_start(ap, opt);
    for (const char *want; (want = va_arg(ap, const char *)); i++) {
        if (i >= n) print_error("slot name %d absent, expected '%s'\n", i, want);
        assert_lt(i, n);
        assert_string_equal(names[i], want);
    }
    va_end(ap);
    assert_eq(n, i);
}

void ot_expect_weight_names(optim_optimizer *opt, int64_t first, ...)
{
    va_list ap;
    va_start(ap, first);
    for (const char *want; (want = va_arg(ap, const char *)); first++)
        assert_string_equal(optim_weight_name(opt, first), want);
    va_end(ap);
}

void ot_expect_serialized(const char *json, const char *want)
{
    optim_optimizer *opt = optim_test_make(json);
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    char *s = optim_serialize(opt);
    if (strcmp(s, want)) print_error("%s\nbecame %s\nexpected %s\n", json, s, want);
    assert_string_equal(s, want);
    optim_free(s);
    optim_destroy(opt);
    ot_check_round_trip(want);
}

double ot_sum_squares(const double *g, int64_t n)
{
    double total = 0;
    for (int64_t c0 = 0; c0 < n; c0 += 8192) {
        double lane[4] = {0, 0, 0, 0};
        for (int64_t i = c0; i < n && i < c0 + 8192; i++) lane[(i - c0) % 4] += g[i] * g[i];
        total += ((lane[0] + lane[1]) + lane[2]) + lane[3];
    }
    return total;
}

int ot_sparse_summed(const ot_sparse *s, int k, optim_dtype dt, int64_t *order, double *rows)
{
    const int cols = s->cols ? s->cols : 1, f32 = dt == OPTIM_F32;
    double *g = calloc((size_t)(s->rows * cols), sizeof *g);
    char *seen = calloc((size_t)s->rows, 1);
    assert_true(g && seen);
    for (int j = 0; j < s->nidx; j++) {
        const int64_t q = s->index(k, j);
        seen[q] = 1;
        for (int c = 0; c < cols; c++) {
            const double x = f32 ? (float)s->val(k, j, c) : s->val(k, j, c);
            g[q * cols + c] = f32 ? (float)(g[q * cols + c] + x) : g[q * cols + c] + x;
        }
    }
    int nu = 0;
    for (int q = 0; q < s->rows; q++)
        if (seen[q]) {
            for (int c = 0; c < cols; c++) rows[nu * cols + c] = g[q * cols + c];
            order[nu++] = q;
        }
    free(g);
    free(seen);
    return nu;
}
