/* Checkpoints of the main job (tools/job.h): what the tool adds to the
 * library's checkpoint (its model and data settings, the history so far)
 * and resuming from one. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

/* The settings that must match for a run to continue: option name, JSON
 * key, and where the value lives (number, or the hidden list). The
 * LearningRateScheduler's factor is one; EarlyStopping starts afresh, as
 * after Keras's BackupAndRestore. */
typedef struct setting {
    const char *option, *key;
    long long *i;
    double *d;
    tool_int_list *list;
} setting;

#define N_SETTINGS 7
static void settings_of(job_config *c, setting *s)
{
    setting all[N_SETTINGS] = {
        {"--hidden", "hidden", NULL, NULL, &c->hidden},
        {"--dropout", "dropout", NULL, &c->dropout, NULL},
        {"--seed", "seed", &c->seed, NULL, NULL},
        {"--batch-size", "batch_size", &c->batch, NULL, NULL},
        {"--validation-split", "validation_split", NULL, &c->validation_split, NULL},
        {"--limit", "limit", &c->limit, NULL, NULL},
        {"--lr-decay", "lr_decay", NULL, &c->lr_decay, NULL},
    };
    memcpy(s, all, sizeof all);
}

static cJSON *row_json(const job_row *r)
{
    double v[6] = {(double)r->epoch, r->loss,         r->accuracy,
                   r->val_loss,      r->val_accuracy, r->seconds};
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < 6; i++)
        cJSON_AddItemToArray(a, isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull());
    return a;
}

char *optim_job_extra_json(const job_config *c, const job_result *res)
{
    job_config copy = *c;
    setting s[N_SETTINGS];
    settings_of(&copy, s);
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < N_SETTINGS; i++) {
        if (s[i].list) {
            cJSON *a = cJSON_AddArrayToObject(o, s[i].key);
            for (size_t k = 0; a && k < s[i].list->n; k++)
                cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s[i].list->v[k]));
        } else cJSON_AddNumberToObject(o, s[i].key, s[i].i ? (double)*s[i].i : *s[i].d);
    }
    cJSON *rows = cJSON_AddArrayToObject(o, "history");
    for (size_t k = 0; rows && k < res->n; k++) cJSON_AddItemToArray(rows, row_json(&res->rows[k]));
    cJSON_AddNumberToObject(o, "steps", (double)res->steps);
    cJSON_AddNumberToObject(o, "step_seconds_total", res->step_seconds);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}

/* Whether d is a whole number that converts to long long exactly (|d| <=
 * 2^53): checkpoint.json's numbers are checked before any cast. */
static int whole(double d) { return isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0; }

/* The checkpoint's value of one setting into c; 1 after a message if the
 * command line gave another. */
static int take_setting(const char *cmd, const char *dir, const cJSON *extra, const setting *s,
                        const tool_option *o)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(extra, s->key);
    char have[160] = "", want[160] = "";
    tool_int_list l = {{0}, 0};
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (s->list) {
        const cJSON *e;
        cJSON_ArrayForEach(e, v) if (l.n < TOOL_LIST_MAX && cJSON_IsNumber(e) &&
                                     whole(e->valuedouble)) l.v[l.n++] = (int64_t)e->valuedouble;
        for (size_t k = 0; k < l.n; k++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k ? "," : "",
                     (long long)l.v[k]);
        for (size_t k = 0; k < s->list->n; k++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%lld", k ? "," : "",
                     (long long)s->list->v[k]);
    } else {
        snprintf(want, sizeof want, "%.17g", d);
        snprintf(have, sizeof have, "%.17g", s->i ? (double)*s->i : *s->d);
    }
    if ((!s->list && !cJSON_IsNumber(v)) || (s->list && cJSON_GetArraySize(v) != (int)l.n) ||
        (s->i && !whole(d)))
        return optim_tool_fail(cmd, "--resume %s: the checkpoint has no valid \"%s\"", dir, s->key);
    if (o && o->given && strcmp(have, want) != 0)
        return optim_tool_fail(
            cmd, "--resume %s: the checkpoint is of a run with %s %s, this one asks for %s %s", dir,
            s->option, want, s->option, have);
    if (s->list) *s->list = l;
    else if (s->i) *s->i = (long long)d;
    else *s->d = d;
    return 0;
}

int optim_job_resume_config(const char *cmd, const char *dir, job_config *c,
                            const tool_option *opts, size_t n_opts, optim_checkpoint **ck)
{
    optim_error err;
    if (optim_checkpoint_read(dir, ck, &err)) return optim_tool_fail(cmd, "--resume: %s", err.msg);
    cJSON *extra = cJSON_Parse(optim_checkpoint_extra_json(*ck));
    setting s[N_SETTINGS];
    settings_of(c, s);
    int rc = 0;
    for (int i = 0; i < N_SETTINGS && !rc; i++) {
        const tool_option *o = NULL;
        for (size_t k = 0; k < n_opts && !o; k++)
            if (strcmp(opts[k].name, s[i].option) == 0) o = &opts[k];
        rc = take_setting(cmd, dir, extra, &s[i], o);
    }
    cJSON_Delete(extra);
    if (rc) {
        optim_checkpoint_free(*ck);
        *ck = NULL;
    }
    return rc;
}

/* "Lookahead>Adam": the class chain, outermost first. */
static void chain(const optim_optimizer *o, char *buf, size_t n)
{
    buf[0] = '\0';
    for (; o; o = optim_wrapper_inner(o))
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? ">" : "",
                 optim_class_of(o)->name);
}

static double num(const cJSON *a, int i)
{
    const cJSON *v = cJSON_GetArrayItem(a, i);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The history and step counts kept in the checkpoint, into res. */
static int take_history(const char *cmd, const optim_checkpoint *ck, job_result *res)
{
    cJSON *extra = cJSON_Parse(optim_checkpoint_extra_json(ck));
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(extra, "history"), *r;
    int n = cJSON_GetArraySize(rows);
    res->rows = calloc((size_t)n + 1, sizeof *res->rows);
    if (!res->rows) {
        cJSON_Delete(extra);
        return optim_tool_fail(cmd, "out of memory");
    }
    cJSON_ArrayForEach(r, rows) res->rows[res->n++] =
        (job_row){whole(num(r, 0)) ? (int64_t)num(r, 0) : -1,
                  num(r, 1),
                  num(r, 2),
                  num(r, 3),
                  num(r, 4),
                  num(r, 5)};
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(extra, "steps");
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(extra, "step_seconds_total");
    double ns = cJSON_IsNumber(steps) ? steps->valuedouble : 0;
    if (!whole(ns) || ns < 0) {
        cJSON_Delete(extra);
        return optim_tool_fail(cmd,
                               "--resume: the checkpoint's \"steps\" is %g, expected a whole "
                               "number >= 0",
                               ns);
    }
    res->steps = (int64_t)ns;
    res->step_seconds =
        res->steps && cJSON_IsNumber(secs) ? secs->valuedouble / (double)res->steps : 0;
    cJSON_Delete(extra);
    if ((int64_t)res->n != optim_checkpoint_epoch(ck))
        return optim_tool_fail(
            cmd, "--resume: the checkpoint has %zu epochs of history for %lld epochs done", res->n,
            (long long)optim_checkpoint_epoch(ck));
    return 0;
}

/* The first difference between two optimizer configs, as "KEY A, B", into
 * msg ("" when they agree). learning_rate is skipped when a callback
 * changes it (--lr-decay): the checkpoint then holds the changed rate. */
static void config_diff(optim_optimizer *a, optim_optimizer *b, int skip_lr, char *msg, size_t n)
{
    char *ta = optim_serialize(a), *tb = optim_serialize(b);
    cJSON *ja = cJSON_Parse(ta ? ta : ""), *jb = cJSON_Parse(tb ? tb : "");
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(ja, "config"),
                *cb = cJSON_GetObjectItemCaseSensitive(jb, "config"), *e;
    msg[0] = '\0';
    cJSON_ArrayForEach(e, ca)
    {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(cb, e->string);
        if (skip_lr && strcmp(e->string, "learning_rate") == 0) continue;
        char *va = cJSON_PrintUnformatted(e), *vb = o ? cJSON_PrintUnformatted(o) : NULL;
        if (!msg[0] && (!vb || !va || strcmp(va, vb) != 0))
            snprintf(msg, n, "%s %s, --optimizer's is %s", e->string, va ? va : "?",
                     vb ? vb : "absent");
        free(va), free(vb);
    }
    if (!msg[0] &&
        (!ta || !tb || cJSON_GetArraySize(ca) != cJSON_GetArraySize(cb) ||
         !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(ja, "module"),
                        cJSON_GetObjectItemCaseSensitive(jb, "module"), 1)))
        snprintf(msg, n, "config %.300s, --optimizer's is %.300s", ta ? ta : "?", tb ? tb : "?");
    cJSON_Delete(ja), cJSON_Delete(jb);
    optim_free(ta), optim_free(tb);
}

int optim_job_resume_state(const char *cmd, const optim_checkpoint *ck, const job_config *c,
                           const char *opt_text, int64_t features, optim_optimizer **opt,
                           optim_model **m, job_result *res)
{
    optim_optimizer *given = NULL;
    optim_error err;
    *m = NULL;
    if (opt_text && optim_job_optimizer(cmd, "--optimizer", opt_text, &given)) return 1;
    if (optim_job_optimizer(cmd, "--resume: the checkpoint's optimizer",
                            optim_checkpoint_optimizer_json(ck), opt)) {
        optim_destroy(given);
        return 1;
    }
    char a[256], b[256], diff[800] = "";
    chain(*opt, a, sizeof a);
    chain(given ? given : *opt, b, sizeof b);
    if (given && !strcmp(a, b)) config_diff(*opt, given, c->lr_decay != 0, diff, sizeof diff);
    optim_destroy(given);
    int rc = strcmp(a, b)
        ? optim_tool_fail(
              cmd, "--resume: the checkpoint was written with optimizer %s, --optimizer is %s", a,
              b)
        : diff[0] ? optim_tool_fail(cmd, "--resume: the checkpoint's optimizer has %s", diff)
                  : 0;
    if (!rc) rc = optim_job_model(cmd, c, features, *opt, m);
    if (!rc && optim_checkpoint_restore(ck, *m, *opt, &err))
        rc = optim_tool_fail(cmd, "--resume: %s", err.msg);
    if (!rc) rc = take_history(cmd, ck, res);
    if (rc) {
        optim_model_destroy(*m);
        optim_destroy(*opt);
        *m = NULL, *opt = NULL;
        optim_job_result_free(res);
    }
    return rc;
}
