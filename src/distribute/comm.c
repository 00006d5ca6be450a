/* Collectives over bytes, with a deadline. MPI's nonblocking collectives
 * are polled until they complete or the group's timeout passes: a rank that
 * died or stopped calling makes the others fail with a message instead of
 * waiting forever. With one rank every call is a copy. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include "distribute/internal.h"

#include <limits.h>
#include <string.h>
#include <time.h>

static int broken(optim_group *g, optim_error *err)
{
    return optim__err(
        err, OPTIM_ESTATE,
        "replica group: an earlier collective call failed on rank %d of %d; the group "
        "cannot be used any more (call optim_group_abort)",
        g->rank, g->size);
}

#ifdef OPTIM_HAVE_MPI
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for req. MPI progresses a nonblocking collective only inside its
 * calls, so it polls, sleeping 20 us between tests after the first hundred
 * (ranks may share cores with each other and with other programs: a busy
 * MPI_Wait made steps three times slower on the loaded 2-core test
 * machine), and 1 ms once it has waited a second (a slow or dead rank). */
static int wait_req(optim_group *g, MPI_Request *req, const char *what, optim_error *err)
{
    double start = now();
    for (long tests = 0;; tests++) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            g->broken = 1;
            return optim__err(err, OPTIM_EIO,
                              "replica group: %s failed on rank %d of %d: %s (did a rank die?)",
                              what, g->rank, g->size, msg);
        }
        if (done) return OPTIM_OK;
        if (tests < 100) continue;
        double waited = now() - start;
        if (waited > g->timeout) {
            g->broken = 1;
            return optim__err(
                err, OPTIM_EIO,
                "replica group: rank %d of %d waited more than %g s in %s for the other ranks "
                "(did a rank die or stop calling?)",
                g->rank, g->size, g->timeout, what);
        }
        nanosleep(&(struct timespec){0, waited < 1 ? 20000 : 1000000}, NULL);
    }
}

/* Byte counts and offsets as MPI's ints; fails for blocks over 2 GiB. */
static int to_ints(optim_group *g, const size_t *bytes, int *counts, int *displs, optim_error *err)
{
    size_t off = 0;
    for (int r = 0; r < g->size; r++) {
        if (bytes[r] > INT_MAX || off > INT_MAX)
            return optim__err(err, OPTIM_ERANGE,
                              "replica group: a message of %zu bytes (offset %zu) exceeds MPI's "
                              "int counts (%d)",
                              bytes[r], off, INT_MAX);
        counts[r] = (int)bytes[r];
        displs[r] = (int)off;
        off += bytes[r];
    }
    return OPTIM_OK;
}

static int started(optim_group *g, int rc, const char *what, optim_error *err)
{
    if (rc == MPI_SUCCESS) return OPTIM_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    g->broken = 1;
    return optim__err(err, OPTIM_EIO, "replica group: %s failed on rank %d of %d: %s", what,
                      g->rank, g->size, msg);
}
#endif

int optim__allgather(optim_group *g, const void *send, size_t bytes, void *recv, optim_error *err)
{
    size_t *counts = optim__group_alloc(g, (size_t)g->size * sizeof *counts);
    if (!counts) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    for (int r = 0; r < g->size; r++) counts[r] = bytes;
    return optim__allgatherv(g, send, bytes, recv, counts, err);
}

int optim__allgatherv(optim_group *g, const void *send, size_t sbytes, void *recv,
                      const size_t *rbytes, optim_error *err)
{
    if (g->broken) return broken(g, err);
    if (g->size == 1) {
        if (sbytes) memmove(recv, send, sbytes);
        return OPTIM_OK;
    }
#ifdef OPTIM_HAVE_MPI
    int *counts = optim__group_alloc(g, 2 * (size_t)g->size * sizeof *counts);
    if (!counts) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    int rc = to_ints(g, rbytes, counts, counts + g->size, err);
    if (rc) return rc;
    if (sbytes != rbytes[g->rank])
        return optim__err(err, OPTIM_EINVAL, "replica group: all-gather of %zu bytes, expected %zu",
                          sbytes, rbytes[g->rank]);
    MPI_Request req;
    rc = MPI_Iallgatherv(send, counts[g->rank], MPI_BYTE, recv, counts, counts + g->size, MPI_BYTE,
                         g->comm, &req);
    if ((rc = started(g, rc, "all-gather", err))) return rc;
    return wait_req(g, &req, "all-gather", err);
#else
    return optim__err(err, OPTIM_ENOTSUP, "replica group: built without MPI");
#endif
}

int optim__alltoallv(optim_group *g, const void *send, const size_t *sbytes, void *recv,
                     const size_t *rbytes, optim_error *err)
{
    if (g->broken) return broken(g, err);
    if (g->size == 1) {
        if (sbytes[0]) memmove(recv, send, sbytes[0]);
        return OPTIM_OK;
    }
#ifdef OPTIM_HAVE_MPI
    int *c = optim__group_alloc(g, 4 * (size_t)g->size * sizeof *c);
    if (!c) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    int n = g->size, rc = to_ints(g, sbytes, c, c + n, err);
    if (!rc) rc = to_ints(g, rbytes, c + 2 * n, c + 3 * n, err);
    if (rc) return rc;
    MPI_Request req;
    rc = MPI_Ialltoallv(send, c, c + n, MPI_BYTE, recv, c + 2 * n, c + 3 * n, MPI_BYTE, g->comm,
                        &req);
    if ((rc = started(g, rc, "all-to-all", err))) return rc;
    return wait_req(g, &req, "all-to-all", err);
#else
    return optim__err(err, OPTIM_ENOTSUP, "replica group: built without MPI");
#endif
}
