/* Activations: tanh, sigmoid, relu, gelu (exact and tanh form), silu
 * (element-wise) and softmax, log_softmax over the last axis.
 *
 * Gradients as TF's: tanh g*(1-y^2), sigmoid g*y*(1-y), relu g*(x > 0);
 * gelu and silu the derivatives written in elementwise_kernels.c;
 * softmax g_x = y*(g - sum(g*y)), log_softmax g_x = g - exp(y)*sum(g), per
 * row.
 *
 * softmax and sigmoid nodes keep their input in `logits`, for the
 * cross-entropy losses (optim__tape_logits). */
#include <string.h>
#include <tgmath.h>

#include "tape/impl.h"
#include "tape/kernels.h"

/* The loops are elementwise_kernels.c's, built per instruction-set level. */
static const optim__unary tanh_k = {"tanh", NULL, OPTIM__UN_TANH};
static const optim__unary sigmoid_k = {"sigmoid", NULL, OPTIM__UN_SIGMOID};
static const optim__unary relu_k = {"relu", NULL, OPTIM__UN_RELU};

optim_node *optim_tanh(optim_tape *t, optim_node *a) { return optim__tape_unary(t, &tanh_k, a); }
optim_node *optim_sigmoid(optim_tape *t, optim_node *a)
{
    optim_node *n = optim__tape_unary(t, &sigmoid_k, a);
    if (n) n->logits = a;
    return n;
}
optim_node *optim_relu(optim_tape *t, optim_node *a) { return optim__tape_unary(t, &relu_k, a); }

static const optim__unary gelu_k = {"gelu", NULL, OPTIM__UN_GELU};
static const optim__unary gelu_tanh_k = {"gelu", NULL, OPTIM__UN_GELU_TANH};
static const optim__unary silu_k = {"silu", NULL, OPTIM__UN_SILU};

optim_node *optim_gelu(optim_tape *t, optim_node *a, int approximate)
{
    return optim__tape_unary(t, approximate ? &gelu_tanh_k : &gelu_k, a);
}
optim_node *optim_silu(optim_tape *t, optim_node *a) { return optim__tape_unary(t, &silu_k, a); }

/* ---- relu(x + bias), fused (internal) ---------------------------------------------- */

/* The upstream g through ReLU as 0 + (y > 0 ? g : 0) (what relu's rule
 * writes into the sum's gradient), added into x's gradient (or written, on
 * the first contribution) and into the bias's, row by row. */
static int bias_relu_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->in[0], *b = n->in[1];
    int64_t cols = b->value.shape[0], rows = cols ? optim__node_numel(n) / cols : 0;
    int set = 0;
    void *dx = x->need ? optim__tape_grad_first(t, x, &set) : NULL;
    void *db = b->need ? optim__tape_grad(t, b) : NULL;
    if ((x->need && !dx) || (b->need && !db)) return OPTIM_ENOMEM;
    OPTIM__TAPE_K()->bias_relu_bwd[n->value.dtype == OPTIM_F64](n->value.data, n->grad, dx, db,
                                                                rows, cols, set);
    return OPTIM_OK;
}

optim_node *optim__tape_bias_relu(optim_tape *t, optim_node *x, optim_node *b)
{
    static const char op[] = "bias_relu";
    optim_node *in[2] = {x, b};
    if (optim__tape_check_inputs(t, op, in, 2)) return NULL;
    const optim_tensor *xv = &x->value, *bv = &b->value;
    if (xv->rank < 1 || bv->rank != 1 || bv->shape[0] != xv->shape[xv->rank - 1] || x == b) {
        char sx[OPTIM__SHAPE_STR], sb[OPTIM__SHAPE_STR];
        optim__tape_err(
            t, OPTIM_ESHAPE,
            "%s: x %s and bias %s, expected a bias of shape [n] for x of shape [..., n], "
            "another node than x",
            op, optim__tape_shape(xv, sx), optim__tape_shape(bv, sb));
        return NULL;
    }
    optim_node *n = optim__tape_node(t, op, xv->dtype, xv->rank, xv->shape, x, b);
    if (!n) return NULL;
    n->backward = bias_relu_backward;
    int64_t cols = bv->shape[0], rows = cols ? optim__node_numel(n) / cols : 0;
    OPTIM__TAPE_K()->bias_relu_fwd[xv->dtype == OPTIM_F64](xv->data, bv->data, n->value.data, rows,
                                                           cols);
    return n;
}

/* ---- softmax and log_softmax ------------------------------------------------------ */

static int softmax_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->in[0];
    int64_t cols = n->value.shape[n->value.rank - 1];
    int64_t rows = cols ? optim__node_numel(n) / cols : 0;
    int logsm = n->flags;
    void *d = optim__tape_grad(t, x);
    if (!d) return OPTIM_ENOMEM;
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *Y = n->value.data, *G = n->grad;
        T *D = d;
        for (int64_t r = 0; r < rows; r++) {
            const T *y = Y + r * cols, *g = G + r * cols;
            T *dx = D + r * cols;
            double s = 0;
            if (logsm) {
                for (int64_t c = 0; c < cols; c++) s += (double)g[c];
                for (int64_t c = 0; c < cols; c++) dx[c] += g[c] - exp(y[c]) * (T)s;
            } else {
                for (int64_t c = 0; c < cols; c++) s += (double)g[c] * (double)y[c];
                for (int64_t c = 0; c < cols; c++) dx[c] += y[c] * (g[c] - (T)s);
            }
        }
    });
    return OPTIM_OK;
}

static optim_node *softmax_op(optim_tape *t, const char *op, optim_node *a, int logsm)
{
    if (optim__tape_check_inputs(t, op, &a, 1)) return NULL;
    if (a->value.rank < 1) {
        optim__tape_err(t, OPTIM_ESHAPE,
                        "%s: shape [] is a scalar, expected rank >= 1 (over the last axis)", op);
        return NULL;
    }
    optim_node *n = optim__tape_node(t, op, a->value.dtype, a->value.rank, a->value.shape, a, NULL);
    if (!n) return NULL;
    n->flags = logsm;
    n->backward = softmax_backward;
    if (!logsm) n->logits = a;
    int64_t cols = a->value.shape[a->value.rank - 1];
    int64_t rows = cols ? optim__node_numel(a) / cols : 0;
    OPTIM__TAPE_TYPED(a->value.dtype, T, {
        const T *X = a->value.data;
        T *Y = n->value.data;
        for (int64_t r = 0; r < rows; r++) {
            const T *x = X + r * cols;
            T *y = Y + r * cols;
            T mx = x[0];
            for (int64_t c = 1; c < cols; c++)
                if (x[c] > mx) mx = x[c];
            double s = 0;
            for (int64_t c = 0; c < cols; c++) s += (double)exp(x[c] - mx);
            if (logsm) {
                T ls = (T)log(s);
                for (int64_t c = 0; c < cols; c++) y[c] = x[c] - mx - ls;
            } else {
                T inv = (T)(1.0 / s);
                for (int64_t c = 0; c < cols; c++) y[c] = exp(x[c] - mx) * inv;
            }
        }
    });
    return n;
}

optim_node *optim_softmax(optim_tape *t, optim_node *a) { return softmax_op(t, "softmax", a, 0); }
optim_node *optim_log_softmax(optim_tape *t, optim_node *a)
{
    return softmax_op(t, "log_softmax", a, 1);
}

optim_node *optim__tape_logits(const optim_node *n, const char *op)
{
    if (!n || !n->logits || !op || strcmp(n->op, op) != 0) return NULL;
    return n->logits;
}
