/* ApplyIfFinite: optim's own wrapper (no Keras class of this name) that
 * skips the inner optimizer's step when any gradient holds an Inf or a NaN.
 *
 * It is the skipping half of Keras's LossScaleOptimizer without the loss
 * scale, for training in float32/float64 where an occasional overflow should
 * cost one step rather than the model:
 *
 *     all finite:  the inner optimizer steps on the gradients as given
 *                  (iterations += 1, through the inner)
 *     otherwise:   nothing is updated; skipped_steps += 1; iterations stay
 *                  (as in Keras 3's LossScaleOptimizer; tf.keras's legacy
 *                  one advances them, see loss_scale.c)
 *
 * The check runs on the gradients after the gradient aggregator (the
 * wrapper's, else the inner's), so that every replica skips together, and
 * before clipping (which belongs to the inner optimizer). Sparse gradients
 * are checked on their rows as given.
 *
 * Inside a LossScaleOptimizer (LossScaleOptimizer(ApplyIfFinite(x))) it
 * checks the unscaled gradients; around one it would hide the skipped steps
 * the loss scale must see to halve.
 *
 * Config: {"name", "inner_optimizer"} (+ "is_legacy_optimizer": true in the
 * legacy generation). The base options (clipnorm, ...) belong to the inner
 * optimizer and are refused here unless at their defaults.
 *
 * Weights: "skipped_steps", a float64 scalar (an exact integer), created at
 * the first step or at optim_build, after the inner optimizer's weights.
 *
 * This file also holds the step driver that LossScaleOptimizer shares
 * (optim__finite_*), written against the public step API: the inner
 * optimizer's optim_step with an inspect function that sees the gradients
 * after aggregation (the wrapper's aggregator, else the inner's), checks
 * them for Inf/NaN, ends the step when they are not finite, and divides
 * them by a loss scale in place (on the step's own copies). */
#include "wrappers/wrapper.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/parallel.h"

#define INNER_KEY "inner_optimizer"

/* ---- element loops: fixed chunks, so any thread count gives the same bits ---- */

static int chunk_finite(optim_dtype dt, const void *data, int64_t off, int64_t n)
{
    int bad = 0;
    if (n == 0) return 1; /* data may be NULL: no pointer arithmetic on it */
    if (dt == OPTIM_F32) {
        const float *x = (const float *)data + off;
        for (int64_t i = 0; i < n; i++) bad |= !isfinite(x[i]);
    } else {
        const double *x = (const double *)data + off;
        for (int64_t i = 0; i < n; i++) bad |= !isfinite(x[i]);
    }
    return !bad;
}

static int tensor_finite(optim_dtype dt, const void *data, int64_t n, int nthreads)
{
    if (n <= OPTIM__CHUNK) return chunk_finite(dt, data, 0, n);
    const int64_t nc = optim__nchunks(n);
    int ok = 1;
#pragma omp parallel for schedule(static) reduction(&& : ok) num_threads(nthreads)
    for (int64_t c = 0; c < nc; c++)
        ok = ok && chunk_finite(dt, data, c * OPTIM__CHUNK, optim__chunk_len(n, c * OPTIM__CHUNK));
    return ok;
}

/* x = x / d in place, in the gradient's dtype: float32 gradients divide by
 * (float)d, float64 ones by d (Keras 3's ops.divide(g, dynamic_scale): the
 * float32 scale promotes to float64 exactly). */
typedef struct divide_run {
    optim_dtype dt;
    void *x;
    double d;
} divide_run;

static void divide_chunk(void *ctx, int64_t off, int64_t len)
{
    const divide_run *r = ctx;
    if (r->dt == OPTIM_F32) {
        float *x = (float *)r->x + off;
        const float fd = (float)r->d;
        for (int64_t i = 0; i < len; i++) x[i] = x[i] / fd;
    } else {
        double *x = (double *)r->x + off;
        for (int64_t i = 0; i < len; i++) x[i] = x[i] / r->d;
    }
}

/* The data of a (checked) gradient and its element count. */
static void *grad_data(const optim_grad *g, int64_t *numel, optim_dtype *dt)
{
    const optim_tensor *t = g->kind == OPTIM_GRAD_DENSE ? &g->dense : &g->sparse.values;
    *numel = optim_tensor_numel(t);
    *dt = t->dtype;
    return t->data;
}

static int all_finite(const optim_grad_var *pairs, size_t n, int nthreads)
{
    for (size_t i = 0; i < n; i++) {
        int64_t numel;
        optim_dtype dt;
        const void *d = grad_data(&pairs[i].grad, &numel, &dt);
        if (!tensor_finite(dt, d, numel, nthreads)) return 0;
    }
    return 1;
}

/* ---- the step ------------------------------------------------------------------------------- */

typedef struct finite_ctx {
    optim_optimizer *opt; /* the wrapper */
    const optim_step_options *outer; /* its caller's options: their inspect runs first */
    int skip_nonfinite;
    double divisor;
    int (*before)(optim_optimizer *);
    int finite;
} finite_ctx;

/* The inspect function of the inner step: the gradients after aggregation,
 * copies the step owns. */
static int finite_inspect(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    finite_ctx *c = user;
    int rc =
        c->outer->inspect ? c->outer->inspect(c->outer->inspect_user, pairs, n, err) : OPTIM_OK;
    if (rc) return rc;
    const int nthreads =
        c->outer->num_threads > 0 ? c->outer->num_threads : optim_num_threads(c->opt);
    c->finite = all_finite(pairs, n, nthreads);
    if (c->before && (rc = c->before(c->opt)))
        return optim__err(err, rc, "%s", optim_errmsg(c->opt));
    if (!c->finite && c->skip_nonfinite) return OPTIM_STEP_SKIP;
    if (c->divisor == 0 || c->divisor == 1) return OPTIM_OK;
    for (size_t i = 0; i < n; i++) {
        int64_t numel;
        divide_run r = {OPTIM_F32, NULL, c->divisor};
        r.x = grad_data(&pairs[i].grad, &numel, &r.dt);
        optim__parallel_chunks(numel, numel > 4 * OPTIM__CHUNK ? nthreads : 1, divide_chunk, &r);
    }
    return OPTIM_OK;
}

/* One wrapped step (the step hook of ApplyIfFinite and LossScaleOptimizer).
 * The inner optimizer steps with the caller's overrides, the wrapper's
 * aggregator if it has one, and finite_inspect: unless skip_nonfinite and a
 * gradient is not finite, on the gradients divided by `divisor` when it is
 * not 0 or 1. `before` (may be NULL) runs once the input is known good and
 * before the inner update (wrappers create their weights there); if the
 * inner step then fails they are destroyed again and `forget` clears the
 * class state's pointers to them, so that a failed step changes nothing. On
 * success *finite says whether every gradient was finite, and the wrapper's
 * iterations equal the inner's. */
int optim__finite_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                       const optim_step_options *o, int skip_nonfinite, double divisor,
                       int (*before)(optim_optimizer *), void (*forget)(optim_optimizer *),
                       int *finite)
{
    const char *cn = optim_class_of(opt)->name;
    optim_optimizer *inner = optim__wrapper_inner(opt);
    *finite = 0;
    if (!inner) return optim_set_error(opt, OPTIM_ESTATE, "%s: no inner optimizer", cn);
    if (optim_gradient_transformer_count(opt))
        return optim_set_error(opt, OPTIM_EINVAL,
                               "%s: has %zu gradient transformers; add them to the inner optimizer "
                               "(optim_wrapper_inner), which transforms the gradients it steps on",
                               cn, optim_gradient_transformer_count(opt));
    finite_ctx c = {opt, o, skip_nonfinite, divisor, before, 0};
    optim_step_options io = *o;
    io.inspect = finite_inspect;
    io.inspect_user = &c;
    if (!io.aggregation && optim_has_gradient_aggregator(opt)) io.aggregation = opt;
    const optim_savepoint sp = optim_savepoint_get(opt);
    const size_t nweights = optim_weights_count(opt);
    int rc = optim_step(inner, pairs, n, &io);
    if (rc) {
        if (optim_weights_count(opt) > nweights) { /* undo what `before` created in this call */
            optim_rollback(opt, &sp);
            if (forget) forget(opt);
        }
        return optim_set_error(opt, rc, "%s: inner optimizer: %s", cn, optim_errmsg(inner));
    }
    *finite = c.finite;
    return optim_set_iterations(opt, optim_iterations(inner));
}

/* ---- config ---------------------------------------------------------------------------------- */

/* validate: Keras 3's LossScaleOptimizer accepts the base optimizer
 * arguments only at their defaults ("Instead, set `clipnorm` on the
 * `inner_optimizer`"); the wrapper's own learning_rate is 0 and unused. */
int optim__finite_base_defaults(optim_optimizer *opt, optim_error *err)
{
    char have[64], want[64];
    const char *name =
        optim_base_option_changed(opt, NULL, 0, have, sizeof have, want, sizeof want);
    if (!name) return OPTIM_OK;
    return optim__err(err, OPTIM_EINVAL,
                      "%s does not support `%s` (it is %s, expected %s). Instead, set `%s` on "
                      "the `inner_optimizer` (optim_wrapper_inner)",
                      optim_class_of(opt)->name, name, have, want, name);
}

/* get_config: keeps the keys of `order` in that order ("inner_optimizer"
 * is the inner optimizer's serialization) and drops every other key the
 * base wrote. Keys in order that are absent are skipped. */
int optim__finite_config(optim_optimizer *opt, optim_config *cfg, const char *const *order,
                         size_t norder)
{
    int rc = OPTIM_OK;
    for (size_t k = 0; k < norder && !rc; k++)
        if (strcmp(order[k], INNER_KEY) == 0) rc = optim__wrapper_put_inner(opt, cfg, INNER_KEY);
    return rc ? rc : optim_config_keep(cfg, order, norder, NULL, 0);
}

/* ---- the class -------------------------------------------------------------------------------- */

typedef struct aif_state {
    optim_wrapper_state w; /* first, for the wrapper plumbing */
    optim_var *skipped; /* "skipped_steps", float64 scalar */
} aif_state;

static int aif_weights(optim_optimizer *opt)
{
    aif_state *st = optim_state(opt);
    if (st->skipped) return OPTIM_OK;
    return optim_add_weight(opt, "skipped_steps", OPTIM_F64, 0, NULL, OPTIM_SLOT_ZEROS, 0,
                            &st->skipped);
}

static void aif_forget(optim_optimizer *opt) { ((aif_state *)optim_state(opt))->skipped = NULL; }

static int aif_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)var;
    (void)err;
    return aif_weights(opt);
}

static int aif_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                     const optim_step_options *o)
{
    int finite;
    int rc = optim__finite_step(opt, pairs, n, o, 1, 0, aif_weights, aif_forget, &finite);
    if (rc) return rc;
    aif_state *st = optim_state(opt);
    if (!finite) *(double *)optim_var_data(st->skipped) += 1;
    return OPTIM_OK;
}

static int aif_validate(optim_optimizer *opt, optim_error *err)
{
    int rc = optim__wrapper_require_inner(opt, INNER_KEY, err);
    if (!rc) rc = optim__finite_base_defaults(opt, err);
    if (rc) return rc;
    /* iterations are the inner optimizer's */
    return optim_set_iterations(opt, optim_iterations(optim__wrapper_inner(opt)));
}

static int aif_set_config(optim_optimizer *opt, const char *key, const char *json, optim_error *err)
{
    if (strcmp(key, INNER_KEY) == 0) return optim__wrapper_set_inner_json(opt, json, err);
    return OPTIM_EKEY;
}

static int aif_get_config(optim_optimizer *opt, optim_config *cfg)
{
    static const char *const order[] = {"name", INNER_KEY};
    return optim__finite_config(opt, cfg, order, 2);
}

static void aif_destroy(optim_optimizer *opt) { optim__wrapper_destroy(opt); }

const optim_class optim_apply_if_finite_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "ApplyIfFinite",
    .default_learning_rate = 0.0,
    .state_size = sizeof(aif_state),
    .validate = aif_validate,
    .create_slots = aif_create_slots,
    .step = aif_apply,
    .get_config = aif_get_config,
    .set_config = aif_set_config,
    .destroy = aif_destroy,
    .inner = optim__wrapper_inner,
};

int64_t optim_skipped_steps(const optim_optimizer *opt)
{
    if (!opt || optim_class_of(opt)->step != aif_apply) return -1;
    const aif_state *st = optim_state(opt);
    return st->skipped ? (int64_t)optim_var_get(st->skipped, 0) : 0;
}
