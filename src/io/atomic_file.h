/* Atomic replacement of a file (internal to src/io): the content goes to a
 * temporary file in the same directory - unnamed (Linux O_TMPFILE) where the
 * file system allows, so that nothing is left behind when the process dies,
 * by any signal, while writing - and appears under its name complete, or
 * not at all. An existing path that is not a regular file (a symbolic link,
 * directory, device, FIFO or socket) is refused, never replaced. */
#ifndef OPTIM_IO_ATOMIC_FILE_H
#define OPTIM_IO_ATOMIC_FILE_H

typedef struct optim__atomic_file {
    int fd; /* write the content here */
    const char *path; /* borrowed */
    char *dir; /* path's directory */
    char *tmp; /* the temporary file's name while it has one, else NULL */
} optim__atomic_file;

/* Checks path and opens the temporary file. Returns 0, or -1 with *what
 * saying what failed and errno the system's reason (0: none, *what says it
 * all); nothing is left to clean up then. */
int optim__atomic_open(optim__atomic_file *f, const char *path, const char **what);

/* fsync, then publish under path (a new name appears in one step; an
 * existing file is replaced by rename), then a best-effort fsync of the
 * directory. Returns 0, or -1 as optim__atomic_open, after cleaning up:
 * path is then as it was. */
int optim__atomic_commit(optim__atomic_file *f, const char **what);

/* Gives up: closes and removes the temporary file. */
void optim__atomic_abort(optim__atomic_file *f);

#endif
