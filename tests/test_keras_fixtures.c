/* Files as real Keras writes them (tests/data/keras, see its README): every
 * fixture loads with the right generation, and optim writes it back key for
 * key, value for value, in the same order and number form (1024 stays 1024,
 * 1024.0 stays 1024.0, 1e-07 stays 1e-07), so the bytes equal the fixture's
 * apart from whitespace. The comparison itself is tested: a missing, extra
 * or reordered key and a changed value or number form each fail it. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "optim/optimizer.h"

#define DIR_KERAS OPTIM_TEST_DATA_DIR "/keras"

/* ---- the comparison ------------------------------------------------------------ */

static const char *form_name(optim__num_form f)
{
    return f == OPTIM__NUM_INT ? "an int" : f == OPTIM__NUM_FLOAT ? "a float" : "a number";
}

/* First difference between two values, under path; 0 when equal. */
static int diff(const cJSON *a, const cJSON *b, const char *path, char *why, size_t n)
{
    if ((a->type & 0xFF) != (b->type & 0xFF))
        return snprintf(why, n, "%s: %s in the fixture, %s written", path, optim__json_type_name(a),
                        optim__json_type_name(b)),
               1;
    if (cJSON_IsNumber(a) &&
        (a->valuedouble != b->valuedouble ||
         optim__json_number_form(a) != optim__json_number_form(b)))
        return snprintf(why, n, "%s: %.17g (%s) in the fixture, %.17g (%s) written", path,
                        a->valuedouble, form_name(optim__json_number_form(a)), b->valuedouble,
                        form_name(optim__json_number_form(b))),
               1;
    if (cJSON_IsString(a) && strcmp(a->valuestring, b->valuestring) != 0)
        return snprintf(why, n, "%s: \"%s\" in the fixture, \"%s\" written", path, a->valuestring,
                        b->valuestring),
               1;
    const cJSON *x = a->child, *y = b->child;
    for (int k = 0; x && y; x = x->next, y = y->next, k++) {
        char sub[512];
        if (cJSON_IsObject(a) && strcmp(x->string, y->string) != 0)
            return snprintf(why, n, "%s: key %d is '%s' in the fixture, '%s' written", path, k,
                            x->string, y->string),
                   1;
        if (cJSON_IsObject(a)) snprintf(sub, sizeof sub, "%s.%s", path, x->string);
        else snprintf(sub, sizeof sub, "%s[%d]", path, k);
        if (diff(x, y, sub, why, n)) return 1;
    }
    if (x)
        return snprintf(why, n, "%s: '%s' missing from what is written", path,
                        x->string ? x->string : "element"),
               1;
    if (y)
        return snprintf(why, n, "%s: '%s' written, not in the fixture", path,
                        y->string ? y->string : "element"),
               1;
    return 0;
}

/* text without the whitespace between tokens (strings kept as they are). */
static char *squeeze(const char *text)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    assert_non_null(out);
    for (int in_string = 0; *text; text++) {
        if (in_string && *text == '\\' && text[1]) {
            *o++ = *text++;
            *o++ = *text;
            continue;
        }
        if (*text == '"') in_string = !in_string;
        if (in_string || !strchr(" \t\r\n", *text)) *o++ = *text;
    }
    *o = '\0';
    return out;
}

/* Whether `got` equals `want` key for key, value for value, in order and
 * in number form, and byte for byte apart from whitespace. */
static int same_as_fixture(const char *want, const char *got, char *why, size_t n)
{
    cJSON *a = optim__json_parse(want, NULL, 1), *b = optim__json_parse(got, NULL, 1);
    int differs = !a || !b ? (snprintf(why, n, "not valid JSON"), 1) : diff(a, b, "$", why, n);
    cJSON_Delete(a);
    cJSON_Delete(b);
    if (differs) return 0;
    char *sa = squeeze(want), *sb = squeeze(got);
    int same = strcmp(sa, sb) == 0;
    if (!same) snprintf(why, n, "the same values, written differently:\n  %s\n  %s", sa, sb);
    free(sa);
    free(sb);
    return same;
}

/* ---- the fixtures --------------------------------------------------------------- */

typedef struct fixture {
    const char *file;
    optim_generation gen;
} fixture;

static const fixture fixtures[] = {
    {"tf_keras_legacy_adam.json", OPTIM_LEGACY},
    {"tf_keras_legacy_sgd_cosine.json", OPTIM_LEGACY},
    {"tf_keras_legacy_rmsprop_module.json", OPTIM_LEGACY},
    {"tf_keras_legacy_loss_scale_fixed.json", OPTIM_LEGACY},
    {"tfa_lamb.json", OPTIM_LEGACY},
    {"tfa_lookahead.json", OPTIM_LEGACY},
    {"tf_keras_new_adam.json", OPTIM_KERAS3},
    {"tf_keras_new_sgd_schedule.json", OPTIM_KERAS3},
    {"keras3_adam_schedule.json", OPTIM_KERAS3},
    {"keras3_cosine_warmup.json", OPTIM_KERAS3},
    {"keras3_loss_scale_sgd.json", OPTIM_KERAS3},
    {"keras3_ints_as_given.json", OPTIM_KERAS3},
    {"keras3_muon.json", OPTIM_KERAS3},
    {"keras3_schedule_free_adamw.json", OPTIM_KERAS3},
    {"keras3_multi_optimizer.json", OPTIM_KERAS3},
};
#define N_FIXTURES (sizeof fixtures / sizeof *fixtures)

static char *read_fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", DIR_KERAS, name);
    FILE *f = fopen(path, "rb");
    if (!f) print_error("cannot open %s\n", path);
    assert_non_null(f);
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_lt(n, sizeof buf - 1);
    buf[n] = '\0';
    return buf;
}

/* Every object with a class_name (the optimizer, nested optimizers and
 * schedules) has the other generation's refused keys absent: legacy, no
 * is_legacy_optimizer anywhere (OptimizerV2's constructor refuses it). */
static void assert_no_refused_key(const cJSON *v)
{
    for (const cJSON *c = v->child; c; c = c->next) {
        if (c->string) assert_string_not_equal(c->string, "is_legacy_optimizer");
        assert_no_refused_key(c);
    }
}

static void check_fixture(void **state)
{
    const fixture *fx = *state;
    const char *text = read_fixture(fx->file);
    optim_optimizer *opt = optim_test_make(text);
    assert_eq(optim_generation_of(opt), fx->gen);
    char *out = optim_serialize(opt);
    assert_non_null(out);
    char why[1024];
    if (!same_as_fixture(text, out, why, sizeof why)) {
        print_error("%s: %s\nfixture:     %swritten back: %s\n", fx->file, why, text, out);
        fail();
    }
    if (fx->gen == OPTIM_LEGACY) {
        cJSON *o = cJSON_Parse(out);
        assert_no_refused_key(o);
        cJSON_Delete(o);
    }
    /* optim -> optim: the same bytes again. */
    optim_optimizer *back = optim_test_make(out);
    char *again = optim_serialize(back);
    assert_string_equal(out, again);
    optim_free(again);
    optim_destroy(back);
    optim_free(out);
    optim_destroy(opt);
}

/* No fixture left out of the table above. */
OPTIM_TEST(test_every_fixture_checked)
{
    DIR *d = opendir(DIR_KERAS);
    assert_non_null(d);
    size_t seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        int listed = 0;
        for (size_t i = 0; i < N_FIXTURES; i++) listed |= strcmp(fixtures[i].file, e->d_name) == 0;
        if (!listed) print_error("tests/data/keras/%s is not in this test's table\n", e->d_name);
        assert_true(listed);
        seen++;
    }
    closedir(d);
    assert_int_equal(seen, N_FIXTURES);
}

/* The comparison fails for every kind of difference. */
OPTIM_TEST(test_comparison_catches_differences)
{
    static const char want[] =
        "{\"class_name\": \"Adam\", \"config\": {\"name\": \"adam\", \"learning_rate\": "
        "{\"class_name\": \"S\", \"config\": {\"steps\": 1000}}, \"epsilon\": 1e-07, "
        "\"scale\": 1024.0, \"tags\": [\"a\", \"b\"], \"amsgrad\": false}}";
    static const char *const bad[] = {
        /* a key missing, extra, reordered */
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"]}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":false,\"x\":null}}",
        "{\"class_name\":\"Adam\",\"config\":{\"learning_rate\":{\"class_name\":\"S\",\"config\":{\"steps\":1000}},"
        "\"name\":\"adam\",\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":false}}",
        /* a value: nested number, int for float, float for int, text of a float, string, list, bool */
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1001}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":false}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":1024,\"tags\":[\"a\",\"b\"],\"amsgrad\":false}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000.0}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":false}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-7,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":false}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"Adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":false}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\"],\"amsgrad\":false}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":true}}",
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":{\"class_name\":\"S\",\"config\":"
        "{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":null}}",
    };
    char why[1024];
    static const char same[] =
        "{\"class_name\":\"Adam\",\"config\":{\"name\":\"adam\",\"learning_rate\":"
        "{\"class_name\":\"S\",\"config\":{\"steps\":1000}},\"epsilon\":1e-07,\"scale\":"
        "1024.0,\"tags\":[\"a\",\"b\"],\"amsgrad\":false}}";
    assert_true(same_as_fixture(want, same, why, sizeof why));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = '\0';
        if (same_as_fixture(want, bad[i], why, sizeof why))
            print_error("case %zu passed: %s\n", i, bad[i]);
        assert_false(same_as_fixture(want, bad[i], why, sizeof why));
        assert_ne(why[0], '\0');
    }
}

int main(void)
{
    for (size_t i = 0; i < N_FIXTURES; i++)
        optim_test_add(
            (struct CMUnitTest){fixtures[i].file, check_fixture, NULL, NULL, (void *)&fixtures[i]});
    return optim_test_run();
}
