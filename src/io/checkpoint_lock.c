/* One writer per checkpoint directory (optim/checkpoint.h): an advisory
 * flock on DIR/.lock, which holds the holder's PID as text so that a
 * refusal can name it, and so that a save in the process that holds the
 * run-long lock knows the lock is its own. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/checkpoint_lock.h"
#include "optim/checkpoint.h"

struct optim_checkpoint_lock {
    int fd;
};

static long holder_pid(int fd)
{
    char buf[32] = "";
    ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
    return r > 0 ? strtol(buf, NULL, 10) : 0;
}

/* Locks dir/.lock: the fd (>= 0), OPTIM__LOCK_OURS when this process holds
 * it already (through another descriptor), or a negative OPTIM_E* code. */
int optim__checkpoint_lock(const char *dir, optim_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return optim__err(err, OPTIM_EIO, "checkpoint: cannot create directory %s: %s", dir,
                          strerror(errno));
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    if (fd < 0)
        return optim__err(err, OPTIM_EIO, "checkpoint: cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        long pid = holder_pid(fd);
        close(fd);
        if (e == EWOULDBLOCK && pid == (long)getpid()) return OPTIM__LOCK_OURS;
        if (e == EWOULDBLOCK)
            return optim__err(err, OPTIM_ESTATE,
                              "checkpoint directory %s is in use by process %ld (%s): one "
                              "writer at a time",
                              dir, pid, path);
        return optim__err(err, OPTIM_EIO, "checkpoint: cannot lock %s: %s", path, strerror(e));
    }
    char text[32];
    int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
        int e = errno;
        close(fd);
        return optim__err(err, OPTIM_EIO, "checkpoint: cannot write %s: %s", path, strerror(e));
    }
    return fd;
}

int optim_checkpoint_lock_dir(const char *dir, optim_checkpoint_lock **out, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_checkpoint_lock_dir: out is NULL");
    *out = NULL;
    if (!dir || !dir[0] || strlen(dir) > 4000)
        return optim__err(err, OPTIM_EINVAL,
                          "optim_checkpoint_lock_dir: dir is NULL, empty or too long");
    int fd = optim__checkpoint_lock(dir, err);
    if (fd == OPTIM__LOCK_OURS)
        return optim__err(err, OPTIM_ESTATE,
                          "checkpoint directory %s is locked already by this process", dir);
    if (fd < 0) return fd;
    optim_checkpoint_lock *l = optim__calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    }
    l->fd = fd;
    *out = l;
    return OPTIM_OK;
}

void optim_checkpoint_unlock(optim_checkpoint_lock *l)
{
    if (!l) return;
    close(l->fd); /* releases the flock */
    free(l);
}
