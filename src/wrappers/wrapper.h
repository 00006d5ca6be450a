/* What every wrapper shares (internal): the inner optimizer it owns, from
 * JSON or from optim_wrap. A wrapper's class state starts with
 * optim_wrapper_state (optim/wrappers.h); its class table points .inner at optim__wrapper_inner
 * and .destroy at (or calls) optim__wrapper_destroy. */
#ifndef OPTIM_WRAPPERS_WRAPPER_H
#define OPTIM_WRAPPERS_WRAPPER_H

#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optim/step.h"
#include "optim/wrappers.h"


/* For set_config: creates the inner optimizer from its nested JSON. */
int optim__wrapper_set_inner_json(optim_optimizer *opt, const char *json_value, optim_error *err);
/* For get_config: writes the inner optimizer's serialization under key. */
int optim__wrapper_put_inner(optim_optimizer *opt, optim_config *cfg, const char *key);
/* For validate: refuses a wrapper without an inner optimizer. */
int optim__wrapper_require_inner(optim_optimizer *opt, const char *key, optim_error *err);
optim_optimizer *optim__wrapper_inner(const optim_optimizer *opt);
void optim__wrapper_destroy(optim_optimizer *opt);

/* The TF Addons averaging wrappers' shared step, validation and config
 * (src/wrappers/tfa.c; used by moving_average.c, swa.c and lookahead.c).
 * A wrapper's rule: its slot's name; `coefs` gets the wrapper's resolved
 * values and the step (iterations before the increment), writes the rule's
 * constants and returns whether the rule runs at this step; `rule` then
 * runs on contiguous chunks of each variable with a gradient and its slot,
 * on all threads. */
typedef struct optim__tfa_rule {
    const char *slot;
    int (*coefs)(optim_optimizer *opt, int64_t step, double *coef);
    void (*rule)(optim_dtype dt, void *var, void *slot, int64_t count, const double *coef);
} optim__tfa_rule;
int optim__tfa_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                    const optim_step_options *o, const optim__tfa_rule *rule);
/* The wrapper's own slot of var, NULL if it has not seen var; whether var
 * is still the variable that slot was made for (or has none). */
optim_var *optim__tfa_slot(const optim_optimizer *opt, const optim_var *var, const char *slot);
int optim__tfa_same_as_tracked(const optim_optimizer *opt, const optim_var *var, const char *slot);
int optim__tfa_validate(optim_optimizer *opt, optim_error *err);
int optim__tfa_set_config(optim_optimizer *opt, const char *key, const char *json_value,
                          optim_error *err);
int optim__tfa_get_config(optim_optimizer *opt, optim_config *cfg);

/* The skip-if-non-finite step driver of LossScaleOptimizer and
 * ApplyIfFinite (src/wrappers/apply_if_finite.c). `before` creates the
 * wrapper's weights when missing; if the inner step then fails they are
 * destroyed again and `forget` clears the class state's pointers to them,
 * so that a failed step changes nothing. */
int optim__finite_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                       const optim_step_options *o, int skip_nonfinite, double divisor,
                       int (*before)(optim_optimizer *), void (*forget)(optim_optimizer *),
                       int *finite);
int optim__finite_base_defaults(optim_optimizer *opt, optim_error *err);
int optim__finite_config(optim_optimizer *opt, optim_config *cfg, const char *const *order,
                         size_t norder);

#endif
