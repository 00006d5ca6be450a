/* Adamax against independent double-precision references written from the
 * published rule (Kingma & Ba 2015, section 7.1, as Keras applies it):
 * dense trajectories in f32 and f64 for both generations, legacy decay,
 * dynamic beta_1, sparse gradients with duplicate indices (Keras 3: the
 * dense equivalent; legacy: indexed rows only), Keras's golden values, the
 * f32 order of operations of each generation, config keys, defaults, round
 * trips and refused values, and thread-count independence.
 *
 * Keras configs (written out here, not read from the library):
 *   keras.optimizers.Adamax().get_config(): name "Adamax", learning_rate
 *     0.001, weight_decay None, clipnorm None, global_clipnorm None,
 *     clipvalue None, use_ema False, ema_momentum 0.99,
 *     ema_overwrite_frequency None, loss_scale_factor None,
 *     gradient_accumulation_steps None, beta_1 0.9, beta_2 0.999,
 *     epsilon 1e-07
 *   tf.keras.optimizers.legacy.Adamax().get_config(): name "Adamax",
 *     learning_rate 0.001, decay 0.0, beta_1 0.9, beta_2 0.999,
 *     epsilon 1e-07, is_legacy_optimizer True */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 7
#define ADAMAX(cfg) "{\"class_name\": \"Adamax\", \"config\": {" cfg "}}"

typedef struct ref {
    int legacy;
    double lr, beta_1, beta_2, epsilon, decay;
} ref;

/* ---- the reference ---------------------------------------------------------------- */

/* One Adamax step (k 0-based) on n elements; state: m, v. */
static void ref_step(const void *r_, int k, double *w, double *const *st, const double *g, int n)
{
    const ref *r = r_;
    double lr = r->lr / (1.0 + (r->legacy ? r->decay : 0.0) * k), *m = st[0], *v = st[1];
    double step = lr / (1.0 - pow(r->beta_1, k + 1));
    for (int i = 0; i < n; i++) {
        m[i] = r->beta_1 * m[i] + (1.0 - r->beta_1) * g[i];
        v[i] = fmax(r->beta_2 * v[i], fabs(g[i]));
        w[i] -= step * m[i] / (v[i] + r->epsilon);
    }
}

static ot_case make_case(const char *json, const ref *r)
{
    return (ot_case){json, ref_step, r, 2, {"m", "v"}, .exact_slots = 1};
}

static void check_trajectory(const char *json, const ref *r)
{
    ot_check_dense(&OT_DENSE, make_case(json, r));
    optim_optimizer *opt = optim_test_make(json);
    optim_var *w = ot_run_dense(opt, &OT_DENSE, OPTIM_F64);
    assert_eq(optim_weights_count(opt), 3);
    optim_test_free(opt, w);
}

/* ---- dense trajectories ------------------------------------------------------------- */

OPTIM_TEST(test_defaults)
{
    ref r = {0, 0.001, 0.9, 0.999, 1e-7, 0};
    check_trajectory("\"adamax\"", &r);
    check_trajectory(ADAMAX(""), &r);
    r.legacy = 1;
    check_trajectory(ADAMAX(OT_LEGACY), &r);
}

OPTIM_TEST(test_options)
{
    ref r = {0, 0.02, 0.8, 0.95, 1e-4, 0};
    check_trajectory(ADAMAX("\"learning_rate\": 0.02, "
                            "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-4"),
                     &r);
    r.legacy = 1;
    check_trajectory(ADAMAX("\"learning_rate\": 0.02, "
                            "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-4, " OT_LEGACY),
                     &r);
    /* beta_2 = 1 (a running maximum) and beta_1 = 0 are allowed. */
    ref e = {0, 0.01, 0.0, 1.0, 1e-7, 0};
    check_trajectory(ADAMAX("\"learning_rate\": 0.01, "
                            "\"beta_1\": 0.0, \"beta_2\": 1.0"),
                     &e);
}

OPTIM_TEST(test_legacy_decay)
{
    ref r = {1, 0.05, 0.9, 0.999, 1e-7, 0.2};
    check_trajectory(ADAMAX("\"learning_rate\": 0.05, "
                            "\"decay\": 0.2, " OT_LEGACY),
                     &r);
}

/* OptimizerV2: epsilon = epsilon or backend.epsilon(), so 0 and None mean
 * 1e-7, and get_config writes 1e-07. Keras 3 takes 0 as 0. */
OPTIM_TEST(test_legacy_epsilon_fallback)
{
    ref r = {1, 0.01, 0.9, 0.999, 1e-7, 0};
    const char *cfgs[2] = {
        ADAMAX("\"learning_rate\": 0.01, \"epsilon\": 0, " OT_LEGACY),
        ADAMAX("\"learning_rate\": 0.01, \"epsilon\": null, " OT_LEGACY),
    };
    for (int c = 0; c < 2; c++) {
        check_trajectory(cfgs[c], &r);
        cJSON *o = ot_config_of(cfgs[c], NULL, NULL, 0);
        ot_expect_numbers(o, "epsilon", 1e-7, NULL);
        cJSON_Delete(o);
    }
    /* Keras 3 epsilon 0: the zero gradient of step 0, element 0, gives
     * 0 / 0 in the update. */
    optim_optimizer *opt = optim_test_make(ADAMAX("\"epsilon\": 0"));
    ot_dense one = OT_DENSE;
    one.steps = 1;
    optim_var *w = ot_run_dense(opt, &one, OPTIM_F64);
    assert_nan(optim_var_get(w, 0));
    optim_test_free(opt, w);
    ot_expect_refused(ADAMAX("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
}

/* beta_1 is a hyper (legacy _set_hyper): a callable changing per step. */
static void set_beta_1(optim_optimizer *opt, void *r, int k)
{
    (void)opt;
    ((ref *)r)->beta_1 = 0.5 + 0.05 * k;
}

OPTIM_TEST(test_dynamic_beta)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(ot_gen(ADAMAX("\"learning_rate\": 0.01"), legacy));
        ref r = {legacy, 0.01, 0.9, 0.999, 1e-7, 0};
        assert_ok(optim_set_hyper_fn(opt, "beta_1", ot_value, &r.beta_1), opt);
        ot_case c = make_case(NULL, &r);
        optim_var *var = ot_check_dynamic(opt, &OT_DENSE, 8, &c, OPTIM_F64, set_beta_1);
        /* A value out of range fails the step and changes nothing. */
        r.beta_1 = 1.0;
        ot_expect_step_refused(opt, var, 0, OPTIM_ERANGE, "beta_1");
        optim_test_free(opt, var);
    }
}

/* ---- Keras's own values --------------------------------------------------------------- */

/* keras/src/optimizers/adamax_test.py: test_single_step and
 * test_correctness_with_golden (float32). */
OPTIM_TEST(test_keras_golden)
{
    ot_check_keras_single_step(ADAMAX("\"learning_rate\": 0.5"), (double[]){0.5, 1.5, 2.5, 3.5});
    static const double golden[5][10] = {
        {0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8},
        {0.6827, 0.6873, 0.6888, 0.6896, 0.6901, 0.6904, 0.6906, 0.6908, 0.6909, 0.691},
        {0.5333, 0.5407, 0.5431, 0.5444, 0.5451, 0.5456, 0.546, 0.5462, 0.5464, 0.5466},
        {0.368, 0.3773, 0.3804, 0.382, 0.3829, 0.3835, 0.384, 0.3843, 0.3846, 0.3848},
        {0.1933, 0.204, 0.2076, 0.2094, 0.2105, 0.2112, 0.2117, 0.2121, 0.2124, 0.2126}};
    ot_check_keras_golden(
        ADAMAX("\"learning_rate\": 0.2, \"beta_1\": 0.85, \"beta_2\": 0.95, \"epsilon\": 1e-6"),
        OPTIM_F32, golden[0], 10);
}

/* keras test_weight_decay: three optimizers (lr 1, weight_decay 0.004) on a
 * zero gradient; var1 decays three times, the excluded ones not at all. */
OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(ADAMAX("\"learning_rate\": 1.0, \"weight_decay\": 0.004"),
                                OPTIM_F32);
}

/* ---- float32 order of operations ------------------------------------------------------- */

/* Two steps on one float32 element, each generation's operations written
 * out in float in the order of its source: Keras 3 update_step (1 - beta_1
 * taken in Python, then cast), TF's ApplyAdaMax (1 - beta_1 in float;
 * lr / (1 - beta_1^t) first). The library must agree bit for bit. */
static double f32_init(int i) { return (void)i, 0.7; }
static double f32_grad(int k, int i) { return (void)i, (double)(float[]){0.3f, -1.7f, 0.05f}[k]; }

static void ref_f32(const void *r_, int k, float *w, float *const *st, const float *g, int n)
{
    const ref *r = r_;
    const float b1 = (float)r->beta_1, lr = (float)r->lr, eps = (float)r->epsilon,
                power = powf(b1, (float)(k + 1));
    float *m = st[0], *v = st[1];
    for (int i = 0; i < n; i++) {
        m[i] = m[i] + (g[i] - m[i]) * (r->legacy ? 1.0f - b1 : (float)(1.0 - r->beta_1));
        float bv = (float)r->beta_2 * v[i];
        v[i] = bv < fabsf(g[i]) ? fabsf(g[i]) : bv;
        if (r->legacy) w[i] = w[i] - (lr / (1.0f - power)) * (m[i] / (v[i] + eps));
        else w[i] = w[i] - (lr * m[i]) / ((1.0f - power) * (v[i] + eps));
    }
}

OPTIM_TEST(test_f32_operation_order)
{
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-7;
    for (int legacy = 0; legacy < 2; legacy++) {
        ot_case c = make_case(ot_gen(ADAMAX("\"learning_rate\": 0.01"), legacy),
                              &(ref){legacy, lr, b1, b2, eps, 0});
        c.ref32 = ref_f32;
        ot_check_f32(&(ot_dense){1, 3, f32_init, f32_grad, 0, NULL}, 3, &c, 0);
    }
    /* Legacy sparse (_resource_apply_sparse): m * beta_1 + g * (1 - beta_1)
     * on the indexed row, w + (-lr / (1 - beta_1^t)) * (m / (v + eps)). */
    {
        optim_optimizer *opt = optim_test_make(ADAMAX("\"learning_rate\": 0.01, " OT_LEGACY));
        optim_var *var =
            optim_test_var("e", OPTIM_F32, 2, (int64_t[2]){2, 1}, (double[2]){0.7, -0.2});
        float w = -0.2f, m = 0, v = 0;
        for (int k = 0; k < 10; k++) {
            float g = (float)(sin(0.9 * k + 0.3) * 1.3), t = (float)(k + 1);
            float power = powf((float)b1, t);
            float b1f = (float)b1;
            m = m * b1f + g * (1.0f - b1f);
            float bv = v * (float)b2;
            v = bv < fabsf(g) ? fabsf(g) : bv;
            w = w + (-(float)lr / (1.0f - power)) * (m / (v + (float)eps));
            ot_step_row(opt, var, 1, &(double){g});
            assert_var_floats(var, ((float[2]){0.7f, w}), 2);
            assert_eq(((float *)optim_var_data(optim_get_slot(opt, var, "m")))[1], m);
        }
        optim_test_free(opt, var);
    }
    /* The two generations differ in the last bits in float32. */
    assert_ne((float)(1.0 - 0.9), 1.0f - 0.9f);
}

/* ---- sparse ------------------------------------------------------------------------ */

/* Keras 3: sparse == the dense equivalent, bit for bit, and == the
 * reference with every row updated. */
OPTIM_TEST(test_sparse_keras3)
{
    static const char *const slots[] = {"m", "v", NULL};
    const char *json = ADAMAX("\"learning_rate\": 0.05, \"beta_1\": 0.8");
    ot_check_sparse(&OT_SPARSE_LONG, make_case(json, &(ref){0, 0.05, 0.8, 0.999, 1e-7, 0}), 0);
    ot_check_sparse_equals_dense(&OT_SPARSE_LONG, json, slots);
}

/* Legacy: only the indexed rows of m, v and w change (duplicates summed). */
OPTIM_TEST(test_sparse_legacy)
{
    ot_check_sparse(
        &OT_SPARSE_LONG,
        make_case(ADAMAX("\"learning_rate\": 0.05, \"beta_1\": 0.8, \"decay\": 0.05, " OT_LEGACY),
                  &(ref){1, 0.05, 0.8, 0.999, 1e-7, 0.05}),
        1);
}

/* Row by row: after a step on row 0 then a step on row 3, row 0 moves again
 * in Keras 3 (its m decays but stays non-zero) and stays bit-identical in
 * legacy; row 5, never indexed, is untouched in both until Keras 3's zero
 * m moves it by 0. */
OPTIM_TEST(test_sparse_untouched_rows)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            int row0 = legacy ? OT_KEPT : OT_LESS;
            const ot_rule rules[] = {{OT_FIRST, OT_LESS, NULL, 0},
                                     {OT_LEFT, row0, NULL, 0},
                                     {OT_LEFT, row0, "m", 0},
                                     {OT_NEVER, OT_KEPT, NULL, 0},
                                     {OT_ROW, OT_LESS, NULL, 0}};
            ot_check_rows_left_out(ot_gen(ADAMAX("\"learning_rate\": 0.5"), legacy), dt, 6, 1, NULL,
                                   3, (double[]){1}, rules, 5);
        }
}

/* ---- config ------------------------------------------------------------------------- */

static const char *const KERAS3_KEYS[] = {OT_KERAS3_BASE_KEYS, "beta_1", "beta_2", "epsilon"};
static const char *const LEGACY_KEYS[] = {
    "name", "learning_rate", "decay", "beta_1", "beta_2", "epsilon",
};

OPTIM_TEST(test_config_keys_and_defaults)
{
    cJSON *o = ot_config_of("\"Adamax\"", "adamax", OT_KEYS(KERAS3_KEYS));
    ot_expect_numbers(o, "learning_rate", 0.001, "beta_1", 0.9, "beta_2", 0.999, "epsilon", 1e-7,
                      NULL);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "weight_decay")));
    cJSON_Delete(o);
    o = ot_config_of(ADAMAX(OT_LEGACY), NULL, OT_KEYS(LEGACY_KEYS));
    ot_expect_numbers(o, "learning_rate", 0.001, "decay", 0.0, "beta_1", 0.9, "beta_2", 0.999,
                      "epsilon", 1e-7, NULL);
    assert_null(
        cJSON_GetObjectItemCaseSensitive(o, "is_legacy_optimizer")); /* OptimizerV2 refuses it */
    cJSON_Delete(o);

    /* By class, in C. */
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &optim_adamax_class, NULL, &err), &err);
    double b;
    assert_ok(optim_get_hyper(opt, "beta_2", &b), opt);
    assert_eq(b, 0.999);
    optim_destroy(opt);
}

OPTIM_TEST(test_config_round_trip)
{
    const char *cfgs[] = {
        ADAMAX(
            "\"name\": \"mine\", \"learning_rate\": 0.0125, "
            "\"beta_1\": 0.75, \"beta_2\": 0.9375, \"epsilon\": 1e-05, \"clipnorm\": 2.5, \"weight_decay\": 0.01"),
        ADAMAX("\"learning_rate\": 0.3, \"decay\": 0.01, \"beta_1\": 0.5, "
               "\"epsilon\": 1e-3, \"clipvalue\": 1.5, \"global_clipnorm\": 3.0, " OT_LEGACY),
        ADAMAX("\"lr\": 0.25, " OT_LEGACY),
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) ot_check_round_trip(cfgs[c]);
    cJSON *o = ot_config_of(cfgs[0], "mine", NULL, 0);
    ot_expect_numbers(o, "beta_1", 0.75, "beta_2", 0.9375, "epsilon", 1e-5, NULL);
    cJSON_Delete(o);
    o = ot_config_of(cfgs[2], NULL, NULL, 0);
    assert_eq(ot_num(o, "learning_rate"), 0.25);
    cJSON_Delete(o);
}

OPTIM_TEST(test_config_refused)
{
    ot_expect_refused_gens(ADAMAX("\"beta_1\": 1.0"), OPTIM_ERANGE, "beta_1", "[0, 1)");
    ot_expect_refused_gens(ADAMAX("\"beta_1\": -0.1"), OPTIM_ERANGE, "beta_1", "[0, 1)");
    ot_expect_refused_gens(ADAMAX("\"beta_2\": 1.5"), OPTIM_ERANGE, "beta_2", "[0, 1]");
    ot_expect_refused_gens(ADAMAX("\"beta_2\": -1"), OPTIM_ERANGE, "beta_2", "[0, 1]");
    ot_expect_refused_gens(ADAMAX("\"epsilon\": -1e-7"), OPTIM_ERANGE, "epsilon", "[0, inf)");
    ot_expect_refused_gens(ADAMAX("\"beta_1\": \"high\""), OPTIM_ETYPE, "beta_1", NULL);
    ot_expect_refused_gens(ADAMAX("\"amsgrad\": false"), OPTIM_EKEY, "amsgrad", NULL);
    ot_expect_refused_gens(ADAMAX("\"learning_rate\": -0.1"), OPTIM_ERANGE, "learning_rate", NULL);
    optim_optimizer *opt = optim_test_make("\"adamax\"");
    assert_status(optim_set_hyper(opt, "beta_1", 1.0), OPTIM_ERANGE, opt);
    assert_non_null(strstr(optim_errmsg(opt), "[0, 1)"));
    assert_status(optim_set_hyper(opt, "epsilon", -1), OPTIM_ERANGE, opt);
    /* epsilon is not a hyper: numbers only. */
    assert_status(optim_set_hyper_fn(opt, "epsilon", ot_value, NULL), OPTIM_ETYPE, opt);
    double b;
    assert_ok(optim_get_hyper(opt, "beta_1", &b), opt);
    assert_eq(b, 0.9);
    assert_ok(optim_set_hyper(opt, "beta_1", 0.5), opt);
    assert_ok(optim_get_hyper(opt, "beta_1", &b), opt);
    assert_eq(b, 0.5);
    optim_destroy(opt);
}

/* ---- threads ----------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", "v", NULL};
    ot_check_threads(ADAMAX("\"learning_rate\": 0.01, \"global_clipnorm\": 10"), 3, 4, 0, slots);
    ot_check_threads(ADAMAX("\"learning_rate\": 0.01, \"global_clipnorm\": 10, " OT_LEGACY), 3, 4,
                     0, slots);
}

int main(void) { return optim_test_run(); }
