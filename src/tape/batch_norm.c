/* Batch normalization over all axes but the last, fused: one node with its
 * own backward rule (the computation of keras.layers.BatchNormalization,
 * Keras 3 keras/src/layers/normalization/batch_normalization.py, which
 * calls ops.moments and ops.batch_normalization).
 *
 * x is seen as [rows, cols] (cols = the last dim, rows = the product of the
 * others). Per column c: either the batch statistics (training):
 *   mean = sum_r x / rows,  var = sum_r (x - mean)^2 / rows  (biased),
 * or given ones (inference: the moving statistics, nodes of shape [cols]);
 * then inv = 1 / sqrt(var + epsilon), xhat = (x - mean) inv and
 * y = gamma xhat + beta. With sg = sum_r g and sgx = sum_r g xhat per
 * column (g the output's gradient), the backward rules are
 *   training:  dx = gamma inv (g - sg / rows - xhat sgx / rows),
 *   inference: dx = gamma inv g, dmean = -gamma inv sg,
 *              dvar = -gamma inv^2 sgx / 2,
 *   both:      dgamma = sgx, dbeta = sg.
 * Statistics, sums and results are computed in double, rows in order then
 * columns, in plain single-threaded C, and rounded once to the node's
 * dtype: the bits do not depend on the thread count or instruction set. */
#include <math.h>
#include <string.h>

#include "tape/impl.h"

typedef struct bn_aux {
    int64_t rows, cols;
    int training;
    double *mean, *inv; /* [cols] each */
} bn_aux;

/* Node index of each input in n->ins. */
enum { BN_X, BN_GAMMA, BN_BETA, BN_MEAN, BN_VAR, BN_NIN };

static double elem(const optim_tensor *v, int64_t i)
{
    return v->dtype == OPTIM_F32 ? (double)((const float *)v->data)[i]
                                 : ((const double *)v->data)[i];
}

/* The batch mean and biased variance per column into a->mean, var. */
static void batch_stats(const bn_aux *a, const optim_tensor *x, double *var)
{
    const int64_t R = a->rows, C = a->cols;
    memset(a->mean, 0, (size_t)C * sizeof *a->mean);
    memset(var, 0, (size_t)C * sizeof *var);
    OPTIM__TAPE_TYPED(x->dtype, T, {
        const T *X = x->data;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) a->mean[c] += (double)X[r * C + c];
        for (int64_t c = 0; c < C; c++) a->mean[c] /= (double)R;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                const double e = (double)X[r * C + c] - a->mean[c];
                var[c] += e * e;
            }
    });
    for (int64_t c = 0; c < C; c++) var[c] /= (double)R;
}

static void forward(optim_node *n, const bn_aux *a, optim_node *const *in)
{
    const int64_t R = a->rows, C = a->cols;
    const optim_node *gm = in[BN_GAMMA], *bt = in[BN_BETA];
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *X = in[BN_X]->value.data;
        T *Y = n->value.data;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                double y = ((double)X[r * C + c] - a->mean[c]) * a->inv[c];
                if (gm) y *= elem(&gm->value, c);
                if (bt) y += elem(&bt->value, c);
                Y[r * C + c] = (T)y;
            }
    });
}

/* sg and sgx per column (double, rows in order). */
static void column_sums(const optim_node *n, const bn_aux *a, double *sg, double *sgx)
{
    const int64_t R = a->rows, C = a->cols;
    memset(sg, 0, (size_t)C * sizeof *sg);
    memset(sgx, 0, (size_t)C * sizeof *sgx);
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *X = n->ins[BN_X]->value.data, *G = n->grad;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                const double g = (double)G[r * C + c];
                sg[c] += g;
                sgx[c] += g * ((double)X[r * C + c] - a->mean[c]) * a->inv[c];
            }
    });
}

static void backward_x(const optim_node *n, const bn_aux *a, const double *sg, const double *sgx,
                       void *dx)
{
    const int64_t R = a->rows, C = a->cols;
    const optim_node *gm = n->ins[BN_GAMMA];
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *X = n->ins[BN_X]->value.data, *G = n->grad;
        T *D = dx;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                const double s = (gm ? elem(&gm->value, c) : 1) * a->inv[c];
                const double g = (double)G[r * C + c];
                if (!a->training) {
                    D[r * C + c] += (T)(s * g);
                    continue;
                }
                const double xh = ((double)X[r * C + c] - a->mean[c]) * a->inv[c];
                D[r * C + c] += (T)(s * (g - sg[c] / (double)R - xh * sgx[c] / (double)R));
            }
    });
}

/* d[c] += f(c) for a [cols] gradient: which 0 gamma (sgx), 1 beta (sg),
 * 2 mean (-gamma inv sg), 3 var (-gamma inv^2 sgx / 2). */
static void add_param(const optim_node *n, const bn_aux *a, int which, const double *sg,
                      const double *sgx, void *d)
{
    const optim_node *gm = n->ins[BN_GAMMA];
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        T *D = d;
        for (int64_t c = 0; c < a->cols; c++) {
            const double s = gm ? elem(&gm->value, c) : 1;
            const double v = which == 0 ? sgx[c]
                : which == 1            ? sg[c]
                : which == 2            ? -s * a->inv[c] * sg[c]
                                        : -0.5 * s * a->inv[c] * a->inv[c] * sgx[c];
            D[c] += (T)v;
        }
    });
}

static int batch_norm_backward(optim_tape *t, optim_node *n)
{
    const bn_aux *a = n->aux;
    void *d[BN_NIN] = {0};
    for (int i = 0; i < BN_NIN; i++)
        if (n->ins[i] && n->ins[i]->need && !(d[i] = optim__tape_grad(t, n->ins[i])))
            return optim__tape_err(t, OPTIM_ENOMEM, "gradient of batch_norm: out of memory");
    double *sg = optim__arena_alloc(&t->arena, (size_t)(2 * a->cols + 1) * sizeof *sg);
    if (!sg) return optim__tape_err(t, OPTIM_ENOMEM, "gradient of batch_norm: out of memory");
    double *sgx = sg + a->cols;
    column_sums(n, a, sg, sgx);
    if (d[BN_X]) backward_x(n, a, sg, sgx, d[BN_X]);
    if (d[BN_GAMMA]) add_param(n, a, 0, sg, sgx, d[BN_GAMMA]);
    if (d[BN_BETA]) add_param(n, a, 1, sg, sgx, d[BN_BETA]);
    if (d[BN_MEAN]) add_param(n, a, 2, sg, sgx, d[BN_MEAN]);
    if (d[BN_VAR]) add_param(n, a, 3, sg, sgx, d[BN_VAR]);
    return OPTIM_OK;
}

/* x's rank and axis, epsilon, and the [cols] shape of the other inputs; 0
 * or -1 (message set). */
static int check(optim_tape *t, const char *op, optim_node *const *in, int32_t axis, double epsilon,
                 int training)
{
    static const char *names[BN_NIN] = {"x", "gamma", "beta", "mean", "variance"};
    optim_node *all[BN_NIN];
    size_t k = 0;
    for (int i = 0; i < BN_NIN; i++)
        if (in[i] || i == BN_X) all[k++] = in[i];
    if (!in[BN_X] || optim__tape_check_inputs(t, op, all, k)) return -1;
    const optim_tensor *xv = &in[BN_X]->value;
    char s[OPTIM__SHAPE_STR], sp[OPTIM__SHAPE_STR];
    if (xv->rank < 1 || optim__tape_axis(axis, xv->rank) != xv->rank - 1) {
        optim__tape_err(t, xv->rank < 1 ? OPTIM_ESHAPE : OPTIM_EINVAL,
                        "%s: axis = %d for x of shape %s, expected the last axis (-1 or rank - 1; "
                        "rank >= 1)",
                        op, (int)axis, optim__tape_shape(xv, s));
        return -1;
    }
    if (!(epsilon >= 0 && isfinite(epsilon))) {
        optim__tape_err(t, OPTIM_EINVAL, "%s: epsilon = %g, expected a finite value >= 0", op,
                        epsilon);
        return -1;
    }
    const int64_t cols = xv->shape[xv->rank - 1],
                  rows = cols ? optim__node_numel(in[BN_X]) / cols : 0;
    if (training && rows == 0) {
        optim__tape_err(t, OPTIM_ESHAPE,
                        "%s: x of shape %s has no rows, expected at least one for the batch "
                        "statistics",
                        op, optim__tape_shape(xv, s));
        return -1;
    }
    for (int i = 1; i < BN_NIN; i++)
        if (in[i] && (in[i]->value.rank != 1 || in[i]->value.shape[0] != cols)) {
            optim__tape_err(t, OPTIM_ESHAPE,
                            "%s: %s of shape %s for x of shape %s, expected [%lld]", op, names[i],
                            optim__tape_shape(&in[i]->value, sp), optim__tape_shape(xv, s),
                            (long long)cols);
            return -1;
        }
    return 0;
}

/* The node for inputs in[BN_NIN] (mean and var NULL: training); the batch
 * mean and variance go to mean_out / var_out when not NULL. */
static optim_node *batch_norm(optim_tape *t, const char *op, optim_node *const *in, double epsilon,
                              double *mean_out, double *var_out)
{
    const optim_tensor *xv = &in[BN_X]->value;
    const int64_t cols = xv->shape[xv->rank - 1];
    optim_node **ins = optim__arena_alloc(&t->arena, BN_NIN * sizeof *ins);
    bn_aux *a = optim__arena_alloc(&t->arena, sizeof *a);
    double *buf = optim__arena_alloc(&t->arena, (size_t)(3 * cols + 1) * sizeof *buf);
    if (!ins || !a || !buf) {
        optim__tape_err(t, OPTIM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    optim_node *n = optim__tape_node(t, op, xv->dtype, xv->rank, xv->shape, NULL, NULL);
    if (!n) return NULL;
    *a = (bn_aux){cols ? optim__node_numel(in[BN_X]) / cols : 0, cols, !in[BN_MEAN], buf,
                  buf + cols};
    double *var = buf + 2 * cols;
    if (a->training) batch_stats(a, xv, var);
    for (int64_t c = 0; c < cols && !a->training; c++)
        a->mean[c] = elem(&in[BN_MEAN]->value, c), var[c] = elem(&in[BN_VAR]->value, c);
    for (int64_t c = 0; c < cols; c++) a->inv[c] = 1 / sqrt(var[c] + epsilon);
    if (mean_out) memcpy(mean_out, a->mean, (size_t)cols * sizeof *mean_out);
    if (var_out) memcpy(var_out, var, (size_t)cols * sizeof *var_out);
    n->need = 0;
    for (int i = 0; i < BN_NIN; i++) {
        ins[i] = in[i];
        n->need |= in[i] && in[i]->need;
    }
    n->ins = ins;
    n->nin = BN_NIN;
    n->aux = a;
    n->backward = batch_norm_backward;
    forward(n, a, in);
    return n;
}

optim_node *optim_batch_norm(optim_tape *t, optim_node *x, optim_node *gamma, optim_node *beta,
                             int32_t axis, double epsilon, double *batch_mean, double *batch_var)
{
    static const char op[] = "batch_norm";
    optim_node *in[BN_NIN] = {x, gamma, beta, NULL, NULL};
    if (check(t, op, in, axis, epsilon, 1)) return NULL;
    return batch_norm(t, op, in, epsilon, batch_mean, batch_var);
}

optim_node *optim_batch_norm_inference(optim_tape *t, optim_node *x, optim_node *mean,
                                       optim_node *variance, optim_node *gamma, optim_node *beta,
                                       int32_t axis, double epsilon)
{
    static const char op[] = "batch_norm_inference";
    optim_node *in[BN_NIN] = {x, gamma, beta, mean, variance};
    if (t && (!mean || !variance)) {
        optim__tape_err(t, OPTIM_EINVAL, "%s: %s is NULL, expected a node of shape [last dim]", op,
                        !mean ? "mean" : "variance");
        return NULL;
    }
    if (check(t, op, in, axis, epsilon, 0)) return NULL;
    return batch_norm(t, op, in, epsilon, NULL, NULL);
}
