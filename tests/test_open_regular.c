/* optim_file_open_regular (optim/file.h), the one guard the readers of
 * safetensors files, checkpoints and the command's JSON files open
 * through, and optim__write_all (core/fd.h), their one whole write. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fd.h"
#include "optim/file.h"
#include "testutil.h"

/* A fresh directory for one test, removed by rm_dir. */
static char dir[64];
static void make_dir(void)
{
    strcpy(dir, "/tmp/optim_open_regular_XXXXXX");
    assert_non_null(mkdtemp(dir));
}
static void rm_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_eq(system(cmd), 0);
}

/* A regular file: its size, blocking reads, and what optim__write_all wrote. */
OPTIM_TEST(regular_file_opens_with_its_size)
{
    make_dir();
    char path[128];
    snprintf(path, sizeof path, "%s/f", dir);
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_ge(w, 0);
    assert_eq(optim__write_all(w, "hello", 5), 0);
    assert_eq(optim__write_all(w, "", 0), 0);
    close(w);
    int64_t size = -1;
    int fd = optim_file_open_regular(path, &size);
    assert_ge(fd, 0);
    assert_eq(size, 5);
    assert_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    char buf[8] = {0};
    assert_eq(read(fd, buf, sizeof buf), 5);
    assert_string_equal(buf, "hello");
    close(fd);
    fd = optim_file_open_regular(path, NULL); /* size is optional */
    assert_ge(fd, 0);
    close(fd);
    rm_dir();
}

/* What is not a regular file is refused at once, with errno saying why. */
OPTIM_TEST(others_refused_with_errno)
{
    make_dir();
    char path[128];
    errno = 0;
    assert_eq(optim_file_open_regular(dir, NULL), -1);
    assert_eq(errno, EISDIR);
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_eq(mkfifo(path, 0600), 0);
    errno = 0;
    assert_eq(optim_file_open_regular(path, NULL), -1); /* no writer: must not hang */
    assert_eq(errno, EINVAL);
    errno = 0;
    assert_eq(optim_file_open_regular("/dev/null", NULL), -1);
    assert_eq(errno, EINVAL);
    snprintf(path, sizeof path, "%s/missing", dir);
    errno = 0;
    assert_eq(optim_file_open_regular(path, NULL), -1);
    assert_eq(errno, ENOENT);
    errno = 0;
    assert_eq(optim_file_open_regular(NULL, NULL), -1);
    assert_eq(errno, EINVAL);
    rm_dir();
}

/* A write to a closed descriptor fails with errno set. */
OPTIM_TEST(write_all_reports_errors)
{
    int p[2];
    assert_eq(pipe(p), 0);
    close(p[0]);
    close(p[1]);
    errno = 0;
    assert_eq(optim__write_all(p[1], "x", 1), -1);
    assert_eq(errno, EBADF);
}

int main(void) { return optim_test_run(); }
