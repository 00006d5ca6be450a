/*
 * optim/nn.h - a small Keras: layers, losses, metrics, Sequential, fit.
 *
 * Enough of keras.Sequential to train a model with any optim optimizer:
 * Dense, Embedding, Flatten, Dropout, Activation and LayerNormalization
 * layers; the activations relu, sigmoid, tanh, softmax, gelu, silu (swish)
 * and linear; MeanSquaredError, BinaryCrossentropy
 * and SparseCategoricalCrossentropy with Keras's reductions; accuracy;
 * a Sequential model whose variables are created on its first call, when
 * the input shape is known; fit (with shuffling, validation data, callbacks,
 * EarlyStopping and LearningRateScheduler), evaluate and predict; a Keras
 * progress bar. Everything runs on optim's GradientTape (optim/tape.h).
 *
 *     optim_model *m;
 *     optim_layer *l1, *l2;
 *     optim_error err;
 *     optim_dense_options d = optim_dense_defaults(128);
 *     d.activation = OPTIM_ACT_RELU;
 *     optim_sequential_create(&m, NULL, &err);
 *     optim_dense_create(&l1, &d, &err);
 *     optim_sequential_add(m, l1);                   // m owns l1 now
 *     optim_dense_options d2 = optim_dense_defaults(10);  // logits
 *     optim_dense_create(&l2, &d2, &err);
 *     optim_sequential_add(m, l2);
 *
 *     optim_optimizer *adam;
 *     optim_from_json(&adam, "\"adam\"", &err);
 *     optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);  // from logits
 *     optim_model_compile(m, adam, &loss, OPTIM_METRIC_ACCURACY);
 *
 *     optim_fit_options fo = optim_fit_defaults();
 *     fo.epochs = 2, fo.batch_size = 128, fo.out = stdout;   // NULL: silent
 *     if (optim_model_fit(m, &x_train, &y_train, &fo, NULL))
 *         die(optim_model_errmsg(m));
 *     optim_logs res;
 *     optim_model_evaluate(m, &x_test, &y_test, 128, NULL, &res);
 *     double acc;
 *     optim_logs_get(&res, "accuracy", &acc);
 *     optim_model_destroy(m);                        // the layers and variables too
 *     optim_destroy(adam);
 *
 * Keras's semantics, and where they come from (Keras 3, keras/src/...):
 *  - Dense (layers/core/dense.py): y = activation(x . kernel + bias) on the
 *    last axis; kernel [in, units] from glorot_uniform (uniform in +-sqrt(6 /
 *    (in + units))), bias zeros. Embedding (layers/core/embedding.py): table
 *    [input_dim, output_dim] from uniform(-0.05, 0.05); its gradient is sparse
 *    (the rows looked up), as tf.gather's IndexedSlices. Random numbers come
 *    from a seeded generator of optim's own (SplitMix64), so a seed gives the
 *    same weights on every machine, but not TensorFlow's numbers.
 *  - Variables are named "LAYER/kernel", "LAYER/bias", "LAYER/embeddings";
 *    layer names default to "dense", "dense_1", ... unique within a model.
 *  - Losses (losses/losses.py, backend/tensorflow/nn.py): per-sample values
 *    are the mean over the last axis; reductions as losses/loss.py
 *    reduce_values. Without logits (from_logits 0), a y_pred that is the
 *    output of optim_softmax (SparseCategoricalCrossentropy) or
 *    optim_sigmoid (BinaryCrossentropy; y_pred not reshaped to meet y_true)
 *    is replaced by that op's input and the loss computed from logits, as
 *    the TF backend's _get_logits does with `_keras_logits`: a saturated
 *    output keeps its gradient (softmax of [0, 20], label 0: loss 20,
 *    gradient [-1, 1]). Otherwise probabilities are clipped to
 *    [1e-7, 1 - 1e-7] before the log (BinaryCrossentropy:
 *    -(z log p + (1-z) log(1-p)); SparseCategoricalCrossentropy: the softmax
 *    cross-entropy of log p, i.e. -log p_y + log sum p); as tf.clip_by_value,
 *    +-inf become the bounds, NaN stays NaN, and gradients pass only inside
 *    the range (bounds included).
 *  - "accuracy" picks binary, sparse categorical or categorical accuracy
 *    from the shapes (trainers/compile_utils.py get_metric).
 *  - fit (trainers/trainer.py, backend/tensorflow/trainer.py): the reported
 *    loss and metric are running means over the epoch, weighted by batch
 *    size; the last batch may be short; validation after each epoch gives
 *    "val_" entries; callbacks run at batch and epoch ends.
 *
 * Errors: every call returns 0 or a negative OPTIM_E* code. Model calls
 * leave the message in optim_model_errmsg(m), layer calls in
 * optim_layer_errmsg(l), the others fill an optim_error. Bad input is
 * refused before anything changes. The library never prints, except to the
 * FILE* a caller hands to fit / evaluate / a callback.
 *
 * Threads: a model is thread-compatible, not thread-safe. Its matmuls run
 * on BLAS's threads and the optimizer step on OpenMP's.
 */
#ifndef OPTIM_NN_H
#define OPTIM_NN_H

#include <stdio.h>
#include <stddef.h>

#include "optim/optimizer.h"
#include "optim/tape.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_layer optim_layer;
typedef struct optim_model optim_model;
typedef struct optim_callback optim_callback;

/* ---- activations ---------------------------------------------------------------- */

typedef enum optim_activation {
    OPTIM_ACT_LINEAR = 0, /* identity ("linear", Keras's default) */
    OPTIM_ACT_RELU,
    OPTIM_ACT_SIGMOID,
    OPTIM_ACT_TANH,
    OPTIM_ACT_SOFTMAX, /* over the last axis */
    OPTIM_ACT_GELU, /* "gelu", approximate=False: 0.5 x (1 + erf(x / sqrt 2)) */
    OPTIM_ACT_SILU /* "silu" (also read as "swish"): x sigmoid(x) */
} optim_activation;

/* Keras's name ("relu"); NULL for an unknown value. */
OPTIM_API const char *optim_activation_name(optim_activation a);
/* From Keras's name (also None/"None" -> linear, "swish" -> silu).
 * OPTIM_EINVAL if unknown. */
OPTIM_API int optim_activation_from_name(const char *name, optim_activation *out, optim_error *err);
/* Applies the activation on a tape; NULL on error (message on the tape). */
OPTIM_API optim_node *optim_activation_apply(optim_tape *t, optim_activation a, optim_node *x);

/* ---- layers ------------------------------------------------------------------------ */

/* Seed value meaning "none given": a layer in a model gets one derived from
 * the model's seed and its position; a standalone layer uses 0. */
#define OPTIM_SEED_AUTO (-1)

typedef struct optim_dense_options {
    uint32_t size; /* sizeof(optim_dense_options) */
    int64_t units; /* > 0 */
    optim_activation activation; /* OPTIM_ACT_LINEAR */
    int use_bias; /* 1 */
    int64_t seed; /* kernel initializer seed >= 0, or OPTIM_SEED_AUTO */
    const optim_constraint *kernel_constraint; /* NULL: none (copied) */
    const optim_constraint *bias_constraint; /* NULL: none (copied) */
    const char *name; /* NULL: "dense", made unique in a model */
} optim_dense_options;

OPTIM_API optim_dense_options optim_dense_defaults(int64_t units);
OPTIM_API int optim_dense_create(optim_layer **out, const optim_dense_options *opts,
                                 optim_error *err);

typedef struct optim_embedding_options {
    uint32_t size; /* sizeof(optim_embedding_options) */
    int64_t input_dim; /* > 0: ids are 0 .. input_dim-1 */
    int64_t output_dim; /* > 0 */
    int64_t seed; /* >= 0 or OPTIM_SEED_AUTO */
    const optim_constraint *embeddings_constraint; /* NULL: none (copied) */
    const char *name; /* NULL: "embedding" */
} optim_embedding_options;

OPTIM_API optim_embedding_options optim_embedding_defaults(int64_t input_dim, int64_t output_dim);
/* An Embedding takes integer ids (a tensor of any shape; I32, I64, or F32/F64
 * holding whole numbers: Keras truncates fractions, optim refuses them) and
 * gives [ids shape..., output_dim]. In a Sequential it must be the first
 * layer and takes the model's dtype; called on its own it is float32. */
OPTIM_API int optim_embedding_create(optim_layer **out, const optim_embedding_options *opts,
                                     optim_error *err);

/* Flatten: [batch, d1, d2, ...] -> [batch, d1*d2*...]. name NULL: "flatten". */
OPTIM_API int optim_flatten_create(optim_layer **out, const char *name, optim_error *err);

/* Dropout: rate in [0, 1); active only when called with training != 0.
 * Each training call draws a fresh mask from (seed, call count). */
OPTIM_API int optim_dropout_create(optim_layer **out, double rate, int64_t seed, const char *name,
                                   optim_error *err);

/* keras.layers.Activation: applies an activation (the Dense one's names)
 * to any input; no variables. name NULL: "activation". */
OPTIM_API int optim_activation_layer_create(optim_layer **out, optim_activation activation,
                                            const char *name, optim_error *err);

/* keras.layers.LayerNormalization (keras/src/layers/normalization/
 * layer_normalization.py) over the last axis: y = gamma (x - mean) /
 * sqrt(var + epsilon) + beta per example, mean and variance over that
 * axis (optim_layer_norm). Variables "LAYER/gamma" (ones, when scale) then
 * "LAYER/beta" (zeros, when center), of shape [last dim], trainable. */
typedef struct optim_layer_normalization_options {
    uint32_t size; /* sizeof(optim_layer_normalization_options) */
    int32_t axis; /* -1; the last axis only (rank - 1 is accepted too) */
    double epsilon; /* 1e-3; finite, >= 0 */
    int center; /* 1: add beta */
    int scale; /* 1: multiply by gamma */
    const char *name; /* NULL: "layer_normalization", made unique in a model */
} optim_layer_normalization_options;

OPTIM_API optim_layer_normalization_options optim_layer_normalization_defaults(void);
OPTIM_API int optim_layer_normalization_create(optim_layer **out,
                                               const optim_layer_normalization_options *opts,
                                               optim_error *err);

/* keras.layers.BatchNormalization (Keras 3 keras/src/layers/normalization/
 * batch_normalization.py) over the last axis of an input of rank >= 2.
 * Training calls (fit): y = gamma (x - mean) / sqrt(var + epsilon) + beta
 * with the batch mean and biased variance over all axes but the last
 * (optim_batch_norm), then moving_mean = moving_mean momentum + mean (1 -
 * momentum) and the same for moving_variance. Inference calls (training 0:
 * evaluate, predict) use the moving statistics. Variables in Keras's order:
 * "LAYER/gamma" (ones, when scale), "LAYER/beta" (zeros, when center),
 * trainable; "LAYER/moving_mean" (zeros), "LAYER/moving_variance" (ones),
 * not trainable; each of shape [last dim]. Under optim_model_distribute each
 * replica normalizes with its own rows and the moving statistics are
 * averaged over the replicas (weighted by their rows) after every step. */
typedef struct optim_batch_normalization_options {
    uint32_t size; /* sizeof(optim_batch_normalization_options) */
    int32_t axis; /* axis=-1; the last axis only (rank - 1 is accepted too) */
    double momentum; /* momentum=0.99; in [0, 1] */
    double epsilon; /* epsilon=1e-3; finite, >= 0 */
    int center; /* center=True (1): add beta */
    int scale; /* scale=True (1): multiply by gamma */
    const char *name; /* name=None (NULL): "batch_normalization", made unique in a model */
} optim_batch_normalization_options;

OPTIM_API optim_batch_normalization_options optim_batch_normalization_defaults(void);
OPTIM_API int optim_batch_normalization_create(optim_layer **out,
                                               const optim_batch_normalization_options *opts,
                                               optim_error *err);

/* Frees a layer that no model owns (a model frees its own). NULL: no-op. */
OPTIM_API void optim_layer_destroy(optim_layer *l);
OPTIM_API const char *optim_layer_name(const optim_layer *l);
/* "Dense", "Embedding", "Flatten", "Dropout", "Activation",
 * "LayerNormalization", "BatchNormalization". */
OPTIM_API const char *optim_layer_class_name(const optim_layer *l);
OPTIM_API int optim_layer_built(const optim_layer *l);
/* The layer's variables in Keras's order (kernel, bias; gamma, beta,
 * moving_mean, moving_variance); up to cap, returns
 * the count (0 before the layer is built). */
OPTIM_API size_t optim_layer_variables(const optim_layer *l, optim_var **vars, size_t cap);
/* Calls the layer on a tape, building it first if needed (input node of the
 * layer's dtype; an Embedding takes `ids` instead, x must be NULL).
 * *out lives on the tape. Message in optim_layer_errmsg. */
OPTIM_API int optim_layer_call(optim_layer *l, optim_tape *t, optim_node *x,
                               const optim_tensor *ids, int training, optim_node **out);
OPTIM_API const char *optim_layer_errmsg(const optim_layer *l);
/* Training calls made so far (a Dropout layer's masks are drawn from its
 * seed and this count). Checkpoints save and restore it so a resumed run
 * draws the masks an uninterrupted one would. 0 for NULL. */
OPTIM_API uint64_t optim_layer_training_calls(const optim_layer *l);
/* Sets the count (restoring a checkpoint). OPTIM_EINVAL for NULL. */
OPTIM_API int optim_layer_set_training_calls(optim_layer *l, uint64_t calls);

/* ---- losses ------------------------------------------------------------------------ */

typedef enum optim_reduction {
    OPTIM_REDUCTION_SUM_OVER_BATCH_SIZE = 0, /* sum / number of per-sample values (default) */
    OPTIM_REDUCTION_SUM, /* sum */
    OPTIM_REDUCTION_NONE /* per-sample values, shape y_pred.shape[:-1] */
} optim_reduction;

typedef enum optim_loss_kind {
    OPTIM_LOSS_MEAN_SQUARED_ERROR = 1,
    OPTIM_LOSS_BINARY_CROSSENTROPY,
    OPTIM_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY
} optim_loss_kind;

typedef struct optim_loss {
    uint32_t size; /* sizeof(optim_loss) */
    optim_loss_kind kind;
    optim_reduction reduction;
    int from_logits; /* cross-entropies: y_pred are logits (0) */
    double label_smoothing; /* BinaryCrossentropy: z -> z (1 - s) + s / 2, s in [0, 1] (0) */
} optim_loss;

OPTIM_API optim_loss optim_loss_mean_squared_error(void);
OPTIM_API optim_loss optim_loss_binary_crossentropy(int from_logits);
OPTIM_API optim_loss optim_loss_sparse_categorical_crossentropy(int from_logits);
/* Keras's class name ("MeanSquaredError"), NULL for an unknown kind. */
OPTIM_API const char *optim_loss_name(const optim_loss *loss);

/* The loss of y_pred (a node) against y_true on a tape, like calling a Keras
 * loss object: MSE and BinaryCrossentropy take y_true of y_pred's shape
 * (any dtype; a trailing dim of 1 may be missing on either side, as Keras's
 * squeeze_or_expand_to_same_rank); SparseCategoricalCrossentropy takes
 * integer labels of shape y_pred.shape[:-1] (or with a trailing 1), in
 * 0 .. classes-1. sample_weight (NULL: none) has the per-sample shape.
 * *out is a scalar, or per-sample values for OPTIM_REDUCTION_NONE. */
OPTIM_API int optim_loss_call(const optim_loss *loss, optim_tape *t, const optim_tensor *y_true,
                              optim_node *y_pred, const optim_tensor *sample_weight,
                              optim_node **out, optim_error *err);

/* ---- metrics ----------------------------------------------------------------------- */

typedef enum optim_metric_kind {
    OPTIM_METRIC_NONE = 0,
    OPTIM_METRIC_ACCURACY, /* "accuracy": one of the three below, by shape */
    OPTIM_METRIC_BINARY_ACCURACY, /* (y_pred > 0.5) == y_true */
    OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY, /* argmax(y_pred) == label */
    OPTIM_METRIC_CATEGORICAL_ACCURACY /* argmax(y_pred) == argmax(y_true) */
} optim_metric_kind;

/* Keras 3's choice for "accuracy": binary if y_pred's last dim is 1, sparse
 * categorical if y_true has a lower rank (or a last dim of 1), else
 * categorical. Other kinds are returned as they are. */
OPTIM_API optim_metric_kind optim_metric_resolve(optim_metric_kind kind, const optim_tensor *y_true,
                                                 const optim_tensor *y_pred);

/* Accumulates an accuracy like Keras's MeanMetricWrapper: adds the sum of
 * the per-sample values (each sample's mean over its remaining axes) to
 * *total and the number of samples to *count. accuracy = total / count. */
OPTIM_API int optim_accuracy_update(optim_metric_kind kind, const optim_tensor *y_true,
                                    const optim_tensor *y_pred, double *total, double *count,
                                    optim_error *err);

/* ---- logs (Keras's `logs` dict) ---------------------------------------------------- */

#define OPTIM_LOGS_MAX 16
#define OPTIM_LOGS_NAME_MAX 48

typedef struct optim_logs {
    size_t n;
    char names[OPTIM_LOGS_MAX][OPTIM_LOGS_NAME_MAX];
    double values[OPTIM_LOGS_MAX];
} optim_logs;

/* OPTIM_ENOTFOUND if name is not there. */
OPTIM_API int optim_logs_get(const optim_logs *logs, const char *name, double *value);
/* Adds or replaces; OPTIM_ERANGE when full, OPTIM_EINVAL for a bad name. */
OPTIM_API int optim_logs_set(optim_logs *logs, const char *name, double value);

/* ---- Sequential ---------------------------------------------------------------------- */

typedef struct optim_sequential_options {
    uint32_t size; /* sizeof(optim_sequential_options) */
    const char *name; /* "sequential" */
    optim_dtype dtype; /* variables and computation: OPTIM_F32 (default) or OPTIM_F64 */
    uint64_t seed; /* where layers without a seed get theirs (0) */
} optim_sequential_options;

OPTIM_API optim_sequential_options optim_sequential_defaults(void);
/* opts NULL: the defaults. */
OPTIM_API int optim_sequential_create(optim_model **out, const optim_sequential_options *opts,
                                      optim_error *err);
/* Frees the model, its layers and their variables. NULL is a no-op. */
OPTIM_API void optim_model_destroy(optim_model *m);
OPTIM_API const char *optim_model_errmsg(const optim_model *m);
OPTIM_API const char *optim_model_name(const optim_model *m);

/* Appends a layer; on success the model owns it. Refused once the model is
 * built, for a layer another model owns, or for a duplicate layer name. */
OPTIM_API int optim_sequential_add(optim_model *m, optim_layer *l);
OPTIM_API size_t optim_model_layer_count(const optim_model *m);
OPTIM_API optim_layer *optim_model_layer(const optim_model *m, size_t i);

/* Creates the variables now for inputs of shape [batch, input_shape...]
 * (Keras's model.build((None, ...))). Otherwise the first call does it. */
OPTIM_API int optim_model_build(optim_model *m, int32_t rank, const int64_t *input_shape);
OPTIM_API int optim_model_built(const optim_model *m);
/* Output shape for one input shape (batch dim included), after build. */
OPTIM_API int optim_model_output_shape(optim_model *m, int32_t rank, const int64_t *input_shape,
                                       int32_t *out_rank, int64_t *out_shape);

/* model(x, training=...): x is a tensor of any float or integer dtype
 * (converted to the model's dtype; ids for an Embedding first layer).
 * Builds the model on the first call; if that call fails, the model is
 * left unbuilt. *out lives on the tape. */
OPTIM_API int optim_model_call(optim_model *m, optim_tape *t, const optim_tensor *x, int training,
                               optim_node **out);

/* Variables of all layers in order (model.weights / trainable_weights).
 * Write up to cap; return the total. */
OPTIM_API size_t optim_model_variables(const optim_model *m, optim_var **vars, size_t cap);
OPTIM_API size_t optim_model_trainable_variables(const optim_model *m, optim_var **vars,
                                                 size_t cap);
OPTIM_API int64_t optim_model_count_params(const optim_model *m);
/* model.summary(): a table of layers, output shapes and parameter counts. */
OPTIM_API int optim_model_summary(optim_model *m, FILE *out);

/* model.compile(optimizer, loss, metrics=[metric]). The optimizer is
 * borrowed (it must outlive the model's use); the loss is copied. Its
 * reduction must not be NONE (fit needs a scalar). metric may be NONE. */
OPTIM_API int optim_model_compile(optim_model *m, optim_optimizer *opt, const optim_loss *loss,
                                  optim_metric_kind metric);
OPTIM_API optim_optimizer *optim_model_optimizer(const optim_model *m);

/* model.stop_training = True (from a callback): fit stops after the current
 * batch. */
OPTIM_API void optim_model_stop_training(optim_model *m);

/* ---- callbacks ------------------------------------------------------------------------ */

/* Hooks of a callback; any may be NULL. Each gets the user pointer, the
 * model and Keras's logs (mutable: a hook may add entries, as Keras's
 * callbacks do). A non-zero return stops fit with that status; the hook may
 * fill err. on_train_begin's logs hold the names the epoch logs will have
 * (values NaN), so a callback can check what it monitors. */
typedef struct optim_callback_hooks {
    uint32_t size; /* sizeof(optim_callback_hooks) */
    int (*on_train_begin)(void *user, optim_model *m, optim_logs *logs, optim_error *err);
    int (*on_epoch_begin)(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                          optim_error *err);
    int (*on_train_batch_begin)(void *user, optim_model *m, int64_t batch, optim_logs *logs,
                                optim_error *err);
    int (*on_train_batch_end)(void *user, optim_model *m, int64_t batch, optim_logs *logs,
                              optim_error *err);
    int (*on_epoch_end)(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                        optim_error *err);
    int (*on_train_end)(void *user, optim_model *m, optim_logs *logs, optim_error *err);
    /* Called by optim_callback_destroy. */
    void (*destroy)(void *user);
    /* Added after the six above (a table whose size is
     * OPTIM_CALLBACK_HOOKS_V1_SIZE, ending before it, is still taken). After a training batch's gradients and
     * before the optimizer step that applies them: `loss` is the batch's mean
     * loss (no running mean), grads[i] pairs trainable variable i (model
     * order) with its gradient, read-only, as the optimizer will get it
     * (before its clipping; under replicas, this replica's part before the
     * sum). The step's learning rate is optim_get_hyper(optimizer,
     * "learning_rate") here. fit does nothing extra when no callback sets it. */
    int (*on_train_batch_gradients)(void *user, optim_model *m, int64_t batch, double loss,
                                    const optim_grad_var *grads, size_t n, optim_error *err);
} optim_callback_hooks;

/* The size of the hooks table before on_train_batch_gradients. */
#define OPTIM_CALLBACK_HOOKS_V1_SIZE offsetof(optim_callback_hooks, on_train_batch_gradients)

OPTIM_API int optim_callback_create(optim_callback **out, const optim_callback_hooks *hooks,
                                    void *user, optim_error *err);
OPTIM_API void optim_callback_destroy(optim_callback *cb); /* NULL is a no-op */

typedef enum optim_monitor_mode {
    OPTIM_MODE_AUTO = 0,
    OPTIM_MODE_MIN,
    OPTIM_MODE_MAX
} optim_monitor_mode;

/* keras.callbacks.EarlyStopping (callbacks/early_stopping.py). */
typedef struct optim_early_stopping_options {
    uint32_t size; /* sizeof(optim_early_stopping_options) */
    const char *monitor; /* "val_loss" (copied) */
    double min_delta; /* 0; its absolute value is used */
    int64_t patience; /* 0 */
    optim_monitor_mode mode; /* AUTO: "loss"-like -> min, "accuracy"-like -> max */
    double baseline; /* NAN: none */
    int restore_best_weights; /* 0 */
    int64_t start_from_epoch; /* 0 */
    FILE *out; /* verbose messages ("Epoch 5: early stopping"); NULL: none */
} optim_early_stopping_options;

OPTIM_API optim_early_stopping_options optim_early_stopping_defaults(void);
OPTIM_API int optim_early_stopping_create(optim_callback **out,
                                          const optim_early_stopping_options *opts,
                                          optim_error *err);
/* 0-based epoch at which it stopped training (0: it did not). -1 if cb is
 * not an EarlyStopping. */
OPTIM_API int64_t optim_early_stopping_stopped_epoch(const optim_callback *cb);
/* The best monitored value (NAN before any) and its 0-based epoch. */
OPTIM_API double optim_early_stopping_best(const optim_callback *cb, int64_t *best_epoch);

/* keras.callbacks.LearningRateScheduler: at each epoch's start the
 * optimizer's learning_rate becomes fn(user, epoch, current_lr). The value
 * must be finite; the learning rate must be a plain number (not a schedule,
 * variable or callable: Keras 3 refuses to set those). Adds "learning_rate"
 * to the epoch logs. */
typedef double (*optim_epoch_schedule_fn)(void *user, int64_t epoch, double lr);
OPTIM_API int optim_lr_scheduler_create(optim_callback **out, optim_epoch_schedule_fn fn,
                                        void *user, FILE *verbose_out, optim_error *err);

/* ---- fit / evaluate / predict ------------------------------------------------------ */

#define OPTIM_VERBOSE_AUTO (-1) /* a bar if out is a terminal, else one line per epoch */

typedef struct optim_fit_options {
    uint32_t size; /* sizeof(optim_fit_options) */
    int64_t epochs; /* 1 */
    int64_t batch_size; /* 32 */
    int shuffle; /* 1: reshuffle every epoch */
    uint64_t seed; /* shuffling seed (0) */
    const optim_tensor *validation_x; /* NULL: no validation */
    const optim_tensor *validation_y;
    optim_callback *const *callbacks; /* borrowed */
    size_t n_callbacks;
    int64_t initial_epoch; /* 0 */
    FILE *out; /* progress; NULL: silent */
    int verbose; /* OPTIM_VERBOSE_AUTO, 0 (silent), 1 (bar), 2 (line) */
} optim_fit_options;

OPTIM_API optim_fit_options optim_fit_defaults(void);

/* Keras's History: one logs entry per epoch run. */
typedef struct optim_history {
    size_t epochs;
    int64_t *epoch; /* 0-based epoch numbers */
    optim_logs *logs;
} optim_history;
OPTIM_API void optim_history_free(optim_history *h); /* frees the arrays, zeroes *h */

/* model.fit(x, y, ...). x: [n, ...] inputs, y: [n, ...] targets (labels for
 * SparseCategoricalCrossentropy). Needs optim_model_compile. Everything is
 * checked before the first step; an error from a step or a callback stops
 * training where it is (the model keeps the steps already applied).
 * history (NULL: not kept) gets malloc'd arrays, also when fit fails after
 * some epochs: free them with optim_history_free. */
OPTIM_API int optim_model_fit(optim_model *m, const optim_tensor *x, const optim_tensor *y,
                              const optim_fit_options *opts, optim_history *history);

/* model.evaluate: loss (and the metric) over all of x, weighted by batch
 * size, into *logs ("loss", "accuracy"). out: a progress bar or line
 * (OPTIM_VERBOSE_AUTO behaviour), NULL: silent. */
OPTIM_API int optim_model_evaluate(optim_model *m, const optim_tensor *x, const optim_tensor *y,
                                   int64_t batch_size, FILE *out, optim_logs *logs);

/* model.predict: y gets the outputs for all of x ([n, output shape...], the
 * model's dtype) in memory the library allocates; free y->data with
 * optim_free. */
OPTIM_API int optim_model_predict(optim_model *m, const optim_tensor *x, int64_t batch_size,
                                  optim_tensor *y);

#ifdef __cplusplus
}
#endif
#endif
