/* optim train across processes: detecting an mpirun launch and making the
 * replica group. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replicas.h"

/* The number of processes the launcher started (Open MPI's mpirun sets
 * OMPI_COMM_WORLD_SIZE, other PMI launchers PMI_SIZE); 1 without one. */
int optim_tool_launch_size(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        char *end;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && *v && !*end && n >= 1 && n < 1000000) return (int)n;
    }
    return 1;
}

int optim_tool_group_open(int shard, double timeout, optim_group **g, char *msg, size_t cap)
{
    optim_error err;
    optim_group_options o = optim_group_defaults();
    o.shard_optimizer_state = shard;
    o.timeout_seconds = timeout;
    int n = optim_tool_launch_size();
    *g = NULL;
    if (n > 1 && !optim_mpi_available()) {
        snprintf(
            msg, cap,
            "started as one of %d processes (mpirun) but this optim was built without MPI; install "
            "Open MPI (scripts/deps.sh) and rebuild",
            n);
        return 1;
    }
    if (n == 1 && !shard) return 0; /* one process: no group at all */
    int rc =
        n > 1 ? optim_group_create_mpi(g, NULL, &o, &err) : optim_group_create_single(g, &o, &err);
    if (rc) snprintf(msg, cap, "%s", err.msg);
    return rc ? 1 : 0;
}
