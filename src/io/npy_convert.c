/* optim_npy_convert and the type table (optim/npy.h). */
#include "io/npy_impl.h"

#include "core/half.h"
#include "core/internal.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} INFO[] = {{"bool", 1},    {"uint8", 1},   {"int8", 1},    {"uint16", 2}, {"int16", 2},
            {"uint32", 4},  {"int32", 4},   {"uint64", 8},  {"int64", 8},  {"float16", 2},
            {"float32", 4}, {"float64", 8}, {"bfloat16", 2}};

size_t optim__npy_type_size(optim_npy_type t)
{
    return (unsigned)t < sizeof INFO / sizeof INFO[0] ? INFO[t].size : 0;
}

const char *optim_npy_type_name(optim_npy_type t)
{
    return (unsigned)t < sizeof INFO / sizeof INFO[0] ? INFO[t].name : NULL;
}

/* Element i: exactly as *iv for the integer types (*is_int), else as *d. */
static void element(const optim_npy_array *a, int64_t i, double *d, int64_t *iv, int *is_int)
{
    const unsigned char *p = (const unsigned char *)a->data + (size_t)i * INFO[a->type].size;
    uint16_t h;
    *is_int = 1;
    switch (a->type) {
    case OPTIM_NPY_BOOL: *iv = p[0] != 0; break;
    case OPTIM_NPY_U8: *iv = p[0]; break;
    case OPTIM_NPY_I8: *iv = (int8_t)p[0]; break;
    case OPTIM_NPY_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        *iv = v;
    } break;
    case OPTIM_NPY_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        *iv = v;
    } break;
    case OPTIM_NPY_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        *iv = v;
    } break;
    case OPTIM_NPY_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        *iv = v;
    } break;
    case OPTIM_NPY_I64: memcpy(iv, p, 8); break;
    case OPTIM_NPY_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > INT64_MAX) *is_int = 0, *d = (double)v;
        else *iv = (int64_t)v;
    } break;
    case OPTIM_NPY_F16: memcpy(&h, p, 2), *is_int = 0, *d = optim__f16_to_f32(h); break;
    case OPTIM_NPY_BF16: memcpy(&h, p, 2), *is_int = 0, *d = optim__bf16_to_f32(h); break;
    case OPTIM_NPY_F32: {
        float v;
        memcpy(&v, p, 4);
        *is_int = 0, *d = v;
    } break;
    default: {
        double v;
        memcpy(&v, p, 8);
        *is_int = 0, *d = v;
    } break;
    }
}

static int to_int(const optim_npy_array *a, int64_t i, int64_t lo, int64_t hi, int64_t *v,
                  optim_error *err)
{
    double d;
    int is_int;
    element(a, i, &d, v, &is_int);
    if (is_int && *v >= lo && *v <= hi) return OPTIM_OK;
    if (!is_int && d == floor(d) && d >= (double)lo && d < -(double)lo) {
        *v = (int64_t)d;
        if (*v <= hi) return OPTIM_OK;
    }
    if (is_int)
        return optim__err(err, OPTIM_ERANGE,
                          "array '%s': element %lld is %lld, outside [%lld, %lld]", a->name,
                          (long long)i, (long long)*v, (long long)lo, (long long)hi);
    return optim__err(err, OPTIM_ERANGE,
                      "array '%s': element %lld is %.17g, expected a whole number in [%lld, %lld]",
                      a->name, (long long)i, d, (long long)lo, (long long)hi);
}

int optim_npy_convert(const optim_npy_array *a, optim_dtype dtype, double scale, void *out,
                      optim_error *err)
{
    if (!a || (!out && a->numel))
        return optim__err(err, OPTIM_EINVAL, "optim_npy_convert: %s is NULL", a ? "out" : "a");
    if (!optim_npy_type_name(a->type))
        return optim__err(err, OPTIM_EINVAL, "array '%s': unknown type %d", a->name, (int)a->type);
    int is_float = dtype == OPTIM_F32 || dtype == OPTIM_F64;
    if (!is_float && dtype != OPTIM_I32 && dtype != OPTIM_I64)
        return optim__err(err, OPTIM_EDTYPE,
                          "optim_npy_convert: dtype %d, expected F32, F64, I32 or I64", (int)dtype);
    if (!is_float && scale != 1)
        return optim__err(err, OPTIM_EINVAL, "optim_npy_convert: scale %g for integers, expected 1",
                          scale);
    for (int64_t i = 0; i < a->numel; i++) {
        double d = 0;
        int64_t v = 0;
        int is_int, rc;
        if (is_float) {
            element(a, i, &d, &v, &is_int);
            double x = (is_int ? (double)v : d) * scale;
            if (dtype == OPTIM_F32) ((float *)out)[i] = (float)x;
            else ((double *)out)[i] = x;
        } else if (dtype == OPTIM_I32) {
            if ((rc = to_int(a, i, INT32_MIN, INT32_MAX, &v, err))) return rc;
            ((int32_t *)out)[i] = (int32_t)v;
        } else {
            if ((rc = to_int(a, i, INT64_MIN, INT64_MAX, &v, err))) return rc;
            ((int64_t *)out)[i] = v;
        }
    }
    return OPTIM_OK;
}
