/* Writing a plot_figure to a PNG file atomically (tools/plot.h). */
#define _POSIX_C_SOURCE 200809L
#include <cairo.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plot.h"

static cairo_status_t write_fn(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* A temporary file beside path with the usual 0666 & ~umask mode. */
static FILE *open_temp(char *tmp)
{
    int fd = mkstemp(tmp);
    if (fd < 0) return NULL;
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
    }
    return f;
}

int optim_plot_write_png(const plot_figure *fig, const char *path, char *msg, size_t msg_size)
{
    cairo_surface_t *s = optim__plot_render(fig, msg, msg_size);
    if (!s) return -1;
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    FILE *f = NULL;
    if (tmp) {
        snprintf(tmp, len + 16, "%s.tmp-XXXXXX", path);
        f = open_temp(tmp);
    }
    if (!f) {
        snprintf(msg, msg_size, "%s: %s", path, tmp ? strerror(errno) : "out of memory");
        free(tmp);
        cairo_surface_destroy(s);
        return -1;
    }
    cairo_status_t st = cairo_surface_write_to_png_stream(s, write_fn, f);
    cairo_surface_destroy(s);
    int closed = fclose(f), rc = 0;
    if (st != CAIRO_STATUS_SUCCESS || closed != 0)
        rc = -1, snprintf(msg, msg_size, "%s: %s", path, st != CAIRO_STATUS_SUCCESS ? cairo_status_to_string(st) : strerror(errno));
    else if (rename(tmp, path) != 0)
        rc = -1, snprintf(msg, msg_size, "%s: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}
