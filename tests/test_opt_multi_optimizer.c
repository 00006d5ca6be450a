/* MultiOptimizer (Keras 3.15, keras/src/optimizers/multi_optimizer.py):
 * routing by exact name, full-match pattern and default, and by explicit
 * list; each sub-optimizer's own step count; Keras's multi_optimizer_test.py
 * values; a 20-step trajectory in f32 and f64 against a double-precision
 * Adam + SGD-momentum reference written here; config round trips with the
 * nested OptimizerMap; weights resume; bad input; a refused step changes
 * nothing. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 20

/* A MultiOptimizer config over an OptimizerMap body. */
#define MULTI(map, extra)                                                                \
    "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": {\"module\": " \
    "\"keras.optimizers\", \"class_name\": \"OptimizerMap\", \"config\": " map           \
    ", \"registered_name\": "                                                            \
    "null}" extra "}}"
#define SGD(lr) "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": " lr "}}"

static optim_grad g64(double *g, int64_t n)
{
    return optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n));
}

/* ---- Keras's tests --------------------------------------------------------------------------- */

/* test_stateful_apply: three SGDs by pattern, iterations 1 everywhere. */
OPTIM_TEST(test_keras_stateful_apply)
{
    optim_optimizer *opt = optim_test_make(
        MULTI("{\"default_optimizer\": " SGD(
                  "0.0") ", \"optimizer_map\": "
                         "{\"^dense_1/.*\": " SGD("0.1") ", \"^dense_2/.*\": " SGD("1.0") "}}",
              ""));
    const int64_t two = 2;
    const double a[2] = {2, 2}, b[2] = {3, 3}, c[2] = {4, 4};
    optim_var *w1 = optim_test_var("dense_1/kernel", OPTIM_F64, 1, &two, a);
    optim_var *w2 = optim_test_var("dense_2/kernel", OPTIM_F64, 1, &two, b);
    optim_var *w3 = optim_test_var("other/kernel", OPTIM_F64, 1, &two, c);
    optim_var *vars[3] = {w1, w2, w3};
    assert_ok(optim_build(opt, vars, 3), opt);
    double g[3][2] = {{1, 1}, {1, 1}, {1, 1}};
    optim_grad_var p[3] = {{g64(g[0], 2), w1}, {g64(g[1], 2), w2}, {g64(g[2], 2), w3}};
    ot_step(opt, p, 3);
    for (int i = 0; i < 2; i++) {
        assert_close(optim_var_get(w1, i), 1.9, 1e-15, 0);
        assert_close(optim_var_get(w2, i), 2.0, 1e-15, 0);
        assert_close(optim_var_get(w3, i), 4.0, 1e-15, 0);
    }
    assert_eq(optim_iterations(opt), 1);
    for (size_t k = 0; k < 3; k++) assert_eq(optim_iterations(optim_wrapper_inner_at(opt, k)), 1);
    assert_null(optim_wrapper_inner_at(opt, 3));
    /* A variable the built optimizer does not know is refused. */
    optim_var *other = optim_test_var("x", OPTIM_F64, 1, &two, a);
    optim_grad_var q = {g64(g[0], 2), other};
    assert_status(optim_apply_gradients(opt, &q, 1, 0), OPTIM_ENOTFOUND, opt);
    assert_contains(optim_errmsg(opt), "'x'");
    optim_var_destroy(other);
    optim_destroy(opt);
    for (int i = 0; i < 3; i++) optim_var_destroy(vars[i]);
}

/* test_optimizer_map_matching / test_multi_optimizer_initialization /
 * test_default_fallback: which sub-optimizer gets a variable, their order,
 * and conflicting patterns. */
OPTIM_TEST(test_keras_matching)
{
    optim_optimizer *opt = optim_test_make(MULTI(
        "{\"default_optimizer\": {\"class_name\": \"RMSprop\", \"config\": {}}, \"optimizer_map\": {\"^dense/.*\": "
        "{\"class_name\": \"Adam\", \"config\": {}}, \"^conv/.*\": {\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.9}}}}",
        ""));
    const char *want[3] = {"Adam", "SGD", "RMSprop"};
    for (size_t k = 0; k < 3; k++)
        assert_string_equal(optim_class_of(optim_wrapper_inner_at(opt, k))->name, want[k]);
    const int64_t one = 1;
    const double x = 1;
    optim_var *v[3] = {optim_test_var("dense/kernel", OPTIM_F64, 1, &one, &x),
                       optim_test_var("conv/kernel", OPTIM_F64, 1, &one, &x),
                       optim_test_var("bias", OPTIM_F64, 1, &one, &x)};
    assert_ok(optim_build(opt, v, 3), opt);
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 0), v[0], "m"));
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 1), v[1], "momentum"));
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 2), v[2], "rms"));
    assert_null(optim_get_slot(optim_wrapper_inner_at(opt, 2), v[0], "rms"));
    /* The wrapper finds every slot. */
    assert_non_null(optim_get_slot(opt, v[0], "m"));
    assert_non_null(optim_get_slot(opt, v[2], "rms"));
    optim_destroy(opt);
    /* Two patterns matching one name: refused when the variable is seen,
     * and nothing is built. */
    opt = optim_test_make(
        MULTI("{\"default_optimizer\": " SGD("0.1") ", \"optimizer_map\": {\".*kernel.*\": " SGD(
                  "0.2") ", \".*dense.*\": " SGD("0.3") "}}",
              ""));
    assert_status(optim_build(opt, v, 1), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "multiple optimizers assigned to variable 'dense/kernel'");
    assert_eq(optim_weights_count(opt), 1 + 3);
    /* The exact name wins over patterns (OptimizerMap.__getitem__). */
    optim_destroy(opt);
    opt = optim_test_make(
        MULTI("{\"default_optimizer\": " SGD("0.1") ", \"optimizer_map\": {\".*kernel.*\": " SGD(
                  "0.2") ", \"dense/kernel\": " SGD("0.5") "}}",
              ""));
    double g = 1;
    optim_grad_var p = {g64(&g, 1), v[0]};
    ot_step(opt, &p, 1);
    assert_close(optim_var_get(v[0], 0), 0.5, 1e-15, 0);
    optim_destroy(opt);
    for (int i = 0; i < 3; i++) optim_var_destroy(v[i]);
}

/* test_multi_optimizer_with_model_fit: Dense(2) then Dense(1), kernels of
 * ones, no bias, x = 1, y = 0, mse: the gradients are 4 everywhere; the
 * default optimizer gets nothing and does not step. */
OPTIM_TEST(test_keras_model_fit)
{
    optim_optimizer *opt = optim_test_make(
        MULTI("{\"default_optimizer\": " SGD(
                  "0.1") ", \"optimizer_map\": "
                         "{\".*dense_1/.*\": " SGD("1e-3") ", \".*dense_2/.*\": " SGD("1e-2") "}}",
              ""));
    const int64_t s1[2] = {1, 2}, s2[2] = {2, 1};
    const double ones[2] = {1, 1};
    optim_var *k1 = optim_test_var("sequential/dense_1/kernel", OPTIM_F32, 2, s1, ones);
    optim_var *k2 = optim_test_var("sequential/dense_2/kernel", OPTIM_F32, 2, s2, ones);
    float g[2] = {4, 4};
    optim_grad_var p[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, s1)), k1},
                           {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, s2)), k2}};
    ot_step(opt, p, 2);
    for (int i = 0; i < 2; i++) {
        assert_close(optim_var_get(k1, i), 0.996, 1e-6, 0);
        assert_close(optim_var_get(k2, i), 0.96, 1e-6, 0);
    }
    assert_eq(optim_iterations(opt), 1);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 0)), 1);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 1)), 1);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 2)), 0);
    optim_test_free(opt, k1, k2);
}

/* test_loss_scaling / test_gradient_unscaling: the MultiOptimizer's
 * loss_scale_factor overrides its sub-optimizers'. */
OPTIM_TEST(test_keras_loss_scale)
{
    optim_optimizer *opt = optim_test_make(
        MULTI("{\"default_optimizer\": {\"class_name\": \"SGD\", \"config\": "
              "{\"learning_rate\": 0.1, \"loss_scale_factor\": 2.0}}, \"optimizer_map\": {}}",
              ", \"loss_scale_factor\": 5.0"));
    double scaled, lsf;
    assert_ok(optim_scale_loss(opt, 2.0, &scaled), opt);
    assert_eq(scaled, 10.0);
    assert_ok(optim_get_hyper(optim_wrapper_inner_at(opt, 0), "loss_scale_factor", &lsf),
              optim_wrapper_inner_at(opt, 0));
    assert_eq(lsf, 5.0);
    const int64_t two = 2;
    optim_var *w = optim_test_var("dense_1/kernel", OPTIM_F64, 1, &two, (const double[2]){2, 2});
    optim_grad_var p = {g64((double[2]){10, 10}, 2), w};
    ot_step(opt, &p, 1);
    assert_close(optim_var_get(w, 0), 1.8, 1e-15, 0);
    /* None overrides too, and a later change reaches the sub-optimizers. */
    assert_ok(optim_set_hyper(opt, "loss_scale_factor", NAN), opt);
    assert_ok(optim_get_hyper(optim_wrapper_inner_at(opt, 0), "loss_scale_factor", &lsf),
              optim_wrapper_inner_at(opt, 0));
    assert_nan(lsf);
    optim_test_free(opt, w);
}

/* test_custom_callable_function, in C: explicit lists beat the patterns. */
OPTIM_TEST(test_assign_by_list)
{
    optim_optimizer *opt = optim_test_make(
        MULTI("{\"default_optimizer\": " SGD(
                  "0.01") ", \"optimizer_map\": "
                          "{\"dense_1/.*\": {\"class_name\": \"Adam\", \"config\": {}}}}",
              ""));
    const int64_t one = 1;
    const double x = 1;
    optim_var *w1 = optim_test_var("dense_1/kernel", OPTIM_F64, 1, &one, &x);
    optim_var *w2 = optim_test_var("dense_2/kernel", OPTIM_F64, 1, &one, &x);
    assert_ok(optim_multi_optimizer_assign(opt, &w1, 1, 1), opt);
    assert_status(optim_multi_optimizer_assign(opt, &w2, 1, 2), OPTIM_ERANGE, opt);
    assert_status(optim_multi_optimizer_assign(opt, NULL, 1, 0), OPTIM_EINVAL, opt);
    double g[2] = {1, 1};
    optim_grad_var p[2] = {{g64(&g[0], 1), w1}, {g64(&g[1], 1), w2}};
    ot_step(opt, p, 2);
    assert_close(optim_var_get(w1, 0), 0.99, 1e-15, 0);
    assert_close(optim_var_get(w2, 0), 0.99, 1e-15, 0);
    /* Once its slots exist in one sub-optimizer, a variable stays there. */
    assert_status(optim_multi_optimizer_assign(opt, &w1, 1, 0), OPTIM_ESTATE, opt);
    optim_optimizer *sgd = optim_test_make("\"sgd\"");
    assert_status(optim_multi_optimizer_assign(sgd, &w1, 1, 0), OPTIM_EINVAL, sgd);
    assert_null(optim_wrapper_inner_at(sgd, 0));
    assert_null(optim_wrapper_inner_at(NULL, 0));
    assert_status(optim_multi_optimizer_assign(NULL, &w1, 1, 0), OPTIM_EINVAL, NULL);
    optim_destroy(sgd);
    /* A one-optimizer wrapper: index 0 is its inner optimizer. */
    optim_optimizer *la = optim_test_make(
        "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": " SGD("0.1") "}}");
    assert_ptr_equal(optim_wrapper_inner_at(la, 0), optim_wrapper_inner(la));
    assert_non_null(optim_wrapper_inner_at(la, 0));
    assert_null(optim_wrapper_inner_at(la, 1));
    optim_destroy(la);
    optim_test_free(opt, w1, w2);
}

/* ---- a trajectory against a reference ---------------------------------------------------- */

/* "^dense/.*": Adam (Keras 3 rule); default: SGD with momentum 0.9. The
 * bias gets a gradient every other step only, so SGD's count differs from
 * Adam's, which sees every step. */
OPTIM_TEST(test_trajectory)
{
    const char *json = MULTI(
        "{\"default_optimizer\": {\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, "
        "\"momentum\": 0.9}}, \"optimizer_map\": {\"^dense/.*\": {\"class_name\": \"Adam\", "
        "\"config\": {\"learning_rate\": 0.02, \"beta_1\": 0.8}}}}",
        "");
    const int64_t n = 5;
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        double k[5], b[5], m[5] = {0}, v[5] = {0}, mom[5] = {0};
        for (int i = 0; i < 5; i++) k[i] = 0.3 * i - 0.5, b[i] = 1 - 0.2 * i;
        optim_var *kv = optim_test_var("dense/kernel", dt, 1, &n, k),
                  *bv = optim_test_var("bias", dt, 1, &n, b);
        for (int i = 0; i < 5; i++) k[i] = optim_var_get(kv, i), b[i] = optim_var_get(bv, i);
        for (int t = 0; t < STEPS; t++) {
            double gk[5], gb[5];
            float fk[5], fb[5];
            for (int i = 0; i < 5; i++) {
                fk[i] = (float)sin(0.7 * t + i), fb[i] = (float)cos(0.3 * t - i);
                gk[i] = dt == OPTIM_F64 ? sin(0.7 * t + i) : fk[i];
                gb[i] = dt == OPTIM_F64 ? cos(0.3 * t - i) : fb[i];
            }
            optim_grad_var p[2] = {
                {optim_grad_dense(
                     optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)gk : (void *)fk, 1, &n)),
                 kv},
                {t % 2 ? optim_grad_none()
                       : optim_grad_dense(optim_tensor_make(
                             dt, dt == OPTIM_F64 ? (void *)gb : (void *)fb, 1, &n)),
                 bv}};
            ot_step(opt, p, 2);
            double alpha = 0.02 * sqrt(1 - pow(0.999, t + 1)) / (1 - pow(0.8, t + 1));
            for (int i = 0; i < 5; i++) {
                m[i] += (gk[i] - m[i]) * 0.2;
                v[i] += (gk[i] * gk[i] - v[i]) * 0.001;
                k[i] -= m[i] * alpha / (sqrt(v[i]) + 1e-7);
                if (t % 2 == 0) {
                    mom[i] = 0.9 * mom[i] - 0.05 * gb[i];
                    b[i] += mom[i];
                }
            }
        }
        double rtol = dt == OPTIM_F64 ? 1e-12 : 1e-5, atol = dt == OPTIM_F64 ? 1e-14 : 1e-6;
        for (int i = 0; i < 5; i++) {
            assert_close(optim_var_get(kv, i), k[i], rtol, atol);
            assert_close(optim_var_get(bv, i), b[i], rtol, atol);
            assert_close(optim_var_get(optim_get_slot(opt, kv, "v"), i), v[i], rtol, atol);
            assert_close(optim_var_get(optim_get_slot(opt, bv, "momentum"), i), mom[i], rtol, atol);
        }
        assert_eq(optim_iterations(opt), STEPS);
        assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 0)), STEPS);
        assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 1)), STEPS / 2);
        optim_test_free(opt, kv, bv);
    }
}

/* ---- weights ----------------------------------------------------------------------------- */

/* Names, and a resume through get/set_weights that continues bit for bit,
 * sub-optimizer step counts included. */
OPTIM_TEST(test_weights_resume)
{
    const char *json = MULTI(
        "{\"default_optimizer\": {\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
        "\"momentum\": 0.5}}, \"optimizer_map\": {\"k\": {\"class_name\": \"Adam\", \"config\": "
        "{\"learning_rate\": 0.1}}}}",
        "");
    const int64_t n = 3;
    const double init[3] = {1, 2, 3};
    optim_optimizer *a = optim_test_make(json), *b = optim_test_make(json);
    optim_var *ka = optim_test_var("k", OPTIM_F64, 1, &n, init),
              *ba = optim_test_var("b", OPTIM_F64, 1, &n, init);
    optim_var *kb = optim_test_var("k", OPTIM_F64, 1, &n, init),
              *bb = optim_test_var("b", OPTIM_F64, 1, &n, init);
    double g[3] = {0.5, -1, 2};
    for (int t = 0; t < 3; t++) {
        optim_grad_var p[2] = {
            {g64(g, 3), ka},
            {t == 1 ? optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n)) : optim_grad_none(),
             ba}};
        ot_step(a, p, 2);
    }
    const char *names[] = {"iterations",
                           "k/m",
                           "k/v",
                           "b/momentum",
                           "optimizers/0/iterations",
                           "optimizers/1/iterations"};
    assert_eq(optim_weights_count(a), 6);
    for (size_t i = 0; i < 6; i++) assert_string_equal(optim_weight_name(a, i), names[i]);
    optim_tensor w[6];
    optim_get_weights(a, w, 6);
    assert_eq(*(const double *)w[4].data, 3);
    assert_eq(*(const double *)w[5].data, 1);
    /* b: the same variables and weights, then both continue. */
    optim_var *vb[2] = {kb, bb};
    assert_ok(optim_build(b, vb, 2), b);
    optim_var_assign(kb, optim_var_data(ka), OPTIM_F64, 3);
    optim_var_assign(bb, optim_var_data(ba), OPTIM_F64, 3);
    assert_ok(optim_set_weights(b, w, 6), b);
    for (int t = 0; t < 2; t++) {
        optim_grad_var pa[2] = {{g64(g, 3), ka}, {g64(g, 3), ba}},
                       pb[2] = {{g64(g, 3), kb}, {g64(g, 3), bb}};
        ot_step(a, pa, 2);
        ot_step(b, pb, 2);
    }
    assert_memory_equal(optim_var_data(ka), optim_var_data(kb), sizeof init);
    assert_memory_equal(optim_var_data(ba), optim_var_data(bb), sizeof init);
    assert_eq(optim_iterations(optim_wrapper_inner_at(b, 1)), 3);
    optim_destroy(a);
    optim_test_free(b, ka, ba, kb, bb);
}

/* ---- config and bad input ------------------------------------------------------------------ */

OPTIM_TEST(test_config)
{
    optim_optimizer *opt = optim_test_make(
        MULTI("{\"default_optimizer\": " SGD(
                  "0.1") ", \"optimizer_map\": "
                         "{\"^a\\\\.b$\": {\"class_name\": \"Muon\", \"config\": {}}}}",
              ", \"name\": \"multi_optimizer\""));
    char *ser = optim_serialize(opt);
    /* Keras's keys: optimizer_map, loss_scale_factor, name; the map as
     * Keras serializes an OptimizerMap, the entries before the default. */
    const char *head =
        "{\"module\":\"keras.optimizers\",\"class_name\":\"MultiOptimizer\",\"config\":{\"optimizer_map\":{\"module\":\"keras.optimizers\","
        "\"class_name\":\"OptimizerMap\",\"config\":{\"default_optimizer\":{\"module\":\"keras.optimizers\","
        "\"class_name\":\"SGD\",\"config\":{";
    assert_memory_equal(ser, head, strlen(head));
    assert_contains(
        ser,
        "\"optimizer_map\":{\"^a\\\\.b$\":{\"module\":\"keras.optimizers\",\"class_name\":\"Muon\"");
    const char *tail =
        "\"registered_name\":null}}},\"registered_name\":null},\"loss_scale_factor\":null,"
        "\"name\":\"multi_optimizer\"},\"registered_name\":null}";
    assert_string_equal(ser + strlen(ser) - strlen(tail), tail);
    optim_optimizer *back = optim_test_make(ser);
    char *ser2 = optim_serialize(back);
    assert_string_equal(ser, ser2);
    optim_free(ser);
    optim_free(ser2);
    optim_destroy(back);
    optim_destroy(opt);
}

OPTIM_TEST(test_bad_input)
{
    ot_expect_refused("{\"class_name\": \"MultiOptimizer\", \"config\": {}}", OPTIM_EINVAL,
                      "optimizer_map", NULL);
    ot_expect_refused(
        "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": " SGD("0.1") "}}",
        OPTIM_ETYPE, "OptimizerMap", NULL);
    ot_expect_refused(MULTI("{\"optimizer_map\": {}}", ""), OPTIM_ETYPE, "default_optimizer", NULL);
    ot_expect_refused(
        MULTI("{\"default_optimizer\": " SGD("0.1") ", \"optimizer_map\": {\"(\": " SGD("0.1") "}}",
              ""),
        OPTIM_EINVAL, "optimizer_map['(']: not a valid regular expression", NULL);
    ot_expect_refused(MULTI("{\"default_optimizer\": " SGD("-1") ", \"optimizer_map\": {}}", ""),
                      OPTIM_ERANGE, "default_optimizer", NULL);
    ot_expect_refused(
        MULTI(
            "{\"default_optimizer\": {\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD(
                "0.1") "}}, \"optimizer_map\": {}}",
            ""),
        OPTIM_EINVAL, "optimizer cannot be LossScaleOptimizer", NULL);
    ot_expect_refused(
        MULTI("{\"default_optimizer\": " SGD("0.1") ", \"optimizer_map\": {\"x\": " MULTI(
                  "{\"default_optimizer\": " SGD("0.1") "}", "") "}}",
              ""),
        OPTIM_EINVAL, "MultiOptimizer cannot be used inside a MultiOptimizer", NULL);
    ot_expect_refused(
        MULTI(
            "{\"default_optimizer\": {\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true}}}",
            ""),
        OPTIM_EINVAL, "legacy", NULL);
    ot_expect_refused(MULTI("{\"default_optimizer\": " SGD("0.1") "}", ", \"learning_rate\": 0.1"),
                      OPTIM_EINVAL, "does not take `learning_rate`", NULL);
    ot_expect_refused(MULTI("{\"default_optimizer\": " SGD("0.1") "}", ", \"use_ema\": true"),
                      OPTIM_ENOTSUP, "use_ema", NULL);
    /* The legacy generation is TF Addons' (optimizer_specs). */
    ot_expect_refused(
        MULTI("{\"default_optimizer\": " SGD("0.1") "}", ", \"is_legacy_optimizer\": true"),
        OPTIM_EKEY, "takes 'optimizer_specs'", NULL);
}

/* A pair the second sub-optimizer would refuse is caught before the first
 * one steps: nothing changes. */
OPTIM_TEST(test_refused_step_changes_nothing)
{
    optim_optimizer *opt =
        optim_test_make(MULTI("{\"default_optimizer\": " SGD(
                                  "0.1") ", \"optimizer_map\": "
                                         "{\"a\": {\"class_name\": \"Adam\", \"config\": {}}}}",
                              ""));
    const int64_t two = 2, three = 3;
    const double x[3] = {1, 2, 3};
    optim_var *a = optim_test_var("a", OPTIM_F64, 1, &two, x),
              *b = optim_test_var("b", OPTIM_F64, 1, &two, x);
    double g[3] = {1, 1, 1};
    optim_grad_var p[2] = {{g64(g, 2), a},
                           {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &three)), b}};
    assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_ESHAPE, opt);
    assert_contains(optim_errmsg(opt), "'b'");
    assert_eq(optim_var_get(a, 0), 1);
    assert_eq(optim_var_get(a, 1), 2);
    assert_eq(optim_iterations(opt), 0);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 0)), 0);
    /* The same variable twice, and no gradient at all. */
    optim_grad_var dup[2] = {{g64(g, 2), a}, {g64(g, 2), a}};
    assert_status(optim_apply_gradients(opt, dup, 2, 0), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "more than once");
    optim_grad_var none = {optim_grad_none(), a};
    assert_status(optim_apply_gradients(opt, &none, 1, 0), OPTIM_EINVAL, opt);
    assert_eq(optim_var_get(a, 0), 1);
    optim_test_free(opt, a, b);
}

/* 1, 2 and 3 threads in the sub-optimizers: the same bits (a large
 * element-wise Adam variable, a Muon matrix, a sparse SGD table). */
OPTIM_TEST(test_threads_bitwise)
{
    const int64_t n = 100003, ms[2] = {64, 48}, ts[2] = {30, 4}, vs[2] = {2, 4}, idx[2] = {29, 3};
    float *g = malloc((size_t)n * sizeof *g), rows[8];
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++)
        d[i] = sin(0.01 * (double)i), g[i] = (float)cos(0.3 * (double)i);
    for (int i = 0; i < 8; i++) rows[i] = (float)i - 3.5f;
    optim_var *v[3][3];
    optim_optimizer *o[3];
    for (int t = 0; t < 3; t++) {
        o[t] = optim_test_make(MULTI(
            "{\"default_optimizer\": {\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.9}}, "
            "\"optimizer_map\": {\"big\": {\"class_name\": \"Adam\", \"config\": {}}, \"mat\": "
            "{\"class_name\": \"Muon\", \"config\": {}}}}",
            ""));
        for (size_t k = 0; k < 3; k++)
            assert_ok(optim_set_num_threads(optim_wrapper_inner_at(o[t], k), t + 1),
                      optim_wrapper_inner_at(o[t], k));
        v[t][0] = optim_test_var("big", OPTIM_F32, 1, &n, d);
        v[t][1] = optim_test_var("mat", OPTIM_F32, 2, ms, d);
        v[t][2] = optim_test_var("table", OPTIM_F32, 2, ts, d);
        for (int k = 0; k < 3; k++) {
            optim_grad_var p[3] = {
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), v[t][0]},
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, g + k, 2, ms)), v[t][1]},
                {optim_grad_sparse(idx, 2, optim_tensor_make(OPTIM_F32, rows, 2, vs)), v[t][2]}};
            ot_step(o[t], p, 3);
        }
    }
    for (int t = 1; t < 3; t++)
        for (int j = 0; j < 3; j++)
            assert_memory_equal(optim_var_data(v[0][j]), optim_var_data(v[t][j]),
                                (size_t)optim_var_numel(v[0][j]) * 4);
    for (int t = 0; t < 3; t++) {
        for (int j = 0; j < 3; j++) optim_var_destroy(v[t][j]);
        optim_destroy(o[t]);
    }
    free(g);
    free(d);
}

int main(void) { return optim_test_run(); }
