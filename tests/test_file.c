/* optim/file.h: files written atomically, or not at all. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "optim/optim.h"
#include "testutil.h"

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 4096);
    size_t n = fread(buf, 1, 4095, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Files in path's directory other than the expected ones (temporary files
 * left behind). */
static int strays(const char *path, const char *keep1, const char *keep2)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *s = e->d_name;
        if (!strcmp(s, ".") || !strcmp(s, "..")) continue;
        if ((keep1 && !strcmp(s, keep1)) || (keep2 && !strcmp(s, keep2))) continue;
        if (strstr(s, ".tmp")) n++;
    }
    if (d) closedir(d);
    return n;
}

OPTIM_TEST(test_commit_replaces)
{
    const char *p = optim_test_tmpfile("atomic.txt");
    assert_eq(optim_test_write_file(p, "old", 3), 0);
    optim_error err;
    optim_atomic_file *af;
    assert_ok(optim_atomic_file_open(&af, p, &err), &err);
    fputs("new content\n", optim_atomic_file_stream(af));
    char *before = read_all(p);
    assert_string_equal(before, "old"); /* nothing visible before commit */
    free(before);
    assert_ok(optim_atomic_file_commit(af, &err), &err);
    char *after = read_all(p);
    assert_string_equal(after, "new content\n");
    free(after);
    assert_eq(strays(p, "atomic.txt", NULL), 0);
}

OPTIM_TEST(test_abort_leaves_old)
{
    optim_error err;
    const char *p = optim_test_tmpfile("kept.txt");
    assert_eq(optim_test_write_file(p, "kept", 4), 0);
    optim_atomic_file *af;
    assert_ok(optim_atomic_file_open(&af, p, &err), &err);
    fputs("discarded", optim_atomic_file_stream(af));
    optim_atomic_file_abort(af);
    optim_atomic_file_abort(NULL);
    char *now = read_all(p);
    assert_string_equal(now, "kept");
    free(now);
    assert_eq(strays(p, "kept.txt", NULL), 0);
}

OPTIM_TEST(test_refuses_non_regular)
{
    const char *target = optim_test_tmpfile("target.txt");
    const char *link = optim_test_tmpfile("link.txt");
    assert_eq(optim_test_write_file(target, "t", 1), 0);
    unlink(link);
    assert_eq(symlink(target, link), 0);
    const char *paths[] = {link, "/dev/null", "."};
    for (size_t i = 0; i < 3; i++) {
        optim_error err = {0};
        optim_atomic_file *af = (optim_atomic_file *)&err; /* set to NULL on error */
        assert_ne(optim_atomic_file_open(&af, paths[i], &err), OPTIM_OK);
        assert_null(af);
        assert_contains(err.msg, paths[i]);
        assert_contains(err.msg, "not a regular file");
    }
    struct stat st;
    assert_eq(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* still the link */
    char *t = read_all(target);
    assert_string_equal(t, "t");
    free(t);
}

OPTIM_TEST(test_bad_arguments)
{
    optim_error err;
    optim_atomic_file *af;
    assert_status(optim_atomic_file_open(NULL, "x", &err), OPTIM_EINVAL, &err);
    assert_status(optim_atomic_file_open(&af, NULL, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "path");
    assert_status(optim_atomic_file_open(&af, "", &err), OPTIM_EINVAL, &err);
    assert_status(optim_atomic_file_open(&af, "/nonexistent-dir-optim/x.txt", &err), OPTIM_EIO,
                  &err);
    assert_contains(err.msg, "/nonexistent-dir-optim/x.txt");
    assert_status(optim_atomic_file_commit(NULL, &err), OPTIM_EINVAL, &err);
    assert_null(optim_atomic_file_stream(NULL));
}

int main(void) { return optim_test_run(); }
