/* BatchNormalization (Keras 3 keras/src/layers/normalization/
 * batch_normalization.py) over the last axis: axis -1, momentum 0.99,
 * epsilon 1e-3, center and scale by default. Variables in Keras's order:
 * gamma (ones, when scale), beta (zeros, when center), moving_mean (zeros)
 * and moving_variance (ones), each of shape [last dim]; the moving ones are
 * not trainable (fit's optimizer never sees them; checkpoints keep them).
 *
 * A training call normalizes with the batch mean and biased variance over
 * all axes but the last (the tape's fused optim_batch_norm) and then
 * updates, as Keras 3 does,
 *   moving_mean = moving_mean momentum + mean (1 - momentum),
 *   moving_variance = moving_variance momentum + variance (1 - momentum),
 * with the biased variance, in double, rounded once to the dtype (Keras
 * computes it in the variable's dtype: float32 results can differ in the
 * last bit). tf.keras 2 differs for 4-D inputs: its fused kernel
 * (TensorFlow's FusedBatchNormV3) updates the moving variance with the
 * unbiased variance, var rows / (rows - 1) (Bessel's correction); its
 * non-fused path (2-D inputs) uses the biased one like Keras 3.
 * An inference call (training 0: evaluate, predict) uses the moving
 * statistics (optim_batch_norm_inference).
 *
 * Under data parallelism (optim_model_distribute), each replica normalizes
 * with its own rows' statistics, as Keras's BatchNormalization under
 * MirroredStrategy (not its synchronized=True), and after each step fit
 * replaces the moving statistics by their share-weighted mean over the
 * replicas (optim__replica_sync_stats), so all replicas keep the same
 * values and checkpoints do not depend on the rank that writes them.
 *
 * Keras's other axes, synchronized, renorm, masks, the initializer,
 * regularizer and constraint options are not supported. */
#include "nn/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int bn_output_shape(const optim_layer *l, int32_t rank, const int64_t *in, int32_t *out_rank,
                           int64_t *out, optim_error *err)
{
    const optim__batch_norm *p = &l->u.bnorm;
    char buf[128];
    int32_t ax = p->axis < 0 ? p->axis + rank : p->axis;
    if (rank < 2 || ax != rank - 1)
        return optim__err(err, OPTIM_EINVAL,
                          "layer \"%s\": axis=%d for input shape %s, expected the last axis (-1 "
                          "or %d) of an input of rank >= 2: BatchNormalization normalizes over "
                          "the last axis only",
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

static int bn_build(optim_layer *l, int32_t rank, const int64_t *in, optim_dtype dt,
                    optim_error *err)
{
    const optim__batch_norm *p = &l->u.bnorm;
    int64_t n = in[rank - 1];
    double *ones = malloc((size_t)(n > 0 ? n : 1) * sizeof *ones);
    if (!ones) return optim__err(err, OPTIM_ENOMEM, "layer \"%s\": out of memory", l->name);
    for (int64_t i = 0; i < n; i++) ones[i] = 1;
    int rc = OPTIM_OK;
    if (p->scale) rc = optim__layer_add_var(l, "gamma", dt, 1, &n, ones, NULL, err);
    if (!rc && p->center) rc = optim__layer_add_var(l, "beta", dt, 1, &n, NULL, NULL, err);
    if (!rc && !(rc = optim__layer_add_var(l, "moving_mean", dt, 1, &n, NULL, NULL, err)))
        optim_var_set_trainable(l->vars[l->nvars - 1], 0);
    if (!rc && !(rc = optim__layer_add_var(l, "moving_variance", dt, 1, &n, ones, NULL, err)))
        optim_var_set_trainable(l->vars[l->nvars - 1], 0);
    free(ones);
    return rc;
}

/* moving = moving momentum + stat (1 - momentum), in double. */
static void fold(optim_var *v, const double *stat, double momentum)
{
    int64_t n = optim_var_numel(v);
    void *d = optim_var_data(v);
    for (int64_t i = 0; i < n; i++) {
        if (optim_var_dtype(v) == OPTIM_F32) {
            float *f = d;
            f[i] = (float)((double)f[i] * momentum + stat[i] * (1 - momentum));
        } else {
            double *f = d;
            f[i] = f[i] * momentum + stat[i] * (1 - momentum);
        }
    }
}

/* A training call: batch statistics, then the moving update. */
static optim_node *bn_train(optim_layer *l, optim_tape *t, optim_node *x, optim_node *gamma,
                            optim_node *beta, optim_error *err)
{
    const optim__batch_norm *p = &l->u.bnorm;
    optim_var *mm = l->vars[l->nvars - 2], *mv = l->vars[l->nvars - 1];
    int64_t n = optim_var_numel(mm);
    double *stats = malloc((size_t)(2 * n + 1) * sizeof *stats);
    if (!stats) {
        optim__err(err, OPTIM_ENOMEM, "layer \"%s\": out of memory", l->name);
        return NULL;
    }
    optim_node *h = optim_batch_norm(t, x, gamma, beta, -1, p->epsilon, stats, stats + n);
    if (h) {
        fold(mm, stats, p->momentum);
        fold(mv, stats + n, p->momentum);
    }
    free(stats);
    return h;
}

static int bn_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                   int training, optim_node **out, optim_error *err)
{
    (void)ids;
    const optim__batch_norm *p = &l->u.bnorm;
    size_t k = 0;
    optim_node *gamma = p->scale ? optim_tape_var(t, l->vars[k++]) : NULL;
    optim_node *beta = p->center ? optim_tape_var(t, l->vars[k++]) : NULL;
    if ((p->scale && !gamma) || (p->center && !beta)) return optim__nn_tape_err(err, t, l->name);
    optim_node *h;
    if (training) {
        optim__err_clear(err);
        h = bn_train(l, t, x, gamma, beta, err);
        if (!h && err->code) return err->code;
    } else {
        optim_node *mm = optim_tape_var(t, l->vars[k]), *mv = optim_tape_var(t, l->vars[k + 1]);
        h = mm && mv ? optim_batch_norm_inference(t, x, mm, mv, gamma, beta, -1, p->epsilon) : NULL;
    }
    if (!h) return optim__nn_tape_err(err, t, l->name);
    *out = h;
    return OPTIM_OK;
}

static const optim__layer_ops bn_ops = {
    "BatchNormalization", "batch_normalization", 0, bn_output_shape, bn_build, bn_call, NULL,
};

optim_batch_normalization_options optim_batch_normalization_defaults(void)
{
    optim_batch_normalization_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.axis = -1;
    o.momentum = 0.99;
    o.epsilon = 1e-3;
    o.center = 1;
    o.scale = 1;
    return o;
}

/* The option checks; 0 or an error. */
static int bn_check(const optim_batch_normalization_options *o, optim_error *err)
{
    static const char who[] = "BatchNormalization";
    if (!o) return optim__err(err, OPTIM_EINVAL, "%s: options are NULL", who);
    if (o->size != sizeof *o)
        return optim__err(err, OPTIM_EVERSION,
                          "%s: options size %u, expected %zu (use "
                          "optim_batch_normalization_defaults)",
                          who, (unsigned)o->size, sizeof *o);
    if (o->axis < -1)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: axis=%d, expected the last axis (-1, or rank - 1 given as a "
                          "non-negative index)",
                          who, (int)o->axis);
    if (!(o->momentum >= 0 && o->momentum <= 1))
        return optim__err(err, OPTIM_EINVAL, "%s: momentum=%g, expected a value in [0, 1]", who,
                          o->momentum);
    if (!(o->epsilon >= 0 && isfinite(o->epsilon)))
        return optim__err(err, OPTIM_EINVAL, "%s: epsilon=%g, expected a finite value >= 0", who,
                          o->epsilon);
    if ((o->center != 0 && o->center != 1) || (o->scale != 0 && o->scale != 1))
        return optim__err(err, OPTIM_EINVAL, "%s: center=%d, scale=%d, expected 0 or 1 each", who,
                          o->center, o->scale);
    return OPTIM_OK;
}

int optim_batch_normalization_create(optim_layer **out,
                                     const optim_batch_normalization_options *opts,
                                     optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "BatchNormalization: out is NULL");
    *out = NULL;
    int rc = bn_check(opts, err);
    if (rc) return rc;
    if ((rc = optim__layer_new(out, &bn_ops, opts->name, OPTIM_SEED_AUTO, err))) return rc;
    optim__batch_norm *p = &(*out)->u.bnorm;
    p->axis = opts->axis;
    p->momentum = opts->momentum;
    p->epsilon = opts->epsilon;
    p->center = opts->center;
    p->scale = opts->scale;
    return OPTIM_OK;
}
