/* SGD's element rules, shared by SGD and SGDW (internal): TF's
 * ApplyGradientDescent and ApplyKerasMomentum kernels (Keras 3's SGD
 * computes the same), optionally after TF Addons' decoupled weight decay
 * (optimizers/decoupled_decay.h):
 *
 *     w = w - weight_decay * w                      (DECAY only)
 *     momentum slot absent:  w = w - g * lr
 *     otherwise:             m = m * momentum - g * lr
 *                            w = w + m                          (nesterov false)
 *                            w = w + (m * momentum - g * lr)    (nesterov true)
 *
 * OPTIM__SGD_RUN(NAME, T, DECAY) defines NAME(w, g, m, n, k): the rule on
 * n elements (m NULL without the slot), DECAY a constant 0 or 1.
 * OPTIM__SGD_ROWS(NAME, T, RUN) defines NAME(u): RUN on each indexed row of
 * a sparse update, in the order of its indices (duplicates applied one
 * after the other when the indices repeat). */
#ifndef OPTIM_OPTIMIZERS_SGD_RULES_H
#define OPTIM_OPTIMIZERS_SGD_RULES_H

#include "optim/optimizer_class.h"

typedef struct optim__sgd_coef {
    double lr, momentum, weight_decay; /* in the variable's dtype */
    int nesterov;
} optim__sgd_coef;

/* create_slots: OptimizerV2's SGD keeps a momentum slot when momentum > 0,
 * or is a variable or callable (tensor or callable momentum: SGD._momentum). */
static inline int optim__sgd_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    double m;
    if (optim_hyper_is_constant(opt, "momentum") && !optim_get_hyper(opt, "momentum", &m) &&
        !(m > 0))
        return 0;
    return optim_add_slot(opt, var, "momentum", OPTIM_SLOT_ZEROS, 0);
}

/* The class's first two params: its params array starts with
 * OPTIM__SGD_PARAMS (momentum in [0, 1], legacy SGD's check). */
enum { OPTIM__SGD_P_MOMENTUM, OPTIM__SGD_P_NESTEROV };
#define OPTIM__SGD_PARAMS                                                \
    {"momentum", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.0, 0.0, 1.0}, \
    {                                                                    \
        "nesterov", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0                   \
    }

/* prepare's SGD part: the learning rate and momentum in dtype's
 * arithmetic, nesterov; no decay. */
static inline void optim__sgd_prepare(optim_optimizer *opt, optim_dtype dtype, optim__sgd_coef *k)
{
    k->lr = optim_learning_rate(opt, dtype);
    k->momentum = optim_param_value(opt, OPTIM__SGD_P_MOMENTUM);
    if (dtype == OPTIM_F32) k->momentum = (float)k->momentum;
    k->nesterov = optim_param_value(opt, OPTIM__SGD_P_NESTEROV) != 0;
    k->weight_decay = 0;
}

#define OPTIM__SGD_RUN(NAME, T, DECAY)                                             \
    static void NAME(T *restrict w, const T *restrict g, T *restrict m, int64_t n, \
                     const optim__sgd_coef *k)                                     \
    {                                                                              \
        const T lr = (T)k->lr, mu = (T)k->momentum, wd = (T)k->weight_decay;       \
        if (!m) {                                                                  \
            for (int64_t i = 0; i < n; i++) {                                      \
                const T wi = DECAY ? w[i] - wd * w[i] : w[i];                      \
                w[i] = wi - g[i] * lr;                                             \
            }                                                                      \
        } else if (k->nesterov) {                                                  \
            for (int64_t i = 0; i < n; i++) {                                      \
                const T wi = DECAY ? w[i] - wd * w[i] : w[i];                      \
                m[i] = m[i] * mu - g[i] * lr;                                      \
                w[i] = wi + (m[i] * mu - g[i] * lr);                               \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                const T wi = DECAY ? w[i] - wd * w[i] : w[i];                      \
                m[i] = m[i] * mu - g[i] * lr;                                      \
                w[i] = wi + m[i];                                                  \
            }                                                                      \
        }                                                                          \
    }

#define OPTIM__SGD_ROWS(NAME, T, RUN)                                     \
    static void NAME(const optim_sparse_update *u)                        \
    {                                                                     \
        T *w = u->param, *m = u->nslots ? u->slots[0] : 0;                \
        const T *g = u->values;                                           \
        const int64_t rs = u->row_size;                                   \
        for (int64_t j = 0; j < u->n; j++) {                              \
            const int64_t r = u->indices[j];                              \
            RUN(w + r * rs, g + j * rs, m ? m + r * rs : 0, rs, u->coef); \
        }                                                                 \
    }

#endif
