/* Internal to src/nn: layer plumbing, the model struct, the seeded
 * generator, conversions and the progress bar. Not installed. */
#ifndef OPTIM_NN_INTERNAL_H
#define OPTIM_NN_INTERNAL_H

#include "optim/nn.h"

#include "core/internal.h"

#define OPTIM__NN_NAME_MAX 64

/* ---- seeded generator (SplitMix64) --------------------------------------------- */

typedef struct optim__rng {
    uint64_t state;
} optim__rng;

optim__rng optim__rng_make(uint64_t seed);
uint64_t optim__rng_next(optim__rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double optim__rng_uniform(optim__rng *r);
/* Uniform integer in [0, n), n >= 1. */
uint64_t optim__rng_below(optim__rng *r, uint64_t n);
/* Mixes two words into a seed (for derived seeds). */
uint64_t optim__seed_mix(uint64_t a, uint64_t b);

/* ---- tensors -------------------------------------------------------------------- */

/* Element i of a F32/F64/I32/I64 tensor as double. */
double optim__nn_get(const optim_tensor *t, int64_t i);
/* A malloc'd copy of x's elements in dtype dt (F32/F64); NULL when out of
 * memory (or numel 0: then *buf is a 1-byte allocation). */
void *optim__nn_convert(const optim_tensor *x, optim_dtype dt);
/* x as a tape constant of dtype dt (converted when needed); NULL on error
 * (tape message) or out of memory (err). */
optim_node *optim__nn_const(optim_tape *t, const optim_tensor *x, optim_dtype dt, optim_error *err);
/* Same, for a model's input: with borrow (x stays valid and unchanged until
 * the tape is reset) and x already of dtype dt, the node views x's data
 * instead of copying it. */
optim_node *optim__nn_input(optim_tape *t, const optim_tensor *x, optim_dtype dt, int borrow,
                            optim_error *err);
/* Integer ids (I32/I64, or whole F32/F64) of x into a malloc'd int64 array,
 * each checked to be in [0, limit). `what` names x in messages. */
int optim__nn_ids(const optim_tensor *x, int64_t limit, const char *what, int64_t **out,
                  optim_error *err);
/* The message for a tape op that returned NULL. */
int optim__nn_tape_err(optim_error *err, optim_tape *t, const char *what);

/* ---- layers ----------------------------------------------------------------------- */

typedef struct optim__layer_ops {
    const char *class_name; /* "Dense" */
    const char *base_name; /* "dense" */
    int takes_ids; /* input is integer ids, not a node */
    /* Checks an input shape (batch included) and gives the output shape. */
    int (*output_shape)(const optim_layer *l, int32_t rank, const int64_t *in, int32_t *out_rank,
                        int64_t *out, optim_error *err);
    /* Creates the variables for this input shape and dtype (NULL: none). */
    int (*build)(optim_layer *l, int32_t rank, const int64_t *in, optim_dtype dt, optim_error *err);
    /* Records the layer on the tape. */
    int (*call)(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids, int training,
                optim_node **out, optim_error *err);
    /* Frees what the layer allocated besides its variables (NULL: nothing). */
    void (*destroy)(optim_layer *l);
} optim__layer_ops;

typedef struct optim__dense {
    int64_t units;
    optim_activation activation;
    int use_bias;
    int has_kernel_constraint, has_bias_constraint;
    optim_constraint kernel_constraint, bias_constraint;
    int64_t in_dim; /* after build */
} optim__dense;

typedef struct optim__embedding {
    int64_t input_dim, output_dim;
    int has_constraint;
    optim_constraint constraint;
} optim__embedding;

typedef struct optim__dropout {
    double rate;
} optim__dropout;

typedef struct optim__layer_norm {
    int32_t axis;
    double epsilon;
    int center, scale;
} optim__layer_norm;

typedef struct optim__batch_norm {
    int32_t axis;
    double momentum, epsilon;
    int center, scale;
} optim__batch_norm;

struct optim_layer {
    const optim__layer_ops *ops;
    char name[OPTIM__NN_NAME_MAX];
    int auto_name; /* name was not given: a model may make it unique */
    int built;
    int built_by_model; /* built by its model's first call (undone if that call fails) */
    optim_dtype dtype; /* after build */
    int64_t seed; /* as given, or OPTIM_SEED_AUTO */
    uint64_t eff_seed; /* the seed in use */
    uint64_t calls; /* training calls so far (Dropout masks) */
    optim_var *vars[4]; /* BatchNormalization has 4 */
    size_t nvars;
    optim_model *owner;
    char errmsg[OPTIM_ERRMSG_MAX];
    union {
        optim__dense dense;
        optim__embedding emb;
        optim__dropout drop;
        optim__layer_norm lnorm;
        optim__batch_norm bnorm;
        optim_activation act; /* Activation */
    } u;
};

/* A zeroed layer with ops, name (NULL: base name) and seed. */
int optim__layer_new(optim_layer **out, const optim__layer_ops *ops, const char *name, int64_t seed,
                     optim_error *err);
/* Builds a layer for an input shape (no-op if built). On error nothing is
 * created. */
int optim__layer_build(optim_layer *l, int32_t rank, const int64_t *in, optim_dtype dt,
                       optim_error *err);
/* Checks the input, builds if needed and records the layer (err non-NULL). */
int optim__layer_forward(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                         int training, optim_node **out, optim_error *err);
/* Destroys the variables and marks the layer unbuilt. */
void optim__layer_unbuild(optim_layer *l);
/* Creates a variable "LAYER/what" of the layer's dtype from double values
 * (NULL: zeros) and appends it to the layer. */
int optim__layer_add_var(optim_layer *l, const char *what, optim_dtype dt, int32_t rank,
                         const int64_t *shape, const double *init, const optim_constraint *c,
                         optim_error *err);
/* Checks a constraint against a variable rank before any variable exists. */
int optim__check_constraint(const optim_constraint *c, int32_t rank, const char *what,
                            optim_error *err);

/* ---- model --------------------------------------------------------------------------- */

/* Data parallelism, set by optim_model_distribute (src/distribute): fit
 * splits each global batch across `size` replicas (size 0: not
 * distributed), steps through `apply` and sums its totals with `sum`. */
typedef struct optim__replicas {
    int rank, size;
    int (*apply)(void *user, optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                 optim_error *err);
    int (*sum)(void *user, double *values, size_t n, optim_error *err);
    void *user;
} optim__replicas;

/* This replica's rows [*lo, *lo + *n) of the global batch [start, start +
 * bs) and its share of the loss (*n / bs). A replica without rows borrows
 * the batch's first with share 0, so that it still takes part in the step. */
void optim__replica_rows(const optim__replicas *r, int64_t start, int64_t bs, int64_t *lo,
                         int64_t *n, double *share);
/* After a distributed training step: every non-trainable variable (the
 * BatchNormalization moving statistics) becomes the share-weighted mean
 * of the replicas' values, sum(share v) / sum(share), the same on every
 * replica (a replica without rows, share 0, counts for nothing). */
int optim__replica_sync_stats(optim_model *m, double share, optim_error *err);

struct optim_model {
    char name[OPTIM__NN_NAME_MAX];
    optim_dtype dtype;
    uint64_t seed;
    optim_layer **layers;
    size_t n_layers, cap_layers;
    int built;
    int32_t in_rank; /* input rank without the batch dim */
    int64_t in_shape[OPTIM_MAX_RANK];
    optim_var **train_vars; /* trainable variables, after build */
    size_t n_train_vars;
    optim_optimizer *opt;
    optim_loss loss;
    optim_metric_kind metric;
    int compiled;
    int stop_training;
    optim_tape *tape; /* for fit / evaluate / predict */
    optim__replicas replicas; /* data parallelism (size 0: none) */
    char errmsg[OPTIM_ERRMSG_MAX];
};

/* Sets the model's message from err; returns err->code. */
int optim__model_fail(optim_model *m, const optim_error *err);
/* Formats the model's message; returns code. */
int optim__model_err(optim_model *m, int code, const char *fmt, ...) OPTIM__PRINTF(3, 4);
/* model(x) with err non-NULL (no message on the model). borrow: x stays
 * valid and unchanged until the tape is reset, so the tape may view it
 * instead of copying it (fit, evaluate, predict). */
int optim__model_call(optim_model *m, optim_tape *t, const optim_tensor *x, int training,
                      int borrow, optim_node **out, optim_error *err);
/* Output shape for a full input shape (batch first). */
int optim__model_output_shape(const optim_model *m, int32_t rank, const int64_t *shape,
                              int32_t *out_rank, int64_t *out_shape, optim_error *err);
/* Builds for a full input shape; no-op when built. */
int optim__model_build(optim_model *m, int32_t rank, const int64_t *shape, optim_error *err);
/* Undoes what the model's own build did (variables of layers it built). */
void optim__model_unbuild(optim_model *m);
/* The model's tape, created on first use. */
int optim__model_tape(optim_model *m, optim_tape **t);
/* Copies of all variables' values (for restore_best_weights). */
typedef struct optim__weights {
    size_t n;
    void **data;
    size_t *bytes;
} optim__weights;
int optim__model_get_weights(const optim_model *m, optim__weights *w);
void optim__model_set_weights(optim_model *m, const optim__weights *w);
void optim__weights_free(optim__weights *w);

/* ---- callbacks ------------------------------------------------------------------------ */

typedef enum optim__callback_kind {
    OPTIM__CB_USER = 0,
    OPTIM__CB_EARLY_STOPPING,
    OPTIM__CB_LR_SCHEDULER
} optim__callback_kind;

struct optim_callback {
    optim_callback_hooks hooks;
    void *user;
    optim__callback_kind kind;
};

/* ---- metrics ---------------------------------------------------------------------------- */

/* Checks a loss struct (size, kind, reduction, flags). */
int optim__loss_validate(const optim_loss *loss, optim_error *err);
/* Keras's log name of a metric ("accuracy", "binary_accuracy", ...). */
const char *optim__metric_name(optim_metric_kind kind);
/* Checks y_true against an output shape before training (same rules as the
 * loss); for labels also their range. */
int optim__loss_check(const optim_loss *loss, const optim_tensor *y_true, int32_t pred_rank,
                      const int64_t *pred_shape, const char *what, optim_error *err);

/* Checks that a metric fits y_true and y_pred shapes (kind resolved). */
int optim__metric_check(optim_metric_kind kind, int32_t tr, const int64_t *ts, int32_t pr,
                        const int64_t *ps, optim_error *err);

/* ---- progress bar ------------------------------------------------------------------------ */

typedef struct optim__progbar {
    FILE *out;
    int mode; /* 1: bar, 2: one line at the end */
    int64_t target;
    int width;
    double start, last_update, epoch_start, epoch_end, after_first;
    int has_after_first;
    int has_epoch_end;
    int total_width;
} optim__progbar;

/* mode: 1 or 2 (OPTIM_VERBOSE_AUTO resolved by optim__progbar_mode). */
int optim__progbar_mode(FILE *out, int verbose);
void optim__progbar_init(optim__progbar *p, FILE *out, int mode, int64_t target);
void optim__progbar_update(optim__progbar *p, int64_t current, const optim_logs *logs,
                           int finalize);
double optim__now(void);

#endif
