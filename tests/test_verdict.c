/* Damaged files get the same verdict whatever the crop: region decoding
 * stops at the window's last row, so a file cut short below the window
 * must still fail, under every seed and preset, and a file with garbage
 * after its end-of-image marker must decode under every seed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "jpegutil.h"
#include "testutil.h"

#define SEEDS 50

static char root[256], cut_dir[320], tail_dir[320], both_dir[320], cut_path[400];

static void write_bytes(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* dir/c/name, the one class of a folder */
static void put(const char *dir, const char *name, const uint8_t *p, size_t n, char *path_out)
{
    char cls[360], path[400];
    snprintf(cls, sizeof cls, "%s/c", dir);
    mkdir(dir, 0755);
    mkdir(cls, 0755);
    snprintf(path, sizeof path, "%s/%s", cls, name);
    write_bytes(path, p, n);
    if (path_out)
        strcpy(path_out, path);
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(root);
    size_t n;
    /* tall, so that most train crops and the eval crop end well above the
     * cut at 55% of the bytes */
    uint8_t *jpg = ju_make(320, 960, 5, NULL, &n);
    uint8_t *tail = malloc(n + 2048);
    memcpy(tail, jpg, n);
    for (int i = 0; i < 2048; i++)
        tail[n + i] = (uint8_t)(ju_hash((uint32_t)i) >> 7);
    snprintf(cut_dir, sizeof cut_dir, "%s/cut", root);
    snprintf(tail_dir, sizeof tail_dir, "%s/tail", root);
    snprintf(both_dir, sizeof both_dir, "%s/both", root);
    put(cut_dir, "cut.jpg", jpg, n * 55 / 100, cut_path);
    put(tail_dir, "tail.jpg", tail, n + 2048, NULL);
    put(both_dir, "a_cut.jpg", jpg, n * 55 / 100, NULL);
    put(both_dir, "b_tail.jpg", tail, n + 2048, NULL);
    put(both_dir, "c_good.jpg", jpg, n, NULL);
    free(jpg);
    free(tail);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(root);
    return 0;
}

/* The first sl_next of map_image(crop, 64) over dir's images, seed `seed`;
 * its message in msg (1024 bytes). */
static int first(const char *dir, int crop, int64_t seed, char *msg)
{
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, crop, 64), 0);
    sl_dataset *ds = sl_map_image(sl_image_folder(dir, NULL, 0), &spec, 1);
    sl_options *o = tu_opts(1, seed);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el = NULL;
    int rc = sl_next(it, &el);
    snprintf(msg, 1024, "%s", sl_iterator_errmsg(it));
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return rc;
}

static void test_truncated_fails_under_every_seed(void **state)
{
    (void)state;
    char want[1100], msg[1024];
    snprintf(want, sizeof want, "map_image: %s: truncated (no end-of-image marker)", cut_path);
    for (int64_t seed = 0; seed < SEEDS; seed++) {
        int rc = first(cut_dir, SL_CROP_RANDOM_RESIZED, seed, msg);
        if (rc != SL_ECORRUPT)
            print_error("seed %lld: %d %s\n", (long long)seed, rc, msg);
        assert_int_equal(rc, SL_ECORRUPT);
        assert_string_equal(msg, want); /* names the file it does not yield */
    }
    assert_int_equal(first(cut_dir, SL_CROP_CENTER, 0, msg), SL_ECORRUPT);
    assert_string_equal(msg, want);
    assert_int_equal(first(cut_dir, SL_CROP_RESIZE, 0, msg), SL_ECORRUPT);
}

static void test_garbage_after_eoi_decodes_under_every_seed(void **state)
{
    (void)state;
    char msg[1024];
    for (int64_t seed = 0; seed < SEEDS; seed++) {
        int rc = first(tail_dir, SL_CROP_RANDOM_RESIZED, seed, msg);
        if (rc != 0)
            print_error("seed %lld: %d %s\n", (long long)seed, rc, msg);
        assert_int_equal(rc, 0);
    }
    assert_int_equal(first(tail_dir, SL_CROP_CENTER, 0, msg), 0);
}

/* Under skip, every epoch skips exactly the one bad file. */
static void test_skip_counts_do_not_change(void **state)
{
    (void)state;
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, 48), 0);
    sl_dataset *ds = sl_batch(sl_map_image(sl_image_folder(both_dir, NULL, 0), &spec, 2), 2, 0);
    for (int64_t seed = 0; seed < SEEDS; seed += 7) {
        sl_options *o = tu_opts(2, seed);
        assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP), 0);
        assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
        assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, seed), 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        int64_t images = 0;
        int rc;
        while ((rc = sl_next(it, &el)) == 0) {
            images += sl_tensor_shape(sl_element_tensor(el, 0))[0];
            sl_element_release(el);
        }
        assert_int_equal(rc, SL_EOF);
        assert_int_equal(images, 2);
        assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 1);
        sl_iterator_free(it);
        sl_options_free(o);
    }
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_fails_under_every_seed),
        cmocka_unit_test(test_garbage_after_eoi_decodes_under_every_seed),
        cmocka_unit_test(test_skip_counts_do_not_change),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
