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

#endif
