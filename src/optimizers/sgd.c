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
#include "optimizers/sgd_rules.h"

#include <math.h>

static const optim_param sgd_params[] = {
    OPTIM__SGD_PARAMS,
};

typedef optim__sgd_coef coef;

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    optim__sgd_prepare(opt, dtype, c);
}

/* The dense rule (sgd_rules.h), without decay. */
OPTIM__SGD_RUN(dense_float, float, 0)
OPTIM__SGD_RUN(dense_double, double, 0)

static void apply_dense(const optim_dense_update *u)
{
    void *m = u->nslots ? u->slots[0] : 0;
    if (u->dtype == OPTIM_F32) dense_float(u->param, u->grad, m, u->count, u->coef);
    else dense_double(u->param, u->grad, m, u->count, u->coef);
}

/* Sparse: the indexed rows only, by the dense rule (in the order given
 * when called with duplicates). */
OPTIM__SGD_ROWS(sparse_float, float, dense_float)
OPTIM__SGD_ROWS(sparse_double, double, dense_double)

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
    .create_slots = optim__sgd_create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .apply_sparse_duplicate_indices = apply_sparse_duplicate_indices,
    .sparse_mode = sparse_mode,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.optimizers.legacy",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
};
