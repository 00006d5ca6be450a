/* Check: the class table is well formed: version, name, flags, and each
 * param's name, type, flags, range and default. (Registration has refused
 * the worst already; these are the rules it does not enforce.) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

static int name_ok(const char *s, const char *extra)
{
    if (!s || !s[0]) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              strchr(extra, *s)))
            return 0;
    return 1;
}

static int param_problem(const optim_param *p, char *why, size_t n)
{
    const uint32_t known = OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY |
        OPTIM_PARAM_KERAS3_ONLY | OPTIM_PARAM_MIN_EXCLUSIVE | OPTIM_PARAM_MAX_EXCLUSIVE |
        OPTIM_PARAM_COUNT;
    if (!name_ok(p->name, ""))
        snprintf(why, n, "param name '%s' is not a lower-case Keras key", p->name);
    else if (p->flags & ~known)
        snprintf(why, n, "param '%s' has unknown flags 0x%x", p->name,
                 (unsigned)(p->flags & ~known));
    else if (!(p->min <= p->max) || isnan(p->min) || isnan(p->max))
        snprintf(why, n, "param '%s' range [%g, %g] is empty", p->name, p->min, p->max);
    else if (p->type == OPTIM_PARAM_BOOL &&
             (p->min < 0 || p->max > 1 || (p->flags & OPTIM_PARAM_DYNAMIC)))
        snprintf(why, n, "BOOL param '%s' has range [%g, %g]%s; expected [0, 1], not dynamic",
                 p->name, p->min, p->max,
                 (p->flags & OPTIM_PARAM_DYNAMIC) ? " and is DYNAMIC" : "");
    else if ((p->flags & OPTIM_PARAM_LEGACY_ONLY) && (p->flags & OPTIM_PARAM_KERAS3_ONLY))
        snprintf(why, n, "param '%s' is both LEGACY_ONLY and KERAS3_ONLY", p->name);
    else return 0;
    return 1;
}

void optim__cf_check_table(cf_ctx *c)
{
    const optim_class *k = c->cls;
    const uint32_t known = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_KERAS3_ONLY |
        OPTIM_CLASS_LEGACY_ONLY | OPTIM_CLASS_NO_SPARSE;
    char why[CF_TEXT] = "";
    if (k->version < 1 || k->version > OPTIM_CLASS_VERSION)
        snprintf(why, sizeof why, "version %u", (unsigned)k->version);
    else if (!name_ok(k->name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ."))
        snprintf(why, sizeof why, "class name '%s' is not a Keras class name", k->name);
    else if (k->flags & ~known)
        snprintf(why, sizeof why, "unknown class flags 0x%x", (unsigned)(k->flags & ~known));
    else if ((k->flags & OPTIM_CLASS_ELEMENTWISE) && !k->apply_dense)
        snprintf(why, sizeof why, "ELEMENTWISE without apply_dense");
    else if (!k->apply_gradients && !k->step && k->inner)
        snprintf(why, sizeof why, "an inner hook without a step or apply_gradients hook");
    for (size_t i = 0; !why[0] && i < k->n_params; i++)
        param_problem(&k->params[i], why, sizeof why);
    optim__cf_report(c, "class.table", !why[0],
                     "version 1..current, a Keras class name, known flags, params with lower-case "
                     "names, known flags and non-empty ranges",
                     "%s", why[0] ? why : "well formed");
}
