/* The inner optimizer of a wrapper: created from nested JSON or installed
 * by optim_wrap, owned and freed by the wrapper. */
#include "wrappers/wrapper.h"

#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "optimizer/config_ex.h"

optim_optimizer *optim__wrapper_inner(const optim_optimizer *opt)
{
    const optim_wrapper_state *st = optim_state(opt);
    return st ? st->inner : NULL;
}

optim_optimizer *optim_wrapper_inner(const optim_optimizer *opt)
{
    const optim_class *c = opt ? optim_class_of(opt) : NULL;
    return c && c->inner ? c->inner(opt) : NULL;
}

optim_optimizer *optim_wrapper_inner_at(const optim_optimizer *opt, size_t i)
{
    const optim_class *c = opt ? optim_class_of(opt) : NULL;
    if (!c) return NULL;
    if (c->inner_at) return c->inner_at(opt, i);
    return i == 0 && c->inner ? c->inner(opt) : NULL;
}

void optim__wrapper_destroy(optim_optimizer *opt)
{
    optim_wrapper_state *st = optim_state(opt);
    if (st && st->owns_inner) optim_destroy(st->inner);
    if (st) st->inner = NULL;
}

int optim__wrapper_set_inner_json(optim_optimizer *opt, const char *json_value, optim_error *err)
{
    optim_wrapper_state *st = optim_state(opt);
    const char *cn = optim_class_of(opt)->name;
    if (st->inner)
        return optim__err(err, OPTIM_EINVAL, "%s: the inner optimizer is given twice", cn);
    optim_optimizer *inner;
    optim_error local;
    int rc = optim_from_json(&inner, json_value, &local);
    if (rc) return optim__err(err, rc, "%s: inner optimizer: %s", cn, local.msg);
    st->inner = inner;
    st->owns_inner = 1;
    return OPTIM_OK;
}

int optim__wrapper_put_inner(optim_optimizer *opt, optim_config *cfg, const char *key)
{
    optim_optimizer *inner = optim__wrapper_inner(opt);
    if (!inner) return OPTIM_ESTATE;
    char *text = optim_serialize(inner);
    if (!text) return OPTIM_ENOMEM;
    int rc = optim_config_put(cfg, key, text);
    optim_free(text);
    return rc;
}

int optim__wrapper_require_inner(optim_optimizer *opt, const char *key, optim_error *err)
{
    if (optim__wrapper_inner(opt)) return OPTIM_OK;
    return optim__err(err, OPTIM_EINVAL,
                      "%s: no inner optimizer; give one under config key '%s', or use optim_wrap",
                      optim_class_of(opt)->name, key);
}

static int install(optim_optimizer *opt, void *inner)
{
    optim_wrapper_state *st = optim_state(opt);
    if (!optim_class_of(opt)->inner || !st)
        return optim_set_error(opt, OPTIM_EINVAL, "%s is not a wrapper", optim_class_of(opt)->name);
    st->inner = inner;
    st->owns_inner = 0;
    return OPTIM_OK;
}

int optim_wrap(optim_optimizer **out, const char *wrapper_json, optim_optimizer *inner,
               optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_wrap: out is NULL");
    *out = NULL;
    if (!inner) return optim__err(err, OPTIM_EINVAL, "optim_wrap: inner is NULL");
    if (!wrapper_json) return optim__err(err, OPTIM_EINVAL, "optim_wrap: wrapper_json is NULL");
    optim_optimizer *w;
    int rc = optim__from_config_ex(&w, wrapper_json, install, inner, err);
    if (rc) return rc;
    ((optim_wrapper_state *)optim_state(w))->owns_inner = 1;
    *out = w;
    return OPTIM_OK;
}
