/* Conversions between the caller's tensors and the model's dtype, integer
 * ids, and tape error messages. */
#include "nn/internal.h"

#include "tape/impl.h" /* optim__tape_node_view */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double optim__nn_get(const optim_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case OPTIM_F32: return ((const float *)t->data)[i];
    case OPTIM_F64: return ((const double *)t->data)[i];
    case OPTIM_I32: return ((const int32_t *)t->data)[i];
    case OPTIM_I64: return (double)((const int64_t *)t->data)[i];
    default: return NAN;
    }
}

void *optim__nn_convert(const optim_tensor *x, optim_dtype dt)
{
    int64_t n = optim_tensor_numel(x);
    size_t es = optim_dtype_size(dt);
    if (n < 0 || es == 0 || (uint64_t)n > SIZE_MAX / es) return NULL;
    void *buf = malloc(n ? (size_t)n * es : 1);
    if (!buf) return NULL;
    if (x->dtype == dt) {
        if (n) memcpy(buf, x->data, (size_t)n * es);
    } else if (dt == OPTIM_F32) {
        float *o = buf;
        for (int64_t i = 0; i < n; i++) o[i] = (float)optim__nn_get(x, i);
    } else {
        double *o = buf;
        for (int64_t i = 0; i < n; i++) o[i] = optim__nn_get(x, i);
    }
    return buf;
}

int optim__nn_tape_err(optim_error *err, optim_tape *t, const char *what)
{
    const char *msg = t ? optim_tape_errmsg(t) : "";
    if (msg && *msg) return optim__err(err, OPTIM_EINVAL, "%s: %s", what, msg);
    return optim__err(err, OPTIM_ENOMEM, "%s: a tape operation failed (out of memory?)", what);
}

optim_node *optim__nn_const(optim_tape *t, const optim_tensor *x, optim_dtype dt, optim_error *err)
{
    if (x->dtype == dt) {
        optim_node *n = optim_tape_const(t, x);
        if (!n) optim__nn_tape_err(err, t, "constant");
        return n;
    }
    void *buf = optim__nn_convert(x, dt);
    if (!buf) {
        optim__err(err, OPTIM_ENOMEM, "out of memory converting a tensor to %s",
                   optim_dtype_name(dt));
        return NULL;
    }
    optim_tensor c = optim_tensor_make(dt, buf, x->rank, x->shape);
    optim_node *n = optim_tape_const(t, &c);
    free(buf);
    if (!n) optim__nn_tape_err(err, t, "constant");
    return n;
}

optim_node *optim__nn_input(optim_tape *t, const optim_tensor *x, optim_dtype dt, int borrow,
                            optim_error *err)
{
    if (!borrow || x->dtype != dt) return optim__nn_const(t, x, dt, err);
    /* x was checked by the caller (optim__model_call); the tape never writes
     * into an input's value. */
    optim_node *n = optim__tape_node_view(t, "const", dt, x->rank, x->shape, x->data, NULL, NULL);
    if (!n) optim__nn_tape_err(err, t, "constant");
    return n;
}

int optim__nn_ids(const optim_tensor *x, int64_t limit, const char *what, int64_t **out,
                  optim_error *err)
{
    *out = NULL;
    int64_t n = optim_tensor_numel(x);
    if (n < 0) return optim__err(err, OPTIM_ESHAPE, "%s: bad shape", what);
    if ((uint64_t)n > SIZE_MAX / sizeof(int64_t))
        return optim__err(err, OPTIM_ENOMEM, "%s: too large", what);
    int64_t *ids = malloc(n ? (size_t)n * sizeof *ids : 1);
    if (!ids)
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory for %lld ids", what, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (x->dtype == OPTIM_I32) v = ((const int32_t *)x->data)[i];
        else if (x->dtype == OPTIM_I64) v = ((const int64_t *)x->data)[i];
        else {
            double d = optim__nn_get(x, i);
            if (!(d == floor(d)) || fabs(d) > 9.0e15) {
                free(ids);
                return optim__err(err, OPTIM_EINVAL, "%s[%lld] = %g: expected a whole number", what,
                                  (long long)i, d);
            }
            v = (int64_t)d;
        }
        if (v < 0 || v >= limit) {
            free(ids);
            return optim__err(err, OPTIM_ERANGE, "%s[%lld] = %lld is not in [0, %lld)", what,
                              (long long)i, (long long)v, (long long)limit);
        }
        ids[i] = v;
    }
    *out = ids;
    return OPTIM_OK;
}
