/* Adadelta against independent double-precision references: trajectories in
 * f32 and f64 in both generations (the same rule in two operation orders:
 * Keras 3's update_step and TF's ApplyAdadelta), legacy decay and a dynamic
 * rho, sparse gradients with duplicate indices (Keras 3: the dense
 * equivalent, accumulators decaying on every row; legacy: SparseApplyAdadelta
 * on the indexed rows), the Keras golden values, config keys and round
 * trips, and thread-count independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 7
#define ADADELTA(cfg) "{\"class_name\": \"Adadelta\", \"config\": {" cfg "}}"

typedef struct cfg {
    double lr, rho, eps, decay;
    int legacy;
} cfg;

/* Zeiler's rule with a learning rate, in double precision:
 *   Eg = rho Eg + (1 - rho) g^2;  u = sqrt(Edx + eps) / sqrt(Eg + eps) g
 *   Edx = rho Edx + (1 - rho) u^2;  w -= lr u
 * with the legacy decay lr / (1 + decay k). State: accum_grad, accum_var. */
static void ref_step(const void *c_, int k, double *w, double *const *st, const double *g, int n)
{
    const cfg *c = c_;
    double lr = c->legacy ? c->lr / (1.0 + c->decay * k) : c->lr;
    for (int i = 0; i < n; i++) {
        st[0][i] = c->rho * st[0][i] + (1 - c->rho) * g[i] * g[i];
        double u = sqrt(st[1][i] + c->eps) / sqrt(st[0][i] + c->eps) * g[i];
        st[1][i] = c->rho * st[1][i] + (1 - c->rho) * u * u;
        w[i] -= lr * u;
    }
}

static ot_case make_case(const cfg *c)
{
    const char *decay = c->legacy ? ot_fmt(", \"decay\": %.17g, " OT_LEGACY, c->decay) : "";
    const char *json =
        ot_fmt(ADADELTA("\"learning_rate\": %.17g, \"rho\": %.17g, \"epsilon\": %.17g%s"), c->lr,
               c->rho, c->eps, decay);
    return (ot_case){json,
                     ref_step,
                     c,
                     2,
                     {"accum_grad", "accum_var"},
                     .state_atol = {0, 1e-12},
                     .exact_slots = 1};
}

OPTIM_TEST(test_trajectories)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        ot_check_dense(&OT_DENSE, make_case(&(cfg){1.0, 0.95, 1e-6, 0, legacy}));
        ot_check_dense(&OT_DENSE, make_case(&(cfg){0.5, 0.8, 1e-3, 0, legacy}));
        ot_check_dense(&OT_DENSE,
                       make_case(&(cfg){0.001, 0.95, 1e-7, 0, legacy})); /* the defaults */
    }
    ot_check_dense(&OT_DENSE, make_case(&(cfg){1.0, 0.9, 1e-4, 0.3, 1})); /* legacy decay */
}

/* Legacy rho is a hyper; Keras 3's is a number. */
static void set_rho(optim_optimizer *opt, void *c, int k)
{
    (void)opt;
    ((cfg *)c)->rho = 0.5 + 0.04 * k;
}

OPTIM_TEST(test_dynamic_rho)
{
    optim_optimizer *opt = optim_test_make(ADADELTA("\"learning_rate\": 1.0, "
                                                    "\"epsilon\": 1e-6, " OT_LEGACY));
    cfg c = {1.0, 0.9, 1e-6, 0, 0};
    assert_ok(optim_set_hyper_fn(opt, "rho", ot_value, &c.rho), opt);
    ot_case oc = make_case(&c);
    optim_test_free(opt, ot_check_dynamic(opt, &OT_DENSE, 10, &oc, OPTIM_F64, set_rho));
    optim_optimizer *k3 = optim_test_make("\"adadelta\"");
    assert_status(optim_set_hyper_fn(k3, "rho", ot_value, &c.rho), OPTIM_ETYPE, k3);
    optim_destroy(k3);
}

/* Each generation's float32 operation order, bit for bit (sparse with every
 * row indexed gives the same: Keras 3 dense equivalent, SparseApplyAdadelta). */
static void ref_f32(const void *c_, int k, float *w, float *const *st, const float *g, int n)
{
    const cfg *c = c_;
    const float lr = (float)c->lr, rho = (float)c->rho, eps = (float)c->eps;
    const float omr = c->legacy ? 1.0f - rho : (float)(1.0 - c->rho);
    float *eg = st[0], *edx = st[1];
    (void)k;
    for (int i = 0; i < n; i++) {
        if (c->legacy) { /* ApplyAdadelta */
            eg[i] = eg[i] * rho + (g[i] * g[i]) * omr;
            float u = (sqrtf(edx[i] + eps) * (1.0f / sqrtf(eg[i] + eps))) * g[i];
            w[i] = w[i] - u * lr;
            edx[i] = edx[i] * rho + (u * u) * omr;
        } else { /* Adadelta.update_step */
            eg[i] = rho * eg[i] + omr * (g[i] * g[i]);
            float d = -((sqrtf(edx[i] + eps) * g[i]) / sqrtf(eg[i] + eps));
            edx[i] = rho * edx[i] + omr * (d * d);
            w[i] = w[i] + lr * d;
        }
    }
}

OPTIM_TEST(test_f32_operation_order)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int sparse = 0; sparse < 2; sparse++) {
            cfg c = {0.5, 0.9, 1e-3, 0, legacy};
            ot_case oc = make_case(&c);
            oc.ref32 = ref_f32;
            ot_check_f32(&OT_DENSE, 6, &oc, sparse);
        }
}

/* ---- Keras golden values --------------------------------------------------- */

/* keras/src/optimizers/adadelta_test.py test_single_step (legacy agrees). */
OPTIM_TEST(test_keras_single_step)
{
    const double want[4] = {0.9993, 1.9993, 2.9993, 3.9993};
    ot_check_keras_single_step(ADADELTA("\"learning_rate\": 0.5"), want);
    ot_check_keras_single_step(ADADELTA("\"learning_rate\": 0.5, " OT_LEGACY), want);
}

/* adadelta_test.py test_correctness_with_golden. */
OPTIM_TEST(test_keras_golden)
{
    const double golden[5] = {0.9978, 0.9947, 0.9915, 0.9882, 0.9849};
    OPTIM_FOR_DTYPES(dt)
    {
        ot_check_keras_golden(ADADELTA("\"learning_rate\": 1.0, \"rho\": 0.8, \"epsilon\": 1e-6"),
                              dt, golden, 1);
        ot_check_keras_golden(
            ADADELTA("\"learning_rate\": 1.0, \"rho\": 0.8, \"epsilon\": 1e-6, " OT_LEGACY), dt,
            golden, 1);
    }
}

OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(ADADELTA("\"learning_rate\": 1.0, \"weight_decay\": 0.004"),
                                OPTIM_F32);
}

/* tf_keras legacy adadelta_test testMinimizeSparseResourceVariable:
 * Adadelta(1.0, 1.0, 1.0), row 0 of [[1, 2]] gets [112, 140]: [[-111, -138]]. */
OPTIM_TEST(test_legacy_minimize_sparse)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt = optim_test_make(
                ot_gen(ADADELTA("\"learning_rate\": 1.0, \"rho\": 1.0, \"epsilon\": 1.0"), legacy));
            optim_var *v = optim_test_var("var0", dt, 2, (int64_t[2]){1, 2}, (double[2]){1, 2});
            ot_step_row(opt, v, 0, (double[]){112, 140});
            assert_eq(optim_var_get(v, 0), -111);
            assert_eq(optim_var_get(v, 1), -138);
            optim_test_free(opt, v);
        }
}

/* ---- sparse ------------------------------------------------------------------- */

/* Both generations against the reference: Keras 3 every row (g = 0 where no
 * index points), bit for bit equal to the dense run; legacy the indexed rows
 * only. */
OPTIM_TEST(test_sparse)
{
    static const char *const slots[] = {"accum_grad", "accum_var", NULL};
    for (int legacy = 0; legacy < 2; legacy++) {
        cfg c = {1.0, 0.9, 1e-4, 0, legacy};
        ot_case oc = make_case(&c);
        if (!legacy) ot_check_sparse_equals_dense(&OT_SPARSE, oc.json, slots);
        ot_check_sparse(&OT_SPARSE, oc, legacy);
    }
}

/* Row by row after history on every row, a gradient for row 3 only: legacy
 * leaves the other rows (variable and both slots) bit-identical; Keras 3
 * leaves the variable but decays both accumulators. */
OPTIM_TEST(test_sparse_untouched_rows)
{
    static const double g1[8] = {1, -1, 0.5, 2, -0.3, 0.7, 1.5, -2};
    for (int legacy = 0; legacy < 2; legacy++) {
        int kept = legacy ? OT_KEPT : OT_SCALED;
        const ot_rule rules[] = {{OT_ROW, OT_MOVED, NULL, 0},
                                 {OT_LEFT, OT_KEPT, NULL, 0},
                                 {OT_LEFT, kept, "accum_grad", 0.9},
                                 {OT_LEFT, kept, "accum_var", 0.9}};
        ot_check_rows_left_out(make_case(&(cfg){1.0, 0.9, 1e-3, 0, legacy}).json, OPTIM_F64, 4, 2,
                               g1, 3, (double[]){0.25, -0.5}, rules, 4);
    }
}

/* ---- config --------------------------------------------------------------------- */

OPTIM_TEST(test_config_keys)
{
    ot_expect_config(
        "\"adadelta\"",
        "{\"name\":\"adadelta\",\"learning_rate\":0.001,\"weight_decay\":null,\"clipnorm\":null,"
        "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
        "\"gradient_accumulation_steps\":null,\"rho\":0.95,\"epsilon\":1e-07}");
    ot_expect_config(ADADELTA(OT_LEGACY),
                     "{\"name\":\"Adadelta\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.95,"
                     "\"epsilon\":1e-07}");
    ot_expect_config(ADADELTA("\"epsilon\": null, " OT_LEGACY),
                     "{\"name\":\"Adadelta\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.95,"
                     "\"epsilon\":1e-07}");
    ot_expect_config(ADADELTA("\"epsilon\": 0, " OT_LEGACY),
                     "{\"name\":\"Adadelta\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.95,"
                     "\"epsilon\":1e-07}");
}

/* Legacy epsilon 0 is the backend epsilon 1e-7 in the update too; Keras 3
 * keeps 0 (and the first step is then 0 / sqrt(Eg) = 0). */
OPTIM_TEST(test_epsilon_zero)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        double w =
            ot_scalar_step(ot_gen(ADADELTA("\"learning_rate\": 1.0, \"epsilon\": 0"), legacy),
                           OPTIM_F64, 1.0, 2.0);
        double eg = 0.05 * 4;
        if (legacy) assert_close(w, 1 - sqrt(1e-7) / sqrt(eg + 1e-7) * 2, 1e-13, 0);
        else assert_eq(w, 1.0);
    }
}

OPTIM_TEST(test_config_round_trip)
{
    /* adadelta_test.py test_config. */
    ot_check_round_trip(ADADELTA("\"learning_rate\": 0.5, \"rho\": 0.9, \"epsilon\": 1e-5"));
    ot_check_round_trip(ADADELTA("\"learning_rate\": 0.5, \"rho\": 0.9, \"epsilon\": 1e-5, "
                                 "\"decay\": 0.1, \"global_clipnorm\": 3.0, " OT_LEGACY));
    /* The legacy alias lr (Adadelta(lr=1.0, ...)). */
    optim_optimizer *o =
        optim_test_make(ADADELTA("\"lr\": 1.0, \"rho\": 0.9, \"epsilon\": 1.0, " OT_LEGACY));
    double lr = 0;
    assert_ok(optim_get_hyper(o, "learning_rate", &lr), o);
    assert_eq(lr, 1.0);
    optim_destroy(o);
}

/* Neither generation checks rho or epsilon (both accept rho = 1, as the
 * legacy test above uses); types, None and keys are checked. */
OPTIM_TEST(test_config_refused)
{
    optim_optimizer *o = optim_test_make(ADADELTA("\"rho\": 1.5, \"epsilon\": -1.0"));
    optim_destroy(o);
    ot_expect_refused(ADADELTA("\"rho\": null"), OPTIM_ETYPE, "rho", NULL);
    ot_expect_refused(ADADELTA("\"rho\": null, " OT_LEGACY), OPTIM_ETYPE, "rho", NULL);
    ot_expect_refused(ADADELTA("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
    ot_expect_refused(ADADELTA("\"epsilon\": \"small\""), OPTIM_ETYPE, "epsilon", NULL);
    ot_expect_refused(ADADELTA("\"momentum\": 0.9"), OPTIM_EKEY, "momentum", NULL);
    ot_expect_refused(ADADELTA("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr",
                      "generation");
    ot_expect_refused(ADADELTA("\"use_ema\": false, " OT_LEGACY), OPTIM_EKEY, "use_ema", NULL);
}

/* ---- threads ------------------------------------------------------------------------ */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"accum_grad", "accum_var", NULL};
    ot_check_threads(ADADELTA("\"learning_rate\": 1.0, \"rho\": 0.95, \"epsilon\": 1e-6"), 2, 4, 0,
                     slots);
    ot_check_threads(
        ADADELTA(
            "\"learning_rate\": 1.0, \"rho\": 0.95, \"epsilon\": 1e-6, \"decay\": 0, " OT_LEGACY),
        2, 4, 0, slots);
}

int main(void) { return optim_test_run(); }
