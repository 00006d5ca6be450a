/* PiecewiseConstantDecay: keras.optimizers.schedules.PiecewiseConstantDecay.
 *
 * Keras 3 (keras/src/optimizers/schedules/learning_rate_schedule.py,
 * PiecewiseConstantDecay.__call__) and tf.keras alike, with n boundaries:
 *
 *     lr = values[0]   for step <= boundaries[0]
 *          values[j]   for boundaries[j-1] < step <= boundaries[j]
 *          values[n]   for step > boundaries[n-1]
 *
 * A boundary belongs to the interval below it: values[1] starts at step
 * boundaries[0] + 1. Keras 3 casts the boundaries to the step's integer
 * dtype, so a fractional boundary counts as its integer part (truncated
 * toward zero); tf.keras's legacy OptimizerV2 passes a float step instead,
 * which differs only for a negative fractional boundary.
 *
 * Config keys, in get_config order: boundaries, values (both required lists
 * of numbers), name. As in Keras, values must have exactly one more element
 * than boundaries. Also refused (Keras documents "strictly increasing" and
 * fails only on the first call, or gives a sum of several values): an
 * empty boundaries list and boundaries that do not strictly increase.
 * Written back as given: the lists' text (every number exact, ints as ints
 * and floats as floats, as Keras keeps the Python lists).
 *
 * Precision: the values are returned as given (Keras returns them in their
 * own dtype, float32 for Python floats). */
#include "optim/schedules.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_kind.h"

#define NAME "PiecewiseConstantDecay"

typedef struct pcd_state {
    double *boundaries; /* as given */
    double *cuts; /* the boundaries truncated toward zero (Keras 3's cast) */
    size_t n_boundaries;
    double *values;
    size_t n_values;
    int have_boundaries, have_values;
    char *text[2]; /* the lists as given: boundaries, values */
} pcd_state;

/* Parses a JSON list of finite numbers into a fresh array (*out NULL for an
 * empty list). */
static int parse_list(const char *key, const char *json, double **out, size_t *n, optim_error *err)
{
    *out = NULL;
    *n = 0;
    cJSON *v = cJSON_Parse(json);
    if (!v)
        return optim_error_set(err, OPTIM_EPARSE, NAME ": config key '%s' is not valid JSON", key);
    if (!cJSON_IsArray(v)) {
        int rc = optim_error_set(err, OPTIM_ETYPE,
                                 NAME ": config key '%s' is %s, expected a list of numbers", key,
                                 schedule_json_kind(v));
        cJSON_Delete(v);
        return rc;
    }
    size_t count = (size_t)cJSON_GetArraySize(v);
    double *a = count ? malloc(count * sizeof *a) : NULL;
    if (count && !a) {
        cJSON_Delete(v);
        return optim_error_set(err, OPTIM_ENOMEM, NAME ": config key '%s': out of memory", key);
    }
    size_t k = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) {
            int rc = optim_error_set(
                err, OPTIM_ETYPE,
                NAME ": config key '%s': element %zu is %s, expected a finite number", key, k,
                cJSON_IsNumber(item) ? "not finite" : schedule_json_kind(item));
            free(a);
            cJSON_Delete(v);
            return rc;
        }
        a[k++] = item->valuedouble;
    }
    cJSON_Delete(v);
    *out = a;
    *n = k;
    return OPTIM_OK;
}

static int set_config(optim_schedule *s, const char *key, const char *json, optim_error *err)
{
    pcd_state *st = optim_schedule_state(s);
    int is_b = strcmp(key, "boundaries") == 0;
    if (!is_b && strcmp(key, "values") != 0) return OPTIM_EKEY;
    double *a;
    size_t n;
    int rc = parse_list(key, json, &a, &n, err);
    if (rc) return rc;
    char *text = malloc(strlen(json) + 1);
    if (!text) {
        free(a);
        return optim_error_set(err, OPTIM_ENOMEM, NAME ": config key '%s': out of memory", key);
    }
    strcpy(text, json);
    free(st->text[!is_b]);
    st->text[!is_b] = text;
    if (is_b) {
        double *cuts = n ? malloc(n * sizeof *cuts) : NULL;
        if (n && !cuts) {
            free(a);
            return optim_error_set(err, OPTIM_ENOMEM,
                                   NAME ": config key 'boundaries': out of memory");
        }
        for (size_t i = 0; i < n; i++) cuts[i] = trunc(a[i]);
        free(st->boundaries);
        free(st->cuts);
        st->boundaries = a;
        st->cuts = cuts;
        st->n_boundaries = n;
        st->have_boundaries = 1;
    } else {
        free(st->values);
        st->values = a;
        st->n_values = n;
        st->have_values = 1;
    }
    return OPTIM_OK;
}

static int validate(const optim_schedule *s, optim_error *err)
{
    const pcd_state *st = optim_schedule_state(s);
    if (!st->have_boundaries)
        return optim_error_set(err, OPTIM_EKEY, NAME ": config key 'boundaries' is required");
    if (!st->have_values)
        return optim_error_set(err, OPTIM_EKEY, NAME ": config key 'values' is required");
    if (st->n_values != st->n_boundaries + 1)
        return optim_error_set(
            err, OPTIM_EINVAL,
            NAME ": boundaries has %zu elements and values %zu; expected values to have "
                 "exactly one more element than boundaries",
            st->n_boundaries, st->n_values);
    if (st->n_boundaries == 0)
        return optim_error_set(err, OPTIM_EINVAL,
                               NAME ": boundaries is empty; expected at least one step boundary");
    for (size_t i = 1; i < st->n_boundaries; i++)
        if (!(st->boundaries[i] > st->boundaries[i - 1]))
            return optim_error_set(err, OPTIM_EINVAL,
                                   NAME
                                   ": boundaries[%zu] is %.17g, not above boundaries[%zu] = %.17g; "
                                   "expected strictly increasing boundaries",
                                   i, st->boundaries[i], i - 1, st->boundaries[i - 1]);
    return OPTIM_OK;
}

static double value(const optim_schedule *s, int64_t step)
{
    const pcd_state *st = optim_schedule_state(s);
    const double t = (double)step;
    /* The first boundary at or above the step; past the last, values[n]. */
    size_t lo = 0, hi = st->n_boundaries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t <= st->cuts[mid]) hi = mid;
        else lo = mid + 1;
    }
    return st->values[lo];
}

static int get_config(const optim_schedule *s, optim_config *cfg)
{
    const pcd_state *st = optim_schedule_state(s);
    int rc = optim_config_put(cfg, "boundaries", st->text[0]);
    return rc ? rc : optim_config_put(cfg, "values", st->text[1]);
}

static void destroy(optim_schedule *s)
{
    pcd_state *st = optim_schedule_state(s);
    free(st->boundaries);
    free(st->cuts);
    free(st->values);
    free(st->text[0]);
    free(st->text[1]);
}

const optim_schedule_class optim_piecewise_constant_decay_class = {
    .size = sizeof(optim_schedule_class),
    .version = OPTIM_SCHEDULE_CLASS_VERSION,
    .name = NAME,
    .state_size = sizeof(pcd_state),
    .validate = validate,
    .value = value,
    .get_config = get_config,
    .set_config = set_config,
    .destroy = destroy,
};
