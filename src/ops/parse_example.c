/*
 * parse_example: tf.io.parse_single_example over serialized
 * tf.train.Example protos, read straight from the protobuf wire format.
 *
 * A parallel map (ops/map.c) with a built-in function. Per record, one scan
 * of the Example's structure notes where the Feature of each requested key
 * lies (the last map entry of a key wins; other keys' Features are skipped
 * by their length, unread), then each requested Feature is read from there
 * into its output tensor: fixed numeric features in one pass straight into
 * the tensor; bytes and varlen ones count first, then fill, so the only
 * allocations are the output tensors (and a long bytes value in a record
 * nothing else holds is not copied at all: see view).
 *
 * Every read is bounded by the message that encloses it. Messages name the
 * byte offset (from 0) in the record of what could not be read: a varint's
 * first byte, a length's, a field's tag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/le.h"
#include "map.h"

#define MAX_FEATURES 1024
#define INLINE_MAX 1024      /* tensors up to this size go in the element */
#define INLINE_TOTAL 16384   /* and no more than this in all */
#define INLINE_SLACK 256     /* for small tensors of unknown size */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
/* Feature's oneof: the field number of each list */
enum { LIST_NONE = 0, LIST_BYTES = 1, LIST_FLOAT = 2, LIST_INT64 = 3 };

static const char *const list_name[] = {"no list", "bytes_list", "float_list", "int64_list"};
static const char *const list_a[] = {"no list", "a bytes_list", "a float_list", "an int64_list"};
static const char *const list_field[] = {"", "Feature.bytes_list", "Feature.float_list",
                                         "Feature.int64_list"};
static const char *const wt_name[] = {"varint", "fixed64", "length-delimited", "", "", "fixed32"};

typedef struct feat {
    char *key;
    size_t key_len;
    sl_feature_type type;
    int list;    /* the LIST_ it must be */
    sl_dtype dtype;
    int ndim;    /* -1: varlen */
    int64_t shape[SL_MAX_DIMS];
    int64_t count; /* fixed: the shape's product */
    bool has_default;
    int64_t def_int64;
    float def_float;
    void *def_bytes;
    size_t def_len;
} feat;

typedef struct parse_example_ds {
    sl_dataset base;
    int n;
    unsigned flags;
    int parallelism; /* >= 1 or SL_AUTOTUNE */
    feat *f;
    uint16_t *table; /* open addressing by key hash: feature index + 1, 0 empty */
    uint32_t mask;
    size_t inline_fixed; /* bytes of fixed numeric outputs kept inline */
} parse_example_ds;

/* Where the record holds a requested feature's Feature message, and
 * where its map entry's contents begin (its key and framing lie between). */
typedef struct found {
    size_t at, end; /* at SIZE_MAX: absent */
    size_t entry;
} found;

/* Eight bytes a step: every record looks up each of its keys. */
static uint32_t key_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = (uint64_t)n * 0x9e3779b97f4a7c15ull, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
    }
    w = 0;
    if (n)
        memcpy(&w, s, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    return (uint32_t)(h ^ (h >> 32));
}

/* The index of the feature with this key, or -1. */
static int lookup(const parse_example_ds *d, const void *key, size_t len)
{
    for (uint32_t i = key_hash(key, len) & d->mask;; i = (i + 1) & d->mask) {
        int k = d->table[i] - 1;
        if (k < 0)
            return -1;
        if (d->f[k].key_len == len && memcmp(d->f[k].key, key, len) == 0)
            return k;
    }
}

/* ---- the wire format ---- */

typedef struct rd {
    const uint8_t *rec; /* the record: offsets count from here */
    size_t pos, end;    /* next byte; end of the message being read */
} rd;

static int read_varint_slow(rd *r, uint64_t *v)
{
    size_t p = r->pos;
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70 && p < r->end; shift += 7) {
        uint8_t b = r->rec[p++];
        x |= (uint64_t)(b & 0x7f) << shift; /* the 10th byte's high bits drop */
        if (b < 0x80) {
            *v = x;
            r->pos = p;
            return 0;
        }
    }
    return sl__set_error(SL_ECORRUPT, "malformed varint at byte %zu of the record (%s)", r->pos,
                         p - r->pos >= 10 ? "longer than 10 bytes"
                                          : "it runs past the end of its message");
}

static inline int read_varint(rd *r, uint64_t *v)
{
    if (r->pos < r->end && r->rec[r->pos] < 0x80) { /* most tags, lengths and values */
        *v = r->rec[r->pos++];
        return 0;
    }
    return read_varint_slow(r, v);
}

/* The next field's number and wire type (groups and unknown types are
 * malformed). */
static inline int read_tag(rd *r, uint32_t *field, int *wt)
{
    size_t at = r->pos;
    uint64_t tag;
    *field = 0, *wt = 0; /* set even on failure: callers test rc first */
    int rc = read_varint(r, &tag);
    if (rc)
        return rc;
    if (tag >> 3 == 0 || tag > UINT32_MAX)
        return sl__set_error(SL_ECORRUPT, "bad field number %llu at byte %zu of the record",
                             (unsigned long long)(tag >> 3), at);
    *field = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    if (*wt != WT_VARINT && *wt != WT_I64 && *wt != WT_LEN && *wt != WT_I32)
        return sl__set_error(SL_ECORRUPT, "bad wire type %d at byte %zu of the record", *wt, at);
    return 0;
}

/* A length-delimited field's bytes as a reader of their own; r moves past. */
static inline int read_sub(rd *r, rd *sub)
{
    size_t at = r->pos;
    uint64_t len;
    *sub = (rd){r->rec, r->pos, r->pos};
    int rc = read_varint(r, &len);
    if (rc)
        return rc;
    if (len > r->end - r->pos)
        return sl__set_error(SL_ECORRUPT, "length %llu at byte %zu of the record runs past the "
                             "end of its message (%zu left)", (unsigned long long)len, at,
                             r->end - r->pos);
    *sub = (rd){r->rec, r->pos, r->pos + (size_t)len};
    r->pos = sub->end;
    return 0;
}

static int read_fixed(rd *r, size_t n, const uint8_t **p)
{
    if (r->end - r->pos < n)
        return sl__set_error(SL_ECORRUPT, "truncated fixed%zu at byte %zu of the record", 8 * n,
                             r->pos);
    *p = r->rec + r->pos;
    r->pos += n;
    return 0;
}

static int skip_field(rd *r, int wt)
{
    uint64_t v;
    rd sub;
    const uint8_t *p;
    switch (wt) {
    case WT_VARINT: return read_varint(r, &v);
    case WT_I64: return read_fixed(r, 8, &p);
    case WT_LEN: return read_sub(r, &sub);
    default: return read_fixed(r, 4, &p);
    }
}

static int wrong_wt(size_t at, const char *field, int wt)
{
    return sl__set_error(SL_ECORRUPT, "wrong wire type %d (%s) for %s at byte %zu of the record",
                         wt, wt_name[wt], field, at);
}

/* The next field; *sub set for a length-delimited one numbered `want`
 * (another wire type for it is malformed); other fields are skipped.
 * Returns 1 when *sub is set. */
static int next_field(rd *r, uint32_t want, const char *name, rd *sub)
{
    size_t at = r->pos;
    uint32_t field;
    int wt;
    int rc = read_tag(r, &field, &wt);
    if (rc)
        return rc;
    if (field != want)
        return skip_field(r, wt);
    if (wt != WT_LEN)
        return wrong_wt(at, name, wt);
    rc = read_sub(r, sub);
    return rc ? rc : 1;
}

/* ---- the scan: where each requested Feature lies ---- */

/* One map entry: key = 1, value = 2 (a Feature; absent: an empty one). */
static int scan_entry(const parse_example_ds *d, rd *r, found *fnd)
{
    size_t entry = r->pos;
    rd key = {r->rec, r->pos, r->pos}, value = {r->rec, r->end, r->end};
    while (r->pos < r->end) {
        size_t at = r->pos;
        uint32_t field;
        int wt;
        int rc = read_tag(r, &field, &wt);
        if (rc == 0 && (field == 1 || field == 2) && wt != WT_LEN)
            rc = wrong_wt(at, field == 1 ? "the key of a feature map entry"
                                         : "the value of a feature map entry", wt);
        if (rc == 0)
            rc = field == 1 ? read_sub(r, &key) : field == 2 ? read_sub(r, &value)
                                                             : skip_field(r, wt);
        if (rc)
            return rc;
    }
    int k = lookup(d, key.rec + key.pos, key.end - key.pos);
    if (k >= 0)
        fnd[k] = (found){value.pos, value.end, entry};
    return 0;
}

/* Features { map<string, Feature> feature = 1; } */
static int scan_features(const parse_example_ds *d, rd *r, found *fnd)
{
    rd entry;
    while (r->pos < r->end) {
        int rc = next_field(r, 1, "Features.feature", &entry);
        if (rc == 1)
            rc = scan_entry(d, &entry, fnd);
        if (rc)
            return rc;
    }
    return 0;
}

/* Example { Features features = 1; }: a second features merges. */
static int scan_example(const parse_example_ds *d, rd *r, found *fnd)
{
    rd features;
    while (r->pos < r->end) {
        int rc = next_field(r, 1, "Example.features", &features);
        if (rc == 1)
            rc = scan_features(d, &features, fnd);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- one Feature ---- */

/* Where the values come from: a later member of the oneof replaces an
 * earlier one, and the same list twice is merged (its values concatenate),
 * so it is the kind of the last list, from the first list of that kind
 * after any other kind. */
static int feature_kind(rd r, int *kind, size_t *from)
{
    *kind = LIST_NONE;
    *from = r.pos;
    while (r.pos < r.end) {
        size_t at = r.pos;
        uint32_t field;
        int wt;
        int rc = read_tag(&r, &field, &wt);
        if (rc == 0 && field >= LIST_BYTES && field <= LIST_INT64) {
            if (wt != WT_LEN)
                return wrong_wt(at, list_field[field], wt);
            if ((int)field != *kind) {
                *kind = (int)field;
                *from = at;
            }
        }
        if (rc == 0)
            rc = skip_field(&r, wt);
        if (rc)
            return rc;
    }
    return 0;
}

/* Values read: the first cap stored, all counted. */
typedef struct sink {
    int64_t n, cap;
    size_t bytes;  /* bytes_list: their total length */
    size_t first;  /* bytes_list: where the first value begins */
    void *vals;    /* int64_t / float [cap]; bytes: the offsets (cap + 1) */
    char *str;     /* bytes: where they go */
} sink;

static int int64_list(rd *r, sink *s)
{
    int64_t *out = s->vals;
    while (r->pos < r->end) {
        size_t at = r->pos;
        uint32_t field;
        int wt;
        uint64_t v;
        rd packed;
        int rc = read_tag(r, &field, &wt);
        if (rc == 0 && field != 1)
            rc = skip_field(r, wt);
        else if (rc == 0 && wt == WT_VARINT) {
            rc = read_varint(r, &v);
            if (rc == 0 && s->n < s->cap)
                out[s->n] = (int64_t)v; /* two's complement */
            s->n += rc == 0;
        } else if (rc == 0 && wt == WT_LEN) {
            rc = read_sub(r, &packed);
            while (rc == 0 && packed.pos < packed.end) {
                rc = read_varint(&packed, &v);
                if (rc == 0 && s->n < s->cap)
                    out[s->n] = (int64_t)v;
                s->n += rc == 0;
            }
        } else if (rc == 0) {
            rc = wrong_wt(at, "Int64List.value", wt);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static void put_floats(sink *s, const uint8_t *p, int64_t k)
{
    int64_t room = s->cap - s->n, m = k < room ? k : room;
    if (m > 0 && SL__LE_HOST) {
        memcpy((float *)s->vals + s->n, p, (size_t)m * 4);
    } else if (m > 0) {
        float *out = (float *)s->vals + s->n;
        for (int64_t i = 0; i < m; i++) {
            uint32_t u = sl__get_le32(p + 4 * i);
            memcpy(&out[i], &u, 4);
        }
    }
    s->n += k;
}

static int float_list(rd *r, sink *s)
{
    while (r->pos < r->end) {
        size_t at = r->pos;
        uint32_t field;
        int wt;
        const uint8_t *p = NULL;
        rd packed;
        int rc = read_tag(r, &field, &wt);
        if (rc == 0 && field != 1)
            rc = skip_field(r, wt);
        else if (rc == 0 && wt == WT_I32) {
            rc = read_fixed(r, 4, &p);
            if (rc == 0)
                put_floats(s, p, 1);
        } else if (rc == 0 && wt == WT_LEN) {
            size_t len_at = r->pos;
            rc = read_sub(r, &packed);
            size_t len = packed.end - packed.pos;
            if (rc == 0 && len % 4)
                rc = sl__set_error(SL_ECORRUPT, "packed FloatList.value of %zu bytes (not a "
                                   "multiple of 4) at byte %zu of the record", len, len_at);
            if (rc == 0)
                put_floats(s, r->rec + packed.pos, (int64_t)(len / 4));
        } else if (rc == 0) {
            rc = wrong_wt(at, "FloatList.value", wt);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int bytes_list(rd *r, sink *s)
{
    uint64_t *off = s->vals;
    rd item;
    while (r->pos < r->end) {
        int rc = next_field(r, 1, "BytesList.value", &item);
        if (rc < 0)
            return rc;
        if (rc == 0) /* another field, skipped */
            continue;
        size_t len = item.end - item.pos;
        if (s->n == 0)
            s->first = item.pos;
        if (s->n < s->cap) {
            memcpy(s->str + off[s->n], r->rec + item.pos, len);
            off[s->n + 1] = off[s->n] + len;
        }
        s->n++;
        s->bytes += len;
    }
    return 0;
}

/* The values of the lists of `kind` in the Feature from r.pos on. */
static int walk(rd r, int kind, sink *s)
{
    rd list;
    while (r.pos < r.end) {
        int rc = next_field(&r, (uint32_t)kind, list_field[kind], &list);
        if (rc == 1)
            rc = kind == LIST_INT64   ? int64_list(&list, s)
                 : kind == LIST_FLOAT ? float_list(&list, s)
                                      : bytes_list(&list, s);
        if (rc)
            return rc;
    }
    return 0;
}

static size_t string_bytes(int64_t count, size_t bytes)
{
    return (size_t)(count + 1) * sizeof(uint64_t) + bytes;
}

static struct sl_tensor *push(sl_element *el, const feat *f, int64_t count, size_t nbytes)
{
    return f->ndim >= 0 ? sl__element_push(el, f->dtype, f->ndim, f->shape, nbytes)
                        : sl__element_push(el, f->dtype, 1, &count, nbytes);
}

static int absent(const feat *f, sl_element *el)
{
    if (f->ndim >= 0 && !f->has_default)
        return sl__set_error(SL_EINVAL, "feature '%.200s' is missing (and has no default)",
                             f->key);
    int64_t n = f->ndim >= 0 ? f->count : 0;
    size_t nbytes = f->list == LIST_BYTES ? string_bytes(n, (size_t)n * f->def_len)
                                          : (size_t)n * sl_dtype_size(f->dtype);
    struct sl_tensor *t = push(el, f, 0, nbytes);
    if (!t)
        return SL_ENOMEM;
    if (f->list == LIST_BYTES) {
        uint64_t *off = t->data;
        char *str = (char *)(off + n + 1);
        off[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            if (f->def_len)
                memcpy(str + off[i], f->def_bytes, f->def_len);
            off[i + 1] = off[i] + f->def_len;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (f->list == LIST_INT64)
                ((int64_t *)t->data)[i] = f->def_int64;
            else
                ((float *)t->data)[i] = f->def_float;
        }
    }
    return 0;
}

static int count_error(const feat *f, int64_t n)
{
    char shape[160];
    sl__shape_str(shape, sizeof shape, f->ndim, f->shape);
    return sl__set_error(SL_ESHAPE, "feature '%.200s' has %lld values, its shape %s needs %lld",
                         f->key, (long long)n, shape, (long long)f->count);
}

/* A bytes feature of one long value can be a view of the record instead
 * of a copy, when this map holds the record's only reference (own): the
 * string tensor's two offsets go in the 8-aligned 16 bytes just before the
 * value, over its map entry's key and framing, which have been read, and
 * the value stays where it is (its first offset is the gap, 0 to 7). For
 * image records this was the parse's one pass over every image's bytes and
 * a fresh buffer per image. A value under VIEW_MIN, or under half the
 * record (the view holds the whole record), is copied. */
#define VIEW_MIN 4096

typedef struct record {
    const uint8_t *p;
    size_t len;
    sl__buf *own; /* the record's buffer when nothing else refers to it */
} record;

static int view(const feat *f, const record *rec, found fnd, const sink *s, sl_element *el)
{
    if (!rec->own || s->n != 1 || s->bytes < VIEW_MIN || s->bytes < rec->len / 2)
        return 1;
    uintptr_t v = (uintptr_t)(rec->p + s->first), a = (v - 16) & ~(uintptr_t)7;
    if (a < (uintptr_t)(rec->p + fnd.entry))
        return 1;
    uint64_t off[2] = {v - (a + 16), v - (a + 16) + s->bytes};
    int64_t one = 1;
    if (!sl__element_push_view(el, SL_STRING, f->ndim >= 0 ? f->ndim : 1,
                               f->ndim >= 0 ? f->shape : &one, (void *)a,
                               sizeof off + off[1], rec->own))
        return SL_ENOMEM;
    memcpy((void *)a, off, sizeof off);
    return 0;
}

static int read_feature(const feat *f, const record *rec, found fnd, sl_element *el)
{
    rd r = {rec->p, fnd.at, fnd.end};
    int kind;
    size_t from;
    int rc = feature_kind(r, &kind, &from);
    if (rc)
        return rc;
    if (kind != LIST_NONE && kind != f->list)
        return sl__set_error(SL_EDTYPE, "feature '%.200s' is %s, not the %s asked for", f->key,
                             list_a[kind], list_name[f->list]);
    r.pos = from;
    sink s = {0};
    struct sl_tensor *t;
    if (f->ndim >= 0 && f->list != LIST_BYTES) { /* size known: one pass */
        t = push(el, f, 0, (size_t)f->count * sl_dtype_size(f->dtype));
        if (!t)
            return SL_ENOMEM;
        s.cap = f->count;
        s.vals = t->data;
        rc = walk(r, f->list, &s);
        return rc ? rc : s.n != f->count ? count_error(f, s.n) : 0;
    }
    rc = walk(r, f->list, &s); /* count, then fill */
    if (rc)
        return rc;
    if (f->ndim >= 0 && s.n != f->count)
        return count_error(f, s.n);
    if (f->list == LIST_BYTES && (rc = view(f, rec, fnd, &s, el)) <= 0)
        return rc;
    size_t nbytes = f->list == LIST_BYTES ? string_bytes(s.n, s.bytes)
                                          : (size_t)s.n * sl_dtype_size(f->dtype);
    t = push(el, f, s.n, nbytes);
    if (!t)
        return SL_ENOMEM;
    sink fill = {.cap = s.n, .vals = t->data};
    if (f->list == LIST_BYTES) {
        ((uint64_t *)t->data)[0] = 0;
        fill.str = (char *)t->data + (size_t)(s.n + 1) * sizeof(uint64_t);
    }
    return walk(r, f->list, &fill);
}

/* ---- the map function ---- */

/* The path of the record, for messages: the element's origin (where it
 * was read), else its first scalar string after tensor 0 (as map_image). */
static void name_file(const sl_element *el)
{
    size_t len = 0;
    const char *s = sl__element_origin(el, &len);
    for (int j = 1; !s && j < el->n; j++)
        if (el->t[j].dtype == SL_STRING && el->t[j].ndim == 0)
            s = sl_tensor_string(&el->t[j], 0, &len);
    if (!s)
        return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), s);
    sl__error_prefix(buf);
}

static size_t inline_bytes(const parse_example_ds *d, const sl_element *in)
{
    size_t n = d->inline_fixed + INLINE_SLACK;
    for (int j = 1; j < in->n; j++)
        if (!in->t[j].buf) /* shared tensors inline in `in` are copied */
            n += in->t[j].nbytes;
    return n < INLINE_TOTAL ? n : INLINE_TOTAL;
}

static int parse(const parse_example_ds *d, const sl_element *in, sl_element **out)
{
    if (in->n < 1)
        return sl__set_error(SL_EINVAL, "empty element");
    const struct sl_tensor *t = &in->t[0];
    rd r = {NULL, 0, 0};
    if (t->dtype == SL_UINT8 && t->ndim == 1) {
        r.rec = t->data;
        r.end = t->nbytes;
    } else if (t->dtype == SL_STRING && t->ndim == 0) {
        r.rec = (const uint8_t *)sl_tensor_string(t, 0, &r.end);
    } else {
        return sl__set_error(SL_EDTYPE, "tensor 0 must be a serialized Example (uint8 [n] or a "
                             "string), not %s of rank %d", sl_dtype_name(t->dtype), t->ndim);
    }
    /* the map's slot holds the only reference to in, and in to its buffer:
     * bytes features may become views of it (see view) */
    record rec = {r.rec, r.end, NULL};
    if (t->buf && atomic_load_explicit(&in->refs, memory_order_acquire) == 1 &&
        atomic_load_explicit(&t->buf->refs, memory_order_acquire) == 1)
        rec.own = t->buf;
    found fnd[MAX_FEATURES];
    for (int i = 0; i < d->n; i++)
        fnd[i].at = SIZE_MAX;
    int rc = scan_example(d, &r, fnd);
    if (rc)
        return rc;
    sl_element *el = sl__element_new(d->n + in->n - 1, inline_bytes(d, in));
    if (!el)
        return SL_ENOMEM;
    for (int i = 0; rc == 0 && i < d->n; i++) {
        const feat *f = &d->f[i];
        if (fnd[i].at == SIZE_MAX) {
            rc = absent(f, el);
        } else {
            rc = read_feature(f, &rec, fnd[i], el);
            if (rc == SL_ECORRUPT) {
                char who[256];
                snprintf(who, sizeof who, "feature '%.200s'", f->key);
                sl__error_prefix(who);
            }
        }
    }
    for (int j = 1; rc == 0 && j < in->n; j++)
        rc = sl_element_add_shared(el, in, j);
    if (rc) {
        sl_element_release(el);
        return rc;
    }
    if (in->origin) /* later messages about it still name the file */
        sl__element_set_origin(el, in->origin);
    *out = el;
    return 0;
}

static int parse_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    int rc = parse(user, in, out);
    if (rc < 0 && rc != SL_ENOMEM)
        name_file(in);
    return rc;
}

/* ---- the dataset ---- */

static int parse_example_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    const parse_example_ds *d = (const parse_example_ds *)ds;
    return sl__map_iter_make(ds, tree, key, epoch, parse_fn, (void *)ds, d->parallelism, 0, out);
}

static int64_t parse_example_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static uint64_t parse_example_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const parse_example_ds *d = (const parse_example_ds *)ds;
    h = sl__hash_u64(sl__hash_u64(h, (uint64_t)d->n), d->flags);
    for (int i = 0; i < d->n; i++) {
        const feat *f = &d->f[i];
        uint32_t fbits;
        memcpy(&fbits, &f->def_float, sizeof fbits);
        h = sl__hash_bytes(h, f->key, f->key_len);
        h = sl__hash_u64(h, ((uint64_t)f->type << 32) | (uint32_t)f->ndim);
        h = sl__hash_bytes(h, f->shape, sizeof f->shape);
        h = sl__hash_u64(h, ((uint64_t)f->has_default << 32) | fbits);
        h = sl__hash_u64(h, (uint64_t)f->def_int64);
        h = sl__hash_bytes(h, f->def_bytes, f->def_len);
    }
    return h;
}

static void parse_example_destroy(sl_dataset *ds)
{
    parse_example_ds *d = (parse_example_ds *)ds;
    for (int i = 0; d->f && i < d->n; i++) {
        if (d->f[i].key)
            sl__free(d->f[i].key, d->f[i].key_len + 1);
        if (d->f[i].def_bytes)
            sl__free(d->f[i].def_bytes, d->f[i].def_len);
    }
    if (d->f)
        sl__free(d->f, (size_t)d->n * sizeof *d->f);
    if (d->table)
        sl__free(d->table, ((size_t)d->mask + 1) * sizeof *d->table);
}

/* The record's leaf becomes the dict of the features. */
static void parse_example_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    const parse_example_ds *d = arg;
    if (leaf != 0) {
        sl__stext_leaf(t, spec);
        return;
    }
    sl__stext_puts(t, "{");
    for (int i = 0; i < d->n; i++) {
        const feat *f = &d->f[i];
        sl__leaf_spec v = {.dtype = f->dtype, .ndim = f->ndim < 0 ? 1 : f->ndim, .shape = {-1}};
        for (int k = 0; k < f->ndim; k++)
            v.shape[k] = f->shape[k];
        sl__stext_puts(t, i ? ", " : "");
        sl__stext_key(t, f->key);
        sl__stext_puts(t, ": ");
        sl__stext_leaf(t, &v);
    }
    sl__stext_puts(t, "}");
}

static sl_structure *parse_example_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, parse_example_leaf, (void *)ds) : NULL;
}

static const sl__node_ops parse_example_ops = {
    .kind = "parse_example",
    .structure = parse_example_structure,
    .make_iter = parse_example_make,
    .cardinality = parse_example_cardinality,
    .fingerprint = parse_example_fingerprint,
    .destroy = parse_example_destroy,
};

/* ---- the spec ---- */

static int check_feature(const sl_feature *s, int i)
{
    if (!s->key)
        return sl__set_error(SL_EINVAL, "parse_example: feature %d has a NULL key", i);
    if (s->type != SL_FEATURE_BYTES && s->type != SL_FEATURE_INT64 &&
        s->type != SL_FEATURE_FLOAT)
        return sl__set_error(SL_EINVAL, "parse_example: feature '%.200s' has bad type %d", s->key,
                             (int)s->type);
    if (s->ndim < -1 || s->ndim > SL_MAX_DIMS)
        return sl__set_error(SL_EINVAL, "parse_example: feature '%.200s' has bad rank %d (-1 "
                             "for varlen, 0 to %d)", s->key, s->ndim, SL_MAX_DIMS);
    int64_t count = 1;
    for (int k = 0; k < s->ndim; k++)
        if (s->shape[k] < 0 || (s->shape[k] && count > INT64_MAX / 16 / s->shape[k]))
            return sl__set_error(SL_EINVAL, "parse_example: feature '%.200s' has bad dimension "
                                 "%lld", s->key, (long long)s->shape[k]);
        else
            count *= s->shape[k];
    size_t fill;
    if (s->ndim >= 0 && s->has_default && s->type == SL_FEATURE_BYTES &&
        ((s->default_len && !s->default_bytes) ||
         __builtin_mul_overflow((size_t)count, s->default_len, &fill) ||
         fill > (size_t)INT64_MAX / 2))
        return sl__set_error(SL_EINVAL, "parse_example: feature '%.200s' has a bad default "
                             "(%zu bytes%s)", s->key, s->default_len,
                             s->default_bytes ? "" : " at NULL");
    return 0;
}

static int load_feature(feat *f, const sl_feature *s)
{
    static const int list[] = {LIST_BYTES, LIST_INT64, LIST_FLOAT};
    static const sl_dtype dtype[] = {SL_STRING, SL_INT64, SL_FLOAT32};
    f->key_len = strlen(s->key);
    f->key = sl__alloc(f->key_len + 1);
    if (!f->key)
        return SL_ENOMEM;
    memcpy(f->key, s->key, f->key_len + 1);
    f->type = s->type;
    f->list = list[s->type];
    f->dtype = dtype[s->type];
    f->ndim = s->ndim;
    /* what the spec does not use is zero, so fingerprints compare */
    for (int k = 0; k < s->ndim; k++)
        f->shape[k] = s->shape[k];
    f->count = sl__shape_count(s->ndim < 0 ? 0 : s->ndim, f->shape);
    if (s->ndim < 0 || !s->has_default)
        return 0;
    f->has_default = true;
    if (s->type == SL_FEATURE_INT64)
        f->def_int64 = s->default_int64;
    else if (s->type == SL_FEATURE_FLOAT)
        f->def_float = s->default_float;
    else if (s->default_len) {
        f->def_bytes = sl__alloc(s->default_len);
        if (!f->def_bytes)
            return SL_ENOMEM;
        f->def_len = s->default_len;
        memcpy(f->def_bytes, s->default_bytes, s->default_len);
    }
    return 0;
}

/* Features in key order (bytewise, as tf.nest sorts a dict's keys): the
 * order of the output's tensors, so the dict's leaves are in its order. */
static int by_key(const void *a, const void *b)
{
    const feat *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* The key table; SL_EINVAL for a key given twice. */
static int index_keys(parse_example_ds *d)
{
    uint32_t size = 8;
    while (size < 2 * (uint32_t)d->n)
        size *= 2;
    d->table = sl__calloc(size, sizeof *d->table);
    if (!d->table)
        return SL_ENOMEM;
    d->mask = size - 1;
    for (int k = 0; k < d->n; k++) {
        const feat *f = &d->f[k];
        if (lookup(d, f->key, f->key_len) >= 0)
            return sl__set_error(SL_EINVAL, "parse_example: feature '%.200s' is given twice",
                                 f->key);
        uint32_t i = key_hash(f->key, f->key_len) & d->mask;
        while (d->table[i])
            i = (i + 1) & d->mask;
        d->table[i] = (uint16_t)(k + 1);
    }
    return 0;
}

SL_API sl_dataset *sl_parse_example(sl_dataset *in, const sl_feature *features, int n,
                                    unsigned flags)
{
    return sl_parse_example_parallel(in, features, n, flags, 1);
}

SL_API sl_dataset *sl_parse_example_parallel(sl_dataset *in, const sl_feature *features, int n,
                                             unsigned flags, int parallelism)
{
    parse_example_ds *d = (parse_example_ds *)sl__dataset_new(&parse_example_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if ((parallelism < 1 && parallelism != SL_AUTOTUNE) || parallelism > 4096)
        return sl__dataset_fail(&d->base, SL_EINVAL, "parse_example: parallelism %d (1 to "
                                "4096, or SL_AUTOTUNE)", parallelism);
    d->parallelism = parallelism;
    if (!features)
        return sl__dataset_fail(&d->base, SL_EINVAL, "parse_example: NULL features");
    if (n < 1 || n > MAX_FEATURES)
        return sl__dataset_fail(&d->base, SL_EINVAL, "parse_example: %d features (1 to %d)", n,
                                MAX_FEATURES);
    if (flags)
        return sl__dataset_fail(&d->base, SL_EINVAL, "parse_example: unknown flags %#x", flags);
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = check_feature(&features[i], i);
    if (rc == 0) {
        d->f = sl__calloc((size_t)n, sizeof *d->f);
        rc = d->f ? 0 : SL_ENOMEM;
    }
    if (rc == 0)
        d->n = n;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = load_feature(&d->f[i], &features[i]);
    if (rc == 0) {
        qsort(d->f, (size_t)n, sizeof *d->f, by_key);
        rc = index_keys(d);
    }
    if (rc) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    d->flags = flags;
    for (int i = 0; i < n; i++) {
        const feat *f = &d->f[i];
        size_t b = (size_t)f->count * sl_dtype_size(f->dtype);
        if (f->ndim >= 0 && f->list != LIST_BYTES && b <= INLINE_MAX)
            d->inline_fixed += b;
    }
    return &d->base;
}
