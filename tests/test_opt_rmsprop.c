/* RMSprop against independent double-precision references: plain, centered,
 * momentum and centered + momentum trajectories in f32 and f64, in both
 * generations (epsilon inside the square root in Keras 3 and in legacy's
 * momentum kernels, outside it in legacy's plain path), legacy decay and a
 * dynamic rho, sparse gradients with duplicate indices in both generations
 * (Keras 3: the dense equivalent; legacy: kernels on the indexed rows, or
 * slot decay on every row without momentum), the Keras golden values,
 * config keys, ranges and round trips, and thread-count independence. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 25
#define N 7

static double grad_at(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k; }
static double init_at(int i) { return 0.5 - 0.3 * i; }

/* One configuration, as the reference sees it. */
typedef struct cfg {
    double lr, rho, momentum, eps, decay;
    int centered, legacy;
} cfg;

/* The published rule for one element, in double precision.
 *   v = rho v + (1 - rho) g^2;  a = rho a + (1 - rho) g (centered);  d = v - a^2 or v
 *   legacy without momentum:  w -= lr g / (sqrt(d) + eps)
 *   otherwise:                inc = lr g / sqrt(d + eps); m = mu m + inc, w -= m (momentum) or w -= inc */
static void ref_elem(const cfg *c, double lr, double g, double *w, double *v, double *m, double *a)
{
    *v = c->rho * *v + (1 - c->rho) * g * g;
    double d = *v;
    if (c->centered) {
        *a = c->rho * *a + (1 - c->rho) * g;
        d = *v - *a * *a;
    }
    if (c->legacy && c->momentum == 0) {
        *w -= lr * g / (sqrt(d) + c->eps);
        return;
    }
    double inc = lr * g / sqrt(d + c->eps);
    if (c->momentum > 0) {
        *m = c->momentum * *m + inc;
        *w -= *m;
    } else {
        *w -= inc;
    }
}

static void cfg_json(const cfg *c, char *buf, size_t n)
{
    int used = snprintf(buf, n,
                        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": %.17g, "
                        "\"rho\": %.17g, \"momentum\": %.17g, \"epsilon\": %.17g, \"centered\": %s",
                        c->lr, c->rho, c->momentum, c->eps, c->centered ? "true" : "false");
    if (c->legacy)
        snprintf(buf + used, n - (size_t)used, ", \"decay\": %.17g, \"is_legacy_optimizer\": true}}",
                 c->decay);
    else
        snprintf(buf + used, n - (size_t)used, "}}");
}


static optim_optimizer *make_cfg(const cfg *c)
{
    char json[512];
    cfg_json(c, json, sizeof json);
    return optim_test_make(json);
}


static void step_dense(optim_optimizer *opt, optim_var *w, optim_dtype dt, const double *g, int n)
{
    float gf[64];
    double gd[64];
    for (int i = 0; i < n; i++) gf[i] = (float)g[i], gd[i] = g[i];
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)gf : (void *)gd,
                                                           optim_var_rank(w), optim_var_shape(w))),
                        w};
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    if (rc) print_error("%s\n", optim_errmsg(opt));
    assert_int_equal(rc, 0);
}

static double tol_r(optim_dtype dt) { return dt == OPTIM_F32 ? 2e-5 : 1e-12; }
static double tol_a(optim_dtype dt) { return dt == OPTIM_F32 ? 2e-6 : 1e-13; }

/* STEPS dense steps of grad_at in f32 and f64 against the reference:
 * variable and every slot; slots absent where Keras has none. */
static void check_trajectory(const cfg *c)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = make_cfg(c);
        double init[N], w[N], v[N] = {0}, m[N] = {0}, a[N] = {0};
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
        int64_t shape[1] = {N};
        optim_var *var = optim_test_var("w", dt, 1, shape, init);
        for (int k = 0; k < STEPS; k++) {
            double g[N];
            double lr = c->legacy ? c->lr / (1.0 + c->decay * k) : c->lr;
            for (int i = 0; i < N; i++) {
                g[i] = grad_at(k, i);
                ref_elem(c, lr, g[i], &w[i], &v[i], &m[i], &a[i]);
            }
            step_dense(opt, var, dt, g, N);
        }
        assert_int_equal(optim_iterations(opt), STEPS);
        optim_var *rms = optim_get_slot(opt, var, "rms"), *mom = optim_get_slot(opt, var, "momentum");
        optim_var *mg = optim_get_slot(opt, var, "mg");
        assert_non_null(rms);
        assert_true((mom != NULL) == (c->momentum > 0));
        assert_true((mg != NULL) == (c->centered != 0));
        for (int i = 0; i < N; i++) {
            assert_close(optim_var_get(var, i), w[i], tol_r(dt), tol_a(dt));
            assert_close(optim_var_get(rms, i), v[i], tol_r(dt), tol_a(dt));
            if (mom) assert_close(optim_var_get(mom, i), m[i], tol_r(dt), tol_a(dt));
            if (mg) assert_close(optim_var_get(mg, i), a[i], tol_r(dt), tol_a(dt));
        }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

/* Every option combination, both generations. epsilon = 0.01 makes its
 * placement (inside or outside the square root) visible in f32 too. */
static void test_trajectories(void **s)
{
    (void)s;
    const double eps[2] = {1e-7, 0.01};
    for (int legacy = 0; legacy < 2; legacy++)
        for (int centered = 0; centered < 2; centered++)
            for (int mom = 0; mom < 2; mom++)
                for (int e = 0; e < 2; e++) {
                    cfg c = {0.01, 0.9, mom ? 0.9 : 0.0, eps[e], 0, centered, legacy};
                    check_trajectory(&c);
                }
    /* Other rho and momentum values. */
    cfg c1 = {0.05, 0.7, 0.5, 1e-3, 0, 1, 0};
    check_trajectory(&c1);
    c1.legacy = 1;
    check_trajectory(&c1);
}

static void test_legacy_decay(void **s)
{
    (void)s;
    cfg a = {0.02, 0.9, 0.0, 1e-7, 0.3, 0, 1};
    check_trajectory(&a);
    cfg b = {0.02, 0.8, 0.6, 1e-5, 0.1, 1, 1};
    check_trajectory(&b);
}

/* The generations really differ where epsilon's placement differs. */
static void test_generations_differ(void **s)
{
    (void)s;
    cfg c = {0.1, 0.9, 0.0, 0.5, 0, 0, 0};
    double one = 1.0, g = 2.0;
    double w[2];
    for (int legacy = 0; legacy < 2; legacy++) {
        c.legacy = legacy;
        optim_optimizer *opt = make_cfg(&c);
        optim_var *v = optim_test_var("v", OPTIM_F64, 0, NULL, &one);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, &g, 0, NULL)), v};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        w[legacy] = optim_var_get(v, 0);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
    /* v = 0.1 * 4 = 0.4. Keras 3: 1 - 0.2 / sqrt(0.9); legacy: 1 - 0.2 / (sqrt(0.4) + 0.5). */
    assert_close(w[0], 1 - 0.2 / sqrt(0.9), 1e-15, 0);
    assert_close(w[1], 1 - 0.2 / (sqrt(0.4) + 0.5), 1e-15, 0);
}

/* ---- f32 arithmetic, bit for bit ------------------------------------------------ */

/* The per-step constants of each generation in f32: Keras 3 casts Python's
 * 1 - rho (0.1f for rho 0.9); legacy computes 1 - rho on the float32 rho
 * (1.0f - 0.9f = 0.100000024f). With g = 1 the first rms is exactly that. */
static void test_f32_one_minus_rho(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int mom = 0; mom < 2; mom++) {
            cfg c = {0.01, 0.9, mom ? 0.9 : 0.0, 1e-7, 0, 0, legacy};
            optim_optimizer *opt = make_cfg(&c);
            double zero = 0.0, one = 1.0;
            optim_var *v = optim_test_var("v", OPTIM_F32, 0, NULL, &zero);
            step_dense(opt, v, OPTIM_F32, &one, 1);
            float got = *(float *)optim_var_data(optim_get_slot(opt, v, "rms"));
            float want = legacy ? 1.0f - 0.9f : (float)(1.0 - 0.9);
            assert_true(got == want);
            optim_destroy(opt);
            optim_var_destroy(v);
        }
    assert_true(1.0f - 0.9f != (float)(1.0 - 0.9));
}

/* Each form's float32 operation order, written from its source, over a few
 * steps: Keras 3 update_step, legacy's TF ops (no momentum), ApplyRMSProp /
 * ApplyCenteredRMSProp, and SparseApplyRMSProp / SparseApplyCenteredRMSProp
 * (sparse = 1). Results must match bit for bit. */
static void f32_form(int legacy, int mom, int centered, int sparse)
{
    cfg c = {0.01, 0.9, mom ? 0.9 : 0.0, 1e-3, 0, centered, legacy};
    optim_optimizer *opt = make_cfg(&c);
    double init[N];
    for (int i = 0; i < N; i++) init[i] = init_at(i);
    int64_t shape[2] = {N, 1};
    optim_var *var = optim_test_var("w", OPTIM_F32, 2, shape, init);
    float w[N], v[N] = {0}, m[N] = {0}, a[N] = {0};
    const float lr = 0.01f, rho = 0.9f, mu = mom ? 0.9f : 0.0f, eps = 1e-3f;
    const float omr = legacy ? 1.0f - rho : (float)(1.0 - 0.9);
    for (int i = 0; i < N; i++) w[i] = (float)init[i];
    for (int k = 0; k < 6; k++) {
        float g[N];
        int64_t idx[N];
        for (int i = 0; i < N; i++) g[i] = (float)grad_at(k, i), idx[i] = i;
        for (int i = 0; i < N; i++) {
            float d;
            if (!legacy) {
                v[i] = rho * v[i] + omr * (g[i] * g[i]);
                if (centered) a[i] = rho * a[i] + omr * g[i];
                d = centered ? (v[i] - a[i] * a[i]) + eps : v[i] + eps;
                float inc = (lr * g[i]) / sqrtf(d);
                if (mom) m[i] = mu * m[i] + inc;
                w[i] = w[i] - (mom ? m[i] : inc);
            } else if (!mom) {
                v[i] = rho * v[i] + omr * (g[i] * g[i]);
                if (centered) a[i] = rho * a[i] + omr * g[i];
                d = centered ? v[i] - a[i] * a[i] : v[i];
                w[i] = w[i] - (lr * g[i]) / (sqrtf(d) + eps);
            } else if (!sparse) {
                v[i] = v[i] + (g[i] * g[i] - v[i]) * omr;
                if (centered) a[i] = a[i] + (g[i] - a[i]) * omr;
                d = centered ? (v[i] - a[i] * a[i]) + eps : v[i] + eps;
                m[i] = m[i] * mu + (g[i] * lr) / sqrtf(d);
                w[i] = w[i] - m[i];
            } else {
                v[i] = v[i] * rho + (g[i] * g[i]) * omr;
                if (centered) a[i] = a[i] * rho + g[i] * omr;
                d = centered ? (v[i] + eps) - a[i] * a[i] : v[i] + eps;
                m[i] = m[i] * mu + ((1.0f / sqrtf(d)) * lr) * g[i];
                w[i] = w[i] - m[i];
            }
        }
        optim_grad_var p = {sparse ? optim_grad_sparse(idx, N, optim_tensor_make(OPTIM_F32, g, 2, shape))
                                   : optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, shape)),
                            var};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
    }
    assert_memory_equal(optim_var_data(var), w, sizeof w);
    assert_memory_equal(optim_var_data(optim_get_slot(opt, var, "rms")), v, sizeof v);
    if (mom) assert_memory_equal(optim_var_data(optim_get_slot(opt, var, "momentum")), m, sizeof m);
    if (centered) assert_memory_equal(optim_var_data(optim_get_slot(opt, var, "mg")), a, sizeof a);
    optim_destroy(opt);
    optim_var_destroy(var);
}

static void test_f32_operation_order(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int mom = 0; mom < 2; mom++)
            for (int centered = 0; centered < 2; centered++)
                for (int sparse = 0; sparse < 2; sparse++) f32_form(legacy, mom, centered, sparse);
}

/* ---- Keras golden values --------------------------------------------------- */

/* The docstring of both generations: lr 0.1, var 10, loss var^2 / 2. */
static void test_docstring(void **s)
{
    (void)s;
    const char *cfgs[2] = {
        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.1}}",
        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.1, \"is_legacy_optimizer\": true}}"};
    for (int g = 0; g < 2; g++) {
        optim_optimizer *opt = optim_test_make(cfgs[g]);
        double ten = 10.0;
        optim_var *v = optim_test_var("var1", OPTIM_F32, 0, NULL, &ten);
        float grad = (float)optim_var_get(v, 0);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, &grad, 0, NULL)), v};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        assert_close(optim_var_get(v, 0), 9.683772, 0, 1e-6);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

/* keras/src/optimizers/rmsprop_test.py test_single_step (the legacy rule
 * gives the same numbers to 4 digits). */
static void test_keras_single_step(void **s)
{
    (void)s;
    const char *cfgs[2] = {
        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.5}}",
        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.5, \"is_legacy_optimizer\": true}}"};
    const double g[4] = {1, 6, 7, 2}, init[4] = {1, 2, 3, 4};
    const double want[4] = {-0.5811, 0.4189, 1.4189, 2.4189};
    for (int c = 0; c < 2; c++) {
        optim_optimizer *opt = optim_test_make(cfgs[c]);
        int64_t n = 4;
        optim_var *v = optim_test_var("vars", OPTIM_F32, 1, &n, init);
        step_dense(opt, v, OPTIM_F32, g, 4);
        for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), want[i], 1e-4, 1e-4);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

/* rmsprop_test.py test_correctness_with_golden: centered, defaults. */
static void test_keras_golden(void **s)
{
    (void)s;
    const double golden[5] = {0.9967, 0.9933, 0.9908, 0.9885, 0.9864};
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make("{\"class_name\": \"RMSprop\", \"config\": {\"centered\": true}}");
        double ones[10], first[10], grads[10];
        for (int i = 0; i < 10; i++) ones[i] = 1, first[i] = 0.01, grads[i] = 0.1 * (i + 1);
        int64_t n = 10;
        optim_var *x = optim_test_var("x", dt, 1, &n, ones);
        step_dense(opt, x, dt, first, 10);
        for (int k = 0; k < 5; k++) {
            for (int i = 0; i < 10; i++) assert_close(optim_var_get(x, i), golden[k], 5e-4, 5e-4);
            step_dense(opt, x, dt, grads, 10);
        }
        optim_destroy(opt);
        optim_var_destroy(x);
    }
}

/* rmsprop_test.py test_weight_decay: zero gradients, lr 1, weight_decay
 * 0.004, three steps: 2 * 0.996^3. */
static void test_keras_weight_decay(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 1.0, "
                                "\"weight_decay\": 0.004}}");
    double two = 2.0, zero = 0.0;
    optim_var *v = optim_test_var("var1", OPTIM_F32, 0, NULL, &two);
    for (int k = 0; k < 3; k++) step_dense(opt, v, OPTIM_F32, &zero, 1);
    assert_close(optim_var_get(v, 0), 1.9760959, 0, 1e-6);
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* ---- legacy details ------------------------------------------------------------ */

static double rho_fn(void *user) { return *(double *)user; }

/* Legacy rho is a hyper: a callable changing every step. Keras 3's rho is a
 * number. */
static void test_dynamic_rho(void **s)
{
    (void)s;
    for (int centered = 0; centered < 2; centered++) {
        optim_optimizer *opt = optim_test_make(centered ? "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.01, "
                                               "\"centered\": true, \"momentum\": 0.5, \"is_legacy_optimizer\": true}}"
                                             : "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.01, "
                                               "\"is_legacy_optimizer\": true}}");
        double rho = 0.9;
        assert_int_equal(optim_set_hyper_fn(opt, "rho", rho_fn, &rho), 0);
        double init[N], w[N], v[N] = {0}, m[N] = {0}, a[N] = {0};
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
        int64_t n = N;
        optim_var *var = optim_test_var("w", OPTIM_F64, 1, &n, init);
        for (int k = 0; k < 10; k++) {
            rho = 0.5 + 0.04 * k;
            cfg c = {0.01, rho, centered ? 0.5 : 0.0, 1e-7, 0, centered, 1};
            double g[N];
            for (int i = 0; i < N; i++) {
                g[i] = grad_at(k, i);
                ref_elem(&c, 0.01, g[i], &w[i], &v[i], &m[i], &a[i]);
            }
            step_dense(opt, var, OPTIM_F64, g, N);
        }
        for (int i = 0; i < N; i++) assert_close(optim_var_get(var, i), w[i], 1e-12, 1e-13);
        optim_destroy(opt);
        optim_var_destroy(var);
    }
    optim_optimizer *k3 = optim_test_make("\"rmsprop\"");
    double rho = 0.9;
    assert_int_equal(optim_set_hyper_fn(k3, "rho", rho_fn, &rho), OPTIM_ETYPE);
    assert_int_equal(optim_set_hyper(k3, "rho", 0.8), 0);
    optim_destroy(k3);
}

/* Legacy epsilon: `epsilon or backend_config.epsilon()`, so 0 and None mean
 * 1e-7. tf_keras legacy rmsprop_test testMinimizeSparseResourceVariable:
 * var [[1, 2]], loss (var . [4, 5])^2, gradient [[112, 140]]; lr 1, rho 0,
 * epsilon 0. And the centered variant with epsilon 1: [[-111, -138]]. */
static void test_legacy_minimize_sparse(void **s)
{
    (void)s;
    const char *cfgs[3] = {
        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 1.0, \"rho\": 0.0, \"momentum\": 0.0, "
        "\"epsilon\": 0.0, \"centered\": false, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 1.0, \"rho\": 0.0, \"momentum\": 0.0, "
        "\"epsilon\": null, \"centered\": false, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 1.0, \"rho\": 0.0, \"momentum\": 0.0, "
        "\"epsilon\": 1.0, \"centered\": true, \"is_legacy_optimizer\": true}}"};
    for (int c = 0; c < 3; c++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *opt = optim_test_make(cfgs[c]);
            double init[2] = {1, 2};
            int64_t shape[2] = {1, 2}, vs[2] = {1, 2}, idx = 0;
            optim_var *v = optim_test_var("var0", dt, 2, shape, init);
            float gf[2] = {112, 140};
            double gd[2] = {112, 140};
            optim_grad_var p = {optim_grad_sparse(&idx, 1, optim_tensor_make(dt, d ? (void *)gd : (void *)gf, 2, vs)), v};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            if (c < 2) {
                /* 1 - 112 / (112 + 1e-7), 2 - 140 / (140 + 1e-7): not 0 and 1 exactly. */
                assert_close(optim_var_get(v, 0), 0.0, 0, 0.01);
                assert_close(optim_var_get(v, 1), 1.0, 0, 0.01);
                if (d) {
                    assert_close(optim_var_get(v, 0), 1 - 112 / (112 + 1e-7), 1e-6, 0);
                    assert_close(optim_var_get(v, 1), 2 - 140 / (140 + 1e-7), 1e-15, 0);
                }
            } else {
                assert_close(optim_var_get(v, 0), -111, 1e-6, 0);
                assert_close(optim_var_get(v, 1), -138, 1e-6, 0);
            }
            optim_destroy(opt);
            optim_var_destroy(v);
        }
}

/* Switching centered on (both) or momentum on (Keras 3) after the slots
 * exist is refused, as Keras would fail on the missing slot; legacy
 * momentum may change, and without its slot it stays unused (OptimizerV2's
 * self._momentum). */
static void test_slot_structure_fixed(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"
                                           : "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.01}}");
        /* Before any slot exists, anything goes. */
        assert_int_equal(optim_set_hyper(opt, "centered", 1), 0);
        assert_int_equal(optim_set_hyper(opt, "centered", 0), 0);
        assert_int_equal(optim_set_hyper(opt, "momentum", 0.9), 0);
        assert_int_equal(optim_set_hyper(opt, "momentum", 0.0), 0);
        double init[N], w[N], v[N] = {0}, m[N] = {0}, a[N] = {0};
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
        int64_t n = N;
        optim_var *var = optim_test_var("w", OPTIM_F64, 1, &n, init);
        cfg c = {0.01, 0.9, 0.0, 1e-7, 0, 0, legacy};
        double g[N];
        for (int i = 0; i < N; i++) {
            g[i] = grad_at(0, i);
            ref_elem(&c, 0.01, g[i], &w[i], &v[i], &m[i], &a[i]);
        }
        step_dense(opt, var, OPTIM_F64, g, N);
        assert_int_equal(optim_set_hyper(opt, "centered", 1), OPTIM_EINVAL);
        assert_non_null(strstr(optim_errmsg(opt), "centered"));
        assert_non_null(strstr(optim_errmsg(opt), "mg"));
        double cur = -1;
        assert_int_equal(optim_get_hyper(opt, "centered", &cur), 0);
        assert_true(cur == 0);
        int rc = optim_set_hyper(opt, "momentum", 0.9);
        if (!legacy) {
            assert_int_equal(rc, OPTIM_EINVAL);
            assert_non_null(strstr(optim_errmsg(opt), "momentum"));
        } else {
            assert_int_equal(rc, 0);
            /* No momentum slot: the plain path continues, momentum unused. */
            for (int i = 0; i < N; i++) {
                g[i] = grad_at(1, i);
                ref_elem(&c, 0.01, g[i], &w[i], &v[i], &m[i], &a[i]);
            }
            step_dense(opt, var, OPTIM_F64, g, N);
            assert_null(optim_get_slot(opt, var, "momentum"));
        }
        for (int i = 0; i < N; i++) assert_close(optim_var_get(var, i), w[i], 1e-13, 1e-14);
        optim_destroy(opt);
        optim_var_destroy(var);
    }
    /* Keras 3: momentum switched off after the slots exist stops using it
     * (the slot stays as it was). */
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.01, \"momentum\": 0.9}}");
    double init[N], w[N], v[N] = {0}, m[N] = {0}, a[N] = {0};
    for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
    int64_t n = N;
    optim_var *var = optim_test_var("w", OPTIM_F64, 1, &n, init);
    for (int k = 0; k < 2; k++) {
        cfg c = {0.01, 0.9, k ? 0.0 : 0.9, 1e-7, 0, 0, 0};
        if (k) assert_int_equal(optim_set_hyper(opt, "momentum", 0.0), 0);
        double g[N];
        for (int i = 0; i < N; i++) {
            g[i] = grad_at(k, i);
            ref_elem(&c, 0.01, g[i], &w[i], &v[i], &m[i], &a[i]);
        }
        step_dense(opt, var, OPTIM_F64, g, N);
    }
    optim_var *mom = optim_get_slot(opt, var, "momentum");
    assert_non_null(mom);
    for (int i = 0; i < N; i++) {
        assert_close(optim_var_get(var, i), w[i], 1e-13, 1e-14);
        assert_close(optim_var_get(mom, i), m[i], 1e-13, 1e-14);
    }
    optim_destroy(opt);
    optim_var_destroy(var);
}

/* ---- sparse ------------------------------------------------------------------- */

#define ROWS 6
#define COLS 3
#define SPSTEPS 4

static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
static const int64_t sp_idx[SPSTEPS][4] = {{1, 4, 1, 1}, {0, 4, 5, 4}, {2, 2, 3, 1}, {4, 0, 4, 1}};
static double sp_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c); }

/* SPSTEPS sparse steps (duplicates), or their dense sums when as_dense. */
static optim_var *run_sparse(optim_optimizer *opt, optim_dtype dt, int as_dense)
{
    double init[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) init[r * COLS + c] = table_init(r, c);
    int64_t shape[2] = {ROWS, COLS};
    optim_var *v = optim_test_var("table", dt, 2, shape, init);
    for (int k = 0; k < SPSTEPS; k++) {
        double vals[4 * COLS], dense[ROWS * COLS] = {0};
        float fv[4 * COLS], fd[ROWS * COLS] = {0};
        for (int j = 0; j < 4; j++)
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = sp_val(k, j, c);
                fv[j * COLS + c] = (float)sp_val(k, j, c);
                dense[sp_idx[k][j] * COLS + c] += vals[j * COLS + c];
                fd[sp_idx[k][j] * COLS + c] += fv[j * COLS + c];
            }
        int f = dt == OPTIM_F32;
        int64_t vs[2] = {4, COLS};
        optim_grad_var p = {as_dense ? optim_grad_dense(optim_tensor_make(dt, f ? (void *)fd : (void *)dense, 2, shape))
                                     : optim_grad_sparse(sp_idx[k], 4, optim_tensor_make(dt, f ? (void *)fv : (void *)vals, 2, vs)),
                            v};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        if (rc) print_error("%s\n", optim_errmsg(opt));
        assert_int_equal(rc, 0);
    }
    return v;
}

static void assert_bitwise(optim_var *a, optim_var *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(optim_var_numel(a), optim_var_numel(b));
    assert_memory_equal(optim_var_data(a), optim_var_data(b),
                        (size_t)optim_var_numel(a) * optim_dtype_size(optim_var_dtype(a)));
}

static const char *const SLOTS[3] = {"rms", "momentum", "mg"};

/* Keras 3: sparse == dense equivalent (duplicates summed), bit for bit, in
 * every option combination; and against the reference. */
static void test_sparse_keras3_dense_equivalent(void **s)
{
    (void)s;
    for (int centered = 0; centered < 2; centered++)
        for (int mom = 0; mom < 2; mom++)
            for (int d = 0; d < 2; d++) {
                optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
                cfg c = {0.05, 0.9, mom ? 0.8 : 0.0, 1e-3, 0, centered, 0};
                optim_optimizer *o1 = make_cfg(&c), *o2 = make_cfg(&c);
                optim_var *sv = run_sparse(o1, dt, 0), *dv = run_sparse(o2, dt, 1);
                assert_bitwise(sv, dv);
                for (int k = 0; k < 3; k++) {
                    optim_var *a = optim_get_slot(o1, sv, SLOTS[k]), *b = optim_get_slot(o2, dv, SLOTS[k]);
                    assert_true((a == NULL) == (b == NULL));
                    if (a) assert_bitwise(a, b);
                }
                /* Reference: every row, g = 0 where no index points. */
                double w[ROWS][COLS], v[ROWS][COLS] = {{0}}, m[ROWS][COLS] = {{0}}, a[ROWS][COLS] = {{0}};
                for (int r = 0; r < ROWS; r++)
                    for (int q = 0; q < COLS; q++) w[r][q] = table_init(r, q);
                for (int k = 0; k < SPSTEPS; k++) {
                    double g[ROWS][COLS] = {{0}};
                    for (int j = 0; j < 4; j++)
                        for (int q = 0; q < COLS; q++) g[sp_idx[k][j]][q] += sp_val(k, j, q);
                    for (int r = 0; r < ROWS; r++)
                        for (int q = 0; q < COLS; q++) ref_elem(&c, c.lr, g[r][q], &w[r][q], &v[r][q], &m[r][q], &a[r][q]);
                }
                optim_var *rms = optim_get_slot(o1, sv, "rms");
                for (int r = 0; r < ROWS; r++)
                    for (int q = 0; q < COLS; q++) {
                        assert_close(optim_var_get(sv, r * COLS + q), w[r][q], tol_r(dt), tol_a(dt));
                        assert_close(optim_var_get(rms, r * COLS + q), v[r][q], tol_r(dt), tol_a(dt));
                    }
                optim_destroy(o1);
                optim_destroy(o2);
                optim_var_destroy(sv);
                optim_var_destroy(dv);
            }
}

/* Legacy: duplicates summed; with momentum the Sparse(Centered)RMSProp
 * kernels on the indexed rows only; without, rms and mg decay on every row
 * and w moves on the indexed rows. */
static void test_sparse_legacy(void **s)
{
    (void)s;
    for (int centered = 0; centered < 2; centered++)
        for (int mom = 0; mom < 2; mom++)
            for (int d = 0; d < 2; d++) {
                optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
                cfg c = {0.05, 0.9, mom ? 0.8 : 0.0, 1e-3, 0, centered, 1};
                optim_optimizer *opt = make_cfg(&c);
                optim_var *sv = run_sparse(opt, dt, 0);
                double w[ROWS][COLS], v[ROWS][COLS] = {{0}}, m[ROWS][COLS] = {{0}}, a[ROWS][COLS] = {{0}};
                for (int r = 0; r < ROWS; r++)
                    for (int q = 0; q < COLS; q++) w[r][q] = table_init(r, q);
                for (int k = 0; k < SPSTEPS; k++) {
                    double g[ROWS][COLS] = {{0}};
                    int touched[ROWS] = {0};
                    for (int j = 0; j < 4; j++) {
                        touched[sp_idx[k][j]] = 1;
                        for (int q = 0; q < COLS; q++) g[sp_idx[k][j]][q] += sp_val(k, j, q);
                    }
                    for (int r = 0; r < ROWS; r++)
                        for (int q = 0; q < COLS; q++) {
                            if (touched[r]) {
                                ref_elem(&c, c.lr, g[r][q], &w[r][q], &v[r][q], &m[r][q], &a[r][q]);
                            } else if (!mom) {
                                v[r][q] *= c.rho;
                                a[r][q] *= c.rho;
                            }
                        }
                }
                optim_var *rms = optim_get_slot(opt, sv, "rms"), *mv = optim_get_slot(opt, sv, "momentum");
                optim_var *mg = optim_get_slot(opt, sv, "mg");
                assert_true((mv != NULL) == (mom != 0));
                assert_true((mg != NULL) == (centered != 0));
                for (int r = 0; r < ROWS; r++)
                    for (int q = 0; q < COLS; q++) {
                        int i = r * COLS + q;
                        assert_close(optim_var_get(sv, i), w[r][q], tol_r(dt), tol_a(dt));
                        assert_close(optim_var_get(rms, i), v[r][q], tol_r(dt), tol_a(dt));
                        if (mv) assert_close(optim_var_get(mv, i), m[r][q], tol_r(dt), tol_a(dt));
                        if (mg) assert_close(optim_var_get(mg, i), a[r][q], tol_r(dt), tol_a(dt));
                    }
                optim_destroy(opt);
                optim_var_destroy(sv);
            }
}

/* Row by row, after history on every row: which rows change when only row 3
 * gets a gradient. */
static void test_sparse_untouched_rows(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int mom = 0; mom < 2; mom++)
            for (int centered = 0; centered < 2; centered++) {
                cfg c = {0.1, 0.9, mom ? 0.5 : 0.0, 1e-3, 0, centered, legacy};
                optim_optimizer *opt = make_cfg(&c);
                double init[8] = {1, 2, 3, 4, 5, 6, 7, 8};
                int64_t shape[2] = {4, 2};
                optim_var *v = optim_test_var("e", OPTIM_F64, 2, shape, init);
                double g1[8] = {1, -1, 0.5, 2, -0.3, 0.7, 1.5, -2};
                optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g1, 2, shape)), v};
                assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
                double before[3][8], wb[8];
                optim_var *sl[3];
                for (int k = 0; k < 3; k++) {
                    sl[k] = optim_get_slot(opt, v, SLOTS[k]);
                    for (int i = 0; sl[k] && i < 8; i++) before[k][i] = optim_var_get(sl[k], i);
                }
                for (int i = 0; i < 8; i++) wb[i] = optim_var_get(v, i);
                int64_t idx = 3, vs[2] = {1, 2};
                double row[2] = {0.25, -0.5};
                p.grad = optim_grad_sparse(&idx, 1, optim_tensor_make(OPTIM_F64, row, 2, vs));
                assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
                for (int i = 0; i < 8; i++) {
                    int touched = i >= 6;
                    double w = optim_var_get(v, i);
                    if (touched) {
                        assert_true(w != wb[i]);
                    } else if (legacy || !mom) {
                        assert_true(w == wb[i]); /* bit-identical (Keras 3: w - 0 / sqrt(d)) */
                    } else {
                        assert_true(w != wb[i]); /* Keras 3: w - m, m decayed */
                    }
                    for (int k = 0; k < 3; k++) {
                        if (!sl[k]) continue;
                        double now = optim_var_get(sl[k], i);
                        if (touched) continue;
                        if (legacy && mom) assert_true(now == before[k][i]);
                        else if (legacy && k != 1) assert_true(now == before[k][i] * 0.9); /* rms, mg decay */
                        else if (!legacy && k == 1) assert_true(now == before[k][i] * 0.5 + 0.0); /* 0 / sqrt(d) added */
                        else if (!legacy) assert_true(now == 0.9 * before[k][i] + 0.1 * 0.0);
                    }
                }
                optim_destroy(opt);
                optim_var_destroy(v);
            }
}

/* ---- config --------------------------------------------------------------------- */

static char *config_of(const char *json)
{
    optim_optimizer *opt = optim_test_make(json);
    char *c = optim_get_config(opt);
    assert_non_null(c);
    optim_destroy(opt);
    return c;
}

static void expect_config(const char *json, const char *want)
{
    char *got = config_of(json);
    if (strcmp(got, want) != 0) print_error("got  %s\nwant %s\n", got, want);
    assert_string_equal(got, want);
    optim_free(got);
}

static void test_config_keys(void **s)
{
    (void)s;
    expect_config("\"rmsprop\"",
                  "{\"name\":\"rm_sprop\",\"learning_rate\":0.001,\"weight_decay\":null,\"clipnorm\":null,"
                  "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
                  "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
                  "\"gradient_accumulation_steps\":null,\"rho\":0.9,\"momentum\":0.0,\"epsilon\":1e-07,"
                  "\"centered\":false}");
    expect_config("{\"class_name\": \"RMSprop\", \"config\": {\"is_legacy_optimizer\": true}}",
                  "{\"name\":\"RMSprop\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.9,\"momentum\":0.0,"
                  "\"epsilon\":1e-07,\"centered\":false}");
    /* Legacy epsilon None or 0 is written as the backend epsilon, in place. */
    expect_config("{\"class_name\": \"RMSprop\", \"config\": {\"epsilon\": null, \"centered\": true, \"is_legacy_optimizer\": true}}",
                  "{\"name\":\"RMSprop\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.9,\"momentum\":0.0,"
                  "\"epsilon\":1e-07,\"centered\":true}");
    expect_config("{\"class_name\": \"RMSprop\", \"config\": {\"epsilon\": 0, \"is_legacy_optimizer\": true}}",
                  "{\"name\":\"RMSprop\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.9,\"momentum\":0.0,"
                  "\"epsilon\":1e-07,\"centered\":false}");
    /* Keras 3 keeps epsilon 0. */
    char *k3 = config_of("{\"class_name\": \"RMSprop\", \"config\": {\"epsilon\": 0}}");
    assert_non_null(strstr(k3, "\"epsilon\":0.0,"));
    optim_free(k3);
}

static void round_trip(const char *json)
{
    optim_optimizer *a = optim_test_make(json);
    char *sa = optim_serialize(a);
    assert_non_null(sa);
    optim_optimizer *b = optim_test_make(sa);
    char *sb = optim_serialize(b);
    assert_string_equal(sa, sb);
    optim_free(sa);
    optim_free(sb);
    optim_destroy(a);
    optim_destroy(b);
}

static void test_config_round_trip(void **s)
{
    (void)s;
    /* rmsprop_test.py test_config. */
    round_trip("{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.5, \"rho\": 0.8, "
               "\"momentum\": 0.05, \"epsilon\": 1e-6, \"centered\": true}}");
    round_trip("{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.5, \"rho\": 0.8, "
               "\"momentum\": 0.05, \"epsilon\": 1e-6, \"centered\": true, \"decay\": 0.01, "
               "\"clipnorm\": 1.0, \"is_legacy_optimizer\": true}}");
    round_trip("{\"class_name\": \"RMSprop\", \"config\": {\"epsilon\": null, \"is_legacy_optimizer\": true}}");
    /* The legacy alias lr. */
    optim_optimizer *o = optim_test_make("{\"class_name\": \"RMSprop\", \"config\": {\"lr\": 0.25, \"is_legacy_optimizer\": true}}");
    double lr = 0;
    assert_int_equal(optim_get_hyper(o, "learning_rate", &lr), 0);
    assert_true(lr == 0.25);
    optim_destroy(o);
}

static void expect_refused(const char *json, int code, const char *s1, const char *s2)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("rc %d for %s: %s\n", rc, json, err.msg);
    assert_int_equal(rc, code);
    assert_null(opt);
    if (s1 && !strstr(err.msg, s1)) print_error("message: %s\n", err.msg);
    if (s1) assert_non_null(strstr(err.msg, s1));
    if (s2) assert_non_null(strstr(err.msg, s2));
}

static void test_config_refused(void **s)
{
    (void)s;
    /* Legacy: momentum in [0, 1] (OptimizerV2 RMSprop.__init__). */
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 1.5, \"is_legacy_optimizer\": true}}",
                   OPTIM_ERANGE, "momentum", "[0, 1]");
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": -0.1, \"is_legacy_optimizer\": true}}",
                   OPTIM_ERANGE, "momentum", "[0, 1]");
    /* Keras 3 checks none of its keys. */
    optim_optimizer *k3 = optim_test_make("{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 1.5, \"rho\": 2.0}}");
    optim_destroy(k3);
    /* Types, None, unknown keys, keys of the other generation. */
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"centered\": 1}}", OPTIM_ETYPE, "centered", NULL);
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"rho\": \"0.9\"}}", OPTIM_ETYPE, "rho", NULL);
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"epsilon\": null}}", OPTIM_ETYPE, "epsilon", NULL);
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"beta_1\": 0.9}}", OPTIM_EKEY, "beta_1", NULL);
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"lr\": 0.1, \"is_legacy_optimizer\": false}}", OPTIM_EKEY, "lr", "generation");
    expect_refused("{\"class_name\": \"RMSprop\", \"config\": {\"weight_decay\": 0.1, \"is_legacy_optimizer\": true}}",
                   OPTIM_EKEY, "weight_decay", NULL);
    /* A legacy momentum callable out of range fails the step, nothing changes. */
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 0.5, \"is_legacy_optimizer\": true}}");
    double mu = 2.0;
    assert_int_equal(optim_set_hyper_fn(opt, "momentum", rho_fn, &mu), 0);
    double one = 1.0, g = 1.0;
    optim_var *v = optim_test_var("v", OPTIM_F64, 0, NULL, &one);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, &g, 0, NULL)), v};
    assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ERANGE);
    assert_non_null(strstr(optim_errmsg(opt), "momentum"));
    assert_true(optim_var_get(v, 0) == 1.0);
    assert_int_equal(optim_iterations(opt), 0);
    assert_int_equal(optim_set_hyper(opt, "momentum", 1.01), OPTIM_ERANGE);
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* ---- threads ------------------------------------------------------------------------ */

static void test_threads_bitwise(void **s)
{
    (void)s;
    const int64_t n = 100003;
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * i);
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_var *vars[2];
        optim_optimizer *opts[2];
        for (int t = 0; t < 2; t++) {
            cfg c = {0.01, 0.9, 0.9, 1e-7, 0, 1, legacy};
            opts[t] = make_cfg(&c);
            assert_int_equal(optim_set_num_threads(opts[t], t + 1), 0);
            vars[t] = optim_test_var("big", OPTIM_F32, 1, &n, init);
            for (int k = 0; k < 4; k++) {
                for (int64_t i = 0; i < n; i++) g[i] = (float)cos(0.37 * i + k);
                optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), vars[t]};
                assert_int_equal(optim_apply_gradients(opts[t], &p, 1, 0), 0);
            }
        }
        assert_bitwise(vars[0], vars[1]);
        for (int k = 0; k < 3; k++) assert_bitwise(optim_get_slot(opts[0], vars[0], SLOTS[k]), optim_get_slot(opts[1], vars[1], SLOTS[k]));
        for (int t = 0; t < 2; t++) {
            optim_destroy(opts[t]);
            optim_var_destroy(vars[t]);
        }
    }
    free(init);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trajectories),
        cmocka_unit_test(test_legacy_decay),
        cmocka_unit_test(test_generations_differ),
        cmocka_unit_test(test_f32_one_minus_rho),
        cmocka_unit_test(test_f32_operation_order),
        cmocka_unit_test(test_docstring),
        cmocka_unit_test(test_keras_single_step),
        cmocka_unit_test(test_keras_golden),
        cmocka_unit_test(test_keras_weight_decay),
        cmocka_unit_test(test_dynamic_rho),
        cmocka_unit_test(test_legacy_minimize_sparse),
        cmocka_unit_test(test_slot_structure_fixed),
        cmocka_unit_test(test_sparse_keras3_dense_equivalent),
        cmocka_unit_test(test_sparse_legacy),
        cmocka_unit_test(test_sparse_untouched_rows),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_config_round_trip),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
