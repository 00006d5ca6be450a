/* The per-step constants of the Adam family (Adam, AdamW, LazyAdam), in one
 * place so that their rounding is written once (internal).
 *
 * A class using them declares its first four params as beta_1, beta_2,
 * epsilon (Keras 3) and epsilon (legacy, nullable). t = iterations + 1; for
 * F32 every constant is computed in float, with 1 - beta in double then cast
 * for Keras 3 (Python arithmetic) and in float for legacy (TF ops). */
#ifndef OPTIM_OPTIMIZERS_ADAM_COEF_H
#define OPTIM_OPTIMIZERS_ADAM_COEF_H

#include "optim/optimizer_class.h"
#include "optim/isa.h"
#include "optim/optimizers.h"

/* Each level's build of the family has its own (optim/isa.h). */
#define optim__adam_prepare OPTIM_ISA_NAME(optim__adam_prepare)
#define optim__adam_get_config OPTIM_ISA_NAME(optim__adam_get_config)
#define optim__adam_create_slots OPTIM_ISA_NAME(optim__adam_create_slots)
#define optim__adam_check_amsgrad OPTIM_ISA_NAME(optim__adam_check_amsgrad)

/* Legacy `epsilon or backend_config.epsilon()`: 0 and None mean this. */
#define OPTIM__ADAM_LEGACY_EPSILON 1e-7

typedef struct optim__adam_coef {
    double alpha; /* lr * sqrt(1 - beta_2^t) / (1 - beta_1^t), left to right */
    double lr_sparse; /* legacy sparse: lr * (sqrt(1 - beta_2^t) / (1 - beta_1^t)) */
    double beta_1, beta_2;
    double one_minus_beta_1, one_minus_beta_2;
    double epsilon;
} optim__adam_coef;

void optim__adam_prepare(optim_optimizer *opt, optim_dtype dtype, optim__adam_coef *k);

/* The family's slots: "m", "v", and "vhat" when the amsgrad hyper is on
 * (RectifiedAdam too). *built, the class state's word, records how they
 * were made: 1 without vhat, 2 with. */
int optim__adam_create_slots(optim_optimizer *opt, optim_var *var, int *built);

/* amsgrad cannot change once slots exist: OPTIM_ESTATE (naming cls) when
 * the hyper differs from how they were built (0: none yet). */
int optim__adam_check_amsgrad(optim_optimizer *opt, int built, const char *cls, optim_error *err);

/* The family's get_config hook: legacy writes self.epsilon, which is
 * OPTIM__ADAM_LEGACY_EPSILON for 0 or None; Keras 3 adds nothing. */
int optim__adam_get_config(optim_optimizer *opt, optim_config *cfg);

#endif
