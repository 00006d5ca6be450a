/* ProximalAdagrad: FOBOS with Adagrad's learning rate (TF Addons, legacy
 * generation only).
 *
 * Duchi & Singer, "Efficient Learning using Forward-Backward Splitting"
 * (NIPS 2009). TF Addons' tfa.optimizers.ProximalAdagrad
 * (tensorflow_addons/optimizers/proximal_adagrad.py) calls TF's
 * ResourceApplyProximalAdagrad and ResourceSparseApplyProximalAdagrad
 * kernels (tensorflow/core/kernels/training_ops.cc), in the variable's
 * dtype, with lr the learning rate (legacy decay applied) and l1, l2 the
 * regularization strengths:
 *
 *   dense (ApplyProximalAdagrad), element-wise:
 *     a    = a + g * g
 *     lr_t = lr * rsqrt(a)                          (rsqrt(a) = 1 / sqrt(a))
 *     p    = w - g * lr_t
 *     w    = sign(p) * max(|p| - lr_t * l1, 0) / (1 + l2 * lr_t)   (l1 > 0)
 *     w    = p / (1 + l2 * lr_t)                                   (l1 = 0)
 *
 *   sparse (SparseApplyProximalAdagrad; duplicates summed first), only the
 *   indexed rows of w and a change:
 *     rows of more than one element: the dense rule on each row;
 *     rows of one element (a vector, or [n, 1]): the kernel's scalar loop,
 *       lr_t = lr / sqrt(a) and p = w - lr_t * g, with the denominator
 *       1.0 + l2 * lr_t and the division in double (the C++ literal 1.0)
 *       for a float32 variable, rounded to float once.
 *
 * The kernels refuse lr <= 0 ("lr is not a positive scalar"): a constant
 * learning_rate <= 0 is refused here; a schedule or callable is range-checked
 * at each step only. initial_accumulator_value, l1 and l2 must be >= 0 (TF
 * Addons' constructor). TF's float32 rsqrt may take Eigen's vectorised
 * approximation; optim's is 1 / sqrt(a), correctly rounded twice.
 *
 * Config keys, in get_config's order: name, learning_rate,
 * initial_accumulator_value, l1_regularization_strength,
 * l2_regularization_strength. TF Addons writes no `decay` (it reads one):
 * written only when not 0, so that the config keeps it.
 *
 * Slot: "accumulator", every element initialised to
 * initial_accumulator_value. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizers/positive_lr.h"

#include <math.h>

enum { P_INITIAL, P_L1, P_L2 };

static const optim_param proximal_adagrad_params[] = {
    {"initial_accumulator_value", OPTIM_PARAM_FLOAT, 0, 0.1, 0.0, INFINITY},
    {"l1_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.0, 0.0, INFINITY},
    {"l2_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.0, 0.0, INFINITY},
};

typedef struct coef {
    double lr, l1, l2; /* in the variable's dtype */
} coef;

static int validate(optim_optimizer *opt, optim_error *err)
{
    return optim__positive_lr(opt, "ProximalAdagrad",
                              "TF's ApplyProximalAdagrad kernels refuse it: \"lr is not a "
                              "positive scalar\"",
                              err);
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    double init = 0.1;
    optim_get_hyper(opt, "initial_accumulator_value", &init);
    return optim_add_slot(opt, var, "accumulator", OPTIM_SLOT_CONSTANT, init);
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    k->lr = optim_learning_rate(opt, dtype);
    k->l1 = optim_param_value(opt, P_L1);
    k->l2 = optim_param_value(opt, P_L2);
    if (dtype == OPTIM_F32) {
        k->l1 = (float)k->l1;
        k->l2 = (float)k->l2;
    }
}

/* TF Addons writes no decay; optim keeps one that is not 0. */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    double decay = 0;
    if (!optim_hyper_is_constant(opt, "decay") || optim_get_hyper(opt, "decay", &decay) ||
        decay != 0)
        return OPTIM_OK;
    return optim_config_remove(cfg, "decay");
}

/* The dense rule on n elements (ApplyProximalAdagrad; also a sparse row of
 * more than one element). */
#define PA_DENSE(T, SQRT, ABS)                                                          \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict a, int64_t n, \
                          const coef *k)                                                \
    {                                                                                   \
        const T lr = (T)k->lr, l1 = (T)k->l1, l2 = (T)k->l2, one = 1;                   \
        if (l1 > 0) {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                           \
                const T ai = a[i] + g[i] * g[i];                                        \
                const T lr_t = lr * (one / SQRT(ai));                                   \
                const T p = w[i] - g[i] * lr_t;                                         \
                const T s = (T)((p > 0) - (p < 0));                                     \
                const T q = ABS(p) - lr_t * l1;                                         \
                a[i] = ai;                                                              \
                w[i] = s * (q < 0 ? 0 : q) / (one + l2 * lr_t);                         \
            }                                                                           \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) {                                           \
                const T ai = a[i] + g[i] * g[i];                                        \
                const T lr_t = lr * (one / SQRT(ai));                                   \
                a[i] = ai;                                                              \
                w[i] = (w[i] - g[i] * lr_t) / (one + l2 * lr_t);                        \
            }                                                                           \
        }                                                                               \
    }
PA_DENSE(float, sqrtf, fabsf)
PA_DENSE(double, sqrt, fabs)

/* SparseApplyProximalAdagrad's loop for rows of one element (element i of
 * w and a): lr / sqrt(a), and the last division in double. */
#define PA_SCALAR(T, SQRT, ABS)                               \
    static void scalar_##T(T *w, T g, T *a, const coef *k)    \
    {                                                         \
        const T lr = (T)k->lr, l1 = (T)k->l1, l2 = (T)k->l2;  \
        const T ai = *a + g * g;                              \
        const T lr_t = lr / SQRT(ai);                         \
        const T p = *w - lr_t * g;                            \
        const double den = 1.0 + (double)(l2 * lr_t);         \
        *a = ai;                                              \
        if (l1 > 0) {                                         \
            const T s = p == 0 ? (T)0 : p < 0 ? (T)-1 : (T)1; \
            const T q = ABS(p) - lr_t * l1;                   \
            *w = (T)((double)(s * (q < 0 ? 0 : q)) / den);    \
        } else {                                              \
            *w = (T)((double)p / den);                        \
        }                                                     \
    }
PA_SCALAR(float, sqrtf, fabsf)
PA_SCALAR(double, sqrt, fabs)

static void apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32) dense_float(u->param, u->grad, u->slots[0], u->count, u->coef);
    else dense_double(u->param, u->grad, u->slots[0], u->count, u->coef);
}

/* The indexed rows only. */
#define PA_SPARSE(T)                                               \
    static void sparse_##T(const optim_sparse_update *u)           \
    {                                                              \
        const int64_t rs = u->row_size;                            \
        T *w = u->param, *a = u->slots[0];                         \
        const T *g = u->values;                                    \
        for (int64_t j = 0; j < u->n; j++) {                       \
            const int64_t o = u->indices[j] * rs;                  \
            if (rs == 1) scalar_##T(w + o, g[j], a + o, u->coef);  \
            else dense_##T(w + o, g + j * rs, a + o, rs, u->coef); \
        }                                                          \
    }
PA_SPARSE(float)
PA_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Lazy: the indexed rows only, each on its own (run on all threads). */
static int sparse_mode(const optim_sparse_update *u)
{
    (void)u;
    return OPTIM_SPARSE_ROWS;
}

const optim_class OPTIM_ISA_NAME(optim_proximal_adagrad_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "ProximalAdagrad",
    .min_slots = 1,
    .flags = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_LEGACY_ONLY,
    .default_learning_rate = 0.001,
    .params = proximal_adagrad_params,
    .n_params = sizeof proximal_adagrad_params / sizeof *proximal_adagrad_params,
    .coef_size = sizeof(coef),
    .validate = validate,
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = get_config,
    .sparse_mode = sparse_mode,
    .tfa_name = "ProximalAdagrad",
    .nonnegative_slots = (const char *const[]){"accumulator", NULL},
};
