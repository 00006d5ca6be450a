/* Keras's `logs` dicts and the History they make up. */
#include "nn/internal.h"

#include <stdlib.h>
#include <string.h>

int optim_logs_get(const optim_logs *logs, const char *name, double *value)
{
    if (!logs || !name) return OPTIM_EINVAL;
    for (size_t i = 0; i < logs->n && i < OPTIM_LOGS_MAX; i++)
        if (strcmp(logs->names[i], name) == 0) {
            if (value) *value = logs->values[i];
            return OPTIM_OK;
        }
    return OPTIM_ENOTFOUND;
}

int optim_logs_set(optim_logs *logs, const char *name, double value)
{
    if (!logs || !name || !*name || strlen(name) >= OPTIM_LOGS_NAME_MAX || logs->n > OPTIM_LOGS_MAX)
        return OPTIM_EINVAL;
    for (size_t i = 0; i < logs->n; i++)
        if (strcmp(logs->names[i], name) == 0) {
            logs->values[i] = value;
            return OPTIM_OK;
        }
    if (logs->n == OPTIM_LOGS_MAX) return OPTIM_ERANGE;
    strcpy(logs->names[logs->n], name);
    logs->values[logs->n++] = value;
    return OPTIM_OK;
}

void optim_history_free(optim_history *h)
{
    if (!h) return;
    free(h->epoch);
    free(h->logs);
    memset(h, 0, sizeof *h);
}
