/* The process-wide calls: optim.load_plugin(path) opens a plugin (a shared
 * library linked against the same liboptim.so, optim/plugin.h) and runs
 * its optim_plugin_init, which registers its classes in this process's
 * registry, as `optim --plugin` does; optim.set_num_threads(n) sets the
 * thread count of every optimizer's next steps; optim.conformance(name)
 * runs the contract checks of optim/conformance.h in this process. */
#define _POSIX_C_SOURCE 200809L
#include "module.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/plugin.h"

int optim_py_num_threads = 0;

typedef int (*plugin_init_fn)(optim_error *err);

/* The plugins loaded, each once, never closed: the classes they
 * registered point into them. `failed`: its init returned an error (it may
 * have registered some classes first, so it stays open, and a second load
 * raises again instead of answering "loaded before"). */
typedef struct plugin {
    void *lib;
    int failed;
} plugin;

static plugin *loaded;
static size_t n_loaded;

/* The entry of lib, NULL when it is not loaded. */
static plugin *seen(void *lib)
{
    for (size_t i = 0; i < n_loaded; i++)
        if (loaded[i].lib == lib) return &loaded[i];
    return NULL;
}

/* True when loaded now, False when it was loaded before. */
static PyObject *open_plugin(const char *path)
{
    /* dlopen searches for a bare name (LD_LIBRARY_PATH, rpaths, the system's
     * directories): only the file named is loaded, as by the command. */
    if (!strchr(path, '/'))
        return optim_py_raise("plugin %s: give a path (./%s or /abs/%s); bare names are not "
                              "searched",
                              path, path, path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return optim_py_raise("plugin %s: cannot open: %s", path, why ? why : "unknown error");
    }
    const plugin *known = seen(lib);
    if (known) {
        dlclose(lib); /* the reference dlopen added */
        if (known->failed)
            return optim_py_raise("plugin %s: its %s failed when it was first loaded; it "
                                  "stays open (it may have registered classes): restart the "
                                  "process to load it again",
                                  path, OPTIM_PLUGIN_INIT_SYMBOL);
        Py_RETURN_FALSE;
    }
    plugin_init_fn init;
    *(void **)&init = dlsym(lib, OPTIM_PLUGIN_INIT_SYMBOL);
    plugin *more = init ? realloc(loaded, (n_loaded + 1) * sizeof *loaded) : NULL;
    if (!more) {
        dlclose(lib);
        return init ? PyErr_NoMemory()
                    : optim_py_raise("plugin %s: no entry point %s (define it with "
                                     "OPTIM_PLUGIN_INIT)",
                                     path, OPTIM_PLUGIN_INIT_SYMBOL);
    }
    loaded = more;
    plugin *p = &loaded[n_loaded++];
    *p = (plugin){lib, 0};
    optim_error err = {0};
    int rc = init(&err);
    p->failed = rc != 0;
    if (rc)
        return optim_py_raise("plugin %s: %s failed (%s): %s", path, OPTIM_PLUGIN_INIT_SYMBOL,
                              optim_strerror(rc), err.msg[0] ? err.msg : "no message");
    Py_RETURN_TRUE;
}

PyObject *optim_py_load_plugin(PyObject *mod, PyObject *arg)
{
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    PyObject *r = open_plugin(PyBytes_AS_STRING(bytes));
    Py_DECREF(bytes);
    return r;
}

PyObject *optim_py_set_num_threads(PyObject *mod, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > 4096)
        return optim_py_raise("set_num_threads: %ld, expected 0 (OpenMP's default) to 4096", n);
    optim_py_num_threads = (int)n;
    Py_RETURN_NONE;
}

/* ---- conformance ---------------------------------------------------------- */

/* The report's lines, gathered without the GIL. */
typedef struct lines {
    char *text;
    size_t len, cap;
    int oom;
} lines;

static void add_line(void *user, const optim_conformance_result *r)
{
    lines *l = user;
    const char *tag = r->passed > 0 ? "PASS" : r->passed == 0 ? "FAIL" : "SKIP";
    const char *fmt = "%s %s: expected %s; seen %s\n";
    int need = snprintf(NULL, 0, fmt, tag, r->check, r->expected, r->seen);
    if (need < 0 || l->oom) return;
    if (l->len + (size_t)need + 1 > l->cap) {
        size_t cap = 2 * (l->len + (size_t)need + 1);
        char *t = realloc(l->text, cap);
        if (!t) {
            l->oom = 1;
            return;
        }
        l->text = t;
        l->cap = cap;
    }
    l->len += (size_t)snprintf(l->text + l->len, l->cap - l->len, fmt, tag, r->check, r->expected,
                               r->seen);
}

static PyObject *split_lines(const lines *l)
{
    PyObject *text = PyUnicode_DecodeUTF8(l->text ? l->text : "", (Py_ssize_t)l->len, "replace");
    PyObject *list = text ? PyUnicode_Splitlines(text, 0) : NULL;
    Py_XDECREF(text);
    return list;
}

PyObject *optim_py_conformance(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"class_name", "generation", "config", "group", NULL};
    const char *name, *gen = NULL, *config = NULL, *group = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zzz:conformance", kwlist, &name, &gen, &config,
                                     &group))
        return NULL;
    optim_conformance_options o = optim_conformance_defaults();
    if (gen && strcmp(gen, "keras3") != 0 && strcmp(gen, "legacy") != 0)
        return optim_py_raise("conformance: generation '%s', expected 'keras3' or 'legacy'", gen);
    if (gen) o.generation = strcmp(gen, "legacy") == 0 ? OPTIM_LEGACY : OPTIM_KERAS3;
    o.config = config;
    o.group = group;
    lines l = {NULL, 0, 0, 0};
    o.report = add_line;
    o.user = &l;
    int passed = 0, failed = 0;
    optim_error err = {0};
    PyThreadState *ts = PyEval_SaveThread();
    int rc = optim_conformance_check(name, &o, &passed, &failed, &err);
    PyEval_RestoreThread(ts);
    PyObject *list = rc ? optim_py_raise("conformance: %s", err.msg)
        : l.oom         ? PyErr_NoMemory()
                        : split_lines(&l);
    free(l.text);
    if (!list) return NULL;
    return Py_BuildValue("(iiN)", passed, failed, list);
}
