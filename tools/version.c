/* optim version [--json]: the version, and the instruction-set level the
 * kernels run at (optim/isa.h) with the levels this CPU runs. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#include "optim/optim.h"

static void print_levels(const char *sep, const char *quote)
{
    const char *s = "";
    for (int l = OPTIM_ISA_SSE2; l <= OPTIM_ISA_BUILT_IN; l++) {
        if (!optim_isa_supported((optim_isa_level)l)) continue;
        printf("%s%s%s%s", s, quote, optim_isa_name((optim_isa_level)l), quote);
        s = sep;
    }
}

int optim_cmd_version(int argc, char **argv)
{
    const int json = argc == 1 && strcmp(argv[0], "--json") == 0;
    if (argc > 0 && !json) {
        fprintf(stderr, "optim version: unknown argument '%s' (expected --json or nothing)\n",
                argv[0]);
        return 2;
    }
    optim_isa_level level;
    optim_error err;
    if (optim_isa(&level, &err)) {
        fprintf(stderr, "optim version: %s\n", err.msg);
        return 2;
    }
    if (json) {
        printf("{\"version\": \"%d.%d.%d\", \"isa\": \"%s\", \"isa_supported\": [",
               OPTIM_VERSION_MAJOR, OPTIM_VERSION_MINOR, OPTIM_VERSION_PATCH,
               optim_isa_name(level));
        print_levels(", ", "\"");
        printf("]}\n");
    } else {
        printf("optim %d.%d.%d\nisa: %s (this CPU runs: ", OPTIM_VERSION_MAJOR, OPTIM_VERSION_MINOR,
               OPTIM_VERSION_PATCH, optim_isa_name(level));
        print_levels(" ", "");
        printf("; OPTIM_ISA chooses one)\n");
    }
    return optim_tool_finish_stdout("version", 0);
}
