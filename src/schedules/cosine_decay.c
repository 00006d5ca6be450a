/* CosineDecay: keras.optimizers.schedules.CosineDecay, with optional linear
 * warmup.
 *
 * Loshchilov & Hutter, "SGDR: Stochastic Gradient Descent with Warm
 * Restarts" (ICLR 2017), for the cosine; Goyal et al., "Accurate, Large
 * Minibatch SGD" (2017), for the warmup. Keras 3
 * (keras/src/optimizers/schedules/learning_rate_schedule.py,
 * CosineDecay.__call__, _decay_function, _warmup_function) and tf.keras
 * alike, with t the step:
 *
 *     decay(t, from) = from * ((1 - alpha) * 0.5 * (1 + cos(pi * t / decay_steps)) + alpha)
 *
 *     warmup_target null:  lr = decay(min(t, decay_steps), initial_learning_rate)
 *     otherwise:           t  = min(t, decay_steps + warmup_steps)
 *                          t < warmup_steps:
 *                              lr = (warmup_target - initial_learning_rate) * (t / warmup_steps)
 *                                   + initial_learning_rate
 *                          else:
 *                              lr = decay(t - warmup_steps, warmup_target)
 *
 * warmup_steps counts only when warmup_target is set, as in Keras.
 *
 * Config keys: initial_learning_rate, decay_steps (both required), alpha
 * (0.0), name, warmup_target (null), warmup_steps (0), in Keras's
 * get_config order (name between alpha and warmup_target).
 * decay_steps must be > 0, as Keras 3's constructor checks; warmup_steps
 * must be >= 0 (Keras does not check; a negative count has no meaning). Both
 * may be fractions (Keras casts them to the float dtype); integral values
 * are written back as integers.
 *
 * Precision: double throughout (Keras computes in the dtype of
 * initial_learning_rate, float32 for a Python float). */
#include "optim/schedules.h"

#include <math.h>
#include <stdio.h>

static const double PI = 3.14159265358979323846; /* math.pi */

enum { P_INITIAL_LEARNING_RATE, P_DECAY_STEPS, P_ALPHA, P_WARMUP_TARGET, P_WARMUP_STEPS, N_PARAMS };

static const optim_param params[N_PARAMS] = {
    {"initial_learning_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, -INFINITY, INFINITY},
    {"decay_steps", OPTIM_PARAM_FLOAT,
     OPTIM_PARAM_REQUIRED | OPTIM_PARAM_COUNT | OPTIM_PARAM_MIN_EXCLUSIVE, NAN, 0.0, INFINITY},
    {"alpha", OPTIM_PARAM_FLOAT, 0, 0.0, -INFINITY, INFINITY},
    {"warmup_target", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_AFTER_NAME, NAN,
     -INFINITY, INFINITY},
    {"warmup_steps", OPTIM_PARAM_FLOAT, OPTIM_PARAM_COUNT | OPTIM_PARAM_AFTER_NAME, 0.0, 0.0,
     INFINITY},
};

static double decay(double t, double decay_steps, double from, double alpha)
{
    const double cosine = 0.5 * (1.0 + cos(PI * (t / decay_steps)));
    return from * ((1.0 - alpha) * cosine + alpha);
}

static double value(const optim_schedule *s, int64_t step)
{
    const double lr0 = optim_schedule_param(s, P_INITIAL_LEARNING_RATE);
    const double decay_steps = optim_schedule_param(s, P_DECAY_STEPS);
    const double alpha = optim_schedule_param(s, P_ALPHA);
    const double target = optim_schedule_param(s, P_WARMUP_TARGET);
    double t = (double)step;
    if (isnan(target)) return decay(t < decay_steps ? t : decay_steps, decay_steps, lr0, alpha);
    const double warmup_steps = optim_schedule_param(s, P_WARMUP_STEPS);
    if (t > decay_steps + warmup_steps) t = decay_steps + warmup_steps;
    if (t < warmup_steps) return (target - lr0) * (t / warmup_steps) + lr0;
    return decay(t - warmup_steps, decay_steps, target, alpha);
}


const optim_schedule_class optim_cosine_decay_class = {
    .size = sizeof(optim_schedule_class),
    .version = OPTIM_SCHEDULE_CLASS_VERSION,
    .name = "CosineDecay",
    .params = params,
    .n_params = N_PARAMS,
    .value = value,
};
