/* NovoGrad (TF Addons) against a double-precision reference written from
 * tensorflow_addons/optimizers/novograd.py (d208d75), line by line:
 *
 *   g_2 = reduce_sum(square(grad))
 *   v_t = g_2 if iterations == 0 else v * beta_2 + g_2 * (1 - beta_2)
 *   amsgrad: vhat_t = maximum(vhat, v_t); grad = grad / (sqrt(vhat_t) + epsilon)
 *   else:    grad = grad / (sqrt(v_t) + epsilon)
 *   grad = grad + weight_decay * var              if weight_decay > 0
 *   grad = grad * (1 - beta_1)                    if grad_averaging and iterations != 0
 *   ResourceApplyKerasMomentum: m = m * beta_1 - lr * grad; var = var + m
 *   sparse: the same with the rows (gather(var, indices)) and
 *           ResourceSparseApplyKerasMomentum on the indexed rows only.
 *
 * g_2 is summed in the order optim documents (chunks of 8192, four lanes),
 * so float64 runs match bit for bit; float32 runs match a float32 reference
 * (g_2 from the double sum rounded once) bit for bit and the double
 * reference to 1e-6. TF Addons' own test values (novograd_test.py); several
 * variables at once, amsgrad, weight decay, averaging, a variable first
 * stepped late, sparse rows with duplicates, a large variable, threads,
 * dynamic hyperparameters, configs in both envelopes, slots, bad input. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NG(body) "{\"class_name\": \"NovoGrad\", \"config\": {" body "}}"
#define MAXN 20011

/* ---- the reference ----------------------------------------------------------------- */

typedef struct nref {
    double lr, beta_1, beta_2, epsilon, wd, decay;
    int averaging, amsgrad;
} nref;

static const nref DEFAULTS = {0.001, 0.9, 0.999, 1e-7, 0, 0, 0, 0};

/* One step of one variable; t0 is the optimizer's iterations before it. */
static void ref_step(const nref *r, int64_t t0, double *w, double *m, double *v, double *vhat,
                     const double *g, int64_t n)
{
    const double lr = r->lr / (1.0 + r->decay * (double)t0);
    const double eps = r->epsilon == 0 ? 1e-7 : r->epsilon; /* epsilon or backend.epsilon() */
    const double g2 = ot_sum_squares(g, n);
    const double vt = t0 == 0 ? g2 : *v * r->beta_2 + g2 * (1.0 - r->beta_2);
    *v = vt;
    for (int64_t i = 0; i < n; i++) {
        double grad;
        if (r->amsgrad) {
            vhat[i] = fmax(vhat[i], vt);
            grad = g[i] / (sqrt(vhat[i]) + eps);
        } else {
            grad = g[i] / (sqrt(vt) + eps);
        }
        if (r->wd > 0) grad = grad + r->wd * w[i];
        if (r->averaging && t0 != 0) grad = grad * (1.0 - r->beta_1);
        m[i] = m[i] * r->beta_1 - lr * grad;
        w[i] = w[i] + m[i];
    }
}

/* The same in float32 arithmetic (TF's ops in the dtype; g_2 rounded once). */
static void ref_step32(const nref *r, int64_t t0, float *w, float *m, float *v, float *vhat,
                       const float *g, int64_t n)
{
    static double gd[MAXN];
    for (int64_t i = 0; i < n; i++) gd[i] = g[i];
    const float lr = (float)r->lr, b1 = (float)r->beta_1, b2 = (float)r->beta_2;
    const float eps = (float)(r->epsilon == 0 ? 1e-7 : r->epsilon), wd = (float)r->wd;
    const float g2 = (float)ot_sum_squares(gd, n);
    const float vt = t0 == 0 ? g2 : *v * b2 + g2 * (1.0f - b2);
    *v = vt;
    for (int64_t i = 0; i < n; i++) {
        float grad;
        if (r->amsgrad) {
            vhat[i] = vhat[i] < vt ? vt : vhat[i];
            grad = g[i] / (sqrtf(vhat[i]) + eps);
        } else {
            grad = g[i] / (sqrtf(vt) + eps);
        }
        if (wd > 0) grad = grad + wd * w[i];
        if (r->averaging && t0 != 0) grad = grad * (1.0f - b1);
        m[i] = m[i] * b1 - lr * grad;
        w[i] = w[i] + m[i];
    }
}

/* The table drivers' form: state m, v (element 0), vhat. */
static void case_ref(const void *hp, int k, double *w, double *const *st, const double *g, int n)
{
    ref_step(hp, k, w, st[0], st[1], st[2], g, n);
}

/* ---- several variables at once ------------------------------------------------------- */

typedef struct vdef {
    const char *name;
    int32_t rank;
    int64_t shape[2];
    int64_t first; /* the step of its first gradient */
} vdef;

static int64_t numel_of(const vdef *d)
{
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++) n *= d->shape[i];
    return n;
}

static double init_at(int v, int64_t i) { return 0.5 - 0.3 * (double)i + 0.7 * v; }
static double grad_at(int k, int v, int64_t i, double shrink)
{
    return (sin(0.7 * k + 1.3 * (double)i + 0.4 * v) * (1.0 + 0.1 * (double)(i % 13)) - 0.05 * k) *
        exp(-shrink * k);
}

typedef struct track {
    optim_var *var;
    int64_t n;
    double w[MAXN], m[MAXN], v, vhat[MAXN], g[MAXN], buf[MAXN];
    float w32[MAXN], m32[MAXN], v32, vhat32[MAXN], g32[MAXN];
} track;

static void track_init(track *t, const vdef *d, int j, optim_dtype dt)
{
    memset(t, 0, sizeof *t);
    t->n = numel_of(d);
    for (int64_t i = 0; i < t->n; i++) t->w[i] = init_at(j, i);
    t->var = optim_test_var(d->name, dt, d->rank, d->shape, t->w);
    for (int64_t i = 0; i < t->n; i++) {
        t->w[i] = optim_var_get(t->var, i); /* the variable's own (rounded) values */
        t->w32[i] = (float)t->w[i];
    }
}

/* Compares w, m, v and vhat: f64 and f32 against the float32 reference bit
 * for bit, f32 against the double reference to 1e-6. */
static void track_check(optim_optimizer *opt, const track *t, const nref *r)
{
    optim_var *m = optim_get_slot(opt, t->var, "m"), *v = optim_get_slot(opt, t->var, "v");
    optim_var *vh = optim_get_slot(opt, t->var, "vhat");
    assert_true(m && v && (vh != NULL) == (r->amsgrad != 0));
    assert_eq(optim_var_rank(v), 0);
    if (optim_var_dtype(t->var) == OPTIM_F64) {
        assert_var_eq(t->var, t->w, t->n);
        assert_var_eq(m, t->m, t->n);
        assert_var_eq(v, &t->v, 1);
        if (vh) assert_var_eq(vh, t->vhat, t->n);
        return;
    }
    assert_var_floats(t->var, t->w32, t->n);
    assert_var_floats(m, t->m32, t->n);
    assert_var_floats(v, &t->v32, 1);
    if (vh) assert_var_floats(vh, t->vhat32, t->n);
    assert_var_close(t->var, t->w, t->n, 1e-6, 1e-6);
    assert_var_close(v, &t->v, 1, 1e-6, 0);
}

static track tracks[4];

/* `steps` steps of every variable of vs at once (variable j from step
 * vs[j].first on), in f32 and f64, against both references. */
static void check_vars(const char *json, const nref *r, const vdef *vs, int nv, int steps,
                       double shrink)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        for (int j = 0; j < nv; j++) track_init(&tracks[j], &vs[j], j, dt);
        for (int k = 0; k < steps; k++) {
            optim_grad_var p[4];
            size_t np = 0;
            for (int j = 0; j < nv; j++) {
                track *t = &tracks[j];
                if (k < vs[j].first) continue;
                for (int64_t i = 0; i < t->n; i++) {
                    t->g32[i] = (float)grad_at(k, j, i, shrink);
                    t->g[i] = dt == OPTIM_F32 ? t->g32[i] : grad_at(k, j, i, shrink);
                }
                p[np++] = (optim_grad_var){ot_grad_like(t->var, t->g, t->buf), t->var};
                ref_step(r, k, t->w, t->m, &t->v, t->vhat, t->g, t->n);
                ref_step32(r, k, t->w32, t->m32, &t->v32, t->vhat32, t->g32, t->n);
            }
            ot_step(opt, p, np);
            for (int j = 0; j < nv; j++)
                if (k >= vs[j].first) track_check(opt, &tracks[j], r);
        }
        optim_destroy(opt);
        for (int j = 0; j < nv; j++) optim_var_destroy(tracks[j].var);
    }
}

static const vdef THREE[3] = {
    {"dense/kernel", 2, {3, 4}, 0},
    {"dense/bias", 1, {7, 0}, 0},
    {"scale", 0, {0, 0}, 0},
};

OPTIM_TEST(test_defaults)
{
    check_vars(NG(""), &DEFAULTS, THREE, 3, 25, 0);
    check_vars("\"novograd\"", &DEFAULTS, THREE, 3, 3, 0);
    check_vars("{\"class_name\": \"Addons>NovoGrad\", \"config\": {}}", &DEFAULTS, THREE, 3, 3, 0);
}

OPTIM_TEST(test_options)
{
    const nref r = {0.05, 0.8, 0.9, 1e-5, 0.05, 0, 1, 0};
    check_vars(NG("\"learning_rate\": 0.05, \"beta_1\": 0.8, \"beta_2\": 0.9, \"epsilon\": 1e-5, "
                  "\"weight_decay\": 0.05, \"grad_averaging\": true"),
               &r, THREE, 3, 25, 0);
    /* epsilon 0 and None act as 1e-7 */
    const nref z = {0.05, 0.9, 0.999, 0, 0, 0, 0, 0};
    check_vars(NG("\"learning_rate\": 0.05, \"epsilon\": 0"), &z, THREE, 3, 5, 0);
    check_vars(NG("\"learning_rate\": 0.05, \"epsilon\": null"), &z, THREE, 3, 5, 0);
}

/* amsgrad with shrinking gradients: v falls below its running maximum. */
OPTIM_TEST(test_amsgrad)
{
    const nref r = {0.05, 0.9, 0.5, 1e-7, 0.01, 0, 1, 1};
    check_vars(NG("\"learning_rate\": 0.05, \"beta_2\": 0.5, \"weight_decay\": 0.01, "
                  "\"grad_averaging\": true, \"amsgrad\": true"),
               &r, THREE, 3, 25, 0.3);
}

/* t0 is the optimizer's: a variable first stepped at step 3 starts with
 * v = 0 * beta_2 + g_2 * (1 - beta_2) and averages at once. */
OPTIM_TEST(test_variable_first_stepped_late)
{
    const vdef late[2] = {{"early", 1, {5, 0}, 0}, {"late", 2, {2, 3}, 3}};
    const nref r = {0.1, 0.9, 0.99, 1e-7, 0, 0, 1, 0};
    check_vars(NG("\"learning_rate\": 0.1, \"beta_2\": 0.99, \"grad_averaging\": true"), &r, late,
               2, 8, 0);
}

/* legacy decay: lr / (1 + decay * iterations), in f64 (bit for bit). */
OPTIM_TEST(test_lr_decay)
{
    const nref r = {0.1, 0.9, 0.999, 1e-7, 0, 0.3, 0, 0};
    optim_optimizer *opt = optim_test_make(NG("\"learning_rate\": 0.1, \"decay\": 0.3"));
    track *t = &tracks[0];
    track_init(t, &THREE[1], 0, OPTIM_F64);
    for (int k = 0; k < 6; k++) {
        for (int64_t i = 0; i < t->n; i++) t->g[i] = grad_at(k, 0, i, 0);
        ot_step_dense(opt, t->var, t->g);
        ref_step(&r, k, t->w, t->m, &t->v, t->vhat, t->g, t->n);
        assert_var_eq(t->var, t->w, t->n);
    }
    optim_test_free(opt, t->var);
}

/* Many chunks and a ragged end, f64 bit for bit (the sum's order). */
OPTIM_TEST(test_large_variable)
{
    const vdef big[1] = {{"big", 1, {MAXN, 0}, 0}};
    const nref r = {0.01, 0.9, 0.999, 1e-7, 0.001, 0, 1, 1};
    check_vars(NG("\"learning_rate\": 0.01, \"weight_decay\": 0.001, \"grad_averaging\": true, "
                  "\"amsgrad\": true"),
               &r, big, 1, 3, 0.5);
}

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", "v", "vhat", NULL};
    ot_check_threads(NG("\"learning_rate\": 0.01, \"amsgrad\": true, \"weight_decay\": 0.01"), 2, 4,
                     0.5, slots);
    ot_check_threads_mixed(NG("\"learning_rate\": 0.01, \"grad_averaging\": true"), 2, 3, slots);
}

/* ---- dynamic hyperparameters -------------------------------------------------------- */

static double lr_sched(void *user, int64_t step)
{
    (void)user;
    return 0.05 / (1.0 + (double)step);
}

static void set_hypers(optim_optimizer *opt, void *hp, int k)
{
    nref *r = hp;
    r->beta_1 = 0.5 + 0.05 * k;
    r->wd = 0.01 * k;
    if (k == 4) assert_ok(optim_set_hyper(opt, "beta_2", 0.9), opt);
    r->beta_2 = k >= 4 ? 0.9 : 0.999;
    r->lr = 0.05 / (1.0 + k);
}

static double init_0(int i) { return init_at(0, i); }
static double grad_0(int k, int i) { return grad_at(k, 0, i, 0); }

OPTIM_TEST(test_dynamic_hypers)
{
    nref r = DEFAULTS;
    optim_optimizer *opt = optim_test_make(NG(""));
    assert_ok(optim_set_hyper_fn(opt, "beta_1", ot_value, &r.beta_1), opt);
    assert_ok(optim_set_hyper_fn(opt, "weight_decay", ot_value, &r.wd), opt);
    assert_ok(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), opt);
    const ot_case c = {.ref = case_ref, .hp = &r, .nstate = 3, .slots = {"m"}};
    optim_var *v = ot_check_dynamic(opt, &(ot_dense){7, 8, init_0, grad_0, 0, NULL}, 8, &c,
                                    OPTIM_F64, set_hypers);
    /* A callable giving weight_decay out of range fails the step, changes nothing. */
    r.wd = -1;
    ot_expect_step_refused(opt, v, 1, OPTIM_ERANGE, "weight_decay");
    optim_test_free(opt, v);
}

/* ---- sparse ---------------------------------------------------------------------------- */

/* The sparse reference on a rows x cols table (cols 0: a vector): rows
 * summed in order of appearance (in the dtype), g_2 over the unique rows in
 * index order, vhat on every element, the indexed rows of m and w. */
static void ref_sparse(const ot_sparse *s, const nref *r, optim_dtype dt, double *w, double *m,
                       double *v, double *vhat)
{
    const int cols = s->cols ? s->cols : 1, n = s->rows * cols, f32 = dt == OPTIM_F32;
    for (int i = 0; i < n; i++)
        w[i] = f32 ? (float)s->init(i / cols, i % cols) : s->init(i / cols, i % cols);
    for (int k = 0; k < s->steps; k++) {
        double rows[64], wr[64], mr[64], vh[64];
        int64_t order[16];
        const int nu = ot_sparse_summed(s, k, dt, order, rows);
        for (int u = 0; u < nu; u++)
            for (int c = 0; c < cols; c++) {
                wr[u * cols + c] = w[order[u] * cols + c];
                mr[u * cols + c] = m[order[u] * cols + c];
                vh[u * cols + c] = vhat[order[u] * cols + c];
            }
        /* v and vhat from every element; then the rows. */
        double vt = ot_sum_squares(rows, nu * cols);
        vt = k == 0 ? vt : *v * r->beta_2 + vt * (1.0 - r->beta_2);
        for (int i = 0; r->amsgrad && i < n; i++) vhat[i] = fmax(vhat[i], vt);
        ref_step(r, k, wr, mr, v, vh, rows, nu * cols);
        for (int u = 0; u < nu; u++)
            for (int c = 0; c < cols; c++) {
                w[order[u] * cols + c] = wr[u * cols + c];
                m[order[u] * cols + c] = mr[u * cols + c];
            }
    }
}

static void check_sparse(const char *json, const nref *r, const ot_sparse *s)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        optim_var *x = ot_run_sparse(opt, s, dt, 0);
        const int n = s->rows * (s->cols ? s->cols : 1);
        double w[64], m[64] = {0}, v = 0, vhat[64] = {0};
        ref_sparse(s, r, dt, w, m, &v, vhat);
        const double rtol = dt == OPTIM_F64 ? 0 : 1e-6, atol = dt == OPTIM_F64 ? 0 : 1e-6;
        assert_var_close(x, w, n, rtol, atol);
        assert_var_close(optim_get_slot(opt, x, "m"), m, n, rtol, atol);
        assert_var_close(optim_get_slot(opt, x, "v"), &v, 1, rtol, 0);
        if (r->amsgrad) assert_var_close(optim_get_slot(opt, x, "vhat"), vhat, n, rtol, 0);
        optim_test_free(opt, x);
    }
}

static double t_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
static int64_t t_index(int k, int j)
{
    static const int64_t idx[5][4] = {
        {1, 4, 1, 1}, {0, 4, 2, 4}, {2, 2, 3, 1}, {0, 0, 4, 3}, {4, 4, 4, 1}};
    return idx[k][j];
}
static double t_val(int k, int j, int c)
{
    return cos(1.1 * k + 0.7 * j + 0.3 * c) * exp(-0.3 * k);
}

/* Row 5 never indexed: it keeps its w and m, but vhat moves (amsgrad). */
OPTIM_TEST(test_sparse_rows)
{
    const ot_sparse table = {6, 3, 5, 4, t_index, t_val, t_init};
    const ot_sparse vec = {6, 0, 5, 4, t_index, t_val, t_init};
    const nref r = {0.1, 0.8, 0.9, 1e-7, 0, 0, 0, 0};
    const char *json = NG("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9");
    check_sparse(json, &r, &table);
    check_sparse(json, &r, &vec);
    const nref a = {0.1, 0.8, 0.5, 1e-7, 0.05, 0, 1, 1};
    const char *ams = NG("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.5, "
                         "\"weight_decay\": 0.05, \"grad_averaging\": true, \"amsgrad\": true");
    check_sparse(ams, &a, &table);
    check_sparse(ams, &a, &vec);
    /* row 5 (never indexed) keeps its bits; its vhat is the running maximum */
    optim_optimizer *opt = optim_test_make(ams);
    optim_var *x = ot_run_sparse(opt, &table, OPTIM_F64, 0);
    for (int c = 0; c < 3; c++) {
        assert_eq(optim_var_get(x, 15 + c), t_init(5, c));
        assert_eq(optim_var_get(optim_get_slot(opt, x, "m"), 15 + c), 0.0);
        assert_gt(optim_var_get(optim_get_slot(opt, x, "vhat"), 15 + c), 0.0);
    }
    optim_test_free(opt, x);
}

/* ---- TF Addons' tests (tensorflow_addons/optimizers/tests/novograd_test.py) -------- */

/* run_dense_sample: var_0 [1, 2], var_1 [3, 4], gradients [0.1, 0.2] and
 * [0.3, 0.4], `iterations` steps, atol 2e-4 (TF Addons' tolerance). */
static void tfa_dense(const char *json, int iterations, const double expected[2][2])
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        int64_t n = 2;
        optim_var *v0 = optim_test_var("var_0", dt, 1, &n, (double[]){1, 2});
        optim_var *v1 = optim_test_var("var_1", dt, 1, &n, (double[]){3, 4});
        for (int k = 0; k < iterations; k++) {
            double b0[2], b1[2];
            optim_grad_var p[2] = {{ot_grad_like(v0, (double[]){0.1, 0.2}, b0), v0},
                                   {ot_grad_like(v1, (double[]){0.3, 0.4}, b1), v1}};
            ot_step(opt, p, 2);
        }
        assert_var_close(v0, expected[0], 2, 0, 2e-4);
        assert_var_close(v1, expected[1], 2, 0, 2e-4);
        optim_test_free(opt, v0, v1);
    }
}

OPTIM_TEST(test_tfa_dense_samples)
{
    tfa_dense(NG("\"lr\": 0.1, \"epsilon\": 1e-8"), 1,
              (const double[2][2]){{0.9552786425, 1.9105572849}, {2.9400000012, 3.9200000016}});
    tfa_dense(NG("\"lr\": 0.1, \"weight_decay\": 0.1, \"epsilon\": 1e-8"), 1,
              (const double[2][2]){{0.945278642, 1.8905572849}, {2.9100000012, 3.8800000016}});
    tfa_dense(NG("\"lr\": 0.1, \"grad_averaging\": true, \"epsilon\": 1e-8"), 2,
              (const double[2][2]){{0.9105572849, 1.8211145698}, {2.8800000024, 3.8400000032}});
}

/* run_sparse_sample: IndexedSlices [0.1] at row 0 of var_0 and [0.4] at
 * row 1 of var_1, two steps; numpy's assert_allclose default rtol 1e-7. */
static void tfa_sparse(const char *json, const double expected[2][2])
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        int64_t n = 2;
        optim_var *v0 = optim_test_var("var_0", dt, 1, &n, (double[]){1, 2});
        optim_var *v1 = optim_test_var("var_1", dt, 1, &n, (double[]){3, 4});
        const int64_t i0 = 0, i1 = 1, one = 1;
        const double d0 = 0.1, d1 = 0.4;
        const float f0 = 0.1f, f1 = 0.4f;
        const int f32 = dt == OPTIM_F32;
        for (int k = 0; k < 2; k++) {
            optim_grad_var p[2] = {
                {optim_grad_sparse(&i0, 1,
                                   optim_tensor_make(dt, f32 ? (void *)&f0 : (void *)&d0, 1, &one)),
                 v0},
                {optim_grad_sparse(&i1, 1,
                                   optim_tensor_make(dt, f32 ? (void *)&f1 : (void *)&d1, 1, &one)),
                 v1},
            };
            ot_step(opt, p, 2);
        }
        assert_var_close(v0, expected[0], 2, 1e-7, 0);
        assert_var_close(v1, expected[1], 2, 1e-7, 0);
        optim_test_free(opt, v0, v1);
    }
}

OPTIM_TEST(test_tfa_sparse_samples)
{
    tfa_sparse(NG("\"lr\": 0.1, \"epsilon\": 1e-8"),
               (const double[2][2]){{0.71, 2.0}, {3.0, 3.71}});
    tfa_sparse(NG("\"lr\": 0.1, \"weight_decay\": 0.1, \"epsilon\": 1e-8"),
               (const double[2][2]){{0.6821, 2.0}, {3.0, 3.5954}});
    tfa_sparse(NG("\"lr\": 0.1, \"grad_averaging\": true, \"epsilon\": 1e-8"),
               (const double[2][2]){{0.8, 2.0}, {3.0, 3.8}});
}

/* ---- config ----------------------------------------------------------------------------- */

#define TFA_CONFIG                                                                         \
    "\"config\":{\"name\":\"NovoGrad\",\"learning_rate\":0.001,\"beta_1\":0.9,\"beta_2\":" \
    "0.999,\"epsilon\":1e-07,\"weight_decay\":0.0,\"grad_averaging\":false}"

/* As tf.keras writes TF Addons' NovoGrad(): both envelopes, key for key. */
OPTIM_TEST(test_config_envelopes)
{
    const char *old = "{\"class_name\":\"Addons>NovoGrad\"," TFA_CONFIG "}";
    const char *env = "{\"module\":\"tensorflow_addons.optimizers.novograd\",\"class_name\":"
                      "\"NovoGrad\"," TFA_CONFIG ",\"registered_name\":\"Addons>NovoGrad\"}";
    ot_expect_serialized(old, old);
    ot_expect_serialized(env, env);
    ot_expect_serialized("\"novograd\"", old);
    ot_expect_serialized(NG(""), old);
    /* clip options after name; decay and amsgrad written when set */
    ot_expect_serialized(NG("\"clipnorm\": 1.0, \"decay\": 0.5, \"amsgrad\": true, \"lr\": 0.1"),
                         "{\"class_name\":\"Addons>NovoGrad\",\"config\":{\"name\":\"NovoGrad\","
                         "\"clipnorm\":1.0,\"learning_rate\":0.1,\"decay\":0.5,\"beta_1\":0.9,"
                         "\"beta_2\":0.999,\"epsilon\":1e-07,\"weight_decay\":0.0,"
                         "\"grad_averaging\":false,\"amsgrad\":true}}");
    ot_expect_serialized(NG("\"decay\": 0.0, \"amsgrad\": false, \"epsilon\": null"), old);
    /* TF Addons' test_get_config / test_serialization */
    cJSON *c = ot_config_of(NG("\"lr\": 1e-4, \"weight_decay\": 0.0, \"grad_averaging\": false"),
                            "NovoGrad", NULL, 0);
    ot_expect_numbers(c, "learning_rate", 1e-4, "weight_decay", 0.0, NULL);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "grad_averaging")));
    cJSON_Delete(c);
}

/* Slots: every variable's m, then v (shape []), then vhat. */
OPTIM_TEST(test_slots)
{
    for (int ams = 0; ams < 2; ams++) {
        optim_optimizer *opt = optim_test_make(ams ? NG("\"amsgrad\": true") : NG(""));
        int64_t n = 3, sh[2] = {2, 2};
        optim_var *vs[2] = {optim_test_var("a", OPTIM_F32, 1, &n, (double[]){1, 2, 3}),
                            optim_test_var("b", OPTIM_F32, 2, sh, (double[]){1, 2, 3, 4})};
        assert_ok(optim_build(opt, vs, 2), opt);
        if (ams) {
            ot_expect_slot_names(opt, "m", "v", "vhat", NULL);
            ot_expect_weight_names(opt, 1, "a/m", "b/m", "a/v", "b/v", "a/vhat", "b/vhat", NULL);
        } else {
            ot_expect_slot_names(opt, "m", "v", NULL);
            ot_expect_weight_names(opt, 1, "a/m", "b/m", "a/v", "b/v", NULL);
        }
        optim_var *v = optim_get_slot(opt, vs[1], "v");
        assert_eq(optim_var_rank(v), 0);
        assert_eq(optim_var_numel(v), 1);
        assert_eq(optim_var_numel(optim_get_slot(opt, vs[1], "m")), 4);
        optim_test_free(opt, vs[0], vs[1]);
    }
}

OPTIM_TEST(test_bad_config)
{
    ot_expect_refused(NG("\"weight_decay\": -0.1"), OPTIM_ERANGE, "weight_decay", "[0, inf)");
    ot_expect_refused(NG("\"beta_1\": 1.5"), OPTIM_ERANGE, "beta_1", "[0, 1]");
    ot_expect_refused(NG("\"beta_2\": -0.5"), OPTIM_ERANGE, "beta_2", "[0, 1]");
    ot_expect_refused(NG("\"epsilon\": -1e-7"), OPTIM_ERANGE, "epsilon", "[0, inf)");
    ot_expect_refused(NG("\"amsgrad\": 1"), OPTIM_ETYPE, "amsgrad", "true or false");
    ot_expect_refused(NG("\"grad_averaging\": \"yes\""), OPTIM_ETYPE, "grad_averaging", NULL);
    ot_expect_refused(NG("\"momentum\": 0.9"), OPTIM_EKEY, "momentum", "beta_1");
    ot_expect_refused(NG("\"use_ema\": true"), OPTIM_EKEY, "use_ema", NULL);
    /* TF Addons' classes are legacy (OptimizerV2) only. */
    ot_expect_refused(NG("\"is_legacy_optimizer\": false"), OPTIM_ENOTSUP, "NovoGrad",
                      "legacy generation");
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_status(optim_from_json_as(&opt, NG(""), OPTIM_KERAS3, &err), OPTIM_ENOTSUP, &err);
    assert_null(opt);
    /* set_hyper: a refused value leaves the old one */
    opt = optim_test_make(NG(""));
    assert_status(optim_set_hyper(opt, "weight_decay", -1), OPTIM_ERANGE, opt);
    double v;
    assert_ok(optim_get_hyper(opt, "weight_decay", &v), opt);
    assert_eq(v, 0.0);
    optim_destroy(opt);
}

int main(void) { return optim_test_run(); }
