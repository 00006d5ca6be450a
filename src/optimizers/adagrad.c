/* Adagrad.
 *
 * Duchi, Hazan and Singer, "Adaptive Subgradient Methods for Online Learning
 * and Stochastic Optimization" (JMLR 12, 2011).
 *
 * Keras 3 (keras/src/optimizers/adagrad.py, Adagrad.update_step), epsilon
 * INSIDE the square root:
 *
 *     acc = acc + g^2
 *     w   = w - (lr * g) / sqrt(acc + epsilon)
 *
 * Legacy (tf_keras/optimizers/legacy/adagrad.py, TF's ApplyAdagradV2 and
 * SparseApplyAdagradV2 kernels), epsilon OUTSIDE:
 *
 *     acc = acc + g^2
 *     w   = w - (g * lr) / (sqrt(acc) + epsilon)
 *
 * Legacy epsilon: `epsilon or backend_config.epsilon()`, so None and 0 mean
 * 1e-7 (and get_config writes 1e-07); legacy refuses a negative
 * initial_accumulator_value.
 *
 * Sparse gradients (duplicates summed first). Legacy: SparseApplyAdagradV2 on
 * the indexed rows only. Keras 3: the dense equivalent, which leaves a row
 * with g = 0 unchanged (acc + 0, w - 0 / sqrt(acc + epsilon)) as long as
 * acc + epsilon > 0; so only the indexed rows are visited, unless
 * initial_accumulator_value + epsilon <= 0, where the dense rule writes
 * 0 / 0 = NaN on every row and every row is visited.
 *
 * Slot: "accumulator" (both generations), every element initialised to
 * initial_accumulator_value. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>

#define BACKEND_EPSILON 1e-7

/* Keras 3's keys are plain values without checks; legacy's
 * initial_accumulator_value must be >= 0 and its epsilon may be None. */
enum { P_INITIAL, P_EPSILON, P_PER_GEN };
enum { K3 = 0, LG = P_PER_GEN };

static const optim_param adagrad_params[] = {
    {"initial_accumulator_value", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.1, -INFINITY,
     INFINITY},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, -INFINITY, INFINITY},
    {"initial_accumulator_value", OPTIM_PARAM_FLOAT, OPTIM_PARAM_LEGACY_ONLY, 0.1, 0.0, INFINITY},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, 1e-7, -INFINITY,
     INFINITY},
};

typedef struct coef {
    double lr, epsilon;
    int legacy;
    int visit_all; /* Keras 3 sparse: rows without an index turn NaN too */
} coef;

static int is_legacy(const optim_optimizer *opt)
{
    return optim_generation_of(opt) == OPTIM_LEGACY;
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    double init = 0.1;
    optim_get_hyper(opt, "initial_accumulator_value", &init);
    return optim_add_slot(opt, var, "accumulator", OPTIM_SLOT_CONSTANT, init);
}

/* Legacy get_config writes self.epsilon, which is 1e-7 when given as None
 * or 0 (epsilon is the last key, so replacing it keeps the order). */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    double eps = 0;
    if (!is_legacy(opt) || optim_get_hyper(opt, "epsilon", &eps)) return OPTIM_OK;
    if (!isnan(eps) && eps != 0) return OPTIM_OK;
    return optim_config_put(cfg, "epsilon", "1e-07");
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    int legacy = is_legacy(opt);
    size_t b = legacy ? LG : K3;
    double eps = optim_param_value(opt, b + P_EPSILON);
    double init = optim_param_value(opt, b + P_INITIAL);
    if (legacy && (isnan(eps) || eps == 0)) eps = BACKEND_EPSILON;
    k->lr = optim_learning_rate(opt, dtype);
    k->legacy = legacy;
    if (dtype == OPTIM_F32) {
        k->epsilon = (float)eps;
        k->visit_all = !legacy && !((float)init + (float)eps > 0);
    } else {
        k->epsilon = eps;
        k->visit_all = !legacy && !(init + eps > 0);
    }
}

#define ADAGRAD_KERNELS(T, SQRT)                                                           \
    static void keras3_##T(T *restrict w, const T *restrict g, T *restrict acc, int64_t n, \
                           const coef *k)                                                  \
    {                                                                                      \
        const T lr = (T)k->lr, eps = (T)k->epsilon;                                        \
        for (int64_t i = 0; i < n; i++) {                                                  \
            const T gi = g[i], ai = acc[i] + gi * gi;                                      \
            acc[i] = ai;                                                                   \
            w[i] = w[i] - (lr * gi) / SQRT(ai + eps);                                      \
        }                                                                                  \
    }                                                                                      \
    /* ApplyAdagradV2 / SparseApplyAdagradV2 (update_slots true). */                       \
    static void legacy_##T(T *restrict w, const T *restrict g, T *restrict acc, int64_t n, \
                           const coef *k)                                                  \
    {                                                                                      \
        const T lr = (T)k->lr, eps = (T)k->epsilon;                                        \
        for (int64_t i = 0; i < n; i++) {                                                  \
            const T gi = g[i], ai = acc[i] + gi * gi;                                      \
            acc[i] = ai;                                                                   \
            w[i] = w[i] - (gi * lr) / (SQRT(ai) + eps);                                    \
        }                                                                                  \
    }
ADAGRAD_KERNELS(float, sqrtf)
ADAGRAD_KERNELS(double, sqrt)

static void apply_dense(const optim_dense_update *u)
{
    const coef *k = u->coef;
    if (u->dtype == OPTIM_F32)
        (k->legacy ? legacy_float : keras3_float)(u->param, u->grad, u->slots[0], u->count, k);
    else (k->legacy ? legacy_double : keras3_double)(u->param, u->grad, u->slots[0], u->count, k);
}

/* Sparse, indices unique and ascending: the indexed rows. */
#define ADAGRAD_SPARSE(T)                                                                  \
    static void sparse_##T(const optim_sparse_update *u)                                   \
    {                                                                                      \
        const coef *k = u->coef;                                                           \
        T *w = u->param, *acc = u->slots[0];                                               \
        const T *g = u->values;                                                            \
        const int64_t rs = u->row_size;                                                    \
        void (*rule)(T *restrict, const T *restrict, T *restrict, int64_t, const coef *) = \
            k->legacy ? legacy_##T : keras3_##T;                                           \
        for (int64_t j = 0; j < u->n; j++) {                                               \
            const int64_t r = u->indices[j];                                               \
            rule(w + r * rs, g + j * rs, acc + r * rs, rs, k);                             \
        }                                                                                  \
    }
ADAGRAD_SPARSE(float)
ADAGRAD_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3 with a degenerate accumulator: the dense equivalent (rows
 * without an index turn NaN too); otherwise the indexed rows only. */
static int sparse_mode(const optim_sparse_update *u)
{
    return ((const coef *)u->coef)->visit_all ? OPTIM_SPARSE_DENSE : OPTIM_SPARSE_ROWS;
}

const optim_class OPTIM_ISA_NAME(optim_adagrad_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Adagrad",
    .min_slots = 1,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = adagrad_params,
    .n_params = sizeof adagrad_params / sizeof *adagrad_params,
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
};
