/*
 * optim/wrappers.h - optimizers that wrap another: moving averages (EMA),
 * SWA, Lookahead, loss scaling, apply-if-finite.
 *
 * A wrapper is an optimizer class that overrides apply_gradients and
 * delegates to an inner optimizer it owns. From JSON, the inner optimizer is
 * nested under the wrapper's key ("inner_optimizer" for Keras's
 * LossScaleOptimizer, "optimizer" for TF Addons' MovingAverage, SWA and
 * Lookahead). From C, wrap an optimizer you created:
 *
 *     optim_optimizer *adam, *la;
 *     optim_from_json(&adam, "\"adam\"", &err);
 *     if (optim_wrap(&la, "{\"class_name\": \"Lookahead\", \"config\": "
 *                         "{\"sync_period\": 6}}", adam, &err))
 *         die(err.msg);               // adam is still yours here
 *     ...                             // la owns adam from now on
 *     optim_destroy(la);
 *
 * The wrapper's get_weights lists iterations, the inner optimizer's slots,
 * then its own; optim_get_slot finds both.
 */
#ifndef OPTIM_WRAPPERS_H
#define OPTIM_WRAPPERS_H

#include "optim/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A wrapper class of your own (optim/step.h, docs/wrappers.md): its class
 * state (state_size >= sizeof(optim_wrapper_state)) starts with this, where
 * optim_wrap installs the inner optimizer; the class's `inner` hook returns
 * `inner`, and its `destroy` hook destroys it when owns_inner is set (0
 * while optim_wrap has not succeeded, so that a refused wrapper leaves the
 * caller's optimizer alone). A wrapper that takes its inner optimizer from
 * JSON creates it in set_config with optim_from_json and sets owns_inner. */
typedef struct optim_wrapper_state {
    optim_optimizer *inner;
    int owns_inner;
} optim_wrapper_state;

/* Creates the wrapper described by wrapper_json ({"class_name": ...,
 * "config": {...}} without the inner key) around `inner`. On success the
 * wrapper owns inner; on error the caller still does. */
OPTIM_API int optim_wrap(optim_optimizer **out, const char *wrapper_json, optim_optimizer *inner,
                         optim_error *err);

/* The wrapped optimizer, or NULL if opt is not a wrapper. */
OPTIM_API optim_optimizer *optim_wrapper_inner(const optim_optimizer *opt);

/* The i-th wrapped optimizer (0 is optim_wrapper_inner's), NULL past the
 * last or if opt is not a wrapper. A MultiOptimizer's are its
 * sub-optimizers: the OptimizerMap's entries in order, then the default
 * (Keras's `.optimizers`); TF Addons' (legacy) MultiOptimizer's are its
 * optimizer_specs' optimizers, in order. */
OPTIM_API optim_optimizer *optim_wrapper_inner_at(const optim_optimizer *opt, size_t i);

/* ---- MultiOptimizer (Keras 3.15) ---------------------------------------------
 *
 * {"class_name": "MultiOptimizer", "config": {"optimizer_map": {"module":
 * "keras.optimizers", "class_name": "OptimizerMap", "config":
 * {"default_optimizer": {...}, "optimizer_map": {"^encoder/.*": {...}}},
 * "registered_name": null}, "loss_scale_factor": null}}: each variable is
 * stepped by the sub-optimizer whose pattern matches its whole name (or
 * equals it), else by the default. docs/wrappers.md has the rules.
 *
 * By list instead: gives these variables to sub-optimizer k (an index of
 * optim_wrapper_inner_at) before their first step, overriding the patterns
 * (the C form of Keras's callable selector; not part of the config).
 * OPTIM_ESTATE if a variable already has its slots in another one.
 *
 * The class's legacy generation is TF Addons' MultiOptimizer:
 * {"class_name": "Addons>MultiOptimizer", "config": {"optimizer_specs":
 * [{"optimizer": {...}, "weights": ["dense/kernel:0", ...]}, ...]}}, each
 * spec's optimizer stepping the variables its weights name (":0" optional;
 * a variable no spec names is skipped, one several name is stepped by each
 * in turn). There this function adds the variables' names to spec k's
 * weights, which the config then writes, as TF Addons'
 * create_optimizer_spec does for a layer. docs/wrappers.md has the rules. */
OPTIM_API int optim_multi_optimizer_assign(optim_optimizer *opt, optim_var *const *vars, size_t n,
                                           size_t k);

/* ---- LossScaleOptimizer (Keras's mixed-precision loss scaling) -----------
 *
 * {"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": {...},
 * "initial_scale": 32768.0, "dynamic_growth_steps": 2000}}. Keras 3 (the
 * default): scale the loss, pass the SCALED gradients to
 * optim_apply_gradients, which divides them by the scale (on copies), skips
 * the step and halves the scale if any is Inf/NaN, and doubles the scale
 * after dynamic_growth_steps finite steps. Legacy ("is_legacy_optimizer":
 * true, tf.keras's LossScaleOptimizer): unscale the gradients yourself with
 * optim_unscale_gradients before optim_apply_gradients, as with tf.keras's
 * get_unscaled_gradients; "dynamic": false gives a fixed scale.
 *
 *     double scaled;
 *     optim_scale_loss(lso, loss, &scaled);   // differentiate `scaled`
 *     ... gradients of the scaled loss into pairs ...
 *     if (optim_apply_gradients(lso, pairs, n, 0)) die(optim_errmsg(lso));
 *
 * The functions below fail with OPTIM_EINVAL if opt is not a
 * LossScaleOptimizer. docs/wrappers.md has the rules of both generations. */

/* The current loss scale (a float32 value). Before the first step: Keras 3
 * gives initial_scale as configured, legacy its float32 rounding. */
OPTIM_API int optim_loss_scale_get(optim_optimizer *opt, double *scale);

/* Finite steps since the scale last changed (Keras 3's step_counter,
 * tf.keras's dynamic_counter / good_steps). OPTIM_ENOTSUP for a fixed
 * (legacy, dynamic false) scale. */
OPTIM_API int optim_loss_scale_counter(optim_optimizer *opt, int64_t *counter);

/* *scaled = loss * the current loss scale (Keras's scale_loss /
 * get_scaled_loss), in double precision. For an optimizer that is not a
 * LossScaleOptimizer: Keras 3's Optimizer.scale_loss, loss times its
 * loss_scale_factor (the loss itself when that is None). */
OPTIM_API int optim_scale_loss(optim_optimizer *opt, double loss, double *scaled);

/* Unscales the gradients IN PLACE, in each gradient's dtype (the memory the
 * pairs point at must be writable and is the caller's): legacy multiplies
 * by the float32 reciprocal of the scale (get_unscaled_gradients), Keras 3
 * divides by the scale. Pairs without a gradient are left alone. Only for
 * the legacy workflow: a Keras 3 LossScaleOptimizer unscales in
 * optim_apply_gradients and must get the scaled gradients. The pairs are
 * checked as optim_apply_gradients checks them; on error nothing changes. */
OPTIM_API int optim_unscale_gradients(optim_optimizer *opt, optim_grad_var *pairs, size_t n);

/* ---- ApplyIfFinite (optim's own) ------------------------------------------
 *
 * {"class_name": "ApplyIfFinite", "config": {"inner_optimizer": {...}}}:
 * steps the inner optimizer only when every gradient is finite; a step with
 * an Inf or NaN changes nothing but the count of skipped steps (iterations
 * do not advance). */

/* Steps skipped so far (its "skipped_steps" weight), or -1 if opt is not an
 * ApplyIfFinite. */
OPTIM_API int64_t optim_skipped_steps(const optim_optimizer *opt);

/* ---- TF Addons' MovingAverage, SWA and Lookahead -----------------------------
 *
 * {"class_name": "MovingAverage", "config": {"optimizer": {...},
 * "average_decay": 0.99, "num_updates": null, "start_step": 0,
 * "dynamic_decay": false}}, {"class_name": "SWA", "config": {"optimizer":
 * {...}, "average_period": 10, "start_averaging": 0}}, {"class_name":
 * "Lookahead", "config": {"optimizer": {...}, "sync_period": 6,
 * "slow_step_size": 0.5}} ("Addons>MovingAverage" etc. are accepted too).
 * As in TF Addons, the inner optimizer steps with the WRAPPER's clipnorm,
 * clipvalue, global_clipnorm, gradient transformers and aggregator (the
 * inner's own are not used), the wrapper's rule then runs on each variable
 * with a gradient (before its constraint), and both share one `iterations`.
 * Slots: "average" (MovingAverage: a copy of the variable when first seen;
 * SWA: zeros), "slow" (Lookahead: a copy). The rules are in docs/wrappers.md.
 *
 *     optim_optimizer *ma;
 *     optim_from_json(&ma, "{\"class_name\": \"MovingAverage\", \"config\": "
 *                          "{\"optimizer\": \"sgd\", \"average_decay\": 0.999}}", &err);
 *     ...train with optim_apply_gradients(ma, ...)...
 *     optim_swap_average_weights(ma);   // evaluate with the averages
 *     ...
 *     optim_swap_average_weights(ma);   // back to the trained weights
 */

/* MovingAverage and SWA (assign_average_vars): copies each variable's
 * "average" slot into the variable. Variables the wrapper has no average
 * for are skipped, as TF Addons skips them (with a warning there); *assigned
 * (may be NULL) gets how many were copied. Returns 0, or OPTIM_EINVAL (opt
 * is another class, vars or an entry is NULL) or OPTIM_ESTATE (a variable is
 * not the one the average was made for), and then nothing changes. */
OPTIM_API int optim_assign_average_vars(optim_optimizer *opt, optim_var *const *vars, size_t n,
                                        size_t *assigned);

/* MovingAverage (swap_weights): exchanges the values of the variables of the
 * latest optim_apply_gradients call (those that had a gradient, TF Addons'
 * _model_weights) with their "average" slots, exactly: calling it twice
 * restores both. OPTIM_ESTATE before any step; OPTIM_EINVAL for another
 * class. */
OPTIM_API int optim_swap_average_weights(optim_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
