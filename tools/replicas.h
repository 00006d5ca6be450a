/* optim train across processes (tools/replicas.c). Each returns 0, or 1
 * with a message in msg. */
#ifndef OPTIM_TOOLS_REPLICAS_H
#define OPTIM_TOOLS_REPLICAS_H

#include <stddef.h>

#include "optim/distribute.h"

int optim_tool_launch_size(void);
/* A group for this launch: MPI under mpirun, a single group for --shard-
 * optimizer-state alone, else none (*g NULL). */
int optim_tool_group_open(int shard, double timeout, optim_group **g, char *msg, size_t cap);
#endif
