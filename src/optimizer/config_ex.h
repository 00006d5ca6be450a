/* Creating an optimizer from JSON with a hook before its keys are read
 * (internal; optim_wrap in src/wrappers/wrapper.c uses it). */
#ifndef OPTIM_OPTIMIZER_CONFIG_EX_H
#define OPTIM_OPTIMIZER_CONFIG_EX_H

#include "core/internal.h"
#include "optim/optimizer.h"

/* optim_from_json with `pre` run on the new optimizer before its config keys
 * are read (wrappers install their inner optimizer there). If pre fails or
 * the config is refused, the optimizer is destroyed (and with it whatever
 * pre installed). */
int optim__from_config_ex(optim_optimizer **out, const char *json,
                          int (*pre)(optim_optimizer *, void *), void *ctx, optim_error *err);

#endif
