/* fuzz_scratch_path: a private directory per process for targets that read
 * or write files, removed at exit. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char dir[4096];
static char paths[4][4200];
static int npaths;

static void cleanup(void)
{
    for (int i = 0; i < npaths; i++) (void)unlink(paths[i]);
    if (dir[0]) (void)rmdir(dir);
}

const char *fuzz_scratch_path(const char *suffix)
{
    for (int i = 0; i < npaths; i++)
        if (strcmp(strrchr(paths[i], '/') + 1, suffix) == 0) return paths[i];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/optim-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(cleanup);
    }
    if (npaths == 4) abort();
    snprintf(paths[npaths], sizeof paths[npaths], "%s/%s", dir, suffix);
    return paths[npaths++];
}
