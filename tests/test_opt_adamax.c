/* Adamax against independent double-precision references written from the
 * published rule (Kingma & Ba 2015, section 7.1, as Keras applies it):
 * dense trajectories in f32 and f64 for both generations, legacy decay,
 * dynamic beta_1, sparse gradients with duplicate indices (Keras 3: the
 * dense equivalent; legacy: indexed rows only), Keras's golden values, the
 * f32 order of operations of each generation, config keys, defaults, round
 * trips and refused values, and thread-count independence.
 *
 * Keras configs (written out here, not read from the library):
 *   keras.optimizers.Adamax().get_config(): name "Adamax", learning_rate
 *     0.001, weight_decay None, clipnorm None, global_clipnorm None,
 *     clipvalue None, use_ema False, ema_momentum 0.99,
 *     ema_overwrite_frequency None, loss_scale_factor None,
 *     gradient_accumulation_steps None, beta_1 0.9, beta_2 0.999,
 *     epsilon 1e-07
 *   tf.keras.optimizers.legacy.Adamax().get_config(): name "Adamax",
 *     learning_rate 0.001, decay 0.0, beta_1 0.9, beta_2 0.999,
 *     epsilon 1e-07, is_legacy_optimizer True */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 25
#define N 7

static double grad_at(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k; }
static double init_at(int i) { return 0.5 - 0.3 * i; }

typedef struct ref {
    int legacy;
    double lr, beta_1, beta_2, epsilon, decay;
} ref;

/* ---- the reference ---------------------------------------------------------------- */

/* One Adamax step on n elements with step number t (1-based). */
static void ref_step(const ref *r, int t, double *w, double *m, double *v, const double *g, int n,
                     const int *touched)
{
    double lr = r->lr / (1.0 + (r->legacy ? r->decay : 0.0) * (t - 1));
    double step = lr / (1.0 - pow(r->beta_1, t));
    for (int i = 0; i < n; i++) {
        if (touched && !touched[i]) continue;
        m[i] = r->beta_1 * m[i] + (1.0 - r->beta_1) * g[i];
        v[i] = fmax(r->beta_2 * v[i], fabs(g[i]));
        w[i] -= step * m[i] / (v[i] + r->epsilon);
    }
}

static void ref_dense(const ref *r, double *w, double *m, double *v, int steps)
{
    for (int i = 0; i < N; i++) w[i] = init_at(i), m[i] = v[i] = 0;
    for (int k = 0; k < steps; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        ref_step(r, k + 1, w, m, v, g, N, NULL);
    }
}

/* ---- helpers -------------------------------------------------------------------------- */


/* Not inlined: GCC's -Wmaybe-uninitialized cannot see that the copy reads
 * only numel(shape) elements of init (a scalar for rank 0). */

static void step_dense(optim_optimizer *opt, optim_var *w, const double *g)
{
    int64_t n = optim_var_numel(w);
    optim_dtype dt = optim_var_dtype(w);
    float gf[64];
    double gd[64];
    assert_true(n <= 64);
    for (int64_t i = 0; i < n; i++) gf[i] = (float)g[i], gd[i] = g[i];
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)gf : (void *)gd,
                                                           optim_var_rank(w), optim_var_shape(w))),
                        w};
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    if (rc) print_error("%s\n", optim_errmsg(opt));
    assert_int_equal(rc, 0);
}

static optim_var *run_dense(optim_optimizer *opt, optim_dtype dt, int steps)
{
    double init[N];
    for (int i = 0; i < N; i++) init[i] = init_at(i);
    int64_t shape[1] = {N};
    optim_var *w = optim_test_var("w", dt, 1, shape, init);
    for (int k = 0; k < steps; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        step_dense(opt, w, g);
    }
    assert_int_equal(optim_iterations(opt), steps);
    return w;
}

static void check_trajectory(const char *json, const ref *r)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = run_dense(opt, dt, STEPS);
        double wr[N], mr[N], vr[N];
        ref_dense(r, wr, mr, vr, STEPS);
        double rtol = d ? 1e-12 : 2e-5, atol = d ? 1e-13 : 2e-6;
        optim_var *m = optim_get_slot(opt, w, "m"), *v = optim_get_slot(opt, w, "v");
        assert_non_null(m);
        assert_non_null(v);
        assert_int_equal(optim_var_dtype(m), dt);
        for (int i = 0; i < N; i++) {
            assert_close(optim_var_get(w, i), wr[i], rtol, atol);
            assert_close(optim_var_get(m, i), mr[i], rtol, atol);
            assert_close(optim_var_get(v, i), vr[i], rtol, atol);
        }
        const char *names[4];
        assert_int_equal(optim_get_slot_names(opt, names, 4), 2);
        assert_string_equal(names[0], "m");
        assert_string_equal(names[1], "v");
        assert_int_equal(optim_weights_count(opt), 3);
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

/* ---- dense trajectories ------------------------------------------------------------- */

static void test_defaults(void **s)
{
    (void)s;
    ref r = {0, 0.001, 0.9, 0.999, 1e-7, 0};
    check_trajectory("\"adamax\"", &r);
    check_trajectory("{\"class_name\": \"Adamax\", \"config\": {}}", &r);
    r.legacy = 1;
    check_trajectory("{\"class_name\": \"Adamax\", \"config\": {\"is_legacy_optimizer\": true}}", &r);
}

static void test_options(void **s)
{
    (void)s;
    ref r = {0, 0.02, 0.8, 0.95, 1e-4, 0};
    check_trajectory("{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.02, "
                     "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-4}}", &r);
    r.legacy = 1;
    check_trajectory("{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.02, "
                     "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-4, "
                     "\"is_legacy_optimizer\": true}}", &r);
    /* beta_2 = 1 (a running maximum) and beta_1 = 0 are allowed. */
    ref e = {0, 0.01, 0.0, 1.0, 1e-7, 0};
    check_trajectory("{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, "
                     "\"beta_1\": 0.0, \"beta_2\": 1.0}}", &e);
}

static void test_legacy_decay(void **s)
{
    (void)s;
    ref r = {1, 0.05, 0.9, 0.999, 1e-7, 0.2};
    check_trajectory("{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.05, "
                     "\"decay\": 0.2, \"is_legacy_optimizer\": true}}", &r);
}

/* OptimizerV2: epsilon = epsilon or backend.epsilon(), so 0 and None mean
 * 1e-7, and get_config writes 1e-07. Keras 3 takes 0 as 0. */
static void test_legacy_epsilon_fallback(void **s)
{
    (void)s;
    ref r = {1, 0.01, 0.9, 0.999, 1e-7, 0};
    const char *cfgs[2] = {
        "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, \"epsilon\": 0, "
        "\"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, \"epsilon\": null, "
        "\"is_legacy_optimizer\": true}}",
    };
    for (int c = 0; c < 2; c++) {
        check_trajectory(cfgs[c], &r);
        optim_optimizer *opt = optim_test_make(cfgs[c]);
        char *js = optim_get_config(opt);
        cJSON *o = cJSON_Parse(js);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "epsilon");
        assert_true(cJSON_IsNumber(e));
        assert_true(e->valuedouble == 1e-7);
        cJSON_Delete(o);
        optim_free(js);
        optim_destroy(opt);
    }
    /* Keras 3 epsilon 0: the zero gradient of step 0, element 0, gives
     * 0 / 0 in the update. */
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Adamax\", \"config\": {\"epsilon\": 0}}");
    optim_var *w = run_dense(opt, OPTIM_F64, 1);
    assert_true(isnan(optim_var_get(w, 0)));
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_optimizer *null_k3 = NULL;
    optim_error err;
    assert_int_equal(optim_from_json(&null_k3, "{\"class_name\": \"Adamax\", \"config\": {\"epsilon\": null}}", &err),
                     OPTIM_ETYPE);
    assert_non_null(strstr(err.msg, "epsilon"));
}

/* beta_1 is a hyper (legacy _set_hyper): a callable changing per step. */
static double beta_fn(void *user) { return *(double *)user; }

static void test_dynamic_beta(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"
                                           : "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01}}");
        double b1 = 0.9;
        assert_int_equal(optim_set_hyper_fn(opt, "beta_1", beta_fn, &b1), 0);
        double init[N], w[N], m[N] = {0}, v[N] = {0};
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
        int64_t shape[1] = {N};
        optim_var *var = optim_test_var("w", OPTIM_F64, 1, shape, init);
        for (int k = 0; k < 8; k++) {
            b1 = 0.5 + 0.05 * k;
            ref r = {legacy, 0.01, b1, 0.999, 1e-7, 0};
            double g[N];
            for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
            ref_step(&r, k + 1, w, m, v, g, N, NULL);
            step_dense(opt, var, g);
        }
        for (int i = 0; i < N; i++) assert_close(optim_var_get(var, i), w[i], 1e-12, 1e-13);
        /* A value out of range fails the step and changes nothing. */
        b1 = 1.0;
        double g[N] = {0}, before = optim_var_get(var, 0);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, shape)), var};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ERANGE);
        assert_non_null(strstr(optim_errmsg(opt), "beta_1"));
        assert_true(optim_var_get(var, 0) == before);
        assert_int_equal(optim_iterations(opt), 8);
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

/* ---- Keras's own values --------------------------------------------------------------- */

/* keras/src/optimizers/adamax_test.py: test_single_step and
 * test_correctness_with_golden (float32). */
static void test_keras_golden(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.5}}");
    double init[4] = {1, 2, 3, 4}, g4[4] = {1, 6, 7, 2};
    int64_t four = 4;
    optim_var *v4 = optim_test_var("v", OPTIM_F32, 1, &four, init);
    step_dense(opt, v4, g4);
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(v4, i), 0.5 + i, 1e-4, 1e-4);
    optim_destroy(opt);
    optim_var_destroy(v4);

    static const double golden[5][10] = {
        {0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8},
        {0.6827, 0.6873, 0.6888, 0.6896, 0.6901, 0.6904, 0.6906, 0.6908, 0.6909, 0.691},
        {0.5333, 0.5407, 0.5431, 0.5444, 0.5451, 0.5456, 0.546, 0.5462, 0.5464, 0.5466},
        {0.368, 0.3773, 0.3804, 0.382, 0.3829, 0.3835, 0.384, 0.3843, 0.3846, 0.3848},
        {0.1933, 0.204, 0.2076, 0.2094, 0.2105, 0.2112, 0.2117, 0.2121, 0.2124, 0.2126}};
    opt = optim_test_make("{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.2, \"beta_1\": 0.85, "
               "\"beta_2\": 0.95, \"epsilon\": 1e-6}}");
    double ones[10], first[10], grads[10];
    for (int i = 0; i < 10; i++) ones[i] = 1, first[i] = 0.01, grads[i] = (float)(0.1 * (i + 1));
    int64_t ten = 10;
    optim_var *x = optim_test_var("x", OPTIM_F32, 1, &ten, ones);
    step_dense(opt, x, first);
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 10; i++) assert_close(optim_var_get(x, i), golden[k][i], 5e-4, 5e-4);
        step_dense(opt, x, grads);
    }
    optim_destroy(opt);
    optim_var_destroy(x);
}

/* keras test_weight_decay: three optimizers (lr 1, weight_decay 0.004) on a
 * zero gradient; var1 decays three times, the excluded ones not at all. */
static void test_keras_weight_decay(void **s)
{
    (void)s;
    double two = 2.0, zero = 0.0;
    optim_var *v1 = optim_test_var("var1", OPTIM_F32, 0, NULL, &two);
    optim_var *v2 = optim_test_var("exclude", OPTIM_F32, 0, NULL, &two);
    optim_var *v3 = optim_test_var("var3", OPTIM_F32, 0, NULL, &two);
    const char *cfg = "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 1.0, \"weight_decay\": 0.004}}";
    optim_optimizer *o1 = optim_test_make(cfg), *o2 = optim_test_make(cfg), *o3 = optim_test_make(cfg);
    const char *pat[1] = {"exclude"};
    assert_int_equal(optim_exclude_from_weight_decay(o2, NULL, 0, pat, 1), 0);
    assert_int_equal(optim_exclude_from_weight_decay(o3, &v3, 1, NULL, 0), 0);
    float zf = (float)zero;
    optim_tensor gz = optim_tensor_make(OPTIM_F32, &zf, 0, NULL);
    optim_grad_var p1[1] = {{optim_grad_dense(gz), v1}};
    optim_grad_var p2[2] = {{optim_grad_dense(gz), v1}, {optim_grad_dense(gz), v2}};
    optim_grad_var p3[2] = {{optim_grad_dense(gz), v1}, {optim_grad_dense(gz), v3}};
    assert_int_equal(optim_apply_gradients(o1, p1, 1, 0), 0);
    assert_int_equal(optim_apply_gradients(o2, p2, 2, 0), 0);
    assert_int_equal(optim_apply_gradients(o3, p3, 2, 0), 0);
    assert_close(optim_var_get(v1, 0), 1.9760959, 0, 1e-6);
    assert_close(optim_var_get(v2, 0), 2.0, 0, 1e-6);
    assert_close(optim_var_get(v3, 0), 2.0, 0, 1e-6);
    optim_destroy(o1);
    optim_destroy(o2);
    optim_destroy(o3);
    optim_var_destroy(v1);
    optim_var_destroy(v2);
    optim_var_destroy(v3);
}

/* ---- float32 order of operations ------------------------------------------------------- */

/* Two steps on one float32 element, each generation's operations written
 * out in float in the order of its source: Keras 3 update_step (1 - beta_1
 * taken in Python, then cast), TF's ApplyAdaMax (1 - beta_1 in float;
 * lr / (1 - beta_1^t) first). The library must agree bit for bit. */
static void test_f32_operation_order(void **s)
{
    (void)s;
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-7;
    const float gs[3] = {0.3f, -1.7f, 0.05f};
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"
                                           : "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01}}");
        double init = 0.7;
        optim_var *var = optim_test_var("w", OPTIM_F32, 0, NULL, &init);
        float w = 0.7f, m = 0, v = 0;
        for (int k = 0; k < 3; k++) {
            float g = gs[k], t = (float)(k + 1);
            float power = powf((float)b1, t);
            if (legacy) {
                m = m + (g - m) * (1.0f - (float)b1);
                float bv = (float)b2 * v;
                v = bv < fabsf(g) ? fabsf(g) : bv;
                w = w - ((float)lr / (1.0f - power)) * (m / (v + (float)eps));
            } else {
                m = m + (g - m) * (float)(1.0 - b1);
                float bv = (float)b2 * v;
                v = bv < fabsf(g) ? fabsf(g) : bv;
                w = w - ((float)lr * m) / ((1.0f - power) * (v + (float)eps));
            }
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, &g, 0, NULL)), var};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            float got = *(float *)optim_var_data(var);
            float gm = *(float *)optim_var_data(optim_get_slot(opt, var, "m"));
            float gv = *(float *)optim_var_data(optim_get_slot(opt, var, "v"));
            assert_memory_equal(&got, &w, sizeof w);
            assert_memory_equal(&gm, &m, sizeof m);
            assert_memory_equal(&gv, &v, sizeof v);
        }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
    /* Legacy sparse (_resource_apply_sparse): m * beta_1 + g * (1 - beta_1)
     * on the indexed row, w + (-lr / (1 - beta_1^t)) * (m / (v + eps)). */
    {
        optim_optimizer *opt = optim_test_make("{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}");
        double init[2] = {0.7, -0.2};
        int64_t shape[2] = {2, 1}, vs[2] = {1, 1}, idx = 1;
        optim_var *var = optim_test_var("e", OPTIM_F32, 2, shape, init);
        float w = -0.2f, m = 0, v = 0;
        for (int k = 0; k < 10; k++) {
            float g = (float)(sin(0.9 * k + 0.3) * 1.3), t = (float)(k + 1);
            float power = powf((float)b1, t);
            float b1f = (float)b1;
            m = m * b1f + g * (1.0f - b1f);
            float bv = v * (float)b2;
            v = bv < fabsf(g) ? fabsf(g) : bv;
            w = w + (-(float)lr / (1.0f - power)) * (m / (v + (float)eps));
            optim_grad_var p = {optim_grad_sparse(&idx, 1, optim_tensor_make(OPTIM_F32, &g, 2, vs)), var};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            float got = ((float *)optim_var_data(var))[1];
            float gm = ((float *)optim_var_data(optim_get_slot(opt, var, "m")))[1];
            assert_memory_equal(&got, &w, sizeof w);
            assert_memory_equal(&gm, &m, sizeof m);
            assert_true(((float *)optim_var_data(var))[0] == 0.7f);
        }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
    /* The two generations differ in the last bits in float32. */
    assert_true((float)(1.0 - 0.9) != 1.0f - 0.9f);
}

/* ---- sparse ------------------------------------------------------------------------ */

#define ROWS 6
#define COLS 3
#define SP_STEPS 24
#define NIDX 4

static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
/* Rows 0..4 get gradients; row 5 never does. Duplicates in every step. */
static int64_t sp_index(int k, int j)
{
    static const int64_t pat[3][NIDX] = {{1, 4, 1, 1}, {0, 4, 3, 4}, {2, 2, 3, 1}};
    return pat[k % 3][j];
}
static double sp_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c) - 0.02 * k; }

static optim_var *run_sparse(optim_optimizer *opt, optim_dtype dt, int as_dense, int steps)
{
    double init[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) init[r * COLS + c] = table_init(r, c);
    int64_t shape[2] = {ROWS, COLS};
    optim_var *v = optim_test_var("table", dt, 2, shape, init);
    for (int k = 0; k < steps; k++) {
        int64_t idx[NIDX];
        double vals[NIDX * COLS], dense[ROWS * COLS] = {0};
        float fv[NIDX * COLS], fd[ROWS * COLS] = {0};
        for (int j = 0; j < NIDX; j++) {
            idx[j] = sp_index(k, j);
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = sp_val(k, j, c);
                fv[j * COLS + c] = (float)sp_val(k, j, c);
            }
        }
        /* The dense equivalent sums duplicates in order, in the dtype. */
        for (int j = 0; j < NIDX; j++)
            for (int c = 0; c < COLS; c++) {
                dense[idx[j] * COLS + c] += vals[j * COLS + c];
                fd[idx[j] * COLS + c] += fv[j * COLS + c];
            }
        int f = dt == OPTIM_F32;
        int64_t vs[2] = {NIDX, COLS};
        optim_grad_var p = {as_dense ? optim_grad_dense(optim_tensor_make(dt, f ? (void *)fd : (void *)dense, 2, shape))
                                     : optim_grad_sparse(idx, NIDX, optim_tensor_make(dt, f ? (void *)fv : (void *)vals, 2, vs)),
                            v};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        if (rc) print_error("%s\n", optim_errmsg(opt));
        assert_int_equal(rc, 0);
    }
    return v;
}

static void assert_vars_bitwise(optim_var *a, optim_var *b)
{
    assert_int_equal(optim_var_numel(a), optim_var_numel(b));
    assert_memory_equal(optim_var_data(a), optim_var_data(b),
                        (size_t)optim_var_numel(a) * optim_dtype_size(optim_var_dtype(a)));
}

/* The reference for sparse steps: duplicates summed; rows_only limits the
 * update to the indexed rows (legacy), else every row with g = 0. */
static void ref_sparse(const ref *r, int rows_only, int steps, double w[ROWS][COLS],
                       double m[ROWS][COLS], double v[ROWS][COLS])
{
    for (int i = 0; i < ROWS; i++)
        for (int c = 0; c < COLS; c++) w[i][c] = table_init(i, c), m[i][c] = v[i][c] = 0;
    for (int k = 0; k < steps; k++) {
        double g[ROWS][COLS] = {{0}};
        int touched[ROWS] = {0};
        for (int j = 0; j < NIDX; j++) {
            touched[sp_index(k, j)] = 1;
            for (int c = 0; c < COLS; c++) g[sp_index(k, j)][c] += sp_val(k, j, c);
        }
        for (int i = 0; i < ROWS; i++) {
            int t[COLS];
            for (int c = 0; c < COLS; c++) t[c] = !rows_only || touched[i];
            ref_step(r, k + 1, w[i], m[i], v[i], g[i], COLS, t);
        }
    }
}

static void check_sparse(const char *json, const ref *r, int rows_only)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *var = run_sparse(opt, dt, 0, SP_STEPS);
        double w[ROWS][COLS], m[ROWS][COLS], v[ROWS][COLS];
        ref_sparse(r, rows_only, SP_STEPS, w, m, v);
        optim_var *ms = optim_get_slot(opt, var, "m"), *vs = optim_get_slot(opt, var, "v");
        double rtol = d ? 1e-12 : 2e-5, atol = d ? 1e-13 : 2e-6;
        for (int i = 0; i < ROWS; i++)
            for (int c = 0; c < COLS; c++) {
                assert_close(optim_var_get(var, i * COLS + c), w[i][c], rtol, atol);
                assert_close(optim_var_get(ms, i * COLS + c), m[i][c], rtol, atol);
                assert_close(optim_var_get(vs, i * COLS + c), v[i][c], rtol, atol);
            }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

/* Keras 3: sparse == the dense equivalent, bit for bit, and == the
 * reference with every row updated. */
static void test_sparse_keras3(void **s)
{
    (void)s;
    const char *json = "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.05, \"beta_1\": 0.8}}";
    ref r = {0, 0.05, 0.8, 0.999, 1e-7, 0};
    check_sparse(json, &r, 0);
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *o1 = optim_test_make(json), *o2 = optim_test_make(json);
        optim_var *sv = run_sparse(o1, dt, 0, SP_STEPS), *dv = run_sparse(o2, dt, 1, SP_STEPS);
        assert_vars_bitwise(sv, dv);
        assert_vars_bitwise(optim_get_slot(o1, sv, "m"), optim_get_slot(o2, dv, "m"));
        assert_vars_bitwise(optim_get_slot(o1, sv, "v"), optim_get_slot(o2, dv, "v"));
        optim_destroy(o1);
        optim_destroy(o2);
        optim_var_destroy(sv);
        optim_var_destroy(dv);
    }
}

/* Legacy: only the indexed rows of m, v and w change (duplicates summed). */
static void test_sparse_legacy(void **s)
{
    (void)s;
    const char *json = "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.05, \"beta_1\": 0.8, "
                       "\"decay\": 0.05, \"is_legacy_optimizer\": true}}";
    ref r = {1, 0.05, 0.8, 0.999, 1e-7, 0.05};
    check_sparse(json, &r, 1);
}

/* Row by row: after a step on row 0 then a step on row 3, row 0 moves again
 * in Keras 3 (its m decays but stays non-zero) and stays bit-identical in
 * legacy; row 5, never indexed, is untouched in both until Keras 3's zero
 * m moves it by 0. */
static void test_sparse_untouched_rows(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.5, \"is_legacy_optimizer\": true}}"
                                               : "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.5}}");
            double init[6] = {1, 2, 3, 4, 5, 6};
            int64_t shape[2] = {6, 1}, vs[2] = {1, 1};
            optim_var *v = optim_test_var("e", dt, 2, shape, init);
            int64_t i0 = 0, i3 = 3;
            double one = 1.0;
            float onef = 1.0f;
            void *val = d ? (void *)&one : (void *)&onef;
            optim_grad_var p = {optim_grad_sparse(&i0, 1, optim_tensor_make(dt, val, 2, vs)), v};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            double row0 = optim_var_get(v, 0);
            assert_true(row0 < 1.0);
            double m0 = optim_var_get(optim_get_slot(opt, v, "m"), 0);
            p.grad.sparse.indices = &i3;
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            if (legacy) {
                assert_true(optim_var_get(v, 0) == row0);
                assert_true(optim_var_get(optim_get_slot(opt, v, "m"), 0) == m0);
            } else {
                assert_true(optim_var_get(v, 0) < row0);
                assert_true(optim_var_get(optim_get_slot(opt, v, "m"), 0) < m0);
            }
            for (int r = 1; r < 6; r++)
                if (r != 3) assert_true(optim_var_get(v, r) == init[r]);
            assert_true(optim_var_get(v, 3) < 4.0);
            optim_destroy(opt);
            optim_var_destroy(v);
        }
}

/* ---- config ------------------------------------------------------------------------- */

static const char *const KERAS3_KEYS[] = {
    "name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue",
    "use_ema", "ema_momentum", "ema_overwrite_frequency", "loss_scale_factor",
    "gradient_accumulation_steps", "beta_1", "beta_2", "epsilon",
};
static const char *const LEGACY_KEYS[] = {
    "name", "learning_rate", "decay", "beta_1", "beta_2", "epsilon",
};

static cJSON *config_of(optim_optimizer *opt)
{
    char *js = optim_get_config(opt);
    assert_non_null(js);
    cJSON *o = cJSON_Parse(js);
    optim_free(js);
    assert_non_null(o);
    return o;
}

static void assert_keys_in_order(const cJSON *o, const char *const *keys, size_t n)
{
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, o)
    {
        if (i >= n) {
            print_error("unexpected key '%s'\n", it->string);
            fail();
        }
        assert_string_equal(it->string, keys[i]);
        i++;
    }
    assert_int_equal(i, n);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_config_keys_and_defaults(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("\"Adamax\"");
    cJSON *o = config_of(opt);
    assert_keys_in_order(o, KERAS3_KEYS, sizeof KERAS3_KEYS / sizeof *KERAS3_KEYS);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, "adamax");
    assert_true(num(o, "learning_rate") == 0.001);
    assert_true(num(o, "beta_1") == 0.9);
    assert_true(num(o, "beta_2") == 0.999);
    assert_true(num(o, "epsilon") == 1e-7);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "weight_decay")));
    cJSON_Delete(o);
    optim_destroy(opt);

    opt = optim_test_make("{\"class_name\": \"Adamax\", \"config\": {\"is_legacy_optimizer\": true}}");
    o = config_of(opt);
    assert_keys_in_order(o, LEGACY_KEYS, sizeof LEGACY_KEYS / sizeof *LEGACY_KEYS);
    assert_true(num(o, "learning_rate") == 0.001);
    assert_true(num(o, "decay") == 0.0);
    assert_true(num(o, "beta_1") == 0.9);
    assert_true(num(o, "beta_2") == 0.999);
    assert_true(num(o, "epsilon") == 1e-7);
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "is_legacy_optimizer")); /* OptimizerV2 refuses it */
    cJSON_Delete(o);
    optim_destroy(opt);

    /* By class, in C. */
    optim_error err;
    assert_int_equal(optim_create(&opt, &optim_adamax_class, NULL, &err), 0);
    double b;
    assert_int_equal(optim_get_hyper(opt, "beta_2", &b), 0);
    assert_true(b == 0.999);
    optim_destroy(opt);
}

static void test_config_round_trip(void **s)
{
    (void)s;
    const char *cfgs[] = {
        "{\"class_name\": \"Adamax\", \"config\": {\"name\": \"mine\", \"learning_rate\": 0.0125, "
        "\"beta_1\": 0.75, \"beta_2\": 0.9375, \"epsilon\": 1e-05, \"clipnorm\": 2.5, \"weight_decay\": 0.01}}",
        "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.3, \"decay\": 0.01, \"beta_1\": 0.5, "
        "\"epsilon\": 1e-3, \"clipvalue\": 1.5, \"global_clipnorm\": 3.0, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Adamax\", \"config\": {\"lr\": 0.25, \"is_legacy_optimizer\": true}}",
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        optim_optimizer *a = optim_test_make(cfgs[c]);
        char *sa = optim_serialize(a);
        assert_non_null(sa);
        optim_optimizer *b = optim_test_make(sa);
        char *sb = optim_serialize(b);
        assert_string_equal(sa, sb);
        optim_free(sa);
        optim_free(sb);
        optim_destroy(a);
        optim_destroy(b);
    }
    optim_optimizer *a = optim_test_make(cfgs[0]);
    cJSON *o = config_of(a);
    assert_true(num(o, "beta_1") == 0.75);
    assert_true(num(o, "beta_2") == 0.9375);
    assert_true(num(o, "epsilon") == 1e-5);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, "mine");
    cJSON_Delete(o);
    optim_destroy(a);
    a = optim_test_make(cfgs[2]);
    o = config_of(a);
    assert_true(num(o, "learning_rate") == 0.25);
    cJSON_Delete(o);
    optim_destroy(a);
}

static void refused(const char *json, int code, const char *const *needles)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("%s: rc %d (%s)\n", json, rc, err.msg);
    assert_int_equal(rc, code);
    assert_null(opt);
    for (; *needles; needles++) {
        if (!strstr(err.msg, *needles)) print_error("'%s' not in '%s'\n", *needles, err.msg);
        assert_non_null(strstr(err.msg, *needles));
    }
}

static void test_config_refused(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *tail = legacy ? ", \"is_legacy_optimizer\": true}}" : "}}";
        char json[256];
#define REFUSE(body, code, ...)                                                                 \
    do {                                                                                        \
        const char *needles[] = {__VA_ARGS__, NULL};                                            \
        snprintf(json, sizeof json, "{\"class_name\": \"Adamax\", \"config\": {%s%s", body, tail); \
        refused(json, code, needles);                                                           \
    } while (0)
        REFUSE("\"beta_1\": 1.0", OPTIM_ERANGE, "beta_1", "[0, 1)");
        REFUSE("\"beta_1\": -0.1", OPTIM_ERANGE, "beta_1", "[0, 1)");
        REFUSE("\"beta_2\": 1.5", OPTIM_ERANGE, "beta_2", "[0, 1]");
        REFUSE("\"beta_2\": -1", OPTIM_ERANGE, "beta_2", "[0, 1]");
        REFUSE("\"epsilon\": -1e-7", OPTIM_ERANGE, "epsilon", "[0, inf)");
        REFUSE("\"beta_1\": \"high\"", OPTIM_ETYPE, "beta_1");
        REFUSE("\"amsgrad\": false", OPTIM_EKEY, "amsgrad");
        REFUSE("\"learning_rate\": -0.1", OPTIM_ERANGE, "learning_rate");
#undef REFUSE
    }
    optim_optimizer *opt = optim_test_make("\"adamax\"");
    assert_int_equal(optim_set_hyper(opt, "beta_1", 1.0), OPTIM_ERANGE);
    assert_non_null(strstr(optim_errmsg(opt), "[0, 1)"));
    assert_int_equal(optim_set_hyper(opt, "epsilon", -1), OPTIM_ERANGE);
    /* epsilon is not a hyper: numbers only. */
    assert_int_equal(optim_set_hyper_fn(opt, "epsilon", beta_fn, NULL), OPTIM_ETYPE);
    double b;
    assert_int_equal(optim_get_hyper(opt, "beta_1", &b), 0);
    assert_true(b == 0.9);
    assert_int_equal(optim_set_hyper(opt, "beta_1", 0.5), 0);
    assert_int_equal(optim_get_hyper(opt, "beta_1", &b), 0);
    assert_true(b == 0.5);
    optim_destroy(opt);
}

/* ---- threads ----------------------------------------------------------------------- */

static void test_threads_bitwise(void **s)
{
    (void)s;
    const int64_t n = 100003;
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * i);
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_var *vars[2];
        for (int t = 0; t < 2; t++) {
            optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, \"global_clipnorm\": 10, \"is_legacy_optimizer\": true}}"
                                               : "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.01, \"global_clipnorm\": 10}}");
            assert_int_equal(optim_set_num_threads(opt, t ? 3 : 1), 0);
            vars[t] = optim_test_var("big", OPTIM_F32, 1, &n, init);
            for (int k = 0; k < 4; k++) {
                for (int64_t i = 0; i < n; i++) g[i] = (float)cos(0.37 * i + k);
                optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), vars[t]};
                assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            }
            optim_destroy(opt);
        }
        assert_vars_bitwise(vars[0], vars[1]);
        optim_var_destroy(vars[0]);
        optim_var_destroy(vars[1]);
    }
    free(init);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_legacy_decay),
        cmocka_unit_test(test_legacy_epsilon_fallback),
        cmocka_unit_test(test_dynamic_beta),
        cmocka_unit_test(test_keras_golden),
        cmocka_unit_test(test_keras_weight_decay),
        cmocka_unit_test(test_f32_operation_order),
        cmocka_unit_test(test_sparse_keras3),
        cmocka_unit_test(test_sparse_legacy),
        cmocka_unit_test(test_sparse_untouched_rows),
        cmocka_unit_test(test_config_keys_and_defaults),
        cmocka_unit_test(test_config_round_trip),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
