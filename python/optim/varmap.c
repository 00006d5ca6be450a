/* An optimizer's variables, as the library knows them: each array (by the
 * address of its memory, so that a new NumPy view of the same tensor,
 * torch.Tensor.numpy() made afresh at each step, is the same variable) maps
 * to one Variable. A plain array seen for the first time becomes a Variable
 * named "variable", "variable_1", ... in the order first seen: the names of
 * its weights ("variable_1/m") depend only on that order. An optim.Variable
 * brings its own name. The map holds each Variable (and so each array) for
 * the optimizer's life, as a Keras optimizer holds its variables; a refused
 * step forgets those it added. */
#include "module.h"

#include <stdio.h>
#include <string.h>

int optim_py_varmap_init(optim_py_varmap *m)
{
    m->by_key = PyDict_New();
    m->order = PyList_New(0);
    m->auto_names = 0;
    return m->by_key && m->order ? 0 : -1;
}

void optim_py_varmap_clear(optim_py_varmap *m)
{
    Py_CLEAR(m->by_key);
    Py_CLEAR(m->order);
    m->auto_names = 0;
}

optim_py_varmap_mark optim_py_varmap_mark_get(const optim_py_varmap *m)
{
    optim_py_varmap_mark k = {PyList_GET_SIZE(m->order), m->auto_names};
    return k;
}

void optim_py_varmap_rollback(optim_py_varmap *m, optim_py_varmap_mark mark)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* the step's error stays the one raised */
    for (Py_ssize_t i = PyList_GET_SIZE(m->order) - 1; i >= mark.n; i--) {
        optim_py_variable *v = (optim_py_variable *)PyList_GET_ITEM(m->order, i);
        PyObject *key = optim_py_variable_key(&v->buf);
        if (!key || PyDict_DelItem(m->by_key, key) < 0) PyErr_Clear();
        Py_XDECREF(key);
    }
    if (PyList_SetSlice(m->order, mark.n, PyList_GET_SIZE(m->order), NULL) < 0) PyErr_Clear();
    m->auto_names = mark.auto_names;
    PyErr_Restore(type, value, tb);
}

/* The Variable v known at this memory, seen now as b (or as the Variable
 * given): the same dtype and shape, writable, and the same name. */
static int check_known(optim_py_variable *v, const optim_py_buf *b, optim_py_variable *given,
                       const char *what)
{
    const optim_tensor *t = &v->buf.t, *s = &b->t;
    int same = t->dtype == s->dtype && t->rank == s->rank;
    for (int32_t i = 0; same && i < t->rank; i++) same = t->shape[i] == s->shape[i];
    char a[160], c[160];
    if (!same)
        return optim_py_fail("%s: this memory is variable '%s' (%s %s) of this optimizer, "
                             "given now as %s %s; pass the array as it was first given",
                             what, optim_var_name(v->var), optim_dtype_name(t->dtype),
                             optim_shape_str(t->rank, t->shape, a, sizeof a),
                             optim_dtype_name(s->dtype),
                             optim_shape_str(s->rank, s->shape, c, sizeof c));
    if (b->view.readonly)
        return optim_py_fail("%s is a read-only view of variable '%s'; the optimizer updates it in "
                             "place, so it must be writable",
                             what, optim_var_name(v->var));
    if (given && given != v && strcmp(optim_var_name(given->var), optim_var_name(v->var)) != 0)
        return optim_py_fail("%s: Variable '%s' is over the memory this optimizer knows as "
                             "variable '%s'",
                             what, optim_var_name(given->var), optim_var_name(v->var));
    return 0;
}

static int add(optim_py_varmap *m, PyObject *key, optim_py_variable *v)
{
    if (PyDict_SetItem(m->by_key, key, (PyObject *)v) < 0) return -1;
    if (PyList_Append(m->order, (PyObject *)v) == 0) return 0;
    PyDict_DelItem(m->by_key, key);
    return -1;
}

/* A plain array not seen before: a Variable under the next automatic name. */
static optim_py_variable *add_plain(optim_py_varmap *m, PyObject *key, PyObject *obj,
                                    const char *what)
{
    char name[48];
    if (m->auto_names == 0) snprintf(name, sizeof name, "variable");
    else snprintf(name, sizeof name, "variable_%zd", m->auto_names);
    optim_py_variable *v = optim_py_variable_make(obj, name, 0, what);
    if (!v) return NULL;
    int rc = add(m, key, v);
    Py_DECREF(v); /* the map holds it */
    if (rc < 0) return NULL;
    m->auto_names++;
    return v;
}

optim_py_variable *optim_py_varmap_get(optim_py_varmap *m, PyObject *obj, const char *what)
{
    optim_py_variable *given = NULL, *found = NULL;
    optim_py_buf own = {.held = 0};
    const optim_py_buf *b;
    if (PyObject_TypeCheck(obj, &optim_py_variable_type)) {
        given = (optim_py_variable *)obj;
        b = &given->buf;
    } else {
        optim_py_buf_opts o = {.writable = 1, .what = what};
        if (optim_py_buf_get(&own, obj, &o) < 0) return NULL;
        b = &own;
    }
    PyObject *key = optim_py_variable_key(b);
    PyObject *v = key ? PyDict_GetItemWithError(m->by_key, key) : NULL;
    if (v) {
        found = check_known((optim_py_variable *)v, b, given, what) == 0 ? (optim_py_variable *)v
                                                                         : NULL;
    } else if (key && !PyErr_Occurred()) {
        if (given) found = add(m, key, given) == 0 ? given : NULL;
        else found = add_plain(m, key, obj, what);
    }
    Py_XDECREF(key);
    optim_py_buf_release(&own);
    return found;
}
