/* RMSprop against independent double-precision references: plain, centered,
 * momentum and centered + momentum trajectories in f32 and f64, in both
 * generations (epsilon inside the square root in Keras 3 and in legacy's
 * momentum kernels, outside it in legacy's plain path), legacy decay and a
 * dynamic rho, sparse gradients with duplicate indices in both generations
 * (Keras 3: the dense equivalent; legacy: kernels on the indexed rows, or
 * slot decay on every row without momentum), the Keras golden values,
 * config keys, ranges and round trips, and thread-count independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 7
#define RMSPROP(cfg) "{\"class_name\": \"RMSprop\", \"config\": {" cfg "}}"

/* One configuration, as the reference sees it. */
typedef struct cfg {
    double lr, rho, momentum, eps, decay;
    int centered, legacy;
} cfg;

/* The published rule for one element, in double precision.
 *   v = rho v + (1 - rho) g^2;  a = rho a + (1 - rho) g (centered);  d = v - a^2 or v
 *   legacy without momentum:  w -= lr g / (sqrt(d) + eps)
 *   otherwise:                inc = lr g / sqrt(d + eps); m = mu m + inc, w -= m (momentum) or w -= inc */
static void ref_elem(const cfg *c, double lr, double g, double *w, double *v, double *m, double *a)
{
    *v = c->rho * *v + (1 - c->rho) * g * g;
    double d = *v;
    if (c->centered) {
        *a = c->rho * *a + (1 - c->rho) * g;
        d = *v - *a * *a;
    }
    if (c->legacy && c->momentum == 0) {
        *w -= lr * g / (sqrt(d) + c->eps);
        return;
    }
    double inc = lr * g / sqrt(d + c->eps);
    if (c->momentum > 0) {
        *m = c->momentum * *m + inc;
        *w -= *m;
    } else {
        *w -= inc;
    }
}

/* ref_elem on n elements with the legacy decay; state: rms, momentum, mg. */
static void ref_step(const void *c_, int k, double *w, double *const *st, const double *g, int n)
{
    const cfg *c = c_;
    double lr = c->legacy ? c->lr / (1.0 + c->decay * k) : c->lr;
    for (int i = 0; i < n; i++) ref_elem(c, lr, g[i], &w[i], &st[0][i], &st[1][i], &st[2][i]);
}

static ot_case make_case(const cfg *c)
{
    const char *decay = c->legacy ? ot_fmt(", \"decay\": %.17g, " OT_LEGACY, c->decay) : "";
    const char *json = ot_fmt(
        RMSPROP(
            "\"learning_rate\": %.17g, \"rho\": %.17g, \"momentum\": %.17g, \"epsilon\": %.17g, \"centered\": %s%s"),
        c->lr, c->rho, c->momentum, c->eps, c->centered ? "true" : "false", decay);
    return (ot_case){json,
                     ref_step,
                     c,
                     3,
                     {"rms", c->momentum > 0 ? "momentum" : NULL, c->centered ? "mg" : NULL},
                     .exact_slots = 1};
}

/* Every option combination, both generations. epsilon = 0.01 makes its
 * placement (inside or outside the square root) visible in f32 too. */
OPTIM_TEST(test_trajectories)
{
    const double eps[2] = {1e-7, 0.01};
    for (int legacy = 0; legacy < 2; legacy++)
        for (int centered = 0; centered < 2; centered++)
            for (int mom = 0; mom < 2; mom++)
                for (int e = 0; e < 2; e++) {
                    cfg c = {0.01, 0.9, mom ? 0.9 : 0.0, eps[e], 0, centered, legacy};
                    ot_check_dense(&OT_DENSE, make_case(&c));
                }
    /* Other rho and momentum values. */
    cfg c1 = {0.05, 0.7, 0.5, 1e-3, 0, 1, 0};
    ot_check_dense(&OT_DENSE, make_case(&c1));
    c1.legacy = 1;
    ot_check_dense(&OT_DENSE, make_case(&c1));
}

OPTIM_TEST(test_legacy_decay)
{
    cfg a = {0.02, 0.9, 0.0, 1e-7, 0.3, 0, 1};
    ot_check_dense(&OT_DENSE, make_case(&a));
    cfg b = {0.02, 0.8, 0.6, 1e-5, 0.1, 1, 1};
    ot_check_dense(&OT_DENSE, make_case(&b));
}

/* The generations really differ where epsilon's placement differs. */
OPTIM_TEST(test_generations_differ)
{
    double w[2];
    for (int legacy = 0; legacy < 2; legacy++)
        w[legacy] = ot_scalar_step(make_case(&(cfg){0.1, 0.9, 0.0, 0.5, 0, 0, legacy}).json,
                                   OPTIM_F64, 1.0, 2.0);
    /* v = 0.1 * 4 = 0.4. Keras 3: 1 - 0.2 / sqrt(0.9); legacy: 1 - 0.2 / (sqrt(0.4) + 0.5). */
    assert_close(w[0], 1 - 0.2 / sqrt(0.9), 1e-15, 0);
    assert_close(w[1], 1 - 0.2 / (sqrt(0.4) + 0.5), 1e-15, 0);
}

/* ---- f32 arithmetic, bit for bit ------------------------------------------------ */

/* The per-step constants of each generation in f32: Keras 3 casts Python's
 * 1 - rho (0.1f for rho 0.9); legacy computes 1 - rho on the float32 rho
 * (1.0f - 0.9f = 0.100000024f). With g = 1 the first rms is exactly that. */
OPTIM_TEST(test_f32_one_minus_rho)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int mom = 0; mom < 2; mom++) {
            cfg c = {0.01, 0.9, mom ? 0.9 : 0.0, 1e-7, 0, 0, legacy};
            optim_optimizer *opt = optim_test_make(make_case(&c).json);
            double zero = 0.0, one = 1.0;
            optim_var *v = optim_test_var("v", OPTIM_F32, 0, NULL, &zero);
            ot_step_dense(opt, v, &one);
            float got = *(float *)optim_var_data(optim_get_slot(opt, v, "rms"));
            float want = legacy ? 1.0f - 0.9f : (float)(1.0 - 0.9);
            assert_eq(got, want);
            optim_test_free(opt, v);
        }
    assert_ne(1.0f - 0.9f, (float)(1.0 - 0.9));
}

/* Each form's float32 operation order, written from its source, over a few
 * steps: Keras 3 update_step, legacy's TF ops (no momentum), ApplyRMSProp /
 * ApplyCenteredRMSProp, and SparseApplyRMSProp / SparseApplyCenteredRMSProp
 * (sparse = 1). Results must match bit for bit. */
/* The case's cfg with the form of legacy momentum: ApplyRMSProp or (sparse)
 * SparseApplyRMSProp. */
typedef struct f32_cfg {
    cfg c;
    int sparse;
} f32_cfg;

static void ref_f32(const void *h_, int k, float *w, float *const *st, const float *g, int n)
{
    const f32_cfg *h = h_;
    const int legacy = h->c.legacy, mom = h->c.momentum > 0, centered = h->c.centered,
              sparse = h->sparse;
    const float lr = (float)h->c.lr, rho = (float)h->c.rho, mu = (float)h->c.momentum,
                eps = (float)h->c.eps;
    const float omr = legacy ? 1.0f - rho : (float)(1.0 - h->c.rho);
    float *v = st[0], *m = st[1], *a = st[2];
    (void)k;
    for (int i = 0; i < n; i++) {
        float d;
        if (!legacy) {
            v[i] = rho * v[i] + omr * (g[i] * g[i]);
            if (centered) a[i] = rho * a[i] + omr * g[i];
            d = centered ? (v[i] - a[i] * a[i]) + eps : v[i] + eps;
            float inc = (lr * g[i]) / sqrtf(d);
            if (mom) m[i] = mu * m[i] + inc;
            w[i] = w[i] - (mom ? m[i] : inc);
        } else if (!mom) {
            v[i] = rho * v[i] + omr * (g[i] * g[i]);
            if (centered) a[i] = rho * a[i] + omr * g[i];
            d = centered ? v[i] - a[i] * a[i] : v[i];
            w[i] = w[i] - (lr * g[i]) / (sqrtf(d) + eps);
        } else if (!sparse) {
            v[i] = v[i] + (g[i] * g[i] - v[i]) * omr;
            if (centered) a[i] = a[i] + (g[i] - a[i]) * omr;
            d = centered ? (v[i] - a[i] * a[i]) + eps : v[i] + eps;
            m[i] = m[i] * mu + (g[i] * lr) / sqrtf(d);
            w[i] = w[i] - m[i];
        } else {
            v[i] = v[i] * rho + (g[i] * g[i]) * omr;
            if (centered) a[i] = a[i] * rho + g[i] * omr;
            d = centered ? (v[i] + eps) - a[i] * a[i] : v[i] + eps;
            m[i] = m[i] * mu + ((1.0f / sqrtf(d)) * lr) * g[i];
            w[i] = w[i] - m[i];
        }
    }
}

static void f32_form(int legacy, int mom, int centered, int sparse)
{
    f32_cfg h = {{0.01, 0.9, mom ? 0.9 : 0.0, 1e-3, 0, centered, legacy}, sparse};
    ot_case oc = make_case(&h.c);
    oc.hp = &h;
    oc.ref32 = ref_f32;
    ot_check_f32(&OT_DENSE, 6, &oc, sparse);
}

OPTIM_TEST(test_f32_operation_order)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int mom = 0; mom < 2; mom++)
            for (int centered = 0; centered < 2; centered++)
                for (int sparse = 0; sparse < 2; sparse++) f32_form(legacy, mom, centered, sparse);
}

/* ---- Keras golden values --------------------------------------------------- */

/* The docstring of both generations: lr 0.1, var 10, loss var^2 / 2. */
OPTIM_TEST(test_docstring)
{
    const char *cfgs[2] = {RMSPROP("\"learning_rate\": 0.1"),
                           RMSPROP("\"learning_rate\": 0.1, " OT_LEGACY)};
    for (int g = 0; g < 2; g++)
        assert_close(ot_scalar_step(cfgs[g], OPTIM_F32, 10.0, 10.0), 9.683772, 0, 1e-6);
}

/* keras/src/optimizers/rmsprop_test.py test_single_step (the legacy rule
 * gives the same numbers to 4 digits). */
OPTIM_TEST(test_keras_single_step)
{
    const double want[4] = {-0.5811, 0.4189, 1.4189, 2.4189};
    ot_check_keras_single_step(RMSPROP("\"learning_rate\": 0.5"), want);
    ot_check_keras_single_step(RMSPROP("\"learning_rate\": 0.5, " OT_LEGACY), want);
}

/* rmsprop_test.py test_correctness_with_golden: centered, defaults. */
OPTIM_TEST(test_keras_golden)
{
    const double golden[5] = {0.9967, 0.9933, 0.9908, 0.9885, 0.9864};
    ot_check_keras_golden(RMSPROP("\"centered\": true"), OPTIM_F32, golden, 1);
    ot_check_keras_golden(RMSPROP("\"centered\": true"), OPTIM_F64, golden, 1);
}

/* rmsprop_test.py test_weight_decay: zero gradients, lr 1, weight_decay
 * 0.004, three steps: 2 * 0.996^3. */
OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(RMSPROP("\"learning_rate\": 1.0, \"weight_decay\": 0.004"),
                                OPTIM_F32);
}

/* ---- legacy details ------------------------------------------------------------ */

/* Legacy rho is a hyper: a callable changing every step. Keras 3's rho is a
 * number. */
static void set_rho(optim_optimizer *opt, void *c, int k)
{
    (void)opt;
    ((cfg *)c)->rho = 0.5 + 0.04 * k;
}

OPTIM_TEST(test_dynamic_rho)
{
    for (int centered = 0; centered < 2; centered++) {
        cfg c = {0.01, 0.9, centered ? 0.5 : 0.0, 1e-7, 0, centered, 1};
        ot_case oc = make_case(&c);
        optim_optimizer *opt = optim_test_make(oc.json);
        assert_ok(optim_set_hyper_fn(opt, "rho", ot_value, &c.rho), opt);
        optim_test_free(opt, ot_check_dynamic(opt, &OT_DENSE, 10, &oc, OPTIM_F64, set_rho));
    }
    optim_optimizer *k3 = optim_test_make("\"rmsprop\"");
    double rho = 0.9;
    assert_status(optim_set_hyper_fn(k3, "rho", ot_value, &rho), OPTIM_ETYPE, k3);
    assert_ok(optim_set_hyper(k3, "rho", 0.8), k3);
    optim_destroy(k3);
}

/* Legacy epsilon: `epsilon or backend_config.epsilon()`, so 0 and None mean
 * 1e-7. tf_keras legacy rmsprop_test testMinimizeSparseResourceVariable:
 * var [[1, 2]], loss (var . [4, 5])^2, gradient [[112, 140]]; lr 1, rho 0,
 * epsilon 0. And the centered variant with epsilon 1: [[-111, -138]]. */
OPTIM_TEST(test_legacy_minimize_sparse)
{
    const char *cfgs[3] = {RMSPROP("\"learning_rate\": 1.0, \"rho\": 0.0, \"momentum\": 0.0, "
                                   "\"epsilon\": 0.0, \"centered\": false, " OT_LEGACY),
                           RMSPROP("\"learning_rate\": 1.0, \"rho\": 0.0, \"momentum\": 0.0, "
                                   "\"epsilon\": null, \"centered\": false, " OT_LEGACY),
                           RMSPROP("\"learning_rate\": 1.0, \"rho\": 0.0, \"momentum\": 0.0, "
                                   "\"epsilon\": 1.0, \"centered\": true, " OT_LEGACY)};
    for (int c = 0; c < 3; c++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt = optim_test_make(cfgs[c]);
            optim_var *v = optim_test_var("var0", dt, 2, (int64_t[2]){1, 2}, (double[2]){1, 2});
            ot_step_row(opt, v, 0, (double[]){112, 140});
            if (c < 2) {
                /* 1 - 112 / (112 + 1e-7), 2 - 140 / (140 + 1e-7): not 0 and 1 exactly. */
                assert_close(optim_var_get(v, 0), 0.0, 0, 0.01);
                assert_close(optim_var_get(v, 1), 1.0, 0, 0.01);
                if (dt == OPTIM_F64) {
                    assert_close(optim_var_get(v, 0), 1 - 112 / (112 + 1e-7), 1e-6, 0);
                    assert_close(optim_var_get(v, 1), 2 - 140 / (140 + 1e-7), 1e-15, 0);
                }
            } else {
                assert_close(optim_var_get(v, 0), -111, 1e-6, 0);
                assert_close(optim_var_get(v, 1), -138, 1e-6, 0);
            }
            optim_test_free(opt, v);
        }
}

/* Dense step k of OT_DENSE on var and on the reference (st: rms, momentum, mg). */
static void step_both(optim_optimizer *opt, optim_var *var, const cfg *c, int k, double *w,
                      double *const *st)
{
    double g[N];
    for (int i = 0; i < N; i++) g[i] = OT_DENSE.grad(k, i);
    ref_step(c, k, w, st, g, N);
    ot_step_dense(opt, var, g);
}

/* Switching centered on (both) or momentum on (Keras 3) after the slots
 * exist is refused, as Keras would fail on the missing slot; legacy
 * momentum may change, and without its slot it stays unused (OptimizerV2's
 * self._momentum). */
OPTIM_TEST(test_slot_structure_fixed)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(ot_gen(RMSPROP("\"learning_rate\": 0.01"), legacy));
        /* Before any slot exists, anything goes. */
        assert_ok(optim_set_hyper(opt, "centered", 1), opt);
        assert_ok(optim_set_hyper(opt, "centered", 0), opt);
        assert_ok(optim_set_hyper(opt, "momentum", 0.9), opt);
        assert_ok(optim_set_hyper(opt, "momentum", 0.0), opt);
        double w[N], st[3][N] = {{0}};
        for (int i = 0; i < N; i++) w[i] = OT_DENSE.init(i);
        optim_var *var = optim_test_var("w", OPTIM_F64, 1, (int64_t[1]){N}, w);
        cfg c = {0.01, 0.9, 0.0, 1e-7, 0, 0, legacy};
        step_both(opt, var, &c, 0, w, (double *[]){st[0], st[1], st[2]});
        assert_status(optim_set_hyper(opt, "centered", 1), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "centered");
        assert_contains(optim_errmsg(opt), "mg");
        double cur = -1;
        assert_ok(optim_get_hyper(opt, "centered", &cur), opt);
        assert_eq(cur, 0);
        int rc = optim_set_hyper(opt, "momentum", 0.9);
        if (!legacy) {
            assert_status(rc, OPTIM_EINVAL, opt);
            assert_contains(optim_errmsg(opt), "momentum");
        } else {
            assert_ok(rc, opt);
            /* No momentum slot: the plain path continues, momentum unused. */
            step_both(opt, var, &c, 1, w, (double *[]){st[0], st[1], st[2]});
            assert_null(optim_get_slot(opt, var, "momentum"));
        }
        assert_var_close(var, w, N, 1e-13, 1e-14);
        optim_test_free(opt, var);
    }
    /* Keras 3: momentum switched off after the slots exist stops using it
     * (the slot stays as it was). */
    optim_optimizer *opt = optim_test_make(RMSPROP("\"learning_rate\": 0.01, \"momentum\": 0.9"));
    double w[N], st[3][N] = {{0}};
    for (int i = 0; i < N; i++) w[i] = OT_DENSE.init(i);
    optim_var *var = optim_test_var("w", OPTIM_F64, 1, (int64_t[1]){N}, w);
    for (int k = 0; k < 2; k++) {
        if (k) assert_ok(optim_set_hyper(opt, "momentum", 0.0), opt);
        step_both(opt, var, &(cfg){0.01, 0.9, k ? 0.0 : 0.9, 1e-7, 0, 0, 0}, k, w,
                  (double *[]){st[0], st[1], st[2]});
    }
    assert_var_close(var, w, N, 1e-13, 1e-14);
    assert_var_close(optim_get_slot(opt, var, "momentum"), st[1], N, 1e-13, 1e-14);
    optim_test_free(opt, var);
}

/* ---- sparse ------------------------------------------------------------------- */

static const char *const SLOTS[4] = {"rms", "momentum", "mg", NULL};

/* Keras 3: sparse == dense equivalent (duplicates summed), bit for bit, in
 * every option combination; and against the reference (every row, g = 0
 * where no index points). Legacy: duplicates summed; with momentum the
 * Sparse(Centered)RMSProp kernels on the indexed rows only; without, rms and
 * mg decay on every row and w moves on the indexed rows only (which is the
 * reference with g = 0 on the other rows). */
OPTIM_TEST(test_sparse)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int centered = 0; centered < 2; centered++)
            for (int mom = 0; mom < 2; mom++) {
                cfg c = {0.05, 0.9, mom ? 0.8 : 0.0, 1e-3, 0, centered, legacy};
                ot_case oc = make_case(&c);
                if (!legacy) ot_check_sparse_equals_dense(&OT_SPARSE, oc.json, SLOTS);
                ot_check_sparse(&OT_SPARSE, oc, legacy && mom);
            }
}

/* Row by row, after history on every row: which rows change when only row 3
 * gets a gradient. */
OPTIM_TEST(test_sparse_untouched_rows)
{
    static const double g1[8] = {1, -1, 0.5, 2, -0.3, 0.7, 1.5, -2};
    for (int legacy = 0; legacy < 2; legacy++)
        for (int mom = 0; mom < 2; mom++)
            for (int centered = 0; centered < 2; centered++) {
                cfg c = {0.1, 0.9, mom ? 0.5 : 0.0, 1e-3, 0, centered, legacy};
                /* Legacy with momentum: kernels on the indexed rows only; legacy
                 * without: rms and mg decay; Keras 3: g = 0 elsewhere
                 * (w - 0 / sqrt(d), or w - m with m decayed). */
                int slot = legacy && mom ? OT_KEPT : OT_SCALED, n = 2;
                ot_rule rules[5] = {{OT_ROW, OT_MOVED, NULL, 0},
                                    {OT_LEFT, legacy || !mom ? OT_KEPT : OT_MOVED, NULL, 0}};
                rules[n++] = (ot_rule){OT_LEFT, slot, "rms", 0.9};
                if (mom) rules[n++] = (ot_rule){OT_LEFT, slot, "momentum", 0.5};
                if (centered) rules[n++] = (ot_rule){OT_LEFT, slot, "mg", 0.9};
                ot_check_rows_left_out(make_case(&c).json, OPTIM_F64, 4, 2, g1, 3,
                                       (double[]){0.25, -0.5}, rules, n);
            }
}

/* ---- config --------------------------------------------------------------------- */

OPTIM_TEST(test_config_keys)
{
    ot_expect_config(
        "\"rmsprop\"",
        "{\"name\":\"rm_sprop\",\"learning_rate\":0.001,\"weight_decay\":null,\"clipnorm\":null,"
        "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
        "\"gradient_accumulation_steps\":null,\"rho\":0.9,\"momentum\":0.0,\"epsilon\":1e-07,"
        "\"centered\":false}");
    ot_expect_config(
        RMSPROP(OT_LEGACY),
        "{\"name\":\"RMSprop\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.9,\"momentum\":0.0,"
        "\"epsilon\":1e-07,\"centered\":false}");
    /* Legacy epsilon None or 0 is written as the backend epsilon, in place. */
    ot_expect_config(
        RMSPROP("\"epsilon\": null, \"centered\": true, " OT_LEGACY),
        "{\"name\":\"RMSprop\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.9,\"momentum\":0.0,"
        "\"epsilon\":1e-07,\"centered\":true}");
    ot_expect_config(
        RMSPROP("\"epsilon\": 0, " OT_LEGACY),
        "{\"name\":\"RMSprop\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.9,\"momentum\":0.0,"
        "\"epsilon\":1e-07,\"centered\":false}");
    /* Keras 3 keeps epsilon 0, as given (an int). */
    ot_expect_config_has(RMSPROP("\"epsilon\": 0"), "\"epsilon\":0,");
}

OPTIM_TEST(test_config_round_trip)
{
    /* rmsprop_test.py test_config. */
    ot_check_round_trip(RMSPROP("\"learning_rate\": 0.5, \"rho\": 0.8, "
                                "\"momentum\": 0.05, \"epsilon\": 1e-6, \"centered\": true"));
    ot_check_round_trip(
        RMSPROP("\"learning_rate\": 0.5, \"rho\": 0.8, "
                "\"momentum\": 0.05, \"epsilon\": 1e-6, \"centered\": true, \"decay\": 0.01, "
                "\"clipnorm\": 1.0, " OT_LEGACY));
    ot_check_round_trip(RMSPROP("\"epsilon\": null, " OT_LEGACY));
    /* The legacy alias lr. */
    optim_optimizer *o = optim_test_make(RMSPROP("\"lr\": 0.25, " OT_LEGACY));
    double lr = 0;
    assert_ok(optim_get_hyper(o, "learning_rate", &lr), o);
    assert_eq(lr, 0.25);
    optim_destroy(o);
}

OPTIM_TEST(test_config_refused)
{
    /* Legacy: momentum in [0, 1] (OptimizerV2 RMSprop.__init__). */
    ot_expect_refused(RMSPROP("\"momentum\": 1.5, " OT_LEGACY), OPTIM_ERANGE, "momentum", "[0, 1]");
    ot_expect_refused(RMSPROP("\"momentum\": -0.1, " OT_LEGACY), OPTIM_ERANGE, "momentum",
                      "[0, 1]");
    /* Keras 3 checks none of its keys. */
    optim_optimizer *k3 = optim_test_make(RMSPROP("\"momentum\": 1.5, \"rho\": 2.0"));
    optim_destroy(k3);
    /* Types, None, unknown keys, keys of the other generation. */
    ot_expect_refused(RMSPROP("\"centered\": 1"), OPTIM_ETYPE, "centered", NULL);
    ot_expect_refused(RMSPROP("\"rho\": \"0.9\""), OPTIM_ETYPE, "rho", NULL);
    ot_expect_refused(RMSPROP("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
    ot_expect_refused(RMSPROP("\"beta_1\": 0.9"), OPTIM_EKEY, "beta_1", NULL);
    ot_expect_refused(RMSPROP("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr",
                      "generation");
    ot_expect_refused(RMSPROP("\"weight_decay\": 0.1, " OT_LEGACY), OPTIM_EKEY, "weight_decay",
                      NULL);
    /* A legacy momentum callable out of range fails the step, nothing changes. */
    optim_optimizer *opt = optim_test_make(RMSPROP("\"momentum\": 0.5, " OT_LEGACY));
    double mu = 2.0;
    assert_ok(optim_set_hyper_fn(opt, "momentum", ot_value, &mu), opt);
    double one = 1.0;
    optim_var *v = optim_test_var("v", OPTIM_F64, 0, NULL, &one);
    ot_expect_step_refused(opt, v, 1, OPTIM_ERANGE, "momentum");
    assert_status(optim_set_hyper(opt, "momentum", 1.01), OPTIM_ERANGE, opt);
    optim_test_free(opt, v);
}

/* ---- threads ------------------------------------------------------------------------ */

OPTIM_TEST(test_threads_bitwise)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *json = ot_gen(
            RMSPROP("\"learning_rate\": 0.01, \"rho\": 0.9, \"momentum\": 0.9, \"epsilon\": 1e-7, "
                    "\"centered\": true"),
            legacy);
        ot_check_threads(json, 2, 4, 0, SLOTS);
    }
}

int main(void) { return optim_test_run(); }
