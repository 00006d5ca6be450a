/* LayerNormalization (keras/src/layers/normalization/layer_normalization.py)
 * over the last axis: axis -1, epsilon 1e-3, center and scale by default;
 * gamma (ones) is created before beta (zeros), as Keras's build does, each
 * of shape [last dim]. The computation is the tape's fused optim_layer_norm.
 * Keras's list of axes, rms_scaling and the initializer, regularizer and
 * constraint options are not supported. */
#include "nn/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int ln_output_shape(const optim_layer *l, int32_t rank, const int64_t *in, int32_t *out_rank,
                           int64_t *out, optim_error *err)
{
    const optim__layer_norm *p = &l->u.lnorm;
    char buf[128];
    int32_t ax = p->axis < 0 ? p->axis + rank : p->axis;
    if (rank < 1 || ax != rank - 1)
        return optim__err(err, OPTIM_EINVAL,
                          "layer \"%s\": axis=%d for input shape %s, expected the last axis (-1 "
                          "or %d): LayerNormalization normalizes over the last axis only",
                          l->name, (int)p->axis, optim_shape_str(rank, in, buf, sizeof buf),
                          (int)rank - 1);
    if (l->built && l->nvars && optim_var_shape(l->vars[0])[0] != in[rank - 1])
        return optim__err(err, OPTIM_ESHAPE,
                          "Input 0 of layer \"%s\" is incompatible with the layer: expected axis "
                          "-1 of input shape to have value %lld, but received input with shape %s",
                          l->name, (long long)optim_var_shape(l->vars[0])[0],
                          optim_shape_str(rank, in, buf, sizeof buf));
    memcpy(out, in, (size_t)rank * sizeof *in);
    *out_rank = rank;
    return OPTIM_OK;
}

static int ln_build(optim_layer *l, int32_t rank, const int64_t *in, optim_dtype dt,
                    optim_error *err)
{
    const optim__layer_norm *p = &l->u.lnorm;
    int64_t n = in[rank - 1];
    if (p->scale) {
        double *ones = malloc((size_t)(n > 0 ? n : 1) * sizeof *ones);
        if (!ones) return optim__err(err, OPTIM_ENOMEM, "layer \"%s\": out of memory", l->name);
        for (int64_t i = 0; i < n; i++) ones[i] = 1;
        int rc = optim__layer_add_var(l, "gamma", dt, 1, &n, ones, NULL, err);
        free(ones);
        if (rc) return rc;
    }
    if (p->center) return optim__layer_add_var(l, "beta", dt, 1, &n, NULL, NULL, err);
    return OPTIM_OK;
}

static int ln_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                   int training, optim_node **out, optim_error *err)
{
    (void)ids, (void)training;
    const optim__layer_norm *p = &l->u.lnorm;
    size_t k = 0;
    optim_node *gamma = p->scale ? optim_tape_var(t, l->vars[k++]) : NULL;
    optim_node *beta = p->center ? optim_tape_var(t, l->vars[k++]) : NULL;
    optim_node *h = (p->scale && !gamma) || (p->center && !beta)
        ? NULL
        : optim_layer_norm(t, x, gamma, beta, -1, p->epsilon);
    if (!h) return optim__nn_tape_err(err, t, l->name);
    *out = h;
    return OPTIM_OK;
}

static const optim__layer_ops ln_ops = {
    "LayerNormalization", "layer_normalization", 0, ln_output_shape, ln_build, ln_call, NULL,
};

optim_layer_normalization_options optim_layer_normalization_defaults(void)
{
    optim_layer_normalization_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.axis = -1;
    o.epsilon = 1e-3;
    o.center = 1;
    o.scale = 1;
    return o;
}

/* The option checks; 0 or an error. */
static int ln_check(const optim_layer_normalization_options *o, optim_error *err)
{
    static const char who[] = "LayerNormalization";
    if (!o) return optim__err(err, OPTIM_EINVAL, "%s: options are NULL", who);
    if (o->size != sizeof *o)
        return optim__err(err, OPTIM_EVERSION,
                          "%s: options size %u, expected %zu (use "
                          "optim_layer_normalization_defaults)",
                          who, (unsigned)o->size, sizeof *o);
    if (o->axis < -1)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: axis=%d, expected the last axis (-1, or rank - 1 given as a "
                          "non-negative index)",
                          who, (int)o->axis);
    if (!(o->epsilon >= 0 && isfinite(o->epsilon)))
        return optim__err(err, OPTIM_EINVAL, "%s: epsilon=%g, expected a finite value >= 0", who,
                          o->epsilon);
    if ((o->center != 0 && o->center != 1) || (o->scale != 0 && o->scale != 1))
        return optim__err(err, OPTIM_EINVAL, "%s: center=%d, scale=%d, expected 0 or 1 each", who,
                          o->center, o->scale);
    return OPTIM_OK;
}

int optim_layer_normalization_create(optim_layer **out,
                                     const optim_layer_normalization_options *opts,
                                     optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "LayerNormalization: out is NULL");
    *out = NULL;
    int rc = ln_check(opts, err);
    if (rc) return rc;
    if ((rc = optim__layer_new(out, &ln_ops, opts->name, OPTIM_SEED_AUTO, err))) return rc;
    optim__layer_norm *p = &(*out)->u.lnorm;
    p->axis = opts->axis;
    p->epsilon = opts->epsilon;
    p->center = opts->center;
    p->scale = opts->scale;
    return OPTIM_OK;
}
