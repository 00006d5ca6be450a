/*
 * optim/optimizer_class.h - writing an optimizer (the extension contract).
 *
 * An optimizer class is a table of function pointers, the C form of
 * subclassing tf.keras's Optimizer and overriding _create_slots,
 * _prepare_local, _resource_apply_dense, _resource_apply_sparse,
 * _resource_apply_sparse_duplicate_indices, apply_gradients and get_config.
 * The built-in optimizers are written against exactly this header.
 *
 * Stability: the table starts with its own size and OPTIM_CLASS_VERSION.
 * Hooks are only ever appended, so a class compiled against version N keeps
 * working with later libraries (missing trailing hooks read as NULL). Every
 * hook marked optional may be NULL.
 *
 * A minimal element-wise class (see examples/custom_optimizer.c for one with a
 * slot and a sparse rule, and docs/custom-optimizer.md for the full guide):
 *
 *     static const optim_param params[] = {
 *         {"momentum", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.0, 0.0, 1.0},
 *     };
 *     typedef struct { double lr; } coef;
 *     static void prepare(optim_optimizer *o, optim_dtype dt, void *c) {
 *         ((coef *)c)->lr = optim_learning_rate(o, dt);
 *     }
 *     static void apply_dense(const optim_dense_update *u) {
 *         const coef *c = u->coef;
 *         if (u->dtype == OPTIM_F32) { float *w = u->param; const float *g = u->grad;
 *             float lr = (float)c->lr;
 *             for (int64_t i = 0; i < u->count; i++) w[i] -= lr * g[i]; }
 *         else { ... }
 *     }
 *     static const optim_class my_sgd = {
 *         .size = sizeof(optim_class), .version = OPTIM_CLASS_VERSION,
 *         .name = "MySGD", .flags = OPTIM_CLASS_ELEMENTWISE,
 *         .default_learning_rate = 0.01,
 *         .params = params, .n_params = 1, .coef_size = sizeof(coef),
 *         .prepare = prepare, .apply_dense = apply_dense,
 *     };
 *     optim_register_class(&my_sgd, &err);   // now "MySGD" works in JSON
 */
#ifndef OPTIM_OPTIMIZER_CLASS_H
#define OPTIM_OPTIMIZER_CLASS_H

#include "optim/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: param_choices (OPTIM_PARAM_STRING) and the `step` hook (wrappers
 * taking optim_step_options, optim/step.h). 3: the `sparse_mode` hook and
 * phased updates (phase_plan, apply_phase, reduce_phase). 4: the Keras
 * facts (keras3_module, legacy_module, tfa_name, keras_flags),
 * name-pattern-list keys (pattern_params) and slot domains
 * (nonnegative_slots). 5: the `bytes_per_param` hook and `min_slots`. */
#define OPTIM_CLASS_VERSION 5

/* Most slots one variable may have. */
#define OPTIM_MAX_SLOTS 8

/* The config being written by a get_config hook (opaque). */
typedef struct optim_config optim_config;

/* The overrides of one step (optim/step.h). */
struct optim_step_options;

/* ---- declared hyperparameters -------------------------------------------- */

typedef enum optim_param_type {
    OPTIM_PARAM_FLOAT = 0, /* JSON number */
    OPTIM_PARAM_BOOL = 1, /* JSON true/false; 0 or 1 in C */
    OPTIM_PARAM_INT = 2, /* JSON integer */
    OPTIM_PARAM_STRING = 3, /* JSON string, one of the class's param_choices; in C
                              (defaults, optim_set_hyper, optim_param_value) its index */
    OPTIM_PARAM_PATTERNS = 4 /* JSON list of variable-name patterns, or null: only in
                                a class's pattern_params (version 4); in C
                                optim_param_patterns */
} optim_param_type;

#define OPTIM_PARAM_DYNAMIC 1u /* may be a variable, callable or schedule (a Keras hyper) */
#define OPTIM_PARAM_NULLABLE 2u /* may be None (null in JSON, NAN in C) */
#define OPTIM_PARAM_LEGACY_ONLY 4u /* exists only in the legacy generation */
#define OPTIM_PARAM_KERAS3_ONLY 8u /* exists only in the Keras 3 generation */
#define OPTIM_PARAM_MIN_EXCLUSIVE 16u
#define OPTIM_PARAM_MAX_EXCLUSIVE 32u
#define OPTIM_PARAM_COUNT \
    128u /* a float Keras documents as an int (decay_steps):
                                        whole values are written without ".0" */

/* One config key of the class, in the order get_config writes them. The base
 * class checks type and range [min, max] on every set and every step. */
typedef struct optim_param {
    const char *name;
    optim_param_type type;
    uint32_t flags;
    double default_value; /* NAN for None (with OPTIM_PARAM_NULLABLE) */
    double min, max; /* use -INFINITY / INFINITY for no bound */
} optim_param;

/* ---- what the update hooks receive ----------------------------------------- */

/* A contiguous run of one variable (the whole variable unless the class is
 * OPTIM_CLASS_ELEMENTWISE, in which case chunks run on all threads). */
typedef struct optim_dense_update {
    optim_optimizer *opt;
    optim_var *var;
    optim_dtype dtype; /* F32 or F64: param, grad and slots all have it (an F16 or
                             BF16 variable's run arrives as F32 scratch, rounded
                             back after the hook: docs/half-precision.md) */
    int64_t offset; /* first element of the run within the variable */
    int64_t count; /* elements in the run */
    void *param; /* the variable's data + offset */
    const void *grad; /* the gradient for these elements (after clipping) */
    void *const *slots; /* each slot's data + offset, in create_slots order */
    int nslots; /* how many slots this variable has */
    const void *coef; /* what prepare wrote for this dtype */
    int64_t iterations; /* the count the update rule sees: the step counter before
                             this step's increment (Keras 3 with
                             gradient_accumulation_steps S: counter // S) */
} optim_dense_update;

/* A sparse update of one variable, viewed as [rows, row_size]. */
typedef struct optim_sparse_update {
    optim_optimizer *opt;
    optim_var *var;
    optim_dtype dtype;
    int64_t rows; /* the variable's first dim */
    int64_t row_size; /* elements per row */
    void *param; /* the whole variable */
    void *const *slots; /* whole slots, in create_slots order */
    int nslots;
    const int64_t *indices; /* n indices in [0, rows); for apply_sparse unique
                               and ascending, duplicates summed in order */
    int64_t n;
    const void *values; /* n * row_size gradient values */
    const void *coef;
    int64_t iterations;
} optim_sparse_update;

/* ---- phased updates (version 3) ---------------------------------------------
 *
 * A rule that needs whole-variable reductions (LAMB's norms, Adafactor's
 * row and column statistics) is not element-wise, yet it is only a few
 * passes over the variable with a small reduction between them. Such a
 * class describes each variable's update as `nphases` passes over fixed
 * chunks: in pass p, apply_phase runs on every chunk (on all threads, for
 * all variables of the step at once) and writes `npartial` doubles of
 * partial results; then reduce_phase runs once for the variable (on one
 * thread) and combines the chunks' partials, in chunk order, into the
 * variable's `nshared` doubles, which the next passes read. The chunk size
 * is the class's, never the thread count's, so the results do not depend on
 * the number of threads. */

#define OPTIM_MAX_PHASES 4

typedef struct optim_phase_plan {
    int nphases; /* 1..OPTIM_MAX_PHASES; 0 (as given): no phases for this
                             variable, apply_dense gets it whole */
    int64_t chunk; /* elements per chunk (>= 1; the last chunk may be short) */
    size_t npartial; /* doubles each chunk writes per phase (<= 2^20) */
    size_t nshared; /* doubles per variable kept across the phases of one
                             step, zero at its start (<= 2^20) */
    uint64_t user; /* the class's own per-variable word (flags worked out
                             once per step), handed back in optim_phase_update */
} optim_phase_plan;

typedef struct optim_phase_update {
    /* The variable: param, grad and every slot point at its element 0 (not
     * at the chunk); offset and count are the chunk's in apply_phase, 0 and
     * the variable's size in reduce_phase. */
    optim_dense_update dense;
    int phase; /* 0..nphases-1 */
    int64_t chunk; /* apply_phase: this chunk's index; reduce_phase: how many */
    double *partial; /* apply_phase: this chunk's npartial doubles (write them
                             all); reduce_phase: every chunk's, chunk after chunk */
    double *shared; /* the variable's nshared doubles: read in apply_phase,
                             written in reduce_phase */
    uint64_t user; /* the plan's `user` for this variable */
} optim_phase_update;

/* ---- the class table -------------------------------------------------------- */

#define OPTIM_CLASS_ELEMENTWISE 1u /* apply_dense may be called on any chunk */
#define OPTIM_CLASS_KERAS3_ONLY 2u /* no legacy form (Lion, Adafactor...) */
#define OPTIM_CLASS_LEGACY_ONLY 4u /* no Keras 3 form */
/* Refuses sparse gradients: a step with one fails (OPTIM_ENOTSUP, naming
 * the variable) before it changes anything, where an element-wise class
 * without apply_sparse would get the dense equivalent (TF Addons' COCOB
 * raises NotImplementedError). Not with apply_sparse. A library older than
 * this flag ignores the bit (it came without a new OPTIM_CLASS_VERSION). */
#define OPTIM_CLASS_NO_SPARSE 8u

/* keras_flags (version 4): tf-keras 2.11+ has a new-style class of this
 * name (tf_keras.optimizers.Adam...). A Keras 3 config with jit_compile,
 * "is_legacy_optimizer": false or class_name "Custom>NAME" is then read,
 * and written back, in that class's form. Not with OPTIM_CLASS_LEGACY_ONLY. */
#define OPTIM_KERAS_TF_KERAS 1u

/* apply_sparse_duplicate_indices returns this to ask for the default:
 * de-duplicate, then apply_sparse. */
#define OPTIM_SPARSE_DEFAULT 1

/* How the pipeline runs a sparse update (the sparse_mode hook's answer).
 * Every mode gets the indices de-duplicated (duplicates summed in order). */
typedef enum optim_sparse_mode {
    /* apply_sparse once, on one thread, with all the indices (after
     * apply_sparse_duplicate_indices, when the class has it): the only mode
     * of a version 1-2 class with apply_sparse. */
    OPTIM_SPARSE_WHOLE = 0,
    /* The dense equivalent (Keras 3): apply_dense (OPTIM_CLASS_ELEMENTWISE
     * only) on every chunk of the variable, as for a dense gradient, with
     * the summed rows where an index points and zero elsewhere; threaded
     * and chunked like a dense step. apply_sparse is not called. */
    OPTIM_SPARSE_DENSE = 1,
    /* A lazy (row-only) rule: apply_sparse reads and writes only the rows
     * its indices name, each row on its own. The pipeline calls it on
     * disjoint ranges of the index list on all threads (u->indices,
     * u->values and u->n describe the range; param and slots stay whole). */
    OPTIM_SPARSE_ROWS = 2,
    /* A rule that walks every row, each on its own (legacy Adam decays m
     * and v on rows without an index): the pipeline calls apply_sparse on
     * consecutive row ranges on all threads, each as a variable of its own
     * (u->param, u->slots and u->rows describe the range, u->indices are
     * its indices relative to its first row). OPTIM_CLASS_ELEMENTWISE
     * classes only. */
    OPTIM_SPARSE_ALL_ROWS = 3
} optim_sparse_mode;

struct optim_class {
    uint32_t size; /* sizeof(optim_class) as compiled */
    uint32_t version; /* OPTIM_CLASS_VERSION as compiled */
    const char *name; /* Keras class name ("SGD"); JSON "class_name" */
    uint32_t flags; /* OPTIM_CLASS_* */
    double default_learning_rate;
    /* Keras 3's base option weight_decay defaults to None; a class such as
     * AdamW sets its own default here (0 keeps None). */
    double default_weight_decay;
    /* The class's own config keys. A name may repeat, or match a base key,
     * only where the generations differ (LEGACY_ONLY vs KERAS3_ONLY): that
     * is how a key gets a per-generation default or meaning. */
    const optim_param *params;
    size_t n_params;
    size_t coef_size; /* bytes prepare may write, per dtype */
    size_t state_size; /* bytes of zeroed per-optimizer state (optim_state) */

    /* Optional. After creation and every config change: check cross-key
     * rules the per-key ranges cannot express. Non-zero rejects the change. */
    int (*validate)(optim_optimizer *opt, optim_error *err);

    /* Optional. Called once per variable, the first time it gets a gradient
     * (or at optim_build): add its slots with optim_add_slot. */
    int (*create_slots)(optim_optimizer *opt, optim_var *var, optim_error *err);

    /* Optional. Once per step and dtype, before any update: write per-step
     * coefficients (learning rate, bias corrections...) to coef. */
    void (*prepare)(optim_optimizer *opt, optim_dtype dtype, void *coef);

    /* Required unless apply_gradients is set. Dense update of u->count elements. */
    void (*apply_dense)(const optim_dense_update *u);

    /* Optional. Sparse update with unique ascending indices. If NULL, an
     * OPTIM_CLASS_ELEMENTWISE class gets the dense equivalent
     * (OPTIM_SPARSE_DENSE) unless it has OPTIM_CLASS_NO_SPARSE; other
     * classes refuse sparse gradients with OPTIM_ENOTSUP. */
    void (*apply_sparse)(const optim_sparse_update *u);

    /* Optional (requires apply_sparse). Sparse update with the indices as
     * given (may repeat). Return OPTIM_SPARSE_DEFAULT to have the base
     * de-duplicate and call apply_sparse instead (the Keras default); 0 when
     * done. Called only in mode OPTIM_SPARSE_WHOLE (see sparse_mode). */
    int (*apply_sparse_duplicate_indices)(const optim_sparse_update *u);

    /* Optional, for wrappers written against version 1: replaces the whole
     * pipeline. New wrappers set `step` instead (it gets the overrides a
     * caller asks for; docs/wrappers.md). */
    int (*apply_gradients)(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                           uint32_t flags);

    /* Optional. Extra config entries beyond params (nested objects, strings):
     * call optim_config_put(cfg, key, json_text) for each. */
    int (*get_config)(optim_optimizer *opt, optim_config *cfg);

    /* Optional. A config key that is not a param: return OPTIM_EKEY (err
     * left empty) if it is not yours, 0 if taken, another error (with err
     * filled) if invalid. OPTIM_EKEY with err filled is an error too (an
     * unknown key in a nested config: its message is kept). */
    int (*set_config)(optim_optimizer *opt, const char *key, const char *json_value,
                      optim_error *err);

    /* Optional. Frees what the class allocated in its state. */
    void (*destroy)(optim_optimizer *opt);

    /* Optional, for wrappers: the wrapped optimizer (owned by the wrapper).
     * Its weights and slots then appear in the wrapper's get_weights /
     * get_slot (after iterations, before the wrapper's own). */
    optim_optimizer *(*inner)(const optim_optimizer *opt);

    /* Optional, Keras 3 only (Keras's _apply_weight_decay override): the
     * decoupled weight-decay rate for var, given the base option
     * weight_decay (NAN for None). The base then applies
     * w = w - w * rate * lr before the update, unless var is excluded
     * (optim_exclude_from_weight_decay); NAN or <= 0 means no decay. NULL:
     * the base option itself. Muon decays its AdamW variables by
     * adam_weight_decay. Called on the calling thread at step 5. */
    double (*weight_decay)(const optim_optimizer *opt, const optim_var *var, double weight_decay);

    /* Optional, for wrappers of several optimizers (MultiOptimizer), in
     * place of `inner`: the i-th wrapped optimizer, NULL past the last.
     * Their weights follow iterations in this order, each without its own
     * iterations (keep those as the wrapper's weights: they step
     * separately, so optim_set_iterations does not pass down); get_slot,
     * optim_build and finalize look in each. */
    optim_optimizer *(*inner_at)(const optim_optimizer *opt, size_t i);

    /* Version 2, optional: the allowed strings of each OPTIM_PARAM_STRING
     * param, parallel to params (NULL for the other params), each list
     * NULL-terminated. The base reads and writes such a key as a JSON string
     * ("sparse_mode": "lazy") and refuses any other value, so the class needs
     * no get_config / set_config for it. */
    const char *const *const *param_choices;

    /* Optional, for wrappers (version 2): replaces the whole pipeline, like
     * apply_gradients, and gets the step's overrides (never NULL). It
     * usually steps the inner optimizer with optim_step (optim/step.h),
     * passing the overrides on, and does its own work around that step.
     * optim_apply_gradients calls it with the default options. */
    int (*step)(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                const struct optim_step_options *o);

    /* Version 3, optional: the optim_sparse_mode of a sparse update. Called
     * once per sparse gradient and step, on the calling thread, after
     * prepare, with u as apply_sparse would get it (de-duplicated indices,
     * coef written). NULL: OPTIM_SPARSE_WHOLE with apply_sparse. Without
     * apply_sparse the mode is always OPTIM_SPARSE_DENSE (the hook is not
     * called); OPTIM_SPARSE_DENSE from a class that is not
     * OPTIM_CLASS_ELEMENTWISE (or OPTIM_SPARSE_ALL_ROWS), or an unknown
     * answer, counts as OPTIM_SPARSE_WHOLE. */
    int (*sparse_mode)(const optim_sparse_update *u);

    /* Version 3, optional, for classes without OPTIM_CLASS_ELEMENTWISE
     * (all three or none): phased updates, above. phase_plan is called at
     * every step for every variable with a dense gradient (on the calling
     * thread, before any update) and fills *plan, zeroed on entry; a plan
     * with nphases 0 sends the variable to apply_dense whole. apply_phase
     * may write the chunk's elements of param and of full-size slots, and
     * elements of other slots that no other chunk writes; reduce_phase may
     * write anything of its variable. Sparse gradients still go to
     * apply_sparse. */
    void (*phase_plan)(const optim_optimizer *opt, const optim_var *var, optim_phase_plan *plan);
    void (*apply_phase)(const optim_phase_update *u);
    void (*reduce_phase)(const optim_phase_update *u);

    /* Version 4, optional: the class's Keras facts. They only change how
     * configs are read and written, never an update. A table that leaves
     * them NULL (or is older) is a class Keras does not know: written as a
     * custom object (module null, registered_name the class name). The
     * built-ins set them in their tables; optim_register_class checks them. */

    /* Keras 3's module of the class ("keras.optimizers"), written in
     * serialize_keras_object's envelope with registered_name null. NULL: not
     * a Keras 3 class. Not with OPTIM_CLASS_LEGACY_ONLY. */
    const char *keras3_module;
    /* tf-keras's public module of the legacy class
     * ("keras.optimizers.legacy", "keras.mixed_precision"), written when a
     * legacy config was read in the envelope. NULL: none (TF Addons'
     * classes). Not with OPTIM_CLASS_KERAS3_ONLY, nor with tfa_name. */
    const char *legacy_module;
    /* TF Addons' registered name ("LAMB" for Lamb; most often the class
     * name): a legacy config is written as class_name "Addons>LAMB", and a
     * legacy optimizer's default name is it. Lookup of "Addons>NAME" finds
     * the class named NAME, ignoring case, if its tfa_name is NAME, so for
     * such a config to read back the name must spell the class name. NULL:
     * not a TF Addons class ("Addons>" + its name finds nothing).
     * Not with OPTIM_CLASS_KERAS3_ONLY. */
    const char *tfa_name;
    uint32_t keras_flags; /* OPTIM_KERAS_* */

    /* Version 4, optional: the class's name-pattern-list config keys
     * (exclude_from_weight_decay and the like), each of type
     * OPTIM_PARAM_PATTERNS, kept apart from params because they hold no
     * number. The base reads such a key (a JSON list of Python regular
     * expressions, refusing a bad one with a message naming the key
     * and the pattern's index), keeps it compiled, and writes it after the
     * params, before get_config runs (which may move it or overwrite it in
     * place); hooks read it with optim_param_patterns. flags: LEGACY_ONLY
     * and KERAS3_ONLY as for params, and NULLABLE: null is kept as None
     * (written null; the default when default_value is NAN). Without
     * NULLABLE, null reads as the empty list (Python's `x or []`) and
     * default_value must be 0, the empty list. min and max are unused (0).
     * A name may not be a param's or another pattern key's of the same
     * generation. */
    const optim_param *pattern_params;
    size_t n_pattern_params;

    /* Version 4, optional: the value domain of slots. A NULL-terminated
     * list of slot names (as given to optim_add_slot: "v", not "w/v") whose
     * every element is >= 0 by construction, for every config the class
     * accepts (Adam's "v" with beta_2 in [0, 1); not RMSprop's "rms", whose
     * rho is unbounded). optim_set_weights, and so checkpoint restore,
     * refuses a negative or NaN value in such a slot, naming the weight,
     * the element and the value. Never list a slot that can go negative.
     * Each name must be non-empty, without '/', at most 64 of them. NULL:
     * no domains. */
    const char *const *nonnegative_slots;

    /* Version 5, optional: the bytes one step's update moves per element of
     * var, in var's storage dtype: every read and write of the variable, its
     * gradient and its slots, each pass counted (Lamb reads w, m and v again
     * in its second pass: 40 in float32). Scratch the class keeps in cache
     * or in its own buffers is not counted. Called by optim_bytes_per_param
     * (optim/optimizer.h) on the calling thread, for a variable whose slots
     * exist; the answer must be finite and >= 0. NULL: the element-wise
     * count, one read of the gradient and a read and a write of the
     * variable and of each full-size slot (float32 Adam: 4 * (3 + 2 * 2)). */
    double (*bytes_per_param)(const optim_optimizer *opt, const optim_var *var);

    /* Version 5, optional: the fewest slots create_slots adds to each
     * variable (Adam: 2, m and v; 3 with amsgrad, but never fewer than 2),
     * so a kernel may read slots[0 .. min_slots - 1] unchecked. A variable
     * given fewer fails the step that tracks it, with a message naming the
     * slots it got; a class with min_slots > 0 and no create_slots is
     * refused at registration. 0: no check. At most OPTIM_MAX_SLOTS. */
    int32_t min_slots;
};

/* ---- services of the base class, for use inside hooks ------------------- */

/* Registers a class for lookup by name (case-insensitive) in JSON and
 * optim_create_by_name. The table is copied. Not thread-safe: register at
 * start-up. Refuses a bad table, a name already taken, and a name that
 * starts with "Addons>" or "Custom>" (lookup reads those as prefixes:
 * register "Foo"; a config may still say "Custom>Foo", and "Addons>Foo"
 * when the table's tfa_name is "Foo"). */
OPTIM_API int optim_register_class(const optim_class *cls, optim_error *err);

/* Looks a class up by name, case-insensitively; "Addons>NAME" finds the
 * class of TF Addons' registered name NAME (its tfa_name) only. NULL if
 * unknown. */
OPTIM_API const optim_class *optim_find_class(const char *name);

/* The i-th class of the registry, for listing them (the Python package
 * makes a constructor for each): the built-ins in OPTIM_BUILTIN_CLASSES's
 * order, then the registered classes in the order they were registered;
 * NULL past the last. Not thread-safe against optim_register_class. */
OPTIM_API const optim_class *optim_class_at(size_t i);

typedef enum optim_slot_init {
    OPTIM_SLOT_ZEROS = 0,
    OPTIM_SLOT_CONSTANT = 1, /* every element = value */
    OPTIM_SLOT_COPY = 2 /* a copy of the variable */
} optim_slot_init;

/* In create_slots: adds slot `slot_name` to `var` (same dtype and shape).
 * Adding a slot the variable has already is an error (OPTIM_EINVAL, naming
 * both): a copy-pasted name would leave the kernel a slot short. */
OPTIM_API int optim_add_slot(optim_optimizer *opt, optim_var *var, const char *slot_name,
                             optim_slot_init init, double value);

/* The order of the weights a step creates, to match the class's Keras
 * _create_slots / build: by kind (the default: every variable's "m", then
 * every variable's "v"), or by variable (each variable's slots together, as
 * legacy Ftrl and Adafactor loop). Call it from create_slots or validate. */
typedef enum optim_slot_order {
    OPTIM_SLOTS_BY_KIND = 0,
    OPTIM_SLOTS_BY_VARIABLE = 1
} optim_slot_order;
OPTIM_API void optim_set_slot_order(optim_optimizer *opt, optim_slot_order order);

/* For wrappers (step hook): creates slots (create_slots) for
 * the variables not seen yet, like the pipeline's step 5, without fixing
 * the variable set. */
OPTIM_API int optim_track_variables(optim_optimizer *opt, optim_var *const *vars, size_t n);

/* In create_slots, for a class that is not OPTIM_CLASS_ELEMENTWISE: a slot
 * with a shape of its own (e.g. Adafactor's factored row and column
 * moments). Its data comes to the update hooks whole, like the others. */
OPTIM_API int optim_add_slot_shaped(optim_optimizer *opt, optim_var *var, const char *slot_name,
                                    int32_t rank, const int64_t *shape, optim_slot_init init,
                                    double value);

/* An optimizer-level weight (Keras's add_weight outside slots, e.g. legacy
 * Nadam's momentum_cache): owned by the optimizer, part of get_weights /
 * set_weights in creation order, under `name`. Typically created in
 * create_slots when still missing (kept in the class state). *out is the
 * weight (optional). */
OPTIM_API int optim_add_weight(optim_optimizer *opt, const char *name, optim_dtype dtype,
                               int32_t rank, const int64_t *shape, optim_slot_init init,
                               double value, optim_var **out);

/* The class's own parameter i (its order in params), resolved for the
 * current step (callables called once per step). Meaningful inside hooks
 * called by optim_apply_gradients or optim_build. NAN for None. */
OPTIM_API double optim_param_value(const optim_optimizer *opt, size_t i);

/* The learning rate for the current step in the arithmetic of dtype: the
 * hyperparameter (or schedule) with the legacy `decay` applied as
 * lr / (1 + decay * iterations), rounded through float for F32. */
OPTIM_API double optim_learning_rate(const optim_optimizer *opt, optim_dtype dtype);

/* Per-optimizer class state (state_size bytes, zeroed at creation). */
OPTIM_API void *optim_state(const optim_optimizer *opt);

/* Sets the message of the running call (for hooks that fail). Returns code. */
OPTIM_API int optim_set_error(optim_optimizer *opt, int code, const char *fmt, ...);

/* For get_config hooks: adds key with a JSON value (copied, checked; kept in
 * its place when the key exists already). */
OPTIM_API int optim_config_put(optim_config *cfg, const char *key, const char *json_value);

/* Like optim_config_put, then moves key to just after the key `after` (for
 * a key Keras writes between two params); at the end if `after` is absent. */
OPTIM_API int optim_config_put_after(optim_config *cfg, const char *key, const char *json_value,
                                     const char *after);

/* Adds a float key as the base writes them: the shortest text that reads
 * back exactly, with ".0" for whole values (Python's repr). */
OPTIM_API int optim_config_put_number(optim_config *cfg, const char *key, double value);

/* For get_config hooks matching a Keras key order: moves key to just
 * before key `before` (both already written; OPTIM_EKEY if one is not). */
OPTIM_API int optim_config_move_before(optim_config *cfg, const char *key, const char *before);

/* For get_config hooks: drops key, written by the base, that the Keras
 * class does not write (TF Addons' ProximalAdagrad writes no decay);
 * OPTIM_EKEY if absent. */
OPTIM_API int optim_config_remove(optim_config *cfg, const char *key);

/* String lists in configs (name patterns and the like), for set_config and
 * get_config hooks. optim_config_read_strings reads json_value, a JSON list
 * of strings or null, into a NULL-terminated array of copies (*out NULL for
 * null; free with optim_strings_free); anything else is refused with a
 * message naming key. optim_config_put_strings writes a NULL-terminated list
 * under key, or null when list is NULL. */
OPTIM_API int optim_config_read_strings(const char *key, const char *json_value, char ***out,
                                        optim_error *err);
OPTIM_API int optim_config_put_strings(optim_config *cfg, const char *key, const char *const *list);
OPTIM_API void optim_strings_free(char **list);

/* Variable-name patterns (exclude_from_weight_decay and the like): Python
 * regular expressions, each searched in the name as re.search does (or, with
 * OPTIM_NAME_PATTERNS_FULL, matching it as re.fullmatch), through glibc's
 * POSIX ones (\d, [\w.], (?:...) and lazy repeats as Python means them,
 * ASCII classes; docs/keras-compatibility.md). compile copies list (n
 * strings; list may be NULL when n is 0) and refuses a bad pattern with a
 * message naming `what` and the pattern's index (also one it cannot match as
 * Python does: lookarounds, inline flags, possessive repeats...; and one
 * glibc's regcomp would take seconds to gigabytes
 * to build: a repeat of a repeat, a repeat of a group that can match empty
 * and holds a repeat, repeats that expand it by more than 2048 nodes); match is 1 when any pattern is found in name; sources
 * gives the patterns back (NULL-terminated, for get_config). */
typedef struct optim_name_patterns optim_name_patterns;
OPTIM_API int optim_name_patterns_compile(optim_name_patterns **out, const char *const *list,
                                          size_t n, const char *what, optim_error *err);
OPTIM_API int optim_name_patterns_match(const optim_name_patterns *p, const char *name);
OPTIM_API const char *const *optim_name_patterns_sources(const optim_name_patterns *p);
OPTIM_API void optim_name_patterns_free(optim_name_patterns *p);

/* compile with flags. FULL: a pattern matches a name it matches whole
 * (Python's re.fullmatch, as Keras 3's MultiOptimizer matches its
 * optimizer_map's patterns) instead of one it is found in. KEYS: the
 * patterns are the keys of a config object; messages name one as
 * what['PATTERN'] instead of by index. Other bits: OPTIM_EINVAL. find
 * gives the index of the first pattern at or after `from` that matches
 * name, -1 if none (or p or name is NULL). */
#define OPTIM_NAME_PATTERNS_FULL 1u
#define OPTIM_NAME_PATTERNS_KEYS 2u
OPTIM_API int optim_name_patterns_compile_flags(optim_name_patterns **out, const char *const *list,
                                                size_t n, const char *what, uint32_t flags,
                                                optim_error *err);
OPTIM_API long optim_name_patterns_find(const optim_name_patterns *p, const char *name,
                                        size_t from);

/* The class's pattern key i (its order in pattern_params), compiled: NULL
 * for None (and for i out of range); an empty list otherwise matches no
 * name (optim_name_patterns_match). Valid until the key is set again. */
OPTIM_API const optim_name_patterns *optim_param_patterns(const optim_optimizer *opt, size_t i);

#ifdef __cplusplus
}
#endif
#endif
