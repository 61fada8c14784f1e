/* The one-input node skeleton (unary.h). */
#include <string.h>
#include "unary.h"

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
static const sl__unary_def *def_of_iter(const sl__iter *it)
{
    return (const sl__unary_def *)((const char *)it->ops - offsetof(sl__unary_def, iter));
}

int sl__unary_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                   sl__iter **out)
{
    return sl__unary_make_as(sl__unary_def_of(ds), ds, tree, key, epoch, out);
}

int sl__unary_make_as(const sl__unary_def *def, const sl_dataset *ds, sl__tree *tree,
                      uint64_t key, int64_t epoch, sl__iter **out)
{
    sl__unary_iter *it = sl__iter_alloc(&def->iter, def->iter_size, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int rc = sl__fields_restore(&it->base, it, def->state, def->nstate);
    bool resumed = rc > 0;
    if (rc >= 0)
        rc = def->start ? def->start(it, resumed) : 0;
    if (rc == 0 && !(def->flags & SL__UNARY_OWN_INPUT))
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

uint64_t sl__unary_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const sl__unary_def *def = sl__unary_def_of(ds);
    for (int i = 0; i < def->nparams; i++)
        h = sl__hash_u64(h, (uint64_t)field_value(ds, &def->params[i]));
    return h;
}

void sl__unary_destroy(sl__iter *base)
{
    sl__unary_iter *it = (sl__unary_iter *)base;
    const sl__unary_def *def = def_of_iter(base);
    if (def->fini)
        def->fini(it);
    sl__iter_free(it->in);
}

int sl__unary_save(sl__iter *base, sl__bytes *w)
{
    sl__unary_iter *it = (sl__unary_iter *)base;
    const sl__unary_def *def = def_of_iter(base);
    int64_t v[MAX_STATE];
    if (def->nstate > MAX_STATE)
        return sl__set_error(SL_EINTERNAL, "%s: %d saved fields, at most %d",
                             sl_dataset_name(base->ds), def->nstate, MAX_STATE);
    sl__fields_get(it, def->state, def->nstate, v);
    return sl__save_sync(w, base, def->nstate, v, it->in);
}
