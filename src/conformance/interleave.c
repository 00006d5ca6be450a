/* The interleaving probe: a copy of the checked class, registered once as
 * "<NAME>.conformance_interleave", whose apply_dense, once armed, runs one
 * kernel call (the victim) on a copy of its gradient whose middle page is
 * unreadable. When the kernel reaches that page, the SIGSEGV handler runs
 * the class's kernel again on a private copy of the same run with the
 * gradient reversed (the intruder, whose results are dropped), makes the
 * page readable and returns into the victim. A kernel that keeps state
 * outside its arguments (a static scratch buffer) gives the victim the
 * intruder's values: what two threads in the kernel at once would do, but
 * on every run, on one thread, whatever the machine's load. Element-wise
 * classes only (their slots are the variable's size, so a run's copy is
 * count elements of each). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, sigaction */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conformance/harness.h"

#define SUFFIX ".conformance_interleave"

/* The run's state; the checker is not thread-safe and the probe steps on
 * one thread. */
static struct {
    const optim_class *target; /* the checked class, whose hooks run */
    int armed, pending, fired;
    char *page; /* the victim's unreadable page */
    size_t page_size;
    optim_dense_update intruder;
    struct sigaction old;
} il;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    char *at = si->si_addr;
    if (il.pending && at >= il.page && at < il.page + il.page_size) {
        il.pending = 0;
        il.target->apply_dense(&il.intruder);
        il.fired = 1;
        mprotect(il.page, il.page_size, PROT_READ);
        return;
    }
    /* Not ours: the faulting access runs again under the old handler. */
    sigaction(SIGSEGV, &il.old, NULL);
}

/* Zeros around every copy: a kernel that reads or writes just outside its
 * run (elementwise.guards reports it) does not crash this check. */
#define PAD 4096

/* Private copies for the intruder: param and slots as they are, the
 * gradient reversed, PAD zeros on each side; c[0 .. n-1] the blocks,
 * c[n ..] the arrays (param, grad, slots); NULL on allocation failure. */
static char **intruder_copies(const optim_dense_update *u, size_t bytes, size_t es)
{
    const int n = u->nslots + 2;
    char **c = calloc(2 * (size_t)n, sizeof *c);
    for (int k = 0; c && k < n; k++) {
        if (!(c[k] = calloc(1, bytes + 2 * PAD))) {
            while (k-- > 0) free(c[k]);
            free(c);
            return NULL;
        }
        c[n + k] = c[k] + PAD;
    }
    if (!c) return NULL;
    memcpy(c[n], u->param, bytes);
    for (int k = 0; k < u->nslots; k++) memcpy(c[n + k + 2], u->slots[k], bytes);
    for (int64_t i = 0; i < u->count; i++)
        memcpy(c[n + 1] + (size_t)i * es, (const char *)u->grad + (size_t)(u->count - 1 - i) * es,
               es);
    il.intruder = *u;
    il.intruder.param = c[n];
    il.intruder.grad = c[n + 1];
    il.intruder.slots = (void *const *)(c + n + 2);
    return c;
}

/* The victim: u with its gradient in a mapping whose middle page faults
 * (and a page of zeros on each side). */
static void run_victim(const optim_dense_update *u, size_t bytes)
{
    const size_t ps = il.page_size, len = ((bytes + ps - 1) / ps + 2) * ps;
    char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *g = map == MAP_FAILED ? NULL : map + ps;
    struct sigaction sa = {0};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (!g || sigaction(SIGSEGV, &sa, &il.old) != 0) {
        if (g) munmap(map, len);
        il.target->apply_dense(u);
        return;
    }
    memcpy(g, u->grad, bytes);
    il.page = g + (bytes / ps / 2) * ps;
    il.pending = mprotect(il.page, il.page_size, PROT_NONE) == 0;
    optim_dense_update v = *u;
    v.grad = g;
    il.target->apply_dense(&v);
    il.pending = 0;
    sigaction(SIGSEGV, &il.old, NULL);
    munmap(map, len);
}

static void interleave_apply_dense(const optim_dense_update *u)
{
    const size_t es = u->dtype == OPTIM_F32 ? 4 : 8, bytes = (size_t)u->count * es;
    if (!il.armed || bytes < 4 * il.page_size) {
        il.target->apply_dense(u);
        return;
    }
    il.armed = 0;
    char **copies = intruder_copies(u, bytes, es);
    if (copies) run_victim(u, bytes);
    else il.target->apply_dense(u);
    for (int k = 0; copies && k < u->nslots + 2; k++) free(copies[k]);
    free(copies);
}

static int is_interleave(const optim_class *k) { return k->apply_dense == interleave_apply_dense; }

int optim__cf_interleave_probe(const cf_ctx *c, char *name, size_t n, char *why, size_t wn)
{
    optim_class probe = *c->cls;
    probe.apply_dense = interleave_apply_dense;
    return optim__cf_register_copy(c, probe, SUFFIX, is_interleave, name, n, why, wn);
}

void optim__cf_interleave_arm(const optim_class *cls)
{
    long ps = sysconf(_SC_PAGESIZE);
    il.page_size = ps > 0 ? (size_t)ps : 4096;
    il.target = cls;
    il.armed = 1;
    il.fired = 0;
}

int optim__cf_interleave_fired(void) { return il.fired; }
