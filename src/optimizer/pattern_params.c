/* A class's name-pattern-list config keys (optim_class.pattern_params,
 * version 4): exclude_from_weight_decay and the like, read from and written
 * to Keras JSON by the base and kept compiled per optimizer, so that a class
 * needs no set_config, destroy or state of its own for them. */
#include "optimizer/impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* list (n strings) compiled into *out, or None (*out NULL) for list NULL
 * when the key is NULLABLE; a non-nullable key reads null as []. */
static int compile(const optim_optimizer *opt, const optim_param *p, char **list,
                   optim_name_patterns **out, optim_error *err)
{
    *out = NULL;
    if (!list && (p->flags & OPTIM_PARAM_NULLABLE)) return OPTIM_OK;
    char what[192];
    snprintf(what, sizeof what, "%s: config key %s", opt->cls.name, p->name);
    size_t n = 0;
    while (list && list[n]) n++;
    return optim_name_patterns_compile(out, (const char *const *)list, n, what, err);
}

int optim__pattern_params_init(optim_optimizer *opt, optim_error *err)
{
    const size_t n = opt->cls.n_pattern_params;
    if (!n) return OPTIM_OK;
    opt->patterns = calloc(n, sizeof *opt->patterns);
    if (!opt->patterns) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const optim_param *p = &opt->cls.pattern_params[i];
        if (isnan(p->default_value)) continue; /* None */
        int rc = compile(opt, p, NULL, &opt->patterns[i], err);
        if (rc) return rc;
    }
    return OPTIM_OK;
}

void optim__pattern_params_free(optim_optimizer *opt)
{
    for (size_t i = 0; opt->patterns && i < opt->cls.n_pattern_params; i++)
        optim_name_patterns_free(opt->patterns[i]);
    free(opt->patterns);
    opt->patterns = NULL;
}

int optim__pattern_param_read(optim_optimizer *opt, const char *key, const void *item,
                              optim_error *err)
{
    size_t i = 0;
    while (i < opt->cls.n_pattern_params &&
           !(strcmp(opt->cls.pattern_params[i].name, key) == 0 &&
             optim__flags_in_gen(opt->gen, opt->cls.pattern_params[i].flags)))
        i++;
    if (i == opt->cls.n_pattern_params) return OPTIM__NOT_TAKEN;
    char *text = optim__json_print_exact(item), **list = NULL;
    if (!text) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    int rc = optim_config_read_strings(key, text, &list, err);
    cJSON_free(text);
    optim_name_patterns *p = NULL;
    if (!rc) rc = compile(opt, &opt->cls.pattern_params[i], list, &p, err);
    optim_strings_free(list);
    if (rc) return rc;
    optim_name_patterns_free(opt->patterns[i]);
    opt->patterns[i] = p;
    return OPTIM_OK;
}

int optim__pattern_params_put(const optim_optimizer *opt, optim_config *cfg)
{
    for (size_t i = 0; i < opt->cls.n_pattern_params; i++) {
        const optim_param *p = &opt->cls.pattern_params[i];
        const optim_name_patterns *v = opt->patterns[i];
        int rc = optim__flags_in_gen(opt->gen, p->flags)
            ? optim_config_put_strings(cfg, p->name, v ? optim_name_patterns_sources(v) : NULL)
            : OPTIM_OK;
        if (rc) return rc;
    }
    return OPTIM_OK;
}

const optim_name_patterns *optim_param_patterns(const optim_optimizer *opt, size_t i)
{
    return opt && opt->patterns && i < opt->cls.n_pattern_params ? opt->patterns[i] : NULL;
}
