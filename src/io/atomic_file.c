/* Atomic file replacement (see atomic_file.h). */
#define _GNU_SOURCE /* O_TMPFILE */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *not_regular(mode_t m)
{
    if (S_ISLNK(m))
        return "exists and is a symbolic link, not a regular file: refusing to replace it";
    if (S_ISDIR(m)) return "exists and is a directory, not a regular file: refusing to replace it";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "exists and is a device, not a regular file: refusing to replace it";
    if (S_ISFIFO(m)) return "exists and is a FIFO, not a regular file: refusing to replace it";
    return "exists and is not a regular file: refusing to replace it";
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (dir) {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    return dir;
}

/* A short, unused name in f->dir (path's own name may already be near
 * NAME_MAX), made by `make` (open O_EXCL or link); 0 or -1 with errno. */
static int make_named(optim__atomic_file *f, int (*make)(optim__atomic_file *f))
{
    static atomic_uint counter;
    size_t n = strlen(f->dir) + 48;
    if (!(f->tmp = malloc(n))) return -1;
    for (int tries = 0;; tries++) {
        snprintf(f->tmp, n, "%s/.optim-%ld-%u.tmp", f->dir, (long)getpid(),
                 atomic_fetch_add(&counter, 1));
        if (make(f) == 0) return 0;
        if (errno != EEXIST || tries >= 100) {
            int e = errno;
            free(f->tmp);
            f->tmp = NULL;
            errno = e;
            return -1;
        }
    }
}

static int create_named(optim__atomic_file *f)
{
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    return f->fd < 0 ? -1 : 0;
}

static int link_named(optim__atomic_file *f)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, f->tmp, AT_SYMLINK_FOLLOW);
}

/* Fails: cleans up, keeping the first errno. */
static int fail(optim__atomic_file *f, const char **what, const char *why)
{
    int e = errno;
    optim__atomic_abort(f);
    *what = why;
    errno = e;
    return -1;
}

int optim__atomic_open(optim__atomic_file *f, const char *path, const char **what)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = path;
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        errno = 0;
        *what = not_regular(st.st_mode);
        return -1;
    }
    if (!(f->dir = dir_of(path))) {
        *what = "out of memory";
        return -1;
    }
#ifdef O_TMPFILE
    f->fd = open(f->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (f->fd >= 0) return 0;
    /* EISDIR: a kernel without O_TMPFILE; EOPNOTSUPP: a file system without. */
    if (errno != EISDIR && errno != EOPNOTSUPP)
        return fail(f, what, "cannot create a temporary file in its directory");
#endif
    if (make_named(f, create_named) != 0)
        return fail(f, what, "cannot create a temporary file in its directory");
    return 0;
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int optim__atomic_commit(optim__atomic_file *f, const char **what)
{
    if (fsync(f->fd) != 0) return fail(f, what, "cannot fsync the temporary file");
    int direct = 0; /* published already: path did not exist */
    if (!f->tmp) { /* unnamed: give it a name before closing it */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
        direct = linkat(AT_FDCWD, proc, AT_FDCWD, f->path, AT_SYMLINK_FOLLOW) == 0;
        if (!direct && errno != EEXIST)
            return fail(f, what, "cannot link the temporary file to it");
        if (!direct && make_named(f, link_named) != 0)
            return fail(f, what, "cannot link the temporary file in its directory");
    }
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0) {
        int e = errno;
        if (direct) (void)unlink(f->path);
        errno = e;
        return fail(f, what, "cannot close the temporary file");
    }
    if (!direct && rename(f->tmp, f->path) != 0)
        return fail(f, what, "cannot rename the temporary file over it");
    free(f->tmp);
    f->tmp = NULL; /* it is path now */
    sync_dir(f->dir);
    optim__atomic_abort(f);
    return 0;
}

void optim__atomic_abort(optim__atomic_file *f)
{
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->tmp) (void)unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
    free(f->dir);
    f->dir = NULL;
}
