/* st_compare A B RTOL: exit 0 when A and B (safetensors) hold the same
 * tensor names, dtypes and shapes, and for every tensor
 * max|a - b| <= RTOL * max|b|; prints the largest relative difference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/safetensors.h"

static double at(const optim_tensor *t, int64_t i)
{
    return t->dtype == OPTIM_F32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
}

int main(int argc, char **argv)
{
    if (argc != 4) return fprintf(stderr, "usage: st_compare A B RTOL\n"), 2;
    optim_st_file *a, *b;
    optim_error err;
    if (optim_st_read(argv[1], &a, &err) || optim_st_read(argv[2], &b, &err))
        return fprintf(stderr, "st_compare: %s\n", err.msg), 1;
    double rtol = atof(argv[3]), worst = 0;
    int bad = optim_st_count(a) != optim_st_count(b) || optim_st_count(a) == 0;
    for (size_t i = 0; !bad && i < optim_st_count(a); i++) {
        const char *name = optim_st_name(a, i);
        optim_tensor x, y;
        if (optim_st_get(a, name, &x) || optim_st_get(b, name, &y) || x.dtype != y.dtype ||
            x.rank != y.rank || optim_tensor_numel(&x) != optim_tensor_numel(&y) ||
            (x.dtype != OPTIM_F32 && x.dtype != OPTIM_F64)) {
            fprintf(stderr, "st_compare: tensor '%s' differs in name, dtype or shape\n", name);
            bad = 1;
            break;
        }
        double diff = 0, scale = 0;
        for (int64_t j = 0; j < optim_tensor_numel(&x); j++) {
            diff = fmax(diff, fabs(at(&x, j) - at(&y, j)));
            scale = fmax(scale, fabs(at(&y, j)));
        }
        double rel = scale > 0 ? diff / scale : diff;
        printf("%s: max relative difference %.3g\n", name, rel);
        worst = fmax(worst, rel);
        if (!(rel <= rtol)) bad = 1;
    }
    printf("largest relative difference %.3g (limit %g): %s\n", worst, rtol, bad ? "FAIL" : "ok");
    optim_st_free(a);
    optim_st_free(b);
    return bad;
}
