/*
 * optim/schedules.h - the built-in learning-rate schedule classes, with the
 * Keras names and config keys of keras.optimizers.schedules. Formulas and
 * curves: docs/schedules.md.
 */
#ifndef OPTIM_SCHEDULES_H
#define OPTIM_SCHEDULES_H

#include "optim/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The registry line of each built-in schedule. */
#define OPTIM_BUILTIN_SCHEDULES(X)          \
    X(optim_exponential_decay_class)        \
    X(optim_piecewise_constant_decay_class) \
    X(optim_polynomial_decay_class)         \
    X(optim_inverse_time_decay_class)       \
    X(optim_cosine_decay_class)             \
    X(optim_cosine_decay_restarts_class)    \
    /* end of the list */

#define OPTIM__SCHEDULE_DECL(sym) OPTIM_API extern const optim_schedule_class sym;
OPTIM_BUILTIN_SCHEDULES(OPTIM__SCHEDULE_DECL)
#undef OPTIM__SCHEDULE_DECL

#ifdef __cplusplus
}
#endif
#endif
