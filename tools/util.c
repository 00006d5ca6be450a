/* Small helpers shared by the tool's commands. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "optim/file.h"
#include "options.h"

static void set_err(optim_error *err, int code, const char *msg)
{
    err->code = code;
    snprintf(err->msg, sizeof err->msg, "%s", msg);
}

char *optim_tool_read_text(const char *path, optim_error *err)
{
    char msg[OPTIM_ERRMSG_MAX];
    int fd = optim_file_open_regular(path, NULL);
    FILE *f = NULL;
    if (fd >= 0 && !(f = fdopen(fd, "rb"))) close(fd);
    if (!f) {
        snprintf(msg, sizeof msg, "%s: %s", path,
                 errno == EINVAL ? "not a regular file" : strerror(errno));
        set_err(err, OPTIM_EIO, msg);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (len + 1 < cap) break;
        if (cap > ((size_t)64 << 20)) {
            snprintf(msg, sizeof msg, "%s: larger than 64 MiB, too large for a config", path);
            set_err(err, OPTIM_EFORMAT, msg);
            free(buf);
            fclose(f);
            return NULL;
        }
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    if (!buf || ferror(f)) {
        snprintf(msg, sizeof msg, "%s: %s", path, buf ? "read error" : "out of memory");
        set_err(err, buf ? OPTIM_EIO : OPTIM_ENOMEM, msg);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[len] = '\0';
    if (strlen(buf) != len) {
        snprintf(msg, sizeof msg, "%s: contains a NUL byte, expected JSON text", path);
        set_err(err, OPTIM_EFORMAT, msg);
        free(buf);
        return NULL;
    }
    return buf;
}

int optim_tool_finish_stdout(const char *cmd, int rc)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    fprintf(stderr, "optim %s: cannot write standard output%s%s\n", cmd, errno ? ": " : "",
            errno ? strerror(errno) : "");
    return rc ? rc : 1;
}

/* Checks before a run that an output can be written: its directory exists
 * and is writable, and the path, if it exists, is a regular file (the
 * atomic writer refuses anything else: /dev/full, a directory). So a bad
 * target fails in a second, not after the whole run. NULL path: 0. */
int optim_tool_check_output(const char *cmd, const char *option, const char *path)
{
    if (!path) return 0;
    struct stat st;
    if (!path[0]) return optim_tool_fail(cmd, "%s: the path is empty", option);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return optim_tool_fail(cmd, "%s %s: exists and is not a regular file", option, path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) : 0;
    if (len >= sizeof dir) return optim_tool_fail(cmd, "%s %s: path too long", option, path);
    memcpy(dir, path, len);
    strcpy(dir + len, slash ? (len ? "" : "/") : ".");
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return optim_tool_fail(cmd, "%s %s: directory %s does not exist", option, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return optim_tool_fail(cmd, "%s %s: directory %s is not writable: %s", option, path, dir,
                               strerror(errno));
    return 0;
}
