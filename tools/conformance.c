/* optim conformance CLASS_NAME [--generation keras3|legacy] [--config JSON]
 * [--group NAME | --in-process] [--reference REF [--rtol X] [--atol Y]]:
 * runs the conformance checker
 * (optim/conformance.h) on a registered class, usually one a plugin
 * brought, and prints one line per check (PASS/FAIL/SKIP, the check, what
 * was expected, what was seen; CRASH for a group whose process died), each
 * flushed as printed, then "N passed, M failed" (", K crashed" where any).
 * Each group of checks runs in a process of its own (conformance_isolate.c)
 * unless --group or --in-process asks for this process. --reference
 * compares the class's trajectory with REF instead (conformance_reference.c),
 * as group "reference", in a process of its own too. Exit status 0 only
 * if every check passed. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "conformance.h"
#include "optim/optim.h"

static const char usage_text[] =
    "usage: optim [--plugin PATH]... conformance CLASS_NAME [--generation keras3|legacy] [--config JSON]\n"
    "       optim [--plugin PATH]... conformance CLASS_NAME --reference REF [--config JSON]\n"
    "             [--rtol X] [--atol Y]\n"
    "\n"
    "Checks a registered optimizer class against the contract of optim/optimizer_class.h\n"
    "(docs/custom-optimizer.md, \"Check it\"): one line per check, then N passed, M failed.\n"
    "  --generation G  keras3 or legacy (default: keras3 unless the class is legacy-only)\n"
    "  --config JSON   config keys for every optimizer the checker creates, as a JSON object\n"
    "                  ('{\"momentum\": 0.9}'; a wrapper needs its inner optimizer here)\n"
    "  --group NAME    only this group of checks (table, config, update, threads, chunks,\n"
    "                  sparse, slots, hypers, failure, reference), in this process\n"
    "  --in-process    every group in this process (by default each group runs in a process\n"
    "                  of its own, and a crash is reported as CRASH GROUP (SIGNAL))\n"
    "  --reference REF compare the trajectory with the author's instead (REF.safetensors:\n"
    "                  init/NAME, grads/STEP/NAME[/indices|/values], expect/NAME, metadata rtol\n"
    "                  and atol; tools/make_reference.py writes one): a line per variable\n"
    "  --rtol X, --atol Y  the tolerances of --reference (default: REF's metadata)\n";

static void print(void *user, const optim_conformance_result *r)
{
    int *write_failed = user;
    const char *tag = r->passed > 0 ? "PASS" : r->passed == 0 ? "FAIL" : "SKIP";
    /* Flushed line by line: a crash later in the run keeps what was said. */
    if (printf("%s %s: expected %s; seen %s\n", tag, r->check, r->expected, r->seen) < 0 ||
        fflush(stdout))
        *write_failed = 1;
}

/* One option that takes a value; 0, or 2 after a message. */
static int set_valued(const char *a, const char *v, optim_conformance_options *o,
                      conformance_reference_args *ref)
{
    if (strcmp(a, "--generation") == 0) {
        if (strcmp(v, "keras3") && strcmp(v, "legacy")) {
            fprintf(stderr, "optim conformance: --generation '%s', expected keras3 or legacy\n", v);
            return 2;
        }
        o->generation = strcmp(v, "legacy") == 0 ? OPTIM_LEGACY : OPTIM_KERAS3;
    } else if (strcmp(a, "--config") == 0) {
        o->config = ref->config = v;
    } else if (strcmp(a, "--group") == 0) {
        o->group = v;
        if (!optim_conformance_group_doing(o->group)) {
            fprintf(stderr,
                    "optim conformance: --group '%s', expected table, config, update, "
                    "threads, chunks, sparse, slots, hypers, failure or reference\n",
                    o->group);
            return 2;
        }
    } else if (strcmp(a, "--reference") == 0) {
        ref->path = v;
    } else if (strcmp(a, "--rtol") == 0) {
        ref->rtol = v;
    } else {
        ref->atol = v;
    }
    return 0;
}

static int parse(int argc, char **argv, const char **name, optim_conformance_options *o,
                 conformance_reference_args *ref, int *in_process)
{
    static const char *const valued[] = {"--generation", "--config", "--group",
                                         "--reference",  "--rtol",   "--atol"};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return fputs(usage_text, stdout) < 0 ? 1 : -1;
        int takes = 0, rc;
        for (size_t v = 0; v < sizeof valued / sizeof *valued; v++) takes |= !strcmp(a, valued[v]);
        if (takes && i + 1 >= argc) {
            fprintf(stderr, "optim conformance: %s needs a value\n", a);
            return 2;
        }
        if (takes) {
            if ((rc = set_valued(a, argv[++i], o, ref))) return rc;
        } else if (strcmp(a, "--in-process") == 0) {
            *in_process = 1;
        } else if (a[0] == '-' || *name) {
            fprintf(stderr,
                    "optim conformance: unexpected argument '%s' (see optim conformance --help)\n",
                    a);
            return 2;
        } else {
            *name = a;
        }
    }
    if (!*name) {
        fprintf(
            stderr,
            "usage: optim conformance CLASS_NAME [--generation keras3|legacy] [--config JSON]\n");
        return 2;
    }
    if ((ref->rtol || ref->atol) && !ref->path) {
        fprintf(stderr, "optim conformance: --rtol and --atol go with --reference REF\n");
        return 2;
    }
    if (ref->path && o->group && strcmp(o->group, "reference")) {
        fprintf(stderr, "optim conformance: --reference runs the group reference, not '%s'\n",
                o->group);
        return 2;
    }
    return 0;
}

/* Every check (or --group's) in this process. */
static int run_here(const char *name, optim_conformance_options *o,
                    const conformance_reference_args *ref, conformance_counts *k)
{
    if (ref->path) return optim_tool_conformance_reference(ref, k);
    o->report = print;
    o->user = &k->write_failed;
    optim_error err;
    if (optim_conformance_check(name, o, &k->passed, &k->failed, &err)) {
        fprintf(stderr, "optim conformance: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int optim_cmd_conformance(int argc, char **argv)
{
    const char *name = NULL;
    optim_conformance_options o = optim_conformance_defaults();
    conformance_reference_args ref = {0};
    int in_process = 0;
    int rc = parse(argc, argv, &name, &o, &ref, &in_process);
    if (rc) return rc < 0 ? optim_tool_finish_stdout("conformance", 0) : rc;
    ref.class_name = name;
    ref.generation = o.generation;
    conformance_counts k = {0};
    if (o.group || in_process) rc = run_here(name, &o, &ref, &k);
    else if (ref.path) rc = optim_tool_conformance_isolated_group("reference", &k);
    else rc = optim_tool_conformance_isolated(&k);
    if (rc) return 1;
    char crashed[32] = "";
    if (k.crashed) snprintf(crashed, sizeof crashed, ", %d crashed", k.crashed);
    if (printf("%d passed, %d failed%s\n", k.passed, k.failed, crashed) < 0 || fflush(stdout) ||
        k.write_failed) {
        fprintf(stderr, "optim conformance: cannot write the report\n");
        return 1;
    }
    return k.failed || k.crashed ? 1 : 0;
}
