/* What the two generations of MultiOptimizer share (internal): Keras
 * 3.15's, with an OptimizerMap (multi_optimizer.c, which holds the class
 * table), and TF Addons', with optimizer_specs (tfa_multi_optimizer.c, its
 * legacy generation). Both own several sub-optimizers, each with its own
 * step count kept as one of the wrapper's weights, and step each on its
 * part of the pairs. */
#ifndef OPTIM_WRAPPERS_MULTI_H
#define OPTIM_WRAPPERS_MULTI_H

#include "wrappers/wrapper.h"

typedef struct optim__multi_sub {
    optim_optimizer *opt;
    optim_var *iterations; /* the wrapper's weight PREFIX/K/iterations */
} optim__multi_sub;

/* Where each generation's class state starts. */
typedef struct optim__multi_subs {
    size_t n;
    optim__multi_sub *subs;
} optim__multi_subs;

/* One TF Addons spec beyond its optimizer: the names of its "weights" and
 * the bookkeeping of its slot order (tfa_multi_optimizer.c). */
typedef struct optim__tfa_spec optim__tfa_spec;
typedef struct optim__tfa_index optim__tfa_index;

/* TF Addons' MultiOptimizer's class state (declared here so that the
 * class's state_size covers both generations). */
typedef struct optim__tfa_multi_state {
    optim__multi_subs base; /* subs[k]: optimizer_specs[k]'s optimizer */
    optim__tfa_spec *specs;
    optim__tfa_index *index; /* every spec's names, sorted */
    size_t nindex;
} optim__tfa_multi_state;

void optim__multi_free_subs(optim__multi_sub *subs, size_t n);
optim_optimizer *optim__multi_inner_at(const optim_optimizer *opt, size_t i);

/* Sub-optimizer k's step count as the wrapper's weight "PREFIX/K/iterations"
 * (float64), created where missing, after the sub-optimizers' slots. */
int optim__multi_add_counters(optim_optimizer *opt, const char *prefix, optim_error *err);

/* For get_config: writes v (cJSON, consumed) under key. */
int optim__multi_put_json(optim_config *cfg, const char *key, void *v);

/* Why an optimizer of class c cannot be a sub-optimizer (it is a
 * wrapper: the two MultiOptimizers, LossScaleOptimizer, TF Addons'
 * wrappers...), or NULL. */
const char *optim__multi_not_sub(const optim_class *c);

/* The step's refusals: gradient transformers or an aggregator on the
 * wrapper (they belong on the sub-optimizers), an inspect function. */
int optim__multi_refuse_options(optim_optimizer *opt, const optim_step_options *o);

/* Every pair has a variable, and each variable comes once. */
int optim__multi_check_vars(optim_optimizer *opt, const optim_grad_var *pairs, size_t n);

/* The wrapper's iterations may still advance. */
int optim__multi_check_counter(optim_optimizer *opt);

/* Sub-optimizer k steps on its m pairs from the count it keeps, with the
 * caller's options io (without a counter to set); `label` names it in the
 * message of a failure, which says so when others stepped before it. */
int optim__multi_step_sub(optim_optimizer *opt, size_t k, const optim_grad_var *pairs, size_t m,
                          const optim_step_options *io, const char *label, int after_others);

/* TF Addons' generation (tfa_multi_optimizer.c): the class's hooks when
 * optim_generation_of(opt) is OPTIM_LEGACY. */
int optim__tfa_multi_set_config(optim_optimizer *opt, const char *key, const char *json,
                                optim_error *err);
int optim__tfa_multi_validate(optim_optimizer *opt, optim_error *err);
int optim__tfa_multi_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err);
int optim__tfa_multi_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                          const optim_step_options *o);
int optim__tfa_multi_get_config(optim_optimizer *opt, optim_config *cfg);
void optim__tfa_multi_destroy(optim_optimizer *opt);
int optim__tfa_multi_assign(optim_optimizer *opt, optim_var *const *vars, size_t n, size_t k);

#endif
