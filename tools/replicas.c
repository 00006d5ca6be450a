/* optim train across processes: detecting an mpirun launch, making the
 * replica group, checking that the ranks run with the same settings, and
 * the watchdog that bounds start-up and finalisation (MPI_Init_thread,
 * MPI_Comm_dup and MPI_Finalize block without a deadline of their own). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* This process's rank as the launcher numbered it (known before MPI_Init). */
static int launch_rank(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, armed;
    struct timespec deadline;
    char msg[256];
} wd = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {0, 0}, ""};

/* The watchdog thread: once an armed deadline passes, prints the message
 * and ends the process; mpirun then stops the other ranks. It never calls
 * MPI (the main thread may be blocked inside it). */
static void *watch(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&wd.mu);
    for (;;) {
        if (!wd.armed) {
            pthread_cond_wait(&wd.cv, &wd.mu);
            continue;
        }
        if (pthread_cond_timedwait(&wd.cv, &wd.mu, &wd.deadline) == ETIMEDOUT && wd.armed) {
            ssize_t w = write(STDERR_FILENO, wd.msg, strlen(wd.msg));
            (void)w;
            _exit(1);
        }
    }
    return NULL;
}

void optim_tool_watchdog(double seconds, const char *what)
{
    pthread_mutex_lock(&wd.mu);
    wd.armed = seconds > 0;
    if (wd.armed) {
        clock_gettime(CLOCK_REALTIME, &wd.deadline);
        wd.deadline.tv_sec += (time_t)seconds;
        snprintf(wd.msg, sizeof wd.msg,
                 "optim train: rank %d: replicas did not all %s within %.0f s (--replica-timeout; "
                 "was a rank started late, stopped or killed?)\n",
                 launch_rank(), what, seconds);
        pthread_t t;
        if (!wd.started && pthread_create(&t, NULL, watch, NULL) == 0) {
            pthread_detach(t);
            wd.started = 1;
        }
    }
    pthread_cond_signal(&wd.cv);
    pthread_mutex_unlock(&wd.mu);
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
    /* MPI_Init_thread and MPI_Comm_dup under the deadline; the exchanges
     * after them poll their own (loading the data is not counted). */
    if (n > 1) optim_tool_watchdog(timeout, "start");
    int rc =
        n > 1 ? optim_group_create_mpi(g, NULL, &o, &err) : optim_group_create_single(g, &o, &err);
    if (n > 1) optim_tool_watchdog(0, NULL);
    if (rc) snprintf(msg, cap, "%s", err.msg);
    return rc ? 1 : 0;
}

/* Setting i of the run as text, in names[i] and values[i] (buf holds them). */
#define N_SETTINGS 16
static void settings(const job_config *c, const job_data *d, optim_model *m, int shard,
                     const char **names, char (*buf)[96])
{
    static const char *const keys[N_SETTINGS] = {"--epochs",
                                                 "--batch-size",
                                                 "--seed",
                                                 "--limit",
                                                 "--steps",
                                                 "--hidden",
                                                 "--dropout",
                                                 "--validation-split",
                                                 "--early-stopping",
                                                 "--monitor",
                                                 "--min-delta",
                                                 "--lr-decay",
                                                 "--shard-optimizer-state",
                                                 "training data",
                                                 "test data",
                                                 "model shapes"};
    memcpy(names, keys, sizeof keys);
    snprintf(buf[0], 96, "%lld", c->epochs);
    snprintf(buf[1], 96, "%lld", c->batch);
    snprintf(buf[2], 96, "%lld", c->seed);
    snprintf(buf[3], 96, "%lld", c->limit);
    snprintf(buf[4], 96, "%lld", c->steps);
    buf[5][0] = '\0';
    for (size_t i = 0; i < c->hidden.n; i++)
        snprintf(buf[5] + strlen(buf[5]), 96 - strlen(buf[5]), "%s%lld", i ? "," : "",
                 (long long)c->hidden.v[i]);
    snprintf(buf[6], 96, "%.17g", c->dropout);
    snprintf(buf[7], 96, "%.17g", c->validation_split);
    snprintf(buf[8], 96, "%lld", c->patience);
    snprintf(buf[9], 96, "%s", c->monitor ? c->monitor : "(default)");
    snprintf(buf[10], 96, "%.17g", c->min_delta);
    snprintf(buf[11], 96, "%.17g", c->lr_decay);
    snprintf(buf[12], 96, "%s", shard ? "given" : "not given");
    snprintf(buf[13], 96, "%lld images (%lld for validation) of %lld pixels",
             (long long)(d->train.n + d->val.n), (long long)d->val.n, (long long)d->train.features);
    snprintf(buf[14], 96, "%lld images", (long long)d->test.n);
    optim_var *vars[64];
    size_t nv = optim_model_variables(m, vars, 64);
    buf[15][0] = '\0';
    for (size_t i = 0; i < nv && i < 64; i++)
        for (int32_t k = 0; k < optim_var_rank(vars[i]); k++) {
            size_t used = strlen(buf[15]);
            snprintf(buf[15] + used, 96 - used, "%s%lld",
                     k       ? "x"
                         : i ? ","
                             : "",
                     (long long)optim_var_shape(vars[i])[k]);
        }
}

int optim_tool_replicas_check(const char *cmd, optim_group *g, const job_config *c,
                              const job_data *d, optim_optimizer *opt, optim_model *m)
{
    const char *names[N_SETTINGS + 1], *values[N_SETTINGS + 1];
    char buf[N_SETTINGS][96];
    settings(c, d, m, optim_group_sharded(g), names, buf);
    for (size_t i = 0; i < N_SETTINGS; i++) values[i] = buf[i];
    char *cfg = optim_serialize(opt); /* the config after defaults */
    names[N_SETTINGS] = "--optimizer";
    values[N_SETTINGS] = cfg ? cfg : "(out of memory)";
    int rc = optim_group_check_same(g, names, values, N_SETTINGS + 1);
    optim_free(cfg);
    return rc ? optim_tool_fail(cmd, "%s", optim_group_errmsg(g)) : 0;
}
