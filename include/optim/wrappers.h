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

/* Creates the wrapper described by wrapper_json ({"class_name": ...,
 * "config": {...}} without the inner key) around `inner`. On success the
 * wrapper owns inner; on error the caller still does. */
int optim_wrap(optim_optimizer **out, const char *wrapper_json, optim_optimizer *inner,
               optim_error *err);

/* The wrapped optimizer, or NULL if opt is not a wrapper. */
optim_optimizer *optim_wrapper_inner(const optim_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
