/* The main job's history as CSV and as a figure (tools/job.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "plot.h"

/* A CSV field: quoted when it holds a comma, quote or line break. */
static void put_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void put_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, ",%.9g", v);
    else fputs(",", f);
}

int optim_job_write_csv(const char *cmd, const char *path, const char *const *labels,
                        const job_result *res, size_t n)
{
    optim_error err;
    optim_atomic_file *af;
    if (optim_atomic_file_open(&af, path, &err) != OPTIM_OK)
        return optim_tool_fail(cmd, "--history %s", err.msg);
    FILE *f = optim_atomic_file_stream(af);
    fputs("optimizer,epoch,loss,accuracy,val_loss,val_accuracy,seconds\n", f);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < res[i].n; k++) {
            const job_row *r = &res[i].rows[k];
            put_field(f, labels[i]);
            fprintf(f, ",%lld", (long long)r->epoch);
            put_num(f, r->loss), put_num(f, r->accuracy), put_num(f, r->val_loss),
                put_num(f, r->val_accuracy);
            put_num(f, r->seconds);
            fputc('\n', f);
        }
    if (optim_atomic_file_commit(af, &err) != OPTIM_OK)
        return optim_tool_fail(cmd, "--history %s", err.msg);
    return 0;
}

/* Series of one metric (0: loss, 1: accuracy) for every run, train and
 * validation, into s (2n entries); xs and ys hold the numbers. */
static size_t metric_series(const job_result *res, size_t n, int metric, double *xs, double *ys,
                            plot_series *s)
{
    size_t k = 0, off = 0;
    for (size_t i = 0; i < n; i++)
        for (int val = 0; val < 2; val++) {
            const job_row *r = res[i].rows;
            for (size_t e = 0; e < res[i].n; e++) {
                xs[off + e] = (double)r[e].epoch;
                ys[off + e] = metric ? (val ? r[e].val_accuracy : r[e].accuracy)
                                     : (val ? r[e].val_loss : r[e].loss);
            }
            s[k++] = (plot_series){xs + off, ys + off, res[i].n, (int)i, val, 1};
            off += res[i].n;
        }
    return k;
}

int optim_job_plot(const char *cmd, const char *path, const char *title, const char *const *labels,
                   const job_result *res, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += res[i].n;
    double *buf = malloc((8 * total + 1) * sizeof *buf);
    plot_series *s = malloc((4 * n + 1) * sizeof *s);
    plot_key *keys = malloc((n + 2) * sizeof *keys);
    if (!buf || !s || !keys) {
        free(buf), free(s), free(keys);
        return optim_tool_fail(cmd, "--plot: out of memory");
    }
    plot_panel p[2] = {{"loss", "epoch", "loss", s, 0, 0, 0, 0, 0, 1, 0},
                       {"accuracy", "epoch", "accuracy", s, 0, 0, 0, 0, 0, 1, 0}};
    p[0].n_series = metric_series(res, n, 0, buf, buf + 2 * total, s);
    p[1].series = s + p[0].n_series;
    p[1].n_series = metric_series(res, n, 1, buf + 4 * total, buf + 6 * total, s + p[0].n_series);
    for (size_t i = 0; i < n; i++) keys[i] = (plot_key){labels[i], (int)i, 0};
    keys[n] = (plot_key){"train", -1, 0}, keys[n + 1] = (plot_key){"validation", -1, 1};
    int rc = 0;
    if (optim_plot_autoscale(&p[0], 1) || optim_plot_autoscale(&p[1], 0))
        rc = optim_tool_fail(cmd, "--plot %s: no finite loss or accuracy to draw", path);
    plot_figure fig = {800, 500, title, p, 2, keys, n + 2};
    char msg[512];
    if (!rc && optim_plot_write_png(&fig, path, msg, sizeof msg))
        rc = optim_tool_fail(cmd, "--plot %s", msg);
    free(buf), free(s), free(keys);
    return rc;
}
