/* Keras's order of an optimizer's new weights (internal; slots.c). Also
 * for TF Addons' MultiOptimizer (src/wrappers/tfa_multi_optimizer.c), which
 * creates a sub-optimizer's slots one variable at a time when it is built
 * and orders them as one _create_slots(var_list) call would. */
#ifndef OPTIM_OPTIMIZER_SLOT_ORDER_H
#define OPTIM_OPTIMIZER_SLOT_ORDER_H

#include <stddef.h>

#include "optim/optimizer.h"

/* Puts the weights created since index `from` in Keras's order: optimizer-
 * level weights first, then slot kind by slot kind (all "m", then all "v"),
 * each in variable order, as Keras's _create_slots(var_list) builds them
 * (nothing for a class that orders its slots by variable). `from` counts
 * the optimizer's own weights after iterations (its optim_weights_count - 1
 * when it wraps nothing). */
void optim__order_new_slots(optim_optimizer *opt, size_t from);

#endif
