/* get_weights / set_weights: iterations, then the slots in creation order. */
#include "optimizer/impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A wrapper's weights are its iterations, then each inner optimizer's
 * weights after the inner iterations, then its own. */
optim_optimizer *optim__inner_at(const optim_optimizer *opt, size_t i)
{
    if (opt->cls.inner_at) return opt->cls.inner_at(opt, i);
    return i == 0 && opt->cls.inner ? opt->cls.inner(opt) : NULL;
}

size_t optim_weights_count(const optim_optimizer *opt)
{
    size_t n = 1 + opt->nslots;
    const optim_optimizer *in;
    for (size_t k = 0; (in = optim__inner_at(opt, k)); k++) n += optim_weights_count(in) - 1;
    return n;
}

/* Weight i >= 1 as a variable, NULL past the end. */
static optim_var *weight_var(const optim_optimizer *opt, size_t i)
{
    const optim_optimizer *in;
    for (size_t k = 0; i >= 1 && (in = optim__inner_at(opt, k)); k++) {
        size_t nin = optim_weights_count(in) - 1;
        if (i <= nin) return weight_var(in, i);
        i -= nin;
    }
    return i >= 1 && i <= opt->nslots ? opt->slots[i - 1].var : NULL;
}

size_t optim_get_weights(optim_optimizer *opt, optim_tensor *out, size_t cap)
{
    size_t n = optim_weights_count(opt);
    if (cap > 0) out[0] = optim_tensor_make(OPTIM_I64, &opt->iterations, 0, NULL);
    for (size_t i = 1; i < n && i < cap; i++) out[i] = optim_var_tensor(weight_var(opt, i));
    return n;
}

const char *optim_weight_name(const optim_optimizer *opt, size_t i)
{
    if (i == 0) return "iterations";
    optim_var *v = weight_var(opt, i);
    return v ? optim_var_name(v) : NULL;
}

int optim_set_iterations(optim_optimizer *opt, int64_t iterations)
{
    if (iterations < 0)
        return optim_set_error(opt, OPTIM_ERANGE, "iterations is %lld, expected >= 0",
                               (long long)iterations);
    opt->iterations = iterations;
    optim_optimizer *in = opt->cls.inner_at ? NULL : optim__inner_at(opt, 0);
    if (in) optim_set_iterations(in, iterations);
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

/* Reads the iterations weight; any integer or float scalar holding an
 * integral, non-negative value is accepted (Keras stores it as int64). */
static int read_iterations(optim_optimizer *opt, const optim_tensor *t, int64_t *out)
{
    optim_error e;
    unsigned all = OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_I32) | OPTIM__MASK(OPTIM_I64);
    if (optim__tensor_check(t, all, "set_weights: weight 0 (iterations)", &e))
        return optim__opt_take(opt, &e);
    if (optim_tensor_numel(t) != 1)
        return optim__opt_err(opt, OPTIM_ESHAPE,
                              "set_weights: weight 0 (iterations) has %lld elements, expected a "
                              "scalar",
                              (long long)optim_tensor_numel(t));
    double v;
    switch (t->dtype) {
    case OPTIM_I64: *out = *(const int64_t *)t->data; return *out >= 0 ? OPTIM_OK :
        optim__opt_err(opt, OPTIM_ERANGE, "set_weights: iterations is %lld, expected >= 0",
                       (long long)*out);
    case OPTIM_I32: v = *(const int32_t *)t->data; break;
    case OPTIM_F32: v = *(const float *)t->data; break;
    default: v = *(const double *)t->data; break;
    }
    if (!(v >= 0) || v != floor(v) || v > 9.0e18)
        return optim__opt_err(opt, OPTIM_ERANGE,
                              "set_weights: iterations is %g, expected a non-negative integer", v);
    *out = (int64_t)v;
    return OPTIM_OK;
}

int optim_set_weights(optim_optimizer *opt, const optim_tensor *w, size_t n)
{
    size_t want = optim_weights_count(opt);
    if (n != want)
        return optim__opt_err(opt, OPTIM_ESHAPE,
                              "set_weights: %zu weights given, expected %zu (iterations and %zu "
                              "slots)",
                              n, want, want - 1);
    if (!w) return optim__opt_err(opt, OPTIM_EINVAL, "set_weights: weights is NULL");
    int64_t it = 0;
    int rc = read_iterations(opt, &w[0], &it);
    if (rc) return rc;
    for (size_t i = 1; i < n; i++) {
        optim_var *s = weight_var(opt, i);
        char what[300];
        optim_error e;
        snprintf(what, sizeof what, "set_weights: weight %zu ('%s')", i, optim_var_name(s));
        if (optim__tensor_check(&w[i], OPTIM__MASK(optim_var_dtype(s)), what, &e))
            return optim__opt_take(opt, &e);
        int same = w[i].rank == optim_var_rank(s);
        for (int32_t d = 0; same && d < w[i].rank; d++)
            same = w[i].shape[d] == optim_var_shape(s)[d];
        if (!same) {
            char a[160], b[160];
            return optim__opt_err(opt, OPTIM_ESHAPE, "%s has shape %s, expected %s", what,
                                  optim_shape_str(w[i].rank, w[i].shape, a, sizeof a),
                                  optim_shape_str(optim_var_rank(s), optim_var_shape(s), b,
                                                  sizeof b));
        }
    }
    optim_set_iterations(opt, it);
    for (size_t i = 1; i < n; i++) {
        optim_var *s = weight_var(opt, i);
        optim_var_assign(s, w[i].data, w[i].dtype, optim_var_numel(s));
    }
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}
