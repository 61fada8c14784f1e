/* The edge profile (SL_OPT_PROFILE = SL_PROFILE_EDGE): every node of the
 * image pipeline and a map runs on the caller's thread (no thread is
 * started while it runs), the output is byte for byte the default
 * profile's, its defaults yield to options set explicitly, and a state
 * saved under one profile resumes under the other. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jpegutil.h"
#include "testutil.h"

#define CLASSES 3
#define PER_CLASS 10
#define SIZE 24
#define BATCH 4

static char root[256];

static int make_folder(void **state)
{
    (void)state;
    tu_tmpdir(root);
    if (ju_write_folder(root, CLASSES, PER_CLASS))
        return -1;
    /* one that is not a JPEG: an element error, skipped by the policy */
    char bad[360];
    snprintf(bad, sizeof bad, "%s/c1/zz.jpg", root);
    FILE *f = fopen(bad, "w");
    fputs("not a jpeg", f);
    fclose(f);
    return 0;
}

static int remove_folder(void **state)
{
    (void)state;
    tu_rmdir(root);
    return 0;
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static int double_it(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    const sl_tensor *t = sl_element_tensor(in, 0);
    int64_t n = sl_tensor_count(t);
    sl_element *el = sl_element_create(2);
    uint8_t *d = sl_element_add_tensor(el, SL_UINT8, 1, &n);
    const uint8_t *s = sl_tensor_data(t);
    for (int64_t i = 0; i < n; i++)
        d[i] = (uint8_t)(2 * s[i]);
    sl_element_add_int64(el, (int64_t)(sl_map_ctx_random(ctx) & 0xffff));
    *out = el;
    return 0;
}

/* folder -> shuffle(ALL) -> map_image(train) -> batch -> prefetch, and
 * the same files through a plain map */
static sl_dataset *images(void)
{
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, SIZE), 0);
    sl_dataset *ds = sl_shuffle(sl_image_folder(root, NULL, 0), SL_SHUFFLE_ALL, 3, 0);
    ds = sl_prefetch(sl_batch(sl_map_image(ds, &spec, SL_AUTOTUNE), BATCH, 0), SL_AUTOTUNE);
    assert_non_null(ds);
    return ds;
}

static sl_dataset *mapped(void)
{
    sl_dataset *ds = sl_prefetch(
        sl_map(sl_image_folder(root, NULL, 0), "x2", double_it, NULL, SL_AUTOTUNE, 0), 2);
    assert_non_null(ds);
    return ds;
}

/* Every output byte of a pass, hashed per element, and the thread count
 * seen while it ran (most). */
typedef struct pass {
    uint64_t h[64];
    int n, threads;
    int64_t skipped, budget;
} pass;

static uint64_t hash_el(const sl_element *el)
{
    uint64_t h = 1469598103934665603ull;
    for (int t = 0; t < sl_element_size(el); t++) {
        const sl_tensor *x = sl_element_tensor(el, t);
        const unsigned char *p = sl_tensor_data(x);
        for (size_t i = 0; i < sl_tensor_nbytes(x); i++)
            h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

static void run(sl_dataset *ds, bool edge, int64_t epoch, pass *p)
{
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_EPOCH, epoch);
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    if (edge)
        sl_options_set(o, SL_OPT_PROFILE, SL_PROFILE_EDGE);
    else
        sl_options_set(o, SL_OPT_THREADS, 2);
    memset(p, 0, sizeof *p);
    int before = threads_now();
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(p->n < 64);
        p->h[p->n++] = hash_el(el);
        sl_element_release(el);
        int now = threads_now() - before;
        p->threads = now > p->threads ? now : p->threads;
    }
    assert_int_equal(rc, SL_EOF);
    p->skipped = sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED);
    p->budget = sl_iterator_stat(it, SL_STAT_RAM_BUDGET);
    sl_iterator_free(it);
    sl_options_free(o);
}

static void test_same_output_no_threads(void **state)
{
    (void)state;
    sl_dataset *pipes[2] = {images(), mapped()};
    for (int k = 0; k < 2; k++) {
        for (int64_t epoch = 0; epoch < 2; epoch++) {
            pass edge, dflt;
            run(pipes[k], true, epoch, &edge);
            run(pipes[k], false, epoch, &dflt);
            assert_int_equal(edge.n, dflt.n);
            assert_memory_equal(edge.h, dflt.h, (size_t)edge.n * sizeof edge.h[0]);
            assert_int_equal(edge.skipped, k == 0); /* the file that is not a JPEG */
            assert_int_equal(edge.threads, 0); /* nothing started beside the caller */
            assert_true(dflt.threads > 0);
            assert_int_equal(edge.budget, 64 << 20);
        }
    }
    sl_dataset_release(pipes[0]);
    sl_dataset_release(pipes[1]);
}

static sl_dataset *tens(const sl_element *el, void *user)
{
    (void)user;
    int64_t v = sl_tensor_int64(sl_element_tensor(el, 0));
    return sl_range(10 * v, 10 * v + 3 + v % 3, 1);
}

/* interleave's fetchers too: the consumer fills its sources */
static void test_interleave_inline(void **state)
{
    (void)state;
    sl_dataset *ds = sl_prefetch(sl_interleave(sl_range(0, 9, 1), tens, NULL, 3, 2,
                                               SL_AUTOTUNE, 0), 2);
    assert_non_null(ds);
    pass edge, dflt;
    run(ds, true, 0, &edge);
    run(ds, false, 0, &dflt);
    assert_int_equal(edge.n, dflt.n);
    assert_int_equal(edge.n, 9 * 3 + 3 * (0 + 1 + 2));
    assert_memory_equal(edge.h, dflt.h, (size_t)edge.n * sizeof edge.h[0]);
    assert_int_equal(edge.threads, 0);
    sl_dataset_release(ds);
}

static void test_explicit_options_win(void **state)
{
    (void)state;
    sl_dataset *ds = images();
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_PROFILE, SL_PROFILE_EDGE);
    sl_options_set(o, SL_OPT_RAM_BUDGET, 8 << 20);
    sl_options_set(o, SL_OPT_THREADS, 2); /* a pool again: nodes hand work to it */
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_RAM_BUDGET), 8 << 20);
    int64_t n = 0;
    sl_element *el;
    while (sl_next(it, &el) == 0) {
        n += sl_tensor_shape(sl_element_tensor(el, 0))[0];
        sl_element_release(el);
    }
    assert_int_equal(n, CLASSES * PER_CLASS);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_resume_across_profiles(void **state)
{
    (void)state;
    sl_dataset *ds = images();
    pass whole;
    run(ds, false, 1, &whole);
    for (int k = 0; k < 2; k++) { /* saved under default, resumed under edge; and back */
        sl_options *save_o = sl_options_create(), *load_o = sl_options_create();
        sl_options_set(save_o, SL_OPT_EPOCH, 1);
        sl_options_set(save_o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
        sl_options_set(load_o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
        sl_options_set(k ? save_o : load_o, SL_OPT_PROFILE, SL_PROFILE_EDGE);
        sl_iterator *it = sl_iterator_create(ds, save_o);
        sl_element *el;
        for (int i = 0; i < 3; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            assert_true(hash_el(el) == whole.h[i]);
            sl_element_release(el);
        }
        char buf[4096];
        int64_t len = sl_iterator_save(it, buf, sizeof buf);
        assert_true(len > 0 && len <= (int64_t)sizeof buf);
        sl_iterator_free(it);
        it = sl_iterator_restore(ds, buf, (size_t)len, load_o);
        assert_non_null(it);
        int i = 3;
        while (sl_next(it, &el) == 0) {
            assert_true(i < whole.n && hash_el(el) == whole.h[i]);
            sl_element_release(el);
            i++;
        }
        assert_int_equal(i, whole.n);
        sl_iterator_free(it);
        sl_options_free(save_o);
        sl_options_free(load_o);
    }
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_output_no_threads),
        cmocka_unit_test(test_interleave_inline),
        cmocka_unit_test(test_explicit_options_win),
        cmocka_unit_test(test_resume_across_profiles),
    };
    return cmocka_run_group_tests(tests, make_folder, remove_folder);
}
