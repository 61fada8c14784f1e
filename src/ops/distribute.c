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
 *
 * Resumed on another world size (sl_iterator_restore_ranks): every old
 * rank's record says how far it got, so what the epoch has left is known
 * exactly: every position below `start`, and the few in `skip` (sorted)
 * above it, were consumed. The new ranks split what is left, position j of
 * it to rank j mod world, and fetch each element by random access through
 * the input iterator (a whole-dataset shuffle, an indexed source); the
 * padding for equal steps wraps within what is left. A record then holds
 * that base too, so a later resume, on any world size, merges again.
 *
 * Over an input that gives any position (a whole-dataset shuffle, an
 * indexed source) the node always fetches by position, so what it counts
 * is positions of the order even when the error policy skips an element.
 *
 * Record: pos, emitted, world, rank, the input's fingerprint, the pass's
 * epoch, start, the skip count, the skipped positions (8 + count fields;
 * 4 before the fingerprint and base were saved, still read by a restore
 * on the same rank, refused by a merge).
 */
#include <stdlib.h>
#include <string.h>
#include "../core/le.h"
#include "../core/log.h"
#include "../graph/sync.h"
#include "../core/perm.h"
#include "distribute.h"
#include "shuffle.h"

typedef struct distribute_ds {
    sl_dataset base;
    int64_t world, rank, n, m; /* n: input cardinality, m: this rank's */
    bool drop;
} distribute_ds;

typedef struct distribute_iter {
    sl__sync_iter u;
    int64_t pos;     /* input position of the next pull */
    int64_t emitted; /* elements handed out */
    sl_element *pad; /* the wrapped position's element, once seen */
    int64_t pad_scan; /* the second pass looking for it: its next position (-1: none) */
    bool done;
    int64_t world, rank; /* the dataset's, saved so a restore can check them */
    /* resumed on another world size: what earlier ranks consumed (every
     * position below start, and skip[0..nskip) above it), what is left
     * (left positions) and this rank's share of it (m) */
    bool based;
    int64_t start, nskip, left, m;
    int64_t *skip;
} distribute_iter;

/* An elastic restore's merged base, waiting for the distribute node that
 * the iterator being made on this thread creates. */
/* At most this many positions consumed above the prefix (how far apart the
 * ranks may be when a checkpoint is merged). */
#define MAX_SKIP 4096

static _Thread_local sl__distribute_base *pending;
static _Thread_local int npending, ntaken;

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

/* Input position of element j of what is left. */
static int64_t left_at(const distribute_iter *it, int64_t j)
{
    int64_t x = it->start + j;
    for (int64_t k = 0; k < it->nskip && it->skip[k] <= x; k++)
        x++;
    return x;
}

static int based_next(distribute_iter *it, sl_element **out)
{
    sl__iter *in = it->u.in;
    if (!in->ops->get)
        return sl__set_error(SL_EUNSUPPORTED, "distribute: %s gives no position of its pass "
                             "(a whole-dataset shuffle or an indexed source does)",
                             sl_dataset_name(in->ds));
    while (it->emitted < it->m) {
        int64_t j = it->rank + it->emitted * it->world;
        bool padded = j >= it->left;
        if (padded)
            j %= it->left;
        it->emitted++;
        int rc = in->ops->get(in, left_at(it, j), out);
        if (rc == 0) {
            if (padded)
                atomic_fetch_add(&it->u.base.tree->padded, 1);
            it->u.base.ok_count++;
            return 0;
        }
        if ((rc = sl__policy(&it->u.base, rc)))
            return rc;
    }
    it->done = true;
    return SL_EOF;
}

static int distribute_next(sl__iter *base, sl_element **out)
{
    distribute_iter *it = (distribute_iter *)base;
    const distribute_ds *d = (const distribute_ds *)base->ds;
    if (it->based)
        return based_next(it, out);
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
    distribute_iter *it = (distribute_iter *)u;
    sl_element_release(it->pad);
    if (it->skip)
        sl__free(it->skip, (size_t)it->nskip * sizeof *it->skip);
}

/* The input's fingerprint, with the per-index order's version: a merge
 * of records written under another order would misplace every position. */
static uint64_t input_fingerprint(const sl_dataset *ds)
{
    return sl__hash_u64(sl_dataset_fingerprint(ds->inputs[0]), SL__PERM_VERSION);
}

/* Whether the input gives any position of its pass to its iterators. */
static bool by_position(const sl_dataset *ds)
{
    const sl_dataset *in = ds->inputs[0];
    return sl__dataset_can_get(in) || sl__shuffle_by_position(in);
}

bool sl__distribute_by_position(const sl_dataset *ds)
{
    return !strcmp(ds->ops->kind, "distribute") && by_position(ds);
}

static int set_base(distribute_iter *it, int64_t start, int64_t nskip, const int64_t *skip)
{
    const distribute_ds *d = (const distribute_ds *)it->u.base.ds;
    if (start < 0 || start > d->n || nskip < 0 || nskip > d->n - start)
        return sl__set_error(SL_ECORRUPT, "saved state: distribute: a base of %lld and %lld "
                             "positions for %lld elements", (long long)start,
                             (long long)nskip, (long long)d->n);
    if (nskip && !(it->skip = sl__alloc((size_t)nskip * sizeof *it->skip)))
        return sl__set_error(SL_ENOMEM, "distribute: out of memory");
    it->nskip = nskip;
    for (int64_t k = 0; k < nskip; k++) {
        if (skip[k] <= (k ? skip[k - 1] : start) || skip[k] >= d->n)
            return sl__set_error(SL_ECORRUPT, "saved state: distribute: consumed position "
                                 "%lld out of order", (long long)skip[k]);
        it->skip[k] = skip[k];
    }
    it->start = start;
    if ((start > 0 || nskip > 0) && !by_position(&d->base))
        return sl__set_error(SL_EUNSUPPORTED, "distribute: a state merged from other ranks "
                             "needs an input that gives any position of its pass");
    return 0;
}

/* The record: the four fields of old, or those, the input's fingerprint
 * and the base. */
static int distribute_restore(sl__sync_iter *u)
{
    distribute_iter *it = (distribute_iter *)u;
    const distribute_ds *d = (const distribute_ds *)u->base.ds;
    int n = sl__iter_restored_count(&u->base);
    if (n < 0) {
        for (int i = 0; i < npending; i++) /* an elastic restore's new ranks */
            if (pending[i].ds == u->base.ds && !pending[i].taken) {
                if (pending[i].epoch >= 0 && pending[i].epoch != u->base.epoch)
                    return sl__set_error(SL_EUNSUPPORTED, "restore_ranks: the checkpoint is "
                                         "in pass %lld of distribute's input, this iterator "
                                         "starts pass %lld (an op above distribute, such as "
                                         "repeat, restarts): resume on the same world size, "
                                         "or repeat below distribute",
                                         (long long)pending[i].epoch,
                                         (long long)u->base.epoch);
                pending[i].taken = true;
                ntaken++;
                return set_base(it, pending[i].start, pending[i].nskip, pending[i].skip);
            }
        return 0;
    }
    if (n != 4 && (n < 8 || n > MAX_SKIP + 8))
        return sl__set_error(SL_ECORRUPT, "saved state: distribute has %d fields", n);
    int64_t f[MAX_SKIP + 8];
    sl__iter_restored(&u->base, n, f);
    it->pos = f[0], it->emitted = f[1], it->world = f[2], it->rank = f[3];
    if (n == 4)
        return 1;
    if ((uint64_t)f[4] != input_fingerprint(&d->base))
        return sl__set_error(SL_EMISMATCH, "distribute: the state was saved over another "
                             "input (fingerprint %016llx, this one's %016llx)",
                             (unsigned long long)f[4],
                             (unsigned long long)input_fingerprint(&d->base));
    if (f[7] != n - 8)
        return sl__set_error(SL_ECORRUPT, "saved state: distribute: %lld consumed positions "
                             "in %d fields", (long long)f[7], n);
    int rc = set_base(it, f[6], f[7], f + 8);
    return rc ? rc : 1;
}

static int distribute_save(sl__iter *base, sl__bytes *w)
{
    distribute_iter *it = (distribute_iter *)base;
    int alive = it->u.in != NULL;
    unsigned char *p = sl__state_record(w, base, 8 + (int)it->nskip, alive);
    if (!p)
        return SL_ENOMEM;
    int64_t head[8] = {it->pos,   it->emitted, it->world, it->rank,
                       (int64_t)input_fingerprint(base->ds), base->epoch, it->start,
                       it->nskip};
    for (int i = 0; i < 8; i++)
        sl__put_le64(p + 8 * i, (uint64_t)head[i]);
    for (int64_t k = 0; k < it->nskip; k++)
        sl__put_le64(p + 8 * (8 + k), (uint64_t)it->skip[k]);
    return alive ? sl__iter_save(it->u.in, w) : 0;
}

static int distribute_start(sl__sync_iter *u, bool resumed)
{
    distribute_iter *it = (distribute_iter *)u;
    const distribute_ds *d = (const distribute_ds *)u->base.ds;
    it->pad_scan = -1;
    it->based = by_position(&d->base);
    if (it->based) {
        it->left = d->n - it->start - it->nskip;
        it->m = it->left == 0 ? 0 : d->drop ? it->left / d->world
                                            : (it->left + d->world - 1) / d->world;
        if (!resumed) {
            it->world = d->world;
            it->rank = d->rank;
        }
    }
    if (!resumed) {
        it->world = d->world;
        it->rank = d->rank;
        int64_t first, end;
        if (sl__split_range(&u->base, &first, &end)) { /* a service worker's part */
            if (!it->based)
                return sl__set_error(SL_EUNSUPPORTED, "distribute: a service worker needs "
                                     "an input that gives any position of its pass (a "
                                     "whole-dataset shuffle or an indexed source)");
            it->emitted = first < it->m ? first : it->m;
            if (end < it->m)
                it->m = end;
        }
        return 0;
    }
    if (it->world != d->world || it->rank != d->rank)
        return sl__set_error(SL_EMISMATCH,
                             "distribute: the state was saved by rank %lld of %lld, this is "
                             "rank %lld of %lld; restore each rank's own state with the same "
                             "world size", (long long)it->rank, (long long)it->world,
                             (long long)d->rank, (long long)d->world);
    int rc = sl__state_range(&u->base, "emitted", it->emitted, 0, it->based ? it->m : d->m);
    return rc ? rc : sl__state_range(&u->base, "pos", it->pos, 0, d->n);
}

static bool distribute_can_get(const sl_dataset *ds) { return sl__dataset_can_get(ds->inputs[0]); }

static int distribute_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const distribute_ds *d = (const distribute_ds *)ds;
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, position(d, index) % d->n, out);
}

static const sl__field distribute_params[] = {
    SL__PARAM(distribute_ds, world), SL__PARAM(distribute_ds, rank), SL__PARAM(distribute_ds, m),
};

static const sl__sync_def distribute_def = {
    .node = {.kind = "distribute", SL__SYNC_NODE, .cardinality = distribute_cardinality,
             .structure = sl__structure_of_input,
             .can_get = distribute_can_get, .get = distribute_get},
    .iter = {.next = distribute_next, .destroy = sl__sync_destroy, .save = distribute_save},
    .iter_size = sizeof(distribute_iter),
    SL__SYNC_PARAMS(distribute_params),
    .start = distribute_start,
    .fini = distribute_fini,
    .restore = distribute_restore,
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
    d->drop = a->flags & SL_DISTRIBUTE_DROP;
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
    /* One rank: the node passes everything; it is there over a dataset of
     * known size split by element, so a checkpoint of several ranks can
     * be resumed on this one (sl_iterator_restore_ranks). */
    if (ctx->world_size == 1 &&
        (sl_dataset_cardinality(in) < 0 ||
         (!(flags & SL_DISTRIBUTE_BY_DATA) && reader_below(in)) ||
         (flags & SL_DISTRIBUTE_BY_FILE)))
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

/* ---- resuming on another world size ---- */

/* The nodes under ds, counted into *n (the first max into out); *by_file
 * when a record reader sits above one (the ranks then split files, whose
 * partly read records a merge cannot see). */
static void find(const sl_dataset *ds, bool reader_above, const sl_dataset **out, int max,
                 int *n, bool *by_file)
{
    if (!ds)
        return;
    if (ds->ops == &distribute_def.node) {
        if (*n < max)
            out[*n] = ds;
        ++*n;
        *by_file |= reader_above;
        return;
    }
    for (int i = 0; i < ds->ninputs; i++)
        find(ds->inputs[i], reader_above || ds->ops->rebuild_files != NULL, out, max, n,
             by_file);
}

int sl__distribute_find(const sl_dataset *ds, const sl_dataset **out, int max)
{
    bool by_file = false;
    int n = 0;
    find(ds, false, out, max, &n, &by_file);
    if (by_file) {
        sl__set_error(SL_EUNSUPPORTED, "restore_ranks: distribute splits whole files between "
                      "the ranks here; a file read part way cannot be split again. Resume on "
                      "the same world size, or distribute by element (an indexed source, "
                      "SL_DISTRIBUTE_BY_DATA)");
        return -1;
    }
    return n;
}

bool sl__distribute_pending(sl__distribute_base *b, int n)
{
    bool all = ntaken >= npending;
    pending = b;
    npending = n;
    ntaken = 0;
    return all;
}

void sl__distribute_base_free(sl__distribute_base *b)
{
    if (b->skip)
        sl__free(b->skip, (size_t)b->nskip * sizeof *b->skip);
    b->skip = NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}


int sl__distribute_merge(const sl_dataset *dist, const int64_t *const *recs,
                         const int *nfields, int n, sl__distribute_base *out)
{
    const distribute_ds *d = (const distribute_ds *)dist;
    *out = (sl__distribute_base){.ds = dist};
    if (!by_position(dist))
        return sl__set_error(SL_EUNSUPPORTED, "restore_ranks: %s gives no position of its "
                             "pass; a merge needs shuffle(ALL), shuffle_windowed or an "
                             "indexed source below distribute",
                             sl_dataset_name(dist->inputs[0]));
    int ref = -1; /* a state that has the record: the others' are taken from it */
    for (int i = 0; i < n && ref < 0; i++)
        if (recs[i])
            ref = i;
    if (ref < 0) { /* every rank's mixture had let it go: every rank took its share */
        out->epoch = -1; /* (whatever pass the new iterators start) */
        out->start = d->n;
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (recs[i] && (nfields[i] < 8 || recs[i][7] != nfields[i] - 8))
            return sl__set_error(nfields[i] == 4 ? SL_EUNSUPPORTED : SL_ECORRUPT,
                                 "restore_ranks: state %d %s", i, nfields[i] == 4
                                     ? "was saved by an older sluice; resume it on the same "
                                       "world size"
                                     : "has a damaged distribute record");
    /* the old base, which every old rank shares */
    distribute_iter old = {0};
    int64_t world = recs[ref][2];
    if (world != n)
        return sl__set_error(SL_EMISMATCH, "restore_ranks: %d states from a world of %lld: "
                             "give every old rank's state, once", n, (long long)world);
    bool *seen = sl__calloc((size_t)n, sizeof *seen);
    /* each state's rank and elements emitted: a state with no record is a
     * rank whose mixture let the input go when it ended there (it took
     * its whole share); such ranks take the ranks no record names */
    int64_t *rank = sl__calloc((size_t)n, sizeof *rank), *emitted = sl__calloc((size_t)n, 8);
    if (!seen || !rank || !emitted) {
        sl__free(seen, seen ? (size_t)n * sizeof *seen : 0);
        sl__free(rank, rank ? (size_t)n * sizeof *rank : 0);
        sl__free(emitted, emitted ? (size_t)n * 8 : 0);
        return sl__set_error(SL_ENOMEM, "restore_ranks: out of memory");
    }
    int rc = 0;
    out->epoch = recs[ref][5];
    for (int i = 0; rc == 0 && i < n; i++) {
        const int64_t *f = recs[i];
        if (!f)
            continue;
        int64_t start = f[6], nskip = f[7];
        if (f[2] != world || f[3] < 0 || f[3] >= world || seen[f[3]])
            rc = sl__set_error(SL_EMISMATCH, "restore_ranks: state %d is rank %lld of %lld; "
                               "the states must be ranks 0..%lld of one world, once each", i,
                               (long long)f[3], (long long)f[2], (long long)world - 1);
        else if ((uint64_t)f[4] != input_fingerprint(dist))
            rc = sl__set_error(SL_EMISMATCH, "restore_ranks: state %d was saved over another "
                               "input or order (fingerprint %016llx, this one's %016llx)", i,
                               (unsigned long long)f[4],
                               (unsigned long long)input_fingerprint(dist));
        else if (f[5] != out->epoch)
            rc = sl__set_error(SL_EMISMATCH, "restore_ranks: state %d is in pass %lld of "
                               "distribute's input, state 0 in %lld", i, (long long)f[5],
                               (long long)out->epoch);
        else if (i > ref && (start != old.start || nskip != old.nskip ||
                             (nskip && memcmp(f + 8, old.skip, (size_t)nskip * 8) != 0)))
            rc = sl__set_error(SL_EMISMATCH, "restore_ranks: state %d comes from another "
                               "resume than state %d (states of one checkpoint, please)", i,
                               ref);
        if (rc == 0 && i == ref) {
            old.u.base.ds = dist;
            rc = set_base(&old, start, nskip, f + 8);
        }
        if (rc == 0) {
            seen[f[3]] = true;
            rank[i] = f[3];
            emitted[i] = f[1];
        }
    }
    int64_t left_old = d->n - old.start - old.nskip;
    int64_t m_old = left_old == 0 ? 0 : d->drop ? left_old / world : (left_old + world - 1) / world;
    for (int i = 0, next = 0; rc == 0 && i < n; i++) {
        if (recs[i])
            continue;
        while (seen[next])
            next++;
        seen[next] = true;
        rank[i] = next;
        emitted[i] = m_old;
    }
    sl__free(seen, (size_t)n * sizeof *seen);
    bool finished = true; /* every old rank took its whole share */
    for (int i = 0; rc == 0 && i < n; i++) {
        if (emitted[i] < 0 || emitted[i] > m_old)
            rc = sl__set_error(SL_ECORRUPT, "restore_ranks: state %d: %lld elements emitted "
                               "of %lld", i, (long long)emitted[i], (long long)m_old);
        finished &= emitted[i] == m_old;
    }
    int64_t left = finished ? 0 : left_old; /* (a DROP epoch's dropped tail stays dropped) */
    /* what is left of the old base, j in [0, left): rank j mod world took j
     * while j < rank + emitted * world */
    int64_t J = left;
    for (int i = 0; rc == 0 && i < n; i++) {
        int64_t r = rank[i], upto = r + emitted[i] * world;
        if (upto < J)
            J = upto;
    }
    /* the consumed positions above J, global */
    sl__bytes acc = {0};
    for (int i = 0; rc == 0 && i < n; i++) {
        int64_t r = rank[i], e = emitted[i];
        int64_t k0 = J > r ? (J - r + world - 1) / world : 0;
        for (int64_t k = k0; rc == 0 && k < e && r + k * world < left; k++) {
            int64_t g = left_at(&old, r + k * world); /* (a pad consumed nothing new) */
            if (acc.n / 8 >= MAX_SKIP)
                rc = sl__set_error(SL_EUNSUPPORTED, "restore_ranks: the ranks are more than "
                                   "%d elements apart; resume them where they were saved",
                                   MAX_SKIP);
            else if (sl__bytes_append(&acc, &g, sizeof g))
                rc = sl__set_error(SL_ENOMEM, "restore_ranks: out of memory");
        }
    }
    if (rc == 0)
        out->start = J < left ? left_at(&old, J) : d->n;
    if (rc == 0 && finished)
        out->start = d->n;
    for (int64_t k = 0; rc == 0 && k < old.nskip; k++) /* the old base's, above it */
        if (old.skip[k] > out->start && sl__bytes_append(&acc, &old.skip[k], 8))
            rc = sl__set_error(SL_ENOMEM, "restore_ranks: out of memory");
    int64_t nskip = (int64_t)(acc.n / 8);
    if (rc == 0 && nskip > MAX_SKIP)
        rc = sl__set_error(SL_EUNSUPPORTED, "restore_ranks: the ranks are more than %d "
                           "elements apart; resume them where they were saved", MAX_SKIP);
    if (rc == 0 && nskip) {
        qsort(acc.p, (size_t)nskip, 8, cmp_i64);
        out->skip = sl__alloc((size_t)nskip * sizeof *out->skip);
        if (!out->skip)
            rc = sl__set_error(SL_ENOMEM, "restore_ranks: out of memory");
        else
            memcpy(out->skip, acc.p, (size_t)nskip * sizeof *out->skip);
        out->nskip = out->skip ? nskip : 0;
    }
    sl__bytes_free(&acc);
    if (old.skip)
        sl__free(old.skip, (size_t)old.nskip * sizeof *old.skip);
    sl__free(rank, (size_t)n * sizeof *rank);
    sl__free(emitted, (size_t)n * 8);
    return rc;
}
