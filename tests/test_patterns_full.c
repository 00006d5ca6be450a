/* optim_name_patterns' full-match mode (OPTIM_NAME_PATTERNS_FULL: Python's
 * re.fullmatch, as MultiOptimizer matches its optimizer_map), its
 * config-key messages (OPTIM_NAME_PATTERNS_KEYS) and optim_name_patterns_find,
 * beside the search mode the weight-decay exclusions use. */
#include "testutil.h"

#include <string.h>

/* Compiles list (n patterns) with flags; fails the test on error. */
static optim_name_patterns *compile(const char *const *list, size_t n, uint32_t flags)
{
    optim_name_patterns *p = NULL;
    optim_error err;
    assert_ok(optim_name_patterns_compile_flags(&p, list, n, "pats", flags, &err), &err);
    return p;
}

/* Whether the one pattern matches name, compiled with flags. */
static int one(const char *pattern, const char *name, uint32_t flags)
{
    optim_name_patterns *p = compile(&pattern, 1, flags);
    const int hit = optim_name_patterns_match(p, name);
    assert_eq(optim_name_patterns_find(p, name, 0), hit ? 0 : -1);
    optim_name_patterns_free(p);
    return hit;
}

/* A full match covers the whole name; a search finds it anywhere. */
OPTIM_TEST(test_full_covers_the_whole_name)
{
    static const struct {
        const char *pattern, *name;
        int full, search;
    } cases[] = {
        {"kernel", "kernel", 1, 1},
        {"kernel", "dense/kernel", 0, 1}, /* found at the end only */
        {"kernel", "kernel/0", 0, 1}, /* a prefix only */
        {"dense/.*", "dense/kernel", 1, 1},
        {"^dense/.*$", "dense/kernel", 1, 1}, /* anchors of its own change nothing */
        {".*kernel.*", "conv/kernel/0", 1, 1},
        {"a|dense/.*", "dense/bias", 1, 1}, /* the alternation is the whole pattern */
        {"a|dense/.*", "ab", 0, 1},
        /* The first alternative matches a prefix, the second the whole name:
         * the longest match counts, as re.fullmatch tries every way. */
        {"dense|dense/kernel", "dense/kernel", 1, 1},
        {"(a)\\1", "aa", 1, 1}, /* a back-reference keeps its group number */
        {"(a)\\1", "aaa", 0, 1},
        {".*", "", 1, 1}, /* an empty name */
        {"x?", "", 1, 1},
        {"x", "", 0, 0},
        /* Python's meaning, not POSIX's: a set of '[', ':', 'd', 'i', 'g',
         * 't', then one or more ']' (test_patterns_python.c has more). */
        {"[[:digit:]]+", "123", 0, 0},
        {"[[:digit:]]+", "d]", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (one(cases[i].pattern, cases[i].name, OPTIM_NAME_PATTERNS_FULL) != cases[i].full)
            fail_msg("full: '%s' on '%s', expected %d", cases[i].pattern, cases[i].name,
                     cases[i].full);
        if (one(cases[i].pattern, cases[i].name, 0) != cases[i].search)
            fail_msg("search: '%s' on '%s', expected %d", cases[i].pattern, cases[i].name,
                     cases[i].search);
    }
}

/* find: the first matching index at or after from, -1 for none; each
 * index once (MultiOptimizer asks again after a hit to refuse a second). */
OPTIM_TEST(test_find_gives_each_matching_index)
{
    static const char *const pats[] = {"conv/.*", ".*kernel", "dense/kernel", "bias"};
    optim_name_patterns *p = compile(pats, 4, OPTIM_NAME_PATTERNS_FULL);
    assert_eq(optim_name_patterns_find(p, "dense/kernel", 0), 1);
    assert_eq(optim_name_patterns_find(p, "dense/kernel", 2), 2);
    assert_eq(optim_name_patterns_find(p, "dense/kernel", 3), -1);
    assert_eq(optim_name_patterns_find(p, "conv/kernel", 0), 0);
    assert_eq(optim_name_patterns_find(p, "conv/kernel", 1), 1);
    assert_eq(optim_name_patterns_find(p, "dense/bias", 0), -1); /* "bias" is not the whole name */
    assert_eq(optim_name_patterns_find(p, "bias", 0), 3);
    assert_eq(optim_name_patterns_find(p, "bias", 99), -1);
    assert_eq(optim_name_patterns_find(p, NULL, 0), -1);
    assert_eq(optim_name_patterns_find(NULL, "bias", 0), -1);
    assert_eq(optim_name_patterns_match(p, "dense/bias"), 0);
    assert_eq(optim_name_patterns_match(p, "bias"), 1);
    const char *const *src = optim_name_patterns_sources(p);
    for (size_t i = 0; i < 4; i++) assert_string_equal(src[i], pats[i]);
    assert_null(src[4]);
    optim_name_patterns_free(p);
    /* The search mode: the same indices where the pattern is found. */
    p = compile(pats, 4, 0);
    assert_eq(optim_name_patterns_find(p, "dense/bias", 0), 3);
    assert_eq(optim_name_patterns_find(p, "my/dense/kernel/0", 0), 1);
    optim_name_patterns_free(p);
}

/* Errors: messages by index, or with KEYS as a config object's keys;
 * unknown flag bits refused. */
OPTIM_TEST(test_full_mode_errors)
{
    optim_name_patterns *p = NULL;
    optim_error err;
    static const char *const bad[] = {"ok", "("};
    assert_status(
        optim_name_patterns_compile_flags(&p, bad, 2, "pats", OPTIM_NAME_PATTERNS_FULL, &err),
        OPTIM_EINVAL, &err);
    assert_contains(err.msg, "pats[1] ('(') is not a valid regular expression");
    assert_null(p);
    assert_status(optim_name_patterns_compile_flags(
                      &p, bad, 2, "MultiOptimizer: optimizer_map",
                      OPTIM_NAME_PATTERNS_FULL | OPTIM_NAME_PATTERNS_KEYS, &err),
                  OPTIM_EINVAL, &err);
    assert_contains(err.msg, "MultiOptimizer: optimizer_map['(']: not a valid regular expression");
    static const char *const big[] = {"^(((((b*)+)+)+)+)+"};
    assert_status(
        optim_name_patterns_compile_flags(&p, big, 1, "m", OPTIM_NAME_PATTERNS_KEYS, &err),
        OPTIM_EINVAL, &err);
    assert_contains(err.msg, "m['^(((((b*)+)+)+)+)+']: too large to compile");
    assert_status(optim_name_patterns_compile_flags(&p, bad, 1, "pats", 4, &err), OPTIM_EINVAL,
                  &err);
    assert_contains(err.msg, "pats: flags is 0x4, expected a combination of 0x3");
    assert_status(optim_name_patterns_compile_flags(NULL, bad, 1, "pats", 0, &err), OPTIM_EINVAL,
                  &err);
    assert_status(optim_name_patterns_compile_flags(&p, NULL, 1, "pats", 0, &err), OPTIM_EINVAL,
                  &err);
    assert_ok(optim_name_patterns_compile_flags(&p, NULL, 0, NULL, OPTIM_NAME_PATTERNS_FULL, &err),
              &err);
    assert_eq(optim_name_patterns_find(p, "x", 0), -1);
    optim_name_patterns_free(p);
}

/* MultiOptimizer routes by the full-match mode: a pattern found inside a
 * name but not matching all of it leaves the variable to the default. */
OPTIM_TEST(test_multi_optimizer_routes_by_full_match)
{
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": {\"class_name\": "
        "\"OptimizerMap\", \"config\": {\"default_optimizer\": \"sgd\", \"optimizer_map\": "
        "{\"kernel\": \"adam\", \"dense|dense/bias\": \"rmsprop\"}}}}}");
    const int64_t one_el = 1;
    const double x = 1;
    optim_var *v[3] = {optim_test_var("dense/kernel", OPTIM_F64, 1, &one_el, &x),
                       optim_test_var("dense/bias", OPTIM_F64, 1, &one_el, &x),
                       optim_test_var("kernel", OPTIM_F64, 1, &one_el, &x)};
    assert_ok(optim_build(opt, v, 3), opt);
    /* "kernel" is in "dense/kernel" but is not all of it: the default (SGD, no slots). */
    assert_null(optim_get_slot(optim_wrapper_inner_at(opt, 0), v[0], "m"));
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 1), v[1], "rms"));
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 0), v[2], "m"));
    optim_test_free(opt, v[0], v[1], v[2]);
}

int main(void) { return optim_test_run(); }
