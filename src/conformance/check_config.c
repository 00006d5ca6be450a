/* Checks of the config: get_config writes every declared key, and gives
 * back every key set (the run's config, each param set to another value);
 * get_config -> from_config gives the same config text and the same next
 * step bit for bit; unknown keys and bad values are refused with a message
 * naming the key. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"

static int in_generation(const cf_ctx *c, const optim_param *p)
{
    uint32_t other =
        c->generation == OPTIM_LEGACY ? OPTIM_PARAM_KERAS3_ONLY : OPTIM_PARAM_LEGACY_ONLY;
    return !(p->flags & other);
}

static void keys_written(cf_ctx *c)
{
    optim_optimizer *opt;
    char why[CF_TEXT] = "", *text = NULL;
    if (optim__cf_create(c, NULL, NULL, &opt, why, sizeof why) == 0 &&
        !(text = optim_get_config(opt)))
        snprintf(why, sizeof why, "optim_get_config returned NULL: %s", optim_errmsg(opt));
    cJSON *cfg = text ? cJSON_Parse(text) : NULL;
    if (text && !cJSON_IsObject(cfg)) snprintf(why, sizeof why, "not a JSON object: %.200s", text);
    /* (legacy LossScaleOptimizer writes no name, as tf.keras) */
    if (cfg && !c->wrapper && !cJSON_GetObjectItemCaseSensitive(cfg, "name"))
        snprintf(why, sizeof why, "no 'name' key");
    for (size_t i = 0; cfg && !why[0] && i < c->cls->n_params; i++) {
        const char *key = c->cls->params[i].name;
        if (in_generation(c, &c->cls->params[i]) && !cJSON_GetObjectItemCaseSensitive(cfg, key))
            snprintf(why, sizeof why, "declared key '%s' missing from %.200s", key, text);
    }
    optim__cf_report(c, "config.keys_written", !why[0],
                     "name (update rules) and every declared key of the generation", "%s",
                     why[0] ? why : "all written");
    cJSON_Delete(cfg);
    optim_free(text);
    optim_destroy(opt);
}

/* A fresh optimizer and one from its get_config: same text, same step. */
static int round_trip(cf_ctx *c, optim_dtype dt, char *why, size_t n)
{
    optim_optimizer *a = NULL, *b = NULL;
    char *t1 = NULL, *t2 = NULL;
    cf_problem pa = {0}, pb = {0};
    cf_snapshot sa = {0}, sb = {0};
    optim_error err = {0};
    int bad = 1;
    if (optim__cf_create(c, NULL, NULL, &a, why, n)) goto done;
    if (!(t1 = optim_get_config(a))) {
        snprintf(why, n, "get_config: %s", optim_errmsg(a));
        goto done;
    }
    /* Under the name the generation is written with, as Keras finds the
     * class: "Addons>NAME" for a TF Addons class in the legacy generation
     * (TF Addons' MultiOptimizer and Keras 3's share a class name). */
    char cn[128];
    const int tfa = c->generation == OPTIM_LEGACY && c->cls->tfa_name;
    snprintf(cn, sizeof cn, "%s%s", tfa ? "Addons>" : "", tfa ? c->cls->tfa_name : c->cls->name);
    if (optim_from_config(&b, cn, t1, &err)) {
        snprintf(why, n, "from_config(get_config) refused: %s", err.msg);
        goto done;
    }
    if (!(t2 = optim_get_config(b))) {
        snprintf(why, n, "get_config: %s", optim_errmsg(b));
        goto done;
    }
    if (strcmp(t1, t2)) {
        snprintf(why, n, "config %.200s became %.200s", t1, t2);
        goto done;
    }
    if (optim__cf_problem_init(&pa, dt, 0x1f, c->seed) ||
        optim__cf_problem_init(&pb, dt, 0x1f, c->seed))
        goto done;
    for (int k = 0; k < 2; k++)
        if (optim__cf_step_dense(a, &pa, k) || optim__cf_step_dense(b, &pb, k)) {
            snprintf(why, n, "step %d failed: %s%s", k, optim_errmsg(a), optim_errmsg(b));
            goto done;
        }
    if (optim__cf_snap(&sa, a, &pa) || optim__cf_snap(&sb, b, &pb)) goto done;
    bad = optim__cf_snap_diff(&sa, &sb, 0, why, n);
done:
    optim__cf_snap_free(&sa);
    optim__cf_snap_free(&sb);
    optim__cf_problem_free(&pa);
    optim__cf_problem_free(&pb);
    optim_free(t1);
    optim_free(t2);
    optim_destroy(a);
    optim_destroy(b);
    return bad;
}

/* The key's value in the config of an optimizer created with extra_json
 * on top of the run's config (NULL when the key is missing; *refused set
 * when creation failed). The caller frees *root. */
static const cJSON *key_back(cf_ctx *c, const char *extra_json, const char *key, cJSON **root,
                             int *refused)
{
    optim_optimizer *opt;
    char sub[CF_TEXT];
    *root = NULL;
    *refused = optim__cf_create(c, NULL, extra_json, &opt, sub, sizeof sub) != 0;
    if (*refused) return NULL;
    char *text = optim_get_config(opt);
    *root = text ? cJSON_Parse(text) : NULL;
    optim_free(text);
    optim_destroy(opt);
    return cJSON_GetObjectItemCaseSensitive(*root, key);
}

/* Whether key, set to value (JSON), comes back from get_config equal. */
static int key_kept(cf_ctx *c, const char *key, const cJSON *value, char *why, size_t n)
{
    char *v = cJSON_PrintUnformatted(value), extra[CF_TEXT];
    snprintf(extra, sizeof extra, "{\"%s\": %s}", key, v ? v : "null");
    cJSON *root;
    int refused;
    const cJSON *back = key_back(c, extra, key, &root, &refused);
    const int same = refused ||
        (back &&
         (cJSON_Compare(back, value, 1) ||
          (cJSON_IsNumber(back) && cJSON_IsNumber(value) &&
           back->valuedouble == value->valuedouble)));
    char *b = back ? cJSON_PrintUnformatted(back) : NULL;
    if (!same && back) snprintf(why, n, "key '%s' set to %s came back as %s", key, v, b);
    else if (!same) snprintf(why, n, "key '%s' set to %s is missing from get_config", key, v);
    cJSON_free(b);
    cJSON_free(v);
    cJSON_Delete(root);
    return same;
}

/* A valid value of p other than its default (NULL where none is simple). */
static cJSON *other_value(const optim_param *p)
{
    const double d = p->default_value, lo = p->min, hi = p->max;
    if (p->type == OPTIM_PARAM_BOOL) return cJSON_CreateBool(d == 0);
    if (p->type == OPTIM_PARAM_INT) return d + 1 <= hi ? cJSON_CreateNumber(d + 1) : NULL;
    if (p->type != OPTIM_PARAM_FLOAT) return NULL;
    double v = isfinite(d) && d != 0 ? d * 0.5 : 0.25;
    if (!(v > lo || (v == lo && !(p->flags & OPTIM_PARAM_MIN_EXCLUSIVE))) ||
        !(v < hi || (v == hi && !(p->flags & OPTIM_PARAM_MAX_EXCLUSIVE))))
        v = isfinite(lo) && isfinite(hi) ? lo + (hi - lo) * 0.375 : NAN;
    return isfinite(v) && v != d ? cJSON_CreateNumber(v) : NULL;
}

/* Every key of the run's config, and every declared param set to another
 * value, comes back from get_config with its value. */
static int keys_kept(cf_ctx *c, char *why, size_t n)
{
    cJSON *cfg = cJSON_Parse(c->config);
    int ok = 1;
    for (const cJSON *k = cfg ? cfg->child : NULL; ok && k; k = k->next)
        if (strcmp(k->string, "is_legacy_optimizer") != 0) ok = key_kept(c, k->string, k, why, n);
    for (size_t i = 0; ok && i < c->cls->n_params; i++) {
        const optim_param *p = &c->cls->params[i];
        cJSON *v = in_generation(c, p) && !cJSON_GetObjectItemCaseSensitive(cfg, p->name)
            ? other_value(p)
            : NULL;
        if (v) ok = key_kept(c, p->name, v, why, n);
        cJSON_Delete(v);
    }
    cJSON_Delete(cfg);
    return ok;
}

/* Creation with key = value must fail with a message naming the key. */
static int refused(cf_ctx *c, const char *key, const char *value, char *why, size_t n)
{
    char extra[CF_TEXT], sub[CF_TEXT];
    snprintf(extra, sizeof extra, "{\"%s\": %s}", key, value);
    optim_optimizer *opt;
    if (optim__cf_create(c, NULL, extra, &opt, sub, sizeof sub) == 0) {
        optim_destroy(opt);
        snprintf(why, n, "%s accepted", extra);
        return 0;
    }
    if (!strstr(sub, key)) {
        snprintf(why, n, "%s refused without naming the key: %s", extra, sub);
        return 0;
    }
    return 1;
}

static int bad_values_refused(cf_ctx *c, char *why, size_t n)
{
    if (!refused(c, "conformance_unknown_key", "1", why, n)) return 0;
    for (size_t i = 0; i < c->cls->n_params; i++) {
        const optim_param *p = &c->cls->params[i];
        if (!in_generation(c, p)) continue;
        char v[64];
        if (!refused(c, p->name, "\"not a number\"", why, n)) return 0;
        if (p->type == OPTIM_PARAM_BOOL && !refused(c, p->name, "0.5", why, n)) return 0;
        if (p->type == OPTIM_PARAM_INT && !refused(c, p->name, "1.5", why, n)) return 0;
        if (p->type == OPTIM_PARAM_BOOL) continue;
        /* just outside the range (fmax: p->max + 1 == p->max for 2^53) */
        snprintf(v, sizeof v, "%.17g",
                 (p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) ? p->min : p->min - fmax(1, fabs(p->min)));
        if (isfinite(p->min) && !refused(c, p->name, v, why, n)) return 0;
        snprintf(v, sizeof v, "%.17g",
                 (p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) ? p->max : p->max + fmax(1, fabs(p->max)));
        if (isfinite(p->max) && !refused(c, p->name, v, why, n)) return 0;
    }
    return 1;
}

void optim__cf_check_config(cf_ctx *c)
{
    char why[CF_TEXT] = "";
    keys_written(c);
    int bad =
        round_trip(c, OPTIM_F32, why, sizeof why) || round_trip(c, OPTIM_F64, why, sizeof why);
    optim__cf_report(
        c, "config.round_trip", !bad,
        "from_config(get_config()) writes the same config and takes the same 2 steps, bit for bit (f32, f64)",
        "%s", bad ? why : "same config, same steps");
    why[0] = '\0';
    int kept = c->wrapper || keys_kept(c, why, sizeof why);
    optim__cf_report(c, "config.keys_kept", c->wrapper ? -1 : kept,
                     "every key of --config, and each declared param set to another value, back "
                     "from get_config with its value",
                     "%s",
                     c->wrapper ? "a wrapper (its inner optimizer's keys are checked on it)"
                         : kept ? "all kept"
                                : why);
    why[0] = '\0';
    int ok = bad_values_refused(c, why, sizeof why);
    optim__cf_report(
        c, "config.bad_values", ok,
        "an unknown key, a string, and each param out of its type or range refused, naming the key",
        "%s", ok ? "all refused" : why);
}
