/* The step mechanics, validation and config that TF Addons' averaging
 * wrappers share (MovingAverage in moving_average.c, SWA in swa.c, Lookahead
 * in lookahead.c), written against the public step API (optim/step.h).
 *
 * TF Addons' wrappers are tf.keras OptimizerV2 subclasses whose
 * apply_gradients runs the base OptimizerV2 pipeline on themselves and calls
 * the inner optimizer's _resource_apply_* directly (average_wrapper.py,
 * lookahead.py). One step:
 *
 *   1. the pairs are checked; the wrapper's slots are created for the
 *      variables with a gradient (_create_all_weights, before any update);
 *   2. the inner optimizer steps with the WRAPPER's clipvalue / clipnorm /
 *      global_clipnorm, gradient transformers and aggregator (the inner's
 *      own are not used: its apply_gradients never runs), at the wrapper's
 *      iterations (`self._optimizer._iterations = self.iterations`), without
 *      constraints: optim_step with those overrides;
 *   3. the wrapper's rule runs on each variable with a gradient, on the
 *      value the inner update left, before the variable's constraint;
 *   4. constraints, then iterations += 1, for both (they share one counter).
 *
 * A wrapper stepped with overrides of its own (a wrapper around it) passes
 * them on: the outermost choice wins. A failed step changes nothing: the
 * wrapper's new slots are rolled back and the inner optimizer refuses before
 * updating anything. */
#include "wrappers/wrapper.h"

#include <stdio.h>
#include <string.h>

#include "core/parallel.h"

#define INNER_KEY "optimizer"

/* The wrapper's own slot of var (each TF Addons wrapper has one per
 * variable, named `slot`), NULL if the wrapper has not seen var. */
optim_var *optim__tfa_slot(const optim_optimizer *opt, const optim_var *var, const char *slot)
{
    optim_var *s = optim_get_slot(opt, var, slot);
    /* optim_get_slot falls through to the inner optimizer's slots. */
    return s && s != optim_get_slot(optim__wrapper_inner(opt), var, slot) ? s : NULL;
}

/* Whether var is still the variable the wrapper made its slot for. */
int optim__tfa_same_as_tracked(const optim_optimizer *opt, const optim_var *var, const char *slot)
{
    const optim_var *s = optim__tfa_slot(opt, var, slot);
    return !s ||
        (optim_var_numel(s) == optim_var_numel(var) && optim_var_dtype(s) == optim_var_dtype(var));
}

/* Step 1's checks, as the wrapper's own OptimizerV2.apply_gradients makes
 * them before anything changes; collects the variables with a gradient. */
static int check_pairs(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                       optim_var **vars, size_t *nv)
{
    const char *cn = optim_class_of(opt)->name;
    *nv = 0;
    for (size_t i = 0; i < n; i++) {
        const optim_grad_var *p = &pairs[i];
        if (p->var && p->grad.kind == OPTIM_GRAD_SPARSE && optim_var_constraint(p->var))
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "%s: sparse gradient of '%s': the variable has a constraint, "
                                   "which TF Addons' wrappers (tf.keras OptimizerV2) cannot apply "
                                   "to a sparse update",
                                   cn, optim_var_name(p->var));
    }
    int rc = optim_check_gradients(opt, pairs, n, 1);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (pairs[i].grad.kind != OPTIM_GRAD_NONE) vars[(*nv)++] = pairs[i].var;
    return OPTIM_OK;
}

/* The rule over chunks of every variable with a gradient and its slot. */
typedef struct rule_run {
    optim_var **vars, **slots;
    size_t nv;
    int64_t *first; /* the first chunk of each variable (nv + 1 entries) */
    void (*rule)(optim_dtype dt, void *var, void *slot, int64_t count, const double *coef);
    const double *coef;
} rule_run;

static void rule_chunk(const rule_run *r, int64_t c)
{
    size_t k = 0;
    while (r->first[k + 1] <= c) k++;
    const int64_t n = optim_var_numel(r->vars[k]), off = (c - r->first[k]) * OPTIM__CHUNK;
    const optim_dtype dt = optim_var_dtype(r->vars[k]);
    const size_t at = (size_t)off * optim_dtype_size(dt);
    r->rule(dt, (char *)optim_var_data(r->vars[k]) + at, (char *)optim_var_data(r->slots[k]) + at,
            optim__chunk_len(n, off), r->coef);
}

static void run_rule(const rule_run *r, int nthreads)
{
    const int64_t nc = r->first[r->nv];
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
    for (int64_t c = 0; c < nc; c++) rule_chunk(r, c);
}

/* Step 2: the inner optimizer's step with the wrapper's gradient options
 * and counter (unless the wrapper's caller gave its own), constraints left
 * to the wrapper. */
static int inner_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                      const optim_step_options *o, int64_t step)
{
    optim_optimizer *in = optim__wrapper_inner(opt);
    optim_step_options io = *o;
    io.flags |= OPTIM_STEP_NO_CONSTRAINTS | OPTIM_STEP_SET_ITERATIONS;
    io.iterations = step;
    if (!io.aggregation) io.aggregation = opt;
    if (!io.clipping) io.clipping = opt;
    if (!io.transformers) io.transformers = opt;
    if (!io.num_threads) io.num_threads = optim_num_threads(opt);
    int rc = optim_step(in, pairs, n, &io);
    if (rc) return optim_set_error(opt, rc, "%s: %s", optim_class_of(opt)->name, optim_errmsg(in));
    return OPTIM_OK;
}

/* Step 1's slots: the wrapper's own for the variables it has not seen
 * (which also resolves this step's values of its params). */
static int track_new(optim_optimizer *opt, optim_var **vars, size_t nv, const char *slot,
                     optim_var **scratch)
{
    size_t nfresh = 0;
    for (size_t k = 0; k < nv; k++)
        if (!optim__tfa_slot(opt, vars[k], slot)) scratch[nfresh++] = vars[k];
    return optim_track_variables(opt, scratch, nfresh);
}

/* One step of a TF Addons wrapper (the file comment's steps 1 to 4). */
int optim__tfa_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                    const optim_step_options *o, const optim__tfa_rule *rule)
{
    const char *cn = optim_class_of(opt)->name;
    if (!optim__wrapper_inner(opt))
        return optim_set_error(opt, OPTIM_ESTATE, "%s: no inner optimizer", cn);
    if (n && !pairs) return optim_set_error(opt, OPTIM_EINVAL, "%s: pairs is NULL", cn);
    /* Scratch memory of this step (reused step after step: no malloc). */
    rule_run r = {optim_step_scratch(opt, n * sizeof *r.vars),
                  optim_step_scratch(opt, n * sizeof *r.slots),
                  0,
                  optim_step_scratch(opt, (n + 1) * sizeof *r.first),
                  rule->rule,
                  NULL};
    int rc = r.vars && r.slots && r.first ? OPTIM_OK
                                          : optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    if (!rc) rc = check_pairs(opt, pairs, n, r.vars, &r.nv);
    const optim_savepoint sp = optim_savepoint_get(opt);
    if (!rc) rc = track_new(opt, r.vars, r.nv, rule->slot, r.slots);
    const int64_t step = optim_iterations(opt);
    double coef[4] = {0, 0, 0, 0};
    const int active = !rc && rule->coefs(opt, step, coef);
    r.coef = coef;
    r.first[0] = 0;
    for (size_t k = 0; !rc && k < r.nv; k++) {
        r.slots[k] = optim__tfa_slot(opt, r.vars[k], rule->slot);
        r.first[k + 1] = r.first[k] + optim__nchunks(optim_var_numel(r.vars[k]));
    }
    if (!rc && (rc = inner_step(opt, pairs, n, o, step))) optim_rollback(opt, &sp);
    const int nthreads = o->num_threads > 0 ? o->num_threads : optim_num_threads(opt);
    if (!rc && active) run_rule(&r, nthreads);
    if (!rc && !(o->flags & OPTIM_STEP_NO_CONSTRAINTS)) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
        for (size_t k = 0; k < r.nv; k++) optim_var_apply_constraint(r.vars[k]);
    }
    return rc ? rc : optim_set_iterations(opt, optim_iterations(optim__wrapper_inner(opt)));
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
    static const char *const taken[] = {"decay", "clipnorm", "clipvalue", "global_clipnorm"};
    int rc = optim__wrapper_require_inner(opt, INNER_KEY, err);
    if (rc) return rc;
    const char *cn = optim_class_of(opt)->name;
    char have[64], want[64];
    const char *name =
        optim_base_option_changed(opt, taken, 4, have, sizeof have, want, sizeof want);
    if (!name) return OPTIM_OK;
    if (strcmp(name, "learning_rate") == 0)
        return optim_error_set(
            err, OPTIM_EINVAL,
            "%s: learning_rate is %s; the learning rate is the inner optimizer's "
            "(TF Addons' %s forwards it there): set it in the nested \"%s\" "
            "config or on optim_wrapper_inner(opt)",
            cn, have, cn, INNER_KEY);
    return optim_error_set(err, OPTIM_EINVAL,
                           "%s: %s is %s; TF Addons' %s has no %s option (expected %s): set it on "
                           "the inner optimizer",
                           cn, name, have, cn, name, want);
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
    static const char *const clips[] = {"clipnorm", "clipvalue", "global_clipnorm"};
    int rc = optim__wrapper_put_inner(opt, cfg, INNER_KEY);
    if (rc) return rc;
    const optim_class *c = optim_class_of(opt);
    const char *keys[5 + 8];
    size_t nkeys = 0;
    keys[nkeys++] = "name";
    for (int k = 0; k < 3; k++) keys[nkeys++] = clips[k];
    keys[nkeys++] = INNER_KEY;
    for (size_t k = 0; k < c->n_params && nkeys < sizeof keys / sizeof *keys; k++)
        keys[nkeys++] = c->params[k].name;
    return optim_config_keep(cfg, keys, nkeys, clips, 3);
}
