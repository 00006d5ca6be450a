/* Fuzz target: the .npy/.npz reader (optim_npy_parse) and the CSV reader
 * (optim_csv_parse) on the same bytes.
 *
 * Any input must either be refused with a message, or give arrays whose
 * element counts match their shapes, with distinct names, whose elements
 * all convert to float64; a CSV table has rows * cols values, all finite. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "optim/optim.h"

static void check_npy(const uint8_t *data, size_t size)
{
    optim_npy *f = NULL;
    optim_error err;
    int rc = optim_npy_parse(data, size, "input", &f, &err);
    if (rc != OPTIM_OK) {
        FUZZ_CHECK(f == NULL, "failed parse left a file");
        FUZZ_CHECK(err.msg[0] != '\0', "failed parse (%d) without a message", rc);
        return;
    }
    for (size_t i = 0; i < optim_npy_count(f); i++) {
        const optim_npy_array *a = optim_npy_at(f, i);
        FUZZ_CHECK(a->rank >= 0 && a->rank <= OPTIM_MAX_RANK, "rank %d", (int)a->rank);
        int64_t numel = 1;
        for (int32_t k = 0; k < a->rank; k++) numel *= a->shape[k];
        FUZZ_CHECK(numel == a->numel, "numel %lld, shape says %lld", (long long)a->numel,
                   (long long)numel);
        FUZZ_CHECK(optim_npy_find(f, a->name) == a, "name '%s' not unique", a->name);
        FUZZ_CHECK(optim_npy_type_name(a->type) != NULL, "unknown type");
        double *out = malloc((size_t)(numel ? numel : 1) * sizeof *out);
        FUZZ_CHECK(optim_npy_convert(a, OPTIM_F64, 1.0, out, &err) == OPTIM_OK, "%s", err.msg);
        free(out);
    }
    FUZZ_CHECK(optim_npy_at(f, optim_npy_count(f)) == NULL, "array past the end");
    optim_npy_free(f);
}

static void check_csv(const uint8_t *data, size_t size)
{
    optim_csv *t = NULL;
    optim_error err;
    int rc = optim_csv_parse((const char *)data, size, "input", &t, &err);
    if (rc != OPTIM_OK) {
        FUZZ_CHECK(t == NULL, "failed parse left a table");
        FUZZ_CHECK(err.msg[0] != '\0', "failed parse (%d) without a message", rc);
        return;
    }
    int64_t n = optim_csv_rows(t) * optim_csv_cols(t);
    FUZZ_CHECK(optim_csv_rows(t) > 0 && optim_csv_cols(t) > 0, "empty table accepted");
    for (int64_t i = 0; i < n; i++)
        FUZZ_CHECK(isfinite(optim_csv_values(t)[i]), "value %lld not finite", (long long)i);
    optim_csv_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_npy(data, size);
    check_csv(data, size);
    return 0;
}
