/* Writing a plot_figure to a PNG file atomically (tools/plot.h). */
#define _POSIX_C_SOURCE 200809L
#include <cairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/file.h"
#include "plot.h"

static cairo_status_t write_fn(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

int optim_plot_write_png(const plot_figure *fig, const char *path, char *msg, size_t msg_size)
{
    cairo_surface_t *s = optim__plot_render(fig, msg, msg_size);
    if (!s) return -1;
    optim_error err;
    optim_atomic_file *af;
    if (optim_atomic_file_open(&af, path, &err) != OPTIM_OK) {
        snprintf(msg, msg_size, "%s", err.msg);
        cairo_surface_destroy(s);
        return -1;
    }
    cairo_status_t st =
        cairo_surface_write_to_png_stream(s, write_fn, optim_atomic_file_stream(af));
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS) {
        optim_atomic_file_abort(af);
        snprintf(msg, msg_size, "%s: %s", path, cairo_status_to_string(st));
        return -1;
    }
    if (optim_atomic_file_commit(af, &err) != OPTIM_OK) {
        snprintf(msg, msg_size, "%s", err.msg);
        return -1;
    }
    return 0;
}
