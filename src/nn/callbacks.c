/* Callbacks (keras/src/callbacks/callback.py): a table of hooks plus a user
 * pointer, called by fit at train, epoch and batch boundaries. */
#include "nn/internal.h"

#include <stdlib.h>
#include <string.h>

int optim_callback_create(optim_callback **out, const optim_callback_hooks *hooks, void *user,
                          optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "callback: out is NULL");
    *out = NULL;
    if (!hooks) return optim__err(err, OPTIM_EINVAL, "callback: hooks are NULL");
    if (hooks->size != sizeof *hooks && hooks->size != OPTIM_CALLBACK_HOOKS_V1_SIZE)
        return optim__err(err, OPTIM_EVERSION, "callback: hooks size %u, expected %zu (or %zu)",
                          (unsigned)hooks->size, sizeof *hooks, OPTIM_CALLBACK_HOOKS_V1_SIZE);
    optim_callback *cb = calloc(1, sizeof *cb);
    if (!cb) return optim__err(err, OPTIM_ENOMEM, "callback: out of memory");
    memcpy(&cb->hooks, hooks, hooks->size); /* a version-1 table leaves the later hooks NULL */
    cb->hooks.size = sizeof cb->hooks;
    cb->user = user;
    cb->kind = OPTIM__CB_USER;
    *out = cb;
    return OPTIM_OK;
}

void optim_callback_destroy(optim_callback *cb)
{
    if (!cb) return;
    if (cb->hooks.destroy) cb->hooks.destroy(cb->user);
    free(cb);
}
