/* Keras JSON: from_config / deserialize (reading) and get_config /
 * serialize (writing), with Keras's key names, defaults and per-generation
 * key sets. Objects are read by core/json.c's one reader; param values
 * converted by params.c. */
#include "optimizer/impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading -------------------------------------------------------------------- */

/* The allowed keys of this optimizer, for error messages. */
static void list_keys(const optim_optimizer *opt, char *buf, size_t n)
{
    snprintf(buf, n, "name");
    for (size_t i = 0; i < opt->nparams; i++)
        if (optim__param_in_gen(opt, i)) optim__keys_append(buf, n, opt->params[i]->name);
    optim__keys_append(buf, n, "is_legacy_optimizer");
}

/* Converts a JSON value to a hyper for param i. */
static int json_to_hyper(optim_optimizer *opt, size_t i, const cJSON *v, optim__hyper *h,
                         optim_error *err)
{
    const optim_param *p = opt->params[i];
    memset(h, 0, sizeof *h);
    if (cJSON_IsObject(v) && (p->flags & OPTIM_PARAM_DYNAMIC)) {
        /* A schedule standing in for the value, as Keras serializes one. */
        optim_error local;
        int rc = optim__schedule_from_cjson(&h->sched, v, &local);
        if (rc)
            return optim__err(err, rc, "%s: config key '%s': %s", opt->cls.name, p->name,
                              local.msg);
        h->kind = HYPER_SCHEDULE_OBJ;
        return OPTIM_OK;
    }
    double x;
    int rc = optim__param_from_json(opt->cls.name, p, optim__choices(opt, i), v, &x, err);
    if (rc) return rc;
    h->kind = isnan(x) ? HYPER_NONE : HYPER_NUMBER;
    h->number = x;
    h->form = optim__json_number_form(v);
    return h->kind == HYPER_NONE ? OPTIM_OK : optim__param_check(opt, i, h, err);
}

static int call_set_config(void *opt, const char *key, const char *text, optim_error *err)
{
    optim_optimizer *o = opt;
    return o->cls.set_config(o, key, text, err);
}

static int key_only_in(const optim_class *cls, const char *key, optim_generation g);
static int gen_keys(const optim_class *cls, const cJSON *config, optim_generation g, char *buf,
                    size_t n);

static int unknown_key(const optim_optimizer *opt, const cJSON *config, const char *key, int other,
                       optim_error *err)
{
    char keys[1024], legacy[256], keras3[256];
    list_keys(opt, keys, sizeof keys);
    if (!other)
        return optim__err(err, OPTIM_EKEY, "%s: unknown config key '%s'; expected one of: %s",
                          opt->cls.name, key, keys);
    gen_keys(&opt->cls, config, OPTIM_LEGACY, legacy, sizeof legacy);
    gen_keys(&opt->cls, config, OPTIM_KERAS3, keras3, sizeof keras3);
    return optim__err(err, OPTIM_EKEY,
                      "%s: config key '%s' belongs to the other Keras generation (this config is "
                      "%s; legacy-only keys here: %s; Keras 3-only keys here: %s); expected one "
                      "of: %s",
                      opt->cls.name, key, opt->gen == OPTIM_LEGACY ? "legacy" : "Keras 3",
                      legacy[0] ? legacy : "none", keras3[0] ? keras3 : "none", keys);
}

/* One key of config (item); keys read elsewhere or without meaning pass. */
static int read_key(optim_optimizer *opt, const cJSON *config, const cJSON *item, optim_error *err)
{
    const char *key = item->string;
    if (strcmp(key, "name") == 0 || strcmp(key, "is_legacy_optimizer") == 0) return OPTIM_OK;
    /* Written by the Keras 2.11-2.15 optimizers; it has no meaning here. */
    if (strcmp(key, "jit_compile") == 0 && opt->gen == OPTIM_KERAS3 && cJSON_IsBool(item))
        return OPTIM_OK;
    /* Keras 3's BaseOptimizer pops `decay` and ignores it (with a warning). */
    if (strcmp(key, "decay") == 0 && opt->gen == OPTIM_KERAS3 &&
        (cJSON_IsNumber(item) || cJSON_IsNull(item)))
        return OPTIM_OK;
    if (opt->gen == OPTIM_LEGACY) {
        /* OptimizerV2.from_config: the alias "lr" wins over learning_rate. */
        if (strcmp(key, "learning_rate") == 0 && cJSON_GetObjectItemCaseSensitive(config, "lr"))
            return OPTIM_OK;
        if (strcmp(key, "lr") == 0) key = "learning_rate";
    }
    int other = 0;
    long i = optim__param_find(opt, key, &other);
    other |= strcmp(key, "lr") == 0;
    if (i >= 0) {
        optim__hyper h;
        int rc = json_to_hyper(opt, (size_t)i, item, &h, err);
        if (!rc) opt->hypers[i] = h;
        return rc;
    }
    int rc = optim__pattern_param_read(opt, key, item, err);
    if (rc != OPTIM__NOT_TAKEN) return rc;
    rc = optim__offer_key(opt->cls.name, key, item, opt->cls.set_config ? call_set_config : NULL,
                          opt, err);
    return rc == OPTIM__NOT_TAKEN ? unknown_key(opt, config, item->string, other, err) : rc;
}

/* ---- which generation ---------------------------------------------------------- */

/* Whether key is a config key of class cls in generation g only. */
static int key_only_in(const optim_class *cls, const char *key, optim_generation g)
{
    if (strcmp(key, "lr") == 0) return g == OPTIM_LEGACY;
    if (strcmp(key, "jit_compile") == 0) return g == OPTIM_KERAS3; /* tf-keras new style */
    const uint32_t mine = g == OPTIM_LEGACY ? OPTIM_PARAM_LEGACY_ONLY : OPTIM_PARAM_KERAS3_ONLY;
    const uint32_t other = g == OPTIM_LEGACY ? OPTIM_PARAM_KERAS3_ONLY : OPTIM_PARAM_LEGACY_ONLY;
    int in_mine = 0, in_other = 0;
    for (size_t i = 0; i < OPTIM__N_BASE + cls->n_params; i++) {
        const optim_param *p =
            i < OPTIM__N_BASE ? &optim__base_params()[i] : &cls->params[i - OPTIM__N_BASE];
        if (strcmp(p->name, key) != 0) continue;
        in_mine |= !(p->flags & other);
        in_other |= !(p->flags & mine);
    }
    return in_mine && !in_other;
}

/* The config's keys of one generation only, listed in buf; how many. */
static int gen_keys(const optim_class *cls, const cJSON *config, optim_generation g, char *buf,
                    size_t n)
{
    int count = 0;
    const cJSON *item;
    buf[0] = '\0';
    cJSON_ArrayForEach(item, config) if (key_only_in(cls, item->string, g))
    {
        optim__keys_append(buf, n, item->string);
        count++;
    }
    return count;
}

/* tf-keras 2.13+'s envelope of a TF Addons class: its module, or its
 * registered name "Addons>NAME" (TF Addons' classes are legacy ones). */
static int is_tfa_envelope(const optim__kobj *o)
{
    return (o->module && strncmp(o->module, "tensorflow_addons.", 18) == 0) ||
        (o->registered_name && strncmp(o->registered_name, "Addons>", 7) == 0);
}

/* Keras's own rule, when is_legacy_optimizer is absent (tf.keras's
 * optimizers.deserialize takes a missing key as legacy; Keras 3 reads
 * every config as its own): a TF Addons class name or a legacy module, then
 * the keys. */
static int detect_generation(const optim_class *cls, const optim__kobj *o, optim_generation *gen,
                             optim_error *err)
{
    char legacy[512], keras3[512];
    int nl = gen_keys(cls, o->config, OPTIM_LEGACY, legacy, sizeof legacy);
    int nk = gen_keys(cls, o->config, OPTIM_KERAS3, keras3, sizeof keras3);
    if (cls->flags & (OPTIM_CLASS_LEGACY_ONLY | OPTIM_CLASS_KERAS3_ONLY))
        *gen = (cls->flags & OPTIM_CLASS_LEGACY_ONLY) ? OPTIM_LEGACY : OPTIM_KERAS3;
    else if (strncmp(o->class_name, "Addons>", 7) == 0 ||
             (o->module && strstr(o->module, ".legacy")) || is_tfa_envelope(o))
        *gen = OPTIM_LEGACY;
    else /* a mix reads as Keras 3, whose reader then names each side's keys */
        *gen = nl && !nk ? OPTIM_LEGACY : OPTIM_KERAS3;
    (void)err;
    return OPTIM_OK;
}

/* The generation: the caller's (forced), is_legacy_optimizer, or detected. */
static int read_generation(const optim_class *cls, const optim__kobj *o, int forced,
                           optim_generation *gen, optim_error *err)
{
    const cJSON *legacy = cJSON_GetObjectItemCaseSensitive(o->config, "is_legacy_optimizer");
    if (legacy && !cJSON_IsBool(legacy))
        return optim__err(err, OPTIM_ETYPE,
                          "%s: config key 'is_legacy_optimizer' is %s, expected true or false",
                          cls->name, optim__json_type_name(legacy));
    optim_generation said = cJSON_IsTrue(legacy) ? OPTIM_LEGACY : OPTIM_KERAS3;
    if (forced >= 0 && legacy && said != (optim_generation)forced)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: the caller asked for the %s generation, but the config says "
                          "\"is_legacy_optimizer\": %s",
                          cls->name, forced == OPTIM_LEGACY ? "legacy" : "Keras 3",
                          said == OPTIM_LEGACY ? "true" : "false");
    if (forced >= 0 || legacy) {
        *gen = forced >= 0 ? (optim_generation)forced : said;
        return OPTIM_OK;
    }
    return detect_generation(cls, o, gen, err);
}

/* A config of tf-keras's new-style optimizers: jit_compile or
 * "is_legacy_optimizer": false, which only tf-keras's _BaseOptimizer writes
 * (Keras 3 writes neither, and refuses both as unknown arguments), or the
 * class's registered name ("Custom>Adam"). */
static optim__tfk_flavour read_flavour(const optim_class *cls, const optim__kobj *o,
                                       optim_generation gen)
{
    const cJSON *jit = cJSON_GetObjectItemCaseSensitive(o->config, "jit_compile");
    const cJSON *legacy = cJSON_GetObjectItemCaseSensitive(o->config, "is_legacy_optimizer");
    optim__tfk_flavour f = {0, 1, strncmp(o->class_name, "Custom>", 7) == 0};
    f.on = gen == OPTIM_KERAS3 && optim__has_tf_keras_form(cls) &&
        (cJSON_IsBool(jit) || cJSON_IsFalse(legacy) || f.custom);
    if (cJSON_IsBool(jit)) f.jit_compile = cJSON_IsTrue(jit) != 0;
    return f;
}

typedef struct reader {
    int (*pre)(optim_optimizer *, void *); /* run before the keys are read */
    void *ctx;
    int forced; /* a generation, or -1 */
} reader;

static int from_config(optim_optimizer **out, const optim_class *cls, const optim__kobj *o,
                       const reader *r, optim_error *err)
{
    const cJSON *config = o->config;
    optim_generation gen;
    int rc = read_generation(cls, o, r ? r->forced : -1, &gen, err);
    if (rc) return rc;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(config, "name");
    if (name && !cJSON_IsString(name) && !cJSON_IsNull(name))
        return optim__err(err, OPTIM_ETYPE, "%s: config key 'name' is %s, expected a string",
                          cls->name, optim__json_type_name(name));
    const optim__tfk_flavour tfk = read_flavour(cls, o, gen);
    /* tf-keras's new-style optimizers default to the class name ("Adam"). */
    const char *given = cJSON_IsString(name) ? name->valuestring : tfk.on ? cls->name : NULL;
    optim_optimizer *opt;
    if ((rc = optim__alloc(&opt, cls, gen, given, err))) return rc;
    opt->tfk = tfk;
    opt->module_read = o->module != NULL;
    if (gen == OPTIM_LEGACY && optim__tfa_name(cls) && o->module &&
        strlen(o->module) < sizeof opt->tfa_module)
        strcpy(opt->tfa_module, o->module);
    if (r && r->pre && (rc = r->pre(opt, r->ctx)))
        optim__err(err, rc, "%s", opt->errmsg[0] ? opt->errmsg : optim_strerror(rc));
    const cJSON *item;
    cJSON_ArrayForEach(item, config) if (!rc) rc = read_key(opt, config, item, err);
    if (!rc) rc = optim__validate(opt, err);
    if (rc) {
        optim_destroy(opt);
        return rc;
    }
    optim__err_clear(err);
    *out = opt;
    return OPTIM_OK;
}

/* A parsed Keras object (or a bare class name) to an optimizer. */
static int from_kobj(optim_optimizer **out, const cJSON *root, const reader *r, optim_error *err)
{
    optim__kobj o;
    int rc = optim__kobj_read(root, "optimizer", 1, &o, err);
    if (rc) return rc;
    /* tf-keras 2.11-2.12 writes its new-style optimizers under their
     * registered name, "Custom>Adam" (register_keras_serializable's default
     * package), in the legacy envelope. */
    const char *cn = strncmp(o.class_name, "Custom>", 7) == 0 ? o.class_name + 7 : o.class_name;
    const optim_class *cls = optim_find_class(cn);
    if (!cls) return optim__unknown_class(err, o.class_name);
    return from_config(out, cls, &o, r, err);
}

static int from_text(optim_optimizer **out, const char *json, const reader *r, optim_error *err)
{
    const char *end = NULL;
    cJSON *root = optim__json_parse(json, &end, 1);
    if (!root)
        return optim__err(err, OPTIM_EPARSE, "optimizer JSON is malformed near byte %ld",
                          end ? (long)(end - json) : -1L);
    int rc = from_kobj(out, root, r, err);
    cJSON_Delete(root);
    return rc;
}

int optim__from_config_ex(optim_optimizer **out, const char *json,
                          int (*pre)(optim_optimizer *, void *), void *ctx, optim_error *err)
{
    *out = NULL;
    reader r = {pre, ctx, -1};
    return from_text(out, json, &r, err);
}

int optim_from_json(optim_optimizer **out, const char *json, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_from_json: out is NULL");
    *out = NULL;
    if (!json) return optim__err(err, OPTIM_EINVAL, "optim_from_json: json is NULL");
    return from_text(out, json, NULL, err);
}

int optim_from_json_as(optim_optimizer **out, const char *json, optim_generation gen,
                       optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_from_json_as: out is NULL");
    *out = NULL;
    if (!json) return optim__err(err, OPTIM_EINVAL, "optim_from_json_as: json is NULL");
    if (gen != OPTIM_KERAS3 && gen != OPTIM_LEGACY)
        return optim__err(err, OPTIM_EINVAL,
                          "optim_from_json_as: gen is %d, expected OPTIM_KERAS3 or OPTIM_LEGACY",
                          (int)gen);
    reader r = {NULL, NULL, (int)gen};
    return from_text(out, json, &r, err);
}

int optim_from_config(optim_optimizer **out, const char *class_name, const char *config_json,
                      optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_from_config: out is NULL");
    *out = NULL;
    const optim_class *cls = class_name ? optim_find_class(class_name) : NULL;
    if (!cls) return optim__unknown_class(err, class_name);
    /* The name as given: "Addons>NAME" is TF Addons' class, a legacy one. */
    optim__kobj o = {class_name, NULL, NULL, NULL};
    if (!config_json) return from_config(out, cls, &o, NULL, err);
    cJSON *cfg = optim__json_parse(config_json, NULL, 0);
    if (!cfg) return optim__err(err, OPTIM_EPARSE, "%s: config is not valid JSON", cls->name);
    int rc = !cJSON_IsObject(cfg)
        ? optim__err(err, OPTIM_ETYPE, "%s: config is %s, expected an object", cls->name,
                     optim__json_type_name(cfg))
        : optim__json_unique_keys(cfg, cls->name, err);
    o.config = cfg;
    if (!rc) rc = from_config(out, cls, &o, NULL, err);
    cJSON_Delete(cfg);
    return rc;
}

/* ---- writing -------------------------------------------------------------------- */

/* Whether opt is written in tf-keras's new-style form: read so, and
 * nothing set that tf-keras has no key for. */
static int writes_tfk(const optim_optimizer *opt)
{
    return opt->gen == OPTIM_KERAS3 && opt->tfk.on &&
        opt->hypers[OPTIM__P_LOSS_SCALE_FACTOR].kind == HYPER_NONE &&
        opt->hypers[OPTIM__P_GRADIENT_ACCUMULATION_STEPS].kind == HYPER_NONE;
}

/* Whether opt's serialized form has serialize_keras_object's envelope
 * (module, registered_name): always in Keras 3; in tf-keras 2.13+'s
 * configs (legacy and new-style), where the config was read in it (and,
 * legacy, the class has a tf-keras module: TF Addons' and user classes
 * have none). */
static int writes_module(const optim_optimizer *opt)
{
    if (opt->gen == OPTIM_LEGACY)
        return opt->module_read && (optim__legacy_module(&opt->cls) || opt->tfa_module[0]);
    return !writes_tfk(opt) || opt->module_read;
}

static int put_param(optim_optimizer *opt, cJSON *o, size_t i)
{
    const optim_param *p = opt->params[i];
    const optim__hyper *h = &opt->hypers[i];
    cJSON *v;
    if (h->kind == HYPER_SCHEDULE_OBJ) {
        /* tf-keras's schedules default their name to None, Keras 3's not. */
        v = optim__schedule_to_cjson(h->sched, writes_module(opt),
                                     opt->gen == OPTIM_KERAS3 && !writes_tfk(opt));
    } else {
        /* Variables, callables and schedules are written as their current
         * value, as Keras's _serialize_hyperparameter does. */
        double x = h->kind == HYPER_NONE ? NAN : h->number;
        if (h->kind > HYPER_NUMBER && optim_get_hyper(opt, p->name, &x)) x = NAN;
        /* A number keeps the form it was given in, as Keras keeps the Python
         * value; but Keras 3 (and tf-keras's new optimizers) hold the
         * learning rate in a float variable and write float(). */
        optim__num_form form = h->kind == HYPER_NUMBER ? h->form : OPTIM__NUM_ANY;
        if (i == OPTIM__P_LEARNING_RATE && opt->gen == OPTIM_KERAS3) form = OPTIM__NUM_ANY;
        v = optim__param_to_json(p, optim__choices(opt, i), x, form);
    }
    if (!v || !cJSON_AddItemToObject(o, p->name, v)) {
        cJSON_Delete(v);
        return OPTIM_ENOMEM;
    }
    return OPTIM_OK;
}

static int is_clip(size_t i)
{
    return i == OPTIM__P_CLIPNORM || i == OPTIM__P_CLIPVALUE || i == OPTIM__P_GLOBAL_CLIPNORM;
}

/* The params in get_config's order. OptimizerV2.get_config: name, then the
 * clip options that are set, then the class's keys (learning_rate, decay,
 * ...). Keras 3: the base keys in their declared order, None included, then
 * the class's. */
/* tf-keras's _BaseOptimizer.get_config: name, the base keys it has,
 * jit_compile, "is_legacy_optimizer": false; then each class's update of
 * it, learning_rate first. */
static int put_tfk_params(optim_optimizer *opt, cJSON *o)
{
    for (size_t i = 0; i < OPTIM__N_BASE; i++)
        if (optim__param_in_gen(opt, i) && i != OPTIM__P_LEARNING_RATE &&
            i != OPTIM__P_LOSS_SCALE_FACTOR && i != OPTIM__P_GRADIENT_ACCUMULATION_STEPS &&
            i != OPTIM__P_BF16_SR_SEED && put_param(opt, o, i))
            return OPTIM_ENOMEM;
    if (!cJSON_AddBoolToObject(o, "jit_compile", opt->tfk.jit_compile) ||
        !cJSON_AddFalseToObject(o, "is_legacy_optimizer") ||
        put_param(opt, o, OPTIM__P_LEARNING_RATE))
        return OPTIM_ENOMEM;
    for (size_t i = OPTIM__N_BASE; i < opt->nparams; i++)
        if (optim__param_in_gen(opt, i) && put_param(opt, o, i)) return OPTIM_ENOMEM;
    return OPTIM_OK;
}

static int put_params(optim_optimizer *opt, cJSON *o)
{
    static const int legacy_clips[] = {OPTIM__P_CLIPNORM, OPTIM__P_CLIPVALUE,
                                       OPTIM__P_GLOBAL_CLIPNORM};
    if (writes_tfk(opt)) return put_tfk_params(opt, o);
    int legacy = opt->gen == OPTIM_LEGACY;
    for (size_t k = 0; legacy && k < 3; k++)
        if (opt->hypers[legacy_clips[k]].kind != HYPER_NONE &&
            put_param(opt, o, (size_t)legacy_clips[k]))
            return OPTIM_ENOMEM;
    for (size_t i = 0; i < opt->nparams; i++)
        if (optim__param_in_gen(opt, i) && !(legacy && is_clip(i)) && i != OPTIM__P_BF16_SR_SEED &&
            put_param(opt, o, i))
            return OPTIM_ENOMEM;
    return OPTIM_OK;
}

/* Whether a legacy config as written reads back as legacy without
 * "is_legacy_optimizer" (a key OptimizerV2's constructor refuses, so it is
 * written only where nothing else tells: classes Keras has in one form). */
static int reads_as_legacy(const optim_optimizer *opt, const cJSON *config)
{
    char cn[128];
    optim__keras_class_name(&opt->cls, OPTIM_LEGACY, cn, sizeof cn);
    optim__kobj o = {cn, config, NULL, NULL};
    optim_generation gen;
    return detect_generation(&opt->cls, &o, &gen, NULL) == OPTIM_OK && gen == OPTIM_LEGACY;
}

static cJSON *config_obj(optim_optimizer *opt)
{
    cJSON *o = cJSON_CreateObject();
    int rc = o && cJSON_AddStringToObject(o, "name", opt->name) ? put_params(opt, o) : OPTIM_ENOMEM;
    optim_config cfg = {o};
    if (!rc) rc = optim__pattern_params_put(opt, &cfg);
    if (!rc && opt->cls.get_config) {
        rc = opt->cls.get_config(opt, &cfg);
        if (rc > 0) rc = OPTIM_EINVAL;
        if (rc) {
            cJSON_Delete(o);
            optim__opt_err(opt, rc, "%s: get_config failed (%s)", opt->cls.name,
                           optim_strerror(rc));
            return NULL;
        }
    }
    /* optim's own key, unknown to Keras: last, and only when set, so that a
     * Keras config comes back unchanged. */
    if (!rc && opt->hypers[OPTIM__P_BF16_SR_SEED].kind != HYPER_NONE)
        rc = put_param(opt, o, OPTIM__P_BF16_SR_SEED);
    if (!rc && opt->gen == OPTIM_LEGACY && !reads_as_legacy(opt, o) &&
        !cJSON_AddTrueToObject(o, "is_legacy_optimizer"))
        rc = OPTIM_ENOMEM;
    if (!rc) return o;
    cJSON_Delete(o);
    optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    return NULL;
}

static char *print(optim_optimizer *opt, cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    if (o && !s) optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    else if (s) opt->errmsg[0] = '\0';
    cJSON_Delete(o);
    return s;
}

char *optim_get_config(optim_optimizer *opt) { return print(opt, config_obj(opt)); }

/* tf.keras 2.x up to 2.12: {"class_name", "config"}; Keras 3 and tf-keras
 * 2.13+ (serialize_keras_object): {"module", "class_name", "config",
 * "registered_name"}, with the public module ("keras.optimizers",
 * "keras.optimizers.legacy") and registered_name null for Keras's own
 * classes, TF Addons' module as read, the plain class name and
 * "Addons>NAME" for its classes, and no module but the class name as
 * registered_name for a user class. */
static cJSON *serialized(optim_optimizer *opt, cJSON *cfg)
{
    char cn[128], reg[136];
    optim__keras_class_name(&opt->cls, opt->gen, cn, sizeof cn);
    if (writes_tfk(opt) && opt->tfk.custom && !opt->module_read)
        snprintf(cn, sizeof cn, "Custom>%s", opt->cls.name);
    const char *module = opt->gen == OPTIM_LEGACY ? optim__legacy_module(&opt->cls)
                                                  : optim__keras3_module(&opt->cls);
    snprintf(reg, sizeof reg, "%s", opt->cls.name);
    if (!module && opt->gen == OPTIM_LEGACY && opt->tfa_module[0]) {
        module = opt->tfa_module;
        snprintf(reg, sizeof reg, "%s", cn); /* "Addons>LAMB" */
        snprintf(cn, sizeof cn, "%s", optim__tfa_name(&opt->cls));
    }
    int envelope = writes_module(opt), keras_own = module && !opt->tfa_module[0];
    cJSON *o = cJSON_CreateObject();
    int ok = o &&
        (!envelope ||
         (module ? cJSON_AddStringToObject(o, "module", module)
                 : cJSON_AddNullToObject(o, "module")));
    ok = ok && cJSON_AddStringToObject(o, "class_name", cn) &&
        cJSON_AddItemToObject(o, "config", cfg);
    if (!ok) cJSON_Delete(cfg);
    ok = ok &&
        (!envelope ||
         (keras_own ? cJSON_AddNullToObject(o, "registered_name")
                    : cJSON_AddStringToObject(o, "registered_name", reg)));
    if (ok) return o;
    cJSON_Delete(o);
    optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    return NULL;
}

char *optim_serialize(optim_optimizer *opt)
{
    cJSON *cfg = config_obj(opt);
    return cfg ? print(opt, serialized(opt, cfg)) : NULL;
}
