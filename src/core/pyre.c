/* Python `re` patterns as glibc POSIX extended regular expressions. Keras's
 * pattern keys (exclude_from_weight_decay, Muon's exclude_layers,
 * MultiOptimizer's optimizer_map) are Python regular expressions; regcomp
 * reads some of their constructs differently (\d as "d", [\d] as "\" or
 * "d", (?:...) as an error, "." matching a newline, a*+ as (a*)+). So each
 * pattern is translated first, to an expression that matches the same
 * names, or refused with what it holds:
 *  - \d \D \w \W \s \S: their ASCII sets (Python's re.ASCII: a name's
 *    non-ASCII letters are not \w), in and out of [...]; \b \B word
 *    boundaries; \A \Z the ends; \n \t \r \f \v \a the control characters;
 *    an escaped punctuation character itself.
 *  - [...]: Python's escapes inside; written as a POSIX bracket expression
 *    of the same characters (ASCII only inside).
 *  - (?:...) and (?P<name>...) as plain groups; (?#...) dropped.
 *  - lazy repeats (*? +? ?? {m,n}?) as greedy ones: a search or a full
 *    match succeeds for the same names; {,n} as {0,n}; a '{' that starts no
 *    repeat, and '}', literal.
 *  - "." as [^\n]; a non-ASCII character as a group of its bytes (so that a
 *    repeat repeats all of them). "." and [^...] match a byte, so a
 *    non-ASCII character of a name counts as its UTF-8 bytes there.
 *  - \1 to \9 as backreferences (glibc has them), unless a (?:...) before
 *    them changed the numbering.
 *  - Refused: named backreferences, lookarounds, conditionals, inline flags,
 *    possessive repeats, \x \u \U \N and octal escapes, other letters' escapes,
 *    \D \W \S inside [...], a trailing backslash, an unbalanced ')'. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pyre.h"

typedef struct out {
    char *o;
    char *why;
    size_t wn;
    int renumbered; /* a (?:...) became a capturing group */
} out;

static int refuse(out *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, w->wn, fmt, ap);
    va_end(ap);
    return -1;
}

static void put(out *w, const char *s)
{
    const size_t n = strlen(s);
    memcpy(w->o, s, n);
    w->o += n;
}

static void put_char(out *w, char c) { *w->o++ = c; }

/* A character that stands for itself outside brackets. */
static void literal(out *w, char c)
{
    if (c && strchr(".[]()*+?{}|^$\\", c)) put_char(w, '\\');
    put_char(w, c);
}

/* The control character of Python's \n \t \r \f \v \a, or 0. */
static char control(char c)
{
    static const char from[] = "ntrfva", to[] = "\n\t\r\f\v\a";
    const char *at = c ? strchr(from, c) : NULL;
    return at ? to[at - from] : 0;
}

/* ---- [...]: a set of ASCII characters ---------------------------------------------------- */

typedef struct set {
    unsigned char has[128];
} set;

static void set_range(set *s, int a, int b)
{
    for (int c = a; c <= b; c++) s->has[c] = 1;
}

/* \d \w \s into s (negated ones refused by the caller); 0 if c is none. */
static int set_class(set *s, char c)
{
    if (c == 'd') set_range(s, '0', '9');
    else if (c == 's') set_range(s, '\t', '\r'), s->has[' '] = 1;
    else if (c == 'w')
        set_range(s, '0', '9'), set_range(s, 'a', 'z'), set_range(s, 'A', 'Z'), s->has['_'] = 1;
    else return 0;
    return 1;
}

/* One character of a set at *p (a literal or an escape), *p moved past it:
 * the character, -2 for a class escape added to s, -1 refused. */
static int set_item(const char **p, set *s, out *w)
{
    const unsigned char c = (unsigned char)**p;
    if (c >= 128) return refuse(w, "a non-ASCII character inside [...]");
    (*p)++;
    if (c != '\\') return c;
    const char e = *(*p)++;
    if (!e) return refuse(w, "a trailing backslash");
    if ((unsigned char)e >= 128) return refuse(w, "a non-ASCII character inside [...]");
    if (set_class(s, e)) return -2;
    if (e == 'D' || e == 'W' || e == 'S')
        return refuse(w, "\\%c inside [...] (write the set without it)", e);
    if (control(e)) return control(e);
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
        return refuse(w, "the escape \\%c inside [...]", e);
    return (unsigned char)e;
}

/* The characters of s as a POSIX bracket expression: ']' first, '[' and
 * '^' late, '-' last, so that none reads as syntax. */
static void put_set(out *w, const set *s, int negated)
{
    put_char(w, '[');
    if (negated) put_char(w, '^');
    if (s->has[']']) put_char(w, ']');
    for (int c = 1; c < 128; c++)
        if (s->has[c] && !strchr("]^-[", c)) put_char(w, (char)c);
    if (s->has['[']) put_char(w, '[');
    if (s->has['^']) put_char(w, '^');
    if (s->has['-']) put_char(w, '-');
    put_char(w, ']');
}

/* The set opening at *p ('['), *p moved past its ']'. */
static int bracket(const char **p, out *w)
{
    set s = {{0}};
    const char *q = *p + 1;
    const int negated = *q == '^';
    q += negated;
    for (int first = 1; *q && (*q != ']' || first); first = 0) {
        const int a = set_item(&q, &s, w);
        if (a == -1) return -1;
        if (a == -2) continue;
        if (q[0] == '-' && q[1] && q[1] != ']') {
            q++;
            const int b = set_item(&q, &s, w);
            if (b < 0) return b == -1 ? -1 : refuse(w, "a class escape ending a range in [...]");
            if (b < a) return refuse(w, "a bad range %c-%c in [...]", a, b);
            set_range(&s, a, b);
        } else {
            s.has[a] = 1;
        }
    }
    if (!*q) return refuse(w, "an unterminated [");
    int count = 0;
    for (int c = 0; c < 128; c++) count += s.has[c];
    /* Only '^' in a plain set: "[^]" would read as a negation. */
    if (!negated && count == 1 && s.has['^']) put(w, "\\^");
    else put_set(w, &s, negated);
    *p = q + 1;
    return 0;
}

/* ---- outside brackets ------------------------------------------------------------------ */

/* The escape at *p ('\\'), *p moved past it. */
static int escape(const char **p, out *w)
{
    static const char *const classes[][2] = {
        {"d", "[0-9]"},
        {"D", "[^0-9]"},
        {"w", "[[:alnum:]_]"},
        {"W", "[^[:alnum:]_]"},
        {"s", "[[:space:]]"},
        {"S", "[^[:space:]]"},
        {"b", "\\b"},
        {"B", "\\B"},
        {"A", "^"},
        {"Z", "$"},
    };
    const char e = (*p)[1];
    if (!e) return refuse(w, "a trailing backslash");
    if ((unsigned char)e >= 128) { /* an escaped non-ASCII character: itself */
        (*p)++;
        return 0;
    }
    *p += 2;
    for (size_t i = 0; i < sizeof classes / sizeof *classes; i++)
        if (e == classes[i][0][0]) return put(w, classes[i][1]), 0;
    if (control(e)) return put_char(w, control(e)), 0;
    if (e >= '1' && e <= '9' && w->renumbered)
        return refuse(w, "a backreference \\%c after a (?:...) group (numbered otherwise here)", e);
    if (e >= '1' && e <= '9') return put_char(w, '\\'), put_char(w, e), 0;
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || e == '0')
        return refuse(w, "the escape \\%c (\\x, \\u, \\U, \\N and octal ones are not supported)",
                      e);
    literal(w, e);
    return 0;
}

/* The "(?" at *p: a plain group for (?: and (?P<name>, nothing for a
 * comment; *p moved past the prefix. */
static int extension(const char **p, out *w, int *depth)
{
    const char *q = *p + 2;
    if (*q == ':' || (q[0] == 'P' && q[1] == '<')) {
        w->renumbered |= *q == ':';
        q = *q == ':' ? q + 1 : strchr(q, '>');
        if (!q) return refuse(w, "an unterminated group name");
        *p = q + (q[0] == '>');
        put_char(w, '(');
        ++*depth;
        return 0;
    }
    if (*q == '#') {
        const char *end = strchr(q, ')');
        if (!end) return refuse(w, "an unterminated comment (?#");
        *p = end + 1;
        return 0;
    }
    if (*q == '=' || *q == '!' || *q == '<') return refuse(w, "a lookaround (?%c", *q);
    if (q[0] == 'P' && q[1] == '=') return refuse(w, "a named backreference (?P=");
    if (*q == '(') return refuse(w, "a conditional group (?(");
    return refuse(w, "an inline flag group (?%c", *q ? *q : ' ');
}

/* The length of the repeat "{m}", "{m,}", "{,n}" or "{m,n}" at p, or 0 (a
 * literal '{'). */
static size_t interval_len(const char *p)
{
    const size_t lo = strspn(p + 1, "0123456789");
    const int comma = p[1 + lo] == ',';
    const size_t hi = comma ? strspn(p + 2 + lo, "0123456789") : 0;
    return p[1 + lo + comma + hi] == '}' && lo + hi > 0 ? 2 + lo + comma + hi : 0;
}

/* The repeat at *p ({,n} as {0,n}), *p moved past it. */
static void interval(const char **p, out *w, size_t len)
{
    put_char(w, '{');
    if ((*p)[1] == ',') put_char(w, '0');
    memcpy(w->o, *p + 1, len - 1);
    w->o += len - 1;
    *p += len;
}

/* After a repeat: a lazy '?' dropped, a possessive '+' refused, and so is
 * another repeat (Python's "multiple repeat"). */
static int after_repeat(const char **p, out *w)
{
    if (**p == '?') (*p)++;
    else if (**p == '+') return refuse(w, "a possessive repeat");
    const char c = **p;
    if (c == '*' || c == '+' || c == '?' || (c == '{' && interval_len(*p)))
        return refuse(w, "a repeat of a repeat (Python's \"multiple repeat\")");
    return 0;
}

/* One token at *p. */
static int token(const char **p, out *w, int *depth)
{
    const char c = **p;
    if (c == '\\') return escape(p, w);
    if (c == '[') return bracket(p, w);
    if (c == '(' && (*p)[1] == '?') return extension(p, w, depth);
    const size_t len = c == '{' ? interval_len(*p) : 0;
    if (len) return interval(p, w, len), after_repeat(p, w);
    if ((unsigned char)c >= 128) { /* a UTF-8 sequence, grouped */
        put_char(w, '(');
        do put_char(w, *(*p)++);
        while (((unsigned char)**p & 0xC0) == 0x80);
        put_char(w, ')');
        return 0;
    }
    (*p)++;
    if (c == '(') ++*depth;
    if (c == ')' && --*depth < 0) return refuse(w, "an unbalanced ')'");
    if (c == '.') put(w, "[^\n]");
    else if (c == '{' || c == '}') literal(w, c);
    else put_char(w, c);
    return c == '*' || c == '+' || c == '?' ? after_repeat(p, w) : 0;
}

int optim__pyre_to_ere(const char *py, char **ere, char *why, size_t wn)
{
    *ere = NULL;
    /* "[^[:alnum:]_]" (13) is the longest a byte becomes outside [...], a
     * set at most "[^" and 128 characters and "]". */
    size_t sets = 0;
    for (const char *c = py; *c; c++) sets += *c == '[';
    char *buf = malloc(strlen(py) * 13 + sets * 132 + 1);
    if (!buf) return snprintf(why, wn, "out of memory"), -2;
    out w = {buf, why, wn, 0};
    int depth = 0, rc = 0;
    for (const char *p = py; *p && !rc;) rc = token(&p, &w, &depth);
    if (rc) {
        free(buf);
        return -1;
    }
    *w.o = '\0';
    *ere = buf;
    return 0;
}
