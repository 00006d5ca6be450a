/* CosineDecayRestarts: keras.optimizers.schedules.CosineDecayRestarts (SGDR).
 *
 * Loshchilov & Hutter, "SGDR: Stochastic Gradient Descent with Warm
 * Restarts" (ICLR 2017). Keras 3
 * (keras/src/optimizers/schedules/learning_rate_schedule.py,
 * CosineDecayRestarts.__call__) and tf.keras alike: period i (from 0) lasts
 * first_decay_steps * t_mul^i steps and starts from m_mul^i times the
 * initial rate. With f = step / first_decay_steps:
 *
 *     t_mul == 1:  i = floor(f);  f = f - i
 *     otherwise:   i = floor(log(1 - f * (1 - t_mul)) / log(t_mul))
 *                  f = (f - (1 - t_mul^i) / (1 - t_mul)) / t_mul^i
 *     lr = initial_learning_rate
 *          * ((1 - alpha) * 0.5 * m_mul^i * (1 + cos(pi * f)) + alpha)
 *
 * Rounding in log() can put i one period off exactly at a restart (f then
 * comes out as 1 or just below 0); i is moved by one whenever f leaves
 * [0, 1), so a restart step starts its new period as the formula means.
 *
 * Config keys, in get_config order: initial_learning_rate,
 * first_decay_steps (both required), t_mul (2.0), m_mul (1.0), alpha (0.0),
 * name. first_decay_steps must be > 0, as Keras 3's constructor checks; it
 * may be a fraction and an integral value is written back as an integer.
 * t_mul must be > 0 (Keras does not check; log(t_mul) is undefined
 * otherwise). With t_mul < 1 the periods sum to first_decay_steps /
 * (1 - t_mul) steps; past that the value is NaN (as in Keras), which the
 * optimizer refuses at that step.
 *
 * Precision: double throughout (Keras computes in the dtype of
 * initial_learning_rate, float32 for a Python float). */
#include "optim/schedules.h"

#include <math.h>
#include <stdio.h>

static const double PI = 3.14159265358979323846; /* math.pi */

enum { P_INITIAL_LEARNING_RATE, P_FIRST_DECAY_STEPS, P_T_MUL, P_M_MUL, P_ALPHA, N_PARAMS };

static const optim_param params[N_PARAMS] = {
    {"initial_learning_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, -INFINITY, INFINITY},
    {"first_decay_steps", OPTIM_PARAM_FLOAT,
     OPTIM_PARAM_REQUIRED | OPTIM_PARAM_COUNT | OPTIM_PARAM_MIN_EXCLUSIVE, NAN, 0.0, INFINITY},
    {"t_mul", OPTIM_PARAM_FLOAT, OPTIM_PARAM_MIN_EXCLUSIVE, 2.0, 0.0, INFINITY},
    {"m_mul", OPTIM_PARAM_FLOAT, 0, 1.0, -INFINITY, INFINITY},
    {"alpha", OPTIM_PARAM_FLOAT, 0, 0.0, -INFINITY, INFINITY},
};

/* The fraction of period i completed at f (in units of first_decay_steps). */
static double fraction_in(double f, double t_mul, double i)
{
    const double ti = pow(t_mul, i);
    return (f - (1.0 - ti) / (1.0 - t_mul)) / ti;
}

static double value(const optim_schedule *s, int64_t step)
{
    const double lr0 = optim_schedule_param(s, P_INITIAL_LEARNING_RATE);
    const double first = optim_schedule_param(s, P_FIRST_DECAY_STEPS);
    const double t_mul = optim_schedule_param(s, P_T_MUL);
    const double m_mul = optim_schedule_param(s, P_M_MUL);
    const double alpha = optim_schedule_param(s, P_ALPHA);
    double f = (double)step / first, i;
    if (t_mul == 1.0) {
        i = floor(f);
        f = f - i;
    } else {
        const double total = f;
        i = floor(log(1.0 - total * (1.0 - t_mul)) / log(t_mul));
        f = fraction_in(total, t_mul, i);
        if (isfinite(i)) {
            for (int k = 0; k < 2 && f >= 1.0; k++) f = fraction_in(total, t_mul, ++i);
            for (int k = 0; k < 2 && f < 0.0; k++) f = fraction_in(total, t_mul, --i);
        }
    }
    const double m_fac = pow(m_mul, i);
    const double cosine = 0.5 * m_fac * (1.0 + cos(PI * f));
    return lr0 * ((1.0 - alpha) * cosine + alpha);
}


const optim_schedule_class optim_cosine_decay_restarts_class = {
    .size = sizeof(optim_schedule_class),
    .version = OPTIM_SCHEDULE_CLASS_VERSION,
    .name = "CosineDecayRestarts",
    .params = params,
    .n_params = N_PARAMS,
    .value = value,
};
