/* Half-precision variables in the pipeline: float32 scratch around the
 * class's update (half_step.h). */
#include "optimizer/half_step.h"

#include "core/half.h"
#include "core/hash.h"

/* Elements of slot k of the run: its own size for a whole-variable update. */
static int64_t slot_count(const optim_optimizer *opt, const optim__var_entry *e, int k,
                          int64_t count, int whole)
{
    return whole ? optim_var_numel(opt->slots[e->slot_ids[k]].var) : count;
}

size_t optim__half_whole_floats(const optim_optimizer *opt, const optim__var_entry *e)
{
    size_t n = 2 * (size_t)e->numel;
    for (int k = 0; k < e->nown; k++) n += (size_t)optim_var_numel(opt->slots[e->slot_ids[k]].var);
    return n;
}

/* The float32 form of one block of a run. */
typedef struct half_view {
    optim_dense_update u; /* what the class sees: dtype F32, pointers into the scratch */
    void *slots[OPTIM_MAX_SLOTS];
    float *grad; /* the widened gradient (transformed in place); NULL: r->grad */
} half_view;

/* Loads elements [off, off + n) of the run h (storage dtype) into r's
 * buffer: the param, the gradient (unless r has it in float32) and the
 * slots (whole: each of its own size). */
static void load_block(const optim_dense_update *h, const optim__half_run *r, int64_t off,
                       int64_t n, half_view *f)
{
    const size_t at = (size_t)off * optim_dtype_size(h->dtype);
    float *p = r->buf;
    f->u = *h;
    f->u.dtype = OPTIM_F32;
    f->u.offset = h->offset + off;
    f->u.count = n;
    optim__half_load(h->dtype, (const char *)h->param + at, p, n);
    f->u.param = p;
    f->grad = r->grad ? NULL : p + n;
    if (f->grad) optim__half_load(h->dtype, (const char *)h->grad + at, f->grad, n);
    f->u.grad = r->grad ? r->grad + off : f->grad;
    p += 2 * n;
    for (int k = 0; k < h->nslots; k++) {
        const int64_t m = slot_count(h->opt, r->entry, k, n, r->whole);
        optim__half_load(h->dtype, (const char *)h->slots[k] + at, p, m);
        f->slots[k] = p;
        p += m;
    }
    f->u.slots = f->slots;
}

/* splitmix64's finaliser (Steele, Lea, Flood 2014): a bijection of 64-bit
 * values that changes about half the bits for any change of its input. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Stores n floats of stream `stream` (0 the variable, 1 + k slot k) whose
 * first element has index `first` in it, rounded stochastically: the bits
 * of element i come from (seed, step, the variable's index in the
 * optimizer and its name, stream, i) alone, so they do not depend on how
 * the step is split into chunks and threads. */
static void store_sr(const optim_optimizer *opt, const optim__var_entry *e, int stream,
                     const float *src, uint16_t *dst, int64_t first, int64_t n)
{
    const uint64_t seed = (uint64_t)opt->hypers[OPTIM__P_BF16_SR_SEED].number;
    const uint64_t var = (uint64_t)(e - opt->vars) << 8 | (uint64_t)stream;
    const uint64_t base = mix64(mix64(mix64(mix64(seed) + (uint64_t)opt->iterations) +
                                      optim__fnv1a_str(optim_var_name(e->var))) +
                                var);
    for (int64_t done = 0; done < n;) {
        const uint64_t i = (uint64_t)(first + done);
        const int64_t len =
            (int64_t)((i | 0xffffffffu) - i) + 1; /* up to the next multiple of 2^32 */
        const int64_t m = n - done < len ? n - done : len;
        optim__bf16_store_sr(src + done, dst + done, m, mix64(base + (i >> 32)), (uint32_t)i);
        done += m;
    }
}

void optim__half_store_stream(const optim_optimizer *opt, const optim__var_entry *e, optim_dtype dt,
                              int stream, const float *src, void *dst, int64_t first, int64_t n)
{
    if (dt == OPTIM_BF16 && opt->hypers[OPTIM__P_BF16_SR_SEED].kind != HYPER_NONE)
        store_sr(opt, e, stream, src, dst, first, n);
    else optim__half_store(dt, src, dst, n);
}

/* Rounds the param and slots of f (elements [off, ...) of the run h) back
 * into h's storage. */
static void store_block(const optim_dense_update *h, const optim__half_run *r, int64_t off,
                        const half_view *f)
{
    const size_t at = (size_t)off * optim_dtype_size(h->dtype);
    const int64_t first = f->u.offset, n = f->u.count;
    optim__half_store_stream(h->opt, r->entry, h->dtype, 0, f->u.param, (char *)h->param + at,
                             first, n);
    for (int k = 0; k < h->nslots; k++)
        optim__half_store_stream(h->opt, r->entry, h->dtype, 1 + k, f->slots[k],
                                 (char *)h->slots[k] + at, r->whole ? 0 : first,
                                 slot_count(h->opt, r->entry, k, n, r->whole));
}

void optim__half_run_dense(const optim_dense_update *h, const optim__half_run *r)
{
    const int64_t block = r->whole ? h->count : OPTIM__HALF_BLOCK;
    for (int64_t off = 0; off < h->count; off += block) {
        half_view f;
        load_block(h, r, off, h->count - off < block ? h->count - off : block, &f);
        if (r->transform) r->transform(r->ctx, f.grad, f.u.count);
        if (r->wd != 0) optim__decay(OPTIM_F32, f.u.param, f.u.count, r->wd, r->lr);
        h->opt->cls.apply_dense(&f.u);
        store_block(h, r, off, &f);
    }
}
