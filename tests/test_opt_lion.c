/* Lion (Keras 3 only) against an independent double-precision reference
 * written from Chen et al. 2023 / keras/src/optimizers/lion.py:
 *
 *     w = w - lr * sign(beta_1 * m + (1 - beta_1) * g)
 *     m = beta_2 * m + (1 - beta_2) * g
 *
 * Trajectories in f32 and f64, sign(0) = 0, Keras 3 weight decay, dynamic
 * hyperparameters, sparse gradients (the dense equivalent, duplicates
 * summed), the Keras test golden values, config keys, defaults, round trip,
 * bad values, and thread-count independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 25
#define N 7
#define LION(cfg) "{\"class_name\": \"Lion\", \"config\": {" cfg "}}"

/* Deterministic gradients of both signs; element 0 is 0 at step 0 and
 * element 3 is 0 at every step (the update is then sign(beta_1 * m) = 0). */
static double grad_at(int k, int i)
{
    if (i == 3 || (i == 0 && k == 0)) return 0.0;
    return OT_DENSE.grad(k, i);
}
static double init_at(int i) { return OT_DENSE.init(i); }
static const ot_dense DENSE = {N, STEPS, init_at, grad_at, 0, NULL};

typedef struct ref {
    double lr, beta_1, beta_2, wd;
} ref;

static double sgn(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }

/* The smallest |c| / scale seen over the non-zero arguments of sign (how
 * far the data stays from a sign flip), over the reference runs. */
static double margin = INFINITY;

/* The published rule in double precision, with Keras 3's decoupled weight
 * decay before the update; state m. */
static void ref_step(const void *r_, int k, double *w, double *const *st, const double *g, int n)
{
    const ref *r = r_;
    double *m = st[0];
    for (int i = 0; i < n; i++) {
        w[i] -= w[i] * r->wd * r->lr;
        double c = r->beta_1 * m[i] + (1 - r->beta_1) * g[i];
        double scale = fabs(r->beta_1 * m[i]) + fabs((1 - r->beta_1) * g[i]);
        if (scale > 0 && fabs(c) / scale < margin) margin = fabs(c) / scale;
        w[i] -= r->lr * sgn(c);
        m[i] = r->beta_2 * m[i] + (1 - r->beta_2) * g[i];
    }
}

static ot_case make_case(const char *json, const ref *r)
{
    return (ot_case){json, ref_step, r, 1, {"m"}, .tol = {1e-5, 1e-6, 1e-12, 1e-13}};
}

static void check_trajectory(const char *json, const ref *r)
{
    margin = INFINITY;
    ot_check_dense(&DENSE, make_case(json, r));
    /* The test data keeps every non-zero sign argument well away from 0,
     * so f32 rounding cannot flip a sign. */
    assert_gt(margin, 1e-4);
    /* Element 3 never had a gradient: m = 0, sign(0) = 0, w unchanged
     * (up to weight decay). */
    for (int d = 0; d < 2 && r->wd == 0; d++) {
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = ot_run_dense(opt, &DENSE, d ? OPTIM_F64 : OPTIM_F32);
        assert_eq(optim_var_get(w, 3), (d ? DENSE.init(3) : (double)(float)DENSE.init(3)));
        optim_test_free(opt, w);
    }
}

OPTIM_TEST(test_defaults)
{
    ref r = {0.001, 0.9, 0.99, 0};
    check_trajectory("\"lion\"", &r);
    check_trajectory(LION(""), &r);
}

OPTIM_TEST(test_options)
{
    ref r = {0.05, 0.7, 0.95, 0};
    check_trajectory(LION("\"learning_rate\": 0.05, "
                          "\"beta_1\": 0.7, \"beta_2\": 0.95"),
                     &r);
    /* beta_1 = 1 is allowed (the range is (0, 1]): sign(m), m from beta_2. */
    ref one = {0.01, 1.0, 0.5, 0};
    check_trajectory(LION("\"learning_rate\": 0.01, "
                          "\"beta_1\": 1.0, \"beta_2\": 0.5"),
                     &one);
}

OPTIM_TEST(test_weight_decay_trajectory)
{
    ref r = {0.02, 0.9, 0.99, 0.3};
    check_trajectory(LION("\"learning_rate\": 0.02, "
                          "\"weight_decay\": 0.3"),
                     &r);
}

/* sign(0) = 0: an exact zero argument leaves w unchanged (beta_1 = beta_2 =
 * 0.5: g = 1 gives m = 0.5; then g = -0.5 gives 0.25 - 0.25 = 0). */
OPTIM_TEST(test_sign_zero)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(LION("\"learning_rate\": 0.25, "
                                                    "\"beta_1\": 0.5, \"beta_2\": 0.5"));
        double init = 1.0;
        optim_var *w = optim_test_var("w", dt, 0, NULL, &init);
        const double gs[4] = {1.0, -0.5, 0.0, -0.0};
        const double want_w[4] = {0.75, 0.75, 0.75, 0.75}, want_m[4] = {0.5, 0.0, 0.0, 0.0};
        for (int k = 0; k < 4; k++) {
            ot_step_dense(opt, w, &gs[k]);
            assert_eq(optim_var_get(w, 0), want_w[k]);
            assert_eq(optim_var_get(optim_get_slot(opt, w, "m"), 0), want_m[k]);
        }
        optim_test_free(opt, w);
    }
}

/* f32 bit for bit with TF's op order and float32 constants: beta cast to
 * float32 first, 1 - beta in float32, w - lr * sign(m * b1 + g * c1),
 * m * b2 + g * c2. */
static void ref_f32(const void *r_, int k, float *w, float *const *st, const float *g, int n)
{
    const ref *r = r_;
    const float lr = (float)r->lr, b1 = (float)r->beta_1, b2 = (float)r->beta_2, c1 = 1.0f - b1,
                c2 = 1.0f - b2;
    float *m = st[0];
    (void)k;
    for (int i = 0; i < n; i++) {
        float c = m[i] * b1 + g[i] * c1;
        w[i] = w[i] - lr * (c > 0 ? 1.0f : c < 0 ? -1.0f : 0.0f);
        m[i] = m[i] * b2 + g[i] * c2;
    }
}

OPTIM_TEST(test_f32_bitwise)
{
    assert_ne(1.0f - 0.9f, (float)(1.0 - 0.9)); /* cast first, then 1 - beta */
    ot_case c = make_case(LION("\"learning_rate\": 0.003"), &(ref){0.003, 0.9, 0.99, 0});
    c.ref32 = ref_f32;
    ot_check_f32(&DENSE, STEPS, &c, 0);
}

/* ---- Keras's own tests (keras/src/optimizers/lion_test.py) ------------------------ */

OPTIM_TEST(test_keras_single_step)
{
    ot_check_keras_single_step(LION("\"learning_rate\": 0.5"), (double[]){0.5, 1.5, 2.5, 3.5});
}

OPTIM_TEST(test_keras_golden)
{
    ot_check_keras_golden("\"Lion\"", OPTIM_F32,
                          (const double[5]){0.999, 0.998, 0.997, 0.996, 0.995}, 1);
}

/* Zero gradients, weight_decay 0.004, lr 1: var1 is decayed by three
 * optimizers; "exclude" (by name) and var3 (by variable) are not. */
OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(LION("\"learning_rate\": 1.0, \"weight_decay\": 0.004"), OPTIM_F32);
}

/* ---- dynamic hyperparameters ---------------------------------------------------- */

static double lr_sched(void *user, int64_t step)
{
    (void)user;
    return 0.1 / (1.0 + (double)step);
}

static void set_hypers(optim_optimizer *opt, void *r_, int k)
{
    ref *r = r_;
    r->beta_1 = 0.5 + 0.05 * k;
    r->lr = 0.1 / (1.0 + k);
    if (k == 5) assert_ok(optim_set_hyper(opt, "beta_2", 0.5), opt);
    r->beta_2 = k >= 5 ? 0.5 : 0.99;
}

OPTIM_TEST(test_dynamic_hypers)
{
    optim_optimizer *opt = optim_test_make("\"Lion\"");
    ref r = {0.1, 0.9, 0.99, 0};
    assert_ok(optim_set_hyper_fn(opt, "beta_1", ot_value, &r.beta_1), opt);
    assert_ok(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), opt);
    ot_case c = make_case(NULL, &r);
    c.tol[2] = 1e-13, c.tol[3] = 1e-15;
    optim_var *v = ot_check_dynamic(opt, &DENSE, 8, &c, OPTIM_F64, set_hypers);
    /* A callable giving beta_1 = 0 fails the step, naming the key and range,
     * and changes nothing. */
    r.beta_1 = 0.0;
    ot_expect_step_refused(opt, v, 1, OPTIM_ERANGE, "beta_1");
    assert_contains(optim_errmsg(opt), "(0, 1]");
    optim_test_free(opt, v);
}

/* ---- sparse ----------------------------------------------------------------------- */

/* Keras 3: sparse == the dense equivalent, bit for bit, with and without
 * weight decay; and both == the reference. */
OPTIM_TEST(test_sparse_equals_dense)
{
    static const char *const slots[] = {"m", NULL};
    for (int c = 0; c < 2; c++) {
        ref r = {0.1, 0.8, 0.9, c ? 0.5 : 0.0};
        ot_case oc = make_case(
            c ? LION(
                    "\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9, \"weight_decay\": 0.5")
              : LION("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9"),
            &r);
        oc.tol[1] = 1e-6, oc.tol[3] = 1e-6, oc.state_atol[0] = 1e-7;
        ot_check_sparse_equals_dense(&OT_SPARSE_IDLE5, oc.json, slots);
        /* Reference: duplicates summed, every row updated with g = 0 where
         * there is no index. */
        ot_check_sparse(&OT_SPARSE_IDLE5, oc, 0);
    }
}

/* Row by row: a row never indexed keeps m = 0 and w (sign(0) = 0); a row
 * indexed earlier but not now still moves by lr * sign(beta_1 * m) and its m
 * decays (not lazy). */
OPTIM_TEST(test_sparse_rows)
{
    /* Row 0: 0.75 and m = 0.5, then sign(0.5 * 0.5) = 1 -> 0.5 and m = 0.25;
     * rows 1, 2 bit-identical, m = 0; row 3 like row 0's first step. */
    static const ot_rule rules[] = {{OT_FIRST, OT_IS, NULL, 0.75}, {OT_FIRST, OT_IS, "m", 0.5},
                                    {OT_LEFT, OT_IS, NULL, 0.5},   {OT_LEFT, OT_IS, "m", 0.25},
                                    {OT_NEVER, OT_KEPT, NULL, 0},  {OT_NEVER, OT_KEPT, "m", 0},
                                    {OT_ROW, OT_IS, NULL, 3.75},   {OT_ROW, OT_IS, "m", 0.5}};
    OPTIM_FOR_DTYPES(dt)
    ot_check_rows_left_out(LION("\"learning_rate\": 0.25, \"beta_1\": 0.5, \"beta_2\": 0.5"), dt, 4,
                           1, NULL, 3, (double[]){1}, rules, 8);
}

/* ---- config ------------------------------------------------------------------------ */

static const char *const KEYS[] = {OT_KERAS3_BASE_KEYS, "beta_1", "beta_2"};

OPTIM_TEST(test_config)
{
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &optim_lion_class, NULL, &err), &err);
    cJSON *c = ot_config(opt);
    ot_assert_keys(c, OT_KEYS(KEYS));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring, "lion");
    ot_expect_numbers(c, "learning_rate", 0.001, "beta_1", 0.9, "beta_2", 0.99, NULL);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c, "weight_decay")));
    cJSON_Delete(c);
    optim_destroy(opt);

    /* Keras's test_config values, round trip through serialize. */
    opt = optim_test_make(LION("\"learning_rate\": 0.5, \"beta_1\": 0.5, "
                               "\"beta_2\": 0.67, \"weight_decay\": 0.01, \"clipnorm\": 1.0"));
    char *ser = optim_serialize(opt);
    ot_check_round_trip(ser);
    optim_optimizer *back = optim_test_make(ser);
    c = cJSON_Parse(ser);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(c, "config");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "class_name")->valuestring, "Lion");
    ot_assert_keys(cfg, OT_KEYS(KEYS));
    ot_expect_numbers(cfg, "beta_2", 0.67, "clipnorm", 1.0, NULL);
    cJSON_Delete(c);
    optim_free(ser);
    /* Slot names after a step. */
    double z[1] = {0};
    int64_t one = 1;
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, &one, z);
    ot_step_dense(back, w, z);
    ot_expect_slot_names(back, "m", NULL);
    assert_eq(optim_weights_count(back), 2);
    assert_string_equal(optim_weight_name(back, 1), "w/m");
    optim_destroy(opt);
    optim_test_free(back, w);
}

OPTIM_TEST(test_bad_config)
{
    /* beta_1 in (0, 1], as Keras raises for beta_1 <= 0 or > 1. */
    ot_expect_refused(LION("\"beta_1\": 0.0"), OPTIM_ERANGE, "beta_1", "(0, 1]");
    ot_expect_refused(LION("\"beta_1\": -0.1"), OPTIM_ERANGE, "beta_1", "(0, 1]");
    ot_expect_refused(LION("\"beta_1\": 1.1"), OPTIM_ERANGE, "beta_1", "(0, 1]");
    ot_expect_refused(LION("\"beta_2\": 1.5"), OPTIM_ERANGE, "beta_2", "[0, 1]");
    ot_expect_refused(LION("\"beta_2\": -0.5"), OPTIM_ERANGE, "beta_2", "[0, 1]");
    ot_expect_refused(LION("\"learning_rate\": -1"), OPTIM_ERANGE, "learning_rate", NULL);
    ot_expect_refused(LION("\"beta_1\": true"), OPTIM_ETYPE, "beta_1", NULL);
    ot_expect_refused(LION("\"momentum\": 0.9"), OPTIM_EKEY, "momentum", "beta_1");
    ot_expect_refused(LION("\"epsilon\": 1e-7"), OPTIM_EKEY, "epsilon", NULL);
    /* Keras 3 only. */
    ot_expect_refused(LION("" OT_LEGACY ""), OPTIM_ENOTSUP, "Lion", "Keras 3");
    optim_options o = optim_options_defaults();
    o.generation = OPTIM_LEGACY;
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_status(optim_create(&opt, &optim_lion_class, &o, &err), OPTIM_ENOTSUP, &err);
    assert_null(opt);
    /* set_hyper: refused values leave the old one. */
    opt = optim_test_make("\"LION\"");
    assert_status(optim_set_hyper(opt, "beta_1", 0.0), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), "beta_1");
    assert_status(optim_set_hyper(opt, "beta_2", 2.0), OPTIM_ERANGE, opt);
    double v;
    assert_ok(optim_get_hyper(opt, "beta_1", &v), opt);
    assert_eq(v, 0.9);
    assert_ok(optim_get_hyper(opt, "beta_2", &v), opt);
    assert_eq(v, 0.99);
    assert_ok(optim_set_hyper(opt, "beta_1", 1.0), opt);
    assert_status(optim_set_hyper(opt, "epsilon", 1.0), OPTIM_EKEY, opt);
    optim_destroy(opt);
}

/* ---- threads ----------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", NULL};
    ot_check_threads(
        LION("\"learning_rate\": 0.01, \"weight_decay\": 0.1, \"global_clipnorm\": 10"), 2, 4, 0,
        slots);
}

int main(void) { return optim_test_run(); }
