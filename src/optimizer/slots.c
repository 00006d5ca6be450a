/* Slots: per-variable state (momentum, m, v, ...) keyed by (variable, name),
 * created lazily in a deterministic order: the class's own (create_slots),
 * then the base's ("average" for Keras 3's use_ema, "gradient_accumulator"
 * for its gradient_accumulation_steps; keras3_options.h). */
#include "optimizer/impl.h"
#include "optimizer/keras3_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

optim__var_entry *optim__var_entry_of(const optim_optimizer *opt, const optim_var *var)
{
    size_t i;
    return optim__ptrmap_get(&opt->var_index, var, &i) ? &opt->vars[i] : NULL;
}

optim__var_entry *optim__var_entry_at(const optim_optimizer *opt, const optim_var *var, size_t hint)
{
    if (hint < opt->nvars && opt->vars[hint].var == var) return &opt->vars[hint];
    return optim__var_entry_of(opt, var);
}

static int add_slot(optim_optimizer *opt, optim_var *var, const char *slot_name, int32_t rank,
                    const int64_t *shape, optim_slot_init init, double value);

/* The base slots of a variable just tracked, after the class's own, in the
 * order of Keras 3's BaseOptimizer.build: "average" (zeros; see
 * optim__k3_average_copies), then "gradient_accumulator" (zeros). */
static int add_base_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    const char *names[2] = {OPTIM__SLOT_AVERAGE, OPTIM__SLOT_ACCUMULATOR};
    const int want[2] = {optim__k3_wants_average(opt), optim__k3_wants_accumulator(opt)};
    const optim_slot_init init[2] = {
        optim__k3_average_copies(opt) ? OPTIM_SLOT_COPY : OPTIM_SLOT_ZEROS, OPTIM_SLOT_ZEROS};
    optim__var_entry *e = optim__var_entry_of(opt, var);
    optim_var **handle[2] = {&e->average, &e->accumulator};
    for (int j = 0; j < 2; j++) {
        if (!want[j]) continue;
        int rc =
            add_slot(opt, var, names[j], optim_var_rank(var), optim_var_shape(var), init[j], 0);
        if (rc) return optim__err(err, rc, "%s", opt->errmsg);
        *handle[j] = opt->slots[opt->nslots - 1].var;
    }
    return OPTIM_OK;
}

/* create_slots gave e fewer slots than the class's min_slots: an error
 * naming those it got (the step fails and rolls back). */
static int too_few_slots(const optim_optimizer *opt, const optim__var_entry *e, optim_error *err)
{
    char got[256] = "";
    size_t len = 0;
    for (int k = 0; k < e->nslots && len < sizeof got; k++)
        len += (size_t)snprintf(got + len, sizeof got - len, "%s'%s'", k ? ", " : "",
                                opt->slot_names[opt->slots[e->slot_ids[k]].name_id]);
    return optim__err(err, OPTIM_ESTATE,
                      "%s: create_slots added %d slot%s to '%.200s' (%s), but the class table "
                      "declares min_slots %d: the kernel would read a slot that does not exist",
                      opt->cls.name, e->nslots, e->nslots == 1 ? "" : "s", optim_var_name(e->var),
                      e->nslots ? got : "none", (int)opt->cls.min_slots);
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
    optim__var_entry *added = &opt->vars[opt->nvars - 1];
    if (added->nslots < opt->cls.min_slots) return too_few_slots(opt, added, err);
    added->nown = added->nslots;
    return add_base_slots(opt, var, err);
}

void optim__rollback_vars(optim_optimizer *opt, size_t nvars, size_t nslots, size_t nnames)
{
    /* Slots created since are destroyed; optimizer-level weights stay (the
     * class may hold them in its state), moved down to keep creation order. */
    size_t keep = nslots;
    for (size_t i = nslots; i < opt->nslots; i++) {
        if (opt->slots[i].owner == OPTIM__NO_OWNER) opt->slots[keep++] = opt->slots[i];
        else optim_var_destroy(opt->slots[i].var);
    }
    opt->nslots = keep;
    opt->weights_version++;
    while (opt->nslot_names > nnames) free(opt->slot_names[--opt->nslot_names]);
    while (opt->nvars > nvars) optim__ptrmap_del(&opt->var_index, opt->vars[--opt->nvars].var);
}

static int slot_order(const optim__slot *a, const optim__slot *b)
{
    /* Weights first; then by slot name in first-seen order; then by
     * variable (creation) order. */
    long ka = a->owner == OPTIM__NO_OWNER ? -1 : (long)a->name_id;
    long kb = b->owner == OPTIM__NO_OWNER ? -1 : (long)b->name_id;
    if (ka != kb) return ka < kb ? -1 : 1;
    if (a->owner != b->owner) return a->owner < b->owner ? -1 : 1;
    return 0;
}

void optim_set_slot_order(optim_optimizer *opt, optim_slot_order order)
{
    opt->slot_order =
        order == OPTIM_SLOTS_BY_VARIABLE ? OPTIM_SLOTS_BY_VARIABLE : OPTIM_SLOTS_BY_KIND;
}

/* Stable bottom-up merge sort of a[0..n) by slot_order, through tmp. */
static void merge_sort_slots(optim__slot *a, optim__slot *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = slot_order(&a[j], &a[i]) < 0 ? a[j++] : a[i++];
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        memcpy(a, tmp, n * sizeof *a);
    }
}

/* slot_order in one pass when it can: a stable counting sort by the first
 * key (weights, then slot name), which is slot_order itself when each key's
 * slots were created in variable order (track_var creates a variable's
 * slots before the next variable's). Returns 0, a[] unchanged, otherwise or
 * without memory. */
static int bucket_sort_slots(optim__slot *a, optim__slot *tmp, size_t n, size_t nkeys)
{
    size_t *at = calloc(2 * nkeys, sizeof *at), *last = at + nkeys;
    int ok = at != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        size_t key = a[i].owner == OPTIM__NO_OWNER ? 0 : a[i].name_id + 1;
        ok = !at[key]++ || a[i].owner >= last[key];
        last[key] = a[i].owner;
    }
    for (size_t key = 0, sum = 0; ok && key < nkeys; key++) {
        size_t c = at[key];
        at[key] = sum;
        sum += c;
    }
    for (size_t i = 0; ok && i < n; i++)
        tmp[at[a[i].owner == OPTIM__NO_OWNER ? 0 : a[i].name_id + 1]++] = a[i];
    if (ok) memcpy(a, tmp, n * sizeof *a);
    free(at);
    return ok;
}

void optim__order_new_slots(optim_optimizer *opt, size_t from)
{
    if (opt->slot_order == OPTIM_SLOTS_BY_VARIABLE) return;
    /* The segment is one step's new slots: O(n) by key, else O(n log n)
     * (50k variables' first step took 1.95 s in an insertion sort), which
     * stays the fallback without memory for the merge. */
    size_t n = opt->nslots - from;
    optim__slot *tmp = n > 1 ? malloc(n * sizeof *tmp) : NULL;
    int merged = tmp != NULL;
    if (merged && !bucket_sort_slots(opt->slots + from, tmp, n, opt->nslot_names + 1))
        merge_sort_slots(opt->slots + from, tmp, n);
    free(tmp);
    for (size_t i = from + 1; !merged && i < opt->nslots; i++) {
        optim__slot x = opt->slots[i];
        size_t j = i;
        while (j > from && slot_order(&opt->slots[j - 1], &x) > 0) {
            opt->slots[j] = opt->slots[j - 1];
            j--;
        }
        opt->slots[j] = x;
    }
    opt->weights_version++;
    for (size_t i = from; i < opt->nslots; i++)
        if (opt->slots[i].owner != OPTIM__NO_OWNER)
            opt->vars[opt->slots[i].owner].slot_ids[opt->slots[i].k] = i;
}

static long slot_name_id(const optim_optimizer *opt, const char *name)
{
    for (size_t i = 0; i < opt->nslot_names; i++)
        if (strcmp(opt->slot_names[i], name) == 0) return (long)i;
    return -1;
}

/* Creates one state variable and appends it to the weights: a slot of entry
 * `e` named `slot_name` (e != NULL), or an optimizer-level weight. */
static int add_state(optim_optimizer *opt, optim__var_entry *e, const char *slot_name,
                     const char *full, optim_dtype dt, int32_t rank, const int64_t *shape,
                     optim_slot_init init, double value, const void *copy_of, optim_var **out)
{
    if (init != OPTIM_SLOT_ZEROS && init != OPTIM_SLOT_CONSTANT && init != OPTIM_SLOT_COPY)
        return optim__opt_err(opt, OPTIM_EINVAL, "%s: '%s' init %d is unknown", opt->cls.name, full,
                              (int)init);
    if (opt->nslots == opt->cap_slots) {
        size_t cap = opt->cap_slots ? opt->cap_slots * 2 : 16;
        optim__slot *sl = realloc(opt->slots, cap * sizeof *sl);
        if (!sl) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
        opt->slots = sl;
        opt->cap_slots = cap;
    }
    long id = -1;
    if (e) {
        id = slot_name_id(opt, slot_name);
        if (id < 0) {
            char **names = realloc(opt->slot_names, (opt->nslot_names + 1) * sizeof *names);
            if (!names) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
            opt->slot_names = names;
            names[opt->nslot_names] = optim__strdup(slot_name);
            if (!names[opt->nslot_names]) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
            id = (long)opt->nslot_names++;
        }
    }
    optim_var *v;
    optim_error err;
    int rc =
        optim_var_create(&v, full, dt, rank, shape, init == OPTIM_SLOT_COPY ? copy_of : NULL, &err);
    if (rc) return optim__opt_take(opt, &err);
    if (init == OPTIM_SLOT_CONSTANT && value != 0) {
        int64_t n = optim_var_numel(v);
        if (dt == OPTIM_F32) {
            float *p = optim_var_data(v);
            for (int64_t i = 0; i < n; i++) p[i] = (float)value;
        } else if (dt != OPTIM_F64) { /* half: the value rounded once */
            uint16_t h;
            optim_convert(&h, dt, &value, OPTIM_F64, 1);
            uint16_t *p = optim_var_data(v);
            for (int64_t i = 0; i < n; i++) p[i] = h;
        } else {
            double *p = optim_var_data(v);
            for (int64_t i = 0; i < n; i++) p[i] = value;
        }
    }
    optim__slot *sl = &opt->slots[opt->nslots];
    sl->var = v;
    sl->name_id = e ? (size_t)id : OPTIM__NO_OWNER;
    sl->owner = e ? (size_t)(e - opt->vars) : OPTIM__NO_OWNER;
    sl->k = e ? e->nslots : 0;
    if (e) {
        e->slot_data[e->nslots] = optim_var_data(v);
        e->slot_ids[e->nslots++] = opt->nslots;
    }
    opt->nslots++;
    opt->weights_version++;
    if (out) *out = v;
    return OPTIM_OK;
}

static int add_slot(optim_optimizer *opt, optim_var *var, const char *slot_name, int32_t rank,
                    const int64_t *shape, optim_slot_init init, double value)
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
    long id = slot_name_id(opt, slot_name);
    for (int k = 0; id >= 0 && k < e->nslots; k++)
        if (opt->slots[e->slot_ids[k]].name_id == (size_t)id)
            return optim__opt_err(opt, OPTIM_EINVAL,
                                  "%s: slot '%s' of '%s' added twice (create_slots adds each "
                                  "slot once)",
                                  opt->cls.name, slot_name, optim_var_name(var));
    if (e->nslots == OPTIM_MAX_SLOTS)
        return optim__opt_err(opt, OPTIM_ERANGE, "%s: variable '%s' has %d slots, the most allowed",
                              opt->cls.name, optim_var_name(var), OPTIM_MAX_SLOTS);
    /* VAR/SLOT, on the stack unless long (a heap block per slot was a
     * tenth of a 100k-variable first step). */
    const char *vn = optim_var_name(var);
    size_t a = strlen(vn), b = strlen(slot_name);
    char buf[256], *full = a + b + 2 <= sizeof buf ? buf : malloc(a + b + 2);
    if (!full) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    memcpy(full, vn, a);
    full[a] = '/';
    memcpy(full + a + 1, slot_name, b + 1);
    int rc = add_state(opt, e, slot_name, full, optim_var_dtype(var), rank, shape, init, value,
                       optim_var_cdata(var), NULL);
    if (full != buf) free(full);
    return rc;
}

/* The base's slot names are not the class's to take. */
static int reserved(optim_optimizer *opt, const char *slot_name)
{
    if (!optim__k3_slot_name_reserved(opt, slot_name)) return OPTIM_OK;
    return optim__opt_err(
        opt, OPTIM_EINVAL,
        "%s: slot name '%s' is reserved for the base class in the Keras 3 "
        "generation (%s's slot); choose another name",
        opt->cls.name, slot_name,
        strcmp(slot_name, OPTIM__SLOT_AVERAGE) == 0 ? "use_ema" : "gradient_accumulation_steps");
}

int optim_add_slot(optim_optimizer *opt, optim_var *var, const char *slot_name,
                   optim_slot_init init, double value)
{
    if (reserved(opt, slot_name)) return OPTIM_EINVAL;
    if (!var) return add_slot(opt, NULL, slot_name, 0, NULL, init, value);
    return add_slot(opt, var, slot_name, optim_var_rank(var), optim_var_shape(var), init, value);
}

int optim_add_slot_shaped(optim_optimizer *opt, optim_var *var, const char *slot_name, int32_t rank,
                          const int64_t *shape, optim_slot_init init, double value)
{
    if (reserved(opt, slot_name)) return OPTIM_EINVAL;
    if (opt->cls.flags & OPTIM_CLASS_ELEMENTWISE)
        return optim__opt_err(opt, OPTIM_EINVAL,
                              "%s: slot '%s' has its own shape, which an element-wise class "
                              "cannot have (its chunks index slots like the variable)",
                              opt->cls.name, slot_name ? slot_name : "(null)");
    if (init == OPTIM_SLOT_COPY)
        return optim__opt_err(opt, OPTIM_EINVAL,
                              "%s: slot '%s' with its own shape cannot be a copy of the variable",
                              opt->cls.name, slot_name ? slot_name : "(null)");
    if (rank > 0 && !shape)
        return optim__opt_err(opt, OPTIM_EINVAL, "%s: slot '%s' shape is NULL", opt->cls.name,
                              slot_name ? slot_name : "(null)");
    return add_slot(opt, var, slot_name, rank, shape, init, value);
}

int optim_add_weight(optim_optimizer *opt, const char *name, optim_dtype dtype, int32_t rank,
                     const int64_t *shape, optim_slot_init init, double value, optim_var **out)
{
    if (out) *out = NULL;
    if (!name || !name[0])
        return optim__opt_err(opt, OPTIM_EINVAL, "%s: weight name is empty", opt->cls.name);
    if (init == OPTIM_SLOT_COPY)
        return optim__opt_err(opt, OPTIM_EINVAL, "%s: weight '%s' cannot be a copy", opt->cls.name,
                              name);
    for (size_t i = 0; i < opt->nslots; i++)
        if (strcmp(optim_var_name(opt->slots[i].var), name) == 0)
            return optim__opt_err(opt, OPTIM_EINVAL, "%s: weight '%s' exists already",
                                  opt->cls.name, name);
    if (strcmp(name, "iterations") == 0)
        return optim__opt_err(opt, OPTIM_EINVAL, "%s: weight name 'iterations' is reserved",
                              opt->cls.name);
    return add_state(opt, NULL, NULL, name, dtype, rank, shape, init, value, NULL, out);
}

optim_var *optim_get_slot(const optim_optimizer *opt, const optim_var *var, const char *slot_name)
{
    const optim__var_entry *e = var && slot_name ? optim__var_entry_of(opt, var) : NULL;
    for (int k = 0; e && k < e->nslots; k++) {
        const optim__slot *s = &opt->slots[e->slot_ids[k]];
        if (strcmp(opt->slot_names[s->name_id], slot_name) == 0) return s->var;
    }
    /* A wrapper's inner optimizers hold the update rule's slots. */
    const optim_optimizer *in;
    optim_var *found = NULL;
    for (size_t k = 0; !found && (in = optim__inner_at(opt, k)); k++)
        found = optim_get_slot(in, var, slot_name);
    return found;
}

size_t optim_get_slot_names(const optim_optimizer *opt, const char **names, size_t cap)
{
    for (size_t i = 0; i < opt->nslot_names && i < cap; i++) names[i] = opt->slot_names[i];
    return opt->nslot_names;
}

static int track(optim_optimizer *opt, optim_var *const *vars, size_t n);

optim_savepoint optim_savepoint_get(const optim_optimizer *opt)
{
    optim_savepoint sp = {0, 0, 0, 0};
    if (opt) sp = (optim_savepoint){opt->nvars, opt->nslots, opt->nslot_names, opt->iterations};
    return sp;
}

void optim_rollback(optim_optimizer *opt, const optim_savepoint *sp)
{
    /* Only backwards: a savepoint of another optimizer, or one taken before
     * an earlier rollback, holds counts above the current ones. */
    if (!opt || !sp || sp->vars_ > opt->nvars || sp->weights_ > opt->nslots ||
        sp->names_ > opt->nslot_names)
        return;
    while (opt->nslots > sp->weights_) optim_var_destroy(opt->slots[--opt->nslots].var);
    opt->weights_version++;
    while (opt->nslot_names > sp->names_) free(opt->slot_names[--opt->nslot_names]);
    while (opt->nvars > sp->vars_) optim__ptrmap_del(&opt->var_index, opt->vars[--opt->nvars].var);
    opt->iterations = sp->iterations_;
}

void optim_rollback_variables(optim_optimizer *opt, const optim_savepoint *sp)
{
    if (!opt || !sp || sp->vars_ > opt->nvars || sp->weights_ > opt->nslots ||
        sp->names_ > opt->nslot_names)
        return;
    optim__rollback_vars(opt, sp->vars_, sp->weights_, sp->names_);
}

/* The optimizer a wrapper builds first (a wrapper of several optimizers
 * builds each with its variables in create_slots). */
static optim_optimizer *inner_of(const optim_optimizer *opt)
{
    return opt->cls.inner_at ? NULL : optim__inner_at(opt, 0);
}

typedef struct build_level {
    optim_optimizer *opt;
    optim_savepoint sp;
    int built;
} build_level;

/* A wrapper builds its inner optimizers first, innermost first, as Keras's
 * wrappers do. If any level fails, every level is put back as it was. */
int optim_build(optim_optimizer *opt, optim_var *const *vars, size_t n)
{
    size_t depth = 0;
    for (optim_optimizer *o = opt; o; o = inner_of(o)) depth++;
    build_level *lv = optim__malloc(depth * sizeof *lv);
    if (!lv) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    size_t d = 0;
    for (optim_optimizer *o = opt; o; o = inner_of(o))
        lv[d++] = (build_level){o, optim_savepoint_get(o), o->built};
    int rc = OPTIM_OK;
    size_t failed = 0;
    for (size_t k = depth; k-- > 0 && !rc;) {
        rc = track(lv[k].opt, vars, n);
        if (rc) failed = k;
        else lv[k].opt->built = 1;
    }
    /* The levels built already forget the variables and destroy their slots
     * (weights of the optimizer itself stay: its class may hold them). */
    for (size_t k = failed + 1; rc && k < depth; k++) {
        optim_rollback_variables(lv[k].opt, &lv[k].sp);
        lv[k].opt->built = lv[k].built;
    }
    for (size_t k = failed; rc && k-- > 0;)
        rc = optim_set_error(lv[k].opt, OPTIM_EINVAL, "%s: inner optimizer: %s",
                             lv[k].opt->cls.name, optim_errmsg(lv[k + 1].opt));
    free(lv);
    return rc;
}

int optim_track_variables(optim_optimizer *opt, optim_var *const *vars, size_t n)
{
    return track(opt, vars, n);
}

/* Each of the n variables given once (sorted copy: n log n). */
static int check_distinct(optim_optimizer *opt, optim_var *const *vars, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!vars[i]) return optim__opt_err(opt, OPTIM_EINVAL, "optim_build: vars[%zu] is NULL", i);
    const void **sorted = optim__malloc(n * sizeof *sorted);
    if (n && !sorted) return optim__opt_err(opt, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) sorted[i] = vars[i];
    optim_var *twice = (optim_var *)optim__ptrs_repeated(sorted, n);
    free(sorted);
    if (twice)
        return optim__opt_err(opt, OPTIM_EINVAL, "optim_build: variable '%s' given twice",
                              optim_var_name(twice));
    return OPTIM_OK;
}

static int track(optim_optimizer *opt, optim_var *const *vars, size_t n)
{
    if (n && !vars) return optim__opt_err(opt, OPTIM_EINVAL, "optim_build: vars is NULL");
    int rc = check_distinct(opt, vars, n);
    if (rc) return rc;
    optim_error err;
    for (size_t i = 0; i < n; i++) { /* a wrapper's refusal of half variables, as in its steps */
        const optim_grad_var p = {optim_grad_dense(optim_var_tensor(vars[i])), vars[i]};
        if (optim__check_half_wrapper(opt, &p, 1, &err)) return optim__opt_take(opt, &err);
    }
    /* Hooks read this step's hyperparameter values (optim_param_value). */
    if (optim__resolve(opt, &err)) return optim__opt_take(opt, &err);
    size_t nv = opt->nvars, ns = opt->nslots, nn = opt->nslot_names;
    for (size_t i = 0; i < n; i++) {
        if (optim__track_var(opt, vars[i], &err)) {
            optim__rollback_vars(opt, nv, ns, nn);
            return optim__opt_take(opt, &err);
        }
    }
    optim__order_new_slots(opt, ns);
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}
