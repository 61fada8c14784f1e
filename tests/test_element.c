/* Element-level contract: sl_tensor_int64 on every dtype, origins (the path
 * an element came from), and DLPack exports with their C deleter. */
#include <stdio.h>
#include <string.h>
#include "core/element.h"
#include "core/error.h"
#include "testutil.h"

static void test_tensor_int64(void **state)
{
    (void)state;
    sl_element *el = sl_element_create(8);
    int64_t one = 1;
    *(uint8_t *)sl_element_add_tensor(el, SL_UINT8, 0, NULL) = 200;
    *(int8_t *)sl_element_add_tensor(el, SL_INT8, 0, NULL) = -5;
    *(uint16_t *)sl_element_add_tensor(el, SL_UINT16, 1, &one) = 60000;
    *(int32_t *)sl_element_add_tensor(el, SL_INT32, 0, NULL) = -70000;
    assert_int_equal(sl_element_add_int64(el, INT64_MAX), 0);
    assert_int_equal(sl_element_add_float32(el, 2.5f), 0);
    assert_int_equal(sl_element_add_string(el, "7", 1), 0);
    int64_t zero = 0;
    assert_non_null(sl_element_add_tensor(el, SL_INT64, 1, &zero));
    const int64_t want[5] = {200, -5, 60000, -70000, INT64_MAX};
    for (int i = 0; i < 5; i++) {
        sl_clear_error();
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, i)), want[i]);
        assert_int_equal(sl_last_error_code(), 0);
    }
    /* a float, a string: not integers */
    for (int i = 5; i < 7; i++) {
        sl_clear_error();
        assert_true(sl_tensor_int64(sl_element_tensor(el, i)) == INT64_MIN);
        assert_int_equal(sl_last_error_code(), SL_EDTYPE);
        assert_non_null(strstr(sl_last_error(), i == 5 ? "float32" : "string"));
    }
    sl_clear_error();
    assert_true(sl_tensor_int64(sl_element_tensor(el, 7)) == INT64_MIN); /* no items */
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_clear_error();
    assert_true(sl_tensor_int64(NULL) == INT64_MIN);
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_element_release(el);
}

static void test_add_strings(void **state)
{
    (void)state;
    sl_element *el = sl_element_create(3);
    const char *items[4] = {"a", "", "ccc", "d\0e"};
    const size_t lens[4] = {1, 0, 3, 3};
    int64_t shape[2] = {2, 2};
    assert_int_equal(sl_element_add_strings(el, 2, shape, items, lens), 0);
    const sl_tensor *t = sl_element_tensor(el, 0);
    tu_check_shape(t, 2, shape);
    for (int i = 0; i < 4; i++) {
        size_t len;
        const char *s = sl_tensor_string(t, i, &len);
        assert_int_equal(len, lens[i]);
        assert_memory_equal(s, items[i], len);
    }
    const char *nul[2] = {"xy", "z"}; /* NUL-terminated */
    int64_t two = 2;
    assert_int_equal(sl_element_add_strings(el, 1, &two, nul, NULL), 0);
    tu_check_string(sl_element_tensor(el, 1), 1, "z");
    int64_t none = 0;
    assert_int_equal(sl_element_add_strings(el, 1, &none, NULL, NULL), 0);
    assert_int_equal(sl_tensor_count(sl_element_tensor(el, 2)), 0);
    assert_int_equal(sl_element_add_strings(el, 1, &two, nul, NULL), SL_EINVAL); /* full */
    int64_t neg = -1;
    assert_int_equal(sl_element_add_strings(el, 1, &neg, nul, NULL), SL_EINVAL);
    const char *hole[2] = {"x", NULL};
    assert_int_equal(sl_element_add_strings(el, 1, &two, hole, NULL), SL_EINVAL);
    sl_element_release(el);
}

static void test_origin(void **state)
{
    (void)state;
    sl_element *src = sl_element_create(2);
    assert_int_equal(sl_element_add_string(src, "/data/a.jpg", 11), 0);
    assert_int_equal(sl_element_add_int64(src, 3), 0);
    sl_element *el = sl_element_create(1);
    assert_int_equal(sl_element_add_int64(el, 1), 0);
    size_t len;
    assert_null(sl__element_origin(el, &len));
    sl__element_set_origin(el, src);
    sl_element_release(src); /* el keeps it */
    const char *p = sl__element_origin(el, &len);
    assert_non_null(p);
    assert_int_equal(len, 11);
    assert_memory_equal(p, "/data/a.jpg", 11);
    sl__set_error(SL_ECORRUPT, "bad");
    sl__element_error_prefix(el);
    assert_string_equal(sl_last_error(), "/data/a.jpg: bad");
    /* a chain of origins is released whole (ASan checks) */
    sl_element *top = sl_element_create(1);
    assert_int_equal(sl_element_add_int64(top, 2), 0);
    sl__element_set_origin(top, el);
    sl_element_release(el);
    sl_element_release(top);
}

/* DLManagedTensor of DLPack v0.x, as a consumer sees it. */
typedef struct dl_tensor {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
    dl_tensor t;
    void *ctx;
    void (*deleter)(struct dl_managed *);
} dl_managed;

static void test_dlpack(void **state)
{
    (void)state;
    sl_release_memory(); /* the allocator can change only while nothing is held */
    tu_alloc_install();
    sl_element *el = sl_element_create(2);
    int64_t shape[2] = {4, 6};
    float *data = sl_element_add_tensor(el, SL_FLOAT32, 2, shape);
    for (int i = 0; i < 24; i++)
        data[i] = (float)i;
    assert_int_equal(sl_element_add_string(el, "x", 1), 0);

    dl_managed *m = sl_element_dlpack(el, 0);
    assert_non_null(m);
    assert_ptr_equal(m->t.data, data);
    assert_int_equal(m->t.device_type, 1);
    assert_int_equal(m->t.ndim, 2);
    assert_int_equal(m->t.code, 2);
    assert_int_equal(m->t.bits, 32);
    assert_int_equal(m->t.lanes, 1);
    assert_int_equal(m->t.shape[0], 4);
    assert_int_equal(m->t.shape[1], 6);
    assert_null(m->t.strides);
    assert_int_equal(m->t.byte_offset, 0);
    assert_null(sl_element_dlpack(el, 1)); /* a string */
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    assert_null(sl_element_dlpack(el, 2));

    /* a view: every other column, reversed rows */
    int64_t vshape[2] = {4, 3}, vstrides[2] = {-6, 2};
    dl_managed *v = sl_element_dlpack_view(el, data + 18, 2, vshape, vstrides, SL_FLOAT32);
    assert_non_null(v);
    assert_int_equal(v->t.strides[0], -6);
    assert_int_equal(v->t.strides[1], 2);
    assert_true(((float *)v->t.data)[v->t.strides[0] * 3 + v->t.strides[1] * 2] == 4.0f);
    /* views that reach outside the tensor's bytes */
    int64_t wide[2] = {4, 7};
    assert_null(sl_element_dlpack_view(el, data, 2, wide, NULL, SL_FLOAT32));
    assert_null(sl_element_dlpack_view(el, data + 1, 2, shape, NULL, SL_FLOAT32));
    assert_null(sl_element_dlpack_view(el, data, 2, vshape, vstrides, SL_FLOAT32));
    /* spans whose extent overflows any integer type: refused, not wrapped */
    int64_t huge[2] = {((int64_t)1 << 62) + 1, ((int64_t)1 << 62) + 2};
    int64_t huge_strides[2] = {(int64_t)1 << 62, ((int64_t)1 << 62) - 1};
    assert_null(sl_element_dlpack_view(el, data, 2, huge, huge_strides, SL_FLOAT64));
    int64_t big[1] = {INT64_MAX};
    int64_t one_stride[1] = {1};
    assert_null(sl_element_dlpack_view(el, data, 1, big, one_stride, SL_FLOAT32));
    int64_t back[1] = {INT64_MIN + 1};
    assert_null(sl_element_dlpack_view(el, data, 1, big, back, SL_FLOAT32));
    int64_t empty[1] = {0};
    dl_managed *e = sl_element_dlpack_view(el, data, 1, empty, NULL, SL_FLOAT32);
    assert_non_null(e);

    /* the exports keep the element alive; their deleters free everything */
    sl_element_release(el);
    assert_true(((float *)m->t.data)[23] == 23.0f);
    m->deleter(m);
    v->deleter(v);
    /* outside a Python process the capsule destructor does nothing */
    sl_dlpack_capsule_destructor(e);
    e->deleter(e);
    sl_release_memory();
    assert_int_equal(tu_alloc_live_bytes(), 0);
    tu_alloc_uninstall();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_int64),
        cmocka_unit_test(test_add_strings),
        cmocka_unit_test(test_origin),
        cmocka_unit_test(test_dlpack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
