/* The loader of optim replay (replay_load.c), shared with optim conformance
 * --reference: variables from the tensors of one safetensors file whose
 * names start with a prefix ("" for INIT, "init/" for a reference), the
 * recorded steps from another's (or the same file's, under "grads/"):
 * PREFIX + K/NAME dense, PREFIX + K/NAME/indices and /values sparse. */
#ifndef OPTIM_TOOLS_REPLAY_H
#define OPTIM_TOOLS_REPLAY_H

#include <stdint.h>

#include "optim/optim.h"

typedef struct grad_ref {
    const char *dense, *indices, *values; /* full tensor names, or NULL */
} grad_ref;

typedef struct replay {
    /* Set by the caller before replay_load. */
    const char *cmd; /* messages start "CMD: " */
    const char *init_label, *grads_label; /* "INIT", "GRADS"; "REF" */
    const char *init_prefix, *grads_prefix; /* "" or "init/", "grads/" */
    optim_st_file *init, *grads; /* may be the same file */
    optim_optimizer *opt; /* the optimizer that replay_step steps */
    /* Filled by replay_load. */
    optim_var **vars; /* one per INIT tensor, sorted by name (the prefix off) */
    size_t nvars;
    grad_ref *refs; /* [steps][nvars] */
    int64_t steps;
    optim_grad_var *pairs;
    int64_t **idx_buf; /* per variable, converted indices */
} replay;

/* One line "CMD: message" on stderr; returns 1. */
int replay_fail(const replay *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Creates the variables and indexes the gradients of every step; 1 after
 * a message on any bad input. */
int replay_load(replay *r);
/* Applies step k to r->opt; 1 after a message if it fails. */
int replay_step(replay *r, int64_t k);
/* Frees all of r (r->init and r->grads, once when they are the same file). */
void replay_free(replay *r);

#endif
