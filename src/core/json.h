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
    const void *config;          /* cJSON object, NULL when absent */
    const char *module;          /* NULL when absent or null */
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
/* item (cJSON) as text whose numbers read back exactly; free with free(). */
char *optim__json_print_exact(const void *item);
/* A JSON number (cJSON raw) that parses back to exactly x; floats keep a
 * ".0" as Python writes them. NULL for non-finite x gives a JSON null. */
void *optim__json_exact_number(double x, int is_float);

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
