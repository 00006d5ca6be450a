/* The registry of optimizer classes: built-ins and registered user classes,
 * looked up by Keras class name, case-insensitively. */
#include "optimizer/impl.h"
#include "optim/optimizers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const optim_class *const *builtins(size_t *n)
{
    static const optim_class *const list[] = {
#define OPTIM__BUILTIN_ENTRY(sym) &sym,
        OPTIM_BUILTIN_CLASSES(OPTIM__BUILTIN_ENTRY)
#undef OPTIM__BUILTIN_ENTRY
    };
    *n = sizeof list / sizeof *list;
    return list;
}

/* User classes: copies owned by the registry, alive for the process, in a
 * list so that pointers handed out stay valid as it grows. */
typedef struct user_class {
    optim_class cls;
    struct user_class *next;
} user_class;
static user_class *user_classes;

void optim__class_copy(optim_class *dst, const optim_class *src)
{
    memset(dst, 0, sizeof *dst);
    size_t n = src->size < sizeof *dst ? src->size : sizeof *dst;
    memcpy(dst, src, n);
    dst->size = sizeof *dst;
}

/* Whether two params can never exist in the same generation. */
static int gens_disjoint(uint32_t a, uint32_t b)
{
    const uint32_t L = OPTIM_PARAM_LEGACY_ONLY, K = OPTIM_PARAM_KERAS3_ONLY;
    return ((a & L) && (b & K)) || ((a & K) && (b & L));
}

int optim__class_check(const optim_class *cls, optim_error *err)
{
    if (!cls) return optim__err(err, OPTIM_EINVAL, "optimizer class is NULL");
    if (cls->size < offsetof(optim_class, destroy) + sizeof(cls->destroy) ||
        cls->version < 1 || cls->version > OPTIM_CLASS_VERSION)
        return optim__err(err, OPTIM_EVERSION,
                          "optimizer class: size %u, version %u; expected size >= %zu and "
                          "version 1..%d",
                          (unsigned)cls->size, (unsigned)cls->version,
                          offsetof(optim_class, destroy) + sizeof(cls->destroy),
                          OPTIM_CLASS_VERSION);
    if (!cls->name || !cls->name[0])
        return optim__err(err, OPTIM_EINVAL, "optimizer class: name is empty");
    const int has_step = cls->size >= offsetof(optim_class, step) + sizeof cls->step && cls->step;
    if (!cls->apply_dense && !cls->apply_gradients && !has_step)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': needs apply_dense, step or apply_gradients", cls->name);
    if (cls->apply_sparse_duplicate_indices && !cls->apply_sparse)
        return optim__err(err, OPTIM_EINVAL,
                          "optimizer class '%s': apply_sparse_duplicate_indices needs apply_sparse "
                          "(for the OPTIM_SPARSE_DEFAULT path)",
                          cls->name);
    if (cls->n_params && !cls->params)
        return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': params is NULL", cls->name);
    if ((cls->flags & OPTIM_CLASS_KERAS3_ONLY) && (cls->flags & OPTIM_CLASS_LEGACY_ONLY))
        return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': both KERAS3_ONLY and LEGACY_ONLY",
                          cls->name);
    if (!(cls->default_weight_decay >= 0) || !isfinite(cls->default_weight_decay))
        return optim__err(err, OPTIM_ERANGE,
                          "optimizer class '%s': default_weight_decay %g, expected >= 0", cls->name,
                          cls->default_weight_decay);
    if (!(cls->default_learning_rate >= 0) || !isfinite(cls->default_learning_rate))
        return optim__err(err, OPTIM_ERANGE,
                          "optimizer class '%s': default_learning_rate %g, expected >= 0",
                          cls->name, cls->default_learning_rate);
    for (size_t i = 0; i < cls->n_params; i++) {
        const optim_param *p = &cls->params[i];
        if (!p->name || !p->name[0] || p->type > OPTIM_PARAM_INT)
            return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': param %zu is malformed",
                              cls->name, i);
        if (strcmp(p->name, "name") == 0 || strcmp(p->name, "is_legacy_optimizer") == 0 ||
            strcmp(p->name, "lr") == 0 || strcmp(p->name, "jit_compile") == 0)
            return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': param name '%s' is reserved",
                              cls->name, p->name);
        const optim_param *base = optim__base_param(p->name);
        if (base && !gens_disjoint(base->flags, p->flags))
            return optim__err(err, OPTIM_EINVAL,
                              "optimizer class '%s': param '%s' is a base option in the same "
                              "generation",
                              cls->name, p->name);
        int nullable = (p->flags & OPTIM_PARAM_NULLABLE) != 0;
        double d = p->default_value;
        int lo_ok = (p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) ? d > p->min : d >= p->min;
        int hi_ok = (p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) ? d < p->max : d <= p->max;
        if (isnan(d) ? !nullable : !(lo_ok && hi_ok && isfinite(d)) ||
                                      (p->type == OPTIM_PARAM_BOOL && d != 0 && d != 1) ||
                                      (p->type == OPTIM_PARAM_INT && d != floor(d)))
            return optim__err(err, OPTIM_ERANGE,
                              "optimizer class '%s': param '%s' default %g is outside its own "
                              "type and range [%g, %g]%s",
                              cls->name, p->name, d, p->min, p->max,
                              isnan(d) ? " (NAN needs OPTIM_PARAM_NULLABLE)" : "");
        for (size_t j = 0; j < i; j++)
            if (strcmp(cls->params[j].name, p->name) == 0 && !gens_disjoint(cls->params[j].flags, p->flags))
                return optim__err(err, OPTIM_EINVAL, "optimizer class '%s': param '%s' twice",
                                  cls->name, p->name);
    }
    return OPTIM_OK;
}

const optim_class *optim_find_class(const char *name)
{
    if (!name) return NULL;
    /* TF Addons registers its optimizers as "Addons>LAMB", "Addons>LazyAdam". */
    if (strncmp(name, "Addons>", 7) == 0) name += 7;
    size_t n;
    const optim_class *const *b = builtins(&n);
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(b[i]->name, name) == 0) return b[i];
    for (const user_class *u = user_classes; u; u = u->next)
        if (strcasecmp(u->cls.name, name) == 0) return &u->cls;
    return NULL;
}

int optim_register_class(const optim_class *cls, optim_error *err)
{
    int rc = optim__class_check(cls, err);
    if (rc) return rc;
    if (optim_find_class(cls->name))
        return optim__err(err, OPTIM_EINVAL, "optimizer class '%s' is already registered",
                          cls->name);
    user_class *u = calloc(1, sizeof *u);
    if (!u) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    optim__class_copy(&u->cls, cls);
    u->next = user_classes;
    user_classes = u;
    optim__err_clear(err);
    return OPTIM_OK;
}
