/* optim replay CONFIG INIT GRADS OUT (docs/command.md).
 *
 * Creates the optimizer from CONFIG, one variable per tensor of INIT (sorted
 * by name), applies the steps recorded in GRADS (K/NAME dense, or
 * K/NAME/indices + K/NAME/values sparse) for K = 0..max, and writes every
 * variable, every slot (NAME/SLOT) and `iterations` to OUT. Any bad input:
 * one line on stderr, exit status 1, OUT untouched. The loading and the
 * steps are replay_load.c's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "optim/optim.h"
#include "replay.h"

static int write_out(replay *r, const char *path)
{
    optim_st_writer *w;
    optim_error err;
    if (optim_st_writer_create(&w, &err)) return replay_fail(r, "%s", err.msg);
    int rc = 0;
    for (size_t i = 0; i < r->nvars && !rc; i++) {
        optim_tensor t = optim_var_tensor(r->vars[i]);
        if (optim_st_writer_add(w, optim_var_name(r->vars[i]), &t, &err))
            rc = replay_fail(r, "%s", err.msg);
    }
    size_t nw = optim_weights_count(r->opt);
    optim_tensor *weights = calloc(nw, sizeof *weights);
    if (!weights && !rc) rc = replay_fail(r, "out of memory");
    if (!rc) optim_get_weights(r->opt, weights, nw);
    /* weights[0] is iterations; the slots are named VAR/SLOT already. */
    for (size_t i = 0; i < nw && !rc; i++) {
        const char *name = optim_weight_name(r->opt, i);
        if (optim_st_writer_add(w, name, &weights[i], &err))
            rc = replay_fail(
                r,
                "cannot write '%s' to OUT: %s (OUT names every variable and every optimizer "
                "weight; two of them share this name)",
                name, err.msg);
    }
    free(weights);
    if (!rc && optim_st_writer_save(w, path, &err)) rc = replay_fail(r, "%s", err.msg);
    optim_st_writer_destroy(w);
    return rc;
}

/* The variables that get a gradient at some step (those the optimizer
 * makes slots for), into out; returns how many. */
static size_t with_gradients(const replay *r, optim_var **out)
{
    size_t m = 0;
    for (size_t v = 0; v < r->nvars; v++)
        for (int64_t k = 0; k < r->steps; k++) {
            const grad_ref *g = &r->refs[k * (int64_t)r->nvars + v];
            if (g->dense || g->indices) {
                out[m++] = r->vars[v];
                break;
            }
        }
    return m;
}

/* The first of names[0..n) that an earlier one equals, or NULL (the
 * names in an open-addressing table: sorting 400k names was a tenth of a
 * 100k-variable replay). Sets *oom if there is no memory for the table. */
static const char *first_repeated(const char *const *names, size_t n, int *oom)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    const char **table = calloc(cap, sizeof *table), *dup = NULL;
    *oom = !table;
    for (size_t i = 0; table && !dup && i < n; i++) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (const char *c = names[i]; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        size_t at = (size_t)h & (cap - 1);
        while (table[at] && strcmp(table[at], names[i]) != 0) at = (at + 1) & (cap - 1);
        if (table[at]) dup = names[i];
        table[at] = names[i];
    }
    free(table);
    return dup;
}

/* ---- OUT's header size, known before the first step ---------------------- */

/* One tensor of OUT: its name, its header entry's bytes less the digits of
 * its two data offsets, and its data bytes. */
typedef struct out_entry {
    const char *name;
    uint64_t len, nbytes;
} out_entry;

static uint64_t digits(uint64_t v)
{
    uint64_t n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

/* The entry {"NAME":{"dtype":"F32","shape":[..],"data_offsets":[,]}} as the
 * safetensors writer spells it (its JSON escapes for the name). */
static out_entry make_entry(const char *name, const optim_tensor *t)
{
    out_entry e = {name, 2 + strlen(":{\"dtype\":\"\",\"shape\":[],\"data_offsets\":[,]}"),
                   (uint64_t)optim_tensor_numel(t) * optim_dtype_size(t->dtype)};
    for (const char *c = name; *c; c++)
        e.len += *c == '"' || *c == '\\' ? 2 : (unsigned char)*c < 0x20 ? 6 : 1;
    e.len += t->dtype == OPTIM_BF16 ? 4 : 3; /* F32, F64, F16, I32, I64; BF16 */
    for (int32_t k = 0; k < t->rank; k++) e.len += digits((uint64_t)t->shape[k]) + (k > 0);
    return e;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const out_entry *)a)->name, ((const out_entry *)b)->name);
}

/* OUT's header bytes: "{", the entries (name order) with ",", "}", padded to
 * a multiple of 8. Exact; sorts e only when the bounds without the data
 * offsets' digits leave the answer open. */
static uint64_t header_size(out_entry *e, size_t n)
{
    uint64_t base = 2 + (n ? n - 1 : 0), total = 0;
    for (size_t i = 0; i < n; i++) base += e[i].len, total += e[i].nbytes;
    uint64_t lo = base + 2 * (uint64_t)n, hi = base + 2 * (uint64_t)n * digits(total);
    if (lo > OPTIM_ST_MAX_HEADER || (hi + 7) / 8 * 8 <= OPTIM_ST_MAX_HEADER)
        return (lo + 7) / 8 * 8;
    qsort(e, n, sizeof *e, cmp_entry);
    uint64_t size = base, off = 0;
    for (size_t i = 0; i < n; i++)
        size += digits(off) + digits(off + e[i].nbytes), off += e[i].nbytes;
    return (size + 7) / 8 * 8;
}

/* Refuses before any step an OUT whose header would be above the safetensors
 * limit (the writer would refuse it only after the whole run). probe is an
 * optimizer from the same config, built for the variables with gradients. */
static int check_out_size(const replay *r, optim_optimizer *probe)
{
    size_t nw = optim_weights_count(probe), n = r->nvars + nw;
    out_entry *e = malloc(n * sizeof *e);
    optim_tensor *w = calloc(nw ? nw : 1, sizeof *w);
    int rc = e && w ? 0 : replay_fail(r, "out of memory");
    if (!rc) optim_get_weights(probe, w, nw);
    for (size_t i = 0; !rc && i < n; i++) {
        optim_tensor t = i < r->nvars ? optim_var_tensor(r->vars[i]) : w[i - r->nvars];
        e[i] = make_entry(
            i < r->nvars ? optim_var_name(r->vars[i]) : optim_weight_name(probe, i - r->nvars), &t);
    }
    uint64_t size = rc ? 0 : header_size(e, n);
    if (size > OPTIM_ST_MAX_HEADER)
        rc = replay_fail(
            r,
            "OUT would need a safetensors header of at least %llu bytes for its %zu tensors "
            "(%zu variables and %zu optimizer weights), above the limit of %u bytes; refused "
            "before any step: replay fewer variables, or give them shorter names",
            (unsigned long long)size, n, r->nvars, nw, OPTIM_ST_MAX_HEADER);
    free(e);
    free(w);
    return rc;
}

/* OUT holds every variable and every optimizer weight under its name: an
 * INIT tensor named like a weight ("a/m" beside a variable "a") is refused
 * before any step. The names are those of a second optimizer from the same
 * config, built for the variables that get gradients. If that build fails,
 * the steps themselves report the reason. */
static int check_names(replay *r, const char *config)
{
    optim_error err;
    optim_optimizer *probe;
    if (optim_from_json(&probe, config, &err)) return replay_fail(r, "CONFIG: %s", err.msg);
    optim_var **used = malloc(r->nvars * sizeof *used);
    int rc = used ? 0 : replay_fail(r, "out of memory");
    int built = !rc && optim_build(probe, used, with_gradients(r, used)) == 0;
    size_t nw = built ? optim_weights_count(probe) : 0, n = r->nvars + nw;
    const char **names = built ? malloc(n * sizeof *names) : NULL;
    if (built && !names) rc = replay_fail(r, "out of memory");
    free(used);
    for (size_t i = 0; names && !rc && i < n; i++)
        if (!(names[i] = i < r->nvars ? optim_var_name(r->vars[i])
                                      : optim_weight_name(probe, i - r->nvars)))
            rc = replay_fail(r, "out of memory");
    int oom = 0;
    const char *dup = names && !rc ? first_repeated(names, n, &oom) : NULL;
    if (oom) rc = replay_fail(r, "out of memory");
    if (dup)
        rc = replay_fail(
            r,
            "INIT tensor '%s' has the name of one of the optimizer's weights (OUT holds "
            "both under their names); rename the variable",
            dup);
    if (built && !rc) rc = check_out_size(r, probe);
    free(names);
    optim_destroy(probe);
    return rc;
}

static int run(replay *r, char **argv)
{
    optim_error err;
    char *config = optim_tool_read_text(argv[0], &err);
    if (!config) return replay_fail(r, "CONFIG %s", err.msg);
    int rc = optim_from_json(&r->opt, config, &err);
    if (rc) {
        free(config);
        return replay_fail(r, "CONFIG %s: %s", argv[0], err.msg);
    }
    if (optim_st_read(argv[1], &r->init, &err)) rc = replay_fail(r, "INIT %s", err.msg);
    else if (optim_st_read(argv[2], &r->grads, &err)) rc = replay_fail(r, "GRADS %s", err.msg);
    else rc = replay_load(r) || check_names(r, config);
    free(config);
    if (rc) return 1;
    for (int64_t k = 0; k < r->steps; k++)
        if (replay_step(r, k)) return 1;
    return write_out(r, argv[3]);
}

int optim_cmd_replay(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: optim replay CONFIG INIT GRADS OUT\n");
        return 2;
    }
    replay r = {.cmd = "optim replay",
                .init_label = "INIT",
                .grads_label = "GRADS",
                .init_prefix = "",
                .grads_prefix = ""};
    int rc = run(&r, argv);
    replay_free(&r);
    return rc;
}
