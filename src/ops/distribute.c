/*
 * distribute(ctx, flags): this rank's part of a dataset of n elements, for
 * data-parallel training, with the same number of elements on every rank.
 *
 * Rank r of W takes positions r, r + W, r + 2W, ... of the input: m =
 * ceil(n / W) of them, where the last ranks' final position runs past the
 * end and wraps to position p mod n (torch's DistributedSampler pads the
 * same way; only a rank's last position can run past), or m = floor(n / W)
 * with SL_DISTRIBUTE_DROP. A wrapped position is below W, so the element
 * is kept when the pass goes by it and
 * handed out at the end; a pass resumed past it pulls it again from a fresh
 * pass of the input (the same order: same key and epoch).
 *
 * sl_distribute places the node: over the file list of a record reader
 * (FILE), or over the elements below the nodes that read files (DATA).
 */
#include <string.h>
#include "../core/log.h"
#include "../graph/sync.h"

typedef struct distribute_ds {
    sl_dataset base;
    int64_t world, rank, n, m; /* n: input cardinality, m: this rank's */
} distribute_ds;

typedef struct distribute_iter {
    sl__sync_iter u;
    int64_t pos;     /* input position of the next pull */
    int64_t emitted; /* elements handed out */
    sl_element *pad; /* the wrapped position's element, once seen */
    int64_t pad_scan; /* the second pass looking for it: its next position (-1: none) */
    bool done;
    int64_t world, rank; /* the dataset's, saved so a restore can check them */
} distribute_iter;

/* Input position of this rank's k-th element, before wrapping. */
static int64_t position(const distribute_ds *d, int64_t k) { return d->rank + k * d->world; }

static int64_t distribute_cardinality(const sl_dataset *ds) { return ((const distribute_ds *)ds)->m; }

/* The wrapped position this rank needs, or -1. */
static int64_t pad_pos(const distribute_ds *d)
{
    if (d->m == 0)
        return -1;
    int64_t last = position(d, d->m - 1);
    return last >= d->n ? last % d->n : -1; /* past the end (several times when W > n) */
}

static int fetch_pad(distribute_iter *it, const distribute_ds *d, sl_element **out)
{
    if (!it->pad) { /* resumed after the pass went by it: a fresh pass */
        int rc = 0;
        if (it->pad_scan < 0) {
            sl__iter_free(it->u.in);
            it->u.in = NULL;
            rc = sl__iter_make_input(&it->u.base, 0, it->u.base.epoch, &it->u.in);
            if (rc == 0)
                it->pad_scan = 0;
        }
        for (; rc == 0; it->pad_scan++) {
            sl_element *el;
            if ((rc = sl__iter_next(it->u.in, &el)) != 0)
                break;
            if (it->pad_scan == pad_pos(d)) {
                it->pad = el;
                break;
            }
            sl_element_release(el);
        }
        if (rc == SL__AGAIN)
            return rc; /* the scan goes on at the next call */
        if (rc == SL_EOF)
            rc = sl__set_error(SL_EINVAL, "distribute: the input ended before position %lld "
                               "on its second pass", (long long)pad_pos(d));
        if (rc < 0)
            return rc;
    }
    *out = it->pad;
    it->pad = NULL;
    atomic_fetch_add(&it->u.base.tree->padded, 1);
    return 0;
}

static int distribute_next(sl__iter *base, sl_element **out)
{
    distribute_iter *it = (distribute_iter *)base;
    const distribute_ds *d = (const distribute_ds *)base->ds;
    if (it->done || it->emitted >= d->m) {
        it->done = true;
        return SL_EOF;
    }
    int64_t want = position(d, it->emitted);
    if (want >= d->n) { /* the wrapped one, at the end */
        int rc = fetch_pad(it, d, out);
        if (rc == 0)
            it->emitted++;
        return rc;
    }
    int64_t pad_at = pad_pos(d);
    for (;;) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF)
            return sl__set_error(SL_EINVAL, "distribute: the input ended at position %lld, "
                                 "before the %lld elements its cardinality promised",
                                 (long long)it->pos, (long long)d->n);
        if (rc < 0)
            return rc;
        int64_t p = it->pos++;
        if (p == pad_at && !it->pad)
            it->pad = sl_element_retain(el);
        if (p == want) {
            *out = el;
            it->emitted++;
            return 0;
        }
        sl_element_release(el);
    }
}

static void distribute_fini(sl__sync_iter *u)
{
    sl_element_release(((distribute_iter *)u)->pad);
}

static int distribute_start(sl__sync_iter *u, bool resumed)
{
    distribute_iter *it = (distribute_iter *)u;
    const distribute_ds *d = (const distribute_ds *)u->base.ds;
    it->pad_scan = -1;
    if (!resumed) {
        it->world = d->world;
        it->rank = d->rank;
        return 0;
    }
    if (it->world != d->world || it->rank != d->rank)
        return sl__set_error(SL_EMISMATCH,
                             "distribute: the state was saved by rank %lld of %lld, this is "
                             "rank %lld of %lld; restore each rank's own state with the same "
                             "world size", (long long)it->rank, (long long)it->world,
                             (long long)d->rank, (long long)d->world);
    int rc = sl__state_range(&u->base, "emitted", it->emitted, 0, d->m);
    return rc ? rc : sl__state_range(&u->base, "pos", it->pos, 0, d->n);
}

static bool distribute_can_get(const sl_dataset *ds) { return sl__dataset_can_get(ds->inputs[0]); }

static int distribute_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const distribute_ds *d = (const distribute_ds *)ds;
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, position(d, index) % d->n, out);
}

static const sl__field distribute_state[] = {
    SL__FIELD_I64(distribute_iter, pos, 0, INT64_MAX),
    SL__FIELD_I64(distribute_iter, emitted, 0, INT64_MAX),
    SL__FIELD_I64(distribute_iter, world, INT64_MIN, INT64_MAX),
    SL__FIELD_I64(distribute_iter, rank, INT64_MIN, INT64_MAX),
};
static const sl__field distribute_params[] = {
    SL__PARAM(distribute_ds, world), SL__PARAM(distribute_ds, rank), SL__PARAM(distribute_ds, m),
};

static const sl__sync_def distribute_def = {
    .node = {.kind = "distribute", SL__SYNC_NODE, .cardinality = distribute_cardinality,
             .structure = sl__structure_of_input,
             .can_get = distribute_can_get, .get = distribute_get},
    .iter = {SL__SYNC_ITER(distribute_next)},
    .iter_size = sizeof(distribute_iter),
    SL__SYNC_STATE(distribute_state),
    SL__SYNC_PARAMS(distribute_params),
    .start = distribute_start,
    .fini = distribute_fini,
};

typedef struct distribute_args {
    int64_t world, rank;
    unsigned flags;
} distribute_args;

/* The node over x, or shard(world, rank) when x's size is unknown. */
static sl_dataset *apply(sl_dataset *x, void *arg)
{
    const distribute_args *a = arg;
    int64_t n = x ? sl_dataset_cardinality(x) : 0;
    if (x && n == SL_INFINITE) {
        sl_dataset_release(x);
        sl__set_error(SL_EINVAL, "distribute: the input is infinite; distribute before the "
                      "repeat");
        return NULL;
    }
    if (x && n < 0) {
        sl__log(SL_LOG_WARN, "distribute: %s has no known size, so its elements are split by "
                "position (rank %lld of %lld) and the ranks may get different counts; "
                "equal steps need a known size (or split by file)",
                sl_dataset_name(x), (long long)a->rank, (long long)a->world);
        return sl_shard(x, a->world, a->rank);
    }
    distribute_ds *d = (distribute_ds *)sl__dataset_new(&distribute_def.node, sizeof *d, x);
    if (!d)
        return NULL;
    d->world = a->world;
    d->rank = a->rank;
    d->n = n;
    d->m = (a->flags & SL_DISTRIBUTE_DROP) ? n / a->world : (n + a->world - 1) / a->world;
    return &d->base;
}

/* The record reader under the 1:1 file-reading nodes at the top of ds,
 * or NULL. */
static const sl_dataset *reader_below(const sl_dataset *ds)
{
    while (ds && !ds->ops->rebuild_files && ds->ops->rebuild && ds->ninputs == 1)
        ds = ds->inputs[0];
    return ds && ds->ops->rebuild_files ? ds : NULL;
}

/* ds with the reader `r` (somewhere under ds's rebuildable chain) made over
 * distribute(r's files). Consumes ds. */
static sl_dataset *split_files(sl_dataset *ds, const sl_dataset *r, distribute_args *a)
{
    if (ds == r) {
        sl_dataset *files = apply(sl_dataset_retain(r->inputs[0]), a);
        sl_dataset *out = files ? r->ops->rebuild_files(r, files) : NULL;
        sl_dataset_release(ds);
        return out;
    }
    sl_dataset *below = split_files(sl_dataset_retain(ds->inputs[0]), r, a);
    sl_dataset *out = below ? ds->ops->rebuild(ds, below) : NULL;
    sl_dataset_release(ds);
    return out;
}

SL_API sl_dataset *sl_distribute(sl_dataset *in, const sl_dist_context *ctx, unsigned flags)
{
    if (!in)
        return NULL;
    sl_dist_context env;
    if (!ctx) {
        if (sl_distributed_context(&env) < 0) {
            sl_dataset_release(in);
            return NULL;
        }
        ctx = &env;
    }
    const unsigned known = SL_DISTRIBUTE_DROP | SL_DISTRIBUTE_BY_FILE | SL_DISTRIBUTE_BY_DATA;
    const char *bad = NULL;
    if (flags & ~known)
        bad = "unknown flags";
    else if ((flags & SL_DISTRIBUTE_BY_FILE) && (flags & SL_DISTRIBUTE_BY_DATA))
        bad = "BY_FILE and BY_DATA together";
    else if (ctx->world_size < 1 || ctx->rank < 0 || ctx->rank >= ctx->world_size)
        bad = "rank outside [0, world_size)";
    if (bad) {
        sl__set_error(SL_EINVAL, "distribute: %s (rank %d, world_size %d, flags 0x%x)", bad,
                      ctx->rank, ctx->world_size, flags);
        sl_dataset_release(in);
        return NULL;
    }
    if (ctx->world_size == 1)
        return in;
    if (sl__dataset_changing(in)) {
        sl__set_error(SL_EUNSUPPORTED, "distribute: the input lists its files anew each "
                      "epoch (SL_FOLDER_RESCAN); ranks rescanning at different moments would "
                      "split different lists, so equal steps cannot be promised");
        sl_dataset_release(in);
        return NULL;
    }
    distribute_args a = {ctx->world_size, ctx->rank, flags};
    const sl_dataset *r = (flags & SL_DISTRIBUTE_BY_DATA) ? NULL : reader_below(in);
    int64_t files = r ? sl_dataset_cardinality(r->inputs[0]) : -1;
    if (r && files >= ctx->world_size)
        return split_files(in, r, &a);
    if (flags & SL_DISTRIBUTE_BY_FILE) {
        sl__set_error(SL_EINVAL, "distribute: BY_FILE needs a record reader over a list of at "
                      "least %d files at the top of the pipeline; %s", ctx->world_size,
                      !r ? "there is none" : files < 0 ? "its file count is unknown"
                                                       : "it has fewer");
        sl_dataset_release(in);
        return NULL;
    }
    return sl__push_below(in, apply, &a);
}
