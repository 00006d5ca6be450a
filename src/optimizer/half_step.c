/* Half-precision variables in the pipeline: float32 scratch around the
 * class's update (half_step.h). */
#include "optimizer/half_step.h"

#include "core/half.h"

/* Elements of slot k of the run: its own size for a whole-variable update. */
static int64_t slot_count(const optim_optimizer *opt, const optim__var_entry *e, int k, int64_t count, int whole)
{
    return whole ? optim_var_numel(opt->slots[e->slot_ids[k]].var) : count;
}

void optim__half_part(const optim_dense_update *h, int64_t off, int64_t len, optim_dense_update *part,
                      void **slots)
{
    const size_t at = (size_t)off * optim_dtype_size(h->dtype);
    *part = *h;
    part->offset = h->offset + off;
    part->count = len;
    part->param = (char *)h->param + at;
    part->grad = (const char *)h->grad + at;
    for (int k = 0; k < h->nslots; k++) slots[k] = (char *)h->slots[k] + at;
    part->slots = slots;
}

size_t optim__half_whole_floats(const optim_optimizer *opt, const optim__var_entry *e)
{
    size_t n = 2 * (size_t)e->numel;
    for (int k = 0; k < e->nown; k++) n += (size_t)optim_var_numel(opt->slots[e->slot_ids[k]].var);
    return n;
}

void optim__half_load_run(const optim_optimizer *opt, const optim__var_entry *e, const optim_dense_update *h,
                          float *buf, int whole, optim__half_view *f)
{
    const optim_dtype dt = h->dtype;
    float *p = buf;
    f->u = *h;
    f->u.dtype = OPTIM_F32;
    optim__half_load(dt, h->param, p, h->count);
    f->u.param = p;
    p += h->count;
    optim__half_load(dt, h->grad, p, h->count);
    f->u.grad = f->grad = p;
    p += h->count;
    for (int k = 0; k < h->nslots; k++) {
        const int64_t n = slot_count(opt, e, k, h->count, whole);
        optim__half_load(dt, h->slots[k], p, n);
        f->slots[k] = p;
        p += n;
    }
    f->u.slots = f->slots;
}

void optim__half_store_run(const optim_optimizer *opt, const optim__var_entry *e, const optim_dense_update *h,
                           const optim__half_view *f, int whole)
{
    optim__half_store(h->dtype, f->u.param, h->param, h->count);
    for (int k = 0; k < h->nslots; k++)
        optim__half_store(h->dtype, f->slots[k], h->slots[k], slot_count(opt, e, k, h->count, whole));
}
