/* Step 1 of the pipeline: every (gradient, variable) pair checked before
 * anything changes, against the update rule that will run; and the step
 * API's read-only questions (optim/step.h). */
#include "optimizer/impl.h"
#include "optimizer/keras3_options.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int same_dims(int32_t rank, const int64_t *a, const int64_t *b)
{
    for (int32_t i = 0; i < rank; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static int check_sparse(const optim_optimizer *opt, const char *what, const optim_slices *s,
                        optim_var *v, optim_error *err);

int optim__check_pair(const optim_optimizer *opt, const char *cn, const optim_grad_var *p, size_t i,
                      optim_error *err)
{
    if (!p->var) return optim__err(err, OPTIM_EINVAL, "%s: pair %zu has no variable (NULL)", cn, i);
    optim_var *v = p->var;
    const char *vn = optim_var_name(v);
    if (p->grad.kind == OPTIM_GRAD_NONE) return OPTIM_OK;
    const optim__var_entry *known = optim__var_entry_at(opt, v, i);
    if (opt->built && !known)
        return optim__err(err, OPTIM_ENOTFOUND,
                          "%s: variable '%s' is unknown to this optimizer, which was built for "
                          "%zu variables",
                          cn, vn, opt->nvars);
    if (!optim_var_trainable(v))
        return optim__err(err, OPTIM_EINVAL, "%s: variable '%s' is not trainable", cn, vn);
    if (known && (known->numel != optim_var_numel(v) || known->dtype != optim_var_dtype(v)))
        return optim__err(err, OPTIM_ESTATE,
                          "%s: variable '%s' (%lld %s elements) is not the one this optimizer "
                          "made slots for (%lld %s); was a variable destroyed while the "
                          "optimizer still used it?",
                          cn, vn, (long long)optim_var_numel(v),
                          optim_dtype_name(optim_var_dtype(v)), (long long)known->numel,
                          optim_dtype_name(known->dtype));
    if (optim_compute_dtype(optim_var_dtype(v)) != optim_var_dtype(v) &&
        (optim__k3_wants_average(opt) || optim__k3_wants_accumulator(opt)))
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: variable '%s' is %s; use_ema and gradient_accumulation_steps "
                          "take float32 or float64 variables (docs/half-precision.md)",
                          cn, vn, optim_dtype_name(optim_var_dtype(v)));
    char what[300], a[160], b[160];
    int32_t vr = optim_var_rank(v);
    const int64_t *vs = optim_var_shape(v);
    optim_dtype vd = optim_var_dtype(v);
    if (p->grad.kind == OPTIM_GRAD_DENSE) {
        const optim_tensor *g = &p->grad.dense;
        /* `what` is formatted for a message only (a snprintf per pair was
         * 3% of a 100k-variable step). */
        if (optim__tensor_check(g, OPTIM__FLOAT_MASK, "", NULL) == OPTIM_OK && g->dtype == vd &&
            g->rank == vr && same_dims(vr, g->shape, vs))
            return OPTIM_OK;
        snprintf(what, sizeof what, "%s: gradient of '%s'", cn, vn);
        int rc = optim__tensor_check(g, OPTIM__VAR_MASK, what, err);
        if (rc) return rc;
        if (g->dtype != vd)
            return optim__err(err, OPTIM_EDTYPE, "%s has dtype %s, expected %s (the variable's)",
                              what, optim_dtype_name(g->dtype), optim_dtype_name(vd));
        if (g->rank != vr || !same_dims(vr, g->shape, vs))
            return optim__err(err, OPTIM_ESHAPE, "%s has shape %s, expected %s", what,
                              optim_shape_str(g->rank, g->shape, a, sizeof a),
                              optim_shape_str(vr, vs, b, sizeof b));
        return OPTIM_OK;
    }
    if (p->grad.kind != OPTIM_GRAD_SPARSE)
        return optim__err(err, OPTIM_EINVAL, "%s: gradient of '%s' has unknown kind %d", cn, vn,
                          (int)p->grad.kind);
    snprintf(what, sizeof what, "%s: sparse gradient of '%s'", cn, vn);
    return check_sparse(opt, what, &p->grad.sparse, v, err);
}

/* A sparse gradient of v (`what` names it in messages). */
static int check_sparse(const optim_optimizer *opt, const char *what, const optim_slices *s,
                        optim_var *v, optim_error *err)
{
    char a[160], b[160];
    const int32_t vr = optim_var_rank(v);
    const int64_t *vs = optim_var_shape(v);
    const optim_dtype vd = optim_var_dtype(v);
    if (opt->cls.flags & OPTIM_CLASS_NO_SPARSE)
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: the class takes no sparse gradients (OPTIM_CLASS_NO_SPARSE); "
                          "give it the dense gradient",
                          what);
    if (!opt->cls.apply_sparse && !(opt->cls.flags & OPTIM_CLASS_ELEMENTWISE))
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: class has no sparse update (no apply_sparse, and "
                          "not OPTIM_CLASS_ELEMENTWISE for the dense equivalent)",
                          what);
    if (opt->gen == OPTIM_LEGACY && optim_var_constraint(v))
        return optim__err(err, OPTIM_EINVAL,
                          "%s: the variable has a constraint, which the legacy generation cannot "
                          "apply to a sparse update",
                          what);
    if (vr < 1)
        return optim__err(err, OPTIM_ESHAPE,
                          "%s: the variable is a scalar; sparse rows need rank >= 1", what);
    int rc = optim__tensor_check(&s->values, OPTIM__VAR_MASK, what, err);
    if (rc) return rc;
    if (s->values.dtype != vd)
        return optim__err(err, OPTIM_EDTYPE, "%s has dtype %s, expected %s (the variable's)", what,
                          optim_dtype_name(s->values.dtype), optim_dtype_name(vd));
    if (s->n < 0)
        return optim__err(err, OPTIM_ESHAPE, "%s: %lld indices, expected >= 0", what,
                          (long long)s->n);
    if (s->n > 0 && !s->indices) return optim__err(err, OPTIM_EINVAL, "%s: indices is NULL", what);
    if (s->values.rank != vr || s->values.shape[0] != s->n ||
        !same_dims(vr - 1, s->values.shape + 1, vs + 1)) {
        int64_t want[OPTIM_MAX_RANK];
        want[0] = s->n;
        for (int32_t d = 1; d < vr; d++) want[d] = vs[d];
        return optim__err(err, OPTIM_ESHAPE,
                          "%s: values have shape %s, expected %s (%lld indices "
                          "and the variable's row shape)",
                          what, optim_shape_str(s->values.rank, s->values.shape, a, sizeof a),
                          optim_shape_str(vr, want, b, sizeof b), (long long)s->n);
    }
    for (int64_t k = 0; k < s->n; k++)
        if (s->indices[k] < 0 || s->indices[k] >= vs[0])
            return optim__err(err, OPTIM_ERANGE,
                              "%s: index %lld at position %lld is out of range, expected 0..%lld",
                              what, (long long)s->indices[k], (long long)k, (long long)vs[0] - 1);
    return OPTIM_OK;
}

/* Whether pair i's variable is the optimizer's i-th, for every i: then
 * each appears once, as the optimizer tracks each once. */
static int same_order(const optim_optimizer *opt, const optim_grad_var *pairs, size_t n)
{
    if (n > opt->nvars) return 0;
    for (size_t i = 0; i < n; i++)
        if (opt->vars[i].var != pairs[i].var) return 0;
    return 1;
}

/* Each variable at most once: sorted in the optimizer's arena (the memory
 * given back at once: optim_check_gradients may be called any number of
 * times between steps), O(n log n); one pair needs no memory. */
static int check_unique(const optim_optimizer *opt, const char *cn, const optim_grad_var *pairs,
                        size_t n, optim_error *err)
{
    if (n < 2 || same_order(opt, pairs, n)) return OPTIM_OK;
    optim__arena *a = &((optim_optimizer *)opt)->arena;
    const optim__arena_point at = optim__arena_mark(a);
    const void **ptrs = optim__arena_alloc(a, n * sizeof *ptrs);
    if (!ptrs) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) ptrs[i] = pairs[i].var;
    const optim_var *twice = optim__ptrs_repeated(ptrs, n);
    optim__arena_release(a, at);
    if (twice)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: variable '%s' appears more than once in one apply_gradients call",
                          cn, optim_var_name(twice));
    return OPTIM_OK;
}

int optim__check_pairs(const optim_optimizer *opt, const char *cn, const optim_grad_var *pairs,
                       size_t n, int require_any, optim_error *err)
{
    if (n && !pairs) return optim__err(err, OPTIM_EINVAL, "%s: pairs is NULL", cn);
    size_t with_grad = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = optim__check_pair(opt, cn, &pairs[i], i, err);
        if (rc) return rc;
        with_grad += pairs[i].grad.kind != OPTIM_GRAD_NONE;
    }
    if (require_any && with_grad == 0)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: no gradients provided for any variable (%zu pairs, all without "
                          "gradient)",
                          cn, n);
    return check_unique(opt, cn, pairs, n, err);
}

/* The optimizer whose update rule finally runs: opt, or for a wrapper its
 * inner optimizer's, and so on down. */
static const optim_optimizer *update_rule(const optim_optimizer *opt)
{
    while (!optim__runs_pipeline(opt) && !opt->cls.inner_at && optim__inner_at(opt, 0))
        opt = optim__inner_at(opt, 0);
    return opt;
}

/* A wrapper's own part of step 1: variables it was built without, or that
 * are not the ones it made slots for. */
static int check_tracked(const optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                         optim_error *err)
{
    const char *cn = opt->cls.name;
    for (size_t i = 0; i < n; i++) {
        const optim_var *v = pairs[i].var;
        if (!v || pairs[i].grad.kind == OPTIM_GRAD_NONE) continue;
        const optim__var_entry *e = optim__var_entry_of(opt, v);
        if (opt->built && !e)
            return optim__err(err, OPTIM_ENOTFOUND,
                              "%s: variable '%s' is unknown to this optimizer, which was built for "
                              "%zu variables",
                              cn, optim_var_name(v), opt->nvars);
        if (e && (e->numel != optim_var_numel(v) || e->dtype != optim_var_dtype(v)))
            return optim__err(err, OPTIM_ESTATE,
                              "%s: variable '%s' (%lld %s elements) is not the one this optimizer "
                              "made slots for; was a variable destroyed while the optimizer still "
                              "used it?",
                              cn, optim_var_name(v), (long long)optim_var_numel(v),
                              optim_dtype_name(optim_var_dtype(v)));
    }
    return OPTIM_OK;
}

/* Each pair with a variable, each variable once, and (require_any) a gradient. */
static int check_common(const optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                        int require_any, optim_error *err)
{
    const char *cn = opt->cls.name;
    if (n && !pairs) return optim__err(err, OPTIM_EINVAL, "%s: pairs is NULL", cn);
    size_t with_grad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pairs[i].var)
            return optim__err(err, OPTIM_EINVAL, "%s: pair %zu has no variable (NULL)", cn, i);
        with_grad += pairs[i].grad.kind != OPTIM_GRAD_NONE;
    }
    if (require_any && with_grad == 0)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: no gradients provided for any variable (%zu pairs)", cn, n);
    return check_unique(opt, cn, pairs, n, err);
}

int optim_check_gradients(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                          int require_any)
{
    if (!opt) return OPTIM_EINVAL;
    optim_error err;
    optim__err_clear(&err);
    if (optim__check_half_wrapper(opt, pairs, n, &err)) return optim__opt_take(opt, &err);
    /* A wrapper of several optimizers (MultiOptimizer) checks each pair
     * against its sub-optimizer in its own step: here only what is common. */
    const optim_optimizer *rule = update_rule(opt);
    int rc = optim__runs_pipeline(rule)
        ? optim__check_pairs(rule, opt->cls.name, pairs, n, require_any, &err)
        : check_common(opt, pairs, n, require_any, &err);
    if (!rc && !optim__runs_pipeline(opt)) rc = check_tracked(opt, pairs, n, &err);
    if (rc) return optim__opt_take(opt, &err);
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

size_t optim_gradient_transformer_count(const optim_optimizer *opt)
{
    return opt ? opt->ntransformers : 0;
}

int optim_has_gradient_aggregator(const optim_optimizer *opt) { return opt && opt->aggregator.fn; }

int optim_num_threads(const optim_optimizer *opt)
{
    return opt && opt->num_threads > 0 ? opt->num_threads : omp_get_max_threads();
}
