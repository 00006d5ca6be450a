/* A deliberate data race in an OpenMP loop, built only with OPTIM_TSAN:
 * every thread adds to one shared counter with no atomic, reduction or lock.
 * tests/tsan/run.sh runs it first and fails unless ThreadSanitizer reports
 * this race here, so a TSan stage that silently sees nothing (no Archer, no
 * instrumentation, one thread) cannot pass. */
#include <stdio.h>

#include <omp.h>

static volatile long counter; /* volatile: each += is a load and a store, at any -O */

int main(void)
{
#pragma omp parallel for num_threads(4) schedule(static, 1)
    for (int i = 0; i < 4000; i++) counter += i; /* the race */
    printf("planted_race: counter %ld (7998000 without lost updates), %d threads\n", counter,
           omp_get_max_threads());
    return 0;
}
