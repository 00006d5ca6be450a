/* Layer normalization over the last axis, fused: one node with its own
 * backward rule (keras.ops.layer_normalization's function, Keras 3
 * keras/src/ops/nn.py, as one op instead of moments, rsqrt, mul and add).
 *
 * Per row of n elements: mean = sum(x) / n, var = sum((x - mean)^2) / n
 * (two passes), inv = 1 / sqrt(var + epsilon), xhat = (x - mean) inv,
 * y = gamma xhat + beta. Sums, mean, inv and y are computed in double and
 * y is rounded once to the node's dtype, so float32 results are correctly
 * rounded values of the double computation, not Keras's float32 ones (they
 * differ in the last bits). The per-row mean and inv are kept for the
 * backward rule:
 *   dxhat = g gamma,  dx = inv (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),
 *   dgamma = sum over rows of g xhat,  dbeta = sum over rows of g,
 * each row's sums and the column sums in double, in order. The loops are
 * plain C, compiled once, so every instruction-set level gives the same
 * bits. */
#include <math.h>
#include <string.h>

#include "tape/impl.h"

typedef struct ln_dims {
    int64_t rows, cols;
} ln_dims;

static ln_dims dims_of(const optim_tensor *v)
{
    ln_dims d = {0, v->shape[v->rank - 1]};
    int64_t k = 1;
    for (int32_t i = 0; i < v->rank; i++) k *= v->shape[i];
    d.rows = d.cols ? k / d.cols : 0;
    return d;
}

/* Element i of a float32 / float64 buffer as double. */
static double at(const void *p, int f64, int64_t i)
{
    return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void forward(optim_node *n, const optim_node *x, const void *gamma, const void *beta,
                    double eps, double *stats)
{
    const int f64 = x->value.dtype == OPTIM_F64;
    const ln_dims d = dims_of(&x->value);
    for (int64_t r = 0; r < d.rows; r++) {
        const int64_t o = r * d.cols;
        double s = 0, v = 0;
        for (int64_t c = 0; c < d.cols; c++) s += at(x->value.data, f64, o + c);
        const double mean = s / (double)d.cols;
        for (int64_t c = 0; c < d.cols; c++) {
            const double e = at(x->value.data, f64, o + c) - mean;
            v += e * e;
        }
        const double inv = 1 / sqrt(v / (double)d.cols + eps);
        stats[2 * r] = mean, stats[2 * r + 1] = inv;
        for (int64_t c = 0; c < d.cols; c++) {
            double y = (at(x->value.data, f64, o + c) - mean) * inv;
            if (gamma) y *= at(gamma, f64, c);
            if (beta) y += at(beta, f64, c);
            if (f64) ((double *)n->value.data)[o + c] = y;
            else ((float *)n->value.data)[o + c] = (float)y;
        }
    }
}

/* Adds the column sums acc[0..cols) (double) into a gradient buffer. */
static void add_cols(void *d, int f64, const double *acc, int64_t cols)
{
    for (int64_t c = 0; c < cols; c++) {
        if (f64) ((double *)d)[c] += acc[c];
        else ((float *)d)[c] += (float)acc[c];
    }
}

/* dx of one row r (into dx when not NULL), and its g xhat / g into the
 * column sums ag / ab (when not NULL). */
static void row_backward(const optim_node *n, int64_t r, const double *stats, void *dx, double *ag,
                         double *ab)
{
    const optim_node *x = n->ins[0], *gm = n->ins[1];
    const int f64 = n->value.dtype == OPTIM_F64;
    const int64_t cols = n->value.shape[n->value.rank - 1], o = r * cols;
    const double mean = stats[2 * r], inv = stats[2 * r + 1];
    double s1 = 0, s2 = 0;
    for (int64_t c = 0; c < cols; c++) {
        const double g = at(n->grad, f64, o + c), xh = (at(x->value.data, f64, o + c) - mean) * inv;
        const double dxh = gm ? g * at(gm->value.data, f64, c) : g;
        s1 += dxh, s2 += dxh * xh;
        if (ag) ag[c] += g * xh;
        if (ab) ab[c] += g;
    }
    if (!dx) return;
    const double m1 = s1 / (double)cols, m2 = s2 / (double)cols;
    for (int64_t c = 0; c < cols; c++) {
        const double g = at(n->grad, f64, o + c), xh = (at(x->value.data, f64, o + c) - mean) * inv;
        const double dxh = gm ? g * at(gm->value.data, f64, c) : g;
        const double v = inv * (dxh - m1 - xh * m2);
        if (f64) ((double *)dx)[o + c] += v;
        else ((float *)dx)[o + c] += (float)v;
    }
}

static int layer_norm_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->ins[0], *gm = n->ins[1], *bt = n->ins[2];
    const int f64 = n->value.dtype == OPTIM_F64;
    const ln_dims d = dims_of(&n->value);
    void *dx = x->need ? optim__tape_grad(t, x) : NULL;
    void *dg = gm && gm->need ? optim__tape_grad(t, gm) : NULL;
    void *db = bt && bt->need ? optim__tape_grad(t, bt) : NULL;
    double *acc = (dg || db) ? optim__arena_alloc(&t->arena, (size_t)(2 * d.cols + 1) * 8) : NULL;
    if ((x->need && !dx) || (gm && gm->need && !dg) || (bt && bt->need && !db) ||
        ((dg || db) && !acc))
        return optim__tape_err(t, OPTIM_ENOMEM, "gradient of layer_norm: out of memory");
    double *ag = dg ? acc : NULL, *ab = db ? acc + d.cols : NULL;
    if (acc) memset(acc, 0, (size_t)(2 * d.cols) * sizeof *acc);
    for (int64_t r = 0; r < d.rows; r++) row_backward(n, r, n->aux, dx, ag, ab);
    if (ag) add_cols(dg, f64, ag, d.cols);
    if (ab) add_cols(db, f64, ab, d.cols);
    return OPTIM_OK;
}

/* The checks of optim_layer_norm; 0 or -1 (message set). */
static int check(optim_tape *t, const char *op, optim_node *x, optim_node *gamma, optim_node *beta,
                 int32_t axis, double epsilon)
{
    optim_node *in[3] = {x, gamma, beta};
    size_t k = 1;
    if (gamma) in[k++] = gamma;
    if (beta) in[k++] = beta;
    if (!x || optim__tape_check_inputs(t, op, in, k)) return -1;
    const optim_tensor *xv = &x->value;
    if (xv->rank < 1) {
        optim__tape_err(t, OPTIM_ESHAPE,
                        "%s: x of shape [] is a scalar, expected rank >= 1 (over the last axis)",
                        op);
        return -1;
    }
    if (optim__tape_axis(axis, xv->rank) != xv->rank - 1) {
        char s[OPTIM__SHAPE_STR];
        optim__tape_err(t, OPTIM_EINVAL,
                        "%s: axis = %d for x of shape %s, expected the last axis (-1 or %d)", op,
                        (int)axis, optim__tape_shape(xv, s), (int)xv->rank - 1);
        return -1;
    }
    if (!(epsilon >= 0 && isfinite(epsilon))) {
        optim__tape_err(t, OPTIM_EINVAL, "%s: epsilon = %g, expected a finite value >= 0", op,
                        epsilon);
        return -1;
    }
    for (size_t i = 1; i < k; i++)
        if (in[i]->value.rank != 1 || in[i]->value.shape[0] != xv->shape[xv->rank - 1]) {
            char sx[OPTIM__SHAPE_STR], sp[OPTIM__SHAPE_STR];
            optim__tape_err(t, OPTIM_ESHAPE,
                            "%s: %s of shape %s for x of shape %s, expected [%lld]", op,
                            in[i] == gamma ? "gamma" : "beta", optim__tape_shape(&in[i]->value, sp),
                            optim__tape_shape(xv, sx), (long long)xv->shape[xv->rank - 1]);
            return -1;
        }
    return 0;
}

optim_node *optim_layer_norm(optim_tape *t, optim_node *x, optim_node *gamma, optim_node *beta,
                             int32_t axis, double epsilon)
{
    static const char op[] = "layer_norm";
    if (check(t, op, x, gamma, beta, axis, epsilon)) return NULL;
    const ln_dims d = dims_of(&x->value);
    optim_node **ins = optim__arena_alloc(&t->arena, 3 * sizeof *ins);
    double *stats = optim__arena_alloc(&t->arena, (size_t)(2 * d.rows + 1) * sizeof *stats);
    if (!ins || !stats) {
        optim__tape_err(t, OPTIM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    optim_node *n =
        optim__tape_node(t, op, x->value.dtype, x->value.rank, x->value.shape, NULL, NULL);
    if (!n) return NULL;
    ins[0] = x, ins[1] = gamma, ins[2] = beta;
    n->ins = ins;
    n->nin = 3;
    n->need = x->need || (gamma && gamma->need) || (beta && beta->need);
    n->aux = stats;
    n->backward = layer_norm_backward;
    forward(n, x, gamma ? gamma->value.data : NULL, beta ? beta->value.data : NULL, epsilon, stats);
    return n;
}
