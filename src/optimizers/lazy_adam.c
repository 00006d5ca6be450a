/* LazyAdam: Adam whose sparse updates touch only the indexed rows.
 *
 * Kingma & Ba, "Adam: A Method for Stochastic Optimization" (ICLR 2015);
 * the lazy sparse rule of TF Addons' tfa.optimizers.LazyAdam
 * (tensorflow_addons/optimizers/lazy_adam.py), a subclass of
 * tf.keras.optimizers.legacy.Adam that overrides only _resource_apply_sparse.
 * t = iterations + 1; per-step constants in the variable's dtype.
 *
 * Dense gradients: Adam of the generation (see adam.c):
 *
 *     alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
 *     m     = m + (g - m) * (1 - beta_1)
 *     v     = v + (g^2 - v) * (1 - beta_2)
 *     w     = w - (m * alpha) / (sqrt(v) + epsilon)
 *
 *   Keras 3 computes 1 - beta in double and casts it; legacy (TF's ApplyAdam
 *   kernel) in the variable's dtype, and uses `epsilon or 1e-7`.
 *
 * Sparse gradients (duplicates summed), only the indexed rows i of m, v and
 * w change; rows without an index keep their bits:
 *
 *   Legacy (LazyAdam._resource_apply_sparse):
 *     lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
 *     m[i] = beta_1 * m[i] + (1 - beta_1) * g
 *     v[i] = beta_2 * v[i] + (1 - beta_2) * g^2
 *     w[i] = w[i] - lr_t * m[i] / (sqrt(v[i]) + epsilon)
 *
 *   Keras 3: LazyAdam has no Keras 3 form upstream. Here the Keras 3
 *   generation applies Keras 3 Adam's dense rule (above, with its rounding)
 *   to the indexed rows only. The base option weight_decay, when set,
 *   decays every row as it does for every Keras 3 optimizer.
 *
 * amsgrad: TF Addons documents it as unsupported ("can only be False"); it
 * is refused here. Slots: "m", "v". */
#include "optimizers/adam_coef.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { P_BETA_1, P_BETA_2, P_EPSILON, P_EPSILON_LEGACY, P_AMSGRAD };

static const optim_param lazy_adam_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, 0.0, INFINITY},
    /* Legacy: `epsilon or backend_config.epsilon()`, so None (and 0) mean 1e-7. */
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, 1e-7, 0.0,
     INFINITY},
    {"amsgrad", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

typedef optim__adam_coef coef;

static int validate(optim_optimizer *opt, optim_error *err)
{
    double a = 0;
    if (optim_get_hyper(opt, "amsgrad", &a) == 0 && a != 0) {
        err->code = OPTIM_ENOTSUP;
        snprintf(err->msg, sizeof err->msg,
                 "LazyAdam: amsgrad is true; LazyAdam does not support AMSGrad (TF Addons: "
                 "\"the argument can only be False\")");
        return OPTIM_ENOTSUP;
    }
    return 0;
}


static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    optim__adam_prepare(opt, dtype, c);
}

/* Adam's dense rule (both generations; they differ only in coef). */
#define LAZY_DENSE(T, SQRT)                                                                 \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                          int64_t n, const coef *k)                                         \
    {                                                                                       \
        const T alpha = (T)k->alpha, c1 = (T)k->one_minus_beta_1;                           \
        const T c2 = (T)k->one_minus_beta_2, eps = (T)k->epsilon;                           \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const T mi = m[i] + (g[i] - m[i]) * c1;                                         \
            const T vi = v[i] + (g[i] * g[i] - v[i]) * c2;                                  \
            m[i] = mi;                                                                      \
            v[i] = vi;                                                                      \
            w[i] = w[i] - (mi * alpha) / (SQRT(vi) + eps);                                  \
        }                                                                                   \
    }
LAZY_DENSE(float, sqrtf)
LAZY_DENSE(double, sqrt)

/* TF Addons' lazy row update (legacy generation). */
#define LAZY_ROW(T, SQRT)                                                                      \
    static void tfa_row_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v,  \
                            int64_t n, const coef *k)                                          \
    {                                                                                          \
        const T lr = (T)k->alpha, b1 = (T)k->beta_1, b2 = (T)k->beta_2;                        \
        const T c1 = (T)k->one_minus_beta_1, c2 = (T)k->one_minus_beta_2, eps = (T)k->epsilon; \
        for (int64_t i = 0; i < n; i++) {                                                      \
            const T mi = b1 * m[i] + c1 * g[i];                                                \
            const T vi = b2 * v[i] + c2 * (g[i] * g[i]);                                       \
            m[i] = mi;                                                                         \
            v[i] = vi;                                                                         \
            w[i] = w[i] - lr * mi / (SQRT(vi) + eps);                                          \
        }                                                                                      \
    }
LAZY_ROW(float, sqrtf)
LAZY_ROW(double, sqrt)

static void apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        dense_float(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else dense_double(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

/* The indexed rows only. */
#define LAZY_SPARSE(T)                                                             \
    static void sparse_##T(const optim_sparse_update *u, int legacy)               \
    {                                                                              \
        const int64_t rs = u->row_size;                                            \
        T *w = u->param, *m = u->slots[0], *v = u->slots[1];                       \
        const T *g = u->values;                                                    \
        for (int64_t j = 0; j < u->n; j++) {                                       \
            const int64_t o = u->indices[j] * rs;                                  \
            if (legacy) tfa_row_##T(w + o, g + j * rs, m + o, v + o, rs, u->coef); \
            else dense_##T(w + o, g + j * rs, m + o, v + o, rs, u->coef);          \
        }                                                                          \
    }
LAZY_SPARSE(float)
LAZY_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    const int legacy = optim_generation_of(u->opt) == OPTIM_LEGACY;
    if (u->dtype == OPTIM_F32) sparse_float(u, legacy);
    else sparse_double(u, legacy);
}

/* Lazy: the indexed rows only, each on its own (run on all threads). */
static int sparse_mode(const optim_sparse_update *u)
{
    (void)u;
    return OPTIM_SPARSE_ROWS;
}

const optim_class OPTIM_ISA_NAME(optim_lazyadam_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "LazyAdam",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = lazy_adam_params,
    .n_params = sizeof lazy_adam_params / sizeof *lazy_adam_params,
    .coef_size = sizeof(coef),
    .validate = validate,
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = optim__adam_get_config,
    .sparse_mode = sparse_mode,
    .tfa_name = "LazyAdam",
    .nonnegative_slots = (const char *const[]){"v", NULL},
};
