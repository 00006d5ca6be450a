/* Fashion-MNIST from IDX files, gzip'd or not, limited and split for the
 * main job (tools/job.h); --data files are dataset_files.c's. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "job.h"

#define INSTALL_HINT "apt-get install dataset-fashion-mnist"

static void split_free(job_split *s)
{
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

/* DIR/NAME.gz if it exists, else DIR/NAME; 1 after a message if neither. */
static int find_file(const char *cmd, const char *dir, const char *name, char *path, size_t n)
{
    struct stat st;
    snprintf(path, n, "%s/%s.gz", dir, name);
    if (stat(path, &st) == 0) return 0;
    snprintf(path, n, "%s/%s", dir, name);
    if (stat(path, &st) == 0) return 0;
    snprintf(path, n, "%s/%s.gz", dir, name);
    if (strcmp(dir, JOB_DEFAULT_DATA) == 0)
        return optim_tool_fail(
            cmd, "Fashion-MNIST is not installed (no %s); install it with: " INSTALL_HINT, path);
    return optim_tool_fail(
        cmd,
        "--data %s: %s/%s.gz: No such file or directory (nor uncompressed); Fashion-MNIST "
        "comes with: " INSTALL_HINT,
        dir, dir, name);
}

static int check_idx(const char *cmd, const char *path, const optim_idx *f, int32_t rank)
{
    if (optim_idx_type_of(f) != OPTIM_IDX_U8 || optim_idx_rank(f) != rank)
        return optim_tool_fail(cmd, "%s: expected uint8 %s, got %s of rank %d", path,
                               rank == 3 ? "images [n, rows, cols]" : "labels [n]",
                               optim_idx_type_name(optim_idx_type_of(f)), (int)optim_idx_rank(f));
    return 0;
}

/* Memory for the images, on huge pages where Linux gives them (MADV_HUGEPAGE;
 * the default transparent_hugepage setting is "madvise"): a training step
 * gathers its batch from rows scattered over the whole set (188 MB), and
 * on 4 KiB pages nearly every row is a TLB miss (the gather took 122 us on
 * huge pages against 144-150 us, docs/performance.md). Free with free(). */
static void *images_alloc(size_t bytes)
{
#if defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (bytes >= huge) {
        size_t whole = (bytes + huge - 1) / huge * huge;
        void *p = aligned_alloc(huge, whole);
        if (p) (void)madvise(p, whole, MADV_HUGEPAGE); /* advice: pages stay small if refused */
        return p;
    }
#endif
    return malloc(bytes);
}

float *optim_job_images_alloc(int64_t n) { return images_alloc((size_t)n * sizeof(float) + 1); }

/* The first `limit` (0: all) images and labels of PREFIX, as floats in
 * [0, 1] and int32 labels. */
static int convert(const char *cmd, const char *lpath, const optim_idx *im, const optim_idx *lb,
                   int64_t limit, job_split *s)
{
    int64_t n = optim_idx_shape(im)[0], features = optim_idx_shape(im)[1] * optim_idx_shape(im)[2];
    float *x = images_alloc((size_t)(n * features) * sizeof *x + 1);
    int32_t *y = malloc((size_t)n * sizeof *y + 1);
    optim_error err;
    if (!x || !y || optim_idx_convert(im, OPTIM_F32, 1.0 / 255.0, x, &err) ||
        optim_idx_convert(lb, OPTIM_I32, 1, y, &err)) {
        int oom = !x || !y;
        free(x), free(y);
        return optim_tool_fail(cmd, "%s", oom ? "out of memory for the dataset" : err.msg);
    }
    for (int64_t i = 0; i < n; i++)
        if (y[i] >= JOB_CLASSES) {
            int label = (int)y[i];
            free(x), free(y);
            return optim_tool_fail(cmd, "%s: label %d at index %lld, expected 0 to %d", lpath,
                                   label, (long long)i, JOB_CLASSES - 1);
        }
    *s = (job_split){x, y, limit && limit < n ? limit : n, features, 2, {0}};
    memcpy(s->shape, optim_idx_shape(im) + 1, 2 * sizeof *s->shape);
    return 0;
}

static int load_split(const char *cmd, const char *dir, const char *prefix, int64_t limit,
                      job_split *s)
{
    char ipath[4096], lpath[4096], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    if (find_file(cmd, dir, name, ipath, sizeof ipath)) return 1;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    if (find_file(cmd, dir, name, lpath, sizeof lpath)) return 1;
    optim_idx *im = NULL, *lb = NULL;
    optim_error err;
    int rc = 1;
    if (optim_idx_read(ipath, &im, &err) || optim_idx_read(lpath, &lb, &err))
        optim_tool_fail(cmd, "%s", err.msg);
    else if (check_idx(cmd, ipath, im, 3) || check_idx(cmd, lpath, lb, 1)) rc = 1;
    else if (optim_idx_shape(lb)[0] != optim_idx_shape(im)[0])
        optim_tool_fail(cmd, "%s has %lld labels for %lld images in %s", lpath,
                        (long long)optim_idx_shape(lb)[0], (long long)optim_idx_shape(im)[0],
                        ipath);
    else if (optim_idx_shape(im)[0] == 0 || optim_idx_shape(im)[1] * optim_idx_shape(im)[2] == 0)
        optim_tool_fail(cmd, "%s: no images", ipath);
    else rc = convert(cmd, lpath, im, lb, limit, s);
    optim_idx_free(im);
    optim_idx_free(lb);
    return rc;
}

int optim_job_load(const char *cmd, const job_config *c, job_data *d)
{
    memset(d, 0, sizeof *d);
    struct stat st;
    if (stat(c->data, &st) != 0) {
        if (strcmp(c->data, JOB_DEFAULT_DATA) == 0)
            return optim_tool_fail(
                cmd, "Fashion-MNIST is not installed (no %s); install it with: " INSTALL_HINT,
                c->data);
        return optim_tool_fail(cmd, "--data '%s': %s", c->data, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        if (optim_job_load_file(cmd, c, d)) return 1;
    } else if (c->test_data || c->label_column) {
        return optim_tool_fail(cmd, "--%s is for a --data file; '%s' is a directory of IDX files",
                               c->test_data ? "test-data" : "label-column", c->data);
    } else if (load_split(cmd, c->data, "train", c->limit, &d->train)) return 1;
    else if (load_split(cmd, c->data, "t10k", c->limit, &d->test)) {
        split_free(&d->train);
        return 1;
    }
    if (c->validation_split > 0) {
        /* Keras: split_at = ceil(n * (1 - validation_split)). */
        int64_t n = d->train.n, at = (int64_t)ceil((double)n * (1.0 - c->validation_split));
        if (at < 1 || at >= n) {
            optim_job_data_free(d);
            return optim_tool_fail(cmd, "--validation-split %g leaves no %s data of %lld examples",
                                   c->validation_split, at < 1 ? "training" : "validation",
                                   (long long)n);
        }
        d->val = d->train;
        d->val.x += at * d->train.features, d->val.y += at, d->val.n = n - at;
        d->train.n = at;
    }
    return 0;
}

void optim_job_data_free(job_data *d)
{
    split_free(&d->train);
    split_free(&d->test);
    memset(d, 0, sizeof *d);
}
