/*
 * optim/optimizer.h - using an optimizer: create, step, inspect, save.
 *
 * This is tf.keras.optimizers' Optimizer in C. An optimizer is an instance of
 * a class (SGD, Adam, or one you write, see optim/optimizer_class.h). Create
 * it from a class, a Keras class name, or a Keras JSON config; hand it
 * (gradient, variable) pairs with optim_apply_gradients(); it keeps its slots
 * (momentum, m, v, ...) and its `iterations` counter.
 *
 *     optim_optimizer *opt;
 *     optim_error err;
 *     if (optim_from_json(&opt, "{\"class_name\": \"SGD\", \"config\": "
 *                         "{\"learning_rate\": 0.1, \"momentum\": 0.9}}", &err))
 *         die(err.msg);
 *     optim_grad_var pairs[2] = {
 *         {optim_grad_dense(grad_w), w},
 *         {optim_grad_sparse(ids, n, rows), embedding},
 *     };
 *     if (optim_apply_gradients(opt, pairs, 2, 0))
 *         die(optim_errmsg(opt));
 *     optim_destroy(opt);
 *
 * Generations. Keras has two optimizer generations with different update rules
 * in places: Keras 3 (the default here) and tf.keras's legacy OptimizerV2
 * (`"is_legacy_optimizer": true` in a config, or OPTIM_LEGACY in the options).
 * Each built-in follows the formulas of the generation it was created with.
 *
 * Errors. Every call that can fail returns 0 or a negative OPTIM_E* code and
 * leaves a message in optim_errmsg(opt). A failed call changes nothing: no
 * variable, slot, hyperparameter or counter is touched.
 *
 * Threads. An optimizer is thread-compatible, not thread-safe (as in Keras):
 * calls on one optimizer must not overlap; distinct optimizers may be used
 * from distinct threads. Internally a step runs on all OpenMP threads, and
 * its results are bitwise identical whatever the number of threads.
 *
 * Lifetimes. Variables are borrowed: they must outlive the optimizer that
 * updates them. Slots are owned by the optimizer.
 */
#ifndef OPTIM_OPTIMIZER_H
#define OPTIM_OPTIMIZER_H

#include "optim/status.h"
#include "optim/tensor.h"
#include "optim/variable.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_optimizer optim_optimizer;
typedef struct optim_class optim_class;

/* ---- gradients -------------------------------------------------------- */

typedef enum optim_grad_kind {
    OPTIM_GRAD_NONE = 0, /* no gradient (Python's None): the pair is skipped */
    OPTIM_GRAD_DENSE = 1, /* `dense` has the variable's dtype and shape */
    OPTIM_GRAD_SPARSE = 2 /* `sparse` rows index the variable's first dim */
} optim_grad_kind;

typedef struct optim_grad {
    optim_grad_kind kind;
    optim_tensor dense;
    optim_slices sparse;
} optim_grad;

typedef struct optim_grad_var {
    optim_grad grad;
    optim_var *var;
} optim_grad_var;

OPTIM_API optim_grad optim_grad_none(void);
OPTIM_API optim_grad optim_grad_dense(optim_tensor t);
OPTIM_API optim_grad optim_grad_sparse(const int64_t *indices, int64_t n, optim_tensor values);

/* ---- creation ----------------------------------------------------------- */

typedef enum optim_generation {
    OPTIM_KERAS3 = 0, /* Keras 3 (keras.optimizers) */
    OPTIM_LEGACY = 1 /* tf.keras.optimizers.legacy (OptimizerV2) */
} optim_generation;

typedef struct optim_options {
    uint32_t size; /* sizeof(optim_options) */
    optim_generation generation;
    const char *name; /* the optimizer's name; NULL: the default Keras gives
                                    (legacy: "Adam"; Keras 3.15+: "adam", "adam_w") */
} optim_options;

OPTIM_API optim_options optim_options_defaults(void);

/* Creates an optimizer of class `cls` with the class's defaults. The class
 * table is copied; its strings and param array must stay valid (static).
 * opts may be NULL (defaults; a class that exists only in the legacy
 * generation, as TF Addons' SGDW, then gets that generation). */
OPTIM_API int optim_create(optim_optimizer **out, const optim_class *cls, const optim_options *opts,
                           optim_error *err);

/* Same, looking the class up by Keras name, case-insensitively ("sgd"). */
OPTIM_API int optim_create_by_name(optim_optimizer **out, const char *class_name,
                                   const optim_options *opts, optim_error *err);

/* Creates an optimizer from Keras JSON: {"class_name": "SGD", "config": {...}}
 * (tf.keras.optimizers.serialize's format), or a bare string "sgd" (the
 * defaults, as keras.optimizers.get). Keys are checked against the class and
 * generation: an unknown key, a value of the wrong type or out of range is an
 * error naming the key, the value and what was allowed. */
OPTIM_API int optim_from_json(optim_optimizer **out, const char *json, optim_error *err);

/* Which generation a config is, as Keras itself tells: "is_legacy_optimizer"
 * true or false decides. Without it (real tf.keras legacy files never write
 * it): a class that exists in one generation only; a TF Addons class name
 * ("Addons>LAMB") or a `module` naming a legacy package; else the keys:
 * legacy-only keys (decay, lr, a class's legacy-only keys) with no Keras
 * 3-only key (use_ema, ema_momentum, weight_decay outside AdamW, jit_compile,
 * ...) mean legacy, none mean Keras 3, both are refused with a message
 * listing each side's keys. optim_from_json_as forces gen instead (a config
 * whose is_legacy_optimizer says otherwise is refused). See
 * docs/keras-compatibility.md. */
OPTIM_API int optim_from_json_as(optim_optimizer **out, const char *json, optim_generation gen,
                                 optim_error *err);

/* Creates from a class name and a config object alone (Optimizer.from_config). */
OPTIM_API int optim_from_config(optim_optimizer **out, const char *class_name,
                                const char *config_json, optim_error *err);

/* Frees the optimizer and its slots (never the variables). NULL is a no-op. */
OPTIM_API void optim_destroy(optim_optimizer *opt);

/* Message of the last failed call ("" after a success). */
OPTIM_API const char *optim_errmsg(const optim_optimizer *opt);

OPTIM_API const char *optim_name(const optim_optimizer *opt);
OPTIM_API const optim_class *optim_class_of(const optim_optimizer *opt);
OPTIM_API optim_generation optim_generation_of(const optim_optimizer *opt);

/* ---- configuration (get_config / serialize) ------------------------------ */

/* The config object as JSON text, with exactly Keras's keys for the class and
 * generation. Returns a malloc'd string the caller frees with optim_free, or
 * NULL when out of memory or when the class's get_config hook fails
 * (optim_errmsg says which). */
OPTIM_API char *optim_get_config(optim_optimizer *opt);

/* {"class_name": ..., "config": ...} (tf.keras.optimizers.serialize). */
OPTIM_API char *optim_serialize(optim_optimizer *opt);

/* Frees strings returned by the library. */
OPTIM_API void optim_free(void *p);

/* ---- hyperparameters ---------------------------------------------------- */

/* Sets a hyperparameter or option by its Keras name ("learning_rate",
 * "momentum", "nesterov", "clipnorm", "decay", ...) to a number. Booleans are
 * 0/1. For options that may be None (clipnorm, clipvalue, global_clipnorm),
 * NAN means None. Takes effect at the next step (opt.learning_rate = 0.05). */
OPTIM_API int optim_set_hyper(optim_optimizer *opt, const char *name, double value);

/* Makes a hyperparameter follow a scalar variable (borrowed; read at each
 * step, like a tf.Variable hyperparameter). */
OPTIM_API int optim_set_hyper_var(optim_optimizer *opt, const char *name, optim_var *scalar);

/* Makes a hyperparameter a zero-argument callable, evaluated once per step. */
typedef double (*optim_hyper_fn)(void *user);
OPTIM_API int optim_set_hyper_fn(optim_optimizer *opt, const char *name, optim_hyper_fn fn,
                                 void *user);

/* Makes a hyperparameter a function of the step counter (a learning-rate
 * schedule), evaluated once per step at `iterations` before its increment. */
typedef double (*optim_schedule_fn)(void *user, int64_t step);
OPTIM_API int optim_set_hyper_schedule(optim_optimizer *opt, const char *name, optim_schedule_fn fn,
                                       void *user);

/* The value the hyperparameter has at the current step (NAN for None). */
OPTIM_API int optim_get_hyper(optim_optimizer *opt, const char *name, double *value);

/* 1 if the hyperparameter is a plain number or None, 0 if it is a variable,
 * callable or schedule (or unknown). */
OPTIM_API int optim_hyper_is_constant(const optim_optimizer *opt, const char *name);

/* Number of OpenMP threads a step uses; 0 (the default) means OpenMP's. */
OPTIM_API int optim_set_num_threads(optim_optimizer *opt, int n);

/* Keras 3's exclude_from_weight_decay: the `weight_decay` option (decoupled,
 * w = w - w * weight_decay * lr before each update) skips these variables
 * and every variable whose name matches one of the patterns (Python regular
 * expressions, searched anywhere in the name as re.search does;
 * optim_name_patterns). May be called again to add more; a bad pattern changes
 * nothing. */
OPTIM_API int optim_exclude_from_weight_decay(optim_optimizer *opt, optim_var *const *vars,
                                              size_t nvars, const char *const *name_patterns,
                                              size_t npatterns);

/* ---- gradient processing ------------------------------------------------ */

/* A function over the step's gradients. It gets copies the optimizer owns and
 * may change them in place, or point a pair's gradient at memory of its own
 * that stays valid until optim_apply_gradients returns. Returning non-zero
 * aborts the step (nothing is updated); it may fill err. */
typedef int (*optim_grad_fn)(void *user, optim_grad_var *pairs, size_t n, optim_error *err);

/* Appends a gradient transformer (Keras's gradient_transformers), run after
 * clipvalue, clipnorm and global_clipnorm, in the order added. */
OPTIM_API int optim_add_gradient_transformer(optim_optimizer *opt, optim_grad_fn fn, void *user);

/* Sets the gradient aggregator (Keras's gradient_aggregator; by default the
 * identity, for a single replica). It runs first, unless apply_gradients is
 * called with OPTIM_APPLY_NO_AGGREGATE. */
OPTIM_API int optim_set_gradient_aggregator(optim_optimizer *opt, optim_grad_fn fn, void *user);

/* ---- stepping ----------------------------------------------------------- */

#define OPTIM_APPLY_NO_AGGREGATE 1u /* experimental_aggregate_gradients=False */

/* One optimizer step over n (gradient, variable) pairs, in the order of
 * docs/custom-optimizer.md: validate all, skip absent gradients, aggregate,
 * clip and transform, create missing slots, prepare, update, constrain,
 * iterations += 1. A variable may appear once per call. If no pair has a
 * gradient, the call fails with OPTIM_EINVAL (Keras: "No gradients provided
 * for any variable") and nothing changes. */
OPTIM_API int optim_apply_gradients(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                                    uint32_t flags);

/* Creates slots for these variables now and fixes the optimizer's variable
 * set, like Keras 3's optimizer.build(var_list): afterwards, a gradient for
 * any other variable is an error. */
OPTIM_API int optim_build(optim_optimizer *opt, optim_var *const *vars, size_t n);

/* The step counter. Inside the prepare and update hooks of a step: the
 * count the update rule sees (Keras 3 with gradient_accumulation_steps S:
 * counter // S, Keras's `iterations`). */
OPTIM_API int64_t optim_iterations(const optim_optimizer *opt);

/* The largest step count (2^62): set_iterations and set_weights refuse more,
 * and apply_gradients refuses a step once iterations reaches it, so that no
 * counter (nor t + 1 in an update rule) can overflow. */
#define OPTIM_ITERATIONS_MAX ((int64_t)1 << 62)

/* Sets the step counter, 0..OPTIM_ITERATIONS_MAX (a wrapper's inner optimizer
 * follows); else OPTIM_ERANGE and nothing changes. */
OPTIM_API int optim_set_iterations(optim_optimizer *opt, int64_t iterations);

/* ---- slots and weights ---------------------------------------------------- */

/* The slot `slot_name` of `var`, or NULL if none was created. */
OPTIM_API optim_var *optim_get_slot(const optim_optimizer *opt, const optim_var *var,
                                    const char *slot_name);

/* Names of the slots the optimizer created, in creation order, each once.
 * Writes up to cap names and returns the total count. */
OPTIM_API size_t optim_get_slot_names(const optim_optimizer *opt, const char **names, size_t cap);

/* Number of weights: 1 (iterations) + the number of slot variables. */
OPTIM_API size_t optim_weights_count(const optim_optimizer *opt);

/* Views of the weights in Keras's order: iterations (int64 scalar), then the
 * slots in creation order. Writes up to cap views and returns the count. The
 * views point into the optimizer and stay valid until its next change. */
OPTIM_API size_t optim_get_weights(optim_optimizer *opt, optim_tensor *out, size_t cap);

/* Sets all weights, in optim_get_weights's order. The count, each dtype
 * (int32/int64 or float for iterations) and each shape must match; else
 * nothing changes. */
OPTIM_API int optim_set_weights(optim_optimizer *opt, const optim_tensor *weights, size_t n);

/* Name of weight i ("iterations" or "VAR/SLOT"), NULL past the end. */
OPTIM_API const char *optim_weight_name(const optim_optimizer *opt, size_t i);

/* The bytes one step's update moves per element of var, in var's storage
 * dtype, into *bytes: the class's bytes_per_param hook
 * (optim/optimizer_class.h), or without one the element-wise count, one
 * read of the gradient and a read and a write of var and of each
 * full-size slot the class made for it (float32 Adam 28, SGD 12). Keras 3's
 * use_ema and gradient accumulation move more, not counted. OPTIM_ENOTFOUND
 * when var has no slots in opt yet (before its first step or optim_build),
 * OPTIM_ENOTSUP for a wrapper without the hook (ask its inner optimizer),
 * OPTIM_ERANGE when the hook answers a number not finite and >= 0. */
OPTIM_API int optim_bytes_per_param(optim_optimizer *opt, const optim_var *var, double *bytes);

/* ---- Keras 3's moving average, loss scaling and gradient accumulation ----- */

/* These are config keys of every Keras 3 optimizer that runs the base
 * pipeline (keras.optimizers.Optimizer's arguments; absent from the legacy
 * generation), set in JSON or with optim_set_hyper:
 *
 *   use_ema (false), ema_momentum (0.99), ema_overwrite_frequency (None):
 *     after each call, for every variable the optimizer tracks,
 *     average = m * average + (1 - m) * w, with m = 0 on the first step;
 *     every ema_overwrite_frequency steps the variables take their averages.
 *   loss_scale_factor (None): gradients are divided by it first (compute
 *     them from the loss multiplied by it: Keras's scale_loss).
 *   gradient_accumulation_steps (None, or >= 2): calls only add their
 *     gradients to an accumulator, and every gradient_accumulation_steps-th
 *     call updates with the mean (clipping and weight decay then too).
 *     `iterations` (the weight) counts calls; the update rule sees
 *     iterations // gradient_accumulation_steps as optim_iterations(), as
 *     Keras's `iterations` property, and schedules see the calls.
 *
 * Each variable gets the slots "average" (use_ema) and then
 * "gradient_accumulator", after the class's own: optim_get_slot, weights
 * "VAR/average" and "VAR/gradient_accumulator". Since they exist once a
 * variable is tracked, use_ema and gradient_accumulation_steps (None vs a
 * number) cannot change after that (OPTIM_ESTATE). docs/optimizers.md has
 * the exact order of operations. */

/* Keras 3's finalize_variable_values: with use_ema, sets every variable the
 * optimizer tracks to its moving average (what fit() does after the last
 * epoch); otherwise does nothing. A wrapper passes the call to its inner
 * optimizer. Returns 0, or OPTIM_EINVAL when opt is NULL. */
OPTIM_API int optim_finalize_variable_values(optim_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
