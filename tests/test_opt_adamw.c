/* AdamW against independent references written from the published
 * formulas (tests/ref_adam.h: the Adam step after the decoupled weight decay
 * of each generation) in double precision (f32 and f64, amsgrad on and off, dense and sparse with
 * duplicate indices), plus the float32 order of operations of each
 * generation emulated in float and compared bit for bit, the
 * exclude_from_weight_decay patterns, config key sets, defaults, round trips
 * and refusals, and the test values of Keras (adamw_test.py) and TF Addons
 * (weight_decay_optimizers_test.py). */
#include "ref_adam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 9
#define ADAMW(cfg) "{\"class_name\": \"AdamW\", \"config\": {" cfg "}}"
#define LEGACY OT_LEGACY
#define SP OT_SPARSE_ADAM
#define ROWS 7
#define COLS 3
#define NIDX 5

OPTIM_TEST(test_dense_keras3)
{
    ref_adam r = {0.001, 0.9, 0.999, 1e-7, 0.004, 0, 0, 0};
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case(ADAMW(""), &r));
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case("\"AdamW\"", &r));
    ref_adam r2 = {0.05, 0.8, 0.99, 1e-5, 0.3, 0, 1, 0};
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(
            ADAMW(
                "\"learning_rate\": 0.05, \"weight_decay\": 0.3, \"beta_1\": 0.8, \"beta_2\": 0.99, "
                "\"epsilon\": 1e-5, \"amsgrad\": true"),
            &r2));
}

OPTIM_TEST(test_dense_legacy)
{
    ref_adam r = {0.001, 0.9, 0.999, 1e-7, 0.01, 0, 0, 1};
    ot_check_dense(&OT_DENSE_SHRINK, ref_adam_case(ADAMW("\"weight_decay\": 0.01, " LEGACY), &r));
    ref_adam r2 = {0.05, 0.8, 0.99, 1e-5, 0.02, 0.1, 1, 1};
    ot_check_dense(
        &OT_DENSE_SHRINK,
        ref_adam_case(
            ADAMW(
                "\"learning_rate\": 0.05, \"weight_decay\": 0.02, \"beta_1\": 0.8, \"beta_2\": 0.99, "
                "\"epsilon\": 1e-5, \"amsgrad\": true, \"decay\": 0.1, " LEGACY),
            &r2));
}

/* ---- float32 order of operations ------------------------------------------------ */

OPTIM_TEST(test_f32_operation_order)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int ams = 0; ams < 2; ams++) {
            const char *json = ot_gen(
                ot_fmt(ADAMW("\"learning_rate\": 0.01, \"weight_decay\": 0.03, \"amsgrad\": %s"),
                       ams ? "true" : "false"),
                legacy);
            ref_adam_check_dense_f32(json, legacy, ams, 0.01, 0.03, NULL);
        }
}

/* ---- sparse ---------------------------------------------------------------------- */

OPTIM_TEST(test_sparse_keras3_equals_dense)
{
    static const char *const slots[] = {"m", "v", "vhat", NULL};
    ot_check_sparse_equals_dense(&SP, ADAMW("\"learning_rate\": 0.01, \"weight_decay\": 0.1"),
                                 slots);
    ot_check_sparse_equals_dense(
        &SP, ADAMW("\"learning_rate\": 0.01, \"weight_decay\": 0.1, \"amsgrad\": true"), slots);
}

/* Legacy decays the indexed rows only, Keras 3 every row; Adam moves every
 * row in both. */
OPTIM_TEST(test_sparse_reference)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int ams = 0; ams < 2; ams++) {
            const char *json = ot_gen(
                ot_fmt(ADAMW("\"learning_rate\": 0.01, \"weight_decay\": 0.05, \"amsgrad\": %s"),
                       ams ? "true" : "false"),
                legacy);
            ot_check_sparse(
                &SP, ref_adam_case(json, &(ref_adam){0.01, 0.9, 0.999, 1e-7, 0.05, 0, ams, legacy}),
                0);
        }
}

/* Legacy sparse in float32: the indexed rows are decayed (scatter_add of
 * -wd * w), then Adam._resource_apply_sparse moves every row. Bit for bit. */
OPTIM_TEST(test_sparse_legacy_f32_operation_order)
{
    /* lr 0.7: steps comparable to w, so that the rounding of lr_t shows. */
    for (int cfg = 0; cfg < 4; cfg++) {
        int ams = cfg & 1;
        const char *json =
            ot_fmt(ADAMW("\"learning_rate\": %s, \"weight_decay\": 0.05, \"amsgrad\": %s, " LEGACY),
                   cfg < 2 ? "0.01" : "0.7", ams ? "true" : "false");
        ref_adam_check_legacy_sparse_f32(json, ams, cfg < 2 ? 0.01 : 0.7, 0.05);
    }
}

/* Row by row after one sparse step on rows {1, 4}: legacy decays only the
 * indexed rows (an unindexed row, whose m is 0, stays bit-identical);
 * Keras 3 decays every row. */
OPTIM_TEST(test_sparse_decay_rows)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt =
            optim_test_make(ot_gen(ADAMW("\"weight_decay\": 0.1, \"learning_rate\": 0.5"), legacy));
        double init[5] = {1, 2, 3, 4, 5};
        int64_t shape[2] = {5, 1}, vs[2] = {2, 1}, idx[2] = {1, 4};
        optim_var *x = optim_test_var("e", OPTIM_F64, 2, shape, init);
        optim_grad_var p = {
            optim_grad_sparse(idx, 2, optim_tensor_make(OPTIM_F64, (double[2]){0.25, -0.5}, 2, vs)),
            x};
        ot_step(opt, &p, 1);
        for (int r = 0; r < 5; r++) {
            int touched = r == 1 || r == 4;
            double decayed = legacy ? init[r] - 0.1 * init[r] : init[r] - init[r] * 0.1 * 0.5;
            double gr = r == 1 ? 0.25 : r == 4 ? -0.5 : 0;
            double m = 0.1 * gr, v = 0.001 * gr * gr;
            double a = 0.5 * sqrt(1 - 0.999) / (1 - 0.9);
            double want =
                (touched || !legacy ? decayed : init[r]) - (touched ? a * m / (sqrt(v) + 1e-7) : 0);
            assert_close(optim_var_get(x, r), want, 1e-14, 0);
            if (legacy && !touched) assert_eq(optim_var_get(x, r), init[r]);
        }
        optim_test_free(opt, x);
    }
}

/* ---- exclude_from_weight_decay (legacy) and weight decay values ---------------------- */

/* TF Addons searches TF's names, which end in ":0": "bias$" finds nothing in
 * "dense/bias:0" (the bias is decayed), "bias:0$" finds it (not decayed).
 * Learning rate 0: only the decay w - 0.5 w moves the bias. */
OPTIM_TEST(test_exclude_patterns_see_tf_names)
{
    static const char *const pats[2] = {"\"bias$\"", "\"bias:0$\""};
    for (int k = 0; k < 2; k++) {
        char json[256];
        snprintf(json, sizeof json,
                 ADAMW("\"learning_rate\": 0.0, \"weight_decay\": 0.5, "
                       "\"exclude_from_weight_decay\": [%s], " LEGACY),
                 pats[k]);
        optim_optimizer *opt = optim_test_make(json);
        optim_var *b = optim_test_var("dense/bias", OPTIM_F64, 0, NULL, (double[]){2.0});
        ot_step_dense(opt, b, (double[]){0.0});
        assert_eq(optim_var_get(b, 0), k == 0 ? 1.0 : 2.0);
        optim_test_free(opt, b);
    }
}

OPTIM_TEST(test_exclude_from_weight_decay)
{
    optim_optimizer *opt = optim_test_make(
        ADAMW("\"learning_rate\": 0.01, \"weight_decay\": 0.05, "
              "\"exclude_from_weight_decay\": [\"bias\", \"^emb.*_skip:0$\"], " LEGACY));
    double init[N];
    for (int i = 0; i < N; i++) init[i] = OT_DENSE_SHRINK.init(i);
    int64_t n = N;
    optim_var *kern = optim_test_var("dense/kernel", OPTIM_F64, 1, &n, init);
    optim_var *bias = optim_test_var("dense/bias", OPTIM_F64, 1, &n, init);
    double tinit[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) tinit[i] = SP.init(i / COLS, i % COLS);
    int64_t shape[2] = {ROWS, COLS}, vs[2] = {NIDX, COLS};
    optim_var *emb = optim_test_var("emb_decay", OPTIM_F64, 2, shape, tinit);
    optim_var *skip = optim_test_var("emb_skip", OPTIM_F64, 2, shape, tinit);
    ref_adam r = {0.01, 0.9, 0.999, 1e-7, 0.05, 0, 0, 1};
    /* The references of kernel, bias, emb_decay, emb_skip (odd: excluded): w, m, v, vhat. */
    double w[4][ROWS * COLS], st[4][3][ROWS * COLS] = {{{0}}};
    for (int j = 0; j < 4; j++)
        memcpy(w[j], j < 2 ? init : tinit, j < 2 ? sizeof init : sizeof tinit);
    for (int k = 0; k < 6; k++) {
        double g[N], vals[NIDX * COLS], gt[ROWS * COLS] = {0};
        int dec[ROWS * COLS] = {0};
        int64_t idx[NIDX];
        for (int i = 0; i < N; i++) g[i] = OT_DENSE_SHRINK.grad(k, i);
        for (int j = 0; j < NIDX; j++) {
            idx[j] = SP.index(k, j);
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = SP.val(k, j, c);
                gt[idx[j] * COLS + c] += vals[j * COLS + c];
                dec[idx[j] * COLS + c] = 1;
            }
        }
        for (int j = 0; j < 4; j++)
            ref_adam_step(&r, k, r.b1, j % 2 ? 0.0 : 0.05, w[j], st[j][0], st[j][1], st[j][2],
                          j < 2 ? g : gt, j < 2 ? NULL : dec, j < 2 ? N : ROWS * COLS);
        optim_tensor gs = optim_tensor_make(OPTIM_F64, vals, 2, vs);
        optim_grad_var p[4] = {
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n)), kern},
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n)), bias},
            {optim_grad_sparse(idx, NIDX, gs), emb},
            {optim_grad_sparse(idx, NIDX, gs), skip},
        };
        ot_step(opt, p, 4);
    }
    assert_var_close(kern, w[0], N, 1e-12, 1e-14);
    assert_var_close(bias, w[1], N, 1e-12, 1e-14);
    assert_var_close(emb, w[2], ROWS * COLS, 1e-12, 1e-14);
    assert_var_close(skip, w[3], ROWS * COLS, 1e-12, 1e-14);
    /* The patterns are part of the legacy config, and round-trip. */
    char *cfg = optim_get_config(opt);
    assert_contains(cfg, "\"exclude_from_weight_decay\":[\"bias\",\"^emb.*_skip:0$\"]");
    char *s1 = optim_serialize(opt);
    ot_check_round_trip(s1);
    optim_free(cfg);
    optim_free(s1);
    optim_test_free(opt, kern, bias, emb, skip);
}

static double wd_sched(void *user, int64_t step)
{
    (void)user;
    return 0.1 / (1.0 + (double)step);
}
static void set_wd_fn(optim_optimizer *opt, void *r, int k)
{
    (void)opt, ((ref_adam *)r)->wd = 0.02 * (k % 3);
}
static void set_wd_sched(optim_optimizer *opt, void *r, int k)
{
    (void)opt, ((ref_adam *)r)->wd = 0.1 / (1.0 + k);
}

/* TF Addons' weight_decay is a hyperparameter: a callable or a schedule
 * (evaluated at iterations) is read at each step. */
OPTIM_TEST(test_legacy_dynamic_weight_decay)
{
    for (int kind = 0; kind < 2; kind++) {
        optim_optimizer *opt =
            optim_test_make(ADAMW("\"learning_rate\": 0.01, \"weight_decay\": 0.0, " LEGACY));
        ref_adam r = {0.01, 0.9, 0.999, 1e-7, 0, 0, 0, 1};
        if (kind == 0) assert_ok(optim_set_hyper_fn(opt, "weight_decay", ot_value, &r.wd), opt);
        else assert_ok(optim_set_hyper_schedule(opt, "weight_decay", wd_sched, NULL), opt);
        ot_case c = ref_adam_case(NULL, &r);
        optim_var *x = ot_check_dynamic(opt, &OT_DENSE_SHRINK, 6, &c, OPTIM_F64,
                                        kind == 0 ? set_wd_fn : set_wd_sched);
        /* A callable weight_decay out of range fails the step. */
        r.wd = -1;
        if (kind == 0) ot_expect_step_refused(opt, x, 0, OPTIM_ERANGE, "weight_decay");
        optim_test_free(opt, x);
    }
}

/* ---- Keras and TF Addons test values ----------------------------------------------- */

/* keras/src/optimizers/adamw_test.py: test_single_step (default wd 0.004). */
OPTIM_TEST(test_keras_single_step)
{
    ot_check_keras_single_step(ADAMW("\"learning_rate\": 0.5"),
                               (double[]){0.4980, 1.4960, 2.494, 3.492});
}

/* adamw_test.py: test_correctness_with_golden (lr 1, wd 0.5, epsilon 2). */
OPTIM_TEST(test_keras_golden)
{
    static const double golden[5][10] = {
        {0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998},
        {0.2486, 0.2475, 0.2463, 0.2451, 0.244, 0.2428, 0.2417, 0.2405, 0.2394, 0.2382},
        {0.1223, 0.1198, 0.1174, 0.1149, 0.1124, 0.11, 0.1075, 0.1051, 0.1027, 0.1003},
        {0.0586, 0.0549, 0.0512, 0.0475, 0.0439, 0.0402, 0.0366, 0.033, 0.0294, 0.0258},
        {0.0263, 0.0215, 0.0167, 0.012, 0.0073, 0.0026, -0.0021, -0.0067, -0.0113, -0.0159}};
    ot_check_keras_golden(ADAMW("\"learning_rate\": 1.0, \"weight_decay\": 0.5, \"epsilon\": 2"),
                          OPTIM_F32, golden[0], 10);
}

/* adamw_test.py: test_weight_decay (zero gradients: only the decay acts). */
OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(ADAMW("\"learning_rate\": 1.0, \"weight_decay\": 0.004"),
                                OPTIM_F32);
}

/* tensorflow_addons/optimizers/tests/weight_decay_optimizers_test.py:
 * do_test with adamw_update_numpy (param * (1 - wd) - lr_t * m / (sqrt(v) +
 * eps)), lr 0.001, eps 1e-8, wd 0.01, 3 steps, dense and sparse. */
OPTIM_TEST(test_tfa_values)
{
    const char *json = ADAMW("\"weight_decay\": 0.01, \"learning_rate\": 0.001, \"beta_1\": 0.9, "
                             "\"beta_2\": 0.999, \"epsilon\": 1e-8, " LEGACY);
    for (int sparse = 0; sparse < 2; sparse++)
        ref_adam_check_tfa(json, sparse, 0.01, 1e-8, (double[]){1, 2}, (double[]){3, 4}, 2,
                           (int64_t[]){0, 1}, 2);
}

/* ---- config -------------------------------------------------------------------------- */

OPTIM_TEST(test_config_keys_and_defaults)
{
    static const char *const k3[] = {OT_KERAS3_BASE_KEYS, "beta_1", "beta_2", "epsilon", "amsgrad"};
    static const char *const kl[] = {"name",    "learning_rate", "decay",
                                     "beta_1",  "beta_2",        "epsilon",
                                     "amsgrad", "weight_decay",  "exclude_from_weight_decay"};
    cJSON *c = ot_config_of(ADAMW(""), "adam_w", OT_KEYS(k3));
    ot_expect_numbers(c, "weight_decay", 0.004, "learning_rate", 0.001, "beta_1", 0.9, "beta_2",
                      0.999, "epsilon", 1e-7, NULL);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "amsgrad")));
    cJSON_Delete(c);
    c = ot_config_of(ADAMW("\"weight_decay\": 0.01, " LEGACY), NULL, OT_KEYS(kl));
    ot_expect_numbers(c, "weight_decay", 0.01, "decay", 0.0, NULL);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c, "exclude_from_weight_decay")));
    cJSON_Delete(c);
    /* Legacy epsilon 0 or None: 1e-7, written as such, keys in order. */
    ot_expect_config_has(ADAMW("\"weight_decay\": 1, \"epsilon\": null, " LEGACY),
                         "\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":false,\"weight_decay\":1,"
                         "\"exclude_from_weight_decay\":null}");
    ot_expect_refused(ADAMW("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
    /* An empty list stays a list. */
    ot_expect_config_has(
        ADAMW("\"weight_decay\": 0.01, \"exclude_from_weight_decay\": [], " LEGACY),
        "\"exclude_from_weight_decay\":[]");
    /* Created from the class: Keras 3 defaults; legacy needs weight_decay. */
    optim_optimizer *opt;
    optim_error err;
    optim_options o = optim_options_defaults();
    assert_ok(optim_create(&opt, &optim_adamw_class, &o, &err), &err);
    double wd;
    assert_ok(optim_get_hyper(opt, "weight_decay", &wd), opt);
    assert_eq(wd, 0.004);
    optim_destroy(opt);
    o.generation = OPTIM_LEGACY;
    assert_status(optim_create(&opt, &optim_adamw_class, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "weight_decay");
}

OPTIM_TEST(test_config_round_trip)
{
    const char *cfgs[] = {
        ADAMW(
            "\"learning_rate\": 0.5, \"weight_decay\": 0.008, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, "
            "\"amsgrad\": true"),
        ADAMW(
            "\"learning_rate\": 0.5, \"weight_decay\": 0.008, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, "
            "\"amsgrad\": true, \"decay\": 0.01, \"clipvalue\": 3.0, \"exclude_from_weight_decay\": [\"a\\\"b\"], " LEGACY),
        ADAMW("\"weight_decay\": 0, \"name\": \"my_adamw\""),
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        ot_check_round_trip(cfgs[i]);
        cJSON *c = ot_config_of(cfgs[i], NULL, NULL, 0);
        assert_eq(ot_num(c, "weight_decay"), (i < 2 ? 0.008 : 0.0));
        cJSON_Delete(c);
    }
}

OPTIM_TEST(test_config_refused)
{
    /* Both generations (legacy needs weight_decay). */
    ot_expect_refused_gens(ADAMW("\"weight_decay\": 0.01, \"beta_1\": 1.0"), OPTIM_ERANGE, "beta_1",
                           "[0, 1)");
    ot_expect_refused_gens(ADAMW("\"weight_decay\": 0.01, \"beta_2\": -0.5"), OPTIM_ERANGE,
                           "beta_2", "[0, 1)");
    ot_expect_refused_gens(ADAMW("\"weight_decay\": 0.01, \"epsilon\": -1"), OPTIM_ERANGE,
                           "epsilon", "[0, inf)");
    ot_expect_refused_gens(ADAMW("\"weight_decay\": 0.01, \"amsgrad\": \"yes\""), OPTIM_ETYPE,
                           "amsgrad", NULL);
    ot_expect_refused_gens(ADAMW("\"weight_decay\": 0.01, \"beta_3\": 0.5"), OPTIM_EKEY, "beta_3",
                           NULL);
    /* weight_decay: Keras 3 refuses None and negatives; legacy requires it. */
    ot_expect_refused(ADAMW("\"weight_decay\": null"), OPTIM_EINVAL, "weight_decay", NULL);
    ot_expect_refused(ADAMW("\"weight_decay\": -0.1"), OPTIM_ERANGE, "weight_decay", "[0, inf)");
    ot_expect_refused(ADAMW(LEGACY), OPTIM_EINVAL, "weight_decay", NULL);
    ot_expect_refused(ADAMW("\"weight_decay\": null, " LEGACY), OPTIM_EINVAL, "weight_decay", NULL);
    ot_expect_refused(ADAMW("\"weight_decay\": -1, " LEGACY), OPTIM_ERANGE, "weight_decay",
                      "[0, inf)");
    /* exclude_from_weight_decay: legacy only, a list of valid patterns. */
    ot_expect_refused(ADAMW("\"exclude_from_weight_decay\": [\"bias\"]"), OPTIM_EKEY,
                      "exclude_from_weight_decay", NULL);
    ot_expect_refused(
        ADAMW("\"weight_decay\": 0.1, \"exclude_from_weight_decay\": \"bias\", " LEGACY),
        OPTIM_ETYPE, "exclude_from_weight_decay", NULL);
    ot_expect_refused(ADAMW("\"weight_decay\": 0.1, \"exclude_from_weight_decay\": [1], " LEGACY),
                      OPTIM_ETYPE, "exclude_from_weight_decay", NULL);
    ot_expect_refused(
        ADAMW("\"weight_decay\": 0.1, \"exclude_from_weight_decay\": [\"ok\", \"(\"], " LEGACY),
        OPTIM_EINVAL, "exclude_from_weight_decay[1]", NULL);
    ot_expect_refused(ADAMW("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr", NULL);
    /* optim_set_hyper: Keras 3 weight_decay None refused, old value kept. */
    optim_optimizer *opt = optim_test_make(ADAMW(""));
    assert_status(optim_set_hyper(opt, "weight_decay", NAN), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "weight_decay");
    double wd;
    assert_ok(optim_get_hyper(opt, "weight_decay", &wd), opt);
    assert_eq(wd, 0.004);
    optim_destroy(opt);
    opt = optim_test_make(ADAMW("\"weight_decay\": 0.2, " LEGACY));
    assert_status(optim_set_hyper(opt, "weight_decay", NAN), OPTIM_EINVAL, opt);
    assert_ok(optim_set_hyper(opt, "weight_decay", 0.3), opt);
    assert_ok(optim_get_hyper(opt, "weight_decay", &wd), opt);
    assert_eq(wd, 0.3);
    optim_destroy(opt);
}

/* ---- threads ------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", "v", "vhat", NULL};
    ot_check_threads(ADAMW("\"learning_rate\": 0.01, \"amsgrad\": true"), 2, 4, 1, slots);
    ot_check_threads(
        ADAMW("\"learning_rate\": 0.01, \"weight_decay\": 0.01, \"amsgrad\": true, " LEGACY), 2, 4,
        1, slots);
}

int main(void) { return optim_test_run(); }
