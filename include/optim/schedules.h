/*
 * optim/schedules.h - the built-in learning-rate schedule classes, with the
 * Keras names and config keys of keras.optimizers.schedules, and TF Addons'
 * cyclical learning rates (tensorflow_addons.optimizers, "Addons>NAME").
 * Formulas and curves: docs/schedules.md.
 */
#ifndef OPTIM_SCHEDULES_H
#define OPTIM_SCHEDULES_H

#include "optim/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The registry line of each built-in schedule. */
#define OPTIM_BUILTIN_SCHEDULES(X)                    \
    X(optim_exponential_decay_class)                  \
    X(optim_piecewise_constant_decay_class)           \
    X(optim_polynomial_decay_class)                   \
    X(optim_inverse_time_decay_class)                 \
    X(optim_cosine_decay_class)                       \
    X(optim_cosine_decay_restarts_class)              \
    X(optim_cyclical_learning_rate_class)             \
    X(optim_triangular_cyclical_learning_rate_class)  \
    X(optim_triangular2_cyclical_learning_rate_class) \
    X(optim_exponential_cyclical_learning_rate_class) \
    /* end of the list */

#define OPTIM__SCHEDULE_DECL(sym) OPTIM_API extern const optim_schedule_class sym;
OPTIM_BUILTIN_SCHEDULES(OPTIM__SCHEDULE_DECL)
#undef OPTIM__SCHEDULE_DECL

/* TF Addons' CyclicalLearningRate takes scale_fn, a Python function, which
 * a config can only name: tf.keras 2.11-2.12 write its registered name
 * ("my_scale", "Custom>my_scale"; a lambda as "<lambda>"), tf-keras 2.13+
 * {"module": ..., "class_name": "function", "config": NAME,
 * "registered_name": NAME} (a lambda as {"class_name": "__lambda__", ...},
 * its Python bytecode). optim evaluates a NAME registered here, as
 * tf.keras resolves it from its registry or custom_objects, and refuses
 * every other scale_fn, saying why. fn(x, ctx) gets the cycle (scale_mode
 * "cycle": 1, 2, ...) or the step (0, 1, ...) and must not fail. Names are
 * case-sensitive; a name is registered once. Not thread-safe: register at
 * start-up (a plugin's optim_plugin_init, for the `optim` command). */
typedef double (*optim_scale_fn)(double x, void *ctx);
OPTIM_API int optim_register_scale_fn(const char *name, optim_scale_fn fn, void *ctx,
                                      optim_error *err);
/* The function registered as name (and its ctx), NULL if none. */
OPTIM_API optim_scale_fn optim_find_scale_fn(const char *name, void **ctx);

#ifdef __cplusplus
}
#endif
#endif
