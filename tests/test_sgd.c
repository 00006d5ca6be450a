/* SGD against independent double-precision references: plain, momentum and
 * Nesterov trajectories in f32 and f64, legacy decay, clipping, dynamic
 * learning rates, sparse gradients in both generations, and thread-count
 * independence. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 25
#define N 7

/* Deterministic gradient for step k, element i (positive and negative). */
static double grad_at(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k; }
static double init_at(int i) { return 0.5 - 0.3 * i; }

typedef struct ref {
    double lr, momentum, decay;
    int nesterov;
} ref;

/* The Keras rule in double precision, with legacy decay lr/(1 + decay*t). */
static void ref_run(const ref *r, double *w, double *m, int steps)
{
    for (int i = 0; i < N; i++) w[i] = init_at(i), m[i] = 0;
    for (int k = 0; k < steps; k++) {
        double lr = r->lr / (1.0 + r->decay * k);
        for (int i = 0; i < N; i++) {
            double g = grad_at(k, i);
            if (r->momentum == 0) {
                w[i] -= lr * g;
                continue;
            }
            m[i] = r->momentum * m[i] - lr * g;
            w[i] += r->nesterov ? r->momentum * m[i] - lr * g : m[i];
        }
    }
}



/* Runs `steps` dense steps of grad_at on a fresh N-vector. */
static optim_var *run_dense(optim_optimizer *opt, optim_dtype dt, int steps)
{
    double init[N];
    for (int i = 0; i < N; i++) init[i] = init_at(i);
    int64_t shape[1] = {N};
    optim_var *w = optim_test_var("w", dt, 1, shape, init);
    for (int k = 0; k < steps; k++) {
        float gf[N];
        double gd[N];
        for (int i = 0; i < N; i++) gf[i] = (float)grad_at(k, i), gd[i] = grad_at(k, i);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)gf : (void *)gd, 1, shape)), w};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        if (rc) print_error("%s\n", optim_errmsg(opt));
        assert_int_equal(rc, 0);
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
        double wr[N], mr[N];
        ref_run(r, wr, mr, STEPS);
        double rtol = dt == OPTIM_F32 ? 2e-5 : 1e-12, atol = dt == OPTIM_F32 ? 2e-6 : 1e-13;
        for (int i = 0; i < N; i++) assert_close(optim_var_get(w, i), wr[i], rtol, atol);
        optim_var *m = optim_get_slot(opt, w, "momentum");
        if (r->momentum == 0) {
            assert_null(m);
        } else {
            assert_non_null(m);
            for (int i = 0; i < N; i++) assert_close(optim_var_get(m, i), mr[i], rtol, atol);
        }
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

static void test_plain(void **s)
{
    (void)s;
    ref r = {0.1, 0, 0, 0};
    check_trajectory("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}", &r);
    check_trajectory("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
                     "\"is_legacy_optimizer\": true}}", &r);
}

static void test_momentum(void **s)
{
    (void)s;
    ref r = {0.05, 0.9, 0, 0};
    check_trajectory("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, "
                     "\"momentum\": 0.9}}", &r);
    check_trajectory("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, "
                     "\"momentum\": 0.9, \"is_legacy_optimizer\": true}}", &r);
}

static void test_nesterov(void **s)
{
    (void)s;
    ref r = {0.05, 0.8, 0, 1};
    check_trajectory("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, "
                     "\"momentum\": 0.8, \"nesterov\": true}}", &r);
    check_trajectory("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, "
                     "\"momentum\": 0.8, \"nesterov\": true, \"is_legacy_optimizer\": true}}", &r);
}

static void test_legacy_decay(void **s)
{
    (void)s;
    ref r = {0.1, 0.5, 0.3, 0};
    check_trajectory("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
                     "\"momentum\": 0.5, \"decay\": 0.3, \"is_legacy_optimizer\": true}}", &r);
}

/* The Keras SGD docstring: var = 1, loss = var^2 / 2 (g = var), lr 0.1,
 * momentum 0.9: the first step moves by 0.1, the second by 0.18. */
static void test_keras_docstring(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
                                "\"momentum\": 0.9}}");
    double one = 1.0;
    optim_var *v = optim_test_var("var", OPTIM_F32, 0, NULL, &one);
    for (int k = 0; k < 2; k++) {
        float g = (float)optim_var_get(v, 0);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, &g, 0, NULL)), v};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        assert_close(optim_var_get(v, 0), k == 0 ? 0.9 : 0.72, 1e-6, 0);
    }
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* ---- clipping ------------------------------------------------------------ */

/* Two variables a (3) and b (2), one step, lr 1, no momentum: w -= clip(g). */
static void clip_case(const char *extra, int legacy, const double *ga, const double *gb,
                      const double *want_a, const double *want_b)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        char json[512];
        snprintf(json, sizeof json,
                 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, %s%s}}", extra,
                 legacy ? ", \"is_legacy_optimizer\": true" : "");
        optim_optimizer *opt = optim_test_make(json);
        double zeros[3] = {0, 0, 0};
        int64_t sa[1] = {3}, sb[1] = {2};
        optim_var *a = optim_test_var("a", dt, 1, sa, zeros), *b = optim_test_var("b", dt, 1, sb, zeros);
        float fa[3], fb[2];
        double da[3], db[2];
        for (int i = 0; i < 3; i++) fa[i] = (float)ga[i], da[i] = ga[i];
        for (int i = 0; i < 2; i++) fb[i] = (float)gb[i], db[i] = gb[i];
        optim_grad_var p[2] = {
            {optim_grad_dense(optim_tensor_make(dt, d ? (void *)da : (void *)fa, 1, sa)), a},
            {optim_grad_dense(optim_tensor_make(dt, d ? (void *)db : (void *)fb, 1, sb)), b},
        };
        assert_int_equal(optim_apply_gradients(opt, p, 2, 0), 0);
        double rtol = d ? 1e-14 : 1e-6;
        for (int i = 0; i < 3; i++) assert_close(optim_var_get(a, i), -want_a[i], rtol, 1e-15);
        for (int i = 0; i < 2; i++) assert_close(optim_var_get(b, i), -want_b[i], rtol, 1e-15);
        optim_destroy(opt);
        optim_var_destroy(a);
        optim_var_destroy(b);
    }
}

static void test_clipvalue(void **s)
{
    (void)s;
    double ga[3] = {3, -0.5, -7}, gb[2] = {0.25, 2};
    double wa[3] = {1, -0.5, -1}, wb[2] = {0.25, 1};
    clip_case("\"clipvalue\": 1.0", 0, ga, gb, wa, wb);
    clip_case("\"clipvalue\": 1.0", 1, ga, gb, wa, wb);
}

static void test_clipnorm(void **s)
{
    (void)s;
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
static void test_clip_zero(void **s)
{
    (void)s;
    double ga[3] = {3, -0.5, -7}, gb[2] = {0.25, 2}, za[3] = {0, 0, 0}, zb[2] = {0, 0};
    clip_case("\"clipvalue\": 0", 0, ga, gb, ga, gb);
    clip_case("\"clipnorm\": 0", 0, ga, gb, ga, gb);
    clip_case("\"global_clipnorm\": 0", 0, ga, gb, ga, gb);
    clip_case("\"clipvalue\": 0", 1, ga, gb, za, zb);
    clip_case("\"clipnorm\": 0", 1, ga, gb, za, zb);
}

static void test_global_clipnorm(void **s)
{
    (void)s;
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

static double lr_fn(void *user) { return *(double *)user; }
static double lr_sched(void *user, int64_t step) { (void)user; return 0.1 / (1.0 + (double)step); }

static void test_dynamic_lr(void **s)
{
    (void)s;
    const double lrs[STEPS] = {0.1, 0.05, 0.2, 0.01, 0.3};
    for (int kind = 0; kind < 4; kind++) {
        optim_optimizer *opt = optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.5}}");
        double cur = 0;
        optim_var *lrv;
        optim_error err;
        assert_int_equal(optim_var_create(&lrv, "lr", OPTIM_F64, 0, NULL, NULL, &err), 0);
        if (kind == 0) assert_int_equal(optim_set_hyper_fn(opt, "learning_rate", lr_fn, &cur), 0);
        if (kind == 1) assert_int_equal(optim_set_hyper_var(opt, "learning_rate", lrv), 0);
        if (kind == 3) assert_int_equal(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), 0);
        double init[N], w[N], m[N];
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i), m[i] = 0;
        int64_t shape[1] = {N};
        optim_var *v = optim_test_var("w", OPTIM_F64, 1, shape, init);
        for (int k = 0; k < 5; k++) {
            double lr = kind == 3 ? 0.1 / (1.0 + k) : lrs[k];
            cur = lr;
            *(double *)optim_var_data(lrv) = lr;
            if (kind == 2) assert_int_equal(optim_set_hyper(opt, "learning_rate", lr), 0);
            double got;
            assert_int_equal(optim_get_hyper(opt, "learning_rate", &got), 0);
            assert_close(got, lr, 0, 0);
            double g[N];
            for (int i = 0; i < N; i++) {
                g[i] = grad_at(k, i);
                m[i] = 0.5 * m[i] - lr * g[i];
                w[i] += m[i];
            }
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, shape)), v};
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
            for (int i = 0; i < N; i++) assert_close(optim_var_get(v, i), w[i], 1e-13, 1e-15);
        }
        /* A callable returning a bad value fails the step and changes nothing. */
        if (kind == 0) {
            cur = -1;
            double g[N] = {0};
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, shape)), v};
            double before = optim_var_get(v, 0);
            assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ERANGE);
            assert_non_null(strstr(optim_errmsg(opt), "learning_rate"));
            assert_int_equal(optim_iterations(opt), 5);
            assert_true(optim_var_get(v, 0) == before);
        }
        optim_destroy(opt);
        optim_var_destroy(v);
        optim_var_destroy(lrv);
    }
}

/* ---- sparse ------------------------------------------------------------------- */

#define ROWS 6
#define COLS 3

static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }

/* Sparse steps with duplicate indices; returns the variable. */
static const int64_t sp_idx[3][4] = {{1, 4, 1, 1}, {0, 4, 5, 4}, {2, 2, 3, 1}};
static double sp_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c); }

static optim_var *run_sparse(optim_optimizer *opt, optim_dtype dt, int as_dense)
{
    double init[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) init[r * COLS + c] = table_init(r, c);
    int64_t shape[2] = {ROWS, COLS};
    optim_var *v = optim_test_var("table", dt, 2, shape, init);
    for (int k = 0; k < 3; k++) {
        double vals[4 * COLS], dense[ROWS * COLS] = {0};
        for (int j = 0; j < 4; j++)
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = sp_val(k, j, c);
                dense[sp_idx[k][j] * COLS + c] += sp_val(k, j, c);
            }
        float fv[4 * COLS], fd[ROWS * COLS];
        for (int i = 0; i < 4 * COLS; i++) fv[i] = (float)vals[i];
        for (int i = 0; i < ROWS * COLS; i++) fd[i] = 0;
        for (int j = 0; j < 4; j++)
            for (int c = 0; c < COLS; c++) fd[sp_idx[k][j] * COLS + c] += fv[j * COLS + c];
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

static void assert_vars_bitwise(optim_var *a, optim_var *b)
{
    assert_int_equal(optim_var_numel(a), optim_var_numel(b));
    assert_memory_equal(optim_var_data(a), optim_var_data(b),
                        (size_t)optim_var_numel(a) * optim_dtype_size(optim_var_dtype(a)));
}

/* Keras 3: sparse == dense equivalent (duplicates summed), bit for bit. */
static void test_sparse_keras3_equals_dense(void **s)
{
    (void)s;
    const char *cfgs[] = {"{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}",
                          "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}",
                          "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, \"nesterov\": true}}"};
    for (int c = 0; c < 3; c++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *o1 = optim_test_make(cfgs[c]), *o2 = optim_test_make(cfgs[c]);
            optim_var *sv = run_sparse(o1, dt, 0), *dv = run_sparse(o2, dt, 1);
            assert_vars_bitwise(sv, dv);
            if (c > 0) assert_vars_bitwise(optim_get_slot(o1, sv, "momentum"), optim_get_slot(o2, dv, "momentum"));
            optim_destroy(o1);
            optim_destroy(o2);
            optim_var_destroy(sv);
            optim_var_destroy(dv);
        }
}

/* Legacy with momentum: duplicates summed, then only the indexed rows of the
 * slot and the variable change (TF's SparseApplyKerasMomentum). Legacy
 * without momentum: scatter-add of -lr * g per index as given. */
static void test_sparse_legacy_rows_only(void **s)
{
    (void)s;
    for (int nesterov = 0; nesterov < 2; nesterov++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *opt = optim_test_make(nesterov ? "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, \"nesterov\": true, \"is_legacy_optimizer\": true}}"
                                                 : "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, \"is_legacy_optimizer\": true}}");
            optim_var *v = run_sparse(opt, dt, 0);
            double w[ROWS][COLS], m[ROWS][COLS] = {{0}};
            for (int r = 0; r < ROWS; r++)
                for (int c = 0; c < COLS; c++) w[r][c] = table_init(r, c);
            for (int k = 0; k < 3; k++) {
                double g[ROWS][COLS] = {{0}};
                int touched[ROWS] = {0};
                for (int j = 0; j < 4; j++) {
                    touched[sp_idx[k][j]] = 1;
                    for (int c = 0; c < COLS; c++) g[sp_idx[k][j]][c] += sp_val(k, j, c);
                }
                for (int r = 0; r < ROWS; r++)
                    if (touched[r])
                        for (int c = 0; c < COLS; c++) {
                            m[r][c] = 0.9 * m[r][c] - 0.1 * g[r][c];
                            w[r][c] += nesterov ? 0.9 * m[r][c] - 0.1 * g[r][c] : m[r][c];
                        }
            }
            optim_var *mv = optim_get_slot(opt, v, "momentum");
            double rtol = d ? 1e-13 : 1e-5;
            for (int r = 0; r < ROWS; r++)
                for (int c = 0; c < COLS; c++) {
                    assert_close(optim_var_get(v, r * COLS + c), w[r][c], rtol, 1e-7);
                    assert_close(optim_var_get(mv, r * COLS + c), m[r][c], rtol, 1e-7);
                }
            optim_destroy(opt);
            optim_var_destroy(v);
        }
    /* Without momentum: sequential scatter-add, same as the reference. */
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"is_legacy_optimizer\": true}}");
    optim_var *v = run_sparse(opt, OPTIM_F64, 0);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            double w = table_init(r, c);
            for (int k = 0; k < 3; k++)
                for (int j = 0; j < 4; j++)
                    if (sp_idx[k][j] == r) w = w - sp_val(k, j, c) * 0.1;
            assert_true(optim_var_get(v, r * COLS + c) == w);
        }
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* Rows not indexed stay bit-identical in the legacy generation but decay in
 * Keras 3 (momentum carried from an earlier step). */
static void test_sparse_untouched_rows(void **s)
{
    (void)s;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.5, \"momentum\": 0.5, \"is_legacy_optimizer\": true}}"
                                           : "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.5, \"momentum\": 0.5}}");
        double init[4] = {1, 2, 3, 4};
        int64_t shape[2] = {4, 1}, vs[2] = {1, 1};
        optim_var *v = optim_test_var("e", OPTIM_F64, 2, shape, init);
        int64_t i0 = 0, i3 = 3;
        double one = 1.0;
        optim_grad_var p = {optim_grad_sparse(&i0, 1, optim_tensor_make(OPTIM_F64, &one, 2, vs)), v};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        /* m0 = -0.5, w0 = 0.5 */
        assert_true(optim_var_get(v, 0) == 0.5);
        p.grad.sparse.indices = &i3;
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        /* Keras 3: row 0 gets m = -0.25 -> 0.25; legacy: row 0 unchanged. */
        assert_true(optim_var_get(v, 0) == (legacy ? 0.5 : 0.25));
        assert_true(optim_var_get(v, 1) == 2 && optim_var_get(v, 2) == 3);
        assert_true(optim_var_get(v, 3) == 3.5);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

/* ---- Keras 3 weight decay ----------------------------------------------------------- */

/* w = w - w * wd * lr before the SGD step, except for excluded variables
 * (by pointer or by name pattern); dense and sparse (which decays all rows). */
static void test_weight_decay(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
                                "\"momentum\": 0.5, \"weight_decay\": 0.2}}");
    double init[4] = {1, -2, 3, 4};
    int64_t n4 = 4, shape[2] = {4, 1}, vs[2] = {1, 1};
    optim_var *a = optim_test_var("dense/kernel", OPTIM_F64, 1, &n4, init);
    optim_var *b = optim_test_var("dense/bias", OPTIM_F64, 1, &n4, init);
    optim_var *c = optim_test_var("other", OPTIM_F64, 1, &n4, init);
    optim_var *e = optim_test_var("emb", OPTIM_F64, 2, shape, init);
    const char *pat[1] = {"bias$"};
    assert_int_equal(optim_exclude_from_weight_decay(opt, &c, 1, pat, 1), 0);
    const char *bad[1] = {"("};
    assert_int_equal(optim_exclude_from_weight_decay(opt, NULL, 0, bad, 1), OPTIM_EINVAL);
    assert_non_null(strstr(optim_errmsg(opt), "regular expression"));
    double g[4] = {0.5, 0.5, -1, 2}, row = 1.0;
    int64_t idx = 2;
    double wa[4], wb[4], ma[4] = {0}, mb[4] = {0}, we[4], me[4] = {0};
    for (int i = 0; i < 4; i++) wa[i] = wb[i] = we[i] = init[i];
    for (int k = 0; k < 3; k++) {
        optim_grad_var p[4] = {
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n4)), a},
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n4)), b},
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n4)), c},
            {optim_grad_sparse(&idx, 1, optim_tensor_make(OPTIM_F64, &row, 2, vs)), e},
        };
        assert_int_equal(optim_apply_gradients(opt, p, 4, 0), 0);
        for (int i = 0; i < 4; i++) {
            double ge = i == 2 ? 1.0 : 0.0;
            wa[i] = wa[i] - wa[i] * 0.2 * 0.1;
            we[i] = we[i] - we[i] * 0.2 * 0.1;
            ma[i] = 0.5 * ma[i] - 0.1 * g[i];
            mb[i] = 0.5 * mb[i] - 0.1 * g[i];
            me[i] = 0.5 * me[i] - 0.1 * ge;
            wa[i] += ma[i];
            wb[i] += mb[i];
            we[i] += me[i];
        }
    }
    for (int i = 0; i < 4; i++) {
        assert_close(optim_var_get(a, i), wa[i], 1e-14, 1e-15);
        assert_close(optim_var_get(b, i), wb[i], 1e-14, 1e-15); /* excluded by pattern */
        assert_close(optim_var_get(c, i), wb[i], 1e-14, 1e-15); /* excluded by pointer */
        assert_close(optim_var_get(e, i), we[i], 1e-14, 1e-15);
    }
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(b);
    optim_var_destroy(c);
    optim_var_destroy(e);
    /* The legacy generation has no weight_decay key. */
    optim_optimizer *legacy = NULL;
    optim_error err;
    assert_int_equal(optim_from_json(&legacy, "{\"class_name\": \"SGD\", \"config\": "
                                              "{\"weight_decay\": 0.1, \"is_legacy_optimizer\": true}}", &err),
                     OPTIM_EKEY);
    assert_null(legacy);
}

/* ---- threads ---------------------------------------------------------------------- */

static void test_threads_bitwise(void **s)
{
    (void)s;
    const int64_t n = 100003; /* many chunks, ragged end */
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * i);
    optim_var *vars[2];
    for (int t = 0; t < 2; t++) {
        optim_optimizer *opt = optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.01, \"momentum\": 0.9, \"nesterov\": true, \"global_clipnorm\": 10}}");
        assert_int_equal(optim_set_num_threads(opt, t + 1), 0);
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
    free(init);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_momentum),
        cmocka_unit_test(test_nesterov),
        cmocka_unit_test(test_legacy_decay),
        cmocka_unit_test(test_keras_docstring),
        cmocka_unit_test(test_clipvalue),
        cmocka_unit_test(test_clipnorm),
        cmocka_unit_test(test_global_clipnorm),
        cmocka_unit_test(test_clip_zero),
        cmocka_unit_test(test_dynamic_lr),
        cmocka_unit_test(test_sparse_keras3_equals_dense),
        cmocka_unit_test(test_sparse_legacy_rows_only),
        cmocka_unit_test(test_sparse_untouched_rows),
        cmocka_unit_test(test_weight_decay),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
