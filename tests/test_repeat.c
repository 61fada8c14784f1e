/* repeat(count): passes, termination on an empty pass, per-pass epochs,
 * cardinality. */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static int drop_all(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el;
    if (user)
        (*(int *)user)++;
    return 0;
}

/* Records, per call, the epoch, the index and the first random draw. */
typedef struct record {
    int n;
    int64_t epoch[64], index[64];
    uint64_t rnd[64];
} record;

static int record_ctx(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)el;
    record *r = user;
    if (r->n < 64) {
        r->epoch[r->n] = sl_map_ctx_epoch(ctx);
        r->index[r->n] = sl_map_ctx_index(ctx);
        r->rnd[r->n] = sl_map_ctx_random(ctx);
        r->n++;
    }
    return 1;
}

static void test_passes(void **state)
{
    (void)state;
    sl_dataset *ds = sl_repeat(sl_range(0, 3, 1), 3);
    int64_t want[] = {0, 1, 2, 0, 1, 2, 0, 1, 2};
    tu_expect(ds, want, 9);
    assert_int_equal(sl_dataset_cardinality(ds), 9);
    assert_string_equal(sl_dataset_name(ds), "repeat");
    sl_dataset_release(ds);

    ds = sl_repeat(sl_range(0, 3, 1), 1);
    tu_expect(ds, want, 3);
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    sl_dataset_release(ds);
}

static void test_forever(void **state)
{
    (void)state;
    sl_dataset *ds = sl_take(sl_repeat(sl_range(0, 3, 1), -1), 10);
    int64_t want[] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
    tu_expect(ds, want, 10);
    sl_dataset_release(ds);

    /* long enough to be sure passes keep coming */
    ds = sl_take(sl_repeat(sl_range(0, 1, 1), -1), 5000);
    assert_int_equal(tu_count(ds, NULL), 5000);
    sl_dataset_release(ds);
}

static void test_empty_input_terminates(void **state)
{
    (void)state;
    sl_dataset *ds = sl_repeat(sl_range(0, 0, 1), -1);
    assert_int_equal(tu_count(ds, NULL), 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);

    ds = sl_repeat(sl_range(0, 0, 1), 5);
    assert_int_equal(tu_count(ds, NULL), 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);

    /* an input that is empty only at run time: one pass, then the end */
    int calls = 0;
    ds = sl_repeat(sl_filter(sl_range(0, 4, 1), "none", drop_all, &calls), -1);
    assert_int_equal(sl_dataset_cardinality(ds), SL_INFINITE); /* as tf.data */
    assert_int_equal(tu_count(ds, NULL), 0);
    assert_int_equal(calls, 4);
    sl_dataset_release(ds);
}

static void test_zero(void **state)
{
    (void)state;
    int calls = 0;
    sl_dataset *ds = sl_repeat(sl_filter(sl_range(0, 4, 1), NULL, drop_all, &calls), 0);
    assert_int_equal(tu_count(ds, NULL), 0);
    assert_int_equal(calls, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);
}

static void test_cardinality(void **state)
{
    (void)state;
    sl_dataset *inf = sl_repeat(sl_range(0, 3, 1), -1);
    sl_dataset *unk = sl_filter(sl_range(0, 3, 1), NULL, drop_all, NULL);
    sl_dataset *big = sl_range(0, INT64_MAX / 2, 1);
    struct {
        sl_dataset *in;
        int64_t count, card;
    } cases[] = {
        {inf, 2, SL_INFINITE}, {inf, -1, SL_INFINITE}, {inf, 0, 0},
        {unk, 2, SL_UNKNOWN},  {unk, -1, SL_INFINITE}, {unk, 0, 0},
        {big, 2, INT64_MAX / 2 * 2}, {big, 3, SL_UNKNOWN}, /* overflow */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_dataset *ds = sl_repeat(sl_dataset_retain(cases[i].in), cases[i].count);
        assert_non_null(ds);
        assert_int_equal(sl_dataset_cardinality(ds), cases[i].card);
        sl_dataset_release(ds);
    }
    sl_dataset_release(inf);
    sl_dataset_release(unk);
    sl_dataset_release(big);
}

static void test_bad_args(void **state)
{
    (void)state;
    sl_clear_error();
    assert_null(sl_repeat(sl_range(0, 3, 1), -2));
    assert_non_null(strstr(sl_last_error(), "repeat"));
    sl_clear_error();
    assert_null(sl_repeat(NULL, 2));
    assert_string_equal(sl_last_error(), "");
}

static void test_eof_repeats(void **state)
{
    (void)state;
    sl_dataset *ds = sl_repeat(sl_range(0, 2, 1), 2);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    for (int k = 0; k < 4; k++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), k % 2);
        sl_element_release(el);
    }
    for (int k = 0; k < 3; k++)
        assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* Each pass is a new epoch of the input: per-element streams differ from
 * pass to pass but not from run to run. */
static void test_epochs(void **state)
{
    (void)state;
    record a = {0}, b = {0};
    sl_dataset *ds = sl_repeat(sl_filter(sl_range(0, 2, 1), "rec", record_ctx, &a), 3);
    sl_options *o = tu_opts(1, 42);
    assert_int_equal(tu_count(ds, o), 6);
    sl_dataset_release(ds);
    ds = sl_repeat(sl_filter(sl_range(0, 2, 1), "rec", record_ctx, &b), 3);
    assert_int_equal(tu_count(ds, o), 6);
    sl_dataset_release(ds);
    assert_int_equal(a.n, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(a.epoch[i], i / 2);
        assert_int_equal(a.index[i], i % 2);
        assert_true(a.rnd[i] == b.rnd[i]);
        for (int j = 0; j < i; j++)
            assert_true(a.rnd[i] != a.rnd[j]);
    }

    /* nested finite repeats number the epochs as if flattened */
    record c = {0};
    ds = sl_repeat(sl_repeat(sl_filter(sl_range(0, 1, 1), "rec", record_ctx, &c), 2), 3);
    assert_int_equal(tu_count(ds, o), 6);
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN); /* filter's */
    sl_dataset_release(ds);
    assert_int_equal(c.n, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(c.epoch[i], i);
    sl_options_free(o);
}

/* ---- a draining shuffle primes the next pass ---- */

/* Keeps every element, counting the calls (the pulls under the shuffle);
 * fails on call fail_at (1-based) when set. */
typedef struct pulls {
    int calls, fail_at;
} pulls;

static int count_pulls(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)el;
    pulls *p = user;
    if (++p->calls == p->fail_at)
        return sl_map_ctx_error(ctx, SL_ECORRUPT, "count_pulls: a bad element");
    return 1;
}

#define OV_N 40
#define OV_BUF 8
#define OV_PASSES 3

static sl_dataset *overlap_ds(pulls *p)
{
    sl_dataset *ds = sl_filter(sl_range(0, OV_N, 1), "pulls", count_pulls, p);
    return sl_repeat(sl_shuffle(ds, OV_BUF, 7, 0), OV_PASSES);
}

static int64_t next_i64(sl_iterator *it)
{
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    int64_t v = sl_tensor_int64(sl_element_tensor(el, 0));
    sl_element_release(el);
    return v;
}

/* Pass 0's input ends with OV_BUF - 1 elements still to give (the last
 * pull, which met the end, came with the give before them); each of
 * those pulls one element into pass 1's buffer, so the pass starts with
 * all but one pulled. Without priming, the last element of pass 0 leaves
 * the count at OV_N. */
static void test_draining_shuffle_primes_next_pass(void **state)
{
    (void)state;
    pulls p = {0};
    sl_dataset *ds = overlap_ds(&p);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    for (int i = 0; i < OV_N; i++)
        next_i64(it);
    assert_int_equal(p.calls, OV_N + OV_BUF - 1);
    next_i64(it); /* pass 1's first: the one pull left */
    assert_int_equal(p.calls, OV_N + OV_BUF);
    /* the last pass primes nothing after it */
    for (int i = 1; i < (OV_PASSES - 1) * OV_N; i++)
        next_i64(it);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_int_equal(p.calls, OV_PASSES * OV_N);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* Priming changes when the next pass pulls, not what it gives: a run
 * restored part-way through the drain (fewer steps primed) or at the
 * pass's end (none) gives what the primed run gave, on 1 and 4 threads. */
static void test_priming_keeps_the_output(void **state)
{
    (void)state;
    int64_t whole[OV_PASSES * OV_N];
    pulls p = {0};
    sl_dataset *ds = overlap_ds(&p);
    sl_options *o1 = tu_opts(1, -1); /* (epoch 0, as every run below) */
    sl_iterator *it = sl_iterator_create(ds, o1);
    for (int i = 0; i < OV_PASSES * OV_N; i++)
        whole[i] = next_i64(it);
    sl_iterator_free(it);
    sl_options_free(o1);
    /* every pass a permutation, and the passes differ */
    for (int pass = 0; pass < OV_PASSES; pass++) {
        int seen[OV_N] = {0};
        for (int i = 0; i < OV_N; i++)
            seen[whole[pass * OV_N + i]]++;
        for (int i = 0; i < OV_N; i++)
            assert_int_equal(seen[i], 1);
    }
    assert_memory_not_equal(whole, whole + OV_N, OV_N * sizeof *whole);

    int cuts[] = {OV_N - OV_BUF + 2, OV_N - 3, OV_N, OV_N + 5, 2 * OV_N - 1};
    for (int threads = 1; threads <= 4; threads += 3)
        for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
            sl_options *o = tu_opts(threads, -1);
            it = sl_iterator_create(ds, o);
            for (int i = 0; i < cuts[c]; i++)
                assert_int_equal(next_i64(it), whole[i]);
            unsigned char st[4096];
            int64_t len = sl_iterator_save(it, st, sizeof st);
            assert_true(len > 0 && len <= (int64_t)sizeof st);
            sl_iterator_free(it);
            it = sl_iterator_restore(ds, st, (size_t)len, o);
            assert_non_null(it);
            for (int i = cuts[c]; i < OV_PASSES * OV_N; i++)
                assert_int_equal(next_i64(it), whole[i]);
            sl_element *el;
            assert_int_equal(sl_next(it, &el), SL_EOF);
            sl_iterator_free(it);
            sl_options_free(o);
        }
    sl_dataset_release(ds);
}

/* An input error met while priming comes out where it would have without:
 * at the next pass's first element, after all of this pass's. */
static void test_priming_error_comes_out_in_its_pass(void **state)
{
    (void)state;
    pulls p = {.fail_at = OV_N + 3}; /* pass 1's third pull: primed */
    sl_dataset *ds = overlap_ds(&p);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    for (int i = 0; i < OV_N; i++)
        next_i64(it);
    assert_true(p.calls >= p.fail_at);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
    assert_non_null(strstr(sl_iterator_errmsg(it), "count_pulls: a bad element"));
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_fingerprint(void **state)
{
    (void)state;
    sl_dataset *a = sl_repeat(sl_range(0, 3, 1), 2), *b = sl_repeat(sl_range(0, 3, 1), 2);
    sl_dataset *c = sl_repeat(sl_range(0, 3, 1), -1);
    assert_true(sl_dataset_fingerprint(a) == sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(c));
    sl_dataset_release(a);
    sl_dataset_release(b);
    sl_dataset_release(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_passes),
        cmocka_unit_test(test_forever),
        cmocka_unit_test(test_empty_input_terminates),
        cmocka_unit_test(test_zero),
        cmocka_unit_test(test_cardinality),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_eof_repeats),
        cmocka_unit_test(test_epochs),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_draining_shuffle_primes_next_pass),
        cmocka_unit_test(test_priming_keeps_the_output),
        cmocka_unit_test(test_priming_error_comes_out_in_its_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
