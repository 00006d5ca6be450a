/* Multi-tensor apply (internal): the update of one step, every variable at
 * once, in one parallel region.
 *
 * The pipeline's own tasks (element-wise chunks, whole variables, sparse
 * pieces: "external" tasks, known to this file only by index and weight)
 * run in the first phase; a variable of a phased class is an item with a
 * task per chunk and phase of its optim_phase_plan, and a reduction per
 * variable after each phase. The tasks of a phase are packed in order into
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
    OPTIM__MT_NONE = 0, /* the variable's work is external tasks (or nothing) */
    OPTIM__MT_PHASED = 1 /* plan.nphases passes over plan.chunk elements */
} optim__mt_mode;

typedef struct optim__mt_item {
    optim__mt_mode mode;
    int64_t numel;
    optim_phase_plan plan; /* PHASED */
    int64_t nchunks; /* PHASED, set by optim__mt_plan */
    double *partial; /* PHASED: nchunks * plan.npartial, set by optim__mt_plan */
    double *shared; /* PHASED: plan.nshared, zeroed, set by optim__mt_plan */
} optim__mt_item;

typedef struct optim__mt_task {
    size_t item; /* the item, or the external task's index */
    int phase;
    int64_t chunk; /* index of the chunk within the item; -1: external */
    int64_t off, count; /* element range (external: its weight) */
} optim__mt_task;

typedef struct optim__mt {
    optim__mt_item *items;
    size_t nitems;
    optim__mt_task *tasks;
    size_t ntasks;
    size_t *batch; /* batch b runs tasks batch[b] .. batch[b + 1] - 1 */
    size_t bfirst[OPTIM_MAX_PHASES + 1]; /* phase p's batches: bfirst[p] .. bfirst[p + 1] - 1 */
    size_t *reduce; /* items reduced after each phase */
    size_t rfirst[OPTIM_MAX_PHASES + 1];
    int nphases;
    size_t max_ext; /* room for external tasks */
} optim__mt;

/* Takes every buffer from a for the n items (mode, numel and plan filled)
 * and up to max_ext external tasks. OPTIM_ENOMEM or OPTIM_OK. */
int optim__mt_reserve(optim__mt *mt, optim__mt_item *items, size_t n, size_t max_ext,
                      optim__arena *a);

/* Cuts the items into tasks and batches, with next (<= max_ext) external
 * tasks of the given weights (elements) first; allocates nothing. */
void optim__mt_fill(optim__mt *mt, size_t next, int64_t (*weight)(void *ctx, size_t k), void *ctx);

typedef struct optim__mt_fns {
    void (*run)(void *ctx, const optim__mt_task *t, int tid);
    void (*reduce)(void *ctx, size_t item, int phase);
    void *ctx;
} optim__mt_fns;

/* Runs every task and reduction on nthreads threads, phase after phase. */
void optim__mt_run(const optim__mt *mt, int nthreads, const optim__mt_fns *f);

#endif
