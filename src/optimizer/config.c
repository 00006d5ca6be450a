/* Keras JSON: get_config / from_config / serialize / deserialize, with
 * Keras's key names, defaults and per-generation key sets. */
#include "optimizer/impl.h"
#include "optim/schedule.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int optim_config_put_number(optim_config *cfg, const char *key, double value)
{
    if (!cfg || !key) return OPTIM_EINVAL;
    cJSON *v = optim__json_exact_number(value, 1);
    if (!v) return OPTIM_ENOMEM;
    int rc = optim_config_put(cfg, key, cJSON_IsNull(v) ? "null" : v->valuestring);
    cJSON_Delete(v);
    return rc;
}

int optim_config_put(optim_config *cfg, const char *key, const char *json_value)
{
    if (!cfg || !key || !json_value) return OPTIM_EINVAL;
    cJSON *check = cJSON_Parse(json_value);
    if (!check) return OPTIM_EPARSE;
    cJSON_Delete(check);
    /* Kept as the class wrote it (cJSON would reprint numbers with 15
     * digits), and in place when the key exists already. */
    cJSON *v = cJSON_CreateRaw(json_value);
    if (!v) return OPTIM_ENOMEM;
    if (cJSON_GetObjectItemCaseSensitive(cfg->obj, key))
        return cJSON_ReplaceItemInObjectCaseSensitive(cfg->obj, key, v) ? OPTIM_OK : OPTIM_ENOMEM;
    if (!cJSON_AddItemToObject(cfg->obj, key, v)) {
        cJSON_Delete(v);
        return OPTIM_ENOMEM;
    }
    return OPTIM_OK;
}

int optim_config_put_after(optim_config *cfg, const char *key, const char *json_value, const char *after)
{
    int rc = optim_config_put(cfg, key, json_value);
    cJSON *obj = cfg ? cfg->obj : NULL;
    cJSON *at = rc || !after || strcmp(key, after) == 0 ? NULL : cJSON_GetObjectItemCaseSensitive(obj, after);
    if (!at) return rc;
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(obj, key);
    item->prev = at;
    item->next = at->next;
    if (at->next) at->next->prev = item;
    else obj->child->prev = item; /* cJSON keeps the last item in child->prev */
    at->next = item;
    return OPTIM_OK;
}

const char *optim__json_type_name(const void *item)
{
    const cJSON *v = item;
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* The allowed keys of this optimizer, for error messages. */
static void list_keys(const optim_optimizer *opt, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "name");
    for (size_t i = 0; i < opt->nparams && used < n; i++)
        if (optim__param_in_gen(opt, i))
            used += (size_t)snprintf(buf + used, n - used, ", %s", opt->params[i]->name);
    if (used < n) snprintf(buf + used, n - used, ", is_legacy_optimizer");
}

/* Converts a JSON value to a hyper for param i. */
static int json_to_hyper(optim_optimizer *opt, size_t i, const cJSON *v, optim__hyper *h,
                         optim_error *err)
{
    const optim_param *p = opt->params[i];
    memset(h, 0, sizeof *h);
    const char *want = p->type == OPTIM_PARAM_BOOL ? "true or false"
                       : p->type == OPTIM_PARAM_INT ? "an integer" : "a number";
    if (cJSON_IsNull(v)) {
        h->kind = HYPER_NONE;
        if (!(p->flags & OPTIM_PARAM_NULLABLE))
            return optim__err(err, OPTIM_ETYPE, "%s: config key '%s' is null, expected %s",
                              opt->cls.name, p->name, want);
        return OPTIM_OK;
    }
    if (cJSON_IsObject(v) && (p->flags & OPTIM_PARAM_DYNAMIC)) {
        /* A schedule standing in for the value, as Keras serializes one. */
        optim_error local;
        int rc = optim__schedule_from_cjson(&h->sched, v, &local);
        if (rc)
            return optim__err(err, rc, "%s: config key '%s': %s", opt->cls.name, p->name, local.msg);
        h->kind = HYPER_SCHEDULE_OBJ;
        return OPTIM_OK;
    }
    int ok = p->type == OPTIM_PARAM_BOOL ? cJSON_IsBool(v) : cJSON_IsNumber(v);
    if (!ok)
        return optim__err(err, OPTIM_ETYPE, "%s: config key '%s' is %s, expected %s%s",
                          opt->cls.name, p->name, optim__json_type_name(v), want,
                          (p->flags & OPTIM_PARAM_NULLABLE) ? " or null" : "");
    h->kind = HYPER_NUMBER;
    h->number = cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? 1.0 : 0.0) : v->valuedouble;
    return optim__param_check(opt, i, h, err);
}

static int from_config_ex(optim_optimizer **out, const optim_class *cls, const cJSON *config,
                          int (*pre)(optim_optimizer *, void *), void *ctx, optim_error *err);

static int from_config_obj(optim_optimizer **out, const optim_class *cls, const cJSON *config,
                           optim_error *err)
{
    return from_config_ex(out, cls, config, NULL, NULL, err);
}

int optim__from_config_ex(optim_optimizer **out, const char *json, int (*pre)(optim_optimizer *, void *),
                          void *ctx, optim_error *err)
{
    *out = NULL;
    cJSON *root = cJSON_Parse(json);
    if (!root) return optim__err(err, OPTIM_EPARSE, "optimizer JSON is malformed");
    const cJSON *cn = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "class_name") : NULL;
    const optim_class *cls = cJSON_IsString(cn) ? optim_find_class(cn->valuestring) : NULL;
    int rc = cls ? from_config_ex(out, cls, cJSON_GetObjectItemCaseSensitive(root, "config"), pre, ctx, err)
                 : optim__err(err, cJSON_IsString(cn) ? OPTIM_ENOTFOUND : OPTIM_EKEY,
                              "optimizer JSON: class_name %s%s%s", cJSON_IsString(cn) ? "'" : "",
                              cJSON_IsString(cn) ? cn->valuestring : "is missing or not a string",
                              cJSON_IsString(cn) ? "' is unknown" : "");
    cJSON_Delete(root);
    return rc;
}

static int from_config_ex(optim_optimizer **out, const optim_class *cls, const cJSON *config,
                          int (*pre)(optim_optimizer *, void *), void *ctx, optim_error *err)
{
    if (config && !cJSON_IsObject(config))
        return optim__err(err, OPTIM_ETYPE, "%s: config is %s, expected an object", cls->name,
                          optim__json_type_name(config));
    optim_generation gen = OPTIM_KERAS3;
    const cJSON *legacy = config ? cJSON_GetObjectItemCaseSensitive(config, "is_legacy_optimizer") : NULL;
    if (legacy) {
        if (!cJSON_IsBool(legacy))
            return optim__err(err, OPTIM_ETYPE,
                              "%s: config key 'is_legacy_optimizer' is %s, expected true or false",
                              cls->name, optim__json_type_name(legacy));
        gen = cJSON_IsTrue(legacy) ? OPTIM_LEGACY : OPTIM_KERAS3;
    }
    const cJSON *name = config ? cJSON_GetObjectItemCaseSensitive(config, "name") : NULL;
    if (name && !cJSON_IsString(name) && !cJSON_IsNull(name))
        return optim__err(err, OPTIM_ETYPE, "%s: config key 'name' is %s, expected a string",
                          cls->name, optim__json_type_name(name));
    optim_optimizer *opt;
    int rc = optim__alloc(&opt, cls, gen, cJSON_IsString(name) ? name->valuestring : NULL, err);
    if (rc) return rc;
    if (pre && (rc = pre(opt, ctx))) {
        optim__err(err, rc, "%s", opt->errmsg[0] ? opt->errmsg : optim_strerror(rc));
        goto fail;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, config)
    {
        const char *key = item->string;
        for (const cJSON *prev = config->child; prev != item; prev = prev->next)
            if (strcmp(prev->string, key) == 0) {
                rc = optim__err(err, OPTIM_EPARSE, "%s: config key '%s' appears twice", cls->name, key);
                goto fail;
            }
        if (strcmp(key, "name") == 0 || strcmp(key, "is_legacy_optimizer") == 0) continue;
        /* Written by the Keras 2.11-2.15 optimizers; it has no meaning here. */
        if (strcmp(key, "jit_compile") == 0 && gen == OPTIM_KERAS3 && cJSON_IsBool(item)) continue;
        if (gen == OPTIM_LEGACY) {
            /* OptimizerV2.from_config: the alias "lr" wins over learning_rate. */
            if (strcmp(key, "learning_rate") == 0 && cJSON_GetObjectItemCaseSensitive(config, "lr"))
                continue;
            if (strcmp(key, "lr") == 0) key = "learning_rate";
        }
        int other = 0;
        long i = optim__param_find(opt, key, &other);
        if (i >= 0) {
            optim__hyper h;
            rc = json_to_hyper(opt, (size_t)i, item, &h, err);
            if (rc) goto fail;
            opt->hypers[i] = h;
            continue;
        }
        rc = OPTIM_EKEY;
        if (opt->cls.set_config) {
            char *text = optim__json_print_exact(item);
            if (!text) {
                rc = optim__err(err, OPTIM_ENOMEM, "out of memory");
                goto fail;
            }
            optim_error local;
            optim__err_clear(&local);
            rc = opt->cls.set_config(opt, key, text, &local);
            cJSON_free(text);
            if (rc > 0) rc = OPTIM_EINVAL;
            if (rc && rc != OPTIM_EKEY) {
                if (local.msg[0]) optim__err(err, rc, "%s", local.msg);
                else optim__err(err, rc, "%s: config key '%s': %s", cls->name, key, optim_strerror(rc));
                goto fail;
            }
        }
        if (rc == OPTIM_EKEY) {
            char keys[1024];
            list_keys(opt, keys, sizeof keys);
            if (other)
                rc = optim__err(err, OPTIM_EKEY,
                                "%s: config key '%s' belongs to the other Keras generation (this "
                                "config is %s); expected one of: %s",
                                cls->name, key, gen == OPTIM_LEGACY ? "legacy" : "Keras 3", keys);
            else
                rc = optim__err(err, OPTIM_EKEY, "%s: unknown config key '%s'; expected one of: %s",
                                cls->name, key, keys);
            goto fail;
        }
    }
    rc = optim__validate(opt, err);
    if (rc) goto fail;
    optim__err_clear(err);
    *out = opt;
    return OPTIM_OK;
fail:
    optim_destroy(opt);
    return rc;
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
    if (!config_json) return from_config_obj(out, cls, NULL, err);
    cJSON *cfg = cJSON_Parse(config_json);
    if (!cfg) return optim__err(err, OPTIM_EPARSE, "%s: config is not valid JSON", cls->name);
    int rc = from_config_obj(out, cls, cfg, err);
    cJSON_Delete(cfg);
    return rc;
}

int optim_from_json(optim_optimizer **out, const char *json, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_from_json: out is NULL");
    *out = NULL;
    if (!json) return optim__err(err, OPTIM_EINVAL, "optim_from_json: json is NULL");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        long at = end ? (long)(end - json) : -1;
        return optim__err(err, OPTIM_EPARSE, "optimizer JSON is malformed near byte %ld", at);
    }
    int rc;
    if (cJSON_IsString(root)) {
        /* A bare name gives the defaults, as keras.optimizers.get("sgd"). */
        const optim_class *cls = optim_find_class(root->valuestring);
        rc = cls ? from_config_obj(out, cls, NULL, err)
                 : optim__err(err, OPTIM_ENOTFOUND, "unknown optimizer class '%s'", root->valuestring);
        cJSON_Delete(root);
        return rc;
    }
    if (!cJSON_IsObject(root)) {
        rc = optim__err(err, OPTIM_ETYPE,
                        "optimizer JSON is %s, expected an object {\"class_name\": ..., "
                        "\"config\": {...}} or a class name string",
                        optim__json_type_name(root));
        cJSON_Delete(root);
        return rc;
    }
    const cJSON *cn = NULL, *config = NULL, *item;
    rc = OPTIM_OK;
    cJSON_ArrayForEach(item, root)
    {
        if (strcmp(item->string, "class_name") == 0) cn = item;
        else if (strcmp(item->string, "config") == 0) config = item;
        else if (strcmp(item->string, "module") == 0 || strcmp(item->string, "registered_name") == 0) {
            /* Keras 3's serialize_keras_object adds these; they carry no options. */
        } else {
            rc = optim__err(err, OPTIM_EKEY,
                            "optimizer JSON has unknown key '%s'; expected class_name and config",
                            item->string);
            break;
        }
    }
    if (!rc && !cJSON_IsString(cn))
        rc = optim__err(err, cn ? OPTIM_ETYPE : OPTIM_EKEY,
                        "optimizer JSON: class_name is %s, expected a string",
                        cn ? optim__json_type_name(cn) : "missing");
    if (!rc) {
        const optim_class *cls = optim_find_class(cn->valuestring);
        rc = cls ? from_config_obj(out, cls, config, err)
                 : optim__err(err, OPTIM_ENOTFOUND, "unknown optimizer class '%s'", cn->valuestring);
    }
    cJSON_Delete(root);
    return rc;
}

/* ---- writing -------------------------------------------------------------------- */

/* A JSON number that parses back to exactly x (cJSON's own printer keeps 15
 * digits when they come within an ulp, which would change float32 values
 * such as 0.009999999776482582). The shortest of %.15g..%.17g that round
 * trips, like Python's repr in all but rare cases. */
void *optim__json_exact_number(double x, int is_float)
{
    if (!isfinite(x)) return cJSON_CreateNull();
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* Floats keep a decimal point, as Python writes them: Keras 3 checks
     * isinstance(momentum, float) when it reads the config back. */
    if (is_float && !strpbrk(buf, ".e")) strcat(buf, ".0");
    return cJSON_CreateRaw(buf);
}

/* Adds param i to o as get_config writes it; returns 0 or OPTIM_ENOMEM. */
/* Makes every number in v print as text that reads back exactly. */
static int exact_numbers(cJSON *v)
{
    for (cJSON *c = v->child; c; c = c->next)
        if (exact_numbers(c)) return -1;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return 0;
    cJSON *raw = optim__json_exact_number(v->valuedouble, 0);
    if (!raw) return -1;
    v->type = cJSON_Raw;
    v->valuestring = raw->valuestring;
    raw->valuestring = NULL;
    cJSON_Delete(raw);
    return 0;
}

char *optim__json_print_exact(const void *item)
{
    cJSON *copy = cJSON_Duplicate(item, 1);
    char *text = copy && !exact_numbers(copy) ? cJSON_PrintUnformatted(copy) : NULL;
    cJSON_Delete(copy);
    return text;
}

static int put_param(optim_optimizer *opt, cJSON *o, size_t i)
{
    const optim_param *p = opt->params[i];
    const optim__hyper *h = &opt->hypers[i];
    cJSON *v;
    if (h->kind == HYPER_NONE) {
        v = cJSON_CreateNull();
    } else if (h->kind == HYPER_SCHEDULE_OBJ) {
        char *text = optim_schedule_serialize(h->sched);
        v = text ? cJSON_CreateRaw(text) : NULL;
        free(text);
    } else {
        /* Variables, callables and schedules are written as their current
         * value, as Keras's _serialize_hyperparameter does. */
        double x = h->number;
        if (h->kind != HYPER_NUMBER && optim_get_hyper(opt, p->name, &x)) x = NAN;
        v = p->type == OPTIM_PARAM_BOOL ? cJSON_CreateBool(x != 0)
                                        : optim__json_exact_number(x, p->type == OPTIM_PARAM_FLOAT &&
                                                                          !(p->flags & OPTIM_PARAM_COUNT));
    }
    if (!v || !cJSON_AddItemToObject(o, p->name, v)) {
        cJSON_Delete(v);
        return OPTIM_ENOMEM;
    }
    return OPTIM_OK;
}

static cJSON *config_obj(optim_optimizer *opt)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "name", opt->name)) goto oom;
    /* OptimizerV2.get_config: name, then the clip options that are set, then
     * the class's keys (learning_rate, decay, ...). Keras 3: the base keys in
     * their declared order, None included, then the class's. */
    static const int legacy_clips[] = {OPTIM__P_CLIPNORM, OPTIM__P_CLIPVALUE, OPTIM__P_GLOBAL_CLIPNORM};
    if (opt->gen == OPTIM_LEGACY)
        for (size_t k = 0; k < 3; k++)
            if (opt->hypers[legacy_clips[k]].kind != HYPER_NONE && put_param(opt, o, (size_t)legacy_clips[k]))
                goto oom;
    for (size_t i = 0; i < opt->nparams; i++) {
        if (!optim__param_in_gen(opt, i)) continue;
        int clip = i == OPTIM__P_CLIPNORM || i == OPTIM__P_CLIPVALUE || i == OPTIM__P_GLOBAL_CLIPNORM;
        if (opt->gen == OPTIM_LEGACY && clip) continue;
        if (put_param(opt, o, i)) goto oom;
    }
    if (opt->cls.get_config) {
        optim_config cfg = {o};
        int rc = opt->cls.get_config(opt, &cfg);
        if (rc > 0) rc = OPTIM_EINVAL;
        if (rc) {
            cJSON_Delete(o);
            optim__opt_err(opt, rc, "%s: get_config failed (%s)", opt->cls.name, optim_strerror(rc));
            return NULL;
        }
    }
    if (opt->gen == OPTIM_LEGACY && !cJSON_AddTrueToObject(o, "is_legacy_optimizer")) goto oom;
    return o;
oom:
    cJSON_Delete(o);
    optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    return NULL;
}

char *optim_get_config(optim_optimizer *opt)
{
    cJSON *o = config_obj(opt);
    if (!o) return NULL;
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    else opt->errmsg[0] = '\0';
    return s;
}

char *optim_serialize(optim_optimizer *opt)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *cfg = config_obj(opt);
    char *s = NULL;
    if (o && cfg && cJSON_AddStringToObject(o, "class_name", opt->cls.name) &&
        cJSON_AddItemToObject(o, "config", cfg)) {
        cfg = NULL;
        s = cJSON_PrintUnformatted(o);
    }
    cJSON_Delete(cfg);
    cJSON_Delete(o);
    if (!s) optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    else opt->errmsg[0] = '\0';
    return s;
}
