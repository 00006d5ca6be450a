/* Framed calls and the settings check. Every group call that starts a
 * collective sequence (a step's gradient check, optim_group_sum,
 * optim_group_check_same) first all-gathers a fixed-size frame: a magic
 * word with the call's kind, the group's call count and three words of the
 * call's own. Ranks whose calls went out of step then fail with a message
 * saying so, instead of reading one call's data as another's. */
#include "distribute/internal.h"
#include "core/hash.h"

#include <stdio.h>
#include <string.h>

#define FRAME_MAGIC 0x4f50544600000000LL /* "OPTF" in the high bytes */

static const char *kind_name(int64_t word)
{
    static const char *names[] = {"?", "a step's gradient check", "optim_group_sum",
                                  "optim_group_check_same"};
    int64_t k = word ^ FRAME_MAGIC;
    if (k < 1 || k > 3) return "(not a group call: its data is out of step)";
    return names[k];
}

int optim__frame(optim_group *g, int kind, int64_t a, int64_t b, int64_t c, int64_t *all,
                 optim_error *err)
{
    int64_t mine[OPTIM__FRAME] = {FRAME_MAGIC | kind, g->calls++, a, b, c};
    int rc = optim__allgather(g, mine, sizeof mine, all, err);
    if (rc) return rc;
    for (int r = 0; r < g->size; r++) {
        const int64_t *f = all + (size_t)r * OPTIM__FRAME;
        /* Every rank sees every frame and fails alike: the group stays
         * sound (a later framed call is checked again). */
        if (f[0] == mine[0] && f[1] == mine[1]) continue;
        return optim__err(
            err, OPTIM_ESTATE,
            "replica group: the ranks' calls are out of step: call %lld is %s on rank %d, "
            "call %lld is %s on rank %d; every rank must make the same group calls in the same "
            "order (were the ranks started with the same settings?)",
            (long long)mine[1], kind_name(mine[0]), g->rank, (long long)f[1], kind_name(f[0]), r);
    }
    return OPTIM_OK;
}

/* The value of `name` in rank r's list (names and values alternate, each
 * NUL-terminated), or NULL. */
static const char *lookup(const char *text, size_t len, const char *name)
{
    for (const char *p = text; p < text + len;) {
        const char *v = p + strlen(p) + 1;
        if (strcmp(p, name) == 0) return v;
        p = v + strlen(v) + 1;
    }
    return NULL;
}

/* v as shown in a message: whole when short, else a window around d, the
 * first place where the ranks' values differ. */
static void excerpt(char *out, size_t cap, const char *v, size_t d)
{
    if (!v) {
        snprintf(out, cap, "(not given)");
        return;
    }
    size_t n = strlen(v);
    if (n <= 40) {
        snprintf(out, cap, "%s", v);
        return;
    }
    size_t lo = d > 20 ? d - 20 : 0;
    if (lo > n) lo = n;
    snprintf(out, cap, "%s%.36s%s", lo ? "..." : "", v + lo, lo + 36 < n ? "..." : "");
}

static size_t first_difference(const char *a, const char *b)
{
    size_t d = 0;
    if (!a || !b) return 0;
    while (a[d] && a[d] == b[d]) d++;
    return d;
}

/* Appends "NAME is V0 on rank 0, V1 on rank 1" for name when the ranks'
 * values differ; returns 1 if they did. */
static int describe(optim_group *g, const char *name, char *const *text, const size_t *len,
                    char *msg, size_t cap)
{
    const char *ref = lookup(text[0], len[0], name);
    int differ = 0;
    size_t d = (size_t)-1;
    for (int r = 1; r < g->size; r++) {
        const char *v = lookup(text[r], len[r], name);
        if ((v == NULL) == (ref == NULL) && (!v || strcmp(v, ref) == 0)) continue;
        differ = 1;
        size_t dr = first_difference(v, ref);
        if (dr < d) d = dr;
    }
    if (!differ) return 0;
    size_t used = strlen(msg);
    snprintf(msg + used, cap - used, "%s%s is", used > 20 ? "; " : "", name);
    for (int r = 0; r < g->size; r++) {
        char shown[64];
        excerpt(shown, sizeof shown, lookup(text[r], len[r], name), d);
        used = strlen(msg);
        snprintf(msg + used, cap - used, "%s %s on rank %d", r ? "," : "", shown, r);
    }
    return 1;
}

/* Every rank's list (all-gathered) compared name by name. */
static int disagree(optim_group *g, const char *mine, const int64_t *frames, optim_error *err)
{
    size_t *len = optim__group_alloc(g, (size_t)g->size * sizeof *len), tot = 0;
    char **text = optim__group_alloc(g, (size_t)g->size * sizeof *text);
    if (!len || !text) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    for (int r = 0; r < g->size; r++) tot += len[r] = (size_t)frames[r * OPTIM__FRAME + 4];
    char *all = optim__group_alloc(g, tot);
    if (!all) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    int rc = optim__allgatherv(g, mine, len[g->rank], all, len, err);
    if (rc) return rc;
    for (int r = 0; r < g->size; r++) text[r] = r ? text[r - 1] + len[r - 1] : all;
    char msg[OPTIM_ERRMSG_MAX] = "replicas disagree: ";
    for (int r = 0; r < g->size; r++)
        for (const char *p = text[r]; p < text[r] + len[r];) {
            int seen = 0; /* described already, from an earlier rank's list */
            for (int q = 0; q < r && !seen; q++) seen = lookup(text[q], len[q], p) != NULL;
            if (!seen) describe(g, p, text, len, msg, sizeof msg);
            p += strlen(p) + 1;
            p += strlen(p) + 1;
        }
    return optim__err(err, OPTIM_EINVAL, "%s; every rank must be started with the same settings",
                      msg);
}

int optim__check_same(optim_group *g, const char *const *names, const char *const *values, size_t n,
                      optim_error *err)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || !values[i])
            return optim__err(err, OPTIM_EINVAL,
                              "optim_group_check_same: %s[%zu] is NULL, expected a string",
                              names[i] ? "values" : "names", i);
        len += strlen(names[i]) + strlen(values[i]) + 2;
    }
    char *mine = optim__group_alloc(g, len), *p = mine;
    int64_t *frames = optim__group_alloc(g, (size_t)g->size * OPTIM__FRAME * sizeof *frames);
    if (!mine || !frames) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(names[i]) + 1, b = strlen(values[i]) + 1;
        memcpy(p, names[i], a), memcpy(p + a, values[i], b);
        p += a + b;
    }
    int64_t hash = (int64_t)(optim__fnv1a(mine, len) >> 1);
    int rc = optim__frame(g, OPTIM__CALL_SAME, (int64_t)n, hash, (int64_t)len, frames, err);
    if (rc) return rc;
    for (int r = 0; r < g->size; r++) {
        const int64_t *f = frames + (size_t)r * OPTIM__FRAME;
        if (f[2] != (int64_t)n || f[3] != hash || f[4] != (int64_t)len)
            return disagree(g, mine, frames, err);
    }
    return OPTIM_OK;
}
