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
 * (optim__finite_*): validation of the pairs against the inner update rule,
 * aggregation, the finiteness check, copies divided by a loss scale, and
 * the inner step. */
#include "wrappers/wrapper.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/impl.h"

#define CHUNK 8192 /* elements per parallel task; results never depend on threads */
#define INNER_KEY "inner_optimizer"


int optim__finite_nthreads(const optim_optimizer *opt)
{
    return opt->num_threads > 0 ? opt->num_threads : omp_get_max_threads();
}

/* The optimizer that finally updates the variables: the inner optimizer, or
 * its own inner if it is a wrapper too, and so on. */
static const optim_optimizer *update_rule(const optim_optimizer *opt)
{
    const optim_optimizer *o = optim__wrapper_inner(opt);
    while (o && o->cls.apply_gradients && o->cls.inner && o->cls.inner(o)) o = o->cls.inner(o);
    return o;
}

/* Every pair readable and acceptable to the inner update rule, each variable
 * once, and (require_any) at least one gradient. */
int optim__finite_check_pairs(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                              int require_any, optim_error *err)
{
    const optim_optimizer *rule = update_rule(opt);
    if (!rule) return optim__err(err, OPTIM_ESTATE, "%s: no inner optimizer", opt->cls.name);
    /* What the base pipeline checks, against the update rule, so that a
     * skipped step refuses what a taken one would. */
    return optim__check_pairs(rule, opt->cls.name, pairs, n, require_any, err);
}

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
    if (n <= CHUNK) return chunk_finite(dt, data, 0, n);
    int64_t nchunks = (n + CHUNK - 1) / CHUNK;
    int ok = 1;
#pragma omp parallel for schedule(static) reduction(&& : ok) num_threads(nthreads)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t off = c * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
        ok = ok && chunk_finite(dt, data, off, len);
    }
    return ok;
}

/* dst = src / d, in the gradient's dtype: float32 gradients divide by
 * (float)d, float64 ones by d (Keras 3's ops.divide(g, dynamic_scale): the
 * float32 scale promotes to float64 exactly). */
static void tensor_divide(optim_dtype dt, const void *src, void *dst, int64_t n, double d, int nthreads)
{
#pragma omp parallel for schedule(static) num_threads(nthreads) if (n > 4 * CHUNK)
    for (int64_t c = 0; c < (n + CHUNK - 1) / CHUNK; c++) {
        int64_t off = c * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
        if (dt == OPTIM_F32) {
            const float *x = (const float *)src + off;
            float *y = (float *)dst + off;
            const float fd = (float)d;
            for (int64_t i = 0; i < len; i++) y[i] = x[i] / fd;
        } else {
            const double *x = (const double *)src + off;
            double *y = (double *)dst + off;
            for (int64_t i = 0; i < len; i++) y[i] = x[i] / d;
        }
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
        if (pairs[i].grad.kind == OPTIM_GRAD_NONE) continue;
        int64_t numel;
        optim_dtype dt;
        const void *d = grad_data(&pairs[i].grad, &numel, &dt);
        if (!tensor_finite(dt, d, numel, nthreads)) return 0;
    }
    return 1;
}

/* ---- the step ------------------------------------------------------------------------------- */

typedef struct arena {
    void **p;
    size_t n, cap;
} arena;

static void *arena_alloc(arena *a, size_t bytes)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        void **p = realloc(a->p, cap * sizeof *p);
        if (!p) return NULL;
        a->p = p;
        a->cap = cap;
    }
    void *x = optim__malloc(bytes);
    if (x) a->p[a->n++] = x;
    return x;
}

static int arena_owns(const arena *a, const void *x)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->p[i] == x) return 1;
    return 0;
}

static void arena_free(arena *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
}

/* Copies of the pairs that have a gradient (their data owned by the arena;
 * sparse indices copied too, since an aggregator may change them). */
static int copy_pairs(arena *a, const optim_grad_var *pairs, size_t n, optim_grad_var *out, size_t *m)
{
    *m = 0;
    for (size_t i = 0; i < n; i++) {
        const optim_grad_var *p = &pairs[i];
        if (p->grad.kind == OPTIM_GRAD_NONE) continue;
        optim_grad_var *q = &out[(*m)++];
        *q = *p;
        int64_t numel;
        optim_dtype dt;
        const void *src = grad_data(&p->grad, &numel, &dt);
        size_t bytes = (size_t)numel * optim_dtype_size(dt);
        void *dst = arena_alloc(a, bytes);
        if (!dst) return OPTIM_ENOMEM;
        if (bytes) memcpy(dst, src, bytes);
        if (p->grad.kind == OPTIM_GRAD_DENSE) {
            q->grad.dense.data = dst;
        } else {
            q->grad.sparse.values.data = dst;
            size_t ib = (size_t)p->grad.sparse.n * sizeof(int64_t);
            int64_t *idx = arena_alloc(a, ib);
            if (!idx) return OPTIM_ENOMEM;
            if (ib) memcpy(idx, p->grad.sparse.indices, ib);
            q->grad.sparse.indices = idx;
        }
    }
    return OPTIM_OK;
}

/* One wrapped step. Validates the pairs (nothing changes on error), runs
 * the gradient aggregator once (the wrapper's, else the inner's; the inner
 * then gets OPTIM_APPLY_NO_AGGREGATE), checks every gradient for Inf/NaN,
 * and, unless skip_nonfinite and a gradient is not finite, steps the inner
 * optimizer: on copies divided by `divisor` when divisor is not 0 or 1, else
 * on the gradients as given. `before` (may be NULL) runs once the input is
 * known good and before the inner step (wrappers create their weights
 * there). On success *finite says whether every gradient was finite, and
 * the wrapper's iterations equal the inner's. */
int optim__finite_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, uint32_t flags,
                       int skip_nonfinite, double divisor, int (*before)(optim_optimizer *),
                       void (*forget)(optim_optimizer *), int *finite)
{
    const char *cn = opt->cls.name;
    optim_optimizer *inner = optim__wrapper_inner(opt);
    *finite = 0;
    if (!inner) return optim__opt_err(opt, OPTIM_ESTATE, "%s: no inner optimizer", cn);
    if (opt->ntransformers)
        return optim__opt_err(opt, OPTIM_EINVAL,
                              "%s: has %zu gradient transformers; add them to the inner optimizer "
                              "(optim_wrapper_inner), which transforms the gradients it steps on",
                              cn, opt->ntransformers);
    optim_error err;
    optim__err_clear(&err);
    int rc = optim__finite_check_pairs(opt, pairs, n, 1, &err);
    if (rc) return optim__opt_take(opt, &err);
    const optim__fn_entry *agg = NULL;
    if (!(flags & OPTIM_APPLY_NO_AGGREGATE))
        agg = opt->aggregator.fn ? &opt->aggregator : inner->aggregator.fn ? &inner->aggregator : NULL;
    const int divide = divisor != 0 && divisor != 1;
    int ok = 0;
    const int nthreads = optim__finite_nthreads(opt);
    arena a = {0};
    optim_grad_var *cur = (optim_grad_var *)pairs;
    size_t m = n;
    if (agg || divide) {
        cur = arena_alloc(&a, n * sizeof *cur);
        if (!cur || copy_pairs(&a, pairs, n, cur, &m)) {
            rc = optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
            goto done;
        }
    }
    if (agg) {
        /* As the pipeline runs it: on copies the step owns, only the pairs
         * with a gradient; what comes back is checked like user input. */
        optim_var **vars = arena_alloc(&a, m * sizeof *vars);
        optim_grad_kind *kinds = arena_alloc(&a, m * sizeof *kinds);
        if (!vars || !kinds) {
            rc = optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < m; i++) vars[i] = cur[i].var, kinds[i] = cur[i].grad.kind;
        optim_error local;
        optim__err_clear(&local);
        rc = agg->fn(agg->user, cur, m, &local);
        if (rc) {
            rc = optim__opt_err(opt, rc < 0 ? rc : OPTIM_EINVAL, "%s: gradient aggregator failed: %s", cn,
                                local.msg[0] ? local.msg : optim_strerror(rc));
            goto done;
        }
        for (size_t i = 0; i < m; i++)
            if (cur[i].var != vars[i] || cur[i].grad.kind != kinds[i]) {
                rc = optim__opt_err(opt, OPTIM_EINVAL,
                                    "%s: gradient aggregator changed the variable or gradient kind "
                                    "of pair %zu",
                                    cn, i);
                goto done;
            }
        rc = optim__finite_check_pairs(opt, cur, m, 1, &err);
        if (rc) {
            rc = optim__opt_take(opt, &err);
            goto done;
        }
    }
    ok = all_finite(cur, m, nthreads);
    const size_t nweights = opt->nslots;
    if (before && (rc = before(opt))) goto done;
    if (!ok && skip_nonfinite) {
        opt->iterations = inner->iterations;
        goto done;
    }
    if (divide) {
        for (size_t i = 0; i < m; i++) {
            int64_t numel;
            optim_dtype dt;
            void *src = grad_data(&cur[i].grad, &numel, &dt);
            void *dst = src;
            /* Never write into memory an aggregator pointed the pair at. */
            if (!arena_owns(&a, src) &&
                !(dst = arena_alloc(&a, (size_t)numel * optim_dtype_size(dt)))) {
                rc = optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
                goto done;
            }
            tensor_divide(dt, src, dst, numel, divisor, nthreads);
            if (cur[i].grad.kind == OPTIM_GRAD_DENSE) cur[i].grad.dense.data = dst;
            else cur[i].grad.sparse.values.data = dst;
        }
    }
    rc = optim_apply_gradients(inner, cur, m, agg ? flags | OPTIM_APPLY_NO_AGGREGATE : flags);
    if (rc) {
        rc = optim__opt_err(opt, rc, "%s: inner optimizer: %s", cn, optim_errmsg(inner));
        if (opt->nslots > nweights) { /* undo what `before` created in this call */
            while (opt->nslots > nweights) optim_var_destroy(opt->slots[--opt->nslots].var);
            if (forget) forget(opt);
        }
        goto done;
    }
    opt->iterations = inner->iterations;
done:
    arena_free(&a);
    if (!rc) *finite = ok;
    return rc;
}

/* ---- config ---------------------------------------------------------------------------------- */

/* validate: Keras 3's LossScaleOptimizer accepts the base optimizer
 * arguments only at their defaults ("Instead, set `clipnorm` on the
 * `inner_optimizer`"); the wrapper's own learning_rate is 0 and unused. */
int optim__finite_base_defaults(optim_optimizer *opt, optim_error *err)
{
    for (size_t i = 0; i < OPTIM__N_BASE; i++) {
        if (!optim__param_in_gen(opt, i)) continue;
        const optim_param *p = opt->params[i];
        const optim__hyper *h = &opt->hypers[i];
        double def = p->default_value;
        if (i == OPTIM__P_LEARNING_RATE) def = opt->cls.default_learning_rate;
        int ok = isnan(def) ? h->kind == HYPER_NONE : h->kind == HYPER_NUMBER && h->number == def;
        if (ok) continue;
        char have[48], want[48];
        const int boolean = p->type == OPTIM_PARAM_BOOL;
        if (h->kind == HYPER_NUMBER && boolean) snprintf(have, sizeof have, "%s", h->number != 0 ? "true" : "false");
        else if (h->kind == HYPER_NUMBER) snprintf(have, sizeof have, "%g", h->number);
        else snprintf(have, sizeof have, "%s", h->kind == HYPER_NONE ? "None" : "a variable, callable or schedule");
        if (isnan(def)) snprintf(want, sizeof want, "None");
        else if (boolean) snprintf(want, sizeof want, "%s", def != 0 ? "true" : "false");
        else snprintf(want, sizeof want, "%g", def);
        return optim__err(err, OPTIM_EINVAL,
                          "%s does not support `%s` (it is %s, expected %s). Instead, set `%s` on "
                          "the `inner_optimizer` (optim_wrapper_inner)",
                          opt->cls.name, p->name, have, want, p->name);
    }
    return OPTIM_OK;
}

/* get_config: keeps the keys of `order` in that order ("inner_optimizer"
 * is the inner optimizer's serialization) and drops every other key the
 * base wrote. Keys in order that are absent are skipped. */
int optim__finite_config(optim_optimizer *opt, optim_config *cfg, const char *const *order,
                         size_t norder)
{
    cJSON *obj = cfg->obj;
    cJSON *fresh = cJSON_CreateObject();
    if (!fresh) return OPTIM_ENOMEM;
    for (size_t k = 0; k < norder; k++) {
        cJSON *item;
        if (strcmp(order[k], INNER_KEY) == 0) {
            optim_optimizer *inner = optim__wrapper_inner(opt);
            char *text = inner ? optim_serialize(inner) : NULL;
            item = text ? cJSON_CreateRaw(text) : NULL;
            optim_free(text);
            if (!item) {
                cJSON_Delete(fresh);
                return inner ? OPTIM_ENOMEM : OPTIM_ESTATE;
            }
        } else {
            item = cJSON_DetachItemFromObjectCaseSensitive(obj, order[k]);
            if (!item) continue;
        }
        cJSON_AddItemToObject(fresh, order[k], item);
    }
    /* Swap the contents: cfg->obj is the object the base keeps writing to. */
    cJSON *old = obj->child;
    obj->child = fresh->child;
    fresh->child = old;
    cJSON_Delete(fresh);
    return OPTIM_OK;
}

/* ---- the class -------------------------------------------------------------------------------- */

typedef struct aif_state {
    optim__wrapper_state w; /* first, for the wrapper plumbing */
    optim_var *skipped;     /* "skipped_steps", float64 scalar */
} aif_state;

static int aif_weights(optim_optimizer *opt)
{
    aif_state *st = optim_state(opt);
    if (st->skipped) return OPTIM_OK;
    return optim_add_weight(opt, "skipped_steps", OPTIM_F64, 0, NULL, OPTIM_SLOT_ZEROS, 0, &st->skipped);
}

static void aif_forget(optim_optimizer *opt)
{
    ((aif_state *)optim_state(opt))->skipped = NULL;
}

static int aif_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)var;
    (void)err;
    return aif_weights(opt);
}

static int aif_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, uint32_t flags)
{
    int finite;
    int rc = optim__finite_step(opt, pairs, n, flags, 1, 0, aif_weights, aif_forget, &finite);
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
    opt->iterations = optim_iterations(optim__wrapper_inner(opt));
    return OPTIM_OK;
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
    .apply_gradients = aif_apply,
    .get_config = aif_get_config,
    .set_config = aif_set_config,
    .destroy = aif_destroy,
    .inner = optim__wrapper_inner,
};

int64_t optim_skipped_steps(const optim_optimizer *opt)
{
    if (!opt || optim_class_of(opt)->apply_gradients != aif_apply) return -1;
    const aif_state *st = optim_state(opt);
    return st->skipped ? (int64_t)optim_var_get(st->skipped, 0) : 0;
}
