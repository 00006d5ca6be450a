/* JSON glue shared by the config readers and writers (internal): Keras
 * serialized objects, exact numbers, string lists. Calls nothing above
 * src/core. */
#ifndef OPTIM_CORE_JSON_H
#define OPTIM_CORE_JSON_H

#include <stddef.h>

#include "core/internal.h"

/* What a get_config hook writes into (a cJSON object). */
struct optim_config {
    void *obj;
};

/* A Keras serialized object, {"module", "class_name", "config",
 * "registered_name"} (Keras 3's serialize_keras_object) or the older
 * {"class_name", "config"}. Pointers into the parsed document. */
typedef struct optim__kobj {
    const char *class_name;
    const void *config; /* cJSON object, NULL when absent */
    const char *module; /* NULL when absent or null */
    const char *registered_name; /* NULL when absent or null */
} optim__kobj;

/* The one reader of such objects, equally strict at every nesting level:
 * any other key, a class_name that is not a string, a config that is not an
 * object, a module or registered_name that is not a string or null, is
 * refused. `what` ("optimizer", "schedule") names it in messages. With
 * allow_bare a JSON string is a class name alone (keras.optimizers.get). */
int optim__kobj_read(const void *root, const char *what, int allow_bare, optim__kobj *out,
                     optim_error *err);

/* Checks that no key of object `obj` appears twice; names `owner`. */
int optim__json_unique_keys(const void *obj, const char *owner, optim_error *err);

/* JSON type names for messages ("a number", "null", ...). */
const char *optim__json_type_name(const void *cjson_item);
/* How a number was written. Python keeps int and float apart (Keras
 * writes back `1024` where the user gave 1024, `1024.0` for 1024.0); cJSON
 * keeps only the double, so optim__json_parse records the form. */
typedef enum optim__num_form {
    OPTIM__NUM_ANY = 0, /* not known (a number not read by optim__json_parse) */
    OPTIM__NUM_INT, /* digits only: 1024, -3 */
    OPTIM__NUM_FLOAT /* with a fraction or an exponent: 1024.0, 1e-07 */
} optim__num_form;

/* cJSON_ParseWithOpts(text, end, require_null_terminated), with each
 * number's form recorded (cJSON_Duplicate keeps it). NULL when malformed. */
void *optim__json_parse(const char *text, const char **end, int require_null_terminated);
/* The form of a number item (OPTIM__NUM_ANY for anything else). */
optim__num_form optim__json_number_form(const void *item);

/* item (cJSON) as text whose numbers read back exactly, each in the form
 * it was read in; free with free(). */
char *optim__json_print_exact(const void *item);
/* A JSON number (cJSON raw) that parses back to exactly x, in form: FLOAT
 * keeps a ".0" as Python writes floats, INT writes a whole x as digits
 * (never an exponent), ANY the shortest text. Non-finite x gives a JSON
 * null. */
void *optim__json_exact_number(double x, optim__num_form form);

#endif

/* Offers a key that is not a param to a class's set_config hook, through
 * call(ctx, key, text, err) with the value printed exactly. Returns 0 when
 * taken, OPTIM__NOT_TAKEN when the hook does not know the key (it returned
 * OPTIM_EKEY leaving err empty, or there is no hook: call NULL), another code with err filled (naming `owner` and the
 * key when the hook left no message). */
#define OPTIM__NOT_TAKEN 1
typedef int (*optim__set_config_call)(void *ctx, const char *key, const char *text,
                                      optim_error *err);
int optim__offer_key(const char *owner, const char *key, const void *item,
                     optim__set_config_call call, void *ctx, optim_error *err);
