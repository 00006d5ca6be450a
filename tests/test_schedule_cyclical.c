/* TF Addons' cyclical learning rates (src/schedules/cyclical_learning_rate.c):
 * CyclicalLearningRate, TriangularCyclicalLearningRate,
 * Triangular2CyclicalLearningRate, ExponentialCyclicalLearningRate.
 *
 * - Bit for bit against a double-precision reference written here from TF
 *   Addons' CyclicalLearningRate.__call__ (d208d75), line by line.
 * - TF Addons' own test values (tests/cyclical_learning_rate_test.py), each
 *   directly and after a config round trip as its tests do, and its float32
 *   arithmetic to 1e-6.
 * - Configs: TF Addons' keys, order and defaults, written back key for key,
 *   alone and nested in legacy optimizers in both envelopes (tf.keras
 *   2.11-2.12 and tf-keras 2.13+); scale_fn as each tf.keras writes it;
 *   every refused input. */
#include "testutil.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "optim/optim.h"

/* ---- the reference ---------------------------------------------------------------- */

/* The scale functions: TF Addons' lambdas and its test's scale_fn. */
static double tfa_triangular(double x, double gamma)
{
    (void)x, (void)gamma;
    return 1.0; /* lambda x: 1.0 */
}

static double tfa_triangular2(double x, double gamma)
{
    (void)gamma;
    return 1 / pow(2.0, x - 1); /* lambda x: 1 / (2.0 ** (x - 1)) */
}

static double tfa_exponential(double x, double gamma)
{
    return pow(gamma, x); /* lambda x: gamma**x */
}

static double tfa_test_scale(double x, double gamma)
{
    (void)gamma;
    return 1 / pow(5, x * 0.0001); /* the test's def scale_fn(x): 1 / (5 ** (x * 0.0001)) */
}

typedef struct clr_ref {
    double initial, maximal, step_size, gamma;
    int cycle_mode; /* scale_mode == "cycle" */
    double (*scale_fn)(double x, double gamma);
} clr_ref;

/* CyclicalLearningRate.__call__ in double. */
static double tfa_call(const clr_ref *r, int64_t step)
{
    const double initial_learning_rate = r->initial;
    const double maximal_learning_rate = r->maximal;
    const double step_size = r->step_size;
    const double step_as_dtype = (double)step;
    const double cycle = floor(1 + step_as_dtype / (2 * step_size));
    const double x = fabs(step_as_dtype / step_size - 2 * cycle + 1);
    const double mode_step = r->cycle_mode ? cycle : (double)step;
    return initial_learning_rate +
        (maximal_learning_rate - initial_learning_rate) * fmax(0.0, 1 - x) *
        r->scale_fn(mode_step, r->gamma);
}

/* The test's scale_fn as optim_register_scale_fn takes it. */
static double c_test_scale(double x, void *ctx)
{
    (void)ctx;
    return tfa_test_scale(x, 0.0);
}

/* A scale function with a context: its factor ^ (x - 1). */
static double c_power(double x, void *ctx) { return pow(*(const double *)ctx, x - 1); }
static double power_base = 0.75;
static double ref_power(double x, double gamma)
{
    (void)gamma;
    return pow(0.75, x - 1);
}

static void register_scale_fns(void)
{
    static int done;
    if (done) return;
    done = 1;
    optim_error err;
    assert_ok(optim_register_scale_fn("scale_fn", c_test_scale, NULL, &err), &err);
    assert_ok(optim_register_scale_fn("Custom>scale_fn", c_test_scale, NULL, &err), &err);
    assert_ok(optim_register_scale_fn("power", c_power, &power_base, &err), &err);
}

#define CFG(cls, keys) "{\"class_name\": \"Addons>" cls "\", \"config\": {" keys "}}"
#define LR3(a, b, c)                                                                        \
    "\"initial_learning_rate\": " #a ", \"maximal_learning_rate\": " #b ", \"step_size\": " \
    "" #c
#define FN_213(name)                                                                    \
    "{\"module\": \"tensorflow_addons.optimizers.tests.cyclical_learning_rate_test\", " \
    "\"class_name\": \"function\", \"config\": \"" name "\", \"registered_name\": \"" name "\"}"

typedef struct clr_case {
    const char *json;
    clr_ref ref;
    int64_t steps; /* checked at 0..steps */
} clr_case;

static const clr_case CASES[] = {
    {CFG("TriangularCyclicalLearningRate", LR3(0.1, 1, 40)),
     {0.1, 1, 40, 0, 1, tfa_triangular},
     400},
    {CFG("TriangularCyclicalLearningRate", LR3(1.0, 0.1, 2.5) ", \"scale_mode\": \"iterations\""),
     {1.0, 0.1, 2.5, 0, 0, tfa_triangular},
     100},
    {CFG("Triangular2CyclicalLearningRate", LR3(0.1, 1, 30)),
     {0.1, 1, 30, 0, 1, tfa_triangular2},
     600},
    {CFG("Triangular2CyclicalLearningRate", LR3(0.01, 0.3, 3) ", \"scale_mode\": \"iterations\""),
     {0.01, 0.3, 3, 0, 0, tfa_triangular2},
     1200},
    {CFG("ExponentialCyclicalLearningRate", LR3(0.1, 1, 2000) ", \"gamma\": 0.996"),
     {0.1, 1, 2000, 0.996, 0, tfa_exponential},
     8000},
    {CFG("ExponentialCyclicalLearningRate",
         LR3(0.001, 0.006, 7.5) ", \"scale_mode\": \"cycle\", \"gamma\": 0.5"),
     {0.001, 0.006, 7.5, 0.5, 1, tfa_exponential},
     300},
    {CFG("ExponentialCyclicalLearningRate", LR3(0.1, 0.2, 5)),
     {0.1, 0.2, 5, 1.0, 0, tfa_exponential},
     100},
    {CFG("CyclicalLearningRate",
         "\"initial_learning_rate\": 0.1, \"maximal_learning_rate\": 1, \"scale_fn\": "
         "\"scale_fn\", \"step_size\": 4000"),
     {0.1, 1, 4000, 0, 1, tfa_test_scale},
     8000},
    {CFG("CyclicalLearningRate",
         "\"initial_learning_rate\": 0.1, \"maximal_learning_rate\": 1, \"scale_fn\": " FN_213(
             "scale_fn") ", \"step_size\": 4000, \"scale_mode\": \"iterations\""),
     {0.1, 1, 4000, 0, 0, tfa_test_scale},
     8000},
    {CFG("CyclicalLearningRate",
         "\"initial_learning_rate\": 0.02, \"maximal_learning_rate\": 0.5, \"scale_fn\": "
         "\"power\", \"step_size\": 6, \"scale_mode\": \"cycle\""),
     {0.02, 0.5, 6, 0, 1, ref_power},
     200},
};
#define N_CASES (sizeof CASES / sizeof *CASES)

static optim_schedule *parse(const char *json)
{
    register_scale_fns();
    return optim_test_schedule(json);
}

/* from_json(serialize(s)), as TF Addons' tests' from_config(get_config()). */
static optim_schedule *round_trip(const optim_schedule *s)
{
    char *text = optim_schedule_serialize(s);
    assert_non_null(text);
    optim_schedule *b = parse(text);
    optim_free(text);
    return b;
}

OPTIM_TEST(test_reference_bit_for_bit)
{
    for (size_t i = 0; i < N_CASES; i++) {
        optim_schedule *a = parse(CASES[i].json), *b = round_trip(a);
        for (int64_t k = 0; k <= CASES[i].steps; k++) {
            const double want = tfa_call(&CASES[i].ref, k);
            const double got = optim_schedule_value(a, k), again = optim_schedule_value(b, k);
            if (memcmp(&got, &want, sizeof got) != 0)
                print_error("%s at step %lld: %.17g, expected %.17g\n", CASES[i].json, (long long)k,
                            got, want);
            assert_memory_equal(&got, &want, sizeof got);
            assert_memory_equal(&again, &want, sizeof got);
        }
        optim_schedule_destroy(a);
        optim_schedule_destroy(b);
    }
}

/* ---- TF Addons' own tests ------------------------------------------------------- */

/* np.linspace(start, stop, num)[i]. */
static double linspace(double start, double stop, int num, int i)
{
    if (i == num - 1) return stop;
    return start + i * ((stop - start) / (num - 1));
}

/* The schedule's value at step k, directly or after a round trip. */
static double value_at(const char *json, int serialize, int64_t k)
{
    optim_schedule *s = parse(json);
    if (serialize) {
        optim_schedule *b = round_trip(s);
        optim_schedule_destroy(s);
        s = b;
    }
    double v = optim_schedule_value(s, k);
    optim_schedule_destroy(s);
    return v;
}

/* test_triangular_cyclical_learning_rate and test_triangular2_cyclical_learning_rate:
 * segments of np.linspace, rtol 1e-6. */
OPTIM_TEST(test_tfa_triangular)
{
    const char *tri = CFG("TriangularCyclicalLearningRate", LR3(0.1, 1, 40));
    const char *tri2 = CFG("Triangular2CyclicalLearningRate", LR3(0.1, 1, 30));
    const double middle = (1 + 0.1) / 2;
    for (int ser = 0; ser < 2; ser++) {
        for (int k = 0; k <= 80; k++) {
            double want = k <= 40 ? linspace(0.1, 1, 41, k) : linspace(1, 0.1, 41, k - 40);
            assert_close(value_at(tri, ser, k), want, 1e-6, 0);
        }
        const double seg[4][2] = {{0.1, 1}, {1, 0.1}, {0.1, middle}, {middle, 0.1}};
        for (int k = 0; k <= 120; k++) {
            int j = k == 0 ? 0 : (k - 1) / 30;
            double want = linspace(seg[j][0], seg[j][1], 31, k - 30 * j);
            assert_close(value_at(tri2, ser, k), want, 1e-6, 0);
        }
    }
}

/* test_exponential_cyclical_learning_rate: 8001 steps, rtol 1e-6. */
OPTIM_TEST(test_tfa_exponential)
{
    const double gamma = 0.996;
    for (int ser = 0; ser < 2; ser++) {
        optim_schedule *s = parse(CASES[4].json);
        if (ser) {
            optim_schedule *b = round_trip(s);
            optim_schedule_destroy(s);
            s = b;
        }
        for (int i = 0; i <= 8000; i++) {
            double non_bounded_value = fabs(i / 2000.0 - 2 * floor(1 + i / (2.0 * 2000)) + 1);
            double expected = 0.1 + (1 - 0.1) * fmax(0, 1 - non_bounded_value) * pow(gamma, i);
            assert_close(optim_schedule_value(s, i), expected, 1e-6, 0);
        }
        optim_schedule_destroy(s);
    }
}

/* test_custom_cyclical_learning_rate(_with_scale_mode): steps 1..8000,
 * rtol 1e-6, atol 1e-6; the scale_fn named as tf.keras 2.11-2.12 and 2.13+
 * write it. */
OPTIM_TEST(test_tfa_custom)
{
    static const char *const fns[] = {"\"scale_fn\"", FN_213("scale_fn"), "\"Custom>scale_fn\"",
                                      FN_213("Custom>scale_fn")};
    for (int f = 0; f < 4; f++)
        for (int iterations = 0; iterations < 2; iterations++) {
            char json[1024];
            snprintf(json, sizeof json,
                     CFG("CyclicalLearningRate",
                         "\"initial_learning_rate\": 0.1, \"maximal_learning_rate\": 1, "
                         "\"scale_fn\": %s, \"step_size\": 4000%s"),
                     fns[f], iterations ? ", \"scale_mode\": \"iterations\"" : "");
            optim_schedule *s = parse(json), *b = round_trip(s);
            for (int step = 1; step <= 8000; step++) {
                double cycle = floor(1 + step / (2.0 * 4000));
                double non_bounded_value = fabs(step / 4000.0 - 2 * cycle + 1);
                double expected = 0.1 +
                    (1 - 0.1) * fmax(0, 1 - non_bounded_value) *
                        tfa_test_scale(iterations ? step : cycle, 0);
                assert_close(optim_schedule_value(s, step), expected, 1e-6, 1e-6);
                assert_close(optim_schedule_value(b, step), expected, 1e-6, 1e-6);
            }
            optim_schedule_destroy(s);
            optim_schedule_destroy(b);
        }
}

/* TF Addons' float32 arithmetic (initial_learning_rate a Python float: every
 * op in float32; the scale of a Python int step in double, as its tests
 * call it, rounded to float32 by the product): optim's double value, rounded
 * to float32, within 1e-6 over TF Addons' tests' ranges. */
static float tfa_call_f32(const clr_ref *r, int64_t step)
{
    const float initial = (float)r->initial, maximal = (float)r->maximal;
    const float step_size = (float)r->step_size, t = (float)step;
    const float cycle = floorf(1.0f + t / (2.0f * step_size));
    const float x = fabsf(t / step_size - 2.0f * cycle + 1.0f);
    const float scale = (float)r->scale_fn(r->cycle_mode ? (double)cycle : (double)step, r->gamma);
    return initial + (maximal - initial) * fmaxf(0.0f, 1.0f - x) * scale;
}

OPTIM_TEST(test_tfa_float32)
{
    static const size_t cases[] = {0, 2, 4, 7, 8};
    static const int64_t steps[] = {80, 120, 8000, 8000, 8000};
    for (size_t c = 0; c < 5; c++) {
        optim_schedule *s = parse(CASES[cases[c]].json);
        for (int64_t k = 0; k <= steps[c]; k++)
            assert_close((float)optim_schedule_value(s, k), tfa_call_f32(&CASES[cases[c]].ref, k),
                         1e-6, 1e-7);
        optim_schedule_destroy(s);
    }
}

/* ---- configs ---------------------------------------------------------------------- */

static char *serialize_of(const char *json)
{
    register_scale_fns();
    return optim_test_schedule_text(json);
}

static void expect_text(const char *json, const char *want)
{
    char *got = serialize_of(json);
    if (strcmp(got, want) != 0) print_error("%s\n  wrote %s\n  want  %s\n", json, got, want);
    assert_string_equal(got, want);
    optim_free(got);
}

#define OUT(cls, keys) "{\"class_name\":\"Addons>" cls "\",\"config\":{" keys "}}"

/* TF Addons' get_config: its keys in its order, defaults filled, no name. */
OPTIM_TEST(test_config_text)
{
    expect_text(CFG("TriangularCyclicalLearningRate", LR3(0.1, 1, 40)),
                OUT("TriangularCyclicalLearningRate",
                    "\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1,\"step_size\":40,"
                    "\"scale_mode\":\"cycle\""));
    expect_text(CFG("Triangular2CyclicalLearningRate",
                    "\"scale_mode\": \"iterations\", \"step_size\": 2.0, "
                    "\"maximal_learning_rate\": 0.5, \"initial_learning_rate\": 1e-4"),
                OUT("Triangular2CyclicalLearningRate",
                    "\"initial_learning_rate\":0.0001,\"maximal_learning_rate\":0.5,\"step_size\":"
                    "2.0,\"scale_mode\":\"iterations\""));
    /* Exponential: scale_mode "iterations" and gamma 1.0 by default, gamma last. */
    expect_text(CFG("ExponentialCyclicalLearningRate", LR3(0.1, 1, 2000)),
                OUT("ExponentialCyclicalLearningRate",
                    "\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1,\"step_size\":2000,"
                    "\"scale_mode\":\"iterations\",\"gamma\":1.0"));
    expect_text(CFG("ExponentialCyclicalLearningRate",
                    "\"gamma\": 0.996, \"scale_mode\": \"cycle\", " LR3(0.1, 1, 2000)),
                OUT("ExponentialCyclicalLearningRate",
                    "\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1,\"step_size\":2000,"
                    "\"scale_mode\":\"cycle\",\"gamma\":0.996"));
    /* CyclicalLearningRate: scale_fn between maximal_learning_rate and
     * step_size, as read (a 2.11-2.12 name, a 2.13+ object). */
    expect_text(CFG("CyclicalLearningRate", LR3(0.1, 1, 4000) ", \"scale_fn\": \"scale_fn\""),
                OUT("CyclicalLearningRate",
                    "\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1,\"scale_fn\":"
                    "\"scale_fn\",\"step_size\":4000,\"scale_mode\":\"cycle\""));
    expect_text(CFG("CyclicalLearningRate", LR3(0.1, 1, 4000) ", \"scale_fn\": " FN_213("power")),
                OUT("CyclicalLearningRate",
                    "\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1,\"scale_fn\":{"
                    "\"module\":\"tensorflow_addons.optimizers.tests.cyclical_learning_rate_test\","
                    "\"class_name\":\"function\",\"config\":\"power\",\"registered_name\":"
                    "\"power\"},\"step_size\":4000,\"scale_mode\":\"cycle\""));
    /* A name is kept where a config has one (null too). */
    expect_text(CFG("TriangularCyclicalLearningRate", LR3(0.1, 1, 40) ", \"name\": \"clr\""),
                OUT("TriangularCyclicalLearningRate",
                    "\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1,\"step_size\":40,"
                    "\"scale_mode\":\"cycle\",\"name\":\"clr\""));
    expect_text(CFG("TriangularCyclicalLearningRate", LR3(0.1, 1, 40) ", \"name\": null"),
                OUT("TriangularCyclicalLearningRate",
                    "\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1,\"step_size\":40,"
                    "\"scale_mode\":\"cycle\",\"name\":null"));
}

/* Written as read, key for key: every case, and as TF Addons writes each. */
OPTIM_TEST(test_key_for_key)
{
    static const char *const tfa_written[] = {
        OUT("CyclicalLearningRate",
            "\"initial_learning_rate\":0.0001,\"maximal_learning_rate\":0.01,\"scale_fn\":"
            "\"Custom>scale_fn\",\"step_size\":2000,\"scale_mode\":\"cycle\""),
        OUT("TriangularCyclicalLearningRate",
            "\"initial_learning_rate\":0.0001,\"maximal_learning_rate\":0.01,\"step_size\":2000,"
            "\"scale_mode\":\"cycle\""),
        OUT("Triangular2CyclicalLearningRate",
            "\"initial_learning_rate\":0.0001,\"maximal_learning_rate\":0.01,\"step_size\":2000,"
            "\"scale_mode\":\"cycle\""),
        OUT("ExponentialCyclicalLearningRate",
            "\"initial_learning_rate\":0.0001,\"maximal_learning_rate\":0.01,\"step_size\":2000,"
            "\"scale_mode\":\"cycle\",\"gamma\":0.96"),
    };
    for (size_t i = 0; i < 4; i++) expect_text(tfa_written[i], tfa_written[i]);
    for (size_t i = 0; i < N_CASES; i++) {
        char *a = serialize_of(CASES[i].json), *b = serialize_of(a);
        assert_string_equal(a, b);
        optim_free(a);
        optim_free(b);
    }
}

OPTIM_TEST(test_lookup)
{
    static const char *const names[] = {"CyclicalLearningRate", "TriangularCyclicalLearningRate",
                                        "Triangular2CyclicalLearningRate",
                                        "ExponentialCyclicalLearningRate"};
    for (size_t i = 0; i < 4; i++) {
        char prefixed[96];
        snprintf(prefixed, sizeof prefixed, "Addons>%s", names[i]);
        const optim_schedule_class *c = optim_find_schedule_class(names[i]);
        assert_non_null(c);
        assert_ptr_equal(optim_find_schedule_class(prefixed), c);
        assert_string_equal(c->tfa_module, "tensorflow_addons.optimizers.cyclical_learning_rate");
    }
    /* "Addons>" finds only TF Addons' schedules; names are case-sensitive. */
    assert_null(optim_find_schedule_class("Addons>ExponentialDecay"));
    assert_null(optim_find_schedule_class("Addons>cyclicallearningrate"));
    assert_null(optim_find_schedule_class("Custom>CyclicalLearningRate"));
    optim_schedule *s = NULL;
    optim_error err;
    assert_status(optim_schedule_from_json(
                      &s, "{\"class_name\": \"Addons>ExponentialDecay\", \"config\": {}}", &err),
                  OPTIM_ENOTFOUND, &err);
    assert_contains(err.msg, "TF Addons has no schedule 'ExponentialDecay'");
    assert_null(s);
}

/* ---- nested in optimizers, both envelopes ------------------------------------------ */

/* optim_serialize(optim_from_json(json)) is json (written compactly). */
static void expect_optimizer_text(const char *json, const char *want)
{
    register_scale_fns();
    optim_optimizer *opt = optim_test_make(json);
    char *got = optim_serialize(opt);
    assert_non_null(got);
    if (strcmp(got, want) != 0) print_error("%s\n  wrote %s\n  want  %s\n", json, got, want);
    assert_string_equal(got, want);
    optim_optimizer *again = optim_test_make(got);
    char *got2 = optim_serialize(again);
    assert_string_equal(got2, want);
    optim_free(got);
    optim_free(got2);
    optim_destroy(again);
    optim_destroy(opt);
}

#define TRI2_CFG                                                                          \
    "{\"initial_learning_rate\": 0.1, \"maximal_learning_rate\": 1.0, \"step_size\": 4, " \
    "\"scale_mode\": \"cycle\"}"
#define TRI2_OUT                                                                                   \
    "{\"initial_learning_rate\":0.1,\"maximal_learning_rate\":1.0,\"step_size\":4,\"scale_mode\":" \
    "\"cycle\"}"
#define MOD "\"module\":\"tensorflow_addons.optimizers.cyclical_learning_rate\","

/* tf.keras 2.11-2.12: {"class_name": "Addons>NAME", "config"} inside
 * {"class_name", "config"}. */
OPTIM_TEST(test_nested_legacy_2_11)
{
    expect_optimizer_text(
        "{\"class_name\": \"SGD\", \"config\": {\"name\": \"SGD\", \"learning_rate\": "
        "{\"class_name\": \"Addons>Triangular2CyclicalLearningRate\", \"config\": " TRI2_CFG
        "}, \"decay\": 0.0, \"momentum\": 0.0, \"nesterov\": false, \"is_legacy_optimizer\": "
        "true}}",
        "{\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\",\"learning_rate\":{\"class_name\":"
        "\"Addons>Triangular2CyclicalLearningRate\",\"config\":" TRI2_OUT
        "},\"decay\":0.0,\"momentum\":0.0,\"nesterov\":false}}");
    expect_optimizer_text(
        "{\"class_name\": \"Addons>LazyAdam\", \"config\": {\"name\": \"LazyAdam\", "
        "\"learning_rate\": {\"class_name\": \"Addons>CyclicalLearningRate\", \"config\": "
        "{\"initial_learning_rate\": 0.001, \"maximal_learning_rate\": 0.01, \"scale_fn\": "
        "\"Custom>scale_fn\", \"step_size\": 10, \"scale_mode\": \"iterations\"}}, \"decay\": 0.0, "
        "\"beta_1\": 0.9, \"beta_2\": 0.999, \"epsilon\": 1e-07, \"amsgrad\": false}}",
        "{\"class_name\":\"Addons>LazyAdam\",\"config\":{\"name\":\"LazyAdam\",\"learning_rate\":{"
        "\"class_name\":\"Addons>CyclicalLearningRate\",\"config\":{\"initial_learning_rate\":0.001,"
        "\"maximal_learning_rate\":0.01,\"scale_fn\":\"Custom>scale_fn\",\"step_size\":10,"
        "\"scale_mode\":\"iterations\"}},\"decay\":0.0,\"beta_1\":0.9,\"beta_2\":0.999,\"epsilon\":"
        "1e-07,\"amsgrad\":false}}");
}

/* tf-keras 2.13+: serialize_keras_object's envelope, TF Addons' module and
 * registered name. */
OPTIM_TEST(test_nested_legacy_2_13)
{
    expect_optimizer_text(
        "{\"module\": \"keras.optimizers.legacy\", \"class_name\": \"SGD\", \"config\": {\"name\": "
        "\"SGD\", \"learning_rate\": {\"module\": "
        "\"tensorflow_addons.optimizers.cyclical_learning_rate\", \"class_name\": "
        "\"Triangular2CyclicalLearningRate\", \"config\": " TRI2_CFG
        ", \"registered_name\": \"Addons>Triangular2CyclicalLearningRate\"}, \"decay\": 0.0, "
        "\"momentum\": 0.0, \"nesterov\": false}, \"registered_name\": null}",
        "{\"module\":\"keras.optimizers.legacy\",\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\","
        "\"learning_rate\":{" MOD
        "\"class_name\":\"Triangular2CyclicalLearningRate\",\"config\":" TRI2_OUT
        ",\"registered_name\":\"Addons>Triangular2CyclicalLearningRate\"},\"decay\":0.0,"
        "\"momentum\":0.0,\"nesterov\":false},\"registered_name\":null}");
    expect_optimizer_text(
        "{\"module\": \"tensorflow_addons.optimizers.lazy_adam\", \"class_name\": \"LazyAdam\", "
        "\"config\": {\"name\": \"LazyAdam\", \"learning_rate\": {\"module\": "
        "\"tensorflow_addons.optimizers.cyclical_learning_rate\", \"class_name\": "
        "\"CyclicalLearningRate\", \"config\": {\"initial_learning_rate\": 0.001, "
        "\"maximal_learning_rate\": 0.01, \"scale_fn\": " FN_213(
            "Custom>scale_fn") ", \"step_size\": 10, \"scale_mode\": \"cycle\"}, \"registered_name\": "
                               "\"Addons>CyclicalLearningRate\"}, \"decay\": 0.0, \"beta_1\": 0.9, \"beta_2\": 0.999, "
                               "\"epsilon\": 1e-07, \"amsgrad\": false}, \"registered_name\": \"Addons>LazyAdam\"}",
        "{\"module\":\"tensorflow_addons.optimizers.lazy_adam\",\"class_name\":\"LazyAdam\","
        "\"config\":{\"name\":\"LazyAdam\",\"learning_rate\":{" MOD "\"class_name\":"
        "\"CyclicalLearningRate\",\"config\":{\"initial_learning_rate\":0.001,"
        "\"maximal_learning_rate\":0.01,\"scale_fn\":{\"module\":"
        "\"tensorflow_addons.optimizers.tests.cyclical_learning_rate_test\",\"class_name\":"
        "\"function\",\"config\":\"Custom>scale_fn\",\"registered_name\":\"Custom>scale_fn\"},"
        "\"step_size\":10,\"scale_mode\":\"cycle\"},\"registered_name\":"
        "\"Addons>CyclicalLearningRate\"},\"decay\":0.0,\"beta_1\":0.9,\"beta_2\":0.999,"
        "\"epsilon\":1e-07,\"amsgrad\":false},\"registered_name\":\"Addons>LazyAdam\"}");
}

/* A legacy SGD driven by a cyclical rate with decay: w -= lr * g with
 * lr = schedule(t) / (1 + decay * t) (OptimizerV2._decayed_lr), f64 bit for
 * bit against the reference, f32 through float32's lr. */
OPTIM_TEST(test_sgd_steps)
{
    const clr_case *c = &CASES[3]; /* Triangular2, iterations */
    char json[512];
    snprintf(json, sizeof json,
             "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s, \"decay\": 0.05, "
             "\"is_legacy_optimizer\": true}}",
             c->json);
    for (int d = 0; d < 2; d++) {
        const optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        const double w0[3] = {0.5, -0.25, 1.0};
        optim_var *w = optim_test_var("w", dt, 1, (int64_t[]){3}, w0);
        double wd[3] = {0.5, -0.25, 1.0};
        float wf[3] = {0.5f, -0.25f, 1.0f};
        for (int k = 0; k < 20; k++) {
            double g[3] = {sin(k + 0.5), cos(0.3 * k), 0.1 * k - 1};
            float gf[3] = {(float)g[0], (float)g[1], (float)g[2]};
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, d ? (void *)g : (void *)gf,
                                                                   1, (int64_t[]){3})),
                                w};
            assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
            const double lr = tfa_call(&c->ref, k) / (1.0 + 0.05 * (double)k);
            const float lrf = (float)tfa_call(&c->ref, k) / (1.0f + 0.05f * (float)k);
            for (int i = 0; i < 3; i++) wd[i] = wd[i] - g[i] * lr, wf[i] = wf[i] - gf[i] * lrf;
        }
        for (int i = 0; i < 3; i++)
            if (d) assert_eq(optim_var_get(w, i), wd[i]);
            else assert_eq((float)optim_var_get(w, i), wf[i]);
        optim_var_destroy(w);
        optim_destroy(opt);
    }
}

/* ---- refused ------------------------------------------------------------------------ */

typedef struct bad_case {
    const char *json;
    int code;
    const char *words[3];
} bad_case;

#define TRI(keys) CFG("TriangularCyclicalLearningRate", keys)
#define CLR(fn) CFG("CyclicalLearningRate", LR3(0.1, 1, 10) ", \"scale_fn\": " fn)

static const bad_case BAD[] = {
    {TRI(LR3(0.1, 1, 0)), OPTIM_ERANGE, {"TriangularCyclicalLearningRate", "step_size", "is 0"}},
    {TRI(LR3(0.1, 1, -40)), OPTIM_ERANGE, {"step_size", "-40", "(0, inf)"}},
    {CFG("ExponentialCyclicalLearningRate", LR3(0.1, 1, -0.5)),
     OPTIM_ERANGE,
     {"ExponentialCyclicalLearningRate", "step_size", "-0.5"}},
    {TRI(LR3(0.1, 1, 40) ", \"scale_mode\": \"triangular\""),
     OPTIM_EINVAL,
     {"scale_mode", "\"triangular\"", "\"cycle\", \"iterations\""}},
    {TRI(LR3(0.1, 1, 40) ", \"scale_mode\": \"Cycle\""), OPTIM_EINVAL, {"scale_mode", "Cycle", ""}},
    {TRI(LR3(0.1, 1, 40) ", \"scale_mode\": 1"), OPTIM_ETYPE, {"scale_mode", "a number", ""}},
    {TRI(LR3(0.1, 1, 40) ", \"scale_mode\": null"), OPTIM_ETYPE, {"scale_mode", "null", ""}},
    {TRI("\"initial_learning_rate\": 0.1, \"maximal_learning_rate\": 1"),
     OPTIM_EKEY,
     {"step_size", "required", ""}},
    {TRI("\"maximal_learning_rate\": 1, \"step_size\": 4"),
     OPTIM_EKEY,
     {"initial_learning_rate", "required", ""}},
    {TRI("\"initial_learning_rate\": 0.1, \"step_size\": 4"),
     OPTIM_EKEY,
     {"maximal_learning_rate", "required", ""}},
    {TRI("\"initial_learning_rate\": \"0.1\", \"maximal_learning_rate\": 1, \"step_size\": 4"),
     OPTIM_ETYPE,
     {"initial_learning_rate", "a string", ""}},
    {TRI(LR3(0.1, 1, 40) ", \"gamma\": 0.9"), OPTIM_EKEY, {"unknown config key 'gamma'", "", ""}},
    {TRI(LR3(0.1, 1, 40) ", \"scale_fn\": \"scale_fn\""),
     OPTIM_EKEY,
     {"TriangularCyclicalLearningRate", "'scale_fn'", "takes no scale_fn"}},
    {CFG("ExponentialCyclicalLearningRate", LR3(0.1, 1, 40) ", \"gamma\": \"0.9\""),
     OPTIM_ETYPE,
     {"gamma", "a string", ""}},
    {CFG("CyclicalLearningRate", LR3(0.1, 1, 10)),
     OPTIM_EKEY,
     {"CyclicalLearningRate", "'scale_fn' is required", ""}},
    {CFG("CyclicalLearningRate", LR3(0.1, 1, 10) ", \"gamma\": 0.9"),
     OPTIM_EKEY,
     {"unknown config key 'gamma'", "", ""}},
    {CLR("\"<lambda>\""), OPTIM_EINVAL, {"lambda", "2.11-2.12", "optim_register_scale_fn"}},
    {CLR("{\"class_name\": \"__lambda__\", \"config\": {\"value\": [\"4wEAAAAAAAAA\", null, "
         "null]}}"),
     OPTIM_EINVAL,
     {"lambda", "bytecode", "TriangularCyclicalLearningRate"}},
    {CLR("\"my_unregistered_fn\""),
     OPTIM_ENOTFOUND,
     {"'my_unregistered_fn'", "cannot run", "optim_register_scale_fn"}},
    {CLR(FN_213("Custom>other")), OPTIM_ENOTFOUND, {"'Custom>other'", "Python function", ""}},
    {CLR("0.5"), OPTIM_ETYPE, {"'scale_fn' is a number", "function's name", ""}},
    {CLR("null"), OPTIM_ETYPE, {"'scale_fn' is null", "", ""}},
    {CLR("{\"class_name\": \"ExponentialDecay\", \"config\": {}}"),
     OPTIM_ETYPE,
     {"an object of another kind", "\"class_name\": \"function\"", ""}},
    {CLR("{\"class_name\": \"function\", \"config\": 3}"),
     OPTIM_ETYPE,
     {"'scale_fn'", "of another kind", ""}},
};

OPTIM_TEST(test_bad_configs)
{
    register_scale_fns();
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        optim_schedule *s = NULL;
        optim_error err;
        int rc = optim_schedule_from_json(&s, BAD[i].json, &err);
        if (rc != BAD[i].code) print_error("%s: %d %s\n", BAD[i].json, rc, rc ? err.msg : "");
        assert_status(rc, BAD[i].code, &err);
        assert_null(s);
        for (int w = 0; w < 3; w++) {
            if (!strstr(err.msg, BAD[i].words[w])) print_error("%s\n", err.msg);
            assert_contains(err.msg, BAD[i].words[w]);
        }
    }
    /* Nested: the optimizer's message names learning_rate and the key. */
    optim_optimizer *opt = NULL;
    optim_error err;
    char json[512];
    snprintf(json, sizeof json,
             "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s, "
             "\"is_legacy_optimizer\": true}}",
             BAD[0].json);
    assert_status(optim_from_json(&opt, json, &err), OPTIM_ERANGE, &err);
    assert_null(opt);
    assert_contains(err.msg, "learning_rate");
    assert_contains(err.msg, "step_size");
}

OPTIM_TEST(test_scale_fn_registry)
{
    register_scale_fns();
    optim_error err;
    void *ctx = NULL;
    assert_ptr_equal(optim_find_scale_fn("power", &ctx), c_power);
    assert_ptr_equal(ctx, &power_base);
    assert_ptr_equal(optim_find_scale_fn("scale_fn", NULL), c_test_scale);
    /* Case-sensitive, exact names: "Custom>" is part of the name. */
    assert_null(optim_find_scale_fn("Power", &ctx));
    assert_null(ctx);
    assert_null(optim_find_scale_fn("Custom>power", NULL));
    assert_null(optim_find_scale_fn(NULL, NULL));
    assert_status(optim_register_scale_fn("power", c_power, NULL, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "already registered");
    assert_status(optim_register_scale_fn("nothing", NULL, NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_register_scale_fn("", c_power, NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_register_scale_fn(NULL, c_power, NULL, &err), OPTIM_EINVAL, &err);
    char long_name[200];
    memset(long_name, 'f', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_status(optim_register_scale_fn(long_name, c_power, NULL, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "longer than");
    assert_null(optim_find_scale_fn(long_name, NULL));
}

/* tfa_module in a user's table (version 2): found by "Addons>NAME", written
 * as TF Addons registers it, no name unless read; a version 1 table (no
 * tfa_module) is not TF Addons'; "Addons>" starts no class name. */
static double flat(const optim_schedule *s, int64_t step)
{
    (void)step;
    return optim_schedule_param(s, 0);
}

OPTIM_TEST(test_user_tfa_class)
{
    static const optim_param p[] = {
        {"rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_REQUIRED, NAN, 0, INFINITY}};
    optim_schedule_class cls = {.size = sizeof cls,
                                .version = OPTIM_SCHEDULE_CLASS_VERSION,
                                .name = "TestTfaFlat",
                                .params = p,
                                .n_params = 1,
                                .value = flat,
                                .tfa_module = "tensorflow_addons.test_flat"};
    optim_error err;
    assert_ok(optim_register_schedule_class(&cls, &err), &err);
    expect_text("{\"class_name\": \"Addons>TestTfaFlat\", \"config\": {\"rate\": 0.5}}",
                "{\"class_name\":\"Addons>TestTfaFlat\",\"config\":{\"rate\":0.5}}");
    expect_optimizer_text(
        "{\"module\": \"keras.optimizers.legacy\", \"class_name\": \"SGD\", \"config\": "
        "{\"name\": \"SGD\", \"learning_rate\": {\"module\": \"tensorflow_addons.test_flat\", "
        "\"class_name\": \"TestTfaFlat\", \"config\": {\"rate\": 0.5, \"name\": \"f\"}, "
        "\"registered_name\": \"Addons>TestTfaFlat\"}, \"decay\": 0.0, \"momentum\": 0.0, "
        "\"nesterov\": false}, \"registered_name\": null}",
        "{\"module\":\"keras.optimizers.legacy\",\"class_name\":\"SGD\",\"config\":{\"name\":"
        "\"SGD\",\"learning_rate\":{\"module\":\"tensorflow_addons.test_flat\",\"class_name\":"
        "\"TestTfaFlat\",\"config\":{\"rate\":0.5,\"name\":\"f\"},\"registered_name\":"
        "\"Addons>TestTfaFlat\"},\"decay\":0.0,\"momentum\":0.0,\"nesterov\":false},"
        "\"registered_name\":null}");
    optim_schedule_class v1 = cls;
    v1.name = "TestV1Flat";
    v1.version = 1;
    v1.size = (uint32_t)offsetof(optim_schedule_class, tfa_module);
    assert_ok(optim_register_schedule_class(&v1, &err), &err);
    assert_non_null(optim_find_schedule_class("TestV1Flat"));
    assert_null(optim_find_schedule_class("Addons>TestV1Flat"));
    expect_text("{\"class_name\": \"TestV1Flat\", \"config\": {\"rate\": 0.5}}",
                "{\"class_name\":\"TestV1Flat\",\"config\":{\"rate\":0.5,\"name\":null}}");
    optim_schedule_class bad = cls;
    bad.name = "Addons>TestBad";
    assert_status(optim_register_schedule_class(&bad, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "Addons>");
    bad.name = "TestBad";
    bad.tfa_module = "";
    assert_status(optim_register_schedule_class(&bad, &err), OPTIM_EINVAL, &err);
    assert_null(optim_find_schedule_class("TestBad"));
}

int main(void) { return optim_test_run(); }
