/* opt.apply_gradients([(gradient, variable), ...]): each variable an array
 * (or optim.Variable) updated in place, each gradient an array of its
 * dtype and shape, None (skipped) or optim.IndexedSlices. Every buffer is
 * read as it is (no copy, except int32 indices widened to int64), the
 * pairs go to one optim_apply_gradients call run without the GIL, and a
 * refused call leaves every array, the optimizer and its variable map as
 * they were: the library checks everything before it changes anything,
 * and this file everything before the library runs. opt.build(var_list)
 * makes the slots of these variables now (Keras 3's build), for
 * set_weights before a first step. */
#include "module.h"

#include <stdio.h>
#include <string.h>

/* One call's buffers: per pair the gradient (dense, or the values of
 * slices) and the indices, and int32 indices widened. */
typedef struct call {
    size_t n;
    optim_grad_var *pairs;
    optim_py_buf *grads, *indices;
    int64_t **wide;
} call;

static int call_alloc(call *c, size_t n)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->pairs = PyMem_Calloc(n ? n : 1, sizeof *c->pairs);
    c->grads = PyMem_Calloc(n ? n : 1, sizeof *c->grads);
    c->indices = PyMem_Calloc(n ? n : 1, sizeof *c->indices);
    c->wide = PyMem_Calloc(n ? n : 1, sizeof *c->wide);
    if (c->pairs && c->grads && c->indices && c->wide) return 0;
    PyErr_NoMemory();
    return -1;
}

static void call_free(call *c)
{
    for (size_t i = 0; c->grads && i < c->n; i++) {
        optim_py_buf_release(&c->grads[i]);
        optim_py_buf_release(&c->indices[i]);
        PyMem_Free(c->wide[i]);
    }
    PyMem_Free(c->pairs);
    PyMem_Free(c->grads);
    PyMem_Free(c->indices);
    PyMem_Free(c->wide);
}

/* Values given as a Python list (not a buffer) as a NumPy array of the
 * variable's dtype vd (not bfloat16, whose bits a list cannot mean); as
 * given where NumPy cannot make one, for optim_py_buf_get to refuse. */
static PyObject *list_values(PyObject *values, optim_dtype vd)
{
    if (PyObject_CheckBuffer(values) || vd == OPTIM_BF16) return Py_NewRef(values);
    PyObject *np = PyImport_ImportModule("numpy");
    PyObject *r =
        np ? PyObject_CallMethod(np, "asarray", "Os", values, optim_dtype_name(vd)) : NULL;
    Py_XDECREF(np);
    if (!r) PyErr_Clear();
    return r ? r : Py_NewRef(values);
}

/* Pair i's sparse gradient s for a variable of dtype vd. */
static int sparse_grad(call *c, size_t i, optim_py_slices *s, optim_dtype vd, char *what,
                       size_t len)
{
    snprintf(what, len, "apply_gradients: pair %zu: IndexedSlices values", i);
    optim_py_buf_opts o = {.bf16 = vd == OPTIM_BF16, .what = what};
    PyObject *values = list_values(s->values, vd);
    int got = optim_py_buf_get(&c->grads[i], values, &o); /* the buffer holds values */
    Py_DECREF(values);
    if (got < 0) return -1;
    snprintf(what, len, "apply_gradients: pair %zu: IndexedSlices indices", i);
    optim_py_buf_opts io = {.integer = 1, .what = what};
    optim_py_buf *ib = &c->indices[i];
    if (optim_py_buf_get(ib, s->indices, &io) < 0) return -1;
    if (ib->t.rank != 1)
        return optim_py_fail("%s have %d dimensions, expected 1 (a list of row indices)", what,
                             (int)ib->t.rank);
    int64_t n = ib->t.shape[0];
    const int64_t *idx = ib->t.data;
    if (ib->t.dtype == OPTIM_I32) {
        if (!(c->wide[i] = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int64_t)))) {
            PyErr_NoMemory();
            return -1;
        }
        for (int64_t k = 0; k < n; k++) c->wide[i][k] = ((const int32_t *)ib->t.data)[k];
        idx = c->wide[i];
    }
    c->pairs[i].grad = optim_grad_sparse(idx, n, c->grads[i].t);
    return 0;
}

/* Pair i: its variable (through the map) and its gradient. */
static int read_pair(optim_py_optimizer *self, call *c, size_t i, PyObject *item)
{
    char what[96];
    if (!(PyTuple_Check(item) || PyList_Check(item)) || PySequence_Fast_GET_SIZE(item) != 2)
        return optim_py_fail("apply_gradients: pair %zu is a %s, expected a (gradient, "
                             "variable) pair",
                             i, Py_TYPE(item)->tp_name);
    PyObject *g = PySequence_Fast_GET_ITEM(item, 0), *v = PySequence_Fast_GET_ITEM(item, 1);
    snprintf(what, sizeof what, "apply_gradients: pair %zu: the variable", i);
    optim_py_variable *var = optim_py_varmap_get(&self->vars, v, what);
    if (!var) return -1;
    optim_dtype vd = optim_var_dtype(var->var);
    c->pairs[i].var = var->var;
    if (g == Py_None) {
        c->pairs[i].grad = optim_grad_none();
        return 0;
    }
    if (PyObject_TypeCheck(g, &optim_py_slices_type))
        return sparse_grad(c, i, (optim_py_slices *)g, vd, what, sizeof what);
    snprintf(what, sizeof what, "apply_gradients: pair %zu: the gradient", i);
    optim_py_buf_opts o = {.bf16 = vd == OPTIM_BF16, .what = what};
    if (optim_py_buf_get(&c->grads[i], g, &o) < 0) return -1;
    c->pairs[i].grad = optim_grad_dense(c->grads[i].t);
    return 0;
}

/* The library's step, without the GIL; 0 or its status. */
static int step(optim_py_optimizer *self, const call *c)
{
    int threads = optim_py_num_threads;
    PyThreadState *ts = PyEval_SaveThread();
    if (self->threads != threads && optim_set_num_threads(self->opt, threads) == 0)
        self->threads = threads;
    int rc = optim_apply_gradients(self->opt, c->pairs, c->n, 0);
    PyEval_RestoreThread(ts);
    return rc;
}

PyObject *optim_py_apply_gradients(optim_py_optimizer *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg,
                                    "apply_gradients takes a list of (gradient, variable) "
                                    "pairs");
    if (!seq) return NULL;
    if (optim_py_lock(self) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    optim_py_varmap_mark mark = optim_py_varmap_mark_get(&self->vars);
    call c;
    int rc = call_alloc(&c, n);
    for (size_t i = 0; rc == 0 && i < n; i++) rc = read_pair(self, &c, i, items[i]);
    if (rc == 0 && step(self, &c)) {
        optim_py_raise_opt(self, "apply_gradients");
        rc = -1;
    }
    if (rc < 0) optim_py_varmap_rollback(&self->vars, mark);
    PyObject *r = rc < 0 ? NULL : PyLong_FromLongLong((long long)optim_iterations(self->opt));
    call_free(&c);
    optim_py_unlock(self);
    Py_DECREF(seq);
    return r;
}

PyObject *optim_py_build(optim_py_optimizer *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "build takes a list of variables");
    if (!seq) return NULL;
    if (optim_py_lock(self) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    optim_py_varmap_mark mark = optim_py_varmap_mark_get(&self->vars);
    optim_var **vars = PyMem_Calloc(n ? n : 1, sizeof *vars);
    int rc = vars ? 0 : -1;
    if (!vars) PyErr_NoMemory();
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "build: variable %zu", i);
        optim_py_variable *v =
            optim_py_varmap_get(&self->vars, PySequence_Fast_GET_ITEM(seq, i), what);
        if (v) vars[i] = v->var;
        else rc = -1;
    }
    if (rc == 0 && optim_build(self->opt, vars, n)) {
        optim_py_raise_opt(self, "build");
        rc = -1;
    }
    if (rc < 0) optim_py_varmap_rollback(&self->vars, mark);
    PyMem_Free(vars);
    optim_py_unlock(self);
    Py_DECREF(seq);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}
