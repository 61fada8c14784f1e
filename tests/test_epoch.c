/* Epochs: each iterator made from the same dataset runs that dataset's next
 * epoch (a new shuffle order and new random draws), SL_OPT_EPOCH names one
 * instead, the same (seed, epoch) replays byte for byte, and
 * SL_SHUFFLE_NO_RESHUFFLE keeps the order while crops still change. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "jpegutil.h"
#include "testutil.h"

#define N 200
#define EPOCHS 3

/* Everything a pass yields: tensor 0 (the order) and tensor 1 (the
 * random draws or the images) of every element, apart. */
typedef struct pass {
    int64_t epoch;
    unsigned char *order, *draws;
    size_t norder, ndraws;
} pass;

static void append(unsigned char **p, size_t *n, const void *src, size_t len)
{
    *p = realloc(*p, *n + len + 1);
    memcpy(*p + *n, src, len);
    *n += len;
}

static void append_tensor(unsigned char **p, size_t *n, const sl_tensor *t)
{
    if (sl_tensor_dtype(t) != SL_STRING) {
        append(p, n, sl_tensor_data(t), sl_tensor_nbytes(t));
        return;
    }
    for (int64_t i = 0; i < sl_tensor_count(t); i++) {
        size_t len;
        const char *s = sl_tensor_string(t, i, &len);
        append(p, n, s, len);
        append(p, n, "", 1);
    }
}

/* One pass over ds; epoch < 0 leaves SL_OPT_EPOCH at its default. Tensor
 * `order_at` is what tells the order, tensor `draws_at` the random part. */
static pass run(sl_dataset *ds, int threads, int64_t epoch, int order_at, int draws_at)
{
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_set(o, SL_OPT_THREADS, threads), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_SEED, 42), 0);
    if (epoch >= 0)
        assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, epoch), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    pass p = {.epoch = sl_iterator_stat(it, SL_STAT_EPOCH)};
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        append_tensor(&p.order, &p.norder, sl_element_tensor(el, order_at));
        append_tensor(&p.draws, &p.ndraws, sl_element_tensor(el, draws_at));
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        print_error("%s\n", sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    sl_iterator_free(it);
    sl_options_free(o);
    return p;
}

static bool same(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    return na == nb && memcmp(a, b, na) == 0;
}

static void assert_same_pass(const pass *a, const pass *b)
{
    assert_true(same(a->order, a->norder, b->order, b->norder));
    assert_true(same(a->draws, a->ndraws, b->draws, b->ndraws));
}

static void pass_free(pass *p)
{
    free(p->order);
    free(p->draws);
}

/* (value, a draw from the element's random stream) */
static int draw(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    sl_element *el = sl_element_create(2);
    assert_int_equal(sl_element_add_shared(el, in, 0), 0);
    assert_int_equal(sl_element_add_int64(el, (int64_t)sl_map_ctx_random(ctx)), 0);
    *out = el;
    return 0;
}

static sl_dataset *numbers(unsigned shuffle_flags)
{
    sl_dataset *ds = sl_shuffle(sl_range(0, N, 1), SL_SHUFFLE_ALL, 7, shuffle_flags);
    return sl_map(ds, "draw", draw, NULL, 2, 0);
}

/* The first iterators of a dataset run epochs 0, 1, 2: orders and draws
 * differ pairwise; a new dataset built the same way replays them exactly,
 * on any thread count. */
static void test_each_iterator_is_a_new_epoch(void **state)
{
    (void)state;
    sl_dataset *ds = numbers(0);
    pass p[EPOCHS];
    for (int e = 0; e < EPOCHS; e++) {
        p[e] = run(ds, 2, -1, 0, 1);
        assert_int_equal(p[e].epoch, e);
        assert_int_equal(p[e].norder, N * sizeof(int64_t));
    }
    for (int a = 0; a < EPOCHS; a++)
        for (int b = a + 1; b < EPOCHS; b++) {
            assert_false(same(p[a].order, p[a].norder, p[b].order, p[b].norder));
            assert_false(same(p[a].draws, p[a].ndraws, p[b].draws, p[b].ndraws));
        }
    sl_dataset *again = numbers(0);
    const int threads[EPOCHS] = {1, 8, 2};
    for (int e = 0; e < EPOCHS; e++) {
        pass r = run(again, threads[e], -1, 0, 1);
        assert_same_pass(&r, &p[e]);
        pass_free(&r);
    }
    for (int e = 0; e < EPOCHS; e++)
        pass_free(&p[e]);
    sl_dataset_release(again);
    sl_dataset_release(ds);
}

/* SL_OPT_EPOCH replays a chosen epoch and leaves the dataset's count
 * alone. */
static void test_explicit_epoch(void **state)
{
    (void)state;
    sl_dataset *ref = numbers(0);
    pass p[EPOCHS];
    for (int e = 0; e < EPOCHS; e++)
        p[e] = run(ref, 2, -1, 0, 1);
    sl_dataset *ds = numbers(0);
    pass two = run(ds, 1, 2, 0, 1);
    assert_int_equal(two.epoch, 2);
    assert_same_pass(&two, &p[2]);
    pass first = run(ds, 2, -1, 0, 1); /* the count is still at 0 */
    assert_int_equal(first.epoch, 0);
    assert_same_pass(&first, &p[0]);
    pass one = run(ds, 8, 1, 0, 1);
    assert_same_pass(&one, &p[1]);
    pass_free(&two);
    pass_free(&first);
    pass_free(&one);
    for (int e = 0; e < EPOCHS; e++)
        pass_free(&p[e]);
    sl_dataset_release(ds);
    sl_dataset_release(ref);
    int64_t lo, hi;
    assert_int_equal(sl_option_bounds(SL_OPT_EPOCH, &lo, &hi), 0);
    assert_int_equal(lo, -1);
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_get(o, SL_OPT_EPOCH), -1);
    assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, -2), SL_EINVAL);
    sl_options_free(o);
}

/* SL_SHUFFLE_NO_RESHUFFLE: one order for every epoch, new draws. */
static void test_no_reshuffle_keeps_order_only(void **state)
{
    (void)state;
    sl_dataset *ds = numbers(SL_SHUFFLE_NO_RESHUFFLE);
    pass a = run(ds, 2, -1, 0, 1), b = run(ds, 2, -1, 0, 1);
    assert_true(same(a.order, a.norder, b.order, b.norder));
    assert_false(same(a.draws, a.ndraws, b.draws, b.ndraws));
    pass_free(&a);
    pass_free(&b);
    sl_dataset_release(ds);
}

/* A repeat inside the pipeline numbers its passes within the epoch, so
 * epoch 1's passes are neither epoch 0's nor each other. */
static void test_repeat_passes_stay_distinct(void **state)
{
    (void)state;
    sl_dataset *ds = sl_repeat(numbers(0), 2);
    pass a = run(ds, 2, -1, 0, 1), b = run(ds, 2, -1, 0, 1);
    size_t half = N * sizeof(int64_t);
    const unsigned char *orders[4] = {a.order, a.order + half, b.order, b.order + half};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            assert_false(same(orders[i], half, orders[j], half));
    pass_free(&a);
    pass_free(&b);
    sl_dataset_release(ds);
}

/* Iterators made on several threads at once each get their own epoch. */
#define MAKERS 4
#define PER_MAKER 25

typedef struct maker {
    sl_dataset *ds;
    int64_t epochs[PER_MAKER];
} maker;

static void *make_many(void *arg)
{
    maker *m = arg;
    for (int i = 0; i < PER_MAKER; i++) {
        sl_iterator *it = sl_iterator_create(m->ds, NULL);
        m->epochs[i] = it ? sl_iterator_stat(it, SL_STAT_EPOCH) : -1;
        sl_iterator_free(it);
    }
    return NULL;
}

static void test_concurrent_iterators_count_once(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 4, 1);
    maker m[MAKERS];
    pthread_t th[MAKERS];
    for (int i = 0; i < MAKERS; i++) {
        m[i].ds = ds;
        assert_int_equal(pthread_create(&th[i], NULL, make_many, &m[i]), 0);
    }
    bool seen[MAKERS * PER_MAKER] = {false};
    for (int i = 0; i < MAKERS; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < PER_MAKER; k++) {
            int64_t e = m[i].epochs[k];
            assert_in_range(e, 0, MAKERS * PER_MAKER - 1);
            assert_false(seen[e]);
            seen[e] = true;
        }
    }
    sl_dataset_release(ds);
}

/* ---- the image pipeline: folder -> shuffle(ALL) -> map_image -> batch ---- */

#define CLASSES 3
#define PER_CLASS 8
#define FILES (CLASSES * PER_CLASS)

static char root[256];

static int make_folder(void **state)
{
    (void)state;
    tu_tmpdir(root);
    return ju_write_folder(root, CLASSES, PER_CLASS);
}

static int remove_folder(void **state)
{
    (void)state;
    tu_rmdir(root);
    return 0;
}

#define SIZE 24
#define BATCH 6

static sl_dataset *train(unsigned shuffle_flags)
{
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, SIZE), 0);
    sl_dataset *ds = sl_image_folder(root, NULL, SL_WITH_PATHS);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, 3, shuffle_flags);
    ds = sl_batch(sl_map_image(ds, &spec, SL_AUTOTUNE), BATCH, 0);
    assert_non_null(ds);
    return ds;
}

/* The crop of file `path` in a pass: its image, found by path. */
static const unsigned char *image_of(const pass *p, const char *path)
{
    const size_t img = SIZE * SIZE * 3;
    const char *s = (const char *)p->order;
    for (int i = 0; i < FILES; i++) {
        if (strcmp(s, path) == 0)
            return p->draws + (size_t)i * img;
        s += strlen(s) + 1;
    }
    fail_msg("%s not in the pass", path);
    return NULL;
}

/* How many files got a different crop in b than in a. */
static int crops_changed(const pass *a, const pass *b)
{
    const char *s = (const char *)a->order;
    int changed = 0;
    for (int i = 0; i < FILES; i++) {
        changed += memcmp(image_of(a, s), image_of(b, s), SIZE * SIZE * 3) != 0;
        s += strlen(s) + 1;
    }
    return changed;
}

static void test_image_epochs(void **state)
{
    (void)state;
    sl_dataset *ds = train(0);
    pass p[EPOCHS];
    for (int e = 0; e < EPOCHS; e++)
        p[e] = run(ds, 2, -1, 2, 0);
    for (int a = 0; a < EPOCHS; a++)
        for (int b = a + 1; b < EPOCHS; b++) {
            assert_false(same(p[a].order, p[a].norder, p[b].order, p[b].norder));
            assert_true(crops_changed(&p[a], &p[b]) >= FILES * 9 / 10);
        }
    sl_dataset *again = train(0);
    for (int e = 0; e < EPOCHS; e++) {
        pass r = run(again, e == 1 ? 1 : 2, -1, 2, 0);
        assert_same_pass(&r, &p[e]);
        pass_free(&r);
    }
    pass one = run(again, 2, 1, 2, 0);
    assert_same_pass(&one, &p[1]);
    pass_free(&one);
    for (int e = 0; e < EPOCHS; e++)
        pass_free(&p[e]);
    sl_dataset_release(again);
    sl_dataset_release(ds);
}

static void test_image_no_reshuffle(void **state)
{
    (void)state;
    sl_dataset *ds = train(SL_SHUFFLE_NO_RESHUFFLE);
    pass a = run(ds, 2, -1, 2, 0), b = run(ds, 2, -1, 2, 0);
    assert_true(same(a.order, a.norder, b.order, b.norder));
    assert_true(crops_changed(&a, &b) >= FILES * 9 / 10);
    pass_free(&a);
    pass_free(&b);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_iterator_is_a_new_epoch),
        cmocka_unit_test(test_explicit_epoch),
        cmocka_unit_test(test_no_reshuffle_keeps_order_only),
        cmocka_unit_test(test_repeat_passes_stay_distinct),
        cmocka_unit_test(test_concurrent_iterators_count_once),
        cmocka_unit_test_setup_teardown(test_image_epochs, make_folder, remove_folder),
        cmocka_unit_test_setup_teardown(test_image_no_reshuffle, make_folder, remove_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
