/* Activation (keras/src/layers/activations/activation.py): applies an
 * activation function, by the names Dense takes, to inputs of any shape;
 * no variables. */
#include "nn/internal.h"

#include <string.h>

static int activation_output_shape(const optim_layer *l, int32_t rank, const int64_t *in,
                                   int32_t *out_rank, int64_t *out, optim_error *err)
{
    (void)err;
    if (l->u.act == OPTIM_ACT_SOFTMAX && rank < 1)
        return optim__err(err, OPTIM_ESHAPE,
                          "layer \"%s\": softmax of a rank-0 input, expected rank >= 1", l->name);
    memcpy(out, in, (size_t)rank * sizeof *in);
    *out_rank = rank;
    return OPTIM_OK;
}

static int activation_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                           int training, optim_node **out, optim_error *err)
{
    (void)ids, (void)training;
    optim_node *h = optim_activation_apply(t, l->u.act, x);
    if (!h) return optim__nn_tape_err(err, t, l->name);
    *out = h;
    return OPTIM_OK;
}

static const optim__layer_ops activation_ops = {
    "Activation", "activation", 0, activation_output_shape, NULL, activation_call, NULL,
};

int optim_activation_layer_create(optim_layer **out, optim_activation activation, const char *name,
                                  optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "Activation: out is NULL");
    *out = NULL;
    if (!optim_activation_name(activation))
        return optim__err(err, OPTIM_EINVAL,
                          "Activation: activation = %d, expected an optim_activation",
                          (int)activation);
    int rc = optim__layer_new(out, &activation_ops, name, OPTIM_SEED_AUTO, err);
    if (rc) return rc;
    (*out)->u.act = activation;
    return OPTIM_OK;
}
