/* group_by_window(key_fn, reduce_fn, window_size): tf.data's
 * group_by_window. Each element goes to the group of its key; a group
 * that reaches its window size becomes a window (a dataset of its
 * elements) that reduce_fn turns into a dataset whose elements come out
 * before the next input is taken. When the input ends, the groups left
 * are reduced in the order of their keys (tf.data's too).
 *
 * The groups hold elements, so a saved position holds counters: how many
 * input elements were taken and how many outputs given; restored, the
 * pass replays its input from the start through the same keys and
 * reductions and drops that many outputs. key_fn and reduce_fn must give
 * the same for the same input, as a map's function must. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/salts.h"
#include "../graph/sync.h"
#include "window_source.h"
#include "group_by_window.h"

typedef struct group {
    int64_t key;
    sl_element **els;
    int64_t n, cap;
} group;

typedef struct group_by_window_iter {
    sl__sync_iter u;
    int64_t pulled, emitted; /* saved: inputs taken, outputs given */
    bool input_done;
    uint64_t seed;
    group *groups; /* sorted by key */
    int ngroups, cap;
    sl_dataset *cur_ds; /* the reduction being read, and its iterator */
    sl__iter *cur;
    bool cur_typed; /* cur_ds's structure went to the node */
    int64_t windows; /* reductions made this pass: their iterators' keys */
} group_by_window_iter;

static void group_free(group *g)
{
    for (int64_t i = 0; i < g->n; i++)
        sl_element_release(g->els[i]);
    sl__free(g->els, (size_t)g->cap * sizeof *g->els);
}

static void drop_groups(group_by_window_iter *it)
{
    for (int i = 0; i < it->ngroups; i++)
        group_free(&it->groups[i]);
    sl__free(it->groups, (size_t)it->cap * sizeof *it->groups);
    it->groups = NULL;
    it->ngroups = it->cap = 0;
}

static void drop_current(group_by_window_iter *it)
{
    sl__iter_free(it->cur);
    sl_dataset_release(it->cur_ds);
    it->cur = NULL;
    it->cur_ds = NULL;
}

/* The group of key, made (in key order) when new; NULL: out of memory. */
static group *group_of(group_by_window_iter *it, int64_t key)
{
    int lo = 0, hi = it->ngroups;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (it->groups[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < it->ngroups && it->groups[lo].key == key)
        return &it->groups[lo];
    if (it->ngroups == it->cap) {
        int cap = it->cap ? 2 * it->cap : 8;
        group *g = sl__calloc((size_t)cap, sizeof *g);
        if (!g)
            return NULL;
        if (it->ngroups)
            memcpy(g, it->groups, (size_t)it->ngroups * sizeof *g);
        sl__free(it->groups, (size_t)it->cap * sizeof *it->groups);
        it->groups = g;
        it->cap = cap;
    }
    memmove(&it->groups[lo + 1], &it->groups[lo], (size_t)(it->ngroups - lo) * sizeof *it->groups);
    it->groups[lo] = (group){.key = key};
    it->ngroups++;
    return &it->groups[lo];
}

static int add(group *g, sl_element *el)
{
    if (g->n == g->cap) {
        int64_t cap = g->cap ? 2 * g->cap : 16;
        sl_element **e = sl__alloc((size_t)cap * sizeof *e);
        if (!e)
            return SL_ENOMEM;
        if (g->n)
            memcpy(e, g->els, (size_t)g->n * sizeof *e);
        sl__free(g->els, (size_t)g->cap * sizeof *g->els);
        g->els = e;
        g->cap = cap;
    }
    g->els[g->n++] = el;
    return 0;
}

/* Group i as a window through reduce_fn, read from now on; the group goes. */
static int reduce(group_by_window_iter *it, int i)
{
    const sl__group_by_window_ds *d = (const sl__group_by_window_ds *)it->u.base.ds;
    group g = it->groups[i];
    memmove(&it->groups[i], &it->groups[i + 1], (size_t)(it->ngroups - i - 1) * sizeof g);
    it->ngroups--;
    sl_dataset *window = sl__window_source(g.els, g.n, sl_dataset_structure(d->base.inputs[0]));
    sl__free(g.els, (size_t)g.cap * sizeof *g.els); /* (its elements went to the window) */
    if (!window)
        return SL_ENOMEM;
    sl_clear_error();
    sl_dataset *ds = d->reduce_fn(g.key, window, d->user);
    if (!ds) {
        char why[512];
        snprintf(why, sizeof why, "%s", sl__error_msg());
        return sl__set_error(sl_last_error_code() < 0 ? sl_last_error_code() : SL_ECALLBACK,
                             "%s: the reduce function returned no dataset for key %lld%s%s",
                             sl_dataset_name(&d->base), (long long)g.key, why[0] ? ": " : "",
                             why);
    }
    it->cur_typed = sl_dataset_structure(ds) != NULL; /* else at its first element */
    int rc = sl__dataset_adopt_structure(&d->base, ds);
    uint64_t key = sl__hash_u64(sl__hash_u64(it->u.base.key, SL__SALT_INTERLEAVE),
                                (uint64_t)it->windows++);
    if (rc == 0)
        rc = sl__iter_make_under(&it->u.base, ds, key,
                                 sl__hash_u64(it->u.base.stats_key, SL__SALT_INTERLEAVE),
                                 it->u.base.epoch, &it->cur);
    if (rc < 0) {
        sl_dataset_release(ds);
        return rc;
    }
    it->cur_ds = ds;
    return 0;
}

static int64_t window_size(const sl__group_by_window_ds *d, int64_t key)
{
    return d->size_fn ? d->size_fn(key, d->user) : d->window_size;
}

/* One input element into its group, reducing the group when full: 0, 1
 * at the input's end, or an error (an element's, after the policy). */
static int take_one(group_by_window_iter *it)
{
    sl__iter *base = &it->u.base;
    const sl__group_by_window_ds *d = (const sl__group_by_window_ds *)base->ds;
    sl_element *el;
    int rc = sl__iter_next(it->u.in, &el);
    if (rc == SL_EOF) {
        it->input_done = true;
        sl__sync_drop_input(&it->u, 0);
        return 1;
    }
    if (rc)
        return rc;
    sl_map_ctx ctx;
    sl__map_ctx_begin(&ctx, base->ds, it->seed, base->key, base->epoch, it->pulled++);
    sl_clear_error();
    int64_t key = 0, size = 0;
    rc = d->key_fn(&ctx, el, &key, d->user);
    sl__map_ctx_end(&ctx);
    if (rc == 0 && (size = window_size(d, key)) < 1)
        rc = sl__set_error(size < 0 ? (int)size : SL_EINVAL, "window size %lld for key %lld",
                           (long long)size, (long long)key);
    group *g = rc == 0 ? group_of(it, key) : NULL;
    if (rc == 0 && !g)
        rc = SL_ENOMEM;
    if (rc < 0) {
        if (!sl__error_msg()[0])
            sl__set_error(rc, "key function failed: %s", sl_strerror(rc));
        sl__element_error_prefix(el);
        sl__error_prefix(sl_dataset_name(base->ds));
        sl_element_release(el);
        if (rc == SL_ENOMEM)
            return rc;
        return it->u.replaying ? 0 : sl__policy(base, rc); /* skipped before: again */
    }
    if ((rc = add(g, el)) < 0) {
        sl_element_release(el);
        return rc;
    }
    return g->n >= size ? reduce(it, (int)(g - it->groups)) : 0;
}

/* The next output, however it comes: from the reduction being read, or by
 * taking input until a window is full, or by reducing what is left. */
static int produce(group_by_window_iter *it, sl_element **out)
{
    for (;;) {
        if (it->cur) {
            int rc = sl__iter_next(it->cur, out);
            if (rc == 0 && !it->cur_typed) {
                it->cur_typed = true;
                if ((rc = sl__dataset_adopt_structure(it->u.base.ds, it->cur_ds)) < 0)
                    sl_element_release(*out);
            }
            if (rc != SL_EOF)
                return rc;
            drop_current(it);
        }
        int rc;
        if (!it->input_done)
            rc = take_one(it);
        else if (it->ngroups)
            rc = reduce(it, 0);
        else
            return SL_EOF;
        if (rc < 0)
            return rc;
    }
}

static int group_by_window_next(sl__iter *base, sl_element **out)
{
    group_by_window_iter *it = (group_by_window_iter *)base;
    int rc = produce(it, out);
    if (rc == 0)
        it->emitted++;
    return rc;
}

static int group_by_window_replay(sl__sync_iter *u)
{
    sl_element *el;
    int rc = group_by_window_next(&u->base, &el);
    if (rc == 0)
        sl_element_release(el);
    return rc;
}

static int group_by_window_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    ((group_by_window_iter *)u)->seed = sl__node_seed(&u->base, -1);
    return 0;
}

static void group_by_window_fini(sl__sync_iter *u)
{
    group_by_window_iter *it = (group_by_window_iter *)u;
    drop_current(it);
    drop_groups(it);
}

static int64_t group_by_window_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]) == 0 ? 0 : SL_UNKNOWN;
}

static uint64_t group_by_window_fingerprint(const sl_dataset *ds, uint64_t h)
{
    /* the name stands for the functions, user_hash for their settings */
    const sl__group_by_window_ds *d = (const sl__group_by_window_ds *)ds;
    return sl__hash_u64(sl__hash_u64(h, (uint64_t)d->window_size), d->user_hash);
}

static void group_by_window_destroy(sl_dataset *ds)
{
    sl__group_by_window_ds *d = (sl__group_by_window_ds *)ds;
    if (d->user_free)
        d->user_free(d->user);
}

static const sl__field group_by_window_state[] = {
    SL__FIELD_I64(group_by_window_iter, pulled, 0, INT64_MAX),
    SL__FIELD_I64(group_by_window_iter, emitted, 0, INT64_MAX),
};

static const sl__sync_def group_by_window_def = {
    .node = {.kind = "group_by_window", .make_iter = sl__sync_make,
             .cardinality = group_by_window_cardinality,
             .fingerprint = group_by_window_fingerprint, .destroy = group_by_window_destroy},
    .iter = {SL__SYNC_ITER(group_by_window_next)},
    .iter_size = sizeof(group_by_window_iter),
    SL__SYNC_STATE(group_by_window_state),
    SL__SYNC_REPLAY(group_by_window_replay, "emitted", NULL),
    .start = group_by_window_start,
    .fini = group_by_window_fini,
};

sl_dataset *sl__group_by_window(sl_dataset *in, const char *name, sl_key_fn key_fn,
                                sl_window_reduce_fn reduce_fn, int64_t window_size,
                                sl_window_size_fn size_fn, void *user, void (*user_free)(void *))
{
    sl__group_by_window_ds *d =
        (sl__group_by_window_ds *)sl__dataset_new(&group_by_window_def.node, sizeof *d, in);
    if (!d) {
        if (user_free)
            user_free(user);
        return NULL;
    }
    d->user = user;
    d->user_free = user_free;
    if (!key_fn || !reduce_fn || (window_size < 1) == !size_fn)
        return sl__dataset_fail(&d->base, SL_EINVAL, "group_by_window: NULL function, or "
                                "neither or both of window_size >= 1 and a size function");
    if (sl__dataset_set_name(&d->base, name) < 0)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "group_by_window: out of memory");
    d->key_fn = key_fn;
    d->reduce_fn = reduce_fn;
    d->window_size = window_size;
    d->size_fn = size_fn;
    return &d->base;
}

SL_API sl_dataset *sl_group_by_window(sl_dataset *in, const char *name, sl_key_fn key_fn,
                                      sl_window_reduce_fn reduce_fn, int64_t window_size,
                                      sl_window_size_fn size_fn, void *user)
{
    return sl__group_by_window(in, name, key_fn, reduce_fn, window_size, size_fn, user, NULL);
}
