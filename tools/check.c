/* optim check CONFIG: loads an optimizer config (a JSON file) exactly as
 * replay and train do, and prints its normalised Keras serialization (every
 * key with its default filled in) on one line, or one line on stderr saying
 * what is wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "optim/optim.h"

int optim_cmd_check(int argc, char **argv)
{
    if (argc == 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        if (printf(
                "usage: optim check CONFIG\n\nLoads an optimizer config (a JSON file) and prints it with "
                "every default filled in.\n") < 0)
            return 1;
        return 0;
    }
    if (argc != 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: optim check CONFIG (a JSON file; see optim check --help)\n");
        return 2;
    }
    optim_error err;
    char *text = optim_tool_read_text(argv[0], &err);
    if (!text) {
        fprintf(stderr, "optim check: CONFIG %s\n", err.msg);
        return 1;
    }
    optim_optimizer *opt;
    int rc = optim_from_json(&opt, text, &err);
    free(text);
    if (rc) {
        fprintf(stderr, "optim check: CONFIG %s: %s\n", argv[0], err.msg);
        return 1;
    }
    char *out = optim_serialize(opt);
    if (!out) {
        fprintf(stderr, "optim check: %s\n", optim_errmsg(opt));
        optim_destroy(opt);
        return 1;
    }
    printf("%s\n", out);
    optim_free(out);
    optim_destroy(opt);
    return optim_tool_finish_stdout("check", 0);
}
