/*
 * The registry of per-node statistics entries and knobs (stats.h).
 *
 * Entries are created under the tree lock the first time a node key is
 * made and live until the tree goes, so counters and learned knob values
 * carry over from one pass to the next. Readers (the snapshot, the
 * controller) walk the list and read knob descriptions under the same lock;
 * the counters themselves are atomics read without it.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "node.h"

/* The entry and what registering knobs on it needs: the lock is the tree's,
 * and sl__stats_knob gets only the entry. */
typedef struct entry {
    sl__node_stats ns;
    sl__tree *tree;
} entry;

static entry *entry_of(sl__node_stats *ns)
{
    return (entry *)((char *)ns - offsetof(entry, ns));
}

sl__node_stats *sl__stats_node(sl__tree *t, uint64_t key, const char *name, int kind,
                               int depth)
{
    pthread_mutex_lock(&t->mu);
    sl__node_stats **at = &t->stats_head, *ns = NULL;
    for (; *at; at = &(*at)->next)
        if ((*at)->key == key) {
            ns = *at;
            break;
        }
    if (ns) {
        /* every node is registered generically when made; the node's own
         * call then says what kind it is */
        if (ns->kind == SL__NODE_OTHER)
            ns->kind = kind;
    } else {
        entry *e = sl__calloc(1, sizeof *e);
        if (e) {
            e->tree = t;
            ns = &e->ns;
            ns->key = key;
            ns->kind = kind;
            ns->depth = depth;
            snprintf(ns->name, sizeof ns->name, "%s", name ? name : "?");
            *at = ns; /* appended: registration order */
        }
    }
    pthread_mutex_unlock(&t->mu);
    return ns;
}

const char *sl__knob_name(int kind)
{
    static const char *const names[] = {
#define SL__KNOB_NAME(kind, name, what) name,
        SL__KNOBS(SL__KNOB_NAME)
#undef SL__KNOB_NAME
    };
    return kind >= 0 && kind < SL__KNOB_KIND_COUNT ? names[kind] : "?";
}

sl__knob *sl__stats_knob(sl__node_stats *ns, int kind, int64_t min, int64_t max,
                         int64_t initial, bool autotune)
{
    sl__tree *t = entry_of(ns)->tree;
    sl__knob *k = NULL;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < ns->nknobs && !k; i++)
        if (ns->knobs[i].kind == kind)
            k = &ns->knobs[i];
    if (k) {
        /* the learned value stays, within this pass's bounds */
        k->min = min;
        k->max = max;
        k->autotune = autotune;
        int64_t v = sl__knob_get(k);
        if (!autotune)
            v = initial;
        v = v < min ? min : v > max ? max : v;
        atomic_store_explicit(&k->value, v, memory_order_relaxed);
    } else if (ns->nknobs < SL__MAX_KNOBS) {
        k = &ns->knobs[ns->nknobs];
        k->name = sl__knob_name(kind);
        k->kind = kind;
        k->min = min;
        k->max = max;
        k->autotune = autotune;
        atomic_init(&k->value, initial < min ? min : initial > max ? max : initial);
        ns->nknobs++;
    }
    pthread_mutex_unlock(&t->mu);
    return k;
}

sl__knob *sl__iter_knob(sl__iter *it, int node_kind, int knob_kind, int64_t requested,
                        int64_t auto_start, int64_t auto_max, int64_t fixed)
{
    bool autotune = requested == SL_AUTOTUNE && it->tree->autotune;
    int64_t initial = requested != SL_AUTOTUNE ? requested : autotune ? auto_start : fixed;
    int64_t max = autotune && auto_max > initial ? auto_max : initial;
    int64_t learned;
    if (autotune && sl__learned_knob_value(it->tree->learned, it->stats_key, knob_kind, &learned))
        initial = learned < 1 ? 1 : learned > max ? max : learned; /* an earlier iterator's */
    sl__node_stats *ns =
        sl__stats_node(it->tree, it->stats_key, sl_dataset_name(it->ds), node_kind, it->depth);
    sl__knob *k = ns ? sl__stats_knob(ns, knob_kind, 1, max, initial, autotune) : NULL;
    if (!k)
        sl__set_error(SL_EINTERNAL, "%s: cannot register its %s knob", sl_dataset_name(it->ds),
                      sl__knob_name(knob_kind));
    return k;
}

void sl__stats_fini(sl__tree *t)
{
    while (t->stats_head) {
        sl__node_stats *ns = t->stats_head;
        t->stats_head = ns->next;
        sl__free(entry_of(ns), sizeof(entry));
    }
}
