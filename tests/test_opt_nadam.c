/* Nadam against independent double-precision references written from
 * Dozat's rule as each Keras generation applies it: dense trajectories in
 * f32 and f64 for both generations, the momentum-schedule product
 * (Keras 3 u_product with 0.96^t, legacy momentum_cache with
 * 0.96^(0.004 t)) advanced once per step whatever the dtypes, exact resume
 * through get/set_weights, legacy decay / schedule_decay / epsilon rules,
 * sparse gradients with duplicate indices (Keras 3: the dense equivalent;
 * legacy: moments decay on every row, w moves on indexed rows), Keras's
 * golden values, the f32 order of operations, config keys, defaults, round
 * trips and refused values, and thread-count independence.
 *
 * Keras configs (written out here, not read from the library):
 *   keras.optimizers.Nadam().get_config(): name "Nadam", learning_rate
 *     0.001, weight_decay None, clipnorm None, global_clipnorm None,
 *     clipvalue None, use_ema False, ema_momentum 0.99,
 *     ema_overwrite_frequency None, loss_scale_factor None,
 *     gradient_accumulation_steps None, beta_1 0.9, beta_2 0.999,
 *     epsilon 1e-07
 *   tf.keras.optimizers.legacy.Nadam().get_config(): name "Nadam",
 *     learning_rate 0.001, decay 0.004, beta_1 0.9, beta_2 0.999,
 *     epsilon 1e-07, is_legacy_optimizer True */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 25
#define N 7
#define NADAM(cfg) "{\"class_name\": \"Nadam\", \"config\": {" cfg "}}"

typedef struct ref {
    int legacy;
    double lr, beta_1, beta_2, epsilon;
    double schedule_decay; /* legacy */
} ref;

/* ---- the reference ---------------------------------------------------------------- */

static double mu(const ref *r, int t)
{
    double e = r->legacy ? r->schedule_decay * t : (double)t;
    return r->beta_1 * (1.0 - 0.5 * pow(0.96, e));
}

/* The product of mu_1..mu_t. */
typedef struct ref_state {
    double prod;
} ref_state;

/* Advances the product for step t (once per step). */
static void ref_advance(const ref *r, ref_state *s, int t) { s->prod *= mu(r, t); }

/* One step on n elements; touched (optional) selects the rows that get the
 * gradient: legacy leaves the others' w alone and decays their moments;
 * Keras 3 gives them g = 0 (pass touched = NULL). */
static void ref_step(const ref *r, const ref_state *s, int t, double *w, double *m, double *v,
                     const double *g, int n, const int *touched)
{
    const double b1 = r->beta_1, b2 = r->beta_2, mu_t = mu(r, t), mu_n = mu(r, t + 1);
    const double p = s->prod, p_next = s->prod * mu_n;
    for (int i = 0; i < n; i++) {
        if (touched && !touched[i]) {
            m[i] *= b1;
            v[i] *= b2;
            continue;
        }
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double m_hat = mu_n * m[i] / (1 - p_next) + (1 - mu_t) * g[i] / (1 - p);
        double v_hat = v[i] / (1 - pow(b2, t));
        w[i] -= r->lr * m_hat / (sqrt(v_hat) + r->epsilon);
    }
}

/* The drivers' form: the product recomputed from k (constant beta_1);
 * state m, v. */
static void ref_table(const void *r_, int k, double *w, double *const *st, const double *g, int n)
{
    const ref *r = r_;
    ref_state s = {1.0};
    for (int t = 1; t <= k + 1; t++) ref_advance(r, &s, t);
    ref_step(r, &s, k + 1, w, st[0], st[1], g, n, NULL);
}

/* Legacy sparse: a row without a gradient keeps w; its moments decay. */
static void ref_idle(const void *r_, int k, double *w, double *const *st, int n)
{
    const ref *r = r_;
    for (int i = 0; i < n; i++) st[0][i] *= r->beta_1, st[1][i] *= r->beta_2;
}

static ot_case make_case(const char *json, const ref *r)
{
    return (ot_case){
        json, ref_table, r, 2, {"m", "v"}, .exact_slots = 1, .idle = r->legacy ? ref_idle : NULL};
}

/* The product after `steps` steps. */
static double ref_prod(const ref *r, int steps)
{
    ref_state s = {1.0};
    for (int t = 1; t <= steps; t++) ref_advance(r, &s, t);
    return s.prod;
}

/* ---- helpers -------------------------------------------------------------------------- */

static optim_var *new_w(optim_dtype dt, const char *name)
{
    double init[N];
    for (int i = 0; i < N; i++) init[i] = OT_DENSE.init(i);
    return optim_test_var(name, dt, 1, (int64_t[1]){N}, init);
}

static void run_steps(optim_optimizer *opt, optim_var *w, int from, int to)
{
    for (int k = from; k < to; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = OT_DENSE.grad(k, i);
        ot_step_dense(opt, w, g);
    }
}

static const char *cache_name(int legacy) { return legacy ? "momentum_cache" : "u_product"; }

/* The value of the optimizer-level weight (found by name among the
 * weights, right after iterations) and its dtype. */
static double cache_value(optim_optimizer *opt, int legacy, optim_dtype *dt)
{
    size_t n = optim_weights_count(opt);
    optim_tensor w[16];
    assert_ge(n, 2);
    assert_le(n, 16);
    optim_get_weights(opt, w, n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(optim_weight_name(opt, i), cache_name(legacy)) == 0) {
            assert_eq(i, 1);
            assert_eq(w[i].rank, 0);
            if (dt) *dt = w[i].dtype;
            return w[i].dtype == OPTIM_F32 ? *(const float *)w[i].data : *(const double *)w[i].data;
        }
    print_error("no weight named %s\n", cache_name(legacy));
    fail();
    return NAN;
}

static void check_trajectory(const char *json, const ref *r)
{
    ot_check_dense(&OT_DENSE, make_case(json, r));
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32, cdt;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = ot_run_dense(opt, &OT_DENSE, dt);
        assert_close(cache_value(opt, r->legacy, &cdt), ref_prod(r, STEPS), d ? 1e-13 : 1e-5,
                     1e-300);
        assert_eq(cdt, dt);
        assert_eq(optim_weights_count(opt), 4); /* iterations, cache, m, v */
        optim_test_free(opt, w);
    }
}

/* ---- dense trajectories ------------------------------------------------------------- */

OPTIM_TEST(test_defaults)
{
    ref r = {0, 0.001, 0.9, 0.999, 1e-7, 0};
    check_trajectory("\"nadam\"", &r);
    check_trajectory(NADAM(""), &r);
    ref l = {1, 0.001, 0.9, 0.999, 1e-7, 0.004};
    check_trajectory(NADAM(OT_LEGACY), &l);
}

OPTIM_TEST(test_options)
{
    ref r = {0, 0.02, 0.8, 0.95, 1e-5, 0};
    check_trajectory(NADAM("\"learning_rate\": 0.02, "
                           "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-5"),
                     &r);
    ref l = {1, 0.02, 0.8, 0.95, 1e-5, 0.004};
    check_trajectory(NADAM("\"learning_rate\": 0.02, "
                           "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-5, " OT_LEGACY),
                     &l);
    /* beta_1 = 1 keeps m at 0 but the rule stays defined. */
    ref one = {0, 0.01, 1.0, 0.9, 1e-7, 0};
    check_trajectory(NADAM("\"learning_rate\": 0.01, "
                           "\"beta_1\": 1.0, \"beta_2\": 0.9"),
                     &one);
}

/* Legacy Nadam: `decay` is the momentum schedule's (OptimizerV2 Nadam
 * overwrites it with schedule_decay, default 0.004); it never decays the
 * learning rate. A config's decay is ignored, as Keras ignores it. */
OPTIM_TEST(test_legacy_decay)
{
    ref l = {1, 0.01, 0.9, 0.999, 1e-7, 0.004};
    check_trajectory(NADAM("\"learning_rate\": 0.01, "
                           "\"decay\": 0.3, " OT_LEGACY),
                     &l);
    check_trajectory(NADAM("\"learning_rate\": 0.01, "
                           "\"decay\": 0.004, " OT_LEGACY),
                     &l);
    /* schedule_decay sets it. */
    ref sd = {1, 0.01, 0.9, 0.999, 1e-7, 0.05};
    check_trajectory(NADAM("\"learning_rate\": 0.01, "
                           "\"schedule_decay\": 0.05, " OT_LEGACY),
                     &sd);
    check_trajectory(NADAM("\"learning_rate\": 0.01, "
                           "\"schedule_decay\": 0.05, \"decay\": 0.9, " OT_LEGACY),
                     &sd);
    /* get_config writes the schedule decay as decay, as Keras does, and
     * also as schedule_decay when it is not 0.004 (Keras would read decay
     * back as 0.004), so that the config round-trips: issue 22's D04. */
    cJSON *o = ot_config_of(NADAM("\"schedule_decay\": 0.05, " OT_LEGACY), NULL, NULL, 0);
    ot_expect_numbers(o, "decay", 0.05, "schedule_decay", 0.05, NULL);
    cJSON_Delete(o);
    o = ot_config_of(NADAM("\"schedule_decay\": 0.004, " OT_LEGACY), NULL, NULL, 0);
    ot_expect_numbers(o, "decay", 0.004, NULL);
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "schedule_decay"));
    cJSON_Delete(o);
    check_trajectory(NADAM("\"learning_rate\": 0.01, \"decay\": 0.05, "
                           "\"schedule_decay\": 0.05, " OT_LEGACY),
                     &sd);
    /* Refused: negative (OptimizerV2: "decay cannot be less than 0"), not a
     * number, and in Keras 3 at all. */
    ot_expect_refused(NADAM("\"schedule_decay\": -0.1, " OT_LEGACY), OPTIM_ERANGE, "schedule_decay",
                      "[0, inf)");
    ot_expect_refused(NADAM("\"schedule_decay\": null, " OT_LEGACY), OPTIM_ERANGE, NULL, NULL);
    ot_expect_refused(NADAM("\"schedule_decay\": 0.004"), OPTIM_EKEY, "schedule_decay", NULL);
}

OPTIM_TEST(test_legacy_epsilon_fallback)
{
    ref l = {1, 0.01, 0.9, 0.999, 1e-7, 0.004};
    const char *cfgs[2] = {
        NADAM("\"learning_rate\": 0.01, \"epsilon\": 0, " OT_LEGACY),
        NADAM("\"learning_rate\": 0.01, \"epsilon\": null, " OT_LEGACY),
    };
    for (int c = 0; c < 2; c++) {
        check_trajectory(cfgs[c], &l);
        cJSON *o = ot_config_of(cfgs[c], NULL, NULL, 0);
        ot_expect_numbers(o, "epsilon", 1e-7, NULL);
        cJSON_Delete(o);
    }
    /* Keras 3 uses 0 as given: element 0 has a zero gradient at step 0,
     * so its update is 0 / 0. */
    optim_optimizer *opt = optim_test_make(NADAM("\"epsilon\": 0.0"));
    optim_var *w = new_w(OPTIM_F64, "w");
    run_steps(opt, w, 0, 1);
    assert_nan(optim_var_get(w, 0));
    assert_eq(optim_var_get(w, 1), optim_var_get(w, 1)); /* not NaN */
    optim_test_free(opt, w);
}

/* beta_1 and beta_2 are hypers: a callable beta_1 enters the schedule
 * product with its value at each step. */
OPTIM_TEST(test_dynamic_beta)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(ot_gen(NADAM("\"learning_rate\": 0.01"), legacy));
        double b1 = 0.9;
        assert_ok(optim_set_hyper_fn(opt, "beta_1", ot_value, &b1), opt);
        double w[N], m[N] = {0}, v[N] = {0};
        for (int i = 0; i < N; i++) w[i] = OT_DENSE.init(i);
        optim_var *var = new_w(OPTIM_F64, "w");
        ref_state st = {1.0};
        for (int k = 0; k < 10; k++) {
            b1 = 0.6 + 0.03 * k;
            ref r = {legacy, 0.01, b1, 0.999, 1e-7, 0.004};
            double g[N];
            for (int i = 0; i < N; i++) g[i] = OT_DENSE.grad(k, i);
            ref_advance(&r, &st, k + 1);
            ref_step(&r, &st, k + 1, w, m, v, g, N, NULL);
            ot_step_dense(opt, var, g);
        }
        for (int i = 0; i < N; i++) assert_close(optim_var_get(var, i), w[i], 1e-12, 1e-13);
        assert_close(cache_value(opt, legacy, NULL), st.prod, 1e-13, 0);
        optim_test_free(opt, var);
    }
}

/* ---- Keras's own values --------------------------------------------------------------- */

OPTIM_TEST(test_keras_golden)
{
    /* keras/src/optimizers/nadam_test.py test_single_step, test_correctness_with_golden. */
    ot_check_keras_single_step(NADAM("\"learning_rate\": 0.5"),
                               (double[]){0.4686, 1.4686, 2.4686, 3.4686});
    static const double golden[5][10] = {
        {0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281},
        {-0.1738, -0.1731, -0.1726, -0.1723, -0.1721, -0.172, -0.1719, -0.1718, -0.1718, -0.1717},
        {-0.7115, -0.7103, -0.7096, -0.7092, -0.709, -0.7088, -0.7086, -0.7085, -0.7085, -0.7084},
        {-1.2335, -1.2322, -1.2313, -1.2309, -1.2306, -1.2304, -1.2302, -1.2301, -1.23, -1.2299},
        {-1.7492, -1.7478, -1.7469, -1.7464, -1.7461, -1.7459, -1.7457, -1.7456, -1.7455, -1.7454}};
    ot_check_keras_golden(
        NADAM("\"learning_rate\": 0.5, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-5"),
        OPTIM_F32, golden[0], 10);
    /* The legacy docstring: lr 0.2, var 10, loss var^2 / 2: one step -> 9.8. */
    assert_close(ot_scalar_step(NADAM("\"learning_rate\": 0.2, " OT_LEGACY), OPTIM_F32, 10.0, 10.0),
                 9.8, 0, 0.05);
}

/* keras test_weight_decay (Keras 3). */
OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(NADAM("\"learning_rate\": 1.0, \"weight_decay\": 0.004"),
                                OPTIM_F32);
}

/* ---- float32 order of operations ------------------------------------------------------- */

/* Three steps on one float32 element with each generation's operations
 * written out in float, in the order of its source (Keras 3 nadam.py
 * _backend_update_step + update_step; legacy nadam.py _prepare_local +
 * _resource_apply_dense). The library must agree bit for bit, the schedule
 * product included. */
OPTIM_TEST(test_f32_operation_order)
{
    const float b1 = 0.9f, b2 = 0.999f, lr = 0.01f, eps = 1e-7f, sd = 0.004f;
    const float gs[3] = {0.3f, -1.7f, 0.05f};
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(ot_gen(NADAM("\"learning_rate\": 0.01"), legacy));
        double init = 0.7;
        optim_var *var = optim_test_var("w", OPTIM_F32, 0, NULL, &init);
        float w = 0.7f, m = 0, v = 0, prod = 1.0f;
        for (int k = 0; k < 3; k++) {
            float g = gs[k], t = (float)(k + 1), t1 = (float)(k + 2);
            if (legacy) {
                float mt = b1 * (1.0f - 0.5f * powf(0.96f, sd * t));
                float mt1 = b1 * (1.0f - 0.5f * powf(0.96f, sd * t1));
                prod = prod * mt;
                float next = prod * mt1;
                float gp = g / (1.0f - prod);
                m = b1 * m + (1.0f - b1) * g;
                float mp = m / (1.0f - next);
                v = b2 * v + (1.0f - b2) * (g * g);
                float vp = v / (1.0f - powf(b2, t));
                float mbar = (1.0f - mt) * gp + mt1 * mp;
                w = w - lr * mbar / (sqrtf(vp) + eps);
            } else {
                prod = prod * b1 * (1.0f - 0.5f * powf(0.96f, t));
                float ut = b1 * (1.0f - 0.5f * powf(0.96f, t));
                float ut1 = b1 * (1.0f - 0.5f * powf(0.96f, t1));
                float prod1 = prod * ut1;
                float b2p = powf(b2, t);
                m = m + (g - m) * (1.0f - b1);
                v = v + (g * g - v) * (1.0f - b2);
                float mh = ut1 * m / (1.0f - prod1) + (1.0f - ut) * g / (1.0f - prod);
                float vh = v / (1.0f - b2p);
                w = w - mh * lr / (sqrtf(vh) + eps);
            }
            ot_step_dense(opt, var, &(double){g});
            assert_var_floats(var, &w, 1);
            assert_var_floats(optim_get_slot(opt, var, "m"), &m, 1);
            assert_var_floats(optim_get_slot(opt, var, "v"), &v, 1);
            assert_eq((float)cache_value(opt, legacy, NULL), prod);
        }
        optim_test_free(opt, var);
    }
}

/* ---- the schedule product: once per step, dtype of the first variable ---------------- */

/* A float32 and a float64 variable in the same steps: the product is
 * advanced once per step (not once per dtype), kept in the first
 * variable's dtype, and both variables follow the reference. */
OPTIM_TEST(test_product_once_per_step)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int f64_first = 0; f64_first < 2; f64_first++) {
            optim_optimizer *opt =
                optim_test_make(ot_gen(NADAM("\"learning_rate\": 0.01"), legacy));
            optim_var *a = new_w(OPTIM_F32, "a"), *b = new_w(OPTIM_F64, "b");
            ref r = {legacy, 0.01, 0.9, 0.999, 1e-7, 0.004};
            double w[N], mv[2 * N];
            ot_ref_dense(&OT_DENSE, &(ot_case){.ref = ref_table, .hp = &r, .nstate = 2}, w, mv);
            double prod = ref_prod(&r, STEPS);
            for (int k = 0; k < STEPS; k++) {
                double g[N], buf[2][N];
                for (int i = 0; i < N; i++) g[i] = OT_DENSE.grad(k, i);
                optim_var *x = f64_first ? b : a, *y = f64_first ? a : b;
                optim_grad_var p[2] = {{ot_grad_like(x, g, buf[0]), x},
                                       {ot_grad_like(y, g, buf[1]), y}};
                assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
            }
            optim_dtype cdt;
            double c = cache_value(opt, legacy, &cdt);
            assert_eq(cdt, f64_first ? OPTIM_F64 : OPTIM_F32);
            assert_close(c, prod, f64_first ? 1e-13 : 1e-5, 0);
            /* The variable of the other dtype sees the product rounded to the
             * cache's dtype (f32: about 1e-7 relative). */
            assert_var_close(a, w, N, 2e-5, 2e-6);
            assert_var_close(b, w, N, f64_first ? 1e-12 : 1e-6, 1e-7);
            optim_test_free(opt, a, b);
        }
}

/* A step without any variable of the cache's dtype: Keras 3 advances
 * u_product anyway (_backend_update_step); legacy does not (the cache is
 * assigned only by the _prepare_local of its own dtype). */
OPTIM_TEST(test_product_step_without_cache_dtype)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? NADAM(OT_LEGACY) : "\"Nadam\"");
        optim_var *a = new_w(OPTIM_F32, "a"), *b = new_w(OPTIM_F64, "b");
        double g[N], buf[2][N];
        for (int i = 0; i < N; i++) g[i] = OT_DENSE.grad(0, i);
        optim_grad_var p[2] = {{ot_grad_like(a, g, buf[0]), a}, {ot_grad_like(b, g, buf[1]), b}};
        assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
        double c1 = cache_value(opt, legacy, NULL);
        ref r = {legacy, 0.001, 0.9, 0.999, 1e-7, 0.004};
        assert_close(c1, mu(&r, 1), 1e-6, 0);
        /* Step 2: the f64 variable alone. */
        double bw[N];
        for (int i = 0; i < N; i++) bw[i] = optim_var_get(b, i);
        ot_step_dense(opt, b, g);
        double c2 = cache_value(opt, legacy, NULL);
        if (legacy) assert_eq(c2, c1);
        else assert_close(c2, mu(&r, 1) * mu(&r, 2), 1e-6, 0);
        /* In both, b moved using S_2 = (double)cache_1 * mu_2 (legacy) or
         * (double)u_product_2 (Keras 3): check it against the reference. */
        double m[N], v[N], w[N];
        for (int i = 0; i < N; i++) {
            m[i] = (1 - 0.9) * g[i];
            v[i] = (1 - 0.999) * g[i] * g[i];
            w[i] = bw[i];
        }
        ref_state st = {mu(&r, 1) * mu(&r, 2)};
        ref_step(&r, &st, 2, w, m, v, g, N, NULL);
        for (int i = 0; i < N; i++) assert_close(optim_var_get(b, i), w[i], 1e-6, 1e-9);
        assert_eq(optim_iterations(opt), 2);
        optim_test_free(opt, a, b);
    }
}

/* The product is a weight: get_weights after 10 steps, then set_weights on
 * a fresh optimizer (after optim_build) or on the same one rewound, and the
 * next 10 steps are bit-identical to an uninterrupted run. */
OPTIM_TEST(test_resume_bitwise)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            const char *json = ot_gen(NADAM("\"learning_rate\": 0.01"), legacy);
            optim_optimizer *a = optim_test_make(json);
            optim_var *wa = new_w(dt, "w");
            run_steps(a, wa, 0, 10);
            /* Snapshot: weights and the variable. */
            size_t nw = optim_weights_count(a);
            assert_eq(nw, 4);
            assert_string_equal(optim_weight_name(a, 1), cache_name(legacy));
            optim_tensor views[4];
            optim_get_weights(a, views, nw);
            static unsigned char saved[4][N * 8];
            optim_tensor snap[4];
            for (size_t i = 0; i < nw; i++) {
                size_t bytes =
                    (size_t)optim_tensor_numel(&views[i]) * optim_dtype_size(views[i].dtype);
                memcpy(saved[i], views[i].data, bytes);
                snap[i] = views[i];
                snap[i].data = saved[i];
            }
            unsigned char wsave[N * 8];
            memcpy(wsave, optim_var_data(wa), (size_t)N * optim_dtype_size(dt));
            run_steps(a, wa, 10, 20);

            /* A fresh optimizer. */
            optim_optimizer *b = optim_test_make(json);
            optim_var *wb = new_w(dt, "w");
            memcpy(optim_var_data(wb), wsave, (size_t)N * optim_dtype_size(dt));
            assert_ok(optim_build(b, &wb, 1), b);
            assert_ok(optim_set_weights(b, snap, nw), b);
            run_steps(b, wb, 10, 20);
            assert_vars_bitwise(wa, wb);
            assert_vars_bitwise(optim_get_slot(a, wa, "m"), optim_get_slot(b, wb, "m"));
            assert_eq(cache_value(a, legacy, NULL), cache_value(b, legacy, NULL));

            /* The same optimizer, rewound to step 10 after 20 steps, and
             * one rewound after 11 steps: then the cache was last advanced
             * at iterations 10, the value set_weights restores. */
            unsigned char after[N * 8];
            memcpy(after, optim_var_data(wa), (size_t)N * optim_dtype_size(dt));
            memcpy(optim_var_data(wa), wsave, (size_t)N * optim_dtype_size(dt));
            assert_ok(optim_set_weights(a, snap, nw), a);
            run_steps(a, wa, 10, 20);
            assert_memory_equal(optim_var_data(wa), after, (size_t)N * optim_dtype_size(dt));
            optim_optimizer *c = optim_test_make(json);
            optim_var *wc = new_w(dt, "w");
            run_steps(c, wc, 0, 11);
            memcpy(optim_var_data(wc), wsave, (size_t)N * optim_dtype_size(dt));
            assert_ok(optim_set_weights(c, snap, nw), c);
            run_steps(c, wc, 10, 20);
            assert_memory_equal(optim_var_data(wc), after, (size_t)N * optim_dtype_size(dt));
            optim_test_free(c, wc);
            optim_destroy(a);
            optim_test_free(b, wa, wb);
        }
}

/* ---- sparse ------------------------------------------------------------------------ */

OPTIM_TEST(test_sparse_keras3)
{
    static const char *const slots[] = {"m", "v", NULL};
    const char *json = NADAM("\"learning_rate\": 0.05, \"beta_1\": 0.8");
    ot_check_sparse(&OT_SPARSE_LONG, make_case(json, &(ref){0, 0.05, 0.8, 0.999, 1e-7, 0}), 0);
    ot_check_sparse_equals_dense(&OT_SPARSE_LONG, json, slots);
}

/* Legacy: moments decay on every row, w moves on the indexed rows. */
OPTIM_TEST(test_sparse_legacy)
{
    ot_check_sparse(&OT_SPARSE_LONG,
                    make_case(NADAM("\"learning_rate\": 0.05, \"beta_1\": 0.8, " OT_LEGACY),
                              &(ref){1, 0.05, 0.8, 0.999, 1e-7, 0.004}),
                    1);
}

/* Row by row: row 0 indexed at step 1, row 3 at step 2. Keras 3: row 0
 * moves again at step 2. Legacy: row 0's w stays bit-identical but its m
 * and v decay (m * beta_1, v * beta_2). Rows never indexed keep w in both
 * (their moments are zero). */
OPTIM_TEST(test_sparse_untouched_rows)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            ot_rule rules[6] = {{OT_FIRST, OT_LESS, NULL, 0},
                                {OT_NEVER, OT_KEPT, NULL, 0},
                                {OT_ROW, OT_LESS, NULL, 0},
                                {OT_LEFT, OT_LESS, NULL, 0},
                                {OT_LEFT, OT_LESS, "m", 0}};
            if (legacy) {
                rules[3].what = OT_KEPT;
                rules[4] = (ot_rule){OT_LEFT, OT_SCALED, "m", 0.9};
                rules[5] = (ot_rule){OT_LEFT, OT_SCALED, "v", 0.999};
            }
            ot_check_rows_left_out(ot_gen(NADAM("\"learning_rate\": 0.5"), legacy), dt, 6, 1, NULL,
                                   3, (double[]){1}, rules, legacy ? 6 : 5);
        }
}

/* ---- config ------------------------------------------------------------------------- */

static const char *const KERAS3_KEYS[] = {OT_KERAS3_BASE_KEYS, "beta_1", "beta_2", "epsilon"};
static const char *const LEGACY_KEYS[] = {
    "name", "learning_rate", "decay", "beta_1", "beta_2", "epsilon",
};

OPTIM_TEST(test_config_keys_and_defaults)
{
    cJSON *o = ot_config_of("\"Nadam\"", "nadam", OT_KEYS(KERAS3_KEYS));
    ot_expect_numbers(o, "learning_rate", 0.001, "beta_1", 0.9, "beta_2", 0.999, "epsilon", 1e-7,
                      NULL);
    cJSON_Delete(o);

    /* Legacy: decay is 0.004 (the schedule decay), written in the base's
     * decay position (the class replaces the value in place), as
     * OptimizerV2 Nadam.get_config orders it. */
    const char *legacy_cfgs[2] = {
        NADAM(OT_LEGACY),
        NADAM(
            "\"name\": \"Nadam\", \"learning_rate\": 0.001, "
            "\"decay\": 0.004, \"beta_1\": 0.9, \"beta_2\": 0.999, \"epsilon\": 1e-07, " OT_LEGACY),
    };
    for (int c = 0; c < 2; c++) {
        o = ot_config_of(legacy_cfgs[c], NULL, OT_KEYS(LEGACY_KEYS));
        ot_expect_numbers(o, "learning_rate", 0.001, "decay", 0.004, "beta_1", 0.9, "beta_2", 0.999,
                          "epsilon", 1e-7, NULL);
        assert_null(cJSON_GetObjectItemCaseSensitive(
            o, "is_legacy_optimizer")); /* OptimizerV2 refuses it */
        cJSON_Delete(o);
    }
}

OPTIM_TEST(test_config_round_trip)
{
    const char *cfgs[] = {
        NADAM(
            "\"name\": \"mine\", \"learning_rate\": 0.0125, "
            "\"beta_1\": 0.75, \"beta_2\": 0.9375, \"epsilon\": 1e-05, \"clipnorm\": 2.5, \"weight_decay\": 0.01"),
        NADAM("\"learning_rate\": 0.3, \"beta_1\": 0.5, "
              "\"epsilon\": 1e-3, \"clipvalue\": 1.5, \"global_clipnorm\": 3.0, " OT_LEGACY),
        NADAM("\"lr\": 0.25, \"decay\": 0.004, " OT_LEGACY),
        NADAM(OT_LEGACY),
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        ot_check_round_trip(cfgs[c]);
        /* And the same numbers. */
        optim_optimizer *a = optim_test_make(cfgs[c]), *b = optim_test_make(cfgs[c]);
        optim_var *wa = new_w(OPTIM_F64, "w"), *wb = new_w(OPTIM_F64, "w");
        run_steps(a, wa, 0, 5);
        run_steps(b, wb, 0, 5);
        assert_vars_bitwise(wa, wb);
        optim_destroy(a);
        optim_test_free(b, wa, wb);
    }
}

OPTIM_TEST(test_config_refused)
{
    ot_expect_refused_gens(NADAM("\"beta_1\": 1.5"), OPTIM_ERANGE, "beta_1", "[0, 1]");
    ot_expect_refused_gens(NADAM("\"beta_1\": -0.1"), OPTIM_ERANGE, "beta_1", "[0, 1]");
    ot_expect_refused_gens(NADAM("\"beta_2\": 1.0"), OPTIM_ERANGE, "beta_2", "[0, 1)");
    ot_expect_refused_gens(NADAM("\"beta_2\": -1"), OPTIM_ERANGE, "beta_2", "[0, 1)");
    ot_expect_refused_gens(NADAM("\"epsilon\": -1e-7"), OPTIM_ERANGE, "epsilon", "[0, inf)");
    ot_expect_refused_gens(NADAM("\"beta_2\": true"), OPTIM_ETYPE, "beta_2", NULL);
    ot_expect_refused_gens(NADAM("\"momentum\": 0.9"), OPTIM_EKEY, "momentum", NULL);
    optim_optimizer *opt = optim_test_make("\"nadam\"");
    assert_status(optim_set_hyper(opt, "beta_2", 1.0), OPTIM_ERANGE, opt);
    assert_non_null(strstr(optim_errmsg(opt), "[0, 1)"));
    assert_status(optim_set_hyper_fn(opt, "epsilon", ot_value, NULL), OPTIM_ETYPE, opt);
    assert_status(optim_set_hyper(opt, "decay", 0.1), OPTIM_EKEY, opt); /* legacy only */
    optim_destroy(opt);
}

/* ---- threads ----------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", "v", NULL};
    ot_check_threads(NADAM("\"learning_rate\": 0.01, \"global_clipnorm\": 10"), 3, 4, 0, slots);
    ot_check_threads(NADAM("\"learning_rate\": 0.01, \"global_clipnorm\": 10, " OT_LEGACY), 3, 4, 0,
                     slots);
}

int main(void) { return optim_test_run(); }
