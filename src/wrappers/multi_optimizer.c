/* MultiOptimizer (Keras 3.15): different optimizers for different variables.
 *
 * keras-team/keras keras/src/optimizers/multi_optimizer.py at commit
 * 3422977a5e38 (MultiOptimizer and OptimizerMap, added by 47e2e9702c8f and
 * 81a1fd973a6a; tests in multi_optimizer_test.py). The Keras 3 generation
 * (the legacy one is TF Addons', below).
 *
 * Config: {"optimizer_map": OPTIMIZER_MAP, "loss_scale_factor": null, "name":
 * ...}, where OPTIMIZER_MAP is Keras's serialized OptimizerMap,
 * {"module": "keras.optimizers", "class_name": "OptimizerMap", "config":
 * {"default_optimizer": OPT, "optimizer_map": {PATTERN: OPT, ...}},
 * "registered_name": null}, each OPT a Keras 3 optimizer config. No other
 * base key (learning_rate and the rest belong to the sub-optimizers).
 *
 * Which optimizer a variable gets, decided when it is first seen (Keras's
 * build, OptimizerMap.__getitem__ on variable.path, here the variable's
 * name): the entry whose PATTERN equals the name; else the one PATTERN that
 * matches the whole name (re.fullmatch: PATTERN is a Python regular
 * expression, matched as Python's re does by optim_name_patterns in its
 * full-match mode, src/core/pyre.c), an error if several do; else the
 * default. optim_multi_optimizer_assign gives explicit lists instead (the
 * C form of Keras's callable selector), which take precedence.
 *
 * The sub-optimizers, in Keras's order (the map's entries, then the
 * default), are refused when they are wrappers (Keras refuses
 * LossScaleOptimizer and MultiOptimizer inside) or legacy. loss_scale_factor
 * overrides theirs, None included, as Keras's constructor and setter do.
 *
 * A step (the class's step hook, optim/step.h) checks every pair against
 * this optimizer and against the sub-optimizer it goes to, creates the
 * slots of new variables in their sub-optimizers, then steps each
 * sub-optimizer that has a gradient with its pairs (in the order above) and
 * the caller's options, then iterations += 1. An inspect function is
 * refused: it would see only one sub-optimizer's gradients at a time. Each sub-optimizer counts
 * its own steps (Keras: a sub-optimizer without gradients does not step);
 * they are this optimizer's weights "optimizers/K/iterations" (float64),
 * after the sub-optimizers' slots. Limit: a failure inside sub-optimizer K
 * after the checks (a user callable, transformer or aggregator of K failing)
 * leaves the steps of sub-optimizers before K in place; the call reports it.
 *
 * The class's legacy generation is TF Addons' MultiOptimizer
 * ("Addons>MultiOptimizer", optimizer_specs): every hook below hands a
 * legacy optimizer to tfa_multi_optimizer.c; what both share is in
 * multi.c. */
#define _POSIX_C_SOURCE 200809L
#include "wrappers/multi.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/json.h"
#include "core/ptrmap.h"

#define MAP_KEY "optimizer_map"

typedef optim__multi_sub sub; /* iterations: "optimizers/K/iterations" */

typedef struct multi_state {
    optim__multi_subs base; /* base.n sub-optimizers; the last is the default */
    optim_name_patterns *patterns; /* pattern k is sub-optimizer k's (n - 1 of them) */
    optim__ptrmap route; /* variable -> index + 1, once seen */
    optim__ptrmap assigned; /* optim_multi_optimizer_assign */
} multi_state;

/* The class state of either generation. */
typedef union any_state {
    multi_state keras3;
    optim__tfa_multi_state tfa;
} any_state;

static int is_tfa(const optim_optimizer *opt) { return optim_generation_of(opt) == OPTIM_LEGACY; }

/* Sub-optimizer k's PATTERN, NULL for the default. */
static const char *pattern_of(const multi_state *st, size_t k)
{
    return k + 1 < st->base.n ? optim_name_patterns_sources(st->patterns)[k] : NULL;
}

static void multi_destroy(optim_optimizer *opt)
{
    if (is_tfa(opt)) {
        optim__tfa_multi_destroy(opt);
        return;
    }
    multi_state *st = optim_state(opt);
    optim__multi_free_subs(st->base.subs, st->base.n);
    optim_name_patterns_free(st->patterns);
    optim__ptrmap_free(&st->route);
    optim__ptrmap_free(&st->assigned);
}

/* ---- reading the OptimizerMap -------------------------------------------------------- */

/* One sub-optimizer from its serialized config; refuses wrappers and legacy. */
static int make_sub(const cJSON *obj, const char *where, optim_optimizer **out, optim_error *err)
{
    char *text = optim__json_print_exact(obj); /* numbers exact, in the form given */
    if (!text) return optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    optim_error local;
    int rc = optim_from_json(out, text, &local);
    cJSON_free(text);
    if (rc) return optim_error_set(err, rc, "MultiOptimizer: %s: %s", where, local.msg);
    const optim_class *c = optim_class_of(*out);
    const char *why = optim__multi_not_sub(c);
    if (!why && optim_generation_of(*out) == OPTIM_LEGACY)
        why = "a legacy optimizer cannot be a sub-optimizer (Keras 3 only)";
    if (!why) return OPTIM_OK;
    optim_error_set(err, OPTIM_EINVAL, "MultiOptimizer: %s is a %s: %s", where, c->name, why);
    optim_destroy(*out); /* c is its copy of the class */
    *out = NULL;
    return OPTIM_EINVAL;
}

static int add_entry(sub *s, const char *pattern, const cJSON *obj, optim_error *err)
{
    char where[300];
    snprintf(where, sizeof where, pattern ? "optimizer_map['%.200s']" : "default_optimizer",
             pattern);
    return make_sub(obj, where, &s->opt, err);
}

/* The map's PATTERNs, in entry order, compiled to match whole names. */
static int read_patterns(const cJSON *entries, size_t n, optim_name_patterns **out,
                         optim_error *err)
{
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    size_t k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, entries) keys[k++] = it->string;
    int rc =
        optim_name_patterns_compile_flags(out, keys, k, "MultiOptimizer: optimizer_map",
                                          OPTIM_NAME_PATTERNS_FULL | OPTIM_NAME_PATTERNS_KEYS, err);
    free(keys);
    return rc;
}

/* The OptimizerMap object into subs and patterns (all or nothing). */
static int read_map(const cJSON *v, sub **out, size_t *nout, optim_name_patterns **patterns,
                    optim_error *err)
{
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(v, "class_name");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(v, "config");
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(cfg, "default_optimizer");
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(cfg, "optimizer_map");
    if (!cJSON_IsObject(v) || !cJSON_IsString(cn) || strcmp(cn->valuestring, "OptimizerMap") != 0 ||
        !cJSON_IsObject(cfg))
        return optim_error_set(
            err, OPTIM_ETYPE,
            "MultiOptimizer: config key '%s' is not a serialized OptimizerMap "
            "({\"class_name\": \"OptimizerMap\", \"config\": {\"default_optimizer\": ..., "
            "\"optimizer_map\": {...}}})",
            MAP_KEY);
    if (!def || !(cJSON_IsNull(map) || cJSON_IsObject(map) || !map))
        return optim_error_set(err, OPTIM_ETYPE,
                               "MultiOptimizer: OptimizerMap needs a default_optimizer and an "
                               "optimizer_map that is an object of PATTERN: optimizer (or null)");
    const cJSON *entries = cJSON_IsObject(map) ? map : NULL;
    size_t n = (size_t)cJSON_GetArraySize(entries) + 1, k = 0;
    int rc = read_patterns(entries, n - 1, patterns, err);
    if (rc) return rc;
    sub *subs = calloc(n, sizeof *subs);
    if (!subs) {
        optim_name_patterns_free(*patterns);
        *patterns = NULL;
        return optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, entries)
    {
        if ((rc = add_entry(&subs[k], it->string, it, err))) break;
        k++;
    }
    if (!rc && !(rc = add_entry(&subs[k], NULL, def, err))) k++;
    if (rc) {
        optim__multi_free_subs(subs, k + 1);
        optim_name_patterns_free(*patterns);
        *patterns = NULL;
        return rc;
    }
    *out = subs;
    *nout = n;
    return OPTIM_OK;
}

static int multi_set_config(optim_optimizer *opt, const char *key, const char *json,
                            optim_error *err)
{
    if (is_tfa(opt)) return optim__tfa_multi_set_config(opt, key, json, err);
    if (strcmp(key, "optimizer_specs") == 0)
        return optim_error_set(err, OPTIM_EKEY,
                               "MultiOptimizer: 'optimizer_specs' is TF Addons' MultiOptimizer's "
                               "key (tf.keras 2, legacy); this config reads as Keras 3's, which "
                               "takes '%s': write the class as \"Addons>MultiOptimizer\" (or "
                               "add \"is_legacy_optimizer\": true)",
                               MAP_KEY);
    if (strcmp(key, MAP_KEY) != 0) return OPTIM_EKEY;
    multi_state *st = optim_state(opt);
    if (st->base.subs)
        return optim_error_set(err, OPTIM_EINVAL, "MultiOptimizer: '%s' given twice", MAP_KEY);
    cJSON *v = optim__json_parse(json, NULL, 0);
    if (!v)
        return optim_error_set(err, OPTIM_EPARSE,
                               "MultiOptimizer: config key '%s' is not valid JSON", MAP_KEY);
    int rc = read_map(v, &st->base.subs, &st->base.n, &st->patterns, err);
    cJSON_Delete(v);
    return rc;
}

/* ---- validate: base keys, loss_scale_factor, the counters ------------------------------ */

/* Keras's MultiOptimizer takes no base argument but loss_scale_factor (and
 * fixes learning_rate at 0, the class's default). */
static int check_base_defaults(optim_optimizer *opt, optim_error *err)
{
    static const char *const taken[] = {"loss_scale_factor"};
    const char *name = optim_base_option_changed(opt, taken, 1, NULL, 0, NULL, 0);
    if (!name) return OPTIM_OK;
    return optim_error_set(err, OPTIM_EINVAL,
                           "MultiOptimizer does not take `%s`; set it on the sub-optimizers "
                           "(in the OptimizerMap, or with optim_wrapper_inner_at)",
                           name);
}

static int multi_validate(optim_optimizer *opt, optim_error *err)
{
    if (is_tfa(opt)) return optim__tfa_multi_validate(opt, err);
    multi_state *st = optim_state(opt);
    if (!st->base.subs)
        return optim_error_set(err, OPTIM_EINVAL,
                               "MultiOptimizer: no sub-optimizers; give config key '%s' (an "
                               "OptimizerMap with at least a default_optimizer)",
                               MAP_KEY);
    int rc = check_base_defaults(opt, err);
    double lsf = NAN;
    if (!rc) optim_get_hyper(opt, "loss_scale_factor", &lsf);
    for (size_t k = 0; !rc && k < st->base.n; k++)
        if (optim_set_hyper(st->base.subs[k].opt, "loss_scale_factor", lsf))
            rc = optim_error_set(err, OPTIM_EINVAL, "MultiOptimizer: sub-optimizer %zu: %s", k,
                                 optim_errmsg(st->base.subs[k].opt));
    return rc ? rc : optim__multi_add_counters(opt, "optimizers", err);
}

/* ---- get_config ------------------------------------------------------------------------ */

/* An optimizer as Keras 3 serializes a public class, "module" first and
 * "registered_name" last (as given when optim_serialize writes them), as
 * raw text so that its numbers keep their form. In that envelope a class
 * read as tf-keras 2.11-2.12's "Custom>RMSprop" is written "RMSprop", as
 * optim_serialize writes one read in the envelope: "Custom>" with a module
 * would load back as "RMSprop" and serialize differently. */
static cJSON *serialized(optim_optimizer *o)
{
    static const char head[] = "{\"class_name\":\"";
    char *text = optim_serialize(o);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    const int has = cJSON_GetObjectItemCaseSensitive(v, "module") != NULL;
    cJSON_Delete(v);
    size_t len = text ? strlen(text) : 0;
    char *full = text && !has ? malloc(len + 64) : NULL;
    size_t at = 1; /* text is {...}: its members from here */
    const char *key = "";
    if (full && strncmp(text, head, sizeof head - 1) == 0) {
        at = sizeof head - 1;
        key = head + 1;
        if (strncmp(text + at, "Custom>", 7) == 0) at += 7;
    }
    if (full)
        snprintf(full, len + 64,
                 "{\"module\":\"keras.optimizers\",%s%.*s,\"registered_name\":null}", key,
                 (int)(len - 1 - at), text + at);
    cJSON *raw = has ? cJSON_CreateRaw(text) : full ? cJSON_CreateRaw(full) : NULL;
    optim_free(text);
    free(full);
    return raw;
}

static cJSON *map_json(const multi_state *st)
{
    cJSON *o = cJSON_CreateObject(), *cfg = cJSON_CreateObject(), *map = cJSON_CreateObject();
    int ok = o && cfg && map && cJSON_AddStringToObject(o, "module", "keras.optimizers") &&
        cJSON_AddStringToObject(o, "class_name", "OptimizerMap");
    const size_t n = st->base.n;
    ok =
        ok && cJSON_AddItemToObject(cfg, "default_optimizer", serialized(st->base.subs[n - 1].opt));
    for (size_t k = 0; ok && k + 1 < n; k++)
        ok = cJSON_AddItemToObject(map, pattern_of(st, k), serialized(st->base.subs[k].opt));
    ok = ok && cJSON_AddItemToObject(cfg, "optimizer_map", map);
    if (ok) map = NULL;
    ok = ok && cJSON_AddItemToObject(o, "config", cfg);
    if (ok) cfg = NULL;
    ok = ok && cJSON_AddNullToObject(o, "registered_name");
    cJSON_Delete(map);
    cJSON_Delete(cfg);
    if (!ok) cJSON_Delete(o);
    return ok ? o : NULL;
}

static int multi_get_config(optim_optimizer *opt, optim_config *cfg)
{
    if (is_tfa(opt)) return optim__tfa_multi_get_config(opt, cfg);
    int rc = optim__multi_put_json(cfg, MAP_KEY, map_json(optim_state(opt)));
    static const char *const order[] = {MAP_KEY, "loss_scale_factor", "name"};
    return rc ? rc : optim__finite_config(opt, cfg, order, 3);
}

/* ---- routing ------------------------------------------------------------------------------ */

/* OptimizerMap.__getitem__: the exact key, else the one full match, else
 * the default; explicit assignments first. */
static int route_of(optim_optimizer *opt, const optim_var *var, size_t *k, optim_error *err)
{
    multi_state *st = optim_state(opt);
    size_t v;
    if (optim__ptrmap_get(&st->assigned, var, &v) || optim__ptrmap_get(&st->route, var, &v)) {
        *k = v;
        return OPTIM_OK;
    }
    const char *name = optim_var_name(var);
    for (size_t i = 0; i + 1 < st->base.n; i++)
        if (strcmp(pattern_of(st, i), name) == 0) {
            *k = i;
            return OPTIM_OK;
        }
    const long hit = optim_name_patterns_find(st->patterns, name, 0);
    const long again = hit < 0 ? -1 : optim_name_patterns_find(st->patterns, name, (size_t)hit + 1);
    if (again >= 0)
        return optim_error_set(err, OPTIM_EINVAL,
                               "MultiOptimizer: multiple optimizers assigned to "
                               "variable '%s' (patterns '%s' and '%s' both match it)",
                               name, pattern_of(st, (size_t)hit), pattern_of(st, (size_t)again));
    *k = hit < 0 ? st->base.n - 1 : (size_t)hit;
    return OPTIM_OK;
}

/* A variable seen for the first time: its slots in its sub-optimizer. */
static int multi_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    if (is_tfa(opt)) return optim__tfa_multi_create_slots(opt, var, err);
    multi_state *st = optim_state(opt);
    size_t k;
    int rc = route_of(opt, var, &k, err);
    if (rc) return rc;
    if (optim__ptrmap_put(&st->route, var, k))
        return optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    optim_optimizer *in = st->base.subs[k].opt;
    if (optim_track_variables(in, &var, 1))
        return optim_error_set(err, OPTIM_EINVAL, "MultiOptimizer: sub-optimizer %zu (%s): %s", k,
                               optim_class_of(in)->name, optim_errmsg(in));
    return OPTIM_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

/* One pair with a gradient: known to this optimizer once built, and
 * acceptable to the sub-optimizer it goes to (shapes, dtypes, sparse
 * support...), both asked with optim_check_gradients. */
static int check_pair(optim_optimizer *opt, const optim_grad_var *p, size_t *route)
{
    int rc = optim_check_gradients(opt, p, 1, 0);
    if (rc) return rc;
    optim_error err;
    if ((rc = route_of(opt, p->var, route, &err))) return optim_set_error(opt, rc, "%s", err.msg);
    optim_optimizer *in = ((multi_state *)optim_state(opt))->base.subs[*route].opt;
    if ((rc = optim_check_gradients(in, p, 1, 0)))
        return optim_set_error(opt, rc, "MultiOptimizer: %s", optim_errmsg(in));
    return OPTIM_OK;
}

/* Checks every pair before anything changes; routes[i] gets pair i's
 * sub-optimizer, vars the variables with a gradient. */
static int check_pairs(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, size_t *routes,
                       optim_var **vars, size_t *nvars)
{
    int rc = optim__multi_check_vars(opt, pairs, n);
    *nvars = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (pairs[i].grad.kind != OPTIM_GRAD_NONE && !(rc = check_pair(opt, &pairs[i], &routes[i])))
            vars[(*nvars)++] = pairs[i].var;
    if (!rc && *nvars == 0)
        rc = optim_set_error(opt, OPTIM_EINVAL,
                             "MultiOptimizer: no gradients provided for any variable (%zu "
                             "pairs, all without gradient)",
                             n);
    return rc ? rc : optim__multi_check_counter(opt);
}

/* Tracks vars, creating their slots in their sub-optimizers. If that fails
 * for a later variable, the sub-optimizers and the routes are put back as
 * they were (slots made for earlier variables destroyed, the
 * sub-optimizers' own weights kept), as the base's stage 5 does for a
 * plain optimizer: a failed step changes nothing. was_new: nvars bytes. */
static int track_all(optim_optimizer *opt, optim_var **vars, size_t nvars, unsigned char *was_new)
{
    multi_state *st = optim_state(opt);
    const size_t nsub = st->base.n;
    optim_savepoint *sp = optim_step_scratch(opt, nsub * sizeof *sp);
    if (!sp) return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    for (size_t k = 0; k < nsub; k++) sp[k] = optim_savepoint_get(st->base.subs[k].opt);
    for (size_t i = 0; i < nvars; i++) was_new[i] = !optim__ptrmap_get(&st->route, vars[i], NULL);
    int rc = optim_track_variables(opt, vars, nvars);
    if (!rc) return OPTIM_OK;
    for (size_t k = 0; k < nsub; k++) optim_rollback_variables(st->base.subs[k].opt, &sp[k]);
    for (size_t i = 0; i < nvars; i++)
        if (was_new[i]) optim__ptrmap_del(&st->route, vars[i]);
    return rc;
}

/* Sub-optimizer k steps on its pairs, from the iterations it counted,
 * with the caller's options (io: without a counter to set). */
static int step_sub(optim_optimizer *opt, size_t k, const optim_grad_var *sub_pairs, size_t m,
                    const optim_step_options *io)
{
    const char *pattern = pattern_of(optim_state(opt), k);
    char label[300];
    snprintf(label, sizeof label, pattern ? "optimizer_map['%.250s']" : "default_optimizer",
             pattern);
    return optim__multi_step_sub(opt, k, sub_pairs, m, io, label, k > 0);
}

/* The step: buffers from the step's scratch memory, reused step after
 * step. The sub-optimizers step with the caller's options; the counter
 * optim_step may have set (OPTIM_STEP_SET_ITERATIONS) is this optimizer's,
 * each sub-optimizer starts from its own. */
static int multi_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                      const optim_step_options *o)
{
    if (is_tfa(opt)) return optim__tfa_multi_step(opt, pairs, n, o);
    multi_state *st = optim_state(opt);
    int rc = optim__multi_refuse_options(opt, o);
    if (rc) return rc;
    optim_step_options io = *o;
    io.flags &= ~OPTIM_STEP_SET_ITERATIONS;
    size_t *routes = optim_step_scratch(opt, n * sizeof *routes), nvars = 0;
    optim_var **vars = optim_step_scratch(opt, n * sizeof *vars);
    optim_grad_var *sub_pairs = optim_step_scratch(opt, n * sizeof *sub_pairs);
    unsigned char *was_new = optim_step_scratch(opt, n);
    rc = routes && vars && sub_pairs && was_new
        ? OPTIM_OK
        : optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    if (!rc) rc = check_pairs(opt, pairs, n, routes, vars, &nvars);
    if (!rc) rc = track_all(opt, vars, nvars, was_new);
    for (size_t k = 0; !rc && k < st->base.n; k++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (pairs[i].grad.kind != OPTIM_GRAD_NONE && routes[i] == k) sub_pairs[m++] = pairs[i];
        if (m) rc = step_sub(opt, k, sub_pairs, m, &io);
    }
    if (rc || (o->flags & OPTIM_STEP_NO_ADVANCE)) return rc;
    return optim_set_iterations(opt, optim_iterations(opt) + 1);
}

/* ---- explicit lists ----------------------------------------------------------------------- */

int optim_multi_optimizer_assign(optim_optimizer *opt, optim_var *const *vars, size_t n, size_t k)
{
    if (!opt) return OPTIM_EINVAL;
    if (optim_class_of(opt)->inner_at != optim__multi_inner_at)
        return optim_set_error(opt, OPTIM_EINVAL,
                               "optim_multi_optimizer_assign: %s is not a MultiOptimizer",
                               optim_class_of(opt)->name);
    multi_state *st = optim_state(opt);
    if (k >= st->base.n)
        return optim_set_error(opt, OPTIM_ERANGE,
                               "optim_multi_optimizer_assign: sub-optimizer %zu, expected "
                               "0..%zu",
                               k, st->base.n - 1);
    if (n && !vars)
        return optim_set_error(opt, OPTIM_EINVAL, "optim_multi_optimizer_assign: vars is NULL");
    for (size_t i = 0; i < n; i++)
        if (!vars[i])
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "optim_multi_optimizer_assign: vars[%zu] is NULL", i);
    if (is_tfa(opt)) return optim__tfa_multi_assign(opt, vars, n, k);
    for (size_t i = 0; i < n; i++) {
        size_t was;
        if (optim__ptrmap_get(&st->route, vars[i], &was) && was != k)
            return optim_set_error(opt, OPTIM_ESTATE,
                                   "optim_multi_optimizer_assign: variable '%s' already "
                                   "has its slots in sub-optimizer %zu",
                                   optim_var_name(vars[i]), was);
    }
    for (size_t i = 0; i < n; i++)
        if (optim__ptrmap_put(&st->assigned, vars[i], k)) {
            for (size_t j = 0; j < i; j++) optim__ptrmap_del(&st->assigned, vars[j]);
            return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
        }
    return optim_set_error(opt, OPTIM_OK, "%s", "");
}

const optim_class optim_multi_optimizer_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "MultiOptimizer",
    .default_learning_rate = 0.0,
    .state_size = sizeof(any_state),
    .validate = multi_validate,
    .create_slots = multi_create_slots,
    .step = multi_step,
    .get_config = multi_get_config,
    .set_config = multi_set_config,
    .destroy = multi_destroy,
    .inner_at = optim__multi_inner_at,
    .keras3_module = "keras.optimizers",
    .tfa_name = "MultiOptimizer",
};
