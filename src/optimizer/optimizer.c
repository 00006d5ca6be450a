/* The optimizer object: creation, hyperparameters and their kinds. */
#include "optimizer/impl.h"
#include "optimizer/keras3_options.h"
#include "optim/isa.h"
#include "optim/schedule.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

optim_options optim_options_defaults(void)
{
    optim_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.generation = OPTIM_KERAS3;
    return o;
}

optim_grad optim_grad_none(void)
{
    optim_grad g;
    memset(&g, 0, sizeof g);
    return g;
}

optim_grad optim_grad_dense(optim_tensor t)
{
    optim_grad g = optim_grad_none();
    g.kind = OPTIM_GRAD_DENSE;
    g.dense = t;
    return g;
}

optim_grad optim_grad_sparse(const int64_t *indices, int64_t n, optim_tensor values)
{
    optim_grad g = optim_grad_none();
    g.kind = OPTIM_GRAD_SPARSE;
    g.sparse.indices = indices;
    g.sparse.n = n;
    g.sparse.values = values;
    return g;
}

/* ---- params ---------------------------------------------------------------- */

const char *const *optim__choices(const optim_optimizer *opt, size_t i)
{
    if (i < OPTIM__N_BASE || !opt->cls.param_choices) return NULL;
    return opt->cls.param_choices[i - OPTIM__N_BASE];
}

int optim__param_in_gen(const optim_optimizer *opt, size_t i)
{
    return optim__flags_in_gen(opt->gen, opt->params[i]->flags);
}

long optim__param_find(const optim_optimizer *opt, const char *name, int *other_gen)
{
    if (other_gen) *other_gen = 0;
    for (size_t i = 0; i < opt->nparams; i++) {
        if (strcmp(opt->params[i]->name, name) != 0) continue;
        if (optim__param_in_gen(opt, i)) return (long)i;
        if (other_gen) *other_gen = 1;
    }
    return -1;
}

static const char *gen_name(optim_generation g)
{
    return g == OPTIM_LEGACY ? "legacy (is_legacy_optimizer: true)" : "Keras 3";
}

static int find_or_err(optim_optimizer *opt, const char *name, optim_error *err)
{
    int other = 0;
    if (!name)
        return optim__err(err, OPTIM_EINVAL, "%s: hyperparameter name is NULL", opt->cls.name);
    long i = optim__param_find(opt, name, &other);
    if (i >= 0) return (int)i;
    if (other)
        return optim__err(err, OPTIM_EKEY, "%s: '%s' is not an option of the %s generation",
                          opt->cls.name, name, gen_name(opt->gen));
    return optim__err(err, OPTIM_EKEY, "%s: unknown hyperparameter '%s'", opt->cls.name, name);
}

/* Reads the value of h at step `step`. */
static int eval_hyper(const optim_optimizer *opt, const optim_param *p, const optim__hyper *h,
                      int64_t step, double *out, optim_error *err)
{
    switch (h->kind) {
    case HYPER_NONE: *out = NAN; return OPTIM_OK;
    case HYPER_NUMBER: *out = h->number; return OPTIM_OK;
    case HYPER_VAR:
        *out = optim_var_get(h->var, 0);
        return optim__check_param_value(opt->cls.name, p, *out, " (from its variable)", err);
    case HYPER_FN:
        *out = h->fn(h->user);
        return optim__check_param_value(opt->cls.name, p, *out, " (returned by its callable)", err);
    case HYPER_SCHEDULE:
        *out = h->schedule(h->user, step);
        return optim__check_param_value(opt->cls.name, p, *out, " (from its schedule)", err);
    case HYPER_SCHEDULE_OBJ:
        *out = optim_schedule_value(h->sched, step);
        return optim__check_param_value(opt->cls.name, p, *out, " (from its schedule)", err);
    }
    return optim__err(err, OPTIM_ESTATE, "%s: %s has an unknown kind", opt->cls.name, p->name);
}

int optim__param_check(optim_optimizer *opt, size_t i, const optim__hyper *h, optim_error *err)
{
    const optim_param *p = opt->params[i];
    if (h->kind == HYPER_NONE && !(p->flags & OPTIM_PARAM_NULLABLE))
        return optim__err(err, OPTIM_ETYPE, "%s: %s cannot be None", opt->cls.name, p->name);
    if (h->kind >= HYPER_VAR && !(p->flags & OPTIM_PARAM_DYNAMIC))
        return optim__err(err, OPTIM_ETYPE,
                          "%s: %s must be a number; only hyperparameters such as learning_rate "
                          "may be variables, callables or schedules",
                          opt->cls.name, p->name);
    if (h->kind == HYPER_NUMBER) {
        int rc = optim__check_param_value(opt->cls.name, p, h->number, "", err);
        if (rc) return rc;
        size_t nchoices =
            p->type == OPTIM_PARAM_STRING ? optim__choice_count(optim__choices(opt, i)) : 0;
        if (p->type == OPTIM_PARAM_STRING && !isnan(h->number) && h->number >= (double)nchoices)
            return optim__err(err, OPTIM_ERANGE, "%s: %s is %g, expected a choice index below %zu",
                              opt->cls.name, p->name, h->number, nchoices);
    }
    if (h->kind == HYPER_VAR && (!h->var || optim_var_numel(h->var) != 1))
        return optim__err(err, OPTIM_ESHAPE, "%s: %s variable must hold exactly one element",
                          opt->cls.name, p->name);
    if ((h->kind == HYPER_FN && !h->fn) || (h->kind == HYPER_SCHEDULE && !h->schedule) ||
        (h->kind == HYPER_SCHEDULE_OBJ && !h->sched))
        return optim__err(err, OPTIM_EINVAL, "%s: %s function is NULL", opt->cls.name, p->name);
    return OPTIM_OK;
}

int optim__param_set(optim_optimizer *opt, size_t i, const optim__hyper *h, optim_error *err)
{
    int rc = optim__param_check(opt, i, h, err);
    if (rc) return rc;
    optim__hyper old = opt->hypers[i];
    opt->hypers[i] = *h;
    rc = optim__validate(opt, err);
    if (rc) opt->hypers[i] = old;
    else if (old.kind == HYPER_SCHEDULE_OBJ && old.sched != h->sched)
        optim_schedule_destroy(old.sched);
    return rc;
}

static int set_hyper(optim_optimizer *opt, const char *name, const optim__hyper *h)
{
    optim_error e;
    optim__err_clear(&e);
    int i = find_or_err(opt, name, &e);
    if (i < 0) return optim__opt_take(opt, &e);
    if (optim__param_set(opt, (size_t)i, h, &e)) return optim__opt_take(opt, &e);
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

int optim_set_hyper(optim_optimizer *opt, const char *name, double value)
{
    optim__hyper h = {0};
    h.kind = HYPER_NUMBER;
    h.number = value;
    if (isnan(value)) {
        int i = optim__param_find(opt, name ? name : "", NULL);
        if (i >= 0 && (opt->params[i]->flags & OPTIM_PARAM_NULLABLE)) h.kind = HYPER_NONE;
    }
    return set_hyper(opt, name, &h);
}

int optim_set_hyper_var(optim_optimizer *opt, const char *name, optim_var *scalar)
{
    optim__hyper h = {0};
    h.kind = HYPER_VAR;
    h.var = scalar;
    return set_hyper(opt, name, &h);
}

int optim_set_hyper_fn(optim_optimizer *opt, const char *name, optim_hyper_fn fn, void *user)
{
    optim__hyper h = {0};
    h.kind = HYPER_FN;
    h.fn = fn;
    h.user = user;
    return set_hyper(opt, name, &h);
}

int optim_set_hyper_schedule(optim_optimizer *opt, const char *name, optim_schedule_fn fn,
                             void *user)
{
    optim__hyper h = {0};
    h.kind = HYPER_SCHEDULE;
    h.schedule = fn;
    h.user = user;
    return set_hyper(opt, name, &h);
}

int optim_set_hyper_schedule_object(optim_optimizer *opt, const char *name, optim_schedule *s)
{
    /* One owner per schedule object: a second would free it twice. */
    for (size_t i = 0; s && i < opt->nparams; i++)
        if (opt->hypers[i].kind == HYPER_SCHEDULE_OBJ && opt->hypers[i].sched == s &&
            (!name || strcmp(opt->params[i]->name, name) != 0))
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "%s: this schedule object already belongs to '%s'; give each "
                                   "hyperparameter its own",
                                   opt->cls.name, opt->params[i]->name);
    optim__hyper h = {0};
    h.kind = HYPER_SCHEDULE_OBJ;
    h.sched = s;
    return set_hyper(opt, name, &h);
}

int optim_get_hyper(optim_optimizer *opt, const char *name, double *value)
{
    optim_error e;
    int i = find_or_err(opt, name, &e);
    if (i < 0) return optim__opt_take(opt, &e);
    if (!value) return optim__opt_err(opt, OPTIM_EINVAL, "optim_get_hyper: value is NULL");
    double v = NAN;
    if (eval_hyper(opt, opt->params[i], &opt->hypers[i], opt->iterations, &v, &e))
        return optim__opt_take(opt, &e);
    *value = v;
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

int optim_hyper_is_constant(const optim_optimizer *opt, const char *name)
{
    long i = name ? optim__param_find(opt, name, NULL) : -1;
    return i >= 0 && opt->hypers[i].kind <= HYPER_NUMBER;
}

int optim__resolve(optim_optimizer *opt, optim_error *err)
{
    for (size_t i = 0; i < opt->nparams; i++) {
        int rc =
            eval_hyper(opt, opt->params[i], &opt->hypers[i], opt->iterations, &opt->values[i], err);
        if (rc) return rc;
    }
    return OPTIM_OK;
}

double optim_param_value(const optim_optimizer *opt, size_t i)
{
    return i < opt->cls.n_params ? opt->values[OPTIM__N_BASE + i] : NAN;
}

double optim_learning_rate(const optim_optimizer *opt, optim_dtype dtype)
{
    double lr = opt->values[OPTIM__P_LEARNING_RATE];
    double decay = opt->gen == OPTIM_LEGACY ? opt->values[OPTIM__P_DECAY] : 0.0;
    if (optim_compute_dtype(dtype) == OPTIM_F32) {
        /* OptimizerV2._decayed_lr: all in the variable's dtype. */
        float l = (float)lr;
        if (decay > 0) l = l / (1.0f + (float)decay * (float)opt->iterations);
        return l;
    }
    if (decay > 0) lr = lr / (1.0 + decay * (double)opt->iterations);
    return lr;
}

int optim_set_num_threads(optim_optimizer *opt, int n)
{
    int limit = omp_get_thread_limit();
    if (n < 0 || n > limit)
        return optim__opt_err(opt, OPTIM_ERANGE, "num_threads is %d, expected 0..%d", n, limit);
    opt->num_threads = n;
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

/* ---- validation of cross-key rules ------------------------------------------ */

static int is_set(const optim_optimizer *opt, size_t i)
{
    return opt->hypers[i].kind != HYPER_NONE;
}

int optim__validate(optim_optimizer *opt, optim_error *err)
{
    const char *cn = opt->cls.name;
    int clips = is_set(opt, OPTIM__P_CLIPNORM) + is_set(opt, OPTIM__P_GLOBAL_CLIPNORM) +
        is_set(opt, OPTIM__P_CLIPVALUE);
    if (is_set(opt, OPTIM__P_CLIPNORM) && is_set(opt, OPTIM__P_GLOBAL_CLIPNORM))
        return optim__err(err, OPTIM_EINVAL,
                          "%s: clipnorm and global_clipnorm are both set; set at most one", cn);
    if (opt->gen == OPTIM_KERAS3 && clips > 1)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: only one of clipnorm, clipvalue and global_clipnorm can be set "
                          "(Keras 3)",
                          cn);
    /* use_ema, ema_momentum, ema_overwrite_frequency, loss_scale_factor,
     * gradient_accumulation_steps (Keras 3 only; keras3_options.c). */
    int rc = optim__k3_validate(opt, err);
    if (rc) return rc;
    if (!opt->cls.validate) return OPTIM_OK;
    optim_error local;
    optim__err_clear(&local);
    rc = opt->cls.validate(opt, &local);
    if (!rc) return OPTIM_OK;
    if (rc > 0) rc = OPTIM_EINVAL;
    if (local.msg[0]) return optim__err(err, rc, "%s", local.msg);
    return optim__err(err, rc, "%s: the class rejected this configuration: %.300s", cn,
                      opt->errmsg[0] ? opt->errmsg : optim_strerror(rc));
}

/* ---- lifetime ------------------------------------------------------------------ */

int optim__alloc(optim_optimizer **out, const optim_class *cls, optim_generation gen,
                 const char *name, optim_error *err)
{
    *out = NULL;
    int rc = optim__class_check(cls, err);
    if (!rc) rc = optim_isa(NULL, err); /* OPTIM_ISA names a level this CPU runs */
    if (rc) return rc;
    cls = optim__isa_builtin(cls);
    if (gen != OPTIM_KERAS3 && gen != OPTIM_LEGACY)
        return optim__err(err, OPTIM_EINVAL,
                          "generation is %d, expected OPTIM_KERAS3 or OPTIM_LEGACY", (int)gen);
    if ((gen == OPTIM_LEGACY && (cls->flags & OPTIM_CLASS_KERAS3_ONLY)) ||
        (gen == OPTIM_KERAS3 && (cls->flags & OPTIM_CLASS_LEGACY_ONLY)))
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s exists only in the %s generation; this config is %s", cls->name,
                          gen == OPTIM_LEGACY ? "Keras 3" : "legacy",
                          gen == OPTIM_LEGACY ? "legacy (is_legacy_optimizer: true)" : "Keras 3");
    optim_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    optim__class_copy(&opt->cls, cls);
    opt->gen = gen;
    opt->nparams = OPTIM__N_BASE + opt->cls.n_params;
    opt->params = calloc(opt->nparams, sizeof *opt->params);
    opt->hypers = calloc(opt->nparams, sizeof *opt->hypers);
    opt->values = calloc(opt->nparams, sizeof *opt->values);
    char def[128];
    optim__default_name(cls, gen, def, sizeof def);
    opt->name = optim__strdup(name && name[0] ? name : def);
    opt->state = optim__calloc(1, opt->cls.state_size);
    for (int d = 0; d < 2; d++) opt->coef[d] = optim__calloc(1, opt->cls.coef_size);
    if (!opt->params || !opt->hypers || !opt->values || !opt->name || !opt->state ||
        !opt->coef[0] || !opt->coef[1]) {
        optim_destroy(opt);
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < opt->nparams; i++) {
        const optim_param *p =
            i < OPTIM__N_BASE ? &optim__base_params()[i] : &opt->cls.params[i - OPTIM__N_BASE];
        opt->params[i] = p;
        double def = p->default_value;
        if (i == OPTIM__P_LEARNING_RATE) def = opt->cls.default_learning_rate;
        if (i == OPTIM__P_WEIGHT_DECAY && opt->cls.default_weight_decay > 0)
            def = opt->cls.default_weight_decay;
        opt->hypers[i].kind = isnan(def) ? HYPER_NONE : HYPER_NUMBER;
        opt->hypers[i].number = def;
    }
    if ((rc = optim__pattern_params_init(opt, err))) {
        optim_destroy(opt);
        return rc;
    }
    *out = opt;
    return OPTIM_OK;
}

int optim_create(optim_optimizer **out, const optim_class *cls, const optim_options *opts,
                 optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_create: out is NULL");
    *out = NULL;
    optim_options o = optim_options_defaults();
    if (opts) {
        if (opts->size < offsetof(optim_options, name) + sizeof(opts->name))
            return optim__err(err, OPTIM_EVERSION, "optim_options.size is %u, expected %zu",
                              (unsigned)opts->size, sizeof(optim_options));
        o = *opts;
    } else if (cls && (cls->flags & OPTIM_CLASS_LEGACY_ONLY)) {
        o.generation = OPTIM_LEGACY; /* its only generation */
    }
    optim_optimizer *opt;
    int rc = optim__alloc(&opt, cls, o.generation, o.name, err);
    if (rc) return rc;
    rc = optim__validate(opt, err);
    if (rc) {
        optim_destroy(opt);
        return rc;
    }
    optim__err_clear(err);
    *out = opt;
    return OPTIM_OK;
}

int optim_create_by_name(optim_optimizer **out, const char *class_name, const optim_options *opts,
                         optim_error *err)
{
    if (out) *out = NULL;
    const optim_class *cls = class_name ? optim_find_class(class_name) : NULL;
    if (!cls) return optim__unknown_class(err, class_name);
    return optim_create(out, cls, opts, err);
}

void optim_destroy(optim_optimizer *opt)
{
    if (!opt) return;
    if (opt->cls.destroy && opt->state) opt->cls.destroy(opt);
    for (size_t i = 0; i < opt->nslots; i++) optim_var_destroy(opt->slots[i].var);
    for (size_t i = 0; i < opt->nslot_names; i++) free(opt->slot_names[i]);
    free(opt->slot_names);
    free(opt->slots);
    free(opt->vars);
    optim__ptrmap_free(&opt->var_index);
    optim__weight_decay_free(opt);
    optim__pattern_params_free(opt);
    optim__weight_names_free(opt);
    optim__arena_free(&opt->arena);
    free(opt->transformers);
    free(opt->params);
    for (size_t i = 0; opt->hypers && i < opt->nparams; i++)
        if (opt->hypers[i].kind == HYPER_SCHEDULE_OBJ) optim_schedule_destroy(opt->hypers[i].sched);
    free(opt->hypers);
    free(opt->values);
    free(opt->name);
    free(opt->state);
    free(opt->coef[0]);
    free(opt->coef[1]);
    free(opt);
}

int optim_add_gradient_transformer(optim_optimizer *opt, optim_grad_fn fn, void *user)
{
    if (!fn) return optim__opt_err(opt, OPTIM_EINVAL, "gradient transformer fn is NULL");
    optim__fn_entry *t = realloc(opt->transformers, (opt->ntransformers + 1) * sizeof *t);
    if (!t) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    t[opt->ntransformers].fn = fn;
    t[opt->ntransformers].user = user;
    opt->transformers = t;
    opt->ntransformers++;
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

int optim_set_gradient_aggregator(optim_optimizer *opt, optim_grad_fn fn, void *user)
{
    opt->aggregator.fn = fn;
    opt->aggregator.user = user;
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}
