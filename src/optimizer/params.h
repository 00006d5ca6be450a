/* Declared parameters (internal): the base options, value checks, the
 * conversion of a value to and from JSON, and the checks of class tables.
 * Used by optimizers and schedules alike; calls nothing in src/optimizer. */
#ifndef OPTIM_OPTIMIZER_PARAMS_H
#define OPTIM_OPTIMIZER_PARAMS_H

#include "core/json.h"
#include "optim/schedule.h"

/* Base options every optimizer has, in Keras 3's get_config order; the
 * class's own params follow them in the optimizer's param array. */
enum {
    OPTIM__P_LEARNING_RATE = 0,
    OPTIM__P_DECAY,
    OPTIM__P_WEIGHT_DECAY,
    OPTIM__P_CLIPNORM,
    OPTIM__P_GLOBAL_CLIPNORM,
    OPTIM__P_CLIPVALUE,
    OPTIM__P_USE_EMA,
    OPTIM__P_EMA_MOMENTUM,
    OPTIM__P_EMA_OVERWRITE_FREQUENCY,
    OPTIM__P_LOSS_SCALE_FACTOR,
    OPTIM__P_GRADIENT_ACCUMULATION_STEPS,
    /* optim's own, not Keras's: written only when set, after the class's
     * keys (docs/half-precision.md, "Stochastic rounding"). */
    OPTIM__P_BF16_SR_SEED,
    OPTIM__N_BASE
};

/* The base option i, and the one named `name` (NULL if none). */
const optim_param *optim__base_params(void);
const optim_param *optim__base_param(const char *name);

/* Checks a number against a param's type and range (NAN passes when the
 * param is nullable; a STRING param's index only against 0: the caller
 * knows its choices); `owner` names the class in the message. */
int optim__check_param_value(const char *owner, const optim_param *p, double v, const char *how,
                             optim_error *err);
/* How many strings a NULL-terminated choice list holds. */
size_t optim__choice_count(const char *const *choices);

/* A config value (cJSON) as p's number: null is NAN when p is nullable,
 * booleans 0 or 1, a STRING param's string its index in choices. Type
 * errors name owner and key; ranges are left to the caller. */
int optim__param_from_json(const char *owner, const optim_param *p, const char *const *choices,
                           const void *item, double *out, optim_error *err);
/* p's value v as get_config writes it (a cJSON item; NULL on OOM); a
 * number in `form`, the form it was read in (OPTIM__NUM_ANY for a default
 * or a value set from C: the form of p's type). */
void *optim__param_to_json(const optim_param *p, const char *const *choices, double v,
                           optim__num_form form);
/* Appends key to the list in buf (", " between keys), for messages. */
void optim__keys_append(char *buf, size_t n, const char *key);

/* Class tables: checks, and copies zero-extended to this version's size. */
int optim__class_check(const optim_class *cls, optim_error *err);
void optim__class_copy(optim_class *dst, const optim_class *src);
int optim__schedule_class_check(const optim_schedule_class *c, optim_error *err);
void optim__schedule_class_copy(optim_schedule_class *dst, const optim_schedule_class *src);

/* A schedule from a parsed Keras object (cJSON; schedule.c), and back: in
 * Keras 3's envelope (module, registered_name) or tf.keras's
 * ({"class_name", "config"}); with Keras 3's default name (keras3_names)
 * or tf.keras's (None) when the schedule was given none. */
int optim__schedule_from_cjson(optim_schedule **out, const void *root, optim_error *err);
void *optim__schedule_to_cjson(const optim_schedule *s, int module, int keras3_names);

/* The class_name a generation's Keras writes ("Addons>LAMB" for TF
 * Addons' classes in legacy configs), and the default "name" of an
 * optimizer of that generation ("Adam" legacy, "adam" Keras 3.15+). */
void optim__keras_class_name(const optim_class *cls, optim_generation gen, char *buf, size_t n);
/* The class table's Keras facts (version 4 fields; NULL or 0 for an older
 * table). keras3_module: NULL for a class Keras 3 does not have (written as
 * a custom object: module null, registered_name the class name). */
const char *optim__keras3_module(const optim_class *cls);
const char *optim__legacy_module(const optim_class *cls);
/* TF Addons' registered name, "LAMB" for "Addons>LAMB"; NULL if TF Addons
 * has no such class. */
const char *optim__tfa_name(const optim_class *cls);
int optim__has_tf_keras_form(const optim_class *cls);
void optim__default_name(const optim_class *cls, optim_generation gen, char *buf, size_t n);

/* OPTIM_ENOTFOUND with the message for a class name optim_find_class did
 * not find (registry.c): for "Addons>NAME", that TF Addons has no NAME. */
int optim__unknown_class(optim_error *err, const char *name);
/* Whether the schedule class of that name is one of the library's (registry.c). */
int optim__schedule_class_is_builtin(const char *name);

#endif
