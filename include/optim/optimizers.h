/*
 * optim/optimizers.h - the built-in optimizer classes.
 *
 * Each is an optim_class written against optim/optimizer_class.h, the same
 * contract user classes use. Create one by class (optim_create(&opt,
 * &optim_sgd_class, NULL, &err)), by Keras name ("SGD", case-insensitive) or
 * from Keras JSON. Their update rules and options are in docs/optimizers.md.
 */
#ifndef OPTIM_OPTIMIZERS_H
#define OPTIM_OPTIMIZERS_H

#include "optim/optimizer_class.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The registry line of each built-in: adding an optimizer is one line here
 * and one file under src/optimizers/ (built once per instruction-set level,
 * optim/isa.h), adding a wrapper one line and one file under src/wrappers/. */
#define OPTIM_BUILTIN_OPTIMIZERS(X)    \
    X(optim_sgd_class)                 \
    X(optim_adam_class)                \
    X(optim_adamw_class)               \
    X(optim_adamax_class)              \
    X(optim_nadam_class)               \
    X(optim_rmsprop_class)             \
    X(optim_adagrad_class)             \
    X(optim_adadelta_class)            \
    X(optim_ftrl_class)                \
    X(optim_lion_class)                \
    X(optim_adafactor_class)           \
    X(optim_lamb_class)                \
    X(optim_muon_class)                \
    X(optim_schedule_free_adamw_class) \
    X(optim_lazyadam_class)            \
    X(optim_cocob_class)               \
    X(optim_sgdw_class)                \
    X(optim_proximal_adagrad_class)    \
    X(optim_rectified_adam_class)      \
    X(optim_yogi_class)                \
    X(optim_novograd_class)            \
    X(optim_conditionalgradient_class) \
    /* end of the list */

#define OPTIM_BUILTIN_WRAPPERS(X)  \
    X(optim_loss_scale_class)      \
    X(optim_apply_if_finite_class) \
    X(optim_moving_average_class)  \
    X(optim_swa_class)             \
    X(optim_lookahead_class)       \
    X(optim_multi_optimizer_class) \
    /* end of the list */

#define OPTIM_BUILTIN_CLASSES(X) OPTIM_BUILTIN_OPTIMIZERS(X) OPTIM_BUILTIN_WRAPPERS(X)

#define OPTIM__BUILTIN_DECL(sym) OPTIM_API extern const optim_class sym;
OPTIM_BUILTIN_CLASSES(OPTIM__BUILTIN_DECL)
#undef OPTIM__BUILTIN_DECL

#ifdef __cplusplus
}
#endif
#endif
