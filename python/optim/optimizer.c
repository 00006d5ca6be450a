/* The optimizer type, optim._optim.Optimizer: one liboptim optimizer, its
 * variables (varmap.c) and a lock. Optimizer(config_json, inner=None)
 * creates it from Keras JSON (optim_from_json: either generation, the
 * library's checks and messages), or, with inner, wraps a copy of that
 * optimizer's config (optim_wrap: the JSON is the wrapper's config without
 * its inner key). The Python layer (__init__.py) subclasses it once per registered
 * class and builds the JSON from keyword arguments.
 *
 * Steps run without the GIL, so each call takes the optimizer's lock: calls
 * on one optimizer from several threads wait for each other, as the
 * library requires (an optimizer is thread-compatible, not thread-safe). */
#include "module.h"

#include <math.h>
#include <string.h>

int optim_py_lock(optim_py_optimizer *self)
{
    if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        PyThreadState *ts = PyEval_SaveThread(); /* another thread's step: wait for it */
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        PyEval_RestoreThread(ts);
    }
    if (self->opt) return 0;
    PyThread_release_lock(self->lock);
    return optim_py_fail("this optimizer was not created (its __init__ failed or was not called)");
}

void optim_py_unlock(optim_py_optimizer *self) { PyThread_release_lock(self->lock); }

PyObject *optim_py_raise_opt(optim_py_optimizer *self, const char *what)
{
    const char *msg = optim_errmsg(self->opt);
    size_t n = strlen(what);
    if (strncmp(msg, what, n) == 0 && msg[n] == ':') return optim_py_raise("%s", msg);
    return optim_py_raise("%s: %s", what, msg);
}

static PyObject *opt_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    optim_py_optimizer *self = (optim_py_optimizer *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->lock = PyThread_allocate_lock();
    if (!self->lock) PyErr_NoMemory();
    if (!self->lock || optim_py_varmap_init(&self->vars) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void opt_dealloc(optim_py_optimizer *self)
{
    optim_destroy(self->opt); /* before the variables it borrows */
    optim_py_varmap_clear(&self->vars);
    if (self->lock) PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A fresh copy of inner, from its serialization: a wrapper owns its inner
 * optimizer, and inner stays the caller's. One that has stepped already is
 * refused: its slots and counter would not come along. */
static optim_optimizer *copy_inner(optim_py_optimizer *inner, optim_error *err)
{
    if (optim_py_lock(inner) < 0) return NULL;
    optim_optimizer *copy = NULL;
    char *json = NULL;
    if (PyList_GET_SIZE(inner->vars.order) > 0 || optim_weights_count(inner->opt) > 1 ||
        optim_iterations(inner->opt) != 0)
        optim_py_fail("the inner optimizer has stepped already (it has slots for %zd variables); "
                      "wrap an optimizer before its first step",
                      PyList_GET_SIZE(inner->vars.order));
    else if (!(json = optim_serialize(inner->opt))) optim_py_raise_opt(inner, "inner optimizer");
    else if (optim_from_json(&copy, json, err)) optim_py_fail("inner optimizer: %s", err->msg);
    optim_free(json);
    optim_py_unlock(inner);
    return copy;
}

static int opt_init(optim_py_optimizer *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"config", "inner", NULL};
    const char *json;
    PyObject *inner = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|O:Optimizer", kwlist, &json, &inner)) return -1;
    if (self->opt) return optim_py_fail("this optimizer was created already");
    optim_error err;
    if (inner == Py_None) {
        if (optim_from_json(&self->opt, json, &err)) return optim_py_fail("%s", err.msg);
        return 0;
    }
    if (!PyObject_TypeCheck(inner, &optim_py_optimizer_type))
        return optim_py_fail("inner is a %s, expected an optim optimizer", Py_TYPE(inner)->tp_name);
    optim_optimizer *copy = copy_inner((optim_py_optimizer *)inner, &err);
    if (!copy) return -1;
    if (optim_wrap(&self->opt, json, copy, &err)) {
        optim_destroy(copy);
        return optim_py_fail("%s", err.msg);
    }
    return 0;
}

/* _take(other): moves a freshly created optimizer into self (from_config
 * makes one, then gives it to an instance of its class's subclass). */
static PyObject *opt_take(optim_py_optimizer *self, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, &optim_py_optimizer_type))
        return optim_py_raise("_take needs an optimizer");
    optim_py_optimizer *o = (optim_py_optimizer *)arg;
    if (self->opt || !o->opt || PyList_GET_SIZE(o->vars.order) > 0)
        return optim_py_raise("_take: only a fresh optimizer moves into an empty one");
    self->opt = o->opt;
    o->opt = NULL;
    Py_RETURN_NONE;
}

/* A string the library returned (freed here), as str. */
static PyObject *take_text(optim_py_optimizer *self, char *text, const char *what)
{
    PyObject *s = text ? PyUnicode_FromString(text) : optim_py_raise_opt(self, what);
    optim_free(text);
    return s;
}

static PyObject *opt_config_text(optim_py_optimizer *self, PyObject *unused)
{
    if (optim_py_lock(self) < 0) return NULL;
    PyObject *s = take_text(self, optim_get_config(self->opt), "get_config");
    optim_py_unlock(self);
    return s;
}

static PyObject *opt_serialize_text(optim_py_optimizer *self, PyObject *unused)
{
    if (optim_py_lock(self) < 0) return NULL;
    PyObject *s = take_text(self, optim_serialize(self->opt), "serialize");
    optim_py_unlock(self);
    return s;
}

static PyObject *opt_get_hyper(optim_py_optimizer *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name || optim_py_lock(self) < 0) return NULL;
    double v;
    int rc = optim_get_hyper(self->opt, name, &v);
    PyObject *r = rc ? optim_py_raise_opt(self, "get_hyper")
        : isnan(v)   ? Py_NewRef(Py_None)
                     : PyFloat_FromDouble(v);
    optim_py_unlock(self);
    return r;
}

/* Sets name to value: a number, a bool, None (NAN) or a schedule object. */
static int set_hyper(optim_py_optimizer *self, const char *name, PyObject *value)
{
    if (!value) return optim_py_fail("%s cannot be deleted", name);
    int rc;
    if (PyObject_TypeCheck(value, &optim_py_schedule_type)) {
        optim_schedule *s = optim_py_schedule_copy(value);
        if (!s) return -1;
        if ((rc = optim_set_hyper_schedule_object(self->opt, name, s))) optim_schedule_destroy(s);
    } else {
        double v = value == Py_None ? NAN : PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return optim_py_fail("%s: a %s given; expected a number, a bool, None or an "
                                 "optim.schedules schedule",
                                 name, Py_TYPE(value)->tp_name);
        }
        rc = optim_set_hyper(self->opt, name, v);
    }
    if (rc) optim_py_raise_opt(self, name);
    return rc ? -1 : 0;
}

static PyObject *opt_set_hyper(optim_py_optimizer *self, PyObject *args)
{
    const char *name;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "sO:set_hyper", &name, &value) || optim_py_lock(self) < 0)
        return NULL;
    int rc = set_hyper(self, name, value);
    optim_py_unlock(self);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *opt_finalize(optim_py_optimizer *self, PyObject *unused)
{
    if (optim_py_lock(self) < 0) return NULL;
    int rc = optim_finalize_variable_values(self->opt);
    PyObject *r = rc ? optim_py_raise_opt(self, "finalize_variable_values") : Py_NewRef(Py_None);
    optim_py_unlock(self);
    return r;
}

static PyObject *get_iterations(optim_py_optimizer *self, void *c)
{
    if (optim_py_lock(self) < 0) return NULL;
    PyObject *r = PyLong_FromLongLong((long long)optim_iterations(self->opt));
    optim_py_unlock(self);
    return r;
}

/* Refuses a value that is not an integer (2.5, "3", True), naming it. */
static int check_integer(PyObject *value)
{
    if (PyIndex_Check(value) && !PyBool_Check(value)) return 0;
    PyObject *r = PyObject_Repr(value);
    const char *s = r ? PyUnicode_AsUTF8(r) : NULL;
    if (s)
        optim_py_fail("iterations is %.80s (a %s); expected an integer (the step count)", s,
                      Py_TYPE(value)->tp_name);
    Py_XDECREF(r);
    return -1;
}

static int set_iterations(optim_py_optimizer *self, PyObject *value, void *c)
{
    if (!value) return optim_py_fail("iterations cannot be deleted");
    if (check_integer(value) < 0) return -1;
    long long n = PyLong_AsLongLong(value);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (optim_py_lock(self) < 0) return -1;
    int rc = optim_set_iterations(self->opt, (int64_t)n);
    if (rc) optim_py_raise_opt(self, "iterations");
    optim_py_unlock(self);
    return rc ? -1 : 0;
}

static PyObject *get_learning_rate(optim_py_optimizer *self, void *c)
{
    PyObject *name = PyUnicode_FromString("learning_rate");
    PyObject *r = name ? opt_get_hyper(self, name) : NULL;
    Py_XDECREF(name);
    return r;
}

static int set_learning_rate(optim_py_optimizer *self, PyObject *value, void *c)
{
    if (optim_py_lock(self) < 0) return -1;
    int rc = set_hyper(self, "learning_rate", value);
    optim_py_unlock(self);
    return rc;
}

static PyObject *get_name(optim_py_optimizer *self, void *c)
{
    if (optim_py_lock(self) < 0) return NULL;
    PyObject *r = PyUnicode_FromString(optim_name(self->opt));
    optim_py_unlock(self);
    return r;
}

static PyObject *get_class_name(optim_py_optimizer *self, void *c)
{
    if (optim_py_lock(self) < 0) return NULL;
    PyObject *r = PyUnicode_FromString(optim_class_of(self->opt)->name);
    optim_py_unlock(self);
    return r;
}

static PyObject *get_is_legacy(optim_py_optimizer *self, void *c)
{
    if (optim_py_lock(self) < 0) return NULL;
    PyObject *r = PyBool_FromLong(optim_generation_of(self->opt) == OPTIM_LEGACY);
    optim_py_unlock(self);
    return r;
}

static PyObject *get_variables(optim_py_optimizer *self, void *c)
{
    return PyList_GetSlice(self->vars.order, 0, PyList_GET_SIZE(self->vars.order));
}

static PyMethodDef opt_methods[] = {
    {"apply_gradients", (PyCFunction)optim_py_apply_gradients, METH_O,
     "apply_gradients(grads_and_vars): one step over [(gradient, variable), ...]; each variable "
     "is updated in place. A gradient is an array of the variable's dtype and shape, None "
     "(skipped) or optim.IndexedSlices. Returns iterations."},
    {"build", (PyCFunction)optim_py_build, METH_O,
     "build(var_list): makes the slots of these variables now and fixes the optimizer's "
     "variables, as Keras 3's build (then set_weights before a first step)."},
    {"_config_text", (PyCFunction)opt_config_text, METH_NOARGS, "get_config as JSON text."},
    {"_serialize_text", (PyCFunction)opt_serialize_text, METH_NOARGS, "serialize as JSON text."},
    {"_weights_raw", (PyCFunction)optim_py_get_weights, METH_NOARGS,
     "[(name, dtype, shape, bytearray), ...] in get_weights order."},
    {"_set_weights_raw", (PyCFunction)optim_py_set_weights, METH_O,
     "set_weights from buffers, in get_weights order."},
    {"get_hyper", (PyCFunction)opt_get_hyper, METH_O,
     "get_hyper(name): the value a hyperparameter has at this step (None for None)."},
    {"set_hyper", (PyCFunction)opt_set_hyper, METH_VARARGS,
     "set_hyper(name, value): a number, bool, None or schedule; takes effect at the next step."},
    {"finalize_variable_values", (PyCFunction)opt_finalize, METH_NOARGS,
     "With use_ema: sets every variable to its moving average (Keras 3)."},
    {"_take", (PyCFunction)opt_take, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef opt_getset[] = {
    {"iterations", (getter)get_iterations, (setter)set_iterations,
     "The step counter (Keras's iterations).", NULL},
    {"learning_rate", (getter)get_learning_rate, (setter)set_learning_rate,
     "The learning rate at this step; set a number or a schedule.", NULL},
    {"name", (getter)get_name, NULL, "The optimizer's name (config key 'name').", NULL},
    {"class_name", (getter)get_class_name, NULL, "The class's name in optim's registry.", NULL},
    {"is_legacy_optimizer", (getter)get_is_legacy, NULL,
     "True for tf.keras's legacy generation, False for Keras 3.", NULL},
    {"variables", (getter)get_variables, NULL,
     "The Variables this optimizer tracks, in the order first seen.", NULL},
    {"weight_names", (getter)optim_py_weight_names, NULL,
     "The names of get_weights's arrays: 'iterations', then 'VARIABLE/SLOT'.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject optim_py_optimizer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "optim._optim.Optimizer",
    .tp_basicsize = sizeof(optim_py_optimizer),
    .tp_dealloc = (destructor)opt_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Optimizer(config_json, inner=None): a liboptim optimizer (see optim.Optimizer).",
    .tp_methods = opt_methods,
    .tp_getset = opt_getset,
    .tp_init = (initproc)opt_init,
    .tp_new = opt_new,
};
