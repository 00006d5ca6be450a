/* SGDW: SGD with decoupled weight decay (TF Addons, legacy generation only).
 *
 * Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019).
 * TF Addons' tfa.optimizers.SGDW
 * (tensorflow_addons/optimizers/weight_decay_optimizers.py):
 * DecoupledWeightDecayExtension over tf.keras.optimizers.legacy.SGD, with
 * learning_rate 0.001 and weight_decay required. The decay is applied
 * before the SGD step and is NOT multiplied by the learning rate:
 *
 *     dense:   w = w - weight_decay * w;  then TF's ApplyGradientDescent
 *              (w = w - g * lr) without momentum, or ApplyKerasMomentum:
 *                m = m * momentum - g * lr
 *                w = w + m                          (nesterov false)
 *                w = w + (m * momentum - g * lr)    (nesterov true)
 *
 *     sparse, with momentum (OptimizerV2 sums duplicate indices, then the
 *     extension's _resource_apply_sparse): w[i] = w[i] - weight_decay * w[i]
 *     on the indexed rows only, then SparseApplyKerasMomentum on those rows
 *     (the dense rule above, row by row): every other row of w and m keeps
 *     its bits.
 *
 *     sparse, without momentum: legacy SGD's own
 *     _resource_apply_sparse_duplicate_indices, which the extension does not
 *     override, scatter-adds -g * lr over the indices as given (duplicates
 *     applied one after the other) and never reaches the extension's
 *     _resource_apply_sparse: TF Addons does not decay these rows, and
 *     neither does optim.
 *
 * Variables whose name matches an exclude_from_weight_decay pattern (Python
 * regular expressions, re.search) get the SGD step without the decay.
 *
 * Config keys, in get_config's order: name, learning_rate, decay, momentum,
 * nesterov, weight_decay, exclude_from_weight_decay (and the clip options
 * after name when set). momentum in [0, 1].
 *
 * Slot: "momentum" when momentum > 0 or is a variable, callable or schedule
 * (legacy SGD's _momentum). */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizers/decoupled_decay.h"
#include "optimizers/sgd_rules.h"

#include <math.h>

enum { P_WEIGHT_DECAY = 2 }; /* after momentum and nesterov */

static const optim_param sgdw_params[] = {
    OPTIM__SGD_PARAMS,
    OPTIM__TFA_WEIGHT_DECAY_PARAM,
};

static const optim_param sgdw_patterns[] = {OPTIM__TFA_EXCLUDE_PARAM};

typedef optim__sgd_coef coef;

static int validate(optim_optimizer *opt, optim_error *err)
{
    return optim__tfa_decay_validate(opt, "SGDW", err);
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    optim__sgd_prepare(opt, dtype, k);
    k->weight_decay = optim__tfa_weight_decay(opt, P_WEIGHT_DECAY, dtype);
}

/* The rule (sgd_rules.h) with and without the decay. */
OPTIM__SGD_RUN(decayed_float, float, 1)
OPTIM__SGD_RUN(decayed_double, double, 1)
OPTIM__SGD_RUN(plain_float, float, 0)
OPTIM__SGD_RUN(plain_double, double, 0)

static void apply_dense(const optim_dense_update *u)
{
    void *m = u->nslots ? u->slots[0] : 0;
    const int decay = optim__tfa_decays(u->opt, u->var);
    if (u->dtype == OPTIM_F32)
        (decay ? decayed_float : plain_float)(u->param, u->grad, m, u->count, u->coef);
    else (decay ? decayed_double : plain_double)(u->param, u->grad, m, u->count, u->coef);
}

/* The indexed rows, decayed or not, then the SGD step. */
OPTIM__SGD_ROWS(decayed_rows_float, float, decayed_float)
OPTIM__SGD_ROWS(decayed_rows_double, double, decayed_double)
OPTIM__SGD_ROWS(plain_rows_float, float, plain_float)
OPTIM__SGD_ROWS(plain_rows_double, double, plain_double)

/* With momentum (unique indices): the extension's decay on the indexed
 * rows, then SparseApplyKerasMomentum. */
static void apply_sparse(const optim_sparse_update *u)
{
    const int decay = u->nslots && optim__tfa_decays(u->opt, u->var);
    if (u->dtype == OPTIM_F32) (decay ? decayed_rows_float : plain_rows_float)(u);
    else (decay ? decayed_rows_double : plain_rows_double)(u);
}

/* With momentum: the indexed rows only, each on its own (on all threads).
 * Without: the scatter-add below, on one thread (duplicates in order). */
static int sparse_mode(const optim_sparse_update *u)
{
    return u->nslots ? OPTIM_SPARSE_ROWS : OPTIM_SPARSE_WHOLE;
}

/* Without momentum: legacy SGD's resource_scatter_add(w, indices, -g * lr),
 * duplicates included and no decay (see above). */
static int apply_sparse_duplicate_indices(const optim_sparse_update *u)
{
    if (u->nslots) return OPTIM_SPARSE_DEFAULT;
    if (u->dtype == OPTIM_F32) plain_rows_float(u);
    else plain_rows_double(u);
    return 0;
}

const optim_class OPTIM_ISA_NAME(optim_sgdw_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "SGDW",
    .flags = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_LEGACY_ONLY,
    .default_learning_rate = 0.001,
    .params = sgdw_params,
    .n_params = sizeof sgdw_params / sizeof *sgdw_params,
    .coef_size = sizeof(coef),
    .validate = validate,
    .create_slots = optim__sgd_create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .apply_sparse_duplicate_indices = apply_sparse_duplicate_indices,
    .sparse_mode = sparse_mode,
    .pattern_params = sgdw_patterns,
    .n_pattern_params = sizeof sgdw_patterns / sizeof *sgdw_patterns,
    .tfa_name = "SGDW",
};
