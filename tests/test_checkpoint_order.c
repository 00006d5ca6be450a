/* Checkpoint restore matches optimizer weights by name (D13g): a run whose
 * slots were created in another order than the model's (the first step's
 * gradients came in reverse order, or some variables got their first
 * gradient a step later) restores bit for bit, and the resumed steps match
 * the uninterrupted run's; a checkpoint holding a negative Adam "v" (a slot
 * its class declares non-negative) is refused with nothing changed, and so
 * is one whose optimizer never saw some variables (missing slots). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "optim/checkpoint.h"
#include "optim/optim.h"

#define FEATURES 4
#define MAXV 8
#define MAXW 64

static void add_dense(optim_model *m, const char *name, int64_t units, int64_t seed)
{
    optim_layer *l;
    optim_error err;
    optim_dense_options d = optim_dense_defaults(units);
    d.name = name;
    d.seed = seed;
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
}

/* Dense(3) "first" -> Dense(2) "second", built; seed picks the weights. */
static optim_model *make_model(int64_t seed)
{
    optim_model *m;
    optim_error err;
    assert_ok(optim_sequential_create(&m, NULL, &err), &err);
    add_dense(m, "first", 3, seed);
    add_dense(m, "second", 2, seed + 1);
    assert_ok(optim_model_build(m, 1, (int64_t[]){FEATURES}), m);
    return m;
}

/* Gradients for vars[order[0..n)] at step s (deterministic, per element). */
static void step(optim_optimizer *opt, optim_var **vars, const int *order, size_t n, int s)
{
    optim_grad_var pairs[MAXV];
    float *g[MAXV];
    for (size_t i = 0; i < n; i++) {
        optim_var *v = vars[order[i]];
        int64_t k = optim_var_numel(v);
        g[i] = malloc((size_t)k * sizeof *g[i]);
        for (int64_t e = 0; e < k; e++)
            g[i][e] = (float)((e * 7 + order[i] * 3 + s * 5) % 11 - 5) * 0.125f;
        optim_tensor t = optim_tensor_make(OPTIM_F32, g[i], optim_var_rank(v), optim_var_shape(v));
        pairs[i] = (optim_grad_var){optim_grad_dense(t), v};
    }
    assert_ok(optim_apply_gradients(opt, pairs, n, 0), opt);
    for (size_t i = 0; i < n; i++) free(g[i]);
}

static const int ALL[4] = {0, 1, 2, 3};

/* Two steps whose slot creation order is not the model's: `late` = 0: the
 * first step's gradients in reverse order; 1: only the second layer's
 * variables at the first step, all of them at the second. */
static void run_unordered(optim_optimizer *opt, optim_var **vars, int late)
{
    static const int REVERSED[4] = {3, 2, 1, 0}, SECOND[2] = {2, 3};
    if (late) step(opt, vars, SECOND, 2, 0);
    else step(opt, vars, REVERSED, 4, 0);
    step(opt, vars, ALL, 4, 1);
}

/* b's weights are a's, by name, bit for bit. */
static void same_weights(optim_optimizer *a, optim_optimizer *b)
{
    optim_tensor wa[MAXW], wb[MAXW];
    size_t n = optim_get_weights(a, wa, MAXW);
    assert_eq(optim_get_weights(b, wb, MAXW), n);
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < n && strcmp(optim_weight_name(b, j), optim_weight_name(a, i)) != 0) j++;
        assert_true(j < n);
        assert_int_equal(wa[i].dtype, wb[j].dtype);
        size_t bytes = (size_t)optim_tensor_numel(&wa[i]) * optim_dtype_size(wa[i].dtype);
        assert_memory_equal(wa[i].data, wb[j].data, bytes);
    }
}

static void resume_unordered(const char *json, int late, const char *dir)
{
    optim_optimizer *o = optim_test_make(json), *o2 = optim_test_make(json);
    optim_model *m = make_model(1), *m2 = make_model(11);
    optim_var *v[MAXV], *v2[MAXV];
    assert_eq(optim_model_trainable_variables(m, v, MAXV), 4);
    assert_eq(optim_model_trainable_variables(m2, v2, MAXV), 4);
    run_unordered(o, v, late);
    /* The slots are not in model order (the restore's build order). */
    assert_true(strncmp(optim_weight_name(o, 1), "first/", 6) != 0 ||
                strncmp(optim_weight_name(o, 2), "first/", 6) != 0);
    optim_error err;
    assert_ok(optim_checkpoint_save(dir, m, o, 1, NULL, &err), &err);
    optim_checkpoint *c;
    assert_ok(optim_checkpoint_read(dir, &c, &err), &err);
    int rc = optim_checkpoint_restore(c, m2, o2, &err);
    if (rc) print_error("%s (late %d): %s\n", json, late, err.msg);
    assert_ok(rc, &err);
    optim_checkpoint_free(c);
    same_weights(o, o2);
    for (size_t i = 0; i < 4; i++) assert_vars_bitwise(v[i], v2[i]);
    for (int s = 2; s < 4; s++) {
        step(o, v, ALL, 4, s);
        step(o2, v2, ALL, 4, s);
    }
    for (size_t i = 0; i < 4; i++) assert_vars_bitwise(v[i], v2[i]);
    same_weights(o, o2);
    optim_model_destroy(m);
    optim_model_destroy(m2);
    optim_destroy(o);
    optim_destroy(o2);
}

OPTIM_TEST(restore_slots_created_in_another_order)
{
    static const char *const configs[] = {
        "\"adam\"",
        "{\"class_name\": \"Adam\", \"config\": {\"amsgrad\": true, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Ftrl\", \"config\": {\"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 0.5, \"centered\": true}}",
    };
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++)
        for (int late = 0; late < 2; late++)
            resume_unordered(configs[i], late, optim_test_tmpfile("ck_order"));
}

OPTIM_TEST(restore_refuses_negative_v)
{
    const char *dir = optim_test_tmpfile("ck_negv");
    optim_optimizer *o = optim_test_make("\"adam\""), *o2 = optim_test_make("\"adam\"");
    optim_model *m = make_model(1), *m2 = make_model(11);
    optim_var *v[MAXV], *v2[MAXV];
    optim_model_trainable_variables(m, v, MAXV);
    optim_model_trainable_variables(m2, v2, MAXV);
    step(o, v, ALL, 4, 0);
    /* A damaged state written as if valid (save does not check domains). */
    float *sv = optim_var_data(optim_get_slot(o, v[2], "v"));
    sv[1] = -0.5f;
    optim_error err;
    assert_ok(optim_checkpoint_save(dir, m, o, 1, NULL, &err), &err);
    optim_checkpoint *c;
    assert_ok(optim_checkpoint_read(dir, &c, &err), &err);
    float before[MAXV];
    for (size_t i = 0; i < 4; i++) before[i] = ((const float *)optim_var_cdata(v2[i]))[0];
    assert_status(optim_checkpoint_restore(c, m2, o2, &err), OPTIM_EFORMAT, &err);
    assert_contains(err.msg, "('second/kernel/v') element 1 is -0.5, expected >= 0");
    assert_eq(optim_weights_count(o2), 1);
    assert_eq(optim_iterations(o2), 0);
    for (size_t i = 0; i < 4; i++) assert_eq(((const float *)optim_var_cdata(v2[i]))[0], before[i]);
    optim_checkpoint_free(c);
    optim_model_destroy(m);
    optim_model_destroy(m2);
    optim_destroy(o);
    optim_destroy(o2);
}

/* A checkpoint whose optimizer never saw some variables (their slots are
 * missing) is refused, naming the first missing weight, nothing changed. */
OPTIM_TEST(restore_refuses_missing_slots)
{
    static const int SECOND[2] = {2, 3};
    const char *dir = optim_test_tmpfile("ck_missing");
    optim_optimizer *o = optim_test_make("\"adam\""), *o2 = optim_test_make("\"adam\"");
    optim_model *m = make_model(1), *m2 = make_model(11);
    optim_var *v[MAXV], *v2[MAXV];
    optim_model_trainable_variables(m, v, MAXV);
    optim_model_trainable_variables(m2, v2, MAXV);
    step(o, v, SECOND, 2, 0);
    optim_error err;
    assert_ok(optim_checkpoint_save(dir, m, o, 1, NULL, &err), &err);
    optim_checkpoint *c;
    assert_ok(optim_checkpoint_read(dir, &c, &err), &err);
    float before = ((const float *)optim_var_cdata(v2[0]))[0];
    assert_status(optim_checkpoint_restore(c, m2, o2, &err), OPTIM_ESTATE, &err);
    assert_contains(err.msg, "checkpoint has no optimizer weight first/");
    assert_contains(err.msg, "it has 5 weights, the optimizer 9");
    assert_eq(optim_weights_count(o2), 1);
    assert_eq(((const float *)optim_var_cdata(v2[0]))[0], before);
    optim_checkpoint_free(c);
    optim_model_destroy(m);
    optim_model_destroy(m2);
    optim_destroy(o);
    optim_destroy(o2);
}

int main(void) { return optim_test_run(); }
