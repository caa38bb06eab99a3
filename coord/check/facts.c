/* The facts record (see facts.h): freeing it and appending to its lists.
 * Its encoding is in codec.c, the I/O that fills it in gather.c. */
#include "facts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grow an array by one element (zeroed); NULL when out of memory. */
static void *grow(void **arr, int *n, size_t elem)
{
    void *p = realloc(*arr, ((size_t)*n + 1) * elem);
    if (!p)
        return NULL;
    *arr = p;
    char *e = (char *)p + (size_t)*n * elem;
    memset(e, 0, elem);
    (*n)++;
    return e;
}

void ec_check_facts_clear(ec_check_facts_t *f)
{
    if (!f)
        return;
    int saved = errno;
    for (int i = 0; i < f->nenv; i++) {
        free(f->env[i].name);
        free(f->env[i].value);
    }
    free(f->env);
    free(f->ports);
    free(f->gpus_flag);
    free(f->ifaces);
    free(f->gpus);
    free(f->p2p);
    free(f->probes);
    memset(f, 0, sizeof(*f));
    errno = saved;
}

int ec_check_facts_add_env(ec_check_facts_t *f, const char *name, const char *value)
{
    char *n = strdup(name), *v = strdup(value);
    ec_check_env_t *e = n && v ? grow((void **)&f->env, &f->nenv, sizeof(*e)) : NULL;
    if (!e) {
        free(n);
        free(v);
        return EC_ENOMEM;
    }
    e->name = n;
    e->value = v;
    return 0;
}

int ec_check_facts_add_iface(ec_check_facts_t *f, const char *name, const char *addr, int up)
{
    ec_check_iface_t *e = grow((void **)&f->ifaces, &f->nifaces, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->addr, sizeof(e->addr), "%s", addr);
    e->up = up;
    return 0;
}

int ec_check_facts_add_probe(ec_check_facts_t *f, const ec_check_probe_t *p)
{
    ec_check_probe_t *e = grow((void **)&f->probes, &f->nprobes, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    *e = *p;
    return 0;
}

int ec_check_facts_add_gpu(ec_check_facts_t *f, const ec_check_gpu_t *g)
{
    ec_check_gpu_t *e = grow((void **)&f->gpus, &f->ngpus, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    *e = *g;
    return 0;
}

int ec_check_facts_add_p2p(ec_check_facts_t *f, const ec_check_p2p_t *p)
{
    ec_check_p2p_t *e = grow((void **)&f->p2p, &f->np2p, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    *e = *p;
    return 0;
}

const char *ec_check_facts_env(const ec_check_facts_t *f, const char *name)
{
    for (int i = 0; i < f->nenv; i++)
        if (!strcmp(f->env[i].name, name))
            return f->env[i].value;
    return NULL;
}

