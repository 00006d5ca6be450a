/* What wrappers need of the base class besides stepping (optim/step.h):
 * checking that the base options were left alone, shaping their config,
 * and the refusal of half-precision variables that their builds, steps and
 * gradient checks share. */
#include "optimizer/impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void put_text(char *buf, size_t len, const char *text)
{
    if (buf && len) snprintf(buf, len, "%s", text);
}

static void put_value(char *buf, size_t len, const optim_param *p, double v)
{
    char t[48];
    if (isnan(v)) snprintf(t, sizeof t, "None");
    else if (p->type == OPTIM_PARAM_BOOL) snprintf(t, sizeof t, "%s", v != 0 ? "true" : "false");
    else snprintf(t, sizeof t, "%g", v);
    put_text(buf, len, t);
}

static int listed(const char *name, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], name) == 0) return 1;
    return 0;
}

const char *optim_base_option_changed(const optim_optimizer *opt, const char *const *except,
                                      size_t n_except, char *have, size_t have_len, char *want,
                                      size_t want_len)
{
    for (size_t i = 0; opt && i < OPTIM__N_BASE; i++) {
        const optim_param *p = opt->params[i];
        if (!optim__param_in_gen(opt, i) || listed(p->name, except, n_except)) continue;
        const optim__hyper *h = &opt->hypers[i];
        double def =
            i == OPTIM__P_LEARNING_RATE ? opt->cls.default_learning_rate : p->default_value;
        if (isnan(def) ? h->kind == HYPER_NONE : h->kind == HYPER_NUMBER && h->number == def)
            continue;
        if (h->kind == HYPER_NUMBER || h->kind == HYPER_NONE)
            put_value(have, have_len, p, h->kind == HYPER_NONE ? NAN : h->number);
        else put_text(have, have_len, "a variable, callable or schedule");
        put_value(want, want_len, p, def);
        return p->name;
    }
    return NULL;
}

int optim_config_keep(optim_config *cfg, const char *const *keys, size_t n,
                      const char *const *drop_null, size_t n_drop_null)
{
    if (!cfg || (n && !keys)) return OPTIM_EINVAL;
    cJSON *obj = cfg->obj;
    cJSON *fresh = cJSON_CreateObject();
    if (!fresh) return OPTIM_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        cJSON *item = keys[k] ? cJSON_DetachItemFromObjectCaseSensitive(obj, keys[k]) : NULL;
        if (!item) continue;
        if (cJSON_IsNull(item) && listed(keys[k], drop_null, n_drop_null)) {
            cJSON_Delete(item);
            continue;
        }
        if (!cJSON_AddItemToObject(fresh, keys[k], item)) {
            cJSON_Delete(item);
            cJSON_Delete(fresh);
            return OPTIM_ENOMEM;
        }
    }
    /* Swap the contents: cfg->obj is the object the base goes on writing to. */
    cJSON *old = obj->child;
    obj->child = fresh->child;
    fresh->child = old;
    cJSON_Delete(fresh);
    return OPTIM_OK;
}

int optim__check_half_wrapper(const optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                              optim_error *err)
{
    if ((!opt->cls.step && !opt->cls.apply_gradients) || opt->cls.inner_at || (n && !pairs))
        return OPTIM_OK;
    for (size_t i = 0; i < n; i++) {
        const optim_dtype dt = pairs[i].var ? optim_var_dtype(pairs[i].var) : OPTIM_F32;
        if (pairs[i].grad.kind != OPTIM_GRAD_NONE && optim_compute_dtype(dt) != dt)
            return optim__err(err, OPTIM_ENOTSUP,
                              "%s: variable '%s' is %s; wrappers take float32 or float64 "
                              "variables (docs/half-precision.md)",
                              opt->cls.name, optim_var_name(pairs[i].var), optim_dtype_name(dt));
    }
    return OPTIM_OK;
}
