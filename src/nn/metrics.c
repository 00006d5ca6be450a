/* Accuracy metrics (keras/src/metrics/accuracy_metrics.py) accumulated as
 * MeanMetricWrapper does (reduction_metrics.py): per-sample values, each
 * the mean over the sample's remaining axes, summed into total / count. */
#include "nn/internal.h"

#include <math.h>
#include <string.h>

const char *optim__metric_name(optim_metric_kind kind)
{
    switch (kind) {
    case OPTIM_METRIC_ACCURACY: return "accuracy";
    case OPTIM_METRIC_BINARY_ACCURACY: return "binary_accuracy";
    case OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY: return "sparse_categorical_accuracy";
    case OPTIM_METRIC_CATEGORICAL_ACCURACY: return "categorical_accuracy";
    case OPTIM_METRIC_NONE: break;
    }
    return NULL;
}

static optim_metric_kind resolve(optim_metric_kind kind, int32_t tr, const int64_t *ts, int32_t pr,
                                 const int64_t *ps)
{
    if (kind != OPTIM_METRIC_ACCURACY) return kind;
    /* trainers/compile_utils.py is_binary_or_sparse_categorical */
    int64_t t_last = tr ? ts[tr - 1] : 1;
    int64_t p_last = pr ? ps[pr - 1] : 1;
    if (p_last == 1) return OPTIM_METRIC_BINARY_ACCURACY;
    if (tr < pr || (t_last == 1 && p_last > 1)) return OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY;
    return OPTIM_METRIC_CATEGORICAL_ACCURACY;
}

optim_metric_kind optim_metric_resolve(optim_metric_kind kind, const optim_tensor *y_true,
                                       const optim_tensor *y_pred)
{
    if (!y_true || !y_pred) return kind;
    return resolve(kind, y_true->rank, y_true->shape, y_pred->rank, y_pred->shape);
}

static int64_t argmax_row(const optim_tensor *t, int64_t row, int64_t k)
{
    int64_t best = 0;
    double bv = optim__nn_get(t, row * k);
    for (int64_t j = 1; j < k; j++) {
        double v = optim__nn_get(t, row * k + j);
        if (v > bv || (isnan(v) && !isnan(bv))) best = j, bv = v;
    }
    return best;
}

static int shape_eq(int32_t ra, const int64_t *a, int32_t rb, const int64_t *b)
{
    if (ra != rb) return 0;
    for (int32_t i = 0; i < ra; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

int optim__metric_check(optim_metric_kind kind, int32_t tr, const int64_t *ts, int32_t pr,
                        const int64_t *ps, optim_error *err)
{
    kind = resolve(kind, tr, ts, pr, ps);
    const char *name = optim__metric_name(kind);
    char b1[128], b2[128];
    if (!name)
        return optim__err(err, OPTIM_EINVAL, "accuracy: kind = %d, expected an accuracy metric",
                          (int)kind);
    if (pr < 1)
        return optim__err(err, OPTIM_ESHAPE, "%s: y_pred is a scalar, expected a batch axis", name);
    int ok;
    if (kind == OPTIM_METRIC_BINARY_ACCURACY) {
        /* squeeze_or_expand_to_same_rank, then element-wise */
        ok = shape_eq(tr, ts, pr, ps) ||
            (pr == tr + 1 && ps[pr - 1] == 1 && shape_eq(tr, ts, tr, ps)) ||
            (tr == pr + 1 && ts[tr - 1] == 1 && shape_eq(pr, ts, pr, ps));
    } else if (kind == OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY) {
        ok = ps[pr - 1] > 0 &&
            (shape_eq(tr, ts, pr - 1, ps) ||
             (tr == pr && ts[tr - 1] == 1 && shape_eq(tr - 1, ts, pr - 1, ps)));
    } else {
        ok = ps[pr - 1] > 0 && shape_eq(tr, ts, pr, ps);
    }
    if (!ok)
        return optim__err(err, OPTIM_ESHAPE, "%s: y_true shape %s does not fit y_pred shape %s",
                          name, optim_shape_str(tr, ts, b1, sizeof b1),
                          optim_shape_str(pr, ps, b2, sizeof b2));
    return OPTIM_OK;
}

int optim_accuracy_update(optim_metric_kind kind, const optim_tensor *y_true,
                          const optim_tensor *y_pred, double *total, double *count,
                          optim_error *err)
{
    if (!y_true || !y_pred || !total || !count)
        return optim__err(err, OPTIM_EINVAL,
                          "accuracy: y_true, y_pred, total and count must not be NULL");
    unsigned any = OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_I32) | OPTIM__MASK(OPTIM_I64);
    int rc;
    if ((rc = optim__tensor_check(y_true, any, "y_true", err))) return rc;
    if ((rc = optim__tensor_check(y_pred, any, "y_pred", err))) return rc;
    if ((rc = optim__metric_check(kind, y_true->rank, y_true->shape, y_pred->rank, y_pred->shape,
                                  err)))
        return rc;
    kind = optim_metric_resolve(kind, y_true, y_pred);
    int32_t pr = y_pred->rank;
    int64_t n = y_pred->shape[0], pn = optim_tensor_numel(y_pred), tn = optim_tensor_numel(y_true);
    double sum = 0;
    if (kind == OPTIM_METRIC_BINARY_ACCURACY) {
        int64_t per = n ? pn / n : 0;
        for (int64_t s = 0; s < n; s++) {
            double m = 0;
            for (int64_t j = 0; j < per; j++) {
                int64_t i = s * per + j;
                double p = optim__nn_get(y_pred, i) > 0.5 ? 1.0 : 0.0;
                m += optim__nn_get(y_true, i) == p;
            }
            sum += m / (double)per;
        }
    } else if (kind == OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY) {
        int64_t k = y_pred->shape[pr - 1];
        if (pr == 1) n = 1; /* one sample of k scores */
        int64_t per = n ? tn / n : 0;
        for (int64_t s = 0; s < n; s++) {
            double m = 0;
            for (int64_t j = 0; j < per; j++) {
                int64_t i = s * per + j;
                m += optim__nn_get(y_true, i) == (double)argmax_row(y_pred, i, k);
            }
            sum += m / (double)per;
        }
    } else {
        int64_t k = y_pred->shape[pr - 1];
        if (pr == 1) n = 1;
        int64_t rows = pn / k, per = n ? rows / n : 0;
        for (int64_t s = 0; s < n; s++) {
            double m = 0;
            for (int64_t j = 0; j < per; j++) {
                int64_t i = s * per + j;
                m += argmax_row(y_true, i, k) == argmax_row(y_pred, i, k);
            }
            sum += m / (double)per;
        }
    }
    *total += sum;
    *count += (double)n;
    return OPTIM_OK;
}
