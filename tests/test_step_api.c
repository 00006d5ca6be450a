/* The public step API (optim/step.h) and what wrappers built on it promise:
 * each override of optim_step against the plain step it stands for, bad
 * input, savepoints; nested wrappers whose weights share a name (qualified
 * per level, and `optim replay` writes them all); an INIT tensor named like
 * a weight refused before any step; a failed optim_build on a wrapper
 * changes nothing at any level; optim_rollback_variables, optim_step_scratch
 * and wrappers' steady-state steps on it. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optim/optim.h"
#include "optimizer/impl.h" /* the step arena, for the steady-state check */

static const double W0[4] = {0.5, -1.0, 2.0, -0.25};
static const double G0[4] = {3.0, -4.0, 0.5, 1.0};

static optim_grad_var pair_of(optim_var *v, const double *g)
{
    optim_grad_var p = {
        optim_grad_dense(optim_tensor_make(OPTIM_F64, (void *)g, 1, (int64_t[]){4})), v};
    return p;
}

static void assert_same_values(optim_var *a, optim_var *b)
{
    for (int64_t i = 0; i < optim_var_numel(a); i++) {
        if (optim_var_get(a, i) != optim_var_get(b, i))
            print_error("element %lld: %a (%.17g) != %a (%.17g)\n", (long long)i,
                        optim_var_get(a, i), optim_var_get(a, i), optim_var_get(b, i),
                        optim_var_get(b, i));
        assert_eq(optim_var_get(a, i), optim_var_get(b, i));
    }
}

/* ---- overrides ------------------------------------------------------------------------ */

/* clipping = another optimizer: the same bits as that clipnorm set on the
 * stepping optimizer itself; the stepping one's own clipnorm is not used. */
OPTIM_TEST(test_clipping_from_another)
{
    optim_optimizer *plain = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"clipnorm\": 1.0}}");
    optim_optimizer *sgd = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"clipnorm\": 100.0}}");
    optim_optimizer *src =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"clipnorm\": 1.0}}");
    optim_var *a = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_var *b = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_grad_var pa = pair_of(a, G0), pb = pair_of(b, G0);
    assert_int_equal(optim_apply_gradients(plain, &pa, 1, 0), 0);
    optim_step_options o = optim_step_options_defaults();
    o.clipping = src;
    assert_int_equal(optim_step(sgd, &pb, 1, &o), 0);
    assert_same_values(a, b);
    /* The reference in closed form: w - 0.1 * g / |g|, |g| = sqrt(26.25). */
    for (int i = 0; i < 4; i++)
        assert_close(optim_var_get(b, i), W0[i] - 0.1 * G0[i] / sqrt(26.25), 1e-15, 0);
    optim_destroy(plain);
    optim_destroy(sgd);
    optim_destroy(src);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

/* SET_ITERATIONS, NO_ADVANCE, NO_CONSTRAINTS. */
OPTIM_TEST(test_counter_and_constraints)
{
    optim_optimizer *adam =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.1}}");
    optim_optimizer *ref =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.1}}");
    optim_var *a = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_var *b = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_constraint nn = optim_constraint_non_neg();
    optim_var_set_constraint(a, &nn);
    optim_grad_var pa = pair_of(a, G0), pb = pair_of(b, G0);
    optim_step_options o = optim_step_options_defaults();
    o.flags = OPTIM_STEP_SET_ITERATIONS | OPTIM_STEP_NO_ADVANCE | OPTIM_STEP_NO_CONSTRAINTS;
    o.iterations = 7;
    assert_int_equal(optim_step(adam, &pa, 1, &o), 0);
    assert_int_equal(optim_iterations(adam), 7);
    /* The reference: a plain step from counter 7, without a constraint. */
    assert_int_equal(optim_set_iterations(ref, 7), 0);
    assert_int_equal(optim_apply_gradients(ref, &pb, 1, 0), 0);
    assert_same_values(a, b);
    assert_lt(optim_var_get(a, 1), 0); /* NonNeg not applied */
    optim_destroy(adam);
    optim_destroy(ref);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

static int skip_all(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)pairs, (void)n, (void)err;
    ++*(int *)user;
    return OPTIM_STEP_SKIP;
}

static int halve(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)user, (void)err;
    for (size_t i = 0; i < n; i++) {
        double *g = pairs[i].grad.dense.data;
        for (int64_t k = 0; k < optim_tensor_numel(&pairs[i].grad.dense); k++) g[k] *= 0.5;
    }
    return OPTIM_OK;
}

/* inspect: SKIP changes nothing (not even a counter set by the options);
 * changing the gradients in place is seen by the update, never by the
 * caller's memory. */
OPTIM_TEST(test_inspect)
{
    optim_optimizer *sgd = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}");
    optim_var *a = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    double g[4];
    memcpy(g, G0, sizeof g);
    optim_grad_var p = pair_of(a, g);
    int calls = 0;
    optim_step_options o = optim_step_options_defaults();
    o.inspect = skip_all;
    o.inspect_user = &calls;
    o.flags = OPTIM_STEP_SET_ITERATIONS;
    o.iterations = 3;
    assert_int_equal(optim_step(sgd, &p, 1, &o), 0);
    assert_int_equal(calls, 1);
    assert_int_equal(optim_iterations(sgd), 0);
    assert_int_equal(optim_weights_count(sgd), 1); /* no slot created */
    for (int i = 0; i < 4; i++) assert_eq(optim_var_get(a, i), W0[i]);
    o = optim_step_options_defaults();
    o.inspect = halve;
    assert_int_equal(optim_step(sgd, &p, 1, &o), 0);
    for (int i = 0; i < 4; i++) {
        assert_eq(g[i], G0[i]);
        assert_eq(optim_var_get(a, i), W0[i] - 0.1 * (0.5 * G0[i]));
    }
    optim_destroy(sgd);
    optim_var_destroy(a);
}

static int v1_apply(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, uint32_t flags)
{
    return optim_apply_gradients(optim_wrapper_inner(opt), pairs, n, flags);
}

static optim_optimizer *v1_inner(const optim_optimizer *opt)
{
    return *(optim_optimizer **)optim_state(opt);
}

/* Bad input: nothing changes and the message names what is wrong. */
OPTIM_TEST(test_bad_input)
{
    assert_int_equal(optim_step(NULL, NULL, 0, NULL), OPTIM_EINVAL);
    optim_optimizer *sgd = optim_test_make("\"sgd\"");
    optim_var *a = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_grad_var p = pair_of(a, G0);
    optim_step_options o = optim_step_options_defaults();
    o.size = 3;
    assert_int_equal(optim_step(sgd, &p, 1, &o), OPTIM_EVERSION);
    assert_non_null(strstr(optim_errmsg(sgd), "size 3"));
    o = optim_step_options_defaults();
    o.num_threads = -2;
    assert_int_equal(optim_step(sgd, &p, 1, &o), OPTIM_EINVAL);
    assert_non_null(strstr(optim_errmsg(sgd), "num_threads is -2"));
    o = optim_step_options_defaults();
    o.flags = OPTIM_STEP_SET_ITERATIONS;
    o.iterations = -1;
    assert_int_equal(optim_step(sgd, &p, 1, &o), OPTIM_ERANGE);
    assert_int_equal(optim_step(sgd, NULL, 1, NULL), OPTIM_EINVAL);
    assert_int_equal(optim_iterations(sgd), 0);
    for (int i = 0; i < 4; i++) assert_eq(optim_var_get(a, i), W0[i]);
    /* A version-1 wrapper (apply_gradients only) takes default options only. */
    static const optim_class v1 = {.size = sizeof(optim_class),
                                   .version = 1,
                                   .name = "V1Wrap",
                                   .state_size = sizeof(optim_optimizer *),
                                   .apply_gradients = v1_apply,
                                   .inner = v1_inner};
    optim_optimizer *w;
    optim_error err;
    assert_int_equal(optim_create(&w, &v1, NULL, &err), 0);
    *(optim_optimizer **)optim_state(w) = sgd;
    o = optim_step_options_defaults();
    o.inspect = halve;
    assert_int_equal(optim_step(w, &p, 1, &o), OPTIM_ENOTSUP);
    assert_non_null(strstr(optim_errmsg(w), "step hook"));
    assert_int_equal(optim_step(w, &p, 1, NULL), 0);
    assert_int_equal(optim_iterations(sgd), 1);
    /* optim_check_gradients: the update rule's checks, nothing changes. */
    double g3[3] = {1, 2, 3};
    optim_grad_var bad = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g3, 1, (int64_t[]){3})), a};
    assert_int_equal(optim_check_gradients(sgd, &bad, 1, 0), OPTIM_ESHAPE);
    assert_non_null(strstr(optim_errmsg(sgd), "'w'"));
    assert_int_equal(optim_check_gradients(sgd, &p, 1, 1), 0);
    optim_destroy(w);
    optim_destroy(sgd);
    optim_var_destroy(a);
}

/* optim_rollback: slots, weights, tracked variables and the counter as at
 * the savepoint. */
OPTIM_TEST(test_savepoint)
{
    optim_optimizer *adam = optim_test_make("\"adam\"");
    optim_var *a = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_savepoint sp = optim_savepoint_get(adam);
    assert_int_equal(optim_track_variables(adam, &a, 1), 0);
    assert_int_equal(optim_set_iterations(adam, 5), 0);
    assert_int_equal(optim_weights_count(adam), 3);
    optim_rollback(adam, &sp);
    assert_int_equal(optim_weights_count(adam), 1);
    assert_int_equal(optim_iterations(adam), 0);
    assert_null(optim_get_slot(adam, a, "m"));
    optim_grad_var p = pair_of(a, G0);
    assert_int_equal(optim_apply_gradients(adam, &p, 1, 0), 0);
    assert_non_null(optim_get_slot(adam, a, "m"));
    /* Bad input: ignored or refused, never a crash. */
    optim_savepoint none = optim_savepoint_get(NULL);
    assert_int_equal(none.weights_, 0);
    optim_rollback(NULL, &sp);
    optim_rollback(adam, NULL);
    optim_savepoint ahead = optim_savepoint_get(adam);
    ahead.weights_ += 5;
    optim_rollback(adam, &ahead);
    assert_int_equal(optim_weights_count(adam), 3);
    assert_int_equal(optim_check_gradients(NULL, &p, 1, 0), OPTIM_EINVAL);
    assert_int_equal(optim_config_keep(NULL, NULL, 0, NULL, 0), OPTIM_EINVAL);
    optim_destroy(adam);
    optim_var_destroy(a);
}

/* optim_base_option_changed names the first base option off its default,
 * with both values as text. */
OPTIM_TEST(test_base_option_changed)
{
    optim_optimizer *sgd = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"clipnorm\": 1.5, \"use_ema\": true}}");
    char have[64], want[64];
    const char *name =
        optim_base_option_changed(sgd, NULL, 0, have, sizeof have, want, sizeof want);
    /* learning_rate is at the class's default, 0.01. */
    assert_string_equal(name, "clipnorm");
    assert_string_equal(have, "1.5");
    assert_string_equal(want, "None");
    const char *const except[] = {"clipnorm"};
    name = optim_base_option_changed(sgd, except, 1, have, sizeof have, want, sizeof want);
    assert_string_equal(name, "use_ema");
    assert_string_equal(have, "true");
    assert_string_equal(want, "false");
    const char *const both[] = {"clipnorm", "use_ema"};
    assert_null(optim_base_option_changed(sgd, both, 2, NULL, 0, NULL, 0));
    assert_null(optim_base_option_changed(NULL, NULL, 0, NULL, 0, NULL, 0));
    optim_destroy(sgd);
}

/* Steady state: after the first steps, a step of the same shapes takes its
 * buffers from the arena it already holds (one block, same size). */
static void assert_arena_steady(optim_optimizer *opt, const optim_grad_var *p, size_t n)
{
    optim__arena_block *head = NULL;
    size_t reserved = 0;
    for (int k = 0; k < 6; k++) {
        assert_int_equal(optim_apply_gradients(opt, p, n, 0), 0);
        if (k == 2) head = opt->arena.head, reserved = opt->arena.reserved;
        if (k > 2) {
            assert_ptr_equal(opt->arena.head, head);
            assert_int_equal(opt->arena.reserved, reserved);
        }
    }
    assert_non_null(head);
    assert_gt(opt->arena.used_total, 0);
}

OPTIM_TEST(test_arena_steady_state)
{
    optim_optimizer *adam =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"clipnorm\": 1.0}}");
    optim_var *a = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_grad_var p = pair_of(a, G0);
    assert_arena_steady(adam, &p, 1);
    optim_destroy(adam);
    optim_var_destroy(a);
}

/* optim_rollback_variables: the slots and variables tracked since the
 * savepoint go, the optimizer-level weights made since (Nadam's u_product,
 * created with the first variable's slots and held in its class state)
 * and the counter stay; optim_rollback would destroy u_product too. */
OPTIM_TEST(test_rollback_variables)
{
    optim_optimizer *nadam = optim_test_make("\"nadam\"");
    optim_var *a = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_savepoint sp = optim_savepoint_get(nadam);
    assert_int_equal(optim_track_variables(nadam, &a, 1), 0);
    assert_int_equal(optim_set_iterations(nadam, 3), 0);
    assert_int_equal(optim_weights_count(nadam), 4); /* iterations, u_product, m, v */
    optim_rollback_variables(nadam, &sp);
    assert_int_equal(optim_weights_count(nadam), 2);
    assert_string_equal(optim_weight_name(nadam, 1), "u_product");
    assert_null(optim_get_slot(nadam, a, "m"));
    assert_int_equal(optim_iterations(nadam), 3);
    /* Tracked again, then stepped: the kept u_product is used, not remade. */
    optim_grad_var p = pair_of(a, G0);
    assert_int_equal(optim_apply_gradients(nadam, &p, 1, 0), 0);
    assert_int_equal(optim_weights_count(nadam), 4);
    assert_non_null(optim_get_slot(nadam, a, "v"));
    /* Bad input: ignored, never a crash, nothing changes. */
    optim_rollback_variables(NULL, &sp);
    optim_rollback_variables(nadam, NULL);
    optim_savepoint ahead = optim_savepoint_get(nadam);
    ahead.vars_ += 1;
    optim_rollback_variables(nadam, &ahead);
    assert_int_equal(optim_weights_count(nadam), 4);
    assert_non_null(optim_get_slot(nadam, a, "m"));
    optim_destroy(nadam);
    optim_var_destroy(a);
}

/* optim_step_scratch: aligned memory from the optimizer's step arena;
 * bad input refused. */
OPTIM_TEST(test_step_scratch)
{
    assert_null(optim_step_scratch(NULL, 16));
    optim_optimizer *sgd = optim_test_make("\"sgd\"");
    char *p = optim_step_scratch(sgd, 100), *q = optim_step_scratch(sgd, 0);
    assert_non_null(p);
    assert_non_null(q);
    assert_ptr_not_equal(p, q);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 0x5a, 100);
    assert_null(optim_step_scratch(sgd, SIZE_MAX));
    optim_destroy(sgd);
}

/* A wrapper's steady-state step takes its buffers from the scratch memory
 * it already holds: the arena keeps one block of the same size, for a TF
 * Addons wrapper (tfa.c) and for MultiOptimizer. */
OPTIM_TEST(test_wrapper_arena_steady_state)
{
    static const char *const cfg[] = {
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": \"adam\"}}",
        "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": {\"class_name\": \"OptimizerMap\", "
        "\"config\": {\"default_optimizer\": \"sgd\", \"optimizer_map\": {\"v\": \"adam\"}}}}}",
    };
    for (size_t c = 0; c < 2; c++) {
        optim_optimizer *opt = optim_test_make(cfg[c]);
        optim_var *w = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
        optim_var *v = optim_test_var("v", OPTIM_F64, 1, (int64_t[]){4}, W0);
        optim_grad_var p[2] = {pair_of(w, G0), pair_of(v, G0)};
        assert_arena_steady(opt, p, 2);
        optim_destroy(opt);
        optim_var_destroy(w);
        optim_var_destroy(v);
    }
}

/* A step finds each variable's slots without hashing when the pairs come in
 * the order the optimizer first saw the variables (optim__var_entry_at);
 * any other order, a subset, or a repeated variable must still find the
 * right slots or be refused. x steps its variables in shuffled orders, y
 * always in the first order: both end with the same bits. */
OPTIM_TEST(test_pair_order_finds_the_right_slots)
{
    static const double ga[4] = {0.5, -1, 2, 0.25}, gb[4] = {-3, 0.5, 1, 4},
                        gc[4] = {1, 1, -2, 0.5};
    static const char *const names[3] = {"a", "b", "c"};
    optim_optimizer *x = optim_test_make("\"adam\""), *y = optim_test_make("\"adam\"");
    optim_var *v[2][3];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++)
            v[k][j] = optim_test_var(names[j], OPTIM_F64, 1, (int64_t[]){4}, W0);
    const double *g[3] = {ga, gb, gc};
    static const int order[4][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, -1}, {2, 1, 0}};
    for (int st = 0; st < 4; st++) {
        optim_grad_var px[3], py[3];
        size_t n = 0, m = 0;
        for (; n < 3 && order[st][n] >= 0; n++)
            px[n] = pair_of(v[0][order[st][n]], g[order[st][n]]);
        for (int j = 0; j < 3; j++) /* y: the same variables in the first order */
            for (size_t q = 0; q < n; q++)
                if (order[st][q] == j) py[m++] = pair_of(v[1][j], g[j]);
        assert_int_equal(optim_apply_gradients(x, px, n, 0), 0);
        assert_int_equal(optim_apply_gradients(y, py, m, 0), 0);
    }
    for (int j = 0; j < 3; j++) assert_vars_bitwise(v[0][j], v[1][j]);
    /* In the first order but repeated, or repeated after a prefix of it. */
    optim_grad_var rep[3] = {pair_of(v[0][0], ga), pair_of(v[0][1], gb), pair_of(v[0][0], ga)};
    assert_int_equal(optim_apply_gradients(x, rep, 3, 0), OPTIM_EINVAL);
    assert_contains(optim_errmsg(x), "'a' appears more than once");
    rep[1] = rep[0];
    assert_int_equal(optim_apply_gradients(x, rep, 2, 0), OPTIM_EINVAL);
    assert_int_equal(optim_iterations(x), 4);
    for (int j = 0; j < 3; j++) assert_vars_bitwise(v[0][j], v[1][j]);
    optim_destroy(x);
    optim_destroy(y);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) optim_var_destroy(v[k][j]);
}

/* optim_check_gradients gives back the memory of its each-once sort: called
 * any number of times between steps, with pairs in an order that needs the
 * sort, the optimizer's arena does not grow (a block started for the sort
 * is freed, a block it fitted in is left as it was). */
OPTIM_TEST(test_check_gradients_keeps_no_memory)
{
    enum { NV = 9000 }; /* 72 KB of pointers: more than the arena's first block */
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    optim_var **v = calloc(NV, sizeof *v);
    optim_grad_var *p = calloc(NV, sizeof *p);
    assert_non_null(v);
    assert_non_null(p);
    for (int i = 0; i < NV; i++) {
        v[i] = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
        p[NV - 1 - i] = pair_of(v[i], G0); /* reversed: not the order first seen */
    }
    assert_int_equal(optim_build(opt, v, NV), 0);
    for (int k = 0; k < 50; k++) assert_int_equal(optim_check_gradients(opt, p, NV, 1), 0);
    assert_int_equal(opt->arena.reserved, 0);
    assert_null(opt->arena.head);
    assert_int_equal(optim_apply_gradients(opt, p, NV, 0), 0);
    const size_t reserved = opt->arena.reserved, used = opt->arena.used_total;
    for (int k = 0; k < 50; k++) assert_int_equal(optim_check_gradients(opt, p, NV, 1), 0);
    assert_int_equal(opt->arena.reserved, reserved);
    assert_int_equal(opt->arena.used_total, used);
    p[1] = p[NV - 1]; /* still refused */
    assert_int_equal(optim_check_gradients(opt, p, NV, 1), OPTIM_EINVAL);
    assert_contains(optim_errmsg(opt), "appears more than once");
    assert_int_equal(opt->arena.reserved, reserved);
    optim_destroy(opt);
    for (int i = 0; i < NV; i++) optim_var_destroy(v[i]);
    free(v);
    free(p);
}

/* optim_check_gradients on a built MultiOptimizer refuses a variable it
 * was not built for (its own question; each pair's shapes are its
 * sub-optimizer's, checked in its step). */
OPTIM_TEST(test_check_gradients_multi)
{
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": "
        "{\"class_name\": \"OptimizerMap\", \"config\": {\"default_optimizer\": \"sgd\"}}}}");
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_var *x = optim_test_var("x", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_grad_var pw = pair_of(w, G0), px = pair_of(x, G0);
    assert_int_equal(optim_check_gradients(opt, &px, 1, 0), 0); /* not built: any variable */
    assert_int_equal(optim_build(opt, &w, 1), 0);
    assert_int_equal(optim_check_gradients(opt, &pw, 1, 1), 0);
    assert_int_equal(optim_check_gradients(opt, &px, 1, 0), OPTIM_ENOTFOUND);
    assert_contains(optim_errmsg(opt), "MultiOptimizer: variable 'x' is unknown to this optimizer");
    optim_grad_var twice[2] = {pw, pw};
    assert_int_equal(optim_check_gradients(opt, twice, 2, 0), OPTIM_EINVAL);
    assert_contains(optim_errmsg(opt), "more than once");
    /* The step says the same, and changes nothing. */
    assert_int_equal(optim_apply_gradients(opt, &px, 1, 0), OPTIM_ENOTFOUND);
    assert_int_equal(optim_iterations(opt), 0);
    assert_int_equal(optim_var_get(x, 0), W0[0]);
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(x);
}

/* ---- nested wrappers ------------------------------------------------------------------ */

static const char *const NESTED[] = {
    "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": {\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": \"adam\", \"sync_period\": 2}}, \"sync_period\": 3}}",
    "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": \"SWA\", \"config\": {\"optimizer\": \"sgd\", \"average_period\": 2}}}}",
    "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": \"Adam\", \"config\": {\"use_ema\": true}}}}",
    "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": {\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": \"sgd\"}}}}",
    "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": {\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": \"sgd\", \"initial_scale\": 4.0}}, \"initial_scale\": 8.0}}",
};

/* INIT: "w" [4] f64; GRADS: 3 dense steps. */
static void write_inputs(const char *init, const char *grads, const char *second_name)
{
    optim_error err;
    optim_st_writer *w;
    optim_tensor t = optim_tensor_make(OPTIM_F64, (void *)W0, 1, (int64_t[]){4});
    assert_int_equal(optim_st_writer_create(&w, &err), 0);
    assert_int_equal(optim_st_writer_add(w, "w", &t, &err), 0);
    if (second_name) assert_int_equal(optim_st_writer_add(w, second_name, &t, &err), 0);
    assert_int_equal(optim_st_writer_save(w, init, &err), 0);
    optim_st_writer_destroy(w);
    static double g[3][4];
    assert_int_equal(optim_st_writer_create(&w, &err), 0);
    for (int k = 0; k < 3; k++) {
        char name[32];
        for (int i = 0; i < 4; i++) g[k][i] = G0[i] * (k + 1) * 0.5;
        snprintf(name, sizeof name, "%d/w", k);
        t = optim_tensor_make(OPTIM_F64, g[k], 1, (int64_t[]){4});
        assert_int_equal(optim_st_writer_add(w, name, &t, &err), 0);
    }
    assert_int_equal(optim_st_writer_save(w, grads, &err), 0);
    optim_st_writer_destroy(w);
}

/* The library's weights of a nested wrapper have distinct names (the outer
 * level's qualified), and `optim replay` writes every one of them with the
 * library's values. */
static void check_nested(const char *json)
{
    const char *cfg = optim_test_tmpfile("n.json"), *init = optim_test_tmpfile("n_init.st");
    const char *grads = optim_test_tmpfile("n_grads.st"), *out = optim_test_tmpfile("n_out.st");
    assert_int_equal(optim_test_write_file(cfg, json, strlen(json)), 0);
    write_inputs(init, grads, NULL);
    unlink(out);
    char *argv[] = {(char *)OPTIM_CLI_PATH, "replay",    (char *)cfg, (char *)init,
                    (char *)grads,          (char *)out, NULL};
    optim_test_proc r;
    if (optim_test_capture(argv, &r)) print_error("for %s:\n%s\n", json, r.err);
    assert_eq(r.status, 0);
    optim_optimizer *opt = optim_test_make(json);
    optim_var *v = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    for (int k = 0; k < 3; k++) {
        double g[4];
        for (int i = 0; i < 4; i++) g[i] = G0[i] * (k + 1) * 0.5;
        optim_grad_var p = pair_of(v, g);
        assert_int_equal(optim_apply_gradients(opt, &p, 1, 0), 0);
    }
    optim_st_file *o;
    optim_error err;
    assert_int_equal(optim_st_read(out, &o, &err), 0);
    size_t nw = optim_weights_count(opt);
    assert_int_equal(optim_st_count(o), 1 + nw);
    optim_tensor *wts = calloc(nw, sizeof *wts);
    optim_get_weights(opt, wts, nw);
    for (size_t i = 0; i < nw; i++) {
        const char *name = optim_weight_name(opt, i);
        for (size_t j = 0; j < i; j++) assert_string_not_equal(name, optim_weight_name(opt, j));
        optim_tensor got;
        assert_int_equal(optim_st_get(o, name, &got), 0);
        assert_memory_equal(got.data, wts[i].data,
                            (size_t)optim_tensor_numel(&got) * optim_dtype_size(got.dtype));
    }
    free(wts);
    optim_st_free(o);
    optim_destroy(opt);
    optim_var_destroy(v);
}

OPTIM_TEST(test_nested_wrappers)
{
    for (size_t i = 0; i < sizeof NESTED / sizeof *NESTED; i++) check_nested(NESTED[i]);
    /* The qualified names themselves. */
    optim_optimizer *la = optim_test_make(NESTED[0]);
    optim_var *v = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    assert_int_equal(optim_build(la, &v, 1), 0);
    assert_int_equal(optim_weights_count(la), 5);
    assert_string_equal(optim_weight_name(la, 3), "w/slow");
    char outer[128]; /* the outer level's weight, under its optimizer's name */
    snprintf(outer, sizeof outer, "%s/w/slow", optim_name(la));
    assert_string_equal(optim_weight_name(la, 4), outer);
    assert_string_not_equal(optim_name(la), "");
    assert_null(optim_weight_name(la, 5));
    optim_destroy(la);
    optim_var_destroy(v);
}

/* An INIT tensor named like a weight ("w/m" beside "w" under Adam): refused
 * before any step, with a line naming it; OUT is not created. */
OPTIM_TEST(test_init_name_is_a_weight)
{
    const char *cfg = optim_test_tmpfile("c.json"), *init = optim_test_tmpfile("c_init.st");
    const char *grads = optim_test_tmpfile("c_grads.st"), *out = optim_test_tmpfile("c_out.st");
    assert_int_equal(optim_test_write_file(cfg, "\"adam\"", 6), 0);
    write_inputs(init, grads, "w/m");
    unlink(out);
    char *argv[] = {(char *)OPTIM_CLI_PATH, "replay",    (char *)cfg, (char *)init,
                    (char *)grads,          (char *)out, NULL};
    optim_test_proc r;
    assert_ne(optim_test_capture(argv, &r), 0);
    assert_ne(access(out, F_OK), 0);
    assert_contains(r.err, "INIT tensor 'w/m'");
}

static double nan_fn(void *u)
{
    (void)u;
    return NAN;
}

/* A failed optim_build on a wrapper changes nothing at any level: the
 * inner optimizers have no slots and are not built (they accept another
 * variable set afterwards). */
OPTIM_TEST(test_failed_build_changes_nothing)
{
    optim_optimizer *la = optim_test_make(NESTED[0]);
    optim_optimizer *mid = optim_wrapper_inner(la), *adam = optim_wrapper_inner(mid);
    assert_int_equal(optim_set_hyper_fn(la, "slow_step_size", nan_fn, NULL), 0);
    optim_var *v = optim_test_var("w", OPTIM_F64, 1, (int64_t[]){4}, W0);
    optim_var *u = optim_test_var("u", OPTIM_F64, 1, (int64_t[]){4}, W0);
    assert_int_not_equal(optim_build(la, &v, 1), 0);
    assert_non_null(strstr(optim_errmsg(la), "slow_step_size"));
    assert_int_equal(optim_weights_count(la), 1);
    assert_int_equal(optim_weights_count(mid), 1);
    assert_null(optim_get_slot(adam, v, "m"));
    /* Not built: a gradient for u is accepted by every level. */
    assert_int_equal(optim_set_hyper(la, "slow_step_size", 0.5), 0);
    optim_grad_var p = pair_of(u, G0);
    assert_int_equal(optim_apply_gradients(la, &p, 1, 0), 0);
    assert_non_null(optim_get_slot(adam, u, "m"));
    assert_null(optim_get_slot(adam, v, "m"));
    optim_destroy(la);
    optim_var_destroy(v);
    optim_var_destroy(u);
}

int main(void) { return optim_test_run(); }
