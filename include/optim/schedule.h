/*
 * optim/schedule.h - learning-rate schedules (keras.optimizers.schedules).
 *
 * A schedule maps the step counter to a value: the optimizer evaluates it
 * once per step at `iterations` before the increment (0 on the first step).
 * Like optimizers, schedules are classes: the built-ins (ExponentialDecay,
 * PiecewiseConstantDecay, PolynomialDecay, InverseTimeDecay, CosineDecay,
 * CosineDecayRestarts, and TF Addons' cyclical learning rates;
 * optim/schedules.h) and yours use the same table.
 *
 *     optim_schedule *s;
 *     optim_error err;
 *     if (optim_schedule_from_json(&s, "{\"class_name\": \"ExponentialDecay\", "
 *             "\"config\": {\"initial_learning_rate\": 0.1, \"decay_steps\": 1000, "
 *             "\"decay_rate\": 0.96}}", &err))
 *         die(err.msg);
 *     optim_set_hyper_schedule_object(opt, "learning_rate", s);  // opt owns s now
 *
 * In an optimizer's JSON a schedule stands in for learning_rate as a nested
 * {"class_name": ..., "config": ...}, and get_config writes it back so.
 * Values are computed in double precision from Keras's closed forms (Keras
 * computes them in float32; the optimizer rounds to the variable's dtype).
 */
#ifndef OPTIM_SCHEDULE_H
#define OPTIM_SCHEDULE_H

#include "optim/optimizer_class.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_schedule optim_schedule;

/* 2: tfa_module (TF Addons' schedules). */
#define OPTIM_SCHEDULE_CLASS_VERSION 2

/* A param without a default that a config must give (NAN default). */
#define OPTIM_PARAM_REQUIRED 64u
/* A param get_config writes after "name" (the others come before it), as
 * Keras's CosineDecay writes warmup_target and warmup_steps. */
#define OPTIM_PARAM_AFTER_NAME 256u

typedef struct optim_schedule_class {
    uint32_t size; /* sizeof(optim_schedule_class) as compiled */
    uint32_t version; /* OPTIM_SCHEDULE_CLASS_VERSION */
    const char *name; /* Keras class name ("ExponentialDecay") */
    const optim_param *params; /* numeric and boolean config keys, in get_config order */
    size_t n_params;
    size_t state_size; /* zeroed per-schedule state (optim_schedule_state) */
    /* Optional: cross-key rules; fill err. */
    int (*validate)(const optim_schedule *s, optim_error *err);
    /* Required: the value at `step` (>= 0). Must not fail. */
    double (*value)(const optim_schedule *s, int64_t step);
    /* Optional: keys that are not numbers (lists such as boundaries),
     * written with optim_config_put and read back by set_config. */
    int (*get_config)(const optim_schedule *s, optim_config *cfg);
    int (*set_config)(optim_schedule *s, const char *key, const char *json_value, optim_error *err);
    /* Optional: frees what the class allocated in its state. */
    void (*destroy)(optim_schedule *s);
    /* Version 2. TF Addons' module for a class TF Addons registers as
     * "Addons>" + name ("tensorflow_addons.optimizers.cyclical_learning_rate"),
     * else NULL. Such a class is found by "Addons>NAME" as well as by NAME
     * ("Addons>NAME" finds no other class), is written as
     * {"class_name": "Addons>NAME", "config"} (tf-keras 2.13+'s envelope: that
     * module, class_name NAME, registered_name "Addons>NAME"), and its config
     * has no "name" unless one was read (TF Addons' get_config writes none). */
    const char *tfa_module;
} optim_schedule_class;

/* Registers a schedule class for lookup by name (case-sensitive, like
 * Keras's schedule deserialization). The table is copied. */
OPTIM_API int optim_register_schedule_class(const optim_schedule_class *cls, optim_error *err);
OPTIM_API const optim_schedule_class *optim_find_schedule_class(const char *name);
/* The i-th schedule class: the built-ins in OPTIM_BUILTIN_SCHEDULES's
 * order, then the registered ones in registration order; NULL past the last. */
OPTIM_API const optim_schedule_class *optim_schedule_class_at(size_t i);

/* From {"class_name": NAME, "config": {...}}. Every REQUIRED key must be
 * given; unknown keys, wrong types and out-of-range values are refused with
 * a message naming the key. */
OPTIM_API int optim_schedule_from_json(optim_schedule **out, const char *json, optim_error *err);

/* {"class_name": ..., "config": ...}; free with optim_free. NULL on OOM.
 * "name" is the one given, or null when none was (tf.keras's default);
 * inside a Keras 3 optimizer's config the schedule is written as Keras 3
 * does instead (module, registered_name, and Keras 3's default name). */
OPTIM_API char *optim_schedule_serialize(const optim_schedule *s);

/* The value at `step`. */
OPTIM_API double optim_schedule_value(const optim_schedule *s, int64_t step);

OPTIM_API const optim_schedule_class *optim_schedule_class_of(const optim_schedule *s);
OPTIM_API void optim_schedule_destroy(optim_schedule *s); /* NULL is a no-op */

/* For class hooks: param i (its order in params), and the class state. */
OPTIM_API double optim_schedule_param(const optim_schedule *s, size_t i);
OPTIM_API void *optim_schedule_state(const optim_schedule *s);

/* Makes an optimizer hyperparameter follow a schedule object. On success
 * the optimizer owns s (freed with it or when replaced); on error the caller
 * keeps it. A schedule object belongs to one hyperparameter: giving it to a
 * second is refused. */
OPTIM_API int optim_set_hyper_schedule_object(optim_optimizer *opt, const char *name,
                                              optim_schedule *s);

#ifdef __cplusplus
}
#endif
#endif
