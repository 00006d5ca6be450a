/* Dense (keras/src/layers/core/dense.py): activation(x . kernel + bias) on
 * the last axis of inputs of rank >= 2; kernel [in, units] from
 * glorot_uniform (keras/src/initializers/random_initializers.py: uniform in
 * +-sqrt(3 * scale), scale = 1 / max(1, (fan_in + fan_out) / 2)), bias zeros. */
#include "nn/internal.h"

#include "tape/impl.h" /* optim__tape_bias_relu */

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int dense_output_shape(const optim_layer *l, int32_t rank, const int64_t *in,
                              int32_t *out_rank, int64_t *out, optim_error *err)
{
    const optim__dense *d = &l->u.dense;
    char buf[128];
    if (rank < 2)
        return optim__err(err, OPTIM_ESHAPE,
                          "Input 0 of layer \"%s\" is incompatible with the layer: expected "
                          "min_ndim=2, found ndim=%d (input shape %s)",
                          l->name, (int)rank, optim_shape_str(rank, in, buf, sizeof buf));
    if (l->built && in[rank - 1] != d->in_dim)
        return optim__err(err, OPTIM_ESHAPE,
                          "Input 0 of layer \"%s\" is incompatible with the layer: expected axis "
                          "-1 of input shape to have value %lld, but received input with shape %s",
                          l->name, (long long)d->in_dim,
                          optim_shape_str(rank, in, buf, sizeof buf));
    if (in[rank - 1] <= 0)
        return optim__err(err, OPTIM_ESHAPE,
                          "layer \"%s\": the last axis of the input shape %s must be > 0", l->name,
                          optim_shape_str(rank, in, buf, sizeof buf));
    *out_rank = rank;
    memcpy(out, in, (size_t)rank * sizeof *in);
    out[rank - 1] = d->units;
    return OPTIM_OK;
}

static int dense_build(optim_layer *l, int32_t rank, const int64_t *in, optim_dtype dt,
                       optim_error *err)
{
    optim__dense *d = &l->u.dense;
    int64_t fan_in = in[rank - 1], fan_out = d->units;
    int64_t n;
    if (optim__mul_overflow_i64(fan_in, fan_out, &n) || (uint64_t)n > SIZE_MAX / sizeof(double))
        return optim__err(err, OPTIM_ESHAPE, "layer \"%s\": kernel [%lld, %lld] is too large",
                          l->name, (long long)fan_in, (long long)fan_out);
    double *init = malloc((size_t)n * sizeof *init);
    if (!init) return optim__err(err, OPTIM_ENOMEM, "layer \"%s\": out of memory", l->name);
    double scale = 1.0 / fmax(1.0, (double)(fan_in + fan_out) / 2.0);
    double limit = sqrt(3.0 * scale);
    optim__rng r = optim__rng_make(l->eff_seed);
    for (int64_t i = 0; i < n; i++) init[i] = -limit + 2.0 * limit * optim__rng_uniform(&r);
    int64_t kshape[2] = {fan_in, fan_out};
    int rc = optim__layer_add_var(l, "kernel", dt, 2, kshape, init,
                                  d->has_kernel_constraint ? &d->kernel_constraint : NULL, err);
    free(init);
    if (rc) return rc;
    if (d->use_bias) {
        rc = optim__layer_add_var(l, "bias", dt, 1, &d->units, NULL,
                                  d->has_bias_constraint ? &d->bias_constraint : NULL, err);
        if (rc) return rc;
    }
    d->in_dim = fan_in;
    return OPTIM_OK;
}

static int dense_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                      int training, optim_node **out, optim_error *err)
{
    const optim__dense *d = &l->u.dense;
    const optim_tensor *xv = optim_node_value(x);
    int32_t rank = xv->rank;
    optim_node *h = x;
    if (rank > 2) {
        int64_t flat[2] = {optim_tensor_numel(xv) / d->in_dim, d->in_dim};
        h = optim_reshape(t, h, 2, flat);
    }
    h = optim_matmul(t, h, optim_tape_var(t, l->vars[0]), 0, 0);
    int fused =
        d->use_bias && d->activation == OPTIM_ACT_RELU; /* relu(h + bias) in one op, same bits */
    if (fused) h = optim__tape_bias_relu(t, h, optim_tape_var(t, l->vars[1]));
    else if (d->use_bias) h = optim_add(t, h, optim_tape_var(t, l->vars[1]));
    if (rank > 2) {
        int64_t shape[OPTIM_MAX_RANK];
        memcpy(shape, xv->shape, (size_t)rank * sizeof *shape);
        shape[rank - 1] = d->units;
        h = optim_reshape(t, h, rank, shape);
    }
    if (!fused) h = optim_activation_apply(t, d->activation, h);
    if (!h) return optim__nn_tape_err(err, t, l->name);
    *out = h;
    return OPTIM_OK;
}

static const optim__layer_ops dense_ops = {
    "Dense", "dense", 0, dense_output_shape, dense_build, dense_call, NULL,
};

optim_dense_options optim_dense_defaults(int64_t units)
{
    optim_dense_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.units = units;
    o.activation = OPTIM_ACT_LINEAR;
    o.use_bias = 1;
    o.seed = OPTIM_SEED_AUTO;
    return o;
}

int optim_dense_create(optim_layer **out, const optim_dense_options *opts, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "Dense: out is NULL");
    *out = NULL;
    if (!opts)
        return optim__err(err, OPTIM_EINVAL, "Dense: options are NULL (use optim_dense_defaults)");
    if (opts->size != sizeof *opts)
        return optim__err(err, OPTIM_EVERSION,
                          "Dense: options size %u, expected %zu (use optim_dense_defaults)",
                          (unsigned)opts->size, sizeof *opts);
    if (opts->units <= 0)
        return optim__err(err, OPTIM_EINVAL,
                          "Dense: received an invalid value for `units`, expected a positive "
                          "integer. Received: units=%lld",
                          (long long)opts->units);
    if (!optim_activation_name(opts->activation))
        return optim__err(err, OPTIM_EINVAL, "Dense: activation = %d, expected an optim_activation",
                          (int)opts->activation);
    if (opts->use_bias != 0 && opts->use_bias != 1)
        return optim__err(err, OPTIM_EINVAL, "Dense: use_bias = %d, expected 0 or 1",
                          opts->use_bias);
    int rc = optim__check_constraint(opts->kernel_constraint, 2, "Dense kernel_constraint", err);
    if (rc) return rc;
    if ((rc = optim__check_constraint(opts->bias_constraint, 1, "Dense bias_constraint", err)))
        return rc;
    optim_layer *l;
    if ((rc = optim__layer_new(&l, &dense_ops, opts->name, opts->seed, err))) return rc;
    optim__dense *d = &l->u.dense;
    d->units = opts->units;
    d->activation = opts->activation;
    d->use_bias = opts->use_bias;
    if (opts->kernel_constraint && opts->kernel_constraint->kind != OPTIM_CONSTRAINT_NONE) {
        d->has_kernel_constraint = 1;
        d->kernel_constraint = *opts->kernel_constraint;
    }
    if (opts->bias_constraint && opts->bias_constraint->kind != OPTIM_CONSTRAINT_NONE) {
        d->has_bias_constraint = 1;
        d->bias_constraint = *opts->bias_constraint;
    }
    *out = l;
    return OPTIM_OK;
}
