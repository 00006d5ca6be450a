/* Every built-in class's config, in each generation the class has, with a
 * non-default value for every key of its class table (params and pattern
 * keys; nullable ones also null) round-trips: get_config of from_config of
 * it, read again, writes the same config key for key, and each key holds
 * the value set (issue 22: "config round trips become lossless for every
 * key of every class"). Wrappers whose config needs an inner optimizer are
 * created with SGD inside. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#define LIST_ENTRY(sym) &sym,
static const optim_class *const classes[] = {OPTIM_BUILTIN_CLASSES(LIST_ENTRY)};

static int in_range(const optim_param *p, double v)
{
    if (v < p->min || v > p->max) return 0;
    if ((p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) && v == p->min) return 0;
    if ((p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) && v == p->max) return 0;
    return 1;
}

/* A value of float or int param p inside its range other than its default. */
static double other_number(const optim_param *p)
{
    double d = isnan(p->default_value) ? 0 : p->default_value;
    int whole = p->type == OPTIM_PARAM_INT || (p->flags & OPTIM_PARAM_COUNT);
    double c[] = {d + 1,
                  d - 1,
                  d * 2,
                  d / 2 + 0.125,
                  d + 0.125,
                  d - 0.125,
                  0.375,
                  3,
                  isfinite(p->min) ? p->min + 1 : 7,
                  isfinite(p->min) ? p->min + 0.0625 : 5};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if ((!whole || c[i] == floor(c[i])) && c[i] != p->default_value && in_range(p, c[i]))
            return c[i];
    return NAN;
}

static int applies(const optim_param *p, optim_generation gen)
{
    if (gen == OPTIM_KERAS3 && (p->flags & OPTIM_PARAM_LEGACY_ONLY)) return 0;
    return !(gen == OPTIM_LEGACY && (p->flags & OPTIM_PARAM_KERAS3_ONLY));
}

/* Keys left at their default because the class refuses the other value
 * with the others set: LazyAdam's amsgrad (TF Addons: "can only be False");
 * the legacy LossScaleOptimizer's dynamic, as false wants initial_scale set
 * and dynamic_growth_steps None (its own config in static_loss_scale). */
static int refused(const optim_class *cls, const optim_param *p, optim_generation gen)
{
    if (!strcmp(cls->name, "LazyAdam") && !strcmp(p->name, "amsgrad")) return 1;
    return gen == OPTIM_LEGACY && !strcmp(cls->name, "LossScaleOptimizer") &&
        !strcmp(p->name, "dynamic");
}

/* TF Addons' AdamW and SGDW require a weight_decay: never null. */
static int nullable(const optim_class *cls, const optim_param *p)
{
    if ((!strcmp(cls->name, "AdamW") || !strcmp(cls->name, "SGDW")) &&
        !strcmp(p->name, "weight_decay"))
        return 0;
    return (p->flags & OPTIM_PARAM_NULLABLE) != 0;
}

/* Keys whose written value is not the one set, as in Keras (the next round
 * trip keeps it): a legacy epsilon of None is written as 1e-07
 * (`epsilon or backend.epsilon()`); with num_updates, MovingAverage writes
 * average_decay as TF Addons' float32 min(average_decay, (1 + n) / (10 + n));
 * the legacy dynamic LossScaleOptimizer writes None as its defaults (2**15,
 * 2000), as tf-keras's __init__ fills them; a wrapper writes its inner
 * optimizer's full config. */
static int keras_fills(const cJSON *want, const cJSON *set, optim_generation gen)
{
    const char *k = want->string;
    if (gen == OPTIM_LEGACY && cJSON_IsNull(want) &&
        (!strcmp(k, "epsilon") || !strcmp(k, "initial_scale") ||
         !strcmp(k, "dynamic_growth_steps")))
        return 1;
    if (!strcmp(k, "average_decay"))
        return cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(set, "num_updates"));
    /* Nested optimizers: written with every key (TF Addons' MultiOptimizer's
     * optimizer_specs, a list of them). */
    return cJSON_IsObject(want) || (cJSON_IsArray(want) && cJSON_IsObject(want->child));
}

/* Marks every optimizer config inside j legacy when gen is. */
static cJSON *legacy_marked(cJSON *j, optim_generation gen)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "config"), *item;
    if (gen != OPTIM_LEGACY || !c) return j;
    if (strcmp(cJSON_GetObjectItemCaseSensitive(j, "class_name")->valuestring, "OptimizerMap"))
        cJSON_AddTrueToObject(c, "is_legacy_optimizer");
    cJSON_ArrayForEach(item, c) if (cJSON_IsObject(item)) legacy_marked(item, gen);
    cJSON *map = cJSON_GetObjectItemCaseSensitive(c, "optimizer_map");
    if (map && !cJSON_GetObjectItemCaseSensitive(map, "class_name"))
        cJSON_ArrayForEach(item, map) legacy_marked(item, gen);
    return j;
}

/* Wrappers need an inner optimizer: SGD (a MultiOptimizer map with SGD as
 * the default and Adam for "dense/.*"; in the legacy generation, TF Addons'
 * specs, Adam for dense/kernel:0 and SGD for dense/bias:0). */
static void add_inner(cJSON *cfg, const optim_class *cls, optim_generation gen)
{
    static const struct {
        const char *cls, *key, *json;
    } inner[] = {
        {"LossScaleOptimizer", "inner_optimizer", "{\"class_name\":\"SGD\",\"config\":{}}"},
        {"ApplyIfFinite", "inner_optimizer", "{\"class_name\":\"SGD\",\"config\":{}}"},
        {"MovingAverage", "optimizer", "{\"class_name\":\"SGD\",\"config\":{}}"},
        {"SWA", "optimizer", "{\"class_name\":\"SGD\",\"config\":{}}"},
        {"Lookahead", "optimizer", "{\"class_name\":\"SGD\",\"config\":{}}"},
        {"MultiOptimizer", "optimizer_map",
         "{\"class_name\":\"OptimizerMap\",\"config\":{\"default_optimizer\":{\"class_name\":"
         "\"SGD\",\"config\":{}},\"optimizer_map\":{\"dense/.*\":{\"class_name\":\"Adam\","
         "\"config\":{}}}}}"},
        {"Addons>MultiOptimizer", "optimizer_specs",
         "[{\"optimizer\":{\"class_name\":\"Adam\",\"config\":{\"decay\":0.0}},\"weights\":"
         "[\"dense/kernel:0\"]},{\"optimizer\":{\"class_name\":\"SGD\",\"config\":{\"decay\":"
         "0.0}},\"weights\":[\"dense/bias:0\"]}]"},
    };
    const int specs = gen == OPTIM_LEGACY && !strcmp(cls->name, "MultiOptimizer");
    for (size_t i = 0; i < sizeof inner / sizeof inner[0]; i++)
        if (!strcmp(specs ? "Addons>MultiOptimizer" : cls->name, inner[i].cls))
            cJSON_AddItemToObject(cfg, inner[i].key,
                                  legacy_marked(cJSON_Parse(inner[i].json), gen));
}

/* Adds key i of cls's params to cfg with a non-default value (null if
 * nulls and the key is nullable); returns the value added. */
static cJSON *add_param(cJSON *cfg, const optim_class *cls, size_t i, optim_generation gen,
                        int nulls)
{
    const optim_param *p = &cls->params[i];
    cJSON *v = NULL;
    if (refused(cls, p, gen)) return NULL;
    if (nulls && nullable(cls, p)) v = cJSON_CreateNull();
    else if (p->type == OPTIM_PARAM_BOOL) v = cJSON_CreateBool(p->default_value == 0);
    else if (p->type == OPTIM_PARAM_STRING) {
        const char *const *ch = cls->param_choices[i];
        size_t k = 0;
        while (ch[k] && k == (size_t)p->default_value) k++;
        v = cJSON_CreateString(ch[k] ? ch[k] : ch[0]);
    } else {
        double x = other_number(p);
        if (isnan(x)) fail_msg("%s: no non-default value found for %s", cls->name, p->name);
        v = cJSON_CreateNumber(x);
    }
    cJSON_AddItemToObject(cfg, p->name, v);
    return v;
}

static char *make_config(const optim_class *cls, optim_generation gen, int nulls)
{
    cJSON *root = cJSON_CreateObject(), *cfg = cJSON_AddObjectToObject(root, "config");
    cJSON_AddStringToObject(root, "class_name", cls->name);
    add_inner(cfg, cls, gen);
    for (size_t i = 0; i < cls->n_params; i++)
        if (applies(&cls->params[i], gen)) add_param(cfg, cls, i, gen, nulls);
    for (size_t i = 0; i < cls->n_pattern_params; i++) {
        const optim_param *p = &cls->pattern_params[i];
        if (!applies(p, gen)) continue;
        if (nulls && (p->flags & OPTIM_PARAM_NULLABLE)) cJSON_AddNullToObject(cfg, p->name);
        else {
            const char *pats[] = {"^bias", "norm$"};
            cJSON_AddItemToObject(cfg, p->name, cJSON_CreateStringArray(pats, 2));
        }
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* The JSON config of an optimizer made from text as generation gen, or NULL
 * (printed). */
static cJSON *round_trip(const char *json, optim_generation gen)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    if (optim_from_json_as(&opt, json, gen, &err)) {
        print_message("from_json_as(%s) refused: %s\n", json, err.msg);
        return NULL;
    }
    char *s = optim_get_config(opt);
    cJSON *c = s ? cJSON_Parse(s) : NULL;
    if (!c) print_message("get_config of %s failed: %s\n", json, optim_errmsg(opt));
    optim_free(s);
    optim_destroy(opt);
    return c;
}

/* Wraps config c as {"class_name": name, "config": c}, as text. */
static char *envelope(const char *name, const cJSON *c)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "class_name", name);
    cJSON_AddItemToObject(root, "config", cJSON_Duplicate(c, 1));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* 0 if config json of cls round-trips with every set key kept. */
static int check_json(const optim_class *cls, optim_generation gen, int nulls, const char *json)
{
    cJSON *set = cJSON_Parse(json), *c1 = round_trip(json, gen), *c2 = NULL;
    int bad = !c1;
    if (c1) {
        char *again = envelope(cls->name, c1);
        c2 = round_trip(again, gen);
        bad = !c2;
        if (c2 && !cJSON_Compare(c1, c2, 1)) {
            char *a = cJSON_PrintUnformatted(c1), *b = cJSON_PrintUnformatted(c2);
            print_message("%s: second round trip differs:\n %s\n %s\n", cls->name, a, b);
            free(a), free(b), bad = 1;
        }
        free(again);
    }
    const cJSON *want, *cfg = cJSON_GetObjectItemCaseSensitive(set, "config");
    cJSON_ArrayForEach(want, cfg)
    {
        const cJSON *got = c1 ? cJSON_GetObjectItemCaseSensitive(c1, want->string) : NULL;
        if (c1 && !cJSON_Compare(want, got, 1) && !keras_fills(want, cfg, gen)) {
            char *g = got ? cJSON_PrintUnformatted(got) : NULL, *w = cJSON_PrintUnformatted(want);
            print_message("%s (%s%s): key %s set to %s, get_config wrote %s\n", cls->name,
                          gen == OPTIM_LEGACY ? "legacy" : "Keras 3", nulls ? ", nulls" : "",
                          want->string, w, g ? g : "nothing");
            free(g), free(w), bad = 1;
        }
    }
    cJSON_Delete(set), cJSON_Delete(c1), cJSON_Delete(c2);
    return bad;
}

static int check_one(const optim_class *cls, optim_generation gen, int nulls)
{
    char *json = make_config(cls, gen, nulls);
    int bad = check_json(cls, gen, nulls, json);
    free(json);
    return bad;
}

/* The legacy LossScaleOptimizer with a fixed scale. */
static int static_loss_scale(void)
{
    return check_json(&optim_loss_scale_class, OPTIM_LEGACY, 0,
                      "{\"class_name\":\"LossScaleOptimizer\",\"config\":{\"inner_optimizer\":"
                      "{\"class_name\":\"SGD\",\"config\":{\"is_legacy_optimizer\":true}},"
                      "\"dynamic\":false,\"initial_scale\":3,\"dynamic_growth_steps\":null}}");
}

static void every_class_every_key(void **state)
{
    (void)state;
    int bad = 0, runs = 0;
    for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++) {
        const optim_class *cls = classes[k];
        for (int g = 0; g < 2; g++) {
            optim_generation gen = g ? OPTIM_LEGACY : OPTIM_KERAS3;
            if ((gen == OPTIM_LEGACY && (cls->flags & OPTIM_CLASS_KERAS3_ONLY)) ||
                (gen == OPTIM_KERAS3 && (cls->flags & OPTIM_CLASS_LEGACY_ONLY)))
                continue;
            for (int nulls = 0; nulls < 2; nulls++, runs++) bad += check_one(cls, gen, nulls);
        }
    }
    bad += static_loss_scale(), runs++;
    print_message("%d configs round-tripped, %d lossy\n", runs, bad);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(every_class_every_key)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
