/* Adagrad against independent double-precision references: trajectories in
 * f32 and f64 in both generations (epsilon inside the square root in Keras
 * 3, outside it in legacy's ApplyAdagradV2), initial_accumulator_value,
 * legacy decay, sparse gradients with duplicate indices (indexed rows only
 * in both generations, which is Keras 3's dense equivalent, except where
 * the dense rule divides 0 by 0), the Keras golden values, config keys,
 * ranges and round trips, and thread-count independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 7
#define ADAGRAD(cfg) "{\"class_name\": \"Adagrad\", \"config\": {" cfg "}}"

typedef struct cfg {
    double lr, init, eps, decay;
    int legacy;
} cfg;

/* The published rule in double precision (legacy decay lr / (1 + decay k)):
 *   acc += g^2;  Keras 3: w -= lr g / sqrt(acc + eps);  legacy: w -= lr g / (sqrt(acc) + eps) */
static void ref_step(const void *c_, int k, double *w, double *const *st, const double *g, int n)
{
    const cfg *c = c_;
    double lr = c->legacy ? c->lr / (1.0 + c->decay * k) : c->lr, *acc = st[0];
    for (int i = 0; i < n; i++) {
        acc[i] += g[i] * g[i];
        if (c->legacy) w[i] -= lr * g[i] / (sqrt(acc[i]) + c->eps);
        else w[i] -= lr * g[i] / sqrt(acc[i] + c->eps);
    }
}

static ot_case make_case(const cfg *c)
{
    const char *decay = c->legacy ? ot_fmt(", \"decay\": %.17g, " OT_LEGACY, c->decay) : "";
    const char *json = ot_fmt(
        ADAGRAD(
            "\"learning_rate\": %.17g, \"initial_accumulator_value\": %.17g, \"epsilon\": %.17g%s"),
        c->lr, c->init, c->eps, decay);
    return (ot_case){
        json, ref_step, c, 1, {"accumulator"}, .state_init = {c->init}, .exact_slots = 1};
}

OPTIM_TEST(test_trajectories)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        ot_check_dense(&OT_DENSE, make_case(&(cfg){0.1, 0.1, 1e-7, 0, legacy}));
        ot_check_dense(
            &OT_DENSE,
            make_case(&(cfg){0.05, 0.1, 0.1, 0, legacy})); /* epsilon placement visible */
        ot_check_dense(&OT_DENSE, make_case(&(cfg){0.2, 0.0, 1e-3, 0, legacy}));
        ot_check_dense(&OT_DENSE, make_case(&(cfg){0.1, 2.5, 1e-7, 0, legacy}));
    }
    ot_check_dense(&OT_DENSE, make_case(&(cfg){0.5, 0.3, 1e-6, 0.2, 1})); /* legacy decay */
}

/* The slot starts at initial_accumulator_value (rounded to the dtype). */
OPTIM_TEST(test_slot_initial_value)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt =
                optim_test_make(make_case(&(cfg){0.1, 0.3, 1e-7, 0, legacy}).json);
            optim_var *v = optim_test_var("v", dt, 1, (int64_t[1]){3}, (double[3]){1, 2, 3});
            assert_ok(optim_build(opt, &v, 1), opt);
            const double acc = dt == OPTIM_F64 ? 0.3 : (double)0.3f;
            assert_var_eq(optim_get_slot(opt, v, "accumulator"), ((double[3]){acc, acc, acc}), 3);
            optim_test_free(opt, v);
        }
}

/* Keras 3 and legacy differ where epsilon's placement matters. */
OPTIM_TEST(test_generations_differ)
{
    double w[2];
    for (int legacy = 0; legacy < 2; legacy++)
        w[legacy] =
            ot_scalar_step(make_case(&(cfg){0.1, 0.0, 0.5, 0, legacy}).json, OPTIM_F64, 1.0, 2.0);
    assert_close(w[0], 1 - 0.2 / sqrt(4.5), 1e-15, 0);
    assert_close(w[1], 1 - 0.2 / (2 + 0.5), 1e-15, 0);
}

/* Each generation's float32 operation order, bit for bit: Keras 3
 * w - (lr * g) / sqrt(acc + eps); ApplyAdagradV2 w - (g * lr) / (sqrt(acc) + eps). */
static void ref_f32(const void *c_, int k, float *w, float *const *st, const float *g, int n)
{
    const cfg *c = c_;
    const float lr = (float)c->lr, eps = (float)c->eps;
    float *acc = st[0];
    (void)k;
    for (int i = 0; i < n; i++) {
        acc[i] = acc[i] + g[i] * g[i];
        w[i] = c->legacy ? w[i] - (g[i] * lr) / (sqrtf(acc[i]) + eps)
                         : w[i] - (lr * g[i]) / sqrtf(acc[i] + eps);
    }
}

OPTIM_TEST(test_f32_operation_order)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int sparse = 0; sparse < 2; sparse++) {
            cfg c = {0.1, 0.1, 1e-3, 0, legacy};
            ot_case oc = make_case(&c);
            oc.ref32 = ref_f32;
            ot_check_f32(&OT_DENSE, 6, &oc, sparse);
        }
}

/* ---- Keras golden values --------------------------------------------------- */

/* keras/src/optimizers/adagrad_test.py test_single_step (legacy agrees to 4 digits). */
OPTIM_TEST(test_keras_single_step)
{
    const double want[4] = {0.5233, 1.5007, 2.5005, 3.5061};
    ot_check_keras_single_step(ADAGRAD("\"learning_rate\": 0.5"), want);
    ot_check_keras_single_step(ADAGRAD("\"learning_rate\": 0.5, " OT_LEGACY), want);
}

/* adagrad_test.py test_correctness_with_golden (both generations agree to
 * the test's tolerance). */
OPTIM_TEST(test_keras_golden)
{
    static const double golden[5][10] = {
        {0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963},
        {0.9604, 0.9278, 0.9003, 0.8784, 0.8615, 0.8487, 0.8388, 0.8313, 0.8255, 0.8209},
        {0.9251, 0.8629, 0.8137, 0.7768, 0.7497, 0.7298, 0.7151, 0.704, 0.6956, 0.6891},
        {0.8903, 0.8012, 0.7342, 0.6862, 0.6521, 0.6277, 0.6099, 0.5967, 0.5867, 0.579},
        {0.856, 0.7422, 0.6604, 0.6037, 0.5644, 0.5367, 0.5168, 0.5021, 0.491, 0.4825}};
    OPTIM_FOR_DTYPES(dt)
    {
        ot_check_keras_golden(
            ADAGRAD(
                "\"learning_rate\": 0.2, \"initial_accumulator_value\": 0.3, \"epsilon\": 1e-6"),
            dt, golden[0], 10);
        ot_check_keras_golden(
            ADAGRAD(
                "\"learning_rate\": 0.2, \"initial_accumulator_value\": 0.3, \"epsilon\": 1e-6, " OT_LEGACY),
            dt, golden[0], 10);
    }
}

OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(ADAGRAD("\"learning_rate\": 1.0, \"weight_decay\": 0.004"),
                                OPTIM_F32);
}

/* tf_keras legacy adagrad_test testMinimizeSparseResourceVariable: var
 * [[1, 2], [3, 4]], row 0 gets gradient [112, 140], lr 1: [[0, 1], [3, 4]]. */
OPTIM_TEST(test_legacy_minimize_sparse)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt =
                optim_test_make(ot_gen(ADAGRAD("\"learning_rate\": 1.0"), legacy));
            optim_var *v =
                optim_test_var("var0", dt, 2, (int64_t[2]){2, 2}, (double[4]){1, 2, 3, 4});
            ot_step_row(opt, v, 0, (double[]){112, 140});
            const double want[4] = {0, 1, 3, 4};
            for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), want[i], 0, 0.01);
            assert_eq(optim_var_get(v, 2), 3);
            assert_eq(optim_var_get(v, 3), 4);
            optim_test_free(opt, v);
        }
}

/* testSparseRepeatedIndices: indices [1, 1] with 0.1 each equal one 0.2. */
OPTIM_TEST(test_sparse_repeated_indices)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *json = ot_gen(ADAGRAD("\"learning_rate\": 3.0"), legacy);
        optim_optimizer *o1 = optim_test_make(json), *o2 = optim_test_make(json);
        double init[2] = {1, 2};
        int64_t shape[2] = {2, 1};
        optim_var *rep = optim_test_var("rep", OPTIM_F64, 2, shape, init),
                  *agg = optim_test_var("agg", OPTIM_F64, 2, shape, init);
        int64_t ri[2] = {1, 1}, rs[2] = {2, 1};
        double rv[2] = {0.1, 0.1};
        for (int k = 0; k < 3; k++) {
            optim_grad_var p1 = {optim_grad_sparse(ri, 2, optim_tensor_make(OPTIM_F64, rv, 2, rs)),
                                 rep};
            ot_step(o1, &p1, 1);
            ot_step_row(o2, agg, 1, (double[]){0.2});
            for (int i = 0; i < 2; i++)
                assert_close(optim_var_get(rep, i), optim_var_get(agg, i), 1e-15, 0);
        }
        optim_destroy(o1);
        optim_test_free(o2, rep, agg);
    }
}

/* ---- sparse ------------------------------------------------------------------- */

/* Keras 3: sparse == dense equivalent, bit for bit (also in the degenerate
 * initial_accumulator_value = epsilon = 0, where rows without a gradient
 * become 0 / 0 = NaN in the dense rule). */
OPTIM_TEST(test_sparse_keras3_dense_equivalent)
{
    const cfg cfgs[3] = {{0.1, 0.1, 1e-7, 0, 0}, {0.1, 0.0, 1e-2, 0, 0}, {0.1, 0.0, 0.0, 0, 0}};
    static const char *const slots[] = {"accumulator", NULL};
    for (int c = 0; c < 3; c++) {
        const char *json = make_case(&cfgs[c]).json;
        ot_check_sparse_equals_dense(&OT_SPARSE, json, slots);
        /* Row 0 has no gradient at step 0: 0 / sqrt(0 + 0) (NaN) in the degenerate case. */
        optim_optimizer *opt = optim_test_make(json);
        optim_var *sv = ot_run_sparse(opt, &OT_SPARSE, OPTIM_F64, 0);
        assert_eq(isnan(optim_var_get(sv, 0)), c == 2);
        optim_test_free(opt, sv);
    }
}

/* Both generations against the reference: duplicates summed, the indexed
 * rows updated, the others bit-identical. */
OPTIM_TEST(test_sparse_rows_only)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        ot_check_sparse(&OT_SPARSE, make_case(&(cfg){0.1, 0.1, 1e-2, 0, legacy}), 1);
    }
}

/* ---- config --------------------------------------------------------------------- */

OPTIM_TEST(test_config_keys)
{
    ot_expect_config(
        "\"adagrad\"",
        "{\"name\":\"adagrad\",\"learning_rate\":0.001,\"weight_decay\":null,\"clipnorm\":null,"
        "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
        "\"gradient_accumulation_steps\":null,\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
    ot_expect_config(ADAGRAD(OT_LEGACY),
                     "{\"name\":\"Adagrad\",\"learning_rate\":0.001,\"decay\":0.0,"
                     "\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
    ot_expect_config(ADAGRAD("\"epsilon\": null, " OT_LEGACY),
                     "{\"name\":\"Adagrad\",\"learning_rate\":0.001,\"decay\":0.0,"
                     "\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
    ot_expect_config(ADAGRAD("\"epsilon\": 0.0, " OT_LEGACY),
                     "{\"name\":\"Adagrad\",\"learning_rate\":0.001,\"decay\":0.0,"
                     "\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
}

/* Legacy epsilon 0 is the backend epsilon 1e-7 in the update too. */
OPTIM_TEST(test_legacy_epsilon_zero)
{
    const char *cfgs[3] = {
        ADAGRAD(
            "\"learning_rate\": 1.0, \"initial_accumulator_value\": 0.0, \"epsilon\": 0.0, " OT_LEGACY),
        ADAGRAD(
            "\"learning_rate\": 1.0, \"initial_accumulator_value\": 0.0, \"epsilon\": null, " OT_LEGACY),
        ADAGRAD("\"learning_rate\": 1.0, \"initial_accumulator_value\": 0.0, \"epsilon\": 0.0")};
    for (int c = 0; c < 3; c++) {
        double w = ot_scalar_step(cfgs[c], OPTIM_F64, 1.0, 2.0);
        /* legacy: 1 - 2 / (2 + 1e-7); Keras 3 keeps 0: 1 - 2 / 2 = 0 exactly. */
        if (c < 2) assert_close(w, 1 - 2 / (2 + 1e-7), 1e-6, 0);
        else assert_eq(w, 0.0);
    }
}

OPTIM_TEST(test_config_round_trip)
{
    /* adagrad_test.py test_config. */
    ot_check_round_trip(ADAGRAD("\"learning_rate\": 0.5, "
                                "\"initial_accumulator_value\": 0.2, \"epsilon\": 1e-5"));
    ot_check_round_trip(
        ADAGRAD("\"learning_rate\": 0.5, "
                "\"initial_accumulator_value\": 0.2, \"epsilon\": 1e-5, \"decay\": 0.1, "
                "\"clipvalue\": 2.0, " OT_LEGACY));
}

static double eps_fn(void *user)
{
    (void)user;
    return 1e-3;
}

OPTIM_TEST(test_config_refused)
{
    /* Legacy: initial_accumulator_value must be non-negative. */
    ot_expect_refused(ADAGRAD("\"initial_accumulator_value\": -0.1, " OT_LEGACY), OPTIM_ERANGE,
                      "initial_accumulator_value", "[0, inf)");
    /* Keras 3 does not check it. */
    optim_optimizer *k3 = optim_test_make(ADAGRAD("\"initial_accumulator_value\": -0.1"));
    assert_ok(optim_set_hyper(k3, "initial_accumulator_value", 0.5), k3);
    optim_destroy(k3);
    optim_optimizer *lg = optim_test_make(ADAGRAD(OT_LEGACY));
    assert_status(optim_set_hyper(lg, "initial_accumulator_value", -1.0), OPTIM_ERANGE, lg);
    assert_contains(optim_errmsg(lg), "initial_accumulator_value");
    /* Not hypers: no callables. */
    assert_status(optim_set_hyper_fn(lg, "epsilon", eps_fn, NULL), OPTIM_ETYPE, lg);
    optim_destroy(lg);
    ot_expect_refused(ADAGRAD("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
    ot_expect_refused(ADAGRAD("\"epsilon\": true"), OPTIM_ETYPE, "epsilon", NULL);
    ot_expect_refused(ADAGRAD("\"rho\": 0.9"), OPTIM_EKEY, "rho", NULL);
    ot_expect_refused(ADAGRAD("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr",
                      "generation");
}

/* ---- threads ------------------------------------------------------------------------ */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"accumulator", NULL};
    ot_check_threads(
        ADAGRAD("\"learning_rate\": 0.01, \"initial_accumulator_value\": 0.1, \"epsilon\": 1e-7"),
        2, 4, 0, slots);
    ot_check_threads(
        ADAGRAD(
            "\"learning_rate\": 0.01, \"initial_accumulator_value\": 0.1, \"epsilon\": 1e-7, " OT_LEGACY),
        2, 4, 0, slots);
}

int main(void) { return optim_test_run(); }
