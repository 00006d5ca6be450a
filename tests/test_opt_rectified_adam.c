/* RectifiedAdam against a reference written here from TF Addons'
 * tensorflow_addons/optimizers/rectified_adam.py (d208d75), line by line:
 * _prepare_local (t = k + 1; lr / (1 + decay * k), or the schedules at k):
 *
 *   sma_inf = 2 / (1 - b2) - 1;  sma_t = sma_inf - 2 t b2^t / (1 - b2^t)
 *   r_t = sqrt((sma_t - 4) / (sma_inf - 4) * (sma_t - 2) / (sma_inf - 2) * sma_inf / sma_t)
 *   total_steps > 0: lr = t <= ws ? lr t / ws : lr + (min_lr - lr) / ds * min(t - ws, ds)
 *                    (ws = total_steps * warmup_proportion, ds = max(total_steps - ws, 1))
 *
 * _resource_apply_dense:
 *
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  vhat = max(vhat, v)
 *   u = sma_t >= sma_threshold ? r_t (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *                              : m / (1 - b1^t);   u += wd w;   w -= lr u
 *
 * _resource_apply_sparse: indexed rows as dense; every other row m *= b1,
 * v *= b2, vhat = max(vhat, v), w kept.
 *
 * The reference is one macro instantiated for double (the f64 trajectory,
 * compared bit for bit: the order of operations is TFA's) and float (TF's
 * float32 arithmetic: the f32 trajectory bit for bit, ot_check_f32); the f32
 * trajectory is also within 1e-6 of the double reference. Plus TF Addons'
 * rectified_adam_test.py values, the sparse rows, config keys, both
 * envelopes, refusals, slots and threads. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define RADAM(cfg) "{\"class_name\": \"Addons>RectifiedAdam\", \"config\": {" cfg "}}"

typedef struct hp {
    double lr, b1, b2, eps, wd, thr, decay;
    int ams;
    double total, wp, min_lr;
    double (*lr_at)(int k); /* learning-rate schedule at iterations k, or NULL */
    double (*wd_at)(int k); /* weight_decay schedule, or NULL */
} hp;

/* TFA's defaults (with learning_rate 0.01). */
#define HP_DEFAULT                                                  \
    {                                                               \
        0.01, 0.9, 0.999, 1e-7, 0, 5.0, 0, 0, 0, 0.1, 0, NULL, NULL \
    }

/* _prepare_local's warmup and decay of lr_t (total_steps > 0). */
#define RADAM_WARMUP(T, MAXF, MINF)                                                               \
    static T warmup_##T(const hp *h, T lr_t, T local_step)                                        \
    {                                                                                             \
        if (!(h->total > 0)) return lr_t;                                                         \
        const T total = (T)h->total, warmup = total * (T)h->wp;                                   \
        const T decay_steps = MAXF(total - warmup, (T)1);                                         \
        const T decay_rate = ((T)h->min_lr - lr_t) / decay_steps;                                 \
        return local_step <= warmup ? lr_t * (local_step / warmup)                                \
                                    : lr_t + decay_rate * MINF(local_step - warmup, decay_steps); \
    }
RADAM_WARMUP(double, fmax, fmin)
RADAM_WARMUP(float, fmaxf, fminf)

/* _prepare_local and _resource_apply_dense in T, on n elements. */
#define RADAM_REF(T, POW, SQRT, MAXF)                                                              \
    static void ref_step_##T(const void *hp_, int k, T *w, T *const *st, const T *g, int n)        \
    {                                                                                              \
        const hp *h = hp_;                                                                         \
        T lr_t = (T)(h->lr_at ? h->lr_at(k) : h->lr), wd_t = (T)(h->wd_at ? h->wd_at(k) : h->wd);  \
        if (h->decay > 0) lr_t = lr_t / ((T)1 + (T)h->decay * (T)k);                               \
        const T b1 = (T)h->b1, b2 = (T)h->b2, local_step = (T)(k + 1);                             \
        const T b1_power = POW(b1, local_step), b2_power = POW(b2, local_step);                    \
        const T recip1 = (T)1 / ((T)1 - b1_power), recip2 = (T)1 / ((T)1 - b2_power);              \
        const T sma_inf = (T)2 / ((T)1 - b2) - (T)1;                                               \
        const T sma_t = sma_inf - (T)2 * local_step * b2_power * recip2;                           \
        const T r_t = SQRT((sma_t - (T)4) / (sma_inf - (T)4) * (sma_t - (T)2) / (sma_inf - (T)2) * \
                           sma_inf / sma_t);                                                       \
        lr_t = warmup_##T(h, lr_t, local_step);                                                    \
        T *m = st[0], *v = st[1], *vh = st[2];                                                     \
        for (int i = 0; i < n; i++) {                                                              \
            m[i] = b1 * m[i] + ((T)1 - b1) * g[i];                                                 \
            const T m_corr = m[i] * recip1;                                                        \
            v[i] = b2 * v[i] + ((T)1 - b2) * (g[i] * g[i]);                                        \
            if (h->ams) vh[i] = MAXF(vh[i], v[i]);                                                 \
            const T v_corr = SQRT((h->ams ? vh[i] : v[i]) * recip2);                               \
            T var_t = sma_t >= (T)h->thr ? r_t * m_corr / (v_corr + (T)h->eps) : m_corr;           \
            if (h->wd_at || h->wd != 0) var_t += wd_t * w[i];                                      \
            w[i] = w[i] - lr_t * var_t;                                                            \
        }                                                                                          \
    }
RADAM_REF(double, pow, sqrt, fmax)
RADAM_REF(float, powf, sqrtf, fmaxf)

/* A row a sparse step does not index: m.assign(m * b1) and v likewise, and
 * vhat = max(vhat, v); w is untouched. */
static void ref_idle(const void *hp_, int k, double *w, double *const *st, int n)
{
    const hp *h = hp_;
    (void)k, (void)w;
    for (int i = 0; i < n; i++) {
        st[0][i] = st[0][i] * h->b1;
        st[1][i] = st[1][i] * h->b2;
        st[2][i] = fmax(st[2][i], st[1][i]);
    }
}

static ot_case make_case(const char *json, const hp *h)
{
    return (ot_case){json,
                     ref_step_double,
                     h,
                     3,
                     {"m", "v", h->ams ? "vhat" : NULL},
                     h->ams ? NULL : "vhat",
                     .tol = {1e-5, 1e-6, 0, 0},
                     .idle = ref_idle,
                     .round32 = 1,
                     .every_step = 1,
                     .ref32 = ref_step_float};
}

/* ---- dense -------------------------------------------------------------------------- */

/* The configs the trajectory tests run (OT_DENSE_SHRINK: 25 steps; with
 * beta_2 0.999 and threshold 5, steps 1-5 are unrectified). */
static const struct {
    const char *json;
    hp h;
} CASES[] = {
    {RADAM("\"learning_rate\": 0.01"), HP_DEFAULT},
    {RADAM("\"learning_rate\": 0.01, \"beta_2\": 0.99, \"amsgrad\": true"),
     {0.01, 0.9, 0.99, 1e-7, 0, 5.0, 0, 1, 0, 0.1, 0, NULL, NULL}},
    /* Steps comparable to w, so that the rounding of every term shows in w. */
    {RADAM("\"learning_rate\": 0.7, \"beta_2\": 0.99, \"weight_decay\": 0.1, \"amsgrad\": true"),
     {0.7, 0.9, 0.99, 1e-7, 0.1, 5.0, 0, 1, 0, 0.1, 0, NULL, NULL}},
    {RADAM("\"learning_rate\": 0.02, \"beta_1\": 0.8, \"beta_2\": 0.9, \"weight_decay\": 0.05, "
           "\"sma_threshold\": 4.5, \"epsilon\": 1e-5, \"decay\": 0.05"),
     {0.02, 0.8, 0.9, 1e-5, 0.05, 4.5, 0.05, 0, 0, 0.1, 0, NULL, NULL}},
    /* Warmup over 5 steps, decay to min_lr over 15, then min_lr. */
    {RADAM("\"learning_rate\": 0.02, \"total_steps\": 20, \"warmup_proportion\": 0.25, "
           "\"min_lr\": 0.001, \"weight_decay\": 0.01, \"amsgrad\": true"),
     {0.02, 0.9, 0.999, 1e-7, 0.01, 5.0, 0, 1, 20, 0.25, 0.001, NULL, NULL}},
    /* No warmup phase: ws = 0 (t / ws not taken), straight decay. */
    {RADAM("\"learning_rate\": 0.02, \"total_steps\": 10, \"warmup_proportion\": 0.0, "
           "\"decay\": 0.1"),
     {0.02, 0.9, 0.999, 1e-7, 0, 5.0, 0.1, 0, 10, 0.0, 0, NULL, NULL}},
    /* Never rectified; epsilon 0 means 1e-7; total_steps < 0 is no warmup. */
    {RADAM("\"learning_rate\": 0.01, \"sma_threshold\": 1000, \"epsilon\": 0, "
           "\"total_steps\": -5"),
     {0.01, 0.9, 0.999, 1e-7, 0, 1000, 0, 0, 0, 0.1, 0, NULL, NULL}},
    /* The paper's threshold 4: rectified from step 5 (sma_t 4.96). Steps 3
     * and 4 of every case have r_t NaN (sma_t in (2, 4)), not taken. */
    {RADAM("\"learning_rate\": 0.01, \"beta_2\": 0.99, \"sma_threshold\": 4"),
     {0.01, 0.9, 0.99, 1e-7, 0, 4.0, 0, 0, 0, 0.1, 0, NULL, NULL}},
};
#define NCASES (sizeof CASES / sizeof *CASES)

OPTIM_TEST(test_dense_reference)
{
    for (size_t i = 0; i < NCASES; i++)
        ot_check_dense(&OT_DENSE_SHRINK, make_case(CASES[i].json, &CASES[i].h));
}

/* TF's float32 arithmetic, every step, bit for bit (dense, and sparse
 * gradients indexing every row). */
OPTIM_TEST(test_f32_operation_order)
{
    for (size_t i = 0; i < NCASES; i++)
        for (int sparse = 0; sparse < 2; sparse++) {
            ot_case c = make_case(CASES[i].json, &CASES[i].h);
            ot_check_f32(&OT_DENSE_SHRINK, 25, &c, sparse);
        }
}

/* ---- schedules --------------------------------------------------------------------- */

/* ExponentialDecay(1e-3, 50, 0.5) and InverseTimeDecay(2e-3, 25, 0.25), as
 * Keras computes them (rectified_adam_test.py, test_schedulers). */
static double exp_decay(int k) { return 1e-3 * pow(0.5, k / 50.0); }
static double inv_time(int k) { return 2e-3 / (1 + 0.25 * (k / 25.0)); }

#define SCHEDULES                                                                     \
    "\"learning_rate\": {\"class_name\": \"ExponentialDecay\", \"config\": "          \
    "{\"initial_learning_rate\": 0.001, \"decay_steps\": 50, \"decay_rate\": 0.5}}, " \
    "\"weight_decay\": {\"class_name\": \"InverseTimeDecay\", \"config\": "           \
    "{\"initial_learning_rate\": 0.002, \"decay_steps\": 25, \"decay_rate\": 0.25}}"

OPTIM_TEST(test_schedules)
{
    hp h = HP_DEFAULT;
    h.lr_at = exp_decay;
    h.wd_at = inv_time;
    ot_case c = make_case(RADAM(SCHEDULES), &h);
    ot_check_dense(&OT_DENSE_SHRINK, c);
    ot_check_f32(&OT_DENSE_SHRINK, 25, &c, 0);
}

/* _has_weight_decay is `weight_decay != 0.0` at construction: a schedule
 * counts even where it is 0, so u += 0 * w runs (NaN on an infinite w);
 * the number 0 skips it (w stays infinite). */
OPTIM_TEST(test_weight_decay_schedule_at_zero)
{
    static const char *const cfg[] = {
        RADAM("\"weight_decay\": 0.0"),
        RADAM("\"weight_decay\": {\"class_name\": \"PiecewiseConstantDecay\", \"config\": "
              "{\"boundaries\": [100], \"values\": [0.0, 0.1]}}"),
    };
    for (int i = 0; i < 2; i++) {
        double w = ot_scalar_step(cfg[i], OPTIM_F64, INFINITY, 1.0);
        if (i) assert_true(isnan(w));
        else assert_true(isinf(w) && w > 0);
    }
}

/* ---- sparse ------------------------------------------------------------------------- */

/* Every row moves its moments; only the indexed rows move w. */
OPTIM_TEST(test_sparse_reference)
{
    for (size_t i = 0; i < NCASES; i++)
        ot_check_sparse(&OT_SPARSE_ADAM, make_case(CASES[i].json, &CASES[i].h), 0);
}

/* After a dense step, a sparse step on row 3: the other rows keep w and
 * scale m by beta_1 and v by beta_2 exactly (in the dtype); vhat keeps its
 * value where v shrank. */
OPTIM_TEST(test_sparse_rows_left_out)
{
    static const double hist[6] = {1, -2, 0.5, 3, -1, 2};
    const ot_rule rules[] = {
        {OT_LEFT, OT_KEPT, NULL, 0},     {OT_LEFT, OT_SCALED, "m", 0.8},
        {OT_LEFT, OT_SCALED, "v", 0.95}, {OT_LEFT, OT_KEPT, "vhat", 0},
        {OT_ROW, OT_MOVED, NULL, 0},
    };
    OPTIM_FOR_DTYPES(dt)
    {
        ot_check_rows_left_out(
            RADAM("\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.95, \"amsgrad\": true, "
                  "\"weight_decay\": 0.1"),
            dt, 6, 1, hist, 3, (double[]){0.5}, rules, 5);
    }
}

/* ---- TF Addons' rectified_adam_test.py ---------------------------------------------- */

/* run_dense_sample / run_sparse_sample: var_0 [1, 2], var_1 [3, 4] (float32);
 * dense gradients [0.1, 0.2] and [0.03, 0.04], or sparse 0.1 on row 0 of
 * var_0 and 0.04 on row 1 of var_1; after `steps` steps, within 2e-4 of the
 * test's expected values. */
static void tfa_sample(const char *json, int sparse, int steps, const double want[4])
{
    optim_optimizer *opt = optim_test_make(json);
    int64_t n = 2, one = 1, i0 = 0, i1 = 1;
    optim_var *a = optim_test_var("var_0", OPTIM_F32, 1, &n, (double[]){1, 2});
    optim_var *b = optim_test_var("var_1", OPTIM_F32, 1, &n, (double[]){3, 4});
    float g0[2] = {0.1f, 0.2f}, g1[2] = {0.03f, 0.04f}, s0 = 0.1f, s1 = 0.04f;
    optim_grad_var p[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F32, g0, 1, &n)), a},
                           {optim_grad_dense(optim_tensor_make(OPTIM_F32, g1, 1, &n)), b}};
    if (sparse) {
        p[0].grad = optim_grad_sparse(&i0, 1, optim_tensor_make(OPTIM_F32, &s0, 1, &one));
        p[1].grad = optim_grad_sparse(&i1, 1, optim_tensor_make(OPTIM_F32, &s1, 1, &one));
    }
    for (int k = 0; k < steps; k++) ot_step(opt, p, 2);
    assert_var_close(a, want, 2, 0, 2e-4);
    assert_var_close(b, want + 2, 2, 0, 2e-4);
    optim_test_free(opt, a, b);
}

#define LOOKAHEAD(inner)                                                        \
    "{\"class_name\": \"Addons>Lookahead\", \"config\": {\"optimizer\": " inner \
    ", \"sync_period\": 6, \"slow_step_size\": 0.45}}"

OPTIM_TEST(test_tfa_values)
{
    static const struct {
        const char *json;
        int sparse, steps;
        double want[4];
    } t[] = {
        {RADAM("\"lr\": 0.001"), 0, 100, {0.985769, 1.985269, 2.986119, 3.986068}},
        {RADAM("\"lr\": 0.001"), 1, 200, {0.959333, 2.0, 3.0, 3.959632}},
        {RADAM("\"lr\": 0.001, \"amsgrad\": true"),
         0,
         100,
         {0.985769, 1.985269, 2.986119, 3.986068}},
        {RADAM("\"lr\": 0.001, \"amsgrad\": true"), 1, 200, {0.959333, 2.0, 3.0, 3.959632}},
        {RADAM("\"lr\": 0.001, \"weight_decay\": 0.01"),
         0,
         100,
         {0.984775, 1.983276, 2.983125, 3.982076}},
        {RADAM("\"lr\": 0.001, \"weight_decay\": 0.01"), 1, 200, {0.957368, 2.0, 3.0, 3.951673}},
        {RADAM("\"lr\": 0.001, \"total_steps\": 100, \"warmup_proportion\": 0.1, "
               "\"min_lr\": 1e-5"),
         0,
         100,
         {0.994062, 1.993912, 2.994167, 3.994152}},
        {RADAM("\"lr\": 0.001, \"total_steps\": 200, \"warmup_proportion\": 0.1, "
               "\"min_lr\": 1e-5"),
         1,
         200,
         {0.982629, 2.0, 3.0, 3.982674}},
        {LOOKAHEAD(RADAM("\"lr\": 0.001, \"beta_1\": 0.95")),
         0,
         100,
         {0.993126, 1.992901, 2.993283, 3.993261}},
        {LOOKAHEAD(RADAM("\"lr\": 0.001, \"beta_1\": 0.95")),
         1,
         150,
         {0.988156, 2.0, 3.0, 3.988291}},
        {RADAM(SCHEDULES), 0, 100, {0.993192, 1.992625, 2.993369, 3.993239}},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        tfa_sample(t[i].json, t[i].sparse, t[i].steps, t[i].want);
}

/* ---- config ------------------------------------------------------------------------- */

/* RectifiedAdam().get_config() in TFA's order. */
OPTIM_TEST(test_config_defaults)
{
    static const char want[] =
        "{\"name\":\"RectifiedAdam\",\"learning_rate\":0.001,\"beta_1\":0.9,\"beta_2\":0.999,"
        "\"decay\":0.0,\"weight_decay\":0.0,\"sma_threshold\":5.0,\"epsilon\":1e-07,"
        "\"amsgrad\":false,\"total_steps\":0,\"warmup_proportion\":0.1,\"min_lr\":0.0}";
    ot_expect_config("\"rectifiedadam\"", want);
    ot_expect_config(RADAM(""), want);
    ot_expect_config("{\"class_name\": \"RectifiedAdam\", \"config\": {}}", want);
    /* epsilon 0 is 1e-7 (`epsilon or backend.epsilon()`); clipnorm after name. */
    ot_expect_config_has(RADAM("\"epsilon\": 0, \"clipnorm\": 1.0"),
                         "{\"name\":\"RectifiedAdam\",\"clipnorm\":1.0,\"learning_rate\"");
    ot_expect_config_has(RADAM("\"epsilon\": 0"), "\"epsilon\":1e-07,");
}

/* Both envelopes TF Addons writes, read and written back key for key. */
OPTIM_TEST(test_config_envelopes)
{
#define RA_CFG                                                                            \
    "{\"name\":\"radam\",\"clipvalue\":0.5,\"learning_rate\":0.01,\"beta_1\":0.8,"        \
    "\"beta_2\":0.99,\"decay\":0.01,\"weight_decay\":0.001,\"sma_threshold\":4.0,"        \
    "\"epsilon\":1e-06,\"amsgrad\":true,\"total_steps\":10000,\"warmup_proportion\":0.2," \
    "\"min_lr\":1e-05}"
    ot_expect_config("{\"class_name\":\"Addons>RectifiedAdam\",\"config\":" RA_CFG "}", RA_CFG);
    static const char *const env[] = {
        "{\"class_name\":\"Addons>RectifiedAdam\",\"config\":" RA_CFG "}",
        "{\"module\":\"tensorflow_addons.optimizers.rectified_adam\",\"class_name\":"
        "\"RectifiedAdam\",\"config\":" RA_CFG ",\"registered_name\":\"Addons>RectifiedAdam\"}",
        /* test_scheduler_serialization, tf 2.13+: schedules in the envelope too. */
        "{\"module\":\"tensorflow_addons.optimizers.rectified_adam\",\"class_name\":"
        "\"RectifiedAdam\",\"config\":{\"name\":\"RectifiedAdam\",\"learning_rate\":{\"module\":"
        "\"keras.optimizers.schedules\",\"class_name\":\"ExponentialDecay\",\"config\":{"
        "\"initial_learning_rate\":0.001,\"decay_steps\":50,\"decay_rate\":0.5,\"staircase\":false,"
        "\"name\":null},\"registered_name\":null},\"beta_1\":0.9,\"beta_2\":0.999,\"decay\":0.0,"
        "\"weight_decay\":{\"module\":\"keras.optimizers.schedules\",\"class_name\":"
        "\"InverseTimeDecay\",\"config\":{\"initial_learning_rate\":0.002,\"decay_steps\":25,"
        "\"decay_rate\":0.25,\"staircase\":false,\"name\":null},\"registered_name\":null},"
        "\"sma_threshold\":5.0,\"epsilon\":1e-07,\"amsgrad\":false,\"total_steps\":0,"
        "\"warmup_proportion\":0.1,\"min_lr\":0.0},\"registered_name\":\"Addons>RectifiedAdam\"}",
    };
    for (size_t i = 0; i < sizeof env / sizeof *env; i++)
        ot_expect_serialized_as_given(env[i], OPTIM_LEGACY);
#undef RA_CFG
}

OPTIM_TEST(test_config_refused)
{
    ot_expect_refused(RADAM("\"beta_1\": 1.0"), OPTIM_ERANGE, "beta_1", "[0, 1)");
    ot_expect_refused(RADAM("\"beta_2\": -0.1"), OPTIM_ERANGE, "beta_2", "[0, 1)");
    ot_expect_refused(RADAM("\"weight_decay\": -1"), OPTIM_ERANGE, "weight_decay", NULL);
    ot_expect_refused(RADAM("\"epsilon\": -1e-7"), OPTIM_ERANGE, "epsilon", NULL);
    ot_expect_refused(RADAM("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL);
    ot_expect_refused(RADAM("\"warmup_proportion\": -0.1"), OPTIM_ERANGE, "warmup_proportion",
                      NULL);
    ot_expect_refused(RADAM("\"min_lr\": -1e-5"), OPTIM_ERANGE, "min_lr", NULL);
    ot_expect_refused(RADAM("\"total_steps\": 1.5"), OPTIM_ETYPE, "total_steps", NULL);
    ot_expect_refused(RADAM("\"total_steps\": {\"class_name\": \"ExponentialDecay\", \"config\": "
                            "{\"initial_learning_rate\": 1, \"decay_steps\": 1, "
                            "\"decay_rate\": 0.5}}"),
                      OPTIM_ETYPE, "total_steps", NULL);
    ot_expect_refused(RADAM("\"sma_threshold\": true"), OPTIM_ETYPE, "sma_threshold", NULL);
    ot_expect_refused(RADAM("\"rectify\": true"), OPTIM_EKEY, "rectify", NULL);
    /* TF Addons only: no Keras 3 form. */
    ot_expect_refused(RADAM("\"is_legacy_optimizer\": false"), OPTIM_ENOTSUP, "RectifiedAdam",
                      NULL);
    /* amsgrad cannot change once the slots exist. */
    optim_optimizer *opt = optim_test_make(RADAM(""));
    int64_t n = 2;
    optim_var *x = optim_test_var("w", OPTIM_F64, 1, &n, (double[2]){0});
    assert_ok(optim_build(opt, &x, 1), opt);
    assert_status(optim_set_hyper(opt, "amsgrad", 1), OPTIM_ESTATE, opt);
    assert_contains(optim_errmsg(opt), "amsgrad");
    optim_test_free(opt, x);
}

/* Slots kind by kind (TFA's _create_slots): every m, every v, every vhat. */
OPTIM_TEST(test_slots)
{
    for (int ams = 0; ams < 2; ams++) {
        optim_optimizer *opt =
            optim_test_make(ams ? RADAM("\"amsgrad\": true") : RADAM("\"amsgrad\": false"));
        int64_t n = 2;
        optim_var *a = optim_test_var("a", OPTIM_F32, 1, &n, (double[2]){0});
        optim_var *b = optim_test_var("b", OPTIM_F32, 1, &n, (double[2]){0});
        optim_var *vars[2] = {a, b};
        assert_ok(optim_build(opt, vars, 2), opt);
        if (ams) {
            ot_expect_slot_names(opt, "m", "v", "vhat", NULL);
            ot_expect_weight_names(opt, 1, "a/m", "b/m", "a/v", "b/v", "a/vhat", "b/vhat", NULL);
        } else {
            ot_expect_slot_names(opt, "m", "v", NULL);
            ot_expect_weight_names(opt, 1, "a/m", "b/m", "a/v", "b/v", NULL);
        }
        optim_test_free(opt, a, b);
    }
}

/* ---- threads -------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"m", "v", "vhat", NULL};
    ot_check_threads(RADAM("\"learning_rate\": 0.01, \"amsgrad\": true, \"weight_decay\": 0.01"), 2,
                     8, 1, slots);
    ot_check_threads_mixed(RADAM("\"learning_rate\": 0.01, \"total_steps\": 6"), 3, 8, slots);
}

int main(void) { return optim_test_run(); }
