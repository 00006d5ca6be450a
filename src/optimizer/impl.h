/* The optimizer object, shared by the files of src/optimizer (internal).
 *
 * Dependency order of src/optimizer: each file calls only those above it
 * (and src/core: status, ptrmap, json.c's object reader, patterns.c):
 *   access.c          accessors and the error message of the object
 *   isa_builtin.c     each built-in class built for the ISA level in use (nothing above)
 *   weights.c         get_weights / set_weights, a wrapper's inner optimizers (access)
 *   pattern_params.c  a class's name-pattern-list keys (access)
 *   params.c          base options, param values to and from JSON, class-table checks,
 *                     Keras names
 *   registry.c        the one registry: optimizer and schedule classes (params)
 *   schedule.c        schedule objects (params, registry)
 *   decay_kernels.c   the weight decay's loop, once per ISA level (nothing above)
 *   weight_decay.c    Keras 3 decoupled weight decay (access, decay_kernels)
 *   keras3_options.c  Keras 3 base options (access, weights)
 *   optimizer.c       creation, hyperparameters, validation (all of the above)
 *   config.c          from_config / get_config (optimizer, schedule, registry, params)
 *   wrapper_support.c what wrappers share: base options, config, no half variables (optimizer)
 *   slots.c           slots, optim_build (optimizer, keras3_options, weights, wrapper_support)
 *   bytes.c           optim_bytes_per_param: bytes an update moves (slots)
 *   check.c           stage 1: the pairs checked (slots, keras3_options, weights,
 *                     wrapper_support)
 *   sparse_sum.c      sums of duplicate sparse rows, once per ISA level (nothing above)
 *   sparse_walk.c     the sparse modes of the update stage (the class table only)
 *   multi_tensor.c    stage 7's tasks in one region (nothing above)
 *   half_step.c       half-precision variables, dense (weight_decay)
 *   half_sparse.c     half-precision variables, sparse (sparse_walk, half_step, weight_decay)
 *   clip_kernels.c    stage 4's loops and sums of squares, once per ISA level (nothing above)
 *   clip.c            stage 4: clipping, sparse de-duplication (sparse_walk)
 *   update.c          stage 7: tasks and their runners (optimizer, weight_decay, sparse_walk,
 *                     multi_tensor, half_step, half_sparse, clip)
 *   apply.c           the pipeline and optim_step (optimizer, slots, check, keras3_options,
 *                     weight_decay, wrapper_support, half_step, half_sparse, clip, update)
 * Headers: impl.h, params.h (params.c), config_ex.h
 * (config.c), slot_order.h (slots.c), keras3_options.h, sparse_walk.h, multi_tensor.h, half_step.h,
 * half_sparse.h (their .c), pipeline.h (the step of apply.c, clip.c, update.c).
 */
#ifndef OPTIM_OPTIMIZER_IMPL_H
#define OPTIM_OPTIMIZER_IMPL_H

#include "core/arena.h"
#include "core/isa.h"
#include "core/internal.h"
#include "core/ptrmap.h"
#include "optim/optimizer_class.h"
#include "optim/step.h"
#include "optimizer/config_ex.h"
#include "optimizer/params.h"
#include "optimizer/slot_order.h"

/* The kinds a hyperparameter value can take (Keras: number, variable,
 * callable, LearningRateSchedule), plus None. */
typedef enum hyper_kind {
    HYPER_NONE = 0,
    HYPER_NUMBER,
    HYPER_VAR,
    HYPER_FN,
    HYPER_SCHEDULE,
    HYPER_SCHEDULE_OBJ /* an optim_schedule the optimizer owns */
} hyper_kind;

typedef struct optim__hyper {
    hyper_kind kind;
    double number;
    optim__num_form form; /* how a NUMBER read from JSON was written (1024 or 1024.0) */
    optim_var *var;
    optim_hyper_fn fn;
    optim_schedule_fn schedule;
    void *user;
    struct optim_schedule *sched;
} optim__hyper;

#define OPTIM__NO_OWNER ((size_t)-1)

/* A weight besides iterations: a slot of a variable, or an optimizer-level
 * weight (owner and name_id OPTIM__NO_OWNER), in creation order. */
typedef struct optim__slot {
    optim_var *var; /* owned */
    size_t name_id; /* index into slot_names */
    size_t owner; /* index into vars */
    int k; /* its position among its variable's slots */
} optim__slot;

typedef struct optim__var_entry {
    optim_var *var; /* borrowed */
    int64_t numel; /* as first seen, to catch a reused address */
    optim_dtype dtype;
    int nslots; /* all of them: the class's own, then the base's */
    int nown; /* the class's own (create_slots), first in slot_ids */
    size_t slot_ids[OPTIM_MAX_SLOTS];
    void *slot_data[OPTIM_MAX_SLOTS]; /* their data (owned slots never move): a step reads
                                         these, not the slots' variables */
    optim_var *average; /* Keras 3's base slots (keras3_options.h), NULL if none */
    optim_var *accumulator;
} optim__var_entry;

typedef struct optim__fn_entry {
    optim_grad_fn fn;
    void *user;
} optim__fn_entry;

/* tf-keras 2.11+'s new-style optimizers (tf_keras/optimizers/optimizer.py):
 * Keras 3's rules, their own config key set. Read from a config with
 * jit_compile or "is_legacy_optimizer": false (config.c), and written back
 * in that form. */
typedef struct optim__tfk_flavour {
    unsigned char on;
    unsigned char jit_compile; /* the value read (true when absent: the constructor's default) */
    unsigned char custom; /* read as "Custom>NAME", as tf-keras 2.11-2.12 writes it */
} optim__tfk_flavour;

struct optim_optimizer {
    optim_class cls; /* copied, zero-extended */
    optim_generation gen;
    optim__tfk_flavour tfk; /* gen KERAS3 only */
    /* Read in serialize_keras_object's envelope (module, registered_name):
     * tf-keras 2.13+ writes legacy and new-style optimizers in it too. */
    unsigned char module_read;
    /* A TF Addons class's module as read in that envelope
     * ("tensorflow_addons.optimizers.lamb"), written back; "" otherwise. */
    char tfa_module[64];
    char *name;
    size_t nparams; /* OPTIM__N_BASE + cls.n_params */
    const optim_param **params;
    optim__hyper *hypers;
    double *values; /* resolved for the current step */
    int64_t iterations; /* the step counter */
    /* While a step runs its hooks (stages 6 and 7), the count they see as
     * optim_iterations(): Keras 3's counter // gradient_accumulation_steps. */
    int64_t hook_iterations;
    int in_hooks;
    int built; /* variable set fixed by optim_build */
    int num_threads;

    optim__var_entry *vars;
    size_t nvars, cap_vars;
    optim__ptrmap var_index;

    optim__slot *slots; /* creation order */
    size_t nslots, cap_slots;
    char **slot_names; /* distinct names, creation order */
    size_t nslot_names;
    optim_slot_order slot_order;

    optim__fn_entry *transformers;
    size_t ntransformers;
    optim__fn_entry aggregator;

    optim__ptrmap wd_excluded; /* variables excluded from weight decay */
    optim_name_patterns *wd_patterns; /* name patterns excluded from weight decay */
    optim_name_patterns **patterns; /* per cls.pattern_params; NULL entry: None */

    void *state;
    void *coef[2]; /* per dtype: [0] f32, [1] f64 */
    optim__arena arena; /* the running step's buffers, reused step after step */
    uint64_t weights_version; /* changes whenever a weight is added, removed or moved */
    char **weight_names; /* optim_weight_name's qualified names (weights.c), or NULL */
    uint64_t names_version; /* the weights (of every level) they were computed for */
    char errmsg[OPTIM_ERRMSG_MAX];
};

/* Whether the optimizer runs the base pipeline (apply.c), rather than a
 * wrapper's step or apply_gradients hook. */
static inline int optim__runs_pipeline(const optim_optimizer *opt)
{
    return !opt->cls.step && !opt->cls.apply_gradients;
}

/* The class's pattern_params (pattern_params.c): compiled defaults at
 * creation, freed at destruction; read: a config key (cJSON item) of the
 * optimizer's generation, or OPTIM__NOT_TAKEN; put: written, each in its
 * generation, at the end of cfg. */
int optim__pattern_params_init(optim_optimizer *opt, optim_error *err);
void optim__pattern_params_free(optim_optimizer *opt);
int optim__pattern_param_read(optim_optimizer *opt, const char *key, const void *item,
                              optim_error *err);
int optim__pattern_params_put(const optim_optimizer *opt, optim_config *cfg);

/* Formats the optimizer's message; returns code (optim_set_error). */
#define optim__opt_err optim_set_error
/* Copies an optim_error into the optimizer's message; returns its code. */
int optim__opt_take(optim_optimizer *opt, const optim_error *err);

/* Param lookup by name among those of the optimizer's generation; returns
 * index or -1. `*other_gen` is set when it exists in the other generation. */
long optim__param_find(const optim_optimizer *opt, const char *name, int *other_gen);
/* The allowed strings of param i (OPTIM_PARAM_STRING), NULL for others. */
const char *const *optim__choices(const optim_optimizer *opt, size_t i);
/* Whether a param (or pattern key) with these flags exists in generation gen. */
static inline int optim__flags_in_gen(optim_generation gen, uint32_t flags)
{
    return !(flags & (gen == OPTIM_LEGACY ? OPTIM_PARAM_KERAS3_ONLY : OPTIM_PARAM_LEGACY_ONLY));
}
/* Whether param i exists in the optimizer's generation. */
int optim__param_in_gen(const optim_optimizer *opt, size_t i);


/* Checks h against param i's kind, type and range (not cross-key rules). */
int optim__param_check(optim_optimizer *opt, size_t i, const optim__hyper *h, optim_error *err);
/* Checks and sets param i to h, then cross-key rules; on error nothing changes. */
int optim__param_set(optim_optimizer *opt, size_t i, const optim__hyper *h, optim_error *err);

/* Resolves every param for step `iterations` into values[] (callables
 * called once). Checks finiteness and ranges. On error values[] may be
 * partially written but nothing else changes. */
int optim__resolve(optim_optimizer *opt, optim_error *err);

/* cls's build for the instruction-set level in use when cls is a built-in
 * optimizer (OPTIM_BUILTIN_OPTIMIZERS, each built once per level); cls
 * itself otherwise (isa_builtin.c). */
const optim_class *optim__isa_builtin(const optim_class *cls);

/* Allocates the optimizer for a class (defaults set); no validation of
 * cross-key rules yet. */
int optim__alloc(optim_optimizer **out, const optim_class *cls, optim_generation gen,
                 const char *name, optim_error *err);
/* Runs the base's and the class's cross-key validation. */
int optim__validate(optim_optimizer *opt, optim_error *err);

/* Slots: look up the entry of var (NULL if unseen); create entries and slots
 * for a var; roll back to earlier counts after a failure. */
optim__var_entry *optim__var_entry_of(const optim_optimizer *opt, const optim_var *var);
/* The same, looked at index hint first: a step that passes its variables in
 * the order the optimizer first saw them finds each there, with no hashing
 * (thousands of small variables: the hash lookups' cache misses were a
 * fifth of a step). */
optim__var_entry *optim__var_entry_at(const optim_optimizer *opt, const optim_var *var,
                                      size_t hint);
int optim__track_var(optim_optimizer *opt, optim_var *var, optim_error *err);
void optim__rollback_vars(optim_optimizer *opt, size_t nvars, size_t nslots, size_t nnames);
/* Frees the qualified weight names (weights.c). */
void optim__weight_names_free(optim_optimizer *opt);
/* optim__order_new_slots: optimizer/slot_order.h. */

/* Step 1 of the pipeline: a pair / all pairs as `opt` (the update rule)
 * would accept them; `cn` names the caller in messages. check_pairs also
 * refuses a variable given twice and, with require_any, a call without any
 * gradient. */
int optim__check_pair(const optim_optimizer *opt, const char *cn, const optim_grad_var *p, size_t i,
                      optim_error *err);
int optim__check_pairs(const optim_optimizer *opt, const char *cn, const optim_grad_var *pairs,
                       size_t n, int require_any, optim_error *err);
/* Wrappers (a step or apply_gradients hook, other than MultiOptimizer)
 * compute on the variables and gradients themselves in float32 or float64:
 * OPTIM_ENOTSUP for a pair with a half-precision variable
 * (docs/half-precision.md; wrapper_support.c). */
int optim__check_half_wrapper(const optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                              optim_error *err);

/* Weight decay (Keras 3): whether var is decayed; the decay itself
 * (w = w - w * wd * lr in dtype); freeing the exclusions. */
/* A wrapper's i-th inner optimizer (class hook inner_at, or inner for i 0). */
optim_optimizer *optim__inner_at(const optim_optimizer *opt, size_t i);
int optim__use_weight_decay(const optim_optimizer *opt, const optim_var *var);
void optim__decay(optim_dtype dtype, void *w, int64_t n, double wd, double lr);
/* The decay's loops once per instruction-set level (decay_kernels.c). */
typedef struct optim__decay_table {
    void (*decay_float)(float *w, int64_t n, float wd, float lr);
    void (*decay_double)(double *w, int64_t n, double wd, double lr);
} optim__decay_table;
OPTIM__ISA_DECLARE(optim__decay_table, optim__decay_kernels);
void optim__weight_decay_free(optim_optimizer *opt);

#endif
