/* optim conformance's pieces shared by its files. */
#ifndef OPTIM_TOOLS_CONFORMANCE_H
#define OPTIM_TOOLS_CONFORMANCE_H

typedef struct conformance_counts {
    int passed, failed, crashed;
    int write_failed; /* standard output could not be written */
} conformance_counts;

/* Every group of checks in a child process of its own (this command again
 * with --group), the lines passed on and counted into *k. Returns 1 when
 * the checks could not start (the child said why on stderr). */
int optim_tool_conformance_isolated(conformance_counts *k);
/* The same for one group (the reference comparison runs as group
 * "reference"). */
int optim_tool_conformance_isolated_group(const char *group, conformance_counts *k);

/* What --reference compares (conformance_reference.c). */
typedef struct conformance_reference_args {
    const char *class_name, *path; /* REF.safetensors */
    const char *config; /* --config, or NULL: REF's, else the defaults */
    const char *rtol, *atol; /* --rtol, --atol, or NULL: REF's */
    int generation; /* OPTIM_CONFORMANCE_AUTO or the one forced */
} conformance_reference_args;

/* Steps the class along REF and prints one PASS/FAIL line per variable,
 * counted in *k. Returns 1 after a message on stderr when REF or the
 * options are bad or a step fails. */
int optim_tool_conformance_reference(const conformance_reference_args *a, conformance_counts *k);

#endif
