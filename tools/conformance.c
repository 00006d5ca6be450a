/* optim conformance CLASS_NAME [--generation keras3|legacy] [--config JSON]:
 * runs the conformance checker (optim/conformance.h) on a registered class,
 * usually one a plugin brought, and prints one line per check
 * (PASS/FAIL/SKIP, the check, what was expected, what was seen), then
 * "N passed, M failed". Exit status 0 only if every check passed. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "optim/optim.h"

static const char usage_text[] =
    "usage: optim [--plugin PATH]... conformance CLASS_NAME [--generation keras3|legacy] [--config JSON]\n"
    "\n"
    "Checks a registered optimizer class against the contract of optim/optimizer_class.h\n"
    "(docs/custom-optimizer.md, \"Check it\"): one line per check, then N passed, M failed.\n"
    "  --generation G  keras3 or legacy (default: keras3 unless the class is legacy-only)\n"
    "  --config JSON   config keys for every optimizer the checker creates, as a JSON object\n"
    "                  ('{\"momentum\": 0.9}'; a wrapper needs its inner optimizer here)\n";

static void print(void *user, const optim_conformance_result *r)
{
    int *write_failed = user;
    const char *tag = r->passed > 0 ? "PASS" : r->passed == 0 ? "FAIL" : "SKIP";
    if (printf("%s %s: expected %s; seen %s\n", tag, r->check, r->expected, r->seen) < 0)
        *write_failed = 1;
}

static int parse(int argc, char **argv, const char **name, optim_conformance_options *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return fputs(usage_text, stdout) < 0 ? 1 : -1;
        if ((strcmp(a, "--generation") == 0 || strcmp(a, "--config") == 0) && i + 1 >= argc) {
            fprintf(stderr, "optim conformance: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--generation") == 0) {
            const char *g = argv[++i];
            if (strcmp(g, "keras3") && strcmp(g, "legacy")) {
                fprintf(stderr, "optim conformance: --generation '%s', expected keras3 or legacy\n",
                        g);
                return 2;
            }
            o->generation = strcmp(g, "legacy") == 0 ? OPTIM_LEGACY : OPTIM_KERAS3;
        } else if (strcmp(a, "--config") == 0) {
            o->config = argv[++i];
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
    return 0;
}

int optim_cmd_conformance(int argc, char **argv)
{
    const char *name = NULL;
    optim_conformance_options o = optim_conformance_defaults();
    int rc = parse(argc, argv, &name, &o);
    if (rc) return rc < 0 ? optim_tool_finish_stdout("conformance", 0) : rc;
    int write_failed = 0, passed = 0, failed = 0;
    o.report = print;
    o.user = &write_failed;
    optim_error err;
    if (optim_conformance_check(name, &o, &passed, &failed, &err)) {
        fprintf(stderr, "optim conformance: %s\n", err.msg);
        return 1;
    }
    if (printf("%d passed, %d failed\n", passed, failed) < 0 || fflush(stdout) || write_failed) {
        fprintf(stderr, "optim conformance: cannot write the report\n");
        return 1;
    }
    return failed ? 1 : 0;
}
