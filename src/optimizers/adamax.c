/* Adamax: Adam with the infinity norm.
 *
 * Kingma & Ba, "Adam: A Method for Stochastic Optimization" (ICLR 2015),
 * section 7.1. With t = iterations + 1 (Keras's local_step), in the
 * variable's dtype:
 *
 * Keras 3 (keras/src/optimizers/adamax.py, update_step):
 *
 *     m = m + (g - m) * (1 - beta_1)        (1 - beta_1 taken in double, then cast)
 *     v = max(beta_2 * v, |g|)
 *     w = w - (lr * m) / ((1 - beta_1^t) * (v + epsilon))
 *
 * Legacy (tf.keras OptimizerV2 Adamax; dense: TF's ApplyAdaMax kernel):
 *
 *     m = m + (g - m) * (1 - beta_1)        (1 - beta_1 taken in the dtype)
 *     v = max(beta_2 * v, |g|)
 *     w = w - (lr / (1 - beta_1^t)) * (m / (v + epsilon))
 *
 * with lr the legacy-decayed learning rate, and epsilon = epsilon or 1e-7
 * (OptimizerV2 replaces 0 and None by backend.epsilon()).
 *
 * Sparse gradients: Keras 3 gives the dense equivalent (every row of m and
 * v decays, every row of w moves). Legacy (_resource_apply_sparse) touches
 * the indexed rows only, duplicates summed first:
 *
 *     m[i] = m[i] * beta_1 + g * (1 - beta_1)
 *     v[i] = max(v[i] * beta_2, |g|)
 *     w[i] = w[i] + (-lr / (1 - beta_1^t)) * (m[i] / (v[i] + epsilon))
 *
 * max(a, b) is TF's Maximum (std::max): a < b ? b : a.
 *
 * Slots: "m" (first moment) and "v" (exponentially weighted infinity norm),
 * both zeros. Keras 3 names its variables "momentum" and "norm"; the slot
 * names here are the legacy ones (the public contract of optim replay). */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { P_BETA_1, P_BETA_2, P_EPSILON, P_EPSILON_LEGACY };

static const optim_param adamax_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, 0.0, INFINITY},
    /* OptimizerV2 takes None too (then backend.epsilon(), 1e-7). */
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_LEGACY_ONLY | OPTIM_PARAM_NULLABLE, 1e-7, 0.0,
     INFINITY},
};

/* Per-step constants, in the variable's dtype (rounded through float for
 * F32). */
typedef struct coef {
    double lr; /* learning rate (legacy: decayed) */
    double beta_2;
    double epsilon;
    double one_minus_b1; /* Keras 3: (T)(1 - beta_1); legacy: 1 - (T)beta_1 */
    double beta_1; /* legacy sparse */
    double bias; /* Keras 3: 1 - beta_1^t; legacy: lr / (1 - beta_1^t) */
    int legacy;
} coef;

/* Keras's backend.epsilon() default, used by OptimizerV2 for a 0 or None
 * epsilon. */
#define LEGACY_EPSILON 1e-7

static double legacy_epsilon(double e) { return isnan(e) || e == 0 ? LEGACY_EPSILON : e; }

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    const int legacy = optim_generation_of(opt) == OPTIM_LEGACY;
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    const double eps = legacy ? legacy_epsilon(optim_param_value(opt, P_EPSILON_LEGACY))
                              : optim_param_value(opt, P_EPSILON);
    const int64_t t = optim_iterations(opt) + 1;
    k->legacy = legacy;
    k->lr = optim_learning_rate(opt, dtype);
    if (dtype == OPTIM_F32) {
        const float b1f = (float)b1, lr = (float)k->lr;
        const float power = powf(b1f, (float)t);
        k->beta_1 = b1f;
        k->beta_2 = (float)b2;
        k->epsilon = (float)eps;
        /* Keras 3 computes 1 - self.beta_1 in Python, then casts. */
        k->one_minus_b1 = legacy ? 1.0f - b1f : (float)(1.0 - b1);
        k->bias = legacy ? lr / (1.0f - power) : 1.0f - power;
    } else {
        const double power = pow(b1, (double)t);
        k->beta_1 = b1;
        k->beta_2 = b2;
        k->epsilon = eps;
        k->one_minus_b1 = 1.0 - b1;
        k->bias = legacy ? k->lr / (1.0 - power) : 1.0 - power;
    }
}

/* The dense rules over n contiguous elements. */
#define T float
#define ABS fabsf
#include "adamax_kernels.inc"
#define T double
#define ABS fabs
#include "adamax_kernels.inc"

static void apply_dense(const optim_dense_update *u)
{
    const coef *k = u->coef;
    if (u->dtype == OPTIM_F32) {
        (k->legacy ? dense_legacy_float : dense_keras3_float)(u->param, u->grad, u->slots[0],
                                                              u->slots[1], u->count, k);
    } else {
        (k->legacy ? dense_legacy_double : dense_keras3_double)(u->param, u->grad, u->slots[0],
                                                                u->slots[1], u->count, k);
    }
}

/* Sparse, legacy, indices unique and ascending: the indexed rows. */
#define ADAMAX_SPARSE(T)                                            \
    static void sparse_##T(const optim_sparse_update *u)            \
    {                                                               \
        const coef *k = u->coef;                                    \
        T *w = u->param, *m = u->slots[0], *v = u->slots[1];        \
        const T *g = u->values;                                     \
        const int64_t rs = u->row_size;                             \
        for (int64_t j = 0; j < u->n; j++) {                        \
            const int64_t o = u->indices[j] * rs;                   \
            row_legacy_##T(w + o, g + j * rs, m + o, v + o, rs, k); \
        }                                                           \
    }
ADAMAX_SPARSE(float)
ADAMAX_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3: the dense rule on every row (zero gradient where no index
 * points); legacy: the indexed rows only. */
static int sparse_mode(const optim_sparse_update *u)
{
    return ((const coef *)u->coef)->legacy ? OPTIM_SPARSE_ROWS : OPTIM_SPARSE_DENSE;
}

/* Legacy get_config writes self.epsilon, which is 1e-7 for 0 or None. */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    double e;
    if (optim_generation_of(opt) != OPTIM_LEGACY || optim_get_hyper(opt, "epsilon", &e)) return 0;
    return isnan(e) || e == 0 ? optim_config_put_number(cfg, "epsilon", LEGACY_EPSILON) : 0;
}

const optim_class OPTIM_ISA_NAME(optim_adamax_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Adamax",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = adamax_params,
    .n_params = sizeof adamax_params / sizeof *adamax_params,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = get_config,
    .sparse_mode = sparse_mode,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.optimizers.legacy",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
    .nonnegative_slots = (const char *const[]){"v", NULL},
};
