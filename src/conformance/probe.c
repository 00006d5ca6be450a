/* The probe class: a copy of the checked class, registered once as
 * "<NAME>.conformance_probe", whose create_slots runs the class's own and
 * then fails for a variable named "conformance/fail". It lets the failure
 * check make a hook fail after the class's hook has done its work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"

#define SUFFIX ".conformance_probe"

/* Calls of the probe's create_slots: a wrapper may never call its own hook
 * during a step, and then there is nothing to fail. Like the registry, a
 * process-wide value; the checker is not thread-safe. */
static long probe_calls;

long optim__cf_probe_calls(void) { return probe_calls; }

static int probe_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    char name[CF_TEXT];
    probe_calls++;
    snprintf(name, sizeof name, "%s", optim_class_of(opt)->name);
    size_t len = strlen(name), sl = strlen(SUFFIX);
    if (len > sl) name[len - sl] = '\0';
    const optim_class *orig = optim_find_class(name);
    if (orig && orig->create_slots) {
        int rc = orig->create_slots(opt, var, err);
        if (rc) return rc;
    }
    if (strcmp(optim_var_name(var), OPTIM__CF_FAIL_VAR) == 0)
        return optim_error_set(err, OPTIM_EINVAL, "%s: create_slots failed on purpose for '%s'",
                               optim_class_of(opt)->name, OPTIM__CF_FAIL_VAR);
    return OPTIM_OK;
}

int optim__cf_register_copy(const cf_ctx *c, optim_class copy, const char *suffix,
                            int (*mine)(const optim_class *), char *name, size_t n, char *why,
                            size_t wn)
{
    snprintf(name, n, "%s%s", c->cls->name, suffix);
    const optim_class *have = optim_find_class(name);
    if (have) return mine(have) ? 0 : (snprintf(why, wn, "'%s' is taken", name), 1);
    /* The registry borrows the name for the process: it stays allocated. */
    char *kept = malloc(strlen(name) + 1);
    if (!kept) return snprintf(why, wn, "out of memory"), 1;
    copy.name = strcpy(kept, name);
    optim_error err = {0};
    if (optim_register_class(&copy, &err)) {
        free(kept);
        return snprintf(why, wn, "registering %s: %s", name, err.msg), 1;
    }
    return 0;
}

static int is_probe(const optim_class *k) { return k->create_slots == probe_create_slots; }

int optim__cf_probe(const cf_ctx *c, char *name, size_t n, char *why, size_t wn)
{
    optim_class probe = *c->cls;
    probe.create_slots = probe_create_slots;
    return optim__cf_register_copy(c, probe, SUFFIX, is_probe, name, n, why, wn);
}
