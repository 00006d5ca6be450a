/* --data naming a file (tools/job.h): .npz (a lone .npy is refused: it
 * holds one array, the job needs x and y), safetensors and CSV, told apart
 * by their first bytes (CSV: by the name .csv or .txt). x becomes float32
 * (uint8 scaled by 1/255, as the IDX images; every other type as it is),
 * y int32 class labels (integers, or floats that are whole numbers). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "job.h"

typedef struct source {
    const char *path;
    optim_npy *npy;
    optim_st_file *st;
    optim_csv *csv;
} source;

static void source_free(source *s)
{
    optim_npy_free(s->npy);
    optim_st_free(s->st);
    optim_csv_free(s->csv);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcasecmp(s + n - k, tail) == 0;
}

static int open_source(const char *cmd, const char *opt, const char *path, source *s)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    unsigned char head[9] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return optim_tool_fail(cmd, "%s '%s': cannot open it", opt, path);
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    optim_error err;
    int rc = 0;
    if (got >= 6 && memcmp(head, "\x93NUMPY", 6) == 0)
        return optim_tool_fail(cmd,
                               "%s '%s': a .npy file holds one array; the job needs x_train and "
                               "y_train: write an .npz (np.savez(path, x_train=x, y_train=y))",
                               opt, path);
    if (got >= 4 && head[0] == 'P' && head[1] == 'K') rc = optim_npy_read(path, &s->npy, &err);
    else if (got == 9 && head[8] == '{') rc = optim_st_read(path, &s->st, &err);
    else if (ends_with(path, ".csv") || ends_with(path, ".txt"))
        rc = optim_csv_read(path, &s->csv, &err);
    else
        return optim_tool_fail(cmd,
                               "%s '%s': not an .npz, safetensors or .csv file (nor a directory "
                               "of IDX files)",
                               opt, path);
    return rc ? optim_tool_fail(cmd, "%s: %s", opt, err.msg) : 0;
}

static const optim_npy_type ST_TYPES[] = {
    [OPTIM_F32] = OPTIM_NPY_F32, [OPTIM_F64] = OPTIM_NPY_F64, [OPTIM_I32] = OPTIM_NPY_I32,
    [OPTIM_I64] = OPTIM_NPY_I64, [OPTIM_F16] = OPTIM_NPY_F16, [OPTIM_BF16] = OPTIM_NPY_BF16};

/* The array `name` of s (an .npz or safetensors) as *a; 0 if absent. */
static int find(const source *s, const char *name, optim_npy_array *a)
{
    optim_tensor t;
    if (s->npy) {
        const optim_npy_array *p = optim_npy_find(s->npy, name);
        return p ? (*a = *p, 1) : 0;
    }
    if (optim_st_get(s->st, name, &t) != OPTIM_OK) return 0;
    *a = (optim_npy_array){name, ST_TYPES[t.dtype], t.rank, {0}, 1, t.data};
    for (int32_t i = 0; i < t.rank; i++) a->shape[i] = t.shape[i], a->numel *= t.shape[i];
    return 1;
}

static void shape_text(char *out, size_t n, int32_t rank, const int64_t *shape)
{
    size_t k = (size_t)snprintf(out, n, "[");
    for (int32_t i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(out + k, n - k, "]");
}

/* x and y's shapes: x [n, ...] with examples, y [n] or [n, 1]. */
static int check_shapes(const char *cmd, const char *path, const optim_npy_array *x,
                        const optim_npy_array *y)
{
    char xs[160], ys[160];
    shape_text(xs, sizeof xs, x->rank, x->shape);
    shape_text(ys, sizeof ys, y->rank, y->shape);
    if (x->rank < 1 || x->shape[0] == 0 || x->numel == 0)
        return optim_tool_fail(cmd, "%s: %s has shape %s, expected [examples, ...] with some", path,
                               x->name, xs);
    if (y->rank < 1 || y->rank > 2 || (y->rank == 2 && y->shape[1] != 1))
        return optim_tool_fail(cmd, "%s: %s has shape %s, expected class labels [%lld]", path,
                               y->name, ys, (long long)x->shape[0]);
    if (y->shape[0] != x->shape[0])
        return optim_tool_fail(cmd, "%s: %s has %lld rows (shape %s), %s has %lld (shape %s)", path,
                               x->name, (long long)x->shape[0], xs, y->name, (long long)y->shape[0],
                               ys);
    return 0;
}

/* The split of x and y (limited to `limit` examples, 0: all). */
static int make_split(const char *cmd, const char *path, const optim_npy_array *x,
                      const optim_npy_array *y, int64_t limit, job_split *s)
{
    if (check_shapes(cmd, path, x, y)) return 1;
    int64_t n = x->shape[0];
    float *xs = optim_job_images_alloc(x->numel);
    int32_t *ys = malloc((size_t)n * sizeof *ys + 1);
    optim_error err;
    int rc = !xs || !ys;
    if (rc) optim_tool_fail(cmd, "%s: out of memory for %s", path, x->name);
    else if (optim_npy_convert(x, OPTIM_F32, x->type == OPTIM_NPY_U8 ? 1.0 / 255.0 : 1.0, xs,
                               &err) ||
             optim_npy_convert(y, OPTIM_I32, 1, ys, &err))
        rc = optim_tool_fail(cmd, "%s: %s", path, err.msg);
    for (int64_t i = 0; i < n && !rc; i++)
        if (ys[i] < 0 || ys[i] >= JOB_CLASSES)
            rc = optim_tool_fail(cmd, "%s: %s[%lld] is %d, expected a class from 0 to %d", path,
                                 y->name, (long long)i, (int)ys[i], JOB_CLASSES - 1);
    if (rc) {
        free(xs), free(ys);
        return 1;
    }
    *s = (job_split){xs, ys, limit && limit < n ? limit : n, x->numel / n, x->rank - 1, {0}};
    memcpy(s->shape, x->shape + 1, (size_t)s->rank * sizeof *s->shape);
    return 0;
}

/* The split named by prefix (x_PREFIX, y_PREFIX) of an .npz or safetensors;
 * *absent when neither array is there (no message). */
static int arrays_split(const char *cmd, const source *src, const char *prefix, int64_t limit,
                        job_split *s, int *absent)
{
    char xn[16], yn[16];
    snprintf(xn, sizeof xn, "x_%s", prefix);
    snprintf(yn, sizeof yn, "y_%s", prefix);
    optim_npy_array x, y;
    int hx = find(src, xn, &x), hy = find(src, yn, &y);
    *absent = !hx && !hy;
    if (*absent) return 1;
    if (!hx || !hy)
        return optim_tool_fail(cmd, "%s: has %s but no %s", src->path, hx ? xn : yn, hx ? yn : xn);
    return make_split(cmd, src->path, &x, &y, limit, s);
}

/* The label column of t: --label-column (a header name, or a 0-based index,
 * negative from the end), else a column named label, else the last. */
static int label_column(const char *cmd, const char *path, const optim_csv *t, const char *want,
                        int64_t *col)
{
    int64_t cols = optim_csv_cols(t);
    *col = cols - 1;
    for (int64_t j = 0; j < cols; j++) {
        const char *name = optim_csv_name(t, j);
        if (name && strcmp(name, want ? want : "label") == 0) return *col = j, 0;
    }
    if (!want) return 0;
    char *end;
    long long k = strtoll(want, &end, 10);
    if (end == want || *end || k >= cols || k < -cols)
        return optim_tool_fail(cmd,
                               "--label-column '%s': %s has no column of that name, and %lld "
                               "columns (indices 0 to %lld, or -1 to -%lld)",
                               want, path, (long long)cols, (long long)cols - 1, (long long)cols);
    *col = k < 0 ? cols + k : k;
    return 0;
}

/* A CSV file as one split: every column but the label one is x. */
static int csv_split(const char *cmd, const source *src, const char *want, int64_t limit,
                     job_split *s)
{
    const optim_csv *t = src->csv;
    int64_t rows = optim_csv_rows(t), cols = optim_csv_cols(t), col;
    if (label_column(cmd, src->path, t, want, &col)) return 1;
    if (cols < 2)
        return optim_tool_fail(cmd, "%s: one column: no features besides the labels", src->path);
    double *xv = malloc((size_t)(rows * (cols - 1)) * sizeof *xv),
           *yv = malloc((size_t)rows * sizeof *yv);
    const double *v = optim_csv_values(t);
    int rc = !xv || !yv ? optim_tool_fail(cmd, "%s: out of memory", src->path) : 0;
    for (int64_t i = 0; i < rows && !rc; i++) {
        for (int64_t j = 0, k = 0; j < cols; j++)
            if (j != col) xv[i * (cols - 1) + k++] = v[i * cols + j];
        yv[i] = v[i * cols + col];
    }
    optim_npy_array x = {"features", OPTIM_NPY_F64, 2, {rows, cols - 1}, rows * (cols - 1), xv};
    optim_npy_array y = {"labels", OPTIM_NPY_F64, 1, {rows}, rows, yv};
    if (!rc) rc = make_split(cmd, src->path, &x, &y, limit, s);
    free(xv), free(yv);
    return rc;
}

/* The test split: --test-data's (its x_test/y_test, else x_train/y_train, a CSV whole), else
 * the --data file's x_test/y_test. */
static int test_split(const char *cmd, const job_config *c, const source *data, job_split *s)
{
    source t;
    int absent = 0, rc;
    if (!c->test_data) {
        rc = data->csv ? 1 : arrays_split(cmd, data, "test", c->limit, s, &absent);
        if (rc && (absent || data->csv))
            optim_tool_fail(
                cmd, "--data %s has no test set (x_test, y_test): give --test-data PATH", c->data);
        return rc;
    }
    if (open_source(cmd, "--test-data", c->test_data, &t)) return 1;
    if (t.csv) rc = csv_split(cmd, &t, c->label_column, c->limit, s);
    else if ((rc = arrays_split(cmd, &t, "test", c->limit, s, &absent)) && absent &&
             (rc = arrays_split(cmd, &t, "train", c->limit, s, &absent)) && absent)
        optim_tool_fail(cmd, "--test-data %s: has neither x_test/y_test nor x_train/y_train",
                        c->test_data);
    source_free(&t);
    return rc;
}

static int same_example_shape(const char *cmd, const job_data *d)
{
    char a[160], b[160];
    shape_text(a, sizeof a, d->train.rank, d->train.shape);
    shape_text(b, sizeof b, d->test.rank, d->test.shape);
    if (strcmp(a, b) == 0) return 0;
    return optim_tool_fail(cmd, "the test examples have shape %s, the training examples %s", b, a);
}

int optim_job_load_file(const char *cmd, const job_config *c, job_data *d)
{
    source src;
    int absent = 0, rc;
    if (open_source(cmd, "--data", c->data, &src)) return 1;
    if (src.csv) rc = csv_split(cmd, &src, c->label_column, c->limit, &d->train);
    else if (c->label_column)
        rc = optim_tool_fail(cmd, "--label-column is for CSV files; %s is not one", c->data);
    else if ((rc = arrays_split(cmd, &src, "train", c->limit, &d->train, &absent)) && absent)
        optim_tool_fail(cmd, "--data %s: no x_train and y_train arrays", c->data);
    if (!rc) rc = test_split(cmd, c, &src, &d->test) || same_example_shape(cmd, d);
    source_free(&src);
    if (rc) optim_job_data_free(d);
    return rc;
}
