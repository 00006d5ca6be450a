/* A bump allocator over a list of blocks (internal): the tape's nodes and
 * an optimizer's per-step buffers live in one each. */
#ifndef OPTIM_CORE_ARENA_H
#define OPTIM_CORE_ARENA_H

#include <stddef.h>

typedef struct optim__arena_block optim__arena_block;

typedef struct optim__arena {
    optim__arena_block *head; /* current block first */
    size_t reserved; /* bytes of all blocks */
    size_t used_total; /* bytes handed out since the last reset */
} optim__arena;

/* 64-byte aligned memory from the arena, NULL if out of memory. */
void *optim__arena_alloc(optim__arena *a, size_t bytes);
/* Same, zeroed. */
void *optim__arena_calloc(optim__arena *a, size_t bytes);
/* Forgets every allocation. If more than one block was needed, they are
 * merged into one block big enough for the whole batch, so the next batch
 * of the same size allocates nothing. */
void optim__arena_reset(optim__arena *a);
/* At the end of a batch: if it needed several blocks, resets now (so the
 * merge happens in this batch, not at the start of the next); otherwise
 * nothing. */
void optim__arena_settle(optim__arena *a);
void optim__arena_free(optim__arena *a);

/* A point to come back to: optim__arena_release gives back everything
 * allocated since optim__arena_mark (for a short-lived buffer, such as
 * a sort's, in a call that may come many times between resets). */
typedef struct optim__arena_point {
    optim__arena_block *head;
    size_t used, used_total;
} optim__arena_point;
optim__arena_point optim__arena_mark(const optim__arena *a);
void optim__arena_release(optim__arena *a, optim__arena_point p);

#endif
