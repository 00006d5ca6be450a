/* MovingAverage (TF Addons).
 *
 * An exponential moving average of the trained variables (Polyak & Juditsky,
 * "Acceleration of stochastic approximation by averaging", SIAM J. Control
 * Optim. 1992; the EMA form of tf.train.ExponentialMovingAverage).
 * tensorflow_addons/optimizers/moving_average.py (MovingAverage: __init__,
 * _get_decay, _prepare_local, average_op, _create_slots, swap_weights,
 * get_config) over average_wrapper.py (AveragedOptimizerWrapper:
 * apply_gradients, _resource_apply_*, assign_average_vars, get_config).
 *
 * Per step, with `step` the shared `iterations` before the increment, every
 * decay computation in float32 (`_get_hyper("average_decay", tf.float32)`):
 *
 *     d = average_decay
 *     num_updates set:  d = min(d, (1 + num_updates) / (10 + num_updates))
 *                       (TF Addons applies this once, in __init__)
 *     step < start_step:       decay = 0
 *     else if dynamic_decay:   c = step - start_step
 *                              decay = min(d, (1 + c) / (10 + c))
 *     else:                    decay = d
 *
 * then, after the inner optimizer's update of each variable with a gradient
 * (tf.keras.backend.moving_average_update, in the variable's dtype, decay
 * cast to it):
 *
 *     average = average - (average - var) * (1 - decay)
 *
 * over the whole variable, for sparse gradients too. Slot "average", a copy
 * of the variable when it is first seen (`add_slot(var, "average",
 * var.read_value())`).
 *
 * The step mechanics shared with SWA and Lookahead are in tfa.c. */
#include "wrappers/wrapper.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define SLOT "average"
#define MAX_INT 9007199254740992.0 /* 2**53: every integer up to it is exact in a double */

enum { P_AVERAGE_DECAY, P_NUM_UPDATES, P_START_STEP, P_DYNAMIC_DECAY };

/* In get_config's order. average_decay is a hyperparameter (_set_hyper): a
 * variable, callable or schedule is read once per step. TF Addons checks no
 * range; optim asks for a decay in [0, 1] and num_updates >= 0 (a negative
 * one can divide by zero in (1 + n) / (10 + n)). */
static const optim_param ma_params[] = {
    {"average_decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.99, 0.0, 1.0},
    {"num_updates", OPTIM_PARAM_INT, OPTIM_PARAM_NULLABLE, NAN, 0.0, MAX_INT},
    {"start_step", OPTIM_PARAM_INT, 0, 0.0, -MAX_INT, MAX_INT},
    {"dynamic_decay", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

typedef struct ma_state {
    optim_wrapper_state w; /* first, for the wrapper plumbing */
    optim_var **model; /* the variables of the latest step (_model_weights), borrowed */
    size_t nmodel;
} ma_state;

/* min(d, (1 + n) / (10 + n)) in float32, as tf.minimum. */
static float min_ratio(float d, float n)
{
    float r = (1.0f + n) / (10.0f + n);
    return d < r ? d : r;
}

/* average_decay after num_updates (MovingAverage.__init__), float32. */
static float ma_base_decay(double average_decay, double num_updates)
{
    float d = (float)average_decay;
    return isnan(num_updates) ? d : min_ratio(d, (float)num_updates);
}

/* MovingAverage._get_decay(step), float32. */
static float ma_decay(const optim_optimizer *opt, int64_t step)
{
    float d = ma_base_decay(optim_param_value(opt, P_AVERAGE_DECAY),
                            optim_param_value(opt, P_NUM_UPDATES));
    float s = (float)step, start = (float)optim_param_value(opt, P_START_STEP);
    if (s < start) return 0.0f;
    if (optim_param_value(opt, P_DYNAMIC_DECAY) != 0) return min_ratio(d, s - start);
    return d;
}

static int ma_coefs(optim_optimizer *opt, int64_t step, double *coef)
{
    coef[0] = ma_decay(opt, step);
    return 1;
}

static void ma_rule(optim_dtype dt, void *var, void *slot, int64_t n, const double *coef)
{
    if (dt == OPTIM_F32) {
        const float om = 1.0f - (float)coef[0];
        const float *restrict v = var;
        float *restrict a = slot;
        for (int64_t i = 0; i < n; i++) a[i] = a[i] - (a[i] - v[i]) * om;
    } else {
        const double om = 1.0 - coef[0];
        const double *restrict v = var;
        double *restrict a = slot;
        for (int64_t i = 0; i < n; i++) a[i] = a[i] - (a[i] - v[i]) * om;
    }
}

static int ma_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, SLOT, OPTIM_SLOT_COPY, 0);
}

static const optim__tfa_rule ma = {SLOT, ma_coefs, ma_rule};

static int ma_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                    const optim_step_options *o)
{
    /* Allocated first, so that nothing can fail after the step. */
    optim_var **model = optim__malloc(n * sizeof *model);
    if (!model) return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    int rc = optim__tfa_step(opt, pairs, n, o, &ma);
    if (rc) {
        free(model);
        return rc;
    }
    /* _create_slots(var_list) sets _model_weights to this step's variables. */
    ma_state *st = optim_state(opt);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (pairs[i].grad.kind != OPTIM_GRAD_NONE) model[m++] = pairs[i].var;
    free(st->model);
    st->model = model;
    st->nmodel = m;
    return OPTIM_OK;
}

/* With num_updates, TF Addons' average_decay hyper is the float32 tensor
 * min(average_decay, (1 + n) / (10 + n)), and that is what get_config
 * writes. */
static int ma_get_config(optim_optimizer *opt, optim_config *cfg)
{
    int rc = optim__tfa_get_config(opt, cfg);
    if (rc) return rc;
    double nu = NAN, d = 0;
    if (optim_get_hyper(opt, "num_updates", &nu) || isnan(nu)) return OPTIM_OK;
    if (optim_get_hyper(opt, "average_decay", &d)) return OPTIM_EINVAL;
    return optim_config_put_number(cfg, "average_decay", (double)ma_base_decay(d, nu));
}

static void ma_destroy(optim_optimizer *opt)
{
    ma_state *st = optim_state(opt);
    free(st->model);
    st->model = NULL;
    st->nmodel = 0;
    optim__wrapper_destroy(opt);
}

const optim_class optim_moving_average_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "MovingAverage",
    .default_learning_rate = 0.0,
    .params = ma_params,
    .n_params = sizeof ma_params / sizeof *ma_params,
    .state_size = sizeof(ma_state),
    .validate = optim__tfa_validate,
    .create_slots = ma_create_slots,
    .step = ma_apply,
    .get_config = ma_get_config,
    .set_config = optim__tfa_set_config,
    .destroy = ma_destroy,
    .inner = optim__wrapper_inner,
    .tfa_name = "MovingAverage",
};

/* ---- average weights (public) ---------------------------------------------------------------------------------- */

static int is_averaged(const optim_optimizer *opt)
{
    const optim_class *c = optim_class_of(opt);
    return c->step == ma_apply || c->step == optim_swa_class.step;
}

/* A successful call leaves no message. */
static int ok(optim_optimizer *opt) { return optim_set_error(opt, OPTIM_OK, "%s", ""); }

int optim_assign_average_vars(optim_optimizer *opt, optim_var *const *vars, size_t n,
                              size_t *assigned)
{
    if (assigned) *assigned = 0;
    if (!opt) return OPTIM_EINVAL;
    ok(opt);
    const char *cn = optim_class_of(opt)->name;
    if (!is_averaged(opt))
        return optim_set_error(opt, OPTIM_EINVAL,
                               "optim_assign_average_vars: %s is not MovingAverage or SWA (TF "
                               "Addons' averaged optimizers)",
                               cn);
    if (n && !vars)
        return optim_set_error(opt, OPTIM_EINVAL, "%s: assign_average_vars: vars is NULL", cn);
    for (size_t i = 0; i < n; i++) {
        if (!vars[i])
            return optim_set_error(opt, OPTIM_EINVAL, "%s: assign_average_vars: vars[%zu] is NULL",
                                   cn, i);
        if (!optim__tfa_same_as_tracked(opt, vars[i], SLOT))
            return optim_set_error(opt, OPTIM_ESTATE,
                                   "%s: assign_average_vars: variable '%s' is not the one this "
                                   "optimizer made an average for",
                                   cn, optim_var_name(vars[i]));
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        optim_var *avg = optim__tfa_slot(opt, vars[i], SLOT);
        if (!avg) continue; /* TF Addons warns and skips it */
        memcpy(optim_var_data(vars[i]), optim_var_cdata(avg),
               (size_t)optim_var_numel(avg) * optim_dtype_size(optim_var_dtype(avg)));
        count++;
    }
    if (assigned) *assigned = count;
    return OPTIM_OK;
}

#define SWAP_LOOP(T, a, b, n)                     \
    do {                                          \
        T *restrict x_ = (a), *restrict y_ = (b); \
        for (int64_t i_ = 0; i_ < (n); i_++) {    \
            T t_ = x_[i_];                        \
            x_[i_] = y_[i_];                      \
            y_[i_] = t_;                          \
        }                                         \
    } while (0)

int optim_swap_average_weights(optim_optimizer *opt)
{
    if (!opt) return OPTIM_EINVAL;
    ok(opt);
    const char *cn = optim_class_of(opt)->name;
    if (optim_class_of(opt)->step != ma_apply)
        return optim_set_error(opt, OPTIM_EINVAL,
                               "optim_swap_average_weights: %s is not MovingAverage (TF Addons' "
                               "swap_weights is MovingAverage's)",
                               cn);
    const ma_state *st = optim_state(opt);
    if (!st->nmodel)
        return optim_set_error(opt, OPTIM_ESTATE,
                               "%s: swap_weights before any step: it swaps the variables of the "
                               "latest apply_gradients call with their averages",
                               cn);
    for (size_t i = 0; i < st->nmodel; i++)
        if (!optim__tfa_same_as_tracked(opt, st->model[i], SLOT) ||
            !optim__tfa_slot(opt, st->model[i], SLOT))
            return optim_set_error(opt, OPTIM_ESTATE,
                                   "%s: swap_weights: variable '%s' is not the one this optimizer "
                                   "made an average for",
                                   cn, optim_var_name(st->model[i]));
    for (size_t i = 0; i < st->nmodel; i++) {
        optim_var *v = st->model[i], *a = optim__tfa_slot(opt, v, SLOT);
        int64_t n = optim_var_numel(v);
        if (optim_var_dtype(v) == OPTIM_F32)
            SWAP_LOOP(float, optim_var_data(v), optim_var_data(a), n);
        else SWAP_LOOP(double, optim_var_data(v), optim_var_data(a), n);
    }
    return OPTIM_OK;
}
