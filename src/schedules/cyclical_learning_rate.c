/* TF Addons' cyclical learning rates: CyclicalLearningRate and its
 * subclasses TriangularCyclicalLearningRate, Triangular2CyclicalLearningRate
 * and ExponentialCyclicalLearningRate.
 *
 * Smith, "Cyclical Learning Rates for Training Neural Networks" (WACV
 * 2017, arXiv:1506.01186). TF Addons
 * tensorflow_addons/optimizers/cyclical_learning_rate.py
 * (CyclicalLearningRate.__call__), in its order of operations:
 *
 *     cycle = floor(1 + step / (2 * step_size))
 *     x     = |step / step_size - 2 * cycle + 1|
 *     lr    = initial_learning_rate
 *             + (maximal_learning_rate - initial_learning_rate)
 *               * max(0, 1 - x) * scale_fn(cycle  if scale_mode == "cycle"
 *                                          else step)
 *
 * The rate climbs from initial_learning_rate to maximal_learning_rate over
 * step_size steps and back over the next step_size, cycle after cycle
 * (cycle = 1, 2, ...). scale_fn:
 *     TriangularCyclicalLearningRate   1.0
 *     Triangular2CyclicalLearningRate  1 / 2.0^(x - 1)  (halved every cycle)
 *     ExponentialCyclicalLearningRate  gamma^x
 *     CyclicalLearningRate             a function registered with
 *                                      optim_register_scale_fn under the name
 *                                      the config gives (optim/schedules.h)
 *
 * Config keys, in TF Addons' get_config order (each class's own):
 *     CyclicalLearningRate: initial_learning_rate, maximal_learning_rate,
 *         scale_fn, step_size, scale_mode ("cycle")
 *     Triangular, Triangular2: initial_learning_rate, maximal_learning_rate,
 *         step_size, scale_mode ("cycle")
 *     Exponential: initial_learning_rate, maximal_learning_rate, step_size,
 *         scale_mode ("iterations"), gamma (1.0)
 * The first three keys are required (TF Addons' constructors have no
 * defaults for them), as is scale_fn. TF Addons' get_config writes no
 * "name" (its constructors take one, default the class name): a name is
 * read and written back only where a config has one. A subclass takes no
 * scale_fn and only Exponential a gamma (TF Addons' constructors refuse
 * them as unexpected arguments).
 *
 * Refused where TF Addons does not check: step_size <= 0 (a division by
 * zero: the rate is NaN or the initial one), and a scale_mode other than
 * "cycle" or "iterations" (TF Addons takes any other string as
 * "iterations").
 *
 * scale_fn: what tf.keras writes for the Python function, a name (2.11-2.12:
 * "my_scale", "Custom>my_scale") or {"module", "class_name": "function",
 * "config": NAME, "registered_name"} (2.13+), is looked up with
 * optim_find_scale_fn and written back as read. A lambda ("<lambda>" in
 * 2.11-2.12, its marshalled bytecode as {"class_name": "__lambda__"} in
 * 2.13+) and a name nothing registered are refused, saying why: optim
 * does not run Python. (tf.keras itself loads only the 2.11-2.12 name of a
 * registered function: LearningRateSchedule.from_config passes 2.13+'s
 * object to the constructor as it is, which refuses it.)
 *
 * Precision: double throughout. TF Addons computes in the dtype of
 * initial_learning_rate (float32 for a Python float); in tf.keras's legacy
 * optimizers the step is a float32 tensor, so Exponential's gamma^step is
 * float32's pow of gamma rounded to float32 (relatively 6.5e-5 below the
 * exact value at step 8000 for gamma 0.996); TF Addons' tests call the
 * schedule with Python ints, where gamma**step is Python's double pow, as
 * here. */
#include "optim/schedules.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_kind.h"

#define TFA_MODULE "tensorflow_addons.optimizers.cyclical_learning_rate"

enum { P_INITIAL, P_MAXIMAL, P_STEP_SIZE, P_GAMMA, N_PARAMS };

static const optim_param params[N_PARAMS] = {
    {"initial_learning_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, -INFINITY, INFINITY},
    {"maximal_learning_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, -INFINITY, INFINITY},
    {"step_size", OPTIM_PARAM_FLOAT,
     OPTIM_PARAM_REQUIRED | OPTIM_PARAM_COUNT | OPTIM_PARAM_MIN_EXCLUSIVE, NAN, 0.0, INFINITY},
    {"gamma", OPTIM_PARAM_FLOAT, 0, 1.0, -INFINITY, INFINITY},
};

enum { MODE_DEFAULT, MODE_CYCLE, MODE_ITERATIONS };

typedef struct clr_state {
    int mode; /* MODE_DEFAULT until a config gives scale_mode */
    char *scale_fn_text; /* CyclicalLearningRate: scale_fn as read */
    optim_scale_fn fn;
    void *ctx;
} clr_state;

/* Each class's scale function of cycle-or-step x, and its default mode. */
typedef struct clr_kind {
    double (*scale)(const optim_schedule *s, double x);
    int default_mode;
} clr_kind;

static double scale_registered(const optim_schedule *s, double x)
{
    const clr_state *st = optim_schedule_state(s);
    return st->fn(x, st->ctx);
}

static double scale_one(const optim_schedule *s, double x)
{
    (void)s, (void)x;
    return 1.0;
}

static double scale_halving(const optim_schedule *s, double x)
{
    (void)s;
    return 1.0 / pow(2.0, x - 1.0);
}

static double scale_gamma(const optim_schedule *s, double x)
{
    return pow(optim_schedule_param(s, P_GAMMA), x);
}

static const clr_kind CYCLICAL = {scale_registered, MODE_CYCLE};
static const clr_kind TRIANGULAR = {scale_one, MODE_CYCLE};
static const clr_kind TRIANGULAR2 = {scale_halving, MODE_CYCLE};
static const clr_kind EXPONENTIAL = {scale_gamma, MODE_ITERATIONS};

static int mode_of(const optim_schedule *s, const clr_kind *k)
{
    const clr_state *st = optim_schedule_state(s);
    return st->mode != MODE_DEFAULT ? st->mode : k->default_mode;
}

static double value_of(const optim_schedule *s, int64_t step, const clr_kind *k)
{
    const double initial = optim_schedule_param(s, P_INITIAL);
    const double maximal = optim_schedule_param(s, P_MAXIMAL);
    const double step_size = optim_schedule_param(s, P_STEP_SIZE);
    const double t = (double)step;
    const double cycle = floor(1.0 + t / (2.0 * step_size));
    const double x = fabs(t / step_size - 2.0 * cycle + 1.0);
    const double mode_step = mode_of(s, k) == MODE_CYCLE ? cycle : t;
    return initial + (maximal - initial) * fmax(0.0, 1.0 - x) * k->scale(s, mode_step);
}

static const clr_kind *kind_of(const optim_schedule *s);

/* ---- config ------------------------------------------------------------------------ */

static int set_mode(optim_schedule *s, const cJSON *v, optim_error *err)
{
    const char *cls = optim_schedule_class_of(s)->name;
    clr_state *st = optim_schedule_state(s);
    if (!cJSON_IsString(v))
        return optim_error_set(err, OPTIM_ETYPE,
                               "%s: config key 'scale_mode' is %s, expected \"cycle\" or "
                               "\"iterations\"",
                               cls, schedule_json_kind(v));
    if (strcmp(v->valuestring, "cycle") == 0) st->mode = MODE_CYCLE;
    else if (strcmp(v->valuestring, "iterations") == 0) st->mode = MODE_ITERATIONS;
    else
        return optim_error_set(err, OPTIM_EINVAL,
                               "%s: config key 'scale_mode' is \"%.100s\", expected one of: "
                               "\"cycle\", \"iterations\"",
                               cls, v->valuestring);
    return OPTIM_OK;
}

/* The function name in a scale_fn value, or a refusal saying why. */
static int scale_fn_name(const cJSON *v, const char **name, optim_error *err)
{
    const char *what = "CyclicalLearningRate: config key 'scale_fn'";
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(v, "class_name");
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(v, "config");
    int lambda = cJSON_IsString(v) && strcmp(v->valuestring, "<lambda>") == 0;
    if (cJSON_IsString(v) && !lambda) *name = v->valuestring;
    else if (cJSON_IsString(cn) && strcmp(cn->valuestring, "function") == 0 &&
             cJSON_IsString(inner))
        *name = inner->valuestring;
    else if (lambda || (cJSON_IsString(cn) && strcmp(cn->valuestring, "__lambda__") == 0))
        return optim_error_set(
            err, OPTIM_EINVAL,
            "%s is a Python lambda (%s), which optim cannot evaluate: it does not run Python "
            "code; give a named function registered with optim_register_scale_fn, or use "
            "TriangularCyclicalLearningRate, Triangular2CyclicalLearningRate or "
            "ExponentialCyclicalLearningRate",
            what,
            lambda ? "tf.keras 2.11-2.12 write only the name \"<lambda>\", which tf.keras "
                     "cannot load either"
                   : "its bytecode, as tf-keras 2.13+ write it");
    else
        return optim_error_set(err, OPTIM_ETYPE,
                               "%s is %s%s; expected a function's name (tf.keras 2.11-2.12) or "
                               "{\"class_name\": \"function\", \"config\": NAME, ...} "
                               "(tf-keras 2.13+)",
                               what, schedule_json_kind(v),
                               cJSON_IsObject(v) ? " of another kind" : "");
    return OPTIM_OK;
}

static int set_scale_fn(optim_schedule *s, const cJSON *v, const char *text, optim_error *err)
{
    clr_state *st = optim_schedule_state(s);
    const char *name = NULL;
    int rc = scale_fn_name(v, &name, err);
    if (rc) return rc;
    void *ctx;
    optim_scale_fn fn = optim_find_scale_fn(name, &ctx);
    if (!fn)
        return optim_error_set(err, OPTIM_ENOTFOUND,
                               "CyclicalLearningRate: config key 'scale_fn' names the Python "
                               "function '%.100s', which optim cannot run; register a C function "
                               "under that name with optim_register_scale_fn (for the optim "
                               "command, in a plugin)",
                               name);
    char *copy = malloc(strlen(text) + 1);
    if (!copy) return optim_error_set(err, OPTIM_ENOMEM, "out of memory");
    strcpy(copy, text);
    free(st->scale_fn_text);
    st->scale_fn_text = copy;
    st->fn = fn;
    st->ctx = ctx;
    return OPTIM_OK;
}

static int set_config(optim_schedule *s, const char *key, const char *json, optim_error *err)
{
    const clr_kind *k = kind_of(s);
    const char *cls = optim_schedule_class_of(s)->name;
    int mode = strcmp(key, "scale_mode") == 0, fn = strcmp(key, "scale_fn") == 0;
    if (!mode && !fn) return OPTIM_EKEY;
    if (fn && k != &CYCLICAL)
        return optim_error_set(err, OPTIM_EKEY,
                               "%s: unknown config key 'scale_fn'; the class fixes its scale "
                               "function (TF Addons' constructor takes no scale_fn): use "
                               "CyclicalLearningRate for another one",
                               cls);
    cJSON *v = cJSON_Parse(json);
    if (!v) return optim_error_set(err, OPTIM_EPARSE, "%s: config key '%s' is malformed", cls, key);
    int rc = mode ? set_mode(s, v, err) : set_scale_fn(s, v, json, err);
    cJSON_Delete(v);
    return rc;
}

static int validate(const optim_schedule *s, optim_error *err)
{
    const clr_kind *k = kind_of(s);
    const clr_state *st = optim_schedule_state(s);
    if (k == &CYCLICAL && !st->fn)
        return optim_error_set(err, OPTIM_EKEY,
                               "CyclicalLearningRate: config key 'scale_fn' is required");
    return OPTIM_OK;
}

static int get_config(const optim_schedule *s, optim_config *cfg)
{
    const clr_kind *k = kind_of(s);
    const clr_state *st = optim_schedule_state(s);
    int rc = OPTIM_OK;
    if (st->scale_fn_text)
        rc = optim_config_put_after(cfg, "scale_fn", st->scale_fn_text, "maximal_learning_rate");
    const char *mode = mode_of(s, k) == MODE_CYCLE ? "\"cycle\"" : "\"iterations\"";
    return rc ? rc : optim_config_put_after(cfg, "scale_mode", mode, "step_size");
}

static void destroy(optim_schedule *s)
{
    clr_state *st = optim_schedule_state(s);
    free(st->scale_fn_text);
}

/* One class: its value hook bound to its kind, and its table. */
#define CLR_CLASS(sym, kind, cls_name, nparams)                      \
    static double sym##_value(const optim_schedule *s, int64_t step) \
    {                                                                \
        return value_of(s, step, &kind);                             \
    }                                                                \
    const optim_schedule_class sym = {                               \
        .size = sizeof(optim_schedule_class),                        \
        .version = OPTIM_SCHEDULE_CLASS_VERSION,                     \
        .name = cls_name,                                            \
        .params = params,                                            \
        .n_params = nparams,                                         \
        .state_size = sizeof(clr_state),                             \
        .validate = validate,                                        \
        .value = sym##_value,                                        \
        .get_config = get_config,                                    \
        .set_config = set_config,                                    \
        .destroy = destroy,                                          \
        .tfa_module = TFA_MODULE,                                    \
    }

CLR_CLASS(optim_cyclical_learning_rate_class, CYCLICAL, "CyclicalLearningRate", P_GAMMA);
CLR_CLASS(optim_triangular_cyclical_learning_rate_class, TRIANGULAR,
          "TriangularCyclicalLearningRate", P_GAMMA);
CLR_CLASS(optim_triangular2_cyclical_learning_rate_class, TRIANGULAR2,
          "Triangular2CyclicalLearningRate", P_GAMMA);
CLR_CLASS(optim_exponential_cyclical_learning_rate_class, EXPONENTIAL,
          "ExponentialCyclicalLearningRate", N_PARAMS);

/* The config hooks' class, by its value hook. */
static const clr_kind *kind_of(const optim_schedule *s)
{
    double (*value)(const optim_schedule *, int64_t) = optim_schedule_class_of(s)->value;
    return value == optim_triangular_cyclical_learning_rate_class_value ? &TRIANGULAR
        : value == optim_triangular2_cyclical_learning_rate_class_value ? &TRIANGULAR2
        : value == optim_exponential_cyclical_learning_rate_class_value ? &EXPONENTIAL
                                                                        : &CYCLICAL;
}
