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
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 25
#define N 7

static double grad_at(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k; }
static double init_at(int i) { return 0.5 - 0.3 * i; }

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

static double ref_dense(const ref *r, double *w, double *m, double *v, int steps)
{
    ref_state s = {1.0};
    for (int i = 0; i < N; i++) w[i] = init_at(i), m[i] = v[i] = 0;
    for (int k = 0; k < steps; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        ref_advance(r, &s, k + 1);
        ref_step(r, &s, k + 1, w, m, v, g, N, NULL);
    }
    return s.prod;
}

/* ---- helpers -------------------------------------------------------------------------- */


/* Not inlined: GCC's -Wmaybe-uninitialized cannot see that the copy reads
 * only numel(shape) elements of init (a scalar for rank 0). */

/* A dense gradient pair for w from doubles (kept in static buffers per slot). */
static optim_grad_var dense_pair(optim_var *w, const double *g, int slot)
{
    static float gf[4][64];
    static double gd[4][64];
    int64_t n = optim_var_numel(w);
    optim_dtype dt = optim_var_dtype(w);
    assert_true(n <= 64 && slot < 4);
    for (int64_t i = 0; i < n; i++) gf[slot][i] = (float)g[i], gd[slot][i] = g[i];
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)gf[slot] : (void *)gd[slot],
                                                           optim_var_rank(w), optim_var_shape(w))),
                        w};
    return p;
}

static void step_dense(optim_optimizer *opt, optim_var *w, const double *g)
{
    optim_grad_var p = dense_pair(w, g, 0);
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    if (rc) print_error("%s\n", optim_errmsg(opt));
    assert_int_equal(rc, 0);
}

static optim_var *new_w(optim_dtype dt, const char *name)
{
    double init[N];
    for (int i = 0; i < N; i++) init[i] = init_at(i);
    int64_t shape[1] = {N};
    return optim_test_var(name, dt, 1, shape, init);
}

static void run_steps(optim_optimizer *opt, optim_var *w, int from, int to)
{
    for (int k = from; k < to; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        step_dense(opt, w, g);
    }
}

static const char *cache_name(int legacy) { return legacy ? "momentum_cache" : "u_product"; }

/* The value of the optimizer-level weight (found by name among the
 * weights, right after iterations) and its dtype. */
static double cache_value(optim_optimizer *opt, int legacy, optim_dtype *dt)
{
    size_t n = optim_weights_count(opt);
    optim_tensor w[16];
    assert_true(n >= 2 && n <= 16);
    optim_get_weights(opt, w, n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(optim_weight_name(opt, i), cache_name(legacy)) == 0) {
            assert_int_equal(i, 1);
            assert_int_equal(w[i].rank, 0);
            if (dt) *dt = w[i].dtype;
            return w[i].dtype == OPTIM_F32 ? *(const float *)w[i].data : *(const double *)w[i].data;
        }
    print_error("no weight named %s\n", cache_name(legacy));
    fail();
    return NAN;
}

static void check_trajectory(const char *json, const ref *r)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = new_w(dt, "w");
        run_steps(opt, w, 0, STEPS);
        double wr[N], mr[N], vr[N];
        double prod = ref_dense(r, wr, mr, vr, STEPS);
        double rtol = d ? 1e-12 : 2e-5, atol = d ? 1e-13 : 2e-6;
        optim_var *m = optim_get_slot(opt, w, "m"), *v = optim_get_slot(opt, w, "v");
        assert_non_null(m);
        assert_non_null(v);
        for (int i = 0; i < N; i++) {
            assert_close(optim_var_get(w, i), wr[i], rtol, atol);
            assert_close(optim_var_get(m, i), mr[i], rtol, atol);
            assert_close(optim_var_get(v, i), vr[i], rtol, atol);
        }
        optim_dtype cdt;
        assert_close(cache_value(opt, r->legacy, &cdt), prod, d ? 1e-13 : 1e-5, 1e-300);
        assert_int_equal(cdt, dt);
        const char *names[4];
        assert_int_equal(optim_get_slot_names(opt, names, 4), 2);
        assert_string_equal(names[0], "m");
        assert_string_equal(names[1], "v");
        assert_int_equal(optim_weights_count(opt), 4); /* iterations, cache, m, v */
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

/* ---- dense trajectories ------------------------------------------------------------- */

static void test_defaults(void **s)
{
    (void)s;
    ref r = {0, 0.001, 0.9, 0.999, 1e-7, 0};
    check_trajectory("\"nadam\"", &r);
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {}}", &r);
    ref l = {1, 0.001, 0.9, 0.999, 1e-7, 0.004};
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}", &l);
}

static void test_options(void **s)
{
    (void)s;
    ref r = {0, 0.02, 0.8, 0.95, 1e-5, 0};
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.02, "
                     "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-5}}", &r);
    ref l = {1, 0.02, 0.8, 0.95, 1e-5, 0.004};
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.02, "
                     "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-5, "
                     "\"is_legacy_optimizer\": true}}", &l);
    /* beta_1 = 1 keeps m at 0 but the rule stays defined. */
    ref one = {0, 0.01, 1.0, 0.9, 1e-7, 0};
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, "
                     "\"beta_1\": 1.0, \"beta_2\": 0.9}}", &one);
}

/* Legacy Nadam: `decay` is the momentum schedule's (OptimizerV2 Nadam
 * overwrites it with schedule_decay, default 0.004); it never decays the
 * learning rate. A config's decay is ignored, as Keras ignores it. */
static void test_legacy_decay(void **s)
{
    (void)s;
    ref l = {1, 0.01, 0.9, 0.999, 1e-7, 0.004};
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, "
                     "\"decay\": 0.3, \"is_legacy_optimizer\": true}}", &l);
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, "
                     "\"decay\": 0.004, \"is_legacy_optimizer\": true}}", &l);
    /* schedule_decay sets it. */
    ref sd = {1, 0.01, 0.9, 0.999, 1e-7, 0.05};
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, "
                     "\"schedule_decay\": 0.05, \"is_legacy_optimizer\": true}}", &sd);
    check_trajectory("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, "
                     "\"schedule_decay\": 0.05, \"decay\": 0.9, \"is_legacy_optimizer\": true}}", &sd);
    /* get_config writes the schedule decay as decay, no schedule_decay. */
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Nadam\", \"config\": {\"schedule_decay\": 0.05, "
                                "\"is_legacy_optimizer\": true}}");
    char *js = optim_get_config(opt);
    cJSON *o = cJSON_Parse(js);
    assert_true(cJSON_GetObjectItemCaseSensitive(o, "decay")->valuedouble == 0.05);
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "schedule_decay"));
    cJSON_Delete(o);
    optim_free(js);
    optim_destroy(opt);
    /* Refused: negative (OptimizerV2: "decay cannot be less than 0"), not a
     * number, and in Keras 3 at all. */
    optim_error err;
    assert_int_equal(optim_from_json(&opt, "{\"class_name\": \"Nadam\", \"config\": {\"schedule_decay\": -0.1, "
                                           "\"is_legacy_optimizer\": true}}", &err),
                     OPTIM_ERANGE);
    assert_non_null(strstr(err.msg, "schedule_decay"));
    assert_non_null(strstr(err.msg, "[0, inf)"));
    assert_int_equal(optim_from_json(&opt, "{\"class_name\": \"Nadam\", \"config\": {\"schedule_decay\": null, "
                                           "\"is_legacy_optimizer\": true}}", &err),
                     OPTIM_ERANGE);
    assert_int_equal(optim_from_json(&opt, "{\"class_name\": \"Nadam\", \"config\": {\"schedule_decay\": 0.004}}", &err),
                     OPTIM_EKEY);
    assert_non_null(strstr(err.msg, "schedule_decay"));
}

static void test_legacy_epsilon_fallback(void **s)
{
    (void)s;
    ref l = {1, 0.01, 0.9, 0.999, 1e-7, 0.004};
    const char *cfgs[2] = {
        "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"epsilon\": 0, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"epsilon\": null, \"is_legacy_optimizer\": true}}",
    };
    for (int c = 0; c < 2; c++) {
        check_trajectory(cfgs[c], &l);
        optim_optimizer *opt = optim_test_make(cfgs[c]);
        char *js = optim_get_config(opt);
        cJSON *o = cJSON_Parse(js);
        assert_true(cJSON_GetObjectItemCaseSensitive(o, "epsilon")->valuedouble == 1e-7);
        cJSON_Delete(o);
        optim_free(js);
        optim_destroy(opt);
    }
    /* Keras 3 uses 0 as given: element 0 has a zero gradient at step 0,
     * so its update is 0 / 0. */
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Nadam\", \"config\": {\"epsilon\": 0.0}}");
    optim_var *w = new_w(OPTIM_F64, "w");
    run_steps(opt, w, 0, 1);
    assert_true(isnan(optim_var_get(w, 0)));
    assert_false(isnan(optim_var_get(w, 1)));
    optim_destroy(opt);
    optim_var_destroy(w);
}

static double beta_fn(void *user) { return *(double *)user; }

/* beta_1 and beta_2 are hypers: a callable beta_1 enters the schedule
 * product with its value at each step. */
static void test_dynamic_beta(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"
                                           : "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01}}");
        double b1 = 0.9;
        assert_int_equal(optim_set_hyper_fn(opt, "beta_1", beta_fn, &b1), 0);
        double w[N], m[N] = {0}, v[N] = {0};
        for (int i = 0; i < N; i++) w[i] = init_at(i);
        optim_var *var = new_w(OPTIM_F64, "w");
        ref_state st = {1.0};
        for (int k = 0; k < 10; k++) {
            b1 = 0.6 + 0.03 * k;
            ref r = {legacy, 0.01, b1, 0.999, 1e-7, 0.004};
            double g[N];
            for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
            ref_advance(&r, &st, k + 1);
            ref_step(&r, &st, k + 1, w, m, v, g, N, NULL);
            step_dense(opt, var, g);
        }
        for (int i = 0; i < N; i++) assert_close(optim_var_get(var, i), w[i], 1e-12, 1e-13);
        assert_close(cache_value(opt, legacy, NULL), st.prod, 1e-13, 0);
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

/* ---- Keras's own values --------------------------------------------------------------- */

static void test_keras_golden(void **s)
{
    (void)s;
    /* keras/src/optimizers/nadam_test.py test_single_step. */
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.5}}");
    double init[4] = {1, 2, 3, 4}, g4[4] = {1, 6, 7, 2};
    int64_t four = 4;
    optim_var *v4 = optim_test_var("v", OPTIM_F32, 1, &four, init);
    step_dense(opt, v4, g4);
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(v4, i), 0.4686 + i, 1e-4, 1e-4);
    optim_destroy(opt);
    optim_var_destroy(v4);

    /* test_correctness_with_golden. */
    static const double golden[5][10] = {
        {0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281},
        {-0.1738, -0.1731, -0.1726, -0.1723, -0.1721, -0.172, -0.1719, -0.1718, -0.1718, -0.1717},
        {-0.7115, -0.7103, -0.7096, -0.7092, -0.709, -0.7088, -0.7086, -0.7085, -0.7085, -0.7084},
        {-1.2335, -1.2322, -1.2313, -1.2309, -1.2306, -1.2304, -1.2302, -1.2301, -1.23, -1.2299},
        {-1.7492, -1.7478, -1.7469, -1.7464, -1.7461, -1.7459, -1.7457, -1.7456, -1.7455, -1.7454}};
    opt = optim_test_make("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.5, \"beta_1\": 0.5, "
               "\"beta_2\": 0.67, \"epsilon\": 1e-5}}");
    double ones[10], first[10], grads[10];
    for (int i = 0; i < 10; i++) ones[i] = 1, first[i] = 0.01, grads[i] = (float)(0.1 * (i + 1));
    int64_t ten = 10;
    optim_var *x = optim_test_var("x", OPTIM_F32, 1, &ten, ones);
    step_dense(opt, x, first);
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 10; i++) assert_close(optim_var_get(x, i), golden[k][i], 5e-4, 5e-4);
        step_dense(opt, x, grads);
    }
    optim_destroy(opt);
    optim_var_destroy(x);

    /* The legacy docstring: lr 0.2, var 10, loss var^2 / 2: one step -> 9.8. */
    opt = optim_test_make("{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.2, \"is_legacy_optimizer\": true}}");
    double ten_d = 10.0;
    optim_var *v1 = optim_test_var("var1", OPTIM_F32, 0, NULL, &ten_d);
    step_dense(opt, v1, &ten_d);
    assert_close(optim_var_get(v1, 0), 9.8, 0, 0.05);
    optim_destroy(opt);
    optim_var_destroy(v1);
}

/* keras test_weight_decay (Keras 3). */
static void test_keras_weight_decay(void **s)
{
    (void)s;
    double two = 2.0;
    optim_var *v1 = optim_test_var("var1", OPTIM_F32, 0, NULL, &two);
    optim_var *v2 = optim_test_var("exclude", OPTIM_F32, 0, NULL, &two);
    optim_var *v3 = optim_test_var("var3", OPTIM_F32, 0, NULL, &two);
    const char *cfg = "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 1.0, \"weight_decay\": 0.004}}";
    optim_optimizer *o1 = optim_test_make(cfg), *o2 = optim_test_make(cfg), *o3 = optim_test_make(cfg);
    const char *pat[1] = {"exclude"};
    assert_int_equal(optim_exclude_from_weight_decay(o2, NULL, 0, pat, 1), 0);
    assert_int_equal(optim_exclude_from_weight_decay(o3, &v3, 1, NULL, 0), 0);
    float zf = 0;
    optim_tensor gz = optim_tensor_make(OPTIM_F32, &zf, 0, NULL);
    optim_grad_var p1[1] = {{optim_grad_dense(gz), v1}};
    optim_grad_var p2[2] = {{optim_grad_dense(gz), v1}, {optim_grad_dense(gz), v2}};
    optim_grad_var p3[2] = {{optim_grad_dense(gz), v1}, {optim_grad_dense(gz), v3}};
    assert_int_equal(optim_apply_gradients(o1, p1, 1, 0), 0);
    assert_int_equal(optim_apply_gradients(o2, p2, 2, 0), 0);
    assert_int_equal(optim_apply_gradients(o3, p3, 2, 0), 0);
    assert_close(optim_var_get(v1, 0), 1.9760959, 0, 1e-6);
    assert_close(optim_var_get(v2, 0), 2.0, 0, 1e-6);
    assert_close(optim_var_get(v3, 0), 2.0, 0, 1e-6);
    optim_destroy(o1);
    optim_destroy(o2);
    optim_destroy(o3);
    optim_var_destroy(v1);
    optim_var_destroy(v2);
    optim_var_destroy(v3);
}

/* ---- float32 order of operations ------------------------------------------------------- */

/* Three steps on one float32 element with each generation's operations
 * written out in float, in the order of its source (Keras 3 nadam.py
 * _backend_update_step + update_step; legacy nadam.py _prepare_local +
 * _resource_apply_dense). The library must agree bit for bit, the schedule
 * product included. */
static void test_f32_operation_order(void **s)
{
    (void)s;
    const float b1 = 0.9f, b2 = 0.999f, lr = 0.01f, eps = 1e-7f, sd = 0.004f;
    const float gs[3] = {0.3f, -1.7f, 0.05f};
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"
                                           : "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01}}");
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
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, &g, 0, NULL)), var};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            float got = *(float *)optim_var_data(var);
            float gm = *(float *)optim_var_data(optim_get_slot(opt, var, "m"));
            float gv = *(float *)optim_var_data(optim_get_slot(opt, var, "v"));
            float gc = (float)cache_value(opt, legacy, NULL);
            assert_memory_equal(&got, &w, sizeof w);
            assert_memory_equal(&gm, &m, sizeof m);
            assert_memory_equal(&gv, &v, sizeof v);
            assert_memory_equal(&gc, &prod, sizeof prod);
        }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

/* ---- the schedule product: once per step, dtype of the first variable ---------------- */

/* A float32 and a float64 variable in the same steps: the product is
 * advanced once per step (not once per dtype), kept in the first
 * variable's dtype, and both variables follow the reference. */
static void test_product_once_per_step(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int f64_first = 0; f64_first < 2; f64_first++) {
            optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"
                                               : "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01}}");
            optim_var *a = new_w(OPTIM_F32, "a"), *b = new_w(OPTIM_F64, "b");
            ref r = {legacy, 0.01, 0.9, 0.999, 1e-7, 0.004};
            double w[N], m[N], v[N];
            double prod = ref_dense(&r, w, m, v, STEPS);
            for (int k = 0; k < STEPS; k++) {
                double g[N];
                for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
                optim_grad_var p[2] = {dense_pair(f64_first ? b : a, g, 0), dense_pair(f64_first ? a : b, g, 1)};
                assert_int_equal(optim_apply_gradients(opt, p, 2, 0), 0);
            }
            optim_dtype cdt;
            double c = cache_value(opt, legacy, &cdt);
            assert_int_equal(cdt, f64_first ? OPTIM_F64 : OPTIM_F32);
            assert_close(c, prod, f64_first ? 1e-13 : 1e-5, 0);
            /* The variable of the other dtype sees the product rounded to the
             * cache's dtype (f32: about 1e-7 relative). */
            for (int i = 0; i < N; i++) {
                assert_close(optim_var_get(a, i), w[i], 2e-5, 2e-6);
                assert_close(optim_var_get(b, i), w[i], f64_first ? 1e-12 : 1e-6, 1e-7);
            }
            optim_destroy(opt);
            optim_var_destroy(a);
            optim_var_destroy(b);
        }
}

/* A step without any variable of the cache's dtype: Keras 3 advances
 * u_product anyway (_backend_update_step); legacy does not (the cache is
 * assigned only by the _prepare_local of its own dtype). */
static void test_product_step_without_cache_dtype(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}"
                                           : "\"Nadam\"");
        optim_var *a = new_w(OPTIM_F32, "a"), *b = new_w(OPTIM_F64, "b");
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(0, i);
        optim_grad_var p[2] = {dense_pair(a, g, 0), dense_pair(b, g, 1)};
        assert_int_equal(optim_apply_gradients(opt, p, 2, 0), 0);
        double c1 = cache_value(opt, legacy, NULL);
        ref r = {legacy, 0.001, 0.9, 0.999, 1e-7, 0.004};
        assert_close(c1, mu(&r, 1), 1e-6, 0);
        /* Step 2: the f64 variable alone. */
        double bw[N];
        for (int i = 0; i < N; i++) bw[i] = optim_var_get(b, i);
        step_dense(opt, b, g);
        double c2 = cache_value(opt, legacy, NULL);
        if (legacy) assert_true(c2 == c1);
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
        assert_int_equal(optim_iterations(opt), 2);
        optim_destroy(opt);
        optim_var_destroy(a);
        optim_var_destroy(b);
    }
}

/* The product is a weight: get_weights after 10 steps, then set_weights on
 * a fresh optimizer (after optim_build) or on the same one rewound, and the
 * next 10 steps are bit-identical to an uninterrupted run. */
static void test_resume_bitwise(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            const char *json = legacy ? "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"
                                      : "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01}}";
            optim_optimizer *a = optim_test_make(json);
            optim_var *wa = new_w(dt, "w");
            run_steps(a, wa, 0, 10);
            /* Snapshot: weights and the variable. */
            size_t nw = optim_weights_count(a);
            assert_int_equal(nw, 4);
            assert_string_equal(optim_weight_name(a, 1), cache_name(legacy));
            optim_tensor views[4];
            optim_get_weights(a, views, nw);
            static unsigned char saved[4][N * 8];
            optim_tensor snap[4];
            for (size_t i = 0; i < nw; i++) {
                size_t bytes = (size_t)optim_tensor_numel(&views[i]) * optim_dtype_size(views[i].dtype);
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
            assert_int_equal(optim_build(b, &wb, 1), 0);
            assert_int_equal(optim_set_weights(b, snap, nw), 0);
            run_steps(b, wb, 10, 20);
            assert_memory_equal(optim_var_data(wa), optim_var_data(wb), (size_t)N * optim_dtype_size(dt));
            assert_memory_equal(optim_var_data(optim_get_slot(a, wa, "m")),
                                optim_var_data(optim_get_slot(b, wb, "m")), (size_t)N * optim_dtype_size(dt));
            assert_true(cache_value(a, legacy, NULL) == cache_value(b, legacy, NULL));

            /* The same optimizer, rewound to step 10 after 20 steps, and
             * one rewound after 11 steps: then the cache was last advanced
             * at iterations 10, the value set_weights restores. */
            unsigned char after[N * 8];
            memcpy(after, optim_var_data(wa), (size_t)N * optim_dtype_size(dt));
            memcpy(optim_var_data(wa), wsave, (size_t)N * optim_dtype_size(dt));
            assert_int_equal(optim_set_weights(a, snap, nw), 0);
            run_steps(a, wa, 10, 20);
            assert_memory_equal(optim_var_data(wa), after, (size_t)N * optim_dtype_size(dt));
            optim_optimizer *c = optim_test_make(json);
            optim_var *wc = new_w(dt, "w");
            run_steps(c, wc, 0, 11);
            memcpy(optim_var_data(wc), wsave, (size_t)N * optim_dtype_size(dt));
            assert_int_equal(optim_set_weights(c, snap, nw), 0);
            run_steps(c, wc, 10, 20);
            assert_memory_equal(optim_var_data(wc), after, (size_t)N * optim_dtype_size(dt));
            optim_destroy(c);
            optim_var_destroy(wc);
            optim_destroy(a);
            optim_destroy(b);
            optim_var_destroy(wa);
            optim_var_destroy(wb);
        }
}

/* ---- sparse ------------------------------------------------------------------------ */

#define ROWS 6
#define COLS 3
#define SP_STEPS 24
#define NIDX 4

static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
/* Rows 0..4 get gradients; row 5 never does. Duplicates in every step. */
static int64_t sp_index(int k, int j)
{
    static const int64_t pat[3][NIDX] = {{1, 4, 1, 1}, {0, 4, 3, 4}, {2, 2, 3, 1}};
    return pat[k % 3][j];
}
static double sp_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c) - 0.02 * k; }

static optim_var *run_sparse(optim_optimizer *opt, optim_dtype dt, int as_dense, int steps)
{
    double init[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) init[r * COLS + c] = table_init(r, c);
    int64_t shape[2] = {ROWS, COLS};
    optim_var *v = optim_test_var("table", dt, 2, shape, init);
    for (int k = 0; k < steps; k++) {
        int64_t idx[NIDX];
        double vals[NIDX * COLS], dense[ROWS * COLS] = {0};
        float fv[NIDX * COLS], fd[ROWS * COLS] = {0};
        for (int j = 0; j < NIDX; j++) {
            idx[j] = sp_index(k, j);
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = sp_val(k, j, c);
                fv[j * COLS + c] = (float)sp_val(k, j, c);
            }
        }
        for (int j = 0; j < NIDX; j++)
            for (int c = 0; c < COLS; c++) {
                dense[idx[j] * COLS + c] += vals[j * COLS + c];
                fd[idx[j] * COLS + c] += fv[j * COLS + c];
            }
        int f = dt == OPTIM_F32;
        int64_t vs[2] = {NIDX, COLS};
        optim_grad_var p = {as_dense ? optim_grad_dense(optim_tensor_make(dt, f ? (void *)fd : (void *)dense, 2, shape))
                                     : optim_grad_sparse(idx, NIDX, optim_tensor_make(dt, f ? (void *)fv : (void *)vals, 2, vs)),
                            v};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        if (rc) print_error("%s\n", optim_errmsg(opt));
        assert_int_equal(rc, 0);
    }
    return v;
}

static void assert_vars_bitwise(optim_var *a, optim_var *b)
{
    assert_int_equal(optim_var_numel(a), optim_var_numel(b));
    assert_memory_equal(optim_var_data(a), optim_var_data(b),
                        (size_t)optim_var_numel(a) * optim_dtype_size(optim_var_dtype(a)));
}

static void ref_sparse(const ref *r, int rows_only, int steps, double w[ROWS][COLS],
                       double m[ROWS][COLS], double v[ROWS][COLS])
{
    ref_state st = {1.0};
    for (int i = 0; i < ROWS; i++)
        for (int c = 0; c < COLS; c++) w[i][c] = table_init(i, c), m[i][c] = v[i][c] = 0;
    for (int k = 0; k < steps; k++) {
        double g[ROWS][COLS] = {{0}};
        int touched[ROWS] = {0};
        for (int j = 0; j < NIDX; j++) {
            touched[sp_index(k, j)] = 1;
            for (int c = 0; c < COLS; c++) g[sp_index(k, j)][c] += sp_val(k, j, c);
        }
        ref_advance(r, &st, k + 1);
        for (int i = 0; i < ROWS; i++) {
            int t[COLS];
            for (int c = 0; c < COLS; c++) t[c] = touched[i];
            ref_step(r, &st, k + 1, w[i], m[i], v[i], g[i], COLS, rows_only ? t : NULL);
        }
    }
}

static void check_sparse(const char *json, const ref *r, int rows_only)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *var = run_sparse(opt, dt, 0, SP_STEPS);
        double w[ROWS][COLS], m[ROWS][COLS], v[ROWS][COLS];
        ref_sparse(r, rows_only, SP_STEPS, w, m, v);
        optim_var *ms = optim_get_slot(opt, var, "m"), *vs = optim_get_slot(opt, var, "v");
        double rtol = d ? 1e-12 : 2e-5, atol = d ? 1e-13 : 2e-6;
        for (int i = 0; i < ROWS; i++)
            for (int c = 0; c < COLS; c++) {
                assert_close(optim_var_get(var, i * COLS + c), w[i][c], rtol, atol);
                assert_close(optim_var_get(ms, i * COLS + c), m[i][c], rtol, atol);
                assert_close(optim_var_get(vs, i * COLS + c), v[i][c], rtol, atol);
            }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

static void test_sparse_keras3(void **s)
{
    (void)s;
    const char *json = "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.05, \"beta_1\": 0.8}}";
    ref r = {0, 0.05, 0.8, 0.999, 1e-7, 0};
    check_sparse(json, &r, 0);
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *o1 = optim_test_make(json), *o2 = optim_test_make(json);
        optim_var *sv = run_sparse(o1, dt, 0, SP_STEPS), *dv = run_sparse(o2, dt, 1, SP_STEPS);
        assert_vars_bitwise(sv, dv);
        assert_vars_bitwise(optim_get_slot(o1, sv, "m"), optim_get_slot(o2, dv, "m"));
        assert_vars_bitwise(optim_get_slot(o1, sv, "v"), optim_get_slot(o2, dv, "v"));
        optim_destroy(o1);
        optim_destroy(o2);
        optim_var_destroy(sv);
        optim_var_destroy(dv);
    }
}

static void test_sparse_legacy(void **s)
{
    (void)s;
    const char *json = "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.05, \"beta_1\": 0.8, "
                       "\"is_legacy_optimizer\": true}}";
    ref r = {1, 0.05, 0.8, 0.999, 1e-7, 0.004};
    check_sparse(json, &r, 1);
}

/* Row by row: row 0 indexed at step 1, row 3 at step 2. Keras 3: row 0
 * moves again at step 2. Legacy: row 0's w stays bit-identical but its m
 * and v decay (m * beta_1, v * beta_2). Rows never indexed keep w in both
 * (their moments are zero). */
static void test_sparse_untouched_rows(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.5, \"is_legacy_optimizer\": true}}"
                                               : "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.5}}");
            double init[6] = {1, 2, 3, 4, 5, 6};
            int64_t shape[2] = {6, 1}, vs[2] = {1, 1};
            optim_var *v = optim_test_var("e", dt, 2, shape, init);
            int64_t i0 = 0, i3 = 3;
            double one = 1.0;
            float onef = 1.0f;
            void *val = d ? (void *)&one : (void *)&onef;
            optim_grad_var p = {optim_grad_sparse(&i0, 1, optim_tensor_make(dt, val, 2, vs)), v};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            double row0 = optim_var_get(v, 0);
            optim_var *ms = optim_get_slot(opt, v, "m"), *vsl = optim_get_slot(opt, v, "v");
            double m0 = optim_var_get(ms, 0), v0 = optim_var_get(vsl, 0);
            assert_true(row0 < 1.0);
            p.grad.sparse.indices = &i3;
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            if (legacy) {
                assert_true(optim_var_get(v, 0) == row0);
                if (d) {
                    assert_true(optim_var_get(ms, 0) == m0 * 0.9);
                    assert_true(optim_var_get(vsl, 0) == v0 * 0.999);
                } else {
                    assert_true((float)optim_var_get(ms, 0) == (float)m0 * 0.9f);
                    assert_true((float)optim_var_get(vsl, 0) == (float)v0 * 0.999f);
                }
            } else {
                assert_true(optim_var_get(v, 0) < row0);
                assert_true(optim_var_get(ms, 0) < m0);
            }
            for (int r = 1; r < 6; r++)
                if (r != 3) assert_true(optim_var_get(v, r) == init[r]);
            assert_true(optim_var_get(v, 3) < 4.0);
            optim_destroy(opt);
            optim_var_destroy(v);
        }
}

/* ---- config ------------------------------------------------------------------------- */

static const char *const KERAS3_KEYS[] = {
    "name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue",
    "use_ema", "ema_momentum", "ema_overwrite_frequency", "loss_scale_factor",
    "gradient_accumulation_steps", "beta_1", "beta_2", "epsilon",
};
static const char *const LEGACY_KEYS[] = {
    "name", "learning_rate", "decay", "beta_1", "beta_2", "epsilon",
};

static cJSON *config_of(optim_optimizer *opt)
{
    char *js = optim_get_config(opt);
    assert_non_null(js);
    cJSON *o = cJSON_Parse(js);
    optim_free(js);
    assert_non_null(o);
    return o;
}

/* Exactly these keys (in any order: see the note on decay below). */
static void assert_keys(const cJSON *o, const char *const *keys, size_t n)
{
    size_t count = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, o)
    {
        int known = 0;
        for (size_t k = 0; k < n; k++) known |= strcmp(it->string, keys[k]) == 0;
        if (!known) print_error("unexpected key '%s'\n", it->string);
        assert_true(known);
        count++;
    }
    assert_int_equal(count, n);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_config_keys_and_defaults(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("\"Nadam\"");
    cJSON *o = config_of(opt);
    assert_keys(o, KERAS3_KEYS, sizeof KERAS3_KEYS / sizeof *KERAS3_KEYS);
    /* Keras 3 order: the base keys, then beta_1, beta_2, epsilon. */
    const cJSON *it = o->child;
    for (size_t k = 0; k < sizeof KERAS3_KEYS / sizeof *KERAS3_KEYS; k++, it = it->next)
        assert_string_equal(it->string, KERAS3_KEYS[k]);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, "nadam");
    assert_true(num(o, "learning_rate") == 0.001);
    assert_true(num(o, "beta_1") == 0.9);
    assert_true(num(o, "beta_2") == 0.999);
    assert_true(num(o, "epsilon") == 1e-7);
    cJSON_Delete(o);
    optim_destroy(opt);

    /* Legacy: decay is 0.004 (the schedule decay), written in the base's
     * decay position (the class replaces the value in place), as
     * OptimizerV2 Nadam.get_config orders it. */
    static const char *const LEGACY_ORDER[] = {
        "name", "learning_rate", "decay", "beta_1", "beta_2", "epsilon",
    };
    const char *legacy_cfgs[2] = {
        "{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Nadam\", \"config\": {\"name\": \"Nadam\", \"learning_rate\": 0.001, "
        "\"decay\": 0.004, \"beta_1\": 0.9, \"beta_2\": 0.999, \"epsilon\": 1e-07, "
        "\"is_legacy_optimizer\": true}}",
    };
    for (int c = 0; c < 2; c++) {
        opt = optim_test_make(legacy_cfgs[c]);
        o = config_of(opt);
        assert_keys(o, LEGACY_KEYS, sizeof LEGACY_KEYS / sizeof *LEGACY_KEYS);
        it = o->child;
        for (size_t k = 0; k < sizeof LEGACY_ORDER / sizeof *LEGACY_ORDER; k++, it = it->next)
            assert_string_equal(it->string, LEGACY_ORDER[k]);
        assert_true(num(o, "learning_rate") == 0.001);
        assert_true(num(o, "decay") == 0.004);
        assert_true(num(o, "beta_1") == 0.9);
        assert_true(num(o, "beta_2") == 0.999);
        assert_true(num(o, "epsilon") == 1e-7);
        assert_null(cJSON_GetObjectItemCaseSensitive(o, "is_legacy_optimizer")); /* OptimizerV2 refuses it */
        cJSON_Delete(o);
        optim_destroy(opt);
    }
}

static void test_config_round_trip(void **s)
{
    (void)s;
    const char *cfgs[] = {
        "{\"class_name\": \"Nadam\", \"config\": {\"name\": \"mine\", \"learning_rate\": 0.0125, "
        "\"beta_1\": 0.75, \"beta_2\": 0.9375, \"epsilon\": 1e-05, \"clipnorm\": 2.5, \"weight_decay\": 0.01}}",
        "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.3, \"beta_1\": 0.5, "
        "\"epsilon\": 1e-3, \"clipvalue\": 1.5, \"global_clipnorm\": 3.0, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Nadam\", \"config\": {\"lr\": 0.25, \"decay\": 0.004, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}",
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        optim_optimizer *a = optim_test_make(cfgs[c]);
        char *sa = optim_serialize(a);
        assert_non_null(sa);
        optim_optimizer *b = optim_test_make(sa);
        char *sb = optim_serialize(b);
        assert_string_equal(sa, sb);
        /* And the same numbers. */
        optim_var *wa = new_w(OPTIM_F64, "w"), *wb = new_w(OPTIM_F64, "w");
        run_steps(a, wa, 0, 5);
        run_steps(b, wb, 0, 5);
        assert_vars_bitwise(wa, wb);
        optim_free(sa);
        optim_free(sb);
        optim_destroy(a);
        optim_destroy(b);
        optim_var_destroy(wa);
        optim_var_destroy(wb);
    }
}

static void refused(const char *json, int code, const char *const *needles)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("%s: rc %d (%s)\n", json, rc, err.msg);
    assert_int_equal(rc, code);
    assert_null(opt);
    for (; *needles; needles++) {
        if (!strstr(err.msg, *needles)) print_error("'%s' not in '%s'\n", *needles, err.msg);
        assert_non_null(strstr(err.msg, *needles));
    }
}

static void test_config_refused(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *tail = legacy ? ", \"is_legacy_optimizer\": true}}" : "}}";
        char json[256];
#define REFUSE(body, code, ...)                                                                \
    do {                                                                                       \
        const char *needles[] = {__VA_ARGS__, NULL};                                           \
        snprintf(json, sizeof json, "{\"class_name\": \"Nadam\", \"config\": {%s%s", body, tail); \
        refused(json, code, needles);                                                          \
    } while (0)
        REFUSE("\"beta_1\": 1.5", OPTIM_ERANGE, "beta_1", "[0, 1]");
        REFUSE("\"beta_1\": -0.1", OPTIM_ERANGE, "beta_1", "[0, 1]");
        REFUSE("\"beta_2\": 1.0", OPTIM_ERANGE, "beta_2", "[0, 1)");
        REFUSE("\"beta_2\": -1", OPTIM_ERANGE, "beta_2", "[0, 1)");
        REFUSE("\"epsilon\": -1e-7", OPTIM_ERANGE, "epsilon", "[0, inf)");
        REFUSE("\"beta_2\": true", OPTIM_ETYPE, "beta_2");
        REFUSE("\"momentum\": 0.9", OPTIM_EKEY, "momentum");
#undef REFUSE
    }
    optim_optimizer *opt = optim_test_make("\"nadam\"");
    assert_int_equal(optim_set_hyper(opt, "beta_2", 1.0), OPTIM_ERANGE);
    assert_non_null(strstr(optim_errmsg(opt), "[0, 1)"));
    assert_int_equal(optim_set_hyper_fn(opt, "epsilon", beta_fn, NULL), OPTIM_ETYPE);
    assert_int_equal(optim_set_hyper(opt, "decay", 0.1), OPTIM_EKEY); /* legacy only */
    optim_destroy(opt);
}

/* ---- threads ----------------------------------------------------------------------- */

static void test_threads_bitwise(void **s)
{
    (void)s;
    const int64_t n = 100003;
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * i);
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_var *vars[2];
        for (int t = 0; t < 2; t++) {
            optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"global_clipnorm\": 10, \"is_legacy_optimizer\": true}}"
                                               : "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.01, \"global_clipnorm\": 10}}");
            assert_int_equal(optim_set_num_threads(opt, t ? 3 : 1), 0);
            vars[t] = optim_test_var("big", OPTIM_F32, 1, &n, init);
            for (int k = 0; k < 4; k++) {
                for (int64_t i = 0; i < n; i++) g[i] = (float)cos(0.37 * i + k);
                optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), vars[t]};
                assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            }
            optim_destroy(opt);
        }
        assert_vars_bitwise(vars[0], vars[1]);
        optim_var_destroy(vars[0]);
        optim_var_destroy(vars[1]);
    }
    free(init);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_legacy_decay),
        cmocka_unit_test(test_legacy_epsilon_fallback),
        cmocka_unit_test(test_dynamic_beta),
        cmocka_unit_test(test_keras_golden),
        cmocka_unit_test(test_keras_weight_decay),
        cmocka_unit_test(test_f32_operation_order),
        cmocka_unit_test(test_product_once_per_step),
        cmocka_unit_test(test_product_step_without_cache_dtype),
        cmocka_unit_test(test_resume_bitwise),
        cmocka_unit_test(test_sparse_keras3),
        cmocka_unit_test(test_sparse_legacy),
        cmocka_unit_test(test_sparse_untouched_rows),
        cmocka_unit_test(test_config_keys_and_defaults),
        cmocka_unit_test(test_config_round_trip),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
