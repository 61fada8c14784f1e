/* interleave: tf.data's documented orders, the same output whatever the
 * threads and parallelism, completion order as a permutation, errors of
 * the per-element function through the policy, TFRecord shards read
 * interleaved, and a saved position that resumes exactly. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recordutil.h"
#include "testutil.h"

/* tf.data's example: lambda x: Dataset.from_tensors(x).repeat(6) */
static sl_dataset *repeat6(const sl_element *el, void *user)
{
    (void)user;
    return sl_repeat(sl_from_element((sl_element *)el), 6);
}

/* x -> range(x * 10, x * 10 + x): inputs of different lengths */
static sl_dataset *ranged(const sl_element *el, void *user)
{
    (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(el, 0));
    return sl_range(x * 10, x * 10 + x, 1);
}

static sl_dataset *failing(const sl_element *el, void *user)
{
    (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(el, 0));
    if (x == 3)
        return sl_range(0, 1, 0); /* step 0: NULL with SL_EINVAL set */
    return sl_range(x * 10, x * 10 + 2, 1);
}

static sl_options *opts(int threads, int policy)
{
    sl_options *o = tu_opts(threads, 1);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    return o;
}

static void expect(sl_dataset *ds, int threads, const int64_t *want, size_t n)
{
    sl_options *o = opts(threads, SL_ERRORS_FAIL);
    int64_t *got;
    size_t m;
    char msg[1024];
    int rc = tu_collect(ds, o, &got, &m, msg);
    if (rc != SL_EOF)
        print_error("%s\n", msg);
    assert_int_equal(rc, SL_EOF);
    if (m != n || memcmp(got, want, n * sizeof *want) != 0) {
        print_error("got %zu:", m);
        for (size_t i = 0; i < m; i++)
            print_error(" %lld", (long long)got[i]);
        print_error("\n");
    }
    assert_int_equal(m, n);
    assert_memory_equal(got, want, n * sizeof *want);
    free(got);
    sl_options_free(o);
}

static void test_tf_examples(void **state)
{
    (void)state;
    /* Dataset.range(1, 6).interleave(lambda x: from_tensors(x).repeat(6),
     * cycle_length=2, block_length=4) */
    static const int64_t want[] = {1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3,
                                   4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5};
    for (int p = 1; p <= 2; p++)
        for (int threads = 1; threads <= 4; threads *= 2) {
            sl_dataset *ds = sl_interleave(sl_range(1, 6, 1), repeat6, NULL, 2, 4,
                                           p == 2 ? SL_AUTOTUNE : 1, 0);
            expect(ds, threads, want, sizeof want / sizeof *want);
            sl_dataset_release(ds);
        }
    /* cycle_length 1 is flat_map */
    static const int64_t flat[] = {10, 20, 21, 30, 31, 32, 40, 41, 42, 43};
    sl_dataset *ds = sl_interleave(sl_range(1, 5, 1), ranged, NULL, 1, 3, 1, 0);
    expect(ds, 2, flat, 10);
    sl_dataset_release(ds);
    /* uneven inputs, block 1, cycle 3: the order tf.data's algorithm gives */
    static const int64_t uneven[] = {10, 20, 30, 21, 31, 40, 32, 41, 50, 42, 51, 43, 52,
                                     53, 54};
    ds = sl_interleave(sl_range(1, 6, 1), ranged, NULL, 3, 1, 3, 0);
    expect(ds, 4, uneven, sizeof uneven / sizeof *uneven);
    sl_dataset_release(ds);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_nondeterministic(void **state)
{
    (void)state;
    sl_dataset *ds = sl_interleave(sl_range(1, 30, 1), ranged, NULL, 4, 2, 4,
                                   SL_NONDETERMINISTIC);
    sl_options *o = opts(4, SL_ERRORS_FAIL);
    int64_t *got;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_EOF);
    assert_int_equal(n, 29 * 30 / 2);
    int64_t *want = malloc(n * sizeof *want);
    size_t k = 0;
    for (int64_t x = 1; x < 30; x++)
        for (int64_t i = 0; i < x; i++)
            want[k++] = x * 10 + i;
    qsort(got, n, sizeof *got, cmp64);
    qsort(want, n, sizeof *want, cmp64);
    assert_memory_equal(got, want, n * sizeof *got);
    free(got);
    free(want);
    /* no position in completion order */
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    assert_int_equal(sl_iterator_save(it, NULL, 0), SL_EUNSUPPORTED);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_fn_errors(void **state)
{
    (void)state;
    sl_dataset *ds = sl_interleave(sl_range(1, 6, 1), failing, NULL, 2, 1, 2, 0);
    sl_options *o = opts(2, SL_ERRORS_FAIL);
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, o, &got, &n, msg), SL_EINVAL);
    assert_non_null(strstr(msg, "interleave"));
    free(got);
    sl_options_free(o);
    o = opts(2, SL_ERRORS_SKIP);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    int count = 0, rc;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(sl_tensor_int64(sl_element_tensor(el, 0)) / 10 != 3);
        sl_element_release(el);
        count++;
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(count, 8);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 1);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* ---- TFRecord shards ---- */

static char dir[256];
#define SHARDS 6
#define PER_SHARD 25

static void write_shards(void)
{
    for (int s = 0; s < SHARDS; s++) {
        ru_buf b = {0};
        for (int r = 0; r < PER_SHARD + s; r++) {
            int64_t v = s * 1000 + r;
            ru_record(&b, &v, sizeof v);
        }
        char p[512];
        snprintf(p, sizeof p, "%s/s%d.tfrecord", dir, s);
        ru_write(p, b.p, b.n);
        free(b.p);
    }
}

/* record bytes -> int64 */
static int decode(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    size_t len;
    const char *s = sl_tensor_string(sl_element_tensor(in, 0), 0, &len);
    int64_t v;
    if (len != sizeof v)
        return sl_map_ctx_error(ctx, SL_ECORRUPT, "bad record");
    memcpy(&v, s, sizeof v);
    sl_element *el = sl_element_create(1);
    sl_element_add_int64(el, v);
    *out = el;
    return 0;
}

static sl_dataset *shards(int cycle, int block, int p)
{
    char pat[300];
    snprintf(pat, sizeof pat, "%s/s*.tfrecord", dir);
    const char *pats[] = {pat};
    sl_dataset *ds = sl_list_files(pats, 1, 0, -1);
    ds = sl_interleave(ds, sl_tfrecord_fn, NULL, cycle, block, p, 0);
    return sl_prefetch(sl_map(ds, "decode", decode, NULL, 2, 0), 4);
}

static void test_tfrecord_shards(void **state)
{
    (void)state;
    /* the expected order, by tf.data's algorithm over the known lengths */
    int64_t want[SHARDS * PER_SHARD + SHARDS * (SHARDS - 1) / 2];
    size_t n = 0;
    int cycle = 4, block = 3, len[SHARDS], pos[SHARDS];
    int slot[4] = {-1, -1, -1, -1}, next = 0, open = 0, ci = 0, bi = 0;
    for (int s = 0; s < SHARDS; s++)
        len[s] = PER_SHARD + s, pos[s] = 0;
    bool end = false;
    while (!end || open > 0) {
        if (slot[ci] >= 0) {
            int s = slot[ci];
            if (pos[s] < len[s]) {
                want[n++] = s * 1000 + pos[s]++;
                if (++bi == block)
                    ci = (ci + 1) % cycle, bi = 0;
                continue;
            }
            slot[ci] = -1, open--;
            ci = (ci + 1) % cycle, bi = 0;
        } else if (!end) {
            if (next < SHARDS)
                slot[ci] = next++, open++;
            else
                end = true;
        } else {
            ci = (ci + 1) % cycle, bi = 0;
        }
    }
    assert_int_equal(n, sizeof want / sizeof *want);
    for (int p = 1; p <= 4; p *= 2) {
        sl_dataset *ds = shards(cycle, block, p == 4 ? SL_AUTOTUNE : p);
        expect(ds, p, want, n);
        sl_dataset_release(ds);
    }
}

/* Stopped after k, saved, restored in a fresh iterator: the same rest. */
static void test_resume(void **state)
{
    (void)state;
    sl_dataset *ds = shards(3, 2, 2);
    sl_options *o = opts(2, SL_ERRORS_FAIL);
    int64_t *full;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &full, &n, NULL), SL_EOF);
    size_t ks[] = {0, 1, 2, 5, 24, 25, 26, 77, n - 1, n};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        for (size_t k = 0; k < ks[i]; k++) {
            assert_int_equal(sl_next(it, &el), 0);
            assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), full[k]);
            sl_element_release(el);
        }
        unsigned char st[4096];
        int64_t len = sl_iterator_save(it, st, sizeof st);
        if (len < 0)
            print_error("save: %s\n", sl_last_error());
        assert_true(len > 0 && len <= (int64_t)sizeof st);
        sl_iterator_free(it);
        sl_dataset *fresh = shards(3, 2, 2);
        sl_options *o2 = opts(4, SL_ERRORS_FAIL);
        it = sl_iterator_restore(fresh, st, (size_t)len, o2);
        if (!it)
            print_error("restore at %zu: %s\n", ks[i], sl_last_error());
        assert_non_null(it);
        size_t k = ks[i];
        int rc;
        while ((rc = sl_next(it, &el)) == 0) {
            assert_true(k < n);
            if (sl_tensor_int64(sl_element_tensor(el, 0)) != full[k])
                print_error("resumed at %zu: element %zu is %lld, want %lld\n", ks[i], k,
                            (long long)sl_tensor_int64(sl_element_tensor(el, 0)),
                            (long long)full[k]);
            assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), full[k]);
            sl_element_release(el);
            k++;
        }
        assert_int_equal(rc, SL_EOF);
        assert_int_equal(k, n);
        sl_iterator_free(it);
        sl_options_free(o2);
        sl_dataset_release(fresh);
    }
    free(full);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
    write_shards();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tf_examples),     cmocka_unit_test(test_nondeterministic),
        cmocka_unit_test(test_fn_errors),       cmocka_unit_test(test_tfrecord_shards),
        cmocka_unit_test(test_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
