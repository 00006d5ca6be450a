/* Replica groups (internal to src/distribute): the group object, its
 * collective primitives and the exchanges built on them. */
#ifndef OPTIM_DISTRIBUTE_INTERNAL_H
#define OPTIM_DISTRIBUTE_INTERNAL_H

#include "core/internal.h"
#include "optim/distribute.h"

#ifdef OPTIM_HAVE_MPI
#include <mpi.h>
#endif

/* A rank's block of a variable: rows [row0, row0 + rows) of `full`, seen
 * as the variable `part` over the same storage (sharded groups). */
typedef struct optim__shard {
    optim_var *full; /* borrowed */
    optim_var *part; /* owned; borrows full's storage */
    int64_t numel; /* full's, as first seen */
    optim_dtype dtype;
} optim__shard;

/* An optimizer attached to a group. */
typedef struct optim__attached {
    optim_group *g;
    optim_optimizer *opt;
    optim__shard *shards;
    size_t nshards, cap;
    int aggregated; /* the aggregator ran in this step */
} optim__attached;

struct optim_group {
    int rank, size;
    int sharded;
    int broken; /* a collective failed: refuse further work */
    int64_t calls; /* framed calls made (agree.c) */
    double timeout;
#ifdef OPTIM_HAVE_MPI
    int is_mpi;
    MPI_Comm comm;
#endif
    optim__attached **att;
    size_t natt;
    void **scratch; /* freed at the start of the next call */
    size_t nscratch, cap_scratch;
    char errmsg[OPTIM_ERRMSG_MAX];
};

/* Memory that lives until the group's next call (or its destruction). */
void *optim__group_alloc(optim_group *g, size_t bytes);
void optim__group_scratch_free(optim_group *g);

/* Collectives over bytes. Every rank passes the same sizes where the MPI
 * call requires it; counts are per rank, blocks laid out back to back in
 * rank order. They wait at most g->timeout, then fail (OPTIM_EIO) and
 * mark the group broken. With one rank they copy. */
int optim__allgather(optim_group *g, const void *send, size_t bytes, void *recv, optim_error *err);
int optim__allgatherv(optim_group *g, const void *send, size_t sbytes, void *recv,
                      const size_t *rbytes, optim_error *err);
int optim__alltoallv(optim_group *g, const void *send, const size_t *sbytes, void *recv,
                     const size_t *rbytes, optim_error *err);

/* Tensors of one dtype split across the ranks: tensor i's rank-r block is
 * elements [lo[i*size + r], lo[i*size + r + 1]) (lo has size + 1 entries per
 * tensor). */
typedef struct optim__layout {
    size_t k;
    optim_dtype dtype;
    int64_t *lo;
} optim__layout;

/* Fills lo for tensor i: `rows` rows of `row_size` elements, rows split in
 * balanced contiguous blocks. */
void optim__layout_rows(const optim_group *g, optim__layout *l, size_t i, int64_t rows,
                        int64_t row_size);
/* Rank r's block of tensor i. */
static inline int64_t optim__block_lo(const optim_group *g, const optim__layout *l, size_t i, int r)
{
    return l->lo[i * (size_t)(g->size + 1) + (size_t)r];
}
static inline int64_t optim__block_n(const optim_group *g, const optim__layout *l, size_t i, int r)
{
    return optim__block_lo(g, l, i, r + 1) - optim__block_lo(g, l, i, r);
}

/* own[i] (this rank's block of tensor i) = the sum over ranks, in rank
 * order, of their full[i]'s block. */
int optim__reduce_scatter(optim_group *g, const optim__layout *l, const void *const *full,
                          void *const *own, optim_error *err);
/* full[i] gets every rank's block of tensor i (this rank's taken from full[i] itself). */
int optim__all_gather(optim_group *g, const optim__layout *l, void *const *full, optim_error *err);

/* Every rank passes the same n pairs (kinds, dtypes, sizes) and no rank
 * failed its local checks (local_rc): else all fail alike. */
int optim__agree(optim_group *g, const optim_grad_var *pairs, size_t n, int local_rc,
                 optim_error *err);

/* Concatenates every rank's sparse gradients in rank order (pairs changed to
 * point at group memory). */
int optim__gather_sparse(optim_group *g, optim_grad_var *pairs, size_t n, optim_error *err);

/* Sums dense gradients across the group, in place. */
int optim__sum_dense(optim_group *g, optim_grad_var *pairs, size_t n, optim_error *err);

/* A framed call (agree.c): all-gathers this rank's frame (its kind, the
 * group's call count and a, b, c) into all (OPTIM__FRAME words per rank)
 * and fails (OPTIM_ESTATE, on every rank alike) unless every rank makes
 * the same call at the same count. */
enum { OPTIM__FRAME = 5, OPTIM__CALL_AGREE = 1, OPTIM__CALL_SUM = 2, OPTIM__CALL_SAME = 3 };
int optim__frame(optim_group *g, int kind, int64_t a, int64_t b, int64_t c, int64_t *all,
                 optim_error *err);
/* optim_group_check_same's work (agree.c). */
int optim__check_same(optim_group *g, const char *const *names, const char *const *values, size_t n,
                      optim_error *err);

/* Sets the group's message from err; returns its code. */
int optim__group_fail(optim_group *g, const optim_error *err);

/* Sharded step, weights and checks (shard.c). */
int optim__check_shardable_class(const optim_optimizer *opt, optim_error *err);
optim__attached *optim__attached_of(const optim_group *g, const optim_optimizer *opt);
int optim__shard_step(optim__attached *a, const optim_grad_var *pairs, size_t n, uint32_t flags,
                      optim_error *err);
int optim__shard_build(optim__attached *a, optim_var *const *vars, size_t n, optim_error *err);
int optim__shard_set_weights(optim__attached *a, const optim_tensor *weights, size_t n,
                             optim_error *err);
int optim__shard_weights(optim__attached *a, optim_tensor *out, size_t cap, size_t *count,
                         optim_error *err);
void optim__shards_free(optim__attached *a);

#endif
