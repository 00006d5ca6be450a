/* `optim`: the command-line tool. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cblas.h>
#include <string.h>

#include "commands.h"
#include "optim/optim.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: optim [--plugin PATH]... COMMAND [ARGS]\n"
        "\n"
        "  --plugin PATH                  load a plugin (a shared library defining\n"
        "                                 optim_plugin_init) before the command; also\n"
        "                                 every path in OPTIM_PLUGINS (colon-separated)\n"
        "\n"
        "commands:\n"
        "  replay CONFIG INIT GRADS OUT   apply recorded gradients with an optimizer\n"
        "                                 (JSON config, safetensors in and out)\n"
        "  schedule-plot SCHEDULE_JSON OUT.png [STEPS]\n"
        "                                 draw a learning-rate schedule over steps\n"
        "                                 0..STEPS (default 1000) as a PNG\n"
        "  train [OPTIONS]                train an MLP on Fashion-MNIST (see optim train --help)\n"
        "  compare CONFIG... [OPTIONS]    train it once per optimizer and compare (optim compare --help)\n"
        "  lr-find [OPTIONS]              learning-rate range test: sweep the rate, print the\n"
        "                                 suggested one (see optim lr-find --help)\n"
        "  bench [--json] [CONFIG...]     optimizer steps against this machine's memory\n"
        "                                 bandwidth (see optim bench --help)\n"
        "  check CONFIG                   load an optimizer config (JSON file) and print it\n"
        "                                 with every default filled in\n"
        "  conformance CLASS_NAME [--generation keras3|legacy] [--config JSON]\n"
        "                                 check an optimizer class (a plugin's) against\n"
        "                                 the contract; exit 0 only if every check passes\n"
        "  new-plugin NAME DIR            write a plugin project for the optimizer class\n"
        "                                 NAME into DIR, ready to build and check\n"
        "  version [--json]               print the version and the instruction-set level in use\n"
        "  help                           print this help\n");
}

/* Settings the OpenMP and BLAS runtimes read from the environment when they
 * load, so they are set there and the program runs again (a user's own
 * values are respected; docs/performance.md has the measurements):
 *
 * - The pthread build of OpenBLAS runs on one thread: its pool and the
 *   optimizer's OpenMP threads spin against each other on few cores (optim
 *   train 2.5x slower, bench's triad 10x), and a fixed BLAS thread count
 *   keeps results independent of the machine. The OpenMP build
 *   (openblas_get_parallel() == 2, what CMake links when it finds one) runs
 *   on libgomp's threads, OMP_NUM_THREADS of them like the optimizer, and
 *   needs none of this.
 * - GOMP_SPINCOUNT=20000 unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set:
 *   a step of optim train is a dozen short parallel regions (the GEMMs, the
 *   optimizer step). libgomp's default spin (300,000 turns) at a barrier
 *   holds a core the thread it waits for needs on a shared machine (a step
 *   6-8x slower, with the pthread OpenBLAS); sleeping at once
 *   (OMP_WAIT_POLICY=passive, the previous default) pays a futex wake per
 *   region: an epoch 1.37x its GEMMs on Zen 5, against 1.24-1.26 with a
 *   spin of 20,000 turns (bench_train_gemm, docs/performance.md). */
static void runtime_settings(char **argv)
{
    const int pthread_blas = openblas_get_parallel() != 2 && !getenv("OPENBLAS_NUM_THREADS");
    int again = 0;
    if (pthread_blas) again |= setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0;
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
        again |= setenv("GOMP_SPINCOUNT", "20000", 1) == 0;
    if (again) execv("/proc/self/exe", argv);
    if (pthread_blas) openblas_set_num_threads(1); /* could not run again: the next best thing */
}

char **optim_tool_argv;

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    runtime_settings(argv);
    /* A copy: loading the plugins rewrites argv in place. */
    char **copy = calloc((size_t)argc + 1, sizeof *copy);
    if (!copy) {
        fputs("optim: out of memory\n", stderr);
        return 1;
    }
    memcpy(copy, argv, (size_t)argc * sizeof *copy);
    optim_tool_argv = copy;
    optim_error err;
    if (optim_isa(NULL, &err)) { /* OPTIM_ISA names a level this CPU runs */
        fprintf(stderr, "optim: %s\n", err.msg);
        return 2;
    }
    int rc = optim_tool_load_plugins(&argc, &argv);
    if (rc) return rc;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "replay") == 0) return optim_cmd_replay(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return optim_cmd_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0) return optim_cmd_check(argc - 2, argv + 2);
    if (strcmp(cmd, "train") == 0) return optim_cmd_train(argc - 2, argv + 2);
    if (strcmp(cmd, "conformance") == 0) return optim_cmd_conformance(argc - 2, argv + 2);
    if (strcmp(cmd, "compare") == 0) return optim_cmd_compare(argc - 2, argv + 2);
    if (strcmp(cmd, "lr-find") == 0) return optim_cmd_lr_find(argc - 2, argv + 2);
    if (strcmp(cmd, "new-plugin") == 0) return optim_cmd_new_plugin(argc - 2, argv + 2);
    if (strcmp(cmd, "schedule-plot") == 0) return optim_cmd_schedule_plot(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return optim_cmd_version(argc - 2, argv + 2);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return optim_tool_finish_stdout("help", 0);
    }
    fprintf(stderr, "optim: unknown command '%s' (try 'optim help')\n", cmd);
    return 2;
}
