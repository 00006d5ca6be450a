/* FTRL-Proximal ("Follow The Regularized Leader").
 *
 * McMahan et al., "Ad Click Prediction: a View from the Trenches" (KDD 2013),
 * with the per-coordinate learning rate lr * n^lr_power (lr_power = -0.5 is
 * the paper's 1/sqrt(n)), online L2 (l2), L2 shrinkage (a magnitude penalty
 * added to the gradient) and the paper's beta folded into l2.
 *
 * Notation: n = slot "accumulator" (starts at initial_accumulator_value),
 * z = slot "linear" (starts at 0), e = -lr_power, l2' = l2 + beta / (2 * lr),
 * clip(z) = max(min(z, l1), -l1). All in the variable's dtype.
 *
 * Keras 3 (keras/src/optimizers/ftrl.py, Ftrl.update_step, ops.power):
 *
 *     gs = g + 2 * l2_shrinkage * w
 *     n' = n + g * g
 *     z  = z + (gs - ((n'^e - n^e) / lr) * w)
 *     w  = (clip(z) - z) / (n'^e / lr + 2 * l2')
 *     n  = n'
 *
 *   x^e is pow(x, e), except for e == 0.5 (the default lr_power -0.5) where
 *   it is sqrt(x): the correctly rounded value of x^0.5 for the x >= 0 an
 *   accumulator holds, which a libm pow gives too up to its last-bit error,
 *   at a fraction of the cost.
 *
 * Legacy (tf.keras optimizer_v2/ftrl.py; TF tensorflow/core/kernels/
 * training_ops.cc). s(x) is sqrt(x) when lr_power == -0.5 (compared in the
 * variable's dtype) and x^e otherwise.
 *
 *   l2_shrinkage == 0, dense: ResourceApplyFtrl (functor ApplyFtrl)
 *     z = z + (g - ((s(n') - s(n)) / lr) * w)
 *     w = |z| > l1 ? (l1 * sign(z) - z) / (s(n') / lr + 2 * l2') : 0
 *   l2_shrinkage > 0, dense: ResourceApplyFtrlV2. Its op (ApplyFtrlOp)
 *     dispatches multiply_linear_by_lr == false (what Keras passes) to the
 *     functor ApplyFtrlV2MultiplyLinearByLr, so the linear slot holds lr * z:
 *     z = z + (gs * lr - (s(n') - s(n)) * w)
 *     w = |z| > l1 * lr ? (l1 * lr * sign(z) - z) / (s(n') + 2 * l2' * lr) : 0
 *     With a constant lr, w is the same as Keras 3's up to rounding; with a
 *     changing lr (decay, schedules) the trajectories differ.
 *   sparse: ResourceSparseApplyFtrl / ResourceSparseApplyFtrlV2 (functor
 *     SparseApplyFtrl), duplicates summed first, only the indexed rows of w,
 *     n and z change; gs = g + 2 * l2_shrinkage * w when l2_shrinkage > 0:
 *     rows of more than one element (ComputeFtrl):
 *       z = z + (gs - ((s(n') - s(n)) / lr) * w)
 *       w = (clip(z) - z) / (s(n') / lr + 2 * l2')
 *     rows of one element (scalar loop; the sigma term always uses pow):
 *       z = (z + gs) - ((n'^e - n^e) / lr) * w
 *       w = (clip(z) - z) / (s(n') / lr + 2 * l2')
 *   in all: n = n + g * g.
 *
 * Keras 3 sparse gradients give the dense equivalent: rows without an index
 * see g = 0, and their w is recomputed from z and n (it becomes 0 on the
 * first step when z == 0, and z moves by 2 * l2_shrinkage * w).
 *
 * Slots: "accumulator" (constant initial_accumulator_value), "linear" (zeros),
 * created in that order for each variable. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizers/positive_lr.h"

#include <math.h>

#define INF INFINITY

/* Keras 3 writes learning_rate_power, initial_accumulator_value, l1, l2,
 * l2_shrinkage, beta (plain numbers); legacy writes initial_accumulator_value,
 * learning_rate_power, l1, l2, beta, l2_shrinkage, where learning_rate_power,
 * l1, l2 and beta are hyperparameters (_set_hyper). */
enum {
    K_LR_POWER,
    K_INITIAL_ACC,
    K_L1,
    K_L2,
    K_L2_SHRINKAGE,
    K_BETA,
    L_INITIAL_ACC,
    L_LR_POWER,
    L_L1,
    L_L2,
    L_BETA,
    L_L2_SHRINKAGE,
};

static const optim_param ftrl_params[] = {
    {"learning_rate_power", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, -0.5, -INF, 0.0},
    {"initial_accumulator_value", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.1, 0.0, INF},
    {"l1_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.0, 0.0, INF},
    {"l2_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.0, 0.0, INF},
    {"l2_shrinkage_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.0, 0.0,
     INF},
    {"beta", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.0, -INF, INF},
    {"initial_accumulator_value", OPTIM_PARAM_FLOAT, OPTIM_PARAM_LEGACY_ONLY, 0.1, 0.0, INF},
    {"learning_rate_power", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, -0.5,
     -INF, 0.0},
    {"l1_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY,
     0.0, 0.0, INF},
    {"l2_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY,
     0.0, 0.0, INF},
    {"beta", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0.0, -INF, INF},
    {"l2_shrinkage_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_LEGACY_ONLY, 0.0, 0.0,
     INF},
};

typedef struct coef {
    int legacy; /* the TF kernels' rules */
    int v2; /* legacy with l2_shrinkage > 0 (the FtrlV2 kernels) */
    int use_sqrt; /* lr_power == -0.5 in the variable's dtype: x^0.5 as sqrt */
    double lr;
    double e; /* -lr_power */
    double l1;
    double two_l2; /* 2 * (l2 + beta / (2 * lr)) */
    double two_shr; /* 2 * l2_shrinkage */
    double l1_lr; /* legacy dense V2: l1 * lr */
    double two_l2_lr; /* legacy dense V2: (2 * l2') * lr */
} coef;

/* The rule divides by lr: TF's ApplyFtrl kernels refuse lr <= 0 ("lr is
 * not a positive scalar"), where Keras 3 would step to NaN. A constant 0 is
 * refused here; a schedule or callable is only range-checked per step. */
static int validate(optim_optimizer *opt, optim_error *err)
{
    return optim__positive_lr(opt, "Ftrl", "the rule divides by it", err);
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    /* Both generations create accumulator and linear variable by variable
     * (OptimizerV2._create_slots's one loop; Keras 3 interleaves too). */
    optim_set_slot_order(opt, OPTIM_SLOTS_BY_VARIABLE);
    double init = 0.1;
    optim_get_hyper(opt, "initial_accumulator_value", &init);
    int rc = optim_add_slot(opt, var, "accumulator", OPTIM_SLOT_CONSTANT, init);
    return rc ? rc : optim_add_slot(opt, var, "linear", OPTIM_SLOT_ZEROS, 0);
}

/* Per-step constants, computed in the variable's dtype in TF's order:
 * l2' = l2 + beta / (2.0 * lr), then 2 * l2' (and (2 * l2') * lr, l1 * lr for
 * the legacy V2 kernel). For F32 every intermediate is rounded to float. */
static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    int legacy = optim_generation_of(opt) == OPTIM_LEGACY;
    double lr_power = optim_param_value(opt, legacy ? L_LR_POWER : K_LR_POWER);
    double l1 = optim_param_value(opt, legacy ? L_L1 : K_L1);
    double l2 = optim_param_value(opt, legacy ? L_L2 : K_L2);
    double beta = optim_param_value(opt, legacy ? L_BETA : K_BETA);
    double shr = optim_param_value(opt, legacy ? L_L2_SHRINKAGE : K_L2_SHRINKAGE);
    k->legacy = legacy;
    k->v2 = legacy && shr > 0.0;
    k->lr = optim_learning_rate(opt, dtype);
    if (dtype == OPTIM_F32) {
        float lr = (float)k->lr, p = (float)lr_power, fl1 = (float)l1;
        float adj = (float)l2 + (float)beta / (2.0f * lr);
        float two_l2 = 2.0f * adj;
        k->use_sqrt = p == -0.5f;
        k->e = -p;
        k->l1 = fl1;
        k->two_l2 = two_l2;
        k->two_shr = 2.0f * (float)shr;
        k->l1_lr = fl1 * lr;
        k->two_l2_lr = two_l2 * lr;
    } else {
        double adj = l2 + beta / (2.0 * k->lr);
        k->use_sqrt = lr_power == -0.5;
        k->e = -lr_power;
        k->l1 = l1;
        k->two_l2 = 2.0 * adj;
        k->two_shr = 2.0 * shr;
        k->l1_lr = l1 * k->lr;
        k->two_l2_lr = k->two_l2 * k->lr;
    }
}

/* The rules per root and type, and dense_T and sparse_T that choose among
 * them (ftrl_kernels.inc, ftrl_rules.inc). */
#define T float
#define SQRT sqrtf
#define POW powf
#define FABS fabsf
#include "ftrl_kernels.inc"
#define T double
#define SQRT sqrt
#define POW pow
#define FABS fabs
#include "ftrl_kernels.inc"

static void apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        dense_float(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else dense_double(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3: the dense equivalent (every row, zero gradient where no index
 * points); legacy: the indexed rows only. */
static int sparse_mode(const optim_sparse_update *u)
{
    return ((const coef *)u->coef)->legacy ? OPTIM_SPARSE_ROWS : OPTIM_SPARSE_DENSE;
}

const optim_class OPTIM_ISA_NAME(optim_ftrl_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Ftrl",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = ftrl_params,
    .n_params = sizeof ftrl_params / sizeof *ftrl_params,
    .coef_size = sizeof(coef),
    .validate = validate,
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .sparse_mode = sparse_mode,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.optimizers.legacy",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
    .nonnegative_slots = (const char *const[]){"accumulator", NULL},
};
