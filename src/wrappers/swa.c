/* SWA: Stochastic Weight Averaging (TF Addons).
 *
 * Izmailov, Podoprikhin, Garipov, Vetrov & Wilson, "Averaging Weights Leads
 * to Wider Optima and Better Generalization" (UAI 2018, arXiv:1803.05407):
 * an equal-weight running average of snapshots of the weights taken every
 * `average_period` steps from step `start_averaging` on.
 * tensorflow_addons/optimizers/stochastic_weight_averaging.py (SWA:
 * __init__, average_op, get_config) over average_wrapper.py
 * (AveragedOptimizerWrapper; the step mechanics are in tfa.c).
 *
 * Per step, with `step` the shared `iterations` before the increment (the
 * counter average_op reads inside the step), after the inner optimizer's
 * update of each variable with a gradient:
 *
 *     n = max(0, floor((step - start_averaging) / average_period))
 *     if step >= start_averaging and step == start_averaging + n * average_period:
 *         average = (average * n + var) / (n + 1)
 *
 * over the whole variable (sparse gradients too), n in the variable's dtype.
 * The first snapshot (n = 0) copies the variable. Slot "average", zeros
 * (AveragedOptimizerWrapper._create_slots: add_slot(var, "average")).
 *
 * TF Addons casts n to float32 whatever the variable's dtype, so float64
 * variables fail there; here they average in float64. */
#include "wrappers/wrapper.h"

#include <math.h>
#include <stdint.h>

#define MAX_INT 9007199254740992.0 /* 2**53: every integer up to it is exact in a double */

enum { P_AVERAGE_PERIOD, P_START_AVERAGING };

/* In get_config's order. TF Addons raises ValueError for average_period < 1
 * and start_averaging < 0, in that order. */
static const optim_param swa_params[] = {
    {"average_period", OPTIM_PARAM_INT, 0, 10.0, 1.0, MAX_INT},
    {"start_averaging", OPTIM_PARAM_INT, 0, 0.0, 0.0, MAX_INT},
};

static int swa_coefs(optim_optimizer *opt, int64_t step, double *coef)
{
    const int64_t period = (int64_t)optim_param_value(opt, P_AVERAGE_PERIOD);
    const int64_t start = (int64_t)optim_param_value(opt, P_START_AVERAGING);
    if (step < start || (step - start) % period != 0) return 0;
    coef[0] = (double)((step - start) / period);
    return 1;
}

static void swa_rule(optim_dtype dt, void *var, void *slot, int64_t n, const double *coef)
{
    if (dt == OPTIM_F32) {
        const float k = (float)coef[0], k1 = k + 1.0f;
        const float *restrict v = var;
        float *restrict a = slot;
        for (int64_t i = 0; i < n; i++) a[i] = (a[i] * k + v[i]) / k1;
    } else {
        const double k = coef[0], k1 = k + 1.0;
        const double *restrict v = var;
        double *restrict a = slot;
        for (int64_t i = 0; i < n; i++) a[i] = (a[i] * k + v[i]) / k1;
    }
}

static int swa_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, "average", OPTIM_SLOT_ZEROS, 0);
}

static int swa_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                     const optim_step_options *o)
{
    static const optim__tfa_rule r = {"average", swa_coefs, swa_rule};
    return optim__tfa_step(opt, pairs, n, o, &r);
}

const optim_class optim_swa_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "SWA",
    .default_learning_rate = 0.0,
    .params = swa_params,
    .n_params = sizeof swa_params / sizeof *swa_params,
    .state_size = sizeof(optim_wrapper_state),
    .validate = optim__tfa_validate,
    .create_slots = swa_create_slots,
    .step = swa_apply,
    .get_config = optim__tfa_get_config,
    .set_config = optim__tfa_set_config,
    .destroy = optim__wrapper_destroy,
    .inner = optim__wrapper_inner,
    .tfa_name = "SWA",
};
