/* SGDW (TF Addons) against references written here from TF Addons'
 * weight_decay_optimizers.py and the TF kernels it reaches (legacy SGD:
 * ApplyGradientDescent, ApplyKerasMomentum, SparseApplyKerasMomentum,
 * ResourceScatterAdd):
 *
 *   dense:   w = w - wd * w;  then w = w - g * lr (no momentum), or
 *            m = m * mu - g * lr;  w = w + m  (w + (m * mu - g * lr) nesterov)
 *   sparse with momentum: duplicates summed, the decay and the step on the
 *            indexed rows only;
 *   sparse without momentum: w[i] = w[i] + (-g * lr) per index as given,
 *            no decay (legacy SGD's _resource_apply_sparse_duplicate_indices
 *            bypasses the extension).
 *
 * The double reference follows the kernels' order of operations, so f64 is
 * compared bit for bit; float32 against the same reference to 1e-6, and
 * against the same operations in float bit for bit. Also TF Addons' own
 * test values (weight_decay_optimizers_test.py), exclude_from_weight_decay,
 * a dynamic weight_decay, slots, config keys in both envelopes, refusals
 * and thread-count independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SGDW(cfg) "{\"class_name\": \"Addons>SGDW\", \"config\": {" cfg "}}"
#define N 7

typedef struct hp {
    double lr, momentum, wd, decay;
    int nesterov;
    int scatter; /* sparse without momentum: no decay */
} hp;

/* ---- the reference ---------------------------------------------------------------- */

/* One step of SGDW on n elements in double: the extension's decay
 * (var.assign_sub(wd_t * var)), then legacy SGD's kernel, lr_t =
 * lr / (1 + decay * iterations) (OptimizerV2._decayed_lr). */
static void ref_step(const void *h_, int k, double *w, double *const *st, const double *g, int n)
{
    const hp *h = h_;
    const double lr = h->lr / (1.0 + h->decay * k);
    double *m = st[0];
    for (int i = 0; i < n; i++) {
        if (!h->scatter) w[i] = w[i] - h->wd * w[i];
        if (h->momentum == 0) {
            w[i] = w[i] - g[i] * lr; /* ApplyGradientDescent: var -= grad * lr */
            continue;
        }
        m[i] = m[i] * h->momentum - g[i] * lr; /* ApplyKerasMomentum */
        w[i] = h->nesterov ? w[i] + (m[i] * h->momentum - g[i] * lr) : w[i] + m[i];
    }
}

/* The same operations in float (TF's float32 kernels). */
static void ref_f32(const void *h_, int k, float *w, float *const *st, const float *g, int n)
{
    const hp *h = h_;
    const float lr0 = (float)h->lr, decay = (float)h->decay, mu = (float)h->momentum;
    const float wd = (float)h->wd, lr = decay > 0 ? lr0 / (1.0f + decay * (float)k) : lr0;
    float *m = st[0];
    for (int i = 0; i < n; i++) {
        if (!h->scatter) w[i] = w[i] - wd * w[i];
        if (h->momentum == 0) {
            w[i] = w[i] - g[i] * lr;
            continue;
        }
        m[i] = m[i] * mu - g[i] * lr;
        w[i] = h->nesterov ? w[i] + (m[i] * mu - g[i] * lr) : w[i] + m[i];
    }
}

static ot_case make_case(const hp *h)
{
    const char *json =
        ot_fmt(SGDW("\"weight_decay\": %.17g, \"learning_rate\": %.17g, \"momentum\": %.17g, "
                    "\"nesterov\": %s, \"decay\": %.17g"),
               h->wd, h->lr, h->momentum, h->nesterov ? "true" : "false", h->decay);
    const int mom = h->momentum != 0;
    return (ot_case){json,
                     ref_step,
                     h,
                     1,
                     {mom ? "momentum" : NULL},
                     mom ? NULL : "momentum",
                     .tol = {1e-6, 1e-7, 0, 0},
                     .exact_slots = mom,
                     .round32 = 1,
                     .ref32 = ref_f32};
}

static const hp CASES[] = {
    {0.1, 0, 0.01, 0, 0, 0},     {0.05, 0.9, 0.02, 0, 0, 0}, {0.05, 0.8, 0.03, 0, 1, 0},
    {0.2, 0.5, 0.01, 0.3, 0, 0}, {0.1, 0.9, 0, 0, 0, 0},     {0.01, 0, 0.5, 0.1, 0, 0},
    {0.3, 1.0, 0.001, 0, 1, 0},
};
#define NCASES (sizeof CASES / sizeof *CASES)

/* f64 bit for bit, f32 to 1e-6 relative, weights and the momentum slot. */
OPTIM_TEST(test_dense_reference)
{
    for (size_t i = 0; i < NCASES; i++) ot_check_dense(&OT_DENSE, make_case(&CASES[i]));
}

/* The float32 operations, bit for bit: dense, and sparse with every row
 * indexed once ([n, 1]): with momentum the decay and the step on each row;
 * without, the scatter-add and no decay. */
OPTIM_TEST(test_f32_operation_order)
{
    for (size_t i = 0; i < NCASES; i++)
        for (int sparse = 0; sparse < 2; sparse++) {
            hp h = CASES[i];
            h.scatter = sparse && h.momentum == 0;
            ot_case c = make_case(&CASES[i]);
            c.hp = &h;
            ot_check_f32(&OT_DENSE, 8, &c, sparse);
        }
}

/* ---- sparse ------------------------------------------------------------------------ */

/* With momentum: duplicates summed, decay and step on the indexed rows
 * only; rows never indexed keep their bits (w and m). f64 bit for bit. */
OPTIM_TEST(test_sparse_momentum_rows)
{
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        hp h = {0.1, 0.9, 0.05, 0.2, nesterov, 0};
        ot_case c = make_case(&h);
        c.round32 = 0;
        c.tol[0] = 2e-6;
        ot_check_sparse(&OT_SPARSE, c, 1);
        ot_check_sparse(&OT_SPARSE_LONG, c, 1);
    }
}

/* Without momentum: each index's row as given, w + (-g * lr), one after the
 * other for duplicates, and no weight decay (TF Addons' SGDW does not reach
 * its decay on this path). */
OPTIM_TEST(test_sparse_plain_scatter_add)
{
    const ot_sparse *t = &OT_SPARSE;
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt =
            optim_test_make(SGDW("\"weight_decay\": 0.25, \"learning_rate\": 0.1"));
        optim_var *v = ot_run_sparse(opt, t, dt, 0);
        double w[18];
        float f[18];
        for (int i = 0; i < 18; i++) {
            w[i] = t->init(i / 3, i % 3);
            f[i] = (float)w[i];
            for (int k = 0; k < t->steps; k++)
                for (int j = 0; j < t->nidx; j++)
                    if (t->index(k, j) == i / 3) {
                        w[i] = w[i] + -t->val(k, j, i % 3) * 0.1;
                        f[i] = f[i] + -(float)t->val(k, j, i % 3) * 0.1f;
                    }
        }
        if (dt == OPTIM_F64) assert_var_eq(v, w, 18);
        else assert_var_floats(v, f, 18);
        assert_null(optim_get_slot(opt, v, "momentum"));
        optim_test_free(opt, v);
    }
}

/* One sparse step on row 1 of 3 (momentum 0.5, wd 0.1): rows 0 and 2 keep
 * their bits; row 1 is decayed, then stepped. */
OPTIM_TEST(test_sparse_decays_indexed_rows_only)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(
            SGDW("\"weight_decay\": 0.1, \"learning_rate\": 0.5, \"momentum\": 0.5"));
        optim_var *x = optim_test_var("e", dt, 2, (int64_t[2]){3, 1}, (double[3]){1, 2, 3});
        ot_step_row(opt, x, 1, (double[]){0.25});
        assert_eq(optim_var_get(x, 0), 1);
        assert_eq(optim_var_get(x, 2), 3);
        if (dt == OPTIM_F64) assert_eq(optim_var_get(x, 1), (2 - 0.1 * 2) + (0 * 0.5 - 0.25 * 0.5));
        else assert_eq(optim_var_get(x, 1), (2 - 0.1f * 2) + (0 * 0.5f - 0.25f * 0.5f));
        optim_test_free(opt, x);
    }
}

/* ---- TF Addons' test values ------------------------------------------------------- */

/* weight_decay_optimizers_test.py sgdw_update_numpy: m = momentum * m + g;
 * param = param * (1 - wd) - lr * m (equal to TF's rule up to rounding). */
static void tfa_numpy(double *p, double *m, double g)
{
    *m = 0.9 * *m + g;
    *p = *p * (1 - 0.01) - 0.001 * *m;
}

/* do_test(SGDW, learning_rate=0.001, momentum=0.9, weight_decay=0.01):
 * var0 [1, 2] with 0.1, var1 [3, 4] with 0.01, three steps, dense and
 * sparse (indices [0, 1]), f32 and f64, to assert_allclose_according_to_type's
 * 1e-6. */
OPTIM_TEST(test_tfa_do_test)
{
    for (int sparse = 0; sparse < 2; sparse++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt = optim_test_make(
                SGDW("\"learning_rate\": 0.001, \"momentum\": 0.9, \"weight_decay\": 0.01"));
            int64_t n = 2, idx[2] = {0, 1};
            optim_var *v0 = optim_test_var("var0", dt, 1, &n, (double[2]){1, 2});
            optim_var *v1 = optim_test_var("var1", dt, 1, &n, (double[2]){3, 4});
            double p[4] = {1, 2, 3, 4}, m[4] = {0}, g0[2] = {0.1, 0.1}, g1[2] = {0.01, 0.01};
            float f0[2] = {0.1f, 0.1f}, f1[2] = {0.01f, 0.01f};
            for (int k = 0; k < 3; k++) {
                optim_tensor t0 = optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)f0 : g0, 1, &n);
                optim_tensor t1 = optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)f1 : g1, 1, &n);
                optim_grad_var pg[2] = {
                    {sparse ? optim_grad_sparse(idx, 2, t0) : optim_grad_dense(t0), v0},
                    {sparse ? optim_grad_sparse(idx, 2, t1) : optim_grad_dense(t1), v1}};
                ot_step(opt, pg, 2);
                for (int i = 0; i < 4; i++) tfa_numpy(&p[i], &m[i], i < 2 ? 0.1 : 0.01);
                assert_var_close(v0, p, 2, 1e-6, 1e-6);
                assert_var_close(v1, p + 2, 2, 1e-6, 1e-6);
            }
            optim_test_free(opt, v0, v1);
        }
}

/* do_test_sparse_repeated_indices: [[1], [2]] with indices [1, 1] of 0.1
 * equals one index 1 of 0.2, after one and four steps. */
OPTIM_TEST(test_tfa_sparse_repeated_indices)
{
    const char *json = SGDW("\"learning_rate\": 0.001, \"momentum\": 0.9, \"weight_decay\": 0.01");
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *o1 = optim_test_make(json), *o2 = optim_test_make(json);
        int64_t shape[2] = {2, 1}, ri[2] = {1, 1}, rs[2] = {2, 1};
        optim_var *rep = optim_test_var("rep", dt, 2, shape, (double[2]){1, 2}),
                  *agg = optim_test_var("agg", dt, 2, shape, (double[2]){1, 2});
        double rv[2] = {0.1, 0.1};
        float fv[2] = {0.1f, 0.1f};
        for (int k = 0; k < 4; k++) {
            optim_tensor t = optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)fv : rv, 2, rs);
            optim_grad_var p1 = {optim_grad_sparse(ri, 2, t), rep};
            ot_step(o1, &p1, 1);
            ot_step_row(o2, agg, 1, (double[]){dt == OPTIM_F32 ? (double)(0.1f + 0.1f) : 0.2});
            assert_vars_bitwise(rep, agg);
        }
        optim_destroy(o1);
        optim_test_free(o2, rep, agg);
    }
}

/* test_exclude_weight_decay_sgdw: exclude_from_weight_decay ["var1"]
 * decays var0, not var1 nor var1_weight (re.search). Zero gradients,
 * momentum 0: only the decay acts, once per step. */
OPTIM_TEST(test_tfa_exclude_weight_decay)
{
    optim_optimizer *opt = optim_test_make(SGDW(
        "\"learning_rate\": 0.01, \"weight_decay\": 1e-4, \"exclude_from_weight_decay\": [\"var1\"]"));
    int64_t n = 2;
    const char *names[3] = {"var0", "var1", "var1_weight"};
    optim_var *v[3];
    for (int j = 0; j < 3; j++)
        v[j] = optim_test_var(names[j], OPTIM_F64, 1, &n, (double[2]){1, -2});
    double zero[2] = {0, 0}, want[2] = {1, -2};
    for (int k = 0; k < 3; k++) {
        optim_grad_var p[3];
        for (int j = 0; j < 3; j++)
            p[j] =
                (optim_grad_var){optim_grad_dense(optim_tensor_make(OPTIM_F64, zero, 1, &n)), v[j]};
        ot_step(opt, p, 3);
        for (int i = 0; i < 2; i++) want[i] = (want[i] - 1e-4 * want[i]) - 0 * 0.01;
    }
    assert_var_eq(v[0], want, 2);
    assert_var_eq(v[1], ((double[2]){1, -2}), 2);
    assert_var_eq(v[2], ((double[2]){1, -2}), 2);
    optim_test_free(opt, v[0], v[1], v[2]);
}

/* ---- dynamic weight_decay ---------------------------------------------------------- */

static double wd_sched(void *user, int64_t step)
{
    (void)user;
    return step < 2 ? 1e-2 : 1e-3; /* PiecewiseConstantDecay([2], [1e-2, 1e-3]) */
}
static void set_wd_fn(optim_optimizer *opt, void *h, int k)
{
    (void)opt, ((hp *)h)->wd = 0.02 * (k % 3);
}
static void set_wd_sched(optim_optimizer *opt, void *h, int k)
{
    (void)opt, ((hp *)h)->wd = k < 2 ? 1e-2 : 1e-3;
}

/* weight_decay is a hyperparameter: a callable or a schedule (evaluated at
 * iterations, as _decayed_wd does) is read at each step; one out of range
 * fails the step. */
OPTIM_TEST(test_dynamic_weight_decay)
{
    for (int kind = 0; kind < 2; kind++) {
        optim_optimizer *opt = optim_test_make(
            SGDW("\"learning_rate\": 0.1, \"momentum\": 0.5, \"weight_decay\": 0.0"));
        hp h = {0.1, 0.5, 0, 0, 0, 0};
        if (kind == 0) assert_ok(optim_set_hyper_fn(opt, "weight_decay", ot_value, &h.wd), opt);
        else assert_ok(optim_set_hyper_schedule(opt, "weight_decay", wd_sched, NULL), opt);
        ot_case c = {NULL, ref_step, &h, 1, .tol = {1e-6, 1e-7, 0, 0}};
        optim_var *x = ot_check_dynamic(opt, &OT_DENSE, 6, &c, OPTIM_F64,
                                        kind == 0 ? set_wd_fn : set_wd_sched);
        h.wd = -1;
        if (kind == 0) ot_expect_step_refused(opt, x, 0, OPTIM_ERANGE, "weight_decay");
        optim_test_free(opt, x);
    }
}

/* ---- slots --------------------------------------------------------------------------- */

/* "momentum" only when momentum > 0 or is dynamic (legacy SGD's _momentum). */
OPTIM_TEST(test_slots)
{
    for (int kind = 0; kind < 3; kind++) {
        optim_optimizer *opt =
            optim_test_make(kind == 1 ? SGDW("\"weight_decay\": 0.1, \"momentum\": 0.9")
                                      : SGDW("\"weight_decay\": 0.1"));
        double mu = 0.5;
        if (kind == 2) assert_ok(optim_set_hyper_fn(opt, "momentum", ot_value, &mu), opt);
        int64_t n = 2;
        optim_var *x = optim_test_var("w", OPTIM_F64, 1, &n, (double[2]){1, 2});
        assert_ok(optim_build(opt, &x, 1), opt);
        if (kind == 0) ot_expect_slot_names(opt, NULL);
        else ot_expect_slot_names(opt, "momentum", NULL);
        optim_test_free(opt, x);
    }
}

/* ---- config ------------------------------------------------------------------------- */

#define DEFAULTS                                                                                   \
    "\"name\":\"SGDW\",\"learning_rate\":0.001,\"decay\":0.0,\"momentum\":0.0,\"nesterov\":false," \
    "\"weight_decay\":0.01,\"exclude_from_weight_decay\":null"

/* TF Addons' get_config: legacy SGD's keys, then weight_decay and
 * exclude_from_weight_decay; written back key for key in both envelopes. */
OPTIM_TEST(test_config_envelopes)
{
    ot_expect_config(SGDW("\"weight_decay\": 0.01"), "{" DEFAULTS "}");
    ot_expect_config("{\"class_name\": \"SGDW\", \"config\": {\"weight_decay\": 0.01}}",
                     "{" DEFAULTS "}");
    static const char *const same[] = {
        /* tf.keras 2.11-2.12 */
        "{\"class_name\":\"Addons>SGDW\",\"config\":{" DEFAULTS "}}",
        "{\"class_name\":\"Addons>SGDW\",\"config\":{\"name\":\"sgdw\",\"clipnorm\":1.0,"
        "\"learning_rate\":0.1,\"decay\":0.01,\"momentum\":0.9,\"nesterov\":true,"
        "\"weight_decay\":0.0001,\"exclude_from_weight_decay\":[\"bias\",\"norm\\\\d+\"]}}",
        /* tf-keras 2.13+ */
        "{\"module\":\"tensorflow_addons.optimizers.weight_decay_optimizers\",\"class_name\":"
        "\"SGDW\",\"config\":{" DEFAULTS "},\"registered_name\":\"Addons>SGDW\"}",
        "{\"module\":\"tensorflow_addons.optimizers.weight_decay_optimizers\",\"class_name\":"
        "\"SGDW\",\"config\":{\"name\":\"SGDW\",\"clipvalue\":0.5,\"learning_rate\":0.02,"
        "\"decay\":0.0,\"momentum\":0.5,\"nesterov\":false,\"weight_decay\":1,"
        "\"exclude_from_weight_decay\":[]},\"registered_name\":\"Addons>SGDW\"}",
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        optim_optimizer *opt = optim_test_make(same[i]);
        assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
        char *s = optim_serialize(opt);
        assert_string_equal(s, same[i]);
        optim_free(s);
        optim_destroy(opt);
    }
    /* "lr" (OptimizerV2's alias) reads as learning_rate. */
    ot_expect_config_has(SGDW("\"weight_decay\": 0.01, \"lr\": 0.5"), "\"learning_rate\":0.5,");
}

OPTIM_TEST(test_config_refused)
{
    /* weight_decay is required (TF Addons' first argument), >= 0. */
    ot_expect_refused(SGDW(""), OPTIM_EINVAL, "weight_decay", "requires");
    ot_expect_refused(SGDW("\"weight_decay\": null"), OPTIM_EINVAL, "weight_decay", NULL);
    ot_expect_refused(SGDW("\"weight_decay\": -0.1"), OPTIM_ERANGE, "weight_decay", "[0, inf)");
    /* momentum in [0, 1] (legacy SGD's check). */
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"momentum\": 1.5"), OPTIM_ERANGE, "momentum",
                      "[0, 1]");
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"momentum\": -0.1"), OPTIM_ERANGE, "momentum",
                      "[0, 1]");
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"nesterov\": \"yes\""), OPTIM_ETYPE, "nesterov",
                      NULL);
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"learning_rate\": -1"), OPTIM_ERANGE,
                      "learning_rate", NULL);
    /* Bad patterns, and keys SGDW does not have. */
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"exclude_from_weight_decay\": \"bias\""),
                      OPTIM_ETYPE, "exclude_from_weight_decay", NULL);
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"exclude_from_weight_decay\": [\"(\"]"),
                      OPTIM_EINVAL, "exclude_from_weight_decay[0]", NULL);
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"use_ema\": true"), OPTIM_EKEY, "use_ema", NULL);
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"epsilon\": 1e-7"), OPTIM_EKEY, "epsilon", NULL);
    /* TF Addons' classes are legacy only. */
    ot_expect_refused(SGDW("\"weight_decay\": 0, \"is_legacy_optimizer\": false"), OPTIM_ENOTSUP,
                      "legacy", NULL);
    /* optim_set_hyper: None refused, the old value kept. */
    optim_optimizer *opt = optim_test_make(SGDW("\"weight_decay\": 0.2"));
    assert_status(optim_set_hyper(opt, "weight_decay", NAN), OPTIM_EINVAL, opt);
    double wd;
    assert_ok(optim_get_hyper(opt, "weight_decay", &wd), opt);
    assert_eq(wd, 0.2);
    optim_destroy(opt);
}

/* ---- threads ------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"momentum", NULL};
    ot_check_threads(SGDW("\"weight_decay\": 0.01, \"learning_rate\": 0.01, \"momentum\": 0.9"), 2,
                     3, 1, slots);
    ot_check_threads_mixed(
        SGDW(
            "\"weight_decay\": 0.01, \"learning_rate\": 0.01, \"momentum\": 0.9, \"nesterov\": true"),
        3, 3, slots);
}

int main(void) { return optim_test_run(); }
