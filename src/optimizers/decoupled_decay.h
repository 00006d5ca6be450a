/* TF Addons' DecoupledWeightDecayExtension, the part its classes share
 * (internal): AdamW and SGDW in their legacy generation.
 *
 * Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019);
 * tensorflow_addons/optimizers/weight_decay_optimizers.py. The extension
 * adds two config keys after the base optimizer's, in this order:
 *
 *     weight_decay               required (a number >= 0, a callable or a
 *                                schedule evaluated at iterations), a
 *                                hyperparameter in the variable's dtype
 *     exclude_from_weight_decay  None or a list of Python regular
 *                                expressions, searched in the variable's
 *                                name (re.search); a match is not decayed
 *
 * and decays before the base optimizer's update, without the learning rate:
 *
 *     dense:  w = w - weight_decay * w                (var.assign_sub)
 *     sparse: the same on the indexed rows only       (scatter_add of
 *             -weight_decay * gather(w, indices), the indices unique)
 *
 * A class declares OPTIM__TFA_WEIGHT_DECAY_PARAM last among its params and
 * OPTIM__TFA_EXCLUDE_PARAM as its only pattern param. */
#ifndef OPTIM_OPTIMIZERS_DECOUPLED_DECAY_H
#define OPTIM_OPTIMIZERS_DECOUPLED_DECAY_H

#include "optim/optimizer_class.h"
#include "optimizers/tf_names.h"

#include <math.h>

/* weight_decay: required, so None (the default) is refused by
 * optim__tfa_decay_validate; legacy only (Keras 3's is the base option). */
#define OPTIM__TFA_WEIGHT_DECAY_PARAM                                                       \
    {                                                                                       \
        "weight_decay", OPTIM_PARAM_FLOAT,                                                  \
            OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, NAN, 0.0, \
            INFINITY                                                                        \
    }

/* exclude_from_weight_decay: null or a list of patterns (the base reads
 * and writes it after the params). */
#define OPTIM__TFA_EXCLUDE_PARAM                                      \
    {                                                                 \
        "exclude_from_weight_decay", OPTIM_PARAM_PATTERNS,            \
            OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, NAN, 0, 0 \
    }

/* The legacy weight_decay is set: TF Addons' constructor requires it. */
static inline int optim__tfa_decay_validate(optim_optimizer *opt, const char *cls, optim_error *err)
{
    double wd = 0;
    if (optim_generation_of(opt) != OPTIM_LEGACY || optim_get_hyper(opt, "weight_decay", &wd) ||
        !isnan(wd))
        return OPTIM_OK;
    return optim_error_set(err, OPTIM_EINVAL,
                           "%s: weight_decay is None; TF Addons' %s requires a weight_decay (a "
                           "number >= 0)",
                           cls, cls);
}

/* Whether var is decayed: its name matches no exclude_from_weight_decay
 * pattern (is_variable_matched_by_regexes, on TF's name: tf_names.h). */
static inline int optim__tfa_decays(const optim_optimizer *opt, const optim_var *var)
{
    return !optim__tf_name_matches(optim_param_patterns(opt, 0), optim_var_name(var));
}

/* This step's weight_decay (the class's param i) in dtype's arithmetic
 * (_get_hyper("weight_decay", var_dtype)); 0 outside the legacy generation. */
static inline double optim__tfa_weight_decay(const optim_optimizer *opt, size_t i,
                                             optim_dtype dtype)
{
    const double wd = optim_generation_of(opt) == OPTIM_LEGACY ? optim_param_value(opt, i) : 0.0;
    return dtype == OPTIM_F32 ? (float)wd : wd;
}

#endif
