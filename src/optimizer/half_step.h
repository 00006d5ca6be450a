/* Half-precision variables in the pipeline (internal; docs/half-precision.md).
 *
 * A variable stored as F16 or BF16 is updated by the class's own float32
 * rule: optim__half_run_dense loads a run's param, gradient and slots into
 * float32 scratch, applies the fused clipping and weight decay, calls the
 * class's apply_dense on the scratch, and rounds the param and slots back
 * to the storage type once. A dense half gradient (apply.c's run_half) and
 * a sparse gradient's dense equivalent (OPTIM_SPARSE_DENSE, its chunk's
 * gradient already float32) both run through it. Element-wise classes do
 * this per chunk in a per-thread buffer (OPTIM__HALF_BLOCK at a time);
 * other classes get the whole variable (and its slots, of any shape) in a
 * per-task buffer. Both come from the optimizer's arena. */
#ifndef OPTIM_OPTIMIZER_HALF_STEP_H
#define OPTIM_OPTIMIZER_HALF_STEP_H

#include "core/parallel.h"
#include "optimizer/impl.h"

/* Floats of scratch a whole-variable update of e's variable needs. */
size_t optim__half_whole_floats(const optim_optimizer *opt, const optim__var_entry *e);

/* An element-wise class's chunk is converted in blocks of this many
 * elements, so that the float32 scratch stays in the L1 cache; floats of
 * scratch one block needs (param, gradient and the most slots). */
#define OPTIM__HALF_BLOCK ((int64_t)512)
#define OPTIM__HALF_CHUNK_FLOATS ((size_t)(2 + OPTIM_MAX_SLOTS) * (size_t)OPTIM__HALF_BLOCK)

/* What a run of a half-precision variable needs besides its update. */
typedef struct optim__half_run {
    const optim__var_entry *entry;
    float *buf; /* OPTIM__HALF_CHUNK_FLOATS floats; whole: optim__half_whole_floats */
    int whole; /* a class that is not element-wise: the run in one block, each slot
                             whole (its own size), from element 0 */
    const float *grad; /* the run's gradient already in float32 (a sparse gradient's dense
                             equivalent), or NULL: the update's own gradient is widened */
    void (*transform)(const void *ctx, float *g, int64_t n); /* on a widened gradient block (the
                             fused clipping), or NULL; always NULL with grad */
    const void *ctx; /* transform's */
    double wd, lr; /* Keras 3 decoupled weight decay (0: none), the float32 learning rate */
} optim__half_run;

/* The class's apply_dense on the run h (storage dtype, from the pipeline:
 * elements [h->offset, h->offset + h->count) of r->entry's variable), in
 * blocks of OPTIM__HALF_BLOCK elements (whole: one block): each block
 * widened to float32 in r->buf, its gradient transformed, the variable
 * decayed, updated by the class's float32 rule, then the variable and its
 * slots rounded back once (optim__half_store_stream, each element with its
 * index in its array). */
void optim__half_run_dense(const optim_dense_update *h, const optim__half_run *r);

/* Rounds n floats of stream `stream` (0 the variable, 1 + k its slot k)
 * of e's variable, elements [first, first + n) of it, into dst of dtype dt:
 * to nearest even, or stochastically for BF16 when the optimizer has a
 * bf16_stochastic_rounding_seed (the bits depend on the element, not on
 * the split). */
void optim__half_store_stream(const optim_optimizer *opt, const optim__var_entry *e, optim_dtype dt,
                              int stream, const float *src, void *dst, int64_t first, int64_t n);

#endif
