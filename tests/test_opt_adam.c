/* Adam (and AMSGrad) against independent references written from the
 * published formulas (tests/ref_adam.h, weight decay 0) in double precision: dense trajectories (f32 and f64, both generations,
 * amsgrad on and off), sparse gradients with duplicate indices (Keras 3: the
 * dense result bit for bit; legacy: every row of m, v and w moves), dynamic
 * hyperparameters, and the float32 order of operations of each generation
 * (Keras 3 Adam.update_step; legacy: TF's ApplyAdam kernel and
 * Adam._resource_apply_sparse), emulated in float and compared bit for bit.
 * Config: key sets, defaults, round trips, ranges, unknown keys. Keras's own
 * test values (adam_test.py, the legacy docstring) as extra checks. */
#include "ref_adam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 9
#define ADAM(cfg) "{\"class_name\": \"Adam\", \"config\": {" cfg "}}"
#define LEGACY OT_LEGACY

OPTIM_TEST(test_dense_defaults)
{
    ref_adam r = {0.001, 0.9, 0.999, 1e-7, 0, 0, 0, 0};
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case(ADAM(""), &r));
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case(ADAM(LEGACY), &r));
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case("\"adam\"", &r));
}

OPTIM_TEST(test_dense_options)
{
    ref_adam r = {0.05, 0.8, 0.95, 1e-3, 0, 0, 0, 0};
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(
            ADAM("\"learning_rate\": 0.05, \"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 0.001"),
            &r));
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(
            ADAM(
                "\"learning_rate\": 0.05, \"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 0.001, " LEGACY),
            &r));
}

OPTIM_TEST(test_amsgrad)
{
    ref_adam r = {0.02, 0.9, 0.99, 1e-7, 0, 0, 1, 0};
    double w[N], mvh[3 * N];
    ot_case c = ref_adam_case(NULL, &r);
    ot_ref_dense(&OT_DENSE_SHRINK, &c, w, mvh);
    int differs = 0; /* the gradients make vhat exceed v somewhere */
    for (int i = 0; i < N; i++) differs += mvh[2 * N + i] > mvh[N + i] * 1.01;
    assert_gt(differs, 0);
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(ADAM("\"learning_rate\": 0.02, \"beta_2\": 0.99, \"amsgrad\": true"), &r));
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(ADAM("\"learning_rate\": 0.02, \"beta_2\": 0.99, \"amsgrad\": true, " LEGACY),
                      &r));
}

OPTIM_TEST(test_legacy_decay)
{
    ref_adam r = {0.05, 0.9, 0.999, 1e-7, 0, 0.2, 0, 0};
    ot_check_dense(&OT_DENSE_SHRINK,
                   ref_adam_case(ADAM("\"learning_rate\": 0.05, \"decay\": 0.2, " LEGACY), &r));
    r.ams = 1;
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(ADAM("\"learning_rate\": 0.05, \"decay\": 0.2, \"amsgrad\": true, " LEGACY),
                      &r));
    /* `lr` is the legacy alias of learning_rate. */
    r.ams = 0;
    ot_check_dense(&OT_DENSE_SHRINK,
                   ref_adam_case(ADAM("\"lr\": 0.05, \"decay\": 0.2, " LEGACY), &r));
}

/* Legacy: `epsilon or backend.epsilon()`, so 0 and None mean 1e-7 (and
 * get_config writes 1e-07, keys in Keras's order); Keras 3 uses 0. */
OPTIM_TEST(test_epsilon_zero)
{
    for (int c = 0; c < 3; c++) {
        int legacy = c > 0;
        const char *json = c == 2
            ? ADAM("\"epsilon\": null, \"learning_rate\": 0.1, \"amsgrad\": true, " LEGACY)
            : c == 1 ? ADAM("\"epsilon\": 0, \"learning_rate\": 0.1, " LEGACY)
                     : ADAM("\"epsilon\": 0, \"learning_rate\": 0.1");
        ot_expect_config_has(
            json,
            !legacy      ? "\"epsilon\":0,\"amsgrad\":false}" /* as given: Keras keeps the int */
                : c == 2 ? "\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":true}"
                         : "\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":false}");
        double g = 1e-6, w = ot_scalar_step(json, OPTIM_F64, 0, g);
        double m = 0.1 * g, v = 0.001 * g * g, a = 0.1 * sqrt(1 - 0.999) / (1 - 0.9);
        assert_close(w, -a * m / (sqrt(v) + (legacy ? 1e-7 : 0.0)), 1e-12, 0);
        if (!legacy) assert_close(w, -0.1, 1e-9, 0);
    }
}

/* ---- float32 order of operations -------------------------------------------- */

OPTIM_TEST(test_f32_operation_order)
{
    const char *cfg[2][2] = {
        {ADAM("\"learning_rate\": 0.01"), ADAM("\"learning_rate\": 0.01, \"amsgrad\": true")},
        {ADAM("\"learning_rate\": 0.01, " LEGACY),
         ADAM("\"learning_rate\": 0.01, \"amsgrad\": true, " LEGACY)},
    };
    float last_w[2][N];
    for (int legacy = 0; legacy < 2; legacy++)
        for (int ams = 0; ams < 2; ams++)
            ref_adam_check_dense_f32(cfg[legacy][ams], legacy, ams, 0.01, 0,
                                     ams ? NULL : last_w[legacy]);
    /* The two generations round differently (0.1f vs 1.0f - 0.9f). */
    assert_ne(memcmp(last_w[0], last_w[1], sizeof last_w[0]), 0);
}

/* ---- sparse ------------------------------------------------------------------ */

#define SP OT_SPARSE_ADAM

/* Keras 3: a sparse gradient gives exactly the dense result (duplicates
 * summed, zero gradient elsewhere). */
OPTIM_TEST(test_sparse_keras3_equals_dense)
{
    static const char *const slots[] = {"m", "v", "vhat", NULL};
    ot_check_sparse_equals_dense(&SP, ADAM("\"learning_rate\": 0.01"), slots);
    ot_check_sparse_equals_dense(&SP, ADAM("\"learning_rate\": 0.01, \"amsgrad\": true"), slots);
}

/* Both generations against the reference: duplicates summed, every row
 * updated (the dense equivalent up to rounding). */
OPTIM_TEST(test_sparse_reference)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int ams = 0; ams < 2; ams++) {
            const char *json = ot_gen(
                ot_fmt(ADAM("\"learning_rate\": 0.01, \"amsgrad\": %s"), ams ? "true" : "false"),
                legacy);
            ot_check_sparse(
                &SP, ref_adam_case(json, &(ref_adam){0.01, 0.9, 0.999, 1e-7, 0, 0, ams, 0}), 0);
        }
}

/* Legacy sparse in float32: Adam._resource_apply_sparse's order, bit for bit. */
OPTIM_TEST(test_sparse_legacy_f32_operation_order)
{
    /* A large learning rate makes the steps comparable to w, so that the
     * rounding of lr * (sqrt(1 - beta_2^t) / (1 - beta_1^t)) shows. */
    for (int c = 0; c < 4; c++) {
        int ams = c & 1;
        double lr = c < 2 ? 0.01 : 0.7;
        const char *json = ot_fmt(ADAM("\"learning_rate\": %g, \"amsgrad\": %s, " LEGACY), lr,
                                  ams ? "true" : "false");
        ref_adam_check_legacy_sparse_f32(json, ams, lr, 0);
    }
}

/* Adam is not lazy in either generation: a row indexed once keeps moving
 * after, and a row never indexed (6) stays put only because its m is 0. */
OPTIM_TEST(test_sparse_rows_not_lazy)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(ot_gen(ADAM("\"learning_rate\": 0.1"), legacy));
        optim_var *x =
            optim_test_var("e", OPTIM_F64, 2, (int64_t[2]){4, 1}, (double[4]){1, 2, 3, 4});
        ot_step_row(opt, x, 0, (double[]){1});
        double after1 = optim_var_get(x, 0);
        assert_close(after1, 0.9, 1e-6, 0); /* first step: -lr * sign(g) */
        ot_step_row(opt, x, 3, (double[]){1});
        assert_lt(optim_var_get(x, 0), after1); /* m of row 0 still moves it */
        assert_non_null(optim_get_slot(opt, x, "m"));
        double m1 = 1.0 * (1 - 0.9); /* m of row 0 after the first step */
        assert_eq(optim_var_get(optim_get_slot(opt, x, "m"), 0),
                  (legacy ? m1 * 0.9 : m1 + (0 - m1) * (1 - 0.9)));
        assert_eq(optim_var_get(x, 1), 2);
        assert_eq(optim_var_get(x, 2), 3);
        /* Row 3's first gradient arrives at t = 2: bias-corrected by t = 2. */
        double a2 = 0.1 * sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
        assert_close(optim_var_get(x, 3), 4 - a2 * 0.1 / (sqrt(0.001) + 1e-7), 1e-12, 0);
        optim_test_free(opt, x);
    }
}

/* ---- dynamic hyperparameters ----------------------------------------------- */

static double lr_sched(void *user, int64_t step)
{
    (void)user;
    return 0.05 / (1.0 + 0.5 * (double)step);
}

/* The bias correction uses this step's beta_1 to the power t. */
static void set_hypers(optim_optimizer *opt, void *r, int k)
{
    (void)opt;
    ((ref_adam *)r)->b1 = 0.5 + 0.05 * k;
    ((ref_adam *)r)->lr = 0.05 / (1.0 + 0.5 * k);
}

OPTIM_TEST(test_dynamic)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(ot_gen(ADAM(""), legacy));
        ref_adam r = {0.05, 0.9, 0.99, 1e-7, 0, 0, 0, 0};
        assert_ok(optim_set_hyper_fn(opt, "beta_1", ot_value, &r.b1), opt);
        assert_ok(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), opt);
        assert_ok(optim_set_hyper(opt, "beta_2", 0.99), opt);
        ot_case c = ref_adam_case(NULL, &r);
        optim_var *x = ot_check_dynamic(opt, &OT_DENSE_SHRINK, 8, &c, OPTIM_F64, set_hypers);
        /* A callable beta_1 out of range fails the step and changes nothing. */
        r.b1 = 1.0;
        ot_expect_step_refused(opt, x, 0, OPTIM_ERANGE, "beta_1");
        optim_test_free(opt, x);
    }
}

/* ---- Keras's own numbers ------------------------------------------------------ */

/* keras/src/optimizers/adam_test.py: test_single_step. */
OPTIM_TEST(test_keras_single_step)
{
    ot_check_keras_single_step(ADAM("\"learning_rate\": 0.5"), (double[]){0.5, 1.5, 2.5, 3.5});
}

/* adam_test.py: test_correctness_with_golden (amsgrad). */
OPTIM_TEST(test_keras_golden_amsgrad)
{
    const double golden[5] = {0.999, 0.9982, 0.9974, 0.9965, 0.9955};
    ot_check_keras_golden(ADAM("\"amsgrad\": true"), OPTIM_F32, golden, 1);
}

/* adam_test.py: test_weight_decay (Keras 3 base option): var1 is decayed by
 * three optimizers in turn, the excluded ones not at all. */
OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(ADAM("\"learning_rate\": 1.0, \"weight_decay\": 0.004"), OPTIM_F32);
}

/* tf.keras.optimizers.legacy.Adam docstring: lr 0.1, var 10, loss var^2/2:
 * the first step is -lr * sign(grad), 9.9. */
OPTIM_TEST(test_legacy_docstring)
{
    assert_close(ot_scalar_step(ADAM("\"learning_rate\": 0.1, " LEGACY), OPTIM_F32, 10, 10), 9.9,
                 1e-6, 0);
}

/* ---- config --------------------------------------------------------------------- */

OPTIM_TEST(test_config_keys_and_defaults)
{
    static const char *const k3[] = {OT_KERAS3_BASE_KEYS, "beta_1", "beta_2", "epsilon", "amsgrad"};
    static const char *const kl[] = {"name",   "learning_rate", "decay",  "beta_1",
                                     "beta_2", "epsilon",       "amsgrad"};
    for (int legacy = 0; legacy < 2; legacy++) {
        cJSON *c = legacy ? ot_config_of(ot_gen(ADAM(""), 1), "Adam", OT_KEYS(kl))
                          : ot_config_of(ADAM(""), "adam", OT_KEYS(k3));
        ot_expect_numbers(c, "learning_rate", 0.001, "beta_1", 0.9, "beta_2", 0.999, "epsilon",
                          1e-7, NULL);
        assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "amsgrad")));
        if (!legacy) assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c, "weight_decay")));
        else assert_eq(ot_num(c, "decay"), 0);
        cJSON_Delete(c);
        /* Slots: m, v (and vhat with amsgrad), in that order. */
        optim_optimizer *opt = optim_test_make(ot_gen(ADAM("\"amsgrad\": true"), legacy));
        int64_t n = N;
        optim_var *x = optim_test_var("w", OPTIM_F64, 1, &n, (double[N]){0});
        assert_ok(optim_build(opt, &x, 1), opt);
        ot_expect_slot_names(opt, "m", "v", "vhat", NULL);
        assert_eq(optim_weights_count(opt), 4);
        optim_test_free(opt, x);
    }
}

OPTIM_TEST(test_config_round_trip)
{
    const char *cfgs[] = {
        ADAM(
            "\"learning_rate\": 0.5, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, \"amsgrad\": true"),
        ADAM(
            "\"learning_rate\": 0.5, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, \"amsgrad\": true, "
            "\"decay\": 0.01, \"clipnorm\": 1.5, " LEGACY),
        ADAM("\"weight_decay\": 0.01, \"global_clipnorm\": 2.0, \"name\": \"my_adam\""),
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        ot_check_round_trip(cfgs[i]);
        cJSON *c = ot_config_of(cfgs[i], NULL, NULL, 0);
        assert_eq(ot_num(c, "beta_2"), (i < 2 ? 0.67 : 0.999));
        cJSON_Delete(c);
    }
}

OPTIM_TEST(test_config_refused)
{
    ot_expect_refused_gens(ADAM("\"beta_1\": 1.0"), OPTIM_ERANGE, "beta_1", "[0, 1)");
    ot_expect_refused_gens(ADAM("\"beta_1\": -0.1"), OPTIM_ERANGE, "beta_1", "[0, 1)");
    ot_expect_refused_gens(ADAM("\"beta_2\": 1.0"), OPTIM_ERANGE, "beta_2", "[0, 1)");
    ot_expect_refused_gens(ADAM("\"beta_2\": -1"), OPTIM_ERANGE, "beta_2", "[0, 1)");
    ot_expect_refused_gens(ADAM("\"epsilon\": -1e-8"), OPTIM_ERANGE, "epsilon", "[0, inf)");
    ot_expect_refused_gens(ADAM("\"learning_rate\": -0.1"), OPTIM_ERANGE, "learning_rate",
                           "[0, inf)");
    ot_expect_refused_gens(ADAM("\"amsgrad\": 1"), OPTIM_ETYPE, "amsgrad", NULL);
    ot_expect_refused_gens(ADAM("\"beta_3\": 0.5"), OPTIM_EKEY, "beta_3", NULL);
    ot_expect_refused_gens(ADAM("\"momentum\": 0.5"), OPTIM_EKEY, "momentum", NULL);
    ot_expect_refused(ADAM("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL); /* legacy: 1e-7 */
    ot_expect_refused(ADAM("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr", NULL);
    ot_expect_refused(ADAM("\"weight_decay\": 0.1, " LEGACY), OPTIM_EKEY, "weight_decay", NULL);
    /* Ranges also hold for optim_set_hyper; a refused value changes nothing. */
    optim_optimizer *opt = optim_test_make(ADAM(""));
    assert_status(optim_set_hyper(opt, "beta_1", 1.0), OPTIM_ERANGE, opt);
    assert_non_null(strstr(optim_errmsg(opt), "beta_1 is 1, expected a value in [0, 1)"));
    assert_status(optim_set_hyper(opt, "amsgrad", 0.5), OPTIM_ETYPE, opt);
    double b1;
    assert_ok(optim_get_hyper(opt, "beta_1", &b1), opt);
    assert_eq(b1, 0.9);
    /* amsgrad is fixed once slots exist. */
    assert_ok(optim_set_hyper(opt, "amsgrad", 1), opt);
    assert_ok(optim_set_hyper(opt, "amsgrad", 0), opt);
    int64_t n = 3;
    optim_var *x = optim_test_var("w", OPTIM_F64, 1, &n, (double[3]){0});
    assert_ok(optim_build(opt, &x, 1), opt);
    assert_status(optim_set_hyper(opt, "amsgrad", 1), OPTIM_ESTATE, opt);
    assert_contains(optim_errmsg(opt), "amsgrad");
    assert_ok(optim_set_hyper(opt, "amsgrad", 0), opt);
    optim_test_free(opt, x);
}

/* ---- threads ------------------------------------------------------------------ */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", "v", "vhat", NULL};
    ot_check_threads(ADAM("\"learning_rate\": 0.01, \"amsgrad\": true, \"global_clipnorm\": 50"), 2,
                     4, 1, slots);
}

int main(void) { return optim_test_run(); }
