/* A half-precision optimizer beside its float32 reference (tests only).
 *
 * `a` steps F16 or BF16 variables; `r` steps float32 variables holding the
 * same values widened. A test gives both the same gradients (the reference
 * sees the half gradient widened), then checks that a's variables and
 * weights are r's rounded to a's type, bit for bit (half_pair_compare), and
 * restarts r from a's rounded state (half_pair_copy_state) so that each
 * step is checked on its own. Used by test_half.c (dense) and
 * test_half_sparse.c (sparse). */
#ifndef OPTIM_TESTS_HALF_PAIR_H
#define OPTIM_TESTS_HALF_PAIR_H

#include <stdint.h>

#include "optim/optim.h"

#define HALF_PAIR_MAX_VARS 4

/* The variables of a pair: names, ranks, shapes (up to rank 3) and each
 * element's starting value. */
typedef struct half_vars {
    int nv;
    const char *const *names;
    const int32_t *ranks;
    const int64_t (*shapes)[3];
    double (*init)(int v, int64_t i);
} half_vars;

typedef struct half_pair {
    optim_optimizer *a, *r; /* a: half variables; r: the float32 reference */
    optim_var *va[HALF_PAIR_MAX_VARS], *vr[HALF_PAIR_MAX_VARS];
    optim_dtype dt;
    const half_vars *vars;
} half_pair;

int64_t half_vars_numel(const half_vars *vars, int v);

/* Both optimizers from json, built on vars in dt and float32; threads > 0
 * sets a's thread count. */
void half_pair_make(half_pair *p, const half_vars *vars, const char *json, optim_dtype dt,
                    int threads);
void half_pair_free(half_pair *p);

/* r's variables and weights := a's, widened to float32 (iterations too). */
void half_pair_copy_state(half_pair *p);

/* a's variables and weights == r's rounded to a's type, bit for bit; a
 * failure names json, the dtype, step k, the variable and the element. */
void half_pair_compare(half_pair *p, const char *json, int k);

/* Steps 0 .. steps - 1, each from a's state copied into r and compared
 * after; step(p, k) gives both the same gradients and returns how many of
 * a's elements it changed. Returns the total changed. */
int64_t half_pair_steps(half_pair *p, const char *json, int steps,
                        int64_t (*step)(half_pair *p, int k));

#endif
