/* ignore_errors(flags): the input's elements, with every element error
 * below this node dropped, whatever the iterator's error policy (tf.data's
 * ignore_errors). The nodes below take it from this one when they are
 * made (sl__iter.ignoring) and skip at the error's origin, as the skip
 * policy does: a corrupt file, a failing function, a bad record. Errors
 * that are not an element's (out of memory, a broken pipeline) still end
 * the pass. SL_LOG_ERRORS logs what is dropped (up to the error log
 * limit). */
#include "../graph/sync.h"

typedef struct ignore_errors_ds {
    sl_dataset base;
    int64_t flags;
} ignore_errors_ds;

static int ignore_errors_next(sl__iter *base, sl_element **out)
{
    return sl__iter_next(((sl__sync_iter *)base)->in, out);
}

static int ignore_errors_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    bool log = ((const ignore_errors_ds *)u->base.ds)->flags & SL_LOG_ERRORS;
    u->base.ignoring = log ? SL__IGNORE_LOGGED : SL__IGNORE_SILENT;
    return 0;
}

static int64_t ignore_errors_cardinality(const sl_dataset *ds)
{
    int64_t in = sl_dataset_cardinality(ds->inputs[0]);
    return in == SL_INFINITE || in == 0 ? in : SL_UNKNOWN;
}

static const sl__field ignore_errors_params[] = {SL__PARAM(ignore_errors_ds, flags)};

static const sl__sync_def ignore_errors_def = {
    .node = {.kind = "ignore_errors", SL__SYNC_NODE,
             .cardinality = ignore_errors_cardinality, .structure = sl__structure_of_input},
    .iter = {SL__SYNC_ITER(ignore_errors_next)},
    .iter_size = sizeof(sl__sync_iter),
    SL__SYNC_PARAMS(ignore_errors_params),
    .start = ignore_errors_start,
};

SL_API sl_dataset *sl_ignore_errors(sl_dataset *in, unsigned flags)
{
    ignore_errors_ds *d = (ignore_errors_ds *)sl__dataset_new(&ignore_errors_def.node,
                                                               sizeof *d, in);
    if (!d)
        return NULL;
    if (flags & ~SL_LOG_ERRORS)
        return sl__dataset_fail(&d->base, SL_EINVAL, "ignore_errors: unknown flags %#x",
                                flags);
    d->flags = flags;
    return &d->base;
}
