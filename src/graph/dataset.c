/* The dataset base: reference counting, naming, fingerprints. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "../core/salts.h"
#include "node.h"

static sl_dataset *dataset_alloc(const sl__node_ops *ops, size_t size)
{
    sl_dataset *ds = sl__calloc(1, size);
    if (!ds)
        return NULL;
    atomic_init(&ds->refs, 1);
    ds->ops = ops;
    ds->size = size;
    ds->inputs = ds->in_two;
    return ds;
}

sl_dataset *sl__dataset_new(const sl__node_ops *ops, size_t size, sl_dataset *input)
{
    if (!input)
        return NULL;
    sl_dataset *ds = dataset_alloc(ops, size);
    if (!ds) {
        sl_dataset_release(input);
        return NULL;
    }
    ds->ninputs = 1;
    ds->inputs[0] = input;
    return ds;
}

sl_dataset *sl__dataset_new_source(const sl__node_ops *ops, size_t size)
{
    return dataset_alloc(ops, size);
}

sl_dataset *sl__dataset_new_n(const sl__node_ops *ops, size_t size, sl_dataset *const *in,
                              int n)
{
    bool all = n >= 0 && n <= SL__MAX_INPUTS;
    for (int i = 0; i < n && all; i++)
        all = in[i] != NULL;
    sl_dataset *ds = all ? dataset_alloc(ops, size) : NULL;
    if (ds && n > 2 && !(ds->inputs = sl__calloc((size_t)n, sizeof *ds->inputs))) {
        sl__free(ds, size);
        ds = NULL;
    }
    if (!ds) {
        for (int i = 0; i < n; i++)
            sl_dataset_release(in[i]);
        if (all || n < 0 || n > SL__MAX_INPUTS)
            sl__set_error(all ? SL_ENOMEM : SL_EINVAL, all ? "out of memory (dataset)"
                                                           : "too many inputs");
        return NULL;
    }
    ds->ninputs = n;
    for (int i = 0; i < n; i++)
        ds->inputs[i] = in[i];
    return ds;
}

int sl__dataset_set_name(sl_dataset *ds, const char *name)
{
    if (!name)
        return 0;
    size_t n = strlen(ds->ops->kind) + strlen(name) + 3;
    char *s = sl__alloc(n);
    if (!s)
        return SL_ENOMEM;
    snprintf(s, n, "%s(%s)", ds->ops->kind, name);
    sl__strfree(ds->name);
    ds->name = s;
    return 0;
}

sl_dataset *sl__dataset_fail(sl_dataset *ds, int code, const char *fmt, ...)
{
    char msg[SL__ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sl_dataset_release(ds);
    sl__set_error_str(code, msg);
    return NULL;
}

bool sl__dataset_can_get(const sl_dataset *ds)
{
    return ds && ds->ops->get && ds->ops->can_get && ds->ops->can_get(ds);
}

SL_API sl_dataset *sl_dataset_retain(sl_dataset *ds)
{
    if (ds)
        atomic_fetch_add_explicit(&ds->refs, 1, memory_order_relaxed);
    return ds;
}

SL_API void sl_dataset_free(sl_dataset *ds)
{
    sl_dataset_release(ds);
}

SL_API void sl_dataset_release(sl_dataset *ds)
{
    /* iterative over the first input so long chains do not recurse deeply */
    while (ds && atomic_fetch_sub_explicit(&ds->refs, 1, memory_order_acq_rel) == 1) {
        sl_dataset *next = ds->ninputs ? ds->inputs[0] : NULL;
        for (int i = 1; i < ds->ninputs; i++)
            sl_dataset_release(ds->inputs[i]);
        if (ds->inputs != ds->in_two)
            sl__free(ds->inputs, (size_t)ds->ninputs * sizeof *ds->inputs);
        if (ds->ops->destroy)
            ds->ops->destroy(ds);
        sl_structure_release(atomic_load_explicit(&ds->structure, memory_order_relaxed));
        sl__learned_free(ds->learned);
        sl__strfree(ds->name);
        sl__free(ds, ds->size);
        ds = next;
    }
}

sl_dataset *sl__dataset_structured(sl_dataset *ds, sl_structure *s)
{
    if (!s) {
        char msg[SL__ERRMSG_MAX];
        int code = sl_last_error_code();
        snprintf(msg, sizeof msg, "%s", sl__error_msg());
        sl_dataset_release(ds);
        sl__set_error_str(code ? code : SL_ENOMEM, msg);
        return NULL;
    }
    sl_structure_release(atomic_exchange(&ds->structure, s));
    return ds;
}

int sl__dataset_publish_structure(const sl_dataset *ds, const sl_structure *s)
{
    sl_dataset *d = (sl_dataset *)ds; /* the memo only */
    sl_structure *mine = sl_structure_retain((sl_structure *)s), *none = NULL;
    if (atomic_compare_exchange_strong(&d->structure, &none, mine))
        return 0;
    sl_structure_release(mine);
    if (sl__structure_same_tree(none, s))
        return 0;
    char a[512], b[512];
    sl_structure_format(s, a, sizeof a);
    sl_structure_format(none, b, sizeof b);
    return sl__set_error(SL_ESHAPE, "%s: an element of structure %s after elements of "
                         "structure %s", sl_dataset_name(ds), a, b);
}

int sl__dataset_adopt_structure(const sl_dataset *ds, const sl_dataset *from)
{
    const sl_structure *s = sl_dataset_structure(from);
    return s ? sl__dataset_publish_structure(ds, s) : 0;
}

SL_API const sl_structure *sl_dataset_structure(const sl_dataset *ds)
{
    if (!ds)
        return NULL;
    sl_structure *s = atomic_load_explicit(&ds->structure, memory_order_acquire);
    if (s || !ds->ops->structure)
        return s;
    s = ds->ops->structure(ds);
    if (!s)
        return NULL;
    sl__dataset_publish_structure(ds, s); /* a derived one is the same whoever wins */
    sl_structure_release(s);
    return atomic_load_explicit(&ds->structure, memory_order_acquire);
}

sl_structure *sl__structure_of_input(const sl_dataset *ds)
{
    return sl_structure_retain((sl_structure *)sl_dataset_structure(ds->inputs[0]));
}

SL_API int sl_dataset_declare_structure(const sl_dataset *ds, const sl_structure *structure)
{
    if (!ds || !structure)
        return sl__set_error(SL_EINVAL, "sl_dataset_declare_structure: NULL argument");
    return sl__dataset_publish_structure(ds, structure);
}

SL_API int64_t sl_dataset_cardinality(const sl_dataset *ds)
{
    if (!ds)
        return SL_UNKNOWN;
    return ds->ops->cardinality ? ds->ops->cardinality(ds) : SL_UNKNOWN;
}

SL_API const char *sl_dataset_name(const sl_dataset *ds)
{
    if (!ds)
        return "";
    if (ds->name)
        return ds->name;
    return ds->ops->display ? ds->ops->display : ds->ops->kind;
}

SL_API uint64_t sl_dataset_fingerprint(const sl_dataset *ds)
{
    if (!ds)
        return 0;
    sl_dataset *d = (sl_dataset *)ds; /* the memo only: the node is immutable */
    if (atomic_load_explicit(&d->has_fingerprint, memory_order_acquire))
        return atomic_load_explicit(&d->fingerprint, memory_order_relaxed);
    uint64_t h = sl__hash_str(SL__SALT_FINGERPRINT, ds->ops->kind);
    h = sl__hash_str(h, ds->name);
    if (ds->ops->fingerprint)
        h = ds->ops->fingerprint(ds, h);
    for (int i = 0; i < ds->ninputs; i++)
        h = sl__hash_u64(h, sl_dataset_fingerprint(ds->inputs[i]));
    atomic_store_explicit(&d->fingerprint, h, memory_order_relaxed);
    atomic_store_explicit(&d->has_fingerprint, true, memory_order_release);
    return h;
}

sl_dataset *sl__push_below(sl_dataset *in, sl_dataset *(*op)(sl_dataset *x, void *arg),
                           void *arg)
{
    if (!in || !in->ops->rebuild || in->ninputs != 1)
        return op(in, arg);
    sl_dataset *below = sl_dataset_retain(in->inputs[0]);
    below = sl__push_below(below, op, arg);
    sl_dataset *out = below ? in->ops->rebuild(in, below) : NULL;
    sl_dataset_release(in);
    return out;
}

int sl__dataset_refresh(const sl_dataset *ds, int64_t epoch)
{
    if (ds->ops->refresh) {
        int rc = ds->ops->refresh(ds, epoch);
        if (rc < 0)
            return rc;
    }
    for (int i = 0; i < ds->ninputs; i++) {
        int rc = sl__dataset_refresh(ds->inputs[i], epoch);
        if (rc < 0)
            return rc;
    }
    return 0;
}

bool sl__dataset_changing(const sl_dataset *ds)
{
    if (ds->ops->refresh)
        return true;
    for (int i = 0; i < ds->ninputs; i++)
        if (sl__dataset_changing(ds->inputs[i]))
            return true;
    return false;
}
