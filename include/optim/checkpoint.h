/*
 * optim/checkpoint.h - save a training run and resume it bit for bit.
 *
 * A checkpoint is a directory holding everything a run needs to continue as
 * if it had never stopped: the model's variables, each layer's count of
 * training calls (Dropout draws its masks from it), the optimizer's config
 * (Keras JSON, so learning rates changed by callbacks are kept) and all its
 * weights (iterations, slots, wrappers' and Keras 3 options' weights), the
 * number of epochs done, and a JSON object of the caller's own (the tool
 * keeps its data options there: seed, batch size, split).
 *
 *     // at the end of every epoch (e.g. from an on_epoch_end callback):
 *     optim_checkpoint_save("run1", model, opt, epoch + 1, "{\"seed\": 0}", &err);
 *
 *     // later, in a new process:
 *     optim_checkpoint *c;
 *     optim_checkpoint_read("run1", &c, &err);
 *     optim_from_json(&opt, optim_checkpoint_optimizer_json(c), &err);
 *     ... create and build the same model, compile it with opt ...
 *     optim_checkpoint_restore(c, model, opt, &err);
 *     fo.initial_epoch = optim_checkpoint_epoch(c);   // Keras's initial_epoch
 *     optim_checkpoint_free(c);
 *
 * Layout of DIR: checkpoint.json (format, epoch, the model's variable
 * names, dtypes and shapes, layer names, the optimizer's class chain and
 * config, the caller's JSON, and the name, CRC-32 and size of the tensor
 * file, so that a damaged file or one from another save is refused) and
 * ckpt-G.safetensors (G a generation number): "model/VAR",
 * "optimizer/WEIGHT" and "layer_calls/LAYER" (I64). A save writes a new
 * tensor file, fsyncs it, then replaces checkpoint.json atomically (write
 * to a temporary file, fsync, rename) and only then removes the older
 * tensor files: a process killed at any moment leaves the previous
 * checkpoint whole and loadable.
 *
 * Errors: every call returns 0 or a negative OPTIM_E* code and fills err;
 * read refuses a checkpoint.json that is not a regular file of at most
 * 64 MiB; restore checks everything before it changes anything (names,
 * dtypes, shapes, finite values, the iterations range, layer call counts).
 * A CRC detects accidents, not a writer who means harm: docs/reliability.md.
 */
#ifndef OPTIM_CHECKPOINT_H
#define OPTIM_CHECKPOINT_H

#include "optim/nn.h"
#include "optim/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_checkpoint optim_checkpoint;

/* Writes a checkpoint of the built model m and its optimizer opt into
 * directory dir (created if missing, mode 0777 & ~umask) after `epoch`
 * epochs (>= 0). extra_json: a JSON object kept for the caller (NULL: {}).
 * Returns OPTIM_EINVAL (bad argument, model not built, extra_json not an
 * object), OPTIM_ERANGE (a variable or optimizer weight holds a NaN or an
 * infinity, which restore would refuse; the message names it), OPTIM_EIO
 * (with the path and the system's reason) or OPTIM_ENOMEM; on error the
 * previous checkpoint in dir is untouched. */
OPTIM_API int optim_checkpoint_save(const char *dir, optim_model *m, optim_optimizer *opt,
                                    int64_t epoch, const char *extra_json, optim_error *err);

/* One writer per directory: holds an advisory lock (flock) on dir/.lock,
 * which names the holder's PID, until optim_checkpoint_unlock (or the
 * process ends). Creates dir if missing. A second holder, in this process
 * or another, gets OPTIM_ESTATE with the holder's PID. optim_checkpoint_save
 * takes the same lock for the length of a save unless this process holds
 * it, so a run that holds it excludes other writers between saves too. */
typedef struct optim_checkpoint_lock optim_checkpoint_lock;
OPTIM_API int optim_checkpoint_lock_dir(const char *dir, optim_checkpoint_lock **out,
                                        optim_error *err);
OPTIM_API void optim_checkpoint_unlock(optim_checkpoint_lock *l); /* NULL is a no-op */

/* Reads the checkpoint in dir (its JSON and tensors, checked for
 * consistency). *out is the caller's: free it with optim_checkpoint_free.
 * OPTIM_EIO when dir holds no checkpoint, OPTIM_EFORMAT when it is damaged. */
OPTIM_API int optim_checkpoint_read(const char *dir, optim_checkpoint **out, optim_error *err);
OPTIM_API void optim_checkpoint_free(optim_checkpoint *c); /* NULL is a no-op */

/* Epochs done when it was written. */
OPTIM_API int64_t optim_checkpoint_epoch(const optim_checkpoint *c);
/* The optimizer's {"class_name": ..., "config": ...}, to create a fresh
 * optimizer of the same class and settings. Owned by c. */
OPTIM_API const char *optim_checkpoint_optimizer_json(const optim_checkpoint *c);
/* The caller's JSON object given to save. Owned by c. */
OPTIM_API const char *optim_checkpoint_extra_json(const optim_checkpoint *c);

/* Restores the checkpoint into model m (built, with the same variables:
 * names, dtypes and shapes, and the same layer names) and into opt, an
 * optimizer of the same class chain and generation that has not stepped
 * yet (typically made from optim_checkpoint_optimizer_json): its slots are
 * created for m's trainable variables and all its weights set. Anything
 * that does not match is refused (OPTIM_ESTATE) with a message naming what
 * differs, before m or opt change. */
OPTIM_API int optim_checkpoint_restore(const optim_checkpoint *c, optim_model *m,
                                       optim_optimizer *opt, optim_error *err);

#ifdef __cplusplus
}
#endif
#endif
