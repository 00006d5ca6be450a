/* Adadelta against independent double-precision references: trajectories in
 * f32 and f64 in both generations (the same rule in two operation orders:
 * Keras 3's update_step and TF's ApplyAdadelta), legacy decay and a dynamic
 * rho, sparse gradients with duplicate indices (Keras 3: the dense
 * equivalent, accumulators decaying on every row; legacy: SparseApplyAdadelta
 * on the indexed rows), the Keras golden values, config keys and round
 * trips, and thread-count independence. */
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
    double lr, rho, eps, decay;
    int legacy;
} cfg;

/* Zeiler's rule with a learning rate, in double precision:
 *   Eg = rho Eg + (1 - rho) g^2;  u = sqrt(Edx + eps) / sqrt(Eg + eps) g
 *   Edx = rho Edx + (1 - rho) u^2;  w -= lr u */
static void ref_elem(double rho, double eps, double lr, double g, double *w, double *eg, double *edx)
{
    *eg = rho * *eg + (1 - rho) * g * g;
    double u = sqrt(*edx + eps) / sqrt(*eg + eps) * g;
    *edx = rho * *edx + (1 - rho) * u * u;
    *w -= lr * u;
}

static void cfg_json(const cfg *c, char *buf, size_t n)
{
    int used = snprintf(buf, n,
                        "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": %.17g, "
                        "\"rho\": %.17g, \"epsilon\": %.17g",
                        c->lr, c->rho, c->eps);
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
        double init[N], w[N], eg[N] = {0}, edx[N] = {0};
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
        int64_t shape[1] = {N};
        optim_var *var = optim_test_var("w", dt, 1, shape, init);
        for (int k = 0; k < STEPS; k++) {
            double g[N];
            double lr = c->legacy ? c->lr / (1.0 + c->decay * k) : c->lr;
            for (int i = 0; i < N; i++) {
                g[i] = grad_at(k, i);
                ref_elem(c->rho, c->eps, lr, g[i], &w[i], &eg[i], &edx[i]);
            }
            step_dense(opt, var, dt, g, N);
        }
        assert_int_equal(optim_iterations(opt), STEPS);
        optim_var *ag = optim_get_slot(opt, var, "accum_grad"), *av = optim_get_slot(opt, var, "accum_var");
        assert_non_null(ag);
        assert_non_null(av);
        const char *names[4];
        assert_int_equal(optim_get_slot_names(opt, names, 4), 2);
        assert_string_equal(names[0], "accum_grad");
        assert_string_equal(names[1], "accum_var");
        for (int i = 0; i < N; i++) {
            assert_close(optim_var_get(var, i), w[i], tol_r(dt), tol_a(dt));
            assert_close(optim_var_get(ag, i), eg[i], tol_r(dt), tol_a(dt));
            assert_close(optim_var_get(av, i), edx[i], tol_r(dt), 1e-12);
        }
        optim_destroy(opt);
        optim_var_destroy(var);
    }
}

static void test_trajectories(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        cfg a = {1.0, 0.95, 1e-6, 0, legacy};
        check_trajectory(&a);
        cfg b = {0.5, 0.8, 1e-3, 0, legacy};
        check_trajectory(&b);
        cfg c = {0.001, 0.95, 1e-7, 0, legacy}; /* the defaults */
        check_trajectory(&c);
    }
    cfg d = {1.0, 0.9, 1e-4, 0.3, 1}; /* legacy decay */
    check_trajectory(&d);
}

static double rho_fn(void *user) { return *(double *)user; }

/* Legacy rho is a hyper; Keras 3's is a number. */
static void test_dynamic_rho(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, "
                                "\"epsilon\": 1e-6, \"is_legacy_optimizer\": true}}");
    double rho = 0.9;
    assert_int_equal(optim_set_hyper_fn(opt, "rho", rho_fn, &rho), 0);
    double init[N], w[N], eg[N] = {0}, edx[N] = {0};
    for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
    int64_t n = N;
    optim_var *var = optim_test_var("w", OPTIM_F64, 1, &n, init);
    for (int k = 0; k < 10; k++) {
        rho = 0.5 + 0.04 * k;
        double g[N];
        for (int i = 0; i < N; i++) {
            g[i] = grad_at(k, i);
            ref_elem(rho, 1e-6, 1.0, g[i], &w[i], &eg[i], &edx[i]);
        }
        step_dense(opt, var, OPTIM_F64, g, N);
    }
    for (int i = 0; i < N; i++) assert_close(optim_var_get(var, i), w[i], 1e-12, 1e-13);
    optim_destroy(opt);
    optim_var_destroy(var);
    optim_optimizer *k3 = optim_test_make("\"adadelta\"");
    assert_int_equal(optim_set_hyper_fn(k3, "rho", rho_fn, &rho), OPTIM_ETYPE);
    optim_destroy(k3);
}

/* Each generation's float32 operation order, bit for bit (sparse with every
 * row indexed gives the same: Keras 3 dense equivalent, SparseApplyAdadelta). */
static void test_f32_operation_order(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int sparse = 0; sparse < 2; sparse++) {
            cfg c = {0.5, 0.9, 1e-3, 0, legacy};
            optim_optimizer *opt = make_cfg(&c);
            double init[N];
            for (int i = 0; i < N; i++) init[i] = init_at(i);
            int64_t shape[2] = {N, 1};
            optim_var *var = optim_test_var("w", OPTIM_F32, 2, shape, init);
            float w[N], eg[N] = {0}, edx[N] = {0};
            const float lr = 0.5f, rho = 0.9f, eps = 1e-3f;
            const float omr = legacy ? 1.0f - rho : (float)(1.0 - 0.9);
            for (int i = 0; i < N; i++) w[i] = (float)init[i];
            for (int k = 0; k < 6; k++) {
                float g[N];
                int64_t idx[N];
                for (int i = 0; i < N; i++) {
                    g[i] = (float)grad_at(k, i);
                    idx[i] = i;
                    if (legacy) { /* ApplyAdadelta */
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
                optim_grad_var p = {sparse ? optim_grad_sparse(idx, N, optim_tensor_make(OPTIM_F32, g, 2, shape))
                                           : optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, shape)),
                                    var};
                assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            }
            assert_memory_equal(optim_var_data(var), w, sizeof w);
            assert_memory_equal(optim_var_data(optim_get_slot(opt, var, "accum_grad")), eg, sizeof eg);
            assert_memory_equal(optim_var_data(optim_get_slot(opt, var, "accum_var")), edx, sizeof edx);
            optim_destroy(opt);
            optim_var_destroy(var);
        }
}

/* ---- Keras golden values --------------------------------------------------- */

/* keras/src/optimizers/adadelta_test.py test_single_step (legacy agrees). */
static void test_keras_single_step(void **s)
{
    (void)s;
    const char *cfgs[2] = {
        "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 0.5}}",
        "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 0.5, \"is_legacy_optimizer\": true}}"};
    const double g[4] = {1, 6, 7, 2}, init[4] = {1, 2, 3, 4};
    const double want[4] = {0.9993, 1.9993, 2.9993, 3.9993};
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

/* adadelta_test.py test_correctness_with_golden. */
static void test_keras_golden(void **s)
{
    (void)s;
    const double golden[5] = {0.9978, 0.9947, 0.9915, 0.9882, 0.9849};
    const char *cfgs[2] = {
        "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, \"rho\": 0.8, \"epsilon\": 1e-6}}",
        "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, \"rho\": 0.8, \"epsilon\": 1e-6, \"is_legacy_optimizer\": true}}"};
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
                for (int i = 0; i < 10; i++) assert_close(optim_var_get(x, i), golden[k], 5e-4, 5e-4);
                step_dense(opt, x, dt, grads, 10);
            }
            optim_destroy(opt);
            optim_var_destroy(x);
        }
}

static void test_keras_weight_decay(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, "
                                "\"weight_decay\": 0.004}}");
    double two = 2.0, zero = 0.0;
    optim_var *v = optim_test_var("var1", OPTIM_F32, 0, NULL, &two);
    for (int k = 0; k < 3; k++) step_dense(opt, v, OPTIM_F32, &zero, 1);
    assert_close(optim_var_get(v, 0), 1.9760959, 0, 1e-6);
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* tf_keras legacy adadelta_test testMinimizeSparseResourceVariable:
 * Adadelta(1.0, 1.0, 1.0), row 0 of [[1, 2]] gets [112, 140]: [[-111, -138]]. */
static void test_legacy_minimize_sparse(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, \"rho\": 1.0, \"epsilon\": 1.0, \"is_legacy_optimizer\": true}}"
                                               : "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, \"rho\": 1.0, \"epsilon\": 1.0}}");
            double init[2] = {1, 2};
            int64_t shape[2] = {1, 2}, vs[2] = {1, 2}, idx = 0;
            optim_var *v = optim_test_var("var0", dt, 2, shape, init);
            float gf[2] = {112, 140};
            double gd[2] = {112, 140};
            optim_grad_var p = {optim_grad_sparse(&idx, 1, optim_tensor_make(dt, d ? (void *)gd : (void *)gf, 2, vs)), v};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            assert_true(optim_var_get(v, 0) == -111 && optim_var_get(v, 1) == -138);
            optim_destroy(opt);
            optim_var_destroy(v);
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

/* Both generations against the reference: Keras 3 every row (g = 0 where no
 * index points), bit for bit equal to the dense run; legacy the indexed rows
 * only. */
static void test_sparse(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            cfg c = {1.0, 0.9, 1e-4, 0, legacy};
            optim_optimizer *opt = make_cfg(&c);
            optim_var *sv = run_sparse(opt, dt, 0);
            if (!legacy) {
                optim_optimizer *o2 = make_cfg(&c);
                optim_var *dv = run_sparse(o2, dt, 1);
                assert_bitwise(sv, dv);
                assert_bitwise(optim_get_slot(opt, sv, "accum_grad"), optim_get_slot(o2, dv, "accum_grad"));
                assert_bitwise(optim_get_slot(opt, sv, "accum_var"), optim_get_slot(o2, dv, "accum_var"));
                optim_destroy(o2);
                optim_var_destroy(dv);
            }
            double w[ROWS][COLS], eg[ROWS][COLS] = {{0}}, edx[ROWS][COLS] = {{0}};
            for (int r = 0; r < ROWS; r++)
                for (int q = 0; q < COLS; q++) w[r][q] = table_init(r, q);
            for (int k = 0; k < SPSTEPS; k++) {
                double g[ROWS][COLS] = {{0}};
                int touched[ROWS] = {0};
                for (int j = 0; j < 4; j++) {
                    touched[sp_idx[k][j]] = 1;
                    for (int q = 0; q < COLS; q++) g[sp_idx[k][j]][q] += sp_val(k, j, q);
                }
                for (int r = 0; r < ROWS; r++)
                    for (int q = 0; q < COLS; q++)
                        if (touched[r] || !legacy) ref_elem(c.rho, c.eps, c.lr, g[r][q], &w[r][q], &eg[r][q], &edx[r][q]);
            }
            optim_var *ag = optim_get_slot(opt, sv, "accum_grad"), *av = optim_get_slot(opt, sv, "accum_var");
            for (int r = 0; r < ROWS; r++)
                for (int q = 0; q < COLS; q++) {
                    int i = r * COLS + q;
                    assert_close(optim_var_get(sv, i), w[r][q], tol_r(dt), tol_a(dt));
                    assert_close(optim_var_get(ag, i), eg[r][q], tol_r(dt), tol_a(dt));
                    assert_close(optim_var_get(av, i), edx[r][q], tol_r(dt), 1e-12);
                }
            optim_destroy(opt);
            optim_var_destroy(sv);
        }
}

/* Row by row after history on every row, a gradient for row 3 only: legacy
 * leaves the other rows (variable and both slots) bit-identical; Keras 3
 * leaves the variable but decays both accumulators. */
static void test_sparse_untouched_rows(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        cfg c = {1.0, 0.9, 1e-3, 0, legacy};
        optim_optimizer *opt = make_cfg(&c);
        double init[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        int64_t shape[2] = {4, 2};
        optim_var *v = optim_test_var("e", OPTIM_F64, 2, shape, init);
        double g1[8] = {1, -1, 0.5, 2, -0.3, 0.7, 1.5, -2};
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g1, 2, shape)), v};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        optim_var *ag = optim_get_slot(opt, v, "accum_grad"), *av = optim_get_slot(opt, v, "accum_var");
        double wb[8], agb[8], avb[8];
        for (int i = 0; i < 8; i++) wb[i] = optim_var_get(v, i), agb[i] = optim_var_get(ag, i), avb[i] = optim_var_get(av, i);
        int64_t idx = 3, vs[2] = {1, 2};
        double row[2] = {0.25, -0.5};
        p.grad = optim_grad_sparse(&idx, 1, optim_tensor_make(OPTIM_F64, row, 2, vs));
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        for (int i = 0; i < 8; i++) {
            if (i >= 6) {
                assert_true(optim_var_get(v, i) != wb[i]);
                continue;
            }
            assert_true(optim_var_get(v, i) == wb[i]);
            if (legacy) {
                assert_true(optim_var_get(ag, i) == agb[i]);
                assert_true(optim_var_get(av, i) == avb[i]);
            } else {
                assert_true(optim_var_get(ag, i) == 0.9 * agb[i]);
                assert_true(optim_var_get(av, i) == 0.9 * avb[i]);
            }
        }
        optim_destroy(opt);
        optim_var_destroy(v);
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
    expect_config("\"adadelta\"",
                  "{\"name\":\"adadelta\",\"learning_rate\":0.001,\"weight_decay\":null,\"clipnorm\":null,"
                  "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
                  "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
                  "\"gradient_accumulation_steps\":null,\"rho\":0.95,\"epsilon\":1e-07}");
    expect_config("{\"class_name\": \"Adadelta\", \"config\": {\"is_legacy_optimizer\": true}}",
                  "{\"name\":\"Adadelta\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.95,"
                  "\"epsilon\":1e-07}");
    expect_config("{\"class_name\": \"Adadelta\", \"config\": {\"epsilon\": null, \"is_legacy_optimizer\": true}}",
                  "{\"name\":\"Adadelta\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.95,"
                  "\"epsilon\":1e-07}");
    expect_config("{\"class_name\": \"Adadelta\", \"config\": {\"epsilon\": 0, \"is_legacy_optimizer\": true}}",
                  "{\"name\":\"Adadelta\",\"learning_rate\":0.001,\"decay\":0.0,\"rho\":0.95,"
                  "\"epsilon\":1e-07}");
}

/* Legacy epsilon 0 is the backend epsilon 1e-7 in the update too; Keras 3
 * keeps 0 (and the first step is then 0 / sqrt(Eg) = 0). */
static void test_epsilon_zero(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, \"epsilon\": 0, \"is_legacy_optimizer\": true}}"
                                           : "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, \"epsilon\": 0}}");
        double one = 1.0, g = 2.0;
        optim_var *v = optim_test_var("v", OPTIM_F64, 0, NULL, &one);
        step_dense(opt, v, OPTIM_F64, &g, 1);
        double eg = 0.05 * 4;
        if (legacy) assert_close(optim_var_get(v, 0), 1 - sqrt(1e-7) / sqrt(eg + 1e-7) * 2, 1e-13, 0);
        else assert_true(optim_var_get(v, 0) == 1.0);
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
    /* adadelta_test.py test_config. */
    round_trip("{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 0.5, \"rho\": 0.9, \"epsilon\": 1e-5}}");
    round_trip("{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 0.5, \"rho\": 0.9, \"epsilon\": 1e-5, "
               "\"decay\": 0.1, \"global_clipnorm\": 3.0, \"is_legacy_optimizer\": true}}");
    /* The legacy alias lr (Adadelta(lr=1.0, ...)). */
    optim_optimizer *o = optim_test_make("{\"class_name\": \"Adadelta\", \"config\": {\"lr\": 1.0, \"rho\": 0.9, \"epsilon\": 1.0, \"is_legacy_optimizer\": true}}");
    double lr = 0;
    assert_int_equal(optim_get_hyper(o, "learning_rate", &lr), 0);
    assert_true(lr == 1.0);
    optim_destroy(o);
}

static void expect_refused(const char *json, int code, const char *s1, const char *s2)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("rc %d for %s: %s\n", rc, json, err.msg);
    assert_int_equal(rc, code);
    assert_null(opt);
    if (s1) assert_non_null(strstr(err.msg, s1));
    if (s2) assert_non_null(strstr(err.msg, s2));
}

/* Neither generation checks rho or epsilon (both accept rho = 1, as the
 * legacy test above uses); types, None and keys are checked. */
static void test_config_refused(void **s)
{
    (void)s;
    optim_optimizer *o = optim_test_make("{\"class_name\": \"Adadelta\", \"config\": {\"rho\": 1.5, \"epsilon\": -1.0}}");
    optim_destroy(o);
    expect_refused("{\"class_name\": \"Adadelta\", \"config\": {\"rho\": null}}", OPTIM_ETYPE, "rho", NULL);
    expect_refused("{\"class_name\": \"Adadelta\", \"config\": {\"rho\": null, \"is_legacy_optimizer\": true}}",
                   OPTIM_ETYPE, "rho", NULL);
    expect_refused("{\"class_name\": \"Adadelta\", \"config\": {\"epsilon\": null}}", OPTIM_ETYPE, "epsilon", NULL);
    expect_refused("{\"class_name\": \"Adadelta\", \"config\": {\"epsilon\": \"small\"}}", OPTIM_ETYPE, "epsilon", NULL);
    expect_refused("{\"class_name\": \"Adadelta\", \"config\": {\"momentum\": 0.9}}", OPTIM_EKEY, "momentum", NULL);
    expect_refused("{\"class_name\": \"Adadelta\", \"config\": {\"lr\": 0.1, \"is_legacy_optimizer\": false}}", OPTIM_EKEY, "lr", "generation");
    expect_refused("{\"class_name\": \"Adadelta\", \"config\": {\"use_ema\": false, \"is_legacy_optimizer\": true}}",
                   OPTIM_EKEY, "use_ema", NULL);
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
            cfg c = {1.0, 0.95, 1e-6, 0, legacy};
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
        assert_bitwise(optim_get_slot(opts[0], vars[0], "accum_grad"), optim_get_slot(opts[1], vars[1], "accum_grad"));
        assert_bitwise(optim_get_slot(opts[0], vars[0], "accum_var"), optim_get_slot(opts[1], vars[1], "accum_var"));
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
        cmocka_unit_test(test_dynamic_rho),
        cmocka_unit_test(test_f32_operation_order),
        cmocka_unit_test(test_keras_single_step),
        cmocka_unit_test(test_keras_golden),
        cmocka_unit_test(test_keras_weight_decay),
        cmocka_unit_test(test_legacy_minimize_sparse),
        cmocka_unit_test(test_sparse),
        cmocka_unit_test(test_sparse_untouched_rows),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_epsilon_zero),
        cmocka_unit_test(test_config_round_trip),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
