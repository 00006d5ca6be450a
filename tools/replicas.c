/* optim train across processes: detecting an mpirun launch, the replica
 * group, stopping after --steps, and --save-weights (rank 0 writes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replicas.h"
#include "optim/safetensors.h"

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
        snprintf(msg, cap, "started as one of %d processes (mpirun) but this optim was built without MPI; install "
                 "Open MPI (scripts/deps.sh) and rebuild", n);
        return 1;
    }
    if (n == 1 && !shard) return 0; /* one process: no group at all */
    int rc = n > 1 ? optim_group_create_mpi(g, NULL, &o, &err) : optim_group_create_single(g, &o, &err);
    if (rc) snprintf(msg, cap, "%s", err.msg);
    return rc ? 1 : 0;
}

static int stop_after(void *user, optim_model *m, int64_t batch, optim_logs *logs, optim_error *err)
{
    int64_t *left = user;
    (void)batch, (void)logs, (void)err;
    if (--*left <= 0) optim_model_stop_training(m);
    return 0;
}

int optim_tool_steps_callback(int64_t *steps, optim_callback **cb, char *msg, size_t cap)
{
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.on_train_batch_end = stop_after;
    optim_error err;
    if (optim_callback_create(cb, &h, steps, &err)) {
        snprintf(msg, cap, "%s", err.msg);
        return 1;
    }
    return 0;
}

int optim_tool_save_weights(optim_model *m, const char *path, char *msg, size_t cap)
{
    size_t n = optim_model_variables(m, NULL, 0);
    optim_var **vars = malloc((n ? n : 1) * sizeof *vars);
    optim_st_writer *w = NULL;
    optim_error err;
    int rc = !vars || optim_st_writer_create(&w, &err);
    if (!vars) snprintf(err.msg, sizeof err.msg, "out of memory");
    if (!rc) optim_model_variables(m, vars, n);
    for (size_t i = 0; !rc && i < n; i++) {
        optim_tensor t = optim_var_tensor(vars[i]);
        rc = optim_st_writer_add(w, optim_var_name(vars[i]), &t, &err) != 0;
    }
    if (!rc) rc = optim_st_writer_save(w, path, &err) != 0;
    if (rc) snprintf(msg, cap, "--save-weights %s: %s", path, err.msg);
    optim_st_writer_destroy(w);
    free(vars);
    return rc;
}
