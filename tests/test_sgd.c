/* SGD against independent double-precision references: plain, momentum and
 * Nesterov trajectories in f32 and f64, legacy decay, clipping, dynamic
 * learning rates, sparse gradients in both generations, and thread-count
 * independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 7
#define SGD(cfg) "{\"class_name\": \"SGD\", \"config\": {" cfg "}}"

typedef struct hp {
    double lr, momentum, decay;
    int nesterov;
} hp;

/* The Keras rule in double precision, with legacy decay lr/(1 + decay*t);
 * state 0 is the momentum slot. */
static void ref_step(const void *h_, int k, double *w, double *const *st, const double *g, int n)
{
    const hp *h = h_;
    double lr = h->lr / (1.0 + h->decay * k), *m = st[0];
    for (int i = 0; i < n; i++) {
        if (h->momentum == 0) {
            w[i] -= lr * g[i];
            continue;
        }
        m[i] = h->momentum * m[i] - lr * g[i];
        w[i] += h->nesterov ? h->momentum * m[i] - lr * g[i] : m[i];
    }
}

/* The dense trajectory of json (with and without the legacy flag) against hp. */
static void check_trajectory(const char *k3, const char *legacy, hp h)
{
    ot_case c = {k3,
                 ref_step,
                 &h,
                 1,
                 {h.momentum ? "momentum" : NULL},
                 .absent = h.momentum ? NULL : "momentum"};
    if (k3) ot_check_dense(&OT_DENSE, c);
    c.json = legacy;
    if (legacy) ot_check_dense(&OT_DENSE, c);
}

OPTIM_TEST(test_plain)
{
    check_trajectory(SGD("\"learning_rate\": 0.1"), SGD("\"learning_rate\": 0.1, " OT_LEGACY),
                     (hp){0.1, 0, 0, 0});
}

OPTIM_TEST(test_momentum)
{
    check_trajectory(SGD("\"learning_rate\": 0.05, \"momentum\": 0.9"),
                     SGD("\"learning_rate\": 0.05, \"momentum\": 0.9, " OT_LEGACY),
                     (hp){0.05, 0.9, 0, 0});
}

OPTIM_TEST(test_nesterov)
{
    check_trajectory(
        SGD("\"learning_rate\": 0.05, \"momentum\": 0.8, \"nesterov\": true"),
        SGD("\"learning_rate\": 0.05, \"momentum\": 0.8, \"nesterov\": true, " OT_LEGACY),
        (hp){0.05, 0.8, 0, 1});
}

OPTIM_TEST(test_legacy_decay)
{
    check_trajectory(NULL,
                     SGD("\"learning_rate\": 0.1, \"momentum\": 0.5, \"decay\": 0.3, " OT_LEGACY),
                     (hp){0.1, 0.5, 0.3, 0});
}

/* The Keras SGD docstring: var = 1, loss = var^2 / 2 (g = var), lr 0.1,
 * momentum 0.9: the first step moves by 0.1, the second by 0.18. */
OPTIM_TEST(test_keras_docstring)
{
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
                        "\"momentum\": 0.9}}");
    double one = 1.0;
    optim_var *v = optim_test_var("var", OPTIM_F32, 0, NULL, &one);
    for (int k = 0; k < 2; k++) {
        ot_step_dense(opt, v, &(double){optim_var_get(v, 0)});
        assert_close(optim_var_get(v, 0), k == 0 ? 0.9 : 0.72, 1e-6, 0);
    }
    optim_test_free(opt, v);
}

/* ---- clipping ------------------------------------------------------------ */

/* Two variables a (3) and b (2), one step, lr 1, no momentum: w -= clip(g). */
static void clip_case(const char *extra, int legacy, const double *ga, const double *gb,
                      const double *want_a, const double *want_b)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt =
            optim_test_make(ot_gen(ot_fmt(SGD("\"learning_rate\": 1.0, %s"), extra), legacy));
        double zeros[3] = {0, 0, 0}, buf[2][3];
        int64_t sa[1] = {3}, sb[1] = {2};
        optim_var *a = optim_test_var("a", dt, 1, sa, zeros),
                  *b = optim_test_var("b", dt, 1, sb, zeros);
        optim_grad_var p[2] = {{ot_grad_like(a, ga, buf[0]), a}, {ot_grad_like(b, gb, buf[1]), b}};
        assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
        double rtol = dt == OPTIM_F64 ? 1e-14 : 1e-6;
        for (int i = 0; i < 3; i++) assert_close(optim_var_get(a, i), -want_a[i], rtol, 1e-15);
        for (int i = 0; i < 2; i++) assert_close(optim_var_get(b, i), -want_b[i], rtol, 1e-15);
        optim_test_free(opt, a, b);
    }
}

OPTIM_TEST(test_clipvalue)
{
    double ga[3] = {3, -0.5, -7}, gb[2] = {0.25, 2};
    double wa[3] = {1, -0.5, -1}, wb[2] = {0.25, 1};
    clip_case("\"clipvalue\": 1.0", 0, ga, gb, wa, wb);
    clip_case("\"clipvalue\": 1.0", 1, ga, gb, wa, wb);
}

OPTIM_TEST(test_clipnorm)
{
    /* Per variable: g * c / max(||g||, c). ||a|| = 13, ||b|| = 0.5 < c. */
    double ga[3] = {3, 4, 12}, gb[2] = {0.3, 0.4};
    double c = 2.0, wa[3], wb[2] = {0.3, 0.4};
    for (int i = 0; i < 3; i++) wa[i] = ga[i] * c / 13.0;
    clip_case("\"clipnorm\": 2.0", 0, ga, gb, wa, wb);
    clip_case("\"clipnorm\": 2.0", 1, ga, gb, wa, wb);
    /* Legacy allows clipvalue with clipnorm: clip by value first. */
    double gv[3] = {3, 4, 12}, gw[2] = {0.3, 0.4}, va[3], vb[2] = {0.3, 0.4};
    double na = sqrt(3 * 3 + 4 * 4 + 5 * 5.0); /* after clipvalue 5 */
    double cv[3] = {3, 4, 5};
    for (int i = 0; i < 3; i++) va[i] = cv[i] * c / na;
    clip_case("\"clipnorm\": 2.0, \"clipvalue\": 5.0", 1, gv, gw, va, vb);
}

/* A clip option of 0: Keras 3 ignores it (clips only above 0); legacy
 * tf.keras applies it. */
OPTIM_TEST(test_clip_zero)
{
    double ga[3] = {3, -0.5, -7}, gb[2] = {0.25, 2}, za[3] = {0, 0, 0}, zb[2] = {0, 0};
    clip_case("\"clipvalue\": 0", 0, ga, gb, ga, gb);
    clip_case("\"clipnorm\": 0", 0, ga, gb, ga, gb);
    clip_case("\"global_clipnorm\": 0", 0, ga, gb, ga, gb);
    clip_case("\"clipvalue\": 0", 1, ga, gb, za, zb);
    clip_case("\"clipnorm\": 0", 1, ga, gb, za, zb);
}

OPTIM_TEST(test_global_clipnorm)
{
    double ga[3] = {3, 4, 12}, gb[2] = {-3, 4};
    double norm = sqrt(9 + 16 + 144 + 9 + 16.0), c = 1.5, wa[3], wb[2];
    for (int i = 0; i < 3; i++) wa[i] = ga[i] * c / norm;
    for (int i = 0; i < 2; i++) wb[i] = gb[i] * c / norm;
    clip_case("\"global_clipnorm\": 1.5", 0, ga, gb, wa, wb);
    clip_case("\"global_clipnorm\": 1.5", 1, ga, gb, wa, wb);
    /* Below the threshold nothing changes. */
    double big[3] = {3, 4, 12}, bigb[2] = {-3, 4};
    clip_case("\"global_clipnorm\": 100", 0, big, bigb, big, bigb);
}

/* ---- dynamic learning rates ------------------------------------------------- */

static double lr_sched(void *user, int64_t step)
{
    (void)user;
    return 0.1 / (1.0 + (double)step);
}

static optim_var *lr_var;
static int lr_kind;

/* Step k's learning rate everywhere: the callable (reading h->lr), the
 * variable, optim_set_hyper (kind 2) or the schedule; get_hyper agrees. */
static void set_lr(optim_optimizer *opt, void *h, int k)
{
    const double lrs[5] = {0.1, 0.05, 0.2, 0.01, 0.3};
    double lr = lr_kind == 3 ? 0.1 / (1.0 + k) : lrs[k], got;
    ((hp *)h)->lr = lr;
    *(double *)optim_var_data(lr_var) = lr;
    if (lr_kind == 2) assert_ok(optim_set_hyper(opt, "learning_rate", lr), opt);
    assert_ok(optim_get_hyper(opt, "learning_rate", &got), opt);
    assert_close(got, lr, 0, 0);
}

OPTIM_TEST(test_dynamic_lr)
{
    for (lr_kind = 0; lr_kind < 4; lr_kind++) {
        optim_optimizer *opt =
            optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.5}}");
        hp h = {0, 0.5, 0, 0};
        optim_error err;
        assert_ok(optim_var_create(&lr_var, "lr", OPTIM_F64, 0, NULL, NULL, &err), &err);
        if (lr_kind == 0) assert_ok(optim_set_hyper_fn(opt, "learning_rate", ot_value, &h.lr), opt);
        if (lr_kind == 1) assert_ok(optim_set_hyper_var(opt, "learning_rate", lr_var), opt);
        if (lr_kind == 3)
            assert_ok(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), opt);
        ot_case c = {NULL, ref_step, &h, 1, .tol = {1e-5, 1e-6, 1e-13, 1e-15}};
        optim_var *v = ot_check_dynamic(opt, &OT_DENSE, 5, &c, OPTIM_F64, set_lr);
        /* A callable returning a bad value fails the step and changes nothing. */
        h.lr = -1;
        if (lr_kind == 0) ot_expect_step_refused(opt, v, 0, OPTIM_ERANGE, "learning_rate");
        optim_test_free(opt, v, lr_var);
    }
}

/* ---- sparse ------------------------------------------------------------------- */

/* OT_SPARSE's first three steps (row 5 indexed once). */
static ot_sparse sp(void)
{
    ot_sparse s = OT_SPARSE;
    s.steps = 3;
    return s;
}

/* Keras 3: sparse == dense equivalent (duplicates summed), bit for bit. */
OPTIM_TEST(test_sparse_keras3_equals_dense)
{
    ot_sparse t = sp();
    static const char *const mom[] = {"momentum", NULL};
    ot_check_sparse_equals_dense(&t, SGD("\"learning_rate\": 0.1"), NULL);
    ot_check_sparse_equals_dense(&t, SGD("\"learning_rate\": 0.1, \"momentum\": 0.9"), mom);
    ot_check_sparse_equals_dense(
        &t, SGD("\"learning_rate\": 0.1, \"momentum\": 0.9, \"nesterov\": true"), mom);
}

/* Legacy with momentum: duplicates summed, then only the indexed rows of the
 * slot and the variable change (TF's SparseApplyKerasMomentum). Legacy
 * without momentum: scatter-add of -lr * g per index as given. */
OPTIM_TEST(test_sparse_legacy_rows_only)
{
    ot_sparse t = sp();
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        hp h = {0.1, 0.9, 0, nesterov};
        ot_case c = {
            nesterov
                ? SGD("\"learning_rate\": 0.1, \"momentum\": 0.9, \"nesterov\": true, " OT_LEGACY)
                : SGD("\"learning_rate\": 0.1, \"momentum\": 0.9, " OT_LEGACY),
            ref_step,
            &h,
            1,
            {"momentum"},
            .tol = {1e-5, 1e-7, 1e-13, 1e-7}};
        ot_check_sparse(&t, c, 1);
    }
    /* Without momentum: sequential scatter-add, same as the reference. */
    optim_optimizer *opt = optim_test_make(SGD("\"learning_rate\": 0.1, " OT_LEGACY));
    optim_var *v = ot_run_sparse(opt, &t, OPTIM_F64, 0);
    double w[18];
    for (int i = 0; i < 18; i++) {
        w[i] = t.init(i / 3, i % 3);
        for (int k = 0; k < t.steps; k++)
            for (int j = 0; j < 4; j++)
                if (t.index(k, j) == i / 3) w[i] = w[i] - t.val(k, j, i % 3) * 0.1;
    }
    assert_var_eq(v, w, 18);
    optim_test_free(opt, v);
}

/* Rows not indexed stay bit-identical in the legacy generation but decay in
 * Keras 3 (momentum carried from an earlier step). */
OPTIM_TEST(test_sparse_untouched_rows)
{
    /* m0 = -0.5, w0 = 0.5; Keras 3: row 0 gets m = -0.25 -> 0.25; legacy: row 0 unchanged. */
    for (int legacy = 0; legacy < 2; legacy++) {
        const ot_rule rules[] = {{OT_FIRST, OT_IS, NULL, 0.5},
                                 {OT_LEFT, OT_IS, NULL, legacy ? 0.5 : 0.25},
                                 {OT_NEVER, OT_KEPT, NULL, 0},
                                 {OT_ROW, OT_IS, NULL, 3.5}};
        ot_check_rows_left_out(ot_gen(SGD("\"learning_rate\": 0.5, \"momentum\": 0.5"), legacy),
                               OPTIM_F64, 4, 1, NULL, 3, (double[]){1}, rules, 4);
    }
}

/* ---- Keras 3 weight decay ----------------------------------------------------------- */

/* w = w - w * wd * lr before the SGD step, except for excluded variables
 * (by pointer or by name pattern); dense and sparse (which decays all rows). */
OPTIM_TEST(test_weight_decay)
{
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
                        "\"momentum\": 0.5, \"weight_decay\": 0.2}}");
    double init[4] = {1, -2, 3, 4};
    int64_t n4 = 4, shape[2] = {4, 1}, vs[2] = {1, 1};
    optim_var *a = optim_test_var("dense/kernel", OPTIM_F64, 1, &n4, init);
    optim_var *b = optim_test_var("dense/bias", OPTIM_F64, 1, &n4, init);
    optim_var *c = optim_test_var("other", OPTIM_F64, 1, &n4, init);
    optim_var *e = optim_test_var("emb", OPTIM_F64, 2, shape, init);
    const char *pat[1] = {"bias$"};
    assert_ok(optim_exclude_from_weight_decay(opt, &c, 1, pat, 1), opt);
    const char *bad[1] = {"("};
    assert_status(optim_exclude_from_weight_decay(opt, NULL, 0, bad, 1), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "regular expression");
    double g[4] = {0.5, 0.5, -1, 2}, row = 1.0;
    int64_t idx = 2;
    /* The references of kernel (decayed), bias and other (excluded), emb (decayed, row 2 only). */
    double w[3][4], m[3][4] = {{0}}, ge[4] = {0, 0, 1, 0};
    for (int j = 0; j < 3; j++) memcpy(w[j], init, sizeof init);
    for (int k = 0; k < 3; k++) {
        optim_grad_var p[4] = {
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n4)), a},
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n4)), b},
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n4)), c},
            {optim_grad_sparse(&idx, 1, optim_tensor_make(OPTIM_F64, &row, 2, vs)), e},
        };
        assert_ok(optim_apply_gradients(opt, p, 4, 0), opt);
        for (int j = 0; j < 3; j++) {
            for (int i = 0; j != 1 && i < 4; i++) w[j][i] = w[j][i] - w[j][i] * 0.2 * 0.1;
            ref_step(&(hp){0.1, 0.5, 0, 0}, k, w[j], (double *[]){m[j]}, j == 2 ? ge : g, 4);
        }
    }
    assert_var_close(a, w[0], 4, 1e-14, 1e-15);
    assert_var_close(b, w[1], 4, 1e-14, 1e-15); /* excluded by pattern */
    assert_var_close(c, w[1], 4, 1e-14, 1e-15); /* excluded by pointer */
    assert_var_close(e, w[2], 4, 1e-14, 1e-15);
    optim_test_free(opt, a, b, c, e);
    /* The legacy generation has no weight_decay key. */
    ot_expect_refused(SGD("\"weight_decay\": 0.1, " OT_LEGACY), OPTIM_EKEY, NULL, NULL);
}

/* ---- threads ---------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"momentum", NULL};
    ot_check_threads(
        SGD("\"learning_rate\": 0.01, \"momentum\": 0.9, \"nesterov\": true, \"global_clipnorm\": 10"),
        2, 4, 0, slots);
}

int main(void) { return optim_test_run(); }
