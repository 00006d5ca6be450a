/* The class table's Keras facts and pattern keys (optim/optimizer_class.h,
 * version 4): what must stay in step with OPTIM_BUILTIN_CLASSES, and the
 * checks a user table meets.
 *
 * - Every built-in is a checked table whose facts agree with its flags, and
 *   says where Keras has it: a Keras 3 module unless listed below with the
 *   reason, a tf-keras module or a TF Addons name unless Keras 3 only or
 *   listed below.
 * - A version 4 user class with bad facts or bad pattern keys is refused,
 *   with a message naming the field.
 * - A version 3 table still loads, its bytes past its size (where version 4
 *   keeps the facts) never read; a version 4 table likewise without the
 *   version 5 bytes_per_param hook (tests/test_bytes_per_param.c).
 * - A user class's facts and pattern keys work as the built-ins' do:
 *   module, "Addons>" name, default name, pattern lists read, kept and
 *   written back. */
#include "testutil.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizer/params.h" /* optim__class_check */

/* Version 4 appends: a version 3 table's size ends before the facts. */
_Static_assert(offsetof(optim_class, keras3_module) >=
                   offsetof(optim_class, reduce_phase) + sizeof(void (*)(void)),
               "the version 4 fields follow every version 3 field");
/* Version 5 appends the bytes_per_param hook after every version 4 field. */
_Static_assert(offsetof(optim_class, bytes_per_param) >=
                   offsetof(optim_class, nonnegative_slots) + sizeof(const char *const *),
               "the version 5 hook follows every version 4 field");
_Static_assert(offsetof(optim_class, min_slots) >=
                   offsetof(optim_class, bytes_per_param) + sizeof(void *),
               "min_slots follows the bytes_per_param hook");
_Static_assert(OPTIM_CLASS_VERSION == 5, "a new version adds its rows to this test");

/* ---- the built-ins ------------------------------------------------------------- */

#define ENTRY(sym) &sym,
static const optim_class *const builtins[] = {OPTIM_BUILTIN_CLASSES(ENTRY)};
#undef ENTRY
#define NBUILTIN (sizeof builtins / sizeof *builtins)

/* Built-ins Keras 3 does not have, and why (a Keras 3 config writes them as
 * custom objects). Each must be a built-in without keras3_module. */
static const char *const no_keras3[][2] = {
    {"LazyAdam", "TF Addons only"},
    {"MovingAverage", "TF Addons only"},
    {"SWA", "TF Addons only"},
    {"Lookahead", "TF Addons only"},
    {"ApplyIfFinite", "optim's own wrapper"},
};

/* Built-ins with a legacy form but neither a tf-keras module nor a TF Addons
 * name, and why. */
static const char *const no_legacy_home[][2] = {
    {"ApplyIfFinite", "optim's own wrapper"},
};

static const char *why(const char *const list[][2], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i][0], name) == 0) return list[i][1];
    return NULL;
}

#define WHY(list, name) why(list, sizeof list / sizeof *list, name)

OPTIM_TEST(test_builtins_say_where_keras_has_them)
{
    (void)state;
    for (size_t i = 0; i < NBUILTIN; i++) {
        const optim_class *c = builtins[i];
        assert_eq(c->version, OPTIM_CLASS_VERSION);
        assert_ptr_equal(optim_find_class(c->name), c);
        const int k3 = !(c->flags & OPTIM_CLASS_LEGACY_ONLY);
        const int legacy = !(c->flags & OPTIM_CLASS_KERAS3_ONLY);
        if (!c->keras3_module && k3 && !WHY(no_keras3, c->name))
            fail_msg("%s: no keras3_module, and no_keras3 does not say why", c->name);
        if (c->keras3_module && WHY(no_keras3, c->name))
            fail_msg("%s: has keras3_module, but no_keras3 lists it", c->name);
        const int home = c->legacy_module || c->tfa_name;
        if (legacy && !home && !WHY(no_legacy_home, c->name))
            fail_msg("%s: legacy form without legacy_module or tfa_name, and no_legacy_home "
                     "does not say why",
                     c->name);
        if (home && WHY(no_legacy_home, c->name))
            fail_msg("%s: has a legacy home, but no_legacy_home lists it", c->name);
        /* The registration check (facts against flags) on every built-in. */
        optim_error err;
        assert_ok(optim__class_check(c, &err), &err);
    }
}

/* Every name in the why-not lists is a built-in (a renamed or removed class
 * leaves no stale reason behind). */
OPTIM_TEST(test_why_not_lists_name_builtins)
{
    (void)state;
    const char *const(*lists[2])[2] = {no_keras3, no_legacy_home};
    const size_t n[2] = {sizeof no_keras3 / sizeof *no_keras3,
                         sizeof no_legacy_home / sizeof *no_legacy_home};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < n[l]; i++) {
            size_t k = 0;
            while (k < NBUILTIN && strcmp(builtins[k]->name, lists[l][i][0]) != 0) k++;
            if (k == NBUILTIN) fail_msg("'%s' is listed but is no built-in", lists[l][i][0]);
        }
}

/* ---- a user class ----------------------------------------------------------------- */

static void apply_dense(const optim_dense_update *u) { (void)u; }

static const optim_param my_params[] = {
    {"momentum", OPTIM_PARAM_FLOAT, 0, 0.0, 0.0, 1.0},
};

static const optim_param my_patterns[] = {
    {"skip", OPTIM_PARAM_PATTERNS, OPTIM_PARAM_NULLABLE, NAN, 0, 0},
    {"keep", OPTIM_PARAM_PATTERNS, 0, 0.0, 0, 0},
    {"old_skip", OPTIM_PARAM_PATTERNS, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, NAN, 0, 0},
};

static optim_class user_class(const char *name)
{
    optim_class c = {
        .size = sizeof(optim_class),
        .version = OPTIM_CLASS_VERSION,
        .name = name,
        .flags = OPTIM_CLASS_ELEMENTWISE,
        .default_learning_rate = 0.01,
        .params = my_params,
        .n_params = 1,
        .apply_dense = apply_dense,
        .pattern_params = my_patterns,
        .n_pattern_params = 3,
    };
    return c;
}

/* Registers c and expects OPTIM_EINVAL with a message holding needle. */
static void refused(const optim_class *c, const char *needle)
{
    optim_error err;
    assert_status(optim_register_class(c, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, needle);
    optim_optimizer *opt = NULL;
    assert_status(optim_create(&opt, c, NULL, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, needle);
    assert_null(opt);
}

/* One bad set of facts and the message it gets. */
typedef struct bad_facts {
    uint32_t flags; /* added to the class's */
    const char *keras3_module, *legacy_module, *tfa_name;
    uint32_t keras_flags;
    const char *why;
} bad_facts;

OPTIM_TEST(test_bad_facts_refused)
{
    (void)state;
    static const bad_facts bad[] = {
        {0, "keras..optimizers", NULL, NULL, 0, "keras3_module is \"keras..optimizers\""},
        {0, NULL, NULL, "Addons>X", 0, "tfa_name is \"Addons>X\", expected an identifier"},
        {0, NULL, "", NULL, 0, "legacy_module is \"\""},
        {OPTIM_CLASS_KERAS3_ONLY, NULL, NULL, "BadFacts", 0,
         "tfa_name is set, but the class is KERAS3_ONLY"},
        {OPTIM_CLASS_KERAS3_ONLY, NULL, "keras.optimizers.legacy", NULL, 0,
         "legacy_module is set, but the class is KERAS3_ONLY"},
        {OPTIM_CLASS_LEGACY_ONLY, "keras.optimizers", NULL, NULL, 0,
         "keras3_module is set, but the class is LEGACY_ONLY"},
        {0, NULL, "keras.optimizers.legacy", "BadFacts", 0, "both legacy_module and tfa_name"},
        {0, NULL, NULL, NULL, 6, "keras_flags is 0x6"},
        {OPTIM_CLASS_LEGACY_ONLY, NULL, NULL, NULL, OPTIM_KERAS_TF_KERAS,
         "OPTIM_KERAS_TF_KERAS, but the class is LEGACY_ONLY"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        optim_class c = user_class("BadFacts");
        c.flags |= bad[i].flags;
        c.keras3_module = bad[i].keras3_module;
        c.legacy_module = bad[i].legacy_module;
        c.tfa_name = bad[i].tfa_name;
        c.keras_flags = bad[i].keras_flags;
        refused(&c, bad[i].why);
    }
}

OPTIM_TEST(test_bad_pattern_keys_refused)
{
    (void)state;
    static const optim_param in_params[] = {
        {"skip", OPTIM_PARAM_PATTERNS, 0, 0.0, 0, 0},
    };
    static const optim_param bad[][1] = {
        {{"skip", OPTIM_PARAM_FLOAT, 0, 0.0, 0, 0}},
        {{"skip", OPTIM_PARAM_PATTERNS, OPTIM_PARAM_DYNAMIC, 0.0, 0, 0}},
        {{"skip", OPTIM_PARAM_PATTERNS, OPTIM_PARAM_LEGACY_ONLY | OPTIM_PARAM_KERAS3_ONLY, 0.0, 0,
          0}},
        {{"skip", OPTIM_PARAM_PATTERNS, 0, NAN, 0, 0}},
        {{"skip", OPTIM_PARAM_PATTERNS, 0, 1.0, 0, 0}},
        {{"momentum", OPTIM_PARAM_PATTERNS, 0, 0.0, 0, 0}},
        {{"clipnorm", OPTIM_PARAM_PATTERNS, 0, 0.0, 0, 0}},
        {{"name", OPTIM_PARAM_PATTERNS, 0, 0.0, 0, 0}},
    };
    static const char *const why[] = {
        "pattern_params[0] ('skip') is malformed",
        "pattern_params[0] ('skip') is malformed",
        "pattern_params[0] ('skip') is malformed",
        "default nan, expected 0",
        "default 1, expected 0",
        "'momentum' is a param",
        "'clipnorm' is a base option",
        "'name' is a reserved key",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        optim_class c = user_class("BadPatterns");
        c.pattern_params = bad[i];
        c.n_pattern_params = 1;
        refused(&c, why[i]);
    }
    optim_class c = user_class("BadPatterns");
    c.pattern_params = NULL;
    refused(&c, "pattern_params is NULL, n_pattern_params 3");
    static const optim_param twice[] = {
        {"skip", OPTIM_PARAM_PATTERNS, OPTIM_PARAM_LEGACY_ONLY, 0.0, 0, 0},
        {"skip", OPTIM_PARAM_PATTERNS, 0, 0.0, 0, 0},
    };
    c = user_class("BadPatterns");
    c.pattern_params = twice;
    c.n_pattern_params = 2;
    refused(&c, "'skip' is an earlier pattern key");
    c = user_class("BadPatterns");
    c.params = in_params;
    refused(&c, "belongs in pattern_params");
}

/* A version 3 table: its size ends before the facts, whatever the bytes
 * after it hold; it loads, and is written as a custom object. */
OPTIM_TEST(test_version3_table_loads)
{
    (void)state;
    optim_class c = user_class("FactsV3");
    c.version = 3;
    c.size = (uint32_t)offsetof(optim_class, keras3_module);
    c.keras3_module = "not..checked";
    c.tfa_name = "Not>Read";
    c.keras_flags = 0xff;
    c.pattern_params = NULL;
    optim_error err;
    assert_ok(optim_register_class(&c, &err), &err);
    const optim_class *found = optim_find_class("FactsV3");
    assert_non_null(found);
    optim_optimizer *opt = NULL;
    assert_ok(optim_from_json(&opt, "{\"class_name\": \"FactsV3\", \"config\": {}}", &err), &err);
    char *s = optim_serialize(opt);
    assert_contains(s, "\"module\":null");
    assert_contains(s, "\"registered_name\":\"FactsV3\"");
    assert_null(optim_param_patterns(opt, 0));
    optim_free(s);
    optim_destroy(opt);
}

/* A user class's facts: Keras 3 module, "Addons>" name and default name. */
OPTIM_TEST(test_user_facts_written)
{
    (void)state;
    optim_class c = user_class("FactsUser");
    c.keras3_module = "my.optimizers";
    c.tfa_name = "FACTSUSER";
    optim_error err;
    assert_ok(optim_register_class(&c, &err), &err);
    optim_optimizer *opt = NULL;
    assert_ok(optim_from_json(&opt, "{\"class_name\": \"FactsUser\", \"config\": {}}", &err), &err);
    char *s = optim_serialize(opt);
    assert_contains(s, "\"module\":\"my.optimizers\"");
    assert_contains(s, "\"registered_name\":null");
    optim_free(s);
    optim_destroy(opt);
    assert_ok(optim_from_json_as(&opt, "{\"class_name\": \"FactsUser\", \"config\": {}}",
                                 OPTIM_LEGACY, &err),
              &err);
    s = optim_serialize(opt);
    assert_contains(s, "\"class_name\":\"Addons>FACTSUSER\"");
    assert_contains(s, "\"name\":\"FACTSUSER\"");
    /* What it writes reads back (lookup strips "Addons>", ignores case). */
    optim_optimizer *back = NULL;
    assert_ok(optim_from_json(&back, s, &err), &err);
    assert_eq(optim_generation_of(back), OPTIM_LEGACY);
    optim_destroy(back);
    optim_free(s);
    optim_destroy(opt);
}

/* Pattern keys: defaults (None, [], absent in the other generation), read,
 * matched, written back in place of the class's own code, bad ones refused. */
OPTIM_TEST(test_user_pattern_keys)
{
    (void)state;
    optim_class c = user_class("FactsPatterns");
    optim_error err;
    assert_ok(optim_register_class(&c, &err), &err);
    optim_optimizer *opt = NULL;
    assert_ok(optim_from_json(&opt, "{\"class_name\": \"FactsPatterns\", \"config\": {}}", &err),
              &err);
    assert_null(optim_param_patterns(opt, 0));
    assert_non_null(optim_param_patterns(opt, 1));
    assert_null(optim_param_patterns(opt, 3));
    char *s = optim_get_config(opt);
    assert_contains(s, "\"momentum\":0.0,\"skip\":null,\"keep\":[]}");
    optim_free(s);
    optim_destroy(opt);
    assert_ok(optim_from_json(&opt,
                              "{\"class_name\": \"FactsPatterns\", \"config\": "
                              "{\"keep\": null, \"skip\": [\"^dense/\", \"bias$\"]}}",
                              &err),
              &err);
    assert_eq(optim_name_patterns_match(optim_param_patterns(opt, 0), "dense/kernel"), 1);
    assert_eq(optim_name_patterns_match(optim_param_patterns(opt, 0), "out/bias"), 1);
    assert_eq(optim_name_patterns_match(optim_param_patterns(opt, 0), "out/kernel"), 0);
    assert_non_null(optim_param_patterns(opt, 1)); /* not NULLABLE: null is [] */
    s = optim_get_config(opt);
    assert_contains(s, "\"skip\":[\"^dense/\",\"bias$\"],\"keep\":[]");
    optim_free(s);
    optim_destroy(opt);
    /* The legacy-only key, in its generation only. */
    assert_ok(optim_from_json_as(&opt,
                                 "{\"class_name\": \"FactsPatterns\", \"config\": "
                                 "{\"old_skip\": [\"x\"]}}",
                                 OPTIM_LEGACY, &err),
              &err);
    s = optim_get_config(opt);
    assert_contains(s, "\"old_skip\":[\"x\"]");
    optim_free(s);
    optim_destroy(opt);
    assert_status(optim_from_json_as(&opt,
                                     "{\"class_name\": \"FactsPatterns\", \"config\": "
                                     "{\"old_skip\": [\"x\"]}}",
                                     OPTIM_KERAS3, &err),
                  OPTIM_EKEY, &err);
    assert_contains(err.msg, "old_skip");
    assert_status(optim_from_json(&opt,
                                  "{\"class_name\": \"FactsPatterns\", \"config\": "
                                  "{\"skip\": [\"ok\", \"(\"]}}",
                                  &err),
                  OPTIM_EINVAL, &err);
    assert_contains(err.msg, "FactsPatterns: config key skip[1]");
    assert_status(optim_from_json(&opt,
                                  "{\"class_name\": \"FactsPatterns\", \"config\": "
                                  "{\"keep\": \"bias\"}}",
                                  &err),
                  OPTIM_ETYPE, &err);
    assert_contains(err.msg, "config key 'keep' is a string, expected a list of strings or null");
}

int main(void) { return optim_test_run(); }
