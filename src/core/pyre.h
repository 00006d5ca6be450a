/* Python `re` patterns as POSIX extended regular expressions (pyre.c). */
#ifndef OPTIM_CORE_PYRE_H
#define OPTIM_CORE_PYRE_H

#include <stddef.h>

/* Writes to *ere (malloc'd) a glibc POSIX extended regular expression that
 * matches the names Python's re matches with py (re.search, or
 * re.fullmatch by the caller's rule). Returns 0; -1 for a construct it
 * cannot express, why naming it; -2 out of memory. */
int optim__pyre_to_ere(const char *py, char **ere, char *why, size_t wn);

#endif
