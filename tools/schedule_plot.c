/* optim schedule-plot SCHEDULE_JSON OUT.png [STEPS]
 *
 * Draws a learning-rate schedule, as the library computes it, over steps
 * 0..STEPS (default 1000) into a 640x360 PNG: axes with tick labels, the
 * class name as title, the schedule as a line. SCHEDULE_JSON is a file
 * holding {"class_name": ..., "config": {...}}. Every step is evaluated up
 * to 100000 steps; beyond, 100001 evenly spaced steps. Non-finite values
 * (a schedule past its end, such as CosineDecayRestarts with t_mul < 1)
 * leave a gap. Any bad input: one line on stderr, exit status 1 (2 for a
 * wrong argument count), OUT not created. docs/img/schedules/make.sh makes
 * the images of docs/schedules.md with it. */
#define _POSIX_C_SOURCE 200809L
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "io/atomic_file.h"
#include "optim/optim.h"

#define WIDTH 640
#define HEIGHT 360
#define MAX_STEPS 1000000000LL
#define MAX_POINTS 100001
#define DEFAULT_STEPS 1000
#define HALF_PI 1.57079632679489661923

/* The plot area within the image. */
#define LEFT 78.0
#define RIGHT 20.0
#define TOP 38.0
#define BOTTOM 50.0

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("optim schedule-plot: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* STEPS: a decimal integer in 1..MAX_STEPS. */
static int parse_steps(const char *s, int64_t *out)
{
    if (!s[0] || s[0] == '-' || s[0] == '+') return -1;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > MAX_STEPS) return -1;
    }
    if (v < 1) return -1;
    *out = v;
    return 0;
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

static void text_at(cairo_t *cr, const char *s, double x, double y, double ax, double ay)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
    cairo_show_text(cr, s);
}

typedef struct plot {
    const char *title;
    const int64_t *steps;
    const double *values;
    size_t n;
    int64_t last_step;
    double ymin, ymax;
} plot;

static void draw(cairo_t *cr, const plot *p)
{
    const double x0 = LEFT, x1 = WIDTH - RIGHT, y0 = HEIGHT - BOTTOM, y1 = TOP;
    const double xs = (x1 - x0) / (double)p->last_step, ys = (y0 - y1) / (p->ymax - p->ymin);
#define PX(step) (x0 + (double)(step) * xs)
#define PY(v) (y0 - ((v) - p->ymin) * ys)
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 11.0);

    /* Grid and tick labels. */
    char label[64];
    cairo_set_line_width(cr, 1.0);
    double ystep = nice_step(p->ymax - p->ymin, 6);
    for (double v = ceil(p->ymin / ystep - 1e-9) * ystep; v <= p->ymax + ystep * 1e-9; v += ystep) {
        double y = round(PY(v)) + 0.5;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, x0, y);
        cairo_line_to(cr, x1, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, x0 - 5, y);
        cairo_line_to(cr, x0, y);
        cairo_stroke(cr);
        tick_label(label, sizeof label, v, ystep);
        text_at(cr, label, x0 - 8, y, 1.0, 0.5);
    }
    double xstep = nice_step((double)p->last_step, 6);
    if (xstep < 1.0) xstep = 1.0;
    for (double s = 0; s <= (double)p->last_step + 1e-9; s += xstep) {
        double x = round(PX(s)) + 0.5;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, x, y1);
        cairo_line_to(cr, x, y0);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, x, y0);
        cairo_line_to(cr, x, y0 + 5);
        cairo_stroke(cr);
        tick_label(label, sizeof label, s, xstep);
        text_at(cr, label, x, y0 + 8, 0.5, 0.0);
    }

    /* Axes. */
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x0 + 0.5, y1);
    cairo_line_to(cr, x0 + 0.5, y0 + 0.5);
    cairo_line_to(cr, x1, y0 + 0.5);
    cairo_stroke(cr);

    /* Axis names and title. */
    text_at(cr, "step", (x0 + x1) / 2, HEIGHT - 16, 0.5, 0.0);
    cairo_save(cr);
    cairo_translate(cr, 16, (y0 + y1) / 2);
    cairo_rotate(cr, -HALF_PI);
    text_at(cr, "learning rate", 0, 0, 0.5, 0.5);
    cairo_restore(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    cairo_set_font_size(cr, 15.0);
    text_at(cr, p->title, (x0 + x1) / 2, 10, 0.5, 0.0);

    /* The schedule, broken where it is not finite. */
    cairo_save(cr);
    cairo_rectangle(cr, x0, y1 - 2, x1 - x0 + 2, y0 - y1 + 4);
    cairo_clip(cr);
    cairo_set_source_rgb(cr, 0.12, 0.47, 0.71);
    cairo_set_line_width(cr, 2.0);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    int open = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (!isfinite(p->values[i])) {
            open = 0;
            continue;
        }
        double x = PX(p->steps[i]), y = PY(p->values[i]);
        if (open) cairo_line_to(cr, x, y);
        else cairo_move_to(cr, x, y);
        open = 1;
    }
    cairo_stroke(cr);
    cairo_restore(cr);
#undef PX
#undef PY
}

/* Streams the PNG into the temporary file's descriptor. */
static cairo_status_t write_fn(void *closure, const unsigned char *data, unsigned int len)
{
    int fd = *(const int *)closure;
    while (len > 0) {
        ssize_t r = write(fd, data, len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return CAIRO_STATUS_WRITE_ERROR;
        data += r;
        len -= (unsigned int)r;
    }
    return CAIRO_STATUS_SUCCESS;
}

/* OUT could not be written: what failed, and the system's reason if any. */
static int out_fail(const char *out, const char *what)
{
    return errno ? fail("OUT %s: %s: %s", out, what, strerror(errno)) : fail("OUT %s: %s", out, what);
}

/* Renders, then writes OUT atomically, as the library writes safetensors
 * (io/atomic_file.h: an unnamed temporary file, never a FIFO, link or device
 * replaced). */
static int render(const plot *p, const char *out)
{
    cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, WIDTH, HEIGHT);
    cairo_t *cr = cairo_create(surface);
    draw(cr, p);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surface);
        return fail("drawing failed: %s", cairo_status_to_string(st));
    }
    optim__atomic_file f;
    const char *what;
    if (optim__atomic_open(&f, out, &what) != 0) {
        int e = errno;
        cairo_surface_destroy(surface);
        errno = e;
        return out_fail(out, what);
    }
    errno = 0;
    st = cairo_surface_write_to_png_stream(surface, write_fn, &f.fd);
    int e = errno;
    cairo_surface_destroy(surface);
    if (st != CAIRO_STATUS_SUCCESS) {
        optim__atomic_abort(&f);
        errno = e;
        return out_fail(out, cairo_status_to_string(st));
    }
    return optim__atomic_commit(&f, &what) != 0 ? out_fail(out, what) : 0;
}

int optim_cmd_schedule_plot(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: optim schedule-plot SCHEDULE_JSON OUT.png [STEPS]\n");
        return 2;
    }
    int64_t last = DEFAULT_STEPS;
    if (argc == 3 && parse_steps(argv[2], &last))
        return fail("STEPS '%s' is not an integer in 1..%lld", argv[2], (long long)MAX_STEPS);
    optim_error err;
    char *json = optim_tool_read_text(argv[0], &err);
    if (!json) return fail("SCHEDULE_JSON %s", err.msg);
    optim_schedule *s;
    int rc = optim_schedule_from_json(&s, json, &err);
    free(json);
    if (rc) return fail("SCHEDULE_JSON %s: %s", argv[0], err.msg);

    size_t n = last + 1 < MAX_POINTS ? (size_t)last + 1 : MAX_POINTS;
    int64_t *steps = malloc(n * sizeof *steps);
    double *values = malloc(n * sizeof *values);
    if (!steps || !values) {
        free(steps);
        free(values);
        optim_schedule_destroy(s);
        return fail("out of memory");
    }
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        steps[i] = n == (size_t)last + 1 ? (int64_t)i
                                         : (int64_t)llround((double)i * (double)last / (double)(n - 1));
        values[i] = optim_schedule_value(s, steps[i]);
        if (isfinite(values[i])) {
            if (values[i] < lo) lo = values[i];
            if (values[i] > hi) hi = values[i];
        }
    }
    if (!(lo <= hi)) {
        rc = fail("SCHEDULE_JSON %s: the schedule has no finite value at steps 0..%lld", argv[0], (long long)last);
    } else {
        /* From 0 (or below, for negative values) to a little above the top. */
        double ymin = lo < 0 ? lo : 0.0, ymax = hi > 0 ? hi : 0.0;
        if (ymax - ymin <= 0) ymax = ymin + 1.0;
        double span = ymax - ymin;
        ymax += 0.05 * span;
        if (lo < 0) ymin -= 0.05 * span;
        plot p = {optim_schedule_class_of(s)->name, steps, values, n, last, ymin, ymax};
        rc = render(&p, argv[1]);
    }
    free(steps);
    free(values);
    optim_schedule_destroy(s);
    /* Frees cairo's and fontconfig's caches (else LeakSanitizer reports them). */
    cairo_debug_reset_static_data();
    FcFini();
    return rc;
}
