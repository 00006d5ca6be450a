/* Declared parameters: the base options, value checks, conversions to and
 * from JSON, and the checks of optimizer and schedule class tables. */
#include "optimizer/params.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define INF INFINITY

/* Keras's base options, in Keras 3's get_config order. learning_rate's default
 * is the class's (weight_decay's too, with default_weight_decay); the Keras 3
 * options' cross-key rules are in keras3_options.c. */
static const optim_param base_params[OPTIM__N_BASE] = {
    {"learning_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.01, 0, INF},
    {"decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0, 0, INF},
    {"weight_decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_KERAS3_ONLY, NAN, 0,
     INF},
    {"clipnorm", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE, NAN, 0, INF},
    {"global_clipnorm", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE, NAN, 0, INF},
    {"clipvalue", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE, NAN, 0, INF},
    {"use_ema", OPTIM_PARAM_BOOL, OPTIM_PARAM_KERAS3_ONLY, 0, 0, 1},
    /* Keras checks ema_momentum and ema_overwrite_frequency only with use_ema,
     * and takes gradient_accumulation_steps 0 as off: optim__k3_validate. */
    {"ema_momentum", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.99, -INF, INF},
    {"ema_overwrite_frequency", OPTIM_PARAM_INT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_KERAS3_ONLY,
     NAN, 0, INF},
    {
        "loss_scale_factor",
        OPTIM_PARAM_FLOAT,
        OPTIM_PARAM_NULLABLE | OPTIM_PARAM_KERAS3_ONLY,
        NAN,
        0,
        INF,
    },
    {"gradient_accumulation_steps", OPTIM_PARAM_INT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_KERAS3_ONLY,
     NAN, 0, INF},
    /* Every integer a JSON number (a double) holds exactly. */
    {"bf16_stochastic_rounding_seed", OPTIM_PARAM_INT, OPTIM_PARAM_NULLABLE, NAN, 0,
     9007199254740991.0},
};

const optim_param *optim__base_params(void) { return base_params; }

const optim_param *optim__base_param(const char *name)
{
    for (size_t i = 0; i < OPTIM__N_BASE; i++)
        if (strcmp(base_params[i].name, name) == 0) return &base_params[i];
    return NULL;
}

size_t optim__choice_count(const char *const *choices)
{
    size_t n = 0;
    while (choices && choices[n]) n++;
    return n;
}

void optim__keys_append(char *buf, size_t n, const char *key)
{
    size_t used = strlen(buf);
    if (used < n) snprintf(buf + used, n - used, "%s%s", used ? ", " : "", key);
}

/* ---- values ------------------------------------------------------------------- */

static int range_err(const char *owner, const optim_param *p, double v, const char *how,
                     optim_error *err)
{
    int lo_ex = (p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) != 0;
    int hi_ex = (p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) != 0;
    char lo[32], hi[32];
    /* Integers in full (2^53 - 1, not 9.0072e+15). */
    snprintf(lo, sizeof lo, p->type == OPTIM_PARAM_INT ? "%.0f" : "%g", p->min);
    snprintf(hi, sizeof hi, p->type == OPTIM_PARAM_INT ? "%.0f" : "%g", p->max);
    return optim__err(err, OPTIM_ERANGE, "%s: %s%s is %g, expected a value in %c%s, %s%c", owner,
                      p->name, how, v, lo_ex ? '(' : '[', isinf(p->min) ? "-inf" : lo,
                      isinf(p->max) ? "inf" : hi, hi_ex || isinf(p->max) ? ')' : ']');
}

int optim__check_param_value(const char *owner, const optim_param *p, double v, const char *how,
                             optim_error *err)
{
    if (isnan(v) && (p->flags & OPTIM_PARAM_NULLABLE)) return OPTIM_OK;
    if (!isfinite(v))
        return optim__err(err, OPTIM_ERANGE, "%s: %s%s is %g, expected a finite number", owner,
                          p->name, how, v);
    if (p->type == OPTIM_PARAM_BOOL && v != 0 && v != 1)
        return optim__err(err, OPTIM_ETYPE, "%s: %s%s is %g, expected a boolean (0 or 1)", owner,
                          p->name, how, v);
    if ((p->type == OPTIM_PARAM_INT || p->type == OPTIM_PARAM_STRING) && v != floor(v))
        return optim__err(err, OPTIM_ETYPE, "%s: %s%s is %g, expected an integer", owner, p->name,
                          how, v);
    if (p->type == OPTIM_PARAM_STRING)
        return v >= 0
            ? OPTIM_OK
            : optim__err(err, OPTIM_ERANGE, "%s: %s%s is %g, expected a choice index >= 0", owner,
                         p->name, how, v);
    int lo_ex = (p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) != 0;
    int hi_ex = (p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) != 0;
    if ((lo_ex ? !(v > p->min) : !(v >= p->min)) || (hi_ex ? !(v < p->max) : !(v <= p->max)))
        return range_err(owner, p, v, how, err);
    return OPTIM_OK;
}

static const char *type_want(const optim_param *p)
{
    switch (p->type) {
    case OPTIM_PARAM_BOOL: return "true or false";
    case OPTIM_PARAM_INT: return "an integer";
    case OPTIM_PARAM_STRING: return "a string";
    default: return "a number";
    }
}

static int choice_err(const char *owner, const optim_param *p, const char *const *choices,
                      const char *given, optim_error *err)
{
    char list[256] = "";
    for (size_t k = 0; choices && choices[k]; k++) {
        char quoted[80];
        snprintf(quoted, sizeof quoted, "\"%s\"", choices[k]);
        optim__keys_append(list, sizeof list, quoted);
    }
    return optim__err(err, OPTIM_EINVAL, "%s: config key '%s' is \"%.100s\", expected one of: %s",
                      owner, p->name, given, list);
}

int optim__param_from_json(const char *owner, const optim_param *p, const char *const *choices,
                           const void *item_, double *out, optim_error *err)
{
    const cJSON *v = item_;
    int nullable = (p->flags & OPTIM_PARAM_NULLABLE) != 0;
    if (cJSON_IsNull(v)) {
        *out = NAN;
        if (nullable) return OPTIM_OK;
        return optim__err(err, OPTIM_ETYPE, "%s: config key '%s' is null, expected %s", owner,
                          p->name, type_want(p));
    }
    int ok = p->type == OPTIM_PARAM_BOOL ? cJSON_IsBool(v)
        : p->type == OPTIM_PARAM_STRING  ? cJSON_IsString(v)
                                         : cJSON_IsNumber(v);
    if (!ok)
        return optim__err(err, OPTIM_ETYPE, "%s: config key '%s' is %s, expected %s%s", owner,
                          p->name, optim__json_type_name(v), type_want(p),
                          nullable ? " or null" : "");
    if (p->type == OPTIM_PARAM_STRING) {
        for (size_t k = 0; choices && choices[k]; k++)
            if (strcmp(choices[k], v->valuestring) == 0) {
                *out = (double)k;
                return OPTIM_OK;
            }
        return choice_err(owner, p, choices, v->valuestring, err);
    }
    *out = cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? 1.0 : 0.0) : v->valuedouble;
    return OPTIM_OK;
}

void *optim__param_to_json(const optim_param *p, const char *const *choices, double v,
                           optim__num_form form)
{
    if (isnan(v)) return cJSON_CreateNull();
    if (p->type == OPTIM_PARAM_BOOL) return cJSON_CreateBool(v != 0);
    if (p->type == OPTIM_PARAM_STRING)
        return v >= 0 && (size_t)v < optim__choice_count(choices)
            ? cJSON_CreateString(choices[(size_t)v])
            : cJSON_CreateNull();
    if (form == OPTIM__NUM_ANY)
        form = p->type == OPTIM_PARAM_FLOAT && !(p->flags & OPTIM_PARAM_COUNT) ? OPTIM__NUM_FLOAT
            : v == floor(v)                                                    ? OPTIM__NUM_INT
                                                                               : OPTIM__NUM_ANY;
    return optim__json_exact_number(v, form);
}

/* ---- class tables --------------------------------------------------------------- */

void optim__class_copy(optim_class *dst, const optim_class *src)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, src->size < sizeof *dst ? src->size : sizeof *dst);
    dst->size = sizeof *dst;
}

void optim__schedule_class_copy(optim_schedule_class *dst, const optim_schedule_class *src)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, src->size < sizeof *dst ? src->size : sizeof *dst);
    dst->size = sizeof *dst;
}

/* Whether two params can never exist in the same generation. */
static int gens_disjoint(uint32_t a, uint32_t b)
{
    const uint32_t L = OPTIM_PARAM_LEGACY_ONLY, K = OPTIM_PARAM_KERAS3_ONLY;
    return ((a & L) && (b & K)) || ((a & K) && (b & L));
}

/* The default of p is a value of its own type and range. */
static int default_check(const char *cn, const optim_param *p, const char *const *choices,
                         optim_error *err)
{
    double d = p->default_value;
    int nullable = (p->flags & OPTIM_PARAM_NULLABLE) != 0;
    int ok;
    if (p->type == OPTIM_PARAM_STRING)
        ok = isnan(d) ? nullable
                      : d == floor(d) && d >= 0 && d < (double)optim__choice_count(choices);
    else {
        int lo_ok = (p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) ? d > p->min : d >= p->min;
        int hi_ok = (p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) ? d < p->max : d <= p->max;
        ok = isnan(d)
            ? nullable
            : lo_ok && hi_ok && isfinite(d) && !(p->type == OPTIM_PARAM_BOOL && d != 0 && d != 1) &&
                !(p->type == OPTIM_PARAM_INT && d != floor(d));
    }
    if (ok) return OPTIM_OK;
    return optim__err(err, OPTIM_ERANGE,
                      "optimizer class '%s': param '%s' default %g is outside its own type and "
                      "range [%g, %g]%s",
                      cn, p->name, d, p->min, p->max,
                      isnan(d) ? " (NAN needs OPTIM_PARAM_NULLABLE)" : "");
}

static int param_check(const optim_class *cls, size_t i, optim_error *err)
{
    const optim_param *p = &cls->params[i];
    const char *const *choices = cls->param_choices ? cls->param_choices[i] : NULL;
    if (p->type == OPTIM_PARAM_PATTERNS)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': param %zu ('%s') is OPTIM_PARAM_PATTERNS, "
                          "which belongs in pattern_params, not params",
                          cls->name, i, p->name ? p->name : "(null)");
    if (!p->name || !p->name[0] || p->type > OPTIM_PARAM_STRING)
        return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': param %zu is malformed",
                          cls->name, i);
    if (strcmp(p->name, "name") == 0 || strcmp(p->name, "is_legacy_optimizer") == 0 ||
        strcmp(p->name, "lr") == 0 || strcmp(p->name, "jit_compile") == 0)
        return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': param name '%s' is reserved",
                          cls->name, p->name);
    if (p->type == OPTIM_PARAM_STRING &&
        (!choices || !choices[0] || (p->flags & OPTIM_PARAM_DYNAMIC)))
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': string param '%s' needs a non-empty "
                          "param_choices[%zu] and cannot be OPTIM_PARAM_DYNAMIC",
                          cls->name, p->name, i);
    const optim_param *base = optim__base_param(p->name);
    if (base && !gens_disjoint(base->flags, p->flags))
        return optim__err(
            err, OPTIM_EINVAL,
            "optimizer class '%s': param '%s' is a base option in the same generation", cls->name,
            p->name);
    int rc = default_check(cls->name, p, choices, err);
    for (size_t j = 0; !rc && j < i; j++)
        if (strcmp(cls->params[j].name, p->name) == 0 &&
            !gens_disjoint(cls->params[j].flags, p->flags))
            rc = optim__err(err, OPTIM_EINVAL, "optimizer class '%s': param '%s' twice", cls->name,
                            p->name);
    return rc;
}

static int class_header_check(const optim_class *cls, optim_error *err)
{
    const size_t min = offsetof(optim_class, destroy) + sizeof(cls->destroy);
    if (cls->size < min || cls->version < 1 || cls->version > OPTIM_CLASS_VERSION)
        return optim__err(err, OPTIM_EVERSION,
                          "optimizer class: size %u, version %u; expected size >= %zu and "
                          "version 1..%d",
                          (unsigned)cls->size, (unsigned)cls->version, min, OPTIM_CLASS_VERSION);
    if (!cls->name || !cls->name[0])
        return optim__err(err, OPTIM_EINVAL, "optimizer class: name is empty");
    const int has_step = cls->size >= offsetof(optim_class, step) + sizeof cls->step && cls->step;
    if (!cls->apply_dense && !cls->apply_gradients && !has_step)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': needs apply_dense, step or apply_gradients",
                          cls->name);
    if (cls->apply_sparse_duplicate_indices && !cls->apply_sparse)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': apply_sparse_duplicate_indices needs apply_sparse "
                          "(for the OPTIM_SPARSE_DEFAULT path)",
                          cls->name);
    if (cls->n_params && !cls->params)
        return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': params is NULL", cls->name);
    if ((cls->flags & OPTIM_CLASS_KERAS3_ONLY) && (cls->flags & OPTIM_CLASS_LEGACY_ONLY))
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': both KERAS3_ONLY and LEGACY_ONLY", cls->name);
    if ((cls->flags & OPTIM_CLASS_NO_SPARSE) && cls->apply_sparse)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': both NO_SPARSE and apply_sparse", cls->name);
    return OPTIM_OK;
}

/* Whether pattern key p shares its name and a generation with a base
 * option, a param, or an earlier pattern key (i of cls->pattern_params). */
static const char *pattern_clash(const optim_class *cls, size_t i)
{
    const optim_param *p = &cls->pattern_params[i];
    const optim_param *base = optim__base_param(p->name);
    if (base && !gens_disjoint(base->flags, p->flags)) return "a base option";
    for (size_t j = 0; j < cls->n_params; j++)
        if (strcmp(cls->params[j].name, p->name) == 0 &&
            !gens_disjoint(cls->params[j].flags, p->flags))
            return "a param";
    for (size_t j = 0; j < i; j++)
        if (strcmp(cls->pattern_params[j].name, p->name) == 0 &&
            !gens_disjoint(cls->pattern_params[j].flags, p->flags))
            return "an earlier pattern key";
    return NULL;
}

static int pattern_param_check(const optim_class *cls, size_t i, optim_error *err)
{
    const optim_param *p = &cls->pattern_params[i];
    const uint32_t allowed =
        OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY | OPTIM_PARAM_KERAS3_ONLY;
    if (!p->name || !p->name[0] || p->type != OPTIM_PARAM_PATTERNS || (p->flags & ~allowed) ||
        gens_disjoint(p->flags, p->flags))
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': pattern_params[%zu] ('%s') is malformed: "
                          "expected a name, type OPTIM_PARAM_PATTERNS and flags among NULLABLE, "
                          "LEGACY_ONLY or KERAS3_ONLY (not both)",
                          cls->name, i, p->name ? p->name : "(null)");
    if (!(isnan(p->default_value) ? (p->flags & OPTIM_PARAM_NULLABLE) : p->default_value == 0))
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': pattern key '%s' default %g, expected 0 (the "
                          "empty list) or NAN (None, with OPTIM_PARAM_NULLABLE)",
                          cls->name, p->name, p->default_value);
    const char *clash = pattern_clash(cls, i);
    if (clash || strcmp(p->name, "name") == 0 || strcmp(p->name, "is_legacy_optimizer") == 0 ||
        strcmp(p->name, "lr") == 0 || strcmp(p->name, "jit_compile") == 0)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': pattern key '%s' is %s in the same generation",
                          cls->name, p->name, clash ? clash : "a reserved key");
    return OPTIM_OK;
}

static int pattern_params_check(const optim_class *cls, optim_error *err)
{
    if (cls->n_pattern_params && !cls->pattern_params)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': pattern_params is NULL, n_pattern_params %zu",
                          cls->name, cls->n_pattern_params);
    int rc = OPTIM_OK;
    for (size_t i = 0; !rc && i < cls->n_pattern_params; i++) rc = pattern_param_check(cls, i, err);
    return rc;
}

/* A module ("keras.optimizers") is dotted identifiers; a TF Addons name one
 * identifier (it follows "Addons>"). Both short enough for a class_name. */
static int fact_ok(const char *s, int dotted)
{
    size_t n = strlen(s);
    if (n == 0 || n > 100 || s[0] == '.' || s[n - 1] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' ||
              (dotted && s[i] == '.' && s[i + 1] != '.')))
            return 0;
    return 1;
}

static int fact_check(const optim_class *cls, const char *field, const char *v, int dotted,
                      uint32_t forbidden, optim_error *err)
{
    if (!v) return OPTIM_OK;
    if (!fact_ok(v, dotted))
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': %s is \"%.100s\", expected %s of at most 100 "
                          "characters",
                          cls->name, field, v,
                          dotted ? "a module path (identifiers joined by '.')" : "an identifier");
    if (cls->flags & forbidden)
        return optim__err(
            err, OPTIM_EINVAL, "optimizer class '%s': %s is set, but the class is %s (no %s form)",
            cls->name, field, forbidden == OPTIM_CLASS_LEGACY_ONLY ? "LEGACY_ONLY" : "KERAS3_ONLY",
            forbidden == OPTIM_CLASS_LEGACY_ONLY ? "Keras 3" : "legacy");
    return OPTIM_OK;
}

/* The version 4 Keras facts (cls a zero-extended copy). */
static int class_facts_check(const optim_class *cls, optim_error *err)
{
    int rc = fact_check(cls, "keras3_module", cls->keras3_module, 1, OPTIM_CLASS_LEGACY_ONLY, err);
    if (!rc)
        rc = fact_check(cls, "legacy_module", cls->legacy_module, 1, OPTIM_CLASS_KERAS3_ONLY, err);
    if (!rc) rc = fact_check(cls, "tfa_name", cls->tfa_name, 0, OPTIM_CLASS_KERAS3_ONLY, err);
    if (rc) return rc;
    if (cls->legacy_module && cls->tfa_name)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': both legacy_module and tfa_name are set, "
                          "expected at most one (a legacy class is tf-keras's or TF Addons')",
                          cls->name);
    if (cls->keras_flags & ~OPTIM_KERAS_TF_KERAS)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': keras_flags is 0x%x, expected only "
                          "OPTIM_KERAS_TF_KERAS (0x%x)",
                          cls->name, (unsigned)cls->keras_flags, OPTIM_KERAS_TF_KERAS);
    if ((cls->keras_flags & OPTIM_KERAS_TF_KERAS) && (cls->flags & OPTIM_CLASS_LEGACY_ONLY))
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': keras_flags has OPTIM_KERAS_TF_KERAS, but the "
                          "class is LEGACY_ONLY (tf-keras's new-style classes are Keras 3's form)",
                          cls->name);
    return OPTIM_OK;
}

/* The version 4 slot domains: names a slot could have, at most 64; the
 * version 5 slot count, which needs a create_slots hook to add them. */
static int slot_domains_check(const optim_class *cls, optim_error *err)
{
    if (cls->min_slots < 0 || cls->min_slots > OPTIM_MAX_SLOTS)
        return optim__err(err, OPTIM_ERANGE, "optimizer class '%s': min_slots %d, expected 0 .. %d",
                          cls->name, (int)cls->min_slots, OPTIM_MAX_SLOTS);
    if (cls->min_slots > 0 && !cls->create_slots)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': min_slots is %d but there is no create_slots "
                          "hook to add them",
                          cls->name, (int)cls->min_slots);
    const char *const *d = cls->nonnegative_slots;
    for (size_t i = 0; d && (i == 0 || d[i - 1]); i++) {
        if (i == 64)
            return optim__err(err, OPTIM_EINVAL,
                              "optimizer class '%s': nonnegative_slots has more than 64 names "
                              "(is it NULL-terminated?)",
                              cls->name);
        if (d[i] && (!d[i][0] || strchr(d[i], '/') || strlen(d[i]) > 200))
            return optim__err(err, OPTIM_EINVAL,
                              "optimizer class '%s': nonnegative_slots[%zu] is \"%.200s\", "
                              "expected a slot name (not empty, no '/')",
                              cls->name, i, d[i]);
    }
    return OPTIM_OK;
}

int optim__class_check(const optim_class *cls_in, optim_error *err)
{
    if (!cls_in) return optim__err(err, OPTIM_EINVAL, "optimizer class is NULL");
    int rc = class_header_check(cls_in, err);
    if (rc) return rc;
    optim_class cls;
    optim__class_copy(&cls, cls_in); /* fields past an older table's size read as 0 */
    if (!(cls.default_weight_decay >= 0) || !isfinite(cls.default_weight_decay))
        return optim__err(err, OPTIM_ERANGE,
                          "optimizer class '%s': default_weight_decay %g, expected >= 0", cls.name,
                          cls.default_weight_decay);
    if (!(cls.default_learning_rate >= 0) || !isfinite(cls.default_learning_rate))
        return optim__err(err, OPTIM_ERANGE,
                          "optimizer class '%s': default_learning_rate %g, expected >= 0", cls.name,
                          cls.default_learning_rate);
    const int nphase = !!cls.phase_plan + !!cls.apply_phase + !!cls.reduce_phase;
    if (nphase && (nphase < 3 || (cls.flags & OPTIM_CLASS_ELEMENTWISE)))
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': phase_plan, apply_phase and reduce_phase are set "
                          "%d of 3, expected all or none, and only without OPTIM_CLASS_ELEMENTWISE",
                          cls.name, nphase);
    for (size_t i = 0; i < cls.n_params && !rc; i++) rc = param_check(&cls, i, err);
    if (!rc) rc = class_facts_check(&cls, err);
    if (!rc) rc = slot_domains_check(&cls, err);
    return rc ? rc : pattern_params_check(&cls, err);
}

int optim__schedule_class_check(const optim_schedule_class *c, optim_error *err)
{
    if (!c) return optim__err(err, OPTIM_EINVAL, "schedule class is NULL");
    if (c->size < offsetof(optim_schedule_class, destroy) + sizeof c->destroy || c->version < 1 ||
        c->version > OPTIM_SCHEDULE_CLASS_VERSION)
        return optim__err(err, OPTIM_EVERSION,
                          "schedule class: size %u, version %u; expected version 1..%d",
                          (unsigned)c->size, (unsigned)c->version, OPTIM_SCHEDULE_CLASS_VERSION);
    if (!c->name || !c->name[0] || !c->value)
        return optim__err(err, OPTIM_EINVAL, "schedule class '%s': needs a name and a value hook",
                          c->name ? c->name : "");
    if (c->n_params && !c->params)
        return optim__err(err, OPTIM_EINVAL, "schedule class '%s': params is NULL", c->name);
    const int v2 = c->size >= offsetof(optim_schedule_class, tfa_module) + sizeof c->tfa_module;
    if (strncmp(c->name, "Addons>", 7) == 0 || (v2 && c->tfa_module && !c->tfa_module[0]))
        return optim__err(err, OPTIM_EINVAL,
                          "schedule class '%s': a TF Addons class is named without \"Addons>\" "
                          "and has a tfa_module (its module)",
                          c->name);
    for (size_t i = 0; i < c->n_params; i++) {
        const optim_param *p = &c->params[i];
        if (!p->name || !p->name[0] || strcmp(p->name, "name") == 0 || p->type > OPTIM_PARAM_INT)
            return optim__err(err, OPTIM_EINVAL,
                              "schedule class '%s': param %zu has a bad name or type", c->name, i);
        if (!(p->flags & OPTIM_PARAM_REQUIRED) && isnan(p->default_value) &&
            !(p->flags & OPTIM_PARAM_NULLABLE))
            return optim__err(err, OPTIM_EINVAL, "schedule class '%s': param '%s' has no default",
                              c->name, p->name);
    }
    return OPTIM_OK;
}

/* ---- Keras names ------------------------------------------------------------------ */

/* A version 4 field of a table that may be older (past its size: 0). */
#define CLASS_FACT(cls, f) ((cls)->size >= offsetof(optim_class, f) + sizeof(cls)->f ? (cls)->f : 0)

/* TF Addons' registered name (register_keras_serializable(package="Addons")):
 * the class's tfa_name, NULL for classes TF Addons does not have. */
const char *optim__tfa_name(const optim_class *cls) { return CLASS_FACT(cls, tfa_name); }

const char *optim__keras3_module(const optim_class *cls) { return CLASS_FACT(cls, keras3_module); }

const char *optim__legacy_module(const optim_class *cls) { return CLASS_FACT(cls, legacy_module); }

int optim__has_tf_keras_form(const optim_class *cls)
{
    return (CLASS_FACT(cls, keras_flags) & OPTIM_KERAS_TF_KERAS) != 0;
}

void optim__keras_class_name(const optim_class *cls, optim_generation gen, char *buf, size_t n)
{
    const char *tfa = gen == OPTIM_LEGACY ? optim__tfa_name(cls) : NULL;
    if (tfa) snprintf(buf, n, "Addons>%s", tfa);
    else snprintf(buf, n, "%s", cls->name);
}

/* Keras's naming.to_snake_case: drop non-word characters, then "_" before
 * an upper-case letter that starts a lower-case run ("(.)([A-Z][a-z]+)"),
 * then between a lower-case and an upper-case letter ("([a-z])([A-Z])"),
 * then lower-case. RMSprop -> rm_sprop, AdamW -> adam_w. */
static void snake_case(const char *name, char *out, size_t n)
{
    char a[128], b[192];
    size_t k = 0;
    for (const char *c = name; *c && k + 1 < sizeof a; c++)
        if (isalnum((unsigned char)*c) || *c == '_') a[k++] = *c;
    a[k] = '\0';
    size_t j = 0;
    for (size_t i = 0; a[i] && j + 2 < sizeof b;) {
        if (a[i + 1] && isupper((unsigned char)a[i + 1]) && islower((unsigned char)a[i + 2])) {
            b[j++] = a[i++];
            b[j++] = '_';
            b[j++] = a[i++];
            while (islower((unsigned char)a[i]) && j + 1 < sizeof b) b[j++] = a[i++];
        } else {
            b[j++] = a[i++];
        }
    }
    b[j] = '\0';
    size_t o = 0;
    for (size_t i = 0; b[i] && o + 2 < n; i++) {
        out[o++] = (char)tolower((unsigned char)b[i]);
        if (islower((unsigned char)b[i]) && isupper((unsigned char)b[i + 1])) out[o++] = '_';
    }
    out[o] = '\0';
}

void optim__default_name(const optim_class *cls, optim_generation gen, char *buf, size_t n)
{
    /* OptimizerV2 subclasses and TF Addons name themselves after the class;
     * Keras 3.15+ (auto_name) after the class in snake case. */
    const char *tfa = optim__tfa_name(cls);
    if (gen == OPTIM_LEGACY) snprintf(buf, n, "%s", tfa ? tfa : cls->name);
    else snake_case(cls->name, buf, n);
}
