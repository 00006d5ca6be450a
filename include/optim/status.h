/*
 * optim/status.h - status codes and error reports.
 *
 * Every optim function that can fail returns an int status: 0 (OPTIM_OK) on
 * success, a negative OPTIM_E* code otherwise. The codes come from one X-macro
 * list, so the enum and optim_strerror() can never disagree.
 *
 * The detailed message (which variable, which value, what was expected) lives
 * on the object the call was made on: optim_errmsg(opt) for an optimizer,
 * optim_var_errmsg(var) for a variable. Functions that have no object yet
 * (constructors, file readers) take an optional `optim_error *` and fill it.
 * The library never keeps messages in mutable globals.
 *
 *     optim_error err;
 *     optim_var *w;
 *     int64_t shape[2] = {3, 4};
 *     if (optim_var_create(&w, "w", OPTIM_F32, 2, shape, NULL, &err) != OPTIM_OK)
 *         fprintf(stderr, "%s\n", err.msg);
 */
#ifndef OPTIM_STATUS_H
#define OPTIM_STATUS_H

#include "optim/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, value, description) */
#define OPTIM_STATUS_LIST(X)            \
    X(OK, 0, "success")                 \
    X(EINVAL, -1, "invalid argument")   \
    X(ENOMEM, -2, "out of memory")      \
    X(ESHAPE, -3, "shape mismatch")     \
    X(EDTYPE, -4, "dtype mismatch")     \
    X(ERANGE, -5, "value out of range") \
    X(ENOTFOUND, -6, "not found")       \
    X(EKEY, -7, "unknown key")          \
    X(ETYPE, -8, "wrong value type")    \
    X(EPARSE, -9, "malformed JSON")     \
    X(EIO, -10, "input/output error")   \
    X(EFORMAT, -11, "malformed file")   \
    X(ENOTSUP, -12, "not supported")    \
    X(ESTATE, -13, "invalid state")     \
    X(EVERSION, -14, "incompatible version")

typedef enum optim_status {
#define OPTIM__STATUS_ENUM(name, value, text) OPTIM_##name = value,
    OPTIM_STATUS_LIST(OPTIM__STATUS_ENUM)
#undef OPTIM__STATUS_ENUM
} optim_status;

/* Static description of a status code ("unknown status" for others). */
OPTIM_API const char *optim_strerror(int status);

/* Where functions without an object report details. `msg` is always
 * NUL-terminated; `code` repeats the returned status. */
#define OPTIM_ERRMSG_MAX 512
typedef struct optim_error {
    int code;
    char msg[OPTIM_ERRMSG_MAX];
} optim_error;

/* Fills err (when not NULL) with code and a printf-style message, and
 * returns code: for hooks that report through an optim_error (validate,
 * set_config, create_slots, a plugin's optim_plugin_init).
 *     return optim_error_set(err, OPTIM_EINVAL, "MyOpt: beta is %g, expected < 1", beta); */
OPTIM_API int optim_error_set(optim_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
