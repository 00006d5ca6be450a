/* Drawing a figure of line-chart panels with cairo (tools/plot.h). */
#include "plot.h"

#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>

#define HALF_PI 1.57079632679489661923
#define MARGIN_LEFT 64.0
#define MARGIN_RIGHT 16.0
#define MARGIN_TOP 18.0
#define MARGIN_BOTTOM 46.0
#define TITLE_H 30.0
#define LEGEND_ROW 22.0

/* Tableau 10, grey for -1. */
static void set_color(cairo_t *cr, int i)
{
    static const double pal[10][3] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
                                      {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                                      {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13},
                                      {0.09, 0.75, 0.81}};
    if (i < 0) cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    else cairo_set_source_rgb(cr, pal[i % 10][0], pal[i % 10][1], pal[i % 10][2]);
}

static void set_dash(cairo_t *cr, int dashed)
{
    static const double dash[2] = {7.0, 4.0};
    cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
}

/* A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about
 * `target` intervals over `range`. */
static double nice_step(double range, int target)
{
    double raw = range / target;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

static void tick_label(char *buf, size_t n, double v, double step)
{
    v = round(v / step) * step;
    if (fabs(v) < step * 1e-9) v = 0.0;
    snprintf(buf, n, "%g", v);
}

/* 10^e for a whole e: 0.001 to 1000 in full, else 1e-7, 1e+5. */
static void decade_label(char *buf, size_t n, double e)
{
    int k = (int)lround(e);
    if (k >= -3 && k <= 3) snprintf(buf, n, "%g", pow(10.0, k));
    else snprintf(buf, n, "1e%+d", k);
}

/* Text with its anchor (ax, ay in [0, 1] of its extents) at x, y. */
static void text_at(cairo_t *cr, const char *s, double x, double y, double ax, double ay)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
    cairo_show_text(cr, s);
}

static void line(cairo_t *cr, double xa, double ya, double xb, double yb)
{
    cairo_move_to(cr, xa, ya);
    cairo_line_to(cr, xb, yb);
    cairo_stroke(cr);
}

typedef struct area {
    double x0, x1, y0, y1; /* plot area: x0 left, y0 bottom (pixels) */
} area;

static double px(const area *a, const plot_panel *p, double x)
{
    return a->x0 + (x - p->xmin) * (a->x1 - a->x0) / (p->xmax - p->xmin);
}
static double py(const area *a, const plot_panel *p, double y)
{
    return a->y0 - (y - p->ymin) * (a->y0 - a->y1) / (p->ymax - p->ymin);
}

/* Grid lines, tick marks and tick labels of both axes. */
static void draw_ticks(cairo_t *cr, const area *a, const plot_panel *p)
{
    char label[64];
    cairo_set_line_width(cr, 1.0);
    double ys = nice_step(p->ymax - p->ymin, 6);
    for (double v = ceil(p->ymin / ys - 1e-9) * ys; v <= p->ymax + ys * 1e-9; v += ys) {
        double y = round(py(a, p, v)) + 0.5;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        line(cr, a->x0, y, a->x1, y);
        cairo_set_source_rgb(cr, 0, 0, 0);
        line(cr, a->x0 - 5, y, a->x0, y);
        tick_label(label, sizeof label, v, ys);
        text_at(cr, label, a->x0 - 8, y, 1.0, 0.5);
    }
    double xs = nice_step(p->xmax - p->xmin, 6);
    if ((p->integer_x || p->log_x) && xs < 1.0) xs = 1.0;
    for (double s = ceil(p->xmin / xs - 1e-9) * xs; s <= p->xmax + xs * 1e-9; s += xs) {
        double x = round(px(a, p, s)) + 0.5;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        line(cr, x, a->y1, x, a->y0);
        cairo_set_source_rgb(cr, 0, 0, 0);
        line(cr, x, a->y0, x, a->y0 + 5);
        if (p->log_x) decade_label(label, sizeof label, s);
        else tick_label(label, sizeof label, s, xs);
        text_at(cr, label, x, a->y0 + 8, 0.5, 0.0);
    }
}

static void draw_series(cairo_t *cr, const area *a, const plot_panel *p, const plot_series *s)
{
    set_color(cr, s->color);
    set_dash(cr, s->dashed);
    cairo_set_line_width(cr, 2.0);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    int open = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->y[i])) {
            open = 0;
            continue;
        }
        if (open) cairo_line_to(cr, px(a, p, s->x[i]), py(a, p, s->y[i]));
        else cairo_move_to(cr, px(a, p, s->x[i]), py(a, p, s->y[i]));
        open = 1;
    }
    cairo_stroke(cr);
    set_dash(cr, 0);
    for (size_t i = 0; s->markers && i < s->n; i++) {
        if (!isfinite(s->y[i])) continue;
        cairo_arc(cr, px(a, p, s->x[i]), py(a, p, s->y[i]), 3.0, 0, 4 * HALF_PI);
        cairo_fill(cr);
    }
}

static void draw_panel(cairo_t *cr, const area *a, const plot_panel *p)
{
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 12.0);
    draw_ticks(cr, a, p);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, a->x0 + 0.5, a->y1);
    cairo_line_to(cr, a->x0 + 0.5, a->y0 + 0.5);
    cairo_line_to(cr, a->x1, a->y0 + 0.5);
    cairo_stroke(cr);
    if (p->xlabel) text_at(cr, p->xlabel, (a->x0 + a->x1) / 2, a->y0 + 26, 0.5, 0.0);
    if (p->ylabel) {
        cairo_save(cr);
        cairo_translate(cr, a->x0 - MARGIN_LEFT + 6, (a->y0 + a->y1) / 2);
        cairo_rotate(cr, -HALF_PI);
        text_at(cr, p->ylabel, 0, 0, 0.5, 0.0);
        cairo_restore(cr);
    }
    if (p->title) {
        cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
        cairo_set_font_size(cr, 14.0);
        text_at(cr, p->title, (a->x0 + a->x1) / 2, a->y1 - 22, 0.5, 0.0);
    }
    cairo_save(cr);
    cairo_rectangle(cr, a->x0, a->y1 - 4, a->x1 - a->x0 + 4, a->y0 - a->y1 + 8);
    cairo_clip(cr);
    for (size_t i = 0; i < p->n_series; i++) draw_series(cr, a, p, &p->series[i]);
    cairo_restore(cr);
}

/* The legend: entries left to right, wrapping, centred in rows at the
 * bottom of the figure. Returns the height it takes. */
static double legend_height(cairo_t *cr, const plot_figure *f, int draw)
{
    if (!f->n_keys) return 0;
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 12.0);
    double avail = f->width - 20, rowstart_y = f->height - 8, widths[64];
    size_t n = f->n_keys < 64 ? f->n_keys : 64, row_first = 0;
    int rows = 0;
    double y = 0;
    for (size_t i = 0; i <= n; i++) {
        double w = 0;
        if (i < n) {
            cairo_text_extents_t e;
            cairo_text_extents(cr, f->keys[i].label, &e);
            widths[i] = 30 + e.x_advance + 18;
        }
        for (size_t k = row_first; k < i; k++) w += widths[k];
        if (i < n && (i == row_first || w + widths[i] <= avail)) continue;
        rows++;
        if (draw) {
            double x = (f->width - w) / 2;
            y = rowstart_y - (double)rows * LEGEND_ROW + LEGEND_ROW / 2;
            for (size_t k = row_first; k < i; k++) {
                set_color(cr, f->keys[k].color);
                set_dash(cr, f->keys[k].dashed);
                cairo_set_line_width(cr, 2.5);
                line(cr, x, y, x + 24, y);
                set_dash(cr, 0);
                cairo_set_source_rgb(cr, 0, 0, 0);
                text_at(cr, f->keys[k].label, x + 30, y, 0.0, 0.5);
                x += widths[k];
            }
        }
        row_first = i;
    }
    return rows * LEGEND_ROW + 8;
}

static void draw_figure(cairo_t *cr, const plot_figure *f)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    double top = 0;
    if (f->title) {
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
        cairo_set_font_size(cr, 16.0);
        text_at(cr, f->title, f->width / 2.0, 8, 0.5, 0.0);
        top = TITLE_H;
    }
    double bottom = legend_height(cr, f, 0);
    double pw = (double)f->width / (double)f->n_panels;
    for (size_t i = 0; i < f->n_panels; i++) {
        const plot_panel *p = &f->panels[i];
        area a = {pw * (double)i + MARGIN_LEFT, pw * (double)(i + 1) - MARGIN_RIGHT,
                  f->height - bottom - MARGIN_BOTTOM, top + MARGIN_TOP + (p->title ? 8 : 0)};
        draw_panel(cr, &a, p);
    }
    legend_height(cr, f, 1);
}

int optim_plot_autoscale(plot_panel *p, int zero_y)
{
    double xl = INFINITY, xh = -INFINITY, yl = INFINITY, yh = -INFINITY;
    for (size_t i = 0; i < p->n_series; i++)
        for (size_t k = 0; k < p->series[i].n; k++) {
            double x = p->series[i].x[k], y = p->series[i].y[k];
            if (!isfinite(x) || !isfinite(y)) continue;
            xl = fmin(xl, x), xh = fmax(xh, x), yl = fmin(yl, y), yh = fmax(yh, y);
        }
    if (!(xl <= xh)) return -1;
    if (zero_y && yl > 0) yl = 0;
    if (xh - xl <= 0) xl -= 0.5, xh += 0.5;
    double pad = 0.02 * (xh - xl); /* room for the end markers */
    xl -= pad, xh += pad;
    double span = yh - yl > 0 ? yh - yl : fabs(yh) > 0 ? fabs(yh) * 0.1 : 1.0;
    p->xmin = xl, p->xmax = xh;
    p->ymin = zero_y && yl == 0 ? 0 : yl - 0.05 * span;
    p->ymax = yh + 0.05 * span;
    return 0;
}

cairo_surface_t *optim__plot_render(const plot_figure *f, char *msg, size_t msg_size)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, f->width, f->height);
    cairo_t *cr = cairo_create(s);
    draw_figure(cr, f);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS) return s;
    snprintf(msg, msg_size, "drawing failed: %s", cairo_status_to_string(st));
    cairo_surface_destroy(s);
    return NULL;
}

void optim_plot_cleanup(void)
{
    cairo_debug_reset_static_data();
    FcFini();
}
