/* gelu (both forms), silu, and layer normalization: forward values in
 * float32 and float64 against double-precision references written here
 * (erf from libm for gelu, the Mills-ratio series for gelu's far left
 * tail), large |x| for sigmoid, softmax, gelu and silu (finite values and
 * gradients, softmax rows summing to 1), the refusals of optim_layer_norm.
 * Their gradients are checked by finite differences in
 * test_tape_gradcheck.c, their bits at every instruction-set level in
 * test_tape_levels.c. */
#include "testutil.h"

#define PI 3.14159265358979323846

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

static optim_tape *tape(void)
{
    optim_tape *t;
    optim_error err;
    assert_ok(optim_tape_create(&t, &err), &err);
    return t;
}

/* A constant of dtype dt from doubles. */
static optim_node *cnst(optim_tape *t, optim_dtype dt, int32_t rank, const int64_t *shape,
                        const double *v)
{
    optim_tensor h = optim_tensor_make(dt, NULL, rank, shape);
    int64_t n = optim_tensor_numel(&h);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        if (dt == OPTIM_F32) ((float *)buf)[i] = (float)v[i];
        else ((double *)buf)[i] = v[i];
    }
    h.data = buf;
    optim_node *c = optim_tape_const(t, &h);
    free(buf);
    assert_non_null(c);
    return c;
}

static double val(const optim_node *n, int64_t i)
{
    const optim_tensor *v = optim_node_value(n);
    return v->dtype == OPTIM_F32 ? (double)((const float *)v->data)[i]
                                 : ((const double *)v->data)[i];
}

enum { GELU, GELU_TANH, SILU };

static optim_node *apply(optim_tape *t, int op, optim_node *x)
{
    return op == GELU     ? optim_gelu(t, x, 0)
        : op == GELU_TANH ? optim_gelu(t, x, 1)
                          : optim_silu(t, x);
}

static double ref(int op, double x)
{
    if (op == GELU) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    if (op == GELU_TANH) return 0.5 * x * (1 + tanh(sqrt(2 / PI) * (x + 0.044715 * x * x * x)));
    return x / (1 + exp(-x));
}

OPTIM_TEST(test_forward_against_reference)
{
    enum { N = 121 };
    double x[N];
    for (int i = 0; i < N; i++) x[i] = -6 + 0.1 * i;
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        for (int op = GELU; op <= SILU; op++) {
            optim_tape *t = tape();
            optim_node *y = apply(t, op, cnst(t, dt, 1, (int64_t[]){N}, x));
            assert_non_null(y);
            for (int i = 0; i < N; i++) {
                double xi = d ? x[i] : (double)(float)x[i];
                /* float64: the reference's 1 + erf loses up to |x| 2^-53 near
                 * x = -6, hence the absolute bound. float32: the rounding of
                 * x / sqrt 2 (or of the tanh / exp argument) is amplified by
                 * the function's condition number, about x^2 in the tails,
                 * hence (1 + x^2) 2^-22 relative. */
                double rtol = d ? 1e-12 : (1 + xi * xi) * 0x1p-22;
                assert_close(val(y, i), ref(op, xi), rtol, d ? 1e-15 : 1e-30);
            }
            optim_tape_destroy(t);
        }
    }
}

/* Far left, 0.5 x (1 + erf(x / sqrt 2)) cancels to 0 in double; the op's
 * erfc form keeps its relative accuracy. The reference: Phi(x) =
 * phi(x) / |x| (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8 - 945/x^10), whose
 * truncation error at |x| >= 10 is below 1e-8 relative. */
OPTIM_TEST(test_gelu_far_tail)
{
    const double xs[4] = {-10, -12, -15, -20};
    optim_tape *t = tape();
    optim_node *y = optim_gelu(t, cnst(t, OPTIM_F64, 1, (int64_t[]){4}, xs), 0);
    for (int i = 0; i < 4; i++) {
        double x = xs[i], u = 1 / (x * x);
        double series = 1 - u + 3 * u * u - 15 * pow(u, 3) + 105 * pow(u, 4) - 945 * pow(u, 5);
        double phi = exp(-0.5 * x * x) / sqrt(2 * PI);
        double want = x * phi / fabs(x) * series;
        assert_lt(want, 0);
        assert_close(val(y, i), want, 1e-7, 0);
        assert_eq(ref(GELU, x) == 0 || fabs(ref(GELU, x) - want) > 1e-3 * fabs(want), 1);
    }
    optim_tape_destroy(t);
}

/* Values and gradients of sum(op(x)) at large |x|: finite, and the limits
 * (x or 0; gradient 1 or 0). */
static void large(int which, optim_dtype dt)
{
    const double big = dt == OPTIM_F32 ? 1e30 : 1e200;
    const double xs[6] = {-big, -1e4, -100, 100, 1e4, big};
    optim_var *v = optim_test_var("x", dt, 1, (int64_t[]){6}, xs);
    optim_tape *t = tape();
    optim_node *xn = optim_tape_var(t, v);
    optim_node *y = which == 3 ? optim_sigmoid(t, xn) : apply(t, which, xn);
    optim_grad_var g;
    assert_ok(optim_tape_gradient(t, optim_sum(t, y, OPTIM_ALL_AXES), &v, 1, &g), NULL);
    for (int i = 0; i < 6; i++) {
        double yi = val(y, i),
               gi = dt == OPTIM_F32 ? ((const float *)g.grad.dense.data)[i]
                                    : ((const double *)g.grad.dense.data)[i];
        if (!isfinite(yi) || !isfinite(gi))
            fail_msg("op %d %s at x = %g: value %g, gradient %g", which, optim_dtype_name(dt),
                     xs[i], yi, gi);
        double xi = dt == OPTIM_F32 ? (double)(float)xs[i] : xs[i];
        double want = which == 3 ? (xs[i] > 0) : xs[i] > 0 ? xi : 0;
        assert_close(yi, want, 1e-6, 1e-30);
        assert_close(gi, which == 3 ? 0 : xs[i] > 0, 0, 1e-30);
    }
    optim_tape_destroy(t);
    optim_var_destroy(v);
}

OPTIM_TEST(test_large_inputs)
{
    for (int d = 0; d < 2; d++)
        for (int op = GELU; op <= 3; op++) large(op, d ? OPTIM_F64 : OPTIM_F32);
}

OPTIM_TEST(test_softmax_large)
{
    const double x[3 * 4] = {1e30, -1e30, 0, 5, 3e38, 3e38, -3e38, 0, -80, -90, -100, -88};
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_tape *t = tape();
        optim_node *y = optim_softmax(t, cnst(t, dt, 2, (int64_t[]){3, 4}, x));
        for (int r = 0; r < 3; r++) {
            double s = 0;
            for (int c = 0; c < 4; c++) {
                assert_true(isfinite(val(y, 4 * r + c)));
                s += val(y, 4 * r + c);
            }
            assert_close(s, 1, 1e-6, 0);
        }
        assert_eq(val(y, 0), 1);
        assert_close(val(y, 4), 0.5, 1e-7, 0);
        double z = exp(-80) + exp(-90) + exp(-100) + exp(-88);
        assert_close(val(y, 8), exp(-80) / z, d ? 1e-13 : 1e-6, 0);
        optim_tape_destroy(t);
    }
}

/* Layer normalization written out per row in double. */
static void ln_ref(const double *x, const double *gamma, const double *beta, int64_t rows,
                   int64_t cols, double eps, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double m = 0, v = 0;
        for (int64_t c = 0; c < cols; c++) m += xr[c];
        m /= (double)cols;
        for (int64_t c = 0; c < cols; c++) v += (xr[c] - m) * (xr[c] - m);
        v /= (double)cols;
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] =
                (xr[c] - m) / sqrt(v + eps) * (gamma ? gamma[c] : 1) + (beta ? beta[c] : 0);
    }
}

OPTIM_TEST(test_layer_norm_forward)
{
    enum { R = 3, C = 5 };
    double x[R * C], gm[C] = {1, 0.5, -2, 1.5, 0.25}, bt[C] = {0, 1, -1, 0.5, 2}, y[R * C];
    uint32_t s = 7;
    for (int i = 0; i < R * C; i++) x[i] = optim_test_uniform(&s, -3, 3);
    x[10] = x[11] = x[12] = x[13] = x[14] = 2.5; /* a constant row: beta (0 for no beta) */
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        double xd[R * C];
        for (int i = 0; i < R * C; i++) xd[i] = d ? x[i] : (double)(float)x[i];
        for (int k = 0; k < 4; k++) {
            const double *g = k & 1 ? NULL : gm, *b = k & 2 ? NULL : bt;
            optim_tape *t = tape();
            optim_node *gn = g ? cnst(t, dt, 1, (int64_t[]){C}, g) : NULL;
            optim_node *bn = b ? cnst(t, dt, 1, (int64_t[]){C}, b) : NULL;
            optim_node *out =
                optim_layer_norm(t, cnst(t, dt, 2, (int64_t[]){R, C}, x), gn, bn, -1, 1e-3);
            assert_non_null(out);
            ln_ref(xd, g, b, R, C, 1e-3, y);
            for (int i = 0; i < R * C; i++)
                assert_close(val(out, i), y[i], d ? 1e-13 : 1e-6, d ? 1e-15 : 1e-7);
            for (int c = 0; c < C; c++) assert_eq(val(out, 2 * C + c), b ? b[c] : 0);
            optim_tape_destroy(t);
        }
    }
    /* rows of huge values in float64: no overflow in the statistics */
    const double hx[4] = {1e150, -1e150, 3e150, -3e150};
    optim_tape *t = tape();
    optim_node *o =
        optim_layer_norm(t, cnst(t, OPTIM_F64, 2, (int64_t[]){1, 4}, hx), NULL, NULL, 1, 0);
    ln_ref(hx, NULL, NULL, 1, 4, 0, y);
    for (int i = 0; i < 4; i++) assert_close(val(o, i), y[i], 1e-14, 0);
    optim_tape_destroy(t);
}

OPTIM_TEST(test_layer_norm_refusals)
{
    const double x[6] = {1, 2, 3, 4, 5, 6}, g3[3] = {1, 1, 1}, g2[2] = {1, 1};
    struct {
        int32_t axis;
        double eps;
        int gshape;
        const char *needle;
    } bad[] = {
        {-1, -1e-3, 3, "epsilon = -0.001, expected a finite value >= 0"},
        {-1, NAN, 3, "epsilon = nan"},
        {-1, INFINITY, 3, "epsilon = inf"},
        {0, 1e-3, 3, "axis = 0 for x of shape [2, 3], expected the last axis (-1 or 1)"},
        {-2, 1e-3, 3, "axis = -2"},
        {2, 1e-3, 3, "axis = 2"},
        {-1, 1e-3, 2, "gamma of shape [2] for x of shape [2, 3], expected [3]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        optim_tape *t = tape();
        optim_node *xn = cnst(t, OPTIM_F64, 2, (int64_t[]){2, 3}, x);
        optim_node *gn = bad[i].gshape == 3 ? cnst(t, OPTIM_F64, 1, (int64_t[]){3}, g3)
                                            : cnst(t, OPTIM_F64, 1, (int64_t[]){2}, g2);
        assert_null(optim_layer_norm(t, xn, gn, NULL, bad[i].axis, bad[i].eps));
        assert_contains(optim_tape_errmsg(t), bad[i].needle);
        optim_tape_destroy(t);
    }
    optim_tape *t = tape();
    optim_node *xn = cnst(t, OPTIM_F64, 2, (int64_t[]){2, 3}, x);
    /* beta of another dtype, a scalar x */
    assert_null(optim_layer_norm(t, xn, NULL, cnst(t, OPTIM_F32, 1, (int64_t[]){3}, g3), -1, 0));
    assert_contains(optim_tape_errmsg(t), "expected one dtype");
    optim_tape_reset(t);
    assert_null(optim_layer_norm(t, optim_tape_scalar(t, OPTIM_F64, 1), NULL, NULL, -1, 0));
    assert_contains(optim_tape_errmsg(t), "x of shape [] is a scalar, expected rank >= 1");
    optim_tape_reset(t);
    assert_null(optim_layer_norm(t, NULL, NULL, NULL, -1, 0)); /* an earlier failure */
    assert_string_equal(optim_tape_errmsg(t), "");
    assert_null(optim_layer_norm(NULL, xn, NULL, NULL, -1, 0));
    optim_tape_destroy(t);
}

int main(void) { return optim_test_run(); }
