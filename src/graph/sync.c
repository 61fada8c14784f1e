/* The one-input node skeleton (sync.h). */
#include <string.h>
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

int sl__fields_restore(const sl__iter *it, void *obj, const sl__field *f, int n)
{
    int64_t v[MAX_STATE];
    if (n > MAX_STATE)
        return sl__set_error(SL_EINTERNAL, "%s: %d saved fields, at most %d",
                             sl_dataset_name(it->ds), n, MAX_STATE);
    int rc = sl__iter_restored(it, n, v);
    if (rc <= 0)
        return rc;
    char *p = obj;
    for (int i = 0; i < n; i++) {
        int bad = sl__state_range(it, f[i].name, v[i], f[i].lo, f[i].hi);
        if (bad)
            return bad;
        if (f[i].is_bool)
            *(bool *)(p + f[i].offset) = v[i] != 0;
        else
            memcpy(p + f[i].offset, &v[i], sizeof v[i]);
    }
    return 1;
}

/* The def that made an iterator: its iterator ops are the def's. */
static const sl__sync_def *def_of_iter(const sl__iter *it)
{
    return (const sl__sync_def *)((const char *)it->ops - offsetof(sl__sync_def, iter));
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
        rc = sl__fields_restore(&it->base, it, def->state, def->nstate);
    bool resumed = rc > 0;
    if (rc >= 0)
        rc = def->start ? def->start(it, resumed) : 0;
    for (int i = 0; rc == 0 && !(def->flags & SL__SYNC_OWN_INPUT) && i < ds->ninputs; i++)
        rc = sl__iter_make_input(&it->base, i, epoch, &it->ins[i]);
    if (ds->ninputs > 1 && it->ins)
        it->in = it->ins[0];
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

int sl__sync_save(sl__iter *base, sl__bytes *w)
{
    sl__sync_iter *it = (sl__sync_iter *)base;
    const sl__sync_def *def = def_of_iter(base);
    int64_t v[MAX_STATE];
    if (def->nstate > MAX_STATE)
        return sl__set_error(SL_EINTERNAL, "%s: %d saved fields, at most %d",
                             sl_dataset_name(base->ds), def->nstate, MAX_STATE);
    sl__fields_get(it, def->state, def->nstate, v);
    int n = base->ds->ninputs;
    if (n <= 1)
        return sl__save_sync(w, base, def->nstate, v, it->in);
    int alive = 0;
    for (int i = 0; i < n; i++)
        alive += it->ins[i] != NULL;
    int rc = sl__state_node(w, base, def->nstate, v, alive);
    for (int i = 0; rc == 0 && i < n; i++)
        if (it->ins[i])
            rc = sl__iter_save(it->ins[i], w);
    return rc;
}
