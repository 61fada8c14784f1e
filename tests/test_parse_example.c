/* parse_example: tf.train.Example records made by a small encoder here,
 * parsed into fixed and varlen features of each type; packed and unpacked
 * lists, defaults, last-wins keys, unknown fields; each kind of malformed
 * record with the byte offset its message names; the skip policy; uint8
 * input; builder arguments, the spec's copy and its fingerprint; long
 * bytes values kept in place in records nothing else holds, and left
 * whole in records something else does. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recordutil.h"
#include "testutil.h"

/* ---- a protobuf encoder ---- */

typedef struct pb {
    uint8_t b[1 << 18];
    size_t n;
} pb;

static pb *pb_new(void)
{
    pb *p = calloc(1, sizeof *p);
    assert_non_null(p);
    return p;
}

static void pb_raw(pb *p, const void *d, size_t n)
{
    assert_true(p->n + n <= sizeof p->b);
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void pb_byte(pb *p, uint8_t v)
{
    pb_raw(p, &v, 1);
}

static void pb_varint(pb *p, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        pb_byte(p, (uint8_t)(v | 0x80));
    pb_byte(p, (uint8_t)v);
}

static void pb_tag(pb *p, uint32_t field, int wt)
{
    pb_varint(p, (uint64_t)field << 3 | (unsigned)wt);
}

static void pb_fixed32(pb *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        pb_byte(p, (uint8_t)(v >> (8 * i)));
}

static void pb_len(pb *p, uint32_t field, const void *d, size_t n)
{
    pb_tag(p, field, 2);
    pb_varint(p, n);
    pb_raw(p, d, n);
}

static void pb_msg(pb *p, uint32_t field, const pb *m)
{
    pb_len(p, field, m->b, m->n);
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Feature messages: bytes_list = 1, float_list = 2, int64_list = 3. */
static void feat_bytes(pb *f, const char *const *v, const size_t *lens, int n)
{
    pb *l = pb_new();
    for (int i = 0; i < n; i++)
        pb_len(l, 1, v[i], lens ? lens[i] : strlen(v[i]));
    pb_msg(f, 1, l);
    free(l);
}

static void feat_int64(pb *f, const int64_t *v, int n, bool packed)
{
    pb *l = pb_new(), *body = pb_new();
    for (int i = 0; i < n; i++) {
        if (!packed)
            pb_tag(l, 1, 0);
        pb_varint(packed ? body : l, (uint64_t)v[i]);
    }
    if (packed)
        pb_msg(l, 1, body);
    pb_msg(f, 3, l);
    free(l);
    free(body);
}

static void feat_float(pb *f, const float *v, int n, bool packed)
{
    pb *l = pb_new(), *body = pb_new();
    for (int i = 0; i < n; i++) {
        if (!packed)
            pb_tag(l, 1, 5);
        pb_fixed32(packed ? body : l, fbits(v[i]));
    }
    if (packed)
        pb_msg(l, 1, body);
    pb_msg(f, 2, l);
    free(l);
    free(body);
}

/* A map entry of Features. */
static void add_entry(pb *features, const char *key, const pb *feature)
{
    pb *e = pb_new();
    pb_len(e, 1, key, strlen(key));
    pb_msg(e, 2, feature);
    pb_msg(features, 1, e);
    free(e);
}

/* The Example holding `features`, in rec. */
static void example(pb *rec, const pb *features)
{
    rec->n = 0;
    pb_msg(rec, 1, features);
}

/* ---- running ---- */

static sl_feature fixed(const char *key, sl_feature_type type, int ndim, const int64_t *shape)
{
    sl_feature f = {.key = key, .type = type, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        f.shape[i] = shape[i];
    return f;
}

static sl_feature varlen(const char *key, sl_feature_type type)
{
    return (sl_feature){.key = key, .type = type, .ndim = -1};
}

static sl_element *record_el(const pb *rec, int extra)
{
    sl_element *el = sl_element_create(1 + extra);
    assert_int_equal(sl_element_add_string(el, rec->b, rec->n), 0);
    return el;
}

static sl_options *opts(int policy)
{
    sl_options *o = tu_opts(2, 1);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    return o;
}

/* The features come out in key order (a dict's leaves': test_dict_order
 * checks it): el (consumed) re-ordered as f lists them, for the
 * assertions below, written in that order. */
static sl_element *in_spec_order(sl_element *el, const sl_feature *f, int n)
{
    sl_element *o = sl_element_create(sl_element_size(el));
    assert_non_null(o);
    for (int i = 0; i < n; i++) {
        int rank = 0;
        for (int j = 0; j < n; j++)
            rank += strcmp(f[j].key, f[i].key) < 0;
        assert_int_equal(sl_element_add_shared(o, el, rank), 0);
    }
    for (int j = n; j < sl_element_size(el); j++)
        assert_int_equal(sl_element_add_shared(o, el, j), 0);
    sl_element_release(el);
    return o;
}

/* Parses the one element el (consumed): sl_next's code, the output in
 * *out (NULL unless 0; features in f's order), the iterator's message in
 * msg. */
static int parse_el(sl_element *el, const sl_feature *f, int n, sl_element **out, char *msg)
{
    sl_dataset *ds = sl_parse_example(tu_elements(&el, 1, -3), f, n, 0);
    assert_non_null(ds);
    sl_options *o = opts(SL_ERRORS_FAIL);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    *out = NULL;
    int rc = sl_next(it, out);
    snprintf(msg, 1024, "%s", rc < 0 ? sl_iterator_errmsg(it) : "");
    if (rc == 0) {
        sl_element *extra;
        assert_int_equal(sl_next(it, &extra), SL_EOF);
        *out = in_spec_order(*out, f, n);
    }
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return rc;
}

static int parse_rec(const pb *rec, const sl_feature *f, int n, sl_element **out, char *msg)
{
    return parse_el(record_el(rec, 0), f, n, out, msg);
}

/* Asserts that rec fails with `code` and a message holding each of the
 * NULL-terminated strings. */
static void expect_error(const pb *rec, const sl_feature *f, int n, int code, ...)
{
    sl_element *el;
    char msg[1024];
    int rc = parse_rec(rec, f, n, &el, msg);
    if (rc != code)
        print_error("got %d (%s), want %d\n", rc, msg, code);
    assert_int_equal(rc, code);
    assert_non_null(strstr(msg, "parse_example"));
    va_list ap;
    va_start(ap, code);
    for (const char *s; (s = va_arg(ap, const char *));) {
        if (!strstr(msg, s))
            print_error("message \"%s\" lacks \"%s\"\n", msg, s);
        assert_non_null(strstr(msg, s));
    }
    va_end(ap);
}

static const int64_t *i64s(const sl_element *el, int i, int64_t count)
{
    const sl_tensor *t = sl_element_tensor(el, i);
    assert_non_null(t);
    assert_int_equal(sl_tensor_dtype(t), SL_INT64);
    assert_int_equal(sl_tensor_count(t), count);
    return sl_tensor_data(t);
}

static const float *f32s(const sl_element *el, int i, int64_t count)
{
    const sl_tensor *t = sl_element_tensor(el, i);
    assert_non_null(t);
    assert_int_equal(sl_tensor_dtype(t), SL_FLOAT32);
    assert_int_equal(sl_tensor_count(t), count);
    return sl_tensor_data(t);
}

static void check_bytes(const sl_tensor *t, int64_t i, const void *want, size_t len)
{
    size_t got;
    const char *s = sl_tensor_string(t, i, &got);
    assert_non_null(s);
    assert_int_equal(got, len);
    assert_memory_equal(s, want, len);
}

/* ---- tests ---- */

static void test_types_and_shapes(void **state)
{
    (void)state;
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new();
    const char img[] = "\xff\xd8\x00jpeg\x00bytes";
    const char *imgs[] = {img};
    size_t img_len = sizeof img - 1;
    feat_bytes(f, imgs, &img_len, 1);
    add_entry(fs, "image/encoded", f);
    f->n = 0;
    int64_t label = 42;
    feat_int64(f, &label, 1, true);
    add_entry(fs, "label", f);
    f->n = 0;
    float box[6] = {0.5f, -1.25f, 3e38f, -0.0f, 1e-40f, 7};
    feat_float(f, box, 6, true);
    add_entry(fs, "box", f);
    f->n = 0;
    int64_t ids[3] = {-1, INT64_MIN, INT64_MAX};
    feat_int64(f, ids, 3, false);
    add_entry(fs, "ids", f);
    f->n = 0;
    const char *words[] = {"a", "", "ccc"};
    feat_bytes(f, words, NULL, 3);
    add_entry(fs, "words", f);
    f->n = 0;
    feat_float(f, box, 2, false);
    add_entry(fs, "scores", f);
    f->n = 0;
    int64_t mat[6] = {1, 2, 3, 4, 5, 6};
    feat_int64(f, mat, 6, false);
    add_entry(fs, "mat", f);
    f->n = 0;
    const char *pair[] = {"x", "yy"};
    feat_bytes(f, pair, NULL, 2);
    add_entry(fs, "pair", f);
    example(rec, fs);

    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s2[1] = {2};
    sl_feature spec[] = {
        fixed("image/encoded", SL_FEATURE_BYTES, 0, NULL), fixed("label", SL_FEATURE_INT64, 0, NULL),
        fixed("box", SL_FEATURE_FLOAT, 2, s23),           varlen("ids", SL_FEATURE_INT64),
        varlen("words", SL_FEATURE_BYTES),                 varlen("scores", SL_FEATURE_FLOAT),
        fixed("mat", SL_FEATURE_INT64, 2, s32),            fixed("pair", SL_FEATURE_BYTES, 1, s2),
    };
    /* the input's other tensors follow, shared */
    sl_element *in = record_el(rec, 2);
    assert_int_equal(sl_element_add_int64(in, 7), 0);
    assert_int_equal(sl_element_add_string(in, "/data/a.tfrecord", 16), 0);
    sl_element *el;
    char msg[1024];
    int rc = parse_el(in, spec, 8, &el, msg);
    if (rc)
        print_error("%s\n", msg);
    assert_int_equal(rc, 0);
    assert_int_equal(sl_element_size(el), 10);

    const sl_tensor *t = sl_element_tensor(el, 0);
    assert_int_equal(sl_tensor_dtype(t), SL_STRING);
    assert_int_equal(sl_tensor_ndim(t), 0);
    check_bytes(t, 0, img, img_len);
    assert_int_equal(sl_tensor_ndim(sl_element_tensor(el, 1)), 0);
    assert_int_equal(i64s(el, 1, 1)[0], 42);
    tu_check_shape(sl_element_tensor(el, 2), 2, s23);
    const float *b = f32s(el, 2, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(fbits(b[i]), fbits(box[i]));
    const int64_t three = 3;
    tu_check_shape(sl_element_tensor(el, 3), 1, &three);
    assert_memory_equal(i64s(el, 3, 3), ids, sizeof ids);
    t = sl_element_tensor(el, 4);
    tu_check_shape(t, 1, &three);
    for (int i = 0; i < 3; i++)
        tu_check_string(t, i, words[i]);
    assert_int_equal(sl_tensor_ndim(sl_element_tensor(el, 5)), 1);
    assert_true(f32s(el, 5, 2)[1] == -1.25f);
    tu_check_shape(sl_element_tensor(el, 6), 2, s32);
    assert_memory_equal(i64s(el, 6, 6), mat, sizeof mat);
    t = sl_element_tensor(el, 7);
    tu_check_shape(t, 1, s2);
    tu_check_string(t, 0, "x");
    tu_check_string(t, 1, "yy");
    assert_int_equal(i64s(el, 8, 1)[0], 7);
    tu_check_string(sl_element_tensor(el, 9), 0, "/data/a.tfrecord");
    sl_element_release(el);
    free(fs), free(rec), free(f);
}

/* The same values packed, unpacked, mixed, and split over two lists. */
static void test_packed_unpacked(void **state)
{
    (void)state;
    const int64_t v[5] = {0, 1, -300, INT64_MIN, 1ll << 40};
    const float x[4] = {1.5f, -2, NAN, INFINITY};
    for (int mode = 0; mode < 4; mode++) {
        pb *fs = pb_new(), *rec = pb_new(), *f = pb_new();
        if (mode < 2) {
            feat_int64(f, v, 5, mode == 0);
        } else if (mode == 2) { /* packed, unpacked and packed in one list */
            pb *l = pb_new(), *body = pb_new();
            pb_varint(body, (uint64_t)v[0]);
            pb_varint(body, (uint64_t)v[1]);
            pb_msg(l, 1, body);
            pb_tag(l, 1, 0);
            pb_varint(l, (uint64_t)v[2]);
            body->n = 0;
            pb_varint(body, (uint64_t)v[3]);
            pb_varint(body, (uint64_t)v[4]);
            pb_msg(l, 1, body);
            pb_msg(f, 3, l);
            free(l), free(body);
        } else { /* two int64_lists in one Feature merge */
            feat_int64(f, v, 2, true);
            feat_int64(f, v + 2, 3, false);
        }
        add_entry(fs, "v", f);
        f->n = 0;
        if (mode == 2) {
            feat_float(f, x, 2, true);
            feat_float(f, x + 2, 2, false);
        } else {
            feat_float(f, x, 4, mode % 2 == 0);
        }
        add_entry(fs, "x", f);
        example(rec, fs);
        const int64_t s5 = 5, s4 = 4;
        sl_feature spec[4] = {fixed("v", SL_FEATURE_INT64, 1, &s5), varlen("v", SL_FEATURE_INT64),
                              fixed("x", SL_FEATURE_FLOAT, 1, &s4), varlen("x", SL_FEATURE_FLOAT)};
        for (int k = 0; k < 4; k++) {
            sl_element *el;
            char msg[1024];
            int rc = parse_rec(rec, &spec[k], 1, &el, msg);
            if (rc)
                print_error("mode %d spec %d: %s\n", mode, k, msg);
            assert_int_equal(rc, 0);
            if (k < 2) {
                assert_memory_equal(i64s(el, 0, 5), v, sizeof v);
            } else {
                const float *got = f32s(el, 0, 4);
                for (int i = 0; i < 4; i++)
                    assert_int_equal(fbits(got[i]), fbits(x[i]));
            }
            sl_element_release(el);
        }
        free(fs), free(rec), free(f);
    }
}

static void test_defaults_and_absent(void **state)
{
    (void)state;
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new();
    int64_t one = 1;
    feat_int64(f, &one, 1, true);
    add_entry(fs, "present", f);
    example(rec, fs);
    const int64_t s22[2] = {2, 2}, s3 = 3, s0 = 0;
    sl_feature spec[] = {
        fixed("i", SL_FEATURE_INT64, 2, s22), fixed("f", SL_FEATURE_FLOAT, 1, &s3),
        fixed("b", SL_FEATURE_BYTES, 1, &s3), fixed("s", SL_FEATURE_BYTES, 0, NULL),
        varlen("vi", SL_FEATURE_INT64),       varlen("vb", SL_FEATURE_BYTES),
        varlen("vf", SL_FEATURE_FLOAT),       fixed("z", SL_FEATURE_INT64, 1, &s0),
        fixed("present", SL_FEATURE_INT64, 0, NULL),
    };
    spec[0].has_default = 1, spec[0].default_int64 = -7;
    spec[1].has_default = 1, spec[1].default_float = 2.5f;
    spec[2].has_default = 1, spec[2].default_bytes = "n/a", spec[2].default_len = 3;
    spec[3].has_default = 1; /* the empty string */
    spec[7].has_default = 1; /* an empty shape: absent still needs a default */
    sl_element *el;
    char msg[1024];
    int rc = parse_rec(rec, spec, 9, &el, msg);
    if (rc)
        print_error("%s\n", msg);
    assert_int_equal(rc, 0);
    tu_check_shape(sl_element_tensor(el, 0), 2, s22);
    for (int i = 0; i < 4; i++)
        assert_int_equal(i64s(el, 0, 4)[i], -7);
    for (int i = 0; i < 3; i++)
        assert_true(f32s(el, 1, 3)[i] == 2.5f);
    const sl_tensor *t = sl_element_tensor(el, 2);
    tu_check_shape(t, 1, &s3);
    for (int i = 0; i < 3; i++)
        tu_check_string(t, i, "n/a");
    t = sl_element_tensor(el, 3);
    assert_int_equal(sl_tensor_ndim(t), 0);
    tu_check_string(t, 0, "");
    for (int i = 4; i < 7; i++) { /* absent varlen: empty 1-D */
        t = sl_element_tensor(el, i);
        tu_check_shape(t, 1, &s0);
        assert_int_equal(sl_tensor_dtype(t), i == 4 ? SL_INT64 : i == 5 ? SL_STRING : SL_FLOAT32);
    }
    tu_check_shape(sl_element_tensor(el, 7), 1, &s0);
    assert_int_equal(i64s(el, 8, 1)[0], 1);
    sl_element_release(el);
    free(fs), free(rec), free(f);
}

static void test_feature_errors(void **state)
{
    (void)state;
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new();
    int64_t v[3] = {1, 2, 3};
    feat_int64(f, v, 3, true);
    add_entry(fs, "three", f);
    example(rec, fs);
    const int64_t s22[2] = {2, 2};
    sl_feature s = fixed("gone", SL_FEATURE_INT64, 0, NULL);
    expect_error(rec, &s, 1, SL_EINVAL, "feature 'gone' is missing", NULL);
    s = fixed("three", SL_FEATURE_FLOAT, 1, &v[2]);
    expect_error(rec, &s, 1, SL_EDTYPE, "feature 'three'", "int64_list", "float_list", NULL);
    s = varlen("three", SL_FEATURE_BYTES);
    expect_error(rec, &s, 1, SL_EDTYPE, "feature 'three' is an int64_list", NULL);
    s = fixed("three", SL_FEATURE_INT64, 2, s22);
    expect_error(rec, &s, 1, SL_ESHAPE, "feature 'three' has 3 values", "[2, 2] needs 4", NULL);
    s = fixed("three", SL_FEATURE_INT64, 0, NULL);
    expect_error(rec, &s, 1, SL_ESHAPE, "has 3 values", "needs 1", NULL);

    /* a bytes count error comes before anything is made */
    f->n = fs->n = 0;
    const char *w[] = {"a", "b"};
    feat_bytes(f, w, NULL, 2);
    add_entry(fs, "two", f);
    example(rec, fs);
    s = fixed("two", SL_FEATURE_BYTES, 0, NULL);
    expect_error(rec, &s, 1, SL_ESHAPE, "feature 'two' has 2 values", NULL);
    free(fs), free(rec), free(f);
}

/* Malformed wire data: each message names what and where. */
static void test_malformed(void **state)
{
    (void)state;
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new(), *l = pb_new();
    sl_feature sv = varlen("v", SL_FEATURE_INT64), sb = varlen("v", SL_FEATURE_BYTES),
               sf = varlen("v", SL_FEATURE_FLOAT);
    char at[64];

    /* an unknown varint field of 11 bytes at the top */
    pb_tag(rec, 2, 0);
    for (int i = 0; i < 11; i++)
        pb_byte(rec, 0xff);
    expect_error(rec, &sv, 1, SL_ECORRUPT, "malformed varint at byte 1 of the record",
                 "longer than 10 bytes", NULL);

    /* a packed varint cut by the end of its list: the last 3 bytes */
    pb_len(l, 1, "\x80\x80\x80", 3);
    pb_msg(f, 3, l);
    add_entry(fs, "v", f);
    example(rec, fs);
    snprintf(at, sizeof at, "malformed varint at byte %zu of the record", rec->n - 3);
    expect_error(rec, &sv, 1, SL_ECORRUPT, "feature 'v'", at, "past the end", NULL);

    /* Example.features of 100 bytes in a record of 7 */
    rec->n = 0;
    pb_tag(rec, 1, 2);
    pb_varint(rec, 100);
    pb_raw(rec, "\x0a\x03\x0a\x01v", 5);
    expect_error(rec, &sv, 1, SL_ECORRUPT,
                 "length 100 at byte 1 of the record runs past the end of its message", NULL);

    /* a length running past its enclosing message, not the record: the
     * entry claims 5 bytes inside a Features of 3 */
    rec->n = 0;
    pb_raw(rec, "\x0a\x03\x0a\x05v\x00\x00\x00\x00", 9);
    expect_error(rec, &sv, 1, SL_ECORRUPT, "length 5 at byte 3 of the record", NULL);

    /* bytes_list as a varint: the Feature's 2 bytes end the record */
    f->n = fs->n = 0;
    pb_raw(f, "\x08\x01", 2);
    add_entry(fs, "v", f);
    example(rec, fs);
    snprintf(at, sizeof at, "for Feature.bytes_list at byte %zu of the record", rec->n - 2);
    expect_error(rec, &sb, 1, SL_ECORRUPT, "wrong wire type 0 (varint)", at, NULL);

    /* Example.features as a varint */
    rec->n = 0;
    pb_raw(rec, "\x08\x01", 2);
    expect_error(rec, &sv, 1, SL_ECORRUPT, "wrong wire type 0 (varint) for Example.features at "
                 "byte 0", NULL);

    /* an Int64List value as fixed64 */
    f->n = fs->n = l->n = 0;
    pb_tag(l, 1, 1);
    pb_raw(l, "12345678", 8);
    pb_msg(f, 3, l);
    add_entry(fs, "v", f);
    example(rec, fs);
    snprintf(at, sizeof at, "for Int64List.value at byte %zu", rec->n - 9);
    expect_error(rec, &sv, 1, SL_ECORRUPT, "wrong wire type 1 (fixed64)", at, NULL);

    /* a FloatList fixed32 cut short: 2 bytes of 4 */
    f->n = fs->n = l->n = 0;
    pb_tag(l, 1, 5);
    pb_raw(l, "\x00\x00", 2);
    pb_msg(f, 2, l);
    add_entry(fs, "v", f);
    example(rec, fs);
    snprintf(at, sizeof at, "truncated fixed32 at byte %zu", rec->n - 2);
    expect_error(rec, &sf, 1, SL_ECORRUPT, at, NULL);

    /* a packed FloatList of 5 bytes */
    f->n = fs->n = l->n = 0;
    pb_len(l, 1, "\x00\x00\x80\x3f\x00", 5);
    pb_msg(f, 2, l);
    add_entry(fs, "v", f);
    example(rec, fs);
    snprintf(at, sizeof at, "of 5 bytes (not a multiple of 4) at byte %zu", rec->n - 6);
    expect_error(rec, &sf, 1, SL_ECORRUPT, at, NULL);

    /* a group (wire type 3), and field number 0 */
    rec->n = 0;
    pb_raw(rec, "\x0b", 1);
    expect_error(rec, &sv, 1, SL_ECORRUPT, "bad wire type 3 at byte 0", NULL);
    rec->n = 0;
    pb_raw(rec, "\x0a\x02\x02\x00", 4);
    expect_error(rec, &sv, 1, SL_ECORRUPT, "bad field number 0 at byte 2", NULL);

    /* a Feature not asked for is skipped unread (but its length checked) */
    f->n = fs->n = l->n = 0;
    pb_raw(f, "\x08\x01", 2);
    add_entry(fs, "other", f);
    example(rec, fs);
    sl_element *el;
    char msg[1024];
    assert_int_equal(parse_rec(rec, &sv, 1, &el, msg), 0);
    sl_element_release(el);
    free(fs), free(rec), free(f), free(l);
}

static void test_last_wins_and_unknown(void **state)
{
    (void)state;
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new(), *e = pb_new(), *l = pb_new();
    int64_t one = 1, two = 2, three = 3;
    const char *word[] = {"w"};
    feat_int64(f, &one, 1, true);
    add_entry(fs, "label", f);
    f->n = 0;
    feat_bytes(f, word, NULL, 1); /* another kind first: the last entry decides */
    add_entry(fs, "kind", f);
    pb_tag(fs, 2, 0); /* unknown Features field */
    pb_varint(fs, 99);
    f->n = 0;
    feat_int64(f, &two, 1, false);
    add_entry(fs, "label", f);
    f->n = 0;
    feat_int64(f, &three, 1, false);
    add_entry(fs, "kind", f);
    /* an entry with unknown fields and the value before the key */
    f->n = 0;
    pb_tag(f, 15, 0); /* unknown Feature field */
    pb_varint(f, 1);
    pb_tag(l, 2, 5); /* unknown BytesList field */
    pb_fixed32(l, 0);
    pb_len(l, 1, "yes", 3);
    pb_tag(l, 536870911, 1); /* the largest field number */
    pb_raw(l, "12345678", 8);
    pb_msg(f, 1, l);
    pb_len(f, 9, "zz", 2);
    pb_tag(e, 3, 5);
    pb_fixed32(e, 0);
    pb_msg(e, 2, f);
    pb_len(e, 1, "odd", 3);
    pb_msg(fs, 1, e);
    /* an entry without a value: an empty Feature */
    e->n = 0;
    pb_len(e, 1, "empty", 5);
    pb_msg(fs, 1, e);

    pb_tag(rec, 7, 0); /* unknown Example fields around features */
    pb_varint(rec, 12345);
    pb_tag(rec, 8, 1);
    pb_raw(rec, "abcdefgh", 8);
    pb_msg(rec, 1, fs);
    pb_tag(rec, 9, 5);
    pb_fixed32(rec, 1);
    pb_len(rec, 10, "xyz", 3);
    /* a second Features merges in: it overrides "label" again */
    fs->n = f->n = 0;
    int64_t four = 4;
    feat_int64(f, &four, 1, true);
    add_entry(fs, "label", f);
    pb_msg(rec, 1, fs);

    const int64_t s0 = 0;
    sl_feature spec[] = {fixed("label", SL_FEATURE_INT64, 0, NULL),
                         fixed("kind", SL_FEATURE_INT64, 0, NULL),
                         fixed("odd", SL_FEATURE_BYTES, 0, NULL),
                         fixed("empty", SL_FEATURE_FLOAT, 1, &s0),
                         varlen("never", SL_FEATURE_FLOAT)};
    sl_feature empty_varlen = varlen("empty", SL_FEATURE_BYTES);
    sl_element *el;
    char msg[1024];
    int rc = parse_rec(rec, spec, 5, &el, msg);
    if (rc)
        print_error("%s\n", msg);
    assert_int_equal(rc, 0);
    assert_int_equal(i64s(el, 0, 1)[0], 4);
    assert_int_equal(i64s(el, 1, 1)[0], 3);
    tu_check_string(sl_element_tensor(el, 2), 0, "yes");
    f32s(el, 3, 0);
    sl_element_release(el);
    assert_int_equal(parse_rec(rec, &empty_varlen, 1, &el, msg), 0);
    assert_int_equal(sl_tensor_count(sl_element_tensor(el, 0)), 0);
    sl_element_release(el);
    /* an empty Feature has no values: a scalar wants one */
    sl_feature scalar = fixed("empty", SL_FEATURE_BYTES, 0, NULL);
    expect_error(rec, &scalar, 1, SL_ESHAPE, "feature 'empty' has 0 values", NULL);

    /* within a Feature, the last list of the oneof wins */
    fs->n = f->n = 0;
    feat_bytes(f, word, NULL, 1);
    feat_int64(f, &two, 1, true);
    add_entry(fs, "k", f);
    example(rec, fs);
    sl_feature k = fixed("k", SL_FEATURE_INT64, 0, NULL);
    assert_int_equal(parse_rec(rec, &k, 1, &el, msg), 0);
    assert_int_equal(i64s(el, 0, 1)[0], 2);
    sl_element_release(el);
    k.type = SL_FEATURE_BYTES;
    expect_error(rec, &k, 1, SL_EDTYPE, "feature 'k' is an int64_list", NULL);
    free(fs), free(rec), free(f), free(e), free(l);
}

/* A uint8 [n] record; other dtypes are refused; the file is named. */
static void test_input_tensor(void **state)
{
    (void)state;
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new();
    int64_t v = -5;
    feat_int64(f, &v, 1, false);
    add_entry(fs, "v", f);
    example(rec, fs);
    sl_feature s = fixed("v", SL_FEATURE_INT64, 0, NULL);
    sl_element *in = sl_element_create(1);
    int64_t n = (int64_t)rec->n;
    memcpy(sl_element_add_tensor(in, SL_UINT8, 1, &n), rec->b, rec->n);
    sl_element *el;
    char msg[1024];
    assert_int_equal(parse_el(in, &s, 1, &el, msg), 0);
    assert_int_equal(i64s(el, 0, 1)[0], -5);
    sl_element_release(el);

    assert_int_equal(parse_el(tu_el_i64(3), &s, 1, &el, msg), SL_EDTYPE);
    assert_non_null(strstr(msg, "tensor 0 must be a serialized Example"));

    in = record_el(rec, 1);
    assert_int_equal(sl_element_add_string(in, "/data/shard-3.tfrecord", 22), 0);
    s.key = "gone";
    assert_int_equal(parse_el(in, &s, 1, &el, msg), SL_EINVAL);
    assert_non_null(strstr(msg, "parse_example: /data/shard-3.tfrecord: feature 'gone'"));
    free(fs), free(rec), free(f);
}

static void count_log(void *user, sl_log_level level, const char *msg)
{
    (void)level, (void)msg;
    ++*(int *)user;
}

/* Under SL_ERRORS_SKIP bad records drop out and are counted; the rest
 * come in order. */
static void test_skip_policy(void **state)
{
    (void)state;
    enum { N = 300 };
    sl_element *els[N];
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new();
    for (int i = 0; i < N; i++) {
        fs->n = f->n = 0;
        int64_t v = i;
        feat_int64(f, &v, 1, i % 2);
        add_entry(fs, i % 7 == 5 ? "other" : "v", f); /* missing */
        example(rec, fs);
        if (i % 7 == 3)
            rec->n -= 1; /* truncated */
        els[i] = record_el(rec, 0);
    }
    sl_feature s = fixed("v", SL_FEATURE_INT64, 0, NULL);
    sl_dataset *ds = sl_parse_example(tu_elements(els, N, -3), &s, 1, 0);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), N);
    int logged = 0;
    sl_set_log_callback(count_log, &logged);
    sl_options *o = opts(SL_ERRORS_SKIP);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc;
    int64_t want = 0, got = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        while (want % 7 == 3 || want % 7 == 5)
            want++;
        assert_int_equal(i64s(el, 0, 1)[0], want);
        want++, got++;
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_EOF);
    int64_t bad = 0;
    for (int i = 0; i < N; i++)
        bad += i % 7 == 3 || i % 7 == 5;
    assert_int_equal(got, N - bad);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), bad);
    assert_true(logged > 0);
    sl_set_log_callback(NULL, NULL);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    free(fs), free(rec), free(f);
}

/* A large bytes value (past the inline area) and many features. */
static void test_large(void **state)
{
    (void)state;
    enum { BIG = 200000, NF = 300 };
    pb *fs = pb_new(), *rec = pb_new(), *f = pb_new();
    char *big = malloc(BIG);
    for (int i = 0; i < BIG; i++)
        big[i] = (char)(i * 7);
    const char *items[] = {big};
    size_t len = BIG;
    feat_bytes(f, items, &len, 1);
    add_entry(fs, "big", f);
    static sl_feature spec[NF];
    static char keys[NF][16];
    spec[0] = fixed("big", SL_FEATURE_BYTES, 0, NULL);
    for (int i = 1; i < NF; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        f->n = 0;
        int64_t v = i * 3;
        feat_int64(f, &v, 1, true);
        add_entry(fs, keys[i], f);
        spec[i] = fixed(keys[i], SL_FEATURE_INT64, 0, NULL);
    }
    example(rec, fs);
    sl_element *el;
    char msg[1024];
    int rc = parse_rec(rec, spec, NF, &el, msg);
    if (rc)
        print_error("%s\n", msg);
    assert_int_equal(rc, 0);
    check_bytes(sl_element_tensor(el, 0), 0, big, BIG);
    for (int i = 1; i < NF; i++)
        assert_int_equal(i64s(el, i, 1)[0], i * 3);
    sl_element_release(el);
    free(big);
    free(fs), free(rec), free(f);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    const int64_t neg = -1;
    sl_feature ok = fixed("a", SL_FEATURE_INT64, 0, NULL);
    static sl_feature many[1025];
    for (int i = 0; i < 1025; i++)
        many[i] = ok;
    sl_feature bad[7];
    for (int i = 0; i < 7; i++)
        bad[i] = ok;
    bad[0].key = NULL;
    bad[1].type = (sl_feature_type)3;
    bad[2].ndim = -2;
    bad[3].ndim = SL_MAX_DIMS + 1;
    bad[4] = fixed("a", SL_FEATURE_INT64, 1, &neg);
    bad[5] = fixed("a", SL_FEATURE_BYTES, 0, NULL);
    bad[5].has_default = 1, bad[5].default_len = 4; /* NULL bytes */
    bad[6].type = (sl_feature_type)-1;
    struct {
        const sl_feature *f;
        int n;
        unsigned flags;
    } cases[] = {{NULL, 1, 0},     {&ok, 0, 0},     {many, 1025, 0}, {&ok, 1, 1},
                 {&bad[0], 1, 0}, {&bad[1], 1, 0}, {&bad[2], 1, 0}, {&bad[3], 1, 0},
                 {&bad[4], 1, 0}, {&bad[5], 1, 0}, {&bad[6], 1, 0}, {many, 2, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_clear_error();
        assert_null(sl_parse_example(sl_range(0, 1, 1), cases[i].f, cases[i].n, cases[i].flags));
        assert_int_equal(sl_last_error_code(), SL_EINVAL);
        assert_non_null(strstr(sl_last_error(), "parse_example"));
    }
    assert_non_null(strstr(sl_last_error(), "given twice"));
    assert_null(sl_parse_example(NULL, &ok, 1, 0));
    for (int i = 0; i < 1024; i++) {
        many[i].key = malloc(8);
        snprintf((char *)many[i].key, 8, "f%d", i);
    }
    sl_dataset *ds = sl_parse_example(sl_range(0, 1, 1), many, 1024, 0);
    assert_non_null(ds);
    sl_dataset_release(ds);
    for (int i = 0; i < 1024; i++)
        free((char *)many[i].key);
}

/* The spec is copied; its fingerprint covers every field. */
static void test_spec_copy_fingerprint(void **state)
{
    (void)state;
    pb *rec = pb_new(), *fs = pb_new();
    example(rec, fs); /* an empty Example */
    char key[16] = "word", def[8] = "dflt";
    const int64_t s2 = 2;
    sl_feature s = fixed(key, SL_FEATURE_BYTES, 1, &s2);
    s.has_default = 1, s.default_bytes = def, s.default_len = 4;
    sl_element *el = record_el(rec, 0);
    sl_dataset *ds = sl_parse_example(tu_elements(&el, 1, -3), &s, 1, 0);
    assert_non_null(ds);
    uint64_t fp = sl_dataset_fingerprint(ds);
    memset(key, 'x', sizeof key - 1), memset(def, 'y', sizeof def);
    sl_options *o = opts(SL_ERRORS_FAIL);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_int_equal(sl_next(it, &el), 0);
    tu_check_string(sl_element_tensor(el, 0), 1, "dflt");
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);

    memcpy(key, "word", 5), memcpy(def, "dflt", 5);
    sl_feature v[8];
    for (int i = 0; i < 8; i++)
        v[i] = s;
    v[1].key = "Word";
    v[2].type = SL_FEATURE_INT64;
    v[3].shape[0] = 3;
    v[4].default_len = 3;
    v[5].has_default = 0;
    v[6].ndim = 0;
    v[7].default_bytes = "dfla";
    for (int i = 0; i < 8; i++) {
        sl_element *e = record_el(rec, 0);
        ds = sl_parse_example(tu_elements(&e, 1, -3), &v[i], 1, 0);
        assert_non_null(ds);
        if (i == 0)
            assert_true(sl_dataset_fingerprint(ds) == fp);
        else
            assert_true(sl_dataset_fingerprint(ds) != fp);
        sl_dataset_release(ds);
    }
    /* what the spec does not use does not count: defaults without
     * has_default, shape past ndim */
    sl_feature a = varlen("k", SL_FEATURE_INT64), b = a;
    b.shape[3] = 9, b.default_int64 = 5;
    sl_element *ea = record_el(rec, 0), *eb = record_el(rec, 0);
    sl_dataset *da = sl_parse_example(tu_elements(&ea, 1, -3), &a, 1, 0);
    sl_dataset *db = sl_parse_example(tu_elements(&eb, 1, -3), &b, 1, 0);
    assert_true(sl_dataset_fingerprint(da) == sl_dataset_fingerprint(db));
    sl_dataset_release(da);
    sl_dataset_release(db);
    free(rec), free(fs);
}

/* ---- allocation failure ---- */

enum { AF_N = 12, AF_BIG = 3000 };
#define AF_BUILD_FAILED (SL_EOF + 1)

/* (in key order: the output's) */
static const sl_feature af_spec[] = {
    {.key = "gone", .type = SL_FEATURE_BYTES, .ndim = 1, .shape = {3}, .has_default = 1,
     .default_bytes = "d", .default_len = 1},
    {.key = "img", .type = SL_FEATURE_BYTES, .ndim = 0},
    {.key = "pair", .type = SL_FEATURE_INT64, .ndim = 1, .shape = {2}},
    {.key = "scores", .type = SL_FEATURE_FLOAT, .ndim = -1},
    {.key = "tags", .type = SL_FEATURE_BYTES, .ndim = -1},
};

/* Record i: img of AF_BIG bytes of i (past the inline area), pair (i, -i),
 * i scores, tags "t" x (i % 3). */
static void af_record(pb *rec, int i)
{
    pb *fs = pb_new(), *f = pb_new();
    char *img = malloc(AF_BIG);
    memset(img, i, AF_BIG);
    const char *items[] = {img};
    size_t len = AF_BIG;
    feat_bytes(f, items, &len, 1);
    add_entry(fs, "img", f);
    f->n = 0;
    int64_t pair[2] = {i, -i};
    feat_int64(f, pair, 2, true);
    add_entry(fs, "pair", f);
    f->n = 0;
    float sc[AF_N];
    for (int k = 0; k < i; k++)
        sc[k] = (float)k;
    feat_float(f, sc, i, i % 2);
    add_entry(fs, "scores", f);
    f->n = 0;
    const char *tags[] = {"t", "t", "t"};
    feat_bytes(f, tags, NULL, i % 3);
    add_entry(fs, "tags", f);
    example(rec, fs);
    free(img), free(fs), free(f);
}

static void af_check(const sl_element *el, int64_t *next)
{
    int64_t i = *next;
    assert_int_equal(sl_element_size(el), 6);
    tu_check_string(sl_element_tensor(el, 0), 2, "d");
    const sl_tensor *t = sl_element_tensor(el, 1);
    size_t len;
    const unsigned char *img = (const unsigned char *)sl_tensor_string(t, 0, &len);
    assert_int_equal(len, AF_BIG);
    assert_int_equal(img[0], i), assert_int_equal(img[AF_BIG - 1], i);
    const int64_t *pair = i64s(el, 2, 2);
    assert_int_equal(pair[0], i), assert_int_equal(pair[1], -i);
    const float *sc = f32s(el, 3, i);
    for (int64_t k = 0; k < i; k++)
        assert_true(sc[k] == (float)k);
    assert_int_equal(sl_tensor_count(sl_element_tensor(el, 4)), i % 3);
    assert_int_equal(i64s(el, 5, 1)[0], 100 + i);
    *next = i + 1;
}

/* records parsed at a time in af_run */
static int af_parallelism = 1;

/* One pipeline life, every library call allowed to fail: SL_EOF after
 * checking all output, a negative code, or AF_BUILD_FAILED. */
static int af_run(pb *const *recs)
{
    const char *items[AF_N];
    size_t lens[AF_N];
    for (int i = 0; i < AF_N; i++)
        items[i] = (const char *)recs[i]->b, lens[i] = recs[i]->n;
    const int64_t n = AF_N;
    sl_element *el = sl_element_create(2);
    int64_t *labels = NULL;
    if (el && sl_element_add_strings(el, 1, &n, items, lens) == 0)
        labels = sl_element_add_tensor(el, SL_INT64, 1, &n);
    if (!labels) {
        assert_true(sl_last_error()[0] != '\0');
        sl_element_release(el);
        return AF_BUILD_FAILED;
    }
    for (int i = 0; i < AF_N; i++)
        labels[i] = 100 + i;
    sl_dataset *ds =
        sl_parse_example_parallel(sl_from_tensor_slices(el), af_spec, 5, 0, af_parallelism);
    sl_options *o = ds ? sl_options_create() : NULL;
    sl_iterator *it = NULL;
    if (o) {
        assert_int_equal(sl_options_set(o, SL_OPT_THREADS, 2), 0);
        it = sl_iterator_create(ds, o);
    }
    int rc = AF_BUILD_FAILED;
    if (!it) {
        assert_true(sl_last_error()[0] != '\0');
    } else {
        int64_t next = 0;
        sl_element *out;
        while ((rc = sl_next(it, &out)) == 0) {
            af_check(out, &next);
            sl_element_release(out);
        }
        if (rc == SL_EOF)
            assert_int_equal(next, AF_N);
        else
            assert_int_equal(rc, SL_ENOMEM);
        assert_true(rc == SL_EOF || sl_iterator_errmsg(it)[0] != '\0');
        sl_iterator_free(it);
    }
    sl_options_free(o);
    sl_dataset_release(ds);
    return rc;
}

/* The k-th allocation fails, for each k: a clean error or the right
 * output, and nothing left allocated. First in main: the counting
 * allocator goes in while the library holds nothing. */
static void test_alloc_failure(void **state)
{
    (void)state;
    pb *recs[AF_N];
    for (int i = 0; i < AF_N; i++) {
        recs[i] = pb_new();
        af_record(recs[i], i);
    }
    tu_alloc_install();
    int64_t k;
    for (k = 1;; k++) {
        assert_true(k < 100000);
        tu_alloc_fail_at(k);
        int rc = af_run(recs);
        int64_t calls = tu_alloc_calls();
        tu_alloc_fail_at(0);
        sl_release_memory();
        if (tu_alloc_live_bytes() != 0)
            print_error("failing allocation %lld: %lld bytes never freed\n", (long long)k,
                        (long long)tu_alloc_live_bytes());
        assert_int_equal(tu_alloc_live_bytes(), 0);
        if (calls < k) {
            assert_int_equal(rc, SL_EOF);
            break;
        }
    }
    tu_alloc_uninstall();
    print_message("%lld allocation points\n", (long long)k - 1);
    for (int i = 0; i < AF_N; i++)
        free(recs[i]);
}

/* Parsed several at a time, fixed or autotuned: the same values in the
 * same order; a parallelism out of range is refused. */
static void test_parallel(void **state)
{
    (void)state;
    pb *recs[AF_N];
    for (int i = 0; i < AF_N; i++) {
        recs[i] = pb_new();
        af_record(recs[i], i);
    }
    const int pars[] = {1, 3, SL_AUTOTUNE};
    for (int round = 0; round < 20; round++)
        for (size_t p = 0; p < sizeof pars / sizeof *pars; p++) {
            af_parallelism = pars[p];
            assert_int_equal(af_run(recs), SL_EOF);
        }
    af_parallelism = 1;
    sl_feature ok = fixed("a", SL_FEATURE_INT64, 0, NULL);
    const int bad[] = {0, -2, 4097};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_clear_error();
        assert_null(sl_parse_example_parallel(sl_range(0, 1, 1), &ok, 1, 0, bad[i]));
        assert_int_equal(sl_last_error_code(), SL_EINVAL);
        assert_non_null(strstr(sl_last_error(), "parse_example: parallelism"));
    }
    for (int i = 0; i < AF_N; i++)
        free(recs[i]);
}

/* ---- values kept in the record ---- */

/* pads of 0-7 bytes put one value in 8 at an 8-aligned place: no gap */
enum { VIEW_RECS = 24, VIEW_GAPS = VIEW_RECS - VIEW_RECS / 8 };

static size_t view_len(int i)
{
    return 4500 + (size_t)i * 37;
}

static char view_byte(int i, size_t k)
{
    return (char)(k * 13 + (size_t)i * 7 + 1);
}

/* Record i: a long image/encoded value after a pad entry of i % 8 bytes
 * (so the value's place in the record, mod 8, takes every value), then the
 * label. */
static void view_record(pb *rec, int i)
{
    pb *fs = pb_new(), *f = pb_new();
    const char *pad[] = {"1234567"};
    size_t plen = (size_t)i % 8;
    feat_bytes(f, pad, &plen, 1);
    add_entry(fs, "pad", f);
    char *img = malloc(view_len(i));
    for (size_t k = 0; k < view_len(i); k++)
        img[k] = view_byte(i, k);
    const char *items[] = {img};
    size_t len = view_len(i);
    f->n = 0;
    feat_bytes(f, items, &len, 1);
    add_entry(fs, "image/encoded", f);
    f->n = 0;
    int64_t label = i;
    feat_int64(f, &label, 1, true);
    add_entry(fs, "image/class/label", f);
    rec->n = 0;
    example(rec, fs);
    free(img), free(fs), free(f);
}

static void view_file(const char *path)
{
    ru_buf file = {0};
    pb *rec = pb_new();
    for (int i = 0; i < VIEW_RECS; i++) {
        view_record(rec, i);
        ru_record(&file, rec->b, rec->n);
    }
    ru_write(path, file.p, file.n);
    free(file.p), free(rec);
}

/* The same records as rows of one uint8 [VIEW_RECS, L] tensor: each is
 * made L bytes long by an unknown field after the Example's features (the
 * parse skips it). Their slices share the tensor's memory. */
static sl_dataset *view_rows(void)
{
    enum { L = 4500 + VIEW_RECS * 37 + 400 };
    sl_element *el = sl_element_create(1);
    int64_t shape[2] = {VIEW_RECS, L};
    uint8_t *rows = sl_element_add_tensor(el, SL_UINT8, 2, shape);
    assert_non_null(rows);
    pb *rec = pb_new();
    static const char filler[L];
    for (int i = 0; i < VIEW_RECS; i++) {
        view_record(rec, i);
        size_t fill = L - rec->n - 3; /* its tag and a 2-byte length */
        assert_true(fill >= 128 && fill < 16384);
        pb_len(rec, 15, filler, fill);
        assert_int_equal(rec->n, L);
        memcpy(rows + (size_t)i * L, rec->b, L);
    }
    free(rec);
    return sl_from_tensor_slices(el);
}

/* pad, the entry before the image's, is read after the image is: writing
 * the offsets must not have reached it */
static const sl_feature view_spec[] = {
    {.key = "image/encoded", .type = SL_FEATURE_BYTES},
    {.key = "image/class/label", .type = SL_FEATURE_INT64},
    {.key = "pad", .type = SL_FEATURE_BYTES},
};

/* The same, with the image a VarLenFeature: a [1] string tensor */
static const sl_feature view_spec_varlen[] = {
    {.key = "image/encoded", .type = SL_FEATURE_BYTES, .ndim = -1},
    {.key = "image/class/label", .type = SL_FEATURE_INT64},
    {.key = "pad", .type = SL_FEATURE_BYTES},
};

/* Checks epochs x VIEW_RECS elements of ds (consumed) in order; returns
 * how many image strings began after a gap (views: their first offset is
 * not 0), and sets bit g of *seen for each gap g met. */
static int view_check(sl_dataset *ds, int epochs, unsigned *seen)
{
    assert_non_null(ds);
    sl_options *o = opts(SL_ERRORS_FAIL);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    int gaps = 0;
    *seen = 0;
    for (int e = 0; e < epochs; e++)
        for (int i = 0; i < VIEW_RECS; i++) {
            sl_element *el;
            int rc = sl_next(it, &el);
            if (rc)
                print_error("epoch %d element %d: %s\n", e, i, sl_iterator_errmsg(it));
            assert_int_equal(rc, 0);
            /* in key order: image/class/label, image/encoded, pad */
            const sl_tensor *t = sl_element_tensor(el, 1);
            assert_int_equal(sl_tensor_dtype(t), SL_STRING);
            assert_int_equal(sl_tensor_ndim(t) == 0 ? 1 : sl_tensor_shape(t)[0], 1);
            size_t len;
            const char *s = sl_tensor_string(t, 0, &len);
            assert_int_equal(len, view_len(i));
            for (size_t k = 0; k < len; k++)
                if (s[k] != view_byte(i, k))
                    fail_msg("epoch %d element %d: byte %zu differs", e, i, k);
            uint64_t gap = ((const uint64_t *)sl_tensor_data(t))[0];
            assert_true(gap < 8);
            gaps += gap != 0;
            *seen |= 1u << gap;
            assert_int_equal(i64s(el, 0, 1)[0], i);
            const char *pad = sl_tensor_string(sl_element_tensor(el, 2), 0, &len);
            assert_int_equal(len, (size_t)i % 8);
            assert_memory_equal(pad, "1234567", len);
            sl_element_release(el);
        }
    sl_element *extra;
    assert_int_equal(sl_next(it, &extra), SL_EOF);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return gaps;
}

static sl_dataset *view_records(const char *path)
{
    return sl_tfrecord(sl_from_element(tu_el_str(path)), SL_COMPRESSION_NONE, 0);
}

static void test_views_of_records(void **state)
{
    (void)state;
    char dir[256], path[300], cache[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/v.tfrecord", dir);
    snprintf(cache, sizeof cache, "%s/c", dir);
    view_file(path);
    /* the reader's records are the parse's alone: values stay in them, at
     * each of the 8 alignments, so most start after a gap */
    unsigned seen;
    int gaps = view_check(sl_parse_example(view_records(path), view_spec, 3, 0), 1, &seen);
    assert_int_equal(gaps, VIEW_GAPS);
    assert_int_equal(seen, 0xff);
    gaps = view_check(sl_parse_example(view_records(path), view_spec_varlen, 3, 0), 1, &seen);
    assert_int_equal(gaps, VIEW_GAPS);
    /* rows that share one buffer, each row's element the parse's alone:
     * the buffer is not, and is parsed again next epoch */
    gaps = view_check(sl_repeat(sl_parse_example(view_rows(), view_spec, 3, 0), 2), 2, &seen);
    assert_int_equal(gaps, 0);
    /* records a cache holds are parsed again next epoch: never written to */
    gaps = view_check(sl_repeat(sl_parse_example(sl_cache(view_records(path), NULL),
                                                 view_spec, 3, 0), 2), 2, &seen);
    assert_int_equal(gaps, 0);
    /* views in a cache file come back from it whole, without the gap */
    gaps = view_check(sl_repeat(sl_cache(sl_parse_example(view_records(path), view_spec, 3, 0),
                                         cache), 2), 2, &seen);
    assert_int_equal(gaps, VIEW_GAPS); /* the first pass's */
    /* batched and unbatched again: the strings are copied from after the gap */
    gaps = view_check(sl_unbatch(sl_batch(sl_parse_example(view_records(path), view_spec, 3, 0),
                                          5, 0)), 1, &seen);
    assert_int_equal(gaps, 0);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_types_and_shapes),
        cmocka_unit_test(test_packed_unpacked),
        cmocka_unit_test(test_defaults_and_absent),
        cmocka_unit_test(test_feature_errors),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_last_wins_and_unknown),
        cmocka_unit_test(test_input_tensor),
        cmocka_unit_test(test_skip_policy),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_spec_copy_fingerprint),
        cmocka_unit_test(test_views_of_records),
        cmocka_unit_test(test_parallel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
