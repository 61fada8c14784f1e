/* The ops that rebuild their state by replaying their input when restored
 * (scan, unique, rejection_resample, group_by_window, pack, window) follow
 * one rule (graph/sync.c): the replay runs to the saved counts, and a
 * replay that comes up short, gives other counts or fails is an error
 * naming the op and the counts; one that matches resumes where the pass
 * was. The input changes under a fingerprint that cannot see it: a filter
 * whose predicate reads a limit, and a map that fails on demand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static int64_t limit;   /* the filter keeps x < limit */
static int64_t fail_at; /* the map fails on this value (-1: never) */

static int below_limit(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)user;
    return sl_tensor_int64(sl_element_tensor(el, 0)) < limit;
}

static int maybe_fail(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(in, 0));
    if (x == fail_at) {
        char msg[64];
        snprintf(msg, sizeof msg, "no element %lld today", (long long)x);
        return sl_set_last_error(SL_EIO, msg);
    }
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static int running_sum(sl_map_ctx *ctx, const sl_element *state, const sl_element *in,
                       sl_element **new_state, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t s = sl_tensor_int64(sl_element_tensor(state, 0)) +
                sl_tensor_int64(sl_element_tensor(in, 0));
    *new_state = sl_element_create(1);
    sl_element_add_int64(*new_state, s);
    *out = sl_element_retain(*new_state);
    return 0;
}

static int mod3(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)user;
    *key = sl_tensor_int64(sl_element_tensor(el, 0)) % 3;
    return 0;
}

static int half(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    sl_element *el = sl_element_create(1);
    sl_element_add_int64(el, sl_tensor_int64(sl_element_tensor(in, 0)) / 2);
    *out = el;
    return 0;
}

static int seq(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(in, 0)), n = x % 4 + 1;
    sl_element *el = sl_element_create(1);
    int64_t *p = sl_element_add_tensor(el, SL_INT64, 1, &n);
    for (int64_t i = 0; i < n; i++)
        p[i] = x;
    *out = el;
    return 0;
}

static sl_dataset *batch_of_two(int64_t key, sl_dataset *window, void *user)
{
    (void)key, (void)user;
    return sl_batch(window, 2, 0);
}

/* range(0, 60) -> filter(x < limit) -> map(fails at fail_at) -> the op */
static sl_dataset *pipeline(const char *op)
{
    sl_dataset *ds = sl_filter(sl_range(0, 60, 1), "limit", below_limit, NULL);
    ds = sl_map(ds, "maybe_fail", maybe_fail, NULL, 1, 0);
    if (!strcmp(op, "scan")) {
        sl_element *zero = sl_element_create(1);
        sl_element_add_int64(zero, 0);
        ds = sl_scan(ds, "sum", zero, running_sum, NULL);
        sl_element_release(zero);
    } else if (!strcmp(op, "unique")) {
        ds = sl_unique(sl_map(ds, "half", half, NULL, 1, 0));
    } else if (!strcmp(op, "rejection_resample")) {
        static const double target[] = {0.4, 0.3, 0.3};
        ds = sl_rejection_resample(ds, "resample", mod3, NULL, target, 3, NULL, 7, 0);
    } else if (!strcmp(op, "group_by_window")) {
        ds = sl_group_by_window(ds, "groups", mod3, batch_of_two, 2, NULL, NULL);
    } else if (!strcmp(op, "pack")) {
        ds = sl_pack(sl_map(ds, "seq", seq, NULL, 1, 0), 6, 2);
    } else if (!strcmp(op, "window")) {
        ds = sl_window(ds, 3, 2, 1, 0);
    }
    assert_non_null(ds);
    return ds;
}

static const char *const ops[] = {"scan",            "unique", "rejection_resample",
                                   "group_by_window", "pack",   "window"};

/* The state after k elements of the op over the whole input. */
static unsigned char *state_after(sl_dataset *ds, int k, int64_t *len)
{
    limit = 60;
    fail_at = -1;
    sl_options *o = tu_opts(1, 5);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    for (int i = 0; i < k; i++) {
        sl_element *el;
        assert_int_equal(sl_next(it, &el), 0);
        sl_element_release(el);
    }
    *len = sl_iterator_save(it, NULL, 0);
    assert_true(*len > 0);
    unsigned char *state = malloc((size_t)*len);
    assert_int_equal(sl_iterator_save(it, state, (size_t)*len), *len);
    sl_iterator_free(it);
    sl_options_free(o);
    return state;
}

/* Restores the state with the input as limit and fail_at make it: NULL
 * with the message in sl_last_error(), or the iterator. */
static sl_iterator *restore(sl_dataset *ds, const unsigned char *state, int64_t len)
{
    sl_options *o = tu_opts(1, 5);
    sl_iterator *it = sl_iterator_restore(ds, state, (size_t)len, o);
    sl_options_free(o);
    return it;
}

/* Tensor 0's values of the elements after the first `skip`, flattened
 * (int64 all: the ops' outputs here hold int64 first). */
static size_t rest_of(sl_iterator *it, int skip, int64_t *out, size_t cap)
{
    size_t n = 0;
    sl_element *el;
    for (int i = 0; sl_next(it, &el) == 0; i++) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_dtype(t), SL_INT64);
        for (int64_t j = 0; i >= skip && j < sl_tensor_count(t); j++) {
            assert_true(n < cap);
            out[n++] = ((const int64_t *)sl_tensor_data(t))[j];
        }
        sl_element_release(el);
    }
    return n;
}

static void test_replay_that_matches_resumes(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        sl_dataset *ds = pipeline(ops[i]);
        int64_t len;
        unsigned char *state = state_after(ds, 4, &len);
        static int64_t want[4096], got[4096];
        sl_options *o = tu_opts(1, 5);
        sl_iterator *it = sl_iterator_create(ds, o);
        size_t nwant = rest_of(it, 4, want, 4096);
        sl_iterator_free(it);
        sl_options_free(o);
        it = restore(ds, state, len);
        if (!it)
            fail_msg("%s: %s", ops[i], sl_last_error());
        size_t ngot = rest_of(it, 0, got, 4096);
        sl_iterator_free(it);
        assert_true(nwant > 0);
        assert_int_equal(ngot, nwant);
        assert_memory_equal(got, want, nwant * sizeof *got);
        free(state);
        sl_dataset_release(ds);
    }
}

static void test_replay_that_comes_up_short(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        sl_dataset *ds = pipeline(ops[i]);
        int64_t len;
        unsigned char *state = state_after(ds, 6, &len);
        limit = 2; /* the input now ends after two elements */
        sl_iterator *it = restore(ds, state, len);
        if (it)
            fail_msg("%s: restored over a shorter input", ops[i]);
        const char *msg = sl_last_error();
        print_message("%s\n", msg);
        assert_int_equal(sl_last_error_code(), SL_EMISMATCH);
        assert_non_null(strstr(msg, ops[i]));
        assert_non_null(strstr(msg, "replaying its input gives"));
        free(state);
        sl_dataset_release(ds);
    }
}

static void test_replay_that_fails(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        sl_dataset *ds = pipeline(ops[i]);
        int64_t len;
        unsigned char *state = state_after(ds, 6, &len);
        limit = 60;
        fail_at = 1; /* the input now fails on its second element */
        sl_iterator *it = restore(ds, state, len);
        if (it)
            fail_msg("%s: restored over an input that fails", ops[i]);
        const char *msg = sl_last_error();
        print_message("%s\n", msg);
        assert_int_equal(sl_last_error_code(), SL_EIO);
        assert_non_null(strstr(msg, ops[i]));
        assert_non_null(strstr(msg, "replaying its input failed"));
        assert_non_null(strstr(msg, "no element 1 today"));
        free(state);
        sl_dataset_release(ds);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_that_matches_resumes),
        cmocka_unit_test(test_replay_that_comes_up_short),
        cmocka_unit_test(test_replay_that_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
