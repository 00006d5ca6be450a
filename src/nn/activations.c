/* Activations by Keras name (keras/src/activations/__init__.py): linear,
 * relu, sigmoid, tanh, softmax (last axis), gelu (approximate=False, the
 * default, which is all a config can name), silu (with Keras's alias
 * swish, the name tf-keras writes), recorded on a tape. */
#include "nn/internal.h"

#include <string.h>

static const char *const act_names[] = {"linear",  "relu", "sigmoid", "tanh",
                                        "softmax", "gelu", "silu"};

const char *optim_activation_name(optim_activation a)
{
    if ((unsigned)a >= sizeof act_names / sizeof *act_names) return NULL;
    return act_names[a];
}

int optim_activation_from_name(const char *name, optim_activation *out, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "activation: out is NULL");
    if (!name || strcmp(name, "None") == 0) {
        *out = OPTIM_ACT_LINEAR;
        return OPTIM_OK;
    }
    if (strcmp(name, "swish") == 0) { /* Keras 3's alias of silu */
        *out = OPTIM_ACT_SILU;
        return OPTIM_OK;
    }
    for (size_t i = 0; i < sizeof act_names / sizeof *act_names; i++)
        if (strcmp(name, act_names[i]) == 0) {
            *out = (optim_activation)i;
            return OPTIM_OK;
        }
    return optim__err(err, OPTIM_EINVAL,
                      "activation: unknown name '%s', expected one of linear, relu, sigmoid, tanh, "
                      "softmax, gelu, silu, swish",
                      name);
}

optim_node *optim_activation_apply(optim_tape *t, optim_activation a, optim_node *x)
{
    switch (a) {
    case OPTIM_ACT_LINEAR: return x;
    case OPTIM_ACT_RELU: return optim_relu(t, x);
    case OPTIM_ACT_SIGMOID: return optim_sigmoid(t, x);
    case OPTIM_ACT_TANH: return optim_tanh(t, x);
    case OPTIM_ACT_SOFTMAX: return optim_softmax(t, x);
    case OPTIM_ACT_GELU: return optim_gelu(t, x, 0);
    case OPTIM_ACT_SILU: return optim_silu(t, x);
    }
    return NULL;
}
