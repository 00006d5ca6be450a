/* get_weights / set_weights in the library's order (optim_get_weights):
 * iterations, then each slot, "VARIABLE/SLOT", in creation order. The
 * extension hands out (name, dtype, shape, bytearray) copies; __init__.py
 * makes NumPy arrays of them (bfloat16 as uint16 bits). set_weights reads
 * each array's buffer and gives them all to optim_set_weights, which checks
 * count, dtypes, shapes and slot domains before it changes anything. */
#include "module.h"

#include <stdio.h>
#include <string.h>

/* The optimizer's weight views (count in *n), or NULL with an error set. */
static optim_tensor *views(optim_py_optimizer *self, size_t *n)
{
    *n = optim_weights_count(self->opt);
    optim_tensor *w = PyMem_Calloc(*n ? *n : 1, sizeof *w);
    if (!w) PyErr_NoMemory();
    else optim_get_weights(self->opt, w, *n);
    return w;
}

static PyObject *raw_weight(optim_py_optimizer *self, size_t i, const optim_tensor *t)
{
    size_t bytes = (size_t)optim_tensor_numel(t) * optim_dtype_size(t->dtype);
    PyObject *data = PyByteArray_FromStringAndSize(t->data, (Py_ssize_t)bytes);
    PyObject *shape = optim_py_shape_tuple(t->rank, t->shape);
    PyObject *r = data && shape ? Py_BuildValue("(ssOO)", optim_weight_name(self->opt, i),
                                                optim_dtype_name(t->dtype), shape, data)
                                : NULL;
    Py_XDECREF(data);
    Py_XDECREF(shape);
    return r;
}

PyObject *optim_py_get_weights(optim_py_optimizer *self, PyObject *unused)
{
    if (optim_py_lock(self) < 0) return NULL;
    size_t n;
    optim_tensor *w = views(self, &n);
    PyObject *list = w ? PyList_New((Py_ssize_t)n) : NULL;
    for (size_t i = 0; list && i < n; i++) {
        PyObject *item = raw_weight(self, i, &w[i]);
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    PyMem_Free(w);
    optim_py_unlock(self);
    return list;
}

PyObject *optim_py_weight_names(optim_py_optimizer *self, void *unused)
{
    if (optim_py_lock(self) < 0) return NULL;
    size_t n = optim_weights_count(self->opt);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *s = PyUnicode_FromString(optim_weight_name(self->opt, i));
        if (!s) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    optim_py_unlock(self);
    return list;
}

/* Reads item i as the weight now at have (its dtype tells bfloat16 bits
 * and whether integers are taken: the iterations counter). */
static int read_weight(optim_py_buf *b, PyObject *item, size_t i, const optim_tensor *have,
                       const char *name)
{
    char what[160];
    snprintf(what, sizeof what, "set_weights: array %zu ('%s')", i, name);
    int is_int = have->dtype == OPTIM_I32 || have->dtype == OPTIM_I64;
    optim_py_buf_opts o = {.bf16 = have->dtype == OPTIM_BF16, .integer = is_int, .what = what};
    return optim_py_buf_get(b, item, &o);
}

/* A weight of another dtype than the optimizer's is refused here, by name. */
static int same_dtype(const optim_tensor *t, const optim_tensor *have, size_t i, const char *name)
{
    if (t->dtype == have->dtype) return 0;
    return optim_py_fail("set_weights: array %zu ('%s') has dtype %s; expected %s, the weight's "
                         "(get_weights's dtype)",
                         i, name, optim_dtype_name(t->dtype), optim_dtype_name(have->dtype));
}

static int set_all(optim_py_optimizer *self, PyObject **items, size_t n)
{
    size_t have_n;
    optim_tensor *have = views(self, &have_n);
    if (!have) return -1;
    optim_py_buf *bufs = n == have_n ? PyMem_Calloc(n ? n : 1, sizeof *bufs) : NULL;
    optim_tensor *ts = bufs ? PyMem_Calloc(n ? n : 1, sizeof *ts) : NULL;
    int rc = -1;
    if (n != have_n)
        optim_py_fail("set_weights: %zu arrays given; the optimizer has %zu weights "
                      "(iterations, then each slot: see weight_names)",
                      n, have_n);
    else if (!ts) PyErr_NoMemory();
    else rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = read_weight(&bufs[i], items[i], i, &have[i], optim_weight_name(self->opt, i));
        if (rc == 0) rc = same_dtype(&bufs[i].t, &have[i], i, optim_weight_name(self->opt, i));
        if (rc == 0) ts[i] = bufs[i].t;
    }
    if (rc == 0 && optim_set_weights(self->opt, ts, n)) {
        optim_py_raise_opt(self, "set_weights");
        rc = -1;
    }
    for (size_t i = 0; bufs && i < n; i++) optim_py_buf_release(&bufs[i]);
    PyMem_Free(bufs);
    PyMem_Free(ts);
    PyMem_Free(have);
    return rc;
}

PyObject *optim_py_set_weights(optim_py_optimizer *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "set_weights takes a list of arrays");
    if (!seq) return NULL;
    if (optim_py_lock(self) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    int rc = set_all(self, PySequence_Fast_ITEMS(seq), (size_t)PySequence_Fast_GET_SIZE(seq));
    optim_py_unlock(self);
    Py_DECREF(seq);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}
