/* ConditionalGradient (TF Addons) against a double-precision reference
 * written from tensorflow_addons/optimizers/conditional_gradient.py
 * (d208d75), line by line:
 *
 *   fro:     norm = reduce_sum(grad**2) ** 0.5;  s = grad / (norm + epsilon)
 *   nuclear: s = _top_singular_vector(grad): the gradient reshaped to a
 *            matrix ([1, 1] for a scalar, [1, n] for a vector), u v^T of its
 *            top singular pair (tf.linalg.svd), reshaped back
 *   var = var * lr - (1 - lr) * lambda_ * s
 *   sparse: the same on the (summed) rows, var scatter-updated on them.
 *
 * The reference's SVD is a one-sided Jacobi SVD run to convergence, a
 * method independent of optim's power iteration, so nuclear runs are
 * compared to 1e-12 (f64); fro runs sum in optim's documented order and
 * match bit for bit (f64, and f32 against a float32 reference). TF Addons'
 * own test values (conditional_gradient_test.py), rank 0-3, zero and
 * non-finite gradients, nearly equal singular values, sparse rows with
 * duplicates, threads, dynamic hyperparameters, configs in both envelopes,
 * the slot, bad input. */
#include "opt_table.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG(body) "{\"class_name\": \"ConditionalGradient\", \"config\": {" body "}}"
#define MAXN 64

/* ---- the reference ----------------------------------------------------------------- */

typedef struct cref {
    double lr, lambda, epsilon, decay;
    int nuclear;
} cref;

/* The top singular pair of the rows x cols matrix g by one-sided Jacobi
 * (Hestenes) on its columns, to convergence: u (rows), v (cols). */
static void ref_svd_top(const double *g, int rows, int cols, double *u, double *v)
{
    double a[MAXN * MAXN], q[MAXN * MAXN];
    assert_true(rows * cols <= MAXN * MAXN && cols * cols <= MAXN * MAXN);
    memcpy(a, g, sizeof(double) * (size_t)(rows * cols));
    for (int i = 0; i < cols * cols; i++) q[i] = i % (cols + 1) == 0;
    for (int sweep = 0, rotated = 1; rotated && sweep < 100; sweep++) {
        rotated = 0;
        for (int i = 0; i < cols; i++)
            for (int j = i + 1; j < cols; j++) {
                double al = 0, be = 0, ga = 0;
                for (int r = 0; r < rows; r++) {
                    al += a[r * cols + i] * a[r * cols + i];
                    be += a[r * cols + j] * a[r * cols + j];
                    ga += a[r * cols + i] * a[r * cols + j];
                }
                if (fabs(ga) <= 1e-17 * sqrt(al * be) || ga == 0) continue;
                rotated = 1;
                const double zeta = (be - al) / (2 * ga);
                const double t = (zeta >= 0 ? 1 : -1) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                const double c = 1 / sqrt(1 + t * t), s = c * t;
                for (int r = 0; r < rows; r++) {
                    const double x = a[r * cols + i], y = a[r * cols + j];
                    a[r * cols + i] = c * x - s * y, a[r * cols + j] = s * x + c * y;
                }
                for (int r = 0; r < cols; r++) {
                    const double x = q[r * cols + i], y = q[r * cols + j];
                    q[r * cols + i] = c * x - s * y, q[r * cols + j] = s * x + c * y;
                }
            }
    }
    int top = 0;
    double best = -1;
    for (int j = 0; j < cols; j++) {
        double nj = 0;
        for (int r = 0; r < rows; r++) nj += a[r * cols + j] * a[r * cols + j];
        if (nj > best) best = nj, top = j;
    }
    for (int r = 0; r < rows; r++) u[r] = a[r * cols + top] / sqrt(best);
    for (int j = 0; j < cols; j++) v[j] = q[j * cols + top];
}

/* TF Addons' direction s of the gradient g of a variable of this shape. */
static void ref_direction(const cref *r, const double *g, int32_t rank, const int64_t *shape,
                          double *s)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    if (!r->nuclear) {
        const double eps = r->epsilon == 0 ? 1e-7 : r->epsilon;
        const double d = pow(ot_sum_squares(g, n), 0.5) + eps;
        for (int64_t i = 0; i < n; i++) s[i] = g[i] / d;
        return;
    }
    assert_true(rank <= 2);
    const int rows = rank == 2 ? (int)shape[0] : 1, cols = rank == 0 ? 1 : (int)shape[rank - 1];
    double u[MAXN], v[MAXN];
    ref_svd_top(g, rows, cols, u, v);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) s[i * cols + j] = u[i] * v[j];
}

/* One step; t0 is the optimizer's iterations before it. TF Addons reads
 * _get_hyper("learning_rate"): OptimizerV2's decay never applies. */
static void ref_step(const cref *r, int64_t t0, double *w, const double *g, int32_t rank,
                     const int64_t *shape, int64_t n)
{
    (void)t0;
    const double lr = r->lr;
    double s[MAXN * MAXN];
    ref_direction(r, g, rank, shape, s);
    for (int64_t i = 0; i < n; i++) w[i] = w[i] * lr - (1 - lr) * r->lambda * s[i];
}

/* fro in float32 arithmetic (TF's ops in the dtype; the sum rounded once). */
static void ref_fro32(const cref *r, float *w, const float *g, int64_t n)
{
    double gd[MAXN * MAXN] = {0};
    for (int64_t i = 0; i < n; i++) gd[i] = g[i];
    const float lr = (float)r->lr, eps = (float)(r->epsilon == 0 ? 1e-7 : r->epsilon);
    const float d = powf((float)ot_sum_squares(gd, n), 0.5f) + eps,
                c = (1.0f - lr) * (float)r->lambda;
    for (int64_t i = 0; i < n; i++) w[i] = w[i] * lr - c * (g[i] / d);
}

/* ---- dense trajectories ---------------------------------------------------------------- */

typedef struct vdef {
    const char *name;
    int32_t rank;
    int64_t shape[3];
} vdef;

static int64_t numel_of(const vdef *d)
{
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++) n *= d->shape[i];
    return n;
}

static double init_at(int v, int64_t i) { return 0.5 - 0.3 * (double)i + 0.7 * v; }
static double grad_at(int k, int v, int64_t i)
{
    return sin(0.7 * k + 1.3 * (double)i + 0.4 * v) * (1.0 + 0.1 * (double)i) - 0.05 * k;
}

/* `steps` steps of every variable of vs at once in f32 and f64: fro bit for
 * bit (f64; f32 against ref_fro32) and f32 to 1e-6, nuclear to 1e-12 (f64)
 * and 1e-6 (f32). */
static void check_vars(const char *json, const cref *r, const vdef *vs, int nv, int steps)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        optim_var *vars[4];
        double w[4][MAXN], g[4][MAXN], buf[4][MAXN];
        float w32[4][MAXN], g32[4][MAXN];
        for (int j = 0; j < nv; j++) {
            const int64_t n = numel_of(&vs[j]);
            for (int64_t i = 0; i < n; i++) w[j][i] = init_at(j, i);
            vars[j] = optim_test_var(vs[j].name, dt, vs[j].rank, vs[j].shape, w[j]);
            for (int64_t i = 0; i < n; i++)
                w32[j][i] = (float)(w[j][i] = optim_var_get(vars[j], i));
        }
        for (int k = 0; k < steps; k++) {
            optim_grad_var p[4];
            for (int j = 0; j < nv; j++) {
                const int64_t n = numel_of(&vs[j]);
                for (int64_t i = 0; i < n; i++) {
                    g32[j][i] = (float)grad_at(k, j, i);
                    g[j][i] = dt == OPTIM_F32 ? g32[j][i] : grad_at(k, j, i);
                }
                p[j] = (optim_grad_var){ot_grad_like(vars[j], g[j], buf[j]), vars[j]};
                ref_step(r, k, w[j], g[j], vs[j].rank, vs[j].shape, n);
                if (!r->nuclear) ref_fro32(r, w32[j], g32[j], n);
            }
            ot_step(opt, p, (size_t)nv);
            for (int j = 0; j < nv; j++) {
                const int64_t n = numel_of(&vs[j]);
                if (dt == OPTIM_F64)
                    assert_var_close(vars[j], w[j], n, r->nuclear ? 1e-12 : 0,
                                     r->nuclear ? 1e-13 : 0);
                else assert_var_close(vars[j], w[j], n, 1e-6, 1e-6);
                if (dt == OPTIM_F32 && !r->nuclear) assert_var_floats(vars[j], w32[j], n);
            }
        }
        for (int j = 0; j < nv; j++) {
            /* the slot exists, has the variable's shape and stays zero */
            optim_var *s = optim_get_slot(opt, vars[j], "conditional_gradient");
            assert_non_null(s);
            assert_eq(optim_var_numel(s), numel_of(&vs[j]));
            for (int64_t i = 0; i < optim_var_numel(s); i++) assert_eq(optim_var_get(s, i), 0.0);
        }
        optim_destroy(opt);
        for (int j = 0; j < nv; j++) optim_var_destroy(vars[j]);
    }
}

static const vdef FRO_VARS[4] = {
    {"kernel", 2, {3, 4, 0}}, {"bias", 1, {7, 0, 0}}, {"scale", 0, {0}}, {"conv", 3, {2, 3, 2}}};
static const vdef NUC_VARS[4] = {
    {"tall", 2, {5, 3, 0}}, {"wide", 2, {3, 5, 0}}, {"bias", 1, {7, 0, 0}}, {"scale", 0, {0}}};

OPTIM_TEST(test_fro)
{
    const cref d = {0.01, 0.01, 1e-7, 0, 0};
    check_vars(CG(""), &d, FRO_VARS, 4, 10);
    check_vars("\"conditionalgradient\"", &d, FRO_VARS, 4, 3);
    const cref r = {0.3, 0.2, 1e-3, 0, 0};
    check_vars(CG("\"learning_rate\": 0.3, \"lambda_\": 0.2, \"epsilon\": 1e-3, \"ord\": \"fro\""),
               &r, FRO_VARS, 4, 10);
    /* epsilon 0 and None act as 1e-7 */
    const cref z = {0.3, 0.2, 0, 0, 0};
    check_vars(CG("\"learning_rate\": 0.3, \"lambda_\": 0.2, \"epsilon\": 0"), &z, FRO_VARS, 4, 3);
    check_vars(CG("\"learning_rate\": 0.3, \"lambda_\": 0.2, \"epsilon\": null"), &z, FRO_VARS, 4,
               3);
}

OPTIM_TEST(test_nuclear)
{
    const cref r = {0.3, 0.2, 1e-7, 0, 1};
    check_vars(CG("\"learning_rate\": 0.3, \"lambda_\": 0.2, \"ord\": \"nuclear\""), &r, NUC_VARS,
               4, 10);
    const vdef square[1] = {{"square", 2, {6, 6, 0}}};
    check_vars(CG("\"learning_rate\": 0.3, \"lambda_\": 0.2, \"ord\": \"nuclear\""), &r, square, 1,
               5);
}

/* A vector's u v^T is g / ||g|| (u = +-1): bit for bit against that
 * formula in double (the norm summed in index order here). */
OPTIM_TEST(test_nuclear_vector_is_normalised_gradient)
{
    optim_optimizer *opt = optim_test_make(CG("\"learning_rate\": 0.3, \"ord\": \"nuclear\""));
    int64_t n = 5;
    double w[5] = {1, -2, 3, 0.5, 0}, g[5] = {0.3, -1.25, 2.0, 1e-3, -0.7};
    optim_var *x = optim_test_var("x", OPTIM_F64, 1, &n, w);
    ot_step_dense(opt, x, g);
    double ss = 0;
    for (int i = 0; i < 5; i++) ss += g[i] * g[i];
    const double nrm = sqrt(ss), c = (1 - 0.3) * 0.01;
    for (int i = 0; i < 5; i++)
        assert_eq(optim_var_get(x, i), w[i] * 0.3 - c * (1.0 * (g[i] / nrm)));
    optim_test_free(opt, x);
}

/* Zero gradient: fro s = 0 (w * lr); nuclear e1 e1^T, as Eigen's SVD gives
 * identity singular vectors for a zero matrix. NaN gradient: NaN. */
OPTIM_TEST(test_zero_and_nonfinite_gradients)
{
    int64_t sh[2] = {2, 3};
    double w[6] = {1, 2, 3, 4, 5, 6}, z[6] = {0}, bad[6] = {1, NAN, 0, 0, 0, 0};
    for (int nuc = 0; nuc < 2; nuc++) {
        optim_optimizer *opt =
            optim_test_make(nuc ? CG("\"learning_rate\": 0.5, \"ord\": \"nuclear\"")
                                : CG("\"learning_rate\": 0.5"));
        optim_var *x = optim_test_var("x", OPTIM_F64, 2, sh, w);
        ot_step_dense(opt, x, z);
        for (int i = 0; i < 6; i++)
            assert_eq(optim_var_get(x, i), w[i] * 0.5 - (nuc && i == 0 ? 0.5 * 0.01 : 0.0));
        ot_step_dense(opt, x, bad);
        for (int i = 0; i < 6; i++)
            if (nuc || i == 1) assert_nan(optim_var_get(x, i));
        optim_test_free(opt, x);
    }
}

/* G = P diag(1, ratio, 0.3) Q^T with rotations P, Q: the pair is found to
 * the accuracy the gap allows (ratio 0.999 and 0.99999). */
static void rotate(double *m, int n, int i, int j, double th, int cols_of)
{
    const double c = cos(th), s = sin(th);
    for (int k = 0; k < n; k++) {
        double *a = cols_of ? &m[k * n + i] : &m[i * n + k],
               *b = cols_of ? &m[k * n + j] : &m[j * n + k];
        const double x = *a, y = *b;
        *a = c * x - s * y, *b = s * x + c * y;
    }
}

OPTIM_TEST(test_nuclear_close_singular_values)
{
    const double ratios[2] = {0.999, 0.99999}, tols[2] = {1e-11, 1e-8};
    for (int t = 0; t < 2; t++) {
        double g[9] = {1, 0, 0, 0, ratios[t], 0, 0, 0, 0.3}, w[9] = {0}, s[9];
        rotate(g, 3, 0, 1, 0.7, 0), rotate(g, 3, 1, 2, -0.4, 0), rotate(g, 3, 0, 2, 1.1, 0);
        rotate(g, 3, 0, 1, 0.2, 1), rotate(g, 3, 0, 2, -0.9, 1), rotate(g, 3, 1, 2, 0.5, 1);
        const cref r = {0, 1, 1e-7, 0, 1};
        const int64_t sh[2] = {3, 3};
        ref_direction(&r, g, 2, sh, s);
        optim_optimizer *opt =
            optim_test_make(CG("\"learning_rate\": 0.0, \"lambda_\": 1.0, \"ord\": \"nuclear\""));
        optim_var *x = optim_test_var("x", OPTIM_F64, 2, sh, w);
        ot_step_dense(opt, x, g);
        for (int i = 0; i < 9; i++) assert_close(-optim_var_get(x, i), s[i], 0, tols[t]);
        optim_test_free(opt, x);
    }
}

/* "fro" on a half variable of any rank: half variables are not phased, so
 * their float32 scratch reaches apply_dense whole, and a [2, 3, 4] variable
 * moves as a [24] one (every element, the norm over all 24), close to the
 * double reference. */
OPTIM_TEST(test_fro_half_any_rank)
{
    const optim_dtype dts[2] = {OPTIM_F16, OPTIM_BF16};
    const int64_t sh3[3] = {2, 3, 4}, sh1[1] = {24};
    double w0[24], g[24], norm = 0;
    for (int i = 0; i < 24; i++) w0[i] = 1.0, g[i] = 0.25 * (i % 5) - 0.4, norm += g[i] * g[i];
    norm = sqrt(norm);
    for (int d = 0; d < 2; d++) {
        optim_optimizer *a = optim_test_make(CG("\"learning_rate\": 0.5, \"lambda_\": 0.3"));
        optim_optimizer *b = optim_test_make(CG("\"learning_rate\": 0.5, \"lambda_\": 0.3"));
        optim_var *x = optim_test_var("x", dts[d], 3, sh3, w0);
        optim_var *y = optim_test_var("y", dts[d], 1, sh1, w0);
        ot_step_dense(a, x, g);
        ot_step_dense(b, y, g);
        for (int i = 0; i < 24; i++) {
            assert_eq(optim_var_get(x, i), optim_var_get(y, i));
            assert_close(optim_var_get(x, i), 0.5 - 0.5 * 0.3 * g[i] / norm, 0, 1e-2);
        }
        optim_test_free(a, x);
        optim_test_free(b, y);
    }
}

OPTIM_TEST(test_nuclear_refuses_rank_3)
{
    optim_optimizer *opt = optim_test_make(CG("\"ord\": \"nuclear\""));
    int64_t sh[3] = {1, 1, 4};
    optim_var *x = optim_test_var("conv", OPTIM_F32, 3, sh, (double[]){1, 2, 3, 4});
    const double g[4] = {1, 2, 3, 4};
    double buf[4];
    optim_grad_var p = {ot_grad_like(x, g, buf), x};
    assert_status(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ENOTSUP, opt);
    assert_contains(optim_errmsg(opt), "'conv' has rank 3");
    assert_eq(optim_iterations(opt), 0);
    for (int i = 0; i < 4; i++) assert_eq(optim_var_get(x, i), (double)(i + 1));
    optim_test_free(opt, x);
}

/* legacy decay (read, written back, not applied: TF Addons reads the
 * learning rate without _decayed_lr) and a callable lambda_, f64 bit for
 * bit (fro). */
static double lam_value = 0.05;
static double lam_fn(void *user)
{
    (void)user;
    return lam_value;
}

OPTIM_TEST(test_decay_and_dynamic_lambda)
{
    optim_optimizer *opt = optim_test_make(CG("\"learning_rate\": 0.4, \"decay\": 0.25"));
    assert_ok(optim_set_hyper_fn(opt, "lambda_", lam_fn, NULL), opt);
    int64_t n = 7;
    double w[7], g[7];
    for (int i = 0; i < 7; i++) w[i] = init_at(0, i);
    optim_var *x = optim_test_var("x", OPTIM_F64, 1, &n, w);
    for (int k = 0; k < 6; k++) {
        lam_value = 0.05 * (k + 1);
        for (int i = 0; i < 7; i++) g[i] = grad_at(k, 0, i);
        ot_step_dense(opt, x, g);
        const cref r = {0.4, lam_value, 1e-7, 0.25, 0};
        ref_step(&r, k, w, g, 1, &n, 7);
        assert_var_eq(x, w, 7);
    }
    lam_value = -1; /* out of range: the step is refused, nothing changes */
    ot_expect_step_refused(opt, x, 1, OPTIM_ERANGE, "lambda_");
    optim_test_free(opt, x);
}

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"conditional_gradient", NULL};
    ot_check_threads(CG("\"learning_rate\": 0.5, \"lambda_\": 0.3"), 2, 3, 0.5, slots);
    ot_check_threads_mixed(CG("\"learning_rate\": 0.5"), 2, 3, slots);
    ot_check_threads_mixed(CG("\"learning_rate\": 0.5, \"ord\": \"nuclear\""), 2, 3, slots);
}

/* ---- sparse -------------------------------------------------------------------------------- */

static double t_init(int r, int c) { return 0.1 * r - 0.2 * c + 0.05; }
static int64_t t_index(int k, int j)
{
    static const int64_t idx[4][4] = {{1, 4, 1, 1}, {0, 4, 2, 4}, {2, 2, 3, 1}, {0, 0, 4, 3}};
    return idx[k][j];
}
static double t_val(int k, int j, int c) { return cos(1.1 * k + 0.7 * j + 0.3 * c) + 0.05 * c; }

/* The rows summed in order of appearance (in the dtype), in index order:
 * the direction of that [rows, cols] matrix ([1, n] for a vector); the
 * indexed rows of w updated. */
static void ref_sparse(const ot_sparse *s, const cref *r, optim_dtype dt, double *w)
{
    const int cols = s->cols ? s->cols : 1, f32 = dt == OPTIM_F32;
    for (int i = 0; i < s->rows * cols; i++) {
        const double x = t_init(i / cols, i % cols);
        w[i] = f32 ? (float)x : x;
    }
    for (int k = 0; k < s->steps; k++) {
        double rows[MAXN], dir[MAXN];
        int64_t order[16];
        const int nu = ot_sparse_summed(s, k, dt, order, rows);
        const int64_t sh[2] = {nu, cols}, vsh = nu;
        if (s->cols) ref_direction(r, rows, 2, sh, dir);
        else ref_direction(r, rows, 1, &vsh, dir);
        const double lr = r->lr;
        for (int u = 0; u < nu; u++)
            for (int c = 0; c < cols; c++) {
                double *x = &w[order[u] * cols + c];
                *x = *x * lr - (1 - lr) * r->lambda * dir[u * cols + c];
            }
    }
}

static void check_sparse(const char *json, const cref *r, const ot_sparse *s)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        optim_var *x = ot_run_sparse(opt, s, dt, 0);
        double w[MAXN];
        ref_sparse(s, r, dt, w);
        const double rtol = dt == OPTIM_F32 ? 1e-6 : r->nuclear ? 1e-12 : 0;
        assert_var_close(x, w, s->rows * (s->cols ? s->cols : 1), rtol, rtol);
        /* row 5 never indexed: its bits */
        for (int c = 0; c < (s->cols ? s->cols : 1); c++)
            assert_eq(optim_var_get(x, 5 * (s->cols ? s->cols : 1) + c),
                      dt == OPTIM_F32 ? (double)(float)t_init(5, c) : t_init(5, c));
        optim_test_free(opt, x);
    }
}

OPTIM_TEST(test_sparse_rows)
{
    const ot_sparse table = {6, 3, 4, 4, t_index, t_val, t_init};
    const ot_sparse vec = {6, 0, 4, 4, t_index, t_val, t_init};
    const cref f = {0.2, 0.3, 1e-7, 0, 0}, n = {0.2, 0.3, 1e-7, 0, 1};
    check_sparse(CG("\"learning_rate\": 0.2, \"lambda_\": 0.3"), &f, &table);
    check_sparse(CG("\"learning_rate\": 0.2, \"lambda_\": 0.3"), &f, &vec);
    check_sparse(CG("\"learning_rate\": 0.2, \"lambda_\": 0.3, \"ord\": \"nuclear\""), &n, &table);
    check_sparse(CG("\"learning_rate\": 0.2, \"lambda_\": 0.3, \"ord\": \"nuclear\""), &n, &vec);
}

/* ---- TF Addons' tests (tensorflow_addons/optimizers/tests/conditional_gradient_test.py) -- */

/* _db_params_{nuclear,frobenius}_cg01: a float32 vector of 10 from zeros,
 * ten steps of lr 0.1, lambda_ 0.1; rtol and atol 1e-6, as TF Addons. */
static const double DB_GRAD[10][10] = {
    {0.00096264342, 0.17914793, 0.93945462, 0.41396621, 0.53037018, 0.93197989, 0.78648776,
     0.50036013, 0.55345792, 0.96722615},
    {0.17075552, 0.88821375, 0.20873757, 0.25236958, 0.57578111, 0.15312378, 0.5513742, 0.94687688,
     0.16012503, 0.22159521},
    {0.35077485, 0.47304362, 0.44412705, 0.44368884, 0.078527533, 0.81223965, 0.31168157,
     0.43203235, 0.16792089, 0.24644311},
    {0.9694621, 0.75035888, 0.28171822, 0.83813518, 0.53807181, 0.3728098, 0.81454384, 0.03848977,
     0.89759839, 0.93665648},
    {0.38578293, 0.8536852, 0.88722926, 0.66276771, 0.13678469, 0.94036359, 0.69107032, 0.81897682,
     0.5433259, 0.67860287},
    {0.27885768, 0.76100707, 0.24625534, 0.81354135, 0.18959245, 0.48038563, 0.84163809, 0.41172323,
     0.83259648, 0.44941229},
    {0.27233034, 0.056316052, 0.5039115, 0.24105175, 0.35697976, 0.75913221, 0.73577434, 0.16014607,
     0.57500273, 0.071136251},
    {0.58697265, 0.2494842, 0.08106143, 0.39954534, 0.15892942, 0.12683646, 0.74053431, 0.16033,
     0.66625422, 0.73515922},
    {0.8215279, 0.41994119, 0.95172721, 0.68000203, 0.79439718, 0.43384039, 0.55561525, 0.22567581,
     0.93331909, 0.29438227},
    {0.68297005, 0.67758518, 0.1748755, 0.13266537, 0.70697063, 0.055731893, 0.68593478, 0.50580865,
     0.12602448, 0.093537711},
};

/* db_out of the nuclear test (the frobenius one differs only in the last
 * digits of a few entries, within the tolerance). */
static const double DB_OUT[10][10] = {
    {-4.1552783e-05, -7.7334875e-03, -4.0554535e-02, -1.7870164e-02, -2.2895109e-02, -4.0231861e-02,
     -3.3951234e-02, -2.1599628e-02, -2.3891764e-02, -4.1753381e-02},
    {-0.00961733, -0.0507779, -0.01580694, -0.01599489, -0.03470477, -0.01264373, -0.03443632,
     -0.05546713, -0.01140388, -0.01665068},
    {-0.02462724, -0.03699233, -0.03154433, -0.03153357, -0.00876844, -0.05606324, -0.02447166,
     -0.03469437, -0.0124694, -0.01829169},
    {-0.04124615, -0.03371741, -0.0144246, -0.03668303, -0.02240246, -0.02052062, -0.03503307,
     -0.00500922, -0.03715545, -0.0393002},
    {-0.01979207, -0.0380417, -0.03747472, -0.0305847, -0.00779536, -0.04024221, -0.03156913,
     -0.0337613, -0.02578116, -0.03148951},
    {-0.01555188, -0.04084422, -0.01573331, -0.04265549, -0.01000746, -0.02740575, -0.04412147,
     -0.02341569, -0.0431026, -0.02502293},
    {-0.01890448, -0.00767214, -0.03367592, -0.01962219, -0.02374278, -0.05110246, -0.05128598,
     -0.01254396, -0.04094184, -0.00703416},
    {-0.03772915, -0.01599993, -0.00831695, -0.0263572, -0.01207801, -0.01285448, -0.05034329,
     -0.01104364, -0.04477356, -0.04558992},
    {-0.03919835, -0.01970845, -0.04187151, -0.03195836, -0.03546333, -0.01999326, -0.02899324,
     -0.01083582, -0.04472339, -0.01725317},
    {-0.04510314, -0.04282944, -0.0147322, -0.0111956, -0.04617687, -0.00535998, -0.0442614,
     -0.031584, -0.01207165, -0.00736567},
};

OPTIM_TEST(test_tfa_like_dist_belief)
{
    for (int nuc = 0; nuc < 2; nuc++) {
        optim_optimizer *opt = optim_test_make(
            nuc ? CG("\"learning_rate\": 0.1, \"lambda_\": 0.1, \"ord\": \"nuclear\"")
                : CG("\"learning_rate\": 0.1, \"lambda_\": 0.1, \"ord\": \"fro\""));
        int64_t n = 10;
        optim_var *x = optim_test_var("var0", OPTIM_F32, 1, &n, (double[10]){0});
        for (int k = 0; k < 10; k++) {
            ot_step_dense(opt, x, DB_GRAD[k]);
            assert_var_close(x, DB_OUT[k], 10, 1e-6, 1e-6);
        }
        optim_test_free(opt, x);
    }
}

/* test_basic_* / test_tensor_learning_rate_* / test_sharing_*: var0 [1, 2],
 * var1 [3, 4], gradients [0.1, 0.1] and [0.01, 0.01], two steps; the
 * expected values as TF Addons writes them (s = g / norm, or the top
 * singular vector, [0.7071, 0.7071] for both). */
static void tfa_basic(const char *json, double lr, double lam, int nuc)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        int64_t n = 2;
        optim_var *v0 = optim_test_var("var0", dt, 1, &n, (double[]){1, 2});
        optim_var *v1 = optim_test_var("var1", dt, 1, &n, (double[]){3, 4});
        const double norm0 = sqrt(2 * 0.1 * 0.1), norm1 = sqrt(2 * 0.01 * 0.01);
        const double s0 = nuc ? sqrt(0.5) : 0.1 / norm0, s1 = nuc ? sqrt(0.5) : 0.01 / norm1;
        double e0[2] = {1, 2}, e1[2] = {3, 4};
        for (int k = 0; k < 2; k++) {
            double b0[2], b1[2];
            optim_grad_var p[2] = {{ot_grad_like(v0, (double[]){0.1, 0.1}, b0), v0},
                                   {ot_grad_like(v1, (double[]){0.01, 0.01}, b1), v1}};
            ot_step(opt, p, 2);
            for (int i = 0; i < 2; i++) {
                e0[i] = e0[i] * lr - (1 - lr) * lam * s0;
                e1[i] = e1[i] * lr - (1 - lr) * lam * s1;
            }
            assert_var_close(v0, e0, 2, 1e-6, 1e-6);
            assert_var_close(v1, e1, 2, 1e-6, 1e-6);
        }
        ot_expect_slot_names(opt, "conditional_gradient", NULL);
        optim_test_free(opt, v0, v1);
    }
}

OPTIM_TEST(test_tfa_basic)
{
    tfa_basic(CG("\"learning_rate\": 0.5, \"lambda_\": 0.01, \"ord\": \"fro\""), 0.5, 0.01, 0);
    tfa_basic(CG("\"learning_rate\": 0.5, \"lambda_\": 0.01, \"ord\": \"nuclear\""), 0.5, 0.01, 1);
    tfa_basic(CG("\"learning_rate\": 0.1, \"lambda_\": 0.1, \"ord\": \"fro\""), 0.1, 0.1, 0);
    tfa_basic(CG("\"learning_rate\": 0.1, \"lambda_\": 0.1, \"ord\": \"nuclear\""), 0.1, 0.1, 1);
}

/* One sparse step of the rows vals at indices idx of a rows x 2 table. */
static void sparse_step(optim_optimizer *opt, optim_var *x, const int64_t *idx, int64_t n,
                        const double *vals)
{
    optim_dtype dt = optim_var_dtype(x);
    float f[8];
    double d[8];
    for (int i = 0; i < 2 * n; i++) f[i] = (float)vals[i], d[i] = vals[i];
    const int64_t sh[2] = {n, 2};
    optim_grad_var p = {
        optim_grad_sparse(idx, n,
                          optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)f : (void *)d, 2, sh)),
        x};
    ot_step(opt, &p, 1);
}

/* test_minimize_sparse_resource_variable_*: var0 [[1, 2]], the embedding
 * gradient [[112, 140]] on row 0; test_minimize_with_2D_indicies_*: ones
 * [2, 2], gradient [1, 1] on row 1 (row 0 stays). */
OPTIM_TEST(test_tfa_minimize_sparse)
{
    OPTIM_FOR_DTYPES(dt) for (int nuc = 0; nuc < 2; nuc++)
    {
        const char *json = nuc
            ? CG("\"learning_rate\": 0.1, \"lambda_\": 0.1, \"ord\": \"nuclear\"")
            : CG("\"learning_rate\": 0.1, \"lambda_\": 0.1, \"ord\": \"fro\"");
        optim_optimizer *opt = optim_test_make(json);
        int64_t sh[2] = {1, 2}, sq[2] = {2, 2}, r0 = 0, r1 = 1;
        optim_var *a = optim_test_var("var0", dt, 2, sh, (double[]){1, 2});
        sparse_step(opt, a, &r0, 1, (double[]){32 * 1.0 + 40 * 2.0, 40 * 1.0 + 50 * 2.0});
        const double norm = sqrt(112.0 * 112 + 140.0 * 140); /* also the singular value */
        assert_var_close(a,
                         ((double[]){0.1 - 0.9 * 0.1 * 112 / norm, 0.2 - 0.9 * 0.1 * 140 / norm}),
                         2, 1e-6, 1e-6);
        optim_var *b = optim_test_var("emb", dt, 2, sq, (double[]){1, 1, 1, 1});
        sparse_step(opt, b, &r1, 1, (double[]){1, 1});
        const double s = nuc ? sqrt(0.5) : 1 / sqrt(2.0);
        assert_var_close(b, ((double[]){1, 1, 0.1 - 0.9 * 0.1 * s, 0.1 - 0.9 * 0.1 * s}), 4, 1e-6,
                         1e-6);
        optim_test_free(opt, a, b);
    }
}

/* test_sparse_frobenius / test_sparse_nuclear: zeros and ones [4, 2], rows
 * [1] of 0.1 and [2, 3] of 0.01, two steps; the nuclear direction of the
 * second is 0.5 everywhere (u = v = [1, 1] / sqrt 2). */
OPTIM_TEST(test_tfa_sparse)
{
    OPTIM_FOR_DTYPES(dt) for (int nuc = 0; nuc < 2; nuc++)
    {
        optim_optimizer *opt = optim_test_make(
            nuc ? CG("\"learning_rate\": 0.1, \"lambda_\": 0.1, \"ord\": \"nuclear\"")
                : CG("\"learning_rate\": 0.1, \"lambda_\": 0.1"));
        int64_t sh[2] = {4, 2}, i0 = 1, i1[2] = {2, 3};
        optim_var *a = optim_test_var("var0", dt, 2, sh, (double[8]){0});
        optim_var *b = optim_test_var("var1", dt, 2, sh, (double[]){1, 1, 1, 1, 1, 1, 1, 1});
        const double s0 = nuc ? 0.7071067 : 0.1 / sqrt(0.02),
                     s1 = nuc ? 0.49999994 : 0.01 / sqrt(4e-4);
        double ea[8] = {0}, eb[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        for (int k = 0; k < 2; k++) {
            sparse_step(opt, a, &i0, 1, (double[]){0.1, 0.1});
            optim_set_iterations(opt, optim_iterations(opt) - 1);
            sparse_step(opt, b, i1, 2, (double[]){0.01, 0.01, 0.01, 0.01});
            for (int i = 2; i < 4; i++) ea[i] = ea[i] * 0.1 - 0.9 * 0.1 * s0;
            for (int i = 4; i < 8; i++) eb[i] = eb[i] * 0.1 - 0.9 * 0.1 * s1;
            assert_var_close(a, ea, 8, 1e-6, 1e-6);
            assert_var_close(b, eb, 8, 1e-6, 1e-6);
        }
        optim_test_free(opt, a, b);
    }
}

/* ---- config ------------------------------------------------------------------------------- */

#define TFA_CONFIG(lr, lam, ord)                                                             \
    "\"config\":{\"name\":\"ConditionalGradient\",\"learning_rate\":" lr ",\"lambda_\":" lam \
    ",\"epsilon\":1e-07,\"ord\":\"" ord "\"}"

/* As tf.keras writes TF Addons' ConditionalGradient (test_serialization's
 * lr 0.1, lambda_ 0.1, nuclear): both envelopes, key for key. */
OPTIM_TEST(test_config_envelopes)
{
    const char *old =
        "{\"class_name\":\"Addons>ConditionalGradient\"," TFA_CONFIG("0.1", "0.1", "nuclear") "}";
    const char *env =
        "{\"module\":\"tensorflow_addons.optimizers.conditional_gradient\","
        "\"class_name\":\"ConditionalGradient\"," TFA_CONFIG(
            "0.1", "0.1", "nuclear") ",\"registered_name\":\"Addons>ConditionalGradient\"}";
    ot_expect_serialized(old, old);
    ot_expect_serialized(env, env);
    /* optim's default learning_rate (TF Addons requires one): 0.01 */
    ot_expect_serialized(
        "\"conditionalgradient\"",
        "{\"class_name\":\"Addons>ConditionalGradient\"," TFA_CONFIG("0.01", "0.01", "fro") "}");
    ot_expect_serialized(
        CG("\"lr\": 0.5, \"clipvalue\": 2.0, \"decay\": 0.5, \"epsilon\": null"),
        "{\"class_name\":\"Addons>ConditionalGradient\",\"config\":{\"name\":\"ConditionalGradient\","
        "\"clipvalue\":2.0,\"learning_rate\":0.5,\"decay\":0.5,\"lambda_\":0.01,\"epsilon\":1e-07,"
        "\"ord\":\"fro\"}}");
}

/* The slot, and ord fixed once it exists. */
OPTIM_TEST(test_slot_and_ord)
{
    optim_optimizer *opt = optim_test_make(CG("\"ord\": \"nuclear\""));
    int64_t sh[2] = {2, 3}, n = 4;
    optim_var *vs[2] = {optim_test_var("a", OPTIM_F32, 2, sh, (double[6]){0}),
                        optim_test_var("b", OPTIM_F64, 1, &n, (double[4]){0})};
    double ord;
    assert_ok(optim_set_hyper(opt, "ord", 0), opt); /* before slots: allowed */
    assert_ok(optim_set_hyper(opt, "ord", 1), opt);
    assert_ok(optim_build(opt, vs, 2), opt);
    ot_expect_slot_names(opt, "conditional_gradient", NULL);
    ot_expect_weight_names(opt, 1, "a/conditional_gradient", "b/conditional_gradient", NULL);
    assert_status(optim_set_hyper(opt, "ord", 0), OPTIM_ESTATE, opt);
    assert_contains(optim_errmsg(opt), "ord cannot change once slots exist");
    assert_ok(optim_get_hyper(opt, "ord", &ord), opt);
    assert_eq(ord, 1.0);
    optim_test_free(opt, vs[0], vs[1]);
}

OPTIM_TEST(test_bad_config)
{
    ot_expect_refused(CG("\"ord\": \"spectral\""), OPTIM_EINVAL, "ord", "\"nuclear\"");
    ot_expect_refused(CG("\"ord\": 2"), OPTIM_ETYPE, "ord", NULL);
    ot_expect_refused(CG("\"lambda_\": -0.5"), OPTIM_ERANGE, "lambda_", "[0, inf)");
    ot_expect_refused(CG("\"epsilon\": -1"), OPTIM_ERANGE, "epsilon", "[0, inf)");
    ot_expect_refused(CG("\"lambda\": 0.5"), OPTIM_EKEY, "lambda", "lambda_");
    ot_expect_refused(CG("\"weight_decay\": 0.1"), OPTIM_EKEY, "weight_decay", NULL);
    ot_expect_refused(CG("\"is_legacy_optimizer\": false"), OPTIM_ENOTSUP, "ConditionalGradient",
                      "legacy generation");
}

int main(void) { return optim_test_run(); }
