/* MultiOptimizer on the step hook (optim/step.h): its sub-optimizers step
 * with the caller's options (constraints and counter left to the caller,
 * another optimizer's clipping), the counter a caller sets is the
 * MultiOptimizer's own, and an inspect function is refused with nothing
 * changed. */
#include "testutil.h"

#include <string.h>

/* SGD(learning_rate 1) for "w", the default SGD(learning_rate 0.5). */
#define MULTI_SGD                                                                            \
    "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": {\"class_name\": " \
    "\"OptimizerMap\", \"config\": {\"default_optimizer\": {\"class_name\": \"SGD\", "       \
    "\"config\": {\"learning_rate\": 0.5}}, \"optimizer_map\": {\"w\": {\"class_name\": "    \
    "\"SGD\", \"config\": {\"learning_rate\": 1.0}}}}}}}"

static optim_grad g64(double *g, int64_t n)
{
    return optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n));
}

static double at(optim_var *v, int64_t i) { return ((const double *)optim_var_data(v))[i]; }

OPTIM_TEST(test_class_has_a_step_hook)
{
    optim_optimizer *opt = optim_test_make(MULTI_SGD);
    assert_non_null(optim_class_of(opt)->step);
    assert_null(optim_class_of(opt)->apply_gradients);
    optim_destroy(opt);
}

/* OPTIM_STEP_NO_CONSTRAINTS reaches the sub-optimizers: a NonNeg variable
 * stays negative after the step, and is constrained by a plain one. */
OPTIM_TEST(test_no_constraints_passes_down)
{
    optim_optimizer *opt = optim_test_make(MULTI_SGD);
    const int64_t two = 2;
    const double w0[2] = {1, 2};
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, &two, w0);
    const optim_constraint nn = optim_constraint_non_neg();
    assert_ok(optim_var_set_constraint(w, &nn), w);
    double g[2] = {3, 1};
    optim_grad_var p = {g64(g, 2), w};
    optim_step_options o = optim_step_options_defaults();
    o.flags = OPTIM_STEP_NO_CONSTRAINTS;
    assert_ok(optim_step(opt, &p, 1, &o), opt);
    assert_eq(at(w, 0), -2.0); /* 1 - 1 * 3, left negative */
    assert_eq(at(w, 1), 1.0);
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_eq(at(w, 0), 0.0); /* -2 - 3 = -5, then NonNeg */
    assert_eq(at(w, 1), 0.0);
    optim_test_free(opt, w);
}

/* OPTIM_STEP_NO_ADVANCE: neither the MultiOptimizer's counter nor its
 * sub-optimizer's advances; the variables are updated. */
OPTIM_TEST(test_no_advance_passes_down)
{
    optim_optimizer *opt = optim_test_make(MULTI_SGD);
    const int64_t one = 1;
    const double w0 = 1;
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, &one, &w0),
              *b = optim_test_var("b", OPTIM_F64, 1, &one, &w0);
    double g = 1, h = 1;
    optim_grad_var p[2] = {{g64(&g, 1), w}, {g64(&h, 1), b}};
    assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
    optim_step_options o = optim_step_options_defaults();
    o.flags = OPTIM_STEP_NO_ADVANCE;
    assert_ok(optim_step(opt, p, 2, &o), opt);
    assert_eq(at(w, 0), -1.0);
    assert_eq(at(b, 0), 0.0);
    assert_eq(optim_iterations(opt), 1);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 0)), 1);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 1)), 1);
    /* A counter set by the caller is the MultiOptimizer's; each
     * sub-optimizer goes on from its own. */
    o.flags = OPTIM_STEP_SET_ITERATIONS;
    o.iterations = 10;
    assert_ok(optim_step(opt, p, 1, &o), opt);
    assert_eq(optim_iterations(opt), 11);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 0)), 2);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 1)), 1);
    optim_test_free(opt, w, b);
}

/* Another optimizer's clipping (options.clipping) applies in the
 * sub-optimizers' steps. */
OPTIM_TEST(test_clipping_override_passes_down)
{
    optim_optimizer *opt = optim_test_make(MULTI_SGD),
                    *clip = optim_test_make(
                        "{\"class_name\": \"SGD\", \"config\": {\"clipvalue\": 0.25}}");
    const int64_t one = 1;
    const double w0 = 1;
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, &one, &w0);
    double g = 4;
    optim_grad_var p = {g64(&g, 1), w};
    optim_step_options o = optim_step_options_defaults();
    o.clipping = clip;
    assert_ok(optim_step(opt, &p, 1, &o), opt);
    assert_eq(at(w, 0), 0.75); /* 1 - 1 * clip(4, 0.25) */
    optim_destroy(clip);
    optim_test_free(opt, w);
}

/* An inspect function is refused (it could see only one sub-optimizer's
 * gradients at a time): OPTIM_ENOTSUP, nothing changed. */
static int count_calls(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)pairs;
    (void)n;
    (void)err;
    ++*(int *)user;
    return OPTIM_OK;
}

OPTIM_TEST(test_inspect_is_refused)
{
    optim_optimizer *opt = optim_test_make(MULTI_SGD);
    const int64_t one = 1;
    const double w0 = 1;
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, &one, &w0);
    double g = 1;
    optim_grad_var p = {g64(&g, 1), w};
    int calls = 0;
    optim_step_options o = optim_step_options_defaults();
    o.inspect = count_calls;
    o.inspect_user = &calls;
    o.flags = OPTIM_STEP_SET_ITERATIONS;
    o.iterations = 7;
    assert_status(optim_step(opt, &p, 1, &o), OPTIM_ENOTSUP, opt);
    assert_contains(optim_errmsg(opt), "MultiOptimizer: cannot take an inspect function");
    assert_eq(calls, 0);
    assert_eq(at(w, 0), 1.0);
    assert_eq(optim_iterations(opt), 0);
    assert_eq(optim_weights_count(opt), 1 + 2); /* iterations and the two counters */
    optim_test_free(opt, w);
}

int main(void) { return optim_test_run(); }
