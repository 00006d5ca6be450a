/* The config keys of a TF Addons optimizer whose get_config is
 * {**OptimizerV2.get_config(), "learning_rate": ..., <its own keys>}
 * (NovoGrad, ConditionalGradient; internal, header-only).
 *
 * OptimizerV2.get_config writes "name" and the clip options that are set
 * (clipnorm, clipvalue, global_clipnorm); such a class then writes
 * learning_rate and its own keys, but not "decay", and its epsilon is
 * self.epsilon = `epsilon or backend.epsilon()`, so 0 and None are written
 * as 1e-07. The base writes every key it has; optim__tfa_keys keeps TF
 * Addons' keys in TF Addons' order, plus "decay" when it is not 0 and the
 * class's keys for which keep() says so (TF Addons drops both, which loses
 * them; its constructor takes them back). */
#ifndef OPTIM_OPTIMIZERS_TFA_KEYS_H
#define OPTIM_OPTIMIZERS_TFA_KEYS_H

#include <math.h>

#include "optim/optimizer_class.h"
#include "optim/step.h"

/* Legacy `epsilon or backend.epsilon()`: 0 and None mean this. */
#define OPTIM__TFA_EPSILON 1e-7

/* get_config's body: own[0..nown) are the class's keys in TF Addons' order;
 * keep(opt, key), if given, says whether one of them is written. */
static inline int optim__tfa_keys(optim_optimizer *opt, optim_config *cfg, const char *const *own,
                                  size_t nown, int (*keep)(optim_optimizer *, const char *))
{
    static const char *const clips[] = {"clipnorm", "clipvalue", "global_clipnorm"};
    double e = 0, decay = 0;
    if (optim_get_hyper(opt, "epsilon", &e) == 0 && (isnan(e) || e == 0)) {
        int rc = optim_config_put_number(cfg, "epsilon", OPTIM__TFA_EPSILON);
        if (rc) return rc;
    }
    const char *keys[24];
    size_t n = 0;
    keys[n++] = "name";
    for (int k = 0; k < 3; k++) keys[n++] = clips[k];
    keys[n++] = "learning_rate";
    if (!optim_hyper_is_constant(opt, "decay") || optim_get_hyper(opt, "decay", &decay) ||
        decay != 0)
        keys[n++] = "decay";
    for (size_t k = 0; k < nown && n < sizeof keys / sizeof *keys; k++)
        if (!keep || keep(opt, own[k])) keys[n++] = own[k];
    return optim_config_keep(cfg, keys, n, clips, 3);
}

#endif
