/* Reductions: sum and mean over one axis or over all axes.
 *
 * The input is viewed as [outer, len, inner] around the reduced axis (all
 * axes: [1, numel, 1]); the result [outer, inner] drops the axis, as
 * tf.reduce_sum without keepdims. Sums accumulate in double, in index
 * order. The backward pass broadcasts the gradient back along the axis,
 * scaled by 1/len for the mean. */
#include "tape/impl.h"

#include <math.h>

static void view(const optim_node *x, int32_t axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *len = *inner = 1;
    if (axis == OPTIM_ALL_AXES) {
        *len = optim__node_numel(x);
        return;
    }
    for (int32_t d = 0; d < x->value.rank; d++) {
        int64_t s = x->value.shape[d];
        if (d < axis) *outer *= s;
        else if (d == axis) *len = s;
        else *inner *= s;
    }
}

static int reduce_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->in[0];
    int64_t outer, len, inner;
    view(x, n->axis, &outer, &len, &inner);
    int mean = n->flags;
    void *d = optim__tape_grad(t, x);
    if (!d) return OPTIM_ENOMEM;
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *G = n->grad;
        T *D = d;
        const T scale = mean ? (T)(1.0 / (double)len) : (T)1;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t l = 0; l < len; l++) {
                T *row = D + (o * len + l) * inner;
                const T *g = G + o * inner;
                if (mean)
                    for (int64_t i = 0; i < inner; i++) row[i] += g[i] * scale;
                else
                    for (int64_t i = 0; i < inner; i++) row[i] += g[i];
            }
    });
    return OPTIM_OK;
}

static optim_node *reduce(optim_tape *t, const char *op, optim_node *a, int32_t axis, int mean)
{
    if (optim__tape_check_inputs(t, op, &a, 1)) return NULL;
    int32_t rank = 0;
    int64_t shape[OPTIM_MAX_RANK];
    if (axis != OPTIM_ALL_AXES) {
        int32_t ax = optim__tape_axis(axis, a->value.rank);
        if (ax < 0) {
            char s[OPTIM__SHAPE_STR];
            optim__tape_err(t, OPTIM_ERANGE, "%s: axis %d is out of range for shape %s (rank %d)",
                            op, (int)axis, optim__tape_shape(&a->value, s), (int)a->value.rank);
            return NULL;
        }
        axis = ax;
        for (int32_t d = 0; d < a->value.rank; d++)
            if (d != axis) shape[rank++] = a->value.shape[d];
    }
    optim_node *n = optim__tape_node(t, op, a->value.dtype, rank, shape, a, NULL);
    if (!n) return NULL;
    n->axis = axis;
    n->flags = mean;
    n->backward = reduce_backward;
    int64_t outer, len, inner;
    view(a, axis, &outer, &len, &inner);
    /* Rows are added whole into a double accumulator, so the input is read
     * in order whatever the axis. */
    double *acc = optim__arena_alloc(&t->arena, (size_t)inner * sizeof(double));
    if (!acc) {
        optim__tape_err(t, OPTIM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    OPTIM__TAPE_TYPED(a->value.dtype, T, {
        const T *X = a->value.data;
        T *O = n->value.data;
        for (int64_t o = 0; o < outer; o++) {
            for (int64_t i = 0; i < inner; i++) acc[i] = 0;
            for (int64_t l = 0; l < len; l++) {
                const T *x = X + (o * len + l) * inner;
                for (int64_t i = 0; i < inner; i++) acc[i] += (double)x[i];
            }
            for (int64_t i = 0; i < inner; i++)
                O[o * inner + i] = (T)(mean ? (len ? acc[i] / (double)len : NAN) : acc[i]);
        }
    });
    return n;
}

optim_node *optim_sum(optim_tape *t, optim_node *a, int32_t axis)
{
    return reduce(t, "sum", a, axis, 0);
}
optim_node *optim_mean(optim_tape *t, optim_node *a, int32_t axis)
{
    return reduce(t, "mean", a, axis, 1);
}
