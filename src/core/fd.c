/* File descriptor helpers (core/fd.h, optim_file_open_regular). */
#define _POSIX_C_SOURCE 200809L
#include "core/fd.h"

#include "optim/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int optim__write_all(int fd, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        const size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        const ssize_t r = write(fd, c, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* O_NONBLOCK: a FIFO must fail the regular-file check, not hang in open;
 * it is cleared once the file is known to be regular. */
int optim_file_open_regular(const char *path, int64_t *size)
{
    if (!path) {
        errno = EINVAL;
        return -1;
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno
        : S_ISDIR(st.st_mode)   ? EISDIR
        : !S_ISREG(st.st_mode)  ? EINVAL
                                : 0;
    if (!e && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) e = errno;
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    if (size) *size = (int64_t)st.st_size;
    return fd;
}
