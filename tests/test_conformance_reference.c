/* The "reference" group of the checker (optim/conformance.h): a reference
 * rule given as a C callback, in double precision. Keras 3's Adam written
 * out passes the built-in Adam in f32 and f64; the same with epsilon inside
 * the square root fails it; a callback that fails is reported; without a
 * callback, or with options of an older size, the group reports nothing; bad
 * reference fields are refused by name. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "optim/optim.h"
#include "testutil.h"

typedef struct adam_ref {
    double eps;
    int eps_inside; /* the fault: sqrt(v + eps) */
    int fail_at; /* return non-zero at this step (0: never) */
} adam_ref;

/* Adam as Keras 3 states it, m and v in state. */
static int adam(void *user, double *w, const double *g, double *s, int64_t n, int64_t t)
{
    const adam_ref *a = user;
    if (t == a->fail_at) return 1;
    double *m = s, *v = s + n;
    double step = 0.001 * sqrt(1 - pow(0.999, (double)t)) / (1 - pow(0.9, (double)t));
    for (int64_t i = 0; i < n; i++) {
        m[i] += (g[i] - m[i]) * (1 - 0.9);
        v[i] += (g[i] * g[i] - v[i]) * (1 - 0.999);
        w[i] -= step * m[i] / (a->eps_inside ? sqrt(v[i] + a->eps) : sqrt(v[i]) + a->eps);
    }
    return 0;
}

typedef struct lines {
    int pass, fail, skip;
    char first_fail[512];
} lines;

static void note(void *user, const optim_conformance_result *r)
{
    lines *l = user;
    if (r->passed > 0) l->pass++;
    else if (r->passed < 0) l->skip++;
    else if (!l->fail++)
        snprintf(l->first_fail, sizeof l->first_fail, "%s: %s; %s", r->check, r->expected, r->seen);
}

static int run(adam_ref *a, const char *config, lines *l, int *failed)
{
    optim_conformance_options o = optim_conformance_defaults();
    o.group = "reference";
    o.config = config;
    o.report = note;
    o.user = l;
    o.reference = adam;
    o.reference_user = a;
    o.reference_state = 2;
    optim_error err;
    int passed;
    memset(l, 0, sizeof *l);
    int rc = optim_conformance_check("Adam", &o, &passed, failed, &err);
    assert_int_equal(passed, l->pass);
    return rc;
}

OPTIM_TEST(test_reference_adam_passes)
{
    adam_ref a = {1e-7, 0, 0};
    lines l;
    int failed;
    assert_int_equal(run(&a, NULL, &l, &failed), 0);
    assert_int_equal(failed, 0);
    assert_int_equal(l.pass, 6); /* f32 and f64: scalar, vector, matrix */
    a.eps = 1e-3;
    assert_int_equal(run(&a, "{\"epsilon\": 0.001}", &l, &failed), 0);
    assert_int_equal(failed, 0);
    assert_int_equal(l.pass, 6);
}

OPTIM_TEST(test_reference_catches_epsilon_placement)
{
    adam_ref a = {1e-3, 1, 0};
    lines l;
    int failed;
    assert_int_equal(run(&a, "{\"epsilon\": 0.001}", &l, &failed), 0);
    assert_int_equal(failed, 6);
    assert_contains(l.first_fail, "reference.f32.");
    assert_contains(l.first_fail, "the reference's");
    a = (adam_ref){1e-7, 0, 3};
    assert_int_equal(run(&a, NULL, &l, &failed), 0);
    assert_int_equal(failed, 2); /* one line per dtype */
    assert_contains(l.first_fail, "returned non-zero at step 3");
}

OPTIM_TEST(test_reference_skipped_and_refused)
{
    optim_conformance_options o = optim_conformance_defaults();
    lines l = {0};
    optim_error err;
    int passed, failed;
    o.group = "reference";
    o.report = note;
    o.user = &l;
    assert_ok(optim_conformance_check("Adam", &o, &passed, &failed, &err), &err);
    assert_int_equal(l.pass + l.fail + l.skip, 0);
    /* A caller built before the reference fields: they are not read. */
    o.size = (uint32_t)offsetof(optim_conformance_options, reference);
    o.reference = adam;
    o.reference_state = 1000;
    assert_ok(optim_conformance_check("Adam", &o, &passed, &failed, &err), &err);
    assert_int_equal(l.pass + l.fail + l.skip, 0);
    assert_int_equal(passed + failed, 0);
    o.size = sizeof o;
    assert_status(optim_conformance_check("Adam", &o, &passed, &failed, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "reference_state 1000 (expected 0..64)");
    o.reference_state = 2;
    o.rtol = -1;
    assert_status(optim_conformance_check("Adam", &o, &passed, &failed, &err), OPTIM_EINVAL, &err);
}

int main(void) { return optim_test_run(); }
