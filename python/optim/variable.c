/* optim.Variable(array, name="variable", dtype=None, trainable=True): a
 * named variable over an array's own memory (optim_var_wrap), which the
 * optimizer updates in place. The array's buffer is held, writable, for the
 * Variable's life: NumPy then refuses to resize or free it. dtype
 * "bfloat16" reads a uint16 array as bfloat16 bits (NumPy has no
 * bfloat16); any other dtype given must be the array's own. A Variable may
 * be stepped by several optimizers; each keeps it alive while it tracks it. */
#include "module.h"

#include <string.h>

optim_py_variable *optim_py_variable_make(PyObject *obj, const char *name, int bf16,
                                          const char *what)
{
    optim_py_variable *v = PyObject_New(optim_py_variable, &optim_py_variable_type);
    if (!v) return NULL;
    v->var = NULL;
    optim_py_buf_opts o = {.writable = 1, .bf16 = bf16, .what = what};
    if (optim_py_buf_get(&v->buf, obj, &o) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    optim_error err;
    const optim_tensor *t = &v->buf.t;
    if (optim_var_wrap(&v->var, name, t->dtype, t->rank, t->shape, t->data, &err)) {
        optim_py_fail("%s: %s", what, err.msg);
        Py_DECREF(v);
        return NULL;
    }
    return v;
}

PyObject *optim_py_variable_key(const optim_py_buf *b)
{
    if (b->view.len > 0) return PyLong_FromVoidPtr(b->view.buf);
    /* Empty arrays may share an address: the exporter itself, which the
     * Variable keeps alive, tells them apart. */
    return Py_BuildValue("(iN)", 0, PyLong_FromVoidPtr(b->view.obj));
}

static PyObject *variable_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"array", "name", "dtype", "trainable", NULL};
    PyObject *array;
    const char *name = "variable", *dtype = NULL;
    int trainable = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|zzp:Variable", kwlist, &array, &name, &dtype,
                                     &trainable))
        return NULL;
    if (type != &optim_py_variable_type)
        return optim_py_raise("optim.Variable cannot be subclassed");
    int bf16 = dtype && strcmp(dtype, "bfloat16") == 0;
    optim_py_variable *v =
        optim_py_variable_make(array, name ? name : "variable", bf16, "Variable: the array");
    if (!v) return NULL;
    const char *have = optim_dtype_name(optim_var_dtype(v->var));
    if (dtype && strcmp(dtype, have) != 0) {
        Py_DECREF(v);
        return optim_py_raise("Variable: dtype '%s' given for an array of %s; give the array "
                              "in that dtype (only 'bfloat16' reinterprets: uint16 bits)",
                              dtype, have);
    }
    optim_var_set_trainable(v->var, trainable);
    return (PyObject *)v;
}

static void variable_dealloc(optim_py_variable *v)
{
    optim_var_destroy(v->var);
    optim_py_buf_release(&v->buf);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

static PyObject *get_name(optim_py_variable *v, void *c)
{
    return PyUnicode_FromString(optim_var_name(v->var));
}

static PyObject *get_array(optim_py_variable *v, void *c) { return Py_NewRef(v->buf.view.obj); }

static PyObject *get_shape(optim_py_variable *v, void *c)
{
    return optim_py_shape_tuple(optim_var_rank(v->var), optim_var_shape(v->var));
}

static PyObject *get_dtype(optim_py_variable *v, void *c)
{
    return PyUnicode_FromString(optim_dtype_name(optim_var_dtype(v->var)));
}

static PyObject *get_trainable(optim_py_variable *v, void *c)
{
    return PyBool_FromLong(optim_var_trainable(v->var));
}

static int set_trainable(optim_py_variable *v, PyObject *value, void *c)
{
    int t = value ? PyObject_IsTrue(value) : -1;
    if (!value) PyErr_SetString(PyExc_AttributeError, "trainable cannot be deleted");
    if (t < 0) return -1;
    optim_var_set_trainable(v->var, t);
    return 0;
}

static PyObject *variable_repr(optim_py_variable *v)
{
    char shape[160];
    optim_shape_str(optim_var_rank(v->var), optim_var_shape(v->var), shape, sizeof shape);
    return PyUnicode_FromFormat("<optim.Variable '%s' shape=%s dtype=%s>", optim_var_name(v->var),
                                shape, optim_dtype_name(optim_var_dtype(v->var)));
}

static PyGetSetDef variable_getset[] = {
    {"name", (getter)get_name, NULL, "The variable's name (weights are named NAME/SLOT).", NULL},
    {"array", (getter)get_array, NULL, "The array the optimizer updates in place.", NULL},
    {"shape", (getter)get_shape, NULL, "The shape, a tuple.", NULL},
    {"dtype", (getter)get_dtype, NULL, "'float32', 'float64', 'float16' or 'bfloat16'.", NULL},
    {"trainable", (getter)get_trainable, (setter)set_trainable,
     "apply_gradients refuses a gradient for a variable that is not trainable.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject optim_py_variable_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "optim.Variable",
    .tp_basicsize = sizeof(optim_py_variable),
    .tp_dealloc = (destructor)variable_dealloc,
    .tp_repr = (reprfunc)variable_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Variable(array, name='variable', dtype=None, trainable=True)\n\n"
              "A named variable over the array's own memory, updated in place by optimizers.\n"
              "The array must be writable, C-contiguous float32, float64 or float16, or uint16\n"
              "holding bfloat16 bits with dtype='bfloat16'.",
    .tp_getset = variable_getset,
    .tp_new = variable_new,
};
