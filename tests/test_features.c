/* What a build leaves out (SLUICE_WITH_IO_URING / _JPEG / _ZLIB=OFF) fails
 * clearly, naming the option, and what stays works: run in every build
 * configuration CI makes. */
#include <stdio.h>
#include <string.h>
#include "core/crc32c.h"
#include "testutil.h"

static void test_crc32_any_build(void **state)
{
    (void)state;
    /* zlib's crc32, or the table that stands in for it: the same values,
     * so cache files and saved states do not depend on the build */
    assert_int_equal(sl__crc32(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(sl__crc32(sl__crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
    assert_int_equal(sl__crc32(0, "", 0), 0);
}

static void test_jpeg_part(void **state)
{
    (void)state;
    sl_image_spec spec;
    assert_int_equal(sl_image_spec_init(&spec, sizeof spec, SL_CROP_CENTER, 32), 0);
    sl_dataset *ds = sl_map_image(sl_range(0, 4, 1), &spec, 1);
#ifdef SLUICE_NO_JPEG
    assert_null(ds);
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "SLUICE_WITH_JPEG=OFF"));
#else
    /* the structure says range's elements are int64: refused when built */
    assert_null(ds);
    assert_int_equal(sl_last_error_code(), SL_EDTYPE);
    assert_non_null(strstr(sl_last_error(), "not encoded bytes"));
    const char *p = "/nonexistent.jpg";
    ds = sl_map_image(sl_read_files(sl_from_files(&p, NULL, 1), 0), &spec, 1);
    assert_non_null(ds);
    sl_dataset_release(ds);
#endif
}

static void test_zlib_part(void **state)
{
    (void)state;
    const char *p = "/nonexistent.tfrecord.gz";
    sl_dataset *ds = sl_tfrecord(sl_from_files(&p, NULL, 1), SL_COMPRESSION_GZIP, 0);
#ifdef SLUICE_NO_ZLIB
    assert_null(ds);
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "SLUICE_WITH_ZLIB=OFF"));
#else
    assert_non_null(ds);
    sl_dataset_release(ds);
#endif
}

static void test_uring_part(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/f", dir);
    FILE *f = fopen(path, "w");
    fputs("abc", f);
    fclose(f);
    const char *pp = path;
    sl_dataset *ds = sl_read_files(sl_from_files(&pp, NULL, 1), 0);
    sl_options *o = tu_opts(1, 0);
    /* reads work in every build: through pread where io_uring is left out */
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_tensor_nbytes(sl_element_tensor(el, 0)), 3);
    sl_element_release(el);
#ifdef SLUICE_NO_URING
    assert_int_equal(sl_iterator_stat(it, SL_STAT_IO_BACKEND), SL_IO_PREAD);
    sl_iterator_free(it);
    sl_options_set(o, SL_OPT_IO_BACKEND, SL_IO_URING);
    assert_null(sl_iterator_create(ds, o));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "SLUICE_WITH_IO_URING=OFF"));
#else
    sl_iterator_free(it);
#endif
    sl_options_free(o);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_any_build),
        cmocka_unit_test(test_jpeg_part),
        cmocka_unit_test(test_zlib_part),
        cmocka_unit_test(test_uring_part),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
