/* The autotune controller's learned state, kept on datasets (learned.h). */
#include <pthread.h>
#include <string.h>
#include "node.h"

/* One lock for every dataset's pointer: it is taken twice per iterator */
static pthread_mutex_t learned_mu = PTHREAD_MUTEX_INITIALIZER;

void sl__learned_free(sl__learned *l)
{
    if (l)
        sl__free(l, sizeof *l);
}

void sl__dataset_learned_keep(sl_dataset *ds, sl__learned *l)
{
    pthread_mutex_lock(&learned_mu);
    sl__learned *old = ds->learned;
    ds->learned = l;
    pthread_mutex_unlock(&learned_mu);
    sl__learned_free(old);
}

sl__learned *sl__dataset_learned_get(const sl_dataset *ds, int threads, int cpu_budget)
{
    sl__learned *copy = sl__alloc(sizeof *copy);
    if (!copy)
        return NULL; /* a cold start, nothing worse */
    bool have = false;
    pthread_mutex_lock(&learned_mu);
    const sl__learned *l = ds->learned;
    if (l && l->threads == threads && l->cpu_budget == cpu_budget) {
        memcpy(copy, l, sizeof *copy);
        have = true;
    }
    pthread_mutex_unlock(&learned_mu);
    if (!have) {
        sl__learned_free(copy);
        return NULL;
    }
    return copy;
}

bool sl__learned_knob_value(const sl__learned *l, uint64_t key, int kind, int64_t *value)
{
    for (int i = 0; l && i < l->nknobs; i++)
        if (l->knobs[i].key == key && l->knobs[i].kind == kind) {
            *value = l->knobs[i].value;
            return true;
        }
    return false;
}

const sl__learned_node *sl__learned_node_of(const sl__learned *l, uint64_t key)
{
    for (int i = 0; l && i < l->nnodes; i++)
        if (l->nodes[i].key == key)
            return &l->nodes[i];
    return NULL;
}
