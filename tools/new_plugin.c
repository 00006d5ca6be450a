/* optim new-plugin NAME DIR: writes a plugin project to start from, the
 * files of tools/templates with NAME for "TemplateName": NAME.c (the class,
 * every hook of the table set and commented), CMakeLists.txt
 * (find_package(optim), optim_add_plugin), reference.py (the rule in numpy)
 * and README.md. DIR must not exist, or be an empty directory. Every write
 * is checked; on a failure the files written so far are removed. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "new_plugin.h"
#include "options.h"

#define CMD "new-plugin"

static const char USAGE[] =
    "usage: optim new-plugin NAME DIR\n"
    "\n"
    "Writes a plugin project for the optimizer class NAME into DIR (created; or an\n"
    "empty directory): NAME.c, CMakeLists.txt, reference.py and README.md. It builds\n"
    "against an installed optim and passes `optim conformance` as written:\n"
    "\n"
    "  cmake -S DIR -B DIR/build -DCMAKE_PREFIX_PATH=/the/optim/prefix\n"
    "  cmake --build DIR/build\n"
    "  optim --plugin DIR/build/libNAME.so conformance NAME\n"
    "\n"
    "NAME: a C identifier and Keras class name (a letter, then letters, digits or\n"
    "'_'), not an optimizer optim has already.\n";

/* 0 if dir is a directory without entries, 1 if it has some, -1 (errno) if
 * it cannot be read. */
static int dir_has_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int found = 0;
    errno = 0;
    while (!found && (e = readdir(d)))
        found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    int read_errno = errno;
    closedir(d);
    errno = read_errno;
    return found ? 1 : read_errno ? -1 : 0;
}

/* Makes dir ready: created (*made = 1) or an empty directory. */
static int prepare_dir(const char *dir, int *made)
{
    struct stat st;
    *made = 0;
    if (!dir[0]) return optim_tool_fail(CMD, "DIR is empty, expected a directory path");
    if (mkdir(dir, 0777) == 0) {
        *made = 1;
        return 0;
    }
    if (errno == ENOENT)
        return optim_tool_fail(CMD, "DIR %s: cannot create it: its parent directory does not exist",
                               dir);
    if (errno != EEXIST)
        return optim_tool_fail(CMD, "DIR %s: cannot create it: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return optim_tool_fail(CMD, "DIR %s exists and is not a directory", dir);
    int has = dir_has_entries(dir);
    if (has < 0) return optim_tool_fail(CMD, "DIR %s: cannot read it: %s", dir, strerror(errno));
    if (has)
        return optim_tool_fail(CMD,
                               "DIR %s exists and is not empty: expected a new or empty "
                               "directory (nothing is overwritten)",
                               dir);
    return 0;
}

/* Writes text to f with every placeholder replaced by name; 0 or -1. */
static int put_substituted(FILE *f, const char *text, const char *name)
{
    const size_t plen = strlen(OPTIM_NP_PLACEHOLDER), nlen = strlen(name);
    const char *at;
    while ((at = strstr(text, OPTIM_NP_PLACEHOLDER))) {
        size_t len = (size_t)(at - text);
        if (fwrite(text, 1, len, f) != len || fwrite(name, 1, nlen, f) != nlen) return -1;
        text = at + plen;
    }
    return fputs(text, f) < 0 ? -1 : 0;
}

/* The path DIR/FILE with NAME put in, in path[PATH_MAX]; 0 or 1. */
static int file_path(char *path, const char *dir, const char *file, const char *name)
{
    const char *at = strstr(file, OPTIM_NP_PLACEHOLDER);
    int len = at ? snprintf(path, PATH_MAX, "%s/%.*s%s%s", dir, (int)(at - file), file, name,
                            at + strlen(OPTIM_NP_PLACEHOLDER))
                 : snprintf(path, PATH_MAX, "%s/%s", dir, file);
    if (len < 0 || len >= PATH_MAX)
        return optim_tool_fail(CMD, "DIR %s: the path of %s is too long", dir, file);
    return 0;
}

/* Writes one template as path, a file that must not exist yet. */
static int write_template(const char *path, const optim_np_template *t, const char *name)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return optim_tool_fail(CMD, "cannot create %s: %s", path, strerror(e));
    }
    int bad = 0;
    for (size_t i = 0; !bad && t->lines[i]; i++) bad = put_substituted(f, t->lines[i], name);
    int e = errno;
    if (fflush(f) != 0 || ferror(f)) bad = 1, e = errno;
    if (!bad && fsync(fileno(f)) != 0) bad = 1, e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad) return optim_tool_fail(CMD, "cannot write %s: %s", path, strerror(e ? e : EIO));
    return 0;
}

/* Removes what a failed run wrote: files[0 .. n-1], then dir if made. */
static void undo(char (*files)[PATH_MAX], size_t n, const char *dir, int made)
{
    for (size_t i = 0; i < n; i++) unlink(files[i]);
    if (made) rmdir(dir);
}

static int write_project(const char *name, const char *dir)
{
    enum { MAX_FILES = 8 };
    static char written[MAX_FILES][PATH_MAX];
    size_t n = 0;
    int made;
    if (prepare_dir(dir, &made)) return 1;
    for (const optim_np_template *t = optim_np_templates; t->file; t++) {
        if (n == MAX_FILES || file_path(written[n], dir, t->file, name)) {
            undo(written, n, dir, made);
            return 1;
        }
        if (write_template(written[n], t, name)) {
            unlink(written[n]); /* created, then a write failed */
            undo(written, n, dir, made);
            return 1;
        }
        n++;
    }
    for (size_t i = 0; i < n; i++) printf("wrote %s\n", written[i]);
    printf("next: cmake -S %s -B %s/build -DCMAKE_PREFIX_PATH=<optim's prefix> && cmake --build "
           "%s/build\n      optim --plugin %s/build/lib%s.so conformance %s\n",
           dir, dir, dir, dir, name, name);
    return optim_tool_finish_stdout(CMD, 0);
}

int optim_cmd_new_plugin(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(USAGE, stdout);
            return optim_tool_finish_stdout(CMD, 0);
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            optim_tool_fail(CMD, "unknown option '%s' (see optim new-plugin --help)", argv[i]);
            return 2;
        }
    }
    if (argc != 2) {
        fputs(USAGE, stderr);
        return 2;
    }
    char why[512], dir[PATH_MAX];
    if (optim_np_name_problem(argv[0], why, sizeof why)) {
        optim_tool_fail(CMD, "NAME %s", why);
        return 2;
    }
    size_t len = strlen(argv[1]);
    if (len >= sizeof dir) return optim_tool_fail(CMD, "DIR %.40s...: path too long", argv[1]);
    memcpy(dir, argv[1], len + 1);
    while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0'; /* "dir/" joins as "dir/x" */
    return write_project(argv[0], dir);
}
