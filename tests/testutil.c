#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void optim_test_assert_close(double a, double b, double rtol, double atol, const char *expr,
                             const char *file, int line)
{
    if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
        print_error("%s = %.17g, expected %.17g (rtol %g, atol %g)\n", expr, a, b, rtol, atol);
        _fail(file, line);
    }
}

static char tmp_dir[256];
static pid_t tmp_owner;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the test's temporary directory at exit (in the process that made
 * it, not in forked children). */
static void remove_tmp_dir(void)
{
    if (tmp_dir[0] && getpid() == tmp_owner) nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *optim_test_tmpfile(const char *name)
{
    static char bufs[8][512];
    static int slot;
    if (!tmp_dir[0]) {
        /* A new directory every run (mkdtemp), so that nothing a previous
         * process left behind, even under a reused pid, is in the way. */
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/optim-test-XXXXXX");
        if (!mkdtemp(tmp_dir)) {
            print_error("cannot create a temporary directory under /tmp\n");
            fail();
        }
        tmp_owner = getpid();
        atexit(remove_tmp_dir);
    }
    char *b = bufs[slot++ % 8];
    snprintf(b, 512, "%s/%s", tmp_dir, name);
    return b;
}

int optim_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

optim_optimizer *optim_test_make(const char *json)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc) print_error("%s: %s\n", json, err.msg);
    assert_int_equal(rc, 0);
    return opt;
}

optim_var *optim_test_var(const char *name, optim_dtype dt, int32_t rank, const int64_t *shape,
                          const double *init)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++) {
        if (dt == OPTIM_F32) ((float *)buf)[i] = (float)init[i];
        else ((double *)buf)[i] = init[i];
    }
    optim_var *v;
    optim_error err;
    int rc = optim_var_create(&v, name, dt, rank, shape, buf, &err);
    free(buf);
    if (rc) print_error("%s\n", err.msg);
    assert_int_equal(rc, 0);
    return v;
}
