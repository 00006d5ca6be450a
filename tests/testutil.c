#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void optim_test_assert_close(double a, double b, double rtol, double atol, const char *expr,
                             const char *file, int line)
{
    if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
        print_error("%s = %a (%.17g), expected %a (%.17g) (rtol %g, atol %g)\n", expr, a, a, b, b,
                    rtol, atol);
        _fail(file, line);
    }
}

static const char *const op_names[] = {"==", "!=", "<", "<=", ">", ">=", "== (or both NaN)"};

static int holds(int op, int lt, int eq, int gt)
{
    switch (op) {
    case OPTIM_TEST_EQ: return eq;
    case OPTIM_TEST_NE: return lt || gt;
    case OPTIM_TEST_LT: return lt;
    case OPTIM_TEST_LE: return lt || eq;
    case OPTIM_TEST_GT: return gt;
    case OPTIM_TEST_SAME: return eq;
    default: return gt || eq;
    }
}

void optim_test_cmp_f(double a, double b, int op, const char *ea, const char *eb, const char *file,
                      int line)
{
    /* NaN is unordered: only != holds (and SAME when both are NaN). */
    if (holds(op, (a < b), (a == b), (a > b)) || (op == OPTIM_TEST_NE && (isnan(a) || isnan(b))) ||
        (op == OPTIM_TEST_SAME && isnan(a) && isnan(b)))
        return;
    print_error("%s %s %s failed:\n  left  %a (%.17g)\n  right %a (%.17g)\n", ea, op_names[op], eb,
                a, a, b, b);
    _fail(file, line);
}

void optim_test_cmp_i(long long a, long long b, int op, const char *ea, const char *eb,
                      const char *file, int line)
{
    if (holds(op, (a < b), (a == b), (a > b))) return;
    print_error("%s %s %s failed:\n  left  %lld\n  right %lld\n", ea, op_names[op], eb, a, b);
    _fail(file, line);
}

const char *optim_test_msg_err_(const optim_error *err)
{
    return err ? err->msg : "(no optim_error)";
}

const char *optim_test_msg_none_(const void *none)
{
    (void)none;
    return "(the call keeps no message)";
}

static const char *status_name(int rc)
{
    switch (rc) {
#define STATUS_CASE(name, value, text) \
    case value: return "OPTIM_" #name;
        OPTIM_STATUS_LIST(STATUS_CASE)
#undef STATUS_CASE
    }
    return "not an optim status";
}

void optim_test_status_fail(int rc, int want, const char *expr, const char *msg, const char *file,
                            int line)
{
    print_error("%s returned %s (%d, %s), expected %s:\n  message: %s\n", expr, status_name(rc), rc,
                optim_strerror(rc), status_name(want), msg && *msg ? msg : "(empty)");
    _fail(file, line);
}

void optim_test_assert_nan(double x, const char *expr, const char *file, int line)
{
    if (isnan(x)) return;
    print_error("%s = %a (%.17g), expected a NaN\n", expr, x, x);
    _fail(file, line);
}

void optim_test_assert_has(const char *s, const char *needle, const char *expr, const char *file,
                           int line)
{
    if (s && strstr(s, needle)) return;
    print_error("%s does not contain \"%s\":\n  \"%s\"\n", expr, needle, s ? s : "(null)");
    _fail(file, line);
}

void optim_test_var_close(const optim_var *v, const double *want, int64_t n, double rtol,
                          double atol, const char *expr, const char *file, int line)
{
    if (!v || optim_var_numel(v) != n) {
        print_error("%s: %s, expected %lld elements\n", expr, v ? "wrong size" : "NULL",
                    (long long)n);
        _fail(file, line);
    }
    for (int64_t i = 0; i < n; i++) {
        double a = optim_var_get(v, i), b = want[i];
        if (rtol == 0 && atol == 0 ? a == b : fabs(a - b) <= atol + rtol * fabs(b)) continue;
        print_error("%s, element %lld: %a (%.17g), expected %a (%.17g) (rtol %g, atol %g)\n", expr,
                    (long long)i, a, a, b, b, rtol, atol);
        _fail(file, line);
    }
}

void optim_test_var_floats(const optim_var *v, const float *want, int64_t n, const char *expr,
                           const char *file, int line)
{
    if (!v || optim_var_dtype(v) != OPTIM_F32 || optim_var_numel(v) < n) {
        print_error("%s: not an F32 variable of at least %lld elements\n", expr, (long long)n);
        _fail(file, line);
    }
    const float *got = optim_var_data((optim_var *)v);
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
        print_error("%s[%lld] = %a (%.9g), expected %a (%.9g) bit for bit\n", expr, (long long)i,
                    (double)got[i], (double)got[i], (double)want[i], (double)want[i]);
        _fail(file, line);
    }
}

void optim_test_vars_bitwise(const optim_var *a, const optim_var *b, const char *ea, const char *eb,
                             const char *file, int line)
{
    if (!a || !b || optim_var_numel(a) != optim_var_numel(b) ||
        optim_var_dtype(a) != optim_var_dtype(b)) {
        print_error("%s and %s: NULL, or different sizes or dtypes\n", ea, eb);
        _fail(file, line);
    }
    size_t es = optim_dtype_size(optim_var_dtype(a));
    const char *pa = optim_var_data((optim_var *)a), *pb = optim_var_data((optim_var *)b);
    for (int64_t i = 0; i < optim_var_numel(a); i++) {
        if (memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es) == 0) continue;
        double x = optim_var_get(a, i), y = optim_var_get(b, i);
        print_error("%s[%lld] = %a (%.17g) but %s[%lld] = %a (%.17g) (bitwise)\n", ea, (long long)i,
                    x, x, eb, (long long)i, y, y);
        _fail(file, line);
    }
}

static char tmp_dir[256];
static pid_t tmp_owner;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the test's temporary directory at exit (in the process that made
 * it, not in forked children). */
static void remove_tmp_dir(void)
{
    if (tmp_dir[0] && getpid() == tmp_owner) nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The per-process temporary directory, made on first use. */
static const char *tmp_dir_path(void)
{
    if (!tmp_dir[0]) {
        /* A new directory every run (mkdtemp), so that nothing a previous
         * process left behind, even under a reused pid, is in the way. */
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/optim-test-XXXXXX");
        if (!mkdtemp(tmp_dir)) {
            print_error("cannot create a temporary directory under /tmp\n");
            fail();
        }
        tmp_owner = getpid();
        atexit(remove_tmp_dir);
    }
    return tmp_dir;
}

const char *optim_test_tmpfile(const char *name)
{
    static char bufs[8][512];
    static int slot;
    char *b = bufs[slot++ % 8];
    snprintf(b, 512, "%s/%s", tmp_dir_path(), name);
    return b;
}

int optim_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

void optim_test_write_st(const char *path, const char *const *names, const optim_tensor *t, int n)
{
    optim_st_writer *wr;
    optim_error err;
    assert_ok(optim_st_writer_create(&wr, &err), &err);
    for (int i = 0; i < n; i++) assert_ok(optim_st_writer_add(wr, names[i], &t[i], &err), &err);
    assert_ok(optim_st_writer_save(wr, path, &err), &err);
    optim_st_writer_destroy(wr);
}

/* In the child: fd to path (created or truncated; NULL leaves it). */
static int redirect(int fd, const char *path)
{
    if (!path) return 0;
    int to = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (to < 0 || dup2(to, fd) < 0) return -1;
    return close(to);
}

/* Starts argv with stdout to out and stderr to err (NULL: inherited). */
static int start(char *const *argv, const char *out, const char *err)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        print_error("fork for %s: %s\n", argv[0], strerror(errno));
        fail();
    }
    if (pid == 0) {
        if (redirect(1, out) || redirect(2, err)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    return (int)pid;
}

int optim_test_start(char *const *argv, int quiet)
{
    return start(argv, quiet ? "/dev/null" : NULL, quiet ? "/dev/null" : NULL);
}

int optim_test_wait(int pid, int block)
{
    int st = 0;
    pid_t got;
    do got = waitpid((pid_t)pid, &st, block ? 0 : WNOHANG);
    while (got < 0 && errno == EINTR);
    if (got == 0) return -1;
    if (got != (pid_t)pid) {
        print_error("waitpid(%d): %s\n", pid, strerror(errno));
        fail();
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int optim_test_exec(char *const *argv, int quiet)
{
    return optim_test_wait(optim_test_start(argv, quiet), 1);
}

/* Reads path into buf (cap bytes, NUL-terminated); returns the file's size. */
static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    struct stat st;
    size_t len = f && fstat(fileno(f), &st) == 0 ? (size_t)st.st_size : n;
    if (f) fclose(f);
    return len;
}

int optim_test_capture(char *const *argv, optim_test_proc *r)
{
    char out[512], err[512]; /* not optim_test_tmpfile's slots: the caller's paths stay */
    snprintf(out, sizeof out, "%s/.proc-stdout", tmp_dir_path());
    snprintf(err, sizeof err, "%s/.proc-stderr", tmp_dir_path());
    r->status = optim_test_wait(start(argv, out, err), 1);
    r->out_len = slurp(out, r->out, sizeof r->out);
    r->err_len = slurp(err, r->err, sizeof r->err);
    remove(out);
    remove(err);
    return r->status;
}

optim_optimizer *optim_test_make(const char *json)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc) print_error("optim_test_make(%s):\n", json);
    assert_ok(rc, &err);
    return opt;
}

optim_schedule *optim_test_schedule(const char *json)
{
    optim_schedule *s = NULL;
    optim_error err;
    int rc = optim_schedule_from_json(&s, json, &err);
    if (rc) print_error("optim_test_schedule(%s):\n", json);
    assert_ok(rc, &err);
    return s;
}

char *optim_test_schedule_text(const char *json)
{
    optim_schedule *s = optim_test_schedule(json);
    char *text = optim_schedule_serialize(s);
    assert_non_null(text);
    optim_schedule_destroy(s);
    return text;
}

void optim_test_fill(void *buf, optim_dtype dt, const double *x, int64_t n)
{
    if (dt == OPTIM_F64) {
        if (n > 0) memcpy(buf, x, (size_t)n * sizeof *x); /* x may be NULL when n is 0 */
        return;
    }
    float *f = dt == OPTIM_F32 ? buf : malloc((size_t)(n ? n : 1) * sizeof *f);
    assert_non_null(f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)x[i];
    if (dt == OPTIM_F32) return;
    assert_ok(optim_convert(buf, dt, f, OPTIM_F32, n), NULL); /* F16, BF16: to nearest */
    free(f);
}

optim_var *optim_test_var(const char *name, optim_dtype dt, int32_t rank, const int64_t *shape,
                          const double *init)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    assert_non_null(buf);
    optim_test_fill(buf, dt, init, n);
    optim_var *v;
    optim_error err;
    int rc = optim_var_create(&v, name, dt, rank, shape, buf, &err);
    free(buf);
    assert_ok(rc, &err);
    return v;
}

static struct CMUnitTest *registered;
static int *registered_line;
static size_t nregistered, registered_cap;

void optim_test_register(struct CMUnitTest t, int line)
{
    if (nregistered == registered_cap) {
        registered_cap = registered_cap ? 2 * registered_cap : 64;
        registered = realloc(registered, registered_cap * sizeof *registered);
        registered_line = realloc(registered_line, registered_cap * sizeof *registered_line);
        if (!registered || !registered_line) abort(); /* before main: no test to fail */
    }
    registered[nregistered] = t;
    registered_line[nregistered++] = line;
}

void optim_test_add(struct CMUnitTest t) { optim_test_register(t, INT_MAX); }

int optim_test_run_group(CMFixtureFunction setup, CMFixtureFunction teardown)
{
    for (size_t i = 1; i < nregistered; i++) /* stable insertion sort by line */
        for (size_t j = i; j > 0 && registered_line[j - 1] > registered_line[j]; j--) {
            struct CMUnitTest t = registered[j];
            int l = registered_line[j];
            registered[j] = registered[j - 1], registered_line[j] = registered_line[j - 1];
            registered[j - 1] = t, registered_line[j - 1] = l;
        }
    int failed = _cmocka_run_group_tests("tests", registered, nregistered, setup, teardown);
    free(registered);
    free(registered_line);
    registered = NULL, registered_line = NULL, nregistered = registered_cap = 0;
    return failed;
}

int optim_test_run(void) { return optim_test_run_group(NULL, NULL); }

void optim_test_free_(optim_optimizer *opt, optim_var **vars)
{
    optim_destroy(opt);
    for (int i = 0; vars[i]; i++) optim_var_destroy(vars[i]);
}

int optim_test_levels(const void *const cand[3], const void **out)
{
    const optim_isa_level lv[] = {OPTIM_ISA_SSE2, OPTIM_ISA_AVX2, OPTIM_ISA_AVX512};
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (cand[i] && optim_isa_supported(lv[i])) out[n++] = cand[i];
        else
            printf("skipped: level %s (%s)\n", optim_isa_name(lv[i]),
                   cand[i] ? "this CPU lacks it" : "not in this build");
    return n;
}

double optim_test_uniform(uint32_t *state, double lo, double hi)
{
    uint32_t x = *state;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    *state = x;
    return (double)x / 4294967296.0 * (hi - lo) + lo;
}
