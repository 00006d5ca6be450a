/* optim_conformance_check: sets up the run (class, generation, config) and
 * runs every check in order. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"
#include "core/internal.h"

optim_conformance_options optim_conformance_defaults(void)
{
    /* The fields not named are zero: every group, no reference. */
    optim_conformance_options o = {
        .size = sizeof o, .generation = OPTIM_CONFORMANCE_AUTO, .seed = 1};
    return o;
}

/* The groups, in order, with what each does. */
static const struct {
    const char *name, *doing;
    void (*run)(cf_ctx *c);
} groups[] = {
    {"table", "reading the class table", optim__cf_check_table},
    {"config", "round-tripping get_config and set_config", optim__cf_check_config},
    {"update", "stepping each shape and dtype", optim__cf_check_update},
    {"threads", "stepping on 1, 2 and 3 threads", optim__cf_check_threads},
    {"chunks", "running apply_dense on chunks inside guard zones", optim__cf_check_chunks},
    {"sparse", "stepping with sparse gradients", optim__cf_check_sparse},
    {"slots", "creating, saving and restoring slots", optim__cf_check_slots},
    {"hypers", "stepping with each kind of hyperparameter", optim__cf_check_hypers},
    {"failure", "failing steps and a failing create_slots", optim__cf_check_failure},
    {"reference", "stepping along the reference trajectory", optim__cf_check_reference},
};
enum { NGROUPS = sizeof groups / sizeof *groups };

const char *const *optim_conformance_groups(void)
{
    static const char *names[NGROUPS + 1];
    for (int i = 0; i < NGROUPS; i++) names[i] = groups[i].name;
    return names;
}

const char *optim_conformance_group_doing(const char *group)
{
    for (int i = 0; group && i < NGROUPS; i++)
        if (strcmp(groups[i].name, group) == 0) return groups[i].doing;
    return NULL;
}

/* The config object of opts (the "config" of a full serialisation too) with
 * is_legacy_optimizer set for the generation, as compact JSON. */
static int make_config(cf_ctx *c, const char *text, optim_error *err)
{
    cJSON *root = cJSON_Parse(text ? text : "{}");
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return optim__err(err, OPTIM_EPARSE, "conformance: config '%s' is not a JSON object", text);
    }
    cJSON *cfg = root, *inner = cJSON_GetObjectItemCaseSensitive(root, "config");
    if (cJSON_GetObjectItemCaseSensitive(root, "class_name") && cJSON_IsObject(inner)) cfg = inner;
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "is_legacy_optimizer");
    int ok =
        cJSON_AddBoolToObject(cfg, "is_legacy_optimizer", c->generation == OPTIM_LEGACY) != NULL;
    c->config = ok ? cJSON_PrintUnformatted(cfg) : NULL;
    cJSON_Delete(root);
    return c->config ? OPTIM_OK : optim__err(err, OPTIM_ENOMEM, "conformance: out of memory");
}

/* Whether the class takes sparse gradients: its sparse hook, or for a
 * wrapper, whether a sparse step is refused as not supported. */
static int takes_sparse(const cf_ctx *c)
{
    if (c->cls->flags & OPTIM_CLASS_NO_SPARSE) return 0;
    if (!c->wrapper) return c->cls->apply_sparse || (c->cls->flags & OPTIM_CLASS_ELEMENTWISE);
    optim_optimizer *opt;
    cf_problem p;
    char why[CF_TEXT];
    if (optim__cf_create(c, NULL, NULL, &opt, why, sizeof why)) return 0;
    int rc = OPTIM_ENOMEM;
    if (!optim__cf_problem_init(&p, OPTIM_F32, 1u << CF_MATRIX, c->seed)) {
        const int64_t idx[] = {1};
        rc = optim__cf_step_sparse(opt, &p, 0, 0, idx, 1, CF_AS_GIVEN);
        optim__cf_problem_free(&p);
    }
    optim_destroy(opt);
    return rc != OPTIM_ENOTSUP;
}

static int setup(cf_ctx *c, const char *class_name, const optim_conformance_options *o,
                 optim_error *err)
{
    c->cls = optim_find_class(class_name);
    if (!c->cls)
        return optim__err(err, OPTIM_ENOTFOUND, "conformance: no class named '%s' is registered",
                          class_name);
    if (o->generation != OPTIM_CONFORMANCE_AUTO && o->generation != OPTIM_KERAS3 &&
        o->generation != OPTIM_LEGACY)
        return optim__err(
            err, OPTIM_EINVAL,
            "conformance: generation %d, expected OPTIM_KERAS3, OPTIM_LEGACY or OPTIM_CONFORMANCE_AUTO",
            o->generation);
    c->generation = o->generation == OPTIM_CONFORMANCE_AUTO
        ? ((c->cls->flags & OPTIM_CLASS_LEGACY_ONLY) ? OPTIM_LEGACY : OPTIM_KERAS3)
        : (optim_generation)o->generation;
    c->seed = o->seed;
    c->report = o->report;
    c->user = o->user;
    c->reference = o->reference;
    c->reference_user = o->reference_user;
    c->reference_state = o->reference_state;
    c->reference_steps = o->reference_steps;
    c->rtol = o->rtol;
    c->atol = o->atol;
    c->wrapper = c->cls->apply_gradients != NULL || c->cls->step != NULL;
    int rc = make_config(c, o->config, err);
    if (rc) return rc;
    optim_optimizer *opt;
    char why[CF_TEXT];
    rc = optim__cf_create(c, NULL, NULL, &opt, why, sizeof why);
    double lr;
    /* A class without a learning rate (COCOB) keeps the base's at its
     * default and refuses another value. */
    c->has_lr = !rc && !c->wrapper && optim_get_hyper(opt, "learning_rate", &lr) == 0 &&
        optim_set_hyper(opt, "learning_rate", lr == 0.5 ? 0.25 : 0.5) == 0;
    optim_destroy(opt);
    if (rc) return optim__err(err, rc, "conformance: %s", why);
    c->sparse = takes_sparse(c);
    return OPTIM_OK;
}

int optim_conformance_check(const char *class_name, const optim_conformance_options *opts,
                            int *passed, int *failed, optim_error *err)
{
    if (!class_name || !passed || !failed)
        return optim__err(err, OPTIM_EINVAL,
                          "conformance: class_name, passed and failed must not be NULL");
    optim_conformance_options o = optim_conformance_defaults();
    /* Options of an older header (without `group`, or without the reference
     * fields) are read as far as they go; the rest keep the defaults. */
    const size_t old = offsetof(optim_conformance_options, group);
    if (opts && (opts->size < old || opts->size > sizeof o))
        return optim__err(err, OPTIM_EVERSION,
                          "conformance: options size %u, expected %zu (use "
                          "optim_conformance_defaults)",
                          (unsigned)opts->size, sizeof o);
    if (opts) memcpy(&o, opts, opts->size);
    if (o.group && !optim_conformance_group_doing(o.group))
        return optim__err(err, OPTIM_EINVAL,
                          "conformance: group '%s', expected table, config, update, threads, "
                          "chunks, sparse, slots, hypers, failure or reference",
                          o.group);
    if (o.reference_state < 0 || o.reference_state > 64 || o.reference_steps < 0 ||
        o.reference_steps > 1000 || !(o.rtol >= 0 && o.rtol < 1e300) ||
        !(o.atol >= 0 && o.atol < 1e300))
        return optim__err(err, OPTIM_EINVAL,
                          "conformance: reference_state %d (expected 0..64), reference_steps %d "
                          "(0..1000), rtol %g and atol %g (finite, >= 0): one is out of range",
                          o.reference_state, o.reference_steps, o.rtol, o.atol);
    cf_ctx c = {0};
    int rc = setup(&c, class_name, &o, err);
    if (!rc) {
        for (int i = 0; i < NGROUPS; i++)
            if (!o.group || strcmp(o.group, groups[i].name) == 0) groups[i].run(&c);
        *passed = c.passed;
        *failed = c.failed;
        optim__err_clear(err);
    }
    cJSON_free(c.config);
    return rc;
}
