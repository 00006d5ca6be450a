/* MovingAverage (TF Addons), and the step mechanics TF Addons' three
 * averaging wrappers share (MovingAverage, SWA in swa.c, Lookahead in
 * lookahead.c).
 *
 * An exponential moving average of the trained variables (Polyak & Juditsky,
 * "Acceleration of stochastic approximation by averaging", SIAM J. Control
 * Optim. 1992; the EMA form of tf.train.ExponentialMovingAverage).
 * tensorflow_addons/optimizers/moving_average.py (MovingAverage: __init__,
 * _get_decay, _prepare_local, average_op, _create_slots, swap_weights,
 * get_config) over average_wrapper.py (AveragedOptimizerWrapper:
 * apply_gradients, _resource_apply_*, assign_average_vars, get_config).
 *
 * Per step, with `step` the shared `iterations` before the increment, every
 * decay computation in float32 (`_get_hyper("average_decay", tf.float32)`):
 *
 *     d = average_decay
 *     num_updates set:  d = min(d, (1 + num_updates) / (10 + num_updates))
 *                       (TF Addons applies this once, in __init__)
 *     step < start_step:       decay = 0
 *     else if dynamic_decay:   c = step - start_step
 *                              decay = min(d, (1 + c) / (10 + c))
 *     else:                    decay = d
 *
 * then, after the inner optimizer's update of each variable with a gradient
 * (tf.keras.backend.moving_average_update, in the variable's dtype, decay
 * cast to it):
 *
 *     average = average - (average - var) * (1 - decay)
 *
 * over the whole variable, for sparse gradients too. Slot "average", a copy
 * of the variable when it is first seen (`add_slot(var, "average",
 * var.read_value())`).
 *
 * The shared mechanics (TF Addons' wrappers are tf.keras OptimizerV2
 * subclasses whose apply_gradients runs the base OptimizerV2 pipeline on
 * themselves and calls the inner optimizer's _resource_apply_* directly):
 *
 *   1. the pairs are checked; the wrapper's slots are created for the
 *      variables with a gradient (_create_all_weights, before any update);
 *   2. the inner optimizer steps with the WRAPPER's clipvalue / clipnorm /
 *      global_clipnorm, gradient transformers and aggregator (the inner's
 *      own are not used: its apply_gradients never runs), at the wrapper's
 *      iterations (`self._optimizer._iterations = self.iterations`);
 *   3. the wrapper's rule runs on each variable with a gradient, on the
 *      value the inner update left, before the variable's constraint;
 *   4. constraints, then iterations += 1, for both (they share one counter).
 *
 * A failed step changes nothing: the wrapper's new slots are rolled back and
 * the inner optimizer refuses before updating anything. */
#include "wrappers/wrapper.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizers.h"
#include "core/parallel.h"
#include "optimizer/impl.h"

#define INNER_KEY "optimizer"
#define MAX_INT 9007199254740992.0 /* 2**53: every integer up to it is exact in a double */

/* ---- shared by moving_average.c, swa.c and lookahead.c ------------------------------------------ */


/* The clip options of OptimizerV2, in its get_config order. */
static const int clip_ids[3] = {OPTIM__P_CLIPNORM, OPTIM__P_CLIPVALUE, OPTIM__P_GLOBAL_CLIPNORM};

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

/* The wrapper's own slot of var (each TF Addons wrapper has one per
 * variable), NULL if the wrapper has not seen var. */
static optim_var *tfa_slot(const optim_optimizer *opt, const optim_var *var)
{
    const optim__var_entry *e = var ? optim__var_entry_of(opt, var) : NULL;
    return e && e->nslots ? opt->slots[e->slot_ids[0]].var : NULL;
}

/* Whether var is still the variable the wrapper made its slot for. */
static int same_as_tracked(const optim_optimizer *opt, const optim_var *var)
{
    const optim__var_entry *e = optim__var_entry_of(opt, var);
    return !e || (e->numel == optim_var_numel(var) && e->dtype == optim_var_dtype(var));
}

typedef struct tfa_task {
    size_t v;
    int64_t off, count;
} tfa_task;

/* Checks the pairs as the wrapper's own OptimizerV2.apply_gradients would
 * before anything changes, and collects the variables with a gradient. */
static int check_pairs(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, optim_var **vars,
                       size_t *nv)
{
    const char *cn = opt->cls.name;
    *nv = 0;
    for (size_t i = 0; i < n; i++) {
        const optim_grad_var *p = &pairs[i];
        if (!p->var) return optim_set_error(opt, OPTIM_EINVAL, "%s: pair %zu has no variable (NULL)", cn, i);
        if (p->grad.kind == OPTIM_GRAD_NONE) continue;
        const char *vn = optim_var_name(p->var);
        if (p->grad.kind == OPTIM_GRAD_SPARSE && optim_var_constraint(p->var))
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "%s: sparse gradient of '%s': the variable has a constraint, "
                                   "which TF Addons' wrappers (tf.keras OptimizerV2) cannot apply "
                                   "to a sparse update",
                                   cn, vn);
        if (opt->built && !optim__var_entry_of(opt, p->var))
            return optim_set_error(opt, OPTIM_ENOTFOUND,
                                   "%s: variable '%s' is unknown to this optimizer, which was built "
                                   "for %zu variables",
                                   cn, vn, opt->nvars);
        if (!same_as_tracked(opt, p->var))
            return optim_set_error(opt, OPTIM_ESTATE,
                                   "%s: variable '%s' (%lld %s elements) is not the one this "
                                   "optimizer made slots for; was a variable destroyed while the "
                                   "optimizer still used it?",
                                   cn, vn, (long long)optim_var_numel(p->var),
                                   optim_dtype_name(optim_var_dtype(p->var)));
        vars[(*nv)++] = p->var;
    }
    if (*nv == 0)
        return optim_set_error(opt, OPTIM_EINVAL,
                               "%s: no gradients provided for any variable (%zu pairs, all without "
                               "gradient)",
                               cn, n);
    optim_var **sorted = optim__malloc(*nv * sizeof *sorted);
    if (!sorted) return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    memcpy(sorted, vars, *nv * sizeof *sorted);
    qsort(sorted, *nv, sizeof *sorted, cmp_ptr);
    for (size_t i = 1; i < *nv; i++)
        if (sorted[i] == sorted[i - 1]) {
            const char *vn = optim_var_name(sorted[i]);
            free(sorted);
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "%s: variable '%s' appears more than once in one "
                                   "apply_gradients call",
                                   cn, vn);
        }
    free(sorted);
    return OPTIM_OK;
}

/* One step of a TF Addons wrapper (the file comment's steps 1 to 4).
 * `coefs` gets the wrapper's resolved values and the step (iterations
 * before the increment), writes the rule's constants and returns whether
 * the rule runs at this step; `rule` then runs on contiguous chunks of each
 * variable with a gradient and its wrapper slot, on all threads. */
int optim__tfa_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, const optim_step_options *o,
                    int (*coefs)(optim_optimizer *opt, int64_t step, double *coef),
                    void (*rule)(optim_dtype dt, void *var, void *slot, int64_t count,
                                 const double *coef))
{
    const char *cn = opt->cls.name;
    optim_optimizer *in = optim__wrapper_inner(opt);
    if (!in) return optim_set_error(opt, OPTIM_ESTATE, "%s: no inner optimizer", cn);
    if (n && !pairs) return optim_set_error(opt, OPTIM_EINVAL, "%s: pairs is NULL", cn);
    optim_var **vars = optim__malloc(n * sizeof *vars);
    optim_var **slots = optim__malloc(n * sizeof *slots);
    tfa_task *tasks = NULL;
    int rc;
    size_t nv = 0;
    if (!vars || !slots) {
        rc = optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
        goto out;
    }
    rc = check_pairs(opt, pairs, n, vars, &nv);
    if (rc) goto out;
    size_t ntasks = 0;
    for (size_t k = 0; k < nv; k++) ntasks += (size_t)optim__nchunks(optim_var_numel(vars[k]));
    tasks = optim__malloc(ntasks * sizeof *tasks);
    if (!tasks) {
        rc = optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
        goto out;
    }

    /* 1. The wrapper's slots for the variables it has not seen (and this
     * step's values of its params, which optim_track_variables resolves). */
    size_t nv0 = opt->nvars, ns0 = opt->nslots, nn0 = opt->nslot_names, nfresh = 0;
    for (size_t k = 0; k < nv; k++)
        if (!optim__var_entry_of(opt, vars[k])) slots[nfresh++] = vars[k];
    rc = optim_track_variables(opt, slots, nfresh);
    if (rc) goto out;
    const int64_t step = opt->iterations;
    double coef[4] = {0, 0, 0, 0};
    const int active = coefs(opt, step, coef);
    size_t t = 0;
    for (size_t k = 0; k < nv; k++) {
        slots[k] = tfa_slot(opt, vars[k]);
        OPTIM__FOR_CHUNKS(optim_var_numel(vars[k]), off, len) tasks[t++] = (tfa_task){k, off, len};
    }

    /* 2. The inner step, with the wrapper's gradient processing and
     * counter (unless a caller of the wrapper gave its own), and without
     * constraints (they come after the rule). */
    optim_step_options io = *o;
    io.flags |= OPTIM_STEP_NO_CONSTRAINTS | OPTIM_STEP_SET_ITERATIONS;
    io.iterations = step;
    if (!io.aggregation) io.aggregation = opt;
    if (!io.clipping) io.clipping = opt;
    if (!io.transformers) io.transformers = opt;
    if (!io.num_threads && opt->num_threads > 0) io.num_threads = opt->num_threads;
    rc = optim_step(in, pairs, n, &io);
    if (rc) {
        optim__rollback_vars(opt, nv0, ns0, nn0);
        rc = optim_set_error(opt, rc, "%s: %s", cn, optim_errmsg(in));
        goto out;
    }

    /* 3. The wrapper's rule; 4. constraints and the counter. */
    const int nthreads = o->num_threads > 0 ? o->num_threads : optim_num_threads(opt);
    if (active) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
        for (size_t i = 0; i < ntasks; i++) {
            const tfa_task *tk = &tasks[i];
            optim_dtype dt = optim_var_dtype(vars[tk->v]);
            size_t at = (size_t)tk->off * optim_dtype_size(dt);
            rule(dt, (char *)optim_var_data(vars[tk->v]) + at, (char *)optim_var_data(slots[tk->v]) + at,
                 tk->count, coef);
        }
    }
    if (!(o->flags & OPTIM_STEP_NO_CONSTRAINTS)) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
        for (size_t k = 0; k < nv; k++) optim_var_apply_constraint(vars[k]);
    }
    opt->iterations = in->iterations;
out:
    free(vars);
    free(slots);
    free(tasks);
    return rc;
}

/* validate: the nested optimizer is required. Of the base options, TF
 * Addons' wrappers (OptimizerV2 subclasses) take clipnorm, clipvalue,
 * global_clipnorm and the legacy `decay` (accepted, unused: the inner
 * optimizer decays its own learning rate); `learning_rate` / `lr` belong to
 * the inner optimizer (the wrappers forward them there and their
 * constructors refuse them), so the wrapper's own stays at 0; Keras 3's
 * options (weight_decay, use_ema, ...) do not exist there and must stay at
 * their defaults. */
int optim__tfa_validate(optim_optimizer *opt, optim_error *err)
{
    int rc = optim__wrapper_require_inner(opt, INNER_KEY, err);
    if (rc) return rc;
    const char *cn = opt->cls.name;
    for (size_t i = 0; i < OPTIM__N_BASE; i++) {
        if (!optim__param_in_gen(opt, i) || i == OPTIM__P_DECAY || i == OPTIM__P_CLIPNORM ||
            i == OPTIM__P_CLIPVALUE || i == OPTIM__P_GLOBAL_CLIPNORM)
            continue;
        const optim_param *p = opt->params[i];
        const optim__hyper *h = &opt->hypers[i];
        double def = i == OPTIM__P_LEARNING_RATE ? opt->cls.default_learning_rate : p->default_value;
        if (isnan(def) ? h->kind == HYPER_NONE : h->kind == HYPER_NUMBER && h->number == def) continue;
        char have[48];
        if (h->kind == HYPER_NUMBER) snprintf(have, sizeof have, "%g", h->number);
        else snprintf(have, sizeof have, "%s", h->kind == HYPER_NONE ? "None" : "a variable, callable or schedule");
        if (i == OPTIM__P_LEARNING_RATE)
            return optim__err(err, OPTIM_EINVAL,
                              "%s: learning_rate is %s; the learning rate is the inner optimizer's "
                              "(TF Addons' %s forwards it there): set it in the nested \"%s\" "
                              "config or on optim_wrapper_inner(opt)",
                              cn, have, cn, INNER_KEY);
        return optim__err(err, OPTIM_EINVAL,
                          "%s: %s is %s; TF Addons' %s has no %s option (expected %s): set it on "
                          "the inner optimizer",
                          cn, p->name, have, cn, p->name, isnan(def) ? "None" : "its default");
    }
    return OPTIM_OK;
}

int optim__tfa_set_config(optim_optimizer *opt, const char *key, const char *json_value,
                          optim_error *err)
{
    if (strcmp(key, INNER_KEY) != 0) return OPTIM_EKEY;
    return optim__wrapper_set_inner_json(opt, json_value, err);
}

/* get_config as TF Addons writes it: {**OptimizerV2.get_config(), **own}:
 * name, the clip options that are set (clipnorm, clipvalue,
 * global_clipnorm), "optimizer", then the class's keys in their order. The
 * base's other keys (learning_rate, decay, Keras 3's options) are dropped;
 * the base appends is_legacy_optimizer afterwards for a legacy wrapper. */
int optim__tfa_get_config(optim_optimizer *opt, optim_config *cfg)
{
    int rc = optim__wrapper_put_inner(opt, cfg, INNER_KEY);
    if (rc) return rc;
    cJSON *obj = cfg->obj;
    cJSON *fresh = cJSON_CreateObject();
    if (!fresh) return OPTIM_ENOMEM;
    size_t nkeys = 5 + opt->cls.n_params;
    for (size_t k = 0; k < nkeys; k++) {
        const char *key = k == 0 ? "name"
                          : k < 4 ? opt->params[clip_ids[k - 1]]->name
                          : k == 4 ? INNER_KEY
                                   : opt->cls.params[k - 5].name;
        cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(obj, key);
        if (!item) continue;
        if (k >= 1 && k < 4 && cJSON_IsNull(item)) {
            cJSON_Delete(item);
            continue;
        }
        if (!cJSON_AddItemToObject(fresh, key, item)) {
            cJSON_Delete(item);
            cJSON_Delete(fresh);
            return OPTIM_ENOMEM;
        }
    }
    /* Swap the contents: cfg->obj is the object the base goes on writing to. */
    cJSON *old = obj->child;
    obj->child = fresh->child;
    fresh->child = old;
    cJSON_Delete(fresh);
    return OPTIM_OK;
}

/* ---- MovingAverage ---------------------------------------------------------------------------------- */

enum { P_AVERAGE_DECAY, P_NUM_UPDATES, P_START_STEP, P_DYNAMIC_DECAY };

/* In get_config's order. average_decay is a hyperparameter (_set_hyper): a
 * variable, callable or schedule is read once per step. TF Addons checks no
 * range; optim asks for a decay in [0, 1] and num_updates >= 0 (a negative
 * one can divide by zero in (1 + n) / (10 + n)). */
static const optim_param ma_params[] = {
    {"average_decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.99, 0.0, 1.0},
    {"num_updates", OPTIM_PARAM_INT, OPTIM_PARAM_NULLABLE, NAN, 0.0, MAX_INT},
    {"start_step", OPTIM_PARAM_INT, 0, 0.0, -MAX_INT, MAX_INT},
    {"dynamic_decay", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

typedef struct ma_state {
    optim__wrapper_state w; /* first, for the wrapper plumbing */
    optim_var **model;      /* the variables of the latest step (_model_weights), borrowed */
    size_t nmodel;
} ma_state;

/* min(d, (1 + n) / (10 + n)) in float32, as tf.minimum. */
static float min_ratio(float d, float n)
{
    float r = (1.0f + n) / (10.0f + n);
    return d < r ? d : r;
}

/* average_decay after num_updates (MovingAverage.__init__), float32. */
static float ma_base_decay(double average_decay, double num_updates)
{
    float d = (float)average_decay;
    return isnan(num_updates) ? d : min_ratio(d, (float)num_updates);
}

/* MovingAverage._get_decay(step), float32. */
static float ma_decay(const optim_optimizer *opt, int64_t step)
{
    float d = ma_base_decay(optim_param_value(opt, P_AVERAGE_DECAY), optim_param_value(opt, P_NUM_UPDATES));
    float s = (float)step, start = (float)optim_param_value(opt, P_START_STEP);
    if (s < start) return 0.0f;
    if (optim_param_value(opt, P_DYNAMIC_DECAY) != 0) return min_ratio(d, s - start);
    return d;
}

static int ma_coefs(optim_optimizer *opt, int64_t step, double *coef)
{
    coef[0] = ma_decay(opt, step);
    return 1;
}

static void ma_rule(optim_dtype dt, void *var, void *slot, int64_t n, const double *coef)
{
    if (dt == OPTIM_F32) {
        const float om = 1.0f - (float)coef[0];
        const float *restrict v = var;
        float *restrict a = slot;
        for (int64_t i = 0; i < n; i++) a[i] = a[i] - (a[i] - v[i]) * om;
    } else {
        const double om = 1.0 - coef[0];
        const double *restrict v = var;
        double *restrict a = slot;
        for (int64_t i = 0; i < n; i++) a[i] = a[i] - (a[i] - v[i]) * om;
    }
}

static int ma_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, "average", OPTIM_SLOT_COPY, 0);
}

static int ma_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, const optim_step_options *o)
{
    /* Allocated first, so that nothing can fail after the step. */
    optim_var **model = optim__malloc(n * sizeof *model);
    if (!model) return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    int rc = optim__tfa_step(opt, pairs, n, o, ma_coefs, ma_rule);
    if (rc) {
        free(model);
        return rc;
    }
    /* _create_slots(var_list) sets _model_weights to this step's variables. */
    ma_state *st = optim_state(opt);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (pairs[i].grad.kind != OPTIM_GRAD_NONE) model[m++] = pairs[i].var;
    free(st->model);
    st->model = model;
    st->nmodel = m;
    return OPTIM_OK;
}

/* With num_updates, TF Addons' average_decay hyper is the float32 tensor
 * min(average_decay, (1 + n) / (10 + n)), and that is what get_config
 * writes. */
static int ma_get_config(optim_optimizer *opt, optim_config *cfg)
{
    int rc = optim__tfa_get_config(opt, cfg);
    if (rc) return rc;
    double nu = NAN, d = 0;
    if (optim_get_hyper(opt, "num_updates", &nu) || isnan(nu)) return OPTIM_OK;
    if (optim_get_hyper(opt, "average_decay", &d)) return OPTIM_EINVAL;
    cJSON *v = optim__json_exact_number((double)ma_base_decay(d, nu), 1);
    if (!v) return OPTIM_ENOMEM;
    if (!cJSON_ReplaceItemInObjectCaseSensitive(cfg->obj, "average_decay", v)) {
        cJSON_Delete(v);
        return OPTIM_ENOMEM;
    }
    return OPTIM_OK;
}

static void ma_destroy(optim_optimizer *opt)
{
    ma_state *st = optim_state(opt);
    free(st->model);
    st->model = NULL;
    st->nmodel = 0;
    optim__wrapper_destroy(opt);
}

const optim_class optim_moving_average_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "MovingAverage",
    .default_learning_rate = 0.0,
    .params = ma_params,
    .n_params = sizeof ma_params / sizeof *ma_params,
    .state_size = sizeof(ma_state),
    .validate = optim__tfa_validate,
    .create_slots = ma_create_slots,
    .step = ma_apply,
    .get_config = ma_get_config,
    .set_config = optim__tfa_set_config,
    .destroy = ma_destroy,
    .inner = optim__wrapper_inner,
};

/* ---- average weights (public) ---------------------------------------------------------------------------------- */

static int is_averaged(const optim_optimizer *opt)
{
    const optim_class *c = optim_class_of(opt);
    return c->step == ma_apply || c->step == optim_swa_class.step;
}

int optim_assign_average_vars(optim_optimizer *opt, optim_var *const *vars, size_t n, size_t *assigned)
{
    if (assigned) *assigned = 0;
    if (!opt) return OPTIM_EINVAL;
    opt->errmsg[0] = '\0';
    const char *cn = opt->cls.name;
    if (!is_averaged(opt))
        return optim_set_error(opt, OPTIM_EINVAL,
                               "optim_assign_average_vars: %s is not MovingAverage or SWA (TF "
                               "Addons' averaged optimizers)",
                               cn);
    if (n && !vars) return optim_set_error(opt, OPTIM_EINVAL, "%s: assign_average_vars: vars is NULL", cn);
    for (size_t i = 0; i < n; i++) {
        if (!vars[i])
            return optim_set_error(opt, OPTIM_EINVAL, "%s: assign_average_vars: vars[%zu] is NULL", cn, i);
        if (!same_as_tracked(opt, vars[i]))
            return optim_set_error(opt, OPTIM_ESTATE,
                                   "%s: assign_average_vars: variable '%s' is not the one this "
                                   "optimizer made an average for",
                                   cn, optim_var_name(vars[i]));
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        optim_var *avg = tfa_slot(opt, vars[i]);
        if (!avg) continue; /* TF Addons warns and skips it */
        memcpy(optim_var_data(vars[i]), optim_var_cdata(avg),
               (size_t)optim_var_numel(avg) * optim_dtype_size(optim_var_dtype(avg)));
        count++;
    }
    if (assigned) *assigned = count;
    return OPTIM_OK;
}

#define SWAP_LOOP(T, a, b, n)                        \
    do {                                             \
        T *restrict x_ = (a), *restrict y_ = (b);    \
        for (int64_t i_ = 0; i_ < (n); i_++) {       \
            T t_ = x_[i_];                           \
            x_[i_] = y_[i_];                         \
            y_[i_] = t_;                             \
        }                                            \
    } while (0)

int optim_swap_average_weights(optim_optimizer *opt)
{
    if (!opt) return OPTIM_EINVAL;
    opt->errmsg[0] = '\0';
    const char *cn = opt->cls.name;
    if (opt->cls.step != ma_apply)
        return optim_set_error(opt, OPTIM_EINVAL,
                               "optim_swap_average_weights: %s is not MovingAverage (TF Addons' "
                               "swap_weights is MovingAverage's)",
                               cn);
    const ma_state *st = optim_state(opt);
    if (!st->nmodel)
        return optim_set_error(opt, OPTIM_ESTATE,
                               "%s: swap_weights before any step: it swaps the variables of the "
                               "latest apply_gradients call with their averages",
                               cn);
    for (size_t i = 0; i < st->nmodel; i++)
        if (!same_as_tracked(opt, st->model[i]) || !tfa_slot(opt, st->model[i]))
            return optim_set_error(opt, OPTIM_ESTATE,
                                   "%s: swap_weights: variable '%s' is not the one this optimizer "
                                   "made an average for",
                                   cn, optim_var_name(st->model[i]));
    for (size_t i = 0; i < st->nmodel; i++) {
        optim_var *v = st->model[i], *a = tfa_slot(opt, v);
        int64_t n = optim_var_numel(v);
        if (optim_var_dtype(v) == OPTIM_F32) SWAP_LOOP(float, optim_var_data(v), optim_var_data(a), n);
        else SWAP_LOOP(double, optim_var_data(v), optim_var_data(a), n);
    }
    return OPTIM_OK;
}
