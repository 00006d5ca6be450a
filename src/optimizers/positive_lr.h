/* A learning rate that must be above 0 (internal): TF's ApplyFtrl* and
 * ApplyProximalAdagrad kernels refuse lr <= 0 ("lr is not a positive
 * scalar"). From a class's validate hook: a constant learning_rate <= 0 is
 * refused, naming the class and why; a variable, callable or schedule is
 * only range-checked at each step (>= 0, the base's range). */
#ifndef OPTIM_OPTIMIZERS_POSITIVE_LR_H
#define OPTIM_OPTIMIZERS_POSITIVE_LR_H

#include "optim/optimizer_class.h"

static inline int optim__positive_lr(optim_optimizer *opt, const char *cls, const char *why,
                                     optim_error *err)
{
    double lr = 1;
    if (!optim_hyper_is_constant(opt, "learning_rate") ||
        optim_get_hyper(opt, "learning_rate", &lr) || lr > 0)
        return OPTIM_OK;
    return optim_error_set(err, OPTIM_ERANGE, "%s: learning_rate is %g, expected a value > 0 (%s)",
                           cls, lr, why);
}

#endif
