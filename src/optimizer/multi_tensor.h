/* Multi-tensor apply (internal): the update of one step, every variable at
 * once, in one parallel region.
 *
 * Each variable with a gradient is an item: updated whole (one task),
 * element-wise (a task per fixed chunk of core/parallel.h) or in the
 * phases of its class (optim_phase_plan: a task per chunk and phase, then a
 * reduction per variable). The tasks of a phase are packed in order into
 * batches of at least OPTIM__CHUNK elements, so thousands of small variables
 * cost a few hundred scheduling decisions, not thousands; batches are handed
 * to threads dynamically. Which thread runs a task never changes what it
 * computes, so results do not depend on the number of threads. */
#ifndef OPTIM_OPTIMIZER_MULTI_TENSOR_H
#define OPTIM_OPTIMIZER_MULTI_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "optim/optimizer_class.h"

typedef enum optim__mt_mode {
    OPTIM__MT_WHOLE = 0,   /* one task: the whole variable (or a sparse update) */
    OPTIM__MT_CHUNKS = 1,  /* element-wise: one task per OPTIM__CHUNK elements */
    OPTIM__MT_PHASED = 2   /* plan.nphases passes over plan.chunk elements */
} optim__mt_mode;

typedef struct optim__mt_item {
    optim__mt_mode mode;
    int64_t numel;
    optim_phase_plan plan;  /* PHASED */
    int64_t nchunks;        /* PHASED, set by optim__mt_plan */
    double *partial;        /* PHASED: nchunks * plan.npartial, set by optim__mt_plan */
    double *shared;         /* PHASED: plan.nshared, zeroed, set by optim__mt_plan */
} optim__mt_item;

typedef struct optim__mt_task {
    size_t item;
    int phase;
    int64_t chunk;          /* index of the chunk within the item */
    int64_t off, count;     /* element range */
} optim__mt_task;

typedef struct optim__mt {
    optim__mt_item *items;
    size_t nitems;
    optim__mt_task *tasks;
    size_t ntasks;
    size_t *batch;          /* batch b runs tasks batch[b] .. batch[b + 1] - 1 */
    size_t bfirst[OPTIM_MAX_PHASES + 1]; /* phase p's batches: bfirst[p] .. bfirst[p + 1] - 1 */
    size_t *reduce;         /* items reduced after each phase */
    size_t rfirst[OPTIM_MAX_PHASES + 1];
    int nphases;
} optim__mt;

/* Cuts the n items (mode, numel and plan filled) into tasks and batches,
 * with every buffer taken from a. OPTIM_ENOMEM or OPTIM_OK. */
int optim__mt_plan(optim__mt *mt, optim__mt_item *items, size_t n, optim__arena *a);

typedef struct optim__mt_fns {
    void (*run)(void *ctx, const optim__mt_task *t, int tid);
    void (*reduce)(void *ctx, size_t item, int phase);
    void *ctx;
} optim__mt_fns;

/* Runs every task and reduction on nthreads threads, phase after phase. */
void optim__mt_run(const optim__mt *mt, int nthreads, const optim__mt_fns *f);

#endif
