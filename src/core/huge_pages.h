/* Storage for large variables on transparent huge pages (internal).
 *
 * A lazy sparse step touches rows scattered over a table and its slots,
 * hundreds of MB: with 4 KiB pages nearly every row is a TLB miss (a page
 * walk, itself a cache miss; in a virtual machine a walk of two page
 * tables). On 2 MiB pages the TLB covers gigabytes. Linux gives huge pages
 * to anonymous memory that asks for them (madvise MADV_HUGEPAGE; the
 * default `transparent_hugepage/enabled` is "madvise"); elsewhere this is
 * an aligned allocation and nothing more. */
#ifndef OPTIM_CORE_HUGE_PAGES_H
#define OPTIM_CORE_HUGE_PAGES_H

#include <stddef.h>

/* Bytes from which a variable's data gets an allocation of its own, on huge
 * pages where the system has them. */
#define OPTIM__HUGE_PAGE ((size_t)2 << 20)

/* bytes (>= OPTIM__HUGE_PAGE) aligned to OPTIM__HUGE_PAGE, the whole huge
 * pages among them advised as such; NULL when out of memory. Free with
 * free(). The tail after the last whole huge page stays on small pages, so
 * no more memory is used than asked (rounded to small pages). */
void *optim__huge_alloc(size_t bytes);

#endif
