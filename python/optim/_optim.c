/* optim._optim: the module. It defines optim.Error and the types
 * (Optimizer, Variable, IndexedSlices, Schedule), lists the registry's
 * classes for the Python layer's constructors, and holds the process-wide
 * calls (runtime.c). module.h lists the files. */
#include "module.h"

#include <stdarg.h>
#include <stdio.h>

PyObject *optim_py_error;

static PyObject *vraise(const char *fmt, va_list ap)
{
    char msg[OPTIM_ERRMSG_MAX + 512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    PyErr_SetString(optim_py_error, msg);
    return NULL;
}

PyObject *optim_py_raise(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vraise(fmt, ap);
    va_end(ap);
    return NULL;
}

int optim_py_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vraise(fmt, ap);
    va_end(ap);
    return -1;
}

static int is_wrapper(const optim_class *c)
{
    return c->inner || c->inner_at || c->step || c->apply_gradients;
}

/* _classes(): [(name, tfa_name or None, is_wrapper, legacy_only, keras3_only,
 * no_sparse), ...] */
static PyObject *list_classes(PyObject *mod, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && optim_class_at(i); i++) {
        const optim_class *c = optim_class_at(i);
        PyObject *item =
            Py_BuildValue("(szNNNN)", c->name, c->tfa_name, PyBool_FromLong(is_wrapper(c)),
                          PyBool_FromLong(!!(c->flags & OPTIM_CLASS_LEGACY_ONLY)),
                          PyBool_FromLong(!!(c->flags & OPTIM_CLASS_KERAS3_ONLY)),
                          PyBool_FromLong(!!(c->flags & OPTIM_CLASS_NO_SPARSE)));
        if (!item || PyList_Append(list, item) < 0) Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

/* _schedule_classes(): [(name, (positional keys)), ...]: the numeric keys
 * Keras's constructor takes before `name`, in its order (the keys written
 * after name, and lists such as boundaries, are keyword-only here). */
static PyObject *list_schedules(PyObject *mod, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && optim_schedule_class_at(i); i++) {
        const optim_schedule_class *c = optim_schedule_class_at(i);
        PyObject *params = PyList_New(0);
        for (size_t k = 0; params && k < c->n_params; k++) {
            if (c->params[k].flags & OPTIM_PARAM_AFTER_NAME) continue;
            PyObject *s = PyUnicode_FromString(c->params[k].name);
            if (!s || PyList_Append(params, s) < 0) Py_CLEAR(params);
            Py_XDECREF(s);
        }
        PyObject *item = params ? Py_BuildValue("(sN)", c->name, params) : NULL;
        if (!item || PyList_Append(list, item) < 0) Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

static PyMethodDef module_methods[] = {
    {"_classes", list_classes, METH_NOARGS,
     "The registry's optimizer classes: (name, tfa_name, is_wrapper, legacy_only, "
     "keras3_only, no_sparse)."},
    {"_schedule_classes", list_schedules, METH_NOARGS,
     "The registry's schedule classes: (name, positional keys)."},
    {"load_plugin", optim_py_load_plugin, METH_O,
     "load_plugin(path): opens a plugin and registers its classes; True when loaded now, "
     "False when it was loaded before."},
    {"set_num_threads", optim_py_set_num_threads, METH_O,
     "set_num_threads(n): the OpenMP threads of every optimizer's next steps (0: OpenMP's "
     "default). Results do not depend on it."},
    {"conformance", (PyCFunction)(void (*)(void))optim_py_conformance, METH_VARARGS | METH_KEYWORDS,
     "conformance(class_name, generation=None, config=None, group=None): (passed, failed, "
     "lines)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "optim._optim",
    .m_doc = "liboptim's optimizers for Python (docs/python.md); use the package optim.",
    .m_size = -1, .m_methods = module_methods};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
    if (PyType_Ready(t) < 0) return -1;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) == 0) return 0;
    Py_DECREF(t);
    return -1;
}

PyMODINIT_FUNC PyInit__optim(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    optim_py_error = PyErr_NewExceptionWithDoc(
        "optim.Error",
        "A refusal by optim (a ValueError): the library's message says what was wrong. A "
        "failed call changes no array and no state.",
        PyExc_ValueError, NULL);
    if (!optim_py_error || PyModule_AddObjectRef(m, "Error", optim_py_error) < 0 ||
        add_type(m, &optim_py_optimizer_type, "Optimizer") < 0 ||
        add_type(m, &optim_py_variable_type, "Variable") < 0 ||
        add_type(m, &optim_py_slices_type, "IndexedSlices") < 0 ||
        add_type(m, &optim_py_schedule_type, "Schedule") < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MAJOR", OPTIM_VERSION_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MINOR", OPTIM_VERSION_MINOR) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_PATCH", OPTIM_VERSION_PATCH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
