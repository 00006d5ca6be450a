/* The optimizer object's plain accessors and its error message: the bottom
 * of src/optimizer's own files (it calls none of the others), so that
 * keras3_options.c and weight_decay.c can report errors without calling
 * back into optimizer.c. */
#include "optimizer/impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int optim__opt_take(optim_optimizer *opt, const optim_error *err)
{
    snprintf(opt->errmsg, sizeof opt->errmsg, "%s", err->msg);
    return err->code;
}

int optim_set_error(optim_optimizer *opt, int code, const char *fmt, ...)
{
    optim_error e;
    va_list ap;
    va_start(ap, fmt);
    optim__verr(&e, code, fmt, ap);
    va_end(ap);
    return optim__opt_take(opt, &e);
}

const char *optim_errmsg(const optim_optimizer *opt)
{
    return opt ? opt->errmsg : "optimizer is NULL";
}
const char *optim_name(const optim_optimizer *opt) { return opt->name; }
const optim_class *optim_class_of(const optim_optimizer *opt) { return &opt->cls; }
optim_generation optim_generation_of(const optim_optimizer *opt) { return opt->gen; }
int64_t optim_iterations(const optim_optimizer *opt)
{
    return opt->in_hooks ? opt->hook_iterations : opt->iterations;
}
void *optim_state(const optim_optimizer *opt) { return opt->state; }
void optim_free(void *p) { free(p); }

void *optim_step_scratch(optim_optimizer *opt, size_t bytes)
{
    return opt ? optim__arena_alloc(&opt->arena, bytes) : NULL;
}
