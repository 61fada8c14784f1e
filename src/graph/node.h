/*
 * The node interface every op implements (the tree its iterators share is
 * in tree.h).
 *
 * A dataset node (sl_dataset) is immutable: kind, parameters, inputs. To run
 * it, the framework asks each node for a node iterator (sl__iter) through
 * ops->make_iter; node iterators form a tree mirroring the dataset graph and
 * share one sl__tree (options, error policy, byte accounting, cancellation).
 *
 * Contract of sl__iter_ops.next: returns 0 with a new reference in *out,
 * SL_EOF, or a negative code with this thread's error message set
 * (sl__set_error). Errors coming from an input are passed up unchanged; a
 * node where an element error originates (a callback, a bad file) first asks
 * sl__policy() whether to skip it.
 */
#ifndef SL_GRAPH_NODE_H
#define SL_GRAPH_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include "../core/alloc.h"
#include "../core/element.h"
#include "../core/error.h"
#include "../core/hash.h"
#include "../core/rng.h"
#include "../core/structure.h"
#include "async.h"
#include "learned.h"
#include "state.h"
#include "stats.h"
#include "trace.h"
#include "tree.h"
#include "../runtime/runtime.h"
#include "sluice.h"

/* Inputs a node may have (zip, sample_from_datasets). */
#define SL__MAX_INPUTS 4096

typedef struct sl__iter sl__iter;
typedef struct sl__tree sl__tree;

typedef struct sl__node_ops {
    /* "range", "map", ...: hashed into fingerprints and saved-state keys,
     * so an op's kind never changes once released */
    const char *kind;
    /* The name reports and sl_dataset_name show for an op renamed since
     * (from_tensors became from_tensor_slices); NULL: the kind. */
    const char *display;
    /* Builds the node iterator for one pass (epoch) of ds. On failure *out
     * stays NULL and everything made so far is freed. */
    int (*make_iter)(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                     sl__iter **out);
    /* Elements of one pass, SL_INFINITE or SL_UNKNOWN. NULL: SL_UNKNOWN. */
    int64_t (*cardinality)(const sl_dataset *ds);
    /* Mixes the node's parameters into h (inputs are mixed by the caller).
     * NULL: no parameters. */
    uint64_t (*fingerprint)(const sl_dataset *ds, uint64_t h);
    /* Frees op-specific members (not the inputs, not ds itself). NULL ok. */
    void (*destroy)(sl_dataset *ds);
    /* Random access (for SL_SHUFFLE_ALL). can_get NULL or false: none. get
     * runs on any thread, concurrently with itself; index in [0, card). */
    bool (*can_get)(const sl_dataset *ds);
    int (*get)(const sl_dataset *ds, int64_t index, sl_element **out);
    /* For 1:1, order-preserving nodes without randomness (reading files):
     * the same node over another input (consumed). Ops that select or
     * permute by position (take, skip, shard, shuffle-all) move below such
     * nodes, so files they drop are never read. NULL: not movable. */
    sl_dataset *(*rebuild)(const sl_dataset *ds, sl_dataset *new_input);
    /* For record readers whose input is a list of files (tfrecord, tar
     * shards, interleave): the same reader over another list (consumed), so
     * that sl_distribute can split files rather than records. Never used by
     * the ops that select by position (the reader is not 1:1). NULL: none. */
    sl_dataset *(*rebuild_files)(const sl_dataset *ds, sl_dataset *new_files);
    /* For sources of byte ranges read by a ranged read (the indexed record
     * sources): the same source whose elements also carry the byte span of
     * the run of `block` consecutive elements each is in, where `window`
     * such runs at a time fit what the read keeps (sl_shuffle_windowed
     * asks, so a read of a URL fetches a block once). NULL: none. */
    sl_dataset *(*with_blocks)(const sl_dataset *ds, int64_t block, int64_t window);
    /* batch(ds, size, flags) as one node, for ops that write their output
     * straight into the batch (map_image). Consumes ds. NULL: none. */
    sl_dataset *(*fuse_batch)(sl_dataset *ds, int64_t size, unsigned flags);
    /* For sources whose contents change between passes (a folder with
     * SL_FOLDER_RESCAN): brings ds up to date for a pass of `epoch`, at
     * most once per epoch, appending only (an index keeps its element), so
     * that passes begun earlier stay valid. Any thread. The source's own
     * make_iter calls it, and so do ops that read their input by random
     * access without making its iterator (shuffle-all, through
     * sl__dataset_refresh). NULL: contents fixed at build. */
    int (*refresh)(const sl_dataset *ds, int64_t epoch);
    /* The structure of the node's elements, from its inputs' (a new
     * reference; sl__structure_of_input for ops that keep it), or NULL
     * while that is not known. NULL hook: the node sets it when built, or
     * publishes it once it is known (sl__dataset_publish_structure). */
    sl_structure *(*structure)(const sl_dataset *ds);
    /* For nodes that stack consecutive input elements into one (batch, the
     * fused map_image batch): how many per output, and in *drop whether a
     * short last one is dropped. NULL: not such a node. */
    int64_t (*batch_rows)(const sl_dataset *ds, bool *drop);
} sl__node_ops;

struct sl_dataset {
    atomic_int refs;
    /* the epoch the next iterator made from this dataset runs, unless its
     * options name one (SL_OPT_EPOCH): each pass over the same dataset
     * object is a new epoch, as with tf.data's reshuffle_each_iteration */
    atomic_llong next_epoch;
    const sl__node_ops *ops;
    int ninputs;
    sl_dataset **inputs; /* ninputs of them: in_two, or an array of its own */
    sl_dataset *in_two[2];
    char *name;  /* display name (owned), NULL: ops->kind */
    size_t size; /* allocation size of the derived struct */
    /* sl_dataset_fingerprint, kept once computed (a listing of a million
     * paths takes tens of milliseconds to hash) */
    _Atomic uint64_t fingerprint;
    atomic_bool has_fingerprint;
    /* what the controller of its last iterator learned, for the next one
     * (learned.h; under that file's lock) */
    sl__learned *learned;
    /* its elements' structure (owned), NULL while not known: set when it
     * is built, derived from the inputs' when first asked, or published
     * once by the node (a map's first output); never changes after */
    _Atomic(sl_structure *) structure;
};

/* Allocates a derived dataset of `size` bytes (zeroed, base filled in) that
 * takes ownership of `input`. Given a NULL input (an earlier builder failed)
 * it returns NULL and keeps the earlier error: builders just return then. */
sl_dataset *sl__dataset_new(const sl__node_ops *ops, size_t size, sl_dataset *input);
/* Same for a source (no inputs). */
sl_dataset *sl__dataset_new_source(const sl__node_ops *ops, size_t size);
/* Same for n inputs (consumes all n, also on failure; NULL and the first
 * error when one of them is NULL): zip, concatenate, sample_from. */
sl_dataset *sl__dataset_new_n(const sl__node_ops *ops, size_t size, sl_dataset *const *in,
                              int n);
/* Sets the display name "kind(name)" (copied). 0 or SL_ENOMEM. */
int sl__dataset_set_name(sl_dataset *ds, const char *name);
/* For builders that validate after sl__dataset_new: frees ds, sets the error
 * and returns NULL. */
sl_dataset *sl__dataset_fail(sl_dataset *ds, int code, const char *fmt, ...) SL__PRINTF(3, 4);
bool sl__dataset_can_get(const sl_dataset *ds);
/* Sets a structure known when ds is built (consumes s). Given NULL (a
 * structure that could not be made) it frees ds and returns NULL with the
 * error kept, so a builder can end with `return sl__dataset_structured(ds,
 * sl__structure_...(...));`. */
sl_dataset *sl__dataset_structured(sl_dataset *ds, sl_structure *s);
/* Publishes ds's structure once it is known (s borrowed): 0, or
 * SL_ESHAPE with a message naming both when ds already has another tree. */
int sl__dataset_publish_structure(const sl_dataset *ds, const sl_structure *s);
/* For a node whose elements are another dataset's (an interleave's
 * source, a group's reduction): publishes from's structure as ds's when
 * from knows it (0 when it does not yet); SL_ESHAPE when ds has another. */
int sl__dataset_adopt_structure(const sl_dataset *ds, const sl_dataset *from);
/* The structure hook of ops whose elements are their input's. */
sl_structure *sl__structure_of_input(const sl_dataset *ds);
/* Refreshes every changing source under ds (ops->refresh) for `epoch`:
 * 0 or a negative code. sl__dataset_changing: whether there is one. */
int sl__dataset_refresh(const sl_dataset *ds, int64_t epoch);
bool sl__dataset_changing(const sl_dataset *ds);
/* Applies `op` (a builder taking its input and arg) below the chain of
 * rebuildable nodes at the top of `in`: op(read(x)) becomes read(op(x)).
 * Consumes in; returns the new top or NULL. */
sl_dataset *sl__push_below(sl_dataset *in, sl_dataset *(*op)(sl_dataset *x, void *arg),
                           void *arg);

typedef struct sl__iter_ops {
    int (*next)(sl__iter *it, sl_element **out);
    /* Stops background work and wakes every wait of this node; called from
     * another thread (under the tree lock) before destroy. Idempotent.
     * NULL for synchronous nodes. */
    void (*cancel)(sl__iter *it);
    /* Frees everything the node iterator owns, including its inputs'
     * iterators (with sl__iter_free). The base itself is freed by the caller. */
    void (*destroy)(sl__iter *it);
    /* Appends the node's record (state.h) as of the last element next
     * returned, then its inputs'. Called by the thread that calls next,
     * between calls. NULL: the op cannot save (SL_EUNSUPPORTED). */
    int (*save)(sl__iter *it, sl__bytes *w);
    /* Optional (NULL: neither), for repeat, which overlaps a pass's end
     * with the next pass's start (repeat.c). draining: the node pulls no
     * more input this pass, so each element it returns frees room it held.
     * prime: one step of the work before the node's first element (a
     * buffer shuffle's fill), returning no element: 1 when it took a step,
     * 0 when it has none to take; an error of its input is kept and comes
     * out of next where it would have without the priming. Both on the
     * thread that calls next. */
    bool (*draining)(const sl__iter *it);
    int (*prime)(sl__iter *it);
    /* Optional: element i of this pass, out of order (a whole-dataset
     * shuffle's i-th, an indexed source's), for a distribute resumed on
     * another world size. Does not move the iterator; the caller applies
     * the error policy. NULL: no random access. */
    int (*get)(sl__iter *it, int64_t i, sl_element **out);
} sl__iter_ops;

struct sl__iter {
    const sl__iter_ops *ops;
    const sl_dataset *ds;
    sl__tree *tree;
    uint64_t key;       /* stable identity of the node in the graph */
    int64_t epoch;      /* which pass of this node (set by repeat) */
    size_t size;        /* allocation size of the derived struct */
    int64_t ok_count;   /* elements this node produced itself (for SKIP_RATE) */
    int64_t fail_count; /* element errors that originated here */
    sl__iter *async_next, *async_prev; /* tree registry of cancellable nodes */
    bool registered;
    /* observation (stats.h): the node's entry, shared by all its passes;
     * its depth below the root; own_count: the node counts its elements
     * itself (in other units than output elements), sl__iter_next doesn't */
    sl__node_stats *stats;
    uint64_t stats_key; /* its entry's key: the key, but shared under an interleave */
    int depth;
    bool own_count;
    /* under an ignore_errors node (SL__IGNORE_*), inherited by the node
     * iterators made below it: element errors are dropped whatever the
     * policy */
    int ignoring;
    /* while it is being made from a saved state: its record (state.c),
     * read with sl__iter_restored; NULL when it starts fresh */
    const struct sl__restore_entry *restored;
};

/* Allocates a derived node iterator of `size` bytes (zeroed, base filled). */
void *sl__iter_alloc(const sl__iter_ops *ops, size_t size, const sl_dataset *ds,
                     sl__tree *tree, uint64_t key, int64_t epoch);
/* Makes the iterator of input `i` of `parent`'s dataset for `epoch`. */
int sl__iter_make_input(sl__iter *parent, int i, int64_t epoch, sl__iter **out);
/* While parent is made from a saved state: whether its input i had an
 * iterator when the state was saved (1) or not (0: it had ended and been
 * let go, so it is not made again); -1 when parent starts fresh. */
int sl__iter_input_saved(const sl__iter *parent, int i);
/* Makes the iterator of any dataset under a derived key. */
int sl__iter_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                  sl__iter **out);
/* Makes the iterator of ds (not one of parent's inputs: an interleave's
 * per-element dataset) one level below parent, with its own key and the
 * statistics key its nodes share with the other such datasets'. */
int sl__iter_make_under(sl__iter *parent, const sl_dataset *ds, uint64_t key,
                        uint64_t stats_key, int64_t epoch, sl__iter **out);
/* For a counter only one thread writes at a time (handed over under a lock
 * or a join): a relaxed load and store, no locked instruction. */
static inline void sl__stat_add_single(atomic_llong *c, int64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}
static inline int sl__iter_next(sl__iter *it, sl_element **out)
{
    int rc = it->ops->next(it, out);
    /* node iterators are used by one thread at a time: single writer */
    if (rc == 0 && !it->own_count) {
        sl__stat_add_single(&it->stats->elements, 1);
        sl__stat_add_single(&it->stats->bytes_out, (int64_t)sl__element_bytes(*out));
    }
    return rc;
}
/* Destroys and frees; NULL ok. */
void sl__iter_free(sl__iter *it);

/* Cancellable (asynchronous) nodes register so that sl_iterator_free can
 * wake them wherever they wait. Register after setup; unregister at the
 * start of destroy. */
void sl__iter_register(sl__iter *it);
void sl__iter_unregister(sl__iter *it);

/* What a map / filter callback sees. Lives on the calling thread's stack. */
struct sl_map_ctx {
    sl__rng rng;
    int64_t index;
    int64_t epoch;
    const sl_dataset *ds; /* the map's (or filter's) dataset */
    /* what the function reads, when it is not ds's input (the dataset a
     * save writes); NULL: ds's input */
    const sl_dataset *input;
    struct sl__scratch *scratch; /* freed by sl__map_ctx_end */
};
void sl__map_ctx_begin(sl_map_ctx *ctx, const sl_dataset *ds, uint64_t seed, uint64_t key,
                       int64_t epoch, int64_t index);
void sl__map_ctx_end(sl_map_ctx *ctx);
/* Calls a predicate (filter's, take_while's) on el as element `index` of
 * it's pass: 1 keep, 0 not, or a negative code with the message set and
 * prefixed with the element's file and the node's name. */
int sl__predicate_call(const sl__iter *it, sl_predicate_fn fn, void *user, uint64_t seed,
                       int64_t index, const sl_element *el);

/* The runtime internals async nodes use (sl__task, sl__runtime_submit,
 * sl__thread_start) are in runtime/runtime.h. */

#endif
