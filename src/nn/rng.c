/* The seeded generator behind initializers, shuffling and dropout seeds:
 * SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014). Same seed, same numbers, on every machine. */
#include "nn/internal.h"

optim__rng optim__rng_make(uint64_t seed)
{
    optim__rng r = {seed};
    return r;
}

uint64_t optim__rng_next(optim__rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double optim__rng_uniform(optim__rng *r) { return (double)(optim__rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t optim__rng_below(optim__rng *r, uint64_t n)
{
    /* Rejection sampling: unbiased for any n. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = optim__rng_next(r);
    while (x >= limit);
    return x % n;
}

uint64_t optim__seed_mix(uint64_t a, uint64_t b)
{
    optim__rng r = optim__rng_make(a ^ (b * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull));
    optim__rng_next(&r);
    return optim__rng_next(&r);
}
