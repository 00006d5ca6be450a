/* The subcommands of the `optim` tool (internal to tools/). */
#ifndef OPTIM_TOOLS_COMMANDS_H
#define OPTIM_TOOLS_COMMANDS_H

#include "optim/status.h"

/* Each returns the process exit status. */
int optim_cmd_replay(int argc, char **argv);
int optim_cmd_bench(int argc, char **argv);
int optim_cmd_check(int argc, char **argv);
int optim_cmd_train(int argc, char **argv);
int optim_cmd_compare(int argc, char **argv);
int optim_cmd_schedule_plot(int argc, char **argv);

/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL on error
 * with err filled. */
char *optim_tool_read_text(const char *path, optim_error *err);

#endif
