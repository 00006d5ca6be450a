/* Per-variable scratch blocks a class keeps in its state (internal,
 * header-only): Muon's Newton-Schulz matrices, ConditionalGradient's Gram
 * matrix. A block is reserved when the variable's slots are created, so
 * that a step cannot fail for want of memory, and freed with the
 * optimizer (the class's destroy hook). Looked up by variable address. */
#ifndef OPTIM_OPTIMIZERS_VAR_SCRATCH_H
#define OPTIM_OPTIMIZERS_VAR_SCRATCH_H

#include <stdlib.h>

#include "optim/optimizer_class.h"

typedef struct optim__scratch {
    const optim_var *var;
    size_t bytes;
    void *buf;
} optim__scratch;

/* Zeroed with the class state; optim__scratch_free releases it. */
typedef struct optim__scratch_set {
    size_t n, cap;
    optim__scratch *sc;
} optim__scratch_set;

/* var's block, NULL if none. */
static inline void *optim__scratch_of(const optim__scratch_set *s, const optim_var *var)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->sc[i].var == var) return s->sc[i].buf;
    return NULL;
}

/* A block of `bytes` for var: kept if it has that size, else (re)made (a
 * block left by a rolled-back step whose variable was freed and whose
 * address came back is resized). OPTIM_ENOMEM leaves the set as it was. */
static inline int optim__scratch_reserve(optim__scratch_set *s, const optim_var *var, size_t bytes)
{
    size_t i = 0;
    while (i < s->n && s->sc[i].var != var) i++;
    if (i == s->n && s->n == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 8;
        optim__scratch *grown = realloc(s->sc, cap * sizeof *grown);
        if (!grown) return OPTIM_ENOMEM;
        s->sc = grown;
        s->cap = cap;
    }
    if (i < s->n && s->sc[i].bytes == bytes) return 0;
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) return OPTIM_ENOMEM;
    if (i == s->n) s->n++;
    else free(s->sc[i].buf);
    s->sc[i] = (optim__scratch){var, bytes, buf};
    return 0;
}

static inline void optim__scratch_free(optim__scratch_set *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->sc[i].buf);
    free(s->sc);
    *s = (optim__scratch_set){0, 0, NULL};
}

#endif
