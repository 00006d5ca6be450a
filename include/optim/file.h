/*
 * optim/file.h - writing a file atomically, as optim writes its own, and
 * opening a regular file to read, as optim opens the files it reads.
 *
 * The content goes to a temporary file in the destination's directory
 * (unnamed where the file system allows, so a process killed while writing,
 * by any signal, leaves nothing behind) and appears under its name complete,
 * or not at all. An existing path that is not a regular file (a symbolic
 * link, directory, device, FIFO or socket) is refused, never replaced.
 * safetensors files and checkpoints are written this way; the `optim`
 * command writes its PNG and CSV files with these calls.
 *
 *     optim_atomic_file *af;
 *     if (optim_atomic_file_open(&af, "out.csv", &err)) die(err.msg);
 *     fprintf(optim_atomic_file_stream(af), "epoch,loss\n");
 *     if (optim_atomic_file_commit(af, &err)) die(err.msg);  // af is gone
 */
#ifndef OPTIM_FILE_H
#define OPTIM_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "optim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_atomic_file optim_atomic_file;

/* Checks path (a missing file or a regular one) and opens the temporary
 * file. On error *out is NULL and err (may be NULL) says what failed, with
 * the path and the system's reason; nothing is left to clean up. */
OPTIM_API int optim_atomic_file_open(optim_atomic_file **out, const char *path, optim_error *err);

/* The buffered stream to write the content to; owned by f (do not fclose). */
OPTIM_API FILE *optim_atomic_file_stream(optim_atomic_file *f);

/* Flushes and syncs the content and publishes it under the path, then frees
 * f, on success and on error alike (a write error on the stream is reported
 * here: OPTIM_EIO, path as it was). */
OPTIM_API int optim_atomic_file_commit(optim_atomic_file *f, optim_error *err);

/* Gives up: removes the temporary file and frees f. NULL is a no-op. */
OPTIM_API void optim_atomic_file_abort(optim_atomic_file *f);

/* Opens path for reading if it is a regular file, as optim opens the files
 * it reads: the descriptor (close-on-exec, blocking reads), with the file's
 * size in *size when size is not NULL; or -1 with errno set: open's reason,
 * EISDIR for a directory, EINVAL for anything else that is not a regular
 * file (a FIFO, device or socket is refused at once, never waited on). */
OPTIM_API int optim_file_open_regular(const char *path, int64_t *size);

#ifdef __cplusplus
}
#endif
#endif
