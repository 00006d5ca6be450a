/* Learning-rate schedule objects: lifetime, JSON and values, shared by the
 * built-ins in src/schedules/ and user classes (their registry is
 * registry.c's). */
#include "optimizer/params.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct optim_schedule {
    optim_schedule_class cls; /* copied, zero-extended */
    char *name; /* Keras's config "name", NULL for None */
    int name_given; /* a "name" key was read (else Keras 3 writes its default) */
    double *values; /* one per param */
    unsigned char *forms; /* optim__num_form each value was read in, one per param */
    void *state;
};

void optim_schedule_destroy(optim_schedule *s)
{
    if (!s) return;
    if (s->cls.destroy && s->state) s->cls.destroy(s);
    free(s->name);
    free(s->values);
    free(s->forms);
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

static int schedule_alloc(optim_schedule **out, const optim_schedule_class *cls, optim_error *err)
{
    optim_schedule *s = calloc(1, sizeof *s);
    if (s) {
        optim__schedule_class_copy(&s->cls, cls);
        s->values = optim__calloc(cls->n_params, sizeof *s->values);
        s->forms = optim__calloc(cls->n_params, sizeof *s->forms);
        s->state = optim__calloc(1, cls->state_size);
    }
    if (!s || !s->values || !s->forms || !s->state) {
        optim_schedule_destroy(s);
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < cls->n_params; i++) s->values[i] = cls->params[i].default_value;
    *out = s;
    return OPTIM_OK;
}

static int set_name(optim_schedule *s, const cJSON *item, optim_error *err)
{
    if (!cJSON_IsString(item) && !cJSON_IsNull(item))
        return optim__err(err, OPTIM_ETYPE,
                          "%s: config key 'name' is %s, expected a string or null", s->cls.name,
                          optim__json_type_name(item));
    free(s->name);
    s->name = NULL;
    s->name_given = 1;
    if (cJSON_IsString(item) && !(s->name = optim__strdup(item->valuestring)))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    return OPTIM_OK;
}

static int call_set_config(void *s, const char *key, const char *text, optim_error *err)
{
    optim_schedule *sch = s;
    return sch->cls.set_config(sch, key, text, err);
}

static int unknown_key(const optim_schedule_class *cls, const char *key, optim_error *err)
{
    char keys[512] = "name";
    for (size_t k = 0; k < cls->n_params; k++)
        optim__keys_append(keys, sizeof keys, cls->params[k].name);
    return optim__err(err, OPTIM_EKEY, "%s: unknown config key '%s'; expected one of: %s",
                      cls->name, key, keys);
}

/* One config key; seen[i] marks the params given. */
static int read_key(optim_schedule *s, const cJSON *item, char *seen, optim_error *err)
{
    const optim_schedule_class *cls = &s->cls;
    const char *key = item->string;
    if (strcmp(key, "name") == 0) return set_name(s, item, err);
    for (size_t i = 0; i < cls->n_params; i++) {
        const optim_param *p = &cls->params[i];
        if (strcmp(p->name, key) != 0) continue;
        double v;
        int rc = optim__param_from_json(cls->name, p, NULL, item, &v, err);
        if (!rc) rc = optim__check_param_value(cls->name, p, v, "", err);
        if (rc) return rc;
        s->values[i] = v;
        s->forms[i] = (unsigned char)optim__json_number_form(item);
        seen[i] = 1;
        return OPTIM_OK;
    }
    int rc =
        optim__offer_key(cls->name, key, item, cls->set_config ? call_set_config : NULL, s, err);
    return rc == OPTIM__NOT_TAKEN ? unknown_key(cls, key, err) : rc;
}

static int read_config(optim_schedule *s, const cJSON *config, optim_error *err)
{
    const optim_schedule_class *cls = &s->cls;
    char *seen = optim__calloc(cls->n_params, 1);
    if (!seen) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    int rc = OPTIM_OK;
    const cJSON *item;
    cJSON_ArrayForEach(item, config) if (!rc) rc = read_key(s, item, seen, err);
    for (size_t i = 0; i < cls->n_params && !rc; i++)
        if ((cls->params[i].flags & OPTIM_PARAM_REQUIRED) && !seen[i])
            rc = optim__err(err, OPTIM_EKEY, "%s: config key '%s' is required", cls->name,
                            cls->params[i].name);
    free(seen);
    if (rc || !cls->validate) return rc;
    optim_error local;
    optim__err_clear(&local);
    rc = cls->validate(s, &local);
    if (rc > 0) rc = OPTIM_EINVAL;
    if (rc)
        optim__err(err, rc, "%s",
                   local.msg[0] ? local.msg : "the class rejected this configuration");
    return rc;
}

int optim__schedule_from_cjson(optim_schedule **out, const void *root, optim_error *err)
{
    *out = NULL;
    optim__kobj o;
    int rc = optim__kobj_read(root, "schedule", 0, &o, err);
    if (rc) return rc;
    const optim_schedule_class *cls = optim_find_schedule_class(o.class_name);
    if (!cls && strncmp(o.class_name, "Addons>", 7) == 0 &&
        optim_find_schedule_class(o.class_name + 7))
        return optim__err(err, OPTIM_ENOTFOUND,
                          "unknown schedule class '%s': TF Addons has no schedule '%s' (without "
                          "the prefix it is optim's '%s', not TF Addons')",
                          o.class_name, o.class_name + 7, o.class_name + 7);
    if (!cls) return optim__err(err, OPTIM_ENOTFOUND, "unknown schedule class '%s'", o.class_name);
    optim_schedule *s = NULL;
    if ((rc = schedule_alloc(&s, cls, err))) return rc;
    if ((rc = read_config(s, o.config, err))) {
        optim_schedule_destroy(s);
        return rc;
    }
    *out = s;
    return OPTIM_OK;
}

int optim_schedule_from_json(optim_schedule **out, const char *json, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_schedule_from_json: out is NULL");
    *out = NULL;
    if (!json) return optim__err(err, OPTIM_EINVAL, "optim_schedule_from_json: json is NULL");
    cJSON *root = optim__json_parse(json, NULL, 0);
    if (!root) return optim__err(err, OPTIM_EPARSE, "schedule JSON is malformed");
    int rc = optim__schedule_from_cjson(out, root, err);
    cJSON_Delete(root);
    if (!rc) optim__err_clear(err);
    return rc;
}

/* Keras 3's default names (learning_rate_schedule.py); a user class's is
 * its class name. tf.keras's schedules default to None. */
static const char *keras3_default_name(const optim_schedule_class *cls)
{
    static const char *const names[][2] = {
        {"PiecewiseConstantDecay", "PiecewiseConstant"},
        {"CosineDecayRestarts", "SGDRDecay"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(cls->name, names[i][0]) == 0) return names[i][1];
    return cls->name;
}

static int put_values(const optim_schedule *s, cJSON *cfg, int after_name)
{
    for (size_t i = 0; i < s->cls.n_params; i++) {
        const optim_param *p = &s->cls.params[i];
        if (((p->flags & OPTIM_PARAM_AFTER_NAME) != 0) != after_name) continue;
        cJSON *v = optim__param_to_json(p, NULL, s->values[i], (optim__num_form)s->forms[i]);
        if (!v || !cJSON_AddItemToObject(cfg, p->name, v)) {
            cJSON_Delete(v);
            return OPTIM_ENOMEM;
        }
    }
    return OPTIM_OK;
}

/* The config object: the params in their order, the class's own keys, name,
 * the params written after name. */
static cJSON *config_obj(const optim_schedule *s, int keras3)
{
    cJSON *cfg = cJSON_CreateObject();
    optim_config c = {cfg};
    if (!cfg || put_values(s, cfg, 0) || (s->cls.get_config && s->cls.get_config(s, &c))) goto fail;
    const char *name = s->name     ? s->name
        : keras3 && !s->name_given ? keras3_default_name(&s->cls)
                                   : NULL;
    /* TF Addons' get_config writes no name: only one that was read. */
    if (s->cls.tfa_module && !s->name_given) name = NULL;
    else if (!(name ? cJSON_AddStringToObject(cfg, "name", name)
                    : cJSON_AddNullToObject(cfg, "name")))
        goto fail;
    if (put_values(s, cfg, 1)) goto fail;
    return cfg;
fail:
    cJSON_Delete(cfg);
    return NULL;
}

/* As Keras 3's serialize_keras_object writes a built-in:
 * {"module", "class_name", "config", "registered_name": null}; a user class
 * has no Keras module, and its registered name is its class name. A TF
 * Addons class: its module and "Addons>NAME" (tf-keras 2.13+), or that
 * registered name as class_name alone (tf.keras 2.11-2.12). */
static int put_string_or_null(cJSON *o, const char *key, const char *v)
{
    return v ? cJSON_AddStringToObject(o, key, v) != NULL : cJSON_AddNullToObject(o, key) != NULL;
}

void *optim__schedule_to_cjson(const optim_schedule *s, int module, int keras3_names)
{
    cJSON *o = cJSON_CreateObject(), *cfg = config_obj(s, keras3_names);
    int builtin = optim__schedule_class_is_builtin(s->cls.name);
    const char *mod = s->cls.tfa_module ? s->cls.tfa_module
        : builtin                       ? "keras.optimizers.schedules"
                                        : NULL;
    char tfa[160];
    snprintf(tfa, sizeof tfa, "Addons>%s", s->cls.name);
    const char *reg = s->cls.tfa_module ? tfa : builtin ? NULL : s->cls.name;
    const char *cn = s->cls.tfa_module && !module ? tfa : s->cls.name;
    int ok = o && cfg && (!module || put_string_or_null(o, "module", mod)) &&
        cJSON_AddStringToObject(o, "class_name", cn) && cJSON_AddItemToObject(o, "config", cfg);
    if (ok) cfg = NULL;
    if (ok && module) ok = put_string_or_null(o, "registered_name", reg);
    cJSON_Delete(cfg);
    if (ok) return o;
    cJSON_Delete(o);
    return NULL;
}

char *optim_schedule_serialize(const optim_schedule *s)
{
    cJSON *o = optim__schedule_to_cjson(s, 0, 0);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}
