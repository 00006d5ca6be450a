/* Keras's pattern keys are Python regular expressions (re.search for
 * exclude_from_weight_decay and Muon's exclude_layers, re.fullmatch for
 * MultiOptimizer's optimizer_map); optim_name_patterns matches them as
 * Python does (src/core/pyre.c), or refuses what it cannot (issue 27,
 * defect 2: glibc read "dense_\d+" as "dense_d+"). The expected values are
 * Python 3.11's re.search and re.fullmatch on each pair, run once. */
#include "opt_table.h"

#include <string.h>

static int hit(const char *pattern, const char *name, uint32_t flags)
{
    optim_name_patterns *p = NULL;
    optim_error err;
    assert_ok(optim_name_patterns_compile_flags(&p, &pattern, 1, "pats", flags, &err), &err);
    const int r = optim_name_patterns_match(p, name);
    optim_name_patterns_free(p);
    return r;
}

OPTIM_TEST(test_matches_as_python)
{
    static const struct {
        const char *pattern, *name;
        int search, full;
    } cases[] = {
        {"dense_\\d+", "dense_1/kernel", 1, 0},
        {"dense_\\d+", "dense_/kernel", 0, 0},
        {"dense_\\d+", "densed/kernel", 0, 0},
        {"^dense_\\d+$", "dense_12", 1, 1},
        {"^dense_\\d+$", "dense_12/kernel", 0, 0},
        {"\\D+", "123", 0, 0},
        {"\\D+", "a1", 1, 0},
        {"^\\w+$", "conv_2d", 1, 1},
        {"^\\w+$", "conv/2d", 0, 0},
        {"\\W", "conv_2d", 0, 0},
        {"\\W", "conv/2d", 1, 0},
        {"\\s", "a b", 1, 0},
        {"\\s", "ab", 0, 0},
        {"^\\S+$", "a b", 0, 0},
        {"^\\S+$", "ab", 1, 1},
        {"[\\d_]+$", "layer_12", 1, 0},
        {"[\\d_]+$", "layer_x", 0, 0},
        {"^[^\\d]+$", "layer", 1, 1},
        {"^[^\\d]+$", "layer1", 0, 0},
        {"[\\w.]+/bias", "block.1/bias", 1, 1},
        {"[\\w.]+/bias", "/bias", 0, 0},
        {"[\\]]", "a]b", 1, 0},
        {"[\\]]", "ab", 0, 0},
        {"[a\\-z]", "-", 1, 1},
        {"[a\\-z]", "b", 0, 0},
        {"[\\\\]", "a\\b", 1, 0},
        {"[\\\\]", "ab", 0, 0},
        {"[.]", ".", 1, 1},
        {"[.]", "a", 0, 0},
        {"a.c", "abc", 1, 1},
        {"a.c", "a\nc", 0, 0},
        {"(?:dense|conv)_\\d", "conv_3", 1, 1},
        {"(?:dense|conv)_\\d", "pool_3", 0, 0},
        {"(?P<kind>dense|conv)/kernel", "dense/kernel", 1, 1},
        {"(?P<kind>dense|conv)/kernel", "pool/kernel", 0, 0},
        {"dense(?#a comment)/kernel", "dense/kernel", 1, 1},
        {"dense(?#a comment)/kernel", "dense/bias", 0, 0},
        {"den.*?kernel", "dense/kernel", 1, 1},
        {"den.*?kernel", "dense/bias", 0, 0},
        {"^a+?$", "aaa", 1, 1},
        {"^a+?$", "aab", 0, 0},
        {"x{2,}?", "xx", 1, 1},
        {"x{2,}?", "x", 0, 0},
        {"x{,2}y", "y", 1, 1},
        {"x{,2}y", "xxxy", 1, 0},
        {"^x{,2}y$", "xxxy", 0, 0},
        {"^x{,2}y$", "xxy", 1, 1},
        {"a{b", "a{b", 1, 1},
        {"a{b", "ab", 0, 0},
        {"a}", "a}", 1, 1},
        {"a}", "a", 0, 0},
        {"\\Adense", "dense/kernel", 1, 0},
        {"\\Adense", "my_dense", 0, 0},
        {"kernel\\Z", "dense/kernel", 1, 0},
        {"kernel\\Z", "kernel/0", 0, 0},
        {"\\bkernel\\b", "dense/kernel", 1, 0},
        {"\\bkernel\\b", "dense/kernels", 0, 0},
        {"\\.", "a.b", 1, 0},
        {"\\.", "ab", 0, 0},
        {"\\/", "a/b", 1, 0},
        {"\\/", "ab", 0, 0},
        {"[\\^]", "a^", 1, 0},
        {"[\\^]", "a", 0, 0},
        {"[\\[]", "a[", 1, 0},
        {"[\\[]", "a", 0, 0},
        {"(a)\\1", "aa", 1, 1},
        {"(a)\\1", "ab", 0, 0},
        {"^é+$", "éé", 1, 1},
        {"^é+$", "é", 1, 1},
        {"[[:digit:]]+", "123", 0, 0},
        {"[[:digit:]]+", "d]", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *pat = cases[i].pattern, *name = cases[i].name;
        if (hit(pat, name, 0) != cases[i].search)
            fail_msg("re.search('%s', '%s') is %d", pat, name, cases[i].search);
        if (hit(pat, name, OPTIM_NAME_PATTERNS_FULL) != cases[i].full)
            fail_msg("re.fullmatch('%s', '%s') is %d", pat, name, cases[i].full);
    }
}

/* What has no POSIX equivalent here is refused, naming it; nothing is kept. */
OPTIM_TEST(test_refuses_what_it_cannot_match)
{
    static const char *const cases[][2] = {
        {"dense(?=/kernel)", "a lookaround (?="},
        {"(?<!x)y", "a lookaround (?<"},
        {"(?i)dense", "an inline flag group (?i"},
        {"(?P<k>a)(?P=k)", "a named backreference (?P="},
        {"(?(1)a|b)", "a conditional group (?("},
        {"(?:a)(b)\\1", "a backreference \\1 after a (?:...) group"},
        {"a*+", "a possessive repeat"},
        {"\\x41", "the escape \\x"},
        {"\\q", "the escape \\q"},
        {"[\\D]", "\\D inside [...]"},
        {"[a-\\d]", "a class escape ending a range in [...]"},
        {"[z-a]", "a bad range z-a in [...]"},
        {"[é]", "a non-ASCII character inside [...]"},
        {"[abc", "an unterminated ["},
        {"a)", "an unbalanced ')'"},
        {"a\\", "a trailing backslash"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        optim_name_patterns *p = NULL;
        optim_error err;
        assert_status(optim_name_patterns_compile(&p, &cases[i][0], 1, "exclude_layers", &err),
                      OPTIM_EINVAL, &err);
        assert_null(p);
        assert_contains(err.msg, "exclude_layers[0] ('");
        assert_contains(err.msg, "a Python regular expression optim cannot match as re does: ");
        assert_contains(err.msg, cases[i][1]);
    }
}

/* The case end to end: Muon's exclude_layers ["dense_\\d+"] sends
 * dense_1/kernel to AdamW, as Keras does: no momentum slot of Muon's shape
 * with a velocity, as an AdamW variable has. */
OPTIM_TEST(test_muon_exclude_layers_digit)
{
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"Muon\", \"config\": {\"exclude_layers\": [\"dense_\\\\d+\"]}}");
    const int64_t shape[2] = {3, 4};
    double init[12] = {0}, g[12];
    for (int i = 0; i < 12; i++) g[i] = 0.1 * (i + 1);
    optim_var *a = optim_test_var("dense_1/kernel", OPTIM_F32, 2, shape, init);
    optim_var *b = optim_test_var("conv/kernel", OPTIM_F32, 2, shape, init);
    ot_step_dense(opt, a, g);
    ot_step_dense(opt, b, g);
    assert_non_null(optim_get_slot(opt, a, "velocity"));
    assert_null(optim_get_slot(opt, b, "velocity"));
    optim_test_free(opt, a, b);
}

int main(void) { return optim_test_run(); }
