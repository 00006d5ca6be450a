/* Plugins: shared libraries named by `optim --plugin PATH ...` and by
 * OPTIM_PLUGINS (colon-separated), opened before the subcommand runs; each a
 * path with a '/' (./NAME.so), never a bare name that dlopen would search. Each
 * defines optim_plugin_init (optim/plugin.h), which registers its classes in
 * the registry of the liboptim.so this command is linked against. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "optim/plugin.h"

typedef int (*plugin_init_fn)(optim_error *err);

int optim_tool_load_plugin(const char *path)
{
    if (!path[0]) {
        fprintf(stderr, "optim: plugin '': empty path\n");
        return 1;
    }
    /* dlopen searches for a name without a '/' (LD_LIBRARY_PATH, rpaths, the
     * system's directories): a plugin is code the command runs, so only the
     * file named is loaded. */
    if (!strchr(path, '/')) {
        fprintf(stderr,
                "optim: plugin %s: give a path (./%s or /abs/%s); bare names are not searched\n",
                path, path, path);
        return 1;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        fprintf(stderr, "optim: plugin %s: cannot open: %s\n", path, why ? why : "unknown error");
        return 1;
    }
    plugin_init_fn init;
    /* ISO C has no function-pointer cast from void *; POSIX guarantees it. */
    *(void **)&init = dlsym(lib, OPTIM_PLUGIN_INIT_SYMBOL);
    if (!init) {
        fprintf(stderr, "optim: plugin %s: no entry point %s (define it with OPTIM_PLUGIN_INIT)\n",
                path, OPTIM_PLUGIN_INIT_SYMBOL);
        dlclose(lib);
        return 1;
    }
    optim_error err = {0};
    int rc = init(&err);
    if (rc) {
        /* The library stays loaded: a class it registered before failing
         * points into it. */
        err.msg[sizeof err.msg - 1] = '\0';
        fprintf(stderr, "optim: plugin %s: %s failed (%s): %s\n", path, OPTIM_PLUGIN_INIT_SYMBOL,
                optim_strerror(rc), err.msg[0] ? err.msg : "no message");
        return 1;
    }
    return 0; /* never closed: its classes stay registered for the process */
}

/* OPTIM_PLUGINS: colon-separated paths; empty components are skipped. */
static int load_env_plugins(void)
{
    const char *env = getenv("OPTIM_PLUGINS");
    if (!env || !env[0]) return 0;
    char *list = strdup(env);
    if (!list) {
        fprintf(stderr, "optim: OPTIM_PLUGINS: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (char *p = list, *next; p && !rc; p = next) {
        next = strchr(p, ':');
        if (next) *next++ = '\0';
        if (p[0]) rc = optim_tool_load_plugin(p);
    }
    free(list);
    return rc;
}

int optim_tool_load_plugins(int *argc, char ***argv)
{
    if (load_env_plugins()) return 1;
    char **v = *argv;
    int i = 1;
    while (i < *argc) {
        const char *path = NULL;
        if (strcmp(v[i], "--plugin") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "optim: --plugin needs a PATH (optim --plugin PATH COMMAND ...)\n");
                return 2;
            }
            path = v[i + 1];
            i += 2;
        } else if (strncmp(v[i], "--plugin=", 9) == 0) {
            path = v[i] + 9;
            i += 1;
        } else {
            break;
        }
        if (optim_tool_load_plugin(path)) return 1;
    }
    /* Drop the global options: argv[1] is now the subcommand. */
    v[i - 1] = v[0];
    *argv = v + i - 1;
    *argc -= i - 1;
    return 0;
}
