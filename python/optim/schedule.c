/* Learning-rate schedule objects, optim._optim.Schedule(config_json): one
 * liboptim schedule (optim_schedule_from_json, keras.optimizers.schedules'
 * JSON). schedule(step) is its value at a step; an optimizer given one
 * (as learning_rate, or opt.learning_rate = schedule) takes a copy. The
 * Python layer (optim/schedules.py) subclasses it once per registered
 * schedule class. */
#include "module.h"

static PyObject *sched_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    optim_py_schedule *self = (optim_py_schedule *)type->tp_alloc(type, 0);
    if (self) self->s = NULL;
    return (PyObject *)self;
}

static int sched_init(optim_py_schedule *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"config", NULL};
    const char *json;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s:Schedule", kwlist, &json)) return -1;
    if (self->s) return optim_py_fail("this schedule was created already");
    optim_error err;
    if (optim_schedule_from_json(&self->s, json, &err)) return optim_py_fail("%s", err.msg);
    return 0;
}

static void sched_dealloc(optim_py_schedule *self)
{
    optim_schedule_destroy(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int created(optim_py_schedule *self)
{
    return self->s ? 0 : optim_py_fail("this schedule was not created (its __init__ failed)");
}

optim_schedule *optim_py_schedule_copy(PyObject *obj)
{
    optim_py_schedule *self = (optim_py_schedule *)obj;
    if (created(self) < 0) return NULL;
    char *json = optim_schedule_serialize(self->s);
    optim_schedule *copy = NULL;
    optim_error err;
    if (!json) PyErr_NoMemory();
    else if (optim_schedule_from_json(&copy, json, &err)) optim_py_fail("%s", err.msg);
    optim_free(json);
    return copy;
}

static PyObject *sched_call(optim_py_schedule *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"step", NULL};
    long long step;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L:__call__", kwlist, &step) || created(self) < 0)
        return NULL;
    if (step < 0) return optim_py_raise("schedule: step %lld, expected >= 0", step);
    return PyFloat_FromDouble(optim_schedule_value(self->s, (int64_t)step));
}

static PyObject *sched_serialize_text(optim_py_schedule *self, PyObject *unused)
{
    if (created(self) < 0) return NULL;
    char *json = optim_schedule_serialize(self->s);
    PyObject *r = json ? PyUnicode_FromString(json) : PyErr_NoMemory();
    optim_free(json);
    return r;
}

static PyObject *sched_class_name(optim_py_schedule *self, void *c)
{
    if (created(self) < 0) return NULL;
    return PyUnicode_FromString(optim_schedule_class_of(self->s)->name);
}

static PyMethodDef sched_methods[] = {
    {"_serialize_text", (PyCFunction)sched_serialize_text, METH_NOARGS, "serialize as JSON text."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef sched_getset[] = {
    {"class_name", (getter)sched_class_name, NULL, "The schedule's class name.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject optim_py_schedule_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "optim._optim.Schedule",
    .tp_basicsize = sizeof(optim_py_schedule),
    .tp_dealloc = (destructor)sched_dealloc,
    .tp_call = (ternaryfunc)sched_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Schedule(config_json): a liboptim learning-rate schedule; schedule(step) is its "
              "value.",
    .tp_methods = sched_methods,
    .tp_getset = sched_getset,
    .tp_init = (initproc)sched_init,
    .tp_new = sched_new,
};
