/* How `optim replay` scales with the number of variables: N scalar float32
 * variables, one dense gradient each, one Adam step.
 *
 *     build/bench_replay_scale [OPTIM [RUNS [N...]]]
 *         (defaults: build/optim, 5 runs, N = 10000 100000)
 *
 * For each N: writes INIT and GRADS to a temporary directory, runs
 * `OPTIM replay` RUNS times and prints the median wall and CPU (user +
 * system) times; then the ratio of each CPU time to the first N's, against
 * the ratio of the Ns (linear growth: the two ratios match). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "optim/optim.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_replay_scale: %s: %s\n", what, msg);
    exit(1);
}

static void write_inputs(const char *dir, long n)
{
    optim_st_writer *wi, *wg;
    optim_error err;
    if (optim_st_writer_create(&wi, &err) || optim_st_writer_create(&wg, &err))
        die("writer", err.msg);
    float one = 1;
    optim_tensor t = optim_tensor_make(OPTIM_F32, &one, 0, NULL);
    for (long i = 0; i < n; i++) {
        char name[48];
        snprintf(name, sizeof name, "layer%ld/w", i);
        if (optim_st_writer_add(wi, name, &t, &err)) die("INIT", err.msg);
        snprintf(name, sizeof name, "0/layer%ld/w", i);
        if (optim_st_writer_add(wg, name, &t, &err)) die("GRADS", err.msg);
    }
    char path[4200], cfg[4200];
    snprintf(path, sizeof path, "%s/init.st", dir);
    if (optim_st_writer_save(wi, path, &err)) die("INIT", err.msg);
    snprintf(path, sizeof path, "%s/grads.st", dir);
    if (optim_st_writer_save(wg, path, &err)) die("GRADS", err.msg);
    optim_st_writer_destroy(wi);
    optim_st_writer_destroy(wg);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE *f = fopen(cfg, "w");
    if (!f || fputs("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.001}}", f) < 0 ||
        fclose(f) != 0)
        die(cfg, "cannot write");
}

static double cpu_of_children(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
        1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Runs one replay; returns its wall time, and its CPU time (user + system)
 * in *cpu: on a shared machine the CPU time is the steadier measure. */
static double run_once(const char *optim, const char *dir, double *cpu)
{
    char cfg[4200], init[4200], grads[4200], out[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(init, sizeof init, "%s/init.st", dir);
    snprintf(grads, sizeof grads, "%s/grads.st", dir);
    snprintf(out, sizeof out, "%s/out.st", dir);
    struct timespec t0, t1;
    double c0 = cpu_of_children();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) die("fork", "failed");
    if (pid == 0) {
        execl(optim, optim, "replay", cfg, init, grads, out, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        die(optim, "replay failed");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *cpu = cpu_of_children() - c0;
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

int main(int argc, char **argv)
{
    const char *optim = argc > 1 ? argv[1] : "build/optim";
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    long def[] = {10000, 100000}, *ns = def;
    int nn = 2;
    if (argc > 3) {
        nn = argc - 3;
        ns = calloc((size_t)nn, sizeof *ns);
        for (int i = 0; i < nn; i++) ns[i] = atol(argv[3 + i]);
    }
    if (runs < 1 || runs > 100) die("RUNS", "expected 1..100");
    char dir[] = "/tmp/optim-bench-replay-XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp", "failed");
    double first = 0;
    for (int k = 0; k < nn; k++) {
        if (ns[k] < 1) die("N", "expected a positive count");
        write_inputs(dir, ns[k]);
        double t[100], c[100];
        for (int r = 0; r < runs; r++) t[r] = run_once(optim, dir, &c[r]);
        qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
        qsort(c, (size_t)runs, sizeof *c, bench_cmp_double);
        double med = t[runs / 2], cmed = c[runs / 2];
        if (k == 0) first = cmed;
        printf("replay, %7ld variables, one Adam step, median of %d runs: wall %.3f s, CPU %.3f s "
               "(%.2f us/variable); CPU ratio to N=%ld: %.2f for an N ratio of %.2f\n",
               ns[k], runs, med, cmed, 1e6 * cmed / (double)ns[k], ns[0], cmed / first,
               (double)ns[k] / (double)ns[0]);
    }
    char path[4200];
    const char *files[] = {"config.json", "init.st", "grads.st", "out.st"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}
