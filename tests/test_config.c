/* Configs: the SGD class's Keras JSON (both generations), get_config key
 * sets and defaults, round trips, hyperparameters, every kind of bad config,
 * and the class registry.
 *
 * Reference key sets and defaults (written out here, not read from the
 * library):
 *   Keras 3 keras.optimizers.SGD().get_config():
 *     name "SGD", learning_rate 0.01, weight_decay None, clipnorm None,
 *     global_clipnorm None, clipvalue None, use_ema False, ema_momentum 0.99,
 *     ema_overwrite_frequency None, loss_scale_factor None,
 *     gradient_accumulation_steps None, momentum 0.0, nesterov False
 *   tf.keras.optimizers.legacy.SGD().get_config():
 *     name "SGD", learning_rate 0.01, decay 0.0, momentum 0.0,
 *     nesterov False (no is_legacy_optimizer: its constructor refuses one)
 *     (+ clipnorm / clipvalue / global_clipnorm only when set)
 */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optim/wrappers.h"

/* Non-NULL pointer no constructor returns: failures must reset *out. */
static char not_an_opt;
#define SENTINEL ((optim_optimizer *)(void *)&not_an_opt)

static const char *const KERAS3_KEYS[] = {
    "name",
    "learning_rate",
    "weight_decay",
    "clipnorm",
    "global_clipnorm",
    "clipvalue",
    "use_ema",
    "ema_momentum",
    "ema_overwrite_frequency",
    "loss_scale_factor",
    "gradient_accumulation_steps",
    "momentum",
    "nesterov",
};
#define N_KERAS3_KEYS (sizeof KERAS3_KEYS / sizeof *KERAS3_KEYS)

static const char *const LEGACY_KEYS[] = {
    "name", "learning_rate", "decay", "momentum", "nesterov",
};
#define N_LEGACY_KEYS (sizeof LEGACY_KEYS / sizeof *LEGACY_KEYS)

/* ---- Helpers ---------------------------------------------------------------- */

static optim_optimizer *from_json_ok(const char *json)
{
    optim_optimizer *opt = SENTINEL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != OPTIM_OK) {
        print_error("optim_from_json(%s): rc %d: %s\n", json, rc, err.msg);
        fail();
    }
    assert_non_null(opt);
    assert_ptr_not_equal(opt, SENTINEL);
    assert_int_equal(err.code, OPTIM_OK);
    assert_string_equal(optim_errmsg(opt), "");
    return opt;
}

/* get_config parsed with cJSON (caller deletes). */
static cJSON *config_of(optim_optimizer *opt)
{
    char *s = optim_get_config(opt);
    assert_non_null(s);
    cJSON *c = cJSON_Parse(s);
    if (!c) print_error("get_config is not JSON: %s\n", s);
    optim_free(s);
    assert_non_null(c);
    assert_true(cJSON_IsObject(c));
    return c;
}

static char *serialize(optim_optimizer *opt)
{
    char *s = optim_serialize(opt);
    assert_non_null(s);
    return s;
}

/* The object has exactly these keys (each once). */
static void assert_keys_exactly(const cJSON *obj, const char *const *keys, size_t n)
{
    size_t count = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, obj)
    {
        count++;
        int known = 0;
        for (size_t k = 0; k < n; k++) known |= strcmp(item->string, keys[k]) == 0;
        if (!known) {
            print_error("unexpected config key '%s'\n", item->string);
            fail();
        }
    }
    for (size_t k = 0; k < n; k++)
        if (!cJSON_GetObjectItemCaseSensitive(obj, keys[k])) {
            print_error("config key '%s' is missing\n", keys[k]);
            fail();
        }
    assert_int_equal(count, n);
}

static void assert_num(const cJSON *obj, const char *key, double want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) {
        print_error("config key '%s' is not a number\n", key);
        fail();
    }
    if (v->valuedouble != want) {
        print_error("config key '%s' = %.17g, expected %.17g\n", key, v->valuedouble, want);
        fail();
    }
}

static void assert_bool(const cJSON *obj, const char *key, int want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsBool(v)) {
        print_error("config key '%s' is not a boolean\n", key);
        fail();
    }
    assert_int_equal(cJSON_IsTrue(v) ? 1 : 0, want);
}

static void assert_null_key(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNull(v)) {
        print_error("config key '%s' is not null\n", key);
        fail();
    }
}

static void assert_str(const cJSON *obj, const char *key, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v)) {
        print_error("config key '%s' is not a string\n", key);
        fail();
    }
    assert_string_equal(v->valuestring, want);
}

/* Keras 3 SGD defaults (name aside), with the given lr/momentum/nesterov. */
static void assert_keras3_config(optim_optimizer *opt, const char *name, double lr, double mom,
                                 int nesterov)
{
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, KERAS3_KEYS, N_KERAS3_KEYS);
    assert_str(c, "name", name);
    assert_num(c, "learning_rate", lr);
    assert_null_key(c, "weight_decay");
    assert_null_key(c, "clipnorm");
    assert_null_key(c, "global_clipnorm");
    assert_null_key(c, "clipvalue");
    assert_bool(c, "use_ema", 0);
    assert_num(c, "ema_momentum", 0.99);
    assert_null_key(c, "ema_overwrite_frequency");
    assert_null_key(c, "loss_scale_factor");
    assert_null_key(c, "gradient_accumulation_steps");
    assert_num(c, "momentum", mom);
    assert_bool(c, "nesterov", nesterov);
    cJSON_Delete(c);
}

static void assert_hyper(optim_optimizer *opt, const char *name, double want)
{
    double v = -12345;
    int rc = optim_get_hyper(opt, name, &v);
    if (rc) print_error("optim_get_hyper(%s): %s\n", name, optim_errmsg(opt));
    assert_ok(rc, opt);
    if (isnan(want)) assert_nan(v);
    else if (v != want) {
        print_error("hyper %s = %.17g, expected %.17g\n", name, v, want);
        fail();
    }
}

/* Each NULL-terminated needle must appear in msg. */
static void assert_msg_has(const char *msg, va_list ap)
{
    const char *needle;
    while ((needle = va_arg(ap, const char *)) != NULL)
        if (!strstr(msg, needle)) {
            print_error("message '%s' lacks '%s'\n", msg, needle);
            fail();
        }
}

/* optim_from_json must fail with code, leave out NULL, and say each needle. */
static void expect_json_fails(const char *json, int code, ...)
{
    optim_optimizer *opt = SENTINEL;
    optim_error err;
    memset(&err, 0, sizeof err);
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) {
        print_error("optim_from_json(%s): rc %d (%s), expected %d (%s); msg '%s'\n", json, rc,
                    optim_strerror(rc), code, optim_strerror(code), err.msg);
        if (rc == OPTIM_OK) optim_destroy(opt);
        fail();
    }
    assert_null(opt);
    assert_int_equal(err.code, code);
    assert_gt(strlen(err.msg), 0);
    va_list ap;
    va_start(ap, code);
    assert_msg_has(err.msg, ap);
    va_end(ap);
    /* Without an optim_error: same code, still NULL. */
    opt = SENTINEL;
    assert_status(optim_from_json(&opt, json, NULL), code, NULL);
    assert_null(opt);
}

/* optim_from_config must fail likewise. */
static void expect_config_fails(const char *class_name, const char *config, int code, ...)
{
    optim_optimizer *opt = SENTINEL;
    optim_error err;
    memset(&err, 0, sizeof err);
    int rc = optim_from_config(&opt, class_name, config, &err);
    if (rc != code) {
        print_error("optim_from_config(%s, %s): rc %d, expected %d; msg '%s'\n",
                    class_name ? class_name : "NULL", config ? config : "NULL", rc, code, err.msg);
        if (rc == OPTIM_OK) optim_destroy(opt);
        fail();
    }
    assert_null(opt);
    assert_int_equal(err.code, code);
    va_list ap;
    va_start(ap, code);
    assert_msg_has(err.msg, ap);
    va_end(ap);
}

/* optim_set_hyper must fail with code, explain (needles), and leave the
 * serialization as it was. */
static void expect_set_fails(optim_optimizer *opt, const char *name, double value, int code, ...)
{
    char *before = serialize(opt);
    int rc = optim_set_hyper(opt, name, value);
    if (rc != code) {
        print_error("optim_set_hyper(%s, %g): rc %d, expected %d; msg '%s'\n", name ? name : "NULL",
                    value, rc, code, optim_errmsg(opt));
        fail();
    }
    const char *msg = optim_errmsg(opt);
    assert_gt(strlen(msg), 0);
    va_list ap;
    va_start(ap, code);
    assert_msg_has(msg, ap);
    va_end(ap);
    char *after = serialize(opt);
    assert_string_equal(after, before);
    optim_free(before);
    optim_free(after);
}

/* ---- Creation ------------------------------------------------------------------- */

OPTIM_TEST(test_from_json_class_and_config)
{
    optim_optimizer *opt = from_json_ok(
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, "
        "\"nesterov\": true}}");
    assert_non_null(optim_class_of(opt));
    assert_string_equal(optim_class_of(opt)->name, "SGD");
    /* Keras 3.15+'s default name (auto_name("SGD")); 3.14 wrote "SGD". */
    assert_string_equal(optim_name(opt), "sgd");
    assert_eq(optim_generation_of(opt), OPTIM_KERAS3);
    assert_eq(optim_iterations(opt), 0);
    assert_hyper(opt, "learning_rate", 0.1);
    assert_hyper(opt, "momentum", 0.9);
    assert_hyper(opt, "nesterov", 1);
    assert_hyper(opt, "clipnorm", NAN);
    assert_keras3_config(opt, "sgd", 0.1, 0.9, 1);
    optim_destroy(opt);
    optim_destroy(NULL); /* no-op */

    /* Without "config": the defaults. Keras 3's serialize_keras_object keys
     * "module" and "registered_name" are accepted. */
    opt = from_json_ok("{\"class_name\": \"SGD\"}");
    assert_keras3_config(opt, "sgd", 0.01, 0.0, 0);
    optim_destroy(opt);
    opt = from_json_ok("{\"module\": \"keras.optimizers\", \"class_name\": \"SGD\", \"config\": "
                       "{\"learning_rate\": 0.25}, \"registered_name\": null}");
    assert_keras3_config(opt, "sgd", 0.25, 0.0, 0);
    optim_destroy(opt);
}

OPTIM_TEST(test_from_json_bare_string)
{
    const char *names[] = {"\"sgd\"", "\"SGD\"", "\"Sgd\"", " \"sGD\" "};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        optim_optimizer *opt = from_json_ok(names[i]);
        assert_string_equal(optim_class_of(opt)->name, "SGD");
        assert_eq(optim_generation_of(opt), OPTIM_KERAS3);
        assert_keras3_config(opt, "sgd", 0.01, 0.0, 0);
        optim_destroy(opt);
    }
}

OPTIM_TEST(test_class_name_case_insensitive)
{
    const char *jsons[] = {
        "{\"class_name\": \"sgd\", \"config\": {\"momentum\": 0.5}}",
        "{\"class_name\": \"Sgd\", \"config\": {\"momentum\": 0.5}}",
        "{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.5}}",
    };
    char *first = NULL;
    for (size_t i = 0; i < sizeof jsons / sizeof *jsons; i++) {
        optim_optimizer *opt = from_json_ok(jsons[i]);
        assert_string_equal(optim_class_of(opt)->name, "SGD");
        char *s = serialize(opt);
        cJSON *root = cJSON_Parse(s);
        assert_non_null(root);
        assert_str(root, "class_name", "SGD"); /* canonical spelling on output */
        cJSON_Delete(root);
        if (!first) first = s;
        else {
            assert_string_equal(s, first);
            optim_free(s);
        }
        optim_destroy(opt);
    }
    optim_free(first);
    assert_ptr_equal(optim_find_class("sgd"), &optim_sgd_class);
    assert_ptr_equal(optim_find_class("sGd"), &optim_sgd_class);
    assert_null(optim_find_class("sgdx"));
    assert_null(optim_find_class(""));
    assert_null(optim_find_class(NULL));
}

OPTIM_TEST(test_create_by_name)
{
    optim_optimizer *opt = SENTINEL;
    optim_error err;
    assert_ok(optim_create_by_name(&opt, "sgd", NULL, &err), &err);
    assert_non_null(opt);
    assert_keras3_config(opt, "sgd", 0.01, 0.0, 0);
    optim_destroy(opt);

    /* Options: legacy generation and a name. */
    optim_options o = optim_options_defaults();
    assert_int_equal(o.size, sizeof(optim_options));
    assert_int_equal(o.generation, OPTIM_KERAS3);
    assert_null(o.name);
    o.generation = OPTIM_LEGACY;
    o.name = "my_sgd";
    assert_ok(optim_create_by_name(&opt, "SGD", &o, &err), &err);
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    assert_string_equal(optim_name(opt), "my_sgd");
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, LEGACY_KEYS, N_LEGACY_KEYS);
    assert_str(c, "name", "my_sgd");
    cJSON_Delete(c);
    optim_destroy(opt);

    /* By class table. */
    assert_ok(optim_create(&opt, &optim_sgd_class, NULL, &err), &err);
    assert_string_equal(optim_name(opt), "sgd");
    optim_destroy(opt);

    /* Unknown and NULL names; a bad options size. */
    opt = SENTINEL;
    assert_status(optim_create_by_name(&opt, "Adamm", NULL, &err), OPTIM_ENOTFOUND, &err);
    assert_null(opt);
    assert_int_equal(err.code, OPTIM_ENOTFOUND);
    assert_contains(err.msg, "Adamm");
    opt = SENTINEL;
    assert_status(optim_create_by_name(&opt, NULL, NULL, &err), OPTIM_ENOTFOUND, &err);
    assert_null(opt);
    o = optim_options_defaults();
    o.size = 4;
    opt = SENTINEL;
    assert_status(optim_create_by_name(&opt, "sgd", &o, &err), OPTIM_EVERSION, &err);
    assert_null(opt);
    o = optim_options_defaults();
    o.generation = (optim_generation)7;
    opt = SENTINEL;
    assert_status(optim_create(&opt, &optim_sgd_class, &o, &err), OPTIM_EINVAL, &err);
    assert_null(opt);
    assert_contains(err.msg, "7");
}

OPTIM_TEST(test_from_config)
{
    optim_optimizer *opt = SENTINEL;
    optim_error err;
    assert_ok(optim_from_config(&opt, "SGD", "{\"momentum\": 0.5, \"name\": \"a\"}", &err), &err);
    assert_keras3_config(opt, "a", 0.01, 0.5, 0);
    optim_destroy(opt);
    assert_ok(optim_from_config(&opt, "sgd", NULL, &err), &err);
    assert_keras3_config(opt, "sgd", 0.01, 0.0, 0);
    optim_destroy(opt);
    assert_ok(optim_from_config(&opt, "Sgd", "{}", &err), &err);
    assert_keras3_config(opt, "sgd", 0.01, 0.0, 0);
    optim_destroy(opt);
    assert_ok(optim_from_config(&opt, "SGD",
                                "{\"learning_rate\": 0.2, \"is_legacy_optimizer\": true}", &err),
              &err);
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    assert_hyper(opt, "learning_rate", 0.2);
    optim_destroy(opt);

    /* get_config fed back through from_config gives the same config. */
    opt = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.3, "
                       "\"momentum\": 0.7, \"clipvalue\": 2}}");
    char *cfg = optim_get_config(opt);
    assert_non_null(cfg);
    optim_optimizer *back;
    assert_ok(optim_from_config(&back, "SGD", cfg, &err), &err);
    char *cfg2 = optim_get_config(back);
    assert_string_equal(cfg2, cfg);
    optim_free(cfg);
    optim_free(cfg2);
    optim_destroy(back);
    optim_destroy(opt);

    expect_config_fails("Nope", "{}", OPTIM_ENOTFOUND, "Nope", NULL);
    expect_config_fails(NULL, "{}", OPTIM_ENOTFOUND, NULL);
    expect_config_fails("SGD", "[1]", OPTIM_ETYPE, "config", "array", "object", NULL);
    expect_config_fails("SGD", "3", OPTIM_ETYPE, "config", NULL);
    expect_config_fails("SGD", "{\"momentum\": ", OPTIM_EPARSE, NULL);
    expect_config_fails("SGD", "{\"momentum\": 3}", OPTIM_ERANGE, "momentum", "3", NULL);
    expect_config_fails("SGD", "{\"moment\": 0.1}", OPTIM_EKEY, "moment", "momentum", NULL);
    assert_status(optim_from_config(NULL, "SGD", "{}", &err), OPTIM_EINVAL, &err);
}

/* ---- get_config key sets and defaults ------------------------------------------------- */

OPTIM_TEST(test_keras3_default_config)
{
    optim_error err;
    optim_optimizer *opt;
    assert_ok(optim_create(&opt, &optim_sgd_class, NULL, &err), &err);
    assert_keras3_config(opt, "sgd", 0.01, 0.0, 0);
    /* The same through serialize. */
    char *s = serialize(opt);
    cJSON *root = cJSON_Parse(s);
    assert_non_null(root);
    /* Keras 3's serialize_keras_object: module, class_name, config, registered_name. */
    const char *top[] = {"module", "class_name", "config", "registered_name"};
    assert_keys_exactly(root, top, 4);
    assert_str(root, "module", "keras.optimizers");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "registered_name")));
    assert_string_equal(root->child->string, "module");
    assert_str(root, "class_name", "SGD");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "config");
    assert_keys_exactly(c, KERAS3_KEYS, N_KERAS3_KEYS);
    cJSON_Delete(root);
    optim_free(s);
    /* The defaults as hyperparameters. */
    assert_hyper(opt, "learning_rate", 0.01);
    assert_hyper(opt, "momentum", 0.0);
    assert_hyper(opt, "nesterov", 0.0);
    assert_hyper(opt, "ema_momentum", 0.99);
    assert_hyper(opt, "use_ema", 0.0);
    assert_hyper(opt, "weight_decay", NAN);
    assert_hyper(opt, "clipnorm", NAN);
    assert_hyper(opt, "global_clipnorm", NAN);
    assert_hyper(opt, "clipvalue", NAN);
    assert_hyper(opt, "ema_overwrite_frequency", NAN);
    assert_hyper(opt, "loss_scale_factor", NAN);
    assert_hyper(opt, "gradient_accumulation_steps", NAN);
    optim_destroy(opt);
}

OPTIM_TEST(test_legacy_default_config)
{
    optim_optimizer *opt =
        from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true}}");
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, LEGACY_KEYS, N_LEGACY_KEYS);
    assert_str(c, "name", "SGD");
    assert_num(c, "learning_rate", 0.01);
    assert_num(c, "decay", 0.0);
    assert_num(c, "momentum", 0.0);
    assert_bool(c, "nesterov", 0);
    /* OptimizerV2's constructor refuses is_legacy_optimizer: never written. */
    assert_null(cJSON_GetObjectItemCaseSensitive(c, "is_legacy_optimizer"));
    cJSON_Delete(c);
    assert_hyper(opt, "decay", 0.0);
    optim_destroy(opt);

    /* The config tf.keras writes for legacy SGD(0.05, momentum=0.9). */
    opt = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"name\": \"SGD\", "
                       "\"learning_rate\": 0.05, \"decay\": 0.0, \"momentum\": 0.9, "
                       "\"nesterov\": false, \"is_legacy_optimizer\": true}}");
    c = config_of(opt);
    assert_keys_exactly(c, LEGACY_KEYS, N_LEGACY_KEYS);
    assert_num(c, "learning_rate", 0.05);
    assert_num(c, "momentum", 0.9);
    cJSON_Delete(c);
    optim_destroy(opt);
}

OPTIM_TEST(test_legacy_clip_keys_only_when_set)
{
    static const struct {
        const char *json_extra;
        const char *keys[3];
        double values[3];
    } cases[] = {
        {"\"clipnorm\": 1.5", {"clipnorm"}, {1.5}},
        {"\"clipvalue\": 0.25", {"clipvalue"}, {0.25}},
        {"\"global_clipnorm\": 3", {"global_clipnorm"}, {3}},
        /* OptimizerV2 allows clipnorm with clipvalue (not with global_clipnorm). */
        {"\"clipnorm\": 2, \"clipvalue\": 0.5", {"clipnorm", "clipvalue"}, {2, 0.5}},
        {"\"global_clipnorm\": 2, \"clipvalue\": 0.5", {"global_clipnorm", "clipvalue"}, {2, 0.5}},
        /* null means unset: not written. */
        {"\"clipnorm\": null", {0}, {0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char json[256];
        snprintf(json, sizeof json,
                 "{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true, %s}}",
                 cases[k].json_extra);
        optim_optimizer *opt = from_json_ok(json);
        const char *want[N_LEGACY_KEYS + 3];
        size_t n = 0;
        for (size_t i = 0; i < N_LEGACY_KEYS; i++) want[n++] = LEGACY_KEYS[i];
        for (size_t i = 0; i < 3 && cases[k].keys[i]; i++) want[n++] = cases[k].keys[i];
        cJSON *c = config_of(opt);
        assert_keys_exactly(c, want, n);
        for (size_t i = 0; i < 3 && cases[k].keys[i]; i++)
            assert_num(c, cases[k].keys[i], cases[k].values[i]);
        cJSON_Delete(c);

        /* Setting clipnorm to None (NAN) removes it again. */
        if (cases[k].keys[0] && strcmp(cases[k].keys[0], "clipnorm") == 0) {
            assert_ok(optim_set_hyper(opt, "clipnorm", NAN), opt);
            c = config_of(opt);
            assert_null(cJSON_GetObjectItemCaseSensitive(c, "clipnorm"));
            cJSON_Delete(c);
        }
        optim_destroy(opt);
    }
}

OPTIM_TEST(test_keras3_config_values)
{
    optim_optimizer *opt = from_json_ok(
        "{\"class_name\": \"SGD\", \"config\": {\"name\": \"trainer\", \"learning_rate\": 0.125, "
        "\"weight_decay\": 0, \"clipvalue\": 0.5, \"momentum\": 0.95, \"nesterov\": true, "
        "\"ema_momentum\": 0.9}}");
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, KERAS3_KEYS, N_KERAS3_KEYS);
    assert_str(c, "name", "trainer");
    assert_num(c, "learning_rate", 0.125);
    assert_num(c, "weight_decay", 0);
    assert_null_key(c, "clipnorm");
    assert_null_key(c, "global_clipnorm");
    assert_num(c, "clipvalue", 0.5);
    assert_num(c, "ema_momentum", 0.9);
    assert_num(c, "momentum", 0.95);
    assert_bool(c, "nesterov", 1);
    cJSON_Delete(c);
    assert_string_equal(optim_name(opt), "trainer");
    optim_destroy(opt);
}

/* ---- Round trips ----------------------------------------------------------------------- */

OPTIM_TEST(test_round_trip)
{
    const char *configs[] = {
        "\"sgd\"",
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, "
        "\"nesterov\": true, \"clipnorm\": 1.5, \"name\": \"opt1\"}}",
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.3333333333333333, "
        "\"global_clipnorm\": 0.1}}",
        "{\"class_name\": \"SGD\", \"config\": {\"clipvalue\": 1e-3, \"weight_decay\": 0, "
        "\"ema_momentum\": 0.5, \"momentum\": 1}}",
        "{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true, \"lr\": 0.2, "
        "\"decay\": 0.01, \"momentum\": 0.5, \"nesterov\": true, \"clipnorm\": 1, "
        "\"clipvalue\": 0.5, \"name\": \"legacy\"}}",
        "{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true, "
        "\"global_clipnorm\": 7.25, \"learning_rate\": 1e-5}}",
    };
    for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
        optim_optimizer *a = from_json_ok(configs[k]);
        char *sa = serialize(a);
        optim_optimizer *b = from_json_ok(sa);
        char *sb = serialize(b);
        assert_string_equal(sb, sa);
        assert_eq(optim_generation_of(b), optim_generation_of(a));
        assert_string_equal(optim_name(b), optim_name(a));
        const char *hypers[] = {"learning_rate", "momentum",        "nesterov",
                                "clipnorm",      "global_clipnorm", "clipvalue"};
        for (size_t h = 0; h < sizeof hypers / sizeof *hypers; h++) {
            double va, vb;
            assert_ok(optim_get_hyper(a, hypers[h], &va), a);
            assert_ok(optim_get_hyper(b, hypers[h], &vb), b);
            assert_same(va, vb);
        }
        optim_free(sa);
        optim_free(sb);
        optim_destroy(a);
        optim_destroy(b);
    }
    /* Values survive exactly, all 17 digits. */
    optim_optimizer *a = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": "
                                      "0.3333333333333333}}");
    assert_hyper(a, "learning_rate", 1.0 / 3.0);
    optim_destroy(a);
}

OPTIM_TEST(test_set_hyper_reflected_in_config)
{
    optim_optimizer *opt = from_json_ok("\"sgd\"");
    assert_ok(optim_set_hyper(opt, "learning_rate", 0.05), opt);
    assert_ok(optim_set_hyper(opt, "momentum", 0.8), opt);
    assert_ok(optim_set_hyper(opt, "nesterov", 1), opt);
    assert_ok(optim_set_hyper(opt, "clipnorm", 2.5), opt);
    assert_string_equal(optim_errmsg(opt), "");
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, KERAS3_KEYS, N_KERAS3_KEYS);
    assert_num(c, "learning_rate", 0.05);
    assert_num(c, "momentum", 0.8);
    assert_bool(c, "nesterov", 1);
    assert_num(c, "clipnorm", 2.5);
    cJSON_Delete(c);
    assert_hyper(opt, "learning_rate", 0.05);
    assert_hyper(opt, "momentum", 0.8);
    assert_hyper(opt, "nesterov", 1);
    assert_hyper(opt, "clipnorm", 2.5);
    assert_eq(optim_hyper_is_constant(opt, "learning_rate"), 1);
    assert_eq(optim_hyper_is_constant(opt, "clipnorm"), 1);
    assert_eq(optim_hyper_is_constant(opt, "no_such"), 0);

    /* NAN is None for nullable options; then another clip option may be set. */
    assert_ok(optim_set_hyper(opt, "clipnorm", NAN), opt);
    assert_hyper(opt, "clipnorm", NAN);
    assert_ok(optim_set_hyper(opt, "global_clipnorm", 4), opt);
    c = config_of(opt);
    assert_null_key(c, "clipnorm");
    assert_num(c, "global_clipnorm", 4);
    cJSON_Delete(c);

    /* get_hyper errors. */
    double v = 123;
    assert_status(optim_get_hyper(opt, "no_such", &v), OPTIM_EKEY, opt);
    assert_contains(optim_errmsg(opt), "no_such");
    assert_eq(v, 123);
    assert_status(optim_get_hyper(opt, "decay", &v), OPTIM_EKEY, opt); /* legacy-only */
    assert_contains(optim_errmsg(opt), "decay");
    assert_status(optim_get_hyper(opt, "learning_rate", NULL), OPTIM_EINVAL, opt);
    assert_status(optim_get_hyper(opt, NULL, &v), OPTIM_EINVAL, opt);
    optim_destroy(opt);

    /* Legacy: decay is settable and written. */
    opt = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true}}");
    assert_ok(optim_set_hyper(opt, "decay", 0.001), opt);
    assert_ok(optim_set_hyper(opt, "learning_rate", 0.5), opt);
    assert_ok(optim_set_hyper(opt, "clipvalue", 3), opt);
    c = config_of(opt);
    const char *want[N_LEGACY_KEYS + 1];
    for (size_t i = 0; i < N_LEGACY_KEYS; i++) want[i] = LEGACY_KEYS[i];
    want[N_LEGACY_KEYS] = "clipvalue";
    assert_keys_exactly(c, want, N_LEGACY_KEYS + 1);
    assert_num(c, "decay", 0.001);
    assert_num(c, "learning_rate", 0.5);
    assert_num(c, "clipvalue", 3);
    cJSON_Delete(c);
    assert_status(optim_get_hyper(opt, "weight_decay", &v), OPTIM_EKEY, opt); /* Keras 3 only */
    optim_destroy(opt);
}

OPTIM_TEST(test_legacy_lr_alias)
{
    optim_optimizer *opt = from_json_ok(
        "{\"class_name\": \"SGD\", \"config\": {\"lr\": 0.3, \"is_legacy_optimizer\": true}}");
    assert_hyper(opt, "learning_rate", 0.3);
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, LEGACY_KEYS, N_LEGACY_KEYS); /* written as learning_rate */
    assert_num(c, "learning_rate", 0.3);
    assert_null(cJSON_GetObjectItemCaseSensitive(c, "lr"));
    cJSON_Delete(c);
    optim_destroy(opt);
    /* "is_legacy_optimizer" after "lr" works too. */
    opt = from_json_ok(
        "{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true, \"lr\": 0.4}}");
    assert_hyper(opt, "learning_rate", 0.4);
    optim_destroy(opt);
    /* Keras 3 has no "lr" (and without is_legacy_optimizer, "lr" says legacy). */
    expect_json_fails(
        "{\"class_name\": \"SGD\", \"config\": {\"lr\": 0.3, \"is_legacy_optimizer\": "
        "false}}",
        OPTIM_EKEY, "'lr'", NULL);
    opt = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"lr\": 0.3}}");
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    assert_hyper(opt, "learning_rate", 0.3);
    optim_destroy(opt);
}

OPTIM_TEST(test_name_kept)
{
    optim_optimizer *opt =
        from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"name\": \"head/opt\"}}");
    assert_string_equal(optim_name(opt), "head/opt");
    assert_keras3_config(opt, "head/opt", 0.01, 0.0, 0);
    optim_destroy(opt);
    opt = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"name\": \"old\", "
                       "\"is_legacy_optimizer\": true}}");
    assert_string_equal(optim_name(opt), "old");
    cJSON *c = config_of(opt);
    assert_str(c, "name", "old");
    cJSON_Delete(c);
    optim_destroy(opt);
}

/* The Keras 2.11-2.15 "new" optimizer's config (tf.keras.optimizers.SGD):
 * Keras 3 keys minus the newest, plus jit_compile and is_legacy_optimizer
 * false; learning_rate as the float32 value it held. */
OPTIM_TEST(test_keras_2_11_config_accepted)
{
    optim_optimizer *opt = from_json_ok(
        "{\"class_name\": \"SGD\", \"config\": {\"name\": \"SGD\", \"weight_decay\": null, "
        "\"clipnorm\": null, \"global_clipnorm\": null, \"clipvalue\": null, \"use_ema\": false, "
        "\"ema_momentum\": 0.99, \"ema_overwrite_frequency\": null, \"jit_compile\": false, "
        "\"is_legacy_optimizer\": false, \"learning_rate\": 0.009999999776482582, "
        "\"momentum\": 0.9, \"nesterov\": false}}");
    assert_eq(optim_generation_of(opt), OPTIM_KERAS3);
    assert_hyper(opt, "learning_rate", 0.009999999776482582);
    /* Written back as tf-keras writes it (tf_keras/optimizers/optimizer.py:
     * no loss_scale_factor, gradient_accumulation_steps; learning_rate after
     * is_legacy_optimizer). Key order: tests/test_keras_fixtures.c. */
    static const char *const tfk_keys[] = {
        "name",          "weight_decay",
        "clipnorm",      "global_clipnorm",
        "clipvalue",     "use_ema",
        "ema_momentum",  "ema_overwrite_frequency",
        "jit_compile",   "is_legacy_optimizer",
        "learning_rate", "momentum",
        "nesterov",
    };
    cJSON *c = config_of(opt);
    assert_keys_exactly(c, tfk_keys, sizeof tfk_keys / sizeof *tfk_keys);
    assert_bool(c, "jit_compile", 0);
    assert_bool(c, "is_legacy_optimizer", 0);
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(c, "learning_rate");
    assert_true(cJSON_IsNumber(lr));
    assert_close(lr->valuedouble, 0.009999999776482582, 1e-15, 0);
    assert_num(c, "momentum", 0.9);
    assert_bool(c, "nesterov", 0);
    assert_num(c, "ema_momentum", 0.99);
    assert_null_key(c, "weight_decay");
    cJSON_Delete(c);
    optim_destroy(opt);
    opt = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"jit_compile\": true, "
                       "\"is_legacy_optimizer\": false}}");
    /* tf-keras's defaults: the class name as name; Keras 3's rules. */
    char *text = optim_serialize(opt);
    assert_string_equal(
        text,
        "{\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\",\"weight_decay\":null,"
        "\"clipnorm\":null,\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,"
        "\"ema_momentum\":0.99,\"ema_overwrite_frequency\":null,\"jit_compile\":true,"
        "\"is_legacy_optimizer\":false,\"learning_rate\":0.01,\"momentum\":0.0,"
        "\"nesterov\":false}}");
    optim_free(text);
    /* A key tf-keras has no place for: Keras 3's form. */
    assert_ok(optim_set_hyper(opt, "gradient_accumulation_steps", 2), opt);
    text = optim_serialize(opt);
    assert_non_null(strstr(
        text,
        "{\"module\":\"keras.optimizers\",\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\","
        "\"learning_rate\":0.01,"));
    assert_null(strstr(text, "jit_compile"));
    optim_free(text);
    optim_destroy(opt);
    /* TF 2.11-2.12 name the class as registered: "Custom>SGD". */
    opt = from_json_ok("{\"class_name\": \"Custom>SGD\", \"config\": {\"momentum\": 0.5}}");
    assert_eq(optim_generation_of(opt), OPTIM_KERAS3);
    text = optim_serialize(opt);
    assert_non_null(strstr(
        text,
        "{\"class_name\":\"Custom>SGD\",\"config\":{\"name\":\"SGD\",\"weight_decay\":null,"));
    assert_non_null(
        strstr(text,
               "\"jit_compile\":true,\"is_legacy_optimizer\":false,\"learning_rate\":0.01,"
               "\"momentum\":0.5,"));
    optim_free(text);
    optim_destroy(opt);
    expect_json_fails("{\"class_name\": \"Custom>Bogus\", \"config\": {}}", OPTIM_ENOTFOUND,
                      "Custom>Bogus", NULL);
}

/* ---- Bad configs ----------------------------------------------------------------------------- */

#define J(cfg) "{\"class_name\": \"SGD\", \"config\": " cfg "}"

OPTIM_TEST(test_bad_class_and_keys)
{
    expect_json_fails("{\"class_name\": \"Nope\", \"config\": {}}", OPTIM_ENOTFOUND, "'Nope'",
                      NULL);
    expect_json_fails("\"nope\"", OPTIM_ENOTFOUND, "'nope'", NULL);
    expect_json_fails("\"\"", OPTIM_ENOTFOUND, NULL);
    /* Unknown key: named, with the allowed keys listed. */
    expect_json_fails(J("{\"learnin_rate\": 0.1}"), OPTIM_EKEY, "'learnin_rate'", "learning_rate",
                      "momentum", "nesterov", "clipnorm", "ema_momentum", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"foo\": 1}"), OPTIM_EKEY, "'foo'",
                      "learning_rate", "decay", "momentum", NULL);
    /* The other generation's keys. */
    /* A mix reads as Keras 3, which names each side's keys. */
    expect_json_fails(J("{\"lr\": 0.01, \"use_ema\": false}"), OPTIM_EKEY, "'lr'",
                      "legacy-only keys here: lr", "Keras 3-only keys here: use_ema", NULL);
    expect_json_fails(J("{\"lr\": 0.01, \"is_legacy_optimizer\": false}"), OPTIM_EKEY, "'lr'",
                      "legacy-only keys here: lr", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"weight_decay\": null}"), OPTIM_EKEY,
                      "'weight_decay'", "generation", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"use_ema\": false}"), OPTIM_EKEY,
                      "'use_ema'", NULL);
    /* Unknown top-level key. */
    expect_json_fails("{\"class_name\": \"SGD\", \"config\": {}, \"extra\": 1}", OPTIM_EKEY,
                      "'extra'", NULL);
}

OPTIM_TEST(test_bad_value_types)
{
    expect_json_fails(J("{\"learning_rate\": \"0.1\"}"), OPTIM_ETYPE, "learning_rate", "string",
                      "number", NULL);
    expect_json_fails(J("{\"learning_rate\": null}"), OPTIM_ETYPE, "learning_rate", "null", NULL);
    expect_json_fails(J("{\"learning_rate\": [0.1]}"), OPTIM_ETYPE, "learning_rate", "array", NULL);
    expect_json_fails(J("{\"nesterov\": 1}"), OPTIM_ETYPE, "nesterov", "number", "true or false",
                      NULL);
    expect_json_fails(J("{\"momentum\": true}"), OPTIM_ETYPE, "momentum", "boolean", "number",
                      NULL);
    expect_json_fails(J("{\"clipnorm\": \"1\"}"), OPTIM_ETYPE, "clipnorm", "string", NULL);
    expect_json_fails(J("{\"use_ema\": 0}"), OPTIM_ETYPE, "use_ema", NULL);
    expect_json_fails(J("{\"gradient_accumulation_steps\": 2.5}"), OPTIM_ETYPE,
                      "gradient_accumulation_steps", "integer", NULL);
    expect_json_fails(J("{\"name\": 5}"), OPTIM_ETYPE, "name", "string", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": \"yes\"}"), OPTIM_ETYPE, "is_legacy_optimizer",
                      "string", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": 1}"), OPTIM_ETYPE, "is_legacy_optimizer", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"nesterov\": \"false\"}"), OPTIM_ETYPE,
                      "nesterov", NULL);
}

OPTIM_TEST(test_bad_value_ranges)
{
    expect_json_fails(J("{\"learning_rate\": -0.5}"), OPTIM_ERANGE, "learning_rate", "-0.5", NULL);
    expect_json_fails(J("{\"learning_rate\": 1e999}"), OPTIM_ERANGE, "learning_rate", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"learning_rate\": -1}"), OPTIM_ERANGE,
                      "learning_rate", "-1", NULL);
    expect_json_fails(J("{\"momentum\": 1.5}"), OPTIM_ERANGE, "momentum", "1.5", NULL);
    expect_json_fails(J("{\"momentum\": -0.1}"), OPTIM_ERANGE, "momentum", "-0.1", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"momentum\": 2}"), OPTIM_ERANGE,
                      "momentum", NULL);
    expect_json_fails(J("{\"clipnorm\": -1}"), OPTIM_ERANGE, "clipnorm", "-1", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"clipnorm\": -1}"), OPTIM_ERANGE,
                      "clipnorm", NULL);
    expect_json_fails(J("{\"global_clipnorm\": -2}"), OPTIM_ERANGE, "global_clipnorm", NULL);
    expect_json_fails(J("{\"clipvalue\": -0.5}"), OPTIM_ERANGE, "clipvalue", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"decay\": -0.1}"), OPTIM_ERANGE, "decay",
                      NULL);
    expect_json_fails(J("{\"use_ema\": true, \"ema_momentum\": -0.5}"), OPTIM_ERANGE,
                      "ema_momentum", NULL);
}

OPTIM_TEST(test_bad_clip_combinations)
{
    expect_json_fails(J("{\"clipnorm\": 1, \"global_clipnorm\": 1}"), OPTIM_EINVAL, "clipnorm",
                      "global_clipnorm", NULL);
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"clipnorm\": 1, \"global_clipnorm\": 1}"),
                      OPTIM_EINVAL, "clipnorm", "global_clipnorm", NULL);
    expect_json_fails(J("{\"clipnorm\": 1, \"clipvalue\": 1}"), OPTIM_EINVAL, "clipnorm",
                      "clipvalue", NULL);
    expect_json_fails(J("{\"global_clipnorm\": 1, \"clipvalue\": 1}"), OPTIM_EINVAL,
                      "global_clipnorm", "clipvalue", NULL);
}

OPTIM_TEST(test_bad_json_shapes)
{
    expect_json_fails("{\"class_name\": \"SGD\", \"config\": {", OPTIM_EPARSE, "malformed", NULL);
    expect_json_fails("", OPTIM_EPARSE, NULL);
    expect_json_fails("{\"class_name\": \"SGD\"} trailing", OPTIM_EPARSE, NULL);
    expect_json_fails("{'class_name': 'SGD'}", OPTIM_EPARSE, NULL);
    expect_json_fails("42", OPTIM_ETYPE, "number", "object", NULL);
    expect_json_fails("[\"SGD\", {}]", OPTIM_ETYPE, "array", "object", NULL);
    expect_json_fails("null", OPTIM_ETYPE, NULL);
    expect_json_fails("true", OPTIM_ETYPE, NULL);
    /* config not an object. */
    expect_json_fails(J("[1]"), OPTIM_ETYPE, "config", "array", "object", NULL);
    expect_json_fails(J("0.1"), OPTIM_ETYPE, "config", "number", NULL);
    expect_json_fails(J("\"lr=0.1\""), OPTIM_ETYPE, "config", "string", NULL);
    expect_json_fails(J("null"), OPTIM_ETYPE, "config", NULL);
    /* class_name missing or not a string. */
    expect_json_fails("{\"config\": {}}", OPTIM_EKEY, "class_name", "missing", NULL);
    expect_json_fails("{\"class_name\": 3, \"config\": {}}", OPTIM_ETYPE, "class_name", NULL);
    expect_json_fails("{\"class_name\": null, \"config\": {}}", OPTIM_ETYPE, "class_name", NULL);
    /* A duplicated config key. */
    expect_json_fails(J("{\"learning_rate\": 0.1, \"learning_rate\": 0.2}"), OPTIM_EPARSE,
                      "'learning_rate'", NULL);
    expect_json_fails(J("{\"momentum\": 0.1, \"nesterov\": true, \"momentum\": 0.1}"), OPTIM_EPARSE,
                      "'momentum'", NULL);
    /* NULL arguments. */
    optim_error err;
    optim_optimizer *opt = SENTINEL;
    assert_status(optim_from_json(&opt, NULL, &err), OPTIM_EINVAL, &err);
    assert_null(opt);
    assert_status(optim_from_json(NULL, "\"sgd\"", &err), OPTIM_EINVAL, &err);
}

/* "is_legacy_optimizer" and "name" given twice are as ambiguous as any other
 * key (Python's json keeps the last one; cJSON's lookup finds the first), so
 * they are refused like other duplicates. */
OPTIM_TEST(test_duplicate_is_legacy_optimizer)
{
    expect_json_fails(J("{\"is_legacy_optimizer\": true, \"is_legacy_optimizer\": false}"),
                      OPTIM_EPARSE, "'is_legacy_optimizer'", NULL);
}

OPTIM_TEST(test_duplicate_name)
{
    expect_json_fails(J("{\"name\": \"a\", \"name\": \"b\"}"), OPTIM_EPARSE, "'name'", NULL);
}

/* Legacy "lr" with "learning_rate": tf.keras's OptimizerV2.from_config lets
 * "lr" win whatever the order. Either refuse the pair, or let lr win in both
 * orders; never depend on the key order. */
OPTIM_TEST(test_legacy_lr_and_learning_rate)
{
    const char *jsons[] = {
        J("{\"is_legacy_optimizer\": true, \"learning_rate\": 0.1, \"lr\": 0.2}"),
        J("{\"is_legacy_optimizer\": true, \"lr\": 0.2, \"learning_rate\": 0.1}"),
    };
    for (size_t i = 0; i < 2; i++) {
        optim_optimizer *opt = SENTINEL;
        optim_error err;
        int rc = optim_from_json(&opt, jsons[i], &err);
        if (rc != OPTIM_OK) {
            assert_null(opt);
            assert_contains(err.msg, "lr");
            continue;
        }
        double lr = 0;
        assert_ok(optim_get_hyper(opt, "learning_rate", &lr), opt);
        optim_destroy(opt);
        if (lr != 0.2) {
            print_error("%s: accepted with learning_rate %g; Keras uses lr (0.2)\n", jsons[i], lr);
            fail();
        }
    }
}

/* Numbers in get_config / serialize parse back to the very same double.
 * Keras writes float32 values (a tf.Variable's) such as 0.009999999776482582
 * (float32 0.01); 15 significant digits are not enough for them. */
OPTIM_TEST(test_config_numbers_exact)
{
    static const struct {
        const char *key;
        double value;
    } cases[] = {
        {"learning_rate", 0.009999999776482582}, /* (double)0.01f */
        {"momentum", 0.89999997615814209}, /* (double)0.9f */
        {"ema_momentum", 0.99000000953674316}, /* (double)0.99f */
        {"clipnorm", 9.9999997473787516e-05}, /* (double)1e-4f */
        {"learning_rate", 0.1 + 0.2}, /* 0.30000000000000004 */
        {"learning_rate", 1.0 / 3.0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char json[256];
        snprintf(json, sizeof json, J("{\"%s\": %.17g}"), cases[k].key, cases[k].value);
        optim_optimizer *opt = from_json_ok(json);
        assert_hyper(opt, cases[k].key, cases[k].value);
        cJSON *c = config_of(opt);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, cases[k].key);
        int exact = cJSON_IsNumber(v) && v->valuedouble == cases[k].value;
        cJSON_Delete(c);
        if (!exact) {
            char *text = optim_get_config(opt);
            print_error("%s %.17g written as %s\n", cases[k].key, cases[k].value, text);
            optim_free(text);
            optim_destroy(opt);
            fail();
        }
        char *s = serialize(opt);
        optim_optimizer *back = from_json_ok(s);
        optim_free(s);
        assert_hyper(back, cases[k].key, cases[k].value);
        optim_destroy(back);
        optim_destroy(opt);
    }
}

/* Numbers are written in the form they were given in (Keras keeps the
 * Python int or float), defaults in Keras's: whole floats keep their
 * decimal point (Keras 3 requires float momentum). Keras 3 holds the
 * learning rate in a float variable: always a float. Legacy key order
 * follows OptimizerV2.get_config: name, clip options, then the class's. */
OPTIM_TEST(test_config_text_form)
{
    optim_optimizer *opt =
        from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1}}");
    char *text = optim_get_config(opt);
    assert_contains(text, "\"learning_rate\":1.0,");
    assert_contains(text, "\"momentum\":0.0,");
    assert_contains(text, "\"nesterov\":false");
    assert_contains(text, "\"ema_momentum\":0.99,");
    optim_free(text);
    optim_destroy(opt);
    opt = from_json_ok("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1e-5, "
                       "\"clipvalue\": 2, \"clipnorm\": 3.0, \"is_legacy_optimizer\": true}}");
    text = optim_get_config(opt);
    assert_string_equal(text,
                        "{\"name\":\"SGD\",\"clipnorm\":3.0,\"clipvalue\":2,"
                        "\"learning_rate\":1e-05,\"decay\":0.0,\"momentum\":0.0,"
                        "\"nesterov\":false}");
    optim_free(text);
    optim_destroy(opt);
    /* Legacy keeps an int learning rate and decay (OptimizerV2's _hyper
     * holds the Python value until the first step); set from C, a float. */
    opt =
        from_json_ok("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 1, \"decay\": 0, "
                     "\"beta_1\": 0.5, \"epsilon\": 1, \"is_legacy_optimizer\": true}}");
    text = optim_get_config(opt);
    assert_contains(
        text, "\"learning_rate\":1,\"decay\":0,\"beta_1\":0.5,\"beta_2\":0.999,\"epsilon\":1,");
    optim_free(text);
    assert_ok(optim_set_hyper(opt, "learning_rate", 2), opt);
    text = optim_get_config(opt);
    assert_contains(text, "\"learning_rate\":2.0,\"decay\":0,");
    optim_free(text);
    optim_destroy(opt);
}

/* Keras 3's base options load (their behaviour: tests/test_keras3_options.c)
 * and are range-checked. */
OPTIM_TEST(test_not_yet_supported_options)
{
    expect_json_fails(J("{\"weight_decay\": -0.1}"), OPTIM_ERANGE, "weight_decay", "-0.1", NULL);
    expect_json_fails(J("{\"gradient_accumulation_steps\": 1}"), OPTIM_ERANGE,
                      "gradient_accumulation_steps", NULL);
    expect_json_fails(J("{\"use_ema\": true, \"ema_momentum\": 1.5}"), OPTIM_ERANGE, "ema_momentum",
                      NULL);
    optim_optimizer *opt =
        from_json_ok(J("{\"weight_decay\": 0, \"use_ema\": true, "
                       "\"ema_overwrite_frequency\": 10, \"loss_scale_factor\": 128, "
                       "\"gradient_accumulation_steps\": 4}"));
    optim_destroy(opt);
}

/* ---- set_hyper failures leave the optimizer as it was --------------------------------------------- */

OPTIM_TEST(test_set_hyper_bad_values_change_nothing)
{
    optim_optimizer *opt = from_json_ok(J("{\"learning_rate\": 0.1, \"momentum\": 0.9, "
                                          "\"clipnorm\": 1.0, \"name\": \"keep\"}"));
    expect_set_fails(opt, "learning_rate", -0.1, OPTIM_ERANGE, "learning_rate", "-0.1", NULL);
    expect_set_fails(opt, "learning_rate", NAN, OPTIM_ERANGE, "learning_rate", NULL);
    expect_set_fails(opt, "learning_rate", INFINITY, OPTIM_ERANGE, "learning_rate", NULL);
    expect_set_fails(opt, "momentum", 1.01, OPTIM_ERANGE, "momentum", "1.01", NULL);
    expect_set_fails(opt, "nesterov", 0.5, OPTIM_ETYPE, "nesterov", "0.5", NULL);
    expect_set_fails(opt, "lerning_rate", 0.1, OPTIM_EKEY, "lerning_rate", NULL);
    expect_set_fails(opt, "decay", 0.1, OPTIM_EKEY, "decay", NULL);
    expect_set_fails(opt, NULL, 0.1, OPTIM_EINVAL, NULL);
    expect_set_fails(opt, "global_clipnorm", 1.0, OPTIM_EINVAL, "clipnorm", "global_clipnorm",
                     NULL);
    expect_set_fails(opt, "clipvalue", 1.0, OPTIM_EINVAL, "clipvalue", NULL);
    expect_set_fails(opt, "weight_decay", -0.1, OPTIM_ERANGE, "weight_decay", NULL);
    expect_set_fails(opt, "clipnorm", -3, OPTIM_ERANGE, "clipnorm", NULL);
    assert_hyper(opt, "learning_rate", 0.1);
    assert_hyper(opt, "momentum", 0.9);
    assert_hyper(opt, "clipnorm", 1.0);
    assert_hyper(opt, "global_clipnorm", NAN);
    /* A success afterwards clears the message. */
    assert_ok(optim_set_hyper(opt, "learning_rate", 0.2), opt);
    assert_string_equal(optim_errmsg(opt), "");
    optim_destroy(opt);

    /* Legacy: clipnorm with global_clipnorm is refused, clipvalue allowed. */
    opt = from_json_ok(J("{\"is_legacy_optimizer\": true, \"clipnorm\": 2}"));
    expect_set_fails(opt, "global_clipnorm", 1.0, OPTIM_EINVAL, "clipnorm", "global_clipnorm",
                     NULL);
    expect_set_fails(opt, "use_ema", 1, OPTIM_EKEY, "use_ema", NULL);
    expect_set_fails(opt, "decay", -1, OPTIM_ERANGE, "decay", NULL);
    assert_ok(optim_set_hyper(opt, "clipvalue", 1.0), opt);
    optim_destroy(opt);
}

/* ---- Registry ----------------------------------------------------------------------------------------- */

/* A small user class: w -= lr * scale * g. */
static const optim_param scaled_params[] = {
    {"scale", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 1.0, 0.0, 10.0},
};

typedef struct scaled_coef {
    double step;
} scaled_coef;

static void scaled_prepare(optim_optimizer *o, optim_dtype dt, void *c)
{
    double s = optim_learning_rate(o, dt) * optim_param_value(o, 0);
    ((scaled_coef *)c)->step = dt == OPTIM_F32 ? (double)(float)s : s;
}

static void scaled_apply_dense(const optim_dense_update *u)
{
    const scaled_coef *c = u->coef;
    if (u->dtype == OPTIM_F32) {
        float *w = u->param;
        const float *g = u->grad;
        for (int64_t i = 0; i < u->count; i++) w[i] -= (float)c->step * g[i];
    } else {
        double *w = u->param;
        const double *g = u->grad;
        for (int64_t i = 0; i < u->count; i++) w[i] -= c->step * g[i];
    }
}

static optim_class scaled_class(const char *name)
{
    optim_class c;
    memset(&c, 0, sizeof c);
    c.size = sizeof(optim_class);
    c.version = OPTIM_CLASS_VERSION;
    c.name = name;
    c.flags = OPTIM_CLASS_ELEMENTWISE;
    c.default_learning_rate = 0.5;
    c.params = scaled_params;
    c.n_params = 1;
    c.coef_size = sizeof(scaled_coef);
    c.prepare = scaled_prepare;
    c.apply_dense = scaled_apply_dense;
    return c;
}

static void expect_register_fails(const optim_class *cls, int code, const char *needle)
{
    optim_error err;
    memset(&err, 0, sizeof err);
    int rc = optim_register_class(cls, &err);
    if (rc != code) {
        print_error("optim_register_class: rc %d, expected %d; msg '%s'\n", rc, code, err.msg);
        fail();
    }
    assert_int_equal(err.code, code);
    if (needle && !strstr(err.msg, needle)) {
        print_error("message '%s' lacks '%s'\n", err.msg, needle);
        fail();
    }
    assert_status(optim_register_class(cls, NULL), code, NULL);
}

OPTIM_TEST(test_register_user_class)
{
    optim_class cls = scaled_class("TestScaledSGD");
    optim_error err;
    assert_null(optim_find_class("TestScaledSGD"));
    assert_ok(optim_register_class(&cls, &err), &err);
    assert_int_equal(err.code, OPTIM_OK);
    cls.name = "Clobbered"; /* the table was copied */
    const optim_class *found = optim_find_class("testscaledsgd");
    assert_non_null(found);
    assert_string_equal(found->name, "TestScaledSGD");

    /* Creatable from JSON, with its own key. */
    optim_optimizer *opt = from_json_ok(
        "{\"class_name\": \"TestScaledSGD\", \"config\": {\"learning_rate\": 0.25, \"scale\": 2}}");
    assert_string_equal(optim_name(opt), "test_scaled_sgd");
    cJSON *c = config_of(opt);
    const char *keys[N_KERAS3_KEYS];
    size_t n = 0;
    for (size_t i = 0; i < N_KERAS3_KEYS; i++)
        if (strcmp(KERAS3_KEYS[i], "momentum") && strcmp(KERAS3_KEYS[i], "nesterov"))
            keys[n++] = KERAS3_KEYS[i];
    keys[n++] = "scale";
    assert_keys_exactly(c, keys, n);
    assert_num(c, "learning_rate", 0.25);
    assert_num(c, "scale", 2);
    cJSON_Delete(c);
    /* And it steps: w = 1 - 0.25 * 2 * 0.5 = 0.75. */
    double w0[2] = {1.0, -1.0}, g[2] = {0.5, -2.0};
    int64_t shape[1] = {2};
    optim_var *v;
    assert_ok(optim_var_create(&v, "w", OPTIM_F64, 1, shape, w0, &err), &err);
    optim_grad_var pair = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, shape)), v};
    assert_ok(optim_apply_gradients(opt, &pair, 1, 0), opt);
    assert_eq(optim_var_get(v, 0), 0.75);
    assert_eq(optim_var_get(v, 1), 0.0);
    /* Round trip of the user class. */
    char *s = serialize(opt);
    optim_optimizer *back = from_json_ok(s);
    char *s2 = serialize(back);
    assert_string_equal(s2, s);
    optim_free(s);
    optim_free(s2);
    optim_destroy(back);
    optim_destroy(opt);
    optim_var_destroy(v);

    /* By bare name and by optim_create_by_name, with the class's defaults. */
    opt = from_json_ok("\"testscaledsgd\"");
    assert_hyper(opt, "learning_rate", 0.5);
    assert_hyper(opt, "scale", 1.0);
    optim_destroy(opt);
    assert_ok(optim_create_by_name(&opt, "TESTSCALEDSGD", NULL, &err), &err);
    assert_hyper(opt, "scale", 1.0);
    optim_destroy(opt);
    /* Its keys are checked like the built-ins'. */
    expect_json_fails("{\"class_name\": \"TestScaledSGD\", \"config\": {\"scale\": 11}}",
                      OPTIM_ERANGE, "scale", "11", NULL);
    expect_json_fails("{\"class_name\": \"TestScaledSGD\", \"config\": {\"momentum\": 0.9}}",
                      OPTIM_EKEY, "'momentum'", "scale", NULL);

    /* The same name again, in any case, fails; so does a built-in's name. */
    optim_class again = scaled_class("TestScaledSGD");
    expect_register_fails(&again, OPTIM_EINVAL, "TestScaledSGD");
    again.name = "TESTSCALEDSGD";
    expect_register_fails(&again, OPTIM_EINVAL, "TESTSCALEDSGD");
    again.name = "sgd";
    expect_register_fails(&again, OPTIM_EINVAL, "sgd");
    assert_ptr_equal(optim_find_class("SGD"), &optim_sgd_class);

    /* A name that lookup strips a prefix from could never be found: refused. */
    again.name = "Addons>Adam";
    expect_register_fails(&again, OPTIM_EINVAL, "\"Addons>\"");
    again.name = "Addons>TestPrefixed";
    expect_register_fails(&again, OPTIM_EINVAL, "register the class as 'TestPrefixed'");
    again.name = "Custom>TestPrefixed";
    expect_register_fails(&again, OPTIM_EINVAL, "\"Custom>\"");
    assert_null(optim_find_class("TestPrefixed"));
    /* Registered plainly, "Custom>" finds it; "Addons>" only a class TF
     * Addons has (tfa_name), which this one is not. */
    again.name = "TestPrefixed";
    optim_error err2;
    assert_ok(optim_register_class(&again, &err2), &err2);
    assert_null(optim_find_class("Addons>TestPrefixed"));
    optim_destroy(from_json_ok("{\"class_name\": \"Custom>TestPrefixed\", \"config\": {}}"));
}

/* A TF Addons class in tf-keras 2.13+'s envelope (module
 * "tensorflow_addons...", registered_name "Addons>NAME") is legacy, as its
 * inner optimizer, and is written back in that envelope, key for key (issue
 * 27, defect 1: it was read as Keras 3 and written with module null and
 * registered_name "MovingAverage", which tf-keras cannot load). */
OPTIM_TEST(test_tfa_envelope_round_trip)
{
    static const char ma[] =
        "{\"module\":\"tensorflow_addons.optimizers.moving_average\",\"class_name\":"
        "\"MovingAverage\",\"config\":{\"name\":\"MovingAverage\",\"optimizer\":{\"module\":"
        "\"keras.optimizers.legacy\",\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\","
        "\"learning_rate\":0.1,\"decay\":0.0,\"momentum\":0.0,\"nesterov\":false},"
        "\"registered_name\":null},\"average_decay\":0.999,\"num_updates\":null,\"start_step\":100,"
        "\"dynamic_decay\":true},\"registered_name\":\"Addons>MovingAverage\"}";
    optim_optimizer *opt = from_json_ok(ma);
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    assert_eq(optim_generation_of(optim_wrapper_inner(opt)), OPTIM_LEGACY);
    char *s = optim_serialize(opt);
    assert_string_equal(s, ma);
    optim_free(s);
    optim_destroy(opt);

    /* LAMB and Lookahead: the envelope kept, the class name TF Addons' own. */
    static const char *const in[][2] = {
        {"{\"module\":\"tensorflow_addons.optimizers.lamb\",\"class_name\":\"LAMB\",\"config\":"
         "{\"learning_rate\":0.01},\"registered_name\":\"Addons>LAMB\"}",
         "{\"module\":\"tensorflow_addons.optimizers.lamb\",\"class_name\":\"LAMB\",\"config\":"
         "{\"name\":\"LAMB\",\"learning_rate\":0.01,"},
        {"{\"module\":\"tensorflow_addons.optimizers.lookahead\",\"class_name\":\"Lookahead\","
         "\"config\":{\"optimizer\":{\"class_name\":\"SGD\",\"config\":{}}},\"registered_name\":"
         "\"Addons>Lookahead\"}",
         "{\"module\":\"tensorflow_addons.optimizers.lookahead\",\"class_name\":\"Lookahead\","
         "\"config\":{\"name\":\"Lookahead\",\"optimizer\":{"},
    };
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        opt = from_json_ok(in[i][0]);
        assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
        s = optim_serialize(opt);
        assert_true(strncmp(s, in[i][1], strlen(in[i][1])) == 0);
        const char *reg = i ? "\"registered_name\":\"Addons>Lookahead\"}"
                            : "\"registered_name\":\"Addons>LAMB\"}";
        assert_string_equal(s + strlen(s) - strlen(reg), reg);
        optim_optimizer *back = from_json_ok(s);
        char *s2 = optim_serialize(back);
        assert_string_equal(s2, s);
        optim_free(s2);
        optim_destroy(back);
        optim_free(s);
        optim_destroy(opt);
    }
    /* Without the envelope: tf.keras's {"class_name": "Addons>LAMB"} as before. */
    opt = from_json_ok("{\"class_name\": \"Addons>LAMB\", \"config\": {}}");
    s = optim_serialize(opt);
    assert_true(strncmp(s, "{\"class_name\":\"Addons>LAMB\",\"config\":{", 38) == 0);
    optim_free(s);
    optim_destroy(opt);
}

/* "Addons>NAME" is TF Addons' NAME: found only for a class whose tfa_name it
 * is (issue 27, defect 4: any name's prefix was stripped, so
 * "Addons>MultiOptimizer" reached Keras 3's MultiOptimizer; it is now TF
 * Addons' own, the class's legacy generation). */
OPTIM_TEST(test_addons_prefix_only_tfa_classes)
{
    static const char *const tfa[] = {
        "LAMB",          "AdamW",         "LazyAdam", "SGDW",          "ProximalAdagrad",
        "COCOB",         "RectifiedAdam", "Yogi",     "NovoGrad",      "ConditionalGradient",
        "MovingAverage", "Lookahead",     "SWA",      "MultiOptimizer"};
    char name[64];
    for (size_t i = 0; i < sizeof tfa / sizeof *tfa; i++) {
        snprintf(name, sizeof name, "Addons>%s", tfa[i]);
        assert_ptr_equal(optim_find_class(name), optim_find_class(tfa[i]));
        assert_non_null(optim_find_class(name));
    }
    static const char *const not_tfa[] = {"Adam", "Muon", "SGD", "Lion"};
    for (size_t i = 0; i < sizeof not_tfa / sizeof *not_tfa; i++) {
        snprintf(name, sizeof name, "Addons>%s", not_tfa[i]);
        assert_null(optim_find_class(name));
        char json[160];
        snprintf(json, sizeof json, "{\"class_name\": \"%s\", \"config\": {}}", name);
        optim_optimizer *opt = NULL;
        optim_error err = {0};
        assert_status(optim_from_json(&opt, json, &err), OPTIM_ENOTFOUND, &err);
        assert_null(opt);
        assert_contains(err.msg, "optim has no TF Addons class");
        assert_contains(err.msg, name);
    }
    optim_error err = {0};
    optim_optimizer *opt = NULL;
    assert_status(optim_create_by_name(&opt, "Addons>Muon", NULL, &err), OPTIM_ENOTFOUND, &err);
    assert_contains(err.msg, "'Addons>Muon'");
}

OPTIM_TEST(test_register_bad_tables)
{
    optim_class c;

    c = scaled_class("BadVersion0");
    c.version = 0;
    expect_register_fails(&c, OPTIM_EVERSION, "version");
    assert_null(optim_find_class("BadVersion0"));

    c = scaled_class("BadVersionNext");
    c.version = OPTIM_CLASS_VERSION + 1;
    expect_register_fails(&c, OPTIM_EVERSION, "version");
    assert_null(optim_find_class("BadVersionNext"));

    c = scaled_class("TinySize");
    c.size = 8;
    expect_register_fails(&c, OPTIM_EVERSION, "size");
    assert_null(optim_find_class("TinySize"));

    c = scaled_class("NoSize");
    c.size = 0;
    expect_register_fails(&c, OPTIM_EVERSION, "size");

    c = scaled_class("NoUpdate");
    c.apply_dense = NULL;
    c.apply_gradients = NULL;
    expect_register_fails(&c, OPTIM_EINVAL, "apply_dense");
    assert_null(optim_find_class("NoUpdate"));
    /* It cannot be instantiated directly either. */
    optim_optimizer *opt = SENTINEL;
    optim_error err;
    assert_status(optim_create(&opt, &c, NULL, &err), OPTIM_EINVAL, &err);
    assert_null(opt);

    c = scaled_class("");
    expect_register_fails(&c, OPTIM_EINVAL, "name");
    c = scaled_class(NULL);
    expect_register_fails(&c, OPTIM_EINVAL, "name");
    expect_register_fails(NULL, OPTIM_EINVAL, NULL);

    /* Params: NULL array with a count, a reserved name, a duplicate. */
    c = scaled_class("NullParams");
    c.params = NULL;
    expect_register_fails(&c, OPTIM_EINVAL, "params");
    static const optim_param reserved[] = {
        {"name", OPTIM_PARAM_FLOAT, 0, 0, 0, 1},
    };
    c = scaled_class("ReservedParam");
    c.params = reserved;
    expect_register_fails(&c, OPTIM_EINVAL, "'name'");
    static const optim_param twice[] = {
        {"beta", OPTIM_PARAM_FLOAT, 0, 0.5, 0, 1},
        {"beta", OPTIM_PARAM_FLOAT, 0, 0.5, 0, 1},
    };
    c = scaled_class("TwiceParam");
    c.params = twice;
    c.n_params = 2;
    expect_register_fails(&c, OPTIM_EINVAL, "'beta'");
    c = scaled_class("NegativeLR");
    c.default_learning_rate = -1;
    expect_register_fails(&c, OPTIM_ERANGE, "default_learning_rate");
}

static void noop_sparse(const optim_sparse_update *u) { (void)u; }

/* OPTIM_CLASS_NO_SPARSE: an element-wise class without apply_sparse refuses
 * a sparse gradient (naming the variable) instead of taking its dense
 * equivalent; with apply_sparse the table is refused. */
OPTIM_TEST(test_register_no_sparse)
{
    optim_class c = scaled_class("TestNoSparseBoth");
    c.flags |= OPTIM_CLASS_NO_SPARSE;
    c.apply_sparse = noop_sparse;
    expect_register_fails(&c, OPTIM_EINVAL, "NO_SPARSE");
    for (int refuse = 0; refuse < 2; refuse++) {
        c = scaled_class(refuse ? "TestNoSparse" : "TestSparseDense");
        if (refuse) c.flags |= OPTIM_CLASS_NO_SPARSE;
        optim_error err;
        assert_ok(optim_register_class(&c, &err), &err);
        optim_optimizer *opt = optim_test_make(refuse ? "\"TestNoSparse\"" : "\"TestSparseDense\"");
        int64_t shape[2] = {3, 1}, idx[1] = {1};
        optim_var *w = optim_test_var("table", OPTIM_F64, 2, shape, (double[]){1, 2, 3});
        double g[1] = {4};
        optim_grad_var p = {
            optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F64, g, 2, (int64_t[]){1, 1})), w};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        if (refuse) {
            assert_status(rc, OPTIM_ENOTSUP, opt);
            assert_contains(optim_errmsg(opt), "'table'");
            assert_eq(optim_var_get(w, 1), 2);
            assert_eq(optim_iterations(opt), 0);
        } else {
            assert_ok(rc, opt);
            assert_ne(optim_var_get(w, 1), 2);
        }
        optim_test_free(opt, w);
    }
}

/* A param whose default lies outside its own [min, max] would give every
 * optimizer of the class an out-of-range value that no set or step checks
 * (a plain number is only range-checked when set). The table is bad. */
OPTIM_TEST(test_register_param_default_out_of_range)
{
    static const optim_param bad_default[] = {
        {"beta", OPTIM_PARAM_FLOAT, 0, 5.0, 0.0, 1.0},
    };
    optim_class c = scaled_class("BadDefault");
    c.params = bad_default;
    optim_error err;
    memset(&err, 0, sizeof err);
    int rc = optim_register_class(&c, &err);
    if (rc == OPTIM_OK) {
        optim_optimizer *opt;
        double v = 0;
        if (optim_create_by_name(&opt, "BadDefault", NULL, NULL) == OPTIM_OK) {
            optim_get_hyper(opt, "beta", &v);
            optim_destroy(opt);
        }
        print_error("registered a class whose param 'beta' defaults to 5 outside [0, 1]; its "
                    "optimizers report beta = %g\n",
                    v);
        fail();
    }
    assert_lt(rc, 0);
    assert_contains(err.msg, "beta");
}

/* ---- String (enum) params, string lists, name patterns ------------------------- */

static const optim_param mode_params[] = {
    {"scale", OPTIM_PARAM_FLOAT, 0, 1.0, 0.0, 10.0},
    {"sparse_mode", OPTIM_PARAM_STRING, 0, 1, 0, 0},
};
static const char *const mode_choices[] = {"dense", "lazy", NULL};
static const char *const *const mode_param_choices[] = {NULL, mode_choices};

static int mode_get_config(optim_optimizer *opt, optim_config *cfg)
{
    static const char *const pats[] = {"bias", "norm", NULL};
    int rc = optim_config_put_strings(cfg, "patterns", pats);
    (void)opt;
    return rc ? rc : optim_config_put_strings(cfg, "none", NULL);
}

static optim_class mode_class(const char *name)
{
    optim_class c = scaled_class(name);
    c.params = mode_params;
    c.n_params = 2;
    c.param_choices = mode_param_choices;
    c.get_config = mode_get_config;
    return c;
}

OPTIM_TEST(test_string_param_kind)
{
    optim_class cls = mode_class("TestModeSGD");
    optim_error err;
    assert_ok(optim_register_class(&cls, &err), &err);
    optim_optimizer *opt = from_json_ok("{\"class_name\": \"TestModeSGD\", \"config\": {}}");
    double v = -1;
    assert_ok(optim_get_hyper(opt, "sparse_mode", &v), opt);
    assert_eq(v, 1.0);
    char *text = optim_get_config(opt);
    assert_non_null(
        strstr(text, "\"sparse_mode\":\"lazy\",\"patterns\":[\"bias\",\"norm\"],\"none\":null"));
    optim_free(text);
    /* Out of the choices' range: refused, value unchanged. */
    assert_status(optim_set_hyper(opt, "sparse_mode", 2), OPTIM_ERANGE, opt);
    assert_status(optim_set_hyper(opt, "sparse_mode", 0.5), OPTIM_ETYPE, opt);
    assert_ok(optim_set_hyper(opt, "sparse_mode", 0), opt);
    text = optim_get_config(opt);
    assert_non_null(strstr(text, "\"sparse_mode\":\"dense\""));
    optim_free(text);
    optim_destroy(opt);
    opt =
        from_json_ok("{\"class_name\": \"TestModeSGD\", \"config\": {\"sparse_mode\": \"dense\"}}");
    assert_ok(optim_get_hyper(opt, "sparse_mode", &v), opt);
    assert_eq(v, 0.0);
    optim_destroy(opt);
    expect_json_fails("{\"class_name\": \"TestModeSGD\", \"config\": {\"sparse_mode\": \"Lazy\"}}",
                      OPTIM_EINVAL, "expected one of: \"dense\", \"lazy\"", NULL);
    expect_json_fails("{\"class_name\": \"TestModeSGD\", \"config\": {\"sparse_mode\": 1}}",
                      OPTIM_ETYPE, "'sparse_mode' is a number, expected a string", NULL);
    expect_json_fails("{\"class_name\": \"TestModeSGD\", \"config\": {\"sparse_mode\": null}}",
                      OPTIM_ETYPE, "'sparse_mode' is null", NULL);
}

OPTIM_TEST(test_string_param_bad_tables)
{
    optim_class c = mode_class("BadModeNoChoices");
    c.param_choices = NULL;
    expect_register_fails(&c, OPTIM_EINVAL, "param_choices[1]");
    static const optim_param bad_default[] = {
        {"scale", OPTIM_PARAM_FLOAT, 0, 1.0, 0.0, 10.0},
        {"sparse_mode", OPTIM_PARAM_STRING, 0, 2, 0, 0},
    };
    c = mode_class("BadModeDefault");
    c.params = bad_default;
    expect_register_fails(&c, OPTIM_ERANGE, "sparse_mode");
    static const optim_param dynamic[] = {
        {"scale", OPTIM_PARAM_FLOAT, 0, 1.0, 0.0, 10.0},
        {"sparse_mode", OPTIM_PARAM_STRING, OPTIM_PARAM_DYNAMIC, 0, 0, 0},
    };
    c = mode_class("BadModeDynamic");
    c.params = dynamic;
    expect_register_fails(&c, OPTIM_EINVAL, "OPTIM_PARAM_DYNAMIC");
    /* A version-1 table (without param_choices) cannot declare a string param. */
    c = mode_class("BadModeV1");
    c.size = (uint32_t)offsetof(optim_class, param_choices);
    c.version = 1;
    expect_register_fails(&c, OPTIM_EINVAL, "param_choices[1]");
}

OPTIM_TEST(test_read_strings)
{
    char **list = (char **)&not_an_opt;
    optim_error err;
    assert_ok(optim_config_read_strings("k", "[\"a\", \"b(c\"]", &list, &err), &err);
    assert_non_null(list);
    assert_string_equal(list[0], "a");
    assert_string_equal(list[1], "b(c");
    assert_null(list[2]);
    optim_strings_free(list);
    assert_ok(optim_config_read_strings("k", "null", &list, &err), &err);
    assert_null(list);
    assert_ok(optim_config_read_strings("k", "[]", &list, &err), &err);
    assert_non_null(list);
    assert_null(list[0]);
    optim_strings_free(list);
    assert_status(optim_config_read_strings("pats", "\"a\"", &list, &err), OPTIM_ETYPE, &err);
    assert_null(list);
    assert_non_null(strstr(err.msg, "'pats' is a string, expected a list of strings or null"));
    assert_status(optim_config_read_strings("pats", "[\"a\", 2]", &list, &err), OPTIM_ETYPE, &err);
    assert_non_null(strstr(err.msg, "element 1 is a number"));
    assert_status(optim_config_read_strings("pats", "[", &list, &err), OPTIM_EPARSE, &err);
    assert_status(optim_config_read_strings(NULL, "[]", &list, &err), OPTIM_EINVAL, &err);
    assert_status(optim_config_read_strings("k", NULL, &list, &err), OPTIM_EINVAL, &err);
    assert_status(optim_config_read_strings("k", "[]", NULL, &err), OPTIM_EINVAL, &err);
    optim_strings_free(NULL);
}

OPTIM_TEST(test_name_patterns)
{
    static const char *const pats[] = {"bias$", "^emb"};
    optim_name_patterns *p = NULL;
    optim_error err;
    assert_ok(optim_name_patterns_compile(&p, pats, 2, "test", &err), &err);
    assert_eq(optim_name_patterns_match(p, "dense/bias"), 1);
    assert_eq(optim_name_patterns_match(p, "embedding"), 1);
    assert_eq(optim_name_patterns_match(p, "dense/kernel"), 0);
    assert_eq(optim_name_patterns_match(NULL, "bias"), 0);
    const char *const *src = optim_name_patterns_sources(p);
    assert_string_equal(src[0], "bias$");
    assert_string_equal(src[1], "^emb");
    assert_null(src[2]);
    optim_name_patterns_free(p);
    static const char *const bad[] = {"ok", "(", NULL};
    p = (optim_name_patterns *)&not_an_opt;
    assert_status(optim_name_patterns_compile(&p, bad, 2, "pats", &err), OPTIM_EINVAL, &err);
    assert_null(p);
    assert_non_null(strstr(err.msg, "pats[1] ('(') is not a valid regular expression"));
    assert_status(optim_name_patterns_compile(&p, bad + 1, 2, "pats", &err), OPTIM_EINVAL, &err);
    assert_status(optim_name_patterns_compile(&p, NULL, 1, "pats", &err), OPTIM_EINVAL, &err);
    assert_status(optim_name_patterns_compile(NULL, pats, 1, "pats", &err), OPTIM_EINVAL, &err);
    assert_ok(optim_name_patterns_compile(&p, NULL, 0, "pats", &err), &err);
    assert_null(optim_name_patterns_sources(p)[0]);
    optim_name_patterns_free(p);
    optim_name_patterns_free(NULL);
}

/* glibc's regcomp copies a repeated subexpression once per repeat, and
 * repeats of what can match empty cost beyond any bound: "b.*" and 12 '+'
 * took 10 s and 880 MB, 16 more than 6 GB, 100 more memory than any
 * machine has, from a config of 400 bytes (found by fuzz_config);
 * "^b*+++++" 20 s, "^((b*)*){1000}" more than 20 s. As Python's re, a
 * repeat of a repeat is refused ("multiple repeat") but for a lazy '?' or
 * possessive '+'; so is a repeat of a group that can match empty, and a
 * pattern whose repeats expand it by more than OPTIM__REGEX_MAX nodes (an
 * estimate), with a message, before regcomp; ordinary patterns, long
 * literal ones included, still compile. (The refused cases below are ones
 * main compiled in under 2 s.) */
OPTIM_TEST(test_name_patterns_size_bound)
{
    char stacked[64] = "b.*", literal[3001];
    memset(stacked + 3, '*', 8);
    memset(literal, 'n', 3000);
    literal[3000] = '\0';
    static const char *const big[] = {
        "(a*){2}{2}",  "x(y{50}|(z+){60}){20}", "b.*?+?", "a**",          "^((((b*)+)+)+)+",
        "(a|b?){300}", "^((b*){1,2}){150}",     "(.*)+",  "((b*c*)*){9}", "((^|/)+){100}"};
    static const char *const fine[] = {"^(dense|conv)[0-9]{1,3}/(kernel|bias)$",
                                       "[[:alpha:]]{2,8}\\.w+",
                                       "a{1000}",
                                       "[]{}*+]+",
                                       "((a|b)*c){3}",
                                       ".*?kernel",
                                       "(.*/)?bias",
                                       "(a|b){300}",
                                       "x{2}?",
                                       "^(a+)+$",
                                       "(^|/)?bias",
                                       "(|a)*",
                                       NULL};
    const char *list[sizeof fine / sizeof *fine];
    memcpy(list, fine, sizeof fine);
    list[sizeof fine / sizeof *fine - 1] = literal;
    const char *one[1] = {stacked};
    optim_name_patterns *p = NULL;
    optim_error err;
    assert_status(optim_name_patterns_compile(&p, one, 1, "pats", &err), OPTIM_EINVAL, &err);
    assert_null(p);
    assert_non_null(strstr(err.msg,
                           "pats[0] ('b.*********') is a Python regular expression "
                           "optim cannot match as re does: a repeat of a repeat"));
    /* A possessive repeat (Python 3.11; "multiple repeat" before) is not
     * regcomp's repeat of a repeat: refused as such (test_patterns_python.c). */
    static const char *const possessive[] = {"^b*+++", "(x|y*|z)+++", "b.*+", "b*+"};
    for (size_t i = 0; i < sizeof possessive / sizeof *possessive; i++)
        assert_status(optim_name_patterns_compile(&p, possessive + i, 1, "pats", &err),
                      OPTIM_EINVAL, &err);
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        if (optim_name_patterns_compile(&p, big + i, 1, "pats", &err) != OPTIM_EINVAL ||
            (!strstr(err.msg, "too large") && !strstr(err.msg, "a repeat of a repeat")))
            fail_msg("'%s' not refused as too large: %s", big[i], err.msg);
    }
    /* Unfinished syntax: refused by regcomp, read to its end and no further. */
    static const char *const cut[] = {"[[:", "[[.a", "[[=", "[^",  "[",
                                      "\\",  "((",   "[]",  "a{2", "a{"};
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
        char *c = malloc(strlen(cut[i]) + 1); /* exactly, so that ASan sees a read past the end */
        assert_non_null(c);
        memcpy(c, cut[i], strlen(cut[i]) + 1);
        const char *one_cut[1] = {c};
        /* A '{' that starts no repeat is literal in Python's re. */
        if (c[0] == 'a') {
            assert_ok(optim_name_patterns_compile(&p, one_cut, 1, "pats", &err), &err);
            assert_eq(optim_name_patterns_match(p, cut[i]), 1);
            optim_name_patterns_free(p);
        } else {
            assert_status(optim_name_patterns_compile(&p, one_cut, 1, "pats", &err), OPTIM_EINVAL,
                          &err);
        }
        free(c);
    }
    assert_ok(optim_name_patterns_compile(&p, list, sizeof fine / sizeof *fine, "pats", &err),
              &err);
    assert_eq(optim_name_patterns_match(p, "conv12/kernel"), 1);
    assert_eq(optim_name_patterns_match(p, literal), 1);
    optim_name_patterns_free(p);
    /* MultiOptimizer's optimizer_map keys are patterns too. */
    char json[512];
    snprintf(
        json, sizeof json,
        "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": {\"class_name\": "
        "\"OptimizerMap\", \"config\": {\"default_optimizer\": {\"class_name\": \"SGD\", \"config\": {}}, "
        "\"optimizer_map\": {\"%s\": {\"class_name\": \"Adam\", \"config\": {}}}}}}}",
        stacked);
    optim_optimizer *opt = NULL;
    assert_status(optim_from_json(&opt, json, &err), OPTIM_EINVAL, &err);
    assert_null(opt);
    assert_non_null(strstr(err.msg, "a repeat of a repeat"));
}

/* One reader: every nesting level refuses what the top level refuses. */
OPTIM_TEST(test_nested_objects_equally_strict)
{
    expect_json_fails("{\"class_name\": \"SGD\", \"config\": {}, \"extra\": 1}", OPTIM_EKEY,
                      "optimizer JSON has unknown key 'extra'", NULL);
    expect_json_fails("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": {\"class_name\": "
                      "\"ExponentialDecay\", \"config\": {\"initial_learning_rate\": 0.1, "
                      "\"decay_steps\": 10, \"decay_rate\": 0.5}, \"extra\": 1}}}",
                      OPTIM_EKEY, "schedule JSON has unknown key 'extra'", NULL);
    expect_json_fails("{\"class_name\": \"SGD\", \"config\": {}, \"module\": 3}", OPTIM_ETYPE,
                      "module is a number, expected a string or null", NULL);
    expect_json_fails("{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
                      "{\"class_name\": \"SGD\", \"config\": {}, \"extra\": 1}}}",
                      OPTIM_EKEY, "inner optimizer: optimizer JSON has unknown key 'extra'", NULL);
    /* An unknown key inside the inner config is the inner's. */
    expect_json_fails("{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
                      "{\"class_name\": \"SGD\", \"config\": {\"bogus\": 1}}}}",
                      OPTIM_EKEY, "inner optimizer: SGD: unknown config key 'bogus'", NULL);
    optim_optimizer *inner = optim_test_make("\"sgd\""), *w = SENTINEL;
    optim_error err;
    assert_status(optim_wrap(&w,
                             "{\"class_name\": \"LossScaleOptimizer\", \"config\": {}, "
                             "\"extra\": 1}",
                             inner, &err),
                  OPTIM_EKEY, &err);
    assert_null(w);
    assert_ok(
        optim_wrap(&w, "{\"class_name\": \"LossScaleOptimizer\", \"config\": {}}", inner, &err),
        &err);
    optim_destroy(w);
}

/* Detection without is_legacy_optimizer, forcing, and the legacy names. */
OPTIM_TEST(test_generation_detection)
{
    /* tfk: written back as tf-keras's new-style optimizers write it. */
    static const struct {
        const char *json;
        optim_generation gen;
        int tfk;
    } cases[] = {
        {"{\"class_name\": \"SGD\", \"config\": {\"decay\": 0.0}}", OPTIM_LEGACY, 0},
        {"{\"class_name\": \"SGD\", \"config\": {\"lr\": 0.1}}", OPTIM_LEGACY, 0},
        {"{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.5}}", OPTIM_KERAS3, 0},
        {"{\"class_name\": \"Addons>LAMB\", \"config\": {}}", OPTIM_LEGACY, 0},
        {"{\"module\": \"keras.optimizers.legacy\", \"class_name\": \"SGD\", \"config\": {}}",
         OPTIM_LEGACY, 0},
        {"{\"module\": \"keras.optimizers\", \"class_name\": \"SGD\", \"config\": {}}",
         OPTIM_KERAS3, 0},
        /* Keras 3 pops `decay` and ignores it. */
        {"{\"class_name\": \"SGD\", \"config\": {\"decay\": 0.5, \"is_legacy_optimizer\": false}}",
         OPTIM_KERAS3, 1},
        {"{\"class_name\": \"SGD\", \"config\": {\"decay\": 0.5, \"use_ema\": false}}",
         OPTIM_KERAS3, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        optim_optimizer *opt = from_json_ok(cases[i].json);
        if (optim_generation_of(opt) != cases[i].gen) print_error("%s\n", cases[i].json);
        assert_eq(optim_generation_of(opt), cases[i].gen);
        char *out = optim_get_config(opt);
        if (cases[i].tfk)
            assert_non_null(strstr(out, "\"jit_compile\":true,\"is_legacy_optimizer\":false,"));
        else assert_null(strstr(out, "is_legacy_optimizer"));
        if (cases[i].gen == OPTIM_KERAS3) assert_null(strstr(out, "\"decay\""));
        optim_free(out);
        optim_destroy(opt);
    }
    optim_optimizer *opt = SENTINEL;
    optim_error err;
    assert_ok(
        optim_from_json_as(&opt, "{\"class_name\": \"SGD\", \"config\": {}}", OPTIM_LEGACY, &err),
        &err);
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    assert_string_equal(optim_name(opt), "SGD");
    char *s = optim_serialize(opt);
    assert_string_equal(
        s,
        "{\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\",\"learning_rate\":0.01,"
        "\"decay\":0.0,\"momentum\":0.0,\"nesterov\":false}}");
    optim_free(s);
    optim_destroy(opt);
    opt = SENTINEL;
    assert_status(
        optim_from_json_as(&opt,
                           "{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": "
                           "false}}",
                           OPTIM_LEGACY, &err),
        OPTIM_EINVAL, &err);
    assert_null(opt);
    assert_non_null(strstr(err.msg, "is_legacy_optimizer"));
    assert_status(optim_from_json_as(&opt, "{}", (optim_generation)7, &err), OPTIM_EINVAL, &err);
    assert_status(optim_from_json_as(&opt, NULL, OPTIM_LEGACY, &err), OPTIM_EINVAL, &err);
    assert_status(optim_from_json_as(NULL, "\"sgd\"", OPTIM_LEGACY, &err), OPTIM_EINVAL, &err);
    /* Lamb, legacy: TF Addons' class name and default name. */
    assert_ok(optim_from_json_as(&opt, "\"lamb\"", OPTIM_LEGACY, &err), &err);
    s = optim_serialize(opt);
    assert_non_null(strstr(
        s,
        "{\"class_name\":\"Addons>LAMB\",\"config\":{\"name\":\"LAMB\",\"learning_rate\":0.001,"
        "\"weight_decay\":0.0,\"decay\":0.0,"));
    optim_free(s);
    optim_destroy(opt);
}

int main(void) { return optim_test_run(); }
