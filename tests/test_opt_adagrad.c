/* Adagrad against independent double-precision references: trajectories in
 * f32 and f64 in both generations (epsilon inside the square root in Keras
 * 3, outside it in legacy's ApplyAdagradV2), initial_accumulator_value,
 * legacy decay, sparse gradients with duplicate indices (indexed rows only
 * in both generations, which is Keras 3's dense equivalent, except where
 * the dense rule divides 0 by 0), the Keras golden values, config keys,
 * ranges and round trips, and thread-count independence. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 25
#define N 7

static double grad_at(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k; }
static double init_at(int i) { return 0.5 - 0.3 * i; }

typedef struct cfg {
    double lr, init, eps, decay;
    int legacy;
} cfg;

/* The published rule for one element, in double precision:
 *   acc += g^2;  Keras 3: w -= lr g / sqrt(acc + eps);  legacy: w -= lr g / (sqrt(acc) + eps) */
static void ref_elem(const cfg *c, double lr, double g, double *w, double *acc)
{
    *acc += g * g;
    if (c->legacy) *w -= lr * g / (sqrt(*acc) + c->eps);
    else *w -= lr * g / sqrt(*acc + c->eps);
}

static void cfg_json(const cfg *c, char *buf, size_t n)
{
    int used = snprintf(buf, n,
                        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": %.17g, "
                        "\"initial_accumulator_value\": %.17g, \"epsilon\": %.17g",
                        c->lr, c->init, c->eps);
    if (c->legacy)
        snprintf(buf + used, n - (size_t)used, ", \"decay\": %.17g, \"is_legacy_optimizer\": true}}",
                 c->decay);
    else
        snprintf(buf + used, n - (size_t)used, "}}");
}


static optim_optimizer *make_cfg(const cfg *c)
{
    char json[512];
    cfg_json(c, json, sizeof json);
    return optim_test_make(json);
}


static void step_dense(optim_optimizer *opt, optim_var *w, optim_dtype dt, const double *g, int n)
{
    float gf[64];
    double gd[64];
    for (int i = 0; i < n; i++) gf[i] = (float)g[i], gd[i] = g[i];
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)gf : (void *)gd,
                                                           optim_var_rank(w), optim_var_shape(w))),
                        w};
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    if (rc) print_error("%s\n", optim_errmsg(opt));
    assert_int_equal(rc, 0);
}

static double tol_r(optim_dtype dt) { return dt == OPTIM_F32 ? 2e-5 : 1e-12; }
static double tol_a(optim_dtype dt) { return dt == OPTIM_F32 ? 2e-6 : 1e-13; }

static void check_trajectory(const cfg *c)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = make_cfg(c);
        double init[N], w[N], acc[N];
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i), acc[i] = c->init;
        int64_t shape[1] = {N};
        optim_var *var = optim_test_var("w", dt, 1, shape, init);
        for (int k = 0; k < STEPS; k++) {
            double g[N];
            double lr = c->legacy ? c->lr / (1.0 + c->decay * k) : c->lr;
            for (int i = 0; i < N; i++) {
                g[i] = grad_at(k, i);
                ref_elem(c, lr, g[i], &w[i], &acc[i]);
            }
            step_dense(opt, var, dt, g, N);
        }
        assert_int_equal(optim_iterations(opt), STEPS);
        optim_var *a = optim_get_slot(opt, var, "accumulator");
        assert_non_null(a);
        const char *names[4];
        assert_int_equal(optim_get_slot_names(opt, names, 4), 1);
        for (int i = 0; i < N; i++) {
            assert_close(optim_var_get(var, i), w[i], tol_r(dt), tol_a(dt));
            assert_close(optim_var_get(a, i), acc[i], tol_r(dt), tol_a(dt));
        }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

static void test_trajectories(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        cfg a = {0.1, 0.1, 1e-7, 0, legacy};
        check_trajectory(&a);
        cfg b = {0.05, 0.1, 0.1, 0, legacy}; /* epsilon placement visible */
        check_trajectory(&b);
        cfg c = {0.2, 0.0, 1e-3, 0, legacy};
        check_trajectory(&c);
        cfg d = {0.1, 2.5, 1e-7, 0, legacy};
        check_trajectory(&d);
    }
    cfg e = {0.5, 0.3, 1e-6, 0.2, 1}; /* legacy decay */
    check_trajectory(&e);
}

/* The slot starts at initial_accumulator_value (rounded to the dtype). */
static void test_slot_initial_value(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            cfg c = {0.1, 0.3, 1e-7, 0, legacy};
            optim_optimizer *opt = make_cfg(&c);
            double init[3] = {1, 2, 3};
            int64_t n = 3;
            optim_var *v = optim_test_var("v", dt, 1, &n, init);
            assert_int_equal(optim_build(opt, &v, 1), 0);
            optim_var *a = optim_get_slot(opt, v, "accumulator");
            for (int i = 0; i < 3; i++) {
                if (d) assert_true(((double *)optim_var_data(a))[i] == 0.3);
                else assert_true(((float *)optim_var_data(a))[i] == 0.3f);
            }
            optim_destroy(opt);
            optim_var_destroy(v);
        }
}

/* Keras 3 and legacy differ where epsilon's placement matters. */
static void test_generations_differ(void **s)
{
    (void)s;
    double w[2];
    for (int legacy = 0; legacy < 2; legacy++) {
        cfg c = {0.1, 0.0, 0.5, 0, legacy};
        optim_optimizer *opt = make_cfg(&c);
        double one = 1.0, g = 2.0;
        optim_var *v = optim_test_var("v", OPTIM_F64, 0, NULL, &one);
        step_dense(opt, v, OPTIM_F64, &g, 1);
        w[legacy] = optim_var_get(v, 0);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
    assert_close(w[0], 1 - 0.2 / sqrt(4.5), 1e-15, 0);
    assert_close(w[1], 1 - 0.2 / (2 + 0.5), 1e-15, 0);
}

/* Each generation's float32 operation order, bit for bit: Keras 3
 * w - (lr * g) / sqrt(acc + eps); ApplyAdagradV2 w - (g * lr) / (sqrt(acc) + eps). */
static void test_f32_operation_order(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int sparse = 0; sparse < 2; sparse++) {
            cfg c = {0.1, 0.1, 1e-3, 0, legacy};
            optim_optimizer *opt = make_cfg(&c);
            double init[N];
            for (int i = 0; i < N; i++) init[i] = init_at(i);
            int64_t shape[2] = {N, 1};
            optim_var *var = optim_test_var("w", OPTIM_F32, 2, shape, init);
            float w[N], acc[N];
            const float lr = 0.1f, eps = 1e-3f;
            for (int i = 0; i < N; i++) w[i] = (float)init[i], acc[i] = 0.1f;
            for (int k = 0; k < 6; k++) {
                float g[N];
                int64_t idx[N];
                for (int i = 0; i < N; i++) {
                    g[i] = (float)grad_at(k, i);
                    idx[i] = i;
                    acc[i] = acc[i] + g[i] * g[i];
                    w[i] = legacy ? w[i] - (g[i] * lr) / (sqrtf(acc[i]) + eps)
                                  : w[i] - (lr * g[i]) / sqrtf(acc[i] + eps);
                }
                optim_grad_var p = {sparse ? optim_grad_sparse(idx, N, optim_tensor_make(OPTIM_F32, g, 2, shape))
                                           : optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, shape)),
                                    var};
                assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            }
            assert_memory_equal(optim_var_data(var), w, sizeof w);
            assert_memory_equal(optim_var_data(optim_get_slot(opt, var, "accumulator")), acc, sizeof acc);
            optim_destroy(opt);
            optim_var_destroy(var);
        }
}

/* ---- Keras golden values --------------------------------------------------- */

/* keras/src/optimizers/adagrad_test.py test_single_step (legacy agrees to 4 digits). */
static void test_keras_single_step(void **s)
{
    (void)s;
    const char *cfgs[2] = {
        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.5}}",
        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.5, \"is_legacy_optimizer\": true}}"};
    const double g[4] = {1, 6, 7, 2}, init[4] = {1, 2, 3, 4};
    const double want[4] = {0.5233, 1.5007, 2.5005, 3.5061};
    for (int c = 0; c < 2; c++) {
        optim_optimizer *opt = optim_test_make(cfgs[c]);
        int64_t n = 4;
        optim_var *v = optim_test_var("vars", OPTIM_F32, 1, &n, init);
        step_dense(opt, v, OPTIM_F32, g, 4);
        for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), want[i], 1e-4, 1e-4);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

/* adagrad_test.py test_correctness_with_golden (both generations agree to
 * the test's tolerance). */
static void test_keras_golden(void **s)
{
    (void)s;
    static const double golden[5][10] = {
        {0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963},
        {0.9604, 0.9278, 0.9003, 0.8784, 0.8615, 0.8487, 0.8388, 0.8313, 0.8255, 0.8209},
        {0.9251, 0.8629, 0.8137, 0.7768, 0.7497, 0.7298, 0.7151, 0.704, 0.6956, 0.6891},
        {0.8903, 0.8012, 0.7342, 0.6862, 0.6521, 0.6277, 0.6099, 0.5967, 0.5867, 0.579},
        {0.856, 0.7422, 0.6604, 0.6037, 0.5644, 0.5367, 0.5168, 0.5021, 0.491, 0.4825}};
    const char *cfgs[2] = {
        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.2, \"initial_accumulator_value\": 0.3, \"epsilon\": 1e-6}}",
        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.2, \"initial_accumulator_value\": 0.3, \"epsilon\": 1e-6, \"is_legacy_optimizer\": true}}"};
    for (int c = 0; c < 2; c++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *opt = optim_test_make(cfgs[c]);
            double ones[10], first[10], grads[10];
            for (int i = 0; i < 10; i++) ones[i] = 1, first[i] = 0.01, grads[i] = 0.1 * (i + 1);
            int64_t n = 10;
            optim_var *x = optim_test_var("x", dt, 1, &n, ones);
            step_dense(opt, x, dt, first, 10);
            for (int k = 0; k < 5; k++) {
                for (int i = 0; i < 10; i++) assert_close(optim_var_get(x, i), golden[k][i], 5e-4, 5e-4);
                step_dense(opt, x, dt, grads, 10);
            }
            optim_destroy(opt);
            optim_var_destroy(x);
        }
}

static void test_keras_weight_decay(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 1.0, "
                                "\"weight_decay\": 0.004}}");
    double two = 2.0, zero = 0.0;
    optim_var *v = optim_test_var("var1", OPTIM_F32, 0, NULL, &two);
    for (int k = 0; k < 3; k++) step_dense(opt, v, OPTIM_F32, &zero, 1);
    assert_close(optim_var_get(v, 0), 1.9760959, 0, 1e-6);
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* tf_keras legacy adagrad_test testMinimizeSparseResourceVariable: var
 * [[1, 2], [3, 4]], row 0 gets gradient [112, 140], lr 1: [[0, 1], [3, 4]]. */
static void test_legacy_minimize_sparse(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 1.0, \"is_legacy_optimizer\": true}}"
                                               : "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 1.0}}");
            double init[4] = {1, 2, 3, 4};
            int64_t shape[2] = {2, 2}, vs[2] = {1, 2}, idx = 0;
            optim_var *v = optim_test_var("var0", dt, 2, shape, init);
            float gf[2] = {112, 140};
            double gd[2] = {112, 140};
            optim_grad_var p = {optim_grad_sparse(&idx, 1, optim_tensor_make(dt, d ? (void *)gd : (void *)gf, 2, vs)), v};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            const double want[4] = {0, 1, 3, 4};
            for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), want[i], 0, 0.01);
            assert_true(optim_var_get(v, 2) == 3 && optim_var_get(v, 3) == 4);
            optim_destroy(opt);
            optim_var_destroy(v);
        }
}

/* testSparseRepeatedIndices: indices [1, 1] with 0.1 each equal one 0.2. */
static void test_sparse_repeated_indices(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *json = legacy ? "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 3.0, \"is_legacy_optimizer\": true}}"
                                  : "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 3.0}}";
        optim_optimizer *o1 = optim_test_make(json), *o2 = optim_test_make(json);
        double init[2] = {1, 2};
        int64_t shape[2] = {2, 1};
        optim_var *rep = optim_test_var("rep", OPTIM_F64, 2, shape, init), *agg = optim_test_var("agg", OPTIM_F64, 2, shape, init);
        int64_t ri[2] = {1, 1}, ai[1] = {1}, rs[2] = {2, 1}, as[2] = {1, 1};
        double rv[2] = {0.1, 0.1}, av[1] = {0.2};
        for (int k = 0; k < 3; k++) {
            optim_grad_var p1 = {optim_grad_sparse(ri, 2, optim_tensor_make(OPTIM_F64, rv, 2, rs)), rep};
            optim_grad_var p2 = {optim_grad_sparse(ai, 1, optim_tensor_make(OPTIM_F64, av, 2, as)), agg};
            assert_int_equal(optim_apply_gradients(o1, &p1, 1, 0), 0);
            assert_int_equal(optim_apply_gradients(o2, &p2, 1, 0), 0);
            for (int i = 0; i < 2; i++) assert_close(optim_var_get(rep, i), optim_var_get(agg, i), 1e-15, 0);
        }
        optim_destroy(o1);
        optim_destroy(o2);
        optim_var_destroy(rep);
        optim_var_destroy(agg);
    }
}

/* ---- sparse ------------------------------------------------------------------- */

#define ROWS 6
#define COLS 3
#define SPSTEPS 4

static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
static const int64_t sp_idx[SPSTEPS][4] = {{1, 4, 1, 1}, {0, 4, 5, 4}, {2, 2, 3, 1}, {4, 0, 4, 1}};
static double sp_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c); }

static optim_var *run_sparse(optim_optimizer *opt, optim_dtype dt, int as_dense)
{
    double init[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) init[r * COLS + c] = table_init(r, c);
    int64_t shape[2] = {ROWS, COLS};
    optim_var *v = optim_test_var("table", dt, 2, shape, init);
    for (int k = 0; k < SPSTEPS; k++) {
        double vals[4 * COLS], dense[ROWS * COLS] = {0};
        float fv[4 * COLS], fd[ROWS * COLS] = {0};
        for (int j = 0; j < 4; j++)
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = sp_val(k, j, c);
                fv[j * COLS + c] = (float)sp_val(k, j, c);
                dense[sp_idx[k][j] * COLS + c] += vals[j * COLS + c];
                fd[sp_idx[k][j] * COLS + c] += fv[j * COLS + c];
            }
        int f = dt == OPTIM_F32;
        int64_t vs[2] = {4, COLS};
        optim_grad_var p = {as_dense ? optim_grad_dense(optim_tensor_make(dt, f ? (void *)fd : (void *)dense, 2, shape))
                                     : optim_grad_sparse(sp_idx[k], 4, optim_tensor_make(dt, f ? (void *)fv : (void *)vals, 2, vs)),
                            v};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        if (rc) print_error("%s\n", optim_errmsg(opt));
        assert_int_equal(rc, 0);
    }
    return v;
}

static void assert_bitwise(optim_var *a, optim_var *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(optim_var_numel(a), optim_var_numel(b));
    assert_memory_equal(optim_var_data(a), optim_var_data(b),
                        (size_t)optim_var_numel(a) * optim_dtype_size(optim_var_dtype(a)));
}

/* Keras 3: sparse == dense equivalent, bit for bit (also in the degenerate
 * initial_accumulator_value = epsilon = 0, where rows without a gradient
 * become 0 / 0 = NaN in the dense rule). */
static void test_sparse_keras3_dense_equivalent(void **s)
{
    (void)s;
    const cfg cfgs[3] = {{0.1, 0.1, 1e-7, 0, 0}, {0.1, 0.0, 1e-2, 0, 0}, {0.1, 0.0, 0.0, 0, 0}};
    for (int c = 0; c < 3; c++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *o1 = make_cfg(&cfgs[c]), *o2 = make_cfg(&cfgs[c]);
            optim_var *sv = run_sparse(o1, dt, 0), *dv = run_sparse(o2, dt, 1);
            assert_bitwise(sv, dv);
            assert_bitwise(optim_get_slot(o1, sv, "accumulator"), optim_get_slot(o2, dv, "accumulator"));
            /* Row 0 has no gradient at step 0: 0 / sqrt(0 + 0). */
            if (c == 2) assert_true(isnan(optim_var_get(sv, 0)) && isnan(optim_var_get(dv, 0)));
            if (c < 2) assert_true(!isnan(optim_var_get(sv, 0)));
            optim_destroy(o1);
            optim_destroy(o2);
            optim_var_destroy(sv);
            optim_var_destroy(dv);
        }
}

/* Both generations against the reference: duplicates summed, the indexed
 * rows updated, the others bit-identical. */
static void test_sparse_rows_only(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            cfg c = {0.1, 0.1, 1e-2, 0, legacy};
            optim_optimizer *opt = make_cfg(&c);
            optim_var *sv = run_sparse(opt, dt, 0);
            double w[ROWS][COLS], acc[ROWS][COLS];
            int ever[ROWS] = {0};
            for (int r = 0; r < ROWS; r++)
                for (int q = 0; q < COLS; q++) w[r][q] = table_init(r, q), acc[r][q] = 0.1;
            for (int k = 0; k < SPSTEPS; k++) {
                double g[ROWS][COLS] = {{0}};
                int touched[ROWS] = {0};
                for (int j = 0; j < 4; j++) {
                    touched[sp_idx[k][j]] = ever[sp_idx[k][j]] = 1;
                    for (int q = 0; q < COLS; q++) g[sp_idx[k][j]][q] += sp_val(k, j, q);
                }
                for (int r = 0; r < ROWS; r++)
                    for (int q = 0; q < COLS; q++)
                        if (touched[r]) ref_elem(&c, c.lr, g[r][q], &w[r][q], &acc[r][q]);
            }
            optim_var *a = optim_get_slot(opt, sv, "accumulator");
            for (int r = 0; r < ROWS; r++)
                for (int q = 0; q < COLS; q++) {
                    int i = r * COLS + q;
                    assert_close(optim_var_get(sv, i), w[r][q], tol_r(dt), tol_a(dt));
                    assert_close(optim_var_get(a, i), acc[r][q], tol_r(dt), tol_a(dt));
                    if (!ever[r]) {
                        double w0 = dt == OPTIM_F32 ? (double)(float)table_init(r, q) : table_init(r, q);
                        double a0 = dt == OPTIM_F32 ? (double)0.1f : 0.1;
                        assert_true(optim_var_get(sv, i) == w0);
                        assert_true(optim_var_get(a, i) == a0);
                    }
                }
            optim_destroy(opt);
            optim_var_destroy(sv);
        }
}

/* ---- config --------------------------------------------------------------------- */

static void expect_config(const char *json, const char *want)
{
    optim_optimizer *opt = optim_test_make(json);
    char *got = optim_get_config(opt);
    assert_non_null(got);
    if (strcmp(got, want) != 0) print_error("got  %s\nwant %s\n", got, want);
    assert_string_equal(got, want);
    optim_free(got);
    optim_destroy(opt);
}

static void test_config_keys(void **s)
{
    (void)s;
    expect_config("\"adagrad\"",
                  "{\"name\":\"adagrad\",\"learning_rate\":0.001,\"weight_decay\":null,\"clipnorm\":null,"
                  "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
                  "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
                  "\"gradient_accumulation_steps\":null,\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
    expect_config("{\"class_name\": \"Adagrad\", \"config\": {\"is_legacy_optimizer\": true}}",
                  "{\"name\":\"Adagrad\",\"learning_rate\":0.001,\"decay\":0.0,"
                  "\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
    expect_config("{\"class_name\": \"Adagrad\", \"config\": {\"epsilon\": null, \"is_legacy_optimizer\": true}}",
                  "{\"name\":\"Adagrad\",\"learning_rate\":0.001,\"decay\":0.0,"
                  "\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
    expect_config("{\"class_name\": \"Adagrad\", \"config\": {\"epsilon\": 0.0, \"is_legacy_optimizer\": true}}",
                  "{\"name\":\"Adagrad\",\"learning_rate\":0.001,\"decay\":0.0,"
                  "\"initial_accumulator_value\":0.1,\"epsilon\":1e-07}");
}

/* Legacy epsilon 0 is the backend epsilon 1e-7 in the update too. */
static void test_legacy_epsilon_zero(void **s)
{
    (void)s;
    const char *cfgs[3] = {
        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 1.0, \"initial_accumulator_value\": 0.0, \"epsilon\": 0.0, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 1.0, \"initial_accumulator_value\": 0.0, \"epsilon\": null, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 1.0, \"initial_accumulator_value\": 0.0, \"epsilon\": 0.0}}"};
    for (int c = 0; c < 3; c++) {
        optim_optimizer *opt = optim_test_make(cfgs[c]);
        double one = 1.0, g = 2.0;
        optim_var *v = optim_test_var("v", OPTIM_F64, 0, NULL, &one);
        step_dense(opt, v, OPTIM_F64, &g, 1);
        /* legacy: 1 - 2 / (2 + 1e-7); Keras 3 keeps 0: 1 - 2 / 2 = 0 exactly. */
        if (c < 2) assert_close(optim_var_get(v, 0), 1 - 2 / (2 + 1e-7), 1e-6, 0);
        else assert_true(optim_var_get(v, 0) == 0.0);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

static void round_trip(const char *json)
{
    optim_optimizer *a = optim_test_make(json);
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

static void test_config_round_trip(void **s)
{
    (void)s;
    /* adagrad_test.py test_config. */
    round_trip("{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.5, "
               "\"initial_accumulator_value\": 0.2, \"epsilon\": 1e-5}}");
    round_trip("{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.5, "
               "\"initial_accumulator_value\": 0.2, \"epsilon\": 1e-5, \"decay\": 0.1, "
               "\"clipvalue\": 2.0, \"is_legacy_optimizer\": true}}");
}

static void expect_refused(const char *json, int code, const char *s1, const char *s2)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("rc %d for %s: %s\n", rc, json, err.msg);
    assert_int_equal(rc, code);
    assert_null(opt);
    if (s1 && !strstr(err.msg, s1)) print_error("message: %s\n", err.msg);
    if (s1) assert_non_null(strstr(err.msg, s1));
    if (s2) assert_non_null(strstr(err.msg, s2));
}

static double eps_fn(void *user) { (void)user; return 1e-3; }

static void test_config_refused(void **s)
{
    (void)s;
    /* Legacy: initial_accumulator_value must be non-negative. */
    expect_refused("{\"class_name\": \"Adagrad\", \"config\": {\"initial_accumulator_value\": -0.1, "
                   "\"is_legacy_optimizer\": true}}",
                   OPTIM_ERANGE, "initial_accumulator_value", "[0, inf)");
    /* Keras 3 does not check it. */
    optim_optimizer *k3 = optim_test_make("{\"class_name\": \"Adagrad\", \"config\": {\"initial_accumulator_value\": -0.1}}");
    assert_int_equal(optim_set_hyper(k3, "initial_accumulator_value", 0.5), 0);
    optim_destroy(k3);
    optim_optimizer *lg = optim_test_make("{\"class_name\": \"Adagrad\", \"config\": {\"is_legacy_optimizer\": true}}");
    assert_int_equal(optim_set_hyper(lg, "initial_accumulator_value", -1.0), OPTIM_ERANGE);
    assert_non_null(strstr(optim_errmsg(lg), "initial_accumulator_value"));
    /* Not hypers: no callables. */
    assert_int_equal(optim_set_hyper_fn(lg, "epsilon", eps_fn, NULL), OPTIM_ETYPE);
    optim_destroy(lg);
    expect_refused("{\"class_name\": \"Adagrad\", \"config\": {\"epsilon\": null}}", OPTIM_ETYPE, "epsilon", NULL);
    expect_refused("{\"class_name\": \"Adagrad\", \"config\": {\"epsilon\": true}}", OPTIM_ETYPE, "epsilon", NULL);
    expect_refused("{\"class_name\": \"Adagrad\", \"config\": {\"rho\": 0.9}}", OPTIM_EKEY, "rho", NULL);
    expect_refused("{\"class_name\": \"Adagrad\", \"config\": {\"lr\": 0.1, \"is_legacy_optimizer\": false}}", OPTIM_EKEY, "lr", "generation");
}

/* ---- threads ------------------------------------------------------------------------ */

static void test_threads_bitwise(void **s)
{
    (void)s;
    const int64_t n = 100003;
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * i);
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_var *vars[2];
        optim_optimizer *opts[2];
        for (int t = 0; t < 2; t++) {
            cfg c = {0.01, 0.1, 1e-7, 0, legacy};
            opts[t] = make_cfg(&c);
            assert_int_equal(optim_set_num_threads(opts[t], t + 1), 0);
            vars[t] = optim_test_var("big", OPTIM_F32, 1, &n, init);
            for (int k = 0; k < 4; k++) {
                for (int64_t i = 0; i < n; i++) g[i] = (float)cos(0.37 * i + k);
                optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), vars[t]};
                assert_int_equal(optim_apply_gradients(opts[t], &p, 1, 0), 0);
            }
        }
        assert_bitwise(vars[0], vars[1]);
        assert_bitwise(optim_get_slot(opts[0], vars[0], "accumulator"), optim_get_slot(opts[1], vars[1], "accumulator"));
        for (int t = 0; t < 2; t++) {
            optim_destroy(opts[t]);
            optim_var_destroy(vars[t]);
        }
    }
    free(init);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trajectories),
        cmocka_unit_test(test_slot_initial_value),
        cmocka_unit_test(test_generations_differ),
        cmocka_unit_test(test_f32_operation_order),
        cmocka_unit_test(test_keras_single_step),
        cmocka_unit_test(test_keras_golden),
        cmocka_unit_test(test_keras_weight_decay),
        cmocka_unit_test(test_legacy_minimize_sparse),
        cmocka_unit_test(test_sparse_repeated_indices),
        cmocka_unit_test(test_sparse_keras3_dense_equivalent),
        cmocka_unit_test(test_sparse_rows_only),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_legacy_epsilon_zero),
        cmocka_unit_test(test_config_round_trip),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
