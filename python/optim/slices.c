/* optim.IndexedSlices(values, indices, dense_shape=None): a sparse gradient,
 * tf.IndexedSlices's fields. values has shape [n, row shape...] (the
 * variable's dtype), indices n int32 or int64 row indices (repeats are
 * summed, as Keras does); dense_shape is kept for Keras's sake and unused.
 * The objects are kept as given; apply_gradients reads their buffers. */
#include "module.h"

#include <structmember.h>

static PyObject *slices_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"values", "indices", "dense_shape", NULL};
    PyObject *values, *indices, *dense_shape = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:IndexedSlices", kwlist, &values, &indices,
                                     &dense_shape))
        return NULL;
    optim_py_slices *s = (optim_py_slices *)type->tp_alloc(type, 0);
    if (!s) return NULL;
    s->values = Py_NewRef(values);
    s->indices = Py_NewRef(indices);
    s->dense_shape = Py_NewRef(dense_shape);
    return (PyObject *)s;
}

static void slices_dealloc(optim_py_slices *s)
{
    Py_XDECREF(s->values);
    Py_XDECREF(s->indices);
    Py_XDECREF(s->dense_shape);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMemberDef slices_members[] = {
    {"values", T_OBJECT, offsetof(optim_py_slices, values), READONLY, "The rows."},
    {"indices", T_OBJECT, offsetof(optim_py_slices, indices), READONLY, "Their row indices."},
    {"dense_shape", T_OBJECT, offsetof(optim_py_slices, dense_shape), READONLY,
     "The variable's shape, or None (unused)."},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject optim_py_slices_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "optim._optim.IndexedSlices",
    .tp_basicsize = sizeof(optim_py_slices),
    .tp_dealloc = (destructor)slices_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "IndexedSlices(values, indices, dense_shape=None): a sparse gradient (rows of the\n"
              "variable's first dimension; repeated indices are summed).",
    .tp_members = slices_members,
    .tp_new = slices_new,
};
