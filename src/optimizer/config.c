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
            return optim__err(err, rc, "%s: config key '%s': %s", opt->cls.name, p->name, local.msg);
        h->kind = HYPER_SCHEDULE_OBJ;
        return OPTIM_OK;
    }
    double x;
    int rc = optim__param_from_json(opt->cls.name, p, optim__choices(opt, i), v, &x, err);
    if (rc) return rc;
    h->kind = isnan(x) ? HYPER_NONE : HYPER_NUMBER;
    h->number = x;
    return h->kind == HYPER_NONE ? OPTIM_OK : optim__param_check(opt, i, h, err);
}

static int call_set_config(void *opt, const char *key, const char *text, optim_error *err)
{
    optim_optimizer *o = opt;
    return o->cls.set_config(o, key, text, err);
}

static int unknown_key(const optim_optimizer *opt, const char *key, int other, optim_error *err)
{
    char keys[1024];
    list_keys(opt, keys, sizeof keys);
    if (other)
        return optim__err(err, OPTIM_EKEY,
                          "%s: config key '%s' belongs to the other Keras generation (this config "
                          "is %s); expected one of: %s",
                          opt->cls.name, key, opt->gen == OPTIM_LEGACY ? "legacy" : "Keras 3", keys);
    return optim__err(err, OPTIM_EKEY, "%s: unknown config key '%s'; expected one of: %s",
                      opt->cls.name, key, keys);
}

/* One key of config (item); keys read elsewhere or without meaning pass. */
static int read_key(optim_optimizer *opt, const cJSON *config, const cJSON *item, optim_error *err)
{
    const char *key = item->string;
    if (strcmp(key, "name") == 0 || strcmp(key, "is_legacy_optimizer") == 0) return OPTIM_OK;
    /* Written by the Keras 2.11-2.15 optimizers; it has no meaning here. */
    if (strcmp(key, "jit_compile") == 0 && opt->gen == OPTIM_KERAS3 && cJSON_IsBool(item)) return OPTIM_OK;
    if (opt->gen == OPTIM_LEGACY) {
        /* OptimizerV2.from_config: the alias "lr" wins over learning_rate. */
        if (strcmp(key, "learning_rate") == 0 && cJSON_GetObjectItemCaseSensitive(config, "lr"))
            return OPTIM_OK;
        if (strcmp(key, "lr") == 0) key = "learning_rate";
    }
    int other = 0;
    long i = optim__param_find(opt, key, &other);
    if (i >= 0) {
        optim__hyper h;
        int rc = json_to_hyper(opt, (size_t)i, item, &h, err);
        if (!rc) opt->hypers[i] = h;
        return rc;
    }
    int rc = optim__offer_key(opt->cls.name, key, item, opt->cls.set_config ? call_set_config : NULL,
                              opt, err);
    return rc == OPTIM__NOT_TAKEN ? unknown_key(opt, key, other, err) : rc;
}

/* The generation a config asks for: is_legacy_optimizer decides. */
static int read_generation(const optim_class *cls, const cJSON *config, optim_generation *gen,
                           optim_error *err)
{
    *gen = OPTIM_KERAS3;
    const cJSON *legacy = cJSON_GetObjectItemCaseSensitive(config, "is_legacy_optimizer");
    if (!legacy) return OPTIM_OK;
    if (!cJSON_IsBool(legacy))
        return optim__err(err, OPTIM_ETYPE,
                          "%s: config key 'is_legacy_optimizer' is %s, expected true or false",
                          cls->name, optim__json_type_name(legacy));
    *gen = cJSON_IsTrue(legacy) ? OPTIM_LEGACY : OPTIM_KERAS3;
    return OPTIM_OK;
}

typedef struct reader {
    int (*pre)(optim_optimizer *, void *); /* run before the keys are read */
    void *ctx;
} reader;

static int from_config(optim_optimizer **out, const optim_class *cls, const cJSON *config,
                       const reader *r, optim_error *err)
{
    optim_generation gen;
    int rc = read_generation(cls, config, &gen, err);
    if (rc) return rc;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(config, "name");
    if (name && !cJSON_IsString(name) && !cJSON_IsNull(name))
        return optim__err(err, OPTIM_ETYPE, "%s: config key 'name' is %s, expected a string",
                          cls->name, optim__json_type_name(name));
    optim_optimizer *opt;
    if ((rc = optim__alloc(&opt, cls, gen, cJSON_IsString(name) ? name->valuestring : NULL, err)))
        return rc;
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
    const optim_class *cls = optim_find_class(o.class_name);
    if (!cls) return optim__err(err, OPTIM_ENOTFOUND, "unknown optimizer class '%s'", o.class_name);
    return from_config(out, cls, o.config, r, err);
}

static int from_text(optim_optimizer **out, const char *json, const reader *r, optim_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root)
        return optim__err(err, OPTIM_EPARSE, "optimizer JSON is malformed near byte %ld",
                          end ? (long)(end - json) : -1L);
    int rc = from_kobj(out, root, r, err);
    cJSON_Delete(root);
    return rc;
}

int optim__from_config_ex(optim_optimizer **out, const char *json, int (*pre)(optim_optimizer *, void *),
                          void *ctx, optim_error *err)
{
    *out = NULL;
    reader r = {pre, ctx};
    return from_text(out, json, &r, err);
}

int optim_from_json(optim_optimizer **out, const char *json, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_from_json: out is NULL");
    *out = NULL;
    if (!json) return optim__err(err, OPTIM_EINVAL, "optim_from_json: json is NULL");
    return from_text(out, json, NULL, err);
}

int optim_from_config(optim_optimizer **out, const char *class_name, const char *config_json,
                      optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_from_config: out is NULL");
    *out = NULL;
    const optim_class *cls = class_name ? optim_find_class(class_name) : NULL;
    if (!cls)
        return optim__err(err, OPTIM_ENOTFOUND, "unknown optimizer class '%s'",
                          class_name ? class_name : "(null)");
    if (!config_json) return from_config(out, cls, NULL, NULL, err);
    cJSON *cfg = cJSON_Parse(config_json);
    if (!cfg) return optim__err(err, OPTIM_EPARSE, "%s: config is not valid JSON", cls->name);
    int rc = !cJSON_IsObject(cfg) ? optim__err(err, OPTIM_ETYPE, "%s: config is %s, expected an object",
                                                cls->name, optim__json_type_name(cfg))
                                   : optim__json_unique_keys(cfg, cls->name, err);
    if (!rc) rc = from_config(out, cls, cfg, NULL, err);
    cJSON_Delete(cfg);
    return rc;
}

/* ---- writing -------------------------------------------------------------------- */

static int put_param(optim_optimizer *opt, cJSON *o, size_t i)
{
    const optim_param *p = opt->params[i];
    const optim__hyper *h = &opt->hypers[i];
    cJSON *v;
    if (h->kind == HYPER_SCHEDULE_OBJ) {
        char *text = optim_schedule_serialize(h->sched);
        v = text ? cJSON_CreateRaw(text) : NULL;
        free(text);
    } else {
        /* Variables, callables and schedules are written as their current
         * value, as Keras's _serialize_hyperparameter does. */
        double x = h->kind == HYPER_NONE ? NAN : h->number;
        if (h->kind > HYPER_NUMBER && optim_get_hyper(opt, p->name, &x)) x = NAN;
        v = optim__param_to_json(p, optim__choices(opt, i), x);
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
static int put_params(optim_optimizer *opt, cJSON *o)
{
    static const int legacy_clips[] = {OPTIM__P_CLIPNORM, OPTIM__P_CLIPVALUE, OPTIM__P_GLOBAL_CLIPNORM};
    int legacy = opt->gen == OPTIM_LEGACY;
    for (size_t k = 0; legacy && k < 3; k++)
        if (opt->hypers[legacy_clips[k]].kind != HYPER_NONE && put_param(opt, o, (size_t)legacy_clips[k]))
            return OPTIM_ENOMEM;
    for (size_t i = 0; i < opt->nparams; i++)
        if (optim__param_in_gen(opt, i) && !(legacy && is_clip(i)) && put_param(opt, o, i))
            return OPTIM_ENOMEM;
    return OPTIM_OK;
}

static cJSON *config_obj(optim_optimizer *opt)
{
    cJSON *o = cJSON_CreateObject();
    int rc = o && cJSON_AddStringToObject(o, "name", opt->name) ? put_params(opt, o) : OPTIM_ENOMEM;
    if (!rc && opt->cls.get_config) {
        optim_config cfg = {o};
        rc = opt->cls.get_config(opt, &cfg);
        if (rc > 0) rc = OPTIM_EINVAL;
        if (rc) {
            cJSON_Delete(o);
            optim__opt_err(opt, rc, "%s: get_config failed (%s)", opt->cls.name, optim_strerror(rc));
            return NULL;
        }
    }
    if (!rc && opt->gen == OPTIM_LEGACY && !cJSON_AddTrueToObject(o, "is_legacy_optimizer")) rc = OPTIM_ENOMEM;
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

char *optim_serialize(optim_optimizer *opt)
{
    cJSON *cfg = config_obj(opt);
    if (!cfg) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "class_name", opt->cls.name) ||
        !cJSON_AddItemToObject(o, "config", cfg)) {
        cJSON_Delete(o);
        cJSON_Delete(cfg);
        optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
        return NULL;
    }
    return print(opt, o);
}
