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
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plot.h"
#include "optim/optim.h"

#define WIDTH 640
#define HEIGHT 360
#define MAX_STEPS 1000000000LL
#define MAX_POINTS 100001
#define DEFAULT_STEPS 1000

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

/* The schedule as one line over steps 0..last, into OUT. */
static int draw(const char *title, const int64_t *steps, const double *values, size_t n,
                int64_t last, double ymin, double ymax, const char *out)
{
    double *x = malloc(n * sizeof *x);
    if (!x) return fail("out of memory");
    for (size_t i = 0; i < n; i++) x[i] = (double)steps[i];
    plot_series line = {x, values, n, 0, 0, 0};
    plot_panel panel = {NULL, "step", "learning rate", &line, 1, 0, (double)last, ymin, ymax, 1, 0};
    plot_figure fig = {WIDTH, HEIGHT, title, &panel, 1, NULL, 0};
    char msg[512];
    int rc = optim_plot_write_png(&fig, out, msg, sizeof msg) ? fail("OUT %s", msg) : 0;
    free(x);
    return rc;
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
        steps[i] = n == (size_t)last + 1
            ? (int64_t)i
            : (int64_t)llround((double)i * (double)last / (double)(n - 1));
        values[i] = optim_schedule_value(s, steps[i]);
        if (isfinite(values[i])) {
            if (values[i] < lo) lo = values[i];
            if (values[i] > hi) hi = values[i];
        }
    }
    if (!(lo <= hi)) {
        rc = fail("SCHEDULE_JSON %s: the schedule has no finite value at steps 0..%lld", argv[0],
                  (long long)last);
    } else {
        /* From 0 (or below, for negative values) to a little above the top. */
        double ymin = lo < 0 ? lo : 0.0, ymax = hi > 0 ? hi : 0.0;
        if (ymax - ymin <= 0) ymax = ymin + 1.0;
        double span = ymax - ymin;
        ymax += 0.05 * span;
        if (lo < 0) ymin -= 0.05 * span;
        rc = draw(optim_schedule_class_of(s)->name, steps, values, n, last, ymin, ymax, argv[1]);
    }
    free(steps);
    free(values);
    optim_schedule_destroy(s);
    optim_plot_cleanup();
    return rc;
}
