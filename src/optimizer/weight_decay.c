/* Keras 3's decoupled weight decay (base option `weight_decay`): before the
 * update, w = w - w * wd * lr for every variable that gets a gradient,
 * unless excluded by variable or by a name pattern (re.search on the name,
 * here POSIX extended regular expressions: core/patterns.c). Calls only
 * access.c in src/optimizer. */
#include "optimizer/impl.h"

#include <stdlib.h>
#include <string.h>

/* The patterns so far followed by the new ones, compiled into *out. */
static int join_patterns(optim_optimizer *opt, const char *const *add, size_t nadd,
                         optim_name_patterns **out, optim_error *err)
{
    const char *const *old = optim_name_patterns_sources(opt->wd_patterns);
    size_t nold = 0;
    while (old[nold]) nold++;
    const char **all = calloc(nold + nadd + 1, sizeof *all);
    if (!all) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    memcpy(all, old, nold * sizeof *all);
    if (nadd) memcpy(all + nold, add, nadd * sizeof *all);
    int rc = optim_name_patterns_compile(out, all, nold + nadd, "exclude_from_weight_decay", err);
    free(all);
    return rc;
}

int optim_exclude_from_weight_decay(optim_optimizer *opt, optim_var *const *vars, size_t nvars,
                                    const char *const *name_patterns, size_t npatterns)
{
    if ((nvars && !vars) || (npatterns && !name_patterns))
        return optim_set_error(opt, OPTIM_EINVAL, "exclude_from_weight_decay: NULL list");
    for (size_t i = 0; i < nvars; i++)
        if (!vars[i])
            return optim_set_error(opt, OPTIM_EINVAL,
                                   "exclude_from_weight_decay: vars[%zu] is NULL", i);
    /* Compile everything first, so that a bad pattern changes nothing. */
    optim_error e;
    optim_name_patterns *joined;
    if (join_patterns(opt, name_patterns, npatterns, &joined, &e)) return optim__opt_take(opt, &e);
    size_t nmap = opt->wd_excluded.count;
    for (size_t i = 0; i < nvars; i++)
        if (optim__ptrmap_put(&opt->wd_excluded, vars[i], 1)) {
            for (size_t j = 0; j < i; j++)
                if (j >= nmap) optim__ptrmap_del(&opt->wd_excluded, vars[j]);
            optim_name_patterns_free(joined);
            return optim_set_error(opt, OPTIM_ENOMEM, "out of memory");
        }
    optim_name_patterns_free(opt->wd_patterns);
    opt->wd_patterns = joined;
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

int optim__use_weight_decay(const optim_optimizer *opt, const optim_var *var)
{
    if (optim__ptrmap_get(&opt->wd_excluded, var, NULL)) return 0;
    return !optim_name_patterns_match(opt->wd_patterns, optim_var_name(var));
}

void optim__weight_decay_free(optim_optimizer *opt)
{
    optim_name_patterns_free(opt->wd_patterns);
    optim__ptrmap_free(&opt->wd_excluded);
}

void optim__decay(optim_dtype dtype, void *w, int64_t n, double wd, double lr)
{
    const optim__decay_table *k = OPTIM__ISA_TABLE(optim__decay_kernels);
    if (dtype == OPTIM_F32) k->decay_float(w, n, (float)wd, (float)lr);
    else k->decay_double(w, n, wd, lr);
}
