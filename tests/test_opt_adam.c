/* Adam (and AMSGrad) against independent references written here from the
 * published formulas:
 *
 *   t = k + 1, lr_k = lr / (1 + decay * k)          (decay: legacy only)
 *   m = beta_1 * m + (1 - beta_1) * g
 *   v = beta_2 * v + (1 - beta_2) * g^2
 *   vhat = max(vhat, v)                              (amsgrad)
 *   w = w - lr_k * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v or vhat) + epsilon)
 *
 * in double precision: dense trajectories (f32 and f64, both generations,
 * amsgrad on and off), sparse gradients with duplicate indices (Keras 3: the
 * dense result bit for bit; legacy: every row of m, v and w moves), dynamic
 * hyperparameters, and the float32 order of operations of each generation
 * (Keras 3 Adam.update_step; legacy: TF's ApplyAdam kernel and
 * Adam._resource_apply_sparse), emulated in float and compared bit for bit.
 * Config: key sets, defaults, round trips, ranges, unknown keys. Keras's own
 * test values (adam_test.py, the legacy docstring) as extra checks. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 25
#define N 9

/* Gradients that shrink over the steps (so that AMSGrad's vhat exceeds v),
 * of both signs. */
static double grad_at(int k, int i)
{
    return (sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.03 * (k % 4)) * exp(-0.15 * k);
}
static double init_at(int i) { return 0.5 - 0.3 * i; }

typedef struct ref {
    double lr, b1, b2, eps, decay;
    int ams;
} ref;

typedef struct traj {
    double w[N], m[N], v[N], vh[N];
} traj;

/* One Adam step in double on n elements. */
static void ref_step(const ref *r, int k, double beta_1, double *w, double *m, double *v, double *vh,
                     const double *g, int n)
{
    double t = k + 1, lr = r->lr / (1.0 + r->decay * k);
    double a = lr * sqrt(1 - pow(r->b2, t)) / (1 - pow(beta_1, t));
    for (int i = 0; i < n; i++) {
        m[i] = beta_1 * m[i] + (1 - beta_1) * g[i];
        v[i] = r->b2 * v[i] + (1 - r->b2) * g[i] * g[i];
        vh[i] = fmax(vh[i], v[i]);
        w[i] -= a * m[i] / (sqrt(r->ams ? vh[i] : v[i]) + r->eps);
    }
}

static void ref_run(const ref *r, traj *s, int steps)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < N; i++) s->w[i] = init_at(i);
    for (int k = 0; k < steps; k++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        ref_step(r, k, r->b1, s->w, s->m, s->v, s->vh, g, N);
    }
}



static void step_ok(optim_optimizer *opt, optim_grad_var *p, size_t n)
{
    int rc = optim_apply_gradients(opt, p, n, 0);
    if (rc) print_error("%s\n", optim_errmsg(opt));
    assert_int_equal(rc, 0);
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
        step_ok(opt, &p, 1);
    }
    assert_int_equal(optim_iterations(opt), steps);
    return w;
}

static void check_slot(optim_optimizer *opt, optim_var *w, const char *name, const double *want,
                       double rtol, double atol)
{
    optim_var *s = optim_get_slot(opt, w, name);
    assert_non_null(s);
    for (int i = 0; i < N; i++) assert_close(optim_var_get(s, i), want[i], rtol, atol);
}

/* Dense trajectory in f32 and f64 against ref_run, slots included. */
static void check_trajectory(const char *json, const ref *r)
{
    traj s;
    ref_run(r, &s, STEPS);
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = run_dense(opt, dt, STEPS);
        double rtol = d ? 1e-12 : 2e-5, atol = d ? 1e-14 : 2e-6;
        for (int i = 0; i < N; i++) assert_close(optim_var_get(w, i), s.w[i], rtol, atol);
        check_slot(opt, w, "m", s.m, rtol, atol);
        check_slot(opt, w, "v", s.v, rtol, atol);
        if (r->ams) check_slot(opt, w, "vhat", s.vh, rtol, atol);
        else assert_null(optim_get_slot(opt, w, "vhat"));
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

#define ADAM(cfg) "{\"class_name\": \"Adam\", \"config\": {" cfg "}}"
#define LEGACY "\"is_legacy_optimizer\": true"

static void test_dense_defaults(void **st)
{
    (void)st;
    ref r = {0.001, 0.9, 0.999, 1e-7, 0, 0};
    check_trajectory(ADAM(""), &r);
    check_trajectory(ADAM(LEGACY), &r);
    check_trajectory("\"adam\"", &r);
}

static void test_dense_options(void **st)
{
    (void)st;
    ref r = {0.05, 0.8, 0.95, 1e-3, 0, 0};
    check_trajectory(ADAM("\"learning_rate\": 0.05, \"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 0.001"), &r);
    check_trajectory(ADAM("\"learning_rate\": 0.05, \"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 0.001, " LEGACY), &r);
}

static void test_amsgrad(void **st)
{
    (void)st;
    ref r = {0.02, 0.9, 0.99, 1e-7, 0, 1};
    traj s;
    ref_run(&r, &s, STEPS);
    int differs = 0; /* the gradients make vhat exceed v somewhere */
    for (int i = 0; i < N; i++) differs += s.vh[i] > s.v[i] * 1.01;
    assert_true(differs > 0);
    check_trajectory(ADAM("\"learning_rate\": 0.02, \"beta_2\": 0.99, \"amsgrad\": true"), &r);
    check_trajectory(ADAM("\"learning_rate\": 0.02, \"beta_2\": 0.99, \"amsgrad\": true, " LEGACY), &r);
}

static void test_legacy_decay(void **st)
{
    (void)st;
    ref r = {0.05, 0.9, 0.999, 1e-7, 0.2, 0};
    check_trajectory(ADAM("\"learning_rate\": 0.05, \"decay\": 0.2, " LEGACY), &r);
    r.ams = 1;
    check_trajectory(ADAM("\"learning_rate\": 0.05, \"decay\": 0.2, \"amsgrad\": true, " LEGACY), &r);
    /* `lr` is the legacy alias of learning_rate. */
    r.ams = 0;
    check_trajectory(ADAM("\"lr\": 0.05, \"decay\": 0.2, " LEGACY), &r);
}

/* Legacy: `epsilon or backend.epsilon()`, so 0 and None mean 1e-7 (and
 * get_config writes 1e-07, keys in Keras's order); Keras 3 uses 0. */
static void test_epsilon_zero(void **st)
{
    (void)st;
    for (int c = 0; c < 3; c++) {
        int legacy = c > 0;
        optim_optimizer *opt = optim_test_make(c == 2 ? ADAM("\"epsilon\": null, \"learning_rate\": 0.1, \"amsgrad\": true, " LEGACY)
                                    : c == 1 ? ADAM("\"epsilon\": 0, \"learning_rate\": 0.1, " LEGACY)
                                             : ADAM("\"epsilon\": 0, \"learning_rate\": 0.1"));
        char *cfg = optim_get_config(opt);
        if (legacy)
            assert_non_null(strstr(cfg, c == 2 ? "\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":true}"
                                               : "\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":false}"));
        else
            assert_non_null(strstr(cfg, "\"epsilon\":0.0,\"amsgrad\":false}"));
        optim_free(cfg);
        double zero = 0, g = 1e-6;
        optim_var *w = optim_test_var("w", OPTIM_F64, 0, NULL, &zero);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, &g, 0, NULL)), w};
        step_ok(opt, &p, 1);
        double m = 0.1 * g, v = 0.001 * g * g, a = 0.1 * sqrt(1 - 0.999) / (1 - 0.9);
        double want = -a * m / (sqrt(v) + (legacy ? 1e-7 : 0.0));
        assert_close(optim_var_get(w, 0), want, 1e-12, 0);
        if (!legacy) assert_close(optim_var_get(w, 0), -0.1, 1e-9, 0);
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

/* ---- float32 order of operations -------------------------------------------- */

/* Keras 3 (Adam.update_step) and legacy dense (ApplyAdam), emulated in float:
 * the only difference is 1 - beta: Python double arithmetic cast to float32
 * in Keras 3, float32 arithmetic in TF's kernel. */
static void emul_dense_f32(int legacy, int ams, float *w, float *m, float *v, float *vh, int k,
                           const float *g, int n, double lr, double b1, double b2, double eps)
{
    float t = (float)(k + 1), fb1 = (float)b1, fb2 = (float)b2, l = (float)lr;
    float p1 = powf(fb1, t), p2 = powf(fb2, t);
    float alpha = l * sqrtf(1.0f - p2) / (1.0f - p1);
    float c1 = legacy ? 1.0f - fb1 : (float)(1.0 - b1), c2 = legacy ? 1.0f - fb2 : (float)(1.0 - b2);
    float e = (float)eps;
    for (int i = 0; i < n; i++) {
        m[i] += (g[i] - m[i]) * c1;
        v[i] += (g[i] * g[i] - v[i]) * c2;
        float d = v[i];
        if (ams) {
            vh[i] = fmaxf(vh[i], v[i]);
            d = vh[i];
        }
        w[i] -= (m[i] * alpha) / (sqrtf(d) + e);
    }
}

/* Legacy Adam._resource_apply_sparse in float: all rows decay, indexed rows
 * get the scaled gradient added, every row of w moves. */
static void emul_legacy_sparse_f32(int ams, float *w, float *m, float *v, float *vh, int rows,
                                   int cols, const int *touched, const float *g, int k, double lr,
                                   double b1, double b2, double eps)
{
    float t = (float)(k + 1), fb1 = (float)b1, fb2 = (float)b2, l = (float)lr;
    float p1 = powf(fb1, t), p2 = powf(fb2, t);
    float lr_t = l * (sqrtf(1.0f - p2) / (1.0f - p1));
    float c1 = 1.0f - fb1, c2 = 1.0f - fb2, e = (float)eps;
    for (int i = 0; i < rows * cols; i++) {
        m[i] = m[i] * fb1;
        v[i] = v[i] * fb2;
        if (touched[i / cols]) {
            m[i] = m[i] + g[i] * c1;
            v[i] = v[i] + (g[i] * g[i]) * c2;
        }
        float d = v[i];
        if (ams) {
            vh[i] = fmaxf(vh[i], v[i]);
            d = vh[i];
        }
        w[i] = w[i] - lr_t * m[i] / (sqrtf(d) + e);
    }
}

static void assert_floats_bitwise(optim_var *x, const float *want, int n)
{
    assert_int_equal(optim_var_numel(x), n);
    assert_memory_equal(optim_var_data(x), want, (size_t)n * sizeof(float));
}

static void test_f32_operation_order(void **st)
{
    (void)st;
    const char *cfg[2][2] = {
        {ADAM("\"learning_rate\": 0.01"), ADAM("\"learning_rate\": 0.01, \"amsgrad\": true")},
        {ADAM("\"learning_rate\": 0.01, " LEGACY), ADAM("\"learning_rate\": 0.01, \"amsgrad\": true, " LEGACY)},
    };
    float last_w[2][N];
    for (int legacy = 0; legacy < 2; legacy++)
        for (int ams = 0; ams < 2; ams++) {
            optim_optimizer *opt = optim_test_make(cfg[legacy][ams]);
            optim_var *w = run_dense(opt, OPTIM_F32, STEPS);
            float ew[N], em[N] = {0}, ev[N] = {0}, eh[N] = {0};
            for (int i = 0; i < N; i++) ew[i] = (float)init_at(i);
            for (int k = 0; k < STEPS; k++) {
                float g[N];
                for (int i = 0; i < N; i++) g[i] = (float)grad_at(k, i);
                emul_dense_f32(legacy, ams, ew, em, ev, eh, k, g, N, 0.01, 0.9, 0.999, 1e-7);
            }
            assert_floats_bitwise(w, ew, N);
            assert_floats_bitwise(optim_get_slot(opt, w, "m"), em, N);
            assert_floats_bitwise(optim_get_slot(opt, w, "v"), ev, N);
            if (ams) assert_floats_bitwise(optim_get_slot(opt, w, "vhat"), eh, N);
            if (!ams) memcpy(last_w[legacy], optim_var_data(w), sizeof last_w[legacy]);
            optim_destroy(opt);
            optim_var_destroy(w);
        }
    /* The two generations round differently (0.1f vs 1.0f - 0.9f). */
    assert_true(memcmp(last_w[0], last_w[1], sizeof last_w[0]) != 0);
}

/* ---- sparse ------------------------------------------------------------------ */

#define ROWS 7
#define COLS 3
#define NIDX 5
#define SSTEPS 21

static double table_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
/* Row 6 is never indexed; duplicates in every step. */
static int sp_index(int k, int j)
{
    static const int idx[3][NIDX] = {{1, 4, 1, 1, 0}, {0, 4, 5, 4, 2}, {2, 2, 3, 1, 5}};
    return idx[k % 3][j];
}
static double sp_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c) * exp(-0.1 * k); }

/* SSTEPS sparse (or the equivalent dense) steps on a fresh table. */
static optim_var *run_sparse(optim_optimizer *opt, optim_dtype dt, int as_dense)
{
    double init[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) init[r * COLS + c] = table_init(r, c);
    int64_t shape[2] = {ROWS, COLS}, vs[2] = {NIDX, COLS};
    optim_var *v = optim_test_var("table", dt, 2, shape, init);
    for (int k = 0; k < SSTEPS; k++) {
        int64_t idx[NIDX];
        double vals[NIDX * COLS], dense[ROWS * COLS] = {0};
        float fv[NIDX * COLS], fd[ROWS * COLS] = {0};
        for (int j = 0; j < NIDX; j++) {
            idx[j] = sp_index(k, j);
            for (int c = 0; c < COLS; c++) {
                vals[j * COLS + c] = sp_val(k, j, c);
                fv[j * COLS + c] = (float)sp_val(k, j, c);
                dense[idx[j] * COLS + c] += vals[j * COLS + c];
                fd[idx[j] * COLS + c] += fv[j * COLS + c];
            }
        }
        int f = dt == OPTIM_F32;
        optim_grad_var p = {as_dense ? optim_grad_dense(optim_tensor_make(dt, f ? (void *)fd : (void *)dense, 2, shape))
                                     : optim_grad_sparse(idx, NIDX, optim_tensor_make(dt, f ? (void *)fv : (void *)vals, 2, vs)),
                            v};
        step_ok(opt, &p, 1);
    }
    return v;
}

static void assert_vars_bitwise(optim_var *a, optim_var *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(optim_var_numel(a), optim_var_numel(b));
    assert_memory_equal(optim_var_data(a), optim_var_data(b),
                        (size_t)optim_var_numel(a) * optim_dtype_size(optim_var_dtype(a)));
}

/* Keras 3: a sparse gradient gives exactly the dense result (duplicates
 * summed, zero gradient elsewhere). */
static void test_sparse_keras3_equals_dense(void **st)
{
    (void)st;
    const char *cfgs[] = {ADAM("\"learning_rate\": 0.01"), ADAM("\"learning_rate\": 0.01, \"amsgrad\": true")};
    for (int c = 0; c < 2; c++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            optim_optimizer *o1 = optim_test_make(cfgs[c]), *o2 = optim_test_make(cfgs[c]);
            optim_var *sv = run_sparse(o1, dt, 0), *dv = run_sparse(o2, dt, 1);
            assert_vars_bitwise(sv, dv);
            assert_vars_bitwise(optim_get_slot(o1, sv, "m"), optim_get_slot(o2, dv, "m"));
            assert_vars_bitwise(optim_get_slot(o1, sv, "v"), optim_get_slot(o2, dv, "v"));
            if (c) assert_vars_bitwise(optim_get_slot(o1, sv, "vhat"), optim_get_slot(o2, dv, "vhat"));
            optim_destroy(o1);
            optim_destroy(o2);
            optim_var_destroy(sv);
            optim_var_destroy(dv);
        }
}

/* The reference for a sparse run: duplicates summed, every row updated
 * (both generations give the dense equivalent up to rounding). */
static void ref_sparse(const ref *r, double *w, double *m, double *v, double *vh)
{
    for (int rr = 0; rr < ROWS; rr++)
        for (int c = 0; c < COLS; c++) w[rr * COLS + c] = table_init(rr, c);
    memset(m, 0, sizeof(double) * ROWS * COLS);
    memset(v, 0, sizeof(double) * ROWS * COLS);
    memset(vh, 0, sizeof(double) * ROWS * COLS);
    for (int k = 0; k < SSTEPS; k++) {
        double g[ROWS * COLS] = {0};
        for (int j = 0; j < NIDX; j++)
            for (int c = 0; c < COLS; c++) g[sp_index(k, j) * COLS + c] += sp_val(k, j, c);
        ref_step(r, k, r->b1, w, m, v, vh, g, ROWS * COLS);
    }
}

static void test_sparse_reference(void **st)
{
    (void)st;
    for (int legacy = 0; legacy < 2; legacy++)
        for (int ams = 0; ams < 2; ams++)
            for (int d = 0; d < 2; d++) {
                char json[256];
                snprintf(json, sizeof json, ADAM("\"learning_rate\": 0.01, \"amsgrad\": %s%s"),
                         ams ? "true" : "false", legacy ? ", " LEGACY : "");
                ref r = {0.01, 0.9, 0.999, 1e-7, 0, ams};
                double w[ROWS * COLS], m[ROWS * COLS], v[ROWS * COLS], vh[ROWS * COLS];
                ref_sparse(&r, w, m, v, vh);
                optim_optimizer *opt = optim_test_make(json);
                optim_var *x = run_sparse(opt, d ? OPTIM_F64 : OPTIM_F32, 0);
                optim_var *sm = optim_get_slot(opt, x, "m"), *sv = optim_get_slot(opt, x, "v");
                optim_var *sh = optim_get_slot(opt, x, "vhat");
                assert_true(ams ? sh != NULL : sh == NULL);
                double rtol = d ? 1e-12 : 2e-5, atol = d ? 1e-14 : 2e-6;
                for (int i = 0; i < ROWS * COLS; i++) {
                    assert_close(optim_var_get(x, i), w[i], rtol, atol);
                    assert_close(optim_var_get(sm, i), m[i], rtol, atol);
                    assert_close(optim_var_get(sv, i), v[i], rtol, atol);
                    if (ams) assert_close(optim_var_get(sh, i), vh[i], rtol, atol);
                }
                optim_destroy(opt);
                optim_var_destroy(x);
            }
}

/* Legacy sparse in float32: Adam._resource_apply_sparse's order, bit for bit. */
static void test_sparse_legacy_f32_operation_order(void **st)
{
    (void)st;
    /* A large learning rate makes the steps comparable to w, so that the
     * rounding of lr * (sqrt(1 - beta_2^t) / (1 - beta_1^t)) shows. */
    for (int c = 0; c < 4; c++) {
        int ams = c & 1;
        double lr = c < 2 ? 0.01 : 0.7;
        char json[256];
        snprintf(json, sizeof json, ADAM("\"learning_rate\": %g, \"amsgrad\": %s, " LEGACY), lr,
                 ams ? "true" : "false");
        optim_optimizer *opt = optim_test_make(json);
        optim_var *x = run_sparse(opt, OPTIM_F32, 0);
        float w[ROWS * COLS], m[ROWS * COLS] = {0}, v[ROWS * COLS] = {0}, vh[ROWS * COLS] = {0};
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) w[r * COLS + c] = (float)table_init(r, c);
        for (int k = 0; k < SSTEPS; k++) {
            float g[ROWS * COLS] = {0};
            int touched[ROWS] = {0};
            for (int j = 0; j < NIDX; j++) {
                touched[sp_index(k, j)] = 1;
                for (int c = 0; c < COLS; c++) g[sp_index(k, j) * COLS + c] += (float)sp_val(k, j, c);
            }
            emul_legacy_sparse_f32(ams, w, m, v, vh, ROWS, COLS, touched, g, k, lr, 0.9, 0.999, 1e-7);
        }
        assert_floats_bitwise(x, w, ROWS * COLS);
        assert_floats_bitwise(optim_get_slot(opt, x, "m"), m, ROWS * COLS);
        assert_floats_bitwise(optim_get_slot(opt, x, "v"), v, ROWS * COLS);
        if (ams) assert_floats_bitwise(optim_get_slot(opt, x, "vhat"), vh, ROWS * COLS);
        optim_destroy(opt);
        optim_var_destroy(x);
    }
}

/* Adam is not lazy in either generation: a row indexed once keeps moving
 * after, and a row never indexed (6) stays put only because its m is 0. */
static void test_sparse_rows_not_lazy(void **st)
{
    (void)st;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? ADAM("\"learning_rate\": 0.1, " LEGACY) : ADAM("\"learning_rate\": 0.1"));
        double init[4] = {1, 2, 3, 4};
        int64_t shape[2] = {4, 1}, vs[2] = {1, 1};
        optim_var *x = optim_test_var("e", OPTIM_F64, 2, shape, init);
        int64_t i0 = 0, i3 = 3;
        double one = 1.0;
        optim_grad_var p = {optim_grad_sparse(&i0, 1, optim_tensor_make(OPTIM_F64, &one, 2, vs)), x};
        step_ok(opt, &p, 1);
        double after1 = optim_var_get(x, 0);
        assert_close(after1, 0.9, 1e-6, 0); /* first step: -lr * sign(g) */
        p.grad.sparse.indices = &i3;
        step_ok(opt, &p, 1);
        assert_true(optim_var_get(x, 0) < after1); /* m of row 0 still moves it */
        assert_true(optim_get_slot(opt, x, "m") != NULL);
        double m1 = 1.0 * (1 - 0.9); /* m of row 0 after the first step */
        assert_true(optim_var_get(optim_get_slot(opt, x, "m"), 0) == (legacy ? m1 * 0.9 : m1 + (0 - m1) * (1 - 0.9)));
        assert_true(optim_var_get(x, 1) == 2 && optim_var_get(x, 2) == 3);
        /* Row 3's first gradient arrives at t = 2: bias-corrected by t = 2. */
        double a2 = 0.1 * sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
        assert_close(optim_var_get(x, 3), 4 - a2 * 0.1 / (sqrt(0.001) + 1e-7), 1e-12, 0);
        optim_destroy(opt);
        optim_var_destroy(x);
    }
}

/* ---- dynamic hyperparameters ----------------------------------------------- */

static double beta_fn(void *user) { return *(double *)user; }
static double lr_sched(void *user, int64_t step) { (void)user; return 0.05 / (1.0 + 0.5 * (double)step); }

static void test_dynamic(void **st)
{
    (void)st;
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? ADAM(LEGACY) : ADAM(""));
        double b1 = 0.9;
        assert_int_equal(optim_set_hyper_fn(opt, "beta_1", beta_fn, &b1), 0);
        assert_int_equal(optim_set_hyper_schedule(opt, "learning_rate", lr_sched, NULL), 0);
        assert_int_equal(optim_set_hyper(opt, "beta_2", 0.99), 0);
        double init[N], w[N], m[N] = {0}, v[N] = {0}, vh[N] = {0};
        for (int i = 0; i < N; i++) init[i] = w[i] = init_at(i);
        int64_t shape[1] = {N};
        optim_var *x = optim_test_var("w", OPTIM_F64, 1, shape, init);
        for (int k = 0; k < 8; k++) {
            b1 = 0.5 + 0.05 * k;
            ref r = {0.05 / (1.0 + 0.5 * k), 0, 0.99, 1e-7, 0, 0};
            double g[N];
            for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
            /* The bias correction uses this step's beta_1 to the power t. */
            ref_step(&r, k, b1, w, m, v, vh, g, N);
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, shape)), x};
            step_ok(opt, &p, 1);
            for (int i = 0; i < N; i++) assert_close(optim_var_get(x, i), w[i], 1e-12, 1e-14);
        }
        /* A callable beta_1 out of range fails the step and changes nothing. */
        b1 = 1.0;
        double g[N] = {0}, before = optim_var_get(x, 0);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, shape)), x};
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ERANGE);
        assert_non_null(strstr(optim_errmsg(opt), "beta_1"));
        assert_int_equal(optim_iterations(opt), 8);
        assert_true(optim_var_get(x, 0) == before);
        optim_destroy(opt);
        optim_var_destroy(x);
    }
}

/* ---- Keras's own numbers ------------------------------------------------------ */

/* keras/src/optimizers/adam_test.py: test_single_step. */
static void test_keras_single_step(void **st)
{
    (void)st;
    optim_optimizer *opt = optim_test_make(ADAM("\"learning_rate\": 0.5"));
    double init[4] = {1, 2, 3, 4}, want[4] = {0.5, 1.5, 2.5, 3.5};
    float g[4] = {1, 6, 7, 2};
    int64_t n = 4;
    optim_var *x = optim_test_var("vars", OPTIM_F32, 1, &n, init);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), x};
    step_ok(opt, &p, 1);
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(x, i), want[i], 1e-4, 1e-4);
    optim_destroy(opt);
    optim_var_destroy(x);
}

/* adam_test.py: test_correctness_with_golden (amsgrad). */
static void test_keras_golden_amsgrad(void **st)
{
    (void)st;
    optim_optimizer *opt = optim_test_make(ADAM("\"amsgrad\": true"));
    double ones[10];
    for (int i = 0; i < 10; i++) ones[i] = 1;
    int64_t n = 10;
    optim_var *x = optim_test_var("x", OPTIM_F32, 1, &n, ones);
    float first[10], grads[10];
    for (int i = 0; i < 10; i++) first[i] = 0.01f, grads[i] = (float)(0.1 + 0.1 * i);
    const double golden[5] = {0.999, 0.9982, 0.9974, 0.9965, 0.9955};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, first, 1, &n)), x};
    step_ok(opt, &p, 1);
    p.grad = optim_grad_dense(optim_tensor_make(OPTIM_F32, grads, 1, &n));
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 10; i++) assert_close(optim_var_get(x, i), golden[k], 5e-4, 5e-4);
        step_ok(opt, &p, 1);
    }
    optim_destroy(opt);
    optim_var_destroy(x);
}

/* adam_test.py: test_weight_decay (Keras 3 base option): var1 is decayed by
 * three optimizers in turn, the excluded ones not at all. */
static void test_keras_weight_decay(void **st)
{
    (void)st;
    double two = 2.0;
    float zero = 0;
    optim_var *v1 = optim_test_var("var1", OPTIM_F32, 0, NULL, &two);
    optim_var *v2 = optim_test_var("exclude", OPTIM_F32, 0, NULL, &two);
    optim_var *v3 = optim_test_var("var3", OPTIM_F32, 0, NULL, &two);
    optim_tensor g = optim_tensor_make(OPTIM_F32, &zero, 0, NULL);
    optim_optimizer *o1 = optim_test_make(ADAM("\"learning_rate\": 1.0, \"weight_decay\": 0.004"));
    optim_optimizer *o2 = optim_test_make(ADAM("\"learning_rate\": 1.0, \"weight_decay\": 0.004"));
    optim_optimizer *o3 = optim_test_make(ADAM("\"learning_rate\": 1.0, \"weight_decay\": 0.004"));
    optim_grad_var p1[1] = {{optim_grad_dense(g), v1}};
    step_ok(o1, p1, 1);
    const char *pat[1] = {"exclude"};
    assert_int_equal(optim_exclude_from_weight_decay(o2, NULL, 0, pat, 1), 0);
    optim_grad_var p2[2] = {{optim_grad_dense(g), v1}, {optim_grad_dense(g), v2}};
    step_ok(o2, p2, 2);
    assert_int_equal(optim_exclude_from_weight_decay(o3, &v3, 1, NULL, 0), 0);
    optim_grad_var p3[2] = {{optim_grad_dense(g), v1}, {optim_grad_dense(g), v3}};
    step_ok(o3, p3, 2);
    assert_close(optim_var_get(v1, 0), 1.9760959, 0, 1e-6);
    assert_true(optim_var_get(v2, 0) == 2.0);
    assert_true(optim_var_get(v3, 0) == 2.0);
    optim_destroy(o1);
    optim_destroy(o2);
    optim_destroy(o3);
    optim_var_destroy(v1);
    optim_var_destroy(v2);
    optim_var_destroy(v3);
}

/* tf.keras.optimizers.legacy.Adam docstring: lr 0.1, var 10, loss var^2/2:
 * the first step is -lr * sign(grad), 9.9. */
static void test_legacy_docstring(void **st)
{
    (void)st;
    optim_optimizer *opt = optim_test_make(ADAM("\"learning_rate\": 0.1, " LEGACY));
    double ten = 10;
    optim_var *x = optim_test_var("var1", OPTIM_F32, 0, NULL, &ten);
    float g = 10.0f;
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, &g, 0, NULL)), x};
    step_ok(opt, &p, 1);
    assert_close(optim_var_get(x, 0), 9.9, 1e-6, 0);
    optim_destroy(opt);
    optim_var_destroy(x);
}

/* ---- config --------------------------------------------------------------------- */

static cJSON *config_of(optim_optimizer *opt)
{
    char *s = optim_get_config(opt);
    assert_non_null(s);
    cJSON *c = cJSON_Parse(s);
    optim_free(s);
    assert_non_null(c);
    return c;
}

static void assert_keys(cJSON *c, const char *const *keys, size_t n)
{
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, c)
    {
        if (i >= n || strcmp(it->string, keys[i]) != 0) {
            print_error("config key %zu is '%s', expected '%s'\n", i, it->string, i < n ? keys[i] : "(end)");
            fail();
        }
        i++;
    }
    assert_int_equal(i, n);
}

static double num(cJSON *c, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    assert_non_null(v);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_config_keys_and_defaults(void **st)
{
    (void)st;
    static const char *const k3[] = {"name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm",
                                     "clipvalue", "use_ema", "ema_momentum", "ema_overwrite_frequency",
                                     "loss_scale_factor", "gradient_accumulation_steps", "beta_1", "beta_2",
                                     "epsilon", "amsgrad"};
    static const char *const kl[] = {"name", "learning_rate", "decay", "beta_1", "beta_2", "epsilon",
                                     "amsgrad"};
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(legacy ? ADAM(LEGACY) : ADAM(""));
        cJSON *c = config_of(opt);
        if (legacy) assert_keys(c, kl, sizeof kl / sizeof *kl);
        else assert_keys(c, k3, sizeof k3 / sizeof *k3);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring, legacy ? "Adam" : "adam");
        assert_true(num(c, "learning_rate") == 0.001);
        assert_true(num(c, "beta_1") == 0.9);
        assert_true(num(c, "beta_2") == 0.999);
        assert_true(num(c, "epsilon") == 1e-7);
        assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "amsgrad")));
        if (!legacy) assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c, "weight_decay")));
        else assert_true(num(c, "decay") == 0);
        cJSON_Delete(c);
        const char *names[4] = {0};
        optim_destroy(opt);
        /* Slots: m, v (and vhat with amsgrad), in that order. */
        opt = optim_test_make(legacy ? ADAM("\"amsgrad\": true, " LEGACY) : ADAM("\"amsgrad\": true"));
        double z[N] = {0};
        int64_t n = N;
        optim_var *x = optim_test_var("w", OPTIM_F64, 1, &n, z);
        assert_int_equal(optim_build(opt, &x, 1), 0);
        assert_int_equal(optim_get_slot_names(opt, names, 4), 3);
        assert_string_equal(names[0], "m");
        assert_string_equal(names[1], "v");
        assert_string_equal(names[2], "vhat");
        assert_int_equal(optim_weights_count(opt), 4);
        optim_destroy(opt);
        optim_var_destroy(x);
    }
}

static void test_config_round_trip(void **st)
{
    (void)st;
    const char *cfgs[] = {
        ADAM("\"learning_rate\": 0.5, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, \"amsgrad\": true"),
        ADAM("\"learning_rate\": 0.5, \"beta_1\": 0.5, \"beta_2\": 0.67, \"epsilon\": 1e-05, \"amsgrad\": true, "
             "\"decay\": 0.01, \"clipnorm\": 1.5, " LEGACY),
        ADAM("\"weight_decay\": 0.01, \"global_clipnorm\": 2.0, \"name\": \"my_adam\""),
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        optim_optimizer *a = optim_test_make(cfgs[i]);
        char *s1 = optim_serialize(a);
        assert_non_null(s1);
        optim_optimizer *b = optim_test_make(s1);
        char *s2 = optim_serialize(b);
        assert_string_equal(s1, s2);
        cJSON *c = config_of(b);
        assert_true(num(c, "beta_2") == (i < 2 ? 0.67 : 0.999));
        cJSON_Delete(c);
        optim_free(s1);
        optim_free(s2);
        optim_destroy(a);
        optim_destroy(b);
    }
}

static void expect_refused(const char *json, int code, const char *key, const char *range)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("%s: rc %d (%s), expected %d\n", json, rc, err.msg, code);
    assert_int_equal(rc, code);
    assert_null(opt);
    if (!strstr(err.msg, key) || (range && !strstr(err.msg, range))) {
        print_error("message '%s' lacks '%s' / '%s'\n", err.msg, key, range ? range : "");
        fail();
    }
}

static void test_config_refused(void **st)
{
    (void)st;
    for (int legacy = 0; legacy < 2; legacy++) {
        char json[256];
#define REFUSE(body, code, key, range)                                                          \
    snprintf(json, sizeof json, "{\"class_name\": \"Adam\", \"config\": {" body "%s}}",          \
             legacy ? ", " LEGACY : "");                                                        \
    expect_refused(json, code, key, range)
        REFUSE("\"beta_1\": 1.0", OPTIM_ERANGE, "beta_1", "[0, 1)");
        REFUSE("\"beta_1\": -0.1", OPTIM_ERANGE, "beta_1", "[0, 1)");
        REFUSE("\"beta_2\": 1.0", OPTIM_ERANGE, "beta_2", "[0, 1)");
        REFUSE("\"beta_2\": -1", OPTIM_ERANGE, "beta_2", "[0, 1)");
        REFUSE("\"epsilon\": -1e-8", OPTIM_ERANGE, "epsilon", "[0, inf)");
        REFUSE("\"learning_rate\": -0.1", OPTIM_ERANGE, "learning_rate", "[0, inf)");
        REFUSE("\"amsgrad\": 1", OPTIM_ETYPE, "amsgrad", NULL);
        REFUSE("\"beta_3\": 0.5", OPTIM_EKEY, "beta_3", NULL);
        REFUSE("\"momentum\": 0.5", OPTIM_EKEY, "momentum", NULL);
#undef REFUSE
    }
    expect_refused(ADAM("\"epsilon\": null"), OPTIM_ETYPE, "epsilon", NULL); /* legacy: 1e-7 */
    expect_refused(ADAM("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr", NULL);
    expect_refused(ADAM("\"weight_decay\": 0.1, " LEGACY), OPTIM_EKEY, "weight_decay", NULL);
    /* Ranges also hold for optim_set_hyper; a refused value changes nothing. */
    optim_optimizer *opt = optim_test_make(ADAM(""));
    assert_int_equal(optim_set_hyper(opt, "beta_1", 1.0), OPTIM_ERANGE);
    assert_non_null(strstr(optim_errmsg(opt), "beta_1 is 1, expected a value in [0, 1)"));
    assert_int_equal(optim_set_hyper(opt, "amsgrad", 0.5), OPTIM_ETYPE);
    double b1;
    assert_int_equal(optim_get_hyper(opt, "beta_1", &b1), 0);
    assert_true(b1 == 0.9);
    /* amsgrad is fixed once slots exist. */
    assert_int_equal(optim_set_hyper(opt, "amsgrad", 1), 0);
    assert_int_equal(optim_set_hyper(opt, "amsgrad", 0), 0);
    double z[3] = {0};
    int64_t n = 3;
    optim_var *x = optim_test_var("w", OPTIM_F64, 1, &n, z);
    assert_int_equal(optim_build(opt, &x, 1), 0);
    assert_int_equal(optim_set_hyper(opt, "amsgrad", 1), OPTIM_ESTATE);
    assert_non_null(strstr(optim_errmsg(opt), "amsgrad"));
    assert_int_equal(optim_set_hyper(opt, "amsgrad", 0), 0);
    optim_destroy(opt);
    optim_var_destroy(x);
}

/* ---- threads ------------------------------------------------------------------ */

static void test_threads_bitwise(void **st)
{
    (void)st;
    const int64_t n = 100003;
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * (double)i);
    optim_var *vars[2];
    optim_optimizer *opts[2];
    for (int t = 0; t < 2; t++) {
        opts[t] = optim_test_make(ADAM("\"learning_rate\": 0.01, \"amsgrad\": true, \"global_clipnorm\": 50"));
        assert_int_equal(optim_set_num_threads(opts[t], t + 1), 0);
        vars[t] = optim_test_var("big", OPTIM_F32, 1, &n, init);
        for (int k = 0; k < 4; k++) {
            for (int64_t i = 0; i < n; i++) g[i] = (float)(cos(0.37 * (double)i + k) / (1 + k));
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), vars[t]};
            step_ok(opts[t], &p, 1);
        }
    }
    assert_vars_bitwise(vars[0], vars[1]);
    assert_vars_bitwise(optim_get_slot(opts[0], vars[0], "vhat"), optim_get_slot(opts[1], vars[1], "vhat"));
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
        cmocka_unit_test(test_dense_defaults),
        cmocka_unit_test(test_dense_options),
        cmocka_unit_test(test_amsgrad),
        cmocka_unit_test(test_legacy_decay),
        cmocka_unit_test(test_epsilon_zero),
        cmocka_unit_test(test_f32_operation_order),
        cmocka_unit_test(test_sparse_keras3_equals_dense),
        cmocka_unit_test(test_sparse_reference),
        cmocka_unit_test(test_sparse_legacy_f32_operation_order),
        cmocka_unit_test(test_sparse_rows_not_lazy),
        cmocka_unit_test(test_dynamic),
        cmocka_unit_test(test_keras_single_step),
        cmocka_unit_test(test_keras_golden_amsgrad),
        cmocka_unit_test(test_keras_weight_decay),
        cmocka_unit_test(test_legacy_docstring),
        cmocka_unit_test(test_config_keys_and_defaults),
        cmocka_unit_test(test_config_round_trip),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
