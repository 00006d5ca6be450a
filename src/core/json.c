/* JSON glue (core): the one reader of Keras serialized objects, exact
 * numbers, string lists, and what get_config hooks write with. */
#include "core/json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer_class.h"

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

/* A string or null member: *out is the string, NULL for null. */
static int string_or_null(const cJSON *item, const char *what, const char **out, optim_error *err)
{
    if (cJSON_IsNull(item)) return OPTIM_OK;
    if (!cJSON_IsString(item))
        return optim__err(err, OPTIM_ETYPE, "%s JSON: %s is %s, expected a string or null", what,
                          item->string, optim__json_type_name(item));
    *out = item->valuestring;
    return OPTIM_OK;
}

static int kobj_member(const cJSON *item, const char *what, optim__kobj *out, const cJSON **cn,
                       optim_error *err)
{
    const char *k = item->string;
    if (strcmp(k, "class_name") == 0) *cn = item;
    else if (strcmp(k, "config") == 0) out->config = item;
    else if (strcmp(k, "module") == 0) return string_or_null(item, what, &out->module, err);
    else if (strcmp(k, "registered_name") == 0)
        return string_or_null(item, what, &out->registered_name, err);
    else
        return optim__err(err, OPTIM_EKEY,
                          "%s JSON has unknown key '%s'; expected class_name and config (and "
                          "Keras 3's module and registered_name)",
                          what, k);
    return OPTIM_OK;
}

int optim__kobj_read(const void *root_item, const char *what, int allow_bare, optim__kobj *out,
                     optim_error *err)
{
    const cJSON *root = root_item, *cn = NULL, *item;
    memset(out, 0, sizeof *out);
    if (allow_bare && cJSON_IsString(root)) {
        out->class_name = root->valuestring;
        return OPTIM_OK;
    }
    if (!cJSON_IsObject(root))
        return optim__err(err, OPTIM_ETYPE,
                          "%s JSON is %s, expected an object {\"class_name\": ..., \"config\": "
                          "{...}}%s",
                          what, optim__json_type_name(root),
                          allow_bare ? " or a class name string" : "");
    int rc = optim__json_unique_keys(root, what, err);
    cJSON_ArrayForEach(item, root) if (!rc) rc = kobj_member(item, what, out, &cn, err);
    if (rc) return rc;
    if (!cJSON_IsString(cn))
        return optim__err(err, cn ? OPTIM_ETYPE : OPTIM_EKEY,
                          "%s JSON: class_name is %s, expected a string", what,
                          cn ? optim__json_type_name(cn) : "missing");
    out->class_name = cn->valuestring;
    const cJSON *config = out->config;
    if (config && !cJSON_IsObject(config))
        return optim__err(err, OPTIM_ETYPE, "%s: config is %s, expected an object", cn->valuestring,
                          optim__json_type_name(config));
    return optim__json_unique_keys(config, cn->valuestring, err);
}

int optim__json_unique_keys(const void *obj, const char *owner, optim_error *err)
{
    const cJSON *o = obj, *item;
    cJSON_ArrayForEach(item, o)
    {
        for (const cJSON *prev = o->child; prev != item; prev = prev->next)
            if (strcmp(prev->string, item->string) == 0)
                return optim__err(err, OPTIM_EPARSE, "%s: config key '%s' appears twice", owner,
                                  item->string);
    }
    return OPTIM_OK;
}

int optim__offer_key(const char *owner, const char *key, const void *item,
                     optim__set_config_call call, void *ctx, optim_error *err)
{
    if (!call) return OPTIM__NOT_TAKEN;
    char *text = optim__json_print_exact(item);
    if (!text) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    optim_error local;
    optim__err_clear(&local);
    int rc = call(ctx, key, text, &local);
    cJSON_free(text);
    if (rc > 0) rc = OPTIM_EINVAL;
    /* OPTIM_EKEY with a message is the hook's own error (an unknown key
     * inside a nested config, reported as the nested object's). */
    if (rc == OPTIM_EKEY && !local.msg[0]) return OPTIM__NOT_TAKEN;
    if (!rc) return rc;
    if (local.msg[0]) return optim__err(err, rc, "%s", local.msg);
    return optim__err(err, rc, "%s: config key '%s': %s", owner, key, optim_strerror(rc));
}

/* ---- numbers ------------------------------------------------------------------- */

/* A number's form, kept in bits of cJSON's type above those cJSON uses (its
 * type tests mask with 0xFF; cJSON_Duplicate copies the bits). */
#define FORM_INT (1 << 12)
#define FORM_FLOAT (1 << 13)

/* The end of the next number token at or after p (outside strings), its
 * form in *form; NULL when there is none. */
static const char *next_number(const char *p, int *form)
{
    while (*p && *p != '-' && !(*p >= '0' && *p <= '9')) {
        if (*p++ != '"') continue;
        while (*p && *p != '"') p += p[0] == '\\' && p[1] ? 2 : 1;
        if (*p) p++;
    }
    if (!*p) return NULL;
    const char *start = p;
    while (*p && strchr("+-0123456789.eE", *p)) p++;
    *form = FORM_INT;
    for (const char *c = start; c < p; c++)
        if (*c == '.' || *c == 'e' || *c == 'E') *form = FORM_FLOAT;
    return p;
}

/* Walks v in document order (cJSON keeps it) beside the text. */
static const char *mark_numbers(cJSON *v, const char *p)
{
    if (cJSON_IsNumber(v)) {
        int form = 0;
        p = next_number(p, &form);
        v->type |= form;
        return p;
    }
    for (cJSON *c = v->child; c && p; c = c->next) p = mark_numbers(c, p);
    return p;
}

void *optim__json_parse(const char *text, const char **end, int require_null_terminated)
{
    cJSON *root = cJSON_ParseWithOpts(text, end, require_null_terminated);
    if (root) mark_numbers(root, text);
    return root;
}

optim__num_form optim__json_number_form(const void *item)
{
    const cJSON *v = item;
    if (!cJSON_IsNumber(v)) return OPTIM__NUM_ANY;
    return (v->type & FORM_INT)  ? OPTIM__NUM_INT
        : (v->type & FORM_FLOAT) ? OPTIM__NUM_FLOAT
                                 : OPTIM__NUM_ANY;
}

/* The shortest of %.15g..%.17g that reads back exactly (cJSON's own printer
 * keeps 15 digits when they come within an ulp, which would change float32
 * values such as 0.009999999776482582), like Python's repr in all but rare
 * cases. */
void *optim__json_exact_number(double x, optim__num_form form)
{
    if (!isfinite(x)) return cJSON_CreateNull();
    char buf[400];
    /* An int as Python writes one: every digit (%.0f of a whole double is
     * exact, and reads back as x). */
    if (form == OPTIM__NUM_INT && x == floor(x)) {
        snprintf(buf, sizeof buf, "%.0f", x);
        return cJSON_CreateRaw(buf);
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* Floats keep a decimal point, as Python writes them: Keras 3 checks
     * isinstance(momentum, float) when it reads the config back. */
    if (form == OPTIM__NUM_FLOAT && !strpbrk(buf, ".e")) strcat(buf, ".0");
    return cJSON_CreateRaw(buf);
}

/* Makes every number in v print as text that reads back exactly, in the
 * form it was read in. */
static int exact_numbers(cJSON *v)
{
    for (cJSON *c = v->child; c; c = c->next)
        if (exact_numbers(c)) return -1;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return 0;
    cJSON *raw = optim__json_exact_number(v->valuedouble, optim__json_number_form(v));
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

/* ---- what get_config hooks write with (public) ----------------------------------- */

static int put_item(optim_config *cfg, const char *key, cJSON *v)
{
    if (!v) return OPTIM_ENOMEM;
    /* In place when the key exists already. */
    if (cJSON_GetObjectItemCaseSensitive(cfg->obj, key))
        return cJSON_ReplaceItemInObjectCaseSensitive(cfg->obj, key, v) ? OPTIM_OK : OPTIM_ENOMEM;
    if (!cJSON_AddItemToObject(cfg->obj, key, v)) {
        cJSON_Delete(v);
        return OPTIM_ENOMEM;
    }
    return OPTIM_OK;
}

int optim_config_put(optim_config *cfg, const char *key, const char *json_value)
{
    if (!cfg || !key || !json_value) return OPTIM_EINVAL;
    cJSON *check = cJSON_Parse(json_value);
    if (!check) return OPTIM_EPARSE;
    cJSON_Delete(check);
    /* Kept as the class wrote it (cJSON would reprint numbers with 15 digits). */
    return put_item(cfg, key, cJSON_CreateRaw(json_value));
}

int optim_config_put_after(optim_config *cfg, const char *key, const char *json_value,
                           const char *after)
{
    int rc = optim_config_put(cfg, key, json_value);
    cJSON *obj = cfg ? cfg->obj : NULL;
    cJSON *at = rc || !after || strcmp(key, after) == 0
        ? NULL
        : cJSON_GetObjectItemCaseSensitive(obj, after);
    if (!at) return rc;
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(obj, key);
    item->prev = at;
    item->next = at->next;
    if (at->next) at->next->prev = item;
    else obj->child->prev = item; /* cJSON keeps the last item in child->prev */
    at->next = item;
    return OPTIM_OK;
}

int optim_config_put_number(optim_config *cfg, const char *key, double value)
{
    if (!cfg || !key) return OPTIM_EINVAL;
    return put_item(cfg, key, optim__json_exact_number(value, OPTIM__NUM_FLOAT));
}

int optim_config_put_strings(optim_config *cfg, const char *key, const char *const *list)
{
    if (!cfg || !key) return OPTIM_EINVAL;
    cJSON *a = list ? cJSON_CreateArray() : cJSON_CreateNull();
    for (size_t i = 0; a && list && list[i]; i++) {
        cJSON *s = cJSON_CreateString(list[i]);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return OPTIM_ENOMEM;
        }
    }
    return put_item(cfg, key, a);
}

void optim_strings_free(char **list)
{
    for (size_t i = 0; list && list[i]; i++) free(list[i]);
    free(list);
}

static int strings_copy(const cJSON *v, const char *key, char ***out, optim_error *err)
{
    size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
    char **list = calloc(n + 1, sizeof *list);
    if (!list) return optim__err(err, OPTIM_ENOMEM, "config key '%s': out of memory", key);
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        if (!cJSON_IsString(item)) {
            optim_strings_free(list);
            return optim__err(err, OPTIM_ETYPE,
                              "config key '%s': element %zu is %s (%s[%zu]), expected a string",
                              key, i, optim__json_type_name(item), key, i);
        }
        if (!(list[i++] = optim__strdup(item->valuestring))) {
            optim_strings_free(list);
            return optim__err(err, OPTIM_ENOMEM, "config key '%s': out of memory", key);
        }
    }
    *out = list;
    return OPTIM_OK;
}

int optim_config_read_strings(const char *key, const char *json_value, char ***out,
                              optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_config_read_strings: out is NULL");
    *out = NULL;
    if (!key || !json_value)
        return optim__err(err, OPTIM_EINVAL, "optim_config_read_strings: %s is NULL",
                          key ? "json_value" : "key");
    cJSON *v = cJSON_Parse(json_value);
    int rc = OPTIM_OK;
    if (!v) rc = optim__err(err, OPTIM_EPARSE, "config key '%s' is not valid JSON", key);
    else if (cJSON_IsArray(v)) rc = strings_copy(v, key, out, err);
    else if (!cJSON_IsNull(v))
        rc = optim__err(err, OPTIM_ETYPE,
                        "config key '%s' is %s, expected a list of strings or null", key,
                        optim__json_type_name(v));
    cJSON_Delete(v);
    return rc;
}

int optim_config_move_before(optim_config *cfg, const char *key, const char *before)
{
    if (!cfg || !key || !before) return OPTIM_EINVAL;
    cJSON *o = cfg->obj;
    if (!cJSON_GetObjectItemCaseSensitive(o, before) || !cJSON_GetObjectItemCaseSensitive(o, key))
        return OPTIM_EKEY;
    if (strcmp(key, before) == 0) return OPTIM_OK;
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(o, key);
    cJSON *after = o->child;
    while (strcmp(after->string, before) != 0) after = after->next;
    /* Linked in by hand: the head's prev is the tail, as cJSON keeps it. */
    item->next = after;
    item->prev = after->prev;
    if (after == o->child) o->child = item;
    else item->prev->next = item;
    after->prev = item;
    return OPTIM_OK;
}

int optim_config_remove(optim_config *cfg, const char *key)
{
    if (!cfg || !key) return OPTIM_EINVAL;
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(cfg->obj, key);
    if (!item) return OPTIM_EKEY;
    cJSON_Delete(item);
    return OPTIM_OK;
}
