/*
 * Record shards read by index (sl_tfrecord_indexed, sl_tar_indexed), so
 * element i is fetched directly: shuffle(ALL) permutes the records of
 * every shard with no buffer, and a saved position seeks.
 *
 * Each is three nodes:
 *
 *   records   the index: element i is (shard path, offset, size, record in
 *             the shard), by position (a source with random access)
 *   read      those bytes, through the read node's engine: io_uring (or
 *             pread) for files, one ranged GET for a URL, io_depth reads in
 *             flight either way
 *   decode    the record checked and laid out: a TFRecord's length and
 *             CRCs, a tar sample's members by key
 *
 * read and decode are 1:1 and keep order, so take, skip, shard, shuffle
 * and distribute move below them to the index, and a rank or a shuffled
 * pass reads only the records it takes.
 *
 * The index of each shard comes from record_index.c: a file the caller
 * names (DALI's tfrecord2idx "offset size" text), "<shard>.idx" beside
 * it, or one pass over the shard (written beside a local one).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "../core/le.h"
#include "../core/crc32c.h"
#include "../graph/sync.h"
#include "../ops/read.h"
#include "record_index.h"
#include "tar_format.h"

#define FRAMING 16 /* a TFRecord's: u64 length, u32 its CRC, ..., u32 the data's CRC */
#define TF_LEAD 4  /* the 12-byte header ends 16 bytes into the buffer */
#define MAX_KEYS 64

enum { KIND_TFRECORD, KIND_TAR };

/* ---- the index: (path, offset, size, record) by position ---- */

typedef struct shard {
    char *path;
    sl_element *path_el; /* the path as a scalar string, shared by every element */
    sl__record_index idx;
} shard;

typedef struct records_ds {
    sl_dataset base;
    int64_t kind;
    int64_t block; /* > 0: elements carry their block's span (with_blocks) */
    int n;
    shard *shards;
    int64_t *first; /* n + 1: records before shard k */
    sl_dataset *owner; /* with_blocks: the node whose shards these are (retained) */
} records_ds;

/* The shard that holds record i: the last k with first[k] <= i. */
static int shard_of(const records_ds *d, int64_t i)
{
    int lo = 0, hi = d->n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (d->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The span of record r of shard k: the bytes of the records of its block
 * (d->block consecutive elements) in the shard, or none (0) when the
 * block is more than read fetches whole. */
static void span_of(const records_ds *d, int k, int64_t r, uint64_t *off, uint64_t *len)
{
    const shard *s = &d->shards[k];
    int64_t i = d->first[k] + r, b0 = i - i % d->block;
    int64_t r0 = b0 > d->first[k] ? b0 - d->first[k] : 0;
    int64_t r1 = (b0 + d->block < d->first[k + 1] ? b0 + d->block : d->first[k + 1]) -
                 d->first[k]; /* [r0, r1): the block in this shard */
    *off = sl__record_offset(&s->idx, r0);
    *len = sl__record_offset(&s->idx, r1 - 1) + sl__record_size(&s->idx, r1 - 1) - *off;
    if (*len > SL__READ_MAX_SPAN)
        *off = *len = 0; /* each record alone */
}

static int records_get(const sl_dataset *ds, int64_t i, sl_element **out)
{
    const records_ds *d = (const records_ds *)ds;
    int k = shard_of(d, i);
    const shard *s = &d->shards[k];
    int64_t r = i - d->first[k];
    uint64_t span_off = 0, span_len = 0;
    if (d->block)
        span_of(d, k, r, &span_off, &span_len);
    sl_element *el = sl__element_new(d->block ? 6 : 4, 5 * 64);
    if (!el || sl_element_add_shared(el, s->path_el, 0) < 0 ||
        sl_element_add_int64(el, (int64_t)sl__record_offset(&s->idx, r)) < 0 ||
        sl_element_add_int64(el, (int64_t)sl__record_size(&s->idx, r)) < 0 ||
        sl_element_add_int64(el, r) < 0 ||
        (d->block && (sl_element_add_int64(el, (int64_t)span_off) < 0 ||
                      sl_element_add_int64(el, (int64_t)span_len) < 0))) {
        sl_element_release(el);
        return sl__set_error(SL_ENOMEM, "%s: out of memory", sl_dataset_name(ds));
    }
    sl__element_set_origin(el, s->path_el);
    *out = el;
    return 0;
}

static int64_t records_cardinality(const sl_dataset *ds)
{
    const records_ds *d = (const records_ds *)ds;
    return d->first[d->n];
}

/* The shards' paths and record counts: an index rebuilt for a changed
 * shard changes the dataset's identity. */
static uint64_t records_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const records_ds *d = (const records_ds *)ds;
    h = sl__hash_u64(sl__hash_u64(h, (uint64_t)d->kind), (uint64_t)d->block);
    for (int k = 0; k < d->n; k++) {
        h = sl__hash_str(h, d->shards[k].path);
        h = sl__hash_u64(h, (uint64_t)d->shards[k].idx.count);
    }
    return h;
}

static void records_destroy(sl_dataset *ds)
{
    records_ds *d = (records_ds *)ds;
    if (d->owner) { /* the shards are the owner's */
        sl_dataset_release(d->owner);
        return;
    }
    for (int k = 0; d->shards && k < d->n; k++) {
        shard *s = &d->shards[k];
        sl__record_index_free(&s->idx);
        sl_element_release(s->path_el);
        sl__strfree(s->path);
    }
    if (d->shards)
        sl__free(d->shards, (size_t)d->n * sizeof *d->shards);
    if (d->first)
        sl__free(d->first, (size_t)(d->n + 1) * sizeof *d->first);
}

static bool records_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static sl_dataset *records_with_blocks(const sl_dataset *ds, int64_t block, int64_t window);

static const sl__sync_def records_def = {
    .node = {.kind = "records", .make_iter = sl__sync_make, .cardinality = records_cardinality,
             .fingerprint = records_fingerprint, .destroy = records_destroy,
             .can_get = records_can_get, .get = records_get,
             .with_blocks = records_with_blocks},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

static const sl__index_format formats[] = {
    [KIND_TFRECORD] = {"tfrecord_indexed", FRAMING, SL__INDEX_TO_END, sl__tfrecord_index_build},
    [KIND_TAR] = {"tar_indexed", SL__TAR_BLOCK, 0, sl__tar_index_build},
};

static int set_name(sl_dataset *ds, const char *who)
{
    if (ds && !ds->name && !(ds->name = sl__strdup(who)))
        return sl__set_error(SL_ENOMEM, "%s: out of memory", who);
    return 0;
}

/* Loading the shards' indexes: a few threads, each taking the next shard,
 * so that a bucket's thousands of index files cost a few round trips'
 * time each, not their sum. */
#define LOAD_THREADS 8

typedef struct loading {
    records_ds *d;
    const char *const *index_paths;
    atomic_int next;
    int *rc;
    char **msg; /* per shard: the message of its failure */
} loading;

static void *load_some(void *arg)
{
    loading *l = arg;
    for (int k; (k = atomic_fetch_add(&l->next, 1)) < l->d->n;) {
        shard *s = &l->d->shards[k];
        l->rc[k] = sl__record_index_load(s->path, l->index_paths ? l->index_paths[k] : NULL,
                                         &formats[l->d->kind], &s->idx);
        if (l->rc[k])
            l->msg[k] = sl__strdup(sl__error_msg());
    }
    return NULL;
}

/* Every shard's index; the first shard's failure, in shard order. */
static int load_indexes(records_ds *d, const char *const *index_paths)
{
    int n = d->n, rc = 0;
    loading l = {d, index_paths, 0, sl__calloc((size_t)n, sizeof(int)),
                 sl__calloc((size_t)n, sizeof(char *))};
    if (!l.rc || !l.msg) {
        sl__free(l.rc, l.rc ? (size_t)n * sizeof(int) : 0);
        sl__free(l.msg, l.msg ? (size_t)n * sizeof(char *) : 0);
        return sl__set_error(SL_ENOMEM, "out of memory");
    }
    pthread_t th[LOAD_THREADS];
    int started = 0;
    while (n > 1 && started < LOAD_THREADS && started < n - 1 &&
           pthread_create(&th[started], NULL, load_some, &l) == 0)
        started++;
    load_some(&l); /* this thread too (all of it when none started) */
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    for (int k = 0; k < n; k++) {
        if (l.rc[k] && !rc)
            rc = sl__set_error_str(l.rc[k], l.msg[k] ? l.msg[k] : "out of memory");
        sl__strfree(l.msg[k]);
    }
    sl__free(l.rc, (size_t)n * sizeof(int));
    sl__free(l.msg, (size_t)n * sizeof(char *));
    return rc;
}

/* The index node over paths[0..n), or NULL with the error set. */
static sl_dataset *records_new(int kind, const char *const *paths, int n,
                               const char *const *index_paths)
{
    const char *who = formats[kind].who;
    if (!paths || n < 1) {
        sl__set_error(SL_EINVAL, "%s: no shards", who);
        return NULL;
    }
    records_ds *d = (records_ds *)sl__dataset_new_source(&records_def.node, sizeof *d);
    if (!d || set_name(&d->base, who) < 0) {
        sl_dataset_release(d ? &d->base : NULL);
        return NULL;
    }
    d->kind = kind;
    d->shards = sl__calloc((size_t)n, sizeof *d->shards);
    d->first = sl__calloc((size_t)n + 1, sizeof *d->first);
    if (!d->shards || !d->first) {
        sl__free(d->shards, (size_t)n * sizeof *d->shards);
        sl__free(d->first, ((size_t)n + 1) * sizeof *d->first);
        d->shards = NULL, d->first = NULL;
        return sl__dataset_fail(&d->base, SL_ENOMEM, "%s: out of memory", who);
    }
    d->n = n;
    for (int k = 0; k < n; k++) {
        shard *s = &d->shards[k];
        if (!paths[k])
            return sl__dataset_fail(&d->base, SL_EINVAL, "%s: path %d is NULL", who, k);
        s->path = sl__strdup(paths[k]);
        s->path_el = sl_element_create(1);
        if (!s->path || !s->path_el || sl_element_add_string(s->path_el, paths[k],
                                                             strlen(paths[k])) != 0)
            return sl__dataset_fail(&d->base, SL_ENOMEM, "%s: out of memory", who);
    }
    int rc = load_indexes(d, index_paths);
    if (rc)
        return sl__dataset_fail(&d->base, rc, "%s: %s", who, sl_last_error());
    for (int k = 0; k < n; k++)
        d->first[k + 1] = d->first[k] + d->shards[k].idx.count;
    return sl__dataset_structured(&d->base,
                                  sl_structure_parse("(string[], int64[], int64[], int64[])"));
}

/* The index node again, its elements carrying their block's span too: the
 * same shards, shared with (and kept alive by) the node they come from;
 * or the node itself where a window of blocks is more than read keeps. */
static sl_dataset *records_with_blocks(const sl_dataset *ds, int64_t block, int64_t window)
{
    const records_ds *from = (const records_ds *)ds;
    /* a window's blocks (two kept pieces each at most, where one crosses
     * shards) must stay in what read keeps, else they would be fetched
     * again and again: records alone then */
    if (window > SL__READ_SPANS / 2)
        return sl_dataset_retain((sl_dataset *)ds);
    const char *who = formats[from->kind].who;
    records_ds *d = (records_ds *)sl__dataset_new_source(&records_def.node, sizeof *d);
    if (!d || set_name(&d->base, who) < 0) {
        sl_dataset_release(d ? &d->base : NULL);
        return NULL;
    }
    d->kind = from->kind;
    d->block = block;
    d->n = from->n;
    d->shards = from->shards;
    d->first = from->first;
    d->owner = sl_dataset_retain((sl_dataset *)ds);
    return sl__dataset_structured(&d->base, sl_structure_parse(
        "(string[], int64[], int64[], int64[], int64[], int64[])"));
}

/* ---- decoding: the record checked and laid out ---- */

typedef struct decode_ds {
    sl_dataset base;
    int64_t kind, flags;
    int nkeys; /* tar: the keys asked for, alternatives separated by ';' */
    char **keys;
    sl_dtype *types;
} decode_ds;

/* What read made of a record: its bytes, where they lie in their buffer,
 * and where they came from. */
typedef struct record {
    unsigned char *data;
    uint64_t size, at;
    int64_t r;
    sl__buf *buf;
    const char *path;
    int plen;
} record;

static int record_of(const sl_element *in, size_t lead, record *x)
{
    const struct sl_tensor *t = &in->t[0];
    size_t len = 0;
    x->path = sl__element_origin(in, &len);
    x->plen = (int)len;
    x->data = t->data;
    x->size = t->nbytes;
    x->at = (uint64_t)sl_tensor_int64(&in->t[1]);
    x->r = sl_tensor_int64(&in->t[3]);
    x->buf = t->buf;
    /* the bytes before the record are read's buffer, ours to write */
    if (!t->buf || x->data < t->buf->data + lead)
        return sl__set_error(SL_EINTERNAL, "%.*s: record %lld is not in a buffer of read's",
                             x->plen, x->path, (long long)x->r);
    return 0;
}

/* A TFRecord: (string[][, path]). */
static int decode_tfrecord(const decode_ds *d, const sl_element *in, sl_element **out)
{
    record x;
    int rc = record_of(in, TF_LEAD, &x);
    if (rc)
        return rc;
    size_t len = (size_t)x.size - FRAMING;
    const unsigned char *hdr = x.data, *payload = x.data + 12;
    const char *why = NULL;
    if (sl__crc32c_mask(sl__crc32c(0, hdr, 8)) != sl__get_le32(hdr + 8))
        why = "bad length CRC";
    else if (sl__get_le64(hdr) != len)
        why = "the record's length is not the index's (an index of another file?)";
    else if (!(d->flags & SL_TFRECORD_NO_DATA_CRC) &&
             sl__crc32c_mask(sl__crc32c(0, payload, len)) != sl__get_le32(payload + len))
        why = "bad data CRC in the record";
    if (why)
        return sl__set_error(SL_ECORRUPT, "%.*s: %s at byte %llu (record %lld of the shard)",
                             x.plen, x.path, why, (unsigned long long)x.at, (long long)x.r);
    bool paths = d->flags & SL_WITH_PATHS;
    sl_element *el = sl__element_new(paths ? 2 : 1, 0);
    uint64_t off[2] = {0, len};
    unsigned char *head = x.data + 12 - 16; /* the header's bytes, checked: ours now */
    memcpy(head, off, sizeof off);
    if (!el || !sl__element_push_view(el, SL_STRING, 0, NULL, head, 16 + len, x.buf) ||
        (paths && sl_element_add_shared(el, in, in->n - 1) < 0)) {
        sl_element_release(el);
        return sl__set_error(SL_ENOMEM, "tfrecord_indexed: out of memory");
    }
    *out = el;
    return 0;
}

/* A sample's span in memory, for the tar walker. */
typedef struct span {
    const unsigned char *p;
    uint64_t at, n; /* its offset in the shard, its size */
} span;

static int64_t span_read(void *ctx, uint64_t at, void *dst, size_t n)
{
    const span *s = ctx;
    uint64_t rel = at - s->at, left = rel < s->n ? s->n - rel : 0;
    size_t got = left < n ? (size_t)left : n;
    memcpy(dst, s->p + rel, got);
    return (int64_t)got;
}

static int span_skip(void *ctx, uint64_t at, uint64_t n)
{
    const span *s = ctx;
    return at - s->at > s->n || n > s->n - (at - s->at);
}

/* The decode node's iterator: the tar walk's buffers, reused from sample
 * to sample. */
typedef struct decode_iter {
    sl__sync_iter u;
    sl__tar_member m;
    sl__tar_scratch sc;
    sl__bytes key;
} decode_iter;

static void decode_fini(sl__sync_iter *u)
{
    decode_iter *it = (decode_iter *)u;
    sl__tar_member_free(&it->m);
    sl__tar_scratch_free(&it->sc);
    sl__bytes_free(&it->key);
}

/* The members of the sample in x, by key slot: where each value lies. */
static int walk_sample(const decode_ds *d, decode_iter *it, const record *x,
                       unsigned char **vals, uint64_t *sizes)
{
    sl__bytes *key = &it->key;
    sl__tar_member *m = &it->m;
    key->n = 0;
    span sp = {x->data, x->at, x->size};
    sl__reader rd = {span_read, span_skip, &sp};
    uint64_t at = x->at;
    int rc = 0;
    const char *why = NULL;
    uint64_t why_at = x->at;
    while (at < x->at + x->size) {
        sl__tar_fault f;
        rc = sl__tar_next(&rd, at, m, &it->sc, &f);
        if (rc == SL__TAR_FAULT)
            why = f.what, why_at = f.at;
        if (rc == 1)
            why = "the index's sample ends in the archive's end blocks (an index of another "
                  "file?)";
        if (rc)
            break;
        at = sl__tar_next_header(m);
        if (at > x->at + x->size) {
            rc = SL_ECORRUPT;
            why = "a member runs past the sample's end in the index (an index of another "
                  "file?)";
            why_at = m->start;
            break;
        }
        if (m->klen == 0)
            continue;
        if (key->n == 0 && (rc = sl__bytes_assign(key, m->name.p, m->klen)) < 0)
            break;
        if (key->n != m->klen || memcmp(key->p, m->name.p, m->klen)) {
            rc = SL_ECORRUPT;
            why = "the index's sample holds members of two samples (an index of another "
                  "file?)";
            why_at = m->start;
            break;
        }
        int slot = sl__tar_key_slot(d->keys, d->nkeys, (const char *)m->name.p + m->ext);
        if (slot >= 0) { /* a repeated extension: the last one, as tar_shards */
            vals[slot] = x->data + (m->data - x->at);
            sizes[slot] = m->size;
        }
    }
    if (why)
        return sl__set_error(SL_ECORRUPT, "%.*s: %s at byte %llu (sample %lld of the shard)",
                             x->plen, x->path, why, (unsigned long long)why_at, (long long)x->r);
    return rc;
}

/* A tar sample: the values of the keys asked for[, its key]. */
static int decode_tar(const decode_ds *d, decode_iter *it, const sl_element *in,
                      sl_element **out)
{
    record x;
    int rc = record_of(in, 0, &x);
    if (rc)
        return rc;
    unsigned char *vals[MAX_KEYS] = {0};
    uint64_t sizes[MAX_KEYS] = {0};
    rc = walk_sample(d, it, &x, vals, sizes);
    const sl__bytes key = it->key;
    for (int i = 0; rc == 0 && i < d->nkeys; i++)
        if (!vals[i])
            rc = sl__set_error(SL_ECORRUPT, "%.*s: sample %.*s (at byte %llu) has no '%s'",
                               x.plen, x.path, (int)key.n, (const char *)key.p,
                               (unsigned long long)x.at, d->keys[i]);
    bool paths = d->flags & SL_WITH_PATHS;
    sl_element *el = rc ? NULL : sl__element_new(d->nkeys + paths, paths ? 32 + key.n : 0);
    if (rc == 0 && !el)
        rc = SL_ENOMEM;
    /* the walk is over: the 16 bytes before each value (its header's
     * last) may now be written */
    for (int i = 0; rc == 0 && i < d->nkeys; i++) {
        rc = sl__tar_push_value(el, d->types[i], vals[i], sizes[i], x.buf);
        if (rc == 1)
            rc = sl__set_error(SL_ECORRUPT, "%.*s: sample %.*s (at byte %llu): '%s' is not "
                               "an integer", x.plen, x.path, (int)key.n, (const char *)key.p,
                               (unsigned long long)x.at, d->keys[i]);
    }
    if (rc == 0 && paths)
        rc = sl_element_add_string(el, key.p, key.n);
    if (rc) {
        sl_element_release(el);
        return rc == SL_ENOMEM ? sl__set_error(SL_ENOMEM, "tar_indexed: out of memory") : rc;
    }
    *out = el;
    return 0;
}

/* Element errors are judged here, where they are found (the policy:
 * skipped, they count as consumed). */
static int decode_next(sl__iter *base, sl_element **out)
{
    const decode_ds *d = (const decode_ds *)base->ds;
    sl__sync_iter *u = (sl__sync_iter *)base;
    for (;;) {
        sl_element *in;
        int rc = sl__iter_next(u->in, &in);
        if (rc)
            return rc;
        rc = d->kind == KIND_TAR ? decode_tar(d, (decode_iter *)base, in, out)
                                 : decode_tfrecord(d, in, out);
        if (rc == 0)
            sl__element_set_origin(*out, in->origin);
        sl_element_release(in);
        if (rc == 0) {
            base->ok_count++;
            return 0;
        }
        sl__error_prefix(sl_dataset_name(base->ds));
        if (rc == SL_ENOMEM || rc == SL_EINTERNAL || (rc = sl__policy(base, rc)))
            return rc;
    }
}

static sl_dataset *decode_new(sl_dataset *in, int kind, unsigned flags, const char *const *keys,
                              const sl_dtype *types, int nkeys);

static sl_dataset *decode_rebuild(const sl_dataset *ds, sl_dataset *new_input)
{
    const decode_ds *d = (const decode_ds *)ds;
    return decode_new(new_input, (int)d->kind, (unsigned)d->flags, (const char *const *)d->keys,
                      d->types, d->nkeys);
}

static uint64_t decode_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const decode_ds *d = (const decode_ds *)ds;
    h = sl__hash_u64(sl__hash_u64(h, (uint64_t)d->kind), (uint64_t)d->flags);
    for (int i = 0; i < d->nkeys; i++)
        h = sl__hash_u64(sl__hash_str(h, d->keys[i]), (uint64_t)d->types[i]);
    return h;
}

static int64_t decode_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static void decode_destroy(sl_dataset *ds)
{
    decode_ds *d = (decode_ds *)ds;
    for (int i = 0; d->keys && i < d->nkeys; i++)
        sl__strfree(d->keys[i]);
    sl__free(d->keys, (size_t)d->nkeys * sizeof *d->keys);
    sl__free(d->types, (size_t)d->nkeys * sizeof *d->types);
}

static const sl__sync_def decode_def = {
    .node = {.kind = "decode_records", .make_iter = sl__sync_make,
             .fingerprint = decode_fingerprint, .cardinality = decode_cardinality,
             .destroy = decode_destroy, .rebuild = decode_rebuild},
    .iter = {SL__SYNC_ITER(decode_next)},
    .iter_size = sizeof(decode_iter),
    .fini = decode_fini,
};

static sl_dataset *decode_new(sl_dataset *in, int kind, unsigned flags, const char *const *keys,
                              const sl_dtype *types, int nkeys)
{
    const char *who = formats[kind].who;
    decode_ds *d = (decode_ds *)sl__dataset_new(&decode_def.node, sizeof *d, in);
    if (!d || set_name(&d->base, who) < 0) {
        sl_dataset_release(d ? &d->base : NULL);
        return NULL;
    }
    d->kind = kind;
    d->flags = flags;
    if (nkeys) {
        d->keys = sl__calloc((size_t)nkeys, sizeof *d->keys);
        d->types = sl__calloc((size_t)nkeys, sizeof *d->types);
        if (!d->keys || !d->types)
            return sl__dataset_fail(&d->base, SL_ENOMEM, "%s: out of memory", who);
        d->nkeys = nkeys;
        for (int i = 0; i < nkeys; i++) {
            d->types[i] = types[i];
            if (!(d->keys[i] = sl__strdup(keys[i])))
                return sl__dataset_fail(&d->base, SL_ENOMEM, "%s: out of memory", who);
        }
    }
    bool paths = flags & SL_WITH_PATHS;
    if (kind == KIND_TFRECORD)
        return sl__dataset_structured(&d->base, sl_structure_parse(paths ? "(string[], string[])"
                                                                         : "string[]"));
    sl__leaf_spec specs[MAX_KEYS + 1];
    int n = 0;
    for (int i = 0; i < nkeys; i++)
        specs[n++] = types[i] == SL_UINT8 ? (sl__leaf_spec){SL_UINT8, 1, {-1}}
                                          : (sl__leaf_spec){types[i], 0, {0}};
    if (paths)
        specs[n++] = (sl__leaf_spec){SL_STRING, 0, {0}};
    return sl__dataset_structured(&d->base, sl__structure_flat(n, specs));
}

/* records -> read -> decode. */
static sl_dataset *indexed(int kind, const char *const *paths, int n,
                           const char *const *index_paths, unsigned read_flags, unsigned flags,
                           const char *const *keys, const sl_dtype *types, int nkeys)
{
    sl_dataset *ds = records_new(kind, paths, n, index_paths);
    ds = ds ? sl__read_ranges(ds, kind == KIND_TAR ? 0 : TF_LEAD, read_flags) : NULL;
    if (ds && set_name(ds, formats[kind].who) < 0) {
        sl_dataset_release(ds);
        return NULL;
    }
    return ds ? decode_new(ds, kind, flags, keys, types, nkeys) : NULL;
}

SL_API sl_dataset *sl_tfrecord_indexed(const char *const *paths, int n,
                                       const char *const *index_paths, unsigned flags)
{
    if (flags & ~(SL_WITH_PATHS | SL_TFRECORD_NO_DATA_CRC)) {
        sl__set_error(SL_EINVAL, "tfrecord_indexed: unknown flags 0x%x", flags);
        return NULL;
    }
    return indexed(KIND_TFRECORD, paths, n, index_paths, flags & SL_WITH_PATHS, flags, NULL,
                   NULL, 0);
}

SL_API sl_dataset *sl_tar_indexed(const char *const *paths, int n, const char *const *keys,
                                  const sl_dtype *types, int nkeys, unsigned flags)
{
    if (!keys || nkeys < 1 || nkeys > MAX_KEYS || (flags & ~SL_WITH_PATHS)) {
        sl__set_error(SL_EINVAL, "tar_indexed: bad arguments (%d keys, flags 0x%x)", nkeys,
                      flags);
        return NULL;
    }
    sl_dtype t[MAX_KEYS];
    for (int i = 0; i < nkeys; i++) {
        t[i] = types ? types[i] : SL_UINT8;
        if (!keys[i] || !keys[i][0] || (t[i] != SL_UINT8 && t[i] != SL_STRING &&
                                        t[i] != SL_INT64)) {
            sl__set_error(SL_EINVAL, "tar_indexed: key %d is %s", i,
                          !keys[i] || !keys[i][0] ? "empty"
                                                  : "of a type other than uint8, string or int64");
            return NULL;
        }
    }
    return indexed(KIND_TAR, paths, n, NULL, 0, flags, keys, t, nkeys);
}
