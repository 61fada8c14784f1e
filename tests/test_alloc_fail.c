/*
 * Allocation failure, one allocation at a time: for k = 1, 2, ... the k-th
 * allocation of a whole pipeline life (build, iterate to the end, free)
 * fails, until a run makes fewer than k allocations. Every run must end in
 * success with the right output or a clean error with a message, and leave
 * nothing allocated once everything is freed and the pools are released.
 *
 * The counting allocator must be installed before the library allocates
 * anything, so nothing here touches the library before tu_alloc_install(),
 * and every iterator owns a private runtime (SL_OPT_THREADS): the default
 * runtime's workers would keep pool caches alive past the check. Thread
 * timing makes the allocation sequence vary a little between runs; the
 * checks hold for any sequence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

enum { ROW = 300 }; /* bytes of the uint8 tensor, past the inline area */

/* A builder, sl_options_create or sl_iterator_create returned NULL. */
#define BUILD_FAILED (SL_EOF + 1)

/* (v, [ROW] bytes of v) built through scratch memory and a pooled buffer. */
static int alloc_cb(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    int64_t v = sl_tensor_int64(sl_element_tensor(in, 0));
    unsigned char *s = sl_map_ctx_scratch(ctx, 2 * ROW);
    if (!s)
        return SL_ENOMEM; /* the library set the message */
    memset(s, (int)(v & 0xff), 2 * ROW);
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    int64_t shape[1] = {ROW};
    unsigned char *d = NULL;
    if (sl_element_add_int64(el, v) == 0)
        d = sl_element_add_tensor(el, SL_UINT8, 1, shape);
    if (!d) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    memcpy(d, s + ROW, ROW);
    *out = el;
    return 0;
}

typedef struct outcome {
    int rc;        /* SL_EOF, a negative code, or BUILD_FAILED */
    int64_t *vals; /* tensor 0 values, flattened (malloc) */
    size_t n, cap;
} outcome;

static void add_val(outcome *o, int64_t v)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 256;
        o->vals = realloc(o->vals, o->cap * sizeof *o->vals);
        assert_non_null(o->vals);
    }
    o->vals[o->n++] = v;
}

/* Checks one batch: int64 values in tensor 0; in tensor 1 either their
 * rows (uint8) or their paths (strings). */
static void take_element(outcome *o, const sl_element *el)
{
    const sl_tensor *t0 = sl_element_tensor(el, 0), *t1 = sl_element_tensor(el, 1);
    assert_non_null(t0);
    assert_int_equal(sl_tensor_dtype(t0), SL_INT64);
    int64_t n = sl_tensor_count(t0);
    const int64_t *v = sl_tensor_data(t0);
    assert_non_null(t1);
    if (sl_tensor_dtype(t1) == SL_UINT8)
        assert_int_equal(sl_tensor_nbytes(t1), (size_t)n * ROW);
    else
        assert_int_equal(sl_tensor_dtype(t1), SL_STRING);
    for (int64_t i = 0; i < n; i++) {
        add_val(o, v[i]);
        if (sl_tensor_dtype(t1) == SL_STRING) {
            char want[32];
            size_t len;
            snprintf(want, sizeof want, "/data/file-%02d.jpg", (int)v[i]);
            const char *s = sl_tensor_string(t1, i, &len);
            assert_non_null(s);
            assert_int_equal(len, strlen(want));
            assert_memory_equal(s, want, len);
            continue;
        }
        const unsigned char *row = (const unsigned char *)sl_tensor_data(t1) + i * ROW;
        for (int j = 0; j < ROW; j++)
            if (row[j] != (v[i] & 0xff))
                assert_int_equal(row[j], v[i] & 0xff);
    }
}

/* One pipeline life. Asserts that any failure is clean. */
static outcome run_once(sl_dataset *(*build)(void), int threads)
{
    outcome o = {0};
    sl_clear_error();
    sl_dataset *ds = build();
    if (!ds) {
        if (!sl_last_error()[0])
            print_error("a builder returned NULL without a message\n");
        assert_true(sl_last_error()[0] != '\0');
        o.rc = BUILD_FAILED;
        return o;
    }
    sl_options *opts = sl_options_create();
    if (!opts) {
        assert_true(sl_last_error()[0] != '\0');
        sl_dataset_release(ds);
        o.rc = BUILD_FAILED;
        return o;
    }
    assert_int_equal(sl_options_set(opts, SL_OPT_THREADS, threads), 0);
    assert_int_equal(sl_options_set(opts, SL_OPT_SEED, 5), 0);
    sl_iterator *it = sl_iterator_create(ds, opts);
    if (!it) {
        if (!sl_last_error()[0])
            print_error("sl_iterator_create returned NULL without a message\n");
        assert_true(sl_last_error()[0] != '\0');
        o.rc = BUILD_FAILED;
    } else {
        sl_element *el;
        while ((o.rc = sl_next(it, &el)) == 0) {
            take_element(&o, el);
            sl_element_release(el);
        }
        if (o.rc < 0) {
            const char *msg = sl_iterator_errmsg(it);
            if (o.rc != SL_ENOMEM || !msg[0])
                print_error("sl_next: %d (%s) \"%s\"\n", o.rc, sl_strerror(o.rc), msg);
            assert_true(msg[0] != '\0');
            assert_int_equal(o.rc, SL_ENOMEM);
            /* and it stays failed */
            assert_int_equal(sl_next(it, &el), o.rc);
            assert_null(el);
        }
        assert_true(o.rc != 0);
        sl_iterator_free(it);
    }
    sl_options_free(opts);
    sl_dataset_release(ds);
    return o;
}

/* Runs the life of build()'s pipeline with the k-th allocation failing for
 * every k, checking successful outputs with check(). */
static void torture(sl_dataset *(*build)(void), void (*check)(const outcome *), int threads,
                    const char *what)
{
    int64_t k, ok = 0;
    for (k = 1;; k++) {
        if (k > 100000)
            fail_msg("%s: no end to the allocations", what);
        tu_alloc_fail_at(k);
        outcome o = run_once(build, threads);
        int64_t calls = tu_alloc_calls();
        if (o.rc == SL_EOF) {
            if (calls >= k)
                print_message("%s: allocation %lld of %lld failed, yet the run succeeded "
                              "with %zu values\n",
                              what, (long long)k, (long long)calls, o.n);
            check(&o);
            ok++;
        }
        free(o.vals);
        sl_release_memory();
        int64_t live = tu_alloc_live_bytes();
        if (live != 0)
            print_error("%s: failing allocation %lld of %lld: %lld bytes never freed\n", what,
                        (long long)k, (long long)calls, (long long)live);
        assert_int_equal(live, 0);
        assert_int_equal(sl_memory_in_use(), 0);
        if (calls < k) {
            /* nothing failed: this run must have succeeded */
            assert_int_equal(o.rc, SL_EOF);
            break;
        }
    }
    tu_alloc_fail_at(0);
    print_message("%s: %lld allocation points, %lld runs succeeded anyway\n", what,
                  (long long)k - 1, (long long)ok - 1);
}

/* range -> map -> batch -> prefetch */
static sl_dataset *build_simple(void)
{
    sl_dataset *ds = sl_range(0, 50, 1);
    ds = sl_map(ds, "alloc", alloc_cb, NULL, 2, 0);
    ds = sl_batch(ds, 8, 0);
    return sl_prefetch(ds, 2);
}

static void check_simple(const outcome *o)
{
    assert_int_equal(o->n, 50);
    for (size_t i = 0; i < o->n; i++)
        assert_int_equal(o->vals[i], (int64_t)i);
}

/* range -> shuffle -> map -> cache (memory) -> repeat(2) -> batch -> prefetch */
static sl_dataset *build_full(void)
{
    sl_dataset *ds = sl_range(0, 40, 1);
    ds = sl_shuffle(ds, 16, 3, 0);
    ds = sl_map(ds, "alloc", alloc_cb, NULL, 3, 0);
    ds = sl_cache(ds, NULL);
    ds = sl_repeat(ds, 2);
    ds = sl_batch(ds, 8, 0);
    return sl_prefetch(ds, 2);
}

static void check_full(const outcome *o)
{
    assert_int_equal(o->n, 80);
    unsigned char seen[40] = {0};
    for (size_t i = 0; i < 40; i++) {
        assert_true(o->vals[i] >= 0 && o->vals[i] < 40);
        assert_int_equal(seen[o->vals[i]], 0);
        seen[o->vals[i]] = 1;
        /* the second pass is served from the cache: the same order */
        assert_int_equal(o->vals[40 + i], o->vals[i]);
    }
}

/* from_files (strings) and from_tensors (views) through map and batch */
static int label_of(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    int rc = sl_element_add_shared(el, in, 1);
    if (rc == 0)
        rc = sl_element_add_shared(el, in, 0);
    if (rc) {
        sl_element_release(el);
        return rc;
    }
    *out = el;
    return 0;
}

static sl_dataset *build_files(void)
{
    const char *paths[12];
    int64_t labels[12];
    char names[12][32];
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "/data/file-%02d.jpg", i);
        paths[i] = names[i];
        labels[i] = i;
    }
    sl_dataset *ds = sl_from_files(paths, labels, 12);
    ds = sl_map(ds, "label", label_of, NULL, 2, 0);
    ds = sl_batch(ds, 5, 0);
    return sl_prefetch(ds, 1);
}

static void check_files(const outcome *o)
{
    assert_int_equal(o->n, 12);
    for (size_t i = 0; i < o->n; i++)
        assert_int_equal(o->vals[i], (int64_t)i);
}

static sl_dataset *build_tensors(void)
{
    sl_element *el = sl_element_create(2);
    if (!el)
        return NULL;
    int64_t s0[1] = {30}, s1[2] = {30, ROW};
    int64_t *a = sl_element_add_tensor(el, SL_INT64, 1, s0);
    unsigned char *b = a ? sl_element_add_tensor(el, SL_UINT8, 2, s1) : NULL;
    if (!b) {
        sl_element_release(el);
        return NULL;
    }
    for (int i = 0; i < 30; i++) {
        a[i] = i;
        memset(b + i * ROW, i, ROW);
    }
    return sl_prefetch(sl_batch(sl_from_tensor_slices(el), 7, 0), 2);
}

static void check_tensors(const outcome *o)
{
    assert_int_equal(o->n, 30);
    for (size_t i = 0; i < o->n; i++)
        assert_int_equal(o->vals[i], (int64_t)i);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    /* first: nothing in this program has touched the library yet */
    tu_alloc_install();
    torture(build_simple, check_simple, 2, "range-map-batch-prefetch");
    torture(build_full, check_full, 2, "shuffle-map-cache-repeat");
    torture(build_files, check_files, 1, "from_files-map-batch");
    torture(build_tensors, check_tensors, 1, "from_tensors-batch");
    sl_release_memory();
    assert_int_equal(tu_alloc_live_bytes(), 0);
    tu_alloc_uninstall();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
