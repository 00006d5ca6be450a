/* LazyAdam against independent references written here, t = k + 1:
 *
 *   dense (Adam):  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *                  w = w - lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
 *   sparse (lazy): the same on the indexed rows only (duplicates summed);
 *                  every other row of w, m and v keeps its bits.
 *
 * in double precision (f32 and f64, both generations), plus the float32
 * order of operations emulated in float and compared bit for bit: legacy
 * sparse is TF Addons' LazyAdam._resource_apply_sparse
 * (b1 * m + (1 - b1) * g, lr_t * m / (sqrt(v) + eps), 1 - b1 in float);
 * Keras 3 sparse is Keras 3 Adam.update_step on the indexed rows
 * (m + (g - m) * (1 - b1), 1 - b1 in double cast to float). Config key
 * sets, round trips, refusals (amsgrad), and TF Addons' lazy_adam_test
 * values. */
#include "ref_adam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 9
#define LAZY(cfg) "{\"class_name\": \"LazyAdam\", \"config\": {" cfg "}}"
#define LEGACY OT_LEGACY
#define ROWS 8
#define COLS 3
#define NIDX 5
#define SSTEPS 21

/* ---- dense --------------------------------------------------------------------- */

OPTIM_TEST(test_dense)
{
    ref_adam r = {0.001, 0.9, 0.999, 1e-7, 0, 0, 0, 0};
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case(LAZY(""), &r));
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case(LAZY(LEGACY), &r));
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case("\"lazyadam\"", &r));
    ref_adam r2 = {0.05, 0.8, 0.99, 1e-4, 0, 0.1, 0, 0};
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(
            LAZY(
                "\"learning_rate\": 0.05, \"beta_1\": 0.8, \"beta_2\": 0.99, \"epsilon\": 1e-4, \"decay\": 0.1, " LEGACY),
            &r2));
    r2.decay = 0;
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(
            LAZY("\"learning_rate\": 0.05, \"beta_1\": 0.8, \"beta_2\": 0.99, \"epsilon\": 1e-4"),
            &r2));
}

/* ---- sparse --------------------------------------------------------------------- */

/* OT_SPARSE_ADAM on an 8-row table: rows 6 and 7 are never indexed. */
static ot_sparse sp(void)
{
    ot_sparse s = OT_SPARSE_ADAM;
    s.rows = ROWS;
    return s;
}

OPTIM_TEST(test_sparse_reference)
{
    ot_sparse t = sp();
    ref_adam r = {0.01, 0.9, 0.999, 1e-7, 0, 0, 0, 0};
    for (int legacy = 0; legacy < 2; legacy++) {
        ot_case c = ref_adam_case(ot_gen(LAZY("\"learning_rate\": 0.01"), legacy), &r);
        /* Rows 6 and 7, never indexed, keep their bits (w, m, v): the driver's
         * check for rows only. */
        ot_check_sparse(&t, c, 1);
    }
}

/* Row by row, lazy against Adam: after a step on row 0 and a step on row 3,
 * LazyAdam leaves row 0 (and its m, v) exactly as the first step left it,
 * while Adam keeps moving it. */
OPTIM_TEST(test_sparse_lazy_rows)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *lazy = optim_test_make(ot_gen(LAZY("\"learning_rate\": 0.1"), legacy));
        optim_optimizer *adam = optim_test_make(
            ot_gen("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.1}}", legacy));
        double init[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        int64_t shape[2] = {4, 2};
        optim_var *xl = optim_test_var("e", OPTIM_F32, 2, shape, init),
                  *xa = optim_test_var("e", OPTIM_F32, 2, shape, init);
        const double g[2] = {1.0, -0.5};
        ot_step_row(lazy, xl, 0, g);
        ot_step_row(adam, xa, 0, g);
        float row0[2], m0[2], v0[2];
        memcpy(row0, optim_var_data(xl), sizeof row0);
        memcpy(m0, optim_var_data(optim_get_slot(lazy, xl, "m")), sizeof m0);
        memcpy(v0, optim_var_data(optim_get_slot(lazy, xl, "v")), sizeof v0);
        assert_close(row0[0], 0.9, 1e-5, 0); /* first step: about -lr * sign(g) */
        assert_close(row0[1], 2.1, 1e-5, 0);
        ot_step_row(lazy, xl, 3, g);
        ot_step_row(adam, xa, 3, g);
        assert_var_floats(xl, row0, 2);
        assert_var_floats(optim_get_slot(lazy, xl, "m"), m0, 2);
        assert_var_floats(optim_get_slot(lazy, xl, "v"), v0, 2);
        assert_lt(optim_var_get(xa, 0), row0[0]); /* Adam: m of row 0 still moves it */
        assert_gt(optim_var_get(xa, 1), row0[1]);
        /* Rows 1 and 2: never indexed, identical in both. */
        for (int i = 2; i < 6; i++) {
            assert_eq(optim_var_get(xl, i), init[i]);
            assert_eq(optim_var_get(xa, i), init[i]);
        }
        /* Row 3: first gradient at t = 2 in both. */
        assert_close(optim_var_get(xl, 6), optim_var_get(xa, 6), 1e-6, 0);
        assert_close(optim_var_get(xl, 7), optim_var_get(xa, 7), 1e-6, 0);
        optim_destroy(lazy);
        optim_test_free(adam, xl, xa);
    }
}

/* The float32 order of operations of each generation, bit for bit. */
OPTIM_TEST(test_sparse_f32_operation_order)
{
    /* lr 0.7: steps comparable to w, so that the rounding of lr_t shows. */
    for (int cfg = 0; cfg < 4; cfg++) {
        int legacy = cfg & 1;
        const float l = cfg < 2 ? 0.01f : 0.7f;
        const char *json = ot_gen(
            cfg < 2 ? LAZY("\"learning_rate\": 0.01") : LAZY("\"learning_rate\": 0.7"), legacy);
        optim_optimizer *opt = optim_test_make(json);
        ot_sparse tab = sp();
        optim_var *x = ot_run_sparse(opt, &tab, OPTIM_F32, 0);
        float w[ROWS * COLS], m[ROWS * COLS] = {0}, v[ROWS * COLS] = {0};
        for (int i = 0; i < ROWS * COLS; i++) w[i] = (float)tab.init(i / COLS, i % COLS);
        const float b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
        const float c1 = legacy ? 1.0f - b1 : (float)(1.0 - 0.9),
                    c2 = legacy ? 1.0f - b2 : (float)(1.0 - 0.999);
        for (int k = 0; k < SSTEPS; k++) {
            float g[ROWS * COLS] = {0}, t = (float)(k + 1);
            int use[ROWS] = {0};
            for (int j = 0; j < NIDX; j++) {
                use[tab.index(k, j)] = 1;
                for (int c = 0; c < COLS; c++)
                    g[tab.index(k, j) * COLS + c] += (float)tab.val(k, j, c);
            }
            float lr = l * sqrtf(1.0f - powf(b2, t)) / (1.0f - powf(b1, t));
            for (int i = 0; i < ROWS * COLS; i++) {
                if (!use[i / COLS]) continue;
                if (legacy) {
                    m[i] = b1 * m[i] + c1 * g[i];
                    v[i] = b2 * v[i] + c2 * (g[i] * g[i]);
                    w[i] = w[i] - lr * m[i] / (sqrtf(v[i]) + eps);
                } else {
                    m[i] = m[i] + (g[i] - m[i]) * c1;
                    v[i] = v[i] + (g[i] * g[i] - v[i]) * c2;
                    w[i] = w[i] - (m[i] * lr) / (sqrtf(v[i]) + eps);
                }
            }
        }
        assert_var_floats(x, w, ROWS * COLS);
        assert_var_floats(optim_get_slot(opt, x, "m"), m, ROWS * COLS);
        assert_var_floats(optim_get_slot(opt, x, "v"), v, ROWS * COLS);
        optim_test_free(opt, x);
    }
}

/* Keras 3 with the base weight_decay: every row decays (w - w * wd * lr),
 * only the indexed rows get the Adam step. */
OPTIM_TEST(test_sparse_keras3_weight_decay)
{
    optim_optimizer *opt = optim_test_make(LAZY("\"learning_rate\": 0.1, \"weight_decay\": 0.2"));
    optim_var *x = optim_test_var("e", OPTIM_F64, 2, (int64_t[2]){3, 1}, (double[3]){1, 2, 3});
    ot_step_row(opt, x, 1, (double[]){1});
    assert_eq(optim_var_get(x, 0), 1 - 1 * 0.2 * 0.1);
    assert_eq(optim_var_get(x, 2), 3 - 3 * 0.2 * 0.1);
    assert_close(optim_var_get(x, 1), 2 - 2 * 0.2 * 0.1 - 0.1, 1e-6, 0);
    optim_test_free(opt, x);
}

/* tensorflow_addons/optimizers/tests/lazy_adam_test.py: _test_sparse
 * (var0 [1, 1, 2], gradient 0.1 on rows 0 and 2, 3 steps): row 1 stays. */
OPTIM_TEST(test_tfa_sparse_values)
{
    ref_adam_check_tfa(LAZY(LEGACY), 1, 0, 1e-7, (double[]){1, 1, 2}, (double[]){3, 3, 4}, 3,
                       (int64_t[]){0, 2}, 2);
}

/* ---- config ------------------------------------------------------------------------- */

OPTIM_TEST(test_config)
{
    static const char *const k3[] = {OT_KERAS3_BASE_KEYS, "beta_1", "beta_2", "epsilon", "amsgrad"};
    static const char *const kl[] = {"name",   "learning_rate", "decay",  "beta_1",
                                     "beta_2", "epsilon",       "amsgrad"};
    for (int legacy = 0; legacy < 2; legacy++) {
        cJSON *c = legacy ? ot_config_of(ot_gen(LAZY(""), 1), "LazyAdam", OT_KEYS(kl))
                          : ot_config_of(LAZY(""), "lazy_adam", OT_KEYS(k3));
        ot_expect_numbers(c, "learning_rate", 0.001, "beta_1", 0.9, "beta_2", 0.999, "epsilon",
                          1e-7, NULL);
        assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "amsgrad")));
        cJSON_Delete(c);
        /* slots */
        optim_optimizer *opt = optim_test_make(ot_gen(LAZY(""), legacy));
        int64_t n = 2;
        optim_var *x = optim_test_var("w", OPTIM_F64, 1, &n, (double[2]){0});
        assert_ok(optim_build(opt, &x, 1), opt);
        ot_expect_slot_names(opt, "m", "v", NULL);
        optim_test_free(opt, x);
    }
    /* Legacy epsilon 0 or None: 1e-7, written as such, keys in order. */
    for (int c = 0; c < 2; c++)
        ot_expect_config_has(c ? LAZY("\"epsilon\": null, " LEGACY)
                               : LAZY("\"epsilon\": 0, " LEGACY),
                             "\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":false}");
    const char *cfgs[] = {
        LAZY(
            "\"learning_rate\": 0.5, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, \"clipnorm\": 1.0"),
        LAZY(
            "\"learning_rate\": 0.5, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, \"decay\": 0.5, "
            "\"clipnorm\": 1.0, \"name\": \"lazy\", " LEGACY),
    };
    for (int i = 0; i < 2; i++) ot_check_round_trip(cfgs[i]);
}

OPTIM_TEST(test_config_refused)
{
    ot_expect_refused_gens(LAZY("\"amsgrad\": true"), OPTIM_ENOTSUP, "amsgrad", NULL);
    ot_expect_refused_gens(LAZY("\"beta_1\": 1.5"), OPTIM_ERANGE, "beta_1", "[0, 1)");
    ot_expect_refused_gens(LAZY("\"beta_2\": 1.0"), OPTIM_ERANGE, "beta_2", "[0, 1)");
    ot_expect_refused_gens(LAZY("\"epsilon\": -1e-3"), OPTIM_ERANGE, "epsilon", "[0, inf)");
    ot_expect_refused_gens(LAZY("\"lazy\": true"), OPTIM_EKEY, "lazy", NULL);
    ot_expect_refused(LAZY("\"weight_decay\": 0.1, " LEGACY), OPTIM_EKEY, "weight_decay", NULL);
    ot_expect_refused(LAZY("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
    optim_optimizer *opt = optim_test_make(LAZY(""));
    assert_status(optim_set_hyper(opt, "amsgrad", 1), OPTIM_ENOTSUP, opt);
    assert_contains(optim_errmsg(opt), "amsgrad");
    double a;
    assert_ok(optim_get_hyper(opt, "amsgrad", &a), opt);
    assert_eq(a, 0);
    optim_destroy(opt);
}

/* ---- threads -------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", "v", NULL};
    ot_check_threads(LAZY("\"learning_rate\": 0.01"), 2, 3, 1, slots);
    ot_check_threads(LAZY("\"learning_rate\": 0.01, " LEGACY), 2, 3, 1, slots);
}

int main(void) { return optim_test_run(); }
