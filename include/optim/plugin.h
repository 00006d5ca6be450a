/*
 * optim/plugin.h - a plugin: optimizer classes and schedules for the `optim`
 * command, in a shared library of your own.
 *
 * A plugin defines one function, optim_plugin_init, which registers its
 * classes with optim_register_class (schedules with
 * optim_register_schedule_class, CyclicalLearningRate's scale functions
 * with optim_register_scale_fn) and returns 0, or fills err and returns a
 * negative OPTIM_E* code. Every `optim` subcommand loads the plugins named by
 * `optim --plugin PATH SUBCOMMAND ...` (repeatable) and by the environment
 * variable OPTIM_PLUGINS (colon-separated paths), before it runs:
 *
 *     #include <optim/plugin.h>
 *     static const optim_class my_class = { ... };
 *     OPTIM_PLUGIN_INIT(optim_error *err)
 *     {
 *         return optim_register_class(&my_class, err);
 *     }
 *
 * Build it against liboptim.so (the command and the plugin must share one
 * registry), with the library's optimisation flags: optim_add_plugin(NAME
 * SOURCES... [ISA_SOURCES ...]) in CMake after find_package(optim), or with
 * pkg-config (optim-plugin.pc: the flags and an rpath to liboptim.so):
 *
 *     cc -std=c11 -shared $(pkg-config --cflags optim-plugin) \
 *        my_class.c -o libmy_class.so $(pkg-config --libs optim-plugin)
 *
 * Per-level kernels (AVX2, AVX-512) picked at run time: optim/isa.h.
 * docs/custom-optimizer.md ("Build it as a plugin") has the whole recipe.
 */
#ifndef OPTIM_PLUGIN_H
#define OPTIM_PLUGIN_H

#include "optim/optim.h"

#ifdef __cplusplus
#define OPTIM__PLUGIN_EXTERN extern "C"
#else
#define OPTIM__PLUGIN_EXTERN
#endif

/* The entry point's name, as the command looks it up. */
#define OPTIM_PLUGIN_INIT_SYMBOL "optim_plugin_init"

/* Defines the entry point, exported even under -fvisibility=hidden:
 * int optim_plugin_init(optim_error *err). It is defined by the plugin, not
 * by liboptim, so it is not an OPTIM_API function. */
#define OPTIM_PLUGIN_INIT(err_param) \
    OPTIM__PLUGIN_EXTERN __attribute__((visibility("default"))) int optim_plugin_init(err_param)

#endif
