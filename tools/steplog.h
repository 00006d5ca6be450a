/* The per-step logs of `optim train` and `optim compare` (docs/command.md):
 * --log FILE.jsonl, one JSON object per optimizer step, and --tensorboard
 * DIR, TensorBoard event files (tfevents.h). Internal to tools/. */
#ifndef OPTIM_TOOLS_STEPLOG_H
#define OPTIM_TOOLS_STEPLOG_H

#include "optim/optim.h"

typedef struct step_log step_log;

/* Opens --log PATH ("a": appends, for --resume; "w": truncates) and
 * remembers --tensorboard DIR (either may be NULL). 1 after a message. */
int optim_step_log_open(const char *cmd, const char *jsonl, const char *mode, const char *tb_dir,
                        step_log **out);
/* Starts a run: label names it in every JSON line ("optimizer"); its event
 * file goes into DIR/<sub> (sub NULL: DIR itself). The first step is
 * first_step + 1. 1 after a message. */
int optim_step_log_run(const char *cmd, step_log *s, const char *label, const char *sub,
                       int64_t first_step);
/* The callback that writes the run's steps (NULL s: *out = NULL, 0). */
int optim_step_log_callback(const char *cmd, step_log *s, optim_callback **out);
/* Closes the run's event file; 1 after a message. */
int optim_step_log_end_run(const char *cmd, step_log *s);
/* Closes everything (NULL: no-op); 1 after a message if a close failed. */
int optim_step_log_close(const char *cmd, step_log *s);

#endif
