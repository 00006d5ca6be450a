/*
 * examples/plugin/adabelief.c - a plugin for the `optim` command: the
 * AdaBelief optimizer, as a class of its own, registered by
 * optim_plugin_init. Built with optim_add_plugin(adabelief ISA_SOURCES
 * adabelief.c) (CMake) or the pkg-config recipe of docs/custom-optimizer.md;
 * then
 *
 *     optim --plugin ./libadabelief.so conformance AdaBelief
 *     optim --plugin ./libadabelief.so replay adabelief.json init.st grads.st out.st
 *
 * AdaBelief (Zhuang et al., "AdaBelief Optimizer: Adapting Stepsizes by the
 * Belief in Observed Gradients", NeurIPS 2020), in the form of TF Addons'
 * AdaBelief without rectification and weight decay, t = iterations + 1:
 *
 *     m = beta_1 * m + (1 - beta_1) * g
 *     s = beta_2 * s + (1 - beta_2) * (g - m)^2 + epsilon
 *     w = w - lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(s) + epsilon)
 *
 * Slots "m" and "v" (s), zeros. Element-wise; sparse gradients are lazy:
 * duplicates are summed by the library and only the indexed rows of w, m and
 * v change.
 *
 * The file is compiled once per instruction-set level (optim/isa.h): the
 * class table is adabelief_class (baseline), adabelief_class_avx2 or
 * adabelief_class_avx512, each with its own build of the kernels, and the
 * baseline build alone holds the schedule and optim_plugin_init, which
 * registers the level in use's table. Built once, it is the baseline alone.
 *
 * The plugin also brings a schedule, "StepDecay" (PyTorch's StepLR):
 * initial_learning_rate * gamma^floor(step / step_size), for example
 *     {"class_name": "AdaBelief", "config": {"learning_rate": {"class_name":
 *      "StepDecay", "config": {"initial_learning_rate": 0.01, "step_size": 100}}}}
 */
#include <optim/isa.h>
#include <optim/plugin.h>

#include <math.h>

enum { P_BETA_1, P_BETA_2, P_EPSILON };

static const optim_param adabelief_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, 0, 1e-14, 0.0, INFINITY},
};

typedef struct ab_coef {
    double step; /* lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) */
    double b1, b2; /* beta_1, beta_2 */
    double eps;
} ab_coef;

static int ab_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0.0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0.0);
}

static void ab_prepare(optim_optimizer *opt, optim_dtype dtype, void *coef)
{
    ab_coef *k = coef;
    double t = (double)optim_iterations(opt) + 1;
    k->b1 = optim_param_value(opt, P_BETA_1);
    k->b2 = optim_param_value(opt, P_BETA_2);
    k->eps = optim_param_value(opt, P_EPSILON);
    k->step = optim_learning_rate(opt, dtype) * sqrt(1 - pow(k->b2, t)) / (1 - pow(k->b1, t));
    if (dtype == OPTIM_F32) {
        k->step = (float)k->step;
        k->b1 = (float)k->b1;
        k->b2 = (float)k->b2;
        k->eps = (float)k->eps;
    }
}

/* The rule over n contiguous elements in T's arithmetic. */
#define AB_KERNEL(T, SQRT)                                                        \
    static void ab_##T(T *w, const T *g, T *m, T *v, int64_t n, const ab_coef *k) \
    {                                                                             \
        const T b1 = (T)k->b1, b2 = (T)k->b2, eps = (T)k->eps, step = (T)k->step; \
        for (int64_t i = 0; i < n; i++) {                                         \
            m[i] = b1 * m[i] + (1 - b1) * g[i];                                   \
            T d = g[i] - m[i];                                                    \
            v[i] = b2 * v[i] + (1 - b2) * d * d + eps;                            \
            w[i] -= step * m[i] / (SQRT(v[i]) + eps);                             \
        }                                                                         \
    }
AB_KERNEL(float, sqrtf)
AB_KERNEL(double, sqrt)

static void ab_apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        ab_float(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else ab_double(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

/* Lazy: the dense rule on each indexed row only. */
static void ab_apply_sparse(const optim_sparse_update *u)
{
    for (int64_t j = 0; j < u->n; j++) {
        int64_t at = u->indices[j] * u->row_size, from = j * u->row_size;
        if (u->dtype == OPTIM_F32)
            ab_float((float *)u->param + at, (const float *)u->values + from,
                     (float *)u->slots[0] + at, (float *)u->slots[1] + at, u->row_size, u->coef);
        else
            ab_double((double *)u->param + at, (const double *)u->values + from,
                      (double *)u->slots[0] + at, (double *)u->slots[1] + at, u->row_size, u->coef);
    }
}

/* adabelief_class, adabelief_class_avx2 or adabelief_class_avx512 */
const optim_class OPTIM_ISA_NAME(adabelief_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "AdaBelief",
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = adabelief_params,
    .n_params = sizeof adabelief_params / sizeof *adabelief_params,
    .coef_size = sizeof(ab_coef),
    .create_slots = ab_create_slots,
    .prepare = ab_prepare,
    .apply_dense = ab_apply_dense,
    .apply_sparse = ab_apply_sparse,
};

#if OPTIM_ISA_BASELINE /* the rest once, in the baseline build */

/* ---- the schedule ---- */

enum { S_INITIAL, S_STEP_SIZE, S_GAMMA };

static const optim_param step_decay_params[] = {
    {"initial_learning_rate", OPTIM_PARAM_FLOAT, 0, 0.001, 0.0, INFINITY},
    {"step_size", OPTIM_PARAM_FLOAT, OPTIM_PARAM_COUNT | OPTIM_PARAM_MIN_EXCLUSIVE, 10, 0.0,
     INFINITY},
    {"gamma", OPTIM_PARAM_FLOAT, OPTIM_PARAM_MIN_EXCLUSIVE, 0.1, 0.0, 1.0},
};

static double step_decay_value(const optim_schedule *s, int64_t step)
{
    double k = floor((double)step / optim_schedule_param(s, S_STEP_SIZE));
    return optim_schedule_param(s, S_INITIAL) * pow(optim_schedule_param(s, S_GAMMA), k);
}

static const optim_schedule_class step_decay_class = {
    .size = sizeof(optim_schedule_class),
    .version = OPTIM_SCHEDULE_CLASS_VERSION,
    .name = "StepDecay",
    .params = step_decay_params,
    .n_params = sizeof step_decay_params / sizeof *step_decay_params,
    .value = step_decay_value,
};

OPTIM_ISA_DECLARE_CLASS(adabelief_class);

OPTIM_PLUGIN_INIT(optim_error *err)
{
    int rc = optim_register_class(OPTIM_ISA_CLASS(adabelief_class), err);
    return rc ? rc : optim_register_schedule_class(&step_decay_class, err);
}
#endif
