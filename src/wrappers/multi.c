/* What the two generations of MultiOptimizer share (wrappers/multi.h):
 * their sub-optimizers, the wrapper weights that hold each one's step
 * count, the checks every step makes first, and one sub-optimizer's step. */
#include "wrappers/multi.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void optim__multi_free_subs(optim__multi_sub *subs, size_t n)
{
    for (size_t k = 0; subs && k < n; k++) optim_destroy(subs[k].opt);
    free(subs);
}

optim_optimizer *optim__multi_inner_at(const optim_optimizer *opt, size_t i)
{
    const optim__multi_subs *s = optim_state(opt);
    return s && i < s->n ? s->subs[i].opt : NULL;
}

int optim__multi_add_counters(optim_optimizer *opt, const char *prefix, optim_error *err)
{
    optim__multi_subs *s = optim_state(opt);
    int rc = OPTIM_OK;
    for (size_t k = 0; !rc && k < s->n; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s/%zu/iterations", prefix, k);
        if (!s->subs[k].iterations)
            rc = optim_add_weight(opt, name, OPTIM_F64, 0, NULL, OPTIM_SLOT_ZEROS, 0,
                                  &s->subs[k].iterations);
        if (rc) rc = optim_error_set(err, rc, "%s", optim_errmsg(opt));
    }
    return rc;
}

int optim__multi_put_json(optim_config *cfg, const char *key, void *v)
{
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (!text) return OPTIM_ENOMEM;
    int rc = optim_config_put(cfg, key, text);
    cJSON_free(text);
    return rc;
}

const char *optim__multi_not_sub(const optim_class *c)
{
    if (strcmp(c->name, "LossScaleOptimizer") == 0) return "optimizer cannot be LossScaleOptimizer";
    if (strcmp(c->name, "MultiOptimizer") == 0)
        return "MultiOptimizer cannot be used inside a MultiOptimizer";
    if (c->apply_gradients || c->inner || c->inner_at) return "a wrapper cannot be a sub-optimizer";
    return NULL;
}

int optim__multi_refuse_options(optim_optimizer *opt, const optim_step_options *o)
{
    if (optim_gradient_transformer_count(opt) || optim_has_gradient_aggregator(opt))
        return optim_set_error(
            opt, OPTIM_EINVAL,
            "MultiOptimizer: gradient transformers and aggregators go on "
            "the sub-optimizers (optim_wrapper_inner_at), which step on the gradients");
    if (o->inspect)
        return optim_set_error(opt, OPTIM_ENOTSUP,
                               "MultiOptimizer: cannot take an inspect function: its "
                               "sub-optimizers step on their own parts of the gradients");
    return OPTIM_OK;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

/* Sorted in scratch memory. */
int optim__multi_check_vars(optim_optimizer *opt, const optim_grad_var *pairs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!pairs[i].var)
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "MultiOptimizer: pair %zu has no variable (NULL)", i);
    const optim_var **sorted = optim_step_scratch(opt, n * sizeof *sorted);
    if (!sorted) return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) sorted[i] = pairs[i].var;
    if (n > 1) qsort(sorted, n, sizeof *sorted, cmp_ptr);
    for (size_t i = 1; i < n; i++)
        if (sorted[i] == sorted[i - 1])
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "MultiOptimizer: variable '%s' appears more than once in one "
                                   "apply_gradients call",
                                   optim_var_name(sorted[i]));
    return OPTIM_OK;
}

int optim__multi_check_counter(optim_optimizer *opt)
{
    if (optim_iterations(opt) < OPTIM_ITERATIONS_MAX) return OPTIM_OK;
    return optim_set_error(opt, OPTIM_ERANGE,
                           "MultiOptimizer: iterations is %lld (OPTIM_ITERATIONS_MAX): no "
                           "step can follow",
                           (long long)optim_iterations(opt));
}

int optim__multi_step_sub(optim_optimizer *opt, size_t k, const optim_grad_var *pairs, size_t m,
                          const optim_step_options *io, const char *label, int after_others)
{
    optim__multi_sub *s = &((optim__multi_subs *)optim_state(opt))->subs[k];
    double *count = optim_var_data(s->iterations);
    optim_set_iterations(s->opt, (int64_t)*count);
    int rc = optim_step(s->opt, pairs, m, io);
    if (rc)
        return optim_set_error(opt, rc, "MultiOptimizer: sub-optimizer %zu (%s) failed%s: %s", k,
                               label,
                               after_others ? " after the sub-optimizers before it stepped" : "",
                               optim_errmsg(s->opt));
    *count = (double)optim_iterations(s->opt);
    return OPTIM_OK;
}
