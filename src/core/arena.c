/* The arena: a bump allocator over a list of blocks.
 *
 * Allocation takes the next 64-byte aligned run of the current block, or
 * starts a new block (at least twice the previous one). Reset forgets every
 * allocation; when a batch needed several blocks, they are replaced by one
 * block that holds the whole batch, so a steady training loop (or a
 * steady sequence of optimizer steps) allocates nothing after its first batch. */
#include "core/arena.h"

#include <stdint.h>

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64
#define MIN_BLOCK ((size_t)1 << 16)

struct optim__arena_block {
    optim__arena_block *next;
    size_t cap, used;
    unsigned char *data; /* ALIGN-aligned, cap bytes */
};

static optim__arena_block *block_new(size_t cap)
{
    optim__arena_block *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->data = aligned_alloc(ALIGN, cap);
    if (!b->data) {
        free(b);
        return NULL;
    }
    b->cap = cap;
    b->used = 0;
    b->next = NULL;
    return b;
}

static void block_free(optim__arena_block *b)
{
    free(b->data);
    free(b);
}

void *optim__arena_alloc(optim__arena *a, size_t bytes)
{
    if (bytes > SIZE_MAX / 2) return NULL;
    size_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (need == 0) need = ALIGN;
    optim__arena_block *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = b ? b->cap * 2 : MIN_BLOCK;
        while (cap < need) cap *= 2;
        optim__arena_block *nb = block_new(cap);
        if (!nb) return NULL;
        nb->next = b;
        a->head = b = nb;
        a->reserved += cap;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used_total += need;
    OPTIM_ASSERT(b->used <= b->cap && ((uintptr_t)p & (ALIGN - 1)) == 0);
    return p;
}

void *optim__arena_calloc(optim__arena *a, size_t bytes)
{
    void *p = optim__arena_alloc(a, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void optim__arena_reset(optim__arena *a)
{
    optim__arena_block *b = a->head;
    if (b && b->next) {
        /* Several blocks: keep one that fits everything this batch used. */
        size_t cap = MIN_BLOCK;
        while (cap < a->used_total) cap *= 2;
        optim__arena_free(a);
        optim__arena_block *nb = block_new(cap);
        if (nb) {
            a->head = nb;
            a->reserved = cap;
        }
    } else if (b) {
        b->used = 0;
    }
    a->used_total = 0;
}

void optim__arena_settle(optim__arena *a)
{
    if (a->head && a->head->next) optim__arena_reset(a);
}

void optim__arena_free(optim__arena *a)
{
    optim__arena_block *b = a->head;
    while (b) {
        optim__arena_block *next = b->next;
        block_free(b);
        b = next;
    }
    a->head = NULL;
    a->reserved = 0;
    a->used_total = 0;
}

optim__arena_point optim__arena_mark(const optim__arena *a)
{
    return (optim__arena_point){a->head, a->head ? a->head->used : 0, a->used_total};
}

void optim__arena_release(optim__arena *a, optim__arena_point p)
{
    OPTIM_ASSERT(p.used_total <= a->used_total);
    while (a->head != p.head) { /* blocks started since */
        optim__arena_block *b = a->head;
        OPTIM_ASSERT(b); /* p.head is one of this arena's blocks */
        a->head = b->next;
        a->reserved -= b->cap;
        block_free(b);
    }
    OPTIM_ASSERT(!a->head || p.used <= a->head->used);
    if (a->head) a->head->used = p.used;
    a->used_total = p.used_total;
}
