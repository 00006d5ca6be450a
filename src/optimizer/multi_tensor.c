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
    return it->mode == OPTIM__MT_PHASED && p < it->plan.nphases ? it->nchunks : 0;
}

/* Chunk counts, partial and shared buffers; the number of phases. */
static int plan_items(optim__mt *mt, optim__arena *a, size_t *ntasks, size_t *nreduce)
{
    mt->nphases = 1;
    for (size_t i = 0; i < mt->nitems; i++) {
        optim__mt_item *it = &mt->items[i];
        if (it->mode != OPTIM__MT_PHASED) continue;
        const optim_phase_plan *pl = &it->plan;
        it->nchunks = (it->numel + pl->chunk - 1) / pl->chunk;
        it->partial =
            optim__arena_alloc(a, (size_t)it->nchunks * (pl->npartial + 1) * sizeof(double));
        it->shared = optim__arena_calloc(a, (pl->nshared + 1) * sizeof(double));
        if (!it->partial || !it->shared) return OPTIM_ENOMEM;
        if (pl->nphases > mt->nphases) mt->nphases = pl->nphases;
        *nreduce += (size_t)pl->nphases;
        *ntasks += (size_t)it->nchunks * (size_t)pl->nphases;
    }
    return OPTIM_OK;
}

int optim__mt_reserve(optim__mt *mt, optim__mt_item *items, size_t n, size_t max_ext,
                      optim__arena *a)
{
    memset(mt, 0, sizeof *mt);
    mt->items = items;
    mt->nitems = n;
    mt->max_ext = max_ext;
    size_t ntasks = max_ext, nreduce = 0;
    if (plan_items(mt, a, &ntasks, &nreduce)) return OPTIM_ENOMEM;
    mt->tasks = optim__arena_alloc(a, (ntasks + 1) * sizeof *mt->tasks);
    mt->batch = optim__arena_alloc(a, (ntasks + 2) * sizeof *mt->batch);
    mt->reduce = optim__arena_alloc(a, (nreduce + 1) * sizeof *mt->reduce);
    return !mt->tasks || !mt->batch || !mt->reduce ? OPTIM_ENOMEM : OPTIM_OK;
}

/* Appends task t to the current batch (opening one when none is open). */
static void add_task(optim__mt *mt, optim__mt_task t, size_t *nbatch, int64_t *in_batch)
{
    if (*in_batch == 0) mt->batch[(*nbatch)++] = mt->ntasks;
    mt->tasks[mt->ntasks++] = t;
    *in_batch += t.count + 1;
    if (*in_batch >= OPTIM__CHUNK) *in_batch = 0;
}

void optim__mt_fill(optim__mt *mt, size_t next, int64_t (*weight)(void *ctx, size_t k), void *ctx)
{
    size_t nbatch = 0, r = 0;
    mt->ntasks = 0;
    for (int p = 0; p < mt->nphases; p++) {
        int64_t in_batch = 0;
        mt->bfirst[p] = nbatch;
        for (size_t k = 0; p == 0 && k < next && k < mt->max_ext; k++)
            add_task(mt, (optim__mt_task){k, 0, -1, 0, weight(ctx, k)}, &nbatch, &in_batch);
        for (size_t i = 0; i < mt->nitems; i++) {
            const optim__mt_item *it = &mt->items[i];
            for (int64_t k = 0; k < item_tasks(it, p); k++) {
                const int64_t off = k * it->plan.chunk;
                const int64_t count =
                    it->numel - off < it->plan.chunk ? it->numel - off : it->plan.chunk;
                add_task(mt, (optim__mt_task){i, p, k, off, count}, &nbatch, &in_batch);
            }
        }
        mt->batch[nbatch] = mt->ntasks; /* the end of the last batch (the next phase's start) */
        mt->rfirst[p] = r;
        for (size_t i = 0; i < mt->nitems; i++)
            if (mt->items[i].mode == OPTIM__MT_PHASED && p < mt->items[i].plan.nphases)
                mt->reduce[r++] = i;
    }
    mt->bfirst[mt->nphases] = nbatch;
    mt->rfirst[mt->nphases] = r;
}

void optim__mt_run(const optim__mt *mt, int nthreads, const optim__mt_fns *f)
{
    if (mt->ntasks == 0) return;
    /* One batch and one phase: work for one thread (under OPTIM__CHUNK
     * elements, however many variables), which runs it without waking the
     * team (6 arrays of 2-70 elements on 2 threads, from Python: 31 us a
     * step with the team, 9.6 us without; a loaded 2-core Xeon). */
    const int team = mt->bfirst[mt->nphases] > 1 || mt->nphases > 1;
#pragma omp parallel num_threads(nthreads) if (team)
    {
        const int tid = omp_get_thread_num();
        for (int p = 0; p < mt->nphases; p++) {
            /* Each phase's batches, then its reductions; the implicit barrier
             * of each loop orders them. Thread t runs the t-th of n
             * contiguous runs of batches (static): batches are of equal size;
             * one contiguous range per thread keeps the hardware prefetchers
             * streaming (round-robin 32 KB chunks ran SGD at 0.7 of the
             * triad on Zen 5, contiguous at 1.0: commit ad31ad0); and a
             * fixed mapping lets the conformance check see a rule that
             * depends on its thread (with dynamic scheduling and sleeping
             * threads, thread 0 could take every batch before the others
             * wake). */
#pragma omp for schedule(static)
            for (size_t b = mt->bfirst[p]; b < mt->bfirst[p + 1]; b++)
                for (size_t t = mt->batch[b]; t < mt->batch[b + 1]; t++)
                    f->run(f->ctx, &mt->tasks[t], tid);
#pragma omp for schedule(dynamic, 1)
            for (size_t r = mt->rfirst[p]; r < mt->rfirst[p + 1]; r++)
                f->reduce(f->ctx, mt->reduce[r], p);
        }
    }
}
