/*
 * shuffle(buffer, seed, flags).
 *
 * buffer >= 1 is tf.data's buffer shuffle: emit a uniformly random element of
 * a window of `buffer` inputs and refill the emptied slot from the input.
 * SL_SHUFFLE_ALL permutes the index of a random-access input instead, so a
 * pass starts at once and every order is possible.
 *
 * The stream is keyed by (seed, node, epoch): repeat makes a new node
 * iterator with the next epoch number each pass, which is what reshuffles;
 * SL_SHUFFLE_NO_RESHUFFLE pins the epoch to 0.
 */
#include <string.h>
#include "../graph/node.h"
#include "../core/perm.h"
#include "shuffle.h"
#include "../graph/sync.h"

typedef struct shuffle_ds {
    sl_dataset base;
    int64_t buffer, seed;
    unsigned flags;
    int64_t block, window; /* sl_shuffle_windowed's; 0 for sl_shuffle */
} shuffle_ds;

/* ---- buffer shuffle ---- */

typedef struct shuffle_buffer_iter {
    sl__iter base;
    sl__iter *in;
    sl__rng rng;
    sl_element **slots;
    int64_t cap;   /* slots allocated */
    int64_t limit; /* slots wanted: min(buffer, cardinality) */
    int64_t count; /* slots in use, the hole included */
    int64_t hole;  /* slot emptied by the last emit, or -1 */
    int64_t held;  /* bytes accounted in the tree */
    int64_t pulled, emitted;
    bool eof;
    int deferred;       /* an input error met while priming, and its message */
    char *deferred_msg;
} shuffle_buffer_iter;

static sl__rng make_rng(const sl__iter *it)
{
    const shuffle_ds *s = (const shuffle_ds *)it->ds;
    int64_t epoch = s->flags & SL_SHUFFLE_NO_RESHUFFLE ? 0 : it->epoch;
    return sl__rng_make(sl__node_seed(it, s->seed), it->key, epoch, 0);
}

/* The array grows with the buffer so that a huge buffer over a short or
 * unknown input costs what it holds, not what it could hold. */
static int grow(shuffle_buffer_iter *it)
{
    int64_t cap = it->cap ? it->cap * 2 : 1024;
    if (cap > it->limit)
        cap = it->limit;
    sl_element **slots = sl__calloc((size_t)cap, sizeof *slots);
    if (!slots)
        return SL_ENOMEM;
    if (it->count)
        memcpy(slots, it->slots, (size_t)it->count * sizeof *slots);
    sl__free(it->slots, (size_t)it->cap * sizeof *slots);
    it->slots = slots;
    it->cap = cap;
    return 0;
}

static void hold(shuffle_buffer_iter *it, const sl_element *el)
{
    int64_t b = (int64_t)sl__element_bytes(el);
    it->held += b;
    sl__tree_hold(it->base.tree, b);
}

static sl_element *unhold(shuffle_buffer_iter *it, sl_element *el)
{
    int64_t b = (int64_t)sl__element_bytes(el);
    it->held -= b;
    sl__tree_unhold(it->base.tree, b);
    return el;
}

/* Pulls one input element into the hole or a new slot: 0, 1 at the end
 * of the input, or the input's error (nothing is lost: the next pull
 * resumes). */
static int pull(shuffle_buffer_iter *it)
{
    if (it->hole < 0 && it->count == it->cap) {
        int rc = grow(it);
        if (rc)
            return rc;
    }
    sl_element *el;
    int rc = sl__iter_next(it->in, &el);
    if (rc == SL_EOF) {
        it->eof = true;
        return 1;
    }
    if (rc)
        return rc;
    it->pulled++;
    hold(it, el);
    if (it->hole >= 0) {
        it->slots[it->hole] = el;
        it->hole = -1;
    } else {
        it->slots[it->count++] = el;
    }
    return 0;
}

/* Fills the hole and any free slots until the buffer is full or the input
 * ends. An error kept from priming comes out first, at the pull where it
 * happened. */
static int refill(shuffle_buffer_iter *it)
{
    if (it->deferred) {
        int rc = it->deferred;
        sl__set_error_str(rc, it->deferred_msg ? it->deferred_msg : sl_strerror(rc));
        sl__strfree(it->deferred_msg);
        it->deferred_msg = NULL;
        it->deferred = 0;
        return rc;
    }
    while (!it->eof && (it->hole >= 0 || it->count < it->limit)) {
        int rc = pull(it);
        if (rc < 0)
            return rc;
    }
    if (it->hole >= 0) { /* input ended: close the gap with the last slot */
        it->slots[it->hole] = it->slots[it->count - 1];
        it->slots[--it->count] = NULL;
        it->hole = -1;
    }
    return 0;
}

static bool shuffle_buffer_draining(const sl__iter *base)
{
    return ((const shuffle_buffer_iter *)base)->eof;
}

/* One pull of the fill before the first element (repeat primes the next
 * pass with it while this one drains). The pulls and draws are those the
 * first next would make, so the output is the same. */
static int shuffle_buffer_prime(sl__iter *base)
{
    shuffle_buffer_iter *it = (shuffle_buffer_iter *)base;
    if (it->deferred || it->eof || it->emitted || it->count >= it->limit)
        return 0;
    int rc = pull(it);
    if (rc == SL__AGAIN)
        return 0; /* nothing pulled: the next pull tries again */
    if (rc < 0) {
        it->deferred = rc;
        it->deferred_msg = sl__strdup(sl__error_msg());
        return 0;
    }
    return rc == 0;
}

static int shuffle_buffer_next(sl__iter *base, sl_element **out)
{
    shuffle_buffer_iter *it = (shuffle_buffer_iter *)base;
    int rc = refill(it);
    if (rc)
        return rc;
    if (it->count == 0)
        return SL_EOF;
    int64_t j = it->count > 1 ? (int64_t)sl__rng_below(&it->rng, (uint64_t)it->count) : 0;
    *out = unhold(it, it->slots[j]);
    it->slots[j] = NULL;
    it->hole = j;
    it->emitted++;
    return 0;
}

/* The buffer's elements are not saved: its counters are, and restoring
 * replays the pass's input up to them (shuffle_buffer_resume). */
#define BUFFER_FIELDS(X) X(pulled) X(emitted)
SL__STATE_FIELDS(BUFFER_FIELDS);

static int shuffle_buffer_save(sl__iter *base, sl__bytes *w)
{
    shuffle_buffer_iter *it = (shuffle_buffer_iter *)base;
    int64_t f[NFIELDS] = {[F_pulled] = it->pulled, [F_emitted] = it->emitted};
    return sl__state_node(w, base, NFIELDS, f, 0);
}

/* Rebuilds the buffer as it was after `emitted` outputs: the same pulls
 * and draws, the outputs dropped. The input starts the pass afresh. */
static int shuffle_buffer_resume(shuffle_buffer_iter *it, int64_t pulled, int64_t emitted)
{
    while (it->emitted < emitted) {
        sl_element *el;
        int rc = shuffle_buffer_next(&it->base, &el);
        if (rc == SL_EOF)
            break;
        if (rc)
            return rc;
        sl_element_release(el);
    }
    if (it->emitted != emitted || it->pulled != pulled)
        return sl__set_error(SL_EMISMATCH, "saved state: shuffle had taken %lld elements and "
                             "given %lld; replaying its input gives %lld and %lld (the input "
                             "changed?)", (long long)pulled, (long long)emitted,
                             (long long)it->pulled, (long long)it->emitted);
    return 0;
}

static void shuffle_buffer_destroy(sl__iter *base)
{
    shuffle_buffer_iter *it = (shuffle_buffer_iter *)base;
    for (int64_t i = 0; i < it->count; i++)
        if (it->slots[i])
            sl_element_release(unhold(it, it->slots[i]));
    sl__free(it->slots, (size_t)it->cap * sizeof *it->slots);
    sl__strfree(it->deferred_msg);
    sl__iter_free(it->in);
}

static const sl__iter_ops shuffle_buffer_iter_ops = {
    .next = shuffle_buffer_next,
    .destroy = shuffle_buffer_destroy,
    .save = shuffle_buffer_save,
    .draining = shuffle_buffer_draining,
    .prime = shuffle_buffer_prime,
};

static int shuffle_buffer_make(const sl_dataset *ds, sl__tree *tree, uint64_t key,
                            int64_t epoch, sl__iter **out)
{
    const shuffle_ds *s = (const shuffle_ds *)ds;
    shuffle_buffer_iter *it = sl__iter_alloc(&shuffle_buffer_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    /* a smaller input needs no bigger window; at least 1 so that a wrong
     * cardinality of 0 cannot hide elements */
    int64_t card = sl_dataset_cardinality(ds->inputs[0]);
    it->limit = card >= 1 && card < s->buffer ? card : s->buffer;
    it->hole = -1;
    it->rng = make_rng(&it->base);
    int64_t f[NFIELDS];
    int resumed = sl__iter_restored(&it->base, NFIELDS, f);
    int rc = resumed < 0 ? resumed : 0;
    for (int i = 0; resumed > 0 && rc == 0 && i < NFIELDS; i++)
        rc = sl__state_range(&it->base, field_names[i], f[i], 0, INT64_MAX);
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc == 0 && resumed > 0)
        rc = shuffle_buffer_resume(it, f[F_pulled], f[F_emitted]);
    if (rc) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

/* ---- whole-dataset shuffle ---- */

/*
 * Position i of the epoch is element perm(i) of the input, a bijection of
 * [0, n) keyed by (seed, node, epoch) and computed per index (core/perm.h):
 * no table, the same order on every host, and a saved position resumes in
 * O(1). The record keeps the permutation's version beside the position: a
 * state written under another order (sluice 0.3's first, a lazily drawn
 * Fisher-Yates table, saved the position alone) is refused, never misread.
 */
typedef struct shuffle_all_iter {
    sl__iter base;
    sl__perm perm; /* windowed: of the full blocks */
    int64_t n, pos, version;
    int64_t end; /* n, or where a service worker's part ends */
    /* sl_shuffle_windowed: the input in blocks of `block`, the full ones
     * permuted, each run of `window` of them shuffled within; the short
     * last block, if any, is shuffled on its own at the end */
    int64_t block, window, full;
    uint64_t key;
    sl__perm in_window;
    int64_t current; /* the window in_window is for, or -1 */
} shuffle_all_iter;

/* The input index at position i of a windowed order. */
static uint64_t windowed_at(shuffle_all_iter *it, int64_t i)
{
    int64_t span = it->block * it->window, w = i / span;
    if (i >= it->full * it->block) /* the tail, a window of its own */
        w = (it->full + it->window - 1) / it->window;
    if (w != it->current) {
        int64_t first = w * it->window;
        int64_t count = first < it->full ? (it->full - first < it->window ? it->full - first
                                                                          : it->window) *
                                               it->block
                                         : it->n - it->full * it->block;
        sl__perm_init(&it->in_window, (uint64_t)count, sl__hash_u64(it->key, (uint64_t)w));
        it->current = w;
    }
    int64_t base = it->full * it->block;
    if (i >= base)
        return (uint64_t)base + sl__perm_at(&it->in_window, (uint64_t)(i - base));
    uint64_t q = sl__perm_at(&it->in_window, (uint64_t)(i - w * span));
    uint64_t slot = (uint64_t)(w * it->window) + q / (uint64_t)it->block;
    return sl__perm_at(&it->perm, slot) * (uint64_t)it->block + q % (uint64_t)it->block;
}

static int shuffle_all_next(sl__iter *base, sl_element **out)
{
    shuffle_all_iter *it = (shuffle_all_iter *)base;
    const sl_dataset *in = base->ds->inputs[0];
    while (it->pos < it->end) {
        int64_t i = it->pos++;
        uint64_t picked = it->block ? windowed_at(it, i) : sl__perm_at(&it->perm, (uint64_t)i);
        int rc = in->ops->get(in, (int64_t)picked, out);
        if (rc == 0) {
            base->ok_count++;
            return 0;
        }
        /* no input iterator exists to judge the element: this node does */
        rc = sl__policy(base, rc);
        if (rc)
            return rc;
    }
    return SL_EOF;
}

static int shuffle_all_get(sl__iter *base, int64_t i, sl_element **out)
{
    shuffle_all_iter *it = (shuffle_all_iter *)base;
    if (i < 0 || i >= it->n)
        return sl__set_error(SL_EINVAL, "shuffle: position %lld of %lld", (long long)i,
                             (long long)it->n);
    uint64_t picked = it->block ? windowed_at(it, i) : sl__perm_at(&it->perm, (uint64_t)i);
    const sl_dataset *in = base->ds->inputs[0];
    return in->ops->get(in, (int64_t)picked, out);
}

static const sl__field shuffle_all_state[] = {
    SL__FIELD_I64(shuffle_all_iter, pos, 0, INT64_MAX),
    SL__FIELD_I64(shuffle_all_iter, version, 0, INT64_MAX),
};
#define SHUFFLE_ALL_FIELDS ((int)(sizeof shuffle_all_state / sizeof shuffle_all_state[0]))

static int shuffle_all_save(sl__iter *base, sl__bytes *w)
{
    int64_t f[SHUFFLE_ALL_FIELDS];
    sl__fields_get(base, shuffle_all_state, SHUFFLE_ALL_FIELDS, f);
    return sl__state_node(w, base, SHUFFLE_ALL_FIELDS, f, 0);
}

static const sl__iter_ops shuffle_all_iter_ops = {
    .next = shuffle_all_next,
    .save = shuffle_all_save,
    .get = shuffle_all_get,
};

static int shuffle_all_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                         sl__iter **out)
{
    /* a folder that rescans lists its new files now: this pass reads them
     * by index without making the folder's iterator */
    int rc = sl__dataset_refresh(ds->inputs[0], epoch);
    if (rc < 0)
        return rc;
    shuffle_all_iter *it = sl__iter_alloc(&shuffle_all_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->n = sl_dataset_cardinality(ds->inputs[0]);
    sl__rng rng = make_rng(&it->base);
    const shuffle_ds *sd = (const shuffle_ds *)ds;
    it->block = sd->block;
    it->window = sd->window;
    it->current = -1;
    if (it->block) {
        it->full = it->n / it->block;
        it->key = sl__rng_next(&rng);
        sl__perm_init(&it->perm, (uint64_t)it->full, sl__rng_next(&rng));
    } else {
        sl__perm_init(&it->perm, (uint64_t)it->n, sl__rng_next(&rng));
    }
    if (sl__iter_restored_count(&it->base) == 1) {
        sl__iter_free(&it->base);
        return sl__set_error(SL_EMISMATCH, "shuffle(ALL): the state was saved under the order "
                             "of an older sluice (a drawn table); this one computes order "
                             "version %d per index and cannot resume it",
                             SL__PERM_VERSION);
    }
    rc = sl__fields_restore(&it->base, it, shuffle_all_state, SHUFFLE_ALL_FIELDS);
    if (rc > 0 && it->version != SL__PERM_VERSION)
        rc = sl__set_error(SL_EMISMATCH, "shuffle(ALL): the state was saved under order "
                           "version %lld; this sluice computes version %d",
                           (long long)it->version, SL__PERM_VERSION);
    if (rc > 0)
        rc = sl__state_range(&it->base, "pos", it->pos, 0, it->n);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    it->version = SL__PERM_VERSION;
    it->end = it->n;
    int64_t first, end;
    if (rc == 0 && sl__split_range(&it->base, &first, &end)) {
        it->pos = first < it->n ? first : it->n;
        it->end = end < it->n ? end : it->n;
    }
    *out = &it->base;
    return 0;
}

/* ---- dataset ---- */

static int shuffle_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                        sl__iter **out)
{
    if (((const shuffle_ds *)ds)->buffer == SL_SHUFFLE_ALL)
        return shuffle_all_make(ds, tree, key, epoch, out);
    return shuffle_buffer_make(ds, tree, key, epoch, out);
}

static int64_t shuffle_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static uint64_t shuffle_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const shuffle_ds *s = (const shuffle_ds *)ds;
    h = sl__hash_u64(h, (uint64_t)s->buffer);
    h = sl__hash_u64(h, (uint64_t)s->seed);
    h = sl__hash_u64(h, s->flags);
    if (s->block) /* (what sl_shuffle hashed before stays as it was) */
        h = sl__hash_u64(sl__hash_u64(h, (uint64_t)s->block), (uint64_t)s->window);
    return h;
}

static const sl__node_ops shuffle_ops = {
    .kind = "shuffle",
    .make_iter = shuffle_make,
    .cardinality = shuffle_cardinality,
    .structure = sl__structure_of_input,
    .fingerprint = shuffle_fingerprint,
};

typedef struct shuffle_args {
    int64_t buffer;
    int64_t seed;
    unsigned flags;
    int64_t block, window;
} shuffle_args;

static sl_dataset *build(sl_dataset *in, const shuffle_args *a)
{
    int64_t buffer = a->buffer, seed = a->seed;
    unsigned flags = a->flags;
    shuffle_ds *s = (shuffle_ds *)sl__dataset_new(&shuffle_ops, sizeof *s, in);
    if (!s)
        return NULL;
    s->buffer = buffer;
    s->seed = seed;
    s->flags = flags;
    s->block = a->block;
    s->window = a->window;
    if (a->block < 0 || a->window < 0 || (a->block > 0) != (a->window > 0))
        return sl__dataset_fail(&s->base, SL_EINVAL, "shuffle_windowed: block and window "
                                "must be >= 1 (%lld, %lld)", (long long)a->block,
                                (long long)a->window);
    if (a->block) { /* a window past the blocks there are is all of them: the same order */
        int64_t card = sl_dataset_cardinality(s->base.inputs[0]);
        int64_t full = card > 0 ? card / a->block : 0;
        if (s->window > full)
            s->window = full > 0 ? full : 1;
    }
    if (buffer == 0 || buffer < SL_SHUFFLE_ALL)
        return sl__dataset_fail(&s->base, SL_EINVAL,
                                "shuffle: buffer must be >= 1 or SL_SHUFFLE_ALL, not %lld",
                                (long long)buffer);
    if (seed < -1)
        return sl__dataset_fail(&s->base, SL_EINVAL,
                                "shuffle: seed must be >= 0 or -1, not %lld", (long long)seed);
    if (flags & ~SL_SHUFFLE_NO_RESHUFFLE)
        return sl__dataset_fail(&s->base, SL_EINVAL, "shuffle: unknown flags 0x%x", flags);
    if (buffer != SL_SHUFFLE_ALL)
        return &s->base;
    const sl_dataset *input = s->base.inputs[0];
    int64_t card = sl_dataset_cardinality(input);
    if (!sl__dataset_can_get(input))
        return sl__dataset_fail(&s->base, SL_EUNSUPPORTED,
                                "shuffle: SL_SHUFFLE_ALL needs random access, which %s does "
                                "not offer (use a buffer size instead)",
                                sl_dataset_name(input));
    if (card < 0)
        return sl__dataset_fail(&s->base, SL_EUNSUPPORTED,
                                "shuffle: SL_SHUFFLE_ALL needs a known finite size, and %s "
                                "has %s cardinality",
                                sl_dataset_name(input),
                                card == SL_INFINITE ? "infinite" : "unknown");
    return &s->base;
}

bool sl__shuffle_by_position(const sl_dataset *ds)
{
    return ds->ops == &shuffle_ops && ((const shuffle_ds *)ds)->buffer == SL_SHUFFLE_ALL;
}

static sl_dataset *apply(sl_dataset *x, void *arg)
{
    const shuffle_args *a = arg;
    if (x && a->block && x->ops->with_blocks) { /* reads can fetch whole blocks */
        sl_dataset *b = x->ops->with_blocks(x, a->block, a->window);
        sl_dataset_release(x);
        x = b;
    }
    return build(x, arg);
}

/* Moves below nodes that read files, so dropped files are never read. */
SL_API sl_dataset *sl_shuffle(sl_dataset *in, int64_t buffer, int64_t seed, unsigned flags)
{
    shuffle_args a = {buffer, seed, flags, 0, 0};
    return sl__push_below(in, apply, &a);
}

SL_API sl_dataset *sl_shuffle_windowed(sl_dataset *in, int64_t block, int64_t window,
                                       int64_t seed, unsigned flags)
{
    if (in && (block < 1 || window < 1)) {
        sl__set_error(SL_EINVAL, "shuffle_windowed: block and window must be >= 1 (%lld, "
                      "%lld)", (long long)block, (long long)window);
        sl_dataset_release(in);
        return NULL;
    }
    shuffle_args a = {SL_SHUFFLE_ALL, seed, flags, block, window};
    return sl__push_below(in, apply, &a);
}
