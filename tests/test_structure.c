/* Element structures: the text form, reading a tree, and the structure each
 * op gives its dataset (sl_dataset_structure), from C alone. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* The text form of s, in a static buffer. */
static const char *text(const sl_structure *s)
{
    static char buf[4096];
    assert_true(sl_structure_format(s, buf, sizeof buf) < (int)sizeof buf);
    return buf;
}

static void expect_text(const sl_dataset *ds, const char *want)
{
    assert_non_null(ds);
    const char *got = text(sl_dataset_structure(ds));
    if (strcmp(got, want))
        print_error("structure %s, want %s\n", got, want);
    assert_string_equal(got, want);
}

static void test_parse_and_format(void **state)
{
    (void)state;
    /* written back as read, once normalised: dict keys sorted, spaces */
    static const char *const round[][2] = {
        {"int64[]", "int64[]"},
        {"?", "?"},
        {"string", "string"},
        {"uint8[ ?, ?,3 ]", "uint8[?,?,3]"},
        {"(int64[],)", "(int64[],)"},
        {"(int64[])", "(int64[],)"},
        {"()", "()"},
        {"{}", "{}"},
        {"{label: int64[], image: uint8[?]}", "{image: uint8[?], label: int64[]}"},
        {"{\"image/encoded\": string[], \"a b\": ?}", "{\"a b\": ?, \"image/encoded\": string[]}"},
        {"{\"q\\\"x\\\\\": int8}", "{\"q\\\"x\\\\\": int8}"},
        {"((float32[2], {x: ?[1]}), float64)", "((float32[2], {x: ?[1]}), float64)"},
    };
    for (size_t i = 0; i < sizeof round / sizeof *round; i++) {
        sl_structure *s = sl_structure_parse(round[i][0]);
        if (!s)
            print_error("%s: %s\n", round[i][0], sl_last_error());
        assert_non_null(s);
        assert_string_equal(text(s), round[i][1]);
        sl_structure *again = sl_structure_parse(text(s));
        assert_string_equal(text(again), round[i][1]);
        sl_structure_release(again);
        sl_structure_release(s);
    }
    /* format reports the length it needs, as snprintf */
    sl_structure *s = sl_structure_parse("{image: uint8[?], label: int64[]}");
    char small[8];
    assert_int_equal(sl_structure_format(s, small, sizeof small), 33);
    assert_string_equal(small, "{image:");
    sl_structure_release(s);
    assert_int_equal(sl_structure_format(NULL, small, sizeof small), 1);
    assert_string_equal(small, "?");
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"", "offset 0"},
        {"int65", "a dtype name"},
        {"(int64, ", "offset 8"},
        {"{a int64}", "':' expected"},
        {"{a: int64, a: int8}", "key \"a\" twice"},
        {"uint8[-1]", "dimension"},
        {"uint8[1,2,3,4,5,6,7,8,9]", "SL_MAX_DIMS"},
        {"int64 int64", "text after"},
        {"{\"x: int64}", "unterminated key"},
        {"(int64) junk", "text after"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_null(sl_structure_parse(bad[i][0]));
        assert_int_equal(sl_last_error_code(), SL_EINVAL);
        if (!strstr(sl_last_error(), bad[i][1]))
            print_error("%s: %s\n", bad[i][0], sl_last_error());
        assert_non_null(strstr(sl_last_error(), bad[i][1]));
    }
    assert_null(sl_structure_parse(NULL));
    char deep[200];
    memset(deep, '(', 100);
    strcpy(deep + 100, "int64");
    assert_null(sl_structure_parse(deep));
    assert_non_null(strstr(sl_last_error(), "nested too deep"));
}

static void test_reading_a_tree(void **state)
{
    (void)state;
    sl_structure *s = sl_structure_parse("{boxes: (float32[?,4], int64[?]), image: uint8[?,?,3], "
                                         "label: int64[]}");
    assert_non_null(s);
    assert_int_equal(sl_structure_kind(s), SL_STRUCTURE_DICT);
    assert_int_equal(sl_structure_size(s), 3);
    assert_int_equal(sl_structure_leaves(s), 4);
    assert_string_equal(sl_structure_key(s, 0), "boxes");
    assert_null(sl_structure_key(s, 3));
    assert_null(sl_structure_child(s, -1));
    const sl_structure *boxes = sl_structure_get(s, "boxes");
    assert_ptr_equal(boxes, sl_structure_child(s, 0));
    assert_int_equal(sl_structure_kind(boxes), SL_STRUCTURE_TUPLE);
    assert_int_equal(sl_structure_leaves(boxes), 2);
    assert_int_equal(sl_structure_leaf_index(boxes), 0);
    assert_int_equal(sl_structure_leaf_index(sl_structure_child(boxes, 1)), 1);
    const sl_structure *image = sl_structure_get(s, "image");
    assert_int_equal(sl_structure_leaf_index(image), 2);
    assert_int_equal(sl_structure_dtype(image), SL_UINT8);
    assert_int_equal(sl_structure_ndim(image), 3);
    const int64_t *shape = sl_structure_shape(image);
    assert_true(shape[0] == -1 && shape[1] == -1 && shape[2] == 3);
    const sl_structure *label = sl_structure_get(s, "label");
    assert_int_equal(sl_structure_leaf_index(label), 3);
    assert_int_equal(sl_structure_ndim(label), 0);
    assert_null(sl_structure_shape(label));
    assert_null(sl_structure_get(s, "nope"));
    assert_null(sl_structure_get(boxes, "image")); /* a tuple has no keys */
    assert_int_equal(sl_structure_dtype(s), -1);   /* not a leaf */
    /* a child keeps the whole tree alive */
    sl_structure *kept = sl_structure_retain((sl_structure *)image);
    sl_structure_release(s);
    assert_int_equal(sl_structure_dtype(kept), SL_UINT8);
    assert_int_equal(sl_structure_leaves(boxes), 2);
    sl_structure_release(kept);
}

/* A map that declares a dict structure for what it returns. */
static int to_dict(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    const sl_structure *was = sl_map_ctx_structure(ctx);
    assert_non_null(was);
    assert_int_equal(sl_structure_dtype(was), SL_INT64);
    static const char *const forms[] = {"{x: int64[], y: int64[]}", "(int64[], int64[])"};
    int64_t v = sl_tensor_int64(sl_element_tensor(in, 0));
    /* element 5 claims another structure: an element error */
    sl_structure *s = sl_structure_parse(forms[v == 5]);
    int rc = sl_map_ctx_set_structure(ctx, s);
    sl_structure_release(s);
    if (rc < 0)
        return sl_map_ctx_error(ctx, rc, sl_last_error());
    sl_element *el = sl_element_create(2);
    sl_element_add_int64(el, v);
    sl_element_add_int64(el, -v);
    *out = el;
    return 0;
}

static void test_ops_give_structures(void **state)
{
    (void)state;
    sl_dataset *r = sl_range(0, 10, 1);
    expect_text(r, "int64[]");
    sl_dataset *b = sl_batch(sl_take(sl_shuffle(sl_dataset_retain(r), 4, 1, 0), 8), 4,
                             SL_DROP_REMAINDER);
    expect_text(b, "int64[4]");
    sl_dataset *b2 = sl_batch(sl_batch(sl_dataset_retain(r), 3, 0), 2, 0);
    expect_text(b2, "int64[?,?]");
    sl_dataset *u = sl_unbatch(sl_dataset_retain(b2));
    expect_text(u, "int64[?]");
    const char *paths[] = {"a", "b"};
    const int64_t labels[] = {0, 1};
    sl_dataset *f = sl_from_files(paths, labels, 2);
    expect_text(f, "(string[], int64[])");
    sl_dataset *rf = sl_read_files(sl_dataset_retain(f), SL_WITH_PATHS);
    expect_text(rf, "(uint8[?], int64[], string[])");
    sl_dataset *one = sl_read_files(sl_from_files(paths, NULL, 2), SL_WITH_PATHS);
    expect_text(one, "(uint8[?], string[])");
    sl_element *t = sl_element_create(2);
    int64_t sh[2] = {3, 5};
    sl_element_add_tensor(t, SL_FLOAT32, 2, sh);
    sl_element_add_tensor(t, SL_UINT8, 1, sh);
    sl_dataset *ts = sl_from_tensor_slices(t);
    expect_text(ts, "(float32[5], uint8[])");
    sl_dataset *rep = sl_prefetch(sl_repeat(sl_skip(sl_dataset_retain(ts), 1), 2), 2);
    expect_text(rep, "(float32[5], uint8[])");
    /* a C map does not say what it returns ... */
    sl_dataset *m = sl_map(sl_dataset_retain(r), "id", tu_identity, NULL, 2, 0);
    assert_null(sl_dataset_structure(m));
    sl_dataset *mb = sl_batch(sl_dataset_retain(m), 2, 0);
    assert_non_null(mb);
    assert_null(sl_dataset_structure(mb));
    /* ... unless told */
    sl_structure *s = sl_structure_parse("{value: int64[]}");
    sl_dataset *named = sl_with_structure(sl_dataset_retain(m), s);
    expect_text(named, "{value: int64[]}");
    sl_dataset *nb = sl_batch(sl_dataset_retain(named), 5, SL_DROP_REMAINDER);
    expect_text(nb, "{value: int64[5]}");
    sl_structure *two = sl_structure_parse("(int64, int64)");
    assert_null(sl_with_structure(sl_dataset_retain(r), two));
    assert_int_equal(sl_last_error_code(), SL_ESHAPE);
    assert_non_null(strstr(sl_last_error(), "has 2 tensors"));
    /* declared once; again with the same tree is fine, another is not */
    assert_int_equal(sl_dataset_declare_structure(m, s), 0);
    assert_int_equal(sl_dataset_declare_structure(m, s), 0);
    assert_int_equal(sl_dataset_declare_structure(m, two), SL_ESHAPE);
    expect_text(m, "{value: int64[]}");
    expect_text(mb, "{value: int64[?]}"); /* and what follows the map knows it now */
    assert_int_equal(sl_dataset_declare_structure(r, s), SL_ESHAPE);
    sl_structure_release(s);
    sl_structure_release(two);
    sl_dataset *all[] = {r, b, b2, u, f, rf, one, ts, rep, m, mb, named, nb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sl_dataset_release(all[i]);
}

static void test_map_declares_its_output(void **state)
{
    (void)state;
    sl_dataset *m = sl_map(sl_range(0, 5, 1), "dict", to_dict, NULL, 2, 0);
    sl_dataset *b = sl_batch(sl_dataset_retain(m), 5, 0);
    assert_null(sl_dataset_structure(b)); /* not known until the map has run */
    sl_options *o = tu_opts(2, 1);
    sl_iterator *it = sl_iterator_create(b, o);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    sl_iterator_free(it);
    expect_text(m, "{x: int64[], y: int64[]}");
    expect_text(b, "{x: int64[?], y: int64[?]}");
    sl_dataset_release(b);
    sl_dataset_release(m);
    /* an element of another structure is an element error naming both */
    m = sl_map(sl_range(0, 8, 1), "dict", to_dict, NULL, 1, 0);
    it = sl_iterator_create(m, o);
    int rc;
    int64_t n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        n++;
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_ESHAPE);
    assert_int_equal(n, 5);
    assert_non_null(strstr(sl_iterator_errmsg(it), "(int64[], int64[])"));
    assert_non_null(strstr(sl_iterator_errmsg(it), "{x: int64[], y: int64[]}"));
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(m);
}

static void test_parse_example_gives_a_dict(void **state)
{
    (void)state;
    const int64_t two = 2;
    sl_feature f[3] = {
        {.key = "label", .type = SL_FEATURE_INT64},
        {.key = "image/encoded", .type = SL_FEATURE_BYTES},
        {.key = "boxes", .type = SL_FEATURE_FLOAT, .ndim = 1, .shape = {two}},
    };
    sl_element *el = tu_el_str("record");
    sl_element_add_int64(el, 7);
    sl_structure *in = sl_structure_parse("(string[], int64[])");
    sl_dataset *ds = sl_parse_example(sl_with_structure(tu_elements(&el, 1, -3), in), f, 3, 0);
    sl_structure_release(in);
    expect_text(ds, "({boxes: float32[2], \"image/encoded\": string[], label: int64[]}, int64[])");
    /* map_image takes the image by its leaf, and gives the same structure
     * with the image there */
    const sl_structure *s = sl_dataset_structure(ds);
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_CENTER, 8), 0);
    spec.image_index = sl_structure_leaf_index(
        sl_structure_get(sl_structure_child(s, 0), "image/encoded"));
    assert_int_equal(spec.image_index, 1);
    sl_dataset *img = sl_map_image(sl_dataset_retain(ds), &spec, 1);
#ifndef SLUICE_NO_JPEG
    expect_text(img, "({boxes: float32[2], \"image/encoded\": uint8[8,8,3], label: int64[]}, "
                     "int64[])");
    sl_dataset *bat = sl_batch(sl_dataset_retain(img), 4, SL_DROP_REMAINDER);
    assert_string_equal(sl_dataset_name(bat), "map_image_batch");
    expect_text(bat, "({boxes: float32[4,2], \"image/encoded\": uint8[4,8,8,3], "
                     "label: int64[4]}, int64[4])");
    sl_dataset_release(bat);
    /* an image_index at a leaf that is not bytes is refused when built */
    spec.image_index = 2;
    assert_null(sl_map_image(sl_dataset_retain(ds), &spec, 1));
    assert_int_equal(sl_last_error_code(), SL_EDTYPE);
    spec.image_index = 4;
    assert_null(sl_map_image(sl_dataset_retain(ds), &spec, 1));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
#endif
    sl_dataset_release(img);
    sl_dataset_release(ds);
}

static void test_fingerprint_and_alloc_failures(void **state)
{
    (void)state;
    /* parsing under failing allocations: NULL and SL_ENOMEM, never a leak */
    tu_alloc_install();
    for (int64_t k = 1;; k++) {
        tu_alloc_fail_at(k);
        sl_structure *s = sl_structure_parse("{b: (int64[2], string), a: {c: uint8[?]}}");
        bool done = tu_alloc_calls() < k;
        tu_alloc_fail_at(0);
        if (s)
            assert_string_equal(text(s), "{a: {c: uint8[?]}, b: (int64[2], string)}");
        else
            assert_int_equal(sl_last_error_code(), SL_ENOMEM);
        sl_structure_release(s);
        assert_int_equal(tu_alloc_live_bytes(), 0);
        if (done) {
            assert_non_null(s);
            break;
        }
    }
    tu_alloc_uninstall();
    sl_structure *a = sl_structure_parse("{x: int64[]}"), *b = sl_structure_parse("(int64[],)");
    sl_dataset *r = sl_range(0, 3, 1);
    sl_dataset *x = sl_with_structure(sl_dataset_retain(r), a);
    sl_dataset *y = sl_with_structure(sl_dataset_retain(r), b);
    assert_true(sl_dataset_fingerprint(x) != sl_dataset_fingerprint(y));
    assert_true(sl_dataset_fingerprint(x) != sl_dataset_fingerprint(r));
    sl_dataset_release(x);
    sl_dataset_release(y);
    sl_dataset_release(r);
    sl_structure_release(a);
    sl_structure_release(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fingerprint_and_alloc_failures), /* first: the allocator */
        cmocka_unit_test(test_parse_and_format),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_reading_a_tree),
        cmocka_unit_test(test_ops_give_structures),
        cmocka_unit_test(test_map_declares_its_output),
        cmocka_unit_test(test_parse_example_gives_a_dict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
