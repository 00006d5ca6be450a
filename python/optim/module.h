/*
 * python/optim/module.h - the CPython extension optim._optim over liboptim.so.
 *
 * Written against the CPython API only: arrays come in through the buffer
 * protocol (NumPy arrays, torch.Tensor.numpy() views, anything exporting a
 * C-contiguous float buffer); no NumPy C API. The Python layer
 * (python/optim/__init__.py) builds configs, constructors and NumPy arrays
 * on top of the types defined here. docs/python.md is the user's guide.
 *
 * Files, one idea each:
 *   _optim.c     the module: types, optim.Error, the registry's class lists
 *   buffer.c     a Python buffer as an optim_tensor (dtype, shape, checks)
 *   variable.c   optim.Variable: a named array the library updates in place
 *   varmap.c     an optimizer's variables: arrays to Variables, first-seen names
 *   optimizer.c  the optimizer type: creation, config, hyperparameters, lock
 *   apply.c      apply_gradients: pairs in, one library step without the GIL;
 *                build
 *   weights.c    get_weights / set_weights as raw bytes
 *   schedule.c   learning-rate schedule objects
 *   runtime.c    load_plugin, set_num_threads, conformance
 */
#ifndef OPTIM_PY_MODULE_H
#define OPTIM_PY_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "optim/optim.h"

/* ---- errors (_optim.c) ------------------------------------------------------ */

/* optim.Error, a ValueError: every refusal of the library or of this module. */
extern PyObject *optim_py_error;

/* Raises optim.Error with a printf-style message; returns NULL / -1. */
PyObject *optim_py_raise(const char *fmt, ...);
int optim_py_fail(const char *fmt, ...);

/* ---- buffers (buffer.c) ----------------------------------------------------- */

/* A Python object's buffer held as an optim_tensor view. */
typedef struct optim_py_buf {
    Py_buffer view;
    int held; /* view must be released */
    optim_tensor t; /* dtype, rank, shape and data of the view */
} optim_py_buf;

/* How optim_py_buf_get reads a 16-bit unsigned buffer ('H'): as bfloat16
 * bits (NumPy has no bfloat16) when bf16 is set, else it is refused. */
typedef struct optim_py_buf_opts {
    int writable; /* refuse a read-only buffer */
    int bf16; /* 'H' is bfloat16 */
    int integer; /* an index list: int32 or int64 only */
    const char *what; /* names the object in messages ("pair 2: gradient") */
} optim_py_buf_opts;

/* Gets obj's buffer: C-contiguous, aligned, rank <= OPTIM_MAX_RANK, a float
 * dtype optim stores (or an integer one with o->integer). On failure raises
 * optim.Error naming o->what and returns -1, holding nothing. */
int optim_py_buf_get(optim_py_buf *b, PyObject *obj, const optim_py_buf_opts *o);
void optim_py_buf_release(optim_py_buf *b);

/* The dtype of a struct-module format ("f", "<d", "e", ...) of itemsize
 * bytes; OPTIM_DTYPE_INVALID for any other. */
optim_dtype optim_py_format_dtype(const char *format, Py_ssize_t itemsize, int bf16);

/* A tuple of the shape. */
PyObject *optim_py_shape_tuple(int32_t rank, const int64_t *shape);

/* ---- variables (variable.c, varmap.c) ------------------------------------ */

typedef struct optim_py_variable {
    PyObject_HEAD optim_var *var; /* over buf.view's memory, borrowed */
    optim_py_buf buf; /* the array, held writable for the variable's life */
} optim_py_variable;

extern PyTypeObject optim_py_variable_type;

/* A Variable over obj (its buffer held writable) named name. */
optim_py_variable *optim_py_variable_make(PyObject *obj, const char *name, int bf16,
                                          const char *what);

/* The memory key of a variable's array: its address, or for an empty
 * array the exporting object (kept alive by the variable). */
PyObject *optim_py_variable_key(const optim_py_buf *b);

/* An optimizer's variables: each array (by address) maps to the Variable
 * the library knows it by; plain arrays get the names "variable",
 * "variable_1", ... in the order first seen. */
typedef struct optim_py_varmap {
    PyObject *by_key; /* dict: key -> Variable */
    PyObject *order; /* list of the Variables, first seen first */
    Py_ssize_t auto_names; /* plain arrays named so far */
} optim_py_varmap;

/* What a step may undo: the sizes before it. */
typedef struct optim_py_varmap_mark {
    Py_ssize_t n, auto_names;
} optim_py_varmap_mark;

int optim_py_varmap_init(optim_py_varmap *m);
void optim_py_varmap_clear(optim_py_varmap *m);
optim_py_varmap_mark optim_py_varmap_mark_get(const optim_py_varmap *m);
/* Forgets the variables added since mark (a refused step). */
void optim_py_varmap_rollback(optim_py_varmap *m, optim_py_varmap_mark mark);
/* The Variable for obj (a Variable, or an array exporting a buffer),
 * added when new; borrowed. NULL with optim.Error set on failure. */
optim_py_variable *optim_py_varmap_get(optim_py_varmap *m, PyObject *obj, const char *what);

/* ---- optimizers (optimizer.c, apply.c, weights.c) ------------------------ */

typedef struct optim_py_optimizer {
    PyObject_HEAD optim_optimizer *opt; /* NULL until __init__ succeeds */
    optim_py_varmap vars;
    PyThread_type_lock lock; /* one call on opt at a time (steps run without the GIL) */
    int threads; /* the thread count last given to opt */
} optim_py_optimizer;

extern PyTypeObject optim_py_optimizer_type;

/* Takes self's lock (waiting without the GIL) and checks self->opt;
 * 0, or -1 with optim.Error set. optim_py_unlock releases it. */
int optim_py_lock(optim_py_optimizer *self);
void optim_py_unlock(optim_py_optimizer *self);

/* Raises optim.Error with the optimizer's last message, prefixed by what. */
PyObject *optim_py_raise_opt(optim_py_optimizer *self, const char *what);

PyObject *optim_py_apply_gradients(optim_py_optimizer *self, PyObject *args);
PyObject *optim_py_build(optim_py_optimizer *self, PyObject *var_list);
PyObject *optim_py_get_weights(optim_py_optimizer *self, PyObject *unused);
PyObject *optim_py_set_weights(optim_py_optimizer *self, PyObject *arg);
PyObject *optim_py_weight_names(optim_py_optimizer *self, void *unused);

/* ---- IndexedSlices (apply.c) ------------------------------------------------ */

typedef struct optim_py_slices {
    PyObject_HEAD PyObject *values;
    PyObject *indices;
    PyObject *dense_shape;
} optim_py_slices;

extern PyTypeObject optim_py_slices_type;

/* ---- schedules (schedule.c) ------------------------------------------------- */

typedef struct optim_py_schedule {
    PyObject_HEAD optim_schedule *s;
} optim_py_schedule;

extern PyTypeObject optim_py_schedule_type;

/* A copy of the schedule of a Schedule object (the optimizer takes it). */
optim_schedule *optim_py_schedule_copy(PyObject *obj);

/* ---- process-wide settings (runtime.c) ----------------------------------- */

/* The thread count optim.set_num_threads set (0: OpenMP's default). */
extern int optim_py_num_threads;

PyObject *optim_py_load_plugin(PyObject *mod, PyObject *arg);
PyObject *optim_py_set_num_threads(PyObject *mod, PyObject *arg);
PyObject *optim_py_conformance(PyObject *mod, PyObject *args, PyObject *kw);

#endif
