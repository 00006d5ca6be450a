/* Half-precision variables in the pipeline (internal; docs/half-precision.md).
 *
 * A variable stored as F16 or BF16 is updated by the class's own float32
 * rule: half_step.c loads the run's param, gradient and slots into float32
 * scratch, the class updates the scratch (apply.c calls it, with any fused
 * clipping and weight decay first), and the param and slots are rounded
 * back to the storage type once. Element-wise classes do this per chunk in
 * a per-thread buffer (OPTIM__HALF_BLOCK at a time); other classes get the whole variable (and its slots,
 * of any shape) in a per-task buffer. Both come from the optimizer's arena. */
#ifndef OPTIM_OPTIMIZER_HALF_STEP_H
#define OPTIM_OPTIMIZER_HALF_STEP_H

#include "core/parallel.h"
#include "optimizer/impl.h"

/* The float32 form of one half-precision update. */
typedef struct optim__half_view {
    optim_dense_update u;          /* what the class sees: dtype F32, pointers into the scratch */
    void *slots[OPTIM_MAX_SLOTS];
    float *grad;                   /* the scratch gradient (clipping runs on it in place) */
} optim__half_view;

/* Floats of scratch a whole-variable update of e's variable needs. */
size_t optim__half_whole_floats(const optim_optimizer *opt, const optim__var_entry *e);

/* An element-wise class's chunk is converted in blocks of this many
 * elements, so that the float32 scratch stays in the L1 cache; floats of
 * scratch one block needs (param, gradient and the most slots). */
#define OPTIM__HALF_BLOCK ((int64_t)512)
#define OPTIM__HALF_CHUNK_FLOATS ((size_t)(2 + OPTIM_MAX_SLOTS) * (size_t)OPTIM__HALF_BLOCK)

/* Elements [off, off + len) of the element-wise run h (storage dtype):
 * *part with its slot pointers in slots. */
void optim__half_part(const optim_dense_update *h, int64_t off, int64_t len, optim_dense_update *part,
                      void **slots);

/* Loads the run of h (storage dtype, from the pipeline) into buf; `whole`:
 * slots have their own sizes (a non-element-wise class), else h->count
 * elements each. */
void optim__half_load_run(const optim_optimizer *opt, const optim__var_entry *e, const optim_dense_update *h,
                          float *buf, int whole, optim__half_view *f);

/* Rounds n floats of stream `stream` (0 the variable, 1 + k its slot k)
 * of e's variable, elements [first, first + n) of it, into dst of dtype dt:
 * to nearest even, or stochastically for BF16 when the optimizer has a
 * bf16_stochastic_rounding_seed (the bits depend on the element, not on
 * the split). */
void optim__half_store_stream(const optim_optimizer *opt, const optim__var_entry *e, optim_dtype dt, int stream,
                              const float *src, void *dst, int64_t first, int64_t n);

/* Rounds the param and slots of f back into h's storage. */
void optim__half_store_run(const optim_optimizer *opt, const optim__var_entry *e, const optim_dense_update *h,
                           const optim__half_view *f, int whole);

#endif
