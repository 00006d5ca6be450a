/* Slots: per-variable state (momentum, m, v, ...) keyed by (variable, name),
 * created lazily in a deterministic order. */
#include "optimizer/impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

optim__var_entry *optim__var_entry_of(const optim_optimizer *opt, const optim_var *var)
{
    size_t i;
    return optim__ptrmap_get(&opt->var_index, var, &i) ? &opt->vars[i] : NULL;
}

int optim__track_var(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    if (optim__var_entry_of(opt, var)) return OPTIM_OK;
    if (opt->nvars == opt->cap_vars) {
        size_t cap = opt->cap_vars ? opt->cap_vars * 2 : 16;
        optim__var_entry *v = realloc(opt->vars, cap * sizeof *v);
        if (!v) return optim__err(err, OPTIM_ENOMEM, "out of memory");
        opt->vars = v;
        opt->cap_vars = cap;
    }
    if (optim__ptrmap_put(&opt->var_index, var, opt->nvars))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    optim__var_entry *e = &opt->vars[opt->nvars++];
    memset(e, 0, sizeof *e);
    e->var = var;
    e->numel = optim_var_numel(var);
    e->dtype = optim_var_dtype(var);
    if (opt->cls.create_slots) {
        optim_error local;
        optim__err_clear(&local);
        int rc = opt->cls.create_slots(opt, var, &local);
        if (rc > 0) rc = OPTIM_EINVAL;
        if (rc) {
            if (local.msg[0]) return optim__err(err, rc, "%s", local.msg);
            return optim__err(err, rc, "%s: create_slots failed for '%.200s': %.250s",
                              opt->cls.name, optim_var_name(var),
                              opt->errmsg[0] ? opt->errmsg : optim_strerror(rc));
        }
    }
    return OPTIM_OK;
}

void optim__rollback_vars(optim_optimizer *opt, size_t nvars, size_t nslots, size_t nnames)
{
    while (opt->nslots > nslots) optim_var_destroy(opt->slots[--opt->nslots].var);
    while (opt->nslot_names > nnames) free(opt->slot_names[--opt->nslot_names]);
    while (opt->nvars > nvars) optim__ptrmap_del(&opt->var_index, opt->vars[--opt->nvars].var);
}

static long slot_name_id(const optim_optimizer *opt, const char *name)
{
    for (size_t i = 0; i < opt->nslot_names; i++)
        if (strcmp(opt->slot_names[i], name) == 0) return (long)i;
    return -1;
}

int optim_add_slot(optim_optimizer *opt, optim_var *var, const char *slot_name,
                   optim_slot_init init, double value)
{
    optim__var_entry *e = var ? optim__var_entry_of(opt, var) : NULL;
    if (!e)
        return optim__opt_err(opt, OPTIM_ESTATE,
                              "%s: add_slot '%s' for a variable the optimizer is not creating "
                              "slots for (call it from create_slots)",
                              opt->cls.name, slot_name ? slot_name : "(null)");
    if (!slot_name || !slot_name[0] || strchr(slot_name, '/'))
        return optim__opt_err(opt, OPTIM_EINVAL,
                              "%s: slot name '%s' for '%s', expected a non-empty name without '/'",
                              opt->cls.name, slot_name ? slot_name : "(null)", optim_var_name(var));
    if (init != OPTIM_SLOT_ZEROS && init != OPTIM_SLOT_CONSTANT && init != OPTIM_SLOT_COPY)
        return optim__opt_err(opt, OPTIM_EINVAL, "%s: slot '%s' init %d is unknown", opt->cls.name,
                              slot_name, (int)init);
    long id = slot_name_id(opt, slot_name);
    for (int k = 0; id >= 0 && k < e->nslots; k++)
        if (opt->slots[e->slot_ids[k]].name_id == (size_t)id) return OPTIM_OK;
    if (e->nslots == OPTIM_MAX_SLOTS)
        return optim__opt_err(opt, OPTIM_ERANGE, "%s: variable '%s' has %d slots, the most allowed",
                              opt->cls.name, optim_var_name(var), OPTIM_MAX_SLOTS);
    if (opt->nslots == opt->cap_slots) {
        size_t cap = opt->cap_slots ? opt->cap_slots * 2 : 16;
        optim__slot *s = realloc(opt->slots, cap * sizeof *s);
        if (!s) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
        opt->slots = s;
        opt->cap_slots = cap;
    }
    if (id < 0) {
        char **names = realloc(opt->slot_names, (opt->nslot_names + 1) * sizeof *names);
        if (!names) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
        opt->slot_names = names;
        names[opt->nslot_names] = optim__strdup(slot_name);
        if (!names[opt->nslot_names]) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
        id = (long)opt->nslot_names++;
    }
    size_t len = strlen(optim_var_name(var)) + strlen(slot_name) + 2;
    char *full = malloc(len);
    if (!full) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    snprintf(full, len, "%s/%s", optim_var_name(var), slot_name);
    optim_dtype dt = optim_var_dtype(var);
    optim_var *slot;
    optim_error err;
    int rc = optim_var_create(&slot, full, dt, optim_var_rank(var), optim_var_shape(var),
                              init == OPTIM_SLOT_COPY ? optim_var_cdata(var) : NULL, &err);
    free(full);
    if (rc) return optim__opt_take(opt, &err);
    if (init == OPTIM_SLOT_CONSTANT && value != 0) {
        int64_t n = optim_var_numel(slot);
        if (dt == OPTIM_F32) {
            float *p = optim_var_data(slot);
            for (int64_t i = 0; i < n; i++) p[i] = (float)value;
        } else {
            double *p = optim_var_data(slot);
            for (int64_t i = 0; i < n; i++) p[i] = value;
        }
    }
    optim__slot *s = &opt->slots[opt->nslots];
    s->var = slot;
    s->name_id = (size_t)id;
    s->owner = (size_t)(e - opt->vars);
    e->slot_ids[e->nslots++] = opt->nslots++;
    return OPTIM_OK;
}

optim_var *optim_get_slot(const optim_optimizer *opt, const optim_var *var, const char *slot_name)
{
    const optim__var_entry *e = var && slot_name ? optim__var_entry_of(opt, var) : NULL;
    if (!e) return NULL;
    for (int k = 0; k < e->nslots; k++) {
        const optim__slot *s = &opt->slots[e->slot_ids[k]];
        if (strcmp(opt->slot_names[s->name_id], slot_name) == 0) return s->var;
    }
    return NULL;
}

size_t optim_get_slot_names(const optim_optimizer *opt, const char **names, size_t cap)
{
    for (size_t i = 0; i < opt->nslot_names && i < cap; i++) names[i] = opt->slot_names[i];
    return opt->nslot_names;
}

int optim_build(optim_optimizer *opt, optim_var *const *vars, size_t n)
{
    if (n && !vars) return optim__opt_err(opt, OPTIM_EINVAL, "optim_build: vars is NULL");
    for (size_t i = 0; i < n; i++) {
        if (!vars[i]) return optim__opt_err(opt, OPTIM_EINVAL, "optim_build: vars[%zu] is NULL", i);
        for (size_t j = 0; j < i; j++)
            if (vars[j] == vars[i])
                return optim__opt_err(opt, OPTIM_EINVAL, "optim_build: variable '%s' given twice",
                                      optim_var_name(vars[i]));
    }
    optim_error err;
    /* Hooks read this step's hyperparameter values (optim_param_value). */
    if (optim__resolve(opt, &err)) return optim__opt_take(opt, &err);
    size_t nv = opt->nvars, ns = opt->nslots, nn = opt->nslot_names;
    for (size_t i = 0; i < n; i++) {
        if (optim__track_var(opt, vars[i], &err)) {
            optim__rollback_vars(opt, nv, ns, nn);
            return optim__opt_take(opt, &err);
        }
    }
    opt->built = 1;
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}
