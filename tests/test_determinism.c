/* Determinism: pipelines mixing every op give byte-identical output whatever
 * the thread count and from run to run, and a different global seed gives a
 * different output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"

/* (value, noise) from a scalar value or from a [2] row; noise gains a
 * per-element random draw, and a float64 uniform draw rides along. A short
 * delay for some values scrambles completion order. */
static int add_noise(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    const sl_tensor *t = sl_element_tensor(in, 0);
    int64_t v, n = 0;
    if (sl_tensor_ndim(t) == 0) {
        v = sl_tensor_int64(t);
    } else {
        const int64_t *d = sl_tensor_data(t);
        v = d[0];
        n = d[1];
    }
    if (tu_mix((uint64_t)v) % 8 == 0)
        tu_sleep_us(50);
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    int64_t shape[1] = {2};
    int64_t *d = sl_element_add_tensor(el, SL_INT64, 1, shape);
    double *u = sl_element_add_tensor(el, SL_FLOAT64, 0, NULL);
    if (!d || !u) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    d[0] = v;
    d[1] = n + (int64_t)(sl_map_ctx_random(ctx) % 1000000);
    *u = sl_map_ctx_uniform(ctx);
    *out = el;
    return 0;
}

static int keep_most(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)user;
    const int64_t *d = sl_tensor_data(sl_element_tensor(el, 0));
    return d[1] % 5 != 0;
}

typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        while (b->n + n > b->cap)
            b->cap = b->cap ? 2 * b->cap : 4096;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* Every element's tensors (dtype, shape, data) one after the other. */
static bytes run_bytes(sl_dataset *ds, int threads, int64_t seed)
{
    bytes b = {0};
    sl_options *o = tu_opts(threads, seed);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        int n = sl_element_size(el);
        put(&b, &n, sizeof n);
        for (int i = 0; i < n; i++) {
            const sl_tensor *t = sl_element_tensor(el, i);
            int dt = sl_tensor_dtype(t), nd = sl_tensor_ndim(t);
            size_t nb = sl_tensor_nbytes(t);
            put(&b, &dt, sizeof dt);
            put(&b, &nd, sizeof nd);
            put(&b, sl_tensor_shape(t), (size_t)nd * sizeof(int64_t));
            put(&b, &nb, sizeof nb);
            put(&b, sl_tensor_data(t), nb);
        }
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        print_error("iteration failed: %d %s\n", rc, sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    sl_iterator_free(it);
    sl_options_free(o);
    return b;
}

/* Identical bytes for threads 1, 2 and 8, twice each; another seed differs.
 * Returns the reference output (free b.p). */
static bytes check_deterministic(sl_dataset *ds)
{
    assert_non_null(ds);
    bytes ref = run_bytes(ds, 1, 1234);
    assert_true(ref.n > 0);
    const int thr[] = {1, 2, 8};
    for (int t = 0; t < 3; t++) {
        for (int run = 0; run < 2; run++) {
            if (t == 0 && run == 0)
                continue;
            bytes got = run_bytes(ds, thr[t], 1234);
            if (got.n != ref.n || memcmp(got.p, ref.p, ref.n) != 0)
                print_error("threads %d run %d: output differs (%zu vs %zu bytes)\n", thr[t],
                            run, got.n, ref.n);
            assert_int_equal(got.n, ref.n);
            assert_memory_equal(got.p, ref.p, ref.n);
            free(got.p);
        }
    }
    bytes other = run_bytes(ds, 2, 4321);
    assert_true(other.n != ref.n || memcmp(other.p, ref.p, ref.n) != 0);
    free(other.p);
    return ref;
}

/* The int64 values of tensor 0 of every element, flattened. */
static int64_t *values(sl_dataset *ds, int64_t seed, size_t *n)
{
    sl_options *o = tu_opts(2, seed);
    int64_t *v;
    assert_int_equal(tu_collect(ds, o, &v, n, NULL), SL_EOF);
    sl_options_free(o);
    return v;
}

static void test_core_pipeline(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 1000, 1);
    ds = sl_shuffle(ds, 64, 42, 0);
    ds = sl_map(ds, "noise", add_noise, NULL, SL_AUTOTUNE, 0);
    ds = sl_batch(ds, 32, 0);
    ds = sl_prefetch(ds, 2);
    bytes ref = check_deterministic(ds);
    free(ref.p);
    /* the rows really are shuffled values with noise: a permutation of 0..999 */
    size_t n;
    int64_t *v = values(ds, 1234, &n);
    assert_int_equal(n, 2000);
    unsigned char seen[1000] = {0};
    int moved = 0;
    for (size_t i = 0; i < 1000; i++) {
        int64_t x = v[2 * i];
        assert_true(x >= 0 && x < 1000);
        assert_int_equal(seen[x], 0);
        seen[x] = 1;
        moved += x != (int64_t)i;
    }
    assert_true(moved > 500);
    free(v);
    sl_dataset_release(ds);
}

static void test_repeat_pipeline(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 1000, 1);
    ds = sl_shuffle(ds, 64, 42, 0);
    ds = sl_map(ds, "noise", add_noise, NULL, 4, 0);
    ds = sl_repeat(ds, 2);
    ds = sl_batch(ds, 32, 0);
    ds = sl_prefetch(ds, 2);
    bytes ref = check_deterministic(ds);
    free(ref.p);
    /* each epoch is a permutation, and the second is not the first again */
    size_t n;
    int64_t *v = values(ds, 1234, &n);
    assert_int_equal(n, 4000);
    int same_order = 0, same_noise = 0;
    for (int e = 0; e < 2; e++) {
        unsigned char seen[1000] = {0};
        for (size_t i = 0; i < 1000; i++) {
            int64_t x = v[2 * (1000 * e + i)];
            assert_true(x >= 0 && x < 1000);
            assert_int_equal(seen[x], 0);
            seen[x] = 1;
        }
    }
    for (size_t i = 0; i < 1000; i++) {
        same_order += v[2 * i] == v[2 * (1000 + i)];
        same_noise += v[2 * i + 1] == v[2 * (1000 + i) + 1];
    }
    assert_true(same_order < 500);
    assert_true(same_noise < 10);
    free(v);
    sl_dataset_release(ds);
}

/* Every op there is, with a shuffle and a map drawing from the global seed. */
static sl_dataset *every_op(void)
{
    sl_dataset *ds = sl_range(0, 2000, 1);
    ds = sl_shard(ds, 2, 1);
    ds = sl_skip(ds, 5);
    ds = sl_take(ds, 900);
    ds = sl_cache(ds, NULL);
    ds = sl_shuffle(ds, 64, -1, 0);
    ds = sl_map(ds, "noise", add_noise, NULL, 4, 0);
    ds = sl_filter(ds, "most", keep_most, NULL);
    ds = sl_repeat(ds, 2);
    ds = sl_prefetch(ds, 3);
    ds = sl_batch(ds, 32, 0);
    ds = sl_unbatch(ds);
    ds = sl_map(ds, "more_noise", add_noise, NULL, SL_AUTOTUNE, 0);
    ds = sl_batch(ds, 16, SL_DROP_REMAINDER);
    ds = sl_prefetch(ds, 4);
    return ds;
}

static void test_every_op(void **state)
{
    (void)state;
    sl_dataset *ds = every_op();
    bytes ref = check_deterministic(ds);
    /* built twice, the same pipeline gives the same bytes */
    sl_dataset *again = every_op();
    bytes b = run_bytes(again, 2, 1234);
    assert_int_equal(b.n, ref.n);
    assert_memory_equal(b.p, ref.p, ref.n);
    free(b.p);
    free(ref.p);
    /* odd values from 11 to 1809, about 80% of them kept, in each epoch */
    size_t n;
    int64_t *v = values(ds, 1234, &n);
    assert_true(n > 2 * 2 * 600 && n < 2 * 2 * 900);
    for (size_t i = 0; i < n; i += 2)
        assert_true(v[i] % 2 == 1 && v[i] >= 11 && v[i] <= 1809);
    free(v);
    sl_dataset_release(again);
    sl_dataset_release(ds);
}

static void test_shuffle_all(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 1500, 1);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, -1, 0);
    ds = sl_repeat(ds, 2);
    ds = sl_map(ds, "noise", add_noise, NULL, 8, 0);
    ds = sl_batch(ds, 64, 0);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    bytes ref = check_deterministic(ds);
    free(ref.p);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_pipeline),
        cmocka_unit_test(test_repeat_pipeline),
        cmocka_unit_test(test_every_op),
        cmocka_unit_test(test_shuffle_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
