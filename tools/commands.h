/* The subcommands of the `optim` tool (internal to tools/). */
#ifndef OPTIM_TOOLS_COMMANDS_H
#define OPTIM_TOOLS_COMMANDS_H

#include "optim/status.h"

/* Each returns the process exit status. */
int optim_cmd_replay(int argc, char **argv);
int optim_cmd_bench(int argc, char **argv);
int optim_cmd_version(int argc, char **argv);
int optim_cmd_check(int argc, char **argv);
int optim_cmd_train(int argc, char **argv);
int optim_cmd_compare(int argc, char **argv);
int optim_cmd_schedule_plot(int argc, char **argv);
int optim_cmd_conformance(int argc, char **argv);
int optim_cmd_new_plugin(int argc, char **argv);
int optim_cmd_lr_find(int argc, char **argv);

/* Loads the plugins of OPTIM_PLUGINS, then those of the leading --plugin
 * PATH options, which it removes from argc/argv (argv[1] becomes the
 * subcommand). Returns 0, or the exit status after one line on stderr. */
int optim_tool_load_plugins(int *argc, char ***argv);
int optim_tool_load_plugin(const char *path);

/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL on error
 * with err filled. */
char *optim_tool_read_text(const char *path, optim_error *err);
/* 1 after a message when PATH (given for OPTION) cannot be written. */
int optim_tool_check_output(const char *cmd, const char *option, const char *path);

/* Flushes standard output: returns rc if everything written reached it,
 * else says so on stderr and returns rc, or 1 if rc is 0 (`optim check cfg
 * > /dev/full` must not exit 0). */
int optim_tool_finish_stdout(const char *cmd, int rc);

/* The command line main() was given, global options included (a
 * subcommand that runs itself again in a child process uses it). */
extern char **optim_tool_argv;

#endif
