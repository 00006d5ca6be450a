/* Keras 3's base options use_ema, ema_momentum, ema_overwrite_frequency,
 * loss_scale_factor and gradient_accumulation_steps (internal).
 *
 * keras3_options.c holds their rules (keras/src/optimizers/base_optimizer.py:
 * BaseOptimizer.__init__'s checks, apply, _backend_apply_gradients,
 * _update_model_variables_moving_average,
 * _overwrite_model_variables_with_average_value,
 * _backend_increment_gradient_accumulators,
 * _backend_reset_gradient_accumulators, finalize_variable_values and
 * scale_loss); apply.c calls them at the points of its pipeline, slots.c
 * creates the two base slots. */
#ifndef OPTIM_OPTIMIZER_KERAS3_OPTIONS_H
#define OPTIM_OPTIMIZER_KERAS3_OPTIONS_H

#include "optimizer/impl.h"

/* The base slots (Keras 3's BaseOptimizer.build: "average" when use_ema,
 * then "gradient_accumulator" when gradient_accumulation_steps), created
 * after the class's own slots of each variable. In the Keras 3 generation a
 * class that runs the base pipeline may not use these names itself. */
#define OPTIM__SLOT_AVERAGE "average"
#define OPTIM__SLOT_ACCUMULATOR "gradient_accumulator"

/* The options as one call of apply_gradients sees them (from the resolved
 * values, before the counter's increment). */
typedef struct optim__k3 {
    double lsf; /* loss_scale_factor; 0 for None */
    int64_t acc_steps; /* gradient_accumulation_steps; 0 for None */
    int update; /* 0 when this call only accumulates */
    int ema; /* use_ema */
    double ema_momentum; /* this call's EMA momentum (0 while iterations == 0) */
    int overwrite; /* the variables take their averages after this call's EMA */
    int64_t iterations; /* Keras's `iterations`: the counter // acc_steps */
} optim__k3;

/* Reads the options for the coming call (opt->values resolved). */
void optim__k3_begin(const optim_optimizer *opt, optim__k3 *k);

/* Whether variables tracked from now on get the base slots "average" and
 * "gradient_accumulator" (their entries then hold them by handle). */
int optim__k3_wants_average(const optim_optimizer *opt);
int optim__k3_wants_accumulator(const optim_optimizer *opt);
/* Whether a variable tracked now starts its average as a copy of itself
 * (tracked after Keras's first step) rather than as zeros. */
int optim__k3_average_copies(const optim_optimizer *opt);
/* Whether a class may name a slot `name` (the base names are reserved in
 * the Keras 3 generation for classes that run the base pipeline). */
int optim__k3_slot_name_reserved(const optim_optimizer *opt, const char *name);

/* Keras 3's BaseOptimizer.scale_loss: loss * loss_scale_factor, or loss
 * when it is None (or opt is NULL, legacy or a wrapper). */
double optim__k3_scale_loss(const optim_optimizer *opt, double loss);

/* The options' rules (BaseOptimizer.__init__), for optim__validate. */
int optim__k3_validate(optim_optimizer *opt, optim_error *err);

/* One gradient as the pipeline holds it, for the accumulation passes. */
typedef struct optim__k3_grad {
    optim_var *var;
    const optim__var_entry *entry; /* NULL while the variable has no slots yet */
    optim_dtype dtype;
    int64_t numel;
    const void *dense; /* the dense gradient, or NULL for rows */
    const int64_t *idx; /* rows: unique ascending indices ... */
    const void *vals; /* ... with their duplicates summed */
    int64_t n, row_size;
    void *out; /* optim__k3_mean's result: numel elements */
} optim__k3_grad;

/* dst = src / lsf over n elements, in dtype (sparse rows as given). */
void optim__k3_unscale(optim_dtype dt, const void *src, void *dst, int64_t n, double lsf);

/* An accumulating call: accumulator = g / lsf + accumulator for each
 * gradient (dense gradients unscaled here, rows already unscaled). */
void optim__k3_accumulate(const optim__k3 *k, const optim__k3_grad *g, size_t n, int nthreads);

/* An updating call with accumulation: out = (g / lsf + accumulator) / steps,
 * dense (rows are scattered into zeros first; a variable without slots yet
 * has a zero accumulator). Writes only the out buffers. */
void optim__k3_mean(const optim__k3 *k, const optim__k3_grad *g, size_t n, int nthreads);

/* After the update (or the accumulation), over every tracked variable:
 * reset the accumulators (updating calls), update the moving averages, and
 * overwrite the variables with them when due. Cannot fail. */
void optim__k3_after_update(optim_optimizer *opt, const optim__k3 *k, int nthreads);

#endif
