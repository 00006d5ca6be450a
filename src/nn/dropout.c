/* Dropout (keras/src/layers/regularization/dropout.py): while training,
 * zero each input with probability `rate` and scale the rest by
 * 1 / (1 - rate); the identity otherwise. Each training call gets a fresh
 * mask seed from (layer seed, call count). */
#include "nn/internal.h"

#include <math.h>

static int dropout_output_shape(const optim_layer *l, int32_t rank, const int64_t *in,
                                int32_t *out_rank, int64_t *out, optim_error *err)
{
    for (int32_t i = 0; i < rank; i++) out[i] = in[i];
    *out_rank = rank;
    return OPTIM_OK;
}

static int dropout_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                        int training, optim_node **out, optim_error *err)
{
    if (!training || l->u.drop.rate == 0) {
        *out = x;
        return OPTIM_OK;
    }
    uint64_t seed = optim__seed_mix(l->eff_seed, l->calls++);
    optim_node *h = optim_dropout(t, x, l->u.drop.rate, seed, 1);
    if (!h) return optim__nn_tape_err(err, t, l->name);
    *out = h;
    return OPTIM_OK;
}

static const optim__layer_ops dropout_ops = {
    "Dropout", "dropout", 0, dropout_output_shape, NULL, dropout_call, NULL,
};

int optim_dropout_create(optim_layer **out, double rate, int64_t seed, const char *name,
                         optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "Dropout: out is NULL");
    *out = NULL;
    if (!(rate >= 0 && rate < 1))
        return optim__err(err, OPTIM_EINVAL,
                          "Dropout: invalid value received for argument `rate`. Expected a float "
                          "value between 0 and 1. Received: rate=%g",
                          rate);
    int rc = optim__layer_new(out, &dropout_ops, name, seed, err);
    if (rc) return rc;
    (*out)->u.drop.rate = rate;
    return OPTIM_OK;
}
