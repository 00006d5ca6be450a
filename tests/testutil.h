/* Shared test helpers: cmocka plus small assertion helpers for numbers. */
#ifndef OPTIM_TESTUTIL_H
#define OPTIM_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "optim/optim.h"

/* An optimizer from JSON; fails the test (printing the JSON and the error)
 * if the config is refused. */
optim_optimizer *optim_test_make(const char *json);

/* A schedule from JSON, likewise; and optim_schedule_serialize of one
 * (free with optim_free). */
optim_schedule *optim_test_schedule(const char *json);
char *optim_test_schedule_text(const char *json);

/* x (n doubles) into buf as dtype dt: F32, F64, or F16/BF16 rounded to
 * nearest through float32. buf holds n * optim_dtype_size(dt) bytes. */
void optim_test_fill(void *buf, optim_dtype dt, const double *x, int64_t n);

/* A variable of dtype dt and the given shape holding init (doubles, rounded
 * to float for F32); fails the test on error. */
optim_var *optim_test_var(const char *name, optim_dtype dt, int32_t rank, const int64_t *shape,
                          const double *init);

/* Fails the test unless |a - b| <= atol + rtol * |b| (NaN never passes). */
#define assert_close(a, b, rtol, atol) \
    optim_test_assert_close((double)(a), (double)(b), (rtol), (atol), #a, __FILE__, __LINE__)
void optim_test_assert_close(double a, double b, double rtol, double atol, const char *expr,
                             const char *file, int line);

/* Comparisons that print both sides on failure: integers in decimal,
 * floating-point values with %a and as 17-digit decimals (so a one-ulp
 * difference shows). The operands are evaluated once; the comparison is done
 * in double when either side is floating-point, in long long otherwise. */
enum {
    OPTIM_TEST_EQ,
    OPTIM_TEST_NE,
    OPTIM_TEST_LT,
    OPTIM_TEST_LE,
    OPTIM_TEST_GT,
    OPTIM_TEST_GE,
    OPTIM_TEST_SAME
};
/* clang-format off */
#define assert_cmp_(a, op, b)                                                                  \
    _Generic((a) + (b), float: optim_test_cmp_f, double: optim_test_cmp_f,                     \
             long double: optim_test_cmp_f, default: optim_test_cmp_i)((a), (b), op, #a, #b,   \
                                                                       __FILE__, __LINE__)
/* clang-format on */
#define assert_eq(a, b) assert_cmp_(a, OPTIM_TEST_EQ, b)
#define assert_ne(a, b) assert_cmp_(a, OPTIM_TEST_NE, b)
#define assert_lt(a, b) assert_cmp_(a, OPTIM_TEST_LT, b)
#define assert_le(a, b) assert_cmp_(a, OPTIM_TEST_LE, b)
#define assert_gt(a, b) assert_cmp_(a, OPTIM_TEST_GT, b)
#define assert_ge(a, b) assert_cmp_(a, OPTIM_TEST_GE, b)
/* a == b, or both NaN. */
#define assert_same(a, b) assert_cmp_(a, OPTIM_TEST_SAME, b)
void optim_test_cmp_f(double a, double b, int op, const char *ea, const char *eb, const char *file,
                      int line);
void optim_test_cmp_i(long long a, long long b, int op, const char *ea, const char *eb,
                      const char *file, int line);

/* assert_ok(call, holder): fails unless call returns OPTIM_OK (0), and then
 * prints the call, the status's name and the library's message, read from
 * holder after the call: an optim_error *, or the object whose errmsg keeps
 * it (optimizer, variable, model, layer, tape, replica group), or NULL where
 * the call keeps no message. assert_status(call, code, holder) is the same
 * for an expected failure code. */
/* clang-format off */
#define optim_test_msg_(h)                                                             \
    _Generic((h), optim_error *: optim_test_msg_err_,                                  \
             const optim_error *: optim_test_msg_err_,                                 \
             optim_optimizer *: optim_errmsg, const optim_optimizer *: optim_errmsg,   \
             optim_var *: optim_var_errmsg, const optim_var *: optim_var_errmsg,       \
             optim_model *: optim_model_errmsg, const optim_model *: optim_model_errmsg, \
             optim_layer *: optim_layer_errmsg, const optim_layer *: optim_layer_errmsg, \
             optim_tape *: optim_tape_errmsg, const optim_tape *: optim_tape_errmsg,   \
             optim_group *: optim_group_errmsg, const optim_group *: optim_group_errmsg, \
             default: optim_test_msg_none_)(h)
/* clang-format on */
#define assert_status(call, code, holder)                                                  \
    do {                                                                                   \
        int optim_test_rc_ = (call);                                                       \
        if (optim_test_rc_ != (code))                                                      \
            optim_test_status_fail(optim_test_rc_, (code), #call, optim_test_msg_(holder), \
                                   __FILE__, __LINE__);                                    \
    } while (0)
#define assert_ok(call, holder) assert_status(call, OPTIM_OK, holder)
const char *optim_test_msg_err_(const optim_error *err);
const char *optim_test_msg_none_(const void *none);
void optim_test_status_fail(int rc, int want, const char *expr, const char *msg, const char *file,
                            int line);

/* Fails unless x is a NaN; prints x. */
#define assert_nan(x) optim_test_assert_nan((double)(x), #x, __FILE__, __LINE__)
void optim_test_assert_nan(double x, const char *expr, const char *file, int line);

/* Fails unless needle occurs in s (NULL never passes); prints both. */
#define assert_contains(s, needle) optim_test_assert_has((s), (needle), #s, __FILE__, __LINE__)
void optim_test_assert_has(const char *s, const char *needle, const char *expr, const char *file,
                           int line);

/* Element-wise checks of a variable (any dtype, read through optim_var_get)
 * that print the first failing index and both values:
 * assert_var_close: every element within rtol/atol of want[i];
 * assert_var_eq: every element == want[i] exactly;
 * assert_var_floats: the first n elements of F32 storage equal bit for bit to want;
 * assert_vars_bitwise: a and b (non-NULL) of the same size with equal bytes. */
#define assert_var_close(v, want, n, rtol, atol) \
    optim_test_var_close((v), (want), (n), (rtol), (atol), #v, __FILE__, __LINE__)
#define assert_var_eq(v, want, n) \
    optim_test_var_close((v), (want), (n), 0, 0, #v, __FILE__, __LINE__)
#define assert_var_floats(v, want, n) \
    optim_test_var_floats((v), (want), (n), #v, __FILE__, __LINE__)
#define assert_vars_bitwise(a, b) optim_test_vars_bitwise((a), (b), #a, #b, __FILE__, __LINE__)
void optim_test_var_close(const optim_var *v, const double *want, int64_t n, double rtol,
                          double atol, const char *expr, const char *file, int line);
void optim_test_var_floats(const optim_var *v, const float *want, int64_t n, const char *expr,
                           const char *file, int line);
void optim_test_vars_bitwise(const optim_var *a, const optim_var *b, const char *ea, const char *eb,
                             const char *file, int line);

/* Registration: the only way a test file lists its cases.
 *   OPTIM_TEST(name) { body }   defines the case and registers it;
 *   OPTIM_TEST_WITH(name, setup, teardown) { body }   the same with cmocka's
 *     per-case setup and teardown (int f(void **state); either may be NULL;
 *     declared above the case);
 *   optim_test_add(case)   adds a case built at run time (a table row's name,
 *     function, setup, teardown and initial state), called in main before
 *     optim_test_run; such cases run after the OPTIM_TEST ones, in the order
 *     added;
 *   int main(void) { return optim_test_run(); }   runs them: the OPTIM_TEST
 *     cases in the order of their lines, then the added ones;
 *     optim_test_run_group(setup, teardown) is the same with cmocka's group
 *     setup and teardown. Code main ran before the cmocka list (registering
 *     a class, reading a table) stays in main, before the run.
 * The body's parameter is `void **state`.
 *
 * Converting a file that lists its cases for cmocka (the recipe; steps 1-4
 * are mechanical, 5 is by hand):
 *   1. Each `cmocka_unit_test(f)` in main: the definition
 *      `static void f(void **s)` becomes `OPTIM_TEST(f)`;
 *      `cmocka_unit_test_setup_teardown(f, su, td)` (or _setup/_teardown)
 *      becomes `OPTIM_TEST_WITH(f, su, td)` (NULL for the one missing).
 *   2. In its body `(void)s;` goes (the build has -Wno-unused-parameter);
 *      any other use of the parameter is renamed to `state`. A prototype of
 *      f above goes too (the macro declares it).
 *   3. The list and `return cmocka_run_group_tests(tests, gs, gt);` become
 *      `return optim_test_run();` (or `optim_test_run_group(gs, gt)` when
 *      gs or gt is not NULL); statements before the list stay.
 *   4. The cases now run in the order of their lines: where the list's order
 *      differs and a case depends on one before it, move its definition.
 *   5. A list built in a loop (one case per table row, via
 *      `(struct CMUnitTest){...}`) becomes the same loop calling
 *      optim_test_add(...) in main, then `return optim_test_run();`;
 *      fixed cases in that list become OPTIM_TEST.
 *   6. clang-format -i, build, and compare the case count in ctest's
 *      "[  PASSED  ] N test(s)" line before and after. */
#define OPTIM_TEST_WITH(name, setup, teardown)                                                  \
    static void name(void **state);                                                             \
    __attribute__((constructor)) static void name##_reg(void)                                   \
    {                                                                                           \
        optim_test_register((struct CMUnitTest){#name, name, setup, teardown, NULL}, __LINE__); \
    }                                                                                           \
    static void name(void **state)
#define OPTIM_TEST(name) OPTIM_TEST_WITH(name, NULL, NULL)
void optim_test_register(struct CMUnitTest t, int line);
void optim_test_add(struct CMUnitTest t);
int optim_test_run(void);
int optim_test_run_group(CMFixtureFunction setup, CMFixtureFunction teardown);

/* Loops over F32 then F64 with dt declared. */
#define OPTIM_FOR_DTYPES(dt) \
    for (optim_dtype dt = OPTIM_F32; dt; dt = dt == OPTIM_F32 ? OPTIM_F64 : OPTIM_DTYPE_INVALID)

/* Destroys an optimizer (NULL allowed) and the variables after it. */
#define optim_test_free(opt, ...) optim_test_free_((opt), (optim_var *[]){__VA_ARGS__, NULL})
void optim_test_free_(optim_optimizer *opt, optim_var **vars);

/* A fresh path under a per-process temporary directory (static buffer per call slot). */
const char *optim_test_tmpfile(const char *name);

/* Writes len bytes to path; returns 0 on success. */
int optim_test_write_file(const char *path, const void *data, size_t len);

/* Writes n tensors named names[i] to a safetensors file at path (fails the
 * test on error). */
void optim_test_write_st(const char *path, const char *const *names, const optim_tensor *t, int n);

/* The one process runner. A command is argv: argv[0] a path, NULL-terminated.
 * Its status: the exit status, or 1000 + the signal's number if a signal
 * ended it. Each fails the test if it cannot fork.
 * optim_test_exec: runs it (with quiet, stdout and stderr to /dev/null;
 *   otherwise inherited) and returns its status.
 * optim_test_capture: runs it with stdout and stderr captured in *r (so a
 *   test can assert on the command's message) and returns its status.
 * optim_test_start: starts it (quiet as above) without waiting and returns
 *   its pid; optim_test_wait(pid, 1) waits and returns its status,
 *   optim_test_wait(pid, 0) returns -1 at once while it still runs. */
typedef struct optim_test_proc {
    int status;
    size_t out_len, err_len; /* bytes written, possibly more than kept */
    char out[65536], err[8192]; /* what was written, NUL-terminated, truncated to fit */
} optim_test_proc;
int optim_test_exec(char *const *argv, int quiet);
int optim_test_capture(char *const *argv, optim_test_proc *r);
int optim_test_start(char *const *argv, int quiet);
int optim_test_wait(int pid, int block);

/* The per-level kernel tables a level test compares (src/core/isa.h):
 * cand[0..2] the baseline's, avx2's and avx512's (weak references: NULL
 * where the build lacks one); those present and supported by this CPU go
 * into out in that order, and a "skipped: level ..." line is printed for
 * each other. Returns how many went into out. */
int optim_test_levels(const void *const cand[3], const void **out);

/* The next value of a xorshift32 sequence (*state, not 0) scaled to
 * [lo, hi): level tests' inputs, the same on every machine. */
double optim_test_uniform(uint32_t *state, double lo, double hi);

#endif
