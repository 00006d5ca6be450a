/* optim conformance, one process per group of checks: this command again
 * with --group NAME for each of optim_conformance_groups(), its lines passed
 * on as they come (flushed), so that a class that crashes inside one group
 * is reported as CRASH and the other groups still run. */
#define _POSIX_C_SOURCE 200809L /* getline, fdopen */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "conformance.h"
#include "optim/optim.h"

static const char *signal_name(int sig, char *buf, size_t n)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                 {SIGILL, "SIGILL"},   {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"},
                 {SIGTRAP, "SIGTRAP"}, {SIGTERM, "SIGTERM"}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].sig == sig) return names[i].name;
    snprintf(buf, n, "signal %d", sig);
    return buf;
}

/* The child's argv: this command line with --group GROUP appended. */
static char **child_argv(const char *group)
{
    int n = 0;
    while (optim_tool_argv[n]) n++;
    char **v = calloc((size_t)n + 3, sizeof *v);
    if (!v) return NULL;
    memcpy(v, optim_tool_argv, (size_t)n * sizeof *v);
    v[n] = "--group";
    v[n + 1] = (char *)group;
    return v;
}

/* Starts the child for group with its standard output on a pipe. */
static pid_t spawn(const char *group, FILE **out)
{
    char **argv = child_argv(group);
    int fd[2];
    if (!argv || pipe(fd)) {
        free(argv);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    free(argv);
    close(fd[1]);
    *out = pid > 0 ? fdopen(fd[0], "r") : NULL;
    if (pid > 0 && !*out) close(fd[0]);
    return pid;
}

/* Passes the child's check lines on, counting them and keeping the last
 * check's name; its summary line is dropped (the parent writes its own). */
static int relay(FILE *in, conformance_counts *k, char *last, size_t nlast, int *lines)
{
    char *line = NULL;
    size_t cap = 0;
    int bad = 0;
    while (getline(&line, &cap, in) > 0) {
        int a, b;
        char tail;
        if (sscanf(line, "%d passed, %d failed%c", &a, &b, &tail) == 3 && tail == '\n') continue;
        bad |= fputs(line, stdout) < 0 || fflush(stdout) != 0;
        (*lines)++;
        k->passed += strncmp(line, "PASS ", 5) == 0;
        k->failed += strncmp(line, "FAIL ", 5) == 0;
        snprintf(last, nlast, "%.*s", (int)strcspn(line + 5, ":\n"), line + 5);
    }
    free(line);
    return bad;
}

/* Runs one group; 1 when it could not start (its message is on stderr). */
static int run_group(const char *group, conformance_counts *k)
{
    FILE *in = NULL;
    pid_t pid = spawn(group, &in);
    if (pid < 0 || !in) {
        fprintf(stderr, "optim conformance: cannot start the checks of group %s\n", group);
        return 1;
    }
    char last[128] = "none", sig[32];
    int lines = 0, status = 0;
    k->write_failed |= relay(in, k, last, sizeof last, &lines);
    fclose(in);
    if (waitpid(pid, &status, 0) != pid) status = 0x7f00;
    if (WIFSIGNALED(status)) {
        k->crashed++;
        if (printf("CRASH %s (%s): while %s; the last check it reported: %s\n", group,
                   signal_name(WTERMSIG(status), sig, sizeof sig),
                   optim_conformance_group_doing(group), last) < 0 ||
            fflush(stdout))
            k->write_failed = 1;
        return 0;
    }
    /* No check ran: the class or the options were refused (said on stderr). */
    return lines == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0);
}

int optim_tool_conformance_isolated_group(const char *group, conformance_counts *k)
{
    return run_group(group, k);
}

int optim_tool_conformance_isolated(conformance_counts *k)
{
    for (const char *const *g = optim_conformance_groups(); *g; g++)
        if (run_group(*g, k)) return 1;
    return 0;
}
