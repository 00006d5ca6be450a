/* PolynomialDecay: keras.optimizers.schedules.PolynomialDecay.
 *
 * Keras 3 (keras/src/optimizers/schedules/learning_rate_schedule.py,
 * PolynomialDecay.__call__) and tf.keras alike, with t the step:
 *
 *     cycle false:  t = min(t, decay_steps);  D = decay_steps
 *     cycle true:   D = decay_steps * (t == 0 ? 1 : ceil(t / decay_steps))
 *     p  = t / D
 *     lr = (initial_learning_rate - end_learning_rate) * (1 - p) ^ power
 *          + end_learning_rate
 *
 * With cycle, D is the first multiple of decay_steps that is >= t: the value
 * reaches end_learning_rate at every multiple of decay_steps and, one step
 * later, jumps back up along a longer decay (not to initial_learning_rate).
 *
 * Config keys, in get_config order: initial_learning_rate, decay_steps
 * (both required), end_learning_rate (0.0001), power (1.0), cycle (false),
 * name. decay_steps must be > 0, as Keras 3's constructor checks; a fraction
 * works and an integral value is written back as an integer.
 *
 * Precision: double throughout (Keras computes in the dtype of
 * initial_learning_rate, float32 for a Python float). */
#include "optim/schedules.h"

#include <math.h>
#include <stdio.h>

enum { P_INITIAL_LEARNING_RATE, P_DECAY_STEPS, P_END_LEARNING_RATE, P_POWER, P_CYCLE, N_PARAMS };

static const optim_param params[N_PARAMS] = {
    {"initial_learning_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, -INFINITY, INFINITY},
    {"decay_steps", OPTIM_PARAM_FLOAT,
     OPTIM_PARAM_REQUIRED | OPTIM_PARAM_COUNT | OPTIM_PARAM_MIN_EXCLUSIVE, NAN, 0.0, INFINITY},
    {"end_learning_rate", OPTIM_PARAM_FLOAT, 0, 0.0001, -INFINITY, INFINITY},
    {"power", OPTIM_PARAM_FLOAT, 0, 1.0, -INFINITY, INFINITY},
    {"cycle", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

static double value(const optim_schedule *s, int64_t step)
{
    const double lr0 = optim_schedule_param(s, P_INITIAL_LEARNING_RATE);
    const double decay_steps = optim_schedule_param(s, P_DECAY_STEPS);
    const double end = optim_schedule_param(s, P_END_LEARNING_RATE);
    const double power = optim_schedule_param(s, P_POWER);
    double t = (double)step, d = decay_steps;
    if (optim_schedule_param(s, P_CYCLE) != 0) {
        /* The first multiple of decay_steps not below t (1 at t == 0). */
        d = decay_steps * (t == 0 ? 1.0 : ceil(t / decay_steps));
    } else if (t > d) {
        t = d;
    }
    const double p = t / d;
    return (lr0 - end) * pow(1.0 - p, power) + end;
}


const optim_schedule_class optim_polynomial_decay_class = {
    .size = sizeof(optim_schedule_class),
    .version = OPTIM_SCHEDULE_CLASS_VERSION,
    .name = "PolynomialDecay",
    .params = params,
    .n_params = N_PARAMS,
    .value = value,
};
