/* What optim writes, read by the other side's Keras:
 *
 * - legacy: every built-in class that has a legacy form (optimizers and
 *   wrappers) writes only keys its tf.keras / TF Addons constructor takes.
 *   OptimizerV2.__init__ takes, beyond the subclass's declared arguments,
 *   only clipnorm, clipvalue, lr, decay and global_clipnorm (its
 *   allowed_kwargs); anything else (is_legacy_optimizer, use_ema, ...) is a
 *   TypeError. The accepted arguments below are the constructors'
 *   signatures in tf-keras's tf_keras/optimizers/legacy modules,
 *   tf_keras/mixed_precision/loss_scale_optimizer.py (no **kwargs: not even
 *   name) and TF Addons' tensorflow_addons/optimizers modules.
 * - Keras 3: every nested object optim writes (a schedule, LossScaleOptimizer's
 *   inner optimizer, MultiOptimizer's OptimizerMap and sub-optimizers) has
 *   the module and registered_name that deserialize_keras_object needs to
 *   find its class without module_objects. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "optim/optimizer.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

/* ---- legacy: no key the constructor refuses -------------------------------------- */

#define V2_KWARGS "clipnorm", "clipvalue", "lr", "decay", "global_clipnorm"

typedef struct legacy_class {
    const char *name; /* optim's class name */
    int v2_kwargs; /* takes OptimizerV2's **kwargs */
    const char *args[12];
} legacy_class;

static const legacy_class legacy_classes[] = {
    {"SGD", 1, {"learning_rate", "momentum", "nesterov", "name"}},
    {"Adam", 1, {"learning_rate", "beta_1", "beta_2", "epsilon", "amsgrad", "name"}},
    {"Adamax", 1, {"learning_rate", "beta_1", "beta_2", "epsilon", "name"}},
    {"Nadam", 1, {"learning_rate", "beta_1", "beta_2", "epsilon", "name"}},
    {"RMSprop", 1, {"learning_rate", "rho", "momentum", "epsilon", "centered", "name"}},
    {"Adagrad", 1, {"learning_rate", "initial_accumulator_value", "epsilon", "name"}},
    {"Adadelta", 1, {"learning_rate", "rho", "epsilon", "name"}},
    {"Ftrl",
     1,
     {"learning_rate", "learning_rate_power", "initial_accumulator_value",
      "l1_regularization_strength", "l2_regularization_strength", "name",
      "l2_shrinkage_regularization_strength", "beta"}},
    /* TF Addons: AdamW = DecoupledWeightDecayExtension(weight_decay,
     * exclude_from_weight_decay) over Adam's arguments. */
    {"AdamW",
     1,
     {"weight_decay", "exclude_from_weight_decay", "learning_rate", "beta_1", "beta_2", "epsilon",
      "amsgrad", "name"}},
    {"Lamb",
     1,
     {"learning_rate", "beta_1", "beta_2", "epsilon", "weight_decay", "exclude_from_weight_decay",
      "exclude_from_layer_adaptation", "name"}},
    {"LazyAdam", 1, {"learning_rate", "beta_1", "beta_2", "epsilon", "amsgrad", "name"}},
    {"COCOB", 1, {"alpha", "use_locking", "name"}},
    {"SGDW",
     1,
     {"weight_decay", "exclude_from_weight_decay", "learning_rate", "momentum", "nesterov",
      "name"}},
    {"ProximalAdagrad",
     1,
     {"learning_rate", "initial_accumulator_value", "l1_regularization_strength",
      "l2_regularization_strength", "name"}},
    {"RectifiedAdam",
     1,
     {"learning_rate", "beta_1", "beta_2", "epsilon", "weight_decay", "amsgrad", "sma_threshold",
      "total_steps", "warmup_proportion", "min_lr", "name"}},
    {"Yogi",
     1,
     {"learning_rate", "beta1", "beta2", "epsilon", "l1_regularization_strength",
      "l2_regularization_strength", "initial_accumulator_value", "activation", "name"}},
    {"NovoGrad",
     1,
     {"learning_rate", "beta_1", "beta_2", "epsilon", "weight_decay", "grad_averaging", "amsgrad",
      "name"}},
    {"ConditionalGradient", 1, {"learning_rate", "lambda_", "epsilon", "ord", "name"}},
    {"MovingAverage",
     1,
     {"optimizer", "average_decay", "num_updates", "start_step", "dynamic_decay", "name"}},
    {"SWA", 1, {"optimizer", "start_averaging", "average_period", "name"}},
    {"Lookahead", 1, {"optimizer", "sync_period", "slow_step_size", "name"}},
    {"MultiOptimizer", 1, {"optimizers_and_layers", "optimizer_specs", "name"}},
    {"LossScaleOptimizer",
     0,
     {"inner_optimizer", "dynamic", "initial_scale", "dynamic_growth_steps"}},
};
#define N_LEGACY (sizeof legacy_classes / sizeof *legacy_classes)

static const legacy_class *legacy_entry(const char *name)
{
    for (size_t i = 0; i < N_LEGACY; i++)
        if (strcmp(legacy_classes[i].name, name) == 0) return &legacy_classes[i];
    return NULL;
}

static int accepted(const legacy_class *c, const char *key)
{
    static const char *const v2[] = {V2_KWARGS};
    for (size_t i = 0; i < 12 && c->args[i]; i++)
        if (strcmp(c->args[i], key) == 0) return 1;
    for (size_t i = 0; c->v2_kwargs && i < sizeof v2 / sizeof *v2; i++)
        if (strcmp(v2[i], key) == 0) return 1;
    return 0;
}

/* Every key of a serialized legacy object (and of the optimizers nested in
 * it) is one its constructor takes. */
static void assert_legacy_keys(const cJSON *obj)
{
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(obj, "class_name");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(obj, "config");
    assert_true(cJSON_IsString(cn) && cJSON_IsObject(cfg));
    const char *name = cn->valuestring;
    if (strncmp(name, "Addons>", 7) == 0) name += 7;
    const legacy_class *c = legacy_entry(strcmp(name, "LAMB") == 0 ? "Lamb" : name);
    if (!c) print_error("no constructor arguments listed for '%s'\n", cn->valuestring);
    assert_non_null(c);
    const cJSON *item;
    cJSON_ArrayForEach(item, cfg)
    {
        if (!accepted(c, item->string))
            print_error("%s: key '%s' is not an argument of its constructor\n", cn->valuestring,
                        item->string);
        assert_true(accepted(c, item->string));
        if (strcmp(item->string, "optimizer") == 0 || strcmp(item->string, "inner_optimizer") == 0)
            assert_legacy_keys(item);
        const cJSON *spec; /* TF Addons' MultiOptimizer: [{"optimizer": ..., "weights": ...}] */
        if (strcmp(item->string, "optimizer_specs") == 0)
            cJSON_ArrayForEach(spec, item)
                assert_legacy_keys(cJSON_GetObjectItemCaseSensitive(spec, "optimizer"));
    }
}

/* Configs that set every option a class has in the legacy generation. */
#define INNER \
    "{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.5, \"clipnorm\": 1.0, \"decay\": 0.1}}"
static const char *const legacy_configs[][2] = {
    {"SGD",
     "{\"momentum\": 0.9, \"nesterov\": true, \"clipnorm\": 1.0, \"clipvalue\": 2.0, \"decay\": 0.01}"},
    {"Adam", "{\"amsgrad\": true, \"global_clipnorm\": 1.0, \"lr\": 0.1}"},
    {"Adamax", "{\"epsilon\": 1e-5, \"clipvalue\": 1.0}"},
    {"Nadam", "{\"beta_1\": 0.8, \"decay\": 0.5}"},
    {"RMSprop", "{\"centered\": true, \"momentum\": 0.5, \"clipnorm\": 2}"},
    {"Adagrad", "{\"initial_accumulator_value\": 0.5}"},
    {"Adadelta", "{\"rho\": 0.9}"},
    {"Ftrl",
     "{\"l1_regularization_strength\": 0.1, \"l2_shrinkage_regularization_strength\": 0.2, \"beta\": 0.5}"},
    {"AdamW",
     "{\"weight_decay\": 0.01, \"exclude_from_weight_decay\": [\"bias\"], \"clipnorm\": 1.0}"},
    {"Lamb",
     "{\"weight_decay\": 0.01, \"exclude_from_weight_decay\": [\"bias\"], "
     "\"exclude_from_layer_adaptation\": [\"norm\"]}"},
    {"LazyAdam", "{\"epsilon\": 1e-5, \"clipvalue\": 0.5}"},
    {"COCOB", "{\"alpha\": 20, \"use_locking\": true, \"decay\": 0.1, \"clipnorm\": 1.0}"},
    {"SGDW",
     "{\"weight_decay\": 0.01, \"momentum\": 0.9, \"nesterov\": true, \"decay\": 0.1, "
     "\"exclude_from_weight_decay\": [\"bias\"], \"clipnorm\": 1.0}"},
    {"ProximalAdagrad",
     "{\"initial_accumulator_value\": 0.5, \"l1_regularization_strength\": 0.1, "
     "\"l2_regularization_strength\": 0.2, \"decay\": 0.1, \"global_clipnorm\": 1.0}"},
    {"RectifiedAdam",
     "{\"amsgrad\": true, \"weight_decay\": 0.01, \"total_steps\": 100, \"clipnorm\": 1.0}"},
    {"Yogi", "{\"activation\": \"tanh\", \"l1_regularization_strength\": 0.1, \"decay\": 0.1}"},
    {"NovoGrad",
     "{\"weight_decay\": 0.01, \"grad_averaging\": true, \"amsgrad\": true, \"decay\": 0.1}"},
    {"ConditionalGradient", "{\"lambda_\": 0.1, \"ord\": \"nuclear\", \"clipnorm\": 1.0}"},
    {"MovingAverage",
     "{\"optimizer\": " INNER ", \"num_updates\": 3, \"start_step\": 1, \"dynamic_decay\": true}"},
    {"SWA", "{\"optimizer\": " INNER ", \"start_averaging\": 2, \"average_period\": 3}"},
    {"Lookahead", "{\"optimizer\": " INNER ", \"sync_period\": 4}"},
    {"MultiOptimizer",
     "{\"optimizer_specs\": [{\"optimizer\": " INNER
     ", \"weights\": [\"a:0\"]}], \"clipnorm\": 1.0, "
     "\"decay\": 0.1, \"is_legacy_optimizer\": true}"},
    {"LossScaleOptimizer",
     "{\"inner_optimizer\": " INNER ", \"initial_scale\": 8, \"dynamic_growth_steps\": 10}"},
    {"LossScaleOptimizer",
     "{\"inner_optimizer\": " INNER ", \"dynamic\": false, \"initial_scale\": 8}"},
};

static void check_legacy(const char *cls, const char *config)
{
    char json[1024];
    snprintf(json, sizeof json, "{\"class_name\": \"%s\", \"config\": %s}", cls, config);
    optim_optimizer *opt = NULL;
    optim_error err;
    if (optim_from_json_as(&opt, json, OPTIM_LEGACY, &err)) print_error("%s: %s\n", json, err.msg);
    assert_non_null(opt);
    char *text = optim_serialize(opt);
    cJSON *o = cJSON_Parse(text);
    assert_non_null(o);
    assert_legacy_keys(o);
    cJSON_Delete(o);
    optim_free(text);
    optim_destroy(opt);
}

/* The least legacy config of a class: TF Addons' AdamW and SGDW require
 * weight_decay. */
static const char *least_config(const char *name)
{
    static const char *const need_wd[] = {"AdamW", "SGDW"};
    for (size_t i = 0; i < sizeof need_wd / sizeof *need_wd; i++)
        if (strcmp(name, need_wd[i]) == 0) return "{\"weight_decay\": 0.0}";
    return "{}";
}

/* Every built-in class with a legacy form, at its defaults and with its
 * options set. optim's own ApplyIfFinite (no Keras class) writes
 * is_legacy_optimizer on purpose: nothing else tells its generation. */
OPTIM_TEST(test_legacy_output_has_only_constructor_keys)
{
    size_t checked = 0;
#define CHECK_CLASS(sym)                                                                       \
    if (!(sym.flags & OPTIM_CLASS_KERAS3_ONLY) && strcmp(sym.name, "ApplyIfFinite") != 0) {    \
        if (!legacy_entry(sym.name))                                                           \
            print_error("built-in legacy class %s: not in this test\n", sym.name);             \
        assert_non_null(legacy_entry(sym.name));                                               \
        if (!sym.apply_gradients && !sym.step) check_legacy(sym.name, least_config(sym.name)); \
        checked++;                                                                             \
    }
    OPTIM_BUILTIN_CLASSES(CHECK_CLASS)
#undef CHECK_CLASS
    assert_int_equal(checked, N_LEGACY);
    for (size_t i = 0; i < sizeof legacy_configs / sizeof *legacy_configs; i++)
        check_legacy(legacy_configs[i][0], legacy_configs[i][1]);
}

/* The checker refuses what OptimizerV2 refuses. */
OPTIM_TEST(test_legacy_checker_refuses)
{
    const legacy_class *sgd = legacy_entry("SGD"), *lso = legacy_entry("LossScaleOptimizer");
    assert_true(accepted(sgd, "decay") && accepted(sgd, "clipnorm") && accepted(sgd, "momentum"));
    assert_false(accepted(sgd, "is_legacy_optimizer"));
    assert_false(accepted(sgd, "use_ema"));
    assert_false(accepted(sgd, "weight_decay"));
    assert_false(accepted(lso, "name"));
    assert_false(accepted(lso, "clipnorm"));
}

/* ---- Keras 3: nested objects findable by deserialize_keras_object --------------- */

/* Every object with a class_name, at any depth, has module and
 * registered_name around class_name and config, in serialize_keras_object's
 * order; returns how many it saw. */
static int assert_envelopes(const cJSON *v)
{
    int n = 0;
    const cJSON *cn = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "class_name") : NULL;
    if (cn) {
        const cJSON *c = v->child;
        static const char *const keys[] = {"module", "class_name", "config", "registered_name"};
        for (int k = 0; k < 4; k++, c = c ? c->next : NULL) {
            if (!c || strcmp(c->string, keys[k]) != 0)
                print_error("%s: key %d is '%s', expected '%s'\n", cn->valuestring, k,
                            c ? c->string : "(none)", keys[k]);
            assert_non_null(c);
            assert_string_equal(c->string, keys[k]);
        }
        assert_null(c);
        n++;
    }
    for (const cJSON *c = v->child; c; c = c->next) n += assert_envelopes(c);
    return n;
}

static void check_envelopes(const char *json, int objects, const char *module_of_nested)
{
    optim_optimizer *opt = optim_test_make(json);
    assert_eq(optim_generation_of(opt), OPTIM_KERAS3);
    char *text = optim_serialize(opt);
    cJSON *o = cJSON_Parse(text);
    assert_int_equal(assert_envelopes(o), objects);
    assert_contains(text, module_of_nested);
    cJSON_Delete(o);
    optim_free(text);
    optim_destroy(opt);
}

OPTIM_TEST(test_keras3_nested_schedule)
{
    check_envelopes(
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": {\"class_name\": \"CosineDecay\", "
        "\"config\": {\"initial_learning_rate\": 0.1, \"decay_steps\": 10}}}}",
        2,
        "\"learning_rate\":{\"module\":\"keras.optimizers.schedules\",\"class_name\":\"CosineDecay\"");
}

OPTIM_TEST(test_keras3_loss_scale_inner)
{
    check_envelopes(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": {\"class_name\": "
        "\"SGD\", \"config\": {\"learning_rate\": {\"class_name\": \"ExponentialDecay\", \"config\": "
        "{\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"decay_rate\": 0.5}}}}}}",
        3, "\"inner_optimizer\":{\"module\":\"keras.optimizers\",\"class_name\":\"SGD\"");
}

OPTIM_TEST(test_keras3_multi_optimizer_subs)
{
    /* MultiOptimizer, its OptimizerMap, the default and one mapped optimizer. */
    check_envelopes(
        "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": {\"class_name\": "
        "\"OptimizerMap\", \"config\": {\"default_optimizer\": \"adam\", \"optimizer_map\": "
        "{\"dense/.*\": {\"class_name\": \"SGD\", \"config\": {}}}}}}}",
        4, "\"dense/.*\":{\"module\":\"keras.optimizers\",\"class_name\":\"SGD\"");
}

int main(void) { return optim_test_run(); }
