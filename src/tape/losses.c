/* Fused losses: softmax cross-entropy against integer labels and sigmoid
 * cross-entropy against targets, in their numerically stable forms.
 *
 * softmax: loss_i = logsumexp(x_i) - x_i[label_i] (the row maximum taken
 * out first); the probabilities are kept for the backward rule
 * g_i * (softmax(x_i) - onehot(label_i)), as
 * tf.nn.sparse_softmax_cross_entropy_with_logits.
 * sigmoid: max(x, 0) - x*z + log(1 + exp(-|x|)), with gradients
 * g*(sigmoid(x) - z) for x and -g*x for z, as
 * tf.nn.sigmoid_cross_entropy_with_logits. The element loops are built per
 * instruction-set level (elementwise_kernels.c); the row sums here stay
 * in order. */
#include <tgmath.h>

#include "tape/impl.h"
#include "tape/kernels.h"

#include <string.h>

static int sce_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->in[0];
    int64_t rows = x->value.shape[0], cols = x->value.shape[1];
    void *d = optim__tape_grad(t, x);
    if (!d) return OPTIM_ENOMEM;
    OPTIM__TAPE_K()->sce_bwd[n->value.dtype == OPTIM_F64](n->aux, n->grad, n->idx, d, rows, cols);
    return OPTIM_OK;
}

optim_node *optim_softmax_cross_entropy(optim_tape *t, optim_node *logits, const int64_t *labels,
                                        int64_t n)
{
    static const char op[] = "softmax_cross_entropy";
    if (optim__tape_check_inputs(t, op, &logits, 1)) return NULL;
    char s[OPTIM__SHAPE_STR];
    const optim_tensor *v = &logits->value;
    if (v->rank != 2) {
        optim__tape_err(t, OPTIM_ESHAPE, "%s: logits have shape %s, expected [batch, classes]", op,
                        optim__tape_shape(v, s));
        return NULL;
    }
    int64_t rows = v->shape[0], cols = v->shape[1];
    if (n != rows) {
        optim__tape_err(t, OPTIM_ESHAPE, "%s: %lld labels for logits of shape %s, expected %lld",
                        op, (long long)n, optim__tape_shape(v, s), (long long)rows);
        return NULL;
    }
    if (n > 0 && !labels) {
        optim__tape_err(t, OPTIM_EINVAL, "%s: labels is NULL", op);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= cols) {
            optim__tape_err(
                t, OPTIM_ERANGE,
                "%s: label %lld at position %lld is out of range for logits of shape %s, "
                "expected 0..%lld",
                op, (long long)labels[i], (long long)i, optim__tape_shape(v, s),
                (long long)cols - 1);
            return NULL;
        }
    optim_node *out = optim__tape_node(t, op, v->dtype, 1, &rows, logits, NULL);
    if (!out) return NULL;
    size_t es = optim_dtype_size(v->dtype);
    int64_t *idx = optim__arena_alloc(&t->arena, (size_t)n * sizeof *idx);
    void *probs = optim__arena_alloc(&t->arena, (size_t)(rows * cols) * es);
    if (!idx || !probs) {
        optim__tape_err(t, OPTIM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    if (n) memcpy(idx, labels, (size_t)n * sizeof *idx);
    out->idx = idx;
    out->nidx = n;
    out->aux = probs;
    out->backward = sce_backward;
    OPTIM__TAPE_TYPED(v->dtype, T, {
        const T *X = v->data;
        T *P = probs, *L = out->value.data;
        for (int64_t r = 0; r < rows; r++) {
            const T *x = X + r * cols;
            T *p = P + r * cols;
            T mx = x[0];
            for (int64_t c = 1; c < cols; c++)
                if (x[c] > mx) mx = x[c];
            double sum = 0;
            for (int64_t c = 0; c < cols; c++) {
                p[c] = exp(x[c] - mx);
                sum += (double)p[c];
            }
            T inv = (T)(1.0 / sum);
            for (int64_t c = 0; c < cols; c++) p[c] *= inv;
            L[r] = (T)(log(sum) + (double)mx - (double)x[idx[r]]);
        }
    });
    return out;
}

/* ---- sigmoid cross-entropy ----------------------------------------------------------- */

static int bce_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->in[0], *z = n->in[1];
    void *dx = x->need ? optim__tape_grad(t, x) : NULL;
    void *dz = z->need ? optim__tape_grad(t, z) : NULL;
    if ((x->need && !dx) || (z->need && !dz)) return OPTIM_ENOMEM;
    OPTIM__TAPE_K()->bce_bwd[n->value.dtype == OPTIM_F64](x->value.data, z->value.data, n->grad, dx,
                                                          dz, optim__node_numel(n));
    return OPTIM_OK;
}

optim_node *optim_sigmoid_cross_entropy(optim_tape *t, optim_node *logits, optim_node *targets)
{
    static const char op[] = "sigmoid_cross_entropy";
    optim_node *in[2] = {logits, targets};
    if (optim__tape_check_inputs(t, op, in, 2)) return NULL;
    const optim_tensor *a = &logits->value, *b = &targets->value;
    int same = a->rank == b->rank;
    for (int32_t d = 0; same && d < a->rank; d++) same = a->shape[d] == b->shape[d];
    if (!same) {
        char sa[OPTIM__SHAPE_STR], sb[OPTIM__SHAPE_STR];
        optim__tape_err(t, OPTIM_ESHAPE, "%s: logits %s and targets %s, expected the same shape",
                        op, optim__tape_shape(a, sa), optim__tape_shape(b, sb));
        return NULL;
    }
    optim_node *n = optim__tape_node(t, op, a->dtype, a->rank, a->shape, logits, targets);
    if (!n) return NULL;
    n->backward = bce_backward;
    OPTIM__TAPE_K()->bce_fwd[a->dtype == OPTIM_F64](a->data, b->data, n->value.data,
                                                    optim__node_numel(n));
    return n;
}
