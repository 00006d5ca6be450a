/* Line charts drawn with cairo, shared by the commands that make PNGs
 * (schedule-plot, train --plot, compare --plot): a figure of side-by-side
 * panels, each with axes, "nice" ticks and their labels, a grid, axis
 * names and a title, and an optional legend strip along the bottom.
 * Internal to tools/. */
#ifndef OPTIM_TOOLS_PLOT_H
#define OPTIM_TOOLS_PLOT_H

#include <cairo.h>
#include <stddef.h>

/* One line; non-finite y values leave a gap. */
typedef struct plot_series {
    const double *x, *y;
    size_t n;
    int color; /* index into the palette (wraps) */
    int dashed; /* 0: solid */
    int markers; /* 1: a dot at each point */
} plot_series;

typedef struct plot_panel {
    const char *title, *xlabel, *ylabel;
    const plot_series *series;
    size_t n_series;
    double xmin, xmax, ymin, ymax; /* the ranges shown (see plot_autoscale) */
    int integer_x; /* x ticks at whole numbers only */
    int log_x; /* x values are log10 of the quantity: ticks at whole decades, labelled 10^x */
} plot_panel;

/* A legend entry: a colour (palette index, or -1 for grey) and a dash. */
typedef struct plot_key {
    const char *label;
    int color, dashed;
} plot_key;

typedef struct plot_figure {
    int width, height;
    const char *title; /* NULL: none */
    const plot_panel *panels;
    size_t n_panels;
    const plot_key *keys; /* legend; n_keys 0: none */
    size_t n_keys;
} plot_figure;

/* Sets the panel's ranges to its series' finite values: x with 2% on each
 * side, y with 5% headroom (from 0 when zero_y and all values are
 * positive). Returns -1
 * when no value is finite. */
int optim_plot_autoscale(plot_panel *p, int zero_y);

/* Draws the figure into a PNG at path, written to a temporary file and
 * renamed into place (path is not created on error). Returns 0, or -1 with
 * the reason in msg. */
int optim_plot_write_png(const plot_figure *f, const char *path, char *msg, size_t msg_size);

/* Renders the figure into a new image surface (the caller destroys it);
 * NULL with the reason in msg. */
cairo_surface_t *optim__plot_render(const plot_figure *f, char *msg, size_t msg_size);

/* Frees cairo's and fontconfig's caches (call once before exiting, else
 * LeakSanitizer reports them). */
void optim_plot_cleanup(void);

#endif
