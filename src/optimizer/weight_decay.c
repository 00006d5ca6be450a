/* Keras 3's decoupled weight decay (base option `weight_decay`): before the
 * update, w = w - w * wd * lr for every variable that gets a gradient,
 * unless excluded by variable or by a name pattern (re.search on the name,
 * here POSIX extended regular expressions). */
#define _POSIX_C_SOURCE 200809L
#include "optimizer/impl.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

int optim_exclude_from_weight_decay(optim_optimizer *opt, optim_var *const *vars, size_t nvars,
                                    const char *const *name_patterns, size_t npatterns)
{
    if ((nvars && !vars) || (npatterns && !name_patterns))
        return optim_set_error(opt, OPTIM_EINVAL, "exclude_from_weight_decay: NULL list");
    for (size_t i = 0; i < nvars; i++)
        if (!vars[i])
            return optim_set_error(opt, OPTIM_EINVAL, "exclude_from_weight_decay: vars[%zu] is NULL", i);
    /* Compile everything first, so that a bad pattern changes nothing. */
    regex_t *re = calloc(npatterns ? npatterns : 1, sizeof *re);
    if (!re) return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < npatterns; i++) {
        int rc = name_patterns[i] ? regcomp(&re[i], name_patterns[i], REG_EXTENDED | REG_NOSUB) : REG_BADPAT;
        if (rc) {
            char why[128] = "NULL pattern";
            if (name_patterns[i]) regerror(rc, &re[i], why, sizeof why);
            for (size_t j = 0; j < i; j++) regfree(&re[j]);
            free(re);
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "exclude_from_weight_decay: pattern %zu ('%s') is not a valid "
                                   "regular expression: %s",
                                   i, name_patterns[i] ? name_patterns[i] : "(null)", why);
        }
    }
    regex_t *grown = realloc(opt->wd_patterns, (opt->nwd_patterns + npatterns + 1) * sizeof *grown);
    if (!grown) {
        for (size_t j = 0; j < npatterns; j++) regfree(&re[j]);
        free(re);
        return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
    }
    opt->wd_patterns = grown;
    size_t nmap = opt->wd_excluded.count;
    for (size_t i = 0; i < nvars; i++)
        if (optim__ptrmap_put(&opt->wd_excluded, vars[i], 1)) {
            for (size_t j = 0; j < i; j++)
                if (j >= nmap) optim__ptrmap_del(&opt->wd_excluded, vars[j]);
            for (size_t j = 0; j < npatterns; j++) regfree(&re[j]);
            free(re);
            return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
        }
    memcpy(opt->wd_patterns + opt->nwd_patterns, re, npatterns * sizeof *re);
    opt->nwd_patterns += npatterns;
    free(re);
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

int optim__use_weight_decay(const optim_optimizer *opt, const optim_var *var)
{
    if (optim__ptrmap_get(&opt->wd_excluded, var, NULL)) return 0;
    for (size_t i = 0; i < opt->nwd_patterns; i++)
        if (regexec(&opt->wd_patterns[i], optim_var_name(var), 0, NULL, 0) == 0) return 0;
    return 1;
}

void optim__weight_decay_free(optim_optimizer *opt)
{
    for (size_t i = 0; i < opt->nwd_patterns; i++) regfree(&opt->wd_patterns[i]);
    free(opt->wd_patterns);
    optim__ptrmap_free(&opt->wd_excluded);
}

void optim__decay(optim_dtype dtype, void *w, int64_t n, double wd, double lr)
{
    if (dtype == OPTIM_F32) {
        float *x = w;
        const float d = (float)wd, l = (float)lr;
        for (int64_t i = 0; i < n; i++) x[i] = x[i] - x[i] * d * l;
    } else {
        double *x = w;
        for (int64_t i = 0; i < n; i++) x[i] = x[i] - x[i] * wd * lr;
    }
}
