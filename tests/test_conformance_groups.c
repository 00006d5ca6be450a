/* The checker's groups (optim/conformance.h): every group named and
 * described, one group run alone reports only its checks, the groups
 * together report what a whole run does, an unknown group is refused by
 * name, and options of the older header (without `group`) still work. */
#include <stddef.h>
#include <string.h>

#include "optim/optim.h"
#include "testutil.h"

typedef struct seen {
    int lines;
    char group[32]; /* "" until the first line; "*" once two groups were seen */
} seen;

static void note(void *user, const optim_conformance_result *r)
{
    seen *s = user;
    char g[32];
    snprintf(g, sizeof g, "%.*s", (int)strcspn(r->check, "."), r->check);
    if (!s->group[0]) snprintf(s->group, sizeof s->group, "%s", g);
    else if (strcmp(s->group, g) != 0) strcpy(s->group, "*");
    s->lines++;
}

OPTIM_TEST(test_groups_cover_the_run)
{
    const char *const *g = optim_conformance_groups();
    optim_conformance_options o = optim_conformance_defaults();
    optim_error err;
    int passed, failed, sum_passed = 0, sum_failed = 0, sum_lines = 0, n = 0;
    for (; g[n]; n++) {
        assert_non_null(optim_conformance_group_doing(g[n]));
        seen s = {0};
        o.group = g[n];
        o.report = note;
        o.user = &s;
        assert_ok(optim_conformance_check("Adam", &o, &passed, &failed, &err), &err);
        /* The reference group says nothing without options.reference. */
        assert_true(s.lines > 0 || strcmp(g[n], "reference") == 0);
        assert_true(strcmp(s.group, "*") != 0 || strcmp(g[n], "chunks") == 0 ||
                    strcmp(g[n], "hypers") == 0 || strcmp(g[n], "table") == 0);
        sum_passed += passed, sum_failed += failed, sum_lines += s.lines;
    }
    assert_int_equal(n, 10);
    seen all = {0};
    o.group = NULL;
    o.user = &all;
    assert_ok(optim_conformance_check("Adam", &o, &passed, &failed, &err), &err);
    assert_int_equal(passed, sum_passed);
    assert_int_equal(failed, sum_failed);
    assert_int_equal(all.lines, sum_lines);
    assert_null(optim_conformance_group_doing("nosuch"));
    assert_null(optim_conformance_group_doing(NULL));
}

OPTIM_TEST(test_bad_group_and_old_options)
{
    optim_conformance_options o = optim_conformance_defaults();
    optim_error err;
    int passed = 7, failed = 7;
    o.group = "Update";
    assert_status(optim_conformance_check("SGD", &o, &passed, &failed, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "group 'Update', expected table, config");
    assert_int_equal(passed, 7);
    /* A caller built against the header before `group`: every group runs. */
    o = optim_conformance_defaults();
    o.size = (uint32_t)offsetof(optim_conformance_options, group);
    o.group = "table"; /* beyond the caller's size: not read */
    assert_ok(optim_conformance_check("SGD", &o, &passed, &failed, &err), &err);
    assert_true(passed > 10);
    o.size = (uint32_t)offsetof(optim_conformance_options, group) - 1;
    assert_status(optim_conformance_check("SGD", &o, &passed, &failed, &err), OPTIM_EVERSION, &err);
    o.size = sizeof o + 8;
    assert_status(optim_conformance_check("SGD", &o, &passed, &failed, &err), OPTIM_EVERSION, &err);
}

int main(void) { return optim_test_run(); }
