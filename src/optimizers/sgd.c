/* SGD with optional momentum and Nesterov momentum.
 *
 * Sutskever et al., "On the importance of initialization and momentum in
 * deep learning" (ICML 2013). Keras (both generations, and TF's
 * ApplyKerasMomentum kernel):
 *
 *     momentum == 0:  w = w - lr * g
 *     otherwise:      m = momentum * m - lr * g
 *                     w = w + m                          (nesterov false)
 *                     w = w + momentum * m - lr * g      (nesterov true)
 *
 * Sparse gradients: Keras 3 gives the dense equivalent (every row of m
 * decays and every row of w moves by it). The legacy generation follows TF's
 * kernels: without momentum, a scatter-add of -lr * g over the indices as
 * given (duplicates applied one after the other); with momentum, duplicates
 * are summed and only the indexed rows of m and w change.
 *
 * Slot: "momentum" (when momentum > 0 or is a variable/callable/schedule). */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>

enum { P_MOMENTUM, P_NESTEROV };

static const optim_param sgd_params[] = {
    {"momentum", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.0, 0.0, 1.0},
    {"nesterov", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

typedef struct coef {
    double lr, momentum;
    int nesterov;
} coef;

static int momentum_is_on(optim_optimizer *opt)
{
    double m;
    /* A momentum that may change (a variable or callable) always gets a slot,
     * as OptimizerV2 does for tensor or callable momentum. */
    if (!optim_hyper_is_constant(opt, "momentum") || optim_get_hyper(opt, "momentum", &m)) return 1;
    return m > 0;
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return momentum_is_on(opt) ? optim_add_slot(opt, var, "momentum", OPTIM_SLOT_ZEROS, 0) : 0;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    k->lr = optim_learning_rate(opt, dtype);
    k->momentum = optim_param_value(opt, P_MOMENTUM);
    if (dtype == OPTIM_F32) k->momentum = (float)k->momentum;
    k->nesterov = optim_param_value(opt, P_NESTEROV) != 0;
}

/* One element: the dense rule. */
#define SGD_DENSE(T)                                                                    \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict m, int64_t n, \
                          const coef *k)                                                \
    {                                                                                   \
        const T lr = (T)k->lr, mu = (T)k->momentum;                                     \
        if (!m) {                                                                       \
            for (int64_t i = 0; i < n; i++) w[i] = w[i] - g[i] * lr;                    \
        } else if (k->nesterov) {                                                       \
            for (int64_t i = 0; i < n; i++) {                                           \
                m[i] = m[i] * mu - g[i] * lr;                                           \
                w[i] = w[i] + (m[i] * mu - g[i] * lr);                                  \
            }                                                                           \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) {                                           \
                m[i] = m[i] * mu - g[i] * lr;                                           \
                w[i] = w[i] + m[i];                                                     \
            }                                                                           \
        }                                                                               \
    }
SGD_DENSE(float)
SGD_DENSE(double)

static void apply_dense(const optim_dense_update *u)
{
    void *m = u->nslots ? u->slots[0] : 0;
    if (u->dtype == OPTIM_F32) dense_float(u->param, u->grad, m, u->count, u->coef);
    else dense_double(u->param, u->grad, m, u->count, u->coef);
}

/* Sparse: the indexed rows only, by the dense rule (in the order given
 * when called with duplicates). */
#define SGD_SPARSE(T)                                                     \
    static void sparse_##T(const optim_sparse_update *u)                  \
    {                                                                     \
        const coef *k = u->coef;                                          \
        T *w = u->param, *m = u->nslots ? u->slots[0] : 0;                \
        const T *g = u->values;                                           \
        const int64_t rs = u->row_size;                                   \
        for (int64_t j = 0; j < u->n; j++) {                              \
            int64_t r = u->indices[j];                                    \
            dense_##T(w + r * rs, g + j * rs, m ? m + r * rs : 0, rs, k); \
        }                                                                 \
    }
SGD_SPARSE(float)
SGD_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3 with momentum: the dense equivalent (every row of m decays and
 * every row of w moves). Legacy without momentum: the scatter-add below.
 * The rest touch the indexed rows only (without momentum a zero gradient
 * leaves w as it is). */
static int sparse_mode(const optim_sparse_update *u)
{
    const int legacy = optim_generation_of(u->opt) == OPTIM_LEGACY;
    if (!legacy && u->nslots) return OPTIM_SPARSE_DENSE;
    return legacy && !u->nslots ? OPTIM_SPARSE_WHOLE : OPTIM_SPARSE_ROWS;
}

/* Legacy SGD without momentum: resource_scatter_add(w, indices, -g * lr),
 * duplicates included. Everything else takes the default path. */
static int apply_sparse_duplicate_indices(const optim_sparse_update *u)
{
    if (optim_generation_of(u->opt) != OPTIM_LEGACY || u->nslots) return OPTIM_SPARSE_DEFAULT;
    apply_sparse(u);
    return 0;
}

const optim_class OPTIM_ISA_NAME(optim_sgd_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "SGD",
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.01,
    .params = sgd_params,
    .n_params = sizeof sgd_params / sizeof *sgd_params,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .apply_sparse_duplicate_indices = apply_sparse_duplicate_indices,
    .sparse_mode = sparse_mode,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.optimizers.legacy",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
};
