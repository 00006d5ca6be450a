/* Lookahead (TF Addons).
 *
 * Zhang, Lucas, Hinton & Ba, "Lookahead Optimizer: k steps forward, 1 step
 * back" (NeurIPS 2019, arXiv:1907.08610), Algorithm 1: the inner optimizer
 * moves the fast weights; every k = sync_period steps the slow weights move
 * a fraction alpha = slow_step_size towards them and the fast weights are
 * reset to the slow ones. tensorflow_addons/optimizers/lookahead.py
 * (Lookahead: __init__, _create_slots, apply_gradients, _look_ahead_op,
 * _resource_apply_dense / _sparse, get_config); the step mechanics shared
 * with MovingAverage and SWA are in tfa.c.
 *
 * Per step, after the inner optimizer's update of each variable with a
 * gradient, with local_step = iterations + 1 (the shared counter before its
 * increment, plus one) and alpha cast to the variable's dtype:
 *
 *     if floor(local_step / sync_period) * sync_period == local_step:
 *         slow = slow + alpha * (var - slow)
 *         var  = slow
 *
 * over the whole variable (sparse gradients too). Slot "slow", a copy of
 * the variable when it is first seen (add_slot(var, "slow",
 * initializer=var)).
 *
 * TF Addons checks neither key: a sync_period of 0 divides by zero there and
 * a negative one acts as its absolute value; optim asks for sync_period >= 1
 * and slow_step_size in [0, 1] (the paper's alpha). */
#include "wrappers/wrapper.h"

#include <math.h>
#include <stdint.h>


#define MAX_INT 9007199254740992.0 /* 2**53 */

enum { P_SYNC_PERIOD, P_SLOW_STEP_SIZE };

/* In get_config's order. slow_step_size is a hyperparameter (_set_hyper):
 * a variable, callable or schedule is read once per step. */
static const optim_param lookahead_params[] = {
    {"sync_period", OPTIM_PARAM_INT, 0, 6.0, 1.0, MAX_INT},
    {"slow_step_size", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.5, 0.0, 1.0},
};

static int lookahead_coefs(optim_optimizer *opt, int64_t step, double *coef)
{
    const int64_t k = (int64_t)optim_param_value(opt, P_SYNC_PERIOD);
    if ((step + 1) % k != 0) return 0;
    coef[0] = optim_param_value(opt, P_SLOW_STEP_SIZE);
    return 1;
}

static void lookahead_rule(optim_dtype dt, void *var, void *slot, int64_t n, const double *coef)
{
    if (dt == OPTIM_F32) {
        const float alpha = (float)coef[0];
        float *restrict w = var, *restrict s = slot;
        for (int64_t i = 0; i < n; i++) {
            float back = s[i] + alpha * (w[i] - s[i]);
            s[i] = back;
            w[i] = back;
        }
    } else {
        const double alpha = coef[0];
        double *restrict w = var, *restrict s = slot;
        for (int64_t i = 0; i < n; i++) {
            double back = s[i] + alpha * (w[i] - s[i]);
            s[i] = back;
            w[i] = back;
        }
    }
}

static int lookahead_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, "slow", OPTIM_SLOT_COPY, 0);
}

static int lookahead_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                           const optim_step_options *o)
{
    static const optim__tfa_rule r = {"slow", lookahead_coefs, lookahead_rule};
    return optim__tfa_step(opt, pairs, n, o, &r);
}

const optim_class optim_lookahead_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Lookahead",
    .default_learning_rate = 0.0,
    .params = lookahead_params,
    .n_params = sizeof lookahead_params / sizeof *lookahead_params,
    .state_size = sizeof(optim_wrapper_state),
    .validate = optim__tfa_validate,
    .create_slots = lookahead_create_slots,
    .step = lookahead_apply,
    .get_config = optim__tfa_get_config,
    .set_config = optim__tfa_set_config,
    .destroy = optim__wrapper_destroy,
    .inner = optim__wrapper_inner,
    .tfa_name = "Lookahead",
};
