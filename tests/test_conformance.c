/* optim_conformance_check as a library call: its report callback and counts
 * on a correct class and on a class with a fault (each check's outcome), and
 * bad input refused with a message and nothing run; optim_error_set. */
#include <string.h>

#include "testutil.h"

typedef struct tally {
    int calls, pass, fail, skip;
    char failed[1024];
} tally;

static void count(void *user, const optim_conformance_result *r)
{
    tally *t = user;
    t->calls++;
    assert_non_null(r->check);
    assert_non_null(r->expected);
    assert_non_null(r->seen);
    if (r->passed > 0) t->pass++;
    else if (r->passed < 0) t->skip++;
    else {
        t->fail++;
        strncat(t->failed, r->check, sizeof t->failed - strlen(t->failed) - 2);
        strcat(t->failed, " ");
    }
}

typedef struct coef {
    double lr;
} coef;
static void prepare(optim_optimizer *o, optim_dtype dt, void *c)
{
    ((coef *)c)->lr = optim_learning_rate(o, dt);
}
#define RULE(NAME, SCALE)                                                          \
    static void NAME(const optim_dense_update *u)                                  \
    {                                                                              \
        double lr = ((const coef *)u->coef)->lr * (SCALE);                         \
        for (int64_t i = 0; i < u->count; i++)                                     \
            if (u->dtype == OPTIM_F32)                                             \
                ((float *)u->param)[i] -= (float)lr * ((const float *)u->grad)[i]; \
            else ((double *)u->param)[i] -= lr * ((const double *)u->grad)[i];     \
    }
RULE(plain_sgd, 1)
RULE(chunk_dependent_sgd, u->offset ? 0.5 : 1) /* the fault: depends on where its chunk starts */

static const optim_class good = {.size = sizeof(optim_class),
                                 .version = OPTIM_CLASS_VERSION,
                                 .name = "TestPlainSGD",
                                 .flags = OPTIM_CLASS_ELEMENTWISE,
                                 .default_learning_rate = 0.01,
                                 .coef_size = sizeof(coef),
                                 .prepare = prepare,
                                 .apply_dense = plain_sgd};
static const optim_class bad = {.size = sizeof(optim_class),
                                .version = OPTIM_CLASS_VERSION,
                                .name = "TestChunkSGD",
                                .flags = OPTIM_CLASS_ELEMENTWISE,
                                .default_learning_rate = 0.01,
                                .coef_size = sizeof(coef),
                                .prepare = prepare,
                                .apply_dense = chunk_dependent_sgd};

static void register_once(void)
{
    optim_error err;
    if (!optim_find_class("TestPlainSGD")) assert_ok(optim_register_class(&good, &err), &err);
    if (!optim_find_class("TestChunkSGD")) assert_ok(optim_register_class(&bad, &err), &err);
}

OPTIM_TEST(test_correct_class_passes)
{
    register_once();
    tally t = {0};
    optim_conformance_options o = optim_conformance_defaults();
    o.report = count;
    o.user = &t;
    int passed = -1, failed = -1;
    optim_error err;
    assert_ok(optim_conformance_check("testplainsgd", &o, &passed, &failed, &err), &err);
    assert_string_equal(t.failed, "");
    assert_int_equal(failed, 0);
    assert_int_equal(passed, t.pass);
    assert_ge(passed, 15);
    /* No sparse hook, but element-wise: sparse.rule and sparse.duplicates run
     * on the pipeline's dense equivalent, and pass. */
    assert_int_equal(t.skip, 0);
    assert_int_equal(t.calls, t.pass + t.skip);
}

OPTIM_TEST(test_fault_is_caught_by_its_check)
{
    optim_error err;
    register_once();
    tally t = {0};
    optim_conformance_options o = optim_conformance_defaults();
    o.report = count;
    o.user = &t;
    int passed, failed;
    assert_ok(optim_conformance_check("TestChunkSGD", &o, &passed, &failed, &err), &err);
    assert_int_equal(failed, t.fail);
    assert_non_null(strstr(t.failed, "elementwise.chunking "));
    assert_null(strstr(t.failed, "config."));
    assert_null(strstr(t.failed, "slots."));
}

OPTIM_TEST(test_bad_input)
{
    register_once();
    optim_conformance_options o = optim_conformance_defaults();
    int passed = 7, failed = 7;
    optim_error err;
    assert_status(optim_conformance_check(NULL, &o, &passed, &failed, &err), OPTIM_EINVAL, &err);
    assert_non_null(strstr(err.msg, "class_name"));
    assert_status(optim_conformance_check("SGD", &o, NULL, &failed, &err), OPTIM_EINVAL, &err);
    assert_status(optim_conformance_check("NoSuchClass", &o, &passed, &failed, &err),
                  OPTIM_ENOTFOUND, &err);
    assert_non_null(strstr(err.msg, "NoSuchClass"));
    o.generation = 7;
    assert_status(optim_conformance_check("SGD", &o, &passed, &failed, &err), OPTIM_EINVAL, &err);
    assert_non_null(strstr(err.msg, "generation 7"));
    o = optim_conformance_defaults();
    o.size = 4;
    assert_status(optim_conformance_check("SGD", &o, &passed, &failed, &err), OPTIM_EVERSION, &err);
    o = optim_conformance_defaults();
    o.config = "[1, 2";
    assert_status(optim_conformance_check("SGD", &o, &passed, &failed, &err), OPTIM_EPARSE, &err);
    o.config = "{\"momentum\": 3}";
    assert_status(optim_conformance_check("SGD", &o, &passed, &failed, &err), OPTIM_ERANGE, &err);
    assert_non_null(strstr(err.msg, "momentum"));
    o.config = NULL;
    o.generation = OPTIM_LEGACY;
    assert_ne(optim_conformance_check("Lion", &o, &passed, &failed, &err), 0);
    assert_int_equal(passed, 7); /* nothing ran */
    assert_int_equal(failed, 7);
}

OPTIM_TEST(test_error_set)
{
    optim_error err;
    assert_status(optim_error_set(&err, OPTIM_ERANGE, "beta is %g, expected < %d", 1.5, 1),
                  OPTIM_ERANGE, &err);
    assert_int_equal(err.code, OPTIM_ERANGE);
    assert_string_equal(err.msg, "beta is 1.5, expected < 1");
    assert_status(optim_error_set(NULL, OPTIM_EINVAL, "ignored"), OPTIM_EINVAL, NULL);
    char longer[2 * OPTIM_ERRMSG_MAX];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    optim_error_set(&err, OPTIM_EINVAL, "%s", longer);
    assert_int_equal(strlen(err.msg), OPTIM_ERRMSG_MAX - 1);
}

int main(void) { return optim_test_run(); }
