/*
 * tests/plugin/adam_copy.c - the plugin that tests/plugin/speed.sh times
 * against the built-in Adam: "PluginAdam", Keras 3's dense Adam rule written
 * as a plugin author would (plain C loop, no intrinsics), compiled per
 * instruction-set level (optim/isa.h) by optim_add_plugin's ISA_SOURCES or
 * the pkg-config recipe, or once (baseline only). Same rule, same bytes per
 * parameter (gradient read; w, m and v read and written) as the built-in, so
 * `optim bench` ratios compare the two builds and nothing else.
 *
 *     m = m + (g - m) * (1 - beta_1)
 *     v = v + (g^2 - v) * (1 - beta_2)
 *     w = w - (m * alpha) / (sqrt(v) + epsilon),
 *     alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
 *
 * Sparse gradients take the library's dense path (no apply_sparse).
 */
#include <optim/isa.h>
#include <optim/plugin.h>

#include <math.h>

enum { P_BETA_1, P_BETA_2, P_EPSILON };

static const optim_param pa_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, 0, 1e-7, 0.0, INFINITY},
};

typedef struct pa_coef {
    double alpha, c1, c2, eps; /* step size, 1 - beta_1, 1 - beta_2, epsilon */
} pa_coef;

static int pa_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0.0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0.0);
}

static void pa_prepare(optim_optimizer *opt, optim_dtype dtype, void *coef)
{
    pa_coef *k = coef;
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    const double t = (double)optim_iterations(opt) + 1, lr = optim_learning_rate(opt, dtype);
    k->alpha = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    k->c1 = 1 - b1;
    k->c2 = 1 - b2;
    k->eps = optim_param_value(opt, P_EPSILON);
}

#define PA_KERNEL(T, SQRT)                                                               \
    static void pa_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                       int64_t n, const pa_coef *k)                                      \
    {                                                                                    \
        const T alpha = (T)k->alpha, c1 = (T)k->c1, c2 = (T)k->c2, eps = (T)k->eps;      \
        for (int64_t i = 0; i < n; i++) {                                                \
            const T mi = m[i] + (g[i] - m[i]) * c1;                                      \
            const T vi = v[i] + (g[i] * g[i] - v[i]) * c2;                               \
            m[i] = mi;                                                                   \
            v[i] = vi;                                                                   \
            w[i] = w[i] - (mi * alpha) / (SQRT(vi) + eps);                               \
        }                                                                                \
    }
PA_KERNEL(float, sqrtf)
PA_KERNEL(double, sqrt)

static void pa_apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        pa_float(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else pa_double(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

const optim_class OPTIM_ISA_NAME(plugin_adam_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "PluginAdam",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = pa_params,
    .n_params = sizeof pa_params / sizeof *pa_params,
    .coef_size = sizeof(pa_coef),
    .create_slots = pa_create_slots,
    .prepare = pa_prepare,
    .apply_dense = pa_apply_dense,
};

#if OPTIM_ISA_BASELINE
OPTIM_ISA_DECLARE_CLASS(plugin_adam_class);

OPTIM_PLUGIN_INIT(optim_error *err)
{
    return optim_register_class(OPTIM_ISA_CLASS(plugin_adam_class), err);
}
#endif
