/* Learning-rate schedule objects: the class mechanism (registry, JSON,
 * lifetime) shared by the built-ins in src/schedules/ and user classes. */
#include "optimizer/impl.h"
#include "optim/schedules.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct optim_schedule {
    optim_schedule_class cls;  /* copied, zero-extended */
    char *name;                /* Keras's config "name", NULL for None */
    double *values;            /* one per param */
    void *state;
};

typedef struct user_schedule {
    optim_schedule_class cls;
    struct user_schedule *next;
} user_schedule;
static user_schedule *user_schedules;

static void class_copy(optim_schedule_class *dst, const optim_schedule_class *src)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, src->size < sizeof *dst ? src->size : sizeof *dst);
    dst->size = sizeof *dst;
}

static int class_check(const optim_schedule_class *c, optim_error *err)
{
    if (!c) return optim__err(err, OPTIM_EINVAL, "schedule class is NULL");
    if (c->size < offsetof(optim_schedule_class, destroy) + sizeof c->destroy || c->version < 1 ||
        c->version > OPTIM_SCHEDULE_CLASS_VERSION)
        return optim__err(err, OPTIM_EVERSION, "schedule class: size %u, version %u; expected version 1..%d",
                          (unsigned)c->size, (unsigned)c->version, OPTIM_SCHEDULE_CLASS_VERSION);
    if (!c->name || !c->name[0] || !c->value)
        return optim__err(err, OPTIM_EINVAL, "schedule class '%s': needs a name and a value hook",
                          c->name ? c->name : "");
    if (c->n_params && !c->params)
        return optim__err(err, OPTIM_EINVAL, "schedule class '%s': params is NULL", c->name);
    for (size_t i = 0; i < c->n_params; i++) {
        const optim_param *p = &c->params[i];
        if (!p->name || !p->name[0] || strcmp(p->name, "name") == 0)
            return optim__err(err, OPTIM_EINVAL, "schedule class '%s': param %zu has a bad name", c->name, i);
        if (!(p->flags & OPTIM_PARAM_REQUIRED) && isnan(p->default_value) && !(p->flags & OPTIM_PARAM_NULLABLE))
            return optim__err(err, OPTIM_EINVAL, "schedule class '%s': param '%s' has no default",
                              c->name, p->name);
    }
    return OPTIM_OK;
}

const optim_schedule_class *optim_find_schedule_class(const char *name)
{
    if (!name) return NULL;
    static const optim_schedule_class *const builtins[] = {
#define OPTIM__SCHEDULE_ENTRY(sym) &sym,
        OPTIM_BUILTIN_SCHEDULES(OPTIM__SCHEDULE_ENTRY)
#undef OPTIM__SCHEDULE_ENTRY
        NULL};
    for (size_t i = 0; builtins[i]; i++)
        if (strcmp(builtins[i]->name, name) == 0) return builtins[i];
    for (const user_schedule *u = user_schedules; u; u = u->next)
        if (strcmp(u->cls.name, name) == 0) return &u->cls;
    return NULL;
}

int optim_register_schedule_class(const optim_schedule_class *cls, optim_error *err)
{
    int rc = class_check(cls, err);
    if (rc) return rc;
    if (optim_find_schedule_class(cls->name))
        return optim__err(err, OPTIM_EINVAL, "schedule class '%s' is already registered", cls->name);
    user_schedule *u = calloc(1, sizeof *u);
    if (!u) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    class_copy(&u->cls, cls);
    u->next = user_schedules;
    user_schedules = u;
    optim__err_clear(err);
    return OPTIM_OK;
}

void optim_schedule_destroy(optim_schedule *s)
{
    if (!s) return;
    if (s->cls.destroy && s->state) s->cls.destroy(s);
    free(s->name);
    free(s->values);
    free(s->state);
    free(s);
}

double optim_schedule_param(const optim_schedule *s, size_t i)
{
    return i < s->cls.n_params ? s->values[i] : NAN;
}

void *optim_schedule_state(const optim_schedule *s) { return s->state; }
const optim_schedule_class *optim_schedule_class_of(const optim_schedule *s) { return &s->cls; }
double optim_schedule_value(const optim_schedule *s, int64_t step) { return s->cls.value(s, step); }

static int from_config(optim_schedule **out, const optim_schedule_class *cls, const cJSON *config,
                       optim_error *err)
{
    const char *cn = cls->name;
    if (config && !cJSON_IsObject(config))
        return optim__err(err, OPTIM_ETYPE, "%s: config is %s, expected an object", cn,
                          optim__json_type_name(config));
    optim_schedule *s = calloc(1, sizeof *s);
    if (!s) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    class_copy(&s->cls, cls);
    s->values = optim__calloc(cls->n_params, sizeof *s->values);
    s->state = optim__calloc(1, cls->state_size);
    int rc = OPTIM_OK;
    if (!s->values || !s->state) {
        rc = optim__err(err, OPTIM_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < cls->n_params; i++) s->values[i] = cls->params[i].default_value;
    char *seen = optim__calloc(cls->n_params, 1);
    if (!seen) {
        rc = optim__err(err, OPTIM_ENOMEM, "out of memory");
        goto fail;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, config)
    {
        const char *key = item->string;
        for (const cJSON *prev = config->child; prev != item; prev = prev->next)
            if (strcmp(prev->string, key) == 0) {
                rc = optim__err(err, OPTIM_EPARSE, "%s: config key '%s' appears twice", cn, key);
                goto done;
            }
        if (strcmp(key, "name") == 0) {
            if (!cJSON_IsString(item) && !cJSON_IsNull(item)) {
                rc = optim__err(err, OPTIM_ETYPE, "%s: config key 'name' is %s, expected a string or null",
                                cn, optim__json_type_name(item));
                goto done;
            }
            if (cJSON_IsString(item) && !(s->name = optim__strdup(item->valuestring))) {
                rc = optim__err(err, OPTIM_ENOMEM, "out of memory");
                goto done;
            }
            continue;
        }
        size_t i = 0;
        while (i < cls->n_params && strcmp(cls->params[i].name, key) != 0) i++;
        if (i < cls->n_params) {
            const optim_param *p = &cls->params[i];
            int ok = p->type == OPTIM_PARAM_BOOL ? cJSON_IsBool(item) : cJSON_IsNumber(item);
            if (cJSON_IsNull(item) && (p->flags & OPTIM_PARAM_NULLABLE)) {
                s->values[i] = NAN;
                seen[i] = 1;
                continue;
            }
            if (!ok) {
                rc = optim__err(err, OPTIM_ETYPE, "%s: config key '%s' is %s, expected %s", cn, key,
                                optim__json_type_name(item),
                                p->type == OPTIM_PARAM_BOOL ? "true or false"
                                : p->type == OPTIM_PARAM_INT ? "an integer" : "a number");
                goto done;
            }
            double v = cJSON_IsBool(item) ? (cJSON_IsTrue(item) ? 1.0 : 0.0) : item->valuedouble;
            if ((rc = optim__check_param_value(cn, p, v, "", err))) goto done;
            s->values[i] = v;
            seen[i] = 1;
            continue;
        }
        rc = OPTIM_EKEY;
        if (cls->set_config) {
            char *text = optim__json_print_exact(item);
            if (!text) {
                rc = optim__err(err, OPTIM_ENOMEM, "out of memory");
                goto done;
            }
            optim_error local;
            optim__err_clear(&local);
            rc = cls->set_config(s, key, text, &local);
            cJSON_free(text);
            if (rc > 0) rc = OPTIM_EINVAL;
            if (rc && rc != OPTIM_EKEY) {
                if (local.msg[0]) optim__err(err, rc, "%s", local.msg);
                else optim__err(err, rc, "%s: config key '%s': %s", cn, key, optim_strerror(rc));
                goto done;
            }
        }
        if (rc == OPTIM_EKEY) {
            char keys[512];
            size_t used = (size_t)snprintf(keys, sizeof keys, "name");
            for (size_t k = 0; k < cls->n_params && used < sizeof keys; k++)
                used += (size_t)snprintf(keys + used, sizeof keys - used, ", %s", cls->params[k].name);
            rc = optim__err(err, OPTIM_EKEY, "%s: unknown config key '%s'; expected one of: %s", cn, key,
                            keys);
            goto done;
        }
    }
    for (size_t i = 0; i < cls->n_params; i++)
        if ((cls->params[i].flags & OPTIM_PARAM_REQUIRED) && !seen[i]) {
            rc = optim__err(err, OPTIM_EKEY, "%s: config key '%s' is required", cn, cls->params[i].name);
            goto done;
        }
    if (cls->validate) {
        optim_error local;
        optim__err_clear(&local);
        rc = cls->validate(s, &local);
        if (rc > 0) rc = OPTIM_EINVAL;
        if (rc) optim__err(err, rc, "%s", local.msg[0] ? local.msg : "the class rejected this configuration");
    }
done:
    free(seen);
    if (!rc) {
        *out = s;
        return OPTIM_OK;
    }
fail:
    optim_schedule_destroy(s);
    return rc;
}

int optim__schedule_from_cjson(optim_schedule **out, const void *root_item, optim_error *err)
{
    const cJSON *root = root_item;
    *out = NULL;
    if (!cJSON_IsObject(root))
        return optim__err(err, OPTIM_ETYPE,
                          "schedule JSON is %s, expected {\"class_name\": ..., \"config\": {...}}",
                          optim__json_type_name(root));
    const cJSON *cn = NULL, *config = NULL, *item;
    cJSON_ArrayForEach(item, root)
    {
        if (strcmp(item->string, "class_name") == 0) cn = item;
        else if (strcmp(item->string, "config") == 0) config = item;
        else if (strcmp(item->string, "module") != 0 && strcmp(item->string, "registered_name") != 0)
            return optim__err(err, OPTIM_EKEY, "schedule JSON has unknown key '%s'; expected class_name and config",
                              item->string);
    }
    if (!cJSON_IsString(cn))
        return optim__err(err, cn ? OPTIM_ETYPE : OPTIM_EKEY, "schedule JSON: class_name is %s, expected a string",
                          cn ? optim__json_type_name(cn) : "missing");
    const optim_schedule_class *cls = optim_find_schedule_class(cn->valuestring);
    if (!cls) return optim__err(err, OPTIM_ENOTFOUND, "unknown schedule class '%s'", cn->valuestring);
    return from_config(out, cls, config, err);
}

int optim_schedule_from_json(optim_schedule **out, const char *json, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_schedule_from_json: out is NULL");
    *out = NULL;
    if (!json) return optim__err(err, OPTIM_EINVAL, "optim_schedule_from_json: json is NULL");
    cJSON *root = cJSON_Parse(json);
    if (!root) return optim__err(err, OPTIM_EPARSE, "schedule JSON is malformed");
    int rc = optim__schedule_from_cjson(out, root, err);
    cJSON_Delete(root);
    if (!rc) optim__err_clear(err);
    return rc;
}

char *optim_schedule_serialize(const optim_schedule *s)
{
    cJSON *o = cJSON_CreateObject(), *cfg = cJSON_CreateObject();
    char *text = NULL;
    if (!o || !cfg) goto out;
    for (size_t i = 0; i < s->cls.n_params; i++) {
        const optim_param *p = &s->cls.params[i];
        cJSON *v = isnan(s->values[i]) ? cJSON_CreateNull()
                   : p->type == OPTIM_PARAM_BOOL ? cJSON_CreateBool(s->values[i] != 0)
                   : optim__json_exact_number(s->values[i], p->type == OPTIM_PARAM_FLOAT &&
                                                                !(p->flags & OPTIM_PARAM_COUNT));
        if (!v || !cJSON_AddItemToObject(cfg, p->name, v)) {
            cJSON_Delete(v);
            goto out;
        }
    }
    if (s->cls.get_config) {
        optim_config c = {cfg};
        if (s->cls.get_config(s, &c)) goto out;
    }
    if (!(s->name ? cJSON_AddStringToObject(cfg, "name", s->name) : cJSON_AddNullToObject(cfg, "name")))
        goto out;
    if (!cJSON_AddStringToObject(o, "class_name", s->cls.name) || !cJSON_AddItemToObject(o, "config", cfg))
        goto out;
    cfg = NULL;
    text = cJSON_PrintUnformatted(o);
out:
    cJSON_Delete(cfg);
    cJSON_Delete(o);
    return text;
}
