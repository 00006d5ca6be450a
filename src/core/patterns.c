/* Variable-name patterns: POSIX extended regular expressions searched in a
 * name (re.search), with their sources kept for get_config. One
 * implementation for Keras 3's exclude_from_weight_decay, TF Addons' AdamW
 * and LAMB. */
#define _POSIX_C_SOURCE 200809L
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "optim/optimizer_class.h"

struct optim_name_patterns {
    size_t n;
    char **src; /* n strings, NULL-terminated */
    regex_t *re;
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

static int add_one(optim_name_patterns *p, const char *pattern, const char *what, optim_error *err)
{
    size_t i = p->n;
    if (!pattern) return optim__err(err, OPTIM_EINVAL, "%s[%zu] is NULL", what, i);
    if (!(p->src[i] = optim__strdup(pattern))) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    int e = regcomp(&p->re[i], pattern, REG_EXTENDED | REG_NOSUB);
    if (e) {
        char why[160];
        regerror(e, &p->re[i], why, sizeof why);
        free(p->src[i]);
        p->src[i] = NULL;
        return optim__err(err, OPTIM_EINVAL,
                          "%s[%zu] ('%.200s') is not a valid regular expression: %s", what,
                          i, pattern, why);
    }
    p->n++;
    return OPTIM_OK;
}

int optim_name_patterns_compile(optim_name_patterns **out, const char *const *list, size_t n,
                                const char *what, optim_error *err)
{
    if (!what) what = "name patterns";
    if (!out) return optim__err(err, OPTIM_EINVAL, "%s: out is NULL", what);
    *out = NULL;
    if (n && !list) return optim__err(err, OPTIM_EINVAL, "%s: list is NULL", what);
    optim_name_patterns *p = calloc(1, sizeof *p);
    if (p) {
        p->src = calloc(n + 1, sizeof *p->src);
        p->re = calloc(n + 1, sizeof *p->re);
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

int optim_name_patterns_match(const optim_name_patterns *p, const char *name)
{
    for (size_t i = 0; p && name && i < p->n; i++)
        if (regexec(&p->re[i], name, 0, NULL, 0) == 0) return 1;
    return 0;
}

const char *const *optim_name_patterns_sources(const optim_name_patterns *p)
{
    static const char *const none[] = {NULL};
    return p ? (const char *const *)p->src : none;
}
