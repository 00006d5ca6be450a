/* Flatten (keras/src/layers/reshaping/flatten.py): [batch, d1, d2, ...] ->
 * [batch, d1 * d2 * ...]; a rank-1 input [batch] gives [batch, 1]. */
#include "nn/internal.h"

static int flatten_output_shape(const optim_layer *l, int32_t rank, const int64_t *in,
                                int32_t *out_rank, int64_t *out, optim_error *err)
{
    if (rank < 1)
        return optim__err(err, OPTIM_ESHAPE, "layer \"%s\": input of rank 0, expected a batch axis",
                          l->name);
    int64_t rest = 1;
    for (int32_t i = 1; i < rank; i++)
        if (optim__mul_overflow_i64(rest, in[i], &rest))
            return optim__err(err, OPTIM_ESHAPE, "layer \"%s\": input too large", l->name);
    out[0] = in[0];
    out[1] = rest;
    *out_rank = 2;
    return OPTIM_OK;
}

static int flatten_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                        int training, optim_node **out, optim_error *err)
{
    const optim_tensor *xv = optim_node_value(x);
    int32_t rank;
    int64_t shape[OPTIM_MAX_RANK];
    int rc = flatten_output_shape(l, xv->rank, xv->shape, &rank, shape, err);
    if (rc) return rc;
    optim_node *h = xv->rank == 2 ? x : optim_reshape(t, x, rank, shape);
    if (!h) return optim__nn_tape_err(err, t, l->name);
    *out = h;
    return OPTIM_OK;
}

static const optim__layer_ops flatten_ops = {
    "Flatten", "flatten", 0, flatten_output_shape, NULL, flatten_call, NULL,
};

int optim_flatten_create(optim_layer **out, const char *name, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "Flatten: out is NULL");
    return optim__layer_new(out, &flatten_ops, name, OPTIM_SEED_AUTO, err);
}
