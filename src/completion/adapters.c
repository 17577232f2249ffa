/* adapters.c - the adapter names' table (adapters.h). */
#include "completion/adapters.h"

#include <string.h>

void hearth_adapter_names_init(hearth_adapter_names *t) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
}

void hearth_adapter_names_destroy(hearth_adapter_names *t) { pthread_mutex_destroy(&t->mu); }

static int find_locked(const hearth_adapter_names *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].name, name)) return i;
    return -1;
}

hearth_status hearth_adapter_name_check(const char *name, hearth_err *err) {
    const size_t len = strlen(name);
    if (!len) return hearth_err_set(err, HEARTH_EINVAL, "an adapter's name is empty");
    if (len >= HEARTH_ADAPTER_NAME_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "an adapter's name has at most %d bytes, not %zu",
                              HEARTH_ADAPTER_NAME_MAX - 1, len);
    return HEARTH_OK;
}

hearth_status hearth_adapter_names_add(hearth_adapter_names *t, int id, const char *name, hearth_err *err) {
    hearth_status st = hearth_adapter_name_check(name, err);
    if (st != HEARTH_OK) return st;
    const size_t len = strlen(name);
    pthread_mutex_lock(&t->mu);
    if (find_locked(t, name) >= 0) {
        st = hearth_err_set(err, HEARTH_EINVAL, "the LoRA adapter '%s' has already been loaded", name);
    } else if (t->n == HEARTH_MAX_LORA) {
        st = hearth_err_set(err, HEARTH_ERANGE, "at most %d LoRA adapters are loaded at once", HEARTH_MAX_LORA);
    } else {
        t->e[t->n].id = id; /* len < HEARTH_ADAPTER_NAME_MAX: checked */
        memcpy(t->e[t->n].name, name, len + 1);
        t->n++;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

int hearth_adapter_names_replace(hearth_adapter_names *t, const char *name, int id) {
    pthread_mutex_lock(&t->mu);
    const int i = find_locked(t, name), old = i >= 0 ? t->e[i].id : 0;
    if (i >= 0) t->e[i].id = id;
    pthread_mutex_unlock(&t->mu);
    return old;
}

int hearth_adapter_names_remove(hearth_adapter_names *t, const char *name) {
    pthread_mutex_lock(&t->mu);
    int i = find_locked(t, name), id = i >= 0 ? t->e[i].id : 0;
    if (i >= 0) {
        memmove(&t->e[i], &t->e[i + 1], sizeof t->e[0] * (size_t)(t->n - i - 1));
        t->n--;
    }
    pthread_mutex_unlock(&t->mu);
    return id;
}

int hearth_adapter_names_find(hearth_adapter_names *t, const char *name, char out[HEARTH_ADAPTER_NAME_MAX]) {
    pthread_mutex_lock(&t->mu);
    int i = find_locked(t, name), id = i >= 0 ? t->e[i].id : 0;
    if (i >= 0 && out) memcpy(out, t->e[i].name, HEARTH_ADAPTER_NAME_MAX);
    pthread_mutex_unlock(&t->mu);
    return id;
}

int hearth_adapter_names_list(hearth_adapter_names *t, hearth_adapter_name *out, int cap) {
    pthread_mutex_lock(&t->mu);
    int n = t->n < cap ? t->n : cap;
    memcpy(out, t->e, sizeof *out * (size_t)n);
    pthread_mutex_unlock(&t->mu);
    return n;
}
