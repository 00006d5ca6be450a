/*
 * optim/tape.h - GradientTape: reverse-mode autodiff, and minimize().
 *
 * A tape records the operations that compute a loss and returns the
 * gradients of the loss with respect to variables, as tf.GradientTape does.
 * Trainable variables are watched automatically (others with
 * optim_tape_watch). Every intermediate lives in the tape's arena and is
 * released with optim_tape_reset / destroy.
 *
 *     optim_tape *t;
 *     optim_tape_create(&t, &err);
 *     optim_node *x = optim_tape_const(t, &inputs);          // [batch, 784]
 *     optim_node *h = optim_relu(t, optim_add(t, optim_matmul(t, x,
 *                         optim_tape_var(t, kernel), 0, 0), optim_tape_var(t, bias)));
 *     optim_node *loss = optim_mean(t, optim_softmax_cross_entropy(t, h, labels, n),
 *                                   OPTIM_ALL_AXES);
 *     if (!loss) die(optim_tape_errmsg(t));                  // any op failed
 *     optim_grad_var g[2];
 *     optim_tape_gradient(t, loss, (optim_var *[]){kernel, bias}, 2, g);
 *     optim_apply_gradients(opt, g, 2, 0);
 *     optim_tape_reset(t);                                    // next batch
 *
 * How it works (kann's design): every op runs at once (eager, like TF 2),
 * computes its value into the arena and records a node with its inputs and
 * a backward rule. optim_tape_gradient walks the nodes from the loss back in
 * reverse creation order (a valid reverse topological order), giving each
 * node that leads to a watched variable a gradient buffer when the first
 * contribution arrives. The arena is a bump allocator: after a reset the
 * same memory serves the next batch, so a training loop of a fixed model
 * does no malloc per node once the first batch has sized the arena.
 *
 * Errors: an op given bad input (shapes that do not broadcast, a label out
 * of range, an unknown axis, mixed dtypes) returns NULL and leaves a message
 * on the tape naming the op and the shapes; an op given a NULL input
 * returns NULL without a new message, so a whole expression can be checked
 * once at the end. optim_tape_errmsg keeps the first op message since the
 * last create or reset (later failures do not overwrite it); a failed
 * optim_tape_gradient replaces it with its own (which repeats the op's when
 * the loss is NULL). Nothing prints, exits or aborts.
 *
 * Shapes: tensors up to OPTIM_MAX_RANK dims, f32 or f64 (all inputs of an op
 * share one dtype). Binary element-wise ops (add, sub, mul, div,
 * squared_error) broadcast like NumPy: dims are aligned from the right and
 * each pair must be equal or contain a 1. The forms a model needs (equal
 * shapes, a scalar, a row [n] or [1, n] against [m, n], a column [m, 1]
 * against [m, n], on either side) run as contiguous loops. The backward
 * pass sums a gradient over the axes its input was broadcast along.
 *
 * Gradients that cannot be defined: log at x <= 0, sqrt at x <= 0 and
 * division by 0 have no gradient; if a non-zero gradient reaches such an
 * element, optim_tape_gradient fails naming the op (TF would silently return
 * inf or NaN). A zero upstream gradient contributes exactly 0 there. The
 * forward values follow IEEE (log(0) = -inf, sqrt(-1) = NaN). relu's
 * gradient at 0 is 0, as TF's ReluGrad.
 *
 * A tape is not thread-safe; use one per thread.
 */
#ifndef OPTIM_TAPE_H
#define OPTIM_TAPE_H

#include "optim/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_tape optim_tape;
typedef struct optim_node optim_node; /* a tensor recorded on a tape */

#define OPTIM_ALL_AXES INT32_MIN /* reduce over every axis */

/* Creates an empty tape. On error *out is NULL and err (if not NULL) says why. */
OPTIM_API int optim_tape_create(optim_tape **out, optim_error *err);
/* Frees the tape, its nodes and gradients. NULL is a no-op. */
OPTIM_API void optim_tape_destroy(optim_tape *t);
/* Forgets every node, gradient, watch and message (keeps the arena's memory
 * for reuse: a tape reset after each batch stops allocating). */
OPTIM_API void optim_tape_reset(optim_tape *t);
/* The message of the first failed op since create/reset, or of the last
 * failed optim_tape_gradient ("" if none). */
OPTIM_API const char *optim_tape_errmsg(const optim_tape *t);
/* Bytes of memory the tape's arena holds (for checking reuse). */
OPTIM_API size_t optim_tape_memory(const optim_tape *t);

/* ---- leaves ---------------------------------------------------------------- */

/* A variable's current value, watched if trainable or passed to
 * optim_tape_watch. The node views the variable's storage (no copy, so a
 * large embedding costs nothing to record): the variable must not change
 * until the gradient has been computed. The same variable may be used
 * several times; its gradient sums them. NULL (with a message) for NULL. */
OPTIM_API optim_node *optim_tape_var(optim_tape *t, optim_var *v);
/* tf.GradientTape.watch: nodes made afterwards for `v` lead to a gradient
 * even if `v` is not trainable. Returns 0, or an error (t or v NULL, out of
 * memory). Watches last until reset. */
OPTIM_API int optim_tape_watch(optim_tape *t, optim_var *v);
/* A constant (f32 or f64), copied into the tape. */
OPTIM_API optim_node *optim_tape_const(optim_tape *t, const optim_tensor *x);
/* A scalar constant of the given dtype (OPTIM_F32 or OPTIM_F64). */
OPTIM_API optim_node *optim_tape_scalar(optim_tape *t, optim_dtype dtype, double value);

/* The value of a node (valid until reset/destroy); NULL for NULL. */
OPTIM_API const optim_tensor *optim_node_value(const optim_node *n);
/* The value of a one-element node as double (NaN for NULL or others). */
OPTIM_API double optim_node_scalar(const optim_node *n);

/* ---- operations (NULL on error) ------------------------------------------------ */

/* Element-wise with NumPy broadcasting (see the top of this header). */
OPTIM_API optim_node *optim_add(optim_tape *t, optim_node *a, optim_node *b);
OPTIM_API optim_node *optim_sub(optim_tape *t, optim_node *a, optim_node *b);
OPTIM_API optim_node *optim_mul(optim_tape *t, optim_node *a, optim_node *b);
OPTIM_API optim_node *optim_div(optim_tape *t, optim_node *a, optim_node *b);
OPTIM_API optim_node *optim_neg(optim_tape *t, optim_node *a);
/* [m, k] x [k, n] through CBLAS (sgemm/dgemm); transpose flags as BLAS
 * (a transposed `a` is stored [k, m], a transposed `b` [n, k]). Rank 2 only. */
OPTIM_API optim_node *optim_matmul(optim_tape *t, optim_node *a, optim_node *b, int transpose_a,
                                   int transpose_b);
/* Same elements, new shape (rank 0..OPTIM_MAX_RANK); one dim may be -1 (inferred). */
OPTIM_API optim_node *optim_reshape(optim_tape *t, optim_node *a, int32_t rank,
                                    const int64_t *shape);
/* Reductions over one axis (negative from the end; the axis is removed, as
 * tf.reduce_sum without keepdims) or OPTIM_ALL_AXES (a scalar). Sums
 * accumulate in double. The mean of zero elements is NaN. */
OPTIM_API optim_node *optim_sum(optim_tape *t, optim_node *a, int32_t axis);
OPTIM_API optim_node *optim_mean(optim_tape *t, optim_node *a, int32_t axis);
OPTIM_API optim_node *optim_square(optim_tape *t, optim_node *a);
OPTIM_API optim_node *optim_sqrt(optim_tape *t, optim_node *a);
OPTIM_API optim_node *optim_exp(optim_tape *t, optim_node *a);
OPTIM_API optim_node *optim_log(optim_tape *t, optim_node *a);
OPTIM_API optim_node *optim_tanh(optim_tape *t, optim_node *a);
/* The nn cross-entropy losses given probabilities (from_logits 0) that are
 * the direct output of optim_sigmoid (binary) or optim_softmax (sparse
 * categorical) compute from that op's input, as Keras does. */
OPTIM_API optim_node *optim_sigmoid(optim_tape *t, optim_node *a);
OPTIM_API optim_node *optim_relu(optim_tape *t, optim_node *a);
/* keras.activations.gelu: approximate 0 (Keras's default) is the exact
 * 0.5 x (1 + erf(x / sqrt 2)), computed as 0.5 x erfc(-x / sqrt 2) (no
 * cancellation for x < 0); approximate != 0 the tanh form
 * 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), computed as
 * x sigmoid(2 u) (the same function, again without the cancellation).
 * Finite for any finite x, gradients included. */
OPTIM_API optim_node *optim_gelu(optim_tape *t, optim_node *a, int approximate);
/* keras.activations.silu (alias swish): x sigmoid(x), sigmoid in its stable
 * form. */
OPTIM_API optim_node *optim_silu(optim_tape *t, optim_node *a);
/* Over the last axis (rank >= 1), stable (the row maximum is subtracted). */
OPTIM_API optim_node *optim_softmax(optim_tape *t, optim_node *a);
OPTIM_API optim_node *optim_log_softmax(optim_tape *t, optim_node *a);
/* keras.layers.LayerNormalization's computation over the last axis (axis
 * must be -1 or rank - 1; rank >= 1): per row, mean and variance (the mean
 * of squared deviations), y = gamma (x - mean) / sqrt(var + epsilon) + beta.
 * gamma and beta are nodes of shape [n] (n = x's last dim) or NULL (scale /
 * center off); epsilon finite and >= 0 (Keras's default 1e-3). One fused
 * node with its own backward rule, differentiable in x, gamma and beta;
 * statistics and results in double, rounded once to the dtype. A row of
 * equal values with epsilon 0 gives NaN (0 / 0), as IEEE. */
OPTIM_API optim_node *optim_layer_norm(optim_tape *t, optim_node *x, optim_node *gamma,
                                       optim_node *beta, int32_t axis, double epsilon);
/* keras.layers.BatchNormalization's computation over all axes but the last
 * (axis must be -1 or rank - 1; rank >= 1), with the batch statistics (a
 * training call): per last-axis index c, over the other axes, mean and
 * variance (the mean of squared deviations, biased), y = gamma (x - mean) /
 * sqrt(var + epsilon) + beta. gamma and beta are nodes of shape [n] (n = x's
 * last dim) or NULL (scale / center off); epsilon finite and >= 0 (Keras's
 * default 1e-3); x needs at least one row. The batch mean and variance go
 * to batch_mean[n] / batch_var[n] (double, may be NULL) for a caller that
 * keeps moving statistics; they are values, outside the gradient. One
 * fused node differentiable in x, gamma and beta; statistics and results
 * in double, rows summed in order, rounded once to the dtype, so the bits
 * do not depend on the thread count. */
OPTIM_API optim_node *optim_batch_norm(optim_tape *t, optim_node *x, optim_node *gamma,
                                       optim_node *beta, int32_t axis, double epsilon,
                                       double *batch_mean, double *batch_var);
/* The same with given statistics (an inference call: the moving mean and
 * variance), nodes of shape [n]: y = gamma (x - mean) / sqrt(variance +
 * epsilon) + beta. Differentiable in x, mean, variance, gamma and beta. */
OPTIM_API optim_node *optim_batch_norm_inference(optim_tape *t, optim_node *x, optim_node *mean,
                                                 optim_node *variance, optim_node *gamma,
                                                 optim_node *beta, int32_t axis, double epsilon);
/* Per-example losses [batch] of logits [batch, classes] against integer
 * labels (0..classes-1, n == batch; copied), fused and numerically stable:
 * logsumexp(logits) - logits[label], as
 * tf.nn.sparse_softmax_cross_entropy_with_logits. */
OPTIM_API optim_node *optim_softmax_cross_entropy(optim_tape *t, optim_node *logits,
                                                  const int64_t *labels, int64_t n);
/* Element-wise sigmoid cross-entropy of logits against targets in [0, 1]
 * (same shape), the stable form max(x,0) - x*z + log(1 + exp(-|x|)), as
 * tf.nn.sigmoid_cross_entropy_with_logits; differentiable in both. */
OPTIM_API optim_node *optim_sigmoid_cross_entropy(optim_tape *t, optim_node *logits,
                                                  optim_node *targets);
/* Element-wise squared error (a - b)^2, broadcasting like optim_sub. */
OPTIM_API optim_node *optim_squared_error(optim_tape *t, optim_node *a, optim_node *b);
/* Rows of a [rows, ...] node: [n, ...] (indices copied, each in 0..rows-1).
 * When `params` is a variable's node, the variable's gradient is sparse
 * (indices as given, duplicates kept, values [n, ...]), like tf.gather's
 * IndexedSlices; otherwise the rows are scattered back (summed). */
OPTIM_API optim_node *optim_gather(optim_tape *t, optim_node *params, const int64_t *indices,
                                   int64_t n);
/* Joins n >= 1 nodes of one rank (>= 1) along an axis (negative from the
 * end); every other dim must agree. */
OPTIM_API optim_node *optim_concat(optim_tape *t, optim_node *const *nodes, size_t n, int32_t axis);
/* Inverted dropout: zero with probability rate (0 <= rate < 1), scale the
 * rest by 1/(1-rate); returns `a` itself when !training or rate == 0.
 * Seeded: the same seed gives the same mask (element i's draw depends only
 * on seed and i), so the op is differentiable with a fixed mask. */
OPTIM_API optim_node *optim_dropout(optim_tape *t, optim_node *a, double rate, uint64_t seed,
                                    int training);

/* ---- gradients ------------------------------------------------------------------ */

/* Gradients of the scalar `loss` with respect to vars: out[i] = {grad,
 * vars[i]}. For each variable, as tf.GradientTape.gradient aggregates:
 *  - none (OPTIM_GRAD_NONE) when vars[i] does not influence the loss, or is
 *    neither trainable nor watched;
 *  - sparse when it is reached only through optim_gather: indices as given,
 *    duplicates kept; several gathers concatenate (in creation order);
 *  - dense otherwise; if it is also gathered, the rows are added in (TF's
 *    backprop_util.AggregateIndexedSlicesGradients: any dense contribution
 *    makes the sum dense).
 * Gradient memory belongs to the tape (valid until reset/destroy); the
 * caller may change it in place (to clip, say). The call may be repeated
 * (each call recomputes into fresh memory). Fails if loss is NULL (the message
 * repeats the op's), not of this tape or not one element (any rank), or if
 * a gradient is not defined (see the top of this header). On failure out[]
 * is not written. */
OPTIM_API int optim_tape_gradient(optim_tape *t, optim_node *loss, optim_var *const *vars, size_t n,
                                  optim_grad_var *out);

/* ---- minimize ------------------------------------------------------------------- */

/* Computes the loss on the tape; returns 0 and sets *loss, or an error. */
typedef int (*optim_loss_fn)(optim_tape *t, void *user, optim_node **loss);
/* Fills vars (up to cap) and returns how many there are: called after the
 * loss, so variables created by the loss's first run are included. If the
 * count exceeds cap it is called again with room for all. */
typedef size_t (*optim_var_list_fn)(void *user, optim_var **vars, size_t cap);

/* Keras's optimizer.minimize(loss, var_list): runs loss_fn under a fresh
 * tape (the listed variables watched first, as Keras's compute_gradients
 * does), resolves the variable list (the array, or var_list_fn when vars is
 * NULL; giving both is an error), computes gradients and applies them with
 * optim_apply_gradients. *loss_value (may be NULL) gets the loss, or NaN if
 * it could not be computed. Errors from any stage are reported on the
 * optimizer (optim_errmsg); nothing is applied then. */
OPTIM_API int optim_minimize(optim_optimizer *opt, optim_loss_fn loss_fn, void *user,
                             optim_var *const *vars, size_t n, optim_var_list_fn var_list_fn,
                             double *loss_value);

/* The "loss and gradient" entry for callers that apply gradients themselves:
 * like optim_minimize without the apply (and with an array only). Resets `t`
 * first, watches vars, runs loss_fn, fills out[0..n-1]. The gradients live on
 * `t` until its next reset. *loss_value (may be NULL) as in optim_minimize. */
OPTIM_API int optim_loss_and_gradients(optim_tape *t, optim_loss_fn loss_fn, void *user,
                                       optim_var *const *vars, size_t n, optim_grad_var *out,
                                       double *loss_value, optim_error *err);

#ifdef __cplusplus
}
#endif
#endif
