/* Counting the library's allocations (tests linked with -Wl,--wrap for
 * malloc, calloc, realloc, aligned_alloc and posix_memalign: the tests/
 * section of CMakeLists.txt). Include in one test file per executable:
 * allocations grows by one per call while counting is 1. */
#ifndef OPTIM_TESTS_ALLOC_COUNT_H
#define OPTIM_TESTS_ALLOC_COUNT_H

#include <stddef.h>

static int counting;
static long allocations;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

/* A breakpoint for a counted allocation (gdb -ex 'b optim_test_alloc_hit'). */
__attribute__((noinline)) void optim_test_alloc_hit(void) { __asm__ volatile(""); }
#define COUNT()                                   \
    (counting ? optim_test_alloc_hit() : (void)0, \
     __atomic_add_fetch(&allocations, counting, __ATOMIC_RELAXED))
void *__wrap_malloc(size_t n)
{
    COUNT();
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size)
{
    COUNT();
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n)
{
    COUNT();
    return __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t align, size_t n)
{
    COUNT();
    return __real_aligned_alloc(align, n);
}
int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    COUNT();
    return __real_posix_memalign(p, align, n);
}
#undef COUNT

#endif
