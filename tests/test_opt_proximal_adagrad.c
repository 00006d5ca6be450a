/* ProximalAdagrad (TF Addons) against references written here from TF
 * Addons' proximal_adagrad.py and TF's kernels (training_ops.cc):
 *
 *   ApplyProximalAdagrad (dense; SparseApplyProximalAdagrad's rows of more
 *   than one element):
 *     a = a + g * g;  lr_t = lr * rsqrt(a);  p = w - g * lr_t
 *     w = sign(p) * max(|p| - lr_t * l1, 0) / (1 + l2 * lr_t)   (l1 > 0)
 *     w = p / (1 + l2 * lr_t)                                   (otherwise)
 *   SparseApplyProximalAdagrad's scalar loop (rows of one element):
 *     a = a + g * g;  lr_t = lr / sqrt(a);  p = w - lr_t * g
 *     the same two cases over 1.0 + l2 * lr_t, divided in double
 *
 * with duplicate indices summed first and only the indexed rows touched.
 * rsqrt(a) is taken as 1 / sqrt(a). The double reference follows these
 * operations, so f64 is compared bit for bit; float32 against it to 1e-6,
 * and against the same operations in float bit for bit. Also TF Addons'
 * test values (proximal_adagrad_test.py), the accumulator's initial value,
 * config keys in both envelopes (no decay written, as TF Addons), refusals
 * and thread-count independence. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PA(cfg) "{\"class_name\": \"Addons>ProximalAdagrad\", \"config\": {" cfg "}}"

typedef struct hp {
    double lr, init, l1, l2, decay;
    int scalar; /* sparse rows of one element: the kernel's scalar loop */
} hp;

/* ---- the reference ---------------------------------------------------------------- */

static double sign_of(double x) { return (double)((x > 0) - (x < 0)); }

/* One step in double; lr_t = lr / (1 + decay * iterations) first
 * (OptimizerV2._decayed_lr). */
static void ref_step(const void *h_, int k, double *w, double *const *st, const double *g, int n)
{
    const hp *h = h_;
    const double lr = h->lr / (1.0 + h->decay * k);
    double *a = st[0];
    for (int i = 0; i < n; i++) {
        a[i] = a[i] + g[i] * g[i];
        const double lr_t = h->scalar ? lr / sqrt(a[i]) : lr * (1.0 / sqrt(a[i]));
        const double p = h->scalar ? w[i] - lr_t * g[i] : w[i] - g[i] * lr_t;
        const double q = fabs(p) - lr_t * h->l1; /* std::max(q, 0) */
        w[i] = h->l1 > 0 ? sign_of(p) * (q < 0 ? 0 : q) / (1.0 + h->l2 * lr_t)
                         : p / (1.0 + h->l2 * lr_t);
    }
}

/* The same in float: Eigen's float expressions (dense), or the scalar loop
 * whose `1.0 + l2 * lr_t` and last division are double. */
static void ref_f32(const void *h_, int k, float *w, float *const *st, const float *g, int n)
{
    const hp *h = h_;
    const float lr0 = (float)h->lr, decay = (float)h->decay, l1 = (float)h->l1, l2 = (float)h->l2;
    const float lr = decay > 0 ? lr0 / (1.0f + decay * (float)k) : lr0;
    float *a = st[0];
    for (int i = 0; i < n; i++) {
        a[i] = a[i] + g[i] * g[i];
        const float lr_t = h->scalar ? lr / sqrtf(a[i]) : lr * (1.0f / sqrtf(a[i]));
        const float p = h->scalar ? w[i] - lr_t * g[i] : w[i] - g[i] * lr_t;
        const float q = fabsf(p) - lr_t * l1, num = (float)sign_of(p) * (q < 0 ? 0.0f : q);
        if (h->scalar) {
            const double den = 1.0 + (double)(l2 * lr_t);
            w[i] = (float)((l1 > 0 ? (double)num : (double)p) / den);
        } else {
            w[i] = (l1 > 0 ? num : p) / (1.0f + l2 * lr_t);
        }
    }
}

static ot_case make_case(const hp *h)
{
    const char *json = ot_fmt(PA("\"learning_rate\": %.17g, \"initial_accumulator_value\": %.17g, "
                                 "\"l1_regularization_strength\": %.17g, "
                                 "\"l2_regularization_strength\": %.17g, \"decay\": %.17g"),
                              h->lr, h->init, h->l1, h->l2, h->decay);
    return (ot_case){json,
                     ref_step,
                     h,
                     1,
                     {"accumulator"},
                     .tol = {1e-6, 1e-7, 0, 0},
                     .state_init = {h->init},
                     .exact_slots = 1,
                     .round32 = 1,
                     .ref32 = ref_f32};
}

/* No regularization, l1 alone (large enough to clip weights to 0), l2
 * alone, both, the legacy decay, a small and a large initial accumulator
 * (not 0: OT_DENSE's first gradient has a 0, and 0 * rsqrt(0) is NaN). */
static const hp CASES[] = {
    {0.1, 0.1, 0, 0, 0, 0},      {0.3, 0.1, 0.5, 0, 0, 0},      {0.1, 0.1, 0, 0.2, 0, 0},
    {0.2, 0.5, 0.05, 0.1, 0, 0}, {0.5, 0.1, 0.01, 0.3, 0.2, 0}, {0.05, 0.01, 0.001, 0, 0, 0},
    {1.5, 2.5, 0, 0, 0.1, 0},
};
#define NCASES (sizeof CASES / sizeof *CASES)

/* Dense: f64 bit for bit, f32 to 1e-6 relative, weights and accumulator. */
OPTIM_TEST(test_dense_reference)
{
    for (size_t i = 0; i < NCASES; i++) ot_check_dense(&OT_DENSE, make_case(&CASES[i]));
}

/* The float32 operations bit for bit: dense (Eigen's expressions), and
 * sparse on [n, 1] with every row indexed (the scalar loop). */
OPTIM_TEST(test_f32_operation_order)
{
    for (size_t i = 0; i < NCASES; i++)
        for (int sparse = 0; sparse < 2; sparse++) {
            hp h = CASES[i];
            h.scalar = sparse;
            ot_case c = make_case(&CASES[i]);
            c.hp = &h;
            ot_check_f32(&OT_DENSE, 10, &c, sparse);
        }
}

/* l1 large enough: every weight ends at exactly 0 (sign(p) * 0). */
OPTIM_TEST(test_l1_clips_to_zero)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt =
            optim_test_make(PA("\"learning_rate\": 1.0, \"l1_regularization_strength\": 100.0"));
        int64_t n = 3;
        optim_var *x = optim_test_var("w", dt, 1, &n, (double[3]){0.5, -2, 3});
        ot_step_dense(opt, x, (double[3]){0.1, -0.2, 0.3});
        assert_var_eq(x, ((double[3]){0, 0, 0}), 3);
        optim_test_free(opt, x);
    }
}

/* ---- sparse ------------------------------------------------------------------------ */

/* Rows of three elements (the dense rule per row) and of one (the scalar
 * loop), duplicates summed; rows never indexed keep their bits. f64 bit for
 * bit, f32 to 1e-6. */
OPTIM_TEST(test_sparse_reference)
{
    for (size_t i = 0; i < NCASES; i++)
        for (int vec = 0; vec < 2; vec++) {
            hp h = CASES[i];
            h.scalar = vec;
            ot_case c = make_case(&h);
            c.round32 = 0;
            c.tol[0] = 2e-6;
            ot_sparse s = OT_SPARSE_LONG;
            if (vec) s.cols = 0;
            ot_check_sparse(&s, c, 1);
        }
}

/* The two sparse forms differ where the kernel does: for a float32 vector
 * the scalar loop (lr / sqrt(a), 1.0 + l2 * lr_t and the division in
 * double), for rows of two the dense rule in float. With these values all
 * three roundings differ. */
OPTIM_TEST(test_sparse_row_forms)
{
    const char *json = PA("\"learning_rate\": 0.7, \"initial_accumulator_value\": 0.3, "
                          "\"l2_regularization_strength\": 2.59");
    optim_optimizer *o1 = optim_test_make(json), *o2 = optim_test_make(json);
    optim_var *vec = optim_test_var("v", OPTIM_F32, 1, (int64_t[1]){2}, (double[2]){1.3, 0});
    optim_var *mat = optim_test_var("m", OPTIM_F32, 2, (int64_t[2]){1, 2}, (double[2]){1.3, 0});
    ot_step_row(o1, vec, 0, (double[]){0.01});
    ot_step_row(o2, mat, 0, (double[]){0.01, 0});
    const float g = 0.01f, a = 0.3f + g * g, lr = 0.7f, l2 = 2.59f;
    const float t1 = lr / sqrtf(a), t2 = lr * (1.0f / sqrtf(a));
    const float p1 = 1.3f - t1 * g, p2 = 1.3f - g * t2;
    const float scalar = (float)((double)p1 / (1.0 + (double)(l2 * t1)));
    const float rows = p2 / (1.0f + l2 * t2);
    assert_var_floats(vec, ((float[2]){scalar, 0}), 2);
    assert_var_floats(mat, ((float[2]){rows, 0}), 2);
    assert_ne(scalar, rows);
    assert_ne(scalar, p1 / (1.0f + l2 * t1)); /* the double division shows */
    optim_destroy(o1);
    optim_test_free(o2, vec, mat);
}

/* ---- TF Addons' test values ------------------------------------------------------- */

/* proximal_adagrad_test.py run_sample: float32 var_0 [1, 2], var_1 [4, 3];
 * dense gradients [0.1, 0.2], [0.01, 0.02], or sparse [0.1] at 0 and
 * [0.02] at 1; ten steps of ProximalAdagrad(lr=3.0,
 * initial_accumulator_value=0.1, ...); to the test's rtol. */
static void run_sample(const char *json, int sparse, const double *want, double rtol)
{
    optim_optimizer *opt = optim_test_make(json);
    int64_t n = 2, one = 1, i0 = 0, i1 = 1;
    optim_var *v0 = optim_test_var("var_0", OPTIM_F32, 1, &n, (double[2]){1, 2});
    optim_var *v1 = optim_test_var("var_1", OPTIM_F32, 1, &n, (double[2]){4, 3});
    float d0[2] = {0.1f, 0.2f}, d1[2] = {0.01f, 0.02f}, s0 = 0.1f, s1 = 0.02f;
    for (int k = 0; k < 10; k++) {
        optim_grad_var p[2] = {
            {sparse ? optim_grad_sparse(&i0, 1, optim_tensor_make(OPTIM_F32, &s0, 1, &one))
                    : optim_grad_dense(optim_tensor_make(OPTIM_F32, d0, 1, &n)),
             v0},
            {sparse ? optim_grad_sparse(&i1, 1, optim_tensor_make(OPTIM_F32, &s1, 1, &one))
                    : optim_grad_dense(optim_tensor_make(OPTIM_F32, d1, 1, &n)),
             v1}};
        ot_step(opt, p, 2);
    }
    assert_var_close(v0, want, 2, rtol, 0);
    assert_var_close(v1, want + 2, 2, rtol, 0);
    optim_test_free(opt, v0, v1);
}

OPTIM_TEST(test_tfa_values)
{
    const char *plain = PA("\"lr\": 3.0, \"initial_accumulator_value\": 0.1");
    const char *l1 = PA("\"lr\": 3.0, \"initial_accumulator_value\": 0.1, "
                        "\"l1_regularization_strength\": 0.001");
    const char *l1l2 = PA("\"lr\": 3.0, \"initial_accumulator_value\": 0.1, "
                          "\"l1_regularization_strength\": 0.001, "
                          "\"l2_regularization_strength\": 2.0");
    run_sample(plain, 0, (double[]){-6.722771, -9.230448, 3.0539124, 1.1230775}, 1e-7);
    run_sample(l1, 0, (double[]){-6.663634, -9.190331, 2.9593036, 1.0292315}, 1e-7);
    run_sample(l1l2, 0, (double[]){-0.0495, -0.0995, -0.0045, -0.0095}, 1e-7);
    run_sample(plain, 1, (double[]){-6.722771, 2.0, 4.0, 1.1230775}, 5e-7);
    run_sample(l1, 1, (double[]){-6.663634, 2.0, 4.0, 1.0292315}, 5e-7);
    run_sample(l1l2, 1, (double[]){-0.0495, 2.0, 4.0, -0.0095}, 1e-7);
}

/* test_serialization: the config reads back to the same config. */
OPTIM_TEST(test_tfa_serialization)
{
    ot_check_round_trip(PA("\"lr\": 1e-4, \"initial_accumulator_value\": 0.1, "
                           "\"l1_regularization_strength\": 0.1, "
                           "\"l2_regularization_strength\": 0.1"));
}

/* ---- slots --------------------------------------------------------------------------- */

/* "accumulator", initial_accumulator_value in the variable's dtype. */
OPTIM_TEST(test_slot_initial_value)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(PA("\"initial_accumulator_value\": 0.3"));
        optim_var *v = optim_test_var("v", dt, 1, (int64_t[1]){3}, (double[3]){1, 2, 3});
        assert_ok(optim_build(opt, &v, 1), opt);
        ot_expect_slot_names(opt, "accumulator", NULL);
        const double acc = dt == OPTIM_F64 ? 0.3 : (double)0.3f;
        assert_var_eq(optim_get_slot(opt, v, "accumulator"), ((double[3]){acc, acc, acc}), 3);
        optim_test_free(opt, v);
    }
}

/* ---- config ------------------------------------------------------------------------- */

#define DEFAULTS                                                                              \
    "\"name\":\"ProximalAdagrad\",\"learning_rate\":0.001,\"initial_accumulator_value\":0.1," \
    "\"l1_regularization_strength\":0.0,\"l2_regularization_strength\":0.0"

/* TF Addons' get_config (no decay key), key for key in both envelopes. */
OPTIM_TEST(test_config_envelopes)
{
    ot_expect_config(PA(""), "{" DEFAULTS "}");
    ot_expect_config("\"ProximalAdagrad\"", "{" DEFAULTS "}");
    static const char *const same[] = {
        /* tf.keras 2.11-2.12 */
        "{\"class_name\":\"Addons>ProximalAdagrad\",\"config\":{" DEFAULTS "}}",
        "{\"class_name\":\"Addons>ProximalAdagrad\",\"config\":{\"name\":\"prox\","
        "\"global_clipnorm\":2.0,\"learning_rate\":3.0,\"initial_accumulator_value\":0,"
        "\"l1_regularization_strength\":0.001,\"l2_regularization_strength\":2}}",
        /* tf-keras 2.13+ */
        "{\"module\":\"tensorflow_addons.optimizers.proximal_adagrad\",\"class_name\":"
        "\"ProximalAdagrad\",\"config\":{" DEFAULTS "},\"registered_name\":"
        "\"Addons>ProximalAdagrad\"}",
        /* A decay that is not 0 is kept (TF Addons reads it but writes none). */
        "{\"class_name\":\"Addons>ProximalAdagrad\",\"config\":{\"name\":\"ProximalAdagrad\","
        "\"learning_rate\":0.1,\"decay\":0.5,\"initial_accumulator_value\":0.1,"
        "\"l1_regularization_strength\":0.0,\"l2_regularization_strength\":0.0}}",
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        optim_optimizer *opt = optim_test_make(same[i]);
        assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
        char *s = optim_serialize(opt);
        assert_string_equal(s, same[i]);
        optim_free(s);
        optim_destroy(opt);
    }
    /* decay 0 given is dropped, as TF Addons writes it. */
    ot_expect_config(PA("\"decay\": 0.0"), "{" DEFAULTS "}");
}

OPTIM_TEST(test_config_refused)
{
    ot_expect_refused(PA("\"initial_accumulator_value\": -0.1"), OPTIM_ERANGE,
                      "initial_accumulator_value", "[0, inf)");
    ot_expect_refused(PA("\"l1_regularization_strength\": -1"), OPTIM_ERANGE,
                      "l1_regularization_strength", "[0, inf)");
    ot_expect_refused(PA("\"l2_regularization_strength\": -1"), OPTIM_ERANGE,
                      "l2_regularization_strength", "[0, inf)");
    /* TF's kernels refuse lr <= 0. */
    ot_expect_refused(PA("\"learning_rate\": 0"), OPTIM_ERANGE, "learning_rate", "> 0");
    ot_expect_refused(PA("\"learning_rate\": -1"), OPTIM_ERANGE, "learning_rate", NULL);
    ot_expect_refused(PA("\"initial_accumulator_value\": \"x\""), OPTIM_ETYPE,
                      "initial_accumulator_value", NULL);
    ot_expect_refused(PA("\"l1\": 0.1"), OPTIM_EKEY, "l1", NULL);
    ot_expect_refused(PA("\"epsilon\": 1e-7"), OPTIM_EKEY, "epsilon", NULL);
    ot_expect_refused(PA("\"weight_decay\": 0.1"), OPTIM_EKEY, "weight_decay", NULL);
    ot_expect_refused(PA("\"is_legacy_optimizer\": false"), OPTIM_ENOTSUP, "legacy", NULL);
    /* A callable l1 out of range fails the step and changes nothing. */
    optim_optimizer *opt = optim_test_make(PA("\"learning_rate\": 0.1"));
    double l1 = -0.5;
    assert_ok(optim_set_hyper_fn(opt, "l1_regularization_strength", ot_value, &l1), opt);
    optim_var *x = optim_test_var("w", OPTIM_F64, 1, (int64_t[1]){2}, (double[2]){1, 2});
    ot_expect_step_refused(opt, x, 0.5, OPTIM_ERANGE, "l1_regularization_strength");
    optim_test_free(opt, x);
}

/* optim_config_remove, the service ProximalAdagrad's get_config uses: a
 * base key dropped (legacy: decay), an absent key and NULL refused. */
static int remove_rc[3];
static int remove_config(optim_optimizer *opt, optim_config *cfg)
{
    (void)opt;
    remove_rc[0] = optim_config_remove(cfg, "no_such_key");
    remove_rc[1] = optim_config_remove(NULL, "decay");
    remove_rc[2] = optim_config_remove(cfg, NULL);
    return optim_config_remove(cfg, "decay");
}
static void remove_dense(const optim_dense_update *u) { (void)u; }

OPTIM_TEST(test_config_remove)
{
    static const optim_class cls = {.size = sizeof(optim_class),
                                    .version = OPTIM_CLASS_VERSION,
                                    .name = "RemoveProbe",
                                    .flags = OPTIM_CLASS_LEGACY_ONLY,
                                    .apply_dense = remove_dense,
                                    .get_config = remove_config};
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &cls, NULL, &err), &err);
    char *text = optim_get_config(opt);
    assert_string_equal(text, "{\"name\":\"RemoveProbe\",\"learning_rate\":0.0}");
    assert_int_equal(remove_rc[0], OPTIM_EKEY);
    assert_int_equal(remove_rc[1], OPTIM_EINVAL);
    assert_int_equal(remove_rc[2], OPTIM_EINVAL);
    optim_free(text);
    optim_destroy(opt);
}

/* optim_create without options: a legacy-only class gets the legacy
 * generation (SGDW then needs its weight_decay); with Keras 3 options it
 * is refused. */
OPTIM_TEST(test_create_from_class)
{
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &optim_proximal_adagrad_class, NULL, &err), &err);
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    assert_string_equal(optim_name(opt), "ProximalAdagrad");
    optim_destroy(opt);
    assert_status(optim_create(&opt, &optim_sgdw_class, NULL, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "weight_decay");
    optim_options o = optim_options_defaults();
    assert_status(optim_create(&opt, &optim_proximal_adagrad_class, &o, &err), OPTIM_ENOTSUP, &err);
    assert_contains(err.msg, "legacy");
    assert_null(opt);
}

/* ---- threads ------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"accumulator", NULL};
    const char *json = PA("\"learning_rate\": 0.05, \"l1_regularization_strength\": 0.001, "
                          "\"l2_regularization_strength\": 0.01");
    ot_check_threads(json, 2, 3, 1, slots);
    ot_check_threads_mixed(json, 3, 3, slots);
}

int main(void) { return optim_test_run(); }
