/* MultiOptimizer (TF Addons): each optimizer steps the variables its spec
 * names. The legacy generation of class MultiOptimizer (the Keras 3
 * generation, with an OptimizerMap, is in multi_optimizer.c, which holds
 * the class table and hands every hook of a legacy optimizer to this file).
 *
 * tensorflow/addons tensorflow_addons/optimizers/discriminative_layer_training.py
 * at d208d75 (MultiOptimizer: __init__, apply_gradients, get_config,
 * create_optimizer_spec, maybe_initialize_optimizer_spec; tests in
 * tests/discriminative_layer_training_test.py). Registered as
 * "Addons>MultiOptimizer"; ULMFiT's discriminative fine-tuning
 * (arXiv:1801.06146).
 *
 * Config, as TF Addons writes it (OptimizerV2.get_config, then its own):
 * {"name": "MultiOptimizer", clipnorm / clipvalue / global_clipnorm when
 * set, "optimizer_specs": [{"optimizer": OPT, "weights": [NAME, ...]},
 * ...]}. OPT is a serialized tf.keras optimizer, read as
 * tf.keras.optimizers.deserialize reads it (maybe_initialize_optimizer_spec):
 * without "is_legacy_optimizer" a non-empty config is a legacy optimizer;
 * with "is_legacy_optimizer": false it is tf-keras's new-style optimizer
 * (what tf.keras.optimizers.Adam is from TF 2.11 on), here the Keras 3
 * generation in tf-keras's form. A Keras 3 optimizer in any other form (a
 * class tf-keras does not have, Keras 3-only keys, a bare name) is refused,
 * and so is a wrapper. tf.keras 2.9-2.12's JSON encoder marks each OPT it
 * wrote "__passive_serialization__": true: read, and written back. Each
 * NAME is the name of a variable (create_optimizer_spec: var.name of each
 * of the layers' weights, "dense/kernel:0"). OptimizerV2's `decay` is
 * accepted and not written back, as there; the clip options are written
 * back but, as in TF Addons (whose apply_gradients replaces the base's),
 * never applied: each optimizer clips with its own. `lr` / learning_rate
 * are refused (they belong to the spec's optimizers).
 *
 * Which variables: a NAME selects the variable whose name equals it, or is
 * it without TF's output suffix ":0" (so TF's "dense/kernel:0" selects
 * optim's "dense/kernel", and a variable named "dense/kernel:0" too).
 * optim_multi_optimizer_assign(opt, vars, n, k) adds the variables' names
 * to spec k's weights, with ":0" as TF writes them (unless the name ends in
 * ":" and digits), as create_optimizer_spec does for a layer's weights, so
 * that they are written back. apply_gradients, as TF Addons':
 *
 *   - a variable no spec names is skipped: not updated, no slots (TF Addons
 *     drops its gradient without a word);
 *   - a variable that several specs name is stepped by each, in spec order,
 *     each on the value the one before left (TF Addons' test_model: Adam on
 *     the whole model, SGD on its last layer);
 *   - spec k's optimizer steps on its pairs in call order, with its own
 *     clipping, learning rate, slots and step count, and only when it has
 *     pairs (its apply_gradients([]) is a no-op that leaves its iterations);
 *     pairs that all lack a gradient are an error, as its
 *     filter_empty_gradients raises;
 *   - then this optimizer's iterations += 1, even when nothing stepped.
 *
 * Every check comes first (pairs, each spec's optimizer's checks of its
 * pairs), then the slots of new variables are created in each spec's
 * optimizer, all of them or none; then the optimizers step in spec order.
 * Limit, as in Keras 3's generation: a failure inside optimizer K after the
 * checks leaves the steps of those before it in place; the call says so.
 *
 * Refused, where TF Addons has no meaning to give (messages say which):
 * optimizer_specs missing or null (TF Addons' RuntimeError), empty (nothing
 * could ever step), a spec with other keys than optimizer and weights, a
 * NAME that is not a non-empty string or comes twice in one spec (TF Addons
 * would step that variable twice in one call, with one step count).
 *
 * Weights: iterations, each spec's optimizer's slots in spec order (each
 * optimizer's own order: its slot kinds, each over its variables in the
 * order they first had gradients, as its _create_slots(var_list) makes
 * them), then "optimizer_specs/K/iterations", optimizer K's step count
 * (float64, exact integers: the optimizers count apart, as in TF Addons,
 * where each is a tracked object of its own). optim_wrapper_inner_at(opt,
 * k) is spec k's optimizer, whose optim_get_weights lists its iterations
 * and slots as its TF get_weights does. optim_build creates the slots the
 * optimizers would create at a first step with all those variables (one
 * batch per optimizer until its next step). */
#include "wrappers/multi.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/json.h"
#include "optimizer/slot_order.h"

#define SPECS_KEY "optimizer_specs"
#define PASSIVE "__passive_serialization__"
#define CN "MultiOptimizer"

struct optim__tfa_spec {
    char **names; /* its "weights", in order */
    size_t n, cap;
    int passive; /* its optimizer came with "__passive_serialization__": true */
    size_t open_from; /* the optimizer's slots before those made since its last step */
};

struct optim__tfa_index {
    const char *name;
    size_t spec;
};

static optim__tfa_multi_state *state(const optim_optimizer *opt) { return optim_state(opt); }

static void free_specs(optim__tfa_spec *specs, size_t n)
{
    for (size_t k = 0; specs && k < n; k++) {
        for (size_t i = 0; i < specs[k].n; i++) free(specs[k].names[i]);
        free(specs[k].names);
    }
    free(specs);
}

static void clear(optim__tfa_multi_state *st)
{
    optim__multi_free_subs(st->base.subs, st->base.n);
    free_specs(st->specs, st->base.n);
    free(st->index);
    memset(st, 0, sizeof *st);
}

void optim__tfa_multi_destroy(optim_optimizer *opt) { clear(state(opt)); }

/* ---- names ------------------------------------------------------------------------------ */

/* strcmp(e, a followed by b). */
static int cmp_joined(const char *e, const char *a, const char *b)
{
    const size_t la = strlen(a);
    const int c = strncmp(e, a, la);
    return c ? c : strcmp(e + la, b);
}

static int cmp_index(const void *pa, const void *pb)
{
    const optim__tfa_index *a = pa, *b = pb;
    const int c = strcmp(a->name, b->name);
    return c ? c : (a->spec > b->spec) - (a->spec < b->spec);
}

/* Every spec's names, sorted (name, then spec). */
static int build_index(optim__tfa_multi_state *st)
{
    size_t total = 0, at = 0;
    for (size_t k = 0; k < st->base.n; k++) total += st->specs[k].n;
    optim__tfa_index *ix = malloc((total ? total : 1) * sizeof *ix);
    if (!ix) return OPTIM_ENOMEM;
    for (size_t k = 0; k < st->base.n; k++)
        for (size_t i = 0; i < st->specs[k].n; i++)
            ix[at++] = (optim__tfa_index){st->specs[k].names[i], k};
    qsort(ix, total, sizeof *ix, cmp_index);
    free(st->index);
    st->index = ix;
    st->nindex = total;
    return OPTIM_OK;
}

/* Marks each spec with a name equal to `name` followed by `suffix`. */
static void mark_equal(const optim__tfa_multi_state *st, const char *name, const char *suffix,
                       unsigned char *marks)
{
    size_t lo = 0, hi = st->nindex;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (cmp_joined(st->index[mid].name, name, suffix) < 0) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < st->nindex && cmp_joined(st->index[lo].name, name, suffix) == 0; lo++)
        marks[st->index[lo].spec] = 1;
}

/* marks[k] (base.n bytes): whether spec k names the variable `name`. */
static void specs_of(const optim__tfa_multi_state *st, const char *name, unsigned char *marks)
{
    memset(marks, 0, st->base.n);
    mark_equal(st, name, "", marks);
    mark_equal(st, name, ":0", marks);
}

static int add_name(optim__tfa_spec *sp, const char *name)
{
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? 2 * sp->cap : 8;
        char **grown = realloc(sp->names, cap * sizeof *grown);
        if (!grown) return OPTIM_ENOMEM;
        sp->names = grown;
        sp->cap = cap;
    }
    if (!(sp->names[sp->n] = optim__strdup(name))) return OPTIM_ENOMEM;
    sp->n++;
    return OPTIM_OK;
}

/* ---- reading optimizer_specs ------------------------------------------------------------ */

/* Spec k's "weights": distinct non-empty strings. */
static int read_weights(const cJSON *w, size_t k, optim__tfa_spec *sp, optim_error *err)
{
    if (!cJSON_IsArray(w))
        return optim_error_set(err, OPTIM_ETYPE,
                               CN ": optimizer_specs[%zu]['weights'] is %s, expected a list of "
                                  "variable names",
                               k, optim__json_type_name(w));
    const cJSON *item;
    size_t i = 0;
    cJSON_ArrayForEach(item, w)
    {
        if (!cJSON_IsString(item) || !item->valuestring[0])
            return optim_error_set(err, OPTIM_ETYPE,
                                   CN ": optimizer_specs[%zu]['weights'][%zu] is %s, expected a "
                                      "variable name (a non-empty string)",
                                   k, i,
                                   cJSON_IsString(item) ? "empty" : optim__json_type_name(item));
        for (size_t j = 0; j < sp->n; j++)
            if (strcmp(sp->names[j], item->valuestring) == 0)
                return optim_error_set(err, OPTIM_EINVAL,
                                       CN
                                       ": optimizer_specs[%zu]['weights'] names '%.200s' twice "
                                       "(entries %zu and %zu): TF Addons would step that variable "
                                       "twice in one call",
                                       k, item->valuestring, j, i);
        if (add_name(sp, item->valuestring))
            return optim_error_set(err, OPTIM_ENOMEM, "out of memory");
        i++;
    }
    return OPTIM_OK;
}

/* Whether a Keras 3 generation optimizer is in tf-keras's new-style form
 * (its config says "is_legacy_optimizer": false). */
static int tf_keras_form(optim_optimizer *o)
{
    char *text = optim_get_config(o);
    cJSON *cfg = text ? cJSON_Parse(text) : NULL;
    const int yes = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cfg, "is_legacy_optimizer"));
    cJSON_Delete(cfg);
    optim_free(text);
    return yes;
}

/* The optimizer o may be spec k's, or why not (NULL). */
static const char *refusal(optim_optimizer *o)
{
    const char *why = optim__multi_not_sub(optim_class_of(o));
    if (why || optim_generation_of(o) == OPTIM_LEGACY || tf_keras_form(o)) return why;
    return "a Keras 3 optimizer cannot be in TF Addons' MultiOptimizer, which runs tf.keras 2's: "
           "give a legacy optimizer's config, or tf-keras's new-style one (with "
           "\"is_legacy_optimizer\": false)";
}

/* Whether obj is read as legacy: a non-empty config without
 * "is_legacy_optimizer" (tf.keras.optimizers.deserialize). */
static int defaults_to_legacy(const cJSON *obj)
{
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(obj, "config");
    return cJSON_IsObject(cfg) && cfg->child &&
        !cJSON_GetObjectItemCaseSensitive(cfg, "is_legacy_optimizer");
}

/* optimizer_specs[k]['optimizer'] without its passive mark, in text. */
static char *optimizer_text(const cJSON *v, size_t k, int *passive, optim_error *err)
{
    const cJSON *mark = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, PASSIVE) : NULL;
    if (mark && !cJSON_IsTrue(mark)) {
        optim_error_set(err, OPTIM_ETYPE,
                        CN ": optimizer_specs[%zu]['optimizer']['" PASSIVE "'] is %s, expected "
                           "true (as tf.keras's JSON encoder writes it)",
                        k, optim__json_type_name(mark));
        return NULL;
    }
    *passive = mark != NULL;
    cJSON *copy = cJSON_Duplicate(v, 1);
    if (copy && mark) cJSON_DeleteItemFromObjectCaseSensitive(copy, PASSIVE);
    char *text = copy ? optim__json_print_exact(copy) : NULL;
    cJSON_Delete(copy);
    if (!text) optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    return text;
}

/* Spec k's optimizer, read as TF Addons' maybe_initialize_optimizer_spec
 * reads it. */
static int read_optimizer(const cJSON *v, size_t k, optim_optimizer **out, int *passive,
                          optim_error *err)
{
    char *text = optimizer_text(v, k, passive, err);
    if (!text) return err->code;
    optim_error local;
    const int legacy = defaults_to_legacy(v);
    int rc = legacy ? optim_from_json_as(out, text, OPTIM_LEGACY, &local)
                    : optim_from_json(out, text, &local);
    free(text);
    if (rc)
        return optim_error_set(err, rc, CN ": optimizer_specs[%zu]['optimizer']%s: %s", k,
                               legacy
                                   ? " (read as legacy, as tf.keras.optimizers.deserialize reads "
                                     "a config without \"is_legacy_optimizer\")"
                                   : "",
                               local.msg);
    const char *why = refusal(*out);
    if (!why) return OPTIM_OK;
    optim_error_set(err, OPTIM_EINVAL, CN ": optimizer_specs[%zu]['optimizer'] is a %s: %s", k,
                    optim_class_of(*out)->name, why);
    optim_destroy(*out);
    *out = NULL;
    return OPTIM_EINVAL;
}

/* One {"optimizer": ..., "weights": [...]}. */
static int read_spec(const cJSON *v, size_t k, optim__multi_sub *sub, optim__tfa_spec *sp,
                     optim_error *err)
{
    if (!cJSON_IsObject(v))
        return optim_error_set(err, OPTIM_ETYPE,
                               CN ": optimizer_specs[%zu] is %s, expected {\"optimizer\": ..., "
                                  "\"weights\": [...]}",
                               k, optim__json_type_name(v));
    int rc = optim__json_unique_keys(v, CN ": optimizer_specs", err);
    for (const cJSON *item = v->child; !rc && item; item = item->next)
        if (strcmp(item->string, "optimizer") != 0 && strcmp(item->string, "weights") != 0)
            rc = optim_error_set(err, OPTIM_EKEY,
                                 CN ": optimizer_specs[%zu] has unknown key '%.200s'; expected "
                                    "'optimizer' and 'weights' (what TF Addons' get_config writes)",
                                 k, item->string);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(v, "optimizer");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(v, "weights");
    if (!rc && (!o || !w))
        rc = optim_error_set(err, OPTIM_EKEY, CN ": optimizer_specs[%zu] has no '%s'", k,
                             o ? "weights" : "optimizer");
    if (!rc) rc = read_weights(w, k, sp, err);
    return rc ? rc : read_optimizer(o, k, &sub->opt, &sp->passive, err);
}

static int read_specs(optim__tfa_multi_state *st, const cJSON *v, optim_error *err)
{
    if (!cJSON_IsArray(v))
        return optim_error_set(err, OPTIM_ETYPE,
                               CN ": optimizer_specs is %s, expected a list of {\"optimizer\": "
                                  "..., \"weights\": [...]} (TF Addons: \"Must specify one of "
                                  "`optimizers_and_layers` or `optimizer_specs`.\")",
                               optim__json_type_name(v));
    const size_t n = (size_t)cJSON_GetArraySize(v);
    if (n == 0)
        return optim_error_set(err, OPTIM_EINVAL,
                               CN ": optimizer_specs is empty: no optimizer would ever step a "
                                  "variable (give at least one {\"optimizer\": ..., \"weights\": "
                                  "[...]})");
    optim__multi_sub *subs = calloc(n, sizeof *subs);
    optim__tfa_spec *specs = calloc(n, sizeof *specs);
    int rc = subs && specs ? OPTIM_OK : optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    st->base.subs = subs;
    st->base.n = subs && specs ? n : 0;
    st->specs = specs;
    size_t k = 0;
    for (const cJSON *item = v->child; !rc && item; item = item->next, k++)
        rc = read_spec(item, k, &subs[k], &specs[k], err);
    if (!rc && build_index(st)) rc = optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    if (rc) clear(st);
    return rc;
}

int optim__tfa_multi_set_config(optim_optimizer *opt, const char *key, const char *json,
                                optim_error *err)
{
    if (strcmp(key, "optimizer_map") == 0)
        return optim_error_set(err, OPTIM_EKEY,
                               CN ": 'optimizer_map' is Keras 3's MultiOptimizer's key; this "
                                  "config reads as TF Addons' (legacy), which takes '" SPECS_KEY
                                  "'");
    if (strcmp(key, SPECS_KEY) != 0) return OPTIM_EKEY;
    optim__tfa_multi_state *st = state(opt);
    if (st->base.subs)
        return optim_error_set(err, OPTIM_EINVAL, CN ": '" SPECS_KEY "' given twice");
    cJSON *v = optim__json_parse(json, NULL, 0);
    if (!v)
        return optim_error_set(err, OPTIM_EPARSE,
                               CN ": config key '" SPECS_KEY "' is not valid JSON");
    int rc = read_specs(st, v, err);
    cJSON_Delete(v);
    return rc;
}

/* ---- validate and get_config ------------------------------------------------------------- */

/* TF Addons' MultiOptimizer is an OptimizerV2: it takes `decay` and the
 * clip options (kept, unused: its apply_gradients hands the gradients to
 * the spec's optimizers); the learning rate is theirs. */
int optim__tfa_multi_validate(optim_optimizer *opt, optim_error *err)
{
    static const char *const taken[] = {"decay", "clipnorm", "clipvalue", "global_clipnorm"};
    if (!state(opt)->base.subs)
        return optim_error_set(err, OPTIM_EINVAL,
                               CN
                               ": no optimizers; give config key '" SPECS_KEY "', a list of "
                               "{\"optimizer\": ..., \"weights\": [...]} (TF Addons: \"Must "
                               "specify one of `optimizers_and_layers` or `optimizer_specs`.\")");
    char have[64];
    const char *name = optim_base_option_changed(opt, taken, 4, have, sizeof have, NULL, 0);
    if (name)
        return optim_error_set(err, OPTIM_EINVAL,
                               CN ": %s is %s; TF Addons' MultiOptimizer has no %s of its own: "
                                  "set it on the optimizers in '" SPECS_KEY "'",
                               name, have, name);
    return optim__multi_add_counters(opt, SPECS_KEY, err);
}

/* Spec k's optimizer as written: its serialization, with the passive mark
 * it was read with. */
static cJSON *optimizer_json(const optim__tfa_multi_state *st, size_t k)
{
    char *text = optim_serialize(st->base.subs[k].opt);
    const size_t len = text ? strlen(text) : 0;
    char *full = text && st->specs[k].passive ? malloc(len + 40) : NULL;
    if (full) snprintf(full, len + 40, "%.*s,\"" PASSIVE "\":true}", (int)(len - 1), text);
    cJSON *raw = full                   ? cJSON_CreateRaw(full)
        : text && !st->specs[k].passive ? cJSON_CreateRaw(text)
                                        : NULL;
    free(full);
    optim_free(text);
    return raw;
}

static cJSON *specs_json(const optim__tfa_multi_state *st)
{
    cJSON *list = cJSON_CreateArray();
    int ok = list != NULL;
    for (size_t k = 0; ok && k < st->base.n; k++) {
        cJSON *spec = cJSON_CreateObject();
        const optim__tfa_spec *sp = &st->specs[k];
        ok = spec && cJSON_AddItemToArray(list, spec);
        if (!ok) cJSON_Delete(spec);
        cJSON *o = ok ? optimizer_json(st, k) : NULL;
        ok = ok && o && cJSON_AddItemToObject(spec, "optimizer", o);
        if (!ok) cJSON_Delete(o);
        cJSON *w = ok ? cJSON_CreateStringArray((const char *const *)sp->names, (int)sp->n) : NULL;
        ok = ok && w && cJSON_AddItemToObject(spec, "weights", w);
        if (!ok) cJSON_Delete(w);
    }
    if (!ok) cJSON_Delete(list);
    return ok ? list : NULL;
}

/* OptimizerV2.get_config (name, the clip options that are set), then
 * optimizer_specs. */
int optim__tfa_multi_get_config(optim_optimizer *opt, optim_config *cfg)
{
    static const char *const clips[] = {"clipnorm", "clipvalue", "global_clipnorm"};
    static const char *const keys[] = {"name", "clipnorm", "clipvalue", "global_clipnorm",
                                       SPECS_KEY};
    int rc = optim__multi_put_json(cfg, SPECS_KEY, specs_json(state(opt)));
    return rc ? rc : optim_config_keep(cfg, keys, 5, clips, 3);
}

/* ---- slots ------------------------------------------------------------------------------- */

/* An optimizer's own slots (the spec's optimizers wrap nothing). */
static size_t nslots(const optim_optimizer *o) { return optim_weights_count(o) - 1; }

/* A label for spec k in messages: optimizer_specs[k] (CLASS). */
static const char *label_of(const optim__tfa_multi_state *st, size_t k, char *buf, size_t n)
{
    snprintf(buf, n, SPECS_KEY "[%zu] (%s)", k, optim_class_of(st->base.subs[k].opt)->name);
    return buf;
}

/* var's slots in spec k's optimizer, ordered with the others made since
 * its last step as one _create_slots(var_list) call would order them. */
static int track_in(optim_optimizer *opt, size_t k, optim_var *var, optim_error *err)
{
    optim__tfa_multi_state *st = state(opt);
    optim_optimizer *in = st->base.subs[k].opt;
    const size_t before = nslots(in);
    char label[160];
    if (optim_track_variables(in, &var, 1))
        return optim_error_set(err, OPTIM_EINVAL, CN ": %s: %s",
                               label_of(st, k, label, sizeof label), optim_errmsg(in));
    if (nslots(in) > before && st->specs[k].open_from <= before)
        optim__order_new_slots(in, st->specs[k].open_from);
    return OPTIM_OK;
}

/* A variable first seen (optim_build, or a step after its own tracking):
 * its slots in the optimizer of each spec that names it. */
int optim__tfa_multi_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    optim__tfa_multi_state *st = state(opt);
    unsigned char few[64], *marks = st->base.n <= sizeof few ? few : malloc(st->base.n);
    if (!marks) return optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    specs_of(st, optim_var_name(var), marks);
    int rc = OPTIM_OK;
    for (size_t k = 0; !rc && k < st->base.n; k++)
        if (marks[k]) rc = track_in(opt, k, var, err);
    if (marks != few) free(marks);
    return rc;
}

/* ---- the step ------------------------------------------------------------------------------ */

/* What one step works with, in its scratch memory: marks[i * nspecs + k]
 * says whether spec k names pair i's variable. */
typedef struct step_ctx {
    const optim_grad_var *pairs;
    size_t n, nspecs;
    unsigned char *marks;
    optim_var **vars;
    optim_grad_var *sub_pairs;
} step_ctx;

static int named(const step_ctx *c, size_t i, size_t k) { return c->marks[i * c->nspecs + k]; }

/* Spec k's pairs: none, or some with a gradient (TF Addons' inner
 * apply_gradients raises when all lack one), each one its optimizer takes. */
static int check_spec(optim_optimizer *opt, const step_ctx *c, size_t k)
{
    optim__tfa_multi_state *st = state(opt);
    optim_optimizer *in = st->base.subs[k].opt;
    size_t npairs = 0, with = 0, first = 0;
    char label[160];
    for (size_t i = 0; i < c->n; i++) {
        if (!named(c, i, k)) continue;
        if (!npairs++) first = i;
        if (c->pairs[i].grad.kind == OPTIM_GRAD_NONE) continue;
        with++;
        if (optim_check_gradients(in, &c->pairs[i], 1, 0))
            return optim_set_error(opt, OPTIM_EINVAL, CN ": %s: %s",
                                   label_of(st, k, label, sizeof label), optim_errmsg(in));
    }
    if (npairs == 0 || with > 0) return OPTIM_OK;
    return optim_set_error(
        opt, OPTIM_EINVAL,
        CN ": %s: no gradients provided for any variable ('%s' and %zu more, "
           "all the pairs this spec names, without gradient; TF Addons' optimizer "
           "refuses them in its apply_gradients)",
        label_of(st, k, label, sizeof label), optim_var_name(c->pairs[first].var), npairs - 1);
}

static int check_pairs(optim_optimizer *opt, step_ctx *c)
{
    optim__tfa_multi_state *st = state(opt);
    int rc = optim__multi_check_vars(opt, c->pairs, c->n);
    for (size_t i = 0; !rc && i < c->n; i++)
        specs_of(st, optim_var_name(c->pairs[i].var), c->marks + i * c->nspecs);
    if (!rc) rc = optim_check_gradients(opt, c->pairs, c->n, 0);
    for (size_t k = 0; !rc && k < c->nspecs; k++) rc = check_spec(opt, c, k);
    return rc ? rc : optim__multi_check_counter(opt);
}

/* The slots of new variables: in each spec's optimizer, its variables
 * with a gradient in one call (its _create_all_weights(var_list)), then
 * this optimizer's tracking of them all. All or nothing. */
static int track_all(optim_optimizer *opt, step_ctx *c)
{
    optim__tfa_multi_state *st = state(opt);
    optim_savepoint *sp = optim_step_scratch(opt, (c->nspecs + 1) * sizeof *sp);
    if (!sp) return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    for (size_t k = 0; k < c->nspecs; k++) sp[k] = optim_savepoint_get(st->base.subs[k].opt);
    sp[c->nspecs] = optim_savepoint_get(opt);
    int rc = OPTIM_OK;
    char label[160];
    for (size_t k = 0; !rc && k < c->nspecs; k++) {
        optim_optimizer *in = st->base.subs[k].opt;
        size_t m = 0;
        for (size_t i = 0; i < c->n; i++)
            if (named(c, i, k) && c->pairs[i].grad.kind != OPTIM_GRAD_NONE)
                c->vars[m++] = c->pairs[i].var;
        st->specs[k].open_from = nslots(in);
        if (m && optim_track_variables(in, c->vars, m))
            rc = optim_set_error(opt, OPTIM_EINVAL, CN ": %s: %s",
                                 label_of(st, k, label, sizeof label), optim_errmsg(in));
    }
    size_t m = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->pairs[i].grad.kind != OPTIM_GRAD_NONE) c->vars[m++] = c->pairs[i].var;
    if (!rc) rc = optim_track_variables(opt, c->vars, m);
    for (size_t k = 0; rc && k <= c->nspecs; k++)
        optim_rollback_variables(k < c->nspecs ? st->base.subs[k].opt : opt, &sp[k]);
    for (size_t k = 0; k < c->nspecs; k++) st->specs[k].open_from = nslots(st->base.subs[k].opt);
    return rc;
}

/* Each spec's optimizer with pairs steps on those with a gradient, in
 * call order, from its own count, with the caller's options. */
static int step_all(optim_optimizer *opt, step_ctx *c, const optim_step_options *io)
{
    optim__tfa_multi_state *st = state(opt);
    int rc = OPTIM_OK, stepped = 0;
    char label[160];
    for (size_t k = 0; !rc && k < c->nspecs; k++) {
        size_t m = 0;
        for (size_t i = 0; i < c->n; i++)
            if (named(c, i, k) && c->pairs[i].grad.kind != OPTIM_GRAD_NONE)
                c->sub_pairs[m++] = c->pairs[i];
        if (!m) continue;
        rc = optim__multi_step_sub(opt, k, c->sub_pairs, m, io,
                                   label_of(st, k, label, sizeof label), stepped);
        stepped = 1;
    }
    return rc;
}

int optim__tfa_multi_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                          const optim_step_options *o)
{
    int rc = optim__multi_refuse_options(opt, o);
    if (rc) return rc;
    step_ctx c = {pairs, n, state(opt)->base.n, NULL, NULL, NULL};
    c.marks = optim_step_scratch(opt, n * c.nspecs);
    c.vars = optim_step_scratch(opt, n * sizeof *c.vars);
    c.sub_pairs = optim_step_scratch(opt, n * sizeof *c.sub_pairs);
    if (!c.marks || !c.vars || !c.sub_pairs)
        return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    optim_step_options io = *o;
    io.flags &= ~OPTIM_STEP_SET_ITERATIONS;
    if ((rc = check_pairs(opt, &c)) || (rc = track_all(opt, &c)) || (rc = step_all(opt, &c, &io)))
        return rc;
    if (o->flags & OPTIM_STEP_NO_ADVANCE) return optim_set_error(opt, OPTIM_OK, "%s", "");
    return optim_set_iterations(opt, optim_iterations(opt) + 1);
}

/* ---- explicit lists ------------------------------------------------------------------------ */

/* TF's name of var: its name, with ":0" unless it ends in ':' and digits. */
static void tf_name(const char *name, char *buf, size_t n)
{
    const char *colon = strrchr(name, ':');
    int indexed = colon && colon[1];
    for (const char *p = colon ? colon + 1 : NULL; indexed && *p; p++)
        indexed = isdigit((unsigned char)*p) != 0;
    snprintf(buf, n, indexed ? "%s" : "%s:0", name);
}

/* Undoes a failed assign: spec k's names from position `had` on leave the
 * index (filtered in place, so nothing can fail and no entry points at a
 * freed name), then are freed. */
static void drop_names(optim__tfa_multi_state *st, size_t k, size_t had)
{
    optim__tfa_spec *sp = &st->specs[k];
    size_t out = 0;
    for (size_t i = 0; i < st->nindex; i++) {
        int added = 0;
        for (size_t j = had; !added && j < sp->n; j++)
            added = st->index[i].spec == k && st->index[i].name == sp->names[j];
        if (!added) st->index[out++] = st->index[i];
    }
    st->nindex = out;
    while (sp->n > had) free(sp->names[--sp->n]);
}

/* The variables' names join spec k's weights (create_optimizer_spec's
 * var.name of a layer's weights), those it names already excepted. */
int optim__tfa_multi_assign(optim_optimizer *opt, optim_var *const *vars, size_t n, size_t k)
{
    optim__tfa_multi_state *st = state(opt);
    optim__tfa_spec *sp = &st->specs[k];
    const size_t had = sp->n;
    unsigned char few[64], *marks = st->base.n <= sizeof few ? few : malloc(st->base.n);
    int rc = marks ? OPTIM_OK : OPTIM_ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = optim_var_name(vars[i]);
        char full[512];
        if (!name || !name[0] || strlen(name) > sizeof full - 3) {
            rc = optim_set_error(opt, OPTIM_EINVAL,
                                 "optim_multi_optimizer_assign: vars[%zu] has %s name; TF Addons' "
                                 "specs name their variables (1 to %zu characters)",
                                 i, name && name[0] ? "too long a" : "no", sizeof full - 3);
            break;
        }
        specs_of(st, name, marks);
        tf_name(name, full, sizeof full);
        if (!marks[k] && (rc = add_name(sp, full)) == OPTIM_OK) rc = build_index(st);
    }
    if (marks != few) free(marks);
    if (rc == OPTIM_ENOMEM) optim_set_error(opt, rc, "out of memory");
    if (!rc) return optim_set_error(opt, OPTIM_OK, "%s", "");
    drop_names(st, k, had);
    return rc;
}
