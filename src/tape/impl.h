/* The tape and its nodes, shared by the files of src/tape (internal).
 *
 * A node is recorded in the tape's arena with its value, up to two inputs
 * (concat keeps an array), saved data for its backward rule, and `need`:
 * whether a gradient can flow from it to a watched variable. Nodes form a
 * singly linked list through `prev` in creation order, which is a
 * topological order; the backward pass walks it from the loss. */
#ifndef OPTIM_TAPE_IMPL_H
#define OPTIM_TAPE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "optim/tape.h"

#include "core/arena.h"

/* ---- nodes and the tape ----------------------------------------------------------- */

struct optim_node;
/* Adds the node's gradient into its inputs' gradients; 0 or an error code
 * (with the tape's message set). */
typedef int (*optim__backward_fn)(optim_tape *t, struct optim_node *n);

struct optim_node {
    struct optim_node *prev; /* the node created before this one */
    optim_tape *tape;
    uint32_t id; /* creation index */
    int need; /* a gradient may flow to a watched variable */
    const char *op; /* "add", "matmul", ... ("var", "const" for leaves) */
    optim_tensor value;
    void *grad; /* same shape and dtype as value; NULL: none yet */
    struct optim_node *in[2];
    struct optim_node **ins; /* concat's inputs */
    size_t nin;
    optim_var *var; /* leaf of a variable */
    const int64_t *idx; /* gather indices, labels */
    int64_t nidx;
    void *aux; /* saved for backward (mask, probabilities) */
    struct optim_node *logits; /* softmax, sigmoid: their input, for the
                                * cross-entropy losses (optim__tape_logits) */
    int32_t axis;
    int flags;
    optim__backward_fn backward;
};

/* flags bit of a gather whose params is a variable's node: its gradient
 * (the gather node's own) becomes the variable's sparse gradient. */
#define OPTIM__FLAG_SPARSE 0x100

typedef struct optim__watch {
    struct optim__watch *next;
    const optim_var *var;
} optim__watch;

struct optim_tape {
    optim__arena arena;
    struct optim_node *last; /* the newest node */
    uint32_t count;
    optim__watch *watched;
    int failed; /* errmsg holds a message */
    char errmsg[OPTIM_ERRMSG_MAX];
};

/* Sets the tape's message (only the first since reset is kept) and returns
 * code. */
int optim__tape_err(optim_tape *t, int code, const char *fmt, ...) OPTIM__PRINTF(3, 4);

/* Checks an op's inputs: tape non-NULL, each input non-NULL (silently),
 * recorded on t, and all of one dtype. Returns 0, or -1 after setting the
 * message when needed. */
int optim__tape_check_inputs(optim_tape *t, const char *op, optim_node *const *in, size_t n);

/* A new node with a value of the given dtype and shape (data in the arena,
 * uninitialised), linked on the tape; its inputs are set from in[0..nin-1]
 * (up to 2) and `need` from theirs. NULL (message set) if out of memory. */
struct optim_node *optim__tape_node(optim_tape *t, const char *op, optim_dtype dtype, int32_t rank,
                                    const int64_t *shape, struct optim_node *a,
                                    struct optim_node *b);
/* Same, with the value viewing `data` (no allocation for it). */
struct optim_node *optim__tape_node_view(optim_tape *t, const char *op, optim_dtype dtype,
                                         int32_t rank, const int64_t *shape, void *data,
                                         struct optim_node *a, struct optim_node *b);

/* The node's gradient buffer, zeroed on first use; NULL (message set) if
 * out of memory. Call only for nodes with `need`. */
void *optim__tape_grad(optim_tape *t, struct optim_node *n);
/* Same, for a rule that can write its first contribution instead of adding
 * it (saving the zeroing and a read): *fresh = 1 when the buffer was
 * allocated now and is uninitialised (write every element, as 0 + value so
 * that the bits are those of adding into zeros), 0 when it holds earlier
 * contributions (add into it). */
void *optim__tape_grad_first(optim_tape *t, struct optim_node *n, int *fresh);

/* Shape as "[2, 3]" into a buffer of OPTIM__SHAPE_STR bytes. */
#define OPTIM__SHAPE_STR 160
const char *optim__tape_shape(const optim_tensor *v, char *buf);

/* Element count of a node's value. */
static inline int64_t optim__node_numel(const struct optim_node *n)
{
    int64_t k = 1;
    for (int32_t i = 0; i < n->value.rank; i++) k *= n->value.shape[i];
    return k;
}

/* Normalises an axis (negative from the end) for a rank; -1 if out of range. */
static inline int32_t optim__tape_axis(int32_t axis, int32_t rank)
{
    if (axis < 0) axis += rank;
    return (axis < 0 || axis >= rank) ? -1 : axis;
}

/* Runs a block with T typedef'd to the C type of a float dtype. */
#define OPTIM__TAPE_TYPED(dtype, T, ...) \
    do {                                 \
        if ((dtype) == OPTIM_F32) {      \
            typedef float T;             \
            __VA_ARGS__                  \
        } else {                         \
            typedef double T;            \
            __VA_ARGS__                  \
        }                                \
    } while (0)

/* ---- element-wise kernels (elementwise.c) ----------------------------------------- */

/* A unary op: its name, what is undefined in its gradient (for the
 * message; NULL if nothing), and its kernels' index in the table of
 * tape/kernels.h (OPTIM__UN_*), built per instruction-set level. */
typedef struct optim__unary {
    const char *name;
    const char *why;
    int op;
} optim__unary;

/* Records a unary op of `a` (values computed now). */
optim_node *optim__tape_unary(optim_tape *t, const optim__unary *k, optim_node *a);

/* clip(x) = x < lo ? lo : x > hi ? hi : x (+-inf give the bound, NaN passes
 * through), gradient g where lo <= x <= hi and 0 elsewhere (NaN included),
 * as tf.clip_by_value (minimum then maximum, ties to x). The bounds are
 * converted to the node's dtype. Internal: the losses' probability clip. */
optim_node *optim__tape_clip(optim_tape *t, optim_node *a, double lo, double hi);

/* ---- activations (activations.c) -------------------------------------------------- */

/* relu(x + b) with b of shape [n] added to every row of x (last axis n),
 * as optim_relu(optim_add(x, b)) computes it, bit for bit, values and
 * gradients (the bias gradient summed over the rows in order), in one pass
 * each way and without the sum's node. Internal: Dense with a bias and
 * ReLU. NULL (tape message) on bad input. */
optim_node *optim__tape_bias_relu(optim_tape *t, optim_node *x, optim_node *b);

/* The input of `n` when `n` is the output of optim_softmax (op "softmax",
 * over the last axis) or optim_sigmoid (op "sigmoid"), as named by `op`;
 * NULL otherwise (n NULL included). The cross-entropy losses given
 * probabilities use it as Keras's TF backend uses `output._keras_logits`
 * (backend/tensorflow/nn.py _get_logits): they compute from the logits. */
optim_node *optim__tape_logits(const optim_node *n, const char *op);

#endif
