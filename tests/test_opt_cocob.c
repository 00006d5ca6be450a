/* COCOB against a reference written here from TF Addons' source
 * (tensorflow_addons/optimizers/cocob.py, COCOB._resource_apply_dense),
 * one assignment per line of it, slots as _create_slots makes them:
 *
 *     lr_update            = max(lr, |g|)             lr starts at 1e-8
 *     gradients_sum_update = gradients_sum + g
 *     grad_norm_sum_update = grad_norm_sum + |g|
 *     reward_update        = max(reward - g * tilde_w, 0)
 *     grad_max             = max(grad_norm_sum_update + lr_update, alpha * lr_update)
 *     rewards_lr_sum       = reward_update + lr_update
 *     new_w                = -gradients_sum_update / (lr_update * grad_max) * rewards_lr_sum
 *     var                  = var - tilde_w + new_w;   tilde_w = new_w
 *
 * max is tf.maximum (NaN in, NaN out). In double precision against f64 bit
 * for bit and against f32 to 1e-6; in float against f32 bit for bit. TF
 * Addons' cocob_test.py values; the sparse refusal (TFA raises
 * NotImplementedError) changing nothing; config keys as TFA writes them in
 * both envelopes; the refusals (learning_rate, alpha < 1, Keras 3). */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer.h"

#define COCOB(cfg) "{\"class_name\": \"COCOB\", \"config\": {" cfg "}}"
#define NSLOTS 5

static const char *const slot_names[] = {"lr",      "grad_norm_sum", "gradients_sum",
                                         "tilde_w", "reward",        NULL};

/* ---- the reference ------------------------------------------------------------- */

typedef struct cocob_hp {
    double alpha;
} cocob_hp;

/* tf.maximum: Eigen's max with NaN propagation; the first when equal. */
static double tf_max(double a, double b) { return isnan(a) ? a : isnan(b) ? b : a < b ? b : a; }
static float tf_maxf(float a, float b) { return isnan(a) ? a : isnan(b) ? b : a < b ? b : a; }

/* One step of COCOB._resource_apply_dense in type T: ref_cocob in double,
 * ref32_cocob in float32 as TF runs a float32 variable (alpha then a
 * float32 constant). */
#define REF_COCOB(NAME, T, ABS, MAX)                                                     \
    static void NAME(const void *hp, int k, T *w, T *const *st, const T *g, int n)       \
    {                                                                                    \
        (void)k;                                                                         \
        const T alpha = (T)((const cocob_hp *)hp)->alpha;                                \
        T *lr = st[0], *grad_norm_sum = st[1], *gradients_sum = st[2], *tilde_w = st[3], \
          *reward = st[4];                                                               \
        for (int i = 0; i < n; i++) {                                                    \
            T lr_update = MAX(lr[i], ABS(g[i]));                                         \
            T gradients_sum_update = gradients_sum[i] + g[i];                            \
            T grad_norm_sum_update = grad_norm_sum[i] + ABS(g[i]);                       \
            T reward_update = MAX(reward[i] - g[i] * tilde_w[i], (T)0);                  \
            T grad_max = MAX(grad_norm_sum_update + lr_update, alpha * lr_update);       \
            T rewards_lr_sum = reward_update + lr_update;                                \
            T new_w = -gradients_sum_update / (lr_update * (grad_max)) * rewards_lr_sum; \
            T var_update = w[i] - tilde_w[i] + new_w;                                    \
            gradients_sum[i] = gradients_sum_update;                                     \
            grad_norm_sum[i] = grad_norm_sum_update;                                     \
            w[i] = var_update;                                                           \
            tilde_w[i] = new_w;                                                          \
            lr[i] = lr_update;                                                           \
            reward[i] = reward_update;                                                   \
        }                                                                                \
    }
REF_COCOB(ref_cocob, double, fabs, tf_max)
REF_COCOB(ref32_cocob, float, fabsf, tf_maxf)

/* f64 exact; f32 (from the f32 inputs, alpha rounded to float) to 1e-6,
 * relative or absolute (w ends near 0 after moves of about 1, so float32's
 * rounding shows in its last digits). */
static ot_case cocob_case(const char *json, const cocob_hp *hp, const cocob_hp *hp32)
{
    ot_case c = {
        .json = json,
        .ref = ref_cocob,
        .hp = hp,
        .hp32 = hp32,
        .nstate = NSLOTS,
        .slots = {"lr", "grad_norm_sum", "gradients_sum", "tilde_w", "reward"},
        .tol = {1e-6, 1e-6, 0, 0},
        .state_init = {1e-8, 0, 0, 0, 0},
        .exact_slots = 1,
        .round32 = 1,
        .every_step = 1,
        .ref32 = ref32_cocob,
    };
    return c;
}

/* ---- dense --------------------------------------------------------------------- */

/* alpha: the default (alpha * L wins for the first 100 steps), TFA's test
 * values 20 and 55.7 (not a float), 2 and 1 (A + L wins from the second or
 * third step on). */
static const double alphas[] = {100, 20, 55.7, 2, 1};
static const char *const alpha_json[] = {
    COCOB(""),
    COCOB("\"alpha\": 20"),
    COCOB("\"alpha\": 55.7"),
    COCOB("\"alpha\": 2.0"),
    COCOB("\"alpha\": 1, \"name\": \"c\""),
};

OPTIM_TEST(test_dense_reference)
{
    for (int a = 0; a < 5; a++) {
        cocob_hp hp = {alphas[a]}, hp32 = {(float)alphas[a]};
        ot_check_dense(&OT_DENSE, cocob_case(alpha_json[a], &hp, &hp32));
        ot_check_dense(&OT_DENSE_SHRINK, cocob_case(alpha_json[a], &hp, &hp32));
    }
}

/* float32 bit for bit: TF's operations in float, in its order. */
OPTIM_TEST(test_dense_f32_operation_order)
{
    for (int a = 0; a < 5; a++) {
        cocob_hp hp = {alphas[a]};
        ot_case c = cocob_case(alpha_json[a], &hp, NULL);
        ot_check_f32(&OT_DENSE, OT_DENSE.steps, &c, 0);
        ot_check_f32(&OT_DENSE_SHRINK, OT_DENSE_SHRINK.steps, &c, 0);
    }
}

/* The reward clamps at 0 and the bet changes sign: one element, gradients
 * +1, +1, -3, -3, +0.5 (alpha 2). The reference's states step by step. */
OPTIM_TEST(test_dense_reward_clamp)
{
    const double gs[] = {1, 1, -3, -3, 0.5};
    cocob_hp hp = {2};
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(COCOB("\"alpha\": 2"));
        int64_t one = 1;
        optim_var *x = optim_test_var("x", dt, 1, &one, (double[]){0.5});
        double w = 0.5, lr = dt == OPTIM_F32 ? (double)1e-8f : 1e-8, st[NSLOTS] = {lr, 0, 0, 0, 0};
        double *p[NSLOTS] = {st, st + 1, st + 2, st + 3, st + 4};
        int clamped = 0;
        for (int k = 0; k < 5; k++) {
            ref_cocob(&hp, k, &w, p, &gs[k], 1);
            clamped += st[4] == 0 && k > 0;
            ot_step_dense(opt, x, &gs[k]);
            assert_close(optim_var_get(x, 0), w, dt == OPTIM_F32 ? 1e-6 : 0, 0);
            for (int s = 0; s < NSLOTS; s++)
                assert_close(optim_var_get(optim_get_slot(opt, x, slot_names[s]), 0), st[s],
                             dt == OPTIM_F32 ? 1e-6 : 0, 0);
        }
        assert_gt(clamped, 0);
        optim_test_free(opt, x);
    }
}

/* tf.maximum propagates NaN: a NaN gradient makes lr (and w) NaN, where
 * fmax would keep lr. */
OPTIM_TEST(test_dense_nan_gradient)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(COCOB(""));
        int64_t two = 2;
        optim_var *x = optim_test_var("x", dt, 1, &two, (double[]){1, 2});
        ot_step_dense(opt, x, (double[]){0.5, 0.25});
        ot_step_dense(opt, x, (double[]){NAN, 0.25});
        assert_nan(optim_var_get(x, 0));
        assert_nan(optim_var_get(optim_get_slot(opt, x, "lr"), 0));
        assert_nan(optim_var_get(optim_get_slot(opt, x, "reward"), 0));
        assert_false(isnan(optim_var_get(x, 1)));
        assert_eq(optim_var_get(optim_get_slot(opt, x, "lr"), 1), dt == OPTIM_F32 ? 0.25f : 0.25);
        optim_test_free(opt, x);
    }
}

/* tensorflow_addons/optimizers/tests/cocob_test.py: run_dense_sample,
 * var_0 [1, 2] with gradient [0.1, 0.2] and var_1 [3, 4] with [0.03, 0.04]
 * in one apply_gradients per iteration, float32, atol 2e-4; here f64 too,
 * and the double reference closer. */
static void tfa_sample(const char *json, double alpha, int iterations, const double *want)
{
    const double g0[2] = {0.1, 0.2}, g1[2] = {0.03, 0.04};
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        int64_t two = 2;
        optim_var *v0 = optim_test_var("var_0", dt, 1, &two, (double[]){1, 2});
        optim_var *v1 = optim_test_var("var_1", dt, 1, &two, (double[]){3, 4});
        char b0[16], b1[16];
        optim_grad_var p[2] = {{ot_grad_like(v0, g0, b0), v0}, {ot_grad_like(v1, g1, b1), v1}};
        for (int k = 0; k < iterations; k++) ot_step(opt, p, 2);
        assert_var_close(v0, want, 2, 0, 2e-4);
        assert_var_close(v1, want + 2, 2, 0, 2e-4);
        /* The reference from the inputs this dtype holds. */
        cocob_hp hp = {dt == OPTIM_F32 ? (double)(float)alpha : alpha};
        double w[4] = {1, 2, 3, 4}, g[4], st[NSLOTS][4] = {{0}};
        double *sp[NSLOTS] = {st[0], st[1], st[2], st[3], st[4]};
        for (int i = 0; i < 4; i++) {
            g[i] = i < 2 ? g0[i] : g1[i - 2];
            if (dt == OPTIM_F32) g[i] = (float)g[i];
            st[0][i] = dt == OPTIM_F32 ? (double)1e-8f : 1e-8;
        }
        for (int k = 0; k < iterations; k++) ref_cocob(&hp, k, w, sp, g, 4);
        const double tol = dt == OPTIM_F32 ? 1e-6 : 0;
        assert_var_close(v0, w, 2, tol, tol);
        assert_var_close(v1, w + 2, 2, tol, tol);
        /* TFA's values are numpy's shortest float32 texts: TF's float32
         * results, which optim's are bit for bit. */
        if (dt == OPTIM_F32) {
            const float want32[4] = {(float)want[0], (float)want[1], (float)want[2],
                                     (float)want[3]};
            assert_var_floats(v0, want32, 2);
            assert_var_floats(v1, want32 + 2, 2);
        }
        optim_test_free(opt, v0, v1);
    }
}

OPTIM_TEST(test_tfa_values)
{
    /* test_dense_sample_with_default_alpha: COCOB() */
    tfa_sample(COCOB(""), 100, 10, (double[]){0.84528893, 1.845289, 2.845289, 3.845289});
    /* test_dense_sample_with_custom_int_alpha: COCOB(20) */
    tfa_sample(COCOB("\"alpha\": 20"), 20, 7,
               (double[]){0.09346926, 1.0934693, 2.0934694, 3.0934694});
    /* test_dense_sample_with_custom_float_alpha: COCOB(55.7) */
    tfa_sample(COCOB("\"alpha\": 55.7"), 55.7, 5,
               (double[]){0.89307845, 1.8930784, 2.8930783, 3.8930783});
}

/* ---- sparse: refused, nothing changed ------------------------------------------ */

/* A sparse gradient of "emb" (rows 1, 3, 1: duplicates) beside a dense
 * gradient of "dense": the step fails naming emb, before anything moves. */
static void expect_sparse_refused(optim_optimizer *opt, optim_var *emb, optim_var *dense,
                                  optim_dtype dt)
{
    const int64_t idx[3] = {1, 3, 1};
    double vals[6] = {0.5, -1, 2, 0.25, -0.5, 1}, gd[2] = {0.3, -0.7};
    char bv[48], bd[16];
    int64_t vshape[2] = {3, 2};
    optim_tensor tv = optim_tensor_make(dt, bv, 2, vshape);
    for (int i = 0; i < 6; i++) {
        if (dt == OPTIM_F32) ((float *)bv)[i] = (float)vals[i];
        else ((double *)bv)[i] = vals[i];
    }
    optim_grad_var p[2] = {{ot_grad_like(dense, gd, bd), dense},
                           {optim_grad_sparse(idx, 3, tv), emb}};
    const int64_t it = optim_iterations(opt);
    const size_t nw = optim_weights_count(opt);
    optim_tensor *before = calloc(nw, sizeof *before);
    assert_non_null(before);
    assert_int_equal(optim_get_weights(opt, before, nw), nw);
    float e0[8], d0[2];
    double e064[8], d064[2];
    for (int i = 0; i < 8; i++) e064[i] = optim_var_get(emb, i), e0[i] = (float)e064[i];
    for (int i = 0; i < 2; i++) d064[i] = optim_var_get(dense, i), d0[i] = (float)d064[i];
    for (int order = 0; order < 2; order++) {
        optim_grad_var q[2] = {p[order], p[1 - order]};
        assert_status(optim_apply_gradients(opt, q, 2, 0), OPTIM_ENOTSUP, opt);
        assert_contains(optim_errmsg(opt), "COCOB");
        assert_contains(optim_errmsg(opt), "'emb'");
        assert_contains(optim_errmsg(opt), "sparse");
        assert_status(optim_apply_gradients(opt, &p[1], 1, 0), OPTIM_ENOTSUP, opt);
    }
    assert_eq(optim_iterations(opt), it);
    assert_int_equal(optim_weights_count(opt), nw);
    if (dt == OPTIM_F32) {
        assert_var_floats(emb, e0, 8);
        assert_var_floats(dense, d0, 2);
    } else {
        assert_var_eq(emb, e064, 8);
        assert_var_eq(dense, d064, 2);
    }
    optim_tensor *after = calloc(nw, sizeof *after);
    assert_non_null(after);
    assert_int_equal(optim_get_weights(opt, after, nw), nw);
    for (size_t i = 0; i < nw; i++)
        assert_memory_equal(before[i].data, after[i].data,
                            (size_t)optim_tensor_numel(&before[i]) *
                                optim_dtype_size(before[i].dtype));
    free(before);
    free(after);
}

OPTIM_TEST(test_sparse_refused)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(COCOB(""));
        int64_t eshape[2] = {4, 2}, two = 2;
        optim_var *emb = optim_test_var("emb", dt, 2, eshape, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
        optim_var *dense = optim_test_var("dense", dt, 1, &two, (double[]){0.5, -0.5});
        /* First step: no slot exists before, none after. */
        expect_sparse_refused(opt, emb, dense, dt);
        assert_int_equal(optim_weights_count(opt), 1);
        assert_null(optim_get_slot(opt, dense, "lr"));
        /* After dense steps on both (slots made): slots keep their bits. */
        ot_step_dense(opt, dense, (double[]){0.1, 0.2});
        ot_step_dense(opt, emb, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
        assert_int_equal(optim_weights_count(opt), 1 + 2 * NSLOTS);
        expect_sparse_refused(opt, emb, dense, dt);
        optim_test_free(opt, emb, dense);
    }
}

/* ---- slots and config ------------------------------------------------------------ */

/* TFA's _create_slots: per variable, lr (1e-8), grad_norm_sum,
 * gradients_sum, tilde_w, reward: the weights go variable by variable. */
OPTIM_TEST(test_slots)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(COCOB(""));
        int64_t n = 3;
        optim_var *a = optim_test_var("a", dt, 1, &n, (double[]){1, 2, 3});
        optim_var *b = optim_test_var("b", dt, 1, &n, (double[]){1, 2, 3});
        optim_var *vars[2] = {a, b};
        assert_ok(optim_build(opt, vars, 2), opt);
        ot_expect_slot_names(opt, "lr", "grad_norm_sum", "gradients_sum", "tilde_w", "reward",
                             NULL);
        assert_int_equal(optim_weights_count(opt), 11);
        ot_expect_weight_names(opt, 1, "a/lr", "a/grad_norm_sum", "a/gradients_sum", "a/tilde_w",
                               "a/reward", "b/lr", "b/grad_norm_sum", NULL);
        const double lr = dt == OPTIM_F32 ? (double)1e-8f : 1e-8;
        assert_var_eq(optim_get_slot(opt, a, "lr"), ((double[3]){lr, lr, lr}), 3);
        for (int s = 1; s < NSLOTS; s++)
            assert_var_eq(optim_get_slot(opt, b, slot_names[s]), ((double[3]){0, 0, 0}), 3);
        optim_test_free(opt, a, b);
    }
}

/* Half variables: slots of the variable's dtype, lr's 1e-8 rounded once
 * (as TF's Constant(1e-8) slot of a float16 variable): 0 in float16 (below
 * its smallest subnormal, so a first zero gradient gives 0 / 0, as in TF),
 * kept in bfloat16 (float32's exponent range). */
OPTIM_TEST(test_half_slots)
{
    const optim_dtype dts[2] = {OPTIM_F16, OPTIM_BF16};
    for (int d = 0; d < 2; d++) {
        optim_optimizer *opt = optim_test_make(COCOB(""));
        optim_var *x = NULL;
        optim_error err;
        assert_ok(optim_var_create(&x, "x", dts[d], 1, (int64_t[]){2}, NULL, &err), &err);
        assert_ok(optim_build(opt, &x, 1), opt);
        optim_var *lr = optim_get_slot(opt, x, "lr");
        assert_int_equal(optim_var_dtype(lr), dts[d]);
        if (d == 0) assert_eq(optim_var_get(lr, 0), 0);
        else assert_close(optim_var_get(lr, 0), 1e-8, 1e-2, 0);
        optim_test_free(opt, x);
    }
}

OPTIM_TEST(test_threads_bitwise)
{
    ot_check_threads(COCOB(""), 2, 3, 1, slot_names);
    ot_check_threads(COCOB("\"alpha\": 2"), 3, 4, 0, slot_names);
}

/* COCOB.get_config: {**OptimizerV2.get_config(), "alpha": ...}: name, the
 * clip options that are set, alpha. No learning_rate, decay or use_locking. */
OPTIM_TEST(test_config)
{
    static const char *const keys[] = {"name", "alpha"};
    cJSON *c = ot_config_of(COCOB(""), "COCOB", OT_KEYS(keys));
    ot_expect_numbers(c, "alpha", 100.0, NULL);
    cJSON_Delete(c);
    ot_expect_config(COCOB("\"alpha\": 20"), "{\"name\":\"COCOB\",\"alpha\":20}");
    ot_expect_config(COCOB("\"alpha\": 55.7, \"clipnorm\": 1.0, \"name\": \"cc\""),
                     "{\"name\":\"cc\",\"clipnorm\":1.0,\"alpha\":55.7}");
    ot_expect_config(
        COCOB("\"clipvalue\": 0.5, \"global_clipnorm\": 2.0"),
        "{\"name\":\"COCOB\",\"clipvalue\":0.5,\"global_clipnorm\":2.0,\"alpha\":100.0}");
    /* Accepted as TFA's constructor does, without effect, not written back:
     * use_locking (a bool it never stores), decay (OptimizerV2's, which
     * COCOB never reads), and is_legacy_optimizer. */
    ot_expect_config(COCOB("\"use_locking\": true, \"decay\": 0.5, \"alpha\": 3, " OT_LEGACY),
                     "{\"name\":\"COCOB\",\"alpha\":3}");
    ot_expect_config(COCOB("\"use_locking\": false"), "{\"name\":\"COCOB\",\"alpha\":100.0}");
    /* "cocob" by name, and TF Addons' registered name. */
    ot_expect_config("\"cocob\"", "{\"name\":\"COCOB\",\"alpha\":100.0}");
}

/* Both envelopes, as tf.keras writes a TF Addons optimizer: read back and
 * written key for key. */
OPTIM_TEST(test_config_envelopes)
{
    static const char *const in[] = {
        "{\"class_name\":\"Addons>COCOB\",\"config\":{\"name\":\"COCOB\",\"alpha\":100.0}}",
        "{\"class_name\":\"Addons>COCOB\",\"config\":{\"name\":\"opt\",\"clipnorm\":1.0,"
        "\"alpha\":55.7}}",
        "{\"module\":\"tensorflow_addons.optimizers.cocob\",\"class_name\":\"COCOB\","
        "\"config\":{\"name\":\"COCOB\",\"alpha\":20},\"registered_name\":\"Addons>COCOB\"}",
        "{\"module\":\"tensorflow_addons.optimizers.cocob\",\"class_name\":\"COCOB\","
        "\"config\":{\"name\":\"COCOB\",\"global_clipnorm\":0.5,\"alpha\":100.0},"
        "\"registered_name\":\"Addons>COCOB\"}",
    };
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        optim_optimizer *opt = optim_test_make(in[i]);
        assert_int_equal(optim_generation_of(opt), OPTIM_LEGACY);
        char *s = optim_serialize(opt);
        assert_non_null(s);
        assert_string_equal(s, in[i]);
        optim_free(s);
        optim_destroy(opt);
        ot_check_round_trip(in[i]);
    }
}

OPTIM_TEST(test_config_refused)
{
    ot_expect_refused(COCOB("\"alpha\": 0.5"), OPTIM_ERANGE, "alpha", "[1, inf)");
    ot_expect_refused(COCOB("\"alpha\": 0"), OPTIM_ERANGE, "alpha", "[1, inf)");
    ot_expect_refused(COCOB("\"alpha\": \"big\""), OPTIM_ETYPE, "alpha", NULL);
    ot_expect_refused(COCOB("\"alpha\": null"), OPTIM_ETYPE, "alpha", NULL);
    ot_expect_refused(COCOB("\"use_locking\": 1"), OPTIM_ETYPE, "use_locking", NULL);
    ot_expect_refused(COCOB("\"decay\": -0.1"), OPTIM_ERANGE, "decay", NULL);
    /* No learning rate: learning_rate and lr (renamed by from_config). */
    ot_expect_refused(COCOB("\"learning_rate\": 0.1"), OPTIM_EINVAL, "learning_rate",
                      "no learning rate");
    ot_expect_refused(COCOB("\"lr\": 0.1"), OPTIM_EINVAL, "learning_rate", "no learning rate");
    ot_expect_refused(COCOB("\"momentum\": 0.9"), OPTIM_EKEY, "momentum", NULL);
    /* Keras 3 options, and the Keras 3 generation itself. */
    ot_expect_refused(COCOB("\"weight_decay\": 0.1"), OPTIM_EKEY, "weight_decay", NULL);
    ot_expect_refused(COCOB("\"is_legacy_optimizer\": false"), OPTIM_ENOTSUP, "legacy", NULL);
    /* At run time: learning_rate in any form; alpha only as a number. */
    optim_optimizer *opt = optim_test_make(COCOB(""));
    assert_status(optim_set_hyper(opt, "learning_rate", 0.01), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "no learning rate");
    double v = 0.1;
    assert_status(optim_set_hyper_fn(opt, "learning_rate", ot_value, &v), OPTIM_EINVAL, opt);
    assert_status(optim_set_hyper_fn(opt, "alpha", ot_value, &v), OPTIM_ETYPE, opt);
    assert_contains(optim_errmsg(opt), "alpha");
    assert_status(optim_set_hyper(opt, "alpha", 0.99), OPTIM_ERANGE, opt);
    assert_ok(optim_get_hyper(opt, "alpha", &v), opt);
    assert_eq(v, 100);
    assert_ok(optim_set_hyper(opt, "alpha", 1), opt);
    optim_destroy(opt);
}

int main(void) { return optim_test_run(); }
