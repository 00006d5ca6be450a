/*
 * optim/optim.h - the umbrella header: the Keras optimizer system in C.
 *
 *     #include <optim/optim.h>
 *
 *     optim_error err;
 *     optim_var *w;
 *     float w0[3] = {1, 2, 3}, g[3] = {0.1f, 0.2f, 0.3f};
 *     optim_var_create(&w, "w", OPTIM_F32, 1, (int64_t[]){3}, w0, &err);
 *
 *     optim_optimizer *opt;
 *     optim_from_json(&opt, "{\"class_name\": \"SGD\", \"config\": "
 *                           "{\"learning_rate\": 0.1, \"momentum\": 0.9}}", &err);
 *     optim_grad_var pair = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1,
 *                                                               (int64_t[]){3})), w};
 *     if (optim_apply_gradients(opt, &pair, 1, 0)) puts(optim_errmsg(opt));
 *
 *     optim_destroy(opt);
 *     optim_var_destroy(w);
 *
 * Link with -loptim (pkg-config optim, or CMake's find_package(optim)).
 */
#ifndef OPTIM_OPTIM_H
#define OPTIM_OPTIM_H

#include "optim/status.h"
#include "optim/tensor.h"
#include "optim/variable.h"
#include "optim/optimizer.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optim/isa.h"
#include "optim/schedule.h"
#include "optim/schedules.h"
#include "optim/wrappers.h"
#include "optim/step.h"
#include "optim/tape.h"
#include "optim/nn.h"
#include "optim/idx.h"
#include "optim/npy.h"
#include "optim/csv.h"
#include "optim/safetensors.h"
#include "optim/file.h"
#include "optim/distribute.h"
#include "optim/conformance.h"
#include "optim/checkpoint.h"

#define OPTIM_VERSION_MAJOR 0
#define OPTIM_VERSION_MINOR 1
#define OPTIM_VERSION_PATCH 0

#endif
