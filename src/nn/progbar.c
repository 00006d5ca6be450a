/* Keras's progress bar (tf-keras utils/generic_utils.py Progbar): on a
 * terminal a bar redrawn in place,
 *     234/469 [==============>...............] - ETA: 1s - loss: 0.5123 - accuracy: 0.8210
 * ending as "469/469 [==============================] - 3s 6ms/step - ...";
 * otherwise (verbose 2) one line when the epoch ends:
 *     469/469 - 3s - loss: 0.5123 - accuracy: 0.8210 - 3s/epoch - 6ms/step
 * The values are the logs as they are (fit's are already running means). */
#define _POSIX_C_SOURCE 200809L
#include "nn/internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double optim__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int optim__progbar_mode(FILE *out, int verbose)
{
    if (!out || verbose == 0) return 0;
    if (verbose == OPTIM_VERBOSE_AUTO) return isatty(fileno(out)) ? 1 : 2;
    return verbose;
}

void optim__progbar_init(optim__progbar *p, FILE *out, int mode, int64_t target)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->mode = mode;
    p->target = target > 0 ? target : 1;
    p->width = 30;
    p->start = p->epoch_start = optim__now();
}

/* Appends to buf at *len (bounded). */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) OPTIM__PRINTF(4, 5);
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

static void put_time(char *buf, size_t cap, size_t *len, double t, const char *unit)
{
    if (t >= 1 || t == 0) put(buf, cap, len, " %.0fs/%s", t, unit);
    else if (t >= 1e-3) put(buf, cap, len, " %.0fms/%s", t * 1e3, unit);
    else put(buf, cap, len, " %.0fus/%s", t * 1e6, unit);
}

static double step_duration(optim__progbar *p, int64_t current, double now)
{
    if (!current) return 0;
    double t;
    if (p->has_after_first && current > 1) t = (now - p->after_first) / (double)(current - 1);
    else t = (now - p->start) / (double)current;
    if (current == 1) p->after_first = now, p->has_after_first = 1;
    return t;
}

static int num_digits(int64_t v)
{
    int d = 1;
    while (v >= 10) v /= 10, d++;
    return d;
}

void optim__progbar_update(optim__progbar *p, int64_t current, const optim_logs *logs, int finalize)
{
    if (!p->mode || !p->out) return;
    char line[2048];
    size_t len = 0;
    double now = optim__now();
    if (current == p->target) p->epoch_end = now, p->has_epoch_end = 1;
    int nd = num_digits(p->target);
    if (p->mode == 1) {
        if (now - p->last_update < 0.05 && !finalize) return;
        int prev = p->total_width;
        put(line, sizeof line, &len, "\r%*lld/%lld [", nd, (long long)current,
            (long long)p->target);
        int prog = (int)((double)p->width * (double)current / (double)p->target);
        if (prog > p->width) prog = p->width;
        for (int i = 0; i < prog - 1; i++) put(line, sizeof line, &len, "=");
        if (prog > 0) put(line, sizeof line, &len, current < p->target ? ">" : "=");
        for (int i = prog; i < p->width; i++) put(line, sizeof line, &len, ".");
        put(line, sizeof line, &len, "]");
        double tpu = step_duration(p, current, now);
        if (finalize) {
            put(line, sizeof line, &len, " - %.0fs", now - p->start);
            put_time(line, sizeof line, &len, tpu, "step");
        } else {
            double eta = tpu * (double)(p->target - current);
            if (eta > 3600)
                put(line, sizeof line, &len, " - ETA: %d:%02d:%02d", (int)(eta / 3600),
                    (int)fmod(eta, 3600) / 60, (int)fmod(eta, 60));
            else if (eta > 60)
                put(line, sizeof line, &len, " - ETA: %d:%02d", (int)(eta / 60),
                    (int)fmod(eta, 60));
            else put(line, sizeof line, &len, " - ETA: %ds", (int)eta);
        }
        for (size_t i = 0; logs && i < logs->n; i++) {
            double v = logs->values[i];
            put(line, sizeof line, &len, fabs(v) > 1e-3 ? " - %s: %.4f" : " - %s: %.4e",
                logs->names[i], v);
        }
        p->total_width = (int)(len - 1); /* without the '\r' */
        if (prev > p->total_width)
            for (int i = p->total_width; i < prev; i++) put(line, sizeof line, &len, " ");
        if (finalize) put(line, sizeof line, &len, "\n");
        fputs(line, p->out);
        fflush(p->out);
    } else if (finalize) {
        put(line, sizeof line, &len, "%*lld/%lld - %.0fs", nd, (long long)current,
            (long long)p->target, now - p->start);
        for (size_t i = 0; logs && i < logs->n; i++) {
            double v = logs->values[i];
            put(line, sizeof line, &len, v > 1e-3 ? " - %s: %.4f" : " - %s: %.4e", logs->names[i],
                v);
        }
        if (current < p->target) p->epoch_end = now, p->has_epoch_end = current > 0; /* stopped */
        if (p->has_epoch_end) {
            double per_epoch = p->epoch_end - p->epoch_start;
            put(line, sizeof line, &len, " -");
            put_time(line, sizeof line, &len, per_epoch, "epoch");
            put(line, sizeof line, &len, " -");
            put_time(line, sizeof line, &len, per_epoch / (double)current, "step");
            p->epoch_start = now;
            p->has_epoch_end = 0;
        }
        put(line, sizeof line, &len, "\n");
        fputs(line, p->out);
        fflush(p->out);
    }
    p->last_update = now;
}
