/*
 * optim/step.h - the step with explicit overrides, for writing wrappers.
 *
 * A wrapper (an optimizer class that owns an inner optimizer, see
 * optim/wrappers.h) steps its inner optimizer with optim_step instead of
 * optim_apply_gradients when the inner step must differ from a plain one:
 * another optimizer's gradient options (TF Addons' wrappers clip with the
 * WRAPPER's clipnorm), the wrapper's own counter, constraints left to the
 * wrapper, a look at the aggregated gradients before they are used (skip
 * the step, or rescale them). The built-in wrappers (MovingAverage, SWA,
 * Lookahead, LossScaleOptimizer, ApplyIfFinite) use only this header,
 * optim/optimizer_class.h and optim/wrappers.h; examples/custom_wrapper.c
 * is a complete one, docs/wrappers.md the guide. MultiOptimizer
 * (several inner optimizers) uses the same calls, optim_rollback_variables
 * and optim_step_scratch among them.
 *
 *     static int my_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
 *                        const optim_step_options *o) {
 *         optim_optimizer *in = optim_wrapper_inner(opt);
 *         optim_step_options io = *o;                 // what the caller asked for
 *         io.flags |= OPTIM_STEP_NO_CONSTRAINTS;      // constrain after our own rule
 *         if (!io.clipping) io.clipping = opt;        // our clipnorm, not the inner's
 *         int rc = optim_step(in, pairs, n, &io);
 *         if (rc) return optim_set_error(opt, rc, "%s", optim_errmsg(in));
 *         ... the wrapper's rule, then constraints unless o->flags says not ...
 *         return optim_set_iterations(opt, optim_iterations(in));
 *     }
 *     static const optim_class my_wrapper = { ..., .step = my_step,
 *                                             .inner = my_inner, ... };
 *
 * Thread-compatible like the rest of optim: one call at a time per optimizer.
 */
#ifndef OPTIM_STEP_H
#define OPTIM_STEP_H

#include "optim/optimizer_class.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- optim_step_options.flags -------------------------------------------- */

/* No gradient aggregation (the same bit as OPTIM_APPLY_NO_AGGREGATE). */
#define OPTIM_STEP_NO_AGGREGATE 1u
/* Leave the variables' constraints to the caller (stage 8 without them). */
#define OPTIM_STEP_NO_CONSTRAINTS 2u
/* Do not advance the counter (stage 8 without iterations += 1). */
#define OPTIM_STEP_NO_ADVANCE 4u
/* Set the counter to options.iterations first (a wrapper and its inner
 * optimizer sharing one counter, as TF Addons' wrappers do). If the step
 * fails, the counter keeps its old value. */
#define OPTIM_STEP_SET_ITERATIONS 8u

/* What an inspect function returns to end the step there: nothing of the
 * optimizer changes and optim_step returns 0. */
#define OPTIM_STEP_SKIP 1

/* The overrides of one step. Take them from optim_step_options_defaults()
 * (a plain optim_apply_gradients step), then change what differs. A wrapper
 * that gets options passes them on to its inner step, changing only what it
 * adds: the outermost caller's choice wins. */
typedef struct optim_step_options {
    uint32_t size; /* sizeof(optim_step_options) */
    uint32_t flags; /* OPTIM_STEP_* */
    /* Whose options and functions process the gradients; NULL: the
     * stepping optimizer's own. `aggregation`: the gradient aggregator
     * (none if that optimizer has none); `clipping`: clipvalue, clipnorm
     * and global_clipnorm; `transformers`: the gradient transformers. */
    const optim_optimizer *aggregation;
    const optim_optimizer *clipping;
    const optim_optimizer *transformers;
    int64_t iterations; /* with OPTIM_STEP_SET_ITERATIONS */
    int num_threads; /* 0: the stepping optimizer's own */
    /* Optional: runs once, after aggregation and before clipping, on
     * copies of the gradients that the step owns (pairs without a gradient
     * left out; it may change values in place). Return 0 to go on,
     * OPTIM_STEP_SKIP to end the step with nothing changed, or an error
     * code (the step fails). What it leaves is checked like user input. */
    optim_grad_fn inspect;
    void *inspect_user;
} optim_step_options;

/* A plain step: no overrides, no inspect. */
OPTIM_API optim_step_options optim_step_options_defaults(void);

/* One step of opt with the overrides of `o` (NULL: defaults): the pipeline
 * of optim_apply_gradients (docs/custom-optimizer.md, section 3), or the class's `step`
 * hook for a wrapper, which gets `o` to honour and pass on. A wrapper class
 * without a `step` hook (only apply_gradients, written for an older
 * version) processes gradients and constraints itself: of the options it
 * honours the counter flags and OPTIM_STEP_NO_AGGREGATE, and refuses an
 * inspect function (OPTIM_ENOTSUP). On error nothing changes; the message
 * is on opt. */
OPTIM_API int optim_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                         const optim_step_options *o);

/* Checks the pairs as a step of opt would (stage 1: each pair against the
 * update rule that finally runs, the innermost optimizer for a wrapper;
 * variables unknown to a built optimizer; each variable once; with
 * require_any, at least one gradient). A wrapper of several optimizers
 * (inner_at) is checked for what is its own (variables, each once, known
 * once built); its step checks each pair against its sub-optimizer with
 * this same call. Changes nothing but opt's message. */
OPTIM_API int optim_check_gradients(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                                    int require_any);

/* The gradient functions the optimizer has (optim_add_gradient_transformer,
 * optim_set_gradient_aggregator). */
OPTIM_API size_t optim_gradient_transformer_count(const optim_optimizer *opt);
OPTIM_API int optim_has_gradient_aggregator(const optim_optimizer *opt);

/* The thread count a step of opt uses (its optim_set_num_threads, else
 * OpenMP's default). */
OPTIM_API int optim_num_threads(const optim_optimizer *opt);

/* ---- undoing a wrapper's own changes ------------------------------------- */

/* What an optimizer holds at one moment: its tracked variables, slots and
 * weights, and its counter (not its inner optimizer's: take one per level).
 * The fields are the library's. */
typedef struct optim_savepoint {
    size_t vars_, weights_, names_;
    int64_t iterations_;
} optim_savepoint;

OPTIM_API optim_savepoint optim_savepoint_get(const optim_optimizer *opt);

/* Destroys the slots and weights created since sp, forgets the variables
 * tracked since, and restores the counter (the inner optimizer's counter is
 * left alone). Pointers to the destroyed weights (kept in a class state)
 * must be cleared by the caller. A savepoint that holds more than opt has
 * now (not opt's, or taken before an earlier rollback) is ignored, as are
 * NULL arguments. */
OPTIM_API void optim_rollback(optim_optimizer *opt, const optim_savepoint *sp);

/* Like optim_rollback, for an optimizer whose class may keep pointers to
 * its own weights (optim_add_weight, created lazily in create_slots as
 * Nadam's u_product is): forgets the variables tracked since sp and
 * destroys their slots, but keeps the optimizer-level weights created
 * since and the counter. For the optimizers a wrapper of several
 * optimizers tracks variables in (optim_track_variables) when a later one
 * fails. Ignored in the same cases as optim_rollback. */
OPTIM_API void optim_rollback_variables(optim_optimizer *opt, const optim_savepoint *sp);

/* ---- scratch memory for a step hook -------------------------------------- */

/* `bytes` bytes of scratch memory (64-byte aligned, uninitialised) from
 * opt's step arena, for opt's step or apply_gradients hook: valid until
 * opt's next step starts, never freed by the caller. optim_step resets
 * the arena when it starts a step of opt, keeping its memory, so a
 * wrapper that asks for the same sizes step after step does not allocate
 * once warm. Asked for outside a step of opt, the memory is kept until
 * opt's next step. NULL if opt is NULL or out of memory (bytes 0 gives a
 * valid pointer). */
OPTIM_API void *optim_step_scratch(optim_optimizer *opt, size_t bytes);

/* ---- the base options and config of a wrapper ---------------------------- */

/* A wrapper usually leaves the base options (learning_rate, clipnorm,
 * weight_decay, use_ema, ...) to its inner optimizer. Returns the name of
 * the first base option of opt's generation that is not at its default
 * (learning_rate: the class's default_learning_rate), skipping the names in
 * except, or NULL if there is none; have and want (may be NULL) get the
 * value set and the default as text ("None", "true", "0.5", "a variable,
 * callable or schedule"). */
OPTIM_API const char *optim_base_option_changed(const optim_optimizer *opt,
                                                const char *const *except, size_t n_except,
                                                char *have, size_t have_len, char *want,
                                                size_t want_len);

/* For get_config hooks of wrappers: keeps only the keys named in keys, in
 * that order (absent ones skipped), dropping every other key written so
 * far (the base's); the keys named in drop_null go too when their value is
 * null. */
OPTIM_API int optim_config_keep(optim_config *cfg, const char *const *keys, size_t n,
                                const char *const *drop_null, size_t n_drop_null);

#ifdef __cplusplus
}
#endif
#endif
