/* ExponentialDecay: keras.optimizers.schedules.ExponentialDecay.
 *
 * Keras 3 (keras/src/optimizers/schedules/learning_rate_schedule.py,
 * ExponentialDecay.__call__) and tf.keras alike:
 *
 *     p  = step / decay_steps            (floor(p) when staircase)
 *     lr = initial_learning_rate * decay_rate ^ p
 *
 * Config keys, in get_config order: initial_learning_rate, decay_steps,
 * decay_rate (all three required), staircase (false), name.
 * decay_steps must be > 0, as Keras 3's constructor checks; Keras documents
 * it as an integer and casts it to the float dtype, so a fraction works and
 * an integral value is written back as an integer.
 *
 * Precision: double throughout (Keras computes in the dtype of
 * initial_learning_rate, float32 for a Python float). */
#include "optim/schedules.h"

#include <math.h>
#include <stdio.h>

enum { P_INITIAL_LEARNING_RATE, P_DECAY_STEPS, P_DECAY_RATE, P_STAIRCASE, N_PARAMS };

static const optim_param params[N_PARAMS] = {
    {"initial_learning_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, -INFINITY, INFINITY},
    {"decay_steps", OPTIM_PARAM_FLOAT,
     OPTIM_PARAM_REQUIRED | OPTIM_PARAM_COUNT | OPTIM_PARAM_MIN_EXCLUSIVE, NAN, 0.0, INFINITY},
    {"decay_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, -INFINITY, INFINITY},
    {"staircase", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

static double value(const optim_schedule *s, int64_t step)
{
    const double lr0 = optim_schedule_param(s, P_INITIAL_LEARNING_RATE);
    const double decay_steps = optim_schedule_param(s, P_DECAY_STEPS);
    const double rate = optim_schedule_param(s, P_DECAY_RATE);
    double p = (double)step / decay_steps;
    if (optim_schedule_param(s, P_STAIRCASE) != 0) p = floor(p);
    return lr0 * pow(rate, p);
}


const optim_schedule_class optim_exponential_decay_class = {
    .size = sizeof(optim_schedule_class),
    .version = OPTIM_SCHEDULE_CLASS_VERSION,
    .name = "ExponentialDecay",
    .params = params,
    .n_params = N_PARAMS,
    .value = value,
};
