/* Losses with Keras's reductions (keras/src/losses/losses.py and loss.py,
 * backend/tensorflow/nn.py): MeanSquaredError, BinaryCrossentropy and
 * SparseCategoricalCrossentropy, each a per-sample mean over the last axis
 * reduced by SUM_OVER_BATCH_SIZE (sum / number of per-sample values), SUM
 * or NONE. Given probabilities (from_logits 0) that are the output of
 * optim_softmax / optim_sigmoid, the cross-entropies compute from that
 * op's input instead, as the TF backend's _get_logits. */
#include "nn/internal.h"
#include "tape/impl.h" /* optim__tape_clip, optim__tape_logits */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keras's backend.epsilon(). */
#define LOSS_EPSILON 1e-7

static optim_loss loss_make(optim_loss_kind kind, int from_logits)
{
    optim_loss l;
    memset(&l, 0, sizeof l);
    l.size = sizeof l;
    l.kind = kind;
    l.reduction = OPTIM_REDUCTION_SUM_OVER_BATCH_SIZE;
    l.from_logits = from_logits;
    return l;
}

optim_loss optim_loss_mean_squared_error(void)
{
    return loss_make(OPTIM_LOSS_MEAN_SQUARED_ERROR, 0);
}
optim_loss optim_loss_binary_crossentropy(int from_logits)
{
    return loss_make(OPTIM_LOSS_BINARY_CROSSENTROPY, from_logits);
}
optim_loss optim_loss_sparse_categorical_crossentropy(int from_logits)
{
    return loss_make(OPTIM_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, from_logits);
}

const char *optim_loss_name(const optim_loss *loss)
{
    if (!loss) return NULL;
    switch (loss->kind) {
    case OPTIM_LOSS_MEAN_SQUARED_ERROR: return "MeanSquaredError";
    case OPTIM_LOSS_BINARY_CROSSENTROPY: return "BinaryCrossentropy";
    case OPTIM_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY: return "SparseCategoricalCrossentropy";
    }
    return NULL;
}

int optim__loss_validate(const optim_loss *loss, optim_error *err)
{
    if (!loss) return optim__err(err, OPTIM_EINVAL, "loss is NULL");
    if (loss->size != sizeof *loss)
        return optim__err(err, OPTIM_EVERSION, "loss: size %u, expected %zu (use optim_loss_*())",
                          (unsigned)loss->size, sizeof *loss);
    const char *name = optim_loss_name(loss);
    if (!name)
        return optim__err(err, OPTIM_EINVAL, "loss: kind = %d, expected an optim_loss_kind",
                          (int)loss->kind);
    if ((unsigned)loss->reduction > OPTIM_REDUCTION_NONE)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: reduction = %d, expected SUM_OVER_BATCH_SIZE, SUM or NONE", name,
                          (int)loss->reduction);
    if (loss->from_logits != 0 && loss->from_logits != 1)
        return optim__err(err, OPTIM_EINVAL, "%s: from_logits = %d, expected 0 or 1", name,
                          loss->from_logits);
    if (!(loss->label_smoothing >= 0 && loss->label_smoothing <= 1))
        return optim__err(err, OPTIM_EINVAL, "%s: label_smoothing = %g, expected a value in [0, 1]",
                          name, loss->label_smoothing);
    if (loss->label_smoothing != 0 && loss->kind != OPTIM_LOSS_BINARY_CROSSENTROPY)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: label_smoothing = %g, only BinaryCrossentropy has it", name,
                          loss->label_smoothing);
    return OPTIM_OK;
}

static int same_shape(int32_t ra, const int64_t *a, int32_t rb, const int64_t *b)
{
    if (ra != rb) return 0;
    for (int32_t i = 0; i < ra; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* How y_true meets y_pred (Keras's squeeze_or_expand_to_same_rank, then equal
 * shapes): the common shape, and the shape y_pred must be reshaped to. */
typedef struct pair_shape {
    int32_t rank;
    int64_t shape[OPTIM_MAX_RANK];
} pair_shape;

static int resolve_pair(const char *name, int32_t tr, const int64_t *ts, int32_t pr,
                        const int64_t *ps, pair_shape *common, optim_error *err)
{
    char b1[128], b2[128];
    int32_t cr = -1;
    const int64_t *cs = NULL;
    if (tr == pr && same_shape(tr, ts, pr, ps)) {
        cr = pr, cs = ps;
    } else if (pr == tr + 1 && ps[pr - 1] == 1 && same_shape(tr, ts, pr - 1, ps)) {
        /* a rank-1 y_true is expanded to y_pred's shape; else y_pred is squeezed */
        if (tr == 1) cr = pr, cs = ps;
        else cr = tr, cs = ts;
    } else if (tr == pr + 1 && ts[tr - 1] == 1 && same_shape(tr - 1, ts, pr, ps)) {
        if (pr == 1) cr = tr, cs = ts;
        else cr = pr, cs = ps;
    }
    if (cr < 0)
        return optim__err(
            err, OPTIM_ESHAPE,
            "%s: y_true shape %s and y_pred shape %s are incompatible (expected equal "
            "shapes, up to a trailing dimension of 1)",
            name, optim_shape_str(tr, ts, b1, sizeof b1), optim_shape_str(pr, ps, b2, sizeof b2));
    if (cr < 1)
        return optim__err(err, OPTIM_ESHAPE, "%s: y_pred is a scalar, expected at least one axis",
                          name);
    common->rank = cr;
    memcpy(common->shape, cs, (size_t)cr * sizeof *cs);
    return OPTIM_OK;
}

/* Labels for SparseCategoricalCrossentropy: shape y_pred.shape[:-1], or that
 * with a trailing 1. */
static int check_labels_shape(const char *name, int32_t tr, const int64_t *ts, int32_t pr,
                              const int64_t *ps, optim_error *err)
{
    char b1[128], b2[128];
    if (pr < 1)
        return optim__err(err, OPTIM_ESHAPE, "%s: y_pred is a scalar, expected [..., classes]",
                          name);
    if (ps[pr - 1] < 1)
        return optim__err(err, OPTIM_ESHAPE, "%s: y_pred shape %s has no classes", name,
                          optim_shape_str(pr, ps, b2, sizeof b2));
    if (same_shape(tr, ts, pr - 1, ps) ||
        (tr == pr && ts[tr - 1] == 1 && same_shape(tr - 1, ts, pr - 1, ps)))
        return OPTIM_OK;
    return optim__err(err, OPTIM_ESHAPE,
                      "%s: y_true shape %s does not match y_pred shape %s: expected integer labels "
                      "of shape y_pred.shape[:-1]",
                      name, optim_shape_str(tr, ts, b1, sizeof b1),
                      optim_shape_str(pr, ps, b2, sizeof b2));
}

int optim__loss_check(const optim_loss *loss, const optim_tensor *y_true, int32_t pred_rank,
                      const int64_t *pred_shape, const char *what, optim_error *err)
{
    int rc = optim__loss_validate(loss, err);
    if (rc) return rc;
    const char *name = optim_loss_name(loss);
    char label[96];
    snprintf(label, sizeof label, "%s (%s)", name, what);
    if (loss->kind == OPTIM_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) {
        if ((rc = check_labels_shape(label, y_true->rank, y_true->shape, pred_rank, pred_shape,
                                     err)))
            return rc;
        int64_t *ids;
        if ((rc = optim__nn_ids(y_true, pred_shape[pred_rank - 1], what, &ids, err))) return rc;
        free(ids);
        return OPTIM_OK;
    }
    pair_shape common;
    return resolve_pair(label, y_true->rank, y_true->shape, pred_rank, pred_shape, &common, err);
}

/* tf.clip_by_value(p, eps, 1 - eps): the bound outside the range (+-inf
 * included), NaN kept, gradient 1 inside [eps, 1 - eps] and 0 outside. */
static optim_node *clip_probs(optim_tape *t, optim_node *p, optim_error *err)
{
    optim_node *r = optim__tape_clip(t, p, LOSS_EPSILON, 1.0 - LOSS_EPSILON);
    if (!r) optim__nn_tape_err(err, t, "clip");
    return r;
}

/* y_true as a constant of dtype dt in shape `s`, with BinaryCrossentropy's
 * label smoothing z (1 - ls) + ls / 2, or 1 - z when `complement`. */
static optim_node *target_const(optim_tape *t, const optim_tensor *y, optim_dtype dt,
                                const pair_shape *s, double ls, int complement, optim_error *err)
{
    int64_t n = optim_tensor_numel(y);
    void *buf = malloc(n ? (size_t)n * optim_dtype_size(dt) : 1);
    if (!buf) {
        optim__err(err, OPTIM_ENOMEM, "out of memory for y_true");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        double z = optim__nn_get(y, i);
        if (dt == OPTIM_F32) {
            float zf = (float)z;
            if (ls != 0) zf = zf * (float)(1.0 - ls) + 0.5f * (float)ls;
            ((float *)buf)[i] = complement ? 1.0f - zf : zf;
        } else {
            if (ls != 0) z = z * (1.0 - ls) + 0.5 * ls;
            ((double *)buf)[i] = complement ? 1.0 - z : z;
        }
    }
    optim_tensor c = optim_tensor_make(dt, buf, s->rank, s->shape);
    optim_node *r = optim_tape_const(t, &c);
    free(buf);
    if (!r) optim__nn_tape_err(err, t, "y_true");
    return r;
}

/* Sparse categorical crossentropy per sample: integer labels against the
 * logits of y_pred (its own, or log of the clipped probabilities). */
static int sparse_ce_per_sample(const optim_loss *loss, optim_tape *t, const optim_tensor *y_true,
                                optim_node *y_pred, const char *name, optim_node **per,
                                optim_error *err)
{
    const optim_tensor *pv = optim_node_value(y_pred);
    int rc = check_labels_shape(name, y_true->rank, y_true->shape, pv->rank, pv->shape, err);
    if (rc) return rc;
    int64_t classes = pv->shape[pv->rank - 1], n = optim_tensor_numel(y_true);
    int64_t *labels;
    if ((rc = optim__nn_ids(y_true, classes, "y_true", &labels, err))) return rc;
    /* probabilities straight from optim_softmax: its logits (Keras's _get_logits) */
    optim_node *logits = loss->from_logits ? y_pred : optim__tape_logits(y_pred, "softmax");
    if (!logits) logits = optim_log(t, clip_probs(t, y_pred, err));
    if (!logits) {
        free(labels);
        return err->code ? err->code : optim__nn_tape_err(err, t, name);
    }
    if (pv->rank != 2) logits = optim_reshape(t, logits, 2, (int64_t[]){n, classes});
    optim_node *r = optim_softmax_cross_entropy(t, logits, labels, n);
    free(labels);
    if (pv->rank != 2) r = optim_reshape(t, r, pv->rank - 1, pv->shape);
    *per = r;
    return OPTIM_OK;
}

/* The losses on (y_true, y_pred) of one shape, per sample: squared error,
 * binary crossentropy from logits or from probabilities. */
static int pair_per_sample(const optim_loss *loss, optim_tape *t, const optim_tensor *y_true,
                           optim_node *y_pred, const char *name, optim_node **per, optim_error *err)
{
    const optim_tensor *pv = optim_node_value(y_pred);
    const optim_dtype dt = pv->dtype;
    pair_shape s;
    int rc = resolve_pair(name, y_true->rank, y_true->shape, pv->rank, pv->shape, &s, err);
    if (rc) return rc;
    optim_node *p = same_shape(s.rank, s.shape, pv->rank, pv->shape)
        ? y_pred
        : optim_reshape(t, y_pred, s.rank, s.shape);
    optim_node *z = target_const(t, y_true, dt, &s, loss->label_smoothing, 0, err);
    if (!z) return err->code;
    optim_node *e;
    /* probabilities straight from optim_sigmoid, not reshaped (Keras's
     * squeeze_or_expand_to_same_rank makes a new tensor): its logits */
    optim_node *x =
        loss->kind == OPTIM_LOSS_BINARY_CROSSENTROPY && !loss->from_logits && p == y_pred
        ? optim__tape_logits(y_pred, "sigmoid")
        : NULL;
    if (loss->kind == OPTIM_LOSS_MEAN_SQUARED_ERROR) {
        e = optim_squared_error(t, p, z);
    } else if (loss->from_logits || x) {
        e = optim_sigmoid_cross_entropy(t, x ? x : p, z);
    } else {
        optim_node *zc = target_const(t, y_true, dt, &s, loss->label_smoothing, 1, err);
        if (!zc) return err->code;
        optim_node *pc = clip_probs(t, p, err);
        if (!pc) return err->code;
        optim_node *one = optim_tape_scalar(t, dt, 1.0);
        e = optim_neg(t,
                      optim_add(t, optim_mul(t, z, optim_log(t, pc)),
                                optim_mul(t, zc, optim_log(t, optim_sub(t, one, pc)))));
    }
    *per = optim_mean(t, e, -1);
    return OPTIM_OK;
}

/* *per times sample_weight, whose shape is the per-sample shape (a
 * trailing 1 added or dropped). */
static int weight_per_sample(optim_tape *t, const optim_tensor *sample_weight, const char *name,
                             optim_dtype dt, optim_node **per, optim_error *err)
{
    const optim_tensor *perv = optim_node_value(*per);
    int64_t nw = optim_tensor_numel(sample_weight);
    const int64_t *ws = sample_weight->shape, *vs = perv->shape;
    int32_t wr = sample_weight->rank, vr = perv->rank;
    int ok = same_shape(wr, ws, vr, vs) ||
        (wr == vr + 1 && ws[wr - 1] == 1 && same_shape(vr, ws, vr, vs)) ||
        (vr == wr + 1 && vs[vr - 1] == 1 && same_shape(wr, ws, wr, vs));
    if (!ok || nw != optim_tensor_numel(perv)) {
        char b1[128], b2[128];
        return optim__err(
            err, OPTIM_ESHAPE, "%s: sample_weight shape %s, expected the per-sample shape %s", name,
            optim_shape_str(wr, ws, b1, sizeof b1), optim_shape_str(vr, vs, b2, sizeof b2));
    }
    optim_tensor w = *sample_weight;
    w.rank = vr;
    memcpy(w.shape, vs, sizeof w.shape);
    optim_node *wn = optim__nn_const(t, &w, dt, err);
    if (!wn) return err->code;
    *per = optim_mul(t, *per, wn);
    return OPTIM_OK;
}

/* err is never NULL here. */
static int loss_call(const optim_loss *loss, optim_tape *t, const optim_tensor *y_true,
                     optim_node *y_pred, const optim_tensor *sample_weight, optim_node **out,
                     optim_error *err)
{
    int rc = optim__loss_validate(loss, err);
    if (rc) return rc;
    const char *name = optim_loss_name(loss);
    if (!t) return optim__err(err, OPTIM_EINVAL, "%s: the tape is NULL", name);
    if (!y_true) return optim__err(err, OPTIM_EINVAL, "%s: y_true is NULL", name);
    unsigned any = OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_I32) | OPTIM__MASK(OPTIM_I64);
    if ((rc = optim__tensor_check(y_true, any, "y_true", err))) return rc;
    if (sample_weight && (rc = optim__tensor_check(sample_weight, any, "sample_weight", err)))
        return rc;
    const optim_tensor *pv = optim_node_value(y_pred);
    if (!pv)
        return optim__err(err, OPTIM_EINVAL, "%s: y_pred is NULL (an earlier op failed: %s)", name,
                          optim_tape_errmsg(t));
    optim_dtype dt = pv->dtype;
    optim_node *per = NULL;
    rc = loss->kind == OPTIM_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY
        ? sparse_ce_per_sample(loss, t, y_true, y_pred, name, &per, err)
        : pair_per_sample(loss, t, y_true, y_pred, name, &per, err);
    if (rc) return rc;
    if (!per) return optim__nn_tape_err(err, t, name);
    const optim_tensor *perv = optim_node_value(per);
    int64_t count = optim_tensor_numel(perv);
    if (sample_weight && (rc = weight_per_sample(t, sample_weight, name, dt, &per, err))) return rc;
    optim_node *r = per;
    if (perv->rank > 0 && loss->reduction != OPTIM_REDUCTION_NONE) {
        if (count == 0) return optim__err(err, OPTIM_ESHAPE, "%s: y_pred has no samples", name);
        r = optim_sum(t, per, OPTIM_ALL_AXES);
        if (loss->reduction == OPTIM_REDUCTION_SUM_OVER_BATCH_SIZE)
            r = optim_div(t, r, optim_tape_scalar(t, dt, (double)count));
    }
    if (!r) return optim__nn_tape_err(err, t, name);
    *out = r;
    return OPTIM_OK;
}

int optim_loss_call(const optim_loss *loss, optim_tape *t, const optim_tensor *y_true,
                    optim_node *y_pred, const optim_tensor *sample_weight, optim_node **out,
                    optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "loss: out is NULL");
    *out = NULL;
    optim_error e;
    optim__err_clear(&e);
    int rc = loss_call(loss, t, y_true, y_pred, sample_weight, out, &e);
    if (rc) {
        *out = NULL;
        if (err) *err = e;
    }
    return rc;
}
