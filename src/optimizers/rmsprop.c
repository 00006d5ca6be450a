/* RMSprop, plain or centered, with optional heavy-ball momentum.
 *
 * Hinton, "Neural Networks for Machine Learning", lecture 6e (2012); the
 * centered form is Graves, "Generating Sequences With Recurrent Neural
 * Networks" (arXiv:1308.0850, 2013), eq. 38-45.
 *
 * Keras 3 (keras/src/optimizers/rmsprop.py, RMSprop.update_step), with rho,
 * momentum and epsilon Python floats (cast to the variable's dtype, and
 * 1 - rho computed in double before the cast):
 *
 *     v = rho * v + (1 - rho) * g^2
 *     centered:  a = rho * a + (1 - rho) * g;   d = (v - a^2) + epsilon
 *     otherwise:                                d = v + epsilon
 *     inc = (lr * g) / sqrt(d)
 *     momentum > 0:  m = momentum * m + inc;  w = w - m
 *     otherwise:     w = w - inc
 *
 * Legacy (tf_keras/optimizers/legacy/rmsprop.py), 1 - rho computed in the
 * variable's dtype. Without momentum (_resource_apply_dense, plain TF ops;
 * epsilon OUTSIDE the square root):
 *
 *     v = rho * v + (1 - rho) * g^2
 *     centered:  a = rho * a + (1 - rho) * g;   d = v - a^2
 *     otherwise:                                d = v
 *     w = w - (lr * g) / (sqrt(d) + epsilon)
 *
 * With momentum (TF's ApplyRMSProp / ApplyCenteredRMSProp kernels, epsilon
 * inside):
 *
 *     v = v + (g^2 - v) * (1 - rho)
 *     centered:  a = a + (g - a) * (1 - rho);   d = (v - a^2) + epsilon
 *     otherwise:                                d = v + epsilon
 *     m = m * momentum + (g * lr) / sqrt(d);  w = w - m
 *
 * Sparse gradients (duplicates summed first in both generations). Keras 3:
 * the dense equivalent (g = 0 on rows without an index: v, a and m decay and
 * w moves on every row). Legacy with momentum: SparseApplyRMSProp /
 * SparseApplyCenteredRMSProp on the indexed rows only, in their own
 * operation order:
 *
 *     v = v * rho + g^2 * (1 - rho)
 *     centered:  a = a * rho + g * (1 - rho);   d = (v + epsilon) - a^2
 *     otherwise:                                d = v + epsilon
 *     m = m * momentum + (rsqrt(d) * lr) * g;  w = w - m
 *
 * Legacy without momentum (_resource_apply_sparse): v (and a) are multiplied
 * by rho on EVERY row, then the indexed rows get + g^2 * (1 - rho)
 * (+ g * (1 - rho)); w changes on the indexed rows only, by the dense rule.
 *
 * Legacy epsilon: `epsilon or backend_config.epsilon()`, so None and 0 mean
 * 1e-7 (and get_config writes 1e-07). rsqrt is computed as 1 / sqrt.
 *
 * Slots (created in this order): "rms" (Keras 3: velocity), "momentum" when
 * momentum > 0 or is a variable, callable or schedule, "mg" (Keras 3:
 * average_gradient) when centered. Keras 3's names differ; optim uses the
 * legacy names in both generations (the `optim replay` contract). */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* backend_config.epsilon(), what legacy uses for epsilon None or 0. */
#define BACKEND_EPSILON 1e-7

/* Each key twice: Keras 3's (plain Python values, no checks) and legacy's
 * (rho and momentum are _set_hyper hypers; momentum in [0, 1]; epsilon may
 * be None). Same order in both, Keras's get_config order. */
enum { P_RHO, P_MOMENTUM, P_EPSILON, P_CENTERED, P_PER_GEN };
enum { K3 = 0, LG = P_PER_GEN };

static const optim_param rmsprop_params[] = {
    {"rho", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.9, -INFINITY, INFINITY},
    {"momentum", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.0, -INFINITY, INFINITY},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, -INFINITY, INFINITY},
    {"centered", OPTIM_PARAM_BOOL, OPTIM_PARAM_KERAS3_ONLY, 0.0, 0.0, 1.0},
    {"rho", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0.9, -INFINITY,
     INFINITY},
    {"momentum", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0.0, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, 1e-7, -INFINITY,
     INFINITY},
    {"centered", OPTIM_PARAM_BOOL, OPTIM_PARAM_LEGACY_ONLY, 0.0, 0.0, 1.0},
};

typedef struct coef {
    double lr, rho, one_minus_rho, momentum, epsilon;
    int centered; /* the current setting */
    int use_momentum; /* Keras 3: momentum > 0 now */
    int legacy;
} coef;

static int is_legacy(const optim_optimizer *opt)
{
    return optim_generation_of(opt) == OPTIM_LEGACY;
}

static int momentum_is_on(optim_optimizer *opt)
{
    double m;
    /* Legacy: a tensor or callable momentum always gets the slot (as
     * OptimizerV2's `self._momentum`); Keras 3's momentum is a number. */
    if (!optim_hyper_is_constant(opt, "momentum") || optim_get_hyper(opt, "momentum", &m)) return 1;
    return m > 0;
}

static int flag_on(optim_optimizer *opt, const char *key)
{
    double v = 0;
    return !optim_get_hyper(opt, key, &v) && v != 0;
}

static int has_slot_name(const optim_optimizer *opt, const char *name, size_t *count)
{
    const char *names[16];
    size_t n = optim_get_slot_names(opt, names, 16);
    *count = n;
    for (size_t i = 0; i < n && i < 16; i++)
        if (strcmp(names[i], name) == 0) return 1;
    return 0;
}

/* Keras makes the mg (and, in Keras 3, the momentum) slots when it builds;
 * switching centered (or Keras 3's momentum) on afterwards makes Keras fail
 * on the missing slot. optim refuses the change instead. */
static int validate(optim_optimizer *opt, optim_error *err)
{
    size_t n;
    const char *what = NULL;
    if (flag_on(opt, "centered") && !has_slot_name(opt, "mg", &n) && n > 0) what = "centered";
    if (!what && !is_legacy(opt) && momentum_is_on(opt) && !has_slot_name(opt, "momentum", &n) &&
        n > 0)
        what = "momentum > 0";
    if (!what) return OPTIM_OK;
    if (!err) return OPTIM_EINVAL;
    err->code = OPTIM_EINVAL;
    snprintf(err->msg, sizeof err->msg,
             "RMSprop: %s needs the '%s' slot, which is made when a variable is first seen; this "
             "optimizer has created its slots already (set it before the first step)",
             what, strcmp(what, "centered") == 0 ? "mg" : "momentum");
    return OPTIM_EINVAL;
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "rms", OPTIM_SLOT_ZEROS, 0);
    if (!rc && momentum_is_on(opt)) rc = optim_add_slot(opt, var, "momentum", OPTIM_SLOT_ZEROS, 0);
    if (!rc && flag_on(opt, "centered")) rc = optim_add_slot(opt, var, "mg", OPTIM_SLOT_ZEROS, 0);
    return rc;
}

/* Legacy get_config writes self.epsilon, which is 1e-7 when given as None or 0. */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    double eps = 0;
    if (!is_legacy(opt) || optim_get_hyper(opt, "epsilon", &eps)) return OPTIM_OK;
    if (!isnan(eps) && eps != 0) return OPTIM_OK;
    /* optim_config_put appends: write centered again to keep Keras's order. */
    int rc = optim_config_put(cfg, "epsilon", "1e-07");
    if (!rc) rc = optim_config_put(cfg, "centered", flag_on(opt, "centered") ? "true" : "false");
    return rc;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    int legacy = is_legacy(opt);
    size_t b = legacy ? LG : K3;
    double rho = optim_param_value(opt, b + P_RHO), mu = optim_param_value(opt, b + P_MOMENTUM);
    double eps = optim_param_value(opt, b + P_EPSILON);
    if (legacy && (isnan(eps) || eps == 0)) eps = BACKEND_EPSILON;
    k->lr = optim_learning_rate(opt, dtype);
    k->centered = optim_param_value(opt, b + P_CENTERED) != 0;
    k->use_momentum = mu > 0;
    k->legacy = legacy;
    if (dtype == OPTIM_F32) {
        float r = (float)rho;
        k->rho = r;
        /* Legacy: 1.0 - rho on the cast tensor; Keras 3: Python's 1 - rho. */
        k->one_minus_rho = legacy ? (float)(1.0f - r) : (float)(1.0 - rho);
        k->momentum = (float)mu;
        k->epsilon = (float)eps;
    } else {
        k->rho = rho;
        k->one_minus_rho = 1.0 - rho;
        k->momentum = mu;
        k->epsilon = eps;
    }
}

/* The three update forms over n contiguous elements, in T's arithmetic.
 * mom / mg are NULL when the form does not use them. */
#define T float
#define SQRT sqrtf
#include "rmsprop_kernels.inc"
#define T double
#define SQRT sqrt
#include "rmsprop_kernels.inc"

/* Which slot is which: rms first, then momentum and mg as created. Two
 * slots are rms + momentum or rms + mg. */
typedef struct parts {
    void *v, *m, *a;
} parts;

static parts slot_parts(optim_optimizer *opt, optim_var *var, void *const *slots, int nslots,
                        const coef *k)
{
    parts p = {slots[0], NULL, NULL};
    if (nslots >= 3) {
        p.m = slots[1];
        p.a = slots[2];
    } else if (nslots == 2) {
        if (optim_get_slot(opt, var, "mg")) p.a = slots[1];
        else p.m = slots[1];
    }
    /* Keras 3 skips its momentums when momentum is 0 now; legacy's path is
     * fixed by the slot (OptimizerV2's self._momentum). */
    if (!k->legacy && !k->use_momentum) p.m = NULL;
    if (!k->centered) p.a = NULL;
    return p;
}

static void apply_dense(const optim_dense_update *u)
{
    const coef *k = u->coef;
    parts p = slot_parts(u->opt, u->var, u->slots, u->nslots, k);
    if (u->dtype == OPTIM_F32) {
        (k->legacy ? legacy_dense_float : keras3_float)(u->param, u->grad, p.v, p.m, p.a, u->count,
                                                        k);
    } else {
        (k->legacy ? legacy_dense_double : keras3_double)(u->param, u->grad, p.v, p.m, p.a,
                                                          u->count, k);
    }
}

#define ROW(ptr, r) ((ptr) ? (ptr) + (r)*rs : NULL)

/* Sparse, legacy, indices unique and ascending. */
#define T float
#include "rmsprop_sparse.inc"
#define T double
#include "rmsprop_sparse.inc"

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3: the dense equivalent (g = 0 on rows without an index). Legacy
 * with momentum: the indexed rows only; without: the walk above, on row
 * ranges on all threads. */
static int sparse_mode(const optim_sparse_update *u)
{
    const coef *k = u->coef;
    if (!k->legacy) return OPTIM_SPARSE_DENSE;
    return slot_parts(u->opt, u->var, u->slots, u->nslots, k).m ? OPTIM_SPARSE_ROWS
                                                                : OPTIM_SPARSE_ALL_ROWS;
}

const optim_class OPTIM_ISA_NAME(optim_rmsprop_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "RMSprop",
    .min_slots = 1,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = rmsprop_params,
    .n_params = sizeof rmsprop_params / sizeof *rmsprop_params,
    .coef_size = sizeof(coef),
    .validate = validate,
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
