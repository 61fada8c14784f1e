/* What a build leaves out (SLUICE_WITH_IO_URING / _JPEG / _ZLIB=OFF) fails
 * clearly, naming the option, and what stays works: run in every build
 * configuration CI makes. */
#include <stdio.h>
#include <stdlib.h>
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

/* One image file through map_image: its iterator's first code, and the
 * message in msg. */
static int map_one(const void *bytes, size_t n, char *msg)
{
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/img", dir);
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, n, f);
    fclose(f);
    sl_image_spec spec;
    sl_image_spec_init(&spec, sizeof spec, SL_CROP_RESIZE, 4);
    const char *pp = path;
    sl_dataset *ds = sl_map_image(sl_read_files(sl_from_files(&pp, NULL, 1), 0), &spec, 1);
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
    sl_element *el = NULL;
    int rc = it ? sl_next(it, &el) : sl_last_error_code();
    snprintf(msg, 1024, "%s", it ? sl_iterator_errmsg(it) : sl_last_error());
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    tu_rmdir(dir);
    return rc;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A chunk at p: length, type, data, CRC; returns its size. */
static size_t chunk(uint8_t *p, const char *type, const uint8_t *d, uint32_t n)
{
    put32(p, n);
    memcpy(p + 4, type, 4);
    if (n)
        memcpy(p + 8, d, n);
    put32(p + 8 + n, sl__crc32(0, p + 4, n + 4));
    return n + 12;
}

/* map_image exists in every build: a build without libjpeg-turbo still
 * decodes PNG and WebP (each decoder is made at its format's first image)
 * and refuses a JPEG by name when it meets one. */
static void test_jpeg_part(void **state)
{
    (void)state;
    sl_image_spec spec;
    assert_int_equal(sl_image_spec_init(&spec, sizeof spec, SL_CROP_CENTER, 32), 0);
    /* the structure says range's elements are int64: refused when built */
    sl_dataset *ds = sl_map_image(sl_range(0, 4, 1), &spec, 1);
    assert_null(ds);
    assert_int_equal(sl_last_error_code(), SL_EDTYPE);
    assert_non_null(strstr(sl_last_error(), "not bytes (encoded, or decoded uint8 pixels)"));
    /* a JPEG's first bytes, and then nothing */
    static const uint8_t jpeg[11] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0};
    static const uint8_t other[8] = {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i'};
    char msg[1024];
    int rc = map_one(jpeg, sizeof jpeg, msg);
    assert_non_null(strstr(msg, "/img"));
#ifdef SLUICE_NO_JPEG
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_non_null(strstr(msg, "SLUICE_WITH_JPEG=OFF"));
    assert_int_equal(map_one(other, sizeof other, msg), SL_EUNSUPPORTED);
    assert_non_null(strstr(msg, "SLUICE_WITH_JPEG=OFF"));
#else
    assert_int_equal(rc, SL_ECORRUPT);
    assert_int_equal(map_one(other, sizeof other, msg), SL_ECORRUPT);
#endif
}

static void test_png_webp_parts(void **state)
{
    (void)state;
    /* a 2x1 RGB PNG, written here: its deflate stream one stored block */
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t png[128], ihdr[13] = {0, 0, 0, 2, 0, 0, 0, 1, 8, 2, 0, 0, 0};
    uint8_t raw[7] = {0, 200, 10, 20, 30, 40, 250}; /* filter 0, two pixels */
    uint8_t z[2 + 5 + 7 + 4] = {0x78, 0x01, 1, 7, 0, 0xf8, 0xff};
    memcpy(z + 7, raw, 7);
    uint32_t a = 1, b = 0; /* adler32 */
    for (int i = 0; i < 7; i++)
        a = (a + raw[i]) % 65521, b = (b + a) % 65521;
    put32(z + 14, b << 16 | a);
    size_t n = 8;
    memcpy(png, sig, 8);
    n += chunk(png + n, "IHDR", ihdr, 13);
    n += chunk(png + n, "IDAT", z, sizeof z);
    n += chunk(png + n, "IEND", NULL, 0);
    char msg[1024];
    int rc = map_one(png, n, msg);
#ifdef SLUICE_NO_PNG
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_non_null(strstr(msg, "SLUICE_WITH_PNG=OFF"));
#else
    assert_int_equal(rc, 0);
#endif
    /* a WebP's signature: without libwebp, refused by name; with it, the
     * bytes after it are not a picture */
    static const uint8_t webp[20] = {'R', 'I', 'F', 'F', 12, 0, 0, 0, 'W', 'E', 'B', 'P',
                                     'V', 'P', '8', 'L', 0, 0, 0, 0};
    rc = map_one(webp, sizeof webp, msg);
#ifdef SLUICE_NO_WEBP
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_non_null(strstr(msg, "SLUICE_WITH_WEBP=OFF"));
#else
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(msg, "WebP"));
#endif
}

/* The preprocessing service: a build without UCX (or libcrypto) refuses
 * sl_service naming the option; with it, a missing secret is named. */
static void test_service_part(void **state)
{
    (void)state;
    unsetenv("SLUICE_SERVICE_SECRET");
    unsetenv("SLUICE_SERVICE_SECRET_FILE");
    sl_service_spec spec;
    SL_SERVICE_SPEC_INIT(&spec);
    spec.address = "127.0.0.1:0";
    sl_dataset *ds = sl_service(sl_batch(sl_range(0, 8, 1), 2, 0), &spec);
    assert_null(ds);
#ifdef SLUICE_NO_UCX
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "SLUICE_WITH_UCX"));
#else
    assert_int_equal(sl_last_error_code(), SL_EACCES);
    assert_non_null(strstr(sl_last_error(), "SLUICE_SERVICE_SECRET"));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_any_build),
        cmocka_unit_test(test_jpeg_part),
        cmocka_unit_test(test_zlib_part),
        cmocka_unit_test(test_uring_part),
        cmocka_unit_test(test_png_webp_parts),
        cmocka_unit_test(test_service_part),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
