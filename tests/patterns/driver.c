/* For tests/patterns/vs_python.sh: reads lines "PATTERN<TAB>NAME" and
 * prints, per line, "E" when optim_name_patterns refuses PATTERN, else
 * "R S F": whether it is found in NAME (re.search) and matches all of it
 * (re.fullmatch). */
#include <stdio.h>
#include <string.h>

#include "optim/optim.h"

int main(void)
{
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab) return fprintf(stderr, "driver: no tab in '%s'\n", line), 2;
        *tab = '\0';
        const char *list[1] = {line};
        int hit[2], refused = 0;
        for (int full = 0; full < 2 && !refused; full++) {
            optim_name_patterns *p = NULL;
            optim_error err;
            const uint32_t flags = full ? OPTIM_NAME_PATTERNS_FULL : 0;
            refused = optim_name_patterns_compile_flags(&p, list, 1, "p", flags, &err) != 0;
            if (!refused) hit[full] = optim_name_patterns_match(p, tab + 1);
            optim_name_patterns_free(p);
        }
        if (refused ? puts("E") < 0 : printf("R %d %d\n", hit[0], hit[1]) < 0) return 1;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
