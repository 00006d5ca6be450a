/* Yogi against a reference written here from TF Addons'
 * tensorflow_addons/optimizers/yogi.py (d208d75), _resource_apply_dense
 * line by line (t = k + 1, lr / (1 + decay * k)):
 *
 *   lr = lr_t * sqrt(1 - b2^t) / (1 - b1^t)
 *   m  = m * b1 + g * (1 - b1)                    (beta1 == 0: no m, m is g)
 *   s  = sign(g^2 - v)  or  tanh(10 * (g^2 - v))
 *   v  = v + (1 - b2) * s * g^2
 *   p  = lr / (sqrt(v) + eps);  w' = w - p * m
 *   l1 > 0: _solve(1 + l2 p, -w', l1 p) = (|b| > c) * ((c sign(b) - b) / a)
 *   l2 > 0: w' / (1 + l2 p)
 *
 * _resource_apply_sparse: the indexed rows as dense; with m, every other
 * row m = m * b1 (m.assign(m * beta1) before the gather); without m, the
 * other rows keep every bit.
 *
 * The reference is one macro instantiated for double (the f64 trajectory,
 * bit for bit: TFA's order of operations) and float (TF's float32
 * arithmetic: the f32 trajectory bit for bit, ot_check_f32); the f32
 * trajectory is also within 1e-6 of the double one. Plus yogi_test.py's own
 * numpy reference (yogi_update_numpy) and its repeated-indices test, the
 * sparse rows, config keys, both envelopes, refusals, slots and threads. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define YOGI(cfg) "{\"class_name\": \"Addons>Yogi\", \"config\": {" cfg "}}"

typedef struct hp {
    double lr, b1, b2, eps, l1, l2, decay, init;
    int tanh;
} hp;

#define SIGN(T, x) ((T)(((x) > 0) - ((x) < 0)))

/* _resource_apply_dense in T on n elements; st[0] is v, st[1] m. */
#define YOGI_REF(T, POW, SQRT, TANH, FABS)                                                     \
    static void ref_step_##T(const void *hp_, int k, T *w, T *const *st, const T *g, int n)    \
    {                                                                                          \
        const hp *h = hp_;                                                                     \
        T lr_t = (T)h->lr;                                                                     \
        if (h->decay > 0) lr_t = lr_t / ((T)1 + (T)h->decay * (T)k);                           \
        const T beta1_t = (T)h->b1, beta2_t = (T)h->b2, epsilon_t = (T)h->eps;                 \
        const T l1_t = (T)h->l1, l2_t = (T)h->l2, local_step = (T)(k + 1);                     \
        const T lr =                                                                           \
            lr_t * SQRT((T)1 - POW(beta2_t, local_step)) / ((T)1 - POW(beta1_t, local_step));  \
        T *v = st[0], *m = st[1];                                                              \
        for (int i = 0; i < n; i++) {                                                          \
            T m_t = g[i];                                                                      \
            if (h->b1 != 0) m_t = m[i] = m[i] * beta1_t + g[i] * ((T)1 - beta1_t);             \
            const T grad2 = g[i] * g[i];                                                       \
            const T sign = h->tanh ? TANH((T)10 * (grad2 - v[i])) : SIGN(T, grad2 - v[i]);     \
            v[i] = v[i] + ((T)1 - beta2_t) * sign * grad2;                                     \
            const T per_coord_lr = lr / (SQRT(v[i]) + epsilon_t);                              \
            T new_var = w[i] - per_coord_lr * m_t;                                             \
            if (h->l1 > 0) {                                                                   \
                const T a = (T)1 + l2_t * per_coord_lr, b = -new_var, c = l1_t * per_coord_lr; \
                const T x = (c * SIGN(T, b) - b) / a;                                          \
                new_var = (T)(FABS(b) > c) * x;                                                \
            } else if (h->l2 > 0) {                                                            \
                new_var = new_var / ((T)1 + l2_t * per_coord_lr);                              \
            }                                                                                  \
            w[i] = new_var;                                                                    \
        }                                                                                      \
    }
YOGI_REF(double, pow, sqrt, tanh, fabs)
YOGI_REF(float, powf, sqrtf, tanhf, fabsf)

/* A row a sparse step does not index, with m: m.assign(m * beta1). */
static void ref_idle(const void *hp_, int k, double *w, double *const *st, int n)
{
    const hp *h = hp_;
    (void)k, (void)w;
    for (int i = 0; i < n; i++) st[1][i] = st[1][i] * h->b1;
}

/* h's values as float32 holds them: the f32 run's hyperparameters (TF
 * casts each to the variable's dtype), for its double reference. */
static const hp *as_f32(const hp *h, hp *out)
{
    *out = *h;
    double *x[] = {&out->lr, &out->b1, &out->b2,    &out->eps,
                   &out->l1, &out->l2, &out->decay, &out->init};
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) *x[i] = (float)*x[i];
    return out;
}

/* The case of json with hp h; h32 is storage for its float32 values. */
static ot_case make_case(const char *json, const hp *h, hp *h32)
{
    const int has_m = h->b1 > 0;
    return (ot_case){json,
                     ref_step_double,
                     h,
                     2,
                     {"v", has_m ? "m" : NULL},
                     has_m ? NULL : "m",
                     .tol = {1e-5, 1e-6, 0, 0},
                     .state_init = {h->init, 0},
                     .exact_slots = 1,
                     .idle = has_m ? ref_idle : NULL,
                     .round32 = 1,
                     .every_step = 1,
                     .hp32 = as_f32(h, h32),
                     .ref32 = ref_step_float};
}

/* ---- dense -------------------------------------------------------------------------- */

static const struct {
    const char *json;
    hp h;
} CASES[] = {
    {YOGI(""), {0.01, 0.9, 0.999, 1e-3, 0, 0, 0, 1e-6, 0}},
    {YOGI("\"learning_rate\": 0.05, \"beta1\": 0.0"), {0.05, 0, 0.999, 1e-3, 0, 0, 0, 1e-6, 0}},
    /* Steps comparable to w, so that the rounding of every term shows in w. */
    {YOGI("\"learning_rate\": 0.5, \"activation\": \"tanh\", \"l2_regularization_strength\": 0.1"),
     {0.5, 0.9, 0.999, 1e-3, 0, 0.1, 0, 1e-6, 1}},
    {YOGI("\"learning_rate\": 0.5, \"l1_regularization_strength\": 0.01, "
          "\"l2_regularization_strength\": 0.1"),
     {0.5, 0.9, 0.999, 1e-3, 0.01, 0.1, 0, 1e-6, 0}},
    {YOGI("\"learning_rate\": 0.05, \"activation\": \"tanh\", \"initial_accumulator_value\": 0.5"),
     {0.05, 0.9, 0.999, 1e-3, 0, 0, 0, 0.5, 1}},
    {YOGI("\"learning_rate\": 0.05, \"l1_regularization_strength\": 0.3, "
          "\"l2_regularization_strength\": 0.2"),
     {0.05, 0.9, 0.999, 1e-3, 0.3, 0.2, 0, 1e-6, 0}},
    {YOGI("\"learning_rate\": 0.05, \"beta2\": 0.9, \"epsilon\": 1e-6, "
          "\"l2_regularization_strength\": 0.5, \"decay\": 0.1"),
     {0.05, 0.9, 0.9, 1e-6, 0, 0.5, 0.1, 1e-6, 0}},
    {YOGI("\"learning_rate\": 0.05, \"beta1\": 0.0, \"activation\": \"tanh\", "
          "\"l1_regularization_strength\": 0.5, \"initial_accumulator_value\": 0.0"),
     {0.05, 0, 0.999, 1e-3, 0.5, 0, 0, 0, 1}},
};
#define NCASES (sizeof CASES / sizeof *CASES)

OPTIM_TEST(test_dense_reference)
{
    hp h32;
    for (size_t i = 0; i < NCASES; i++)
        ot_check_dense(&OT_DENSE, make_case(CASES[i].json, &CASES[i].h, &h32));
}

/* TF's float32 arithmetic, every step, bit for bit (dense, and sparse
 * gradients indexing every row). */
OPTIM_TEST(test_f32_operation_order)
{
    hp h32;
    for (size_t i = 0; i < NCASES; i++)
        for (int sparse = 0; sparse < 2; sparse++) {
            ot_case c = make_case(CASES[i].json, &CASES[i].h, &h32);
            ot_check_f32(&OT_DENSE, 25, &c, sparse);
        }
}

/* _solve's (|b| > c) * w: a weight the l1 step clears is 0 times a value
 * of b's sign, so a small positive weight becomes -0.0, as in TF. */
OPTIM_TEST(test_l1_clears_to_signed_zero)
{
    const char *json = YOGI("\"learning_rate\": 0.1, \"l1_regularization_strength\": 1.0");
    OPTIM_FOR_DTYPES(dt)
    {
        double w = ot_scalar_step(json, dt, 0.01, 0.0);
        assert_true(w == 0 && signbit(w));
        w = ot_scalar_step(json, dt, -0.01, 0.0);
        assert_true(w == 0 && !signbit(w));
        /* l1 0: no prox; a zero gradient leaves the weight. */
        const double kept = dt == OPTIM_F32 ? (double)0.01f : 0.01;
        assert_true(ot_scalar_step(YOGI("\"learning_rate\": 0.1"), dt, 0.01, 0.0) == kept);
    }
}

/* ---- sparse ------------------------------------------------------------------------- */

/* With m every row's m decays; without (beta1 0) the other rows keep every bit. */
OPTIM_TEST(test_sparse_reference)
{
    hp h32;
    for (size_t i = 0; i < NCASES; i++) {
        ot_case c = make_case(CASES[i].json, &CASES[i].h, &h32);
        ot_check_sparse(&OT_SPARSE_LONG, c, 1);
        ot_check_sparse(&OT_SPARSE, c, 1);
    }
}

/* After a dense step, a sparse step on row 3 only. */
OPTIM_TEST(test_sparse_rows_left_out)
{
    static const double hist[6] = {1, -2, 0.5, 3, -1, 2};
    const ot_rule with_m[] = {
        {OT_LEFT, OT_KEPT, NULL, 0},
        {OT_LEFT, OT_KEPT, "v", 0},
        {OT_LEFT, OT_SCALED, "m", 0.8},
        {OT_ROW, OT_MOVED, NULL, 0},
    };
    const ot_rule without_m[] = {
        {OT_LEFT, OT_KEPT, NULL, 0},
        {OT_LEFT, OT_KEPT, "v", 0},
        {OT_ROW, OT_MOVED, NULL, 0},
    };
    OPTIM_FOR_DTYPES(dt)
    {
        ot_check_rows_left_out(YOGI("\"learning_rate\": 0.1, \"beta1\": 0.8"), dt, 6, 1, hist, 3,
                               (double[]){0.5}, with_m, 4);
        ot_check_rows_left_out(YOGI("\"learning_rate\": 0.1, \"beta1\": 0.0"), dt, 6, 1, hist, 3,
                               (double[]){0.5}, without_m, 3);
    }
}

/* ---- TF Addons' yogi_test.py -------------------------------------------------------- */

/* yogi_update_numpy, as the test writes it. */
static void numpy_update(double *param, double g_t, int t, double *m, double *v, double beta1,
                         double l1reg, double l2reg)
{
    const double alpha = 0.01, beta2 = 0.999, epsilon = 1e-3;
    double alpha_t = alpha * sqrt(1 - pow(beta2, t)) / (1 - pow(beta1, t));
    double m_t = beta1 * *m + (1 - beta1) * g_t, g2_t = g_t * g_t;
    double d = *v - g2_t, v_t = *v - (1 - beta2) * SIGN(double, d) * g2_t;
    double per_coord_lr = alpha_t / (sqrt(v_t) + epsilon), param_t = *param - per_coord_lr * m_t;
    if (l1reg > 0) {
        param_t =
            (param_t - l1reg * per_coord_lr * SIGN(double, param_t)) / (1 + l2reg * per_coord_lr);
        if (fabs(param_t) < l1reg * per_coord_lr) param_t = 0;
    } else if (l2reg > 0) {
        param_t = param_t / (1 + l2reg * per_coord_lr);
    }
    *param = param_t, *m = m_t, *v = v_t;
}

/* do_test_basic / do_test_sparse: var0 [1, 2] with gradient 0.1, var1 [3, 4]
 * with 0.01 (sparse: indices [0, 1]), initial_accumulator_value 1, three
 * steps, each checked against the numpy update (rtol and atol 1e-6). */
static void tfa_basic(double beta1, double l1, double l2, int sparse, optim_dtype dt)
{
    optim_optimizer *opt = optim_test_make(
        ot_fmt(YOGI("\"beta1\": %.17g, \"l1_regularization_strength\": %.17g, "
                    "\"l2_regularization_strength\": %.17g, \"initial_accumulator_value\": 1.0"),
               beta1, l1, l2));
    int64_t n = 2, idx[2] = {0, 1};
    double w[2][2] = {{1, 2}, {3, 4}}, m[2][2] = {{0}}, v[2][2] = {{1, 1}, {1, 1}};
    const double g[2] = {0.1, 0.01};
    optim_var *x[2] = {optim_test_var("var0", dt, 1, &n, w[0]),
                       optim_test_var("var1", dt, 1, &n, w[1])};
    double gv[2][2] = {{0.1, 0.1}, {0.01, 0.01}};
    float gf[2][2] = {{0.1f, 0.1f}, {0.01f, 0.01f}};
    for (int t = 1; t <= 3; t++) {
        optim_grad_var p[2];
        for (int j = 0; j < 2; j++) {
            optim_tensor gt =
                optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)gf[j] : (void *)gv[j], 1, &n);
            p[j] = (optim_grad_var){sparse ? optim_grad_sparse(idx, 2, gt) : optim_grad_dense(gt),
                                    x[j]};
            for (int i = 0; i < 2; i++)
                numpy_update(&w[j][i], g[j], t, &m[j][i], &v[j][i], beta1, l1, l2);
        }
        ot_step(opt, p, 2);
        for (int j = 0; j < 2; j++) assert_var_close(x[j], w[j], 2, 1e-6, 1e-6);
    }
    optim_test_free(opt, x[0], x[1]);
}

OPTIM_TEST(test_tfa_basic_and_sparse)
{
    static const double cfg[4][3] = {{0, 0, 0}, {0, 0.1, 0.2}, {0.9, 0, 0}, {0.9, 0.1, 0.2}};
    for (int sparse = 0; sparse < 2; sparse++)
        for (int c = 0; c < 4; c++) OPTIM_FOR_DTYPES(dt)
            {
                tfa_basic(cfg[c][0], cfg[c][1], cfg[c][2], sparse, dt);
            }
}

/* test_sparse_repeated_indices: [0.1, 0.1] on row 1 twice equals [0.2] once. */
OPTIM_TEST(test_tfa_repeated_indices)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *o1 = optim_test_make("\"Addons>Yogi\""), *o2 = optim_test_make("\"yogi\"");
        int64_t shape[2] = {2, 1}, vs2[2] = {2, 1}, vs1[2] = {1, 1}, rep[2] = {1, 1}, one = 1;
        optim_var *a = optim_test_var("a", dt, 2, shape, (double[]){1, 2});
        optim_var *b = optim_test_var("b", dt, 2, shape, (double[]){1, 2});
        double d2[2] = {0.1, 0.1}, d1 = 0.2;
        float f2[2] = {0.1f, 0.1f}, f1 = 0.2f;
        const int f = dt == OPTIM_F32;
        optim_grad_var pa = {
            optim_grad_sparse(rep, 2, optim_tensor_make(dt, f ? (void *)f2 : (void *)d2, 2, vs2)),
            a};
        optim_grad_var pb = {
            optim_grad_sparse(&one, 1,
                              optim_tensor_make(dt, f ? (void *)&f1 : (void *)&d1, 2, vs1)),
            b};
        for (int k = 0; k < 3; k++) {
            ot_step(o1, &pa, 1);
            ot_step(o2, &pb, 1);
        }
        assert_vars_bitwise(a, b);
        optim_destroy(o1);
        optim_test_free(o2, a, b);
    }
}

/* ---- config ------------------------------------------------------------------------- */

/* Yogi().get_config() in TFA's order. */
OPTIM_TEST(test_config_defaults)
{
    static const char want[] =
        "{\"name\":\"Yogi\",\"learning_rate\":0.01,\"decay\":0.0,\"beta1\":0.9,\"beta2\":0.999,"
        "\"epsilon\":0.001,\"l1_regularization_strength\":0.0,\"l2_regularization_strength\":0.0,"
        "\"activation\":\"sign\",\"initial_accumulator_value\":1e-06}";
    ot_expect_config("\"yogi\"", want);
    ot_expect_config(YOGI(""), want);
    ot_expect_config("{\"class_name\": \"Yogi\", \"config\": {}}", want);
    ot_expect_config_has(YOGI("\"lr\": 1e-4, \"clipnorm\": 1.0"),
                         "{\"name\":\"Yogi\",\"clipnorm\":1.0,\"learning_rate\":0.0001,");
}

/* Both envelopes TF Addons writes, read and written back key for key. */
OPTIM_TEST(test_config_envelopes)
{
#define YOGI_CFG                                                                          \
    "{\"name\":\"y\",\"global_clipnorm\":2.0,\"learning_rate\":{\"class_name\":"          \
    "\"ExponentialDecay\",\"config\":{\"initial_learning_rate\":0.1,\"decay_steps\":10,"  \
    "\"decay_rate\":0.5,\"staircase\":true,\"name\":null}},\"decay\":0.01,\"beta1\":0.0," \
    "\"beta2\":0.99,\"epsilon\":1e-05,\"l1_regularization_strength\":0.1,"                \
    "\"l2_regularization_strength\":0.2,\"activation\":\"tanh\","                         \
    "\"initial_accumulator_value\":0.5}"
    static const char *const env[] = {
        "{\"class_name\":\"Addons>Yogi\",\"config\":" YOGI_CFG "}",
        "{\"module\":\"tensorflow_addons.optimizers.yogi\",\"class_name\":\"Yogi\",\"config\":"
        "{\"name\":\"Yogi\",\"learning_rate\":0.0001,\"decay\":0.0,\"beta1\":0.9,\"beta2\":0.999,"
        "\"epsilon\":0.001,\"l1_regularization_strength\":0.0,\"l2_regularization_strength\":0.0,"
        "\"activation\":\"sign\",\"initial_accumulator_value\":1e-06},\"registered_name\":"
        "\"Addons>Yogi\"}",
    };
    for (size_t i = 0; i < sizeof env / sizeof *env; i++)
        ot_expect_serialized_as_given(env[i], OPTIM_LEGACY);
#undef YOGI_CFG
}

OPTIM_TEST(test_config_refused)
{
    /* TFA raises NotImplementedError at the first step; refused here. */
    ot_expect_refused(YOGI("\"activation\": \"relu\""), OPTIM_EINVAL, "activation",
                      "\"sign\", \"tanh\"");
    ot_expect_refused(YOGI("\"activation\": 1"), OPTIM_ETYPE, "activation", NULL);
    ot_expect_refused(YOGI("\"beta1\": 1.0"), OPTIM_ERANGE, "beta1", "[0, 1)");
    ot_expect_refused(YOGI("\"beta1\": -0.5"), OPTIM_ERANGE, "beta1", "[0, 1)");
    ot_expect_refused(YOGI("\"beta2\": 1.5"), OPTIM_ERANGE, "beta2", "[0, 1)");
    ot_expect_refused(YOGI("\"epsilon\": -1"), OPTIM_ERANGE, "epsilon", NULL);
    ot_expect_refused(YOGI("\"l1_regularization_strength\": -0.1"), OPTIM_ERANGE,
                      "l1_regularization_strength", NULL);
    ot_expect_refused(YOGI("\"l2_regularization_strength\": -0.1"), OPTIM_ERANGE,
                      "l2_regularization_strength", NULL);
    ot_expect_refused(YOGI("\"initial_accumulator_value\": -1"), OPTIM_ERANGE,
                      "initial_accumulator_value", NULL);
    ot_expect_refused(YOGI("\"beta_1\": 0.9"), OPTIM_EKEY, "beta_1", NULL);
    ot_expect_refused(YOGI("\"is_legacy_optimizer\": false"), OPTIM_ENOTSUP, "Yogi", NULL);
}

/* Slots variable by variable (TFA's _create_slots loop): v (the initial
 * accumulator value), then m (zeros) when beta1 > 0. */
OPTIM_TEST(test_slots)
{
    OPTIM_FOR_DTYPES(dt)
    {
        for (int has_m = 0; has_m < 2; has_m++) {
            optim_optimizer *opt =
                optim_test_make(has_m ? YOGI("\"initial_accumulator_value\": 0.3")
                                      : YOGI("\"initial_accumulator_value\": 0.3, \"beta1\": 0"));
            int64_t n = 2;
            optim_var *a = optim_test_var("a", dt, 1, &n, (double[2]){0});
            optim_var *b = optim_test_var("b", dt, 1, &n, (double[2]){0});
            optim_var *vars[2] = {a, b};
            assert_ok(optim_build(opt, vars, 2), opt);
            const double acc = dt == OPTIM_F32 ? (double)0.3f : 0.3;
            assert_var_eq(optim_get_slot(opt, b, "v"), ((double[2]){acc, acc}), 2);
            if (has_m) {
                ot_expect_slot_names(opt, "v", "m", NULL);
                ot_expect_weight_names(opt, 1, "a/v", "a/m", "b/v", "b/m", NULL);
                assert_var_eq(optim_get_slot(opt, a, "m"), ((double[2]){0, 0}), 2);
            } else {
                ot_expect_slot_names(opt, "v", NULL);
                ot_expect_weight_names(opt, 1, "a/v", "b/v", NULL);
            }
            optim_test_free(opt, a, b);
        }
    }
}

/* ---- threads -------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"v", "m", NULL};
    ot_check_threads(YOGI("\"l1_regularization_strength\": 0.01, \"activation\": \"tanh\""), 2, 6,
                     1, slots);
    ot_check_threads_mixed(YOGI("\"l2_regularization_strength\": 0.01"), 3, 6, slots);
    ot_check_threads_mixed(YOGI("\"beta1\": 0.0"), 3, 6, slots);
}

int main(void) { return optim_test_run(); }
