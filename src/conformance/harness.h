/* The conformance checker's shared pieces (internal to src/conformance/):
 * the run's context, a test problem (variables of every shape in one dtype
 * with seeded gradients), snapshots of an optimizer's whole state and their
 * comparison. Each check is a file of its own (check_*.c). */
#ifndef OPTIM_CONFORMANCE_HARNESS_H
#define OPTIM_CONFORMANCE_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "optim/conformance.h"
#include "optim/optimizer_class.h"

/* Messages are cut to CF_TEXT bytes on purpose (a check's line is one line
 * of a report): GCC's truncation warnings say nothing here. */
#define CF_TEXT 512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

typedef struct cf_ctx {
    const optim_class *cls;
    char *config; /* config object with is_legacy_optimizer set (malloc'd) */
    optim_generation generation;
    uint64_t seed;
    int wrapper; /* the class overrides apply_gradients */
    int sparse; /* sparse gradients are accepted */
    int has_lr; /* an update rule with a learning_rate (not a wrapper,
                                whose inner optimizer has the learning rate) */
    optim_conformance_report_fn report;
    void *user;
    optim_conformance_reference_fn reference; /* the options' reference fields */
    void *reference_user;
    int reference_state, reference_steps;
    double rtol, atol;
    int passed, failed;
} cf_ctx;

/* Reports one check; passed is 1, 0 or -1 (skipped). expected and seen are
 * printf formats separated into two calls for readability. */
void optim__cf_report(cf_ctx *c, const char *check, int passed, const char *expected,
                      const char *seen_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Creates an optimizer of the checked class from the run's config, with the
 * keys of extra_json (a JSON object text, or NULL) set on top, under
 * class_name (NULL: the checked class), stepping on one thread. On failure
 * writes why. */
int optim__cf_create(const cf_ctx *c, const char *class_name, const char *extra_json,
                     optim_optimizer **out, char *why, size_t n);

/* The shapes every check runs on. */
/* CF_MANY: a vector of 64 element-wise chunks and a bit, for races. */
enum { CF_SCALAR, CF_VECTOR, CF_MATRIX, CF_LARGE, CF_EMPTY, CF_MANY, CF_NSHAPES };
#define CF_ROWS 16 /* rows of the matrix, for sparse gradients */
#define CF_COLS 5

typedef struct cf_problem {
    optim_dtype dtype;
    size_t n; /* variables */
    optim_var *vars[CF_NSHAPES + 1];
    void *init[CF_NSHAPES + 1]; /* initial values, to reset */
    uint64_t seed;
} cf_problem;

/* Variables of the shapes in `mask` (1 << CF_*) filled from seed. */
int optim__cf_problem_init(cf_problem *p, optim_dtype dtype, unsigned mask, uint64_t seed);
void optim__cf_problem_free(cf_problem *p);
/* Copies the current values of src's variables into p's (same layout). */
void optim__cf_problem_copy_values(cf_problem *p, const cf_problem *src);
/* Deterministic value in [-1, 1], never 0, for (seed, a, b, i). */
double optim__cf_rand(uint64_t seed, uint64_t a, uint64_t b, uint64_t i);
/* Writes element i of a buffer of dtype. */
void optim__cf_put(void *buf, optim_dtype dtype, int64_t i, double v);
double optim__cf_get(const void *buf, optim_dtype dtype, int64_t i);

/* One dense step `k` on every variable of p (gradients from p's seed and
 * k); threads 0 keeps the optimizer's setting. Returns the step's status. */
int optim__cf_step_dense(optim_optimizer *opt, cf_problem *p, int k);

/* A sparse step on variable v of p (rank >= 1) with these indices (rows
 * from the seed, k and j) as given (CF_AS_GIVEN), or the same rows summed
 * in order of appearance: into a dense gradient (CF_DENSE), or at unique
 * ascending indices (CF_SUMMED). */
enum { CF_AS_GIVEN, CF_DENSE, CF_SUMMED };
int optim__cf_step_sparse(optim_optimizer *opt, cf_problem *p, size_t v, int k, const int64_t *idx,
                          int64_t n, int form);

/* The whole state: every variable's bytes, every weight's name and bytes. */
typedef struct cf_snapshot {
    size_t n;
    char **names;
    optim_dtype *dtypes;
    int64_t *sizes;
    void **data;
} cf_snapshot;
int optim__cf_snap(cf_snapshot *s, optim_optimizer *opt, const cf_problem *p);
void optim__cf_snap_free(cf_snapshot *s);
/* 0 if a and b are equal bit for bit, else 1 and the first difference in
 * why. With tol > 0, values within tol * (|a| + |b| + 1e-3) count as equal. */
int optim__cf_snap_diff(const cf_snapshot *a, const cf_snapshot *b, double tol, char *why,
                        size_t n);

/* Registers copy (c's class with hooks replaced) once, as "<NAME><suffix>",
 * and writes that name; mine tells our registration from another class of
 * the name. Non-zero with why on failure. */
int optim__cf_register_copy(const cf_ctx *c, optim_class copy, const char *suffix,
                            int (*mine)(const optim_class *), char *name, size_t n, char *why,
                            size_t wn);
/* Registers (once) the probe class of c's class (probe.c) and writes its
 * name; non-zero with why on failure. */
#define OPTIM__CF_FAIL_VAR "conformance/fail"
int optim__cf_probe(const cf_ctx *c, char *name, size_t n, char *why, size_t wn);
/* How many times a probe's create_slots has run in this process. */
long optim__cf_probe_calls(void);
/* Registers (once) the interleaving probe of c's class (interleave.c) and
 * writes its name; non-zero with why on failure. Arming makes its next
 * kernel call of at least four pages run another call of cls's kernel, on
 * other data, from its middle; fired says whether that happened. */
int optim__cf_interleave_probe(const cf_ctx *c, char *name, size_t n, char *why, size_t wn);
void optim__cf_interleave_arm(const optim_class *cls);
int optim__cf_interleave_fired(void);

/* The checks, in the order they run. Each reports one or more lines. */
void optim__cf_check_table(cf_ctx *c);
void optim__cf_check_config(cf_ctx *c);
void optim__cf_check_update(cf_ctx *c);
void optim__cf_check_threads(cf_ctx *c);
void optim__cf_check_chunks(cf_ctx *c);
void optim__cf_check_sparse(cf_ctx *c);
void optim__cf_check_slots(cf_ctx *c);
void optim__cf_check_hypers(cf_ctx *c);
void optim__cf_check_failure(cf_ctx *c);
void optim__cf_check_reference(cf_ctx *c);

#endif
