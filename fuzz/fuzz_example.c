/* parse_example's wire-format reader: the input is one serialized
 * tf.train.Example, parsed as a string under a lenient spec
 * (defaults and varlen features, so most inputs parse to the end), and as
 * uint8 [n] under a strict one (fixed features without defaults), and
 * merged with an Example of one long bytes value (run_merged). Every
 * output byte is touched; a bad record must be an element error, never a
 * crash, a leak or a read out of bounds. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "sluice.h"

static const sl_feature lenient[] = {
    {.key = "image/encoded", .type = SL_FEATURE_BYTES, .ndim = 0, .has_default = 1,
     .default_bytes = "none", .default_len = 4},
    {.key = "label", .type = SL_FEATURE_INT64, .ndim = 0, .has_default = 1, .default_int64 = -1},
    {.key = "box", .type = SL_FEATURE_FLOAT, .ndim = 2, .shape = {2, 1}, .has_default = 1,
     .default_float = 0.5f},
    {.key = "words", .type = SL_FEATURE_BYTES, .ndim = -1},
    {.key = "ids", .type = SL_FEATURE_INT64, .ndim = -1},
    {.key = "scores", .type = SL_FEATURE_FLOAT, .ndim = -1},
};

static const sl_feature strict[] = {
    {.key = "words", .type = SL_FEATURE_BYTES, .ndim = -1},
    {.key = "label", .type = SL_FEATURE_INT64, .ndim = 0},
    {.key = "box", .type = SL_FEATURE_FLOAT, .ndim = 1, .shape = {2}},
    {.key = "ids", .type = SL_FEATURE_INT64, .ndim = 1, .shape = {3}},
    {.key = "pair", .type = SL_FEATURE_BYTES, .ndim = 1, .shape = {2}},
};

static void run(const uint8_t *data, size_t size, bool as_bytes)
{
    sl_element *el = sl_element_create(1);
    const int64_t shape[2] = {1, (int64_t)size};
    if (as_bytes) {
        void *p = sl_element_add_tensor(el, SL_UINT8, 2, shape);
        if (p && size)
            memcpy(p, data, size);
    } else {
        const char *item = (const char *)data;
        sl_element_add_strings(el, 1, shape, &item, &size);
    }
    sl_dataset *ds = sl_parse_example(sl_from_tensor_slices(el), as_bytes ? strict : lenient,
                                      as_bytes ? 5 : 6, 0);
    fuzz_drain(ds, SL_ERRORS_FAIL);
}

/* The input merged with an Example of one long image/encoded value, before
 * it and after it (a serialized message followed by another parses as
 * their merge): records of their own buffer, which parse_example may turn
 * into views of the record. */
static void run_merged(const uint8_t *data, size_t size)
{
    enum { BIG = 5000, FRAME = 32 };
    uint8_t *rec = malloc(BIG + FRAME + size);
    if (!rec)
        return;
    size_t n = 0;
    uint8_t head[FRAME]; /* Example.features { feature { key, value { bytes_list { value } } } } */
    static const char key[] = "image/encoded";
    size_t v = BIG, l = v + 3, f = l + 3, e = 2 + (sizeof key - 1) + 3 + f, fs = e + 3;
    uint8_t *h = head;
    *h++ = 0x0a, *h++ = (uint8_t)(fs | 0x80), *h++ = (uint8_t)(fs >> 7);
    *h++ = 0x0a, *h++ = (uint8_t)(e | 0x80), *h++ = (uint8_t)(e >> 7);
    *h++ = 0x0a, *h++ = (uint8_t)(sizeof key - 1);
    memcpy(h, key, sizeof key - 1), h += sizeof key - 1;
    *h++ = 0x12, *h++ = (uint8_t)(f | 0x80), *h++ = (uint8_t)(f >> 7);
    *h++ = 0x0a, *h++ = (uint8_t)(l | 0x80), *h++ = (uint8_t)(l >> 7);
    *h++ = 0x0a, *h++ = (uint8_t)(v | 0x80), *h++ = (uint8_t)(v >> 7);
    size_t hn = (size_t)(h - head);
    for (int order = 0; order < 2; order++) {
        n = 0;
        if (order == 1 && size)
            memcpy(rec, data, size), n = size;
        memcpy(rec + n, head, hn), n += hn;
        memset(rec + n, 0x5a, BIG), n += BIG;
        if (order == 0 && size)
            memcpy(rec + n, data, size), n += size;
        run(rec, n, false);
    }
    free(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size, false);
    run(data, size, true);
    run_merged(data, size);
    return 0;
}

/* ---- seeds: Examples from a small encoder ---- */

typedef struct pb {
    uint8_t b[4096];
    size_t n;
} pb;

static void put(pb *p, const void *d, size_t n)
{
    if (p->n + n > sizeof p->b)
        return;
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void varint(pb *p, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) {
        uint8_t b = (uint8_t)(v | 0x80);
        put(p, &b, 1);
    }
    uint8_t b = (uint8_t)v;
    put(p, &b, 1);
}

static void field(pb *p, uint32_t num, const void *d, size_t n)
{
    varint(p, (uint64_t)num << 3 | 2);
    varint(p, n);
    put(p, d, n);
}

static void entry(pb *features, const char *key, const pb *feature)
{
    pb e = {.n = 0};
    field(&e, 1, key, strlen(key));
    field(&e, 2, feature->b, feature->n);
    field(features, 1, e.b, e.n);
}

/* A Feature of one list kind (1 bytes, 2 float, 3 int64) around body. */
static void list(pb *feature, uint32_t kind, const pb *body)
{
    feature->n = 0;
    field(feature, kind, body->b, body->n);
}

static void ints(pb *feature, const int64_t *v, int n, bool packed)
{
    pb body = {.n = 0}, l = {.n = 0};
    for (int i = 0; i < n; i++) {
        if (!packed)
            varint(&l, 1 << 3);
        varint(packed ? &body : &l, (uint64_t)v[i]);
    }
    if (packed)
        field(&l, 1, body.b, body.n);
    list(feature, 3, &l);
}

static void floats(pb *feature, const float *v, int n, bool packed)
{
    pb body = {.n = 0}, l = {.n = 0};
    for (int i = 0; i < n; i++) {
        if (!packed)
            varint(&l, 1 << 3 | 5);
        put(packed ? &body : &l, &v[i], 4); /* little-endian hosts */
    }
    if (packed)
        field(&l, 1, body.b, body.n);
    list(feature, 2, &l);
}

static void strs(pb *feature, const char *const *v, int n)
{
    pb l = {.n = 0};
    for (int i = 0; i < n; i++)
        field(&l, 1, v[i], strlen(v[i]));
    list(feature, 1, &l);
}

static void one(void (*add)(const uint8_t *, size_t), bool packed, bool extra)
{
    pb fs = {.n = 0}, f, rec = {.n = 0};
    const char *img[] = {"\xff\xd8\xff\xe0 not really a jpeg"}, *words[] = {"a", "", "ccc"};
    const int64_t label = 7, ids[3] = {-1, 300, INT64_MAX};
    const float box[2] = {0.25f, -3}, scores[3] = {1, 2, 3};
    strs(&f, img, 1);
    entry(&fs, "image/encoded", &f);
    ints(&f, &label, 1, packed);
    entry(&fs, "label", &f);
    floats(&f, box, 2, packed);
    entry(&fs, "box", &f);
    strs(&f, words, 3);
    entry(&fs, "words", &f);
    ints(&f, ids, 3, !packed);
    entry(&fs, "ids", &f);
    floats(&f, scores, 3, !packed);
    entry(&fs, "scores", &f);
    strs(&f, words, 2);
    entry(&fs, "pair", &f);
    if (extra) { /* a duplicate key, an unknown field, a second Features */
        ints(&f, ids, 1, true);
        entry(&fs, "label", &f);
        varint(&fs, 5 << 3);
        varint(&fs, 99);
    }
    field(&rec, 1, fs.b, fs.n);
    if (extra) {
        fs.n = 0;
        floats(&f, scores, 2, true);
        entry(&fs, "box", &f);
        field(&rec, 1, fs.b, fs.n);
    }
    add(rec.b, rec.n);
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    one(add, true, false);
    one(add, false, false);
    one(add, true, true);
    add((const uint8_t *)"", 0); /* the empty Example */
}
