/* Slot count (optim_class.min_slots, version 5) and repeated slot names:
 * a class whose create_slots adds fewer slots than its table's min_slots,
 * or adds one name twice, fails the step before its kernel runs, with a
 * message naming the slots, and leaves the variable, iterations and the
 * weights as they were; registration refuses a min_slots out of range or
 * without create_slots; every built-in adds at least its min_slots. */
#include "testutil.h"

#include <string.h>

#include "optim/optim.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

static int kernel_runs;

static int two_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
}

static int one_slot(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
}

static int same_slot_twice(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
}

static void prepare(optim_optimizer *opt, optim_dtype dt, void *c)
{
    *(double *)c = optim_learning_rate(opt, dt);
}

/* m += g; v += g * g; w -= lr * m: reads slots[0] and slots[1] unchecked. */
static void dense(const optim_dense_update *u)
{
    kernel_runs++;
    double lr = *(const double *)u->coef;
    double *w = u->param, *m = u->slots[0], *v = u->slots[1];
    const double *g = u->grad;
    for (int64_t i = 0; i < u->count; i++) {
        m[i] += g[i];
        v[i] += g[i] * g[i];
        w[i] -= lr * m[i];
    }
}

static optim_class slot_class(const char *name,
                              int (*create)(optim_optimizer *, optim_var *, optim_error *))
{
    return (optim_class){
        .size = sizeof(optim_class),
        .version = OPTIM_CLASS_VERSION,
        .name = name,
        .flags = OPTIM_CLASS_ELEMENTWISE,
        .default_learning_rate = 0.1,
        .coef_size = sizeof(double),
        .create_slots = create,
        .prepare = prepare,
        .apply_dense = dense,
        .min_slots = 2,
    };
}

/* One step of opt on a fresh F64 variable must fail with `status` and a
 * message holding `needle`, the kernel not run and nothing changed. */
static void step_refused(const optim_class *c, int status, const char *needle)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_ok(optim_create(&opt, c, NULL, &err), &err);
    optim_var *a = optim_test_var("a", OPTIM_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    double g[3] = {0.5, -1, 2};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){3})), a};
    kernel_runs = 0;
    assert_status(optim_apply_gradients(opt, &p, 1, 0), status, opt);
    assert_contains(optim_errmsg(opt), needle);
    assert_int_equal(kernel_runs, 0);
    assert_int_equal(optim_iterations(opt), 0);
    const double *w = optim_var_data(a);
    assert_true(w[0] == 1 && w[1] == 2 && w[2] == 3);
    optim_tensor t[4];
    assert_int_equal(optim_get_weights(opt, t, 4), 1); /* iterations only */
    /* Refused again, the same way: the failed step left no half-tracked variable. */
    assert_status(optim_apply_gradients(opt, &p, 1, 0), status, opt);
    assert_int_equal(kernel_runs, 0);
    optim_test_free(opt, a);
}

OPTIM_TEST(a_slot_short_is_refused_before_the_kernel)
{
    optim_class c = slot_class("SlotShort", one_slot);
    step_refused(&c, OPTIM_ESTATE, "create_slots added 1 slot to 'a' ('m')");
    step_refused(&c, OPTIM_ESTATE, "declares min_slots 2");
}

OPTIM_TEST(a_slot_added_twice_is_refused)
{
    optim_class c = slot_class("SlotTwice", same_slot_twice);
    step_refused(&c, OPTIM_EINVAL, "slot 'm' of 'a' added twice");
    c.min_slots = 0; /* refused without min_slots too */
    step_refused(&c, OPTIM_EINVAL, "added twice");
}

OPTIM_TEST(enough_slots_step)
{
    optim_class c = slot_class("SlotEnough", two_slots);
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_ok(optim_create(&opt, &c, NULL, &err), &err);
    optim_var *a = optim_test_var("a", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    double g[2] = {0.5, -1};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){2})), a};
    kernel_runs = 0;
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_true(kernel_runs > 0);
    const double *w = optim_var_data(a);
    assert_true(w[0] == 1 - 0.1 * 0.5 && w[1] == 2 + 0.1);
    optim_test_free(opt, a);
}

OPTIM_TEST(registration_refuses_a_bad_min_slots)
{
    const struct {
        int32_t min;
        int has_create;
        int status;
        const char *needle;
    } bad[] = {
        {-1, 1, OPTIM_ERANGE, "'SlotBad': min_slots -1, expected 0 .. "},
        {OPTIM_MAX_SLOTS + 1, 1, OPTIM_ERANGE, "expected 0 .. "},
        {1, 0, OPTIM_EINVAL, "min_slots is 1 but there is no create_slots hook"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        optim_class c = slot_class("SlotBad", bad[i].has_create ? two_slots : NULL);
        c.min_slots = bad[i].min;
        optim_error err;
        assert_status(optim_register_class(&c, &err), bad[i].status, &err);
        assert_contains(err.msg, bad[i].needle);
        optim_optimizer *opt = NULL;
        assert_status(optim_create(&opt, &c, NULL, &err), bad[i].status, &err);
        assert_null(opt);
    }
}

/* Every built-in, default config, one step on a vector: it has at least
 * min_slots slots of its own (the promise its kernel relies on). */
#define ENTRY(sym) &sym,
static const optim_class *const builtins[] = {OPTIM_BUILTIN_CLASSES(ENTRY)};
#undef ENTRY

static size_t slots_of(const optim_optimizer *opt, const optim_var *var)
{
    const char *names[64];
    size_t n = optim_get_slot_names(opt, names, 64), found = 0;
    for (size_t k = 0; k < n && k < 64; k++) found += optim_get_slot(opt, var, names[k]) != NULL;
    return found;
}

OPTIM_TEST(builtins_add_their_min_slots)
{
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++) {
        const optim_class *c = builtins[i];
        if (c->min_slots == 0) continue;
        optim_optimizer *opt = NULL;
        optim_error err;
        optim_options o = optim_options_defaults();
        if (c->flags & OPTIM_CLASS_LEGACY_ONLY) o.generation = OPTIM_LEGACY; /* TF Addons' */
        assert_ok(optim_create(&opt, c, &o, &err), &err);
        optim_var *a = optim_test_var("a", OPTIM_F32, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
        float g[4] = {0.5f, -1, 2, 0.25f};
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){4})),
                            a};
        assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        size_t n = slots_of(opt, a);
        if (n < (size_t)c->min_slots)
            fail_msg("%s: %zu slots, min_slots %d", c->name, n, (int)c->min_slots);
        optim_test_free(opt, a);
    }
}

int main(void) { return optim_test_run(); }
