/* Lion (Keras 3 only) against an independent double-precision reference
 * written from Chen et al. 2023 / keras/src/optimizers/lion.py:
 *
 *     w = w - lr * sign(beta_1 * m + (1 - beta_1) * g)
 *     m = beta_2 * m + (1 - beta_2) * g
 *
 * Trajectories in f32 and f64, sign(0) = 0, Keras 3 weight decay, dynamic
 * hyperparameters, sparse gradients (the dense equivalent, duplicates
 * summed), the Keras test golden values, config keys, defaults, round trip,
 * bad values, and thread-count independence. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 25
#define N 7

/* Deterministic gradients of both signs; element 0 is 0 at step 0 and
 * element 3 is 0 at every step (the update is then sign(beta_1 * m) = 0). */
static double grad_at(int k, int i)
{
    if (i == 3 || (i == 0 && k == 0)) return 0.0;
    return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k;
}
static double init_at(int i) { return 0.5 - 0.3 * i; }

typedef struct ref {
    double lr, beta_1, beta_2, wd;
} ref;

static double sgn(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }

/* The published rule in double precision, with Keras 3's decoupled weight
 * decay before the update. Returns the smallest |c| / scale seen over the
 * non-zero arguments of sign (how far the data stays from a sign flip). */
static double ref_run(const ref *r, double *w, double *m, int steps)
{
    double margin = INFINITY;
    for (int i = 0; i < N; i++) w[i] = init_at(i), m[i] = 0;
    for (int k = 0; k < steps; k++)
        for (int i = 0; i < N; i++) {
            double g = grad_at(k, i);
            w[i] -= w[i] * r->wd * r->lr;
            double c = r->beta_1 * m[i] + (1 - r->beta_1) * g;
            double scale = fabs(r->beta_1 * m[i]) + fabs((1 - r->beta_1) * g);
            if (scale > 0 && fabs(c) / scale < margin) margin = fabs(c) / scale;
            w[i] -= r->lr * sgn(c);
            m[i] = r->beta_2 * m[i] + (1 - r->beta_2) * g;
        }
    return margin;
}



static void step_dense(optim_optimizer *opt, optim_var *w, optim_dtype dt, const double *g,
                       int32_t rank, const int64_t *shape, int64_t n)
{
    float *gf = malloc((size_t)n * sizeof *gf);
    for (int64_t i = 0; i < n; i++) gf[i] = (float)g[i];
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(
                            dt, dt == OPTIM_F32 ? (void *)gf : (void *)g, rank, shape)),
                        w};
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    if (rc) print_error("%s\n", optim_errmsg(opt));
    assert_int_equal(rc, 0);
    free(gf);
}

/* Runs `steps` dense steps of grad_at on a fresh N-vector. */
static optim_var *run_dense(optim_optimizer *opt, optim_dtype dt, int steps)
{
    double init[N];
    for (int i = 0; i < N; i++) init[i] = init_at(i);
    int64_t shape[1] = {N};
    optim_var *w = optim_test_var("w", dt, 1, shape, init);
    for (int k = 0; k < steps; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        step_dense(opt, w, dt, g, 1, shape, N);
    }
    assert_int_equal(optim_iterations(opt), steps);
    return w;
}

static void check_trajectory(const char *json, const ref *r)
{
    double wr[N], mr[N];
    double margin = ref_run(r, wr, mr, STEPS);
    /* The test data keeps every non-zero sign argument well away from 0,
     * so f32 rounding cannot flip a sign. */
    assert_true(margin > 1e-4);
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = run_dense(opt, dt, STEPS);
        double rtol = d ? 1e-12 : 1e-5, atol = d ? 1e-13 : 1e-6;
        for (int i = 0; i < N; i++) assert_close(optim_var_get(w, i), wr[i], rtol, atol);
        optim_var *m = optim_get_slot(opt, w, "m");
        assert_non_null(m);
        for (int i = 0; i < N; i++) assert_close(optim_var_get(m, i), mr[i], rtol, atol);
        /* Element 3 never had a gradient: m = 0, sign(0) = 0, w unchanged
         * (up to weight decay). */
        if (r->wd == 0) assert_true(optim_var_get(w, 3) == (d ? init_at(3) : (double)(float)init_at(3)));
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

static void test_defaults(void **s)
{
    (void)s;
    ref r = {0.001, 0.9, 0.99, 0};
    check_trajectory("\"lion\"", &r);
    check_trajectory("{\"class_name\": \"Lion\", \"config\": {}}", &r);
}

static void test_options(void **s)
{
    (void)s;
    ref r = {0.05, 0.7, 0.95, 0};
    check_trajectory("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.05, "
                     "\"beta_1\": 0.7, \"beta_2\": 0.95}}", &r);
    /* beta_1 = 1 is allowed (the range is (0, 1]): sign(m), m from beta_2. */
    ref one = {0.01, 1.0, 0.5, 0};
    check_trajectory("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.01, "
                     "\"beta_1\": 1.0, \"beta_2\": 0.5}}", &one);
}

static void test_weight_decay_trajectory(void **s)
{
    (void)s;
    ref r = {0.02, 0.9, 0.99, 0.3};
    check_trajectory("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.02, "
                     "\"weight_decay\": 0.3}}", &r);
}

/* sign(0) = 0: an exact zero argument leaves w unchanged (beta_1 = beta_2 =
 * 0.5: g = 1 gives m = 0.5; then g = -0.5 gives 0.25 - 0.25 = 0). */
static void test_sign_zero(void **s)
{
    (void)s;
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.25, "
                                    "\"beta_1\": 0.5, \"beta_2\": 0.5}}");
        double init = 1.0;
        optim_var *w = optim_test_var("w", dt, 0, NULL, &init);
        const double gs[4] = {1.0, -0.5, 0.0, -0.0};
        const double want_w[4] = {0.75, 0.75, 0.75, 0.75}, want_m[4] = {0.5, 0.0, 0.0, 0.0};
        for (int k = 0; k < 4; k++) {
            step_dense(opt, w, dt, &gs[k], 0, NULL, 1);
            assert_true(optim_var_get(w, 0) == want_w[k]);
            assert_true(optim_var_get(optim_get_slot(opt, w, "m"), 0) == want_m[k]);
        }
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

/* f32 bit for bit with TF's op order and float32 constants: beta cast to
 * float32 first, 1 - beta in float32, w - lr * sign(m * b1 + g * c1),
 * m * b2 + g * c2. */
static void test_f32_bitwise(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.003}}");
    double init[N];
    float w[N], m[N] = {0};
    for (int i = 0; i < N; i++) init[i] = init_at(i), w[i] = (float)init[i];
    int64_t n = N;
    optim_var *v = optim_test_var("w", OPTIM_F32, 1, &n, init);
    const float lr = 0.003f, b1 = 0.9f, b2 = 0.99f, c1 = 1.0f - b1, c2 = 1.0f - b2;
    assert_true(c1 != (float)(1.0 - 0.9)); /* cast first, then 1 - beta */
    for (int k = 0; k < STEPS; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        step_dense(opt, v, OPTIM_F32, g, 1, &n, N);
        for (int i = 0; i < N; i++) {
            float gf = (float)g[i], c = m[i] * b1 + gf * c1;
            w[i] = w[i] - lr * (c > 0 ? 1.0f : c < 0 ? -1.0f : 0.0f);
            m[i] = m[i] * b2 + gf * c2;
        }
        assert_memory_equal(optim_var_data(v), w, sizeof w);
        assert_memory_equal(optim_var_data(optim_get_slot(opt, v, "m")), m, sizeof m);
    }
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* ---- Keras's own tests (keras/src/optimizers/lion_test.py) ------------------------ */

static void test_keras_single_step(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.5}}");
    double init[4] = {1, 2, 3, 4}, g[4] = {1, 6, 7, 2}, want[4] = {0.5, 1.5, 2.5, 3.5};
    int64_t n = 4;
    optim_var *w = optim_test_var("w", OPTIM_F32, 1, &n, init);
    step_dense(opt, w, OPTIM_F32, g, 1, &n, 4);
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(w, i), want[i], 1e-4, 1e-4);
    optim_destroy(opt);
    optim_var_destroy(w);
}

static void test_keras_golden(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("\"Lion\"");
    double ones[10], first[10], grads[10];
    for (int i = 0; i < 10; i++) ones[i] = 1, first[i] = 0.01, grads[i] = 0.1 * (i + 1);
    int64_t n = 10;
    optim_var *x = optim_test_var("x", OPTIM_F32, 1, &n, ones);
    const double golden[5] = {0.999, 0.998, 0.997, 0.996, 0.995};
    step_dense(opt, x, OPTIM_F32, first, 1, &n, 10);
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 10; i++) assert_close(optim_var_get(x, i), golden[k], 5e-4, 5e-4);
        step_dense(opt, x, OPTIM_F32, grads, 1, &n, 10);
    }
    optim_destroy(opt);
    optim_var_destroy(x);
}

/* Zero gradients, weight_decay 0.004, lr 1: var1 is decayed by three
 * optimizers; "exclude" (by name) and var3 (by variable) are not. */
static void test_keras_weight_decay(void **s)
{
    (void)s;
    const char *cfg = "{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 1.0, \"weight_decay\": 0.004}}";
    double two = 2.0;
    optim_var *v1 = optim_test_var("var1", OPTIM_F32, 0, NULL, &two);
    optim_var *v2 = optim_test_var("exclude", OPTIM_F32, 0, NULL, &two);
    optim_var *v3 = optim_test_var("var3", OPTIM_F32, 0, NULL, &two);
    optim_tensor g = optim_tensor_make(OPTIM_F32, &(float){0}, 0, NULL);
    optim_optimizer *o1 = optim_test_make(cfg), *o2 = optim_test_make(cfg), *o3 = optim_test_make(cfg);
    optim_grad_var p1[1] = {{optim_grad_dense(g), v1}};
    assert_int_equal(optim_apply_gradients(o1, p1, 1, 0), 0);
    const char *pat[1] = {"exclude"};
    assert_int_equal(optim_exclude_from_weight_decay(o2, NULL, 0, pat, 1), 0);
    optim_grad_var p2[2] = {{optim_grad_dense(g), v1}, {optim_grad_dense(g), v2}};
    assert_int_equal(optim_apply_gradients(o2, p2, 2, 0), 0);
    assert_int_equal(optim_exclude_from_weight_decay(o3, &v3, 1, NULL, 0), 0);
    optim_grad_var p3[2] = {{optim_grad_dense(g), v1}, {optim_grad_dense(g), v3}};
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

/* ---- dynamic hyperparameters ---------------------------------------------------- */

static double beta_1_fn(void *user) { return *(double *)user; }
static double lr_sched(void *user, int64_t step) { (void)user; return 0.1 / (1.0 + (double)step); }

static void test_dynamic_hypers(void **s)
{
    (void)s;
    optim_optimizer *opt = optim_test_make("\"Lion\"");
    double b1 = 0.9;
    assert_int_equal(optim_set_hyper_fn(opt, "beta_1", beta_1_fn, &b1), 0);
    assert_int_equal(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), 0);
    double init[N], w[N], m[N];
    for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i), m[i] = 0;
    int64_t shape[1] = {N};
    optim_var *v = optim_test_var("w", OPTIM_F64, 1, shape, init);
    for (int k = 0; k < 8; k++) {
        b1 = 0.5 + 0.05 * k;
        if (k == 5) assert_int_equal(optim_set_hyper(opt, "beta_2", 0.5), 0);
        double b2 = k >= 5 ? 0.5 : 0.99, lr = 0.1 / (1.0 + k), g[N];
        for (int i = 0; i < N; i++) {
            g[i] = grad_at(k, i);
            w[i] -= lr * sgn(b1 * m[i] + (1 - b1) * g[i]);
            m[i] = b2 * m[i] + (1 - b2) * g[i];
        }
        step_dense(opt, v, OPTIM_F64, g, 1, shape, N);
        for (int i = 0; i < N; i++) assert_close(optim_var_get(v, i), w[i], 1e-13, 1e-15);
    }
    /* A callable giving beta_1 = 0 fails the step, naming the key and range,
     * and changes nothing. */
    b1 = 0.0;
    double g[N] = {1, 1, 1, 1, 1, 1, 1}, before = optim_var_get(v, 0);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, shape)), v};
    assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ERANGE);
    assert_non_null(strstr(optim_errmsg(opt), "beta_1"));
    assert_non_null(strstr(optim_errmsg(opt), "(0, 1]"));
    assert_int_equal(optim_iterations(opt), 8);
    assert_true(optim_var_get(v, 0) == before);
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* ---- sparse ----------------------------------------------------------------------- */

#define ROWS 6
#define COLS 3
#define SP_STEPS 4

static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }

/* Rows 0..4 are indexed at some step (with duplicates); row 5 never is. */
static const int64_t sp_idx[SP_STEPS][4] = {{1, 4, 1, 1}, {0, 4, 2, 4}, {2, 2, 3, 1}, {0, 0, 4, 3}};
static double sp_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c) + 0.05; }

static optim_var *run_sparse(optim_optimizer *opt, optim_dtype dt, int as_dense, int steps)
{
    double init[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) init[r * COLS + c] = table_init(r, c);
    int64_t shape[2] = {ROWS, COLS};
    optim_var *v = optim_test_var("table", dt, 2, shape, init);
    for (int k = 0; k < steps; k++) {
        double vals[4 * COLS], dense[ROWS * COLS] = {0};
        float fv[4 * COLS], fd[ROWS * COLS] = {0};
        for (int j = 0; j < 4; j++)
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = sp_val(k, j, c);
                fv[j * COLS + c] = (float)sp_val(k, j, c);
                /* Duplicates summed in order of appearance from zero. */
                dense[sp_idx[k][j] * COLS + c] += vals[j * COLS + c];
                fd[sp_idx[k][j] * COLS + c] += fv[j * COLS + c];
            }
        int f = dt == OPTIM_F32;
        int64_t vs[2] = {4, COLS};
        optim_grad_var p = {
            as_dense ? optim_grad_dense(optim_tensor_make(dt, f ? (void *)fd : (void *)dense, 2, shape))
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

/* Keras 3: sparse == the dense equivalent, bit for bit, with and without
 * weight decay; and both == the reference. */
static void test_sparse_equals_dense(void **s)
{
    (void)s;
    const char *cfgs[2] = {"{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9}}",
                           "{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.1, \"beta_1\": 0.8, \"beta_2\": 0.9, \"weight_decay\": 0.5}}"};
    for (int c = 0; c < 2; c++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *o1 = optim_test_make(cfgs[c]), *o2 = optim_test_make(cfgs[c]);
            optim_var *sv = run_sparse(o1, dt, 0, SP_STEPS), *dv = run_sparse(o2, dt, 1, SP_STEPS);
            assert_vars_bitwise(sv, dv);
            assert_vars_bitwise(optim_get_slot(o1, sv, "m"), optim_get_slot(o2, dv, "m"));
            /* Reference: duplicates summed, every row updated with g = 0 where
             * there is no index. */
            double wd = c ? 0.5 : 0.0, w[ROWS][COLS], m[ROWS][COLS] = {{0}};
            for (int r = 0; r < ROWS; r++)
                for (int cc = 0; cc < COLS; cc++) w[r][cc] = table_init(r, cc);
            for (int k = 0; k < SP_STEPS; k++) {
                double g[ROWS][COLS] = {{0}};
                for (int j = 0; j < 4; j++)
                    for (int cc = 0; cc < COLS; cc++) g[sp_idx[k][j]][cc] += sp_val(k, j, cc);
                for (int r = 0; r < ROWS; r++)
                    for (int cc = 0; cc < COLS; cc++) {
                        w[r][cc] -= w[r][cc] * wd * 0.1;
                        w[r][cc] -= 0.1 * sgn(0.8 * m[r][cc] + 0.2 * g[r][cc]);
                        m[r][cc] = 0.9 * m[r][cc] + 0.1 * g[r][cc];
                    }
            }
            double rtol = d ? 1e-12 : 1e-5;
            optim_var *mv = optim_get_slot(o1, sv, "m");
            for (int r = 0; r < ROWS; r++)
                for (int cc = 0; cc < COLS; cc++) {
                    assert_close(optim_var_get(sv, r * COLS + cc), w[r][cc], rtol, 1e-6);
                    assert_close(optim_var_get(mv, r * COLS + cc), m[r][cc], rtol, 1e-7);
                }
            optim_destroy(o1);
            optim_destroy(o2);
            optim_var_destroy(sv);
            optim_var_destroy(dv);
        }
}

/* Row by row: a row never indexed keeps m = 0 and w (sign(0) = 0); a row
 * indexed earlier but not now still moves by lr * sign(beta_1 * m) and its m
 * decays (not lazy). */
static void test_sparse_rows(void **s)
{
    (void)s;
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.25, "
                                    "\"beta_1\": 0.5, \"beta_2\": 0.5}}");
        double init[4] = {1, 2, 3, 4};
        int64_t shape[2] = {4, 1}, vs[2] = {1, 1};
        optim_var *v = optim_test_var("e", dt, 2, shape, init);
        int64_t i0 = 0, i3 = 3;
        float onef = 1.0f;
        double oned = 1.0;
        optim_tensor one = optim_tensor_make(dt, d ? (void *)&oned : (void *)&onef, 2, vs);
        optim_grad_var p = {optim_grad_sparse(&i0, 1, one), v};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        optim_var *m = optim_get_slot(opt, v, "m");
        assert_true(optim_var_get(v, 0) == 0.75 && optim_var_get(m, 0) == 0.5);
        p.grad.sparse.indices = &i3;
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
        /* Row 0: sign(0.5 * 0.5) = 1 -> 0.5; m = 0.25. */
        assert_true(optim_var_get(v, 0) == 0.5 && optim_var_get(m, 0) == 0.25);
        /* Rows 1, 2: never indexed, bit-identical. */
        assert_true(optim_var_get(v, 1) == 2 && optim_var_get(v, 2) == 3);
        assert_true(optim_var_get(m, 1) == 0 && optim_var_get(m, 2) == 0);
        assert_true(optim_var_get(v, 3) == 3.75 && optim_var_get(m, 3) == 0.5);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

/* ---- config ------------------------------------------------------------------------ */

static const char *const KEYS[] = {
    "name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue",
    "use_ema", "ema_momentum", "ema_overwrite_frequency", "loss_scale_factor",
    "gradient_accumulation_steps", "beta_1", "beta_2",
};
#define N_KEYS (sizeof KEYS / sizeof *KEYS)

static cJSON *config_of(optim_optimizer *opt)
{
    char *s = optim_get_config(opt);
    assert_non_null(s);
    cJSON *c = cJSON_Parse(s);
    optim_free(s);
    assert_non_null(c);
    return c;
}

static void assert_keys_exactly(const cJSON *obj, const char *const *keys, size_t n)
{
    size_t count = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, obj)
    {
        count++;
        int known = 0;
        for (size_t k = 0; k < n; k++) known |= strcmp(item->string, keys[k]) == 0;
        if (!known) print_error("unexpected config key '%s'\n", item->string);
        assert_true(known);
    }
    assert_int_equal(count, n);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_config(void **s)
{
    (void)s;
    optim_optimizer *opt;
    optim_error err;
    assert_int_equal(optim_create(&opt, &optim_lion_class, NULL, &err), 0);
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, KEYS, N_KEYS);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring, "lion");
    assert_true(num(c, "learning_rate") == 0.001);
    assert_true(num(c, "beta_1") == 0.9);
    assert_true(num(c, "beta_2") == 0.99);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c, "weight_decay")));
    cJSON_Delete(c);
    const char *names[4];
    optim_destroy(opt);

    /* Keras's test_config values, round trip through serialize. */
    opt = optim_test_make("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.5, \"beta_1\": 0.5, "
               "\"beta_2\": 0.67, \"weight_decay\": 0.01, \"clipnorm\": 1.0}}");
    char *ser = optim_serialize(opt);
    optim_optimizer *back = optim_test_make(ser);
    char *ser2 = optim_serialize(back);
    assert_string_equal(ser, ser2);
    c = cJSON_Parse(ser);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(c, "config");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "class_name")->valuestring, "Lion");
    assert_keys_exactly(cfg, KEYS, N_KEYS);
    assert_true(num(cfg, "beta_2") == 0.67);
    assert_true(num(cfg, "clipnorm") == 1.0);
    cJSON_Delete(c);
    optim_free(ser);
    optim_free(ser2);
    /* Slot names after a step. */
    double z[1] = {0};
    int64_t one = 1;
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, &one, z);
    step_dense(back, w, OPTIM_F64, z, 1, &one, 1);
    assert_int_equal(optim_get_slot_names(back, names, 4), 1);
    assert_string_equal(names[0], "m");
    assert_int_equal(optim_weights_count(back), 2);
    assert_string_equal(optim_weight_name(back, 1), "w/m");
    optim_destroy(opt);
    optim_destroy(back);
    optim_var_destroy(w);
}

static void expect_error(const char *json, int code, const char *needle1, const char *needle2)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("%s: rc %d (%s), expected %d\n", json, rc, err.msg, code);
    assert_int_equal(rc, code);
    assert_null(opt);
    if (needle1 && !strstr(err.msg, needle1)) print_error("'%s' lacks '%s'\n", err.msg, needle1);
    if (needle1) assert_non_null(strstr(err.msg, needle1));
    if (needle2 && !strstr(err.msg, needle2)) print_error("'%s' lacks '%s'\n", err.msg, needle2);
    if (needle2) assert_non_null(strstr(err.msg, needle2));
}

static void test_bad_config(void **s)
{
    (void)s;
    /* beta_1 in (0, 1], as Keras raises for beta_1 <= 0 or > 1. */
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"beta_1\": 0.0}}", OPTIM_ERANGE, "beta_1", "(0, 1]");
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"beta_1\": -0.1}}", OPTIM_ERANGE, "beta_1", "(0, 1]");
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"beta_1\": 1.1}}", OPTIM_ERANGE, "beta_1", "(0, 1]");
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"beta_2\": 1.5}}", OPTIM_ERANGE, "beta_2", "[0, 1]");
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"beta_2\": -0.5}}", OPTIM_ERANGE, "beta_2", "[0, 1]");
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": -1}}", OPTIM_ERANGE, "learning_rate", NULL);
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"beta_1\": true}}", OPTIM_ETYPE, "beta_1", NULL);
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"momentum\": 0.9}}", OPTIM_EKEY, "momentum", "beta_1");
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"epsilon\": 1e-7}}", OPTIM_EKEY, "epsilon", NULL);
    /* Keras 3 only. */
    expect_error("{\"class_name\": \"Lion\", \"config\": {\"is_legacy_optimizer\": true}}", OPTIM_ENOTSUP, "Lion", "Keras 3");
    optim_options o = optim_options_defaults();
    o.generation = OPTIM_LEGACY;
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_int_equal(optim_create(&opt, &optim_lion_class, &o, &err), OPTIM_ENOTSUP);
    assert_null(opt);
    /* set_hyper: refused values leave the old one. */
    opt = optim_test_make("\"LION\"");
    assert_int_equal(optim_set_hyper(opt, "beta_1", 0.0), OPTIM_ERANGE);
    assert_non_null(strstr(optim_errmsg(opt), "beta_1"));
    assert_int_equal(optim_set_hyper(opt, "beta_2", 2.0), OPTIM_ERANGE);
    double v;
    assert_int_equal(optim_get_hyper(opt, "beta_1", &v), 0);
    assert_true(v == 0.9);
    assert_int_equal(optim_get_hyper(opt, "beta_2", &v), 0);
    assert_true(v == 0.99);
    assert_int_equal(optim_set_hyper(opt, "beta_1", 1.0), 0);
    assert_int_equal(optim_set_hyper(opt, "epsilon", 1.0), OPTIM_EKEY);
    optim_destroy(opt);
}

/* ---- threads ----------------------------------------------------------------------- */

static void test_threads_bitwise(void **s)
{
    (void)s;
    const int64_t n = 100003; /* many chunks, ragged end */
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * (double)i);
    optim_var *vars[2];
    optim_optimizer *opts[2];
    for (int t = 0; t < 2; t++) {
        opts[t] = optim_test_make("{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.01, \"weight_decay\": 0.1, \"global_clipnorm\": 10}}");
        assert_int_equal(optim_set_num_threads(opts[t], t + 1), 0);
        vars[t] = optim_test_var("big", OPTIM_F32, 1, &n, init);
        for (int k = 0; k < 4; k++) {
            for (int64_t i = 0; i < n; i++) g[i] = (float)cos(0.37 * (double)i + k);
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), vars[t]};
            assert_int_equal(optim_apply_gradients(opts[t], &p, 1, 0), 0);
        }
    }
    assert_vars_bitwise(vars[0], vars[1]);
    assert_vars_bitwise(optim_get_slot(opts[0], vars[0], "m"), optim_get_slot(opts[1], vars[1], "m"));
    for (int t = 0; t < 2; t++) {
        optim_destroy(opts[t]);
        optim_var_destroy(vars[t]);
    }
    free(init);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_weight_decay_trajectory),
        cmocka_unit_test(test_sign_zero),
        cmocka_unit_test(test_f32_bitwise),
        cmocka_unit_test(test_keras_single_step),
        cmocka_unit_test(test_keras_golden),
        cmocka_unit_test(test_keras_weight_decay),
        cmocka_unit_test(test_dynamic_hypers),
        cmocka_unit_test(test_sparse_equals_dense),
        cmocka_unit_test(test_sparse_rows),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
