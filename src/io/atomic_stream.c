/* optim/file.h: a buffered stream over the atomic file of atomic_file.h. */
#define _POSIX_C_SOURCE 200809L
#include "core/internal.h"
#include "io/atomic_file.h"
#include "optim/file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct optim_atomic_file {
    optim__atomic_file file;
    char *path; /* a copy: the caller's string may go away before commit */
    FILE *stream; /* on a duplicate of file.fd, so closing it keeps file.fd */
};

static int report(optim_error *err, int code, const char *path, const char *what, int e)
{
    if (e) return optim_error_set(err, code, "%s: %s: %s", path, what, strerror(e));
    return optim_error_set(err, code, "%s: %s", path, what);
}

int optim_atomic_file_open(optim_atomic_file **out, const char *path, optim_error *err)
{
    if (!out) return optim_error_set(err, OPTIM_EINVAL, "optim_atomic_file_open: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return optim_error_set(err, OPTIM_EINVAL,
                               "optim_atomic_file_open: path is %s, expected a file name",
                               path ? "empty" : "NULL");
    optim_atomic_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return optim_error_set(err, OPTIM_ENOMEM, "%s: out of memory", path);
    }
    const char *what = NULL;
    if (optim__atomic_open(&f->file, f->path, &what) != 0) {
        int e = errno;
        free(f->path);
        free(f);
        return report(err, e ? OPTIM_EIO : OPTIM_EINVAL, path, what, e);
    }
    int fd = dup(f->file.fd);
    if (fd < 0 || !(f->stream = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) close(fd);
        optim__atomic_abort(&f->file);
        free(f->path);
        free(f);
        return report(err, OPTIM_EIO, path, "cannot open a stream on the temporary file", e);
    }
    *out = f;
    return OPTIM_OK;
}

FILE *optim_atomic_file_stream(optim_atomic_file *f) { return f ? f->stream : NULL; }

int optim_atomic_file_commit(optim_atomic_file *f, optim_error *err)
{
    if (!f) return optim_error_set(err, OPTIM_EINVAL, "optim_atomic_file_commit: f is NULL");
    const char *path = f->file.path, *what = NULL;
    int bad = ferror(f->stream), e = bad ? EIO : 0;
    if (fclose(f->stream) != 0 && !bad) bad = 1, e = errno;
    int rc = OPTIM_OK;
    if (bad) {
        optim__atomic_abort(&f->file);
        rc = report(err, OPTIM_EIO, path, "write error", e);
    } else if (optim__atomic_commit(&f->file, &what) != 0) {
        rc = report(err, OPTIM_EIO, path, what, errno);
    }
    free(f->path);
    free(f);
    return rc;
}

void optim_atomic_file_abort(optim_atomic_file *f)
{
    if (!f) return;
    fclose(f->stream);
    optim__atomic_abort(&f->file);
    free(f->path);
    free(f);
}
