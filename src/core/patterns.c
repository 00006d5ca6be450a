/* Variable-name patterns: Python regular expressions (Keras's), translated
 * to POSIX extended ones (pyre.c) and searched in a name (re.search) or
 * matching the whole name (re.fullmatch), with their sources kept for
 * get_config. One implementation for Keras 3's
 * exclude_from_weight_decay, TF Addons' AdamW and LAMB (search), and
 * MultiOptimizer's optimizer_map (full). */
#define _POSIX_C_SOURCE 200809L
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/pyre.h"
#include "optim/optimizer_class.h"

struct optim_name_patterns {
    size_t n;
    char **src; /* n strings, NULL-terminated */
    regex_t *re;
    uint32_t flags; /* OPTIM_NAME_PATTERNS_* */
};

void optim_name_patterns_free(optim_name_patterns *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        regfree(&p->re[i]);
        free(p->src[i]);
    }
    free(p->src);
    free(p->re);
    free(p);
}

/* ---- the size a pattern compiles to ----------------------------------------------------
 * glibc's regcomp copies a repeated subexpression once per repeat (x{m,n}
 * n times, x+ as x x*), and repeats of what can match empty cost beyond
 * any bound: "b.*" and 12 '+' take 10 s and 880 MB, "^b*+++++" 20 s,
 * "^(((((b*)+)+)+)+)+" 19 s, "^((b*)*){1000}" more than 20 s,
 * (a*){30000} more than 4 GB. So, before regcomp: as Python's re, a repeat
 * of a repeat is refused ("multiple repeat") but for one lazy '?' or
 * possessive '+' after it; so is a repeat of a group that can match empty
 * and holds a repeat ("(a*)+", "(b?|c){9}", "((^|/)+){100}": write them
 * without the outer repeat; "(^|/)?" is fine), a
 * nesting deeper than DEPTH (regcomp parses recursively), and a pattern
 * whose repeats expand it by more than OPTIM__REGEX_MAX nodes: an item
 * counts 1, a group or an alternation the sum of its parts, a repeat
 * multiplies what it repeats (x+ by 2), saturated at CAP. */
#define DEPTH 256
#define CAP ((uint64_t)1 << 40)

static uint64_t cap(uint64_t x) { return x < CAP ? x : CAP; }
static uint64_t mul(uint64_t a, uint64_t b) { return b && a > CAP / b ? CAP : cap(a * b); }

/* The last character of the bracket expression opening at p. */
static const char *bracket_end(const char *p)
{
    p += p[1] == '^' ? 2 : 1;
    if (*p == ']') p++; /* a ']' first is literal */
    for (; *p && *p != ']'; p++)
        if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            const char close = p[1];
            for (p += 2; *p && !(p[0] == close && p[1] == ']'); p++) {}
            if (!*p) break;
            p++;
        }
    return *p ? p : p - 1;
}

/* The interval at p ("{m}", "{m,}", "{m,n}", "{,n}"), *p moved to its '}':
 * its copies, *min its m; 1 copy if malformed (regcomp refuses it). */
static uint64_t interval(const char **p, uint64_t *min)
{
    uint64_t v[2] = {0, 0};
    int k = 0;
    const char *q = *p + 1;
    for (; (*q >= '0' && *q <= '9') || (*q == ',' && !k); q++)
        if (*q == ',') k = 1;
        else v[k] = cap(mul(v[k], 10) + (uint64_t)(*q - '0'));
    *min = 1;
    if (*q != '}') return 1;
    *p = q;
    *min = v[0];
    const uint64_t n = k ? (v[1] ? v[1] : v[0] + 1) : v[0];
    return n ? n : 1;
}

/* One group (or the whole pattern) being read: the size of the finished
 * items and of the last one (a repeat's operand), whether the sequence
 * before the last item, the last item and some finished alternative can
 * match empty (an anchor does), whether the group and its last item hold a
 * repeat, and how many repeat operators follow the last item. */
typedef struct rx_frame {
    uint64_t total, last;
    int seq_empty, last_empty, alt_empty, has_repeat, last_repeat, repeats;
} rx_frame;

static void rx_item(rx_frame *f, uint64_t size, int empty, int repeat)
{
    f->total = cap(f->total + f->last);
    f->seq_empty = f->seq_empty && f->last_empty;
    f->last = size;
    f->last_empty = empty;
    f->has_repeat = f->has_repeat || repeat;
    f->last_repeat = repeat;
    f->repeats = 0;
}

/* A repeat operator at *p on f's last item; 0 if refused (a repeat of a
 * repeat, or of what can match empty and holds a repeat). */
static int rx_repeat(rx_frame *f, const char **p)
{
    const char c = **p;
    if (++f->repeats > 2 || (f->repeats == 2 && c != '?' && c != '+')) return 0;
    if (f->repeats == 2) return 1; /* lazy or possessive: the same automaton */
    if (f->last && f->last_empty && f->last_repeat) return 0;
    uint64_t min = c == '+', n = c == '+' ? 2 : 1; /* '*' and '?': min 0 */
    if (c == '{') n = interval(p, &min);
    f->last = mul(f->last, n);
    f->last_empty = f->last_empty || min == 0;
    f->has_repeat = f->last_repeat = 1;
    return 1;
}

static uint64_t regex_size(const char *p)
{
    rx_frame f[DEPTH];
    int d = 0;
    f[0] = (rx_frame){0, 0, 1, 1, 0, 0, 0, 0};
    for (; *p; p++) {
        if (*p == '*' || *p == '+' || *p == '?' || *p == '{') {
            if (!rx_repeat(&f[d], &p)) return CAP;
        } else if (*p == '|') {
            rx_item(&f[d], 0, 1, 0);
            f[d].alt_empty = f[d].alt_empty || f[d].seq_empty;
            f[d].seq_empty = 1;
        } else if (*p == '(') {
            if (++d == DEPTH) return CAP;
            f[d] = (rx_frame){0, 0, 1, 1, 0, 0, 0, 0};
        } else if (*p == ')' && d > 0) {
            rx_item(&f[d], 0, 1, 0);
            d--;
            rx_item(&f[d], f[d + 1].total, f[d + 1].alt_empty || f[d + 1].seq_empty,
                    f[d + 1].has_repeat);
        } else {
            if (*p == '\\' && p[1]) p++;
            else if (*p == '[') p = bracket_end(p);
            rx_item(&f[d], 1, *p == '^' || *p == '$', 0);
        }
    }
    for (; d > 0; d--) rx_item(&f[d - 1], f[d].total + f[d].last, 0, 0);
    return cap(f[0].total + f[0].last);
}

int optim__regex_too_large(const char *pattern)
{
    const size_t len = strlen(pattern);
    const uint64_t size = regex_size(pattern);
    return size > (uint64_t)len + OPTIM__REGEX_MAX;
}

/* How messages name pattern i: what[i] ('PATTERN') is ..., or with
 * OPTIM_NAME_PATTERNS_KEYS what['PATTERN']: ... (a key of a config object). */
static void label(char *buf, size_t len, const optim_name_patterns *p, const char *pattern,
                  const char *what)
{
    if (p->flags & OPTIM_NAME_PATTERNS_KEYS) snprintf(buf, len, "%s['%.200s']:", what, pattern);
    else snprintf(buf, len, "%s[%zu] ('%.200s') is", what, p->n, pattern);
}

static int add_one(optim_name_patterns *p, const char *pattern, const char *what, optim_error *err)
{
    size_t i = p->n;
    if (!pattern) return optim__err(err, OPTIM_EINVAL, "%s[%zu] is NULL", what, i);
    char at[512], why[160], *ere;
    label(at, sizeof at, p, pattern, what);
    const int t = optim__pyre_to_ere(pattern, &ere, why, sizeof why);
    if (t)
        return optim__err(err, t == -2 ? OPTIM_ENOMEM : OPTIM_EINVAL,
                          "%s a Python regular expression optim cannot match as re does: %s", at,
                          why);
    if (optim__regex_too_large(ere)) {
        free(ere);
        return optim__err(err, OPTIM_EINVAL,
                          "%s too large to compile: a repeat of a repeat "
                          "or of what can match empty, or repeats that expand it by more than %d "
                          "nodes",
                          at, OPTIM__REGEX_MAX);
    }
    if (!(p->src[i] = optim__strdup(pattern))) {
        free(ere);
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    }
    /* A full match needs where the match ends: POSIX's leftmost-longest
     * match covers the whole name exactly when some match does. */
    const int cflags = REG_EXTENDED | (p->flags & OPTIM_NAME_PATTERNS_FULL ? 0 : REG_NOSUB);
    int e = regcomp(&p->re[i], ere, cflags);
    free(ere);
    if (e) {
        regerror(e, &p->re[i], why, sizeof why);
        free(p->src[i]);
        p->src[i] = NULL;
        return optim__err(err, OPTIM_EINVAL, "%s not a valid regular expression: %s", at, why);
    }
    p->n++;
    return OPTIM_OK;
}

int optim_name_patterns_compile_flags(optim_name_patterns **out, const char *const *list, size_t n,
                                      const char *what, uint32_t flags, optim_error *err)
{
    if (!what) what = "name patterns";
    if (!out) return optim__err(err, OPTIM_EINVAL, "%s: out is NULL", what);
    *out = NULL;
    if (n && !list) return optim__err(err, OPTIM_EINVAL, "%s: list is NULL", what);
    const uint32_t known = OPTIM_NAME_PATTERNS_FULL | OPTIM_NAME_PATTERNS_KEYS;
    if (flags & ~known)
        return optim__err(err, OPTIM_EINVAL, "%s: flags is 0x%x, expected a combination of 0x%x",
                          what, (unsigned)flags, (unsigned)known);
    optim_name_patterns *p = calloc(1, sizeof *p);
    if (p) {
        p->src = calloc(n + 1, sizeof *p->src);
        p->re = calloc(n + 1, sizeof *p->re);
        p->flags = flags;
    }
    int rc = p && p->src && p->re ? OPTIM_OK : optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) rc = add_one(p, list[i], what, err);
    if (rc) {
        optim_name_patterns_free(p);
        return rc;
    }
    *out = p;
    return OPTIM_OK;
}

int optim_name_patterns_compile(optim_name_patterns **out, const char *const *list, size_t n,
                                const char *what, optim_error *err)
{
    return optim_name_patterns_compile_flags(out, list, n, what, 0, err);
}

/* Whether pattern i matches name in p's mode. */
static int matches(const optim_name_patterns *p, size_t i, const char *name)
{
    if (!(p->flags & OPTIM_NAME_PATTERNS_FULL)) return regexec(&p->re[i], name, 0, NULL, 0) == 0;
    regmatch_t m;
    return regexec(&p->re[i], name, 1, &m, 0) == 0 && m.rm_so == 0 &&
        (size_t)m.rm_eo == strlen(name);
}

long optim_name_patterns_find(const optim_name_patterns *p, const char *name, size_t from)
{
    for (size_t i = from; p && name && i < p->n; i++)
        if (matches(p, i, name)) return (long)i;
    return -1;
}

int optim_name_patterns_match(const optim_name_patterns *p, const char *name)
{
    return optim_name_patterns_find(p, name, 0) >= 0;
}

const char *const *optim_name_patterns_sources(const optim_name_patterns *p)
{
    static const char *const none[] = {NULL};
    return p ? (const char *const *)p->src : none;
}
