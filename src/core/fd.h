/* File descriptor helpers (internal): a whole write, and the public
 * optim_file_open_regular (optim/file.h) that the readers of safetensors
 * files, checkpoints and the command's JSON files open through. */
#ifndef OPTIM_CORE_FD_H
#define OPTIM_CORE_FD_H

#include <stddef.h>

/* Writes all n bytes at p to fd, in pieces of at most 1 GiB, retrying on
 * EINTR. 0, or -1 with errno set (EIO if write wrote nothing). */
int optim__write_all(int fd, const void *p, size_t n);

#endif
