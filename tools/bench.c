/* optim bench: optimizer steps against this machine's memory bandwidth.
 *
 *     optim bench [--json] [--size N] [--runs R] [--threads T] [--dtype D] [--tensors K]
 *                 [--iterations I] [--sparse ROWS COLS INDICES] [CONFIG...]
 *
 * For each optimizer config (default: every built-in), one dense step on an
 * N-element variable of dtype D (f32, f64, f16 or bf16; default f32), or on
 * K variables of N / K elements (one call for all: bench_tensors.c), is
 * timed R times; its effective bandwidth (the bytes the class's passes move
 * in the storage type, optim_bytes_per_param: for an element-wise rule the
 * gradient read, the variable and each full-size slot read and written;
 * Lamb's second pass reads w, m and v again) is compared with an
 * OpenMP triad (16 bytes per element with the write-allocate) run before
 * each timed step, the ratio taken between the two medians. --iterations I starts each optimizer's step counter at I
 * (steps I + 1, I + 2, ...: a long run's state of the bias corrections). Prints the median of the R runs, one line per config, or
 * with --json one JSON object per line. --sparse times a sparse step on a
 * [ROWS, COLS] table of dtype D instead (bench_sparse.c). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_tensors.h"
#include "bench_sparse.h"
#include "commands.h"
#include "optim/optim.h"

static const char *const DEFAULTS[] = {
    "\"sgd\"",      "{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.9}}",
    "\"adam\"",     "{\"class_name\": \"Adam\", \"config\": {\"is_legacy_optimizer\": true}}",
    "\"adamw\"",    "\"adamax\"",
    "\"nadam\"",    "\"rmsprop\"",
    "\"adagrad\"",  "\"adadelta\"",
    "\"ftrl\"",     "\"lion\"",
    "\"lamb\"",     "\"adafactor\"",
    "\"lazyadam\"",
};

double optim_bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double optim_bench_cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static int fail(const char *fmt, const char *what)
{
    fputs("optim bench: ", stderr);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return 1;
}

static int parse_count(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max) return -1;
    *out = v;
    return 0;
}

/* optim_bytes_per_param, or for a wrapper without the hook its inner
 * optimizer's that holds var (the wrapper's own passes are not counted). */
int optim_bench_bytes(optim_optimizer *opt, const optim_var *var, double *bytes, const char **why)
{
    const int rc = optim_bytes_per_param(opt, var, bytes);
    const optim_class *c = optim_class_of(opt);
    *why = optim_errmsg(opt);
    for (size_t i = 0; rc == OPTIM_ENOTSUP; i++) {
        optim_optimizer *in = c->inner_at ? c->inner_at(opt, i)
            : i == 0 && c->inner          ? c->inner(opt)
                                          : NULL;
        const char *w;
        if (!in) break;
        const int r = optim_bench_bytes(in, var, bytes, &w);
        if (r != OPTIM_ENOTFOUND) {
            *why = w;
            return r;
        }
    }
    return rc;
}

const char *optim_bench_isa(void)
{
    optim_isa_level l;
    return optim_isa(&l, NULL) ? "unknown" : optim_isa_name(l);
}

double optim_bench_median(double *t, int runs)
{
    qsort(t, (size_t)runs, sizeof *t, cmp);
    return t[runs / 2];
}

/* Median time of `runs` triads over n floats, as GB/s at 16 B/element. */
double optim_bench_triad(float *a, const float *b, const float *c, int64_t n, int runs, double *t)
{
    for (int r = 0; r < runs; r++) {
        double t0 = optim_bench_now();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
        t[r] = optim_bench_now() - t0;
    }
    return 16.0 * (double)n / optim_bench_median(t, runs) / 1e9;
}

/* --dtype's value: a float dtype's short name, f32, f64, f16 or bf16 (0 for
 * anything else; optim_convert takes exactly the float dtypes). */
static optim_dtype parse_dtype(const char *s)
{
    const optim_dtype dt = optim_dtype_from_short_name(s);
    return optim_convert(NULL, dt, NULL, OPTIM_F32, 0) == OPTIM_OK ? dt : OPTIM_DTYPE_INVALID;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* What a dense run of one config needs (optim_cmd_bench's options). */
typedef struct dense_run {
    long long n, tensors, iterations;
    int runs;
    optim_dtype dtype;
    void *grad; /* n elements of dtype */
    int json;
    float *a, *b, *c; /* the triad's arrays, n floats each */
    double *t, *cpu, *tri; /* runs doubles each */
} dense_run;

/* R timed steps of opt after a warm-up (slots, page faults), each after one
 * triad: wall and CPU seconds into d->t and d->cpu, the triads' into d->tri.
 * Alternating the two keeps the ratio honest on a machine whose bandwidth
 * drifts while a long list of configs runs. */
static int time_dense(optim_optimizer *opt, const bench_tensors *w, const dense_run *d)
{
    if (optim_apply_gradients(opt, w->pairs, (size_t)d->tensors, 0))
        return fail("%s", optim_errmsg(opt));
    for (int r = 0; r < d->runs; r++) {
        optim_bench_triad(d->a, d->b, d->c, d->n, 1, &d->tri[r]);
        const double t0 = optim_bench_now(), c0 = optim_bench_cpu_now();
        if (optim_apply_gradients(opt, w->pairs, (size_t)d->tensors, 0))
            return fail("%s", optim_errmsg(opt));
        d->t[r] = optim_bench_now() - t0;
        d->cpu[r] = optim_bench_cpu_now() - c0;
    }
    return 0;
}

static int report_dense(const char *config, optim_optimizer *opt, const bench_tensors *w,
                        const dense_run *d)
{
    /* What the class's passes move (optim_bytes_per_param), over every variable. */
    double bytes = 0;
    for (int64_t j = 0; j < w->k; j++) {
        double b;
        const char *why;
        if (optim_bench_bytes(opt, w->vars[j], &b, &why)) return fail("%s", why);
        bytes += b * (double)optim_var_numel(w->vars[j]) / (double)d->n;
    }
    const double secs = optim_bench_median(d->t, d->runs),
                 cpu = optim_bench_median(d->cpu, d->runs);
    const double bw = bytes * (double)d->n / secs / 1e9;
    const double limit = 16.0 * (double)d->n / optim_bench_median(d->tri, d->runs) / 1e9;
    if (!d->json) {
        printf("%-62s %6.1f GB/s  %3.0f B/param  %.2f x triad (%.1f GB/s)\n", config, bw, bytes,
               bw / limit, limit);
        return 0;
    }
    printf("{\"config\": ");
    json_string(stdout, config);
    printf(", \"class_name\": \"%s\", \"elements\": %lld, \"tensors\": %lld, \"iterations\": %lld, "
           "\"dtype\": \"%s\", \"threads\": %d, \"bytes_per_param\": %.4g, "
           "\"median_seconds\": %.9g, \"gb_per_s\": %.4g, \"triad_gb_per_s\": %.4g, "
           "\"ratio\": %.4g, \"cpu_median_seconds\": %.9g, \"isa\": \"%s\"}\n",
           optim_class_of(opt)->name, d->n, d->tensors, d->iterations, optim_dtype_name(d->dtype),
           omp_get_max_threads(), bytes, secs, bw, limit, bw / limit, cpu, optim_bench_isa());
    return 0;
}

/* One config's dense step, timed and reported; returns the exit status. */
static int bench_dense(const char *config, const dense_run *d)
{
    optim_error err;
    bench_tensors w = {0};
    optim_optimizer *opt = NULL;
    int rc;
    if (optim_from_json(&opt, config, &err) ||
        bench_tensors_make(&w, d->n, d->tensors, d->dtype, d->grad, &err))
        rc = fail("%s", err.msg);
    else if (optim_set_iterations(opt, d->iterations)) rc = fail("%s", optim_errmsg(opt));
    else if (!(rc = time_dense(opt, &w, d))) rc = report_dense(config, opt, &w, d);
    optim_destroy(opt);
    bench_tensors_free(&w);
    return rc;
}

int optim_cmd_bench(int argc, char **argv)
{
    int json = 0;
    optim_dtype dtype = OPTIM_F32;
    long long n = 1 << 24, runs = 7, threads = 0, tensors = 1, iterations = 0;
    const char **configs = NULL;
    int nconfigs = 0;
    bench_sparse_opts sp = {0};
    configs = calloc((size_t)argc + 1, sizeof *configs);
    if (!configs) return fail("%s", "out of memory");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        long long *target = !strcmp(a, "--size") ? &n
            : !strcmp(a, "--runs")               ? &runs
            : !strcmp(a, "--threads")            ? &threads
            : !strcmp(a, "--tensors")            ? &tensors
            : !strcmp(a, "--iterations")         ? &iterations
                                                 : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--dtype")) {
            if (i + 1 >= argc || !(dtype = parse_dtype(argv[i + 1]))) {
                free(configs);
                return fail("%s needs f32, f64, f16 or bf16 (see optim bench --help)", a);
            }
            i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf(
                "usage: optim bench [--json] [--size N] [--runs R] [--threads T] [--dtype f32|f64|f16|bf16] "
                "[--tensors K] [--iterations I] [--sparse ROWS COLS INDICES] [CONFIG...]\n");
            free(configs);
            return optim_tool_finish_stdout("bench", 0);
        } else if (target) {
            long long max = target == &n || target == &tensors ? (1LL << 31)
                : target == &runs                              ? 1000
                : target == &iterations                        ? OPTIM_ITERATIONS_MAX
                                                               : 1024;
            if (i + 1 >= argc ||
                parse_count(argv[i + 1], target == &threads || target == &iterations ? 0 : 1, max,
                            target)) {
                free(configs);
                return fail("%s needs a whole number in range (see optim bench --help)", a);
            }
            i++;
        } else if (!strcmp(a, "--sparse")) {
            if (i + 3 >= argc || parse_count(argv[i + 1], 1, 1LL << 40, &sp.rows) ||
                parse_count(argv[i + 2], 1, 1LL << 20, &sp.cols) ||
                parse_count(argv[i + 3], 1, 1LL << 30, &sp.indices) ||
                sp.rows * sp.cols > (1LL << 31)) {
                free(configs);
                return fail(
                    "%s needs ROWS COLS INDICES, whole numbers >= 1 with ROWS * COLS <= 2^31 "
                    "(see optim bench --help)",
                    a);
            }
            i += 3;
        } else if (a[0] == '-') {
            free(configs);
            return fail("unknown option '%s' (see optim bench --help)", a);
        } else {
            configs[nconfigs++] = a;
        }
    }
    if (sp.rows && iterations) {
        free(configs);
        return fail("%s is for dense steps, not --sparse", "--iterations");
    }
    sp.dtype = dtype;
    if (tensors > n) {
        free(configs);
        return fail("%s K must be at most --size N (one element per variable at least)",
                    "--tensors");
    }
    const char *const *list = nconfigs ? configs : DEFAULTS;
    if (!nconfigs) nconfigs = (int)(sizeof DEFAULTS / sizeof *DEFAULTS);
    /* Every config must load before anything is measured. A bare class name
     * (adam) stands for its JSON string ("adam"). */
    char **texts = calloc((size_t)nconfigs, sizeof *texts);
    if (!texts) {
        free(configs);
        return fail("%s", "out of memory");
    }
    for (int k = 0; k < nconfigs; k++) {
        const char *c = list[k];
        size_t len = strlen(c) + 3;
        texts[k] = malloc(len);
        if (!texts[k]) {
            for (int j = 0; j < k; j++) free(texts[j]);
            free(texts);
            free(configs);
            return fail("%s", "out of memory");
        }
        snprintf(texts[k], len, (c[0] == '{' || c[0] == '"') ? "%s" : "\"%s\"", c);
        optim_optimizer *check;
        optim_error err;
        if (optim_from_json(&check, texts[k], &err)) {
            fprintf(stderr, "optim bench: config %s: %s\n", c, err.msg);
            for (int j = 0; j <= k; j++) free(texts[j]);
            free(texts);
            free(configs);
            return 1;
        }
        optim_destroy(check);
    }
    if (threads > 0) omp_set_num_threads((int)threads);
    if (sp.rows) {
        sp.runs = (int)runs;
        sp.json = json;
        int src = optim_bench_sparse((const char *const *)texts, nconfigs, &sp);
        for (int k = 0; k < nconfigs; k++) free(texts[k]);
        free(texts);
        free(configs);
        return optim_tool_finish_stdout("bench", src);
    }
    int rc = 0;
    float *g = malloc((size_t)n * sizeof *g), *a = malloc((size_t)n * sizeof *a);
    float *b = malloc((size_t)n * sizeof *b), *c = malloc((size_t)n * sizeof *c);
    double *t = malloc((size_t)runs * sizeof *t), *cpu = malloc((size_t)runs * sizeof *cpu),
           *tri = malloc((size_t)runs * sizeof *tri);
    const size_t esz = optim_dtype_size(dtype);
    void *gd = malloc((size_t)n * esz); /* the gradient in the storage type */
    if (!g || !a || !b || !c || !t || !cpu || !tri || !gd) {
        rc = fail("%s", "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < n; i++) g[i] = 1e-3f * (float)(i % 7), a[i] = 0, b[i] = 1, c[i] = 2;
    optim_convert(gd, dtype, g, OPTIM_F32, n);
    if (!json)
        printf("triad: 16 B/element, one before each step; %lld elements, %d threads, isa %s\n", n,
               omp_get_max_threads(), optim_bench_isa());
    const dense_run d = {n, tensors, iterations, (int)runs, dtype, gd, json, a, b, c, t, cpu, tri};
    for (int k = 0; k < nconfigs && !rc; k++) rc = bench_dense(texts[k], &d);
out:
    free(gd);
    free(g);
    free(a);
    free(b);
    free(c);
    free(t);
    free(cpu);
    free(tri);
    for (int k = 0; k < nconfigs; k++) free(texts[k]);
    free(texts);
    free(configs);
    return optim_tool_finish_stdout("bench", rc);
}
