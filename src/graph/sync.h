/*
 * A synchronous node, described rather than written out.
 *
 * Most ops that run on the pulling thread (take, skip, shard, filter,
 * batch, repeat, zip, concatenate ...) share the same plumbing: make the
 * iterator, fresh or from a saved record; make the inputs' iterators; save
 * a few counters and then the inputs' records; free the inputs; hash the
 * parameters into the fingerprint. An op describes itself with an
 * sl__sync_def instead: its iterator's saved fields (named, with bounds),
 * its dataset's parameters, its next, and hooks for what only it knows.
 * The skeleton does the rest, and the op file keeps its semantics.
 *
 *     typedef struct take_iter { sl__sync_iter u; int64_t left; } take_iter;
 *     static const sl__field take_state[] = {SL__FIELD_I64(take_iter, left, -1, INT64_MAX)};
 *     static const sl__sync_def take_def = {
 *         .node = {.kind = "take", SL__SYNC_NODE, .cardinality = take_cardinality},
 *         .iter = {SL__SYNC_ITER(take_next)},
 *         .iter_size = sizeof(take_iter),
 *         SL__SYNC_STATE(take_state),
 *         SL__SYNC_PARAMS(take_params),
 *         .start = take_start,
 *     };
 *
 * The def's node and iterator ops are the ones the framework calls, so
 * next is the op's own function, called directly: the skeleton adds
 * nothing per element.
 */
#ifndef SL_GRAPH_SYNC_H
#define SL_GRAPH_SYNC_H

#include <stddef.h>
#include "node.h"

/* The first member of an op's iterator. */
typedef struct sl__sync_iter {
    sl__iter base;
    sl__iter *in; /* the input's iterator; NULL once let go (or not made) */
    /* the iterators of all ds->ninputs inputs (&in for one input); an
     * input not made, or let go, is NULL */
    sl__iter **ins;
    /* restoring by replay (sl__sync_def.replay): an element error met now
     * was the error policy's to skip before, and counted in the record;
     * the op skips it again, quietly */
    bool replaying;
} sl__sync_iter;

/* A field of a record that is a member of a struct: an int64_t, or a
 * bool saved as 0 or 1, with the bounds a restored value must lie in
 * (bounds that depend on the parameters are the start hook's to check). */
typedef struct sl__field {
    const char *name;
    size_t offset;
    bool is_bool;
    int64_t lo, hi;
} sl__field;

#define SL__FIELD_I64(type, member, lo, hi) {#member, offsetof(type, member), false, (lo), (hi)}
#define SL__FIELD_BOOL(type, member) {#member, offsetof(type, member), true, 0, 1}
/* A parameter of the dataset (an int64_t member), hashed into its
 * fingerprint in the order given. */
#define SL__PARAM(type, member) {#member, offsetof(type, member), false, INT64_MIN, INT64_MAX}

enum {
    /* the start hook makes the inputs' iterators (or leaves them unmade),
     * not the skeleton */
    SL__SYNC_OWN_INPUT = 1u << 0,
};

typedef struct sl__sync_def {
    sl__node_ops node; /* first: a dataset's ops point here */
    sl__iter_ops iter; /* an iterator's ops point here */
    size_t iter_size;
    const sl__field *state; /* the record's fields, in order */
    int nstate;
    const sl__field *params; /* NULL: the fingerprint mixes in nothing */
    int nparams;
    unsigned flags;
    /* After the fields are set: fresh (resumed false; they are zero, the
     * hook gives them their starting values) or from a record (resumed
     * true; the hook checks the bounds the table could not). 0, or a
     * negative code with the message set. NULL: fresh fields stay zero. */
    int (*start)(sl__sync_iter *it, bool resumed);
    /* Frees what the iterator holds besides its input. NULL: nothing. */
    void (*fini)(sl__sync_iter *it);
    /* For a record whose length varies (no state table): reads it into
     * the iterator; 0 fresh, 1 resumed, or a negative code. The op saves
     * it with an iter.save of its own. */
    int (*restore)(sl__sync_iter *it);
    /* An op whose state is rebuilt rather than saved (what it holds:
     * groups, open rows, a carried state). Its record holds its fields
     * only. Restored, the fields start at zero, the input afresh, and the
     * skeleton calls replay (one step of the pass with the output dropped:
     * 0, SL_EOF, or an error) with it->replaying set until the field named
     * replay_until is back at its saved value, and once more if the bool
     * field named replay_done was saved true; then every field must be as
     * saved. An input that ends early or gives other counts is SL_EMISMATCH,
     * a step that fails its own error, each naming the op and the counts.
     * replays: whether this dataset's iterators do (NULL: all of them). */
    int (*replay)(sl__sync_iter *it);
    const char *replay_until, *replay_done;
    bool (*replays)(const sl_dataset *ds);
} sl__sync_def;

/* The skeleton's members of the two ops tables. */
#define SL__SYNC_NODE .make_iter = sl__sync_make, .fingerprint = sl__sync_fingerprint
#define SL__SYNC_ITER(next_fn) .next = (next_fn), .destroy = sl__sync_destroy, \
                                .save = sl__sync_save
#define SL__SYNC_STATE(table) .state = (table), .nstate = (int)(sizeof(table) / sizeof *(table))
#define SL__SYNC_PARAMS(table) .params = (table), .nparams = (int)(sizeof(table) / sizeof *(table))
/* Restoring by replay (above): the step, the counter it moves and the
 * flag of the input's end (NULL: none). */
#define SL__SYNC_REPLAY(step, until, done) .replay = (step), .replay_until = (until), \
                                           .replay_done = (done)

/* Whether ds is an indexed source (its iterator is sl__indexed_iter). */
bool sl__dataset_indexed(const sl_dataset *ds);
int sl__sync_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                   sl__iter **out);
/* The same from another def than the dataset's: for an op whose iterator
 * comes in variants (prefetch's edge profile passes elements straight
 * through), the variant's def; its node ops go unused. */
int sl__sync_make_as(const sl__sync_def *def, const sl_dataset *ds, sl__tree *tree,
                      uint64_t key, int64_t epoch, sl__iter **out);
uint64_t sl__sync_fingerprint(const sl_dataset *ds, uint64_t h);
void sl__sync_destroy(sl__iter *it);
/* The fields, then the records of the inputs that have an iterator (none
 * for an op that replays). */
int sl__sync_save(sl__iter *it, sl__bytes *w);
/* Frees input i's iterator (its ins slot becomes NULL): an input that
 * ended, so what it holds (threads, files) goes at once. */
void sl__sync_drop_input(sl__sync_iter *it, int i);

/* A source of known length with random access (range, from_tensors,
 * from_files, from_element, list_files, a folder's listing): its iterator
 * is a position in [0, n), n the cardinality when the pass begins, saved
 * and restored; next is the node's get at the position. Such a source's
 * def is its node ops (cardinality, get) and SL__INDEXED_SOURCE(start):
 * sl__indexed_start, or a hook of its own (a folder's rescan) that ends
 * with it. */
typedef struct sl__indexed_iter {
    sl__sync_iter u;
    int64_t position, n;
} sl__indexed_iter;

extern const sl__field sl__indexed_state[1];
int sl__indexed_next(sl__iter *it, sl_element **out);
int sl__indexed_get(sl__iter *it, int64_t i, sl_element **out);
int sl__indexed_start(sl__sync_iter *it, bool resumed);
/* sl__sync_save's record, written without the table walk: a map over a
 * source snapshots it at every element. */
int sl__indexed_save(sl__iter *it, sl__bytes *w);
#define SL__INDEXED_SOURCE(start_)                                                      \
    .iter = {.next = sl__indexed_next, .destroy = sl__sync_destroy,                     \
             .save = sl__indexed_save, .get = sl__indexed_get},                         \
    .iter_size = sizeof(sl__indexed_iter), SL__SYNC_STATE(sl__indexed_state),           \
    .start = (start_)

/* The def of a dataset made from one. */
static inline const sl__sync_def *sl__sync_def_of(const sl_dataset *ds)
{
    return (const sl__sync_def *)ds->ops;
}

/* The fields of obj as a record's values, and back (checking the table's
 * bounds): for ops that save struct members without the whole skeleton.
 * sl__fields_restore: 0 when the node starts fresh, 1 when obj took its
 * record, or SL_ECORRUPT naming the field. */
void sl__fields_get(const void *obj, const sl__field *f, int n, int64_t *out);
int sl__fields_restore(const sl__iter *it, void *obj, const sl__field *f, int n);

#endif
