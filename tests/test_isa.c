/* The instruction-set level (optim/isa.h): OPTIM_ISA's values, refused
 * with a message that names the value and what is expected when unknown or
 * above the CPU's level; the names; optim_isa_pick's fallbacks; and an
 * optimizer of a built-in class running the level's build of its file. */
#include <stdlib.h>
#include <string.h>

#include "core/isa.h"
#include "optim/optim.h"
#include "testutil.h"

OPTIM_TEST(test_choose)
{
    optim_error err;
    optim_isa_level l = OPTIM_ISA_BUILT_IN;
    assert_ok(optim__isa_choose(NULL, OPTIM_ISA_AVX2, &l, &err), &err);
    assert_int_equal(l, OPTIM_ISA_AVX2);
    assert_ok(optim__isa_choose("", OPTIM_ISA_AVX512, &l, &err), &err);
    assert_int_equal(l, OPTIM_ISA_AVX512);
    assert_ok(optim__isa_choose("sse2", OPTIM_ISA_AVX512, &l, &err), &err);
    assert_int_equal(l, OPTIM_ISA_SSE2);
    assert_ok(optim__isa_choose("avx2", OPTIM_ISA_AVX2, &l, &err), &err);
    assert_int_equal(l, OPTIM_ISA_AVX2);
    /* Above the CPU's level: refused, l unchanged. */
    assert_status(optim__isa_choose("avx512", OPTIM_ISA_AVX2, &l, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "OPTIM_ISA=avx512: this CPU lacks avx512; it runs avx2 at most");
    assert_int_equal(l, OPTIM_ISA_AVX2);
    assert_status(optim__isa_choose("avx2", OPTIM_ISA_SSE2, &l, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "expected sse2 .. sse2");
    /* Unknown, case and all. */
    const char *bad[] = {"AVX2", "avx", "avx-512", "native", " sse2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_status(optim__isa_choose(bad[i], OPTIM_ISA_AVX512, &l, &err), OPTIM_EINVAL, &err);
        assert_contains(err.msg, bad[i]);
        assert_contains(err.msg, "expected sse2, avx2 or avx512");
    }
    /* A build with one level takes no OPTIM_ISA. */
    assert_status(optim__isa_choose("sse2", OPTIM_ISA_BUILT_IN, &l, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "built for one instruction set");
}

OPTIM_TEST(test_names)
{
    assert_string_equal(optim_isa_name(OPTIM_ISA_SSE2), "sse2");
    assert_string_equal(optim_isa_name(OPTIM_ISA_AVX2), "avx2");
    assert_string_equal(optim_isa_name(OPTIM_ISA_AVX512), "avx512");
    assert_string_equal(optim_isa_name(OPTIM_ISA_BUILT_IN), "built-in");
    assert_null(optim_isa_name((optim_isa_level)4));
    assert_null(optim_isa_name((optim_isa_level)-1));
}

/* The level in use is one the CPU runs, the same on every call, and picks
 * the matching table, falling back to lower ones where a level has none. */
OPTIM_TEST(test_level_in_use)
{
    optim_isa_level l, again;
    optim_error err;
    assert_ok(optim_isa(&l, &err), &err);
    assert_true(optim_isa_supported(l));
    assert_ok(optim_isa(&again, &err), &err);
    assert_int_equal(l, again);
    const optim_class a = {.name = "a"}, b = {.name = "b"}, c = {.name = "c"};
    const optim_class *want = l == OPTIM_ISA_AVX512 ? &c : l == OPTIM_ISA_AVX2 ? &b : &a;
    assert_ptr_equal(optim_isa_pick(&a, &b, &c), want);
    assert_ptr_equal(optim_isa_pick(&a, NULL, NULL), &a);
    assert_ptr_equal(optim_isa_pick(&a, &b, NULL),
                     l == OPTIM_ISA_BUILT_IN || l == OPTIM_ISA_SSE2 ? &a : &b);
    if (l != OPTIM_ISA_BUILT_IN) assert_true(optim_isa_supported(OPTIM_ISA_SSE2));
}

/* A built-in optimizer runs its class's build for the level in use: the
 * hooks are those of another table than the baseline one exactly when the
 * level is above sse2. */
OPTIM_TEST(test_builtin_runs_level)
{
    optim_isa_level l;
    optim_error err;
    assert_ok(optim_isa(&l, &err), &err);
    optim_optimizer *opt;
    assert_ok(optim_create(&opt, &optim_adam_class, NULL, &err), &err);
    const int baseline = optim_class_of(opt)->apply_dense == optim_adam_class.apply_dense;
    assert_int_equal(baseline, l == OPTIM_ISA_SSE2 || l == OPTIM_ISA_BUILT_IN);
    assert_string_equal(optim_class_of(opt)->name, "Adam");
    optim_destroy(opt);
}

int main(void) { return optim_test_run(); }
