/* The one-input node skeleton (sync.h). */
#include <stdio.h>
#include <string.h>
#include "../core/le.h"
#include "sync.h"

#define MAX_STATE 16

static int64_t field_value(const void *obj, const sl__field *f)
{
    const char *p = (const char *)obj + f->offset;
    int64_t v;
    if (f->is_bool)
        return *(const bool *)p;
    memcpy(&v, p, sizeof v);
    return v;
}

void sl__fields_get(const void *obj, const sl__field *f, int n, int64_t *out)
{
    for (int i = 0; i < n; i++)
        out[i] = field_value(obj, &f[i]);
}

static void set_fields(void *obj, const sl__field *f, int n, const int64_t *v)
{
    char *p = obj;
    for (int i = 0; i < n; i++) {
        if (f[i].is_bool)
            *(bool *)(p + f[i].offset) = v[i] != 0;
        else
            memcpy(p + f[i].offset, &v[i], sizeof v[i]);
    }
}

int sl__fields_restore(const sl__iter *it, void *obj, const sl__field *f, int n)
{
    int64_t v[MAX_STATE];
    if (n > MAX_STATE)
        return sl__set_error(SL_EINTERNAL, "%s: %d saved fields, at most %d",
                             sl_dataset_name(it->ds), n, MAX_STATE);
    int rc = sl__iter_restored(it, n, v);
    if (rc <= 0)
        return rc;
    for (int i = 0; i < n; i++) {
        int bad = sl__state_range(it, f[i].name, v[i], f[i].lo, f[i].hi);
        if (bad)
            return bad;
    }
    set_fields(obj, f, n, v);
    return 1;
}

/* The def that made an iterator: its iterator ops are the def's. */
static const sl__sync_def *def_of_iter(const sl__iter *it)
{
    return (const sl__sync_def *)((const char *)it->ops - offsetof(sl__sync_def, iter));
}

static bool replays(const sl__sync_def *def, const sl_dataset *ds)
{
    return def->replay && (!def->replays || def->replays(ds));
}

static int field_index(const sl__sync_def *def, const char *name)
{
    for (int i = 0; name && i < def->nstate; i++)
        if (!strcmp(def->state[i].name, name))
            return i;
    return -1;
}

/* "pulled 12, done 1" */
static void describe(char *buf, size_t cap, const sl__sync_def *def, const int64_t *v)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < def->nstate && n < cap; i++) {
        int k = snprintf(buf + n, cap - n, "%s%s %lld", i ? ", " : "", def->state[i].name,
                         (long long)v[i]);
        n += k > 0 ? (size_t)k : 0;
    }
}

/* Rebuilds a restored iterator's state by running its pass again up to
 * the saved fields (sl__sync_def.replay). */
static int replay(sl__sync_iter *it, const sl__sync_def *def, const int64_t *saved)
{
    int until = field_index(def, def->replay_until), done = field_index(def, def->replay_done);
    if (until < 0)
        return sl__set_error(SL_EINTERNAL, "%s: no field %s to replay to",
                             sl_dataset_name(it->base.ds), def->replay_until);
    int rc = it->in ? 0 : sl__iter_make_input(&it->base, 0, it->base.epoch, &it->in);
    it->replaying = true;
    while (rc == 0 && field_value(it, &def->state[until]) < saved[until])
        rc = def->replay(it);
    if (rc == 0 && done >= 0 && saved[done] && !field_value(it, &def->state[done]))
        rc = def->replay(it);
    it->replaying = false;
    int64_t now[MAX_STATE] = {0};
    sl__fields_get(it, def->state, def->nstate, now);
    char had[256], gives[256];
    describe(had, sizeof had, def, saved);
    describe(gives, sizeof gives, def, now);
    if (rc < 0 && rc != SL_EOF) {
        char why[512];
        snprintf(why, sizeof why, "%s", sl__error_msg());
        return sl__set_error(rc, "saved state: %s had %s; replaying its input failed at %s: %s",
                             sl_dataset_name(it->base.ds), had, gives, why);
    }
    if (memcmp(now, saved, (size_t)def->nstate * sizeof *now))
        return sl__set_error(SL_EMISMATCH, "saved state: %s had %s; replaying its input gives "
                             "%s (the input changed?)", sl_dataset_name(it->base.ds), had, gives);
    return 0;
}

int sl__sync_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                   sl__iter **out)
{
    return sl__sync_make_as(sl__sync_def_of(ds), ds, tree, key, epoch, out);
}

int sl__sync_make_as(const sl__sync_def *def, const sl_dataset *ds, sl__tree *tree,
                      uint64_t key, int64_t epoch, sl__iter **out)
{
    sl__sync_iter *it = sl__iter_alloc(&def->iter, def->iter_size, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->ins = &it->in;
    int rc = 0;
    if (ds->ninputs > 1 && !(it->ins = sl__calloc((size_t)ds->ninputs, sizeof *it->ins)))
        rc = SL_ENOMEM;
    if (rc == 0)
        rc = def->restore ? def->restore(it) : sl__fields_restore(&it->base, it, def->state,
                                                                  def->nstate);
    bool resumed = rc > 0, replay_to = resumed && replays(def, ds);
    int64_t saved[MAX_STATE];
    if (replay_to) { /* the fields start from zero, and the pass runs to them */
        sl__fields_get(it, def->state, def->nstate, saved);
        int64_t zero[MAX_STATE] = {0};
        set_fields(it, def->state, def->nstate, zero);
    }
    if (rc >= 0)
        rc = def->start ? def->start(it, resumed) : 0;
    for (int i = 0; rc == 0 && !(def->flags & SL__SYNC_OWN_INPUT) && i < ds->ninputs; i++)
        rc = sl__iter_make_input(&it->base, i, epoch, &it->ins[i]);
    if (ds->ninputs > 1 && it->ins)
        it->in = it->ins[0];
    if (rc == 0 && replay_to)
        rc = replay(it, def, saved);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

uint64_t sl__sync_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const sl__sync_def *def = sl__sync_def_of(ds);
    for (int i = 0; i < def->nparams; i++)
        h = sl__hash_u64(h, (uint64_t)field_value(ds, &def->params[i]));
    return h;
}

void sl__sync_destroy(sl__iter *base)
{
    sl__sync_iter *it = (sl__sync_iter *)base;
    const sl__sync_def *def = def_of_iter(base);
    if (def->fini)
        def->fini(it);
    int n = base->ds->ninputs;
    if (!it->ins || n <= 1) {
        sl__iter_free(it->in);
        return;
    }
    for (int i = 0; i < n; i++)
        sl__iter_free(it->ins[i]);
    sl__free(it->ins, (size_t)n * sizeof *it->ins);
}

void sl__sync_drop_input(sl__sync_iter *it, int i)
{
    sl__iter_free(it->ins[i]);
    it->ins[i] = NULL;
    if (i == 0)
        it->in = NULL;
}

/* Runs at every element a map or prefetch pulls from a sync node (their
 * snapshots), so the fields go straight from the iterator to the record. */
int sl__sync_save(sl__iter *base, sl__bytes *w)
{
    sl__sync_iter *it = (sl__sync_iter *)base;
    const sl__sync_def *def = def_of_iter(base);
    int n = base->ds->ninputs, alive = 0;
    if (!replays(def, base->ds)) {
        if (n <= 1)
            alive = it->in != NULL;
        else
            for (int i = 0; i < n; i++)
                alive += it->ins[i] != NULL;
    }
    unsigned char *p = sl__state_record(w, base, def->nstate, alive);
    if (!p)
        return SL_ENOMEM;
    for (int i = 0; i < def->nstate; i++)
        sl__put_le64(p + 8 * i, (uint64_t)field_value(it, &def->state[i]));
    int rc = 0;
    if (alive && n <= 1)
        return sl__iter_save(it->in, w);
    for (int i = 0; alive && rc == 0 && i < n; i++)
        if (it->ins[i])
            rc = sl__iter_save(it->ins[i], w);
    return rc;
}

const sl__field sl__indexed_state[1] = {
    SL__FIELD_I64(sl__indexed_iter, position, 0, INT64_MAX),
};

int sl__indexed_start(sl__sync_iter *u, bool resumed)
{
    sl__indexed_iter *it = (sl__indexed_iter *)u;
    it->n = sl_dataset_cardinality(u->base.ds);
    int64_t first, end;
    if (!resumed && sl__split_range(&u->base, &first, &end)) { /* a service worker's part */
        it->position = first < it->n ? first : it->n;
        if (end < it->n)
            it->n = end;
        return 0;
    }
    return resumed ? sl__state_range(&u->base, "position", it->position, 0, it->n) : 0;
}

int sl__indexed_save(sl__iter *base, sl__bytes *w)
{
    unsigned char *p = sl__state_record(w, base, 1, 0);
    if (!p)
        return SL_ENOMEM;
    sl__put_le64(p, (uint64_t)((const sl__indexed_iter *)base)->position);
    return 0;
}

int sl__indexed_get(sl__iter *base, int64_t i, sl_element **out)
{
    return base->ds->ops->get(base->ds, i, out);
}

int sl__indexed_next(sl__iter *base, sl_element **out)
{
    sl__indexed_iter *it = (sl__indexed_iter *)base;
    if (it->position >= it->n)
        return SL_EOF;
    int rc = base->ds->ops->get(base->ds, it->position, out);
    if (rc == 0)
        it->position++;
    return rc;
}

bool sl__dataset_indexed(const sl_dataset *ds)
{
    if (ds->ops->make_iter != sl__sync_make)
        return false;
    const sl__sync_def *def = (const sl__sync_def *)(const void *)ds->ops;
    return def->iter.next == sl__indexed_next;
}
