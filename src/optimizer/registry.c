/* The one registry mechanism, for every kind of class that configs name:
 * optimizer classes (looked up case-insensitively, ignoring TF Addons'
 * "Addons>" prefix, as keras.optimizers.get does) and schedule classes
 * (case-sensitive, as Keras's schedule deserialization; "Addons>NAME" for
 * TF Addons' schedules), and the scale functions that CyclicalLearningRate
 * configs name (case-sensitive, none built in). Built-ins first,
 * then registered classes: copies owned by the registry, alive for the
 * process, in a list so that pointers handed out stay valid as it grows.
 * Not thread-safe: register at start-up. */
#include "optimizer/params.h"
#include "optim/optimizers.h"
#include "optim/schedules.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct entry {
    struct entry *next;
    const char *name; /* points into the copy */
    max_align_t copy[]; /* the class table, copied */
} entry;

typedef struct registry {
    const char *what; /* "optimizer class", for messages */
    int case_insensitive;
    const void *const *builtins; /* NULL-terminated */
    const char *(*name_of)(const void *cls);
    entry *head;
} registry;

static int same_name(const registry *r, const char *a, const char *b)
{
    return (r->case_insensitive ? strcasecmp(a, b) : strcmp(a, b)) == 0;
}

static const void *reg_builtin(const registry *r, const char *name)
{
    for (size_t i = 0; name && r->builtins[i]; i++)
        if (same_name(r, r->name_of(r->builtins[i]), name)) return r->builtins[i];
    return NULL;
}

static const void *reg_find(const registry *r, const char *name)
{
    const void *b = reg_builtin(r, name);
    if (b) return b;
    for (const entry *e = r->head; e; e = e->next)
        if (same_name(r, e->name, name)) return e->copy;
    return NULL;
}

/* The i-th class: the built-ins in order, then the registered ones in the
 * order they were registered (the list holds them newest first). */
static const void *reg_at(const registry *r, size_t i)
{
    size_t nb = 0, n = 0;
    while (r->builtins[nb]) nb++;
    if (i < nb) return r->builtins[i];
    for (const entry *e = r->head; e; e = e->next) n++;
    if (i - nb >= n) return NULL;
    const entry *e = r->head;
    for (size_t k = n - 1 - (i - nb); k > 0; k--) e = e->next;
    return e->copy;
}

/* Adds a copy made by copy(dst, cls) of `bytes` bytes. */
static int reg_add(registry *r, const void *cls, size_t bytes, void (*copy)(void *, const void *),
                   optim_error *err)
{
    const char *name = r->name_of(cls);
    if (reg_find(r, name))
        return optim__err(err, OPTIM_EINVAL, "%s '%s' is already registered", r->what, name);
    entry *e = calloc(1, sizeof *e + bytes);
    if (!e) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    copy(e->copy, cls);
    e->name = r->name_of(e->copy);
    e->next = r->head;
    r->head = e;
    optim__err_clear(err);
    return OPTIM_OK;
}

/* ---- optimizer classes ------------------------------------------------------------ */

static const void *const optimizer_builtins[] = {
#define OPTIM__BUILTIN_ENTRY(sym) &sym,
    OPTIM_BUILTIN_CLASSES(OPTIM__BUILTIN_ENTRY)
#undef OPTIM__BUILTIN_ENTRY
        NULL};

static const char *optimizer_name(const void *c) { return ((const optim_class *)c)->name; }
static void optimizer_copy(void *dst, const void *src) { optim__class_copy(dst, src); }

static registry optimizers = {"optimizer class", 1, optimizer_builtins, optimizer_name, NULL};

const optim_class *optim_find_class(const char *name)
{
    if (!name) return NULL;
    /* TF Addons registers its optimizers as "Addons>LAMB", "Addons>LazyAdam":
     * that spelling finds only a class TF Addons has under the name
     * (tfa_name), not Keras 3's MultiOptimizer for "Addons>MultiOptimizer". */
    if (strncmp(name, "Addons>", 7) != 0) return reg_find(&optimizers, name);
    const optim_class *c = reg_find(&optimizers, name + 7);
    const char *tfa = c ? optim__tfa_name(c) : NULL;
    return tfa && strcasecmp(tfa, name + 7) == 0 ? c : NULL;
}

const optim_class *optim_class_at(size_t i) { return reg_at(&optimizers, i); }

int optim__unknown_class(optim_error *err, const char *name)
{
    const optim_class *own =
        name && strncmp(name, "Addons>", 7) == 0 ? reg_find(&optimizers, name + 7) : NULL;
    if (own)
        return optim__err(err, OPTIM_ENOTFOUND,
                          "unknown optimizer class '%s': optim has no TF Addons class '%s' "
                          "(without the prefix it is optim's own '%s', not TF Addons')",
                          name, name + 7, own->name);
    return optim__err(err, OPTIM_ENOTFOUND, "unknown optimizer class '%s'", name ? name : "(null)");
}

/* A name that lookup rewrites could never be found: optim_find_class reads
 * "Addons>NAME" as TF Addons' NAME, and a config's "Custom>NAME" (tf-keras's
 * registered name) is looked up as NAME. */
static int check_prefix(const char *name, optim_error *err)
{
    static const char *const prefixes[] = {"Addons>", "Custom>"};
    for (size_t i = 0; i < 2; i++)
        if (strncmp(name, prefixes[i], 7) == 0)
            return optim__err(err, OPTIM_EINVAL,
                              "optimizer class name '%s' starts with \"%s\", which lookup strips "
                              "(it would look for '%s'): register the class as '%s'",
                              name, prefixes[i], name + 7, name + 7);
    return OPTIM_OK;
}

int optim_register_class(const optim_class *cls, optim_error *err)
{
    int rc = optim__class_check(cls, err);
    if (!rc) rc = check_prefix(cls->name, err);
    if (rc) return rc;
    return reg_add(&optimizers, cls, sizeof(optim_class), optimizer_copy, err);
}

/* ---- schedule classes ------------------------------------------------------------- */

static const void *const schedule_builtins[] = {
#define OPTIM__SCHEDULE_ENTRY(sym) &sym,
    OPTIM_BUILTIN_SCHEDULES(OPTIM__SCHEDULE_ENTRY)
#undef OPTIM__SCHEDULE_ENTRY
        NULL};

static const char *schedule_name(const void *c) { return ((const optim_schedule_class *)c)->name; }
static void schedule_copy(void *dst, const void *src) { optim__schedule_class_copy(dst, src); }

static registry schedules = {"schedule class", 0, schedule_builtins, schedule_name, NULL};

const optim_schedule_class *optim_find_schedule_class(const char *name)
{
    if (!name) return NULL;
    /* TF Addons registers its schedules as "Addons>CyclicalLearningRate":
     * that spelling finds only a class TF Addons has (tfa_module). */
    if (strncmp(name, "Addons>", 7) != 0) return reg_find(&schedules, name);
    const optim_schedule_class *c = reg_find(&schedules, name + 7);
    return c && c->tfa_module ? c : NULL;
}

const optim_schedule_class *optim_schedule_class_at(size_t i) { return reg_at(&schedules, i); }

int optim__schedule_class_is_builtin(const char *name)
{
    return reg_builtin(&schedules, name) != NULL;
}

int optim_register_schedule_class(const optim_schedule_class *cls, optim_error *err)
{
    int rc = optim__schedule_class_check(cls, err);
    if (rc) return rc;
    return reg_add(&schedules, cls, sizeof(optim_schedule_class), schedule_copy, err);
}

/* ---- CyclicalLearningRate's scale functions ---------------------------------------- */

typedef struct scale_entry {
    char name[128];
    optim_scale_fn fn;
    void *ctx;
} scale_entry;

static const void *const no_builtins[] = {NULL};

static const char *scale_name(const void *e) { return ((const scale_entry *)e)->name; }
static void scale_copy(void *dst, const void *src) { memcpy(dst, src, sizeof(scale_entry)); }

static registry scale_fns = {"scale function", 0, no_builtins, scale_name, NULL};

int optim_register_scale_fn(const char *name, optim_scale_fn fn, void *ctx, optim_error *err)
{
    if (!name || !name[0] || !fn)
        return optim__err(err, OPTIM_EINVAL,
                          "optim_register_scale_fn: needs a name and a function");
    scale_entry e = {{0}, fn, ctx};
    if (strlen(name) >= sizeof e.name)
        return optim__err(err, OPTIM_EINVAL,
                          "scale function name '%.40s...' is longer than %zu bytes", name,
                          sizeof e.name - 1);
    memcpy(e.name, name, strlen(name) + 1);
    return reg_add(&scale_fns, &e, sizeof e, scale_copy, err);
}

optim_scale_fn optim_find_scale_fn(const char *name, void **ctx)
{
    const scale_entry *e = name ? reg_find(&scale_fns, name) : NULL;
    if (ctx) *ctx = e ? e->ctx : NULL;
    return e ? e->fn : NULL;
}
