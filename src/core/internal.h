/* Internal helpers shared across src/ (prefix optim__). Not installed. */
#ifndef OPTIM_CORE_INTERNAL_H
#define OPTIM_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "optim/status.h"
#include "optim/tensor.h"

#if defined(__GNUC__)
#define OPTIM__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define OPTIM__PRINTF(a, b)
#endif

/* Fills err (if not NULL) with code and a formatted message; returns code
 * (the public optim_error_set, under the internal name the library uses). */
#define optim__err optim_error_set
int optim__verr(optim_error *err, int code, const char *fmt, va_list ap);
void optim__err_clear(optim_error *err);

/* Checks a user-supplied tensor header: dtype in `allowed` (bit mask of
 * 1u << dtype), rank 0..8, dims >= 0, numel fits, data non-NULL when numel>0.
 * `what` names it in the message. */
int optim__tensor_check(const optim_tensor *t, unsigned allowed, const char *what,
                        optim_error *err);

/* Overflow-checked helpers. */
int optim__mul_overflow_i64(int64_t a, int64_t b, int64_t *out);

/* malloc wrappers that return NULL for size 0 requests safely. */
void *optim__malloc(size_t n);
void *optim__calloc(size_t count, size_t size);
char *optim__strdup(const char *s);

/* Whether glibc's regcomp would build too much, or take too long, for a
 * POSIX extended regular expression (patterns.c): 1 for a repeat of a
 * repeat (as Python's re refuses it) or of what can match empty, or
 * repeats that add more than OPTIM__REGEX_MAX nodes (an estimate) to the
 * pattern's own length. */
#define OPTIM__REGEX_MAX 2048
int optim__regex_too_large(const char *pattern);

#define OPTIM__MASK(dt) (1u << (unsigned)(dt))
#define OPTIM__FLOAT_MASK (OPTIM__MASK(OPTIM_F32) | OPTIM__MASK(OPTIM_F64))
/* What optimizer variables may hold: FLOAT_MASK plus the half storage types
 * (the tape and the nn layer take FLOAT_MASK only). */
#define OPTIM__VAR_MASK (OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_F16) | OPTIM__MASK(OPTIM_BF16))

/* OPTIM_ASSERT(cond): an internal invariant, never a check of user input
 * (that returns an error). Where NDEBUG is not defined (Debug builds) or
 * OPTIM_DEBUG_ASSERTS is (the sanitizer builds; CMake option
 * OPTIM_DEBUG_ASSERTS), a false cond prints "FILE:LINE: FUNCTION: internal
 * invariant failed: COND" on stderr and aborts; otherwise cond is not
 * evaluated (but what it names counts as used). Tested by
 * tests/test_optim_assert.sh. */
#if !defined(NDEBUG) || defined(OPTIM_DEBUG_ASSERTS)
#include <stdio.h>
#include <stdlib.h>
#define OPTIM_ASSERT(cond)                                                                    \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: %s: internal invariant failed: %s\n", __FILE__, __LINE__, \
                    __func__, #cond);                                                         \
            abort();                                                                          \
        }                                                                                     \
    } while (0)
#else
#define OPTIM_ASSERT(cond) ((void)(0 && (cond)))
#endif

#endif
