/* LAMB against an independent double-precision reference written from You et
 * al. 2019 and the two Keras generations:
 *
 *   m = beta_1 * m + (1 - beta_1) * g;  v = beta_2 * v + (1 - beta_2) * g^2
 *   u = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)
 *   legacy (TF Addons LAMB): u += weight_decay * w unless excluded by name
 *   r = ||w|| / ||u|| (1 if either is 0, or if excluded from layer adaptation)
 *   w = w - r * lr * u
 *   Keras 3: weight_decay is decoupled, w -= w * wd * lr before the step.
 *
 * Trajectories of several variables at once (each its own norms) in f32 and
 * f64, both generations, zero norms, TFA name exclusions, dynamic
 * hyperparameters, legacy decay, sparse gradients (the dense equivalent in
 * both generations, duplicates summed), the Keras and TF Addons test values,
 * config keys, defaults, round trips, bad values, thread-count independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 25
#define K3(body) "{\"class_name\": \"Lamb\", \"config\": {" body "}}"
#define LEG(body) \
    "{\"class_name\": \"Lamb\", \"config\": {\"is_legacy_optimizer\": true, " body "}}"
#define MAXN 1040

/* ---- the reference ---------------------------------------------------------------- */

typedef struct lref {
    int legacy;
    double lr, beta_1, beta_2, epsilon;
    double wd; /* legacy: TFA weight_decay, inside the update */
    double k3wd; /* Keras 3: decoupled weight_decay */
    double decay; /* legacy lr decay */
} lref;

/* lref on one variable, with the legacy name exclusions (1 = not excluded). */
typedef struct lvar {
    lref r;
    int use_wd, adapt;
} lvar;

/* One step of the published rule on one variable (t is 0-based), the
 * drivers' form: hp an lvar, state m, v. */
static void ref_step(const void *x_, int t, double *w, double *const *st, const double *g, int n)
{
    const lvar *x = x_;
    const lref *r = &x->r;
    double lr = r->lr / (1.0 + r->decay * t), *m = st[0], *v = st[1];
    double eps = r->legacy && r->epsilon == 0 ? 1e-7 : r->epsilon; /* TFA: epsilon or 1e-7 */
    for (int i = 0; i < n; i++) w[i] -= w[i] * r->k3wd * r->lr;
    double u[MAXN], sw = 0, su = 0;
    assert_in_range(n, 0, MAXN);
    for (int i = 0; i < n; i++) {
        m[i] = r->beta_1 * m[i] + (1 - r->beta_1) * g[i];
        v[i] = r->beta_2 * v[i] + (1 - r->beta_2) * g[i] * g[i];
        double mh = m[i] / (1 - pow(r->beta_1, t + 1)), vh = v[i] / (1 - pow(r->beta_2, t + 1));
        u[i] = mh / (sqrt(vh) + eps);
        if (r->legacy && x->use_wd) u[i] += r->wd * w[i];
        sw += w[i] * w[i];
        su += u[i] * u[i];
    }
    double ratio = x->adapt && sw > 0 && su > 0 ? sqrt(sw) / sqrt(su) : 1.0;
    for (int i = 0; i < n; i++) w[i] -= ratio * lr * u[i];
}

/* The case of r on one variable without exclusions (x: its storage). */
static ot_case make_case(const char *json, const lref *r, lvar *x)
{
    *x = (lvar){*r, 1, 1};
    return (ot_case){json, ref_step, x, 2, {"m", "v"}, .round32 = 1};
}

/* ---- helpers ---------------------------------------------------------------------- */

static void check_var(optim_var *var, const double *want, int n, optim_dtype dt)
{
    assert_var_close(var, want, n, dt == OPTIM_F32 ? 2e-5 : 1e-12, dt == OPTIM_F32 ? 2e-6 : 1e-13);
}

/* ---- dense trajectories ------------------------------------------------------------- */

typedef struct vspec {
    const char *name;
    int32_t rank;
    int64_t shape[2];
    int use_wd, adapt; /* what the reference expects of the legacy exclusions */
} vspec;

static int numel_of(const vspec *s)
{
    int n = 1;
    for (int d = 0; d < s->rank; d++) n *= (int)s->shape[d];
    return n;
}

static double init_at(int var, int i) { return 0.5 - 0.3 * i + 0.7 * var; }
static double grad_at(int k, int var, int i)
{
    return sin(0.7 * k + 1.3 * i + 0.4 * var) * (1.0 + 0.1 * i) - 0.05 * k;
}

/* Runs `steps` dense steps on every variable of vs at once, in f32 and
 * f64, and compares w, m and v with the reference. */
static void check_case(const char *json, const lref *r, const vspec *vs, int nv, int steps)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        assert_eq(optim_generation_of(opt), r->legacy ? OPTIM_LEGACY : OPTIM_KERAS3);
        optim_var *vars[4];
        lvar x[4];
        double w[4][MAXN], st[4][2 * MAXN] = {{0}}, g[4][MAXN], buf[4][MAXN];
        for (int j = 0; j < nv; j++) {
            x[j] = (lvar){*r, vs[j].use_wd, vs[j].adapt};
            for (int i = 0; i < numel_of(&vs[j]); i++) w[j][i] = init_at(j, i);
            vars[j] = optim_test_var(vs[j].name, dt, vs[j].rank, vs[j].shape, w[j]);
            /* The reference starts from the variable's own (rounded) values. */
            for (int i = 0; i < numel_of(&vs[j]); i++) w[j][i] = optim_var_get(vars[j], i);
        }
        for (int k = 0; k < steps; k++) {
            optim_grad_var p[4];
            for (int j = 0; j < nv; j++) {
                int n = numel_of(&vs[j]);
                for (int i = 0; i < n; i++)
                    g[j][i] = dt == OPTIM_F32 ? (float)grad_at(k, j, i) : grad_at(k, j, i);
                p[j] = (optim_grad_var){ot_grad_like(vars[j], g[j], buf[j]), vars[j]};
                ref_step(&x[j], k, w[j], (double *[]){st[j], st[j] + n}, g[j], n);
            }
            ot_step(opt, p, (size_t)nv);
        }
        assert_eq(optim_iterations(opt), steps);
        ot_case c = {.json = json, .nstate = 2, .slots = {"m", "v"}};
        for (int j = 0; j < nv; j++)
            ot_check_state(opt, vars[j], &c, w[j], st[j], numel_of(&vs[j]));
        optim_destroy(opt);
        for (int j = 0; j < nv; j++) optim_var_destroy(vars[j]);
    }
}

static const vspec TWO_VARS[2] = {
    {"dense/kernel", 2, {3, 4}, 1, 1},
    {"dense/bias", 1, {7, 0}, 1, 1},
};

OPTIM_TEST(test_keras3_defaults)
{
    lref r = {0, 0.001, 0.9, 0.999, 1e-7, 0, 0, 0};
    check_case("\"lamb\"", &r, TWO_VARS, 2, STEPS);
    check_case(K3(""), &r, TWO_VARS, 2, STEPS);
}

OPTIM_TEST(test_keras3_options)
{
    lref r = {0, 0.02, 0.8, 0.95, 1e-4, 0, 0, 0};
    check_case("{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.02, \"beta_1\": 0.8, "
               "\"beta_2\": 0.95, \"epsilon\": 1e-4}}",
               &r, TWO_VARS, 2, STEPS);
    /* Keras 3 weight decay is decoupled (before the step, lr without decay). */
    lref wd = {0, 0.02, 0.9, 0.999, 1e-7, 0, 0.1, 0};
    check_case("{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.02, "
               "\"weight_decay\": 0.1}}",
               &wd, TWO_VARS, 2, STEPS);
    /* The legacy-only keys do nothing here: a Keras 3 config has no in-update
     * weight decay and no name exclusions. */
}

OPTIM_TEST(test_legacy_defaults)
{
    lref r = {1, 0.001, 0.9, 0.999, 1e-6, 0, 0, 0};
    check_case("{\"class_name\": \"LAMB\", \"config\": {\"is_legacy_optimizer\": true}}", &r,
               TWO_VARS, 2, STEPS);
}

OPTIM_TEST(test_legacy_weight_decay_and_lr_decay)
{
    lref r = {1, 0.01, 0.85, 0.99, 1e-5, 0.05, 0, 0.3};
    check_case("{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, \"beta_1\": 0.85, "
               "\"beta_2\": 0.99, \"epsilon\": 1e-5, \"weight_decay\": 0.05, \"decay\": 0.3, "
               "\"is_legacy_optimizer\": true}}",
               &r, TWO_VARS, 2, STEPS);
    /* TFA's deprecated alias weight_decay_rate. */
    check_case("{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, \"beta_1\": 0.85, "
               "\"beta_2\": 0.99, \"epsilon\": 1e-5, \"weight_decay_rate\": 0.05, \"decay\": 0.3, "
               "\"is_legacy_optimizer\": true}}",
               &r, TWO_VARS, 2, STEPS);
    /* epsilon 0 acts as 1e-7 (`epsilon or backend.epsilon()`). */
    lref z = {1, 0.01, 0.9, 0.999, 0.0, 0, 0, 0};
    check_case("{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, \"epsilon\": 0, "
               "\"is_legacy_optimizer\": true}}",
               &z, TWO_VARS, 2, STEPS);
}

/* TFA's exclude_from_weight_decay / exclude_from_layer_adaptation: regular
 * expressions searched in the TF variable name ("NAME:0"). */
OPTIM_TEST(test_legacy_exclusions)
{
    lref r = {1, 0.01, 0.9, 0.999, 1e-6, 0.1, 0, 0};
    /* Only a weight-decay list: layer adaptation falls back to it. */
    const vspec a[4] = {
        {"dense/kernel", 2, {3, 4}, 1, 1},
        {"dense/bias", 1, {7, 0}, 0, 0},
        {"LayerNorm/gamma", 1, {5, 0}, 0, 0},
        {"emb", 2, {2, 3}, 1, 1},
    };
    check_case(
        "{\"class_name\": \"LAMB\", \"config\": {\"learning_rate\": 0.01, \"weight_decay\": 0.1, "
        "\"exclude_from_weight_decay\": [\"bias\", \"^Layer[Nn]orm\"], "
        "\"is_legacy_optimizer\": true}}",
        &r, a, 4, STEPS);
    /* Separate lists; "$" anchors see the ":0" suffix. */
    const vspec b[4] = {
        {"dense/kernel", 2, {3, 4}, 1, 0},
        {"dense/bias", 1, {7, 0}, 0, 1},
        {"LayerNorm/gamma", 1, {5, 0}, 1, 1},
        {"emb:1", 2, {2, 3}, 0, 1},
    };
    check_case(
        "{\"class_name\": \"LAMB\", \"config\": {\"learning_rate\": 0.01, \"weight_decay\": 0.1, "
        "\"exclude_from_weight_decay\": [\"bias:0$\", \"gamma$\", \"emb:1\"], "
        "\"exclude_from_layer_adaptation\": [\"kernel\"], \"is_legacy_optimizer\": true}}",
        &r, b, 4, STEPS);
    /* An empty exclude_from_layer_adaptation also falls back. */
    check_case(
        "{\"class_name\": \"LAMB\", \"config\": {\"learning_rate\": 0.01, \"weight_decay\": 0.1, "
        "\"exclude_from_layer_adaptation\": [], "
        "\"exclude_from_weight_decay\": [\"bias\", \"^Layer[Nn]orm\"], "
        "\"is_legacy_optimizer\": true}}",
        &r, a, 4, STEPS);
}

/* Zero norms: ||w|| = 0 or ||u|| = 0 gives r = 1. */
OPTIM_TEST(test_zero_norms)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt =
                optim_test_make(ot_gen(K3("\"learning_rate\": 0.5, \"epsilon\": 0.5"), legacy));
            double zeros[3] = {0, 0, 0}, ones[3] = {1, 2, 3};
            int64_t n = 3;
            optim_var *a = optim_test_var("a", dt, 1, &n, zeros); /* ||w|| = 0 */
            optim_var *b = optim_test_var("b", dt, 1, &n, ones); /* ||u|| = 0 (g = 0) */
            double ga[3] = {1, -1, 0}, gb[3] = {0, 0, 0};
            double buf[2][3];
            optim_grad_var p[2] = {{ot_grad_like(a, ga, buf[0]), a},
                                   {ot_grad_like(b, gb, buf[1]), b}};
            ot_step(opt, p, 2);
            /* a: m_hat = g, v_hat = g^2, u = g / (|g| + 0.5), r = 1. */
            check_var(a, (const double[3]){-0.5 / 1.5, 0.5 / 1.5, 0}, 3, dt);
            for (int i = 0; i < 3; i++) assert_eq(optim_var_get(b, i), ones[i]);
            optim_test_free(opt, a, b);
        }
}

/* f32 moments bit for bit with the op order and constants of each
 * generation (what TF computes in float32): Keras 3 m += (g - m) * c1 with
 * c1 = float32(1 - beta_1) taken from the Python number; TFA m = m * b1 +
 * g * (1 - b1) with 1 - b1 computed in float32. */
OPTIM_TEST(test_f32_moments_bitwise)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? K3(OT_LEGACY) : "\"Lamb\"");
        int64_t n = 5;
        optim_var *w =
            optim_test_var("w", OPTIM_F32, 1, &n, (double[5]){0.3, -1.2, 2.5, 0.01, -0.7});
        float m[5] = {0}, v[5] = {0};
        const float b1 = 0.9f, b2 = 0.999f;
        const float c1 = legacy ? 1.0f - b1 : (float)(1.0 - 0.9),
                    c2 = legacy ? 1.0f - b2 : (float)(1.0 - 0.999);
        /* The two generations' constants really differ at these betas. */
        assert_ne((1.0f - b1), (float)(1.0 - 0.9));
        assert_ne((1.0f - b2), (float)(1.0 - 0.999));
        for (int k = 0; k < 3; k++) {
            double g[5];
            float gf[5];
            for (int i = 0; i < 5; i++) g[i] = grad_at(k, 1, i), gf[i] = (float)g[i];
            ot_step_dense(opt, w, g);
            for (int i = 0; i < 5; i++) {
                if (legacy) {
                    m[i] = m[i] * b1 + gf[i] * c1;
                    v[i] = v[i] * b2 + (gf[i] * gf[i]) * c2;
                } else {
                    m[i] = m[i] + (gf[i] - m[i]) * c1;
                    v[i] = v[i] + (gf[i] * gf[i] - v[i]) * c2;
                }
            }
            assert_var_floats(optim_get_slot(opt, w, "m"), m, 5);
            assert_var_floats(optim_get_slot(opt, w, "v"), v, 5);
        }
        optim_test_free(opt, w);
    }
}

/* ---- the Keras 3 tests (keras/src/optimizers/lamb_test.py) -------------------------- */

OPTIM_TEST(test_keras_single_step)
{
    ot_check_keras_single_step(K3("\"learning_rate\": 0.5"),
                               (double[]){-0.3693, 0.6306, 1.6306, 2.6306});
}

OPTIM_TEST(test_keras_golden)
{
    ot_check_keras_golden("\"Lamb\"", OPTIM_F32,
                          (const double[5]){0.999, 0.9982, 0.9974, 0.9965, 0.9955}, 1);
}

OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(K3("\"learning_rate\": 1.0, \"weight_decay\": 0.004"), OPTIM_F32);
}

/* ---- TF Addons tests (tensorflow_addons/optimizers/tests/lamb_test.py) --------------- */

/* test_basic_with_learning_rate_decay: two variables, lr 0.001, epsilon
 * 1e-7, decay 0.5, weight_decay 0.01, three steps. */
OPTIM_TEST(test_tfa_basic_with_decay)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(
            "{\"class_name\": \"LAMB\", \"config\": {\"learning_rate\": 0.001, "
            "\"beta_1\": 0.9, \"beta_2\": 0.999, \"epsilon\": 1e-7, "
            "\"weight_decay\": 0.01, \"decay\": 0.5, \"is_legacy_optimizer\": true}}");
        lvar x = {{1, 0.001, 0.9, 0.999, 1e-7, 0.01, 0, 0.5}, 1, 1};
        double w0[2] = {1, 2}, w1[2] = {3, 4}, st[2][4] = {{0}};
        int64_t n = 2;
        optim_var *v0 = optim_test_var("var0_0", dt, 1, &n, w0),
                  *v1 = optim_test_var("var1_0", dt, 1, &n, w1);
        double g0[2] = {0.1, 0.1}, g1[2] = {0.01, 0.01};
        for (int t = 0; t < 3; t++) {
            double buf[2][2];
            optim_grad_var p[2] = {{ot_grad_like(v0, g0, buf[0]), v0},
                                   {ot_grad_like(v1, g1, buf[1]), v1}};
            ot_step(opt, p, 2);
            double q0[2] = {(float)g0[0], (float)g0[1]}, q1[2] = {(float)g1[0], (float)g1[1]};
            ref_step(&x, t, w0, (double *[]){st[0], st[0] + 2}, dt == OPTIM_F64 ? g0 : q0, 2);
            ref_step(&x, t, w1, (double *[]){st[1], st[1] + 2}, dt == OPTIM_F64 ? g1 : q1, 2);
            check_var(v0, w0, 2, dt);
            check_var(v1, w1, 2, dt);
        }
        optim_test_free(opt, v0, v1);
    }
}

/* test_sparse: var0 [1, 1, 2] with IndexedSlices [0.1, 0.1] at [0, 2]; the
 * numpy reference uses the dense gradient [0.1, 0, 0.1]. */
OPTIM_TEST(test_tfa_sparse)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(
            "{\"class_name\": \"LAMB\", \"config\": {\"is_legacy_optimizer\": true}}");
        lvar x = {{1, 0.001, 0.9, 0.999, 1e-6, 0, 0, 0}, 1, 1};
        double w0[3] = {1, 1, 2}, w1[3] = {3, 3, 4}, st[2][6] = {{0}};
        int64_t n = 3, vs[1] = {2}, idx[2] = {0, 2};
        optim_var *v0 = optim_test_var("var0", dt, 1, &n, w0),
                  *v1 = optim_test_var("var1", dt, 1, &n, w1);
        double s0[2] = {0.1, 0.1}, s1[2] = {0.01, 0.01};
        float f0[2] = {0.1f, 0.1f}, f1[2] = {0.01f, 0.01f};
        double g0[3] = {dt == OPTIM_F64 ? 0.1 : (float)0.1, 0, dt == OPTIM_F64 ? 0.1 : (float)0.1};
        double g1[3] = {dt == OPTIM_F64 ? 0.01 : (float)0.01, 0,
                        dt == OPTIM_F64 ? 0.01 : (float)0.01};
        for (int t = 0; t < 3; t++) {
            optim_grad_var p[2] = {
                {optim_grad_sparse(
                     idx, 2,
                     optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)s0 : (void *)f0, 1, vs)),
                 v0},
                {optim_grad_sparse(
                     idx, 2,
                     optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)s1 : (void *)f1, 1, vs)),
                 v1},
            };
            ot_step(opt, p, 2);
            ref_step(&x, t, w0, (double *[]){st[0], st[0] + 3}, g0, 3);
            ref_step(&x, t, w1, (double *[]){st[1], st[1] + 3}, g1, 3);
            check_var(v0, w0, 3, dt);
            check_var(v1, w1, 3, dt);
            /* Element 1 never had a gradient: m = v = 0, u = 0, w unchanged. */
            assert_eq(optim_var_get(v0, 1), 1.0);
        }
        optim_test_free(opt, v0, v1);
    }
}

/* ---- dynamic hyperparameters ----------------------------------------------------------- */

static double lr_sched(void *user, int64_t step)
{
    (void)user;
    return 0.05 / (1.0 + (double)step);
}

/* The reference's lr is this step's value (no decay). */
static void set_hypers(optim_optimizer *opt, void *x, int k)
{
    lref *r = &((lvar *)x)->r;
    r->beta_1 = 0.5 + 0.05 * k;
    r->wd = 0.01 * k;
    if (k == 5) assert_ok(optim_set_hyper(opt, "beta_2", 0.9), opt);
    r->beta_2 = k >= 5 ? 0.9 : 0.999;
    r->lr = 0.05 / (1.0 + k);
}

static double init_0(int i) { return init_at(0, i); }
static double grad_0(int k, int i) { return grad_at(k, 0, i); }

OPTIM_TEST(test_dynamic_hypers)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt =
            optim_test_make(legacy ? K3("\"weight_decay\": 0.1, " OT_LEGACY) : "\"Lamb\"");
        lvar x;
        ot_case c =
            make_case(NULL, &(lref){legacy, 0.05, 0.9, 0.999, legacy ? 1e-6 : 1e-7, 0.1, 0, 0}, &x);
        assert_ok(optim_set_hyper_fn(opt, "beta_1", ot_value, &x.r.beta_1), opt);
        assert_ok(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), opt);
        if (legacy) assert_ok(optim_set_hyper_fn(opt, "weight_decay", ot_value, &x.r.wd), opt);
        optim_var *v = ot_check_dynamic(opt, &(ot_dense){7, 8, init_0, grad_0, 0, NULL}, 8, &c,
                                        OPTIM_F64, set_hypers);
        /* A callable giving beta_1 out of range fails the step, changes nothing. */
        x.r.beta_1 = 1.5;
        ot_expect_step_refused(opt, v, 1, OPTIM_ERANGE, "beta_1");
        optim_test_free(opt, v);
    }
}

/* ---- sparse --------------------------------------------------------------------------------- */

#define ROWS 6
#define COLS 3
#define SP_STEPS 4
#define SP OT_SPARSE_IDLE5

/* Both generations: sparse == the dense equivalent bit for bit (norms
 * included); and the reference with every row updated. */
OPTIM_TEST(test_sparse_dense_equivalent)
{
    const char *cfgs[4] = {
        K3("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9"),
        K3("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9, \"weight_decay\": 0.2"),
        K3("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9, " OT_LEGACY),
        K3("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9, \"weight_decay\": 0.2, " OT_LEGACY),
    };
    for (int c = 0; c < 4; c++) OPTIM_FOR_DTYPES(dt)
        {
            int legacy = c >= 2;
            double wd = (c & 1) ? 0.2 : 0.0;
            optim_optimizer *o1 = optim_test_make(cfgs[c]), *o2 = optim_test_make(cfgs[c]);
            double e0[5] = {1, 2, 3, 4, 5};
            int64_t n5 = 5;
            optim_var *x1 = optim_test_var("x", dt, 1, &n5, e0),
                      *x2 = optim_test_var("x", dt, 1, &n5, e0);
            const double ge[5] = {0.3, -0.2, 0.1, 0.0,
                                  0.5}; /* a second variable in the same steps, dense */
            optim_var *sv = ot_run_sparse_with(o1, &SP, dt, 0, x1, ge, 0, NULL);
            optim_var *dv = ot_run_sparse_with(o2, &SP, dt, 1, x2, ge, 0, NULL);
            assert_vars_bitwise(sv, dv);
            assert_vars_bitwise(optim_get_slot(o1, sv, "m"), optim_get_slot(o2, dv, "m"));
            assert_vars_bitwise(optim_get_slot(o1, sv, "v"), optim_get_slot(o2, dv, "v"));
            assert_vars_bitwise(x1, x2);
            optim_destroy(o1);
            optim_test_free(o2, sv, dv, x1, x2);
            /* Reference: duplicates summed, every row with g = 0 where there
             * is no index (in the f32 run too, from the doubles). */
            lvar x;
            ot_case oc = make_case(cfgs[c],
                                   &(lref){legacy, 0.1, 0.8, 0.9, legacy ? 1e-6 : 1e-7,
                                           legacy ? wd : 0, legacy ? 0 : wd, 0},
                                   &x);
            oc.round32 = 0;
            if (dt == OPTIM_F64) ot_check_sparse(&SP, oc, 0);
        }
}

/* Row by row (not lazy): a row indexed earlier but not now has its m and v
 * decayed and w moved; a row never indexed keeps m = v = 0 and (without the
 * legacy in-update weight decay) w. Legacy sets m = m * beta_1 exactly. */
OPTIM_TEST(test_sparse_rows)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            int decay = legacy ? OT_SCALED : OT_CLOSE;
            const ot_rule rules[] = {{OT_FIRST, OT_MOVED, NULL, 0}, {OT_FIRST, OT_MOVED, "m", 0},
                                     {OT_LEFT, OT_MOVED, NULL, 0},  {OT_LEFT, decay, "m", 0.7},
                                     {OT_LEFT, decay, "v", 0.999},  {OT_NEVER, OT_KEPT, NULL, 0},
                                     {OT_NEVER, OT_KEPT, "m", 0},   {OT_NEVER, OT_KEPT, "v", 0}};
            ot_check_rows_left_out(ot_gen(K3("\"learning_rate\": 0.1, \"beta_1\": 0.7"), legacy),
                                   dt, 4, 1, NULL, 3, (double[]){1}, rules, 8);
        }
}

/* ---- config ------------------------------------------------------------------------------- */

static const char *const K3_KEYS[] = {OT_KERAS3_BASE_KEYS, "beta_1", "beta_2", "epsilon"};
static const char *const LEGACY_KEYS[] = {
    "name",
    "learning_rate",
    "weight_decay",
    "decay",
    "beta_1",
    "beta_2",
    "epsilon",
    "exclude_from_weight_decay",
    "exclude_from_layer_adaptation",
};

static void assert_json(const cJSON *o, const char *key, const char *want)
{
    char *t = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(o, key));
    assert_non_null(t);
    if (strcmp(t, want)) print_error("config key '%s' is %s, expected %s\n", key, t, want);
    assert_string_equal(t, want);
    cJSON_free(t);
}

OPTIM_TEST(test_config_keras3)
{
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &optim_lamb_class, NULL, &err), &err);
    cJSON *c = ot_config(opt);
    ot_assert_keys(c, OT_KEYS(K3_KEYS));
    ot_expect_numbers(c, "learning_rate", 0.001, "beta_1", 0.9, "beta_2", 0.999, "epsilon", 1e-7,
                      NULL);
    assert_json(c, "weight_decay", "null");
    cJSON_Delete(c);
    char *ser = optim_serialize(opt);
    ot_check_round_trip(ser);
    optim_free(ser);
    optim_destroy(opt);
    /* Keras's test_config values. */
    const char *keras =
        "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.5, \"beta_1\": 0.5, "
        "\"beta_2\": 0.67, \"epsilon\": 1e-5, \"weight_decay\": 0.01}}";
    c = ot_config_of(keras, NULL, OT_KEYS(K3_KEYS));
    ot_expect_numbers(c, "beta_2", 0.67, "epsilon", 1e-5, "weight_decay", 0.01, NULL);
    cJSON_Delete(c);
    ot_check_round_trip(keras);
    opt = optim_test_make(keras);
    /* Slots after a step: m then v. */
    double z = 0;
    int64_t one = 1;
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, &one, &z);
    ot_step_dense(opt, w, &z);
    ot_expect_slot_names(opt, "m", "v", NULL);
    ot_expect_weight_names(opt, 1, "w/m", "w/v", NULL);
    optim_test_free(opt, w);
}

OPTIM_TEST(test_config_legacy)
{
    /* The config TF Addons writes for LAMB() (plus is_legacy_optimizer). */
    const char *tfa = "{\"class_name\": \"LAMB\", \"config\": {\"name\": \"LAMB\", "
                      "\"learning_rate\": 0.001, \"weight_decay\": 0.0, \"decay\": 0.0, "
                      "\"beta_1\": 0.9, \"beta_2\": 0.999, \"epsilon\": 1e-06, "
                      "\"exclude_from_weight_decay\": null, "
                      "\"exclude_from_layer_adaptation\": null, \"is_legacy_optimizer\": true}}";
    cJSON *c = ot_config_of(tfa, "LAMB", OT_KEYS(LEGACY_KEYS));
    ot_expect_numbers(c, "epsilon", 1e-6, "weight_decay", 0.0, "decay", 0.0, NULL);
    assert_json(c, "exclude_from_weight_decay", "null");
    assert_json(c, "exclude_from_layer_adaptation", "null");
    cJSON_Delete(c);
    ot_check_round_trip(tfa);

    /* Defaults from a bare legacy config. */
    optim_options o = optim_options_defaults();
    o.generation = OPTIM_LEGACY;
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &optim_lamb_class, &o, &err), &err);
    c = ot_config(opt);
    ot_assert_keys(c, OT_KEYS(LEGACY_KEYS));
    assert_eq(ot_num(c, "learning_rate"), 0.001);
    assert_eq(ot_num(c, "epsilon"), 1e-6);
    assert_eq(ot_num(c, "beta_1"), 0.9);
    assert_eq(ot_num(c, "beta_2"), 0.999);
    cJSON_Delete(c);
    optim_destroy(opt);

    /* Lists: the layer-adaptation list falls back to the weight-decay one
     * (as TFA stores it); explicit lists are kept. */
    const char *lists =
        "{\"class_name\": \"Lamb\", \"config\": {\"weight_decay_rate\": 0.01, "
        "\"exclude_from_weight_decay\": [\"var1\", \"b\\\\.c\"], \"is_legacy_optimizer\": true}}";
    c = ot_config_of(lists, NULL, OT_KEYS(LEGACY_KEYS));
    assert_eq(ot_num(c, "weight_decay"), 0.01);
    assert_json(c, "exclude_from_weight_decay", "[\"var1\",\"b\\\\.c\"]");
    assert_json(c, "exclude_from_layer_adaptation", "[\"var1\",\"b\\\\.c\"]");
    cJSON_Delete(c);
    ot_check_round_trip(lists);
    const char *x =
        "{\"class_name\": \"Lamb\", \"config\": {\"exclude_from_layer_adaptation\": [\"x\"], "
        "\"exclude_from_weight_decay\": [], \"clipnorm\": 1.0, \"is_legacy_optimizer\": true}}";
    c = ot_config_of(x, NULL, NULL, 0);
    assert_json(c, "exclude_from_weight_decay", "[]");
    assert_json(c, "exclude_from_layer_adaptation", "[\"x\"]");
    assert_eq(ot_num(c, "clipnorm"), 1.0);
    cJSON_Delete(c);
    ot_check_round_trip(x);
    opt = optim_test_make(x);
    /* weight_decay is a legacy hyperparameter (settable). */
    assert_ok(optim_set_hyper(opt, "weight_decay", 0.5), opt);
    c = ot_config(opt);
    assert_eq(ot_num(c, "weight_decay"), 0.5);
    cJSON_Delete(c);
    optim_destroy(opt);
}

OPTIM_TEST(test_bad_config)
{
    ot_expect_refused_gens(K3("\"beta_1\": 1.5"), OPTIM_ERANGE, "beta_1", "[0, 1]");
    ot_expect_refused_gens(K3("\"beta_1\": -0.1"), OPTIM_ERANGE, "beta_1", "[0, 1]");
    ot_expect_refused_gens(K3("\"beta_2\": 2"), OPTIM_ERANGE, "beta_2", "[0, 1]");
    ot_expect_refused_gens(K3("\"epsilon\": -1e-7"), OPTIM_ERANGE, "epsilon", "[0, inf)");
    ot_expect_refused_gens(K3("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
    ot_expect_refused_gens(K3("\"momentum\": 0.9"), OPTIM_EKEY, "momentum", "beta_1");
    ot_expect_refused(LEG("\"weight_decay\": -0.1"), OPTIM_ERANGE, "weight_decay", "[0, inf)");
    ot_expect_refused(LEG("\"weight_decay_rate\": -0.1"), OPTIM_ERANGE, "weight_decay", "[0, inf)");
    ot_expect_refused(LEG("\"weight_decay_rate\": \"x\""), OPTIM_ETYPE, "weight_decay_rate", NULL);
    ot_expect_refused(LEG("\"exclude_from_weight_decay\": \"bias\""), OPTIM_ETYPE,
                      "exclude_from_weight_decay", "list");
    ot_expect_refused(LEG("\"exclude_from_weight_decay\": [\"a\", 1]"), OPTIM_ETYPE,
                      "exclude_from_weight_decay", "element 1");
    ot_expect_refused(LEG("\"exclude_from_layer_adaptation\": [\"(\"]"), OPTIM_EINVAL,
                      "exclude_from_layer_adaptation", "regular expression");
    ot_expect_refused(LEG("\"use_ema\": false"), OPTIM_EKEY, "use_ema", NULL);
    /* The TFA keys do not exist in Keras 3. */
    ot_expect_refused(K3("\"exclude_from_weight_decay\": [\"bias\"]"), OPTIM_EKEY,
                      "exclude_from_weight_decay", NULL);
    ot_expect_refused(K3("\"exclude_from_layer_adaptation\": null"), OPTIM_EKEY,
                      "exclude_from_layer_adaptation", NULL);
    ot_expect_refused(K3("\"weight_decay_rate\": 0.1"), OPTIM_EKEY, "weight_decay_rate", NULL);
    ot_expect_refused(K3("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr", NULL);
    /* set_hyper: refused values leave the old one. */
    optim_optimizer *opt = optim_test_make("\"lamb\"");
    assert_status(optim_set_hyper(opt, "beta_2", 1.5), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), "beta_2");
    assert_status(optim_set_hyper(opt, "epsilon", -1), OPTIM_ERANGE, opt);
    double v;
    assert_ok(optim_get_hyper(opt, "beta_2", &v), opt);
    assert_eq(v, 0.999);
    assert_ok(optim_get_hyper(opt, "epsilon", &v), opt);
    assert_eq(v, 1e-7);
    /* epsilon is not a hyperparameter (a plain attribute in both). */
    assert_status(optim_set_hyper_fn(opt, "epsilon", ot_value, &v), OPTIM_ETYPE, opt);
    optim_destroy(opt);
}

/* A variable of many blocks and a ragged end, in both generations, against
 * the reference; and a sparse table whose rows straddle the partial sums,
 * bit for bit against its dense equivalent. */
static int64_t big_index(int k, int j) { return (int64_t[]){3 + k, 50, 99, 3 + k, 17 * k}[j]; }
static double big_val(int k, int j, int c) { return sin(0.3 * (j * 7 + c) + k); }
static double big_init(int r, int c) { return cos(0.1 * (r * 7 + c)); }

static double long_init(int i) { return sin(0.01 * i) + 0.1; }
static double long_grad(int k, int i) { return cos(0.37 * i + k) * (1 + 0.001 * i); }

OPTIM_TEST(test_large_variable)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        lvar x;
        ot_check_dense(
            &(ot_dense){1037, 5, long_init, long_grad, 0, NULL},
            make_case(
                legacy ? K3("\"learning_rate\": 0.01, \"weight_decay\": 0.02, " OT_LEGACY)
                       : K3("\"learning_rate\": 0.01"),
                &(lref){legacy, 0.01, 0.9, 0.999, legacy ? 1e-6 : 1e-7, legacy ? 0.02 : 0, 0, 0},
                &x));
    }
    /* Sparse [100, 7] (rows cross the partial sums) == dense, bitwise. */
    static const char *const slots[] = {"m", "v", NULL};
    const ot_sparse big = {100, 7, 3, 5, big_index, big_val, big_init};
    ot_check_sparse_equals_dense(&big, K3("\"weight_decay\": 0.01"), slots);
    ot_check_sparse_equals_dense(&big, K3("\"weight_decay\": 0.01, " OT_LEGACY), slots);
}

/* ---- threads -------------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"v", NULL};
    ot_check_threads_mixed(
        K3("\"learning_rate\": 0.01, \"weight_decay\": 0.1, \"global_clipnorm\": 10"), 2, 4, slots);
    ot_check_threads_mixed(
        LEG("\"learning_rate\": 0.01, \"weight_decay\": 0.1, \"global_clipnorm\": 10"), 2, 4,
        slots);
}

int main(void) { return optim_test_run(); }
