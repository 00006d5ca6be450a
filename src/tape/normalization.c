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

/* One row's statistics and output; T the element type. */
#define LN_ROW_FWD(T, X, Y, G, B, cols, eps, stats)                \
    do {                                                           \
        double s_ = 0, v_ = 0;                                     \
        for (int64_t c = 0; c < (cols); c++) s_ += (double)(X)[c]; \
        const double mean_ = s_ / (double)(cols);                  \
        for (int64_t c = 0; c < (cols); c++) {                     \
            const double e_ = (double)(X)[c] - mean_;              \
            v_ += e_ * e_;                                         \
        }                                                          \
        const double inv_ = 1 / sqrt(v_ / (double)(cols) + (eps)); \
        (stats)[0] = mean_, (stats)[1] = inv_;                     \
        for (int64_t c = 0; c < (cols); c++) {                     \
            double y_ = ((double)(X)[c] - mean_) * inv_;           \
            if (G) y_ *= (double)(G)[c];                           \
            if (B) y_ += (double)(B)[c];                           \
            (Y)[c] = (T)y_;                                        \
        }                                                          \
    } while (0)

static void forward(optim_node *n, const optim_node *x, const void *gamma, const void *beta,
                    double eps, double *stats)
{
    const ln_dims d = dims_of(&x->value);
    OPTIM__TAPE_TYPED(x->value.dtype, T, {
        const T *G = gamma, *B = beta;
        for (int64_t r = 0; r < d.rows; r++) {
            const T *X = (const T *)x->value.data + r * d.cols;
            T *Y = (T *)n->value.data + r * d.cols;
            LN_ROW_FWD(T, X, Y, G, B, d.cols, eps, stats + 2 * r);
        }
    });
}

/* Adds the column sums acc[0..cols) (double) into a gradient buffer. */
static void add_cols(void *d, optim_dtype dt, const double *acc, int64_t cols)
{
    OPTIM__TAPE_TYPED(dt, T, {
        T *D = d;
        for (int64_t c = 0; c < cols; c++) D[c] += (T)acc[c];
    });
}

/* dx of one row (into DX when not NULL), and its g xhat / g into the
 * column sums AG / AB (when not NULL); GM: gamma or NULL. */
#define LN_ROW_BWD(T, X, GR, GM, DX, AG, AB, cols, mean, inv)                               \
    do {                                                                                    \
        double s1_ = 0, s2_ = 0;                                                            \
        for (int64_t c = 0; c < (cols); c++) {                                              \
            const double g_ = (double)(GR)[c], xh_ = ((double)(X)[c] - (mean)) * (inv);     \
            const double dxh_ = (GM) ? g_ * (double)(GM)[c] : g_;                           \
            s1_ += dxh_, s2_ += dxh_ * xh_;                                                 \
            if (AG) (AG)[c] += g_ * xh_;                                                    \
            if (AB) (AB)[c] += g_;                                                          \
        }                                                                                   \
        const double m1_ = s1_ / (double)(cols), m2_ = s2_ / (double)(cols);                \
        if (DX)                                                                             \
            for (int64_t c = 0; c < (cols); c++) {                                          \
                const double g_ = (double)(GR)[c], xh_ = ((double)(X)[c] - (mean)) * (inv); \
                const double dxh_ = (GM) ? g_ * (double)(GM)[c] : g_;                       \
                (DX)[c] += (T)((inv) * (dxh_ - m1_ - xh_ * m2_));                           \
            }                                                                               \
    } while (0)

static void backward_rows(const optim_node *n, const double *stats, void *dx, double *ag,
                          double *ab)
{
    const optim_node *x = n->ins[0], *gm = n->ins[1];
    const ln_dims d = dims_of(&n->value);
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *GM = gm ? (const T *)gm->value.data : NULL;
        for (int64_t r = 0; r < d.rows; r++) {
            const int64_t o = r * d.cols;
            const T *X = (const T *)x->value.data + o, *GR = (const T *)n->grad + o;
            T *DX = dx ? (T *)dx + o : NULL;
            LN_ROW_BWD(T, X, GR, GM, DX, ag, ab, d.cols, stats[2 * r], stats[2 * r + 1]);
        }
    });
}

static int layer_norm_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->ins[0], *gm = n->ins[1], *bt = n->ins[2];
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
    backward_rows(n, n->aux, dx, ag, ab);
    if (ag) add_cols(dg, n->value.dtype, ag, d.cols);
    if (ab) add_cols(db, n->value.dtype, ab, d.cols);
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
