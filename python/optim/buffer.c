/* A Python buffer as an optim_tensor: the object's memory itself, never a
 * copy. The struct-module format gives the dtype (NumPy's float32 'f',
 * float64 'd', float16 'e'; bfloat16 travels as uint16 bits 'H', where the
 * caller says so); the buffer must be C-contiguous and aligned to its item
 * size, of rank at most OPTIM_MAX_RANK, and writable where the library
 * writes into it. Each refusal names the object, what it is and what was
 * expected. */
#include "module.h"

#include <stdint.h>
#include <string.h>

optim_dtype optim_py_format_dtype(const char *format, Py_ssize_t itemsize, int bf16)
{
    if (!format) format = "B";
    /* native, or little-endian on this (x86-64, little-endian) machine */
    if (*format == '@' || *format == '=' || *format == '<') format++;
    if (!format[0] || format[1]) return OPTIM_DTYPE_INVALID;
    switch (format[0]) {
    case 'f': return itemsize == 4 ? OPTIM_F32 : OPTIM_DTYPE_INVALID;
    case 'd': return itemsize == 8 ? OPTIM_F64 : OPTIM_DTYPE_INVALID;
    case 'e': return itemsize == 2 ? OPTIM_F16 : OPTIM_DTYPE_INVALID;
    case 'H': return bf16 && itemsize == 2 ? OPTIM_BF16 : OPTIM_DTYPE_INVALID;
    default: return OPTIM_DTYPE_INVALID;
    }
}

/* An index list's dtype: int32 or int64 (NumPy's 'i', 'l' or 'q'). */
static optim_dtype index_dtype(const char *format, Py_ssize_t itemsize)
{
    if (!format) return OPTIM_DTYPE_INVALID;
    if (*format == '@' || *format == '=' || *format == '<') format++;
    if (!format[0] || format[1] || !strchr("ilq", format[0])) return OPTIM_DTYPE_INVALID;
    return itemsize == 4 ? OPTIM_I32 : itemsize == 8 ? OPTIM_I64 : OPTIM_DTYPE_INVALID;
}

PyObject *optim_py_shape_tuple(int32_t rank, const int64_t *shape)
{
    PyObject *t = PyTuple_New(rank);
    for (int32_t i = 0; t && i < rank; i++) {
        PyObject *d = PyLong_FromLongLong((long long)shape[i]);
        if (!d) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

/* The checks after the buffer is held; 0 or -1 with optim.Error set. */
static int check_view(optim_py_buf *b, const optim_py_buf_opts *o)
{
    Py_buffer *v = &b->view;
    const char *fmt = v->format ? v->format : "B";
    if (o->writable && v->readonly)
        return optim_py_fail("%s is read-only; the optimizer updates it in place, so it must "
                             "be writable",
                             o->what);
    b->t.dtype = o->integer ? index_dtype(fmt, v->itemsize)
                            : optim_py_format_dtype(fmt, v->itemsize, o->bf16);
    if (b->t.dtype == OPTIM_DTYPE_INVALID)
        return optim_py_fail(o->integer ? "%s has format '%s' (%zd-byte items); expected an int32 "
                                          "or int64 array"
                                        : "%s has format '%s' (%zd-byte items); expected float32, "
                                          "float64, float16%s",
                             o->what, fmt, v->itemsize,
                             o->integer    ? ""
                                 : o->bf16 ? " or bfloat16 bits (uint16)"
                                           : " (or bfloat16 as uint16 bits through "
                                             "optim.Variable(..., dtype='bfloat16'))");
    if (v->ndim > OPTIM_MAX_RANK)
        return optim_py_fail("%s has %d dimensions; optim takes at most %d", o->what, v->ndim,
                             OPTIM_MAX_RANK);
    if (!PyBuffer_IsContiguous(v, 'C'))
        return optim_py_fail("%s is not C-contiguous (a strided view, a transpose or a "
                             "Fortran-ordered array); pass a contiguous array "
                             "(numpy.ascontiguousarray copies one, and then the copy is what "
                             "gets updated)",
                             o->what);
    if (v->len > 0 && (uintptr_t)v->buf % (uintptr_t)v->itemsize != 0)
        return optim_py_fail("%s is not aligned to its %zd-byte items", o->what, v->itemsize);
    b->t.rank = v->ndim;
    for (int i = 0; i < v->ndim; i++) b->t.shape[i] = (int64_t)(v->shape ? v->shape[i] : 0);
    if (v->ndim == 1 && !v->shape) b->t.shape[0] = (int64_t)(v->len / v->itemsize);
    b->t.data = v->buf;
    return 0;
}

int optim_py_buf_get(optim_py_buf *b, PyObject *obj, const optim_py_buf_opts *o)
{
    memset(b, 0, sizeof *b);
    if (!PyObject_CheckBuffer(obj))
        return optim_py_fail("%s is a %s, not an array (a NumPy array or another object "
                             "exporting a buffer)",
                             o->what, Py_TYPE(obj)->tp_name);
    /* Strides are asked for, so that a strided array is seen and refused
     * with a message here instead of by its exporter. */
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_RECORDS_RO) < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *s = value ? PyObject_Str(value) : NULL;
        const char *why = s ? PyUnicode_AsUTF8(s) : NULL;
        PyErr_Clear();
        optim_py_fail("%s: cannot read its buffer: %s", o->what, why ? why : "unknown error");
        Py_XDECREF(s);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    b->held = 1;
    if (check_view(b, o) == 0) return 0;
    optim_py_buf_release(b);
    return -1;
}

void optim_py_buf_release(optim_py_buf *b)
{
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}
