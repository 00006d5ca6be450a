/* Lion: EvoLved Sign Momentum.
 *
 * Chen et al., "Symbolic Discovery of Optimization Algorithms" (NeurIPS
 * 2023, arXiv:2302.06675). Keras 3 only (keras/src/optimizers/lion.py,
 * Lion.update_step); there is no legacy OptimizerV2 form. With beta_1 and
 * beta_2 cast to the variable's dtype and 1 - beta computed in that dtype:
 *
 *     w = w - lr * sign(m * beta_1 + g * (1 - beta_1))
 *     m = m * beta_2 + g * (1 - beta_2)
 *
 * sign is tf.sign / ops.sign: +1, -1, 0 for +-0, NaN for NaN. Keras 3's
 * decoupled weight_decay (w = w - w * wd * lr, before the update) is the
 * base class's.
 *
 * Sparse gradients: the dense equivalent (Keras 3 densifies them): a row
 * without an index has g = 0, so w still moves by lr * sign(m * beta_1) and
 * m decays to m * beta_2 on every row. Duplicate indices are summed first.
 *
 * Slot: "m" (zeros). Keras 3 keeps it in `_momentums` and names the variable
 * "momentum"; "m" is the name of tf.keras 2.x's Lion (add_variable_from_
 * reference(var, "m")) and of the authors' TF implementation, and the name
 * `optim replay` writes (NAME/m). */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>

enum { P_BETA_1, P_BETA_2 };

/* Keras raises for beta_1 <= 0 or beta_1 > 1 ("must be in the [0, 1] range.
 * Otherwise, the optimizer degenerates to SignSGD"): the range is (0, 1].
 * Keras does not check beta_2; [0, 1] is optim's guard. */
static const optim_param lion_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MIN_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.99, 0.0, 1.0},
};

/* Per-step constants, in the variable's dtype (rounded through float for
 * F32): ops.cast(beta, dtype) and 1.0 - beta computed on the cast value. */
typedef struct coef {
    double lr, beta_1, one_minus_beta_1, beta_2, one_minus_beta_2;
} coef;

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    k->lr = optim_learning_rate(opt, dtype);
    if (dtype == OPTIM_F32) {
        float f1 = (float)b1, f2 = (float)b2;
        k->beta_1 = f1;
        k->one_minus_beta_1 = 1.0f - f1;
        k->beta_2 = f2;
        k->one_minus_beta_2 = 1.0f - f2;
    } else {
        k->beta_1 = b1;
        k->one_minus_beta_1 = 1.0 - b1;
        k->beta_2 = b2;
        k->one_minus_beta_2 = 1.0 - b2;
    }
}

/* One fused pass: read w, g, m once, write w, m once. */
#define LION_DENSE(T)                                                                          \
    static inline T sign_##T(T x) { return x > 0 ? (T)1 : x < 0 ? (T)-1 : x == x ? (T)0 : x; } \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict m, int64_t n,        \
                          const coef *k)                                                       \
    {                                                                                          \
        const T lr = (T)k->lr, b1 = (T)k->beta_1, c1 = (T)k->one_minus_beta_1;                 \
        const T b2 = (T)k->beta_2, c2 = (T)k->one_minus_beta_2;                                \
        for (int64_t i = 0; i < n; i++) {                                                      \
            const T gi = g[i], mi = m[i];                                                      \
            w[i] = w[i] - lr * sign_##T(mi * b1 + gi * c1);                                    \
            m[i] = mi * b2 + gi * c2;                                                          \
        }                                                                                      \
    }
LION_DENSE(float)
LION_DENSE(double)

static void apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32) dense_float(u->param, u->grad, u->slots[0], u->count, u->coef);
    else dense_double(u->param, u->grad, u->slots[0], u->count, u->coef);
}

const optim_class OPTIM_ISA_NAME(optim_lion_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Lion",
    .min_slots = 1,
    .flags = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_KERAS3_ONLY,
    .default_learning_rate = 0.001,
    .params = lion_params,
    .n_params = sizeof lion_params / sizeof *lion_params,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    /* No apply_sparse: a sparse gradient gets the dense equivalent (every
     * row, zero gradient where no index points), as Keras 3 gives it. */
    .keras3_module = "keras.optimizers",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
};
