/* LossScaleOptimizer: dynamic loss scaling (Micikevicius et al., "Mixed
 * Precision Training", ICLR 2018, section 3.2), in both Keras generations.
 *
 * The loss is multiplied by a scale S (optim_scale_loss) so that small
 * gradients survive float16; the gradients come back multiplied by S. A
 * step with an Inf or NaN gradient is skipped and S halves; after
 * `dynamic_growth_steps` finite steps in a row S doubles. S is a float32
 * scalar, and every update of it is float32 arithmetic, as in Keras.
 *
 * Keras 3 (keras/src/optimizers/loss_scale_optimizer.py, LossScaleOptimizer):
 * apply_gradients gets the SCALED gradients.
 *
 *     finite = every gradient (as given, scaled) is finite
 *     finite:     inner step on g / S                       (ops.divide)
 *                 then if step_counter == dynamic_growth_steps - 1:
 *                     step_counter = 0; S = S * 2           (no upper bound)
 *                 else step_counter += 1
 *     not finite: step_counter = 0; S = S * 0.5             (no lower bound)
 *                 nothing else: the inner optimizer does not run, so
 *                 `iterations` (the inner's) does NOT advance
 *
 *   (_common_apply, _stateful_handle_finite_grads,
 *   _stateful_handle_non_finite_grads.) Weights, created at the first step
 *   or optim_build (Keras's build): "step_counter" then "dynamic_scale".
 *   Config: name, inner_optimizer, initial_scale (2**15),
 *   dynamic_growth_steps (2000). `dynamic: true` is accepted and not
 *   written; `dynamic: false` is refused, as in Keras 3. The base optimizer
 *   keys Keras 3 once wrote (weight_decay, clipnorm, ...) are accepted at
 *   their defaults only.
 *
 * Legacy (tf_keras/mixed_precision/loss_scale_optimizer.py, LossScaleOptimizer
 * over an OptimizerV2, with _DynamicLossScaleState): apply_gradients gets
 * gradients the caller has ALREADY unscaled with get_unscaled_gradients
 * (optim_unscale_gradients here: g * (1 / S), the reciprocal in float32); it
 * does not divide them again.
 *
 *     finite = every gradient (as given, unscaled) is finite
 *     finite:     inner step on g
 *                 then if good_steps + 1 >= dynamic_growth_steps:
 *                     S = S * 2 if that is finite; good_steps = 0
 *                 else good_steps += 1
 *     not finite: good_steps = 0; S = max(S / 2, 1)
 *                 the inner step is skipped but `iterations` DOES advance
 *                 (do_not_apply_fn: iterations.assign_add(1))
 *
 *   With dynamic=false the scale is fixed at initial_scale (required), no
 *   step is ever skipped (non-finite gradients are applied) and there are no
 *   weights. Weights with dynamic=true: "current_loss_scale" then
 *   "good_steps" (tf.keras keeps them out of get_weights and checkpoints
 *   them on their own; here they are weights so that save/load resumes
 *   exactly). Config: inner_optimizer, dynamic (true), initial_scale (2**15
 *   when dynamic), dynamic_growth_steps (2000 when dynamic, None when not),
 *   no name.
 *
 * Both generations: the wrapper's `iterations` are the inner optimizer's;
 * the counters are float64 scalars holding exact integers (Keras: int64),
 * the scale a float32 scalar. The inner optimizer must be of the wrapper's
 * generation. The finiteness check and the step itself are the shared
 * driver in apply_if_finite.c. */
#include "wrappers/wrapper.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define INF INFINITY
#define INNER_KEY "inner_optimizer"
#define DEFAULT_SCALE 32768.0 /* 2**15 */
#define DEFAULT_GROWTH 2000.0


enum { P_INITIAL_SCALE, P_GROWTH, P_DYNAMIC, P_INITIAL_SCALE_LEGACY, P_GROWTH_LEGACY };

static const optim_param lso_params[] = {
    {"initial_scale", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY | OPTIM_PARAM_MIN_EXCLUSIVE,
     DEFAULT_SCALE, 0.0, INF},
    {"dynamic_growth_steps", OPTIM_PARAM_INT, OPTIM_PARAM_KERAS3_ONLY, DEFAULT_GROWTH, 1.0, INF},
    {"dynamic", OPTIM_PARAM_BOOL, OPTIM_PARAM_LEGACY_ONLY, 1.0, 0.0, 1.0},
    /* Legacy: None means 2**15 and 2000 with dynamic=true; with
     * dynamic=false initial_scale is required and the steps must be None. */
    {"initial_scale", OPTIM_PARAM_FLOAT,
     OPTIM_PARAM_LEGACY_ONLY | OPTIM_PARAM_NULLABLE | OPTIM_PARAM_MIN_EXCLUSIVE, NAN, 0.0, INF},
    {"dynamic_growth_steps", OPTIM_PARAM_INT, OPTIM_PARAM_LEGACY_ONLY | OPTIM_PARAM_NULLABLE, NAN,
     1.0, INF},
};

typedef struct lso_state {
    optim_wrapper_state w; /* first, for the wrapper plumbing */
    optim_var *counter; /* step_counter / good_steps: float64 scalar */
    optim_var *scale; /* dynamic_scale / current_loss_scale: float32 scalar */
} lso_state;

static int lso_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                     const optim_step_options *o);

static int is_lso(const optim_optimizer *opt)
{
    return opt && optim_class_of(opt)->step == lso_apply;
}

static int legacy(const optim_optimizer *opt) { return optim_generation_of(opt) == OPTIM_LEGACY; }

static double hyper(optim_optimizer *opt, const char *name)
{
    double v = NAN;
    optim_get_hyper(opt, name, &v);
    return v;
}

static int dynamic(optim_optimizer *opt) { return !legacy(opt) || hyper(opt, "dynamic") != 0; }

static double initial_scale(optim_optimizer *opt)
{
    double s = hyper(opt, "initial_scale");
    return isnan(s) ? DEFAULT_SCALE : s;
}

static double growth_steps(optim_optimizer *opt)
{
    double g = hyper(opt, "dynamic_growth_steps");
    return isnan(g) ? DEFAULT_GROWTH : g;
}

/* The scale now. Keras 3 before build: initial_scale as given (scale_loss
 * reads self.initial_scale); after: the float32 weight. Legacy: float32
 * from the start (a tf.Variable made at construction, or
 * convert_to_tensor of the fixed float). */
static double current_scale(optim_optimizer *opt)
{
    const lso_state *st = optim_state(opt);
    if (st->scale) return *(const float *)optim_var_cdata(st->scale);
    double s = initial_scale(opt);
    return legacy(opt) ? (double)(float)s : s;
}

/* Keras 3's build / tf.keras's _DynamicLossScaleState: the two weights, in
 * their creation order, each created once. */
static int lso_weights(optim_optimizer *opt)
{
    lso_state *st = optim_state(opt);
    if (!dynamic(opt)) return OPTIM_OK;
    const double s0 = initial_scale(opt);
    int rc = OPTIM_OK;
    if (!legacy(opt)) {
        if (!st->counter)
            rc = optim_add_weight(opt, "step_counter", OPTIM_F64, 0, NULL, OPTIM_SLOT_ZEROS, 0,
                                  &st->counter);
        if (!rc && !st->scale)
            rc = optim_add_weight(opt, "dynamic_scale", OPTIM_F32, 0, NULL, OPTIM_SLOT_CONSTANT, s0,
                                  &st->scale);
    } else {
        if (!st->scale)
            rc = optim_add_weight(opt, "current_loss_scale", OPTIM_F32, 0, NULL,
                                  OPTIM_SLOT_CONSTANT, s0, &st->scale);
        if (!rc && !st->counter)
            rc = optim_add_weight(opt, "good_steps", OPTIM_F64, 0, NULL, OPTIM_SLOT_ZEROS, 0,
                                  &st->counter);
    }
    return rc;
}

static void lso_forget(optim_optimizer *opt)
{
    lso_state *st = optim_state(opt);
    st->counter = NULL;
    st->scale = NULL;
}

static int lso_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)var;
    (void)err;
    return lso_weights(opt);
}

static int lso_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                     const optim_step_options *o)
{
    lso_state *st = optim_state(opt);
    const int leg = legacy(opt), dyn = dynamic(opt);
    /* Keras 3 divides by the float32 scale (built from initial_scale at
     * the first step); legacy gradients arrive unscaled. */
    const double divisor = leg ? 0.0 : (double)(float)current_scale(opt);
    const double growth = growth_steps(opt);
    int finite;
    int rc = optim__finite_step(opt, pairs, n, o, dyn, divisor, lso_weights, lso_forget, &finite);
    if (rc || !dyn) return rc;
    float *s = optim_var_data(st->scale);
    double *c = optim_var_data(st->counter);
    if (finite && !leg) {
        /* ops.cond(ops.equal(step_counter, dynamic_growth_steps - 1), upscale, increment) */
        if (*c == growth - 1) {
            *c = 0;
            *s = *s * 2.0f;
        } else {
            *c += 1;
        }
    } else if (finite) {
        /* tf.cond(counter + 1 >= growth_steps, incr_loss_scale, counter.assign_add(1)) */
        if (*c + 1 >= growth) {
            const float up = *s * 2.0f;
            if (isfinite(up)) *s = up; /* _assign_if_finite */
            *c = 0;
        } else {
            *c += 1;
        }
    } else if (!leg) {
        *c = 0;
        *s = *s * 0.5f;
    } else {
        const float down = *s / 2.0f; /* tf.maximum(current_loss_scale / multiplier, 1) */
        *c = 0;
        *s = down > 1.0f ? down : 1.0f;
        /* do_not_apply_fn: inner iterations.assign_add(1) */
        optim_set_iterations(opt, optim_iterations(optim__wrapper_inner(opt)) + 1);
    }
    return OPTIM_OK;
}

/* ---- config ------------------------------------------------------------------------ */

static int fail(optim_error *err, int code, const char *fmt, ...) OPTIM__PRINTF(3, 4);
static int fail(optim_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    optim__verr(err, code, fmt, ap);
    va_end(ap);
    return code;
}

static int lso_validate(optim_optimizer *opt, optim_error *err)
{
    int rc = optim__wrapper_require_inner(opt, INNER_KEY, err);
    if (!rc) rc = optim__finite_base_defaults(opt, err);
    if (rc) return rc;
    optim_optimizer *inner = optim__wrapper_inner(opt);
    const lso_state *st = optim_state(opt);
    if (optim_generation_of(inner) != optim_generation_of(opt))
        return fail(err, OPTIM_EINVAL,
                    "LossScaleOptimizer: the inner optimizer (%s) is %s but the wrapper is %s; "
                    "the legacy LossScaleOptimizer wraps only legacy optimizers and the Keras 3 "
                    "one only Keras 3 optimizers (give both configs \"is_legacy_optimizer\": "
                    "true, or neither)",
                    optim_class_of(inner)->name, legacy(inner) ? "legacy" : "Keras 3",
                    legacy(opt) ? "legacy" : "Keras 3");
    if (!legacy(opt)) {
        /* "Disable the inner optimizer's loss scaling, otherwise gradients
         * will be scaled twice": inner_optimizer.loss_scale_factor = None. */
        double lsf = 0;
        if (optim_get_hyper(inner, "loss_scale_factor", &lsf) == 0 && !isnan(lsf) &&
            (rc = optim_set_hyper(inner, "loss_scale_factor", NAN)))
            return fail(err, rc, "LossScaleOptimizer: inner optimizer: %s", optim_errmsg(inner));
        return optim_set_iterations(opt, optim_iterations(inner));
    }
    if (is_lso(inner))
        return fail(err, OPTIM_EINVAL,
                    "LossScaleOptimizer cannot wrap another LossScaleOptimizer (legacy)");
    const double init = hyper(opt, "initial_scale"), growth = hyper(opt, "dynamic_growth_steps");
    if (!dynamic(opt)) {
        if (isnan(init))
            return fail(err, OPTIM_EINVAL,
                        "LossScaleOptimizer: \"initial_scale\" must be specified if \"dynamic\" "
                        "is False");
        if (!isnan(growth))
            return fail(err, OPTIM_EINVAL,
                        "LossScaleOptimizer: \"dynamic_growth_steps\" must be None if \"dynamic\" "
                        "is False, but got: %g",
                        growth);
        if (st->scale)
            return fail(err, OPTIM_ESTATE,
                        "LossScaleOptimizer: dynamic cannot become false once the dynamic loss "
                        "scale exists (its weights were created at the first step)");
    }
    return optim_set_iterations(opt, optim_iterations(inner));
}

static int lso_set_config(optim_optimizer *opt, const char *key, const char *json, optim_error *err)
{
    if (strcmp(key, INNER_KEY) == 0) return optim__wrapper_set_inner_json(opt, json, err);
    /* Keras 3: kwargs.pop("dynamic", True) must be true. */
    if (strcmp(key, "dynamic") == 0 && !legacy(opt)) {
        if (strcmp(json, "true") == 0) return OPTIM_OK;
        if (strcmp(json, "false") == 0)
            return fail(err, OPTIM_EINVAL,
                        "LossScaleOptimizer: config key 'dynamic' is false; Keras 3's "
                        "LossScaleOptimizer no longer supports dynamic=False (a fixed scale is "
                        "the inner optimizer's loss_scale_factor there). Use the legacy "
                        "generation (\"is_legacy_optimizer\": true) for a fixed loss scale");
        return fail(err, OPTIM_ETYPE,
                    "LossScaleOptimizer: config key 'dynamic' is %s, expected true", json);
    }
    return OPTIM_EKEY;
}

/* A float as Python's repr writes it. */
static int put_float(optim_config *cfg, const char *key, double x)
{
    char buf[48];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strpbrk(buf, ".e")) strcat(buf, ".0");
    return optim_config_put(cfg, key, buf);
}

static int lso_get_config(optim_optimizer *opt, optim_config *cfg)
{
    static const char *const k3[] = {"name", INNER_KEY, "initial_scale", "dynamic_growth_steps"};
    static const char *const kl[] = {INNER_KEY, "dynamic", "initial_scale", "dynamic_growth_steps"};
    if (!legacy(opt)) return optim__finite_config(opt, cfg, k3, 4);
    /* Legacy get_config writes the values in effect: float(initial_scale)
     * (a float whatever was given, dynamic or not) and the growth steps of
     * the dynamic state, int(), None when not dynamic. */
    int rc = put_float(cfg, "initial_scale", initial_scale(opt));
    if (!rc && dynamic(opt)) {
        char buf[320]; /* every digit of any finite double: a count is written as an int */
        snprintf(buf, sizeof buf, "%.0f", growth_steps(opt));
        rc = optim_config_put(cfg, "dynamic_growth_steps", buf);
    }
    return rc ? rc : optim__finite_config(opt, cfg, kl, 4);
}

static void lso_destroy(optim_optimizer *opt) { optim__wrapper_destroy(opt); }

const optim_class optim_loss_scale_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "LossScaleOptimizer",
    /* super().__init__(learning_rate=0.0): the wrapper's own is unused. */
    .default_learning_rate = 0.0,
    .params = lso_params,
    .n_params = sizeof lso_params / sizeof *lso_params,
    .state_size = sizeof(lso_state),
    .validate = lso_validate,
    .create_slots = lso_create_slots,
    .step = lso_apply,
    .get_config = lso_get_config,
    .set_config = lso_set_config,
    .destroy = lso_destroy,
    .inner = optim__wrapper_inner,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.mixed_precision",
};

/* ---- public API (optim/wrappers.h) ---------------------------------------------------- */

/* A successful call leaves no message. */
static int ok(optim_optimizer *opt) { return optim_set_error(opt, OPTIM_OK, "%s", ""); }

static int not_lso(optim_optimizer *opt, const char *fn)
{
    if (!opt) return OPTIM_EINVAL;
    return optim_set_error(opt, OPTIM_EINVAL,
                           "%s: optimizer '%s' is a %s, expected a LossScaleOptimizer", fn,
                           optim_name(opt), optim_class_of(opt)->name);
}

int optim_loss_scale_get(optim_optimizer *opt, double *scale)
{
    if (!is_lso(opt)) return not_lso(opt, "optim_loss_scale_get");
    if (!scale) return optim_set_error(opt, OPTIM_EINVAL, "optim_loss_scale_get: scale is NULL");
    *scale = current_scale(opt);
    return ok(opt);
}

int optim_loss_scale_counter(optim_optimizer *opt, int64_t *counter)
{
    if (!is_lso(opt)) return not_lso(opt, "optim_loss_scale_counter");
    if (!counter)
        return optim_set_error(opt, OPTIM_EINVAL, "optim_loss_scale_counter: counter is NULL");
    if (!dynamic(opt))
        return optim_set_error(opt, OPTIM_ENOTSUP,
                               "optim_loss_scale_counter: the loss scale is fixed (dynamic is "
                               "false), so there is no counter (Keras: dynamic_counter is None)");
    const lso_state *st = optim_state(opt);
    *counter = st->counter ? (int64_t)optim_var_get(st->counter, 0) : 0;
    return ok(opt);
}

/* Keras 3's BaseOptimizer.scale_loss: loss * loss_scale_factor, or loss
 * when it is None (and for the legacy generation, which has no such
 * option; wrappers keep it at None). */
static double k3_scale_loss(optim_optimizer *opt, double loss)
{
    double lsf = NAN;
    if (optim_generation_of(opt) != OPTIM_KERAS3 || optim_get_hyper(opt, "loss_scale_factor", &lsf))
        return loss;
    return isnan(lsf) ? loss : loss * lsf;
}

int optim_scale_loss(optim_optimizer *opt, double loss, double *scaled)
{
    if (!opt) return OPTIM_EINVAL;
    if (!scaled) return optim_set_error(opt, OPTIM_EINVAL, "optim_scale_loss: scaled is NULL");
    /* Any other optimizer: Keras 3's scale_loss (loss * loss_scale_factor). */
    *scaled = is_lso(opt) ? loss * current_scale(opt) : k3_scale_loss(opt, loss);
    return ok(opt);
}

/* In place, in the gradient's dtype: legacy get_unscaled_gradients
 * multiplies by the float32 reciprocal 1 / S (_multiply_gradient casts it
 * to the gradient's dtype); Keras 3 divides by S (_unscale_grads). */
int optim_unscale_gradients(optim_optimizer *opt, optim_grad_var *pairs, size_t n)
{
    if (!is_lso(opt)) return not_lso(opt, "optim_unscale_gradients");
    int rc = optim_check_gradients(opt, pairs, n, 0);
    if (rc) return rc;
    const float s = (float)current_scale(opt);
    const float r = 1.0f / s;
    const int leg = legacy(opt);
    for (size_t i = 0; i < n; i++) {
        optim_grad *g = &pairs[i].grad;
        if (g->kind == OPTIM_GRAD_NONE) continue;
        optim_tensor *t = g->kind == OPTIM_GRAD_DENSE ? &g->dense : &g->sparse.values;
        int64_t numel = optim_tensor_numel(t);
        if (t->dtype == OPTIM_F32) {
            float *x = t->data;
            if (leg)
                for (int64_t k = 0; k < numel; k++) x[k] = x[k] * r;
            else
                for (int64_t k = 0; k < numel; k++) x[k] = x[k] / s;
        } else {
            double *x = t->data;
            const double rd = r, sd = s;
            if (leg)
                for (int64_t k = 0; k < numel; k++) x[k] = x[k] * rd;
            else
                for (int64_t k = 0; k < numel; k++) x[k] = x[k] / sd;
        }
    }
    return ok(opt);
}
