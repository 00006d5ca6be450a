/* optim_bytes_per_param: the bytes a class's update moves per element of a
 * variable (its bytes_per_param hook, or the element-wise count), the
 * figure optim bench compares with memory bandwidth. One place for the
 * default, so that the bench and a caller count alike. */
#include "optimizer/impl.h"

#include <math.h>

/* One read of the gradient, a read and a write of the variable and of each
 * full-size slot of the class's own (create_slots); base slots (use_ema,
 * gradient accumulation) are not the class's passes. */
static double elementwise_count(const optim_optimizer *opt, const optim__var_entry *e)
{
    int full = 0;
    for (int k = 0; k < e->nown; k++)
        full += optim_var_numel(opt->slots[e->slot_ids[k]].var) == e->numel;
    return (double)optim_dtype_size(e->dtype) * (3.0 + 2.0 * full);
}

int optim_bytes_per_param(optim_optimizer *opt, const optim_var *var, double *bytes)
{
    if (!opt) return OPTIM_EINVAL;
    if (!var || !bytes)
        return optim_set_error(opt, OPTIM_EINVAL, "optim_bytes_per_param: %s is NULL",
                               var ? "bytes" : "var");
    const optim__var_entry *e = optim__var_entry_of(opt, var);
    const char *cn = opt->cls.name, *vn = optim_var_name(var);
    if (!opt->cls.bytes_per_param && !optim__runs_pipeline(opt))
        return optim_set_error(opt, OPTIM_ENOTSUP,
                               "optim_bytes_per_param: %s is a wrapper without a bytes_per_param "
                               "hook; ask its inner optimizer",
                               cn);
    if (!e)
        return optim_set_error(opt, OPTIM_ENOTFOUND,
                               "optim_bytes_per_param: %s has no slots for variable '%s' yet "
                               "(expected a variable it has stepped or built)",
                               cn, vn);
    const double b =
        opt->cls.bytes_per_param ? opt->cls.bytes_per_param(opt, var) : elementwise_count(opt, e);
    if (!isfinite(b) || b < 0)
        return optim_set_error(opt, OPTIM_ERANGE,
                               "optim_bytes_per_param: %s's bytes_per_param hook gave %g for "
                               "variable '%s', expected a finite number >= 0",
                               cn, b, vn);
    *bytes = b;
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}
