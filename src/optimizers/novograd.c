/* NovoGrad: SGD with momentum on gradients normalised by a layer-wise
 * second moment.
 *
 * Ginsburg et al., "Stochastic Gradient Methods with Layer-wise Adaptive
 * Moments for Training of Deep Networks" (arXiv:1905.11286). TF Addons'
 * tfa.optimizers.NovoGrad (tensorflow_addons/optimizers/novograd.py at
 * d208d75), an OptimizerV2: legacy generation only. Per variable and step,
 * every operation in the variable's dtype, t0 the optimizer's iterations
 * before the step (not the variable's):
 *
 *     g2 = sum(g * g)                                   one scalar per variable
 *     v  = g2                                 if t0 == 0
 *        = v * beta_2 + g2 * (1 - beta_2)     otherwise
 *     vhat = max(vhat, v), element-wise; vhat replaces v below   (amsgrad)
 *     g' = g / (sqrt(v) + epsilon)
 *     g' = g' + weight_decay * w              if weight_decay > 0
 *     g' = g' * (1 - beta_1)                  if grad_averaging and t0 != 0
 *     m  = m * beta_1 - g' * lr               TF's ApplyKerasMomentum kernel
 *     w  = w + m
 *
 * (m holds lr times the paper's moment, negated: TF Addons' slot.) lr is the
 * legacy learning rate with `decay`; epsilon is `epsilon or 1e-7`.
 *
 * g2: the squares summed in double over fixed chunks of 8192 elements
 * (element i of a chunk into partial sum i % 4 in index order, the four
 * added in lane order, the chunks' sums in chunk order), rounded once to the
 * dtype. TF sums in the dtype with Eigen's tree reduction: the two differ
 * by rounding only. Dense gradients run in two phases
 * (optim/optimizer_class.h): the chunks' sums on all threads, the moment
 * once, then the element-wise update on all threads; the bits do not depend
 * on the thread count.
 *
 * Sparse gradients (TF Addons' _resource_apply_sparse; duplicate indices
 * summed first, as OptimizerV2 does): g2 over the summed rows (in index
 * order, chunked as above), v as above, vhat = max(vhat, v) on every
 * element; then only the indexed rows of m and w change, with the weight
 * decay taken from those rows of w (ResourceSparseApplyKerasMomentum). With
 * amsgrad TF Addons divides the rows by sqrt(vhat) of the whole variable,
 * a shape error unless every row is indexed; here each row uses its own
 * rows of vhat, which equal TF Addons' where it runs (vhat is uniform).
 *
 * Slots, in TF Addons' order: "m" (zeros) for every variable, then "v" (a
 * scalar, shape []) for every variable, then "vhat" (zeros) with amsgrad.
 * TF Addons' get_config writes neither amsgrad nor decay; here each is
 * written when not at its default (src/optimizers/tfa_keys.h), so a config
 * TF Addons wrote comes back key for key and a setting is not lost. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizers/tfa_keys.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { P_BETA_1, P_BETA_2, P_EPSILON, P_WEIGHT_DECAY, P_GRAD_AVERAGING };

/* TF Addons validates only weight_decay ("cannot be negative"); the other
 * ranges are optim's guards. beta_1, beta_2, weight_decay and
 * grad_averaging are its hyperparameters; epsilon an attribute. */
static const optim_param novograd_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE, OPTIM__TFA_EPSILON, 0.0, INFINITY},
    {"weight_decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0.0, 0.0,
     INFINITY},
    {"grad_averaging", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

typedef struct coef {
    double lr, beta_1, beta_2, c1, c2, epsilon, weight_decay; /* in the dtype */
    int first; /* t0 == 0: v = g2 */
    int use_wd; /* weight_decay > 0 */
    int averaging; /* grad_averaging and t0 != 0 */
    int amsgrad;
} coef;

/* amsgrad: a constructor argument that TF Addons' get_config leaves out, so
 * no declared key: read by set_config when a config has it, written by
 * get_config when true. */
typedef struct state {
    int amsgrad;
} state;

static int set_config(optim_optimizer *opt, const char *key, const char *json_value,
                      optim_error *err)
{
    if (strcmp(key, "amsgrad") != 0) return OPTIM_EKEY;
    const int t = strcmp(json_value, "true") == 0;
    if (!t && strcmp(json_value, "false") != 0)
        return optim_error_set(err, OPTIM_ETYPE,
                               "NovoGrad: config key 'amsgrad' is %.40s, expected true or false",
                               json_value);
    ((state *)optim_state(opt))->amsgrad = t;
    return 0;
}

static int keep_key(optim_optimizer *opt, const char *key)
{
    return strcmp(key, "amsgrad") != 0 || ((const state *)optim_state(opt))->amsgrad;
}

static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    static const char *const own[] = {"beta_1",       "beta_2",         "epsilon",
                                      "weight_decay", "grad_averaging", "amsgrad"};
    if (((const state *)optim_state(opt))->amsgrad) {
        int rc = optim_config_put(cfg, "amsgrad", "true");
        if (rc) return rc;
    }
    return optim__tfa_keys(opt, cfg, own, sizeof own / sizeof *own, keep_key);
}

/* TF Addons' three loops: every variable's m, then v, then vhat (the
 * default by-kind weight order). */
static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    const int ams = ((const state *)optim_state(opt))->amsgrad;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    if (!rc) rc = optim_add_slot_shaped(opt, var, "v", 0, NULL, OPTIM_SLOT_ZEROS, 0);
    if (!rc && ams) rc = optim_add_slot(opt, var, "vhat", OPTIM_SLOT_ZEROS, 0);
    return rc;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    const int f32 = dtype == OPTIM_F32;
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    const double eps = optim_param_value(opt, P_EPSILON);
    const double wd = optim_param_value(opt, P_WEIGHT_DECAY);
    const int64_t t0 = optim_iterations(opt);
    k->lr = optim_learning_rate(opt, dtype);
    k->beta_1 = f32 ? (float)b1 : b1;
    k->beta_2 = f32 ? (float)b2 : b2;
    /* 1 - beta_t on the tensor cast to the dtype */
    k->c1 = f32 ? 1.0f - (float)b1 : 1.0 - b1;
    k->c2 = f32 ? 1.0f - (float)b2 : 1.0 - b2;
    k->epsilon = isnan(eps) || eps == 0 ? OPTIM__TFA_EPSILON : eps;
    if (f32) k->epsilon = (float)k->epsilon;
    k->weight_decay = f32 ? (float)wd : wd;
    k->first = t0 == 0;
    k->use_wd = k->weight_decay > 0;
    k->averaging = optim_param_value(opt, P_GRAD_AVERAGING) != 0 && t0 != 0;
    k->amsgrad = ((const state *)optim_state(opt))->amsgrad;
}

#define T float
#define SQRT sqrtf
#include "novograd_kernels.inc"
#define T double
#define SQRT sqrt
#include "novograd_kernels.inc"

/* ---- dense: phase 0 the chunks' sums, the moment, phase 1 the update ------ */

/* One thread, the whole variable (the phases' arithmetic in their order). */
static void apply_dense(const optim_dense_update *u)
{
    const coef *k = u->coef;
    void *vhat = k->amsgrad ? u->slots[2] : NULL;
    if (u->dtype == OPTIM_F32) {
        float *v = u->slots[1];
        *v = moment_float(*v, chunked_squares_float(u->grad, u->count), k);
        update_float(u->param, u->slots[0], vhat, u->grad, u->count, k, *v);
    } else {
        double *v = u->slots[1];
        *v = moment_double(*v, chunked_squares_double(u->grad, u->count), k);
        update_double(u->param, u->slots[0], vhat, u->grad, u->count, k, *v);
    }
}

static void phase_plan(const optim_optimizer *opt, const optim_var *var, optim_phase_plan *plan)
{
    (void)opt;
    (void)var;
    *plan = (optim_phase_plan){2, SQ_CHUNK, 1, 0, 0};
}

static void apply_phase(const optim_phase_update *pu)
{
    const optim_dense_update *u = &pu->dense;
    const coef *k = u->coef;
    const int64_t o = u->offset;
    if (u->dtype == OPTIM_F32) {
        const float *g = (const float *)u->grad + o;
        float *vhat = k->amsgrad ? (float *)u->slots[2] + o : NULL;
        if (pu->phase == 0) pu->partial[0] = squares_float(g, u->count);
        else
            update_float((float *)u->param + o, (float *)u->slots[0] + o, vhat, g, u->count, k,
                         *(const float *)u->slots[1]);
    } else {
        const double *g = (const double *)u->grad + o;
        double *vhat = k->amsgrad ? (double *)u->slots[2] + o : NULL;
        if (pu->phase == 0) pu->partial[0] = squares_double(g, u->count);
        else
            update_double((double *)u->param + o, (double *)u->slots[0] + o, vhat, g, u->count, k,
                          *(const double *)u->slots[1]);
    }
}

/* After phase 0: the chunks' sums in chunk order, then v (phase 1 reads it). */
static void reduce_phase(const optim_phase_update *pu)
{
    if (pu->phase != 0) return;
    const optim_dense_update *u = &pu->dense;
    double t = 0;
    for (int64_t c = 0; c < pu->chunk; c++) t += pu->partial[c];
    if (u->dtype == OPTIM_F32) {
        float *v = u->slots[1];
        *v = moment_float(*v, t, u->coef);
    } else {
        double *v = u->slots[1];
        *v = moment_double(*v, t, u->coef);
    }
}

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u, u->coef);
    else sparse_double(u, u->coef);
}

/* Phase 0 reads g; phase 1 reads g, reads and writes m and w (and vhat). */
static double bytes_per_param(const optim_optimizer *opt, const optim_var *var)
{
    const int ams = ((const state *)optim_state(opt))->amsgrad;
    return (double)optim_dtype_size(optim_var_dtype(var)) * (ams ? 8.0 : 6.0);
}

const optim_class OPTIM_ISA_NAME(optim_novograd_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "NovoGrad",
    .flags = OPTIM_CLASS_LEGACY_ONLY, /* not element-wise: v is a per-variable norm (phased) */
    .default_learning_rate = 0.001,
    .params = novograd_params,
    .n_params = sizeof novograd_params / sizeof *novograd_params,
    .coef_size = sizeof(coef),
    .state_size = sizeof(state),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = get_config,
    .set_config = set_config,
    .phase_plan = phase_plan,
    .apply_phase = apply_phase,
    .reduce_phase = reduce_phase,
    .tfa_name = "NovoGrad",
    .nonnegative_slots = (const char *const[]){"v", "vhat", NULL},
    .bytes_per_param = bytes_per_param,
    .min_slots = 2,
};
