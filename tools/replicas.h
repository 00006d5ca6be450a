/* optim train across processes (tools/replicas.c). Each returns 0, or 1
 * with a message in msg. */
#ifndef OPTIM_TOOLS_REPLICAS_H
#define OPTIM_TOOLS_REPLICAS_H

#include <stddef.h>

#include "job.h"
#include "optim/distribute.h"

int optim_tool_launch_size(void);
/* A group for this launch: MPI under mpirun, a single group for --shard-
 * optimizer-state alone, else none (*g NULL). */
int optim_tool_group_open(int shard, double timeout, optim_group **g, char *msg, size_t cap);
/* Collective, before the first step: every rank has the same settings
 * (model, optimizer config, seed, batch size, steps, epochs, limit,
 * sharding, data size...), else all fail with a message naming each
 * difference. 1 after a message. */
int optim_tool_replicas_check(const char *cmd, optim_group *g, const job_config *c,
                              const job_data *d, optim_optimizer *opt, optim_model *m);
/* Arms the watchdog (seconds > 0): unless disarmed (seconds 0) by then, it
 * prints "optim train: rank R: replicas did not all WHAT within S s" and
 * ends the process with status 1. Under mpirun optim_tool_group_open arms
 * it around MPI's start-up ("start"). */
void optim_tool_watchdog(double seconds, const char *what);
#endif
