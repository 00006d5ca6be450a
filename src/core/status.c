/* Status codes (from the X-macro list in optim/status.h) and error reports. */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>

const char *optim_strerror(int status)
{
    switch (status) {
#define OPTIM__STATUS_CASE(name, value, text) \
    case value: return text;
        OPTIM_STATUS_LIST(OPTIM__STATUS_CASE)
#undef OPTIM__STATUS_CASE
    default: return "unknown status";
    }
}

int optim__verr(optim_error *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int optim_error_set(optim_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    optim__verr(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void optim__err_clear(optim_error *err)
{
    if (err) {
        err->code = OPTIM_OK;
        err->msg[0] = '\0';
    }
}
