/*
 * Saved positions (sl_iterator_save / sl_iterator_restore).
 *
 * A node iterator's state describes the elements its consumer has taken
 * from it, not what it has computed ahead. Each op writes one record: its
 * counters as of the last element it returned, then its inputs' records.
 * A synchronous node asks its input for the input's record at save time
 * (the same thread calls both). An asynchronous node (map, prefetch, read,
 * map_image's batch node) pulls ahead on a thread of its own, so that
 * thread snapshots the input's record after each pull and keeps it with the
 * element; when the consumer takes the element, that snapshot becomes the
 * node's input record. A snapshot is a few dozen bytes, written into
 * buffers that are reused.
 *
 * Record, little-endian: u64 node key, u32 field count, u32 child count,
 * i64 ok count, i64 fail count (the error policy's per-node counters),
 * i64 fields[field count], then the child records. Restoring parses the
 * records into a table by key; each node iterator made while the table is
 * set takes its record (sl__iter_restored) and starts from it.
 */
#ifndef SL_GRAPH_STATE_H
#define SL_GRAPH_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "../core/bytes.h"

typedef struct sl__iter sl__iter;
typedef struct sl__tree sl__tree;


/* Appends node it's record header and fields; the caller then appends
 * exactly nchildren child records (sl__iter_save or a snapshot). */
int sl__state_node(sl__bytes *w, const sl__iter *it, int nfields, const int64_t *fields,
                   int nchildren);
/* The same with the fields left to the caller: where to put them, each
 * 8 bytes little-endian (sl__put_le64), or NULL with SL_ENOMEM set. For
 * a writer that reads its fields from elsewhere (the sync skeleton's
 * tables) without copying them twice: a map snapshots its input's record
 * at every element it pulls. */
unsigned char *sl__state_record(sl__bytes *w, const sl__iter *it, int nfields, int nchildren);
/* Appends it's record (and its inputs'): it->ops->save, or SL_EUNSUPPORTED
 * for an op without one. Only the thread that calls it's next, between
 * two calls. */
int sl__iter_save(sl__iter *it, sl__bytes *w);

/* What an asynchronous node keeps per element: the input's record right
 * after the element was pulled. `rc` < 0 once a snapshot failed (an input
 * that cannot save): later saves report it, the pipeline runs on. */
typedef struct sl__snapper {
    atomic_int rc;
    char *msg; /* written before rc */
} sl__snapper;
/* Appends the input's record to dst (its length is then the snapshot's
 * end); on failure records it in s, once, and returns the error. */
int sl__snap(sl__snapper *s, sl__iter *input, sl__bytes *dst);
/* For the node's save: s's error with its message, or 0. */
int sl__snap_check(const sl__snapper *s, const char *node);
/* An asynchronous node's record: its fields, then the snapshot p[0..n)
 * as its input's record (after s's check). */
int sl__save_async(sl__bytes *w, const sl__iter *it, const sl__snapper *s, int nfields,
                   const int64_t *fields, const void *p, size_t n);
void sl__snap_fini(sl__snapper *s);

/* ---- restoring ---- */

typedef struct sl__restore sl__restore;

/* The state's header, parsed and checked (sl__restore_parse). */
typedef struct sl__state_info {
    uint64_t fingerprint;
    int64_t seed, epoch, elements;
} sl__state_info;

/* Parses a saved state: header, checksum, records. 0 and *out, or
 * SL_ECORRUPT (truncated, damaged), SL_EUNSUPPORTED (a newer format),
 * with a message saying which. */
int sl__restore_parse(const void *state, size_t len, sl__state_info *info, sl__restore **out);
void sl__restore_free(sl__restore *r);
/* The fields of node `key`'s record in r (and their count), or NULL. */
const int64_t *sl__restore_record(const sl__restore *r, uint64_t key, int *nfields);
/* Between begin and end, node iterators this thread makes in t take their
 * records (sl__iter_alloc calls attach). Only the thread restoring: nodes
 * made later, or by a producer thread (a repeat's next pass), start fresh. */
void sl__restore_begin(sl__tree *t);
void sl__restore_end(void);
void sl__restore_attach(sl__tree *t, sl__iter *it);
/* While this thread makes t's nodes from a saved state: whether a record
 * of node `key` waits to be taken (1) or not (0); -1 when not restoring. */
int sl__restore_has(const sl__tree *t, uint64_t key);
/* After the root is made: every record must have found its node. */
int sl__restore_check(const sl__tree *t);

/* In an op's make: 0 if the node starts fresh, 1 with its n fields in
 * f if it resumes, or SL_ECORRUPT (message set) if its record has another
 * number of fields. */
int sl__iter_restored(const sl__iter *it, int n, int64_t *f);
/* For a record whose length depends on what the node reads (a saved
 * dataset's shard count): its field count, or -1 if the node starts
 * fresh. */
int sl__iter_restored_count(const sl__iter *it);
/* A field that must lie in [lo, hi]: 0, or SL_ECORRUPT naming the node. */
int sl__state_range(const sl__iter *it, const char *field, int64_t v, int64_t lo, int64_t hi);

/* The fields of a record an op writes from values (rather than from
 * members, which sync.h's field tables describe): LIST(X) names them in
 * order, and SL__STATE_FIELDS(LIST) declares their indices F_<name>, their
 * count NFIELDS and their names, field_names[], for messages:
 *
 *     #define SHUFFLE_FIELDS(X) X(pulled) X(emitted)
 *     SL__STATE_FIELDS(SHUFFLE_FIELDS);
 *     int64_t f[NFIELDS] = {[F_pulled] = it->pulled, [F_emitted] = it->emitted};
 *     rc = sl__state_range(it, field_names[F_pulled], f[F_pulled], 0, INT64_MAX);
 */
#define SL__FIELD_INDEX_(name) F_##name,
#define SL__FIELD_NAME_(name) #name,
#define SL__STATE_FIELDS(LIST)                                                      \
    enum { LIST(SL__FIELD_INDEX_) NFIELDS };                                        \
    __attribute__((unused)) static const char *const field_names[NFIELDS] = {        \
        LIST(SL__FIELD_NAME_)}

/* A synchronous node's record: its fields, then its input's record (none
 * when input is NULL, an input already let go). */
int sl__save_sync(sl__bytes *w, const sl__iter *it, int nfields, const int64_t *fields,
                  sl__iter *input);

/* Writes a whole state: header (magic, version, fingerprint, seed,
 * epoch, elements) around the root's records. */
int sl__state_write(sl__bytes *out, const sl__state_info *info, sl__iter *root);

#endif
