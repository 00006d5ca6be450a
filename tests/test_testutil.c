/* The test helpers themselves (tests/testutil.h): the process runner, the
 * registration, and that every assertion helper fails, printing what it
 * promises, when its condition does not hold.
 *
 * An assertion is made to fail in a child: this binary run as
 * `test_testutil --check NAME` runs the one check NAME under cmocka, and the
 * parent asserts on its status and its stderr. */
#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the process runner ---------------------------------------------------------- */

static char sh[] = "/bin/sh", dash_c[] = "-c";

OPTIM_TEST(test_capture_status_stdout_stderr)
{
    char script[] = "echo out; echo 'the message' >&2; exit 3";
    char *argv[] = {sh, dash_c, script, NULL};
    optim_test_proc r;
    assert_eq(optim_test_capture(argv, &r), 3);
    assert_eq(r.status, 3);
    assert_string_equal(r.out, "out\n");
    assert_string_equal(r.err, "the message\n");
    assert_eq(r.out_len, 4);
    assert_eq(r.err_len, 12);
}

/* Output longer than the buffer: truncated, NUL-terminated, full length kept. */
OPTIM_TEST(test_capture_truncates)
{
    char script[] = "head -c 70000 /dev/zero | tr '\\0' x";
    char *argv[] = {sh, dash_c, script, NULL};
    static optim_test_proc r;
    assert_eq(optim_test_capture(argv, &r), 0);
    assert_eq(r.out_len, 70000);
    assert_eq(strlen(r.out), sizeof r.out - 1);
    assert_eq(r.err_len, 0);
    assert_string_equal(r.err, "");
}

OPTIM_TEST(test_status_of_signal_and_missing_program)
{
    char kill_self[] = "kill -TERM $$";
    char *argv[] = {sh, dash_c, kill_self, NULL};
    optim_test_proc r;
    assert_eq(optim_test_capture(argv, &r), 1000 + SIGTERM);
    assert_eq(optim_test_exec(argv, 1), 1000 + SIGTERM);
    char missing[] = "/nonexistent/program";
    char *argv2[] = {missing, NULL};
    assert_eq(optim_test_exec(argv2, 1), 127);
    char quiet[] = "echo not shown; exit 5";
    char *argv3[] = {sh, dash_c, quiet, NULL};
    assert_eq(optim_test_exec(argv3, 1), 5);
}

OPTIM_TEST(test_start_and_wait)
{
    char script[] = "sleep 0.3; exit 4";
    char *argv[] = {sh, dash_c, script, NULL};
    int pid = optim_test_start(argv, 1);
    assert_gt(pid, 0);
    assert_eq(optim_test_wait(pid, 0), -1); /* still running */
    assert_eq(optim_test_wait(pid, 1), 4);
    char sleeper[] = "sleep 30";
    char *argv2[] = {sh, dash_c, sleeper, NULL};
    pid = optim_test_start(argv2, 1);
    assert_eq(kill(pid, SIGKILL), 0);
    assert_eq(optim_test_wait(pid, 1), 1000 + SIGKILL);
}

/* The capture leaves the caller's optim_test_tmpfile paths as they were. */
OPTIM_TEST(test_capture_keeps_tmpfile_slots)
{
    const char *a = optim_test_tmpfile("a");
    char copy[512];
    snprintf(copy, sizeof copy, "%s", a);
    char script[] = "true";
    char *argv[] = {sh, dash_c, script, NULL};
    optim_test_proc r;
    for (int i = 0; i < 8; i++) assert_eq(optim_test_capture(argv, &r), 0);
    assert_string_equal(a, copy);
}

/* ---- registration ------------------------------------------------------------------ */

static int ran[8], nran, setups, teardowns;

static int with_setup(void **state)
{
    setups++;
    *state = (void *)"from setup";
    return 0;
}

static int with_teardown(void **state)
{
    assert_string_equal((const char *)*state, "from setup");
    teardowns++;
    return 0;
}

/* The cases run in line order: this one before test_registration_order. */
OPTIM_TEST_WITH(test_fixtures_run, with_setup, with_teardown)
{
    assert_eq(setups, 1);
    assert_eq(teardowns, 0);
    assert_string_equal((const char *)*state, "from setup");
    ran[nran++] = 1;
}

OPTIM_TEST(test_registration_order)
{
    /* The cases above ran in line order, and the fixtures' teardown after
     * its case. */
    assert_eq(nran, 1);
    assert_eq(ran[0], 1);
    assert_eq(teardowns, 1);
    ran[nran++] = 2;
}

static void added_case(void **state)
{
    /* Added with optim_test_add in main: after every OPTIM_TEST case. */
    assert_string_equal((const char *)*state, "row");
    assert_eq(nran, 2);
    ran[nran++] = 3;
}

/* ---- each assertion fails when it should, printing what it promises ---------------- */

static void fail_ok_err(void **state)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_ok(optim_from_json(&opt, "{\"class_name\": \"NoSuchOptimizer\"}", &err), &err);
}

static void fail_ok_opt(void **state)
{
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    assert_ok(optim_set_hyper(opt, "no_such_hyper", 1.0), opt);
}

static void fail_status(void **state)
{
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    assert_status(optim_set_hyper(opt, "learning_rate", 0.5), OPTIM_EINVAL, opt);
}

static void fail_eq_int(void **state) { assert_eq(2 + 2, 5); }
static void fail_ne_int(void **state) { assert_ne(7, 7); }
static void fail_lt_int(void **state) { assert_lt(3, 3); }
static void fail_le_int(void **state) { assert_le(4, 3); }
static void fail_gt_int(void **state) { assert_gt(-1, 0); }
static void fail_ge_int(void **state) { assert_ge(-2, -1); }
static void fail_eq_float(void **state) { assert_eq(1.0, nextafter(1.0, 2.0)); }
static void fail_eq_nan(void **state) { assert_eq(NAN, NAN); }
static void fail_same(void **state) { assert_same(0.5, NAN); }
static void fail_nan(void **state) { assert_nan(1.5); }
static void fail_close(void **state) { assert_close(1.0, 1.1, 1e-3, 0); }
static void fail_contains(void **state) { assert_contains("haystack", "needle"); }

static void fail_var_eq(void **state)
{
    optim_var *v = optim_test_var("v", OPTIM_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    assert_var_eq(v, ((double[]){1, 2, 4}), 3);
}

static void fail_make(void **state) { optim_test_make("{\"class_name\": \"NoSuchOptimizer\"}"); }

static const struct check {
    const char *name;
    CMUnitTestFunction fn;
    const char *needles[3]; /* on stderr */
} CHECKS[] = {
    {"ok_err", fail_ok_err, {"returned OPTIM_ENOTFOUND", "NoSuchOptimizer", "expected OPTIM_OK"}},
    {"ok_opt", fail_ok_opt, {"optim_set_hyper(opt, \"no_such_hyper\", 1.0)", "no_such_hyper"}},
    {"status", fail_status, {"returned OPTIM_OK", "expected OPTIM_EINVAL"}},
    {"eq_int", fail_eq_int, {"2 + 2 == 5 failed", "left  4", "right 5"}},
    {"ne_int", fail_ne_int, {"7 != 7 failed"}},
    {"lt_int", fail_lt_int, {"3 < 3 failed"}},
    {"le_int", fail_le_int, {"4 <= 3 failed"}},
    {"gt_int", fail_gt_int, {"-1 > 0 failed"}},
    {"ge_int", fail_ge_int, {"-2 >= -1 failed"}},
    {"eq_float", fail_eq_float, {"0x1p+0 (1)", "0x1.0000000000001p+0 (1.0000000000000002)"}},
    {"eq_nan", fail_eq_nan, {"left  nan (nan)", "right nan (nan)"}},
    {"same", fail_same, {"0.5 == (or both NaN)", "right nan (nan)"}},
    {"nan", fail_nan, {"1.5 = 0x1.8p+0 (1.5), expected a NaN"}},
    {"close", fail_close, {"expected 0x1.199999999999ap+0 (1.1000000000000001)", "rtol 0.001"}},
    {"contains", fail_contains, {"does not contain \"needle\"", "haystack"}},
    {"var_eq", fail_var_eq, {"element 2", "expected 0x1p+2 (4)"}},
    {"make", fail_make, {"NoSuchOptimizer"}},
};
enum { N_CHECKS = sizeof CHECKS / sizeof *CHECKS };

/* The checks fail on purpose mid-test, leaking what they made; under ASan
 * with abort_on_error the leak report would turn each failure into SIGABRT. */
static void children_ignore_leaks(void)
{
    static char opts[1024];
    const char *old = getenv("ASAN_OPTIONS");
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

OPTIM_TEST(test_every_assertion_can_fail)
{
    static optim_test_proc r;
    children_ignore_leaks();
    for (size_t i = 0; i < N_CHECKS; i++) {
        char *argv[] = {"/proc/self/exe", "--check", (char *)CHECKS[i].name, NULL};
        optim_test_capture(argv, &r);
        if (r.status == 0) print_error("check %s passed:\n%s\n", CHECKS[i].name, r.err);
        assert_ne(r.status, 0);
        assert_lt(r.status, 1000); /* failed, not crashed */
        for (int k = 0; k < 3 && CHECKS[i].needles[k]; k++) {
            if (!strstr(r.err, CHECKS[i].needles[k])) print_error("check %s\n", CHECKS[i].name);
            assert_contains(r.err, CHECKS[i].needles[k]);
        }
    }
}

/* The same helpers pass when their conditions hold. */
OPTIM_TEST(test_assertions_pass)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_ok(optim_from_json(&opt, "\"sgd\"", &err), &err);
    assert_ok(optim_set_hyper(opt, "learning_rate", 0.5), opt);
    assert_status(optim_set_hyper(opt, "no_such_hyper", 1.0), OPTIM_EKEY, opt);
    optim_destroy(opt);
    assert_eq(2 + 2, 4);
    assert_ne(7, 8);
    assert_lt(2, 3);
    assert_le(3, 3);
    assert_gt(0, -1);
    assert_ge(-1, -1);
    assert_eq(0.1 + 0.2, 0.30000000000000004);
    assert_ne(NAN, NAN);
    assert_same(NAN, NAN);
    assert_nan(NAN);
    assert_close(1.0, 1.0005, 1e-3, 0);
    assert_contains("haystack", "hay");
}

static int run_check(const char *name)
{
    for (size_t i = 0; i < N_CHECKS; i++)
        if (strcmp(CHECKS[i].name, name) == 0) {
            const struct CMUnitTest one[] = {{name, CHECKS[i].fn, NULL, NULL, NULL}};
            return _cmocka_run_group_tests("check", one, 1, NULL, NULL);
        }
    fprintf(stderr, "no check %s\n", name);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--check") == 0) return run_check(argv[2]);
    optim_test_add((struct CMUnitTest){"added_case", added_case, NULL, NULL, (void *)"row"});
    int failed = optim_test_run();
    if (nran != 3) fprintf(stderr, "%d of the 3 ordered cases ran\n", nran);
    return failed || nran != 3;
}
