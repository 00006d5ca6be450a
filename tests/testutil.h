/* Shared test helpers: cmocka plus small assertion helpers for numbers. */
#ifndef OPTIM_TESTUTIL_H
#define OPTIM_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "optim/optim.h"

/* An optimizer from JSON; fails the test (printing the JSON and the error)
 * if the config is refused. */
optim_optimizer *optim_test_make(const char *json);

/* A variable of dtype dt and the given shape holding init (doubles, rounded
 * to float for F32); fails the test on error. */
optim_var *optim_test_var(const char *name, optim_dtype dt, int32_t rank, const int64_t *shape,
                          const double *init);

/* Fails the test unless |a - b| <= atol + rtol * |b| (NaN never passes). */
#define assert_close(a, b, rtol, atol) \
    optim_test_assert_close((double)(a), (double)(b), (rtol), (atol), #a, __FILE__, __LINE__)
void optim_test_assert_close(double a, double b, double rtol, double atol, const char *expr,
                             const char *file, int line);

/* A fresh path under a per-process temporary directory (static buffer per call slot). */
const char *optim_test_tmpfile(const char *name);

/* Writes len bytes to path; returns 0 on success. */
int optim_test_write_file(const char *path, const void *data, size_t len);

#endif
