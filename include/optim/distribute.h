/*
 * optim/distribute.h - replica groups: data parallelism across processes.
 *
 * Keras's distribution strategies run one replica per device; each computes
 * gradients on its share of the global batch and apply_gradients sums them
 * across replicas before the update. A replica group is that here, with one
 * replica per process: `single` (one process, the default; needs no MPI) or
 * `mpi` (the ranks of an MPI communicator, Open MPI). docs/distributed.md
 * says what is summed where and how to run it.
 *
 *     optim_group *g;
 *     optim_group_options go = optim_group_defaults();
 *     go.shard_optimizer_state = 1;                  // ZeRO-1, optional
 *     if (optim_group_create_mpi(&g, NULL, &go, &err)) die(err.msg);
 *     optim_group_attach(g, opt);
 *     ... every rank computes gradients on its part of the batch, the
 *     ... loss divided by the global batch size, then:
 *     if (optim_group_apply_gradients(g, opt, pairs, n, 0))
 *         die(optim_group_errmsg(g));               // all ranks fail alike
 *     optim_group_destroy(g);                        // before the optimizer
 *
 * Sums. Dense gradients are summed element by element in rank order
 * (rank 0 + rank 1 + ...), whatever the number of ranks' threads or MPI's
 * algorithms, so every rank gets bitwise the same sum. Sparse gradients
 * (indices and rows) are concatenated in rank order, exactly the gradient
 * one process would have computed on the whole batch; the optimizer then
 * sums duplicate rows as always. Clipping (clipnorm, global_clipnorm) runs
 * after this, on the aggregated gradients, as in Keras.
 *
 * Sharded optimizer state (shard_optimizer_state, ZeRO stage 1): each rank
 * keeps slots only for a contiguous, balanced block of rows (the first
 * dimension) of every variable; gradients are reduce-scattered (each rank
 * gets the sum of its block), each rank updates its block, and the updated
 * blocks are all-gathered. Only element-wise classes (OPTIM_CLASS_ELEMENTWISE:
 * SGD, Adam, AdamW, Adamax, Nadam, RMSprop, Adagrad, Adadelta, Ftrl, Lion,
 * LazyAdam, ScheduleFreeAdamW) can be sharded; LAMB, Adafactor, Muon, the
 * wrappers (MultiOptimizer included) and per-variable clipping (clipnorm,
 * global_clipnorm) are refused with OPTIM_ENOTSUP.
 *
 * Faults. Every collective call waits at most `timeout_seconds` for the
 * other ranks, then fails with OPTIM_EIO and a message; after any
 * communication failure the group refuses further work. A program should
 * then call optim_group_abort, which stops every rank.
 *
 * Threads: a group is thread-compatible; calls on one group must not
 * overlap, and only the thread that created it may call it.
 */
#ifndef OPTIM_DISTRIBUTE_H
#define OPTIM_DISTRIBUTE_H

#include "optim/export.h"
#include "optim/optimizer.h"
#include "optim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_group optim_group;
/* optim/nn.h's model (typedef'd there: a second typedef is not C99). */
struct optim_model;

typedef struct optim_group_options {
    uint32_t size; /* sizeof(optim_group_options) */
    int shard_optimizer_state; /* 0: every rank keeps all slots; 1: ZeRO-1 */
    double timeout_seconds; /* > 0: longest wait in one collective (30) */
} optim_group_options;

OPTIM_API optim_group_options optim_group_defaults(void);

/* 1 if this library was built with MPI, else 0. */
OPTIM_API int optim_mpi_available(void);

/* A group of one replica (this process). opts may be NULL (defaults). */
OPTIM_API int optim_group_create_single(optim_group **out, const optim_group_options *opts,
                                        optim_error *err);

/* A group of the ranks of an MPI communicator: `comm` points to an MPI_Comm
 * (NULL: MPI_COMM_WORLD). The group works on a duplicate of it whose errors
 * return instead of aborting. Initialises MPI if the caller has not (and
 * then finalises it when the program exits). Collective: every rank of the
 * communicator must call it. OPTIM_ENOTSUP in a build without MPI. */
OPTIM_API int optim_group_create_mpi(optim_group **out, const void *comm,
                                     const optim_group_options *opts, optim_error *err);

/* Frees the group, detaching it from its optimizers and models (which must
 * still exist). Collective for an MPI group. NULL is a no-op. */
OPTIM_API void optim_group_destroy(optim_group *g);

OPTIM_API int optim_group_rank(const optim_group *g); /* 0 .. size-1; -1 for NULL */
OPTIM_API int optim_group_size(const optim_group *g); /* number of replicas; 0 for NULL */
OPTIM_API int optim_group_sharded(const optim_group *g);

/* Message of the last failed call ("" after a success). */
OPTIM_API const char *optim_group_errmsg(const optim_group *g);

/* Makes the group opt's gradient aggregator (Keras's gradient_aggregator
 * under a strategy): optim_apply_gradients(opt, ...) then sums the ranks'
 * gradients first, unless called with OPTIM_APPLY_NO_AGGREGATE. For a
 * sharded group, opt must be stepped with optim_group_apply_gradients
 * (optim_apply_gradients then fails, naming it), and a class that is not
 * element-wise is refused here (OPTIM_ENOTSUP). An optimizer belongs to at
 * most one group. */
OPTIM_API int optim_group_attach(optim_group *g, optim_optimizer *opt);

/* Undoes optim_group_attach (a sharded optimizer keeps slots only for its
 * shards: use it with this group, or not at all). */
OPTIM_API int optim_group_detach(optim_group *g, optim_optimizer *opt);

/* One step of an attached optimizer across the group: collective, with the
 * same variables in the same order on every rank. Unsharded it is
 * optim_apply_gradients(opt, ...); sharded it reduce-scatters the gradients,
 * updates this rank's blocks and all-gathers the variables. With
 * OPTIM_APPLY_NO_AGGREGATE the gradients are taken as already summed. If
 * any rank's gradients fail the checks, every rank fails (the others with
 * a message naming that rank) and nothing is updated anywhere; stepping an
 * unsharded optimizer with optim_apply_gradients directly instead leaves
 * the other ranks waiting until the timeout. */
OPTIM_API int optim_group_apply_gradients(optim_group *g, optim_optimizer *opt,
                                          const optim_grad_var *pairs, size_t n, uint32_t flags);

/* Sums values[0..n) across the ranks in rank order, in place (every rank
 * gets bitwise the same sums). Collective. */
OPTIM_API int optim_group_sum(optim_group *g, double *values, size_t n);

/* Checks that every rank runs with the same settings, before the first
 * step: names[i] and values[i] are text (e.g. "--seed" and "1"; a setting
 * one rank gives and another does not also differs). Collective. If any
 * value differs, every rank fails alike (OPTIM_EINVAL) with a message that
 * lists each differing setting with its value on each rank: "replicas
 * disagree: --seed is 1 on rank 0, 5 on rank 1; ...". The group stays
 * usable. Like every call that starts a collective sequence it is framed:
 * ranks whose calls are out of step (one in optim_group_sum, another in a
 * step) fail with OPTIM_ESTATE and a message saying so. */
OPTIM_API int optim_group_check_same(optim_group *g, const char *const *names,
                                     const char *const *values, size_t n);

/* The optimizer's full weights in optim_get_weights's order and names, as
 * one process would hold them: for a sharded group the blocks of every slot
 * are gathered from all ranks. Collective. Writes up to cap views into
 * memory the group owns (valid until its next call) and sets *count to the
 * number of weights. */
OPTIM_API int optim_group_get_weights(optim_group *g, optim_optimizer *opt, optim_tensor *out,
                                      size_t cap, size_t *count);

/* optim_build across the group: creates opt's slots for these variables
 * now (sharded: for this rank's blocks) and fixes its variable set. Every
 * rank passes the same variables. */
OPTIM_API int optim_group_build(optim_group *g, optim_optimizer *opt, optim_var *const *vars,
                                size_t n);

/* Sets opt's weights from full ones in optim_group_get_weights's order (a
 * one-process checkpoint, or what optim_group_get_weights gave): sharded,
 * each rank takes its blocks. The slots must exist (optim_group_build or a
 * step); counts, dtypes and shapes are checked as optim_set_weights does,
 * and on error nothing changes on this rank. Not collective. */
OPTIM_API int optim_group_set_weights(optim_group *g, optim_optimizer *opt,
                                      const optim_tensor *weights, size_t n);

/* Bytes of slot storage this rank holds for opt (every weight but
 * iterations): about 1/size of the unsharded figure when sharded. */
OPTIM_API int optim_group_slot_bytes(optim_group *g, const optim_optimizer *opt, int64_t *bytes);

/* Stops every rank of the group (MPI_Abort with `code`) after a failure
 * that cannot be recovered from; for a single group it returns. */
OPTIM_API void optim_group_abort(optim_group *g, int code);

/* Keras's fit under a strategy: model.fit splits each global batch of
 * batch_size samples into `size` contiguous parts, one per rank, scales
 * each rank's loss by its share so the summed gradient is the global
 * batch's mean, steps the model's optimizer through
 * optim_group_apply_gradients (attach it first) and sums the loss and
 * metric totals across ranks; only rank 0 prints progress. g NULL undoes
 * it. The group must outlive the model's use of it. */
OPTIM_API int optim_model_distribute(struct optim_model *m, optim_group *g);

#ifdef __cplusplus
}
#endif
#endif
