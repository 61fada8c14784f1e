/* Sources whose data changes while training runs: from_generator, the push
 * queue and from_queue, a folder rescanned every epoch. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

/* ---- from_generator ---- */

typedef struct counter {
    int64_t n;        /* elements per pass */
    int64_t next[8];  /* per pass */
    int ended[8];     /* end notifications per pass */
    int64_t fail_at;  /* fail (once per pass) at this position, -1: never */
    int calls_in;     /* calls running now: must never be above 1 */
    int max_in;
    pthread_mutex_t mu;
} counter;

static int count_fn(void *user, int64_t pass, sl_element **out)
{
    counter *c = user;
    assert_true(pass >= 0 && pass < 8);
    pthread_mutex_lock(&c->mu);
    int in = ++c->calls_in;
    c->max_in = in > c->max_in ? in : c->max_in;
    pthread_mutex_unlock(&c->mu);
    tu_sleep_us(50); /* widen the window an overlap would need */
    int rc;
    if (!out) {
        c->ended[pass]++;
        rc = 0;
    } else if (c->next[pass] >= c->n) {
        rc = SL_EOF;
    } else if (c->next[pass] == c->fail_at) {
        c->next[pass]++;
        rc = sl_set_last_error(SL_EIO, "sensor 3 went away");
    } else {
        *out = tu_el_i64(pass * 1000 + c->next[pass]++);
        rc = 0;
    }
    pthread_mutex_lock(&c->mu);
    c->calls_in--;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int double_it(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    *out = tu_el_i64(2 * sl_tensor_int64(sl_element_tensor(in, 0)));
    return 0;
}

static int forgets(void *user, int64_t pass, sl_element **out)
{
    (void)user, (void)pass, (void)out;
    return 0; /* (and no element: a bug, reported as one) */
}

static void test_generator(void **state)
{
    (void)state;
    static counter c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    c.n = 50;
    c.fail_at = -1;
    sl_dataset *g = sl_from_generator(count_fn, &c, 0);
    assert_non_null(g);
    assert_int_equal(sl_dataset_cardinality(g), SL_UNKNOWN);
    /* map, batch, prefetch over it, two passes by repeat, on 4 threads */
    sl_dataset *ds = sl_prefetch(
        sl_batch(sl_map(sl_repeat(sl_dataset_retain(g), 2), "x2", double_it, NULL, SL_AUTOTUNE,
                        0),
                 8, 0),
        SL_AUTOTUNE);
    assert_non_null(ds);
    sl_options *o = tu_opts(4, 1);
    int64_t *v;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &v, &n, NULL), SL_EOF);
    assert_int_equal(n, 100);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i], 2 * ((int64_t)(i / 50) * 1000 + (int64_t)(i % 50)));
    free(v);
    assert_int_equal(c.max_in, 1);
    assert_int_equal(c.ended[0], 1);
    assert_int_equal(c.ended[1], 1);

    /* an error is an element error: fail by default, named */
    c.fail_at = 5;
    char msg[1024];
    assert_int_equal(tu_collect(g, o, &v, &n, msg), SL_EIO);
    free(v);
    assert_non_null(strstr(msg, "from_generator: sensor 3 went away"));
    assert_int_equal(c.ended[2], 1);
    /* skipped under SKIP, and the next call goes on */
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    assert_int_equal(tu_collect(g, o, &v, &n, NULL), SL_EOF);
    assert_int_equal(n, 49);
    assert_int_equal(v[5], 3006);
    free(v);

    /* saving names the op */
    sl_iterator *it = sl_iterator_create(g, o);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    char buf[256];
    assert_true(sl_iterator_save(it, buf, sizeof buf) == SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "from_generator"));
    sl_iterator_free(it); /* early: the pass still ends */
    assert_int_equal(c.ended[4], 1);
    sl_dataset *bad = sl_from_generator(forgets, NULL, 0);
    char bmsg[1024];
    int64_t *bv;
    size_t bn;
    assert_int_equal(tu_collect(bad, o, &bv, &bn, bmsg), SL_ECALLBACK);
    free(bv);
    assert_non_null(strstr(bmsg, "returned 0 without an element"));
    sl_dataset_release(bad);
    assert_null(sl_from_generator(NULL, NULL, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_options_free(o);
    sl_dataset_release(ds);
    sl_dataset_release(g);
}

/* ---- the queue ---- */

typedef struct pusher {
    sl_queue *q;
    int64_t n, size; /* elements, int64 values each */
} pusher;

static void *push_main(void *arg)
{
    pusher *p = arg;
    for (int64_t i = 0; i < p->n; i++) {
        sl_element *el = sl_element_create(1);
        int64_t shape[1] = {p->size};
        int64_t *d = sl_element_add_tensor(el, SL_INT64, 1, shape);
        for (int64_t j = 0; j < p->size; j++)
            d[j] = i;
        assert_int_equal(sl_queue_push(p->q, el, -1), 0);
        sl_element_release(el);
    }
    sl_queue_close(p->q);
    return NULL;
}

static void test_queue(void **state)
{
    (void)state;
    /* 16 KiB: two elements of 1000 int64 fit, a third waits */
    sl_queue *q = sl_queue_create(16 << 10);
    assert_non_null(q);
    sl_dataset *ds = sl_prefetch(sl_map(sl_from_queue(q), "id", tu_identity, NULL, 2, 0), 4);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN);
    pusher p = {q, 300, 1000};
    pthread_t th;
    pthread_create(&th, NULL, push_main, &p);
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    int64_t i = 0;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_count(t), 1000);
        assert_int_equal(((const int64_t *)sl_tensor_data(t))[999], i);
        assert_true(sl_queue_length(q) <= 2);
        sl_element_release(el);
        i++;
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(i, 300);
    pthread_join(th, NULL);
    sl_iterator_free(it);

    /* closed: pushes fail, a full queue times out, a big element enters
     * an empty queue */
    sl_element *x = tu_el_i64(1);
    assert_int_equal(sl_queue_push(q, x, 0), SL_ESTATE);
    sl_queue *small = sl_queue_create(8);
    assert_int_equal(sl_queue_push(small, x, 0), 0);
    assert_int_equal(sl_queue_push(small, x, 0), SL_EBUSY);
    int64_t t0 = tu_now_ns();
    assert_int_equal(sl_queue_push(small, x, 20000000), SL_EBUSY);
    assert_true(tu_now_ns() - t0 >= 19000000);
    sl_element *big = sl_element_create(1);
    int64_t shape[1] = {100};
    sl_element_add_tensor(big, SL_INT64, 1, shape);
    sl_queue *empty = sl_queue_create(8);
    assert_int_equal(sl_queue_push(empty, big, 0), 0);
    sl_element_release(big);
    sl_element_release(x);

    /* freeing an iterator wakes its pop */
    sl_dataset *wait = sl_prefetch(sl_from_queue(small), 2);
    sl_iterator *w = sl_iterator_create(wait, o);
    assert_int_equal(sl_next(w, &el), 0);
    sl_element_release(el);
    sl_iterator_free(w); /* its producer waits on an empty queue: must not hang */
    assert_null(sl_queue_create(0));
    sl_dataset_release(wait);
    sl_queue_free(small);
    sl_queue_free(empty);
    sl_options_free(o);
    sl_dataset_release(ds);
    sl_queue_free(q); /* the dataset's reference went first: the queue goes now */
}

/* ---- a folder rescanned each epoch ---- */

static void put_file(const char *root, const char *rel)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    mkdir(dir, 0755);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(rel, f); /* the contents name the file */
    fclose(f);
}

/* Runs one pass (the dataset's next epoch): how many elements, and the
 * label of the one whose contents are `rel` (-1: not seen). */
static int64_t pass(sl_dataset *ds, const char *rel, int64_t *label, int64_t *skipped)
{
    sl_options *o = tu_opts(2, 0);
    sl_options_set(o, SL_OPT_EPOCH, -1); /* the dataset's own count */
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int64_t n = 0;
    *label = -1;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        if (rel && sl_tensor_nbytes(t) == strlen(rel) && !memcmp(sl_tensor_data(t), rel, strlen(rel)))
            *label = sl_tensor_int64(sl_element_tensor(el, 1));
        sl_element_release(el);
        n++;
    }
    assert_int_equal(rc, SL_EOF);
    *skipped = sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED);
    sl_iterator_free(it);
    sl_options_free(o);
    return n;
}

static void test_folder_rescan(void **state)
{
    (void)state;
    char root[256];
    tu_tmpdir(root);
    const char *first[] = {"a/1.jpg", "a/2.jpg", "a/3.jpg", "b/1.jpg", "b/2.jpg", "b/3.jpg"};
    for (int i = 0; i < 6; i++)
        put_file(root, first[i]);
    sl_dataset *ds = sl_image_folder(root, NULL, SL_FOLDER_RESCAN);
    sl_dataset *fixed = sl_image_folder(root, NULL, 0);
    assert_non_null(ds);
    int64_t label, skipped;
    assert_int_equal(pass(ds, "b/2.jpg", &label, &skipped), 6);
    assert_int_equal(label, 1);

    /* a new file in a class, a new class that sorts first, a deleted file */
    put_file(root, "a/0.jpg");
    put_file(root, "0new/x.jpg");
    put_file(root, "c/y.jpg");
    char gone[512];
    snprintf(gone, sizeof gone, "%s/b/1.jpg", root);
    assert_int_equal(unlink(gone), 0);
    assert_int_equal(pass(ds, "0new/x.jpg", &label, &skipped), 8); /* 6 + 3 - 1 */
    assert_int_equal(label, 2);    /* after a and b, though it sorts first */
    assert_int_equal(skipped, 1);  /* the deleted one, under the FAIL policy */
    assert_int_equal(pass(ds, "c/y.jpg", &label, &skipped), 8);
    assert_int_equal(label, 3);
    assert_int_equal(pass(ds, "a/0.jpg", &label, &skipped), 8);
    assert_int_equal(label, 0);    /* old labels never move */
    assert_int_equal(sl_dataset_cardinality(ds), 9);
    /* the folder without the flag keeps its build listing, and the
     * deleted file is an error there, as the policy says */
    sl_options *o = tu_opts(2, 0);
    assert_int_equal(sl_dataset_cardinality(fixed), 6);
    sl_iterator *fit = sl_iterator_create(fixed, o);
    sl_element *el;
    int frc;
    while ((frc = sl_next(fit, &el)) == 0)
        sl_element_release(el);
    assert_int_equal(frc, SL_ENOENT);
    assert_non_null(strstr(sl_iterator_errmsg(fit), "b/1.jpg"));
    sl_iterator_free(fit);

    /* shuffle-all reads by index without the folder's iterator: it too
     * sees the files added since */
    put_file(root, "b/4.jpg");
    sl_dataset *sh = sl_shuffle(sl_dataset_retain(ds), SL_SHUFFLE_ALL, 1, 0);
    assert_non_null(sh);
    assert_int_equal(pass(sh, "b/4.jpg", &label, &skipped), 9);
    assert_int_equal(label, 1);

    /* within one iterator: repeat's second pass lists again */
    sl_dataset *rep = sl_repeat(sl_dataset_retain(ds), 2);
    sl_iterator *it = sl_iterator_create(rep, o);
    for (int i = 0; i < 9; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        sl_element_release(el);
    }
    put_file(root, "c/z.jpg"); /* before the second pass begins */
    int64_t n = 0;
    while (sl_next(it, &el) == 0) {
        sl_element_release(el);
        n++;
    }
    assert_int_equal(n, 10);
    sl_iterator_free(it);

    /* ranks could list different files: distribute refuses */
    sl_dist_context ctx = {.rank = 0, .world_size = 2};
    assert_null(sl_distribute(sl_dataset_retain(ds), &ctx, 0));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "SL_FOLDER_RESCAN"));

    /* a folder that cannot be listed for a while: the old listing serves */
    char moved[600];
    snprintf(moved, sizeof moved, "%s.away", root);
    assert_int_equal(rename(root, moved), 0);
    assert_int_equal(pass(ds, NULL, &label, &skipped), 0); /* every file is gone */
    assert_int_equal(skipped, 11);                           /* (b/1.jpg among them) */
    assert_int_equal(rename(moved, root), 0);
    assert_int_equal(pass(ds, NULL, &label, &skipped), 10);
    sl_options_free(o);
    sl_dataset_release(rep);
    sl_dataset_release(sh);
    sl_dataset_release(fixed);
    sl_dataset_release(ds);
    tu_rmdir(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_folder_rescan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
