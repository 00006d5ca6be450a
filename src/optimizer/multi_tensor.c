/* Multi-tensor apply: tasks, batches and the one parallel region of a step
 * (multi_tensor.h). */
#include "optimizer/multi_tensor.h"

#include <omp.h>
#include <string.h>

#include "core/parallel.h"
#include "optim/status.h"

/* Tasks item i has in phase p. */
static int64_t item_tasks(const optim__mt_item *it, int p)
{
    if (it->mode == OPTIM__MT_PHASED) return p < it->plan.nphases ? it->nchunks : 0;
    if (p) return 0;
    return it->mode == OPTIM__MT_CHUNKS ? optim__nchunks(it->numel) : 1;
}

/* The task of item i for chunk k of phase p. */
static optim__mt_task item_task(const optim__mt_item *it, size_t i, int p, int64_t k)
{
    const int64_t size = it->mode == OPTIM__MT_PHASED ? it->plan.chunk
                         : it->mode == OPTIM__MT_CHUNKS ? OPTIM__CHUNK : it->numel;
    const int64_t off = k * size, count = it->numel - off < size ? it->numel - off : size;
    return (optim__mt_task){i, p, k, off, count};
}

/* Chunk counts, partial and shared buffers; the number of phases. */
static int plan_items(optim__mt *mt, optim__arena *a, size_t *ntasks, size_t *nreduce)
{
    mt->nphases = 1;
    for (size_t i = 0; i < mt->nitems; i++) {
        optim__mt_item *it = &mt->items[i];
        if (it->mode == OPTIM__MT_PHASED) {
            const optim_phase_plan *pl = &it->plan;
            it->nchunks = (it->numel + pl->chunk - 1) / pl->chunk;
            it->partial = optim__arena_alloc(a, (size_t)it->nchunks * (pl->npartial + 1) * sizeof(double));
            it->shared = optim__arena_calloc(a, (pl->nshared + 1) * sizeof(double));
            if (!it->partial || !it->shared) return OPTIM_ENOMEM;
            if (pl->nphases > mt->nphases) mt->nphases = pl->nphases;
            *nreduce += (size_t)pl->nphases;
        }
        for (int p = 0; p < OPTIM_MAX_PHASES; p++) *ntasks += (size_t)item_tasks(it, p);
    }
    return OPTIM_OK;
}

/* Phase p's tasks in item order, packed into batches of >= OPTIM__CHUNK
 * elements (a whole variable counts as its size). */
static void fill_phase(optim__mt *mt, int p, size_t *nbatch)
{
    int64_t in_batch = 0;
    mt->bfirst[p] = *nbatch;
    for (size_t i = 0; i < mt->nitems; i++) {
        const optim__mt_item *it = &mt->items[i];
        const int64_t n = item_tasks(it, p);
        for (int64_t k = 0; k < n; k++) {
            if (in_batch == 0) mt->batch[(*nbatch)++] = mt->ntasks;
            mt->tasks[mt->ntasks] = item_task(it, i, p, k);
            in_batch += mt->tasks[mt->ntasks++].count + 1;
            if (in_batch >= OPTIM__CHUNK) in_batch = 0;
        }
    }
    mt->batch[*nbatch] = mt->ntasks; /* the end of the last batch (the next phase's start) */
}

int optim__mt_plan(optim__mt *mt, optim__mt_item *items, size_t n, optim__arena *a)
{
    memset(mt, 0, sizeof *mt);
    mt->items = items;
    mt->nitems = n;
    size_t ntasks = 0, nreduce = 0, nbatch = 0;
    if (plan_items(mt, a, &ntasks, &nreduce)) return OPTIM_ENOMEM;
    mt->tasks = optim__arena_alloc(a, (ntasks + 1) * sizeof *mt->tasks);
    mt->batch = optim__arena_alloc(a, (ntasks + 2) * sizeof *mt->batch);
    mt->reduce = optim__arena_alloc(a, (nreduce + 1) * sizeof *mt->reduce);
    if (!mt->tasks || !mt->batch || !mt->reduce) return OPTIM_ENOMEM;
    size_t r = 0;
    for (int p = 0; p < mt->nphases; p++) {
        fill_phase(mt, p, &nbatch);
        mt->rfirst[p] = r;
        for (size_t i = 0; i < n; i++)
            if (items[i].mode == OPTIM__MT_PHASED && p < items[i].plan.nphases) mt->reduce[r++] = i;
    }
    mt->bfirst[mt->nphases] = nbatch;
    mt->rfirst[mt->nphases] = r;
    return OPTIM_OK;
}

void optim__mt_run(const optim__mt *mt, int nthreads, const optim__mt_fns *f)
{
#pragma omp parallel num_threads(nthreads)
    {
        const int tid = omp_get_thread_num();
        for (int p = 0; p < mt->nphases; p++) {
            /* Each phase's batches, then its reductions; the implicit barrier
             * of each loop orders them. */
#pragma omp for schedule(dynamic, 1)
            for (size_t b = mt->bfirst[p]; b < mt->bfirst[p + 1]; b++)
                for (size_t t = mt->batch[b]; t < mt->batch[b + 1]; t++) f->run(f->ctx, &mt->tasks[t], tid);
#pragma omp for schedule(dynamic, 1)
            for (size_t r = mt->rfirst[p]; r < mt->rfirst[p + 1]; r++) f->reduce(f->ctx, mt->reduce[r], p);
        }
    }
}
