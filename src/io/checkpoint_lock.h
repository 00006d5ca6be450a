/* The checkpoint directory's lock, for checkpoint.c's save. */
#ifndef OPTIM_IO_CHECKPOINT_LOCK_H
#define OPTIM_IO_CHECKPOINT_LOCK_H

#include "optim/status.h"

#define OPTIM__LOCK_OURS (-1000) /* this process holds the lock already */
int optim__checkpoint_lock(const char *dir, optim_error *err);

#endif
