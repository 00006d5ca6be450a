/* Large allocations on transparent huge pages (huge_pages.h). */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "core/huge_pages.h"

#include <stdint.h>
#include <stdlib.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

void *optim__huge_alloc(size_t bytes)
{
    if (bytes > SIZE_MAX - OPTIM__HUGE_PAGE) return NULL;
    const size_t whole = bytes / OPTIM__HUGE_PAGE * OPTIM__HUGE_PAGE;
    void *p = aligned_alloc(OPTIM__HUGE_PAGE, whole + (bytes > whole ? OPTIM__HUGE_PAGE : 0));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Advice only: where THP is off, the pages stay small. */
    if (p && whole) (void)madvise(p, whole, MADV_HUGEPAGE);
#endif
    return p;
}
