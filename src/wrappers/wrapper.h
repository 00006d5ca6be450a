/* What every wrapper shares (internal): the inner optimizer it owns, from
 * JSON or from optim_wrap. A wrapper's class state starts with
 * optim__wrapper_state; its class table points .inner at optim__wrapper_inner
 * and .destroy at (or calls) optim__wrapper_destroy. */
#ifndef OPTIM_WRAPPERS_WRAPPER_H
#define OPTIM_WRAPPERS_WRAPPER_H

#include "optim/optimizer_class.h"
#include "optim/wrappers.h"

typedef struct optim__wrapper_state {
    optim_optimizer *inner;
    int owns_inner; /* 0 while optim_wrap has not succeeded */
} optim__wrapper_state;

/* For set_config: creates the inner optimizer from its nested JSON. */
int optim__wrapper_set_inner_json(optim_optimizer *opt, const char *json_value, optim_error *err);
/* For get_config: writes the inner optimizer's serialization under key. */
int optim__wrapper_put_inner(optim_optimizer *opt, optim_config *cfg, const char *key);
/* For validate: refuses a wrapper without an inner optimizer. */
int optim__wrapper_require_inner(optim_optimizer *opt, const char *key, optim_error *err);
optim_optimizer *optim__wrapper_inner(const optim_optimizer *opt);
void optim__wrapper_destroy(optim_optimizer *opt);

#endif
