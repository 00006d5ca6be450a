/* optim_class_at and optim_schedule_class_at list the registry: the
 * built-ins in their X-macro order, then registered classes in the order
 * they were registered, then NULL; each listed class is what lookup by its
 * name finds. */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "optim/optim.h"

static void sgd_like(const optim_dense_update *u) { (void)u; }

static optim_class user_class(const char *name)
{
    optim_class c = {.size = sizeof(optim_class),
                     .version = OPTIM_CLASS_VERSION,
                     .name = name,
                     .flags = OPTIM_CLASS_ELEMENTWISE,
                     .default_learning_rate = 0.01,
                     .apply_dense = sgd_like};
    return c;
}

static double flat(const optim_schedule *s, int64_t step)
{
    (void)s;
    return (double)step;
}

static size_t count_classes(void)
{
    size_t n = 0;
    while (optim_class_at(n)) n++;
    return n;
}

OPTIM_TEST(test_builtins_first_in_order)
{
    const optim_class *want[] = {
#define ENTRY(sym) &sym,
        OPTIM_BUILTIN_CLASSES(ENTRY)
#undef ENTRY
    };
    size_t nb = sizeof want / sizeof *want;
    assert_eq(count_classes(), nb);
    for (size_t i = 0; i < nb; i++) {
        assert_ptr_equal(optim_class_at(i), want[i]);
        assert_ptr_equal(optim_find_class(optim_class_at(i)->name), want[i]);
    }
    const optim_schedule_class *sched[] = {
#define ENTRY(sym) &sym,
        OPTIM_BUILTIN_SCHEDULES(ENTRY)
#undef ENTRY
    };
    size_t ns = sizeof sched / sizeof *sched;
    for (size_t i = 0; i < ns; i++) assert_ptr_equal(optim_schedule_class_at(i), sched[i]);
    assert_null(optim_schedule_class_at(ns));
}

OPTIM_TEST(test_registered_after_in_order)
{
    size_t nb = count_classes();
    optim_error err;
    const char *names[] = {"ListedFirst", "ListedSecond", "ListedThird"};
    for (size_t i = 0; i < 3; i++) {
        optim_class c = user_class(names[i]);
        assert_ok(optim_register_class(&c, &err), &err);
    }
    assert_eq(count_classes(), nb + 3);
    for (size_t i = 0; i < 3; i++) {
        const optim_class *c = optim_class_at(nb + i);
        assert_string_equal(c->name, names[i]);
        assert_ptr_equal(optim_find_class(names[i]), c);
    }
    assert_null(optim_class_at(nb + 3));
    assert_null(optim_class_at((size_t)-1));

    size_t ns = 0;
    while (optim_schedule_class_at(ns)) ns++;
    optim_schedule_class s = {.size = sizeof s,
                              .version = OPTIM_SCHEDULE_CLASS_VERSION,
                              .name = "ListedSchedule",
                              .value = flat};
    assert_ok(optim_register_schedule_class(&s, &err), &err);
    assert_string_equal(optim_schedule_class_at(ns)->name, "ListedSchedule");
    assert_ptr_equal(optim_schedule_class_at(ns), optim_find_schedule_class("ListedSchedule"));
    assert_null(optim_schedule_class_at(ns + 1));
}

int main(void) { return optim_test_run(); }
