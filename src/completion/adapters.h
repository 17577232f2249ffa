/* adapters.h - the names that select LoRA adapters (a request's "model"),
 * which a server may load and unload while it serves (vLLM's
 * /v1/load_lora_adapter): a small table under a mutex, read by every request
 * and changed by the admin routes. */
#ifndef HEARTH_COMPLETION_ADAPTERS_H
#define HEARTH_COMPLETION_ADAPTERS_H

#include "core/status.h"
#include "model/model.h"

#include <pthread.h>

#define HEARTH_ADAPTER_NAME_MAX 256 /* with its NUL */

typedef struct {
    int id; /* the engine's (hearth_model_add_lora) */
    char name[HEARTH_ADAPTER_NAME_MAX];
} hearth_adapter_name;

typedef struct {
    pthread_mutex_t mu;
    hearth_adapter_name e[HEARTH_MAX_LORA]; /* in load order */
    int n;
} hearth_adapter_names;

void hearth_adapter_names_init(hearth_adapter_names *t);
void hearth_adapter_names_destroy(hearth_adapter_names *t);
/* EINVAL when name cannot be an adapter's (empty, or HEARTH_ADAPTER_NAME_MAX bytes or more). */
hearth_status hearth_adapter_name_check(const char *name, hearth_err *err);
/* Add name for id: EINVAL when the name fails the check or is taken, ERANGE when the table is full. */
hearth_status hearth_adapter_names_add(hearth_adapter_names *t, int id, const char *name, hearth_err *err);
/* Point name at id instead: the id it had, 0 when no adapter has that name (nothing changed then). */
int hearth_adapter_names_replace(hearth_adapter_names *t, const char *name, int id);
/* Remove name: its id, 0 when no adapter has that name. */
int hearth_adapter_names_remove(hearth_adapter_names *t, const char *name);
/* The id of name (0: none); with out, the name copied there as the table holds it. */
int hearth_adapter_names_find(hearth_adapter_names *t, const char *name, char out[HEARTH_ADAPTER_NAME_MAX]);
/* A copy of the table (up to cap entries), in load order: how many. */
int hearth_adapter_names_list(hearth_adapter_names *t, hearth_adapter_name *out, int cap);

#endif
