/* sl_tfrecord_indexed: random access over TFRecord shards by record index
 * (DALI's tfrecord2idx files, or built in one pass and kept beside the
 * shard), so shuffle(ALL) permutes records with no buffer and a saved
 * position seeks; bad indexes and bad records name the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "recordutil.h"
#include "testutil.h"

#define NSHARDS 3
#define PER 40 /* records per shard; shard 1 has none */

static char dir[256];
static char shard_path[NSHARDS][512];
static const char *shards[NSHARDS];

static size_t rec_len(int i)
{
    return i % 9 == 4 ? 70000 + (size_t)i : (size_t)i * 7;
}

static unsigned char *rec_data(int i, size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    for (size_t k = 0; k < n; k++)
        p[k] = (unsigned char)(tu_mix((uint64_t)i * 7919 + k) >> 13);
    return p;
}

/* Shards 0 and 2 hold records 0..PER-1 and PER..2PER-1; shard 1 is empty. */
static void write_shards(void)
{
    for (int k = 0; k < NSHARDS; k++) {
        snprintf(shard_path[k], sizeof shard_path[k], "%s/s%d.tfrecord", dir, k);
        shards[k] = shard_path[k];
        ru_buf b = {0};
        for (int i = 0; k != 1 && i < PER; i++) {
            int id = (k ? PER : 0) + i;
            size_t n = rec_len(id);
            unsigned char *p = rec_data(id, n);
            ru_record(&b, p, n);
            free(p);
        }
        ru_write(shard_path[k], b.p, b.n);
        free(b.p);
        char idx[600];
        snprintf(idx, sizeof idx, "%s.idx", shard_path[k]);
        unlink(idx);
    }
}

static int record_id(const sl_element *el)
{
    size_t len;
    const char *s = sl_tensor_string(sl_element_tensor(el, 0), 0, &len);
    for (int id = 0; id < 2 * PER; id++) {
        if (rec_len(id) != len)
            continue;
        unsigned char *want = rec_data(id, len);
        int same = memcmp(want, s, len) == 0;
        free(want);
        if (same)
            return id;
    }
    fail_msg("a record of %zu bytes that was never written", len);
    return -1;
}

static sl_options *opts(int threads, int policy)
{
    sl_options *o = tu_opts(threads, 5);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    return o;
}

/* The ids ds gives (at most max), and the iterator's end code. */
static int ids(sl_dataset *ds, sl_options *o, int *out, int max, int *end)
{
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        fail_msg("%s", sl_last_error());
    int n = 0, rc;
    sl_element *el;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(n < max);
        out[n++] = record_id(el);
        sl_element_release(el);
    }
    *end = rc;
    sl_iterator_free(it);
    return n;
}

static void test_in_order_and_index_written(void **state)
{
    (void)state;
    write_shards();
    sl_dataset *ds = sl_tfrecord_indexed(shards, NSHARDS, NULL, 0);
    if (!ds)
        fail_msg("%s", sl_last_error());
    assert_int_equal(sl_dataset_cardinality(ds), 2 * PER);
    int got[2 * PER], end;
    sl_options *o = opts(2, SL_ERRORS_FAIL);
    assert_int_equal(ids(ds, o, got, 2 * PER, &end), 2 * PER);
    assert_int_equal(end, SL_EOF);
    for (int i = 0; i < 2 * PER; i++)
        assert_int_equal(got[i], i);
    /* the index beside the shard is DALI's text, and the next build reads it */
    char idx[600];
    snprintf(idx, sizeof idx, "%s.idx", shards[0]);
    unsigned char *text;
    size_t size;
    tu_read_file(idx, &text, &size);
    char want[64];
    snprintf(want, sizeof want, "0 %zu\n%zu %zu\n", rec_len(0) + 16, rec_len(0) + 16,
             rec_len(1) + 16);
    assert_true(size > strlen(want));
    assert_memory_equal(text, want, strlen(want));
    free(text);
    sl_dataset_release(ds);
    ds = sl_tfrecord_indexed(shards, NSHARDS, NULL, SL_WITH_PATHS);
    assert_non_null(ds);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    for (int i = 0; i <= PER; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        size_t len;
        const char *p = sl_tensor_string(sl_element_tensor(el, 1), 0, &len);
        const char *want = shards[i < PER ? 0 : 2];
        assert_int_equal(len, strlen(want));
        assert_memory_equal(p, want, len);
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* shuffle(ALL) reads every record once, the same order at any thread
 * count, and a state saved mid-epoch resumes with exactly the rest. */
static void test_shuffle_all_and_resume(void **state)
{
    (void)state;
    write_shards();
    sl_dataset *ds =
        sl_shuffle(sl_tfrecord_indexed(shards, NSHARDS, NULL, 0), SL_SHUFFLE_ALL, 11, 0);
    assert_non_null(ds);
    int a[2 * PER], b[2 * PER], end;
    sl_options *o1 = opts(1, SL_ERRORS_FAIL), *o3 = opts(3, SL_ERRORS_FAIL);
    assert_int_equal(ids(ds, o1, a, 2 * PER, &end), 2 * PER);
    assert_int_equal(ids(ds, o3, b, 2 * PER, &end), 2 * PER);
    assert_memory_equal(a, b, sizeof a);
    int seen[2 * PER] = {0}, in_order = 0;
    for (int i = 0; i < 2 * PER; i++) {
        seen[a[i]]++;
        in_order += a[i] == i;
    }
    for (int i = 0; i < 2 * PER; i++)
        assert_int_equal(seen[i], 1);
    assert_true(in_order < 10);

    for (int k = 0; k <= 2 * PER; k += 23) {
        sl_iterator *it = sl_iterator_create(ds, o1);
        sl_element *el;
        for (int i = 0; i < k; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            sl_element_release(el);
        }
        unsigned char st[512];
        int64_t n = sl_iterator_save(it, st, sizeof st);
        assert_true(n > 0);
        sl_iterator_free(it);
        it = sl_iterator_restore(ds, st, (size_t)n, o1);
        if (!it)
            fail_msg("%s", sl_last_error());
        int i = k;
        while (sl_next(it, &el) == 0) {
            assert_int_equal(record_id(el), a[i]);
            sl_element_release(el);
            i++;
        }
        assert_int_equal(i, 2 * PER);
        sl_iterator_free(it);
    }
    sl_options_free(o1);
    sl_options_free(o3);
    sl_dataset_release(ds);
}

static void write_text(const char *path, const char *text)
{
    ru_write(path, (const unsigned char *)text, strlen(text));
}

/* An index the caller names (DALI's), and the faults it is checked for. */
static void test_given_index(void **state)
{
    (void)state;
    write_shards();
    /* the built one, under another name, as tfrecord2idx would write it */
    sl_dataset *ds = sl_tfrecord_indexed(shards, NSHARDS, NULL, 0);
    assert_non_null(ds);
    sl_dataset_release(ds);
    char idx[NSHARDS][600], given[NSHARDS][600];
    const char *paths[NSHARDS];
    for (int k = 0; k < NSHARDS; k++) {
        snprintf(idx[k], sizeof idx[k], "%s.idx", shards[k]);
        snprintf(given[k], sizeof given[k], "%s/dali-%d.idx", dir, k);
        assert_int_equal(rename(idx[k], given[k]), 0);
        paths[k] = given[k];
    }
    ds = sl_tfrecord_indexed(shards, NSHARDS, paths, 0);
    if (!ds)
        fail_msg("%s", sl_last_error());
    assert_int_equal(sl_dataset_cardinality(ds), 2 * PER);
    sl_dataset_release(ds);
    for (int k = 0; k < NSHARDS; k++) /* it read those, and wrote none */
        assert_int_equal(access(idx[k], F_OK), -1);

    /* shard 2's index for shard 0: named, with what is wrong */
    const char *swapped[NSHARDS] = {given[2], given[1], given[0]};
    assert_null(sl_tfrecord_indexed(shards, NSHARDS, swapped, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), given[2]));
    /* damaged text: the line is named */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.idx", dir);
    const char *texts[] = {"0 16\nx 5\n", "0 16\n0 16\n", "5 16\n", "0 99999999\n",
                           "0 16 junk\n", "18446744073709551615 16\n", ""};
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        write_text(bad, texts[t]);
        const char *one[NSHARDS] = {bad, given[1], given[2]};
        assert_null(sl_tfrecord_indexed(shards, NSHARDS, one, 0));
        assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
        if (!strstr(sl_last_error(), bad))
            fail_msg("%s", sl_last_error());
    }
    assert_null(sl_tfrecord_indexed(shards, NSHARDS, (const char *[]){given[0], given[1], "/nope"}, 0));
    assert_int_equal(sl_last_error_code(), SL_ENOENT);
    assert_non_null(strstr(sl_last_error(), "/nope"));
}

/* A shard that changed after its index was written is indexed again. */
static void test_stale_index_rebuilt(void **state)
{
    (void)state;
    write_shards();
    sl_dataset *ds = sl_tfrecord_indexed(shards, NSHARDS, NULL, 0);
    assert_non_null(ds);
    sl_dataset_release(ds);
    /* shard 0 gains a record, written after its index */
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    ru_buf b = {0};
    for (int i = 0; i < PER; i++) {
        size_t n = rec_len(i);
        unsigned char *p = rec_data(i, n);
        ru_record(&b, p, n);
        free(p);
    }
    unsigned char extra[5] = "extra";
    ru_record(&b, extra, 5);
    ru_write(shards[0], b.p, b.n);
    free(b.p);
    ds = sl_tfrecord_indexed(shards, NSHARDS, NULL, 0);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 2 * PER + 1);
    sl_dataset_release(ds);
}

/* Bad records meet the error policy, named; bad shards fail the build. */
static void test_bad_records_and_shards(void **state)
{
    (void)state;
    write_shards();
    sl_dataset *ds = sl_tfrecord_indexed(shards, NSHARDS, NULL, 0);
    assert_non_null(ds);
    /* a byte of record 3's data flipped, after indexing */
    unsigned char *file;
    size_t size;
    tu_read_file(shards[0], &file, &size);
    size_t at = 0;
    for (int i = 0; i < 3; i++)
        at += rec_len(i) + 16;
    file[at + 12 + 1] ^= 0x40;
    ru_write(shards[0], file, size);
    int got[2 * PER], end;
    sl_options *fail = opts(2, SL_ERRORS_FAIL), *skip = opts(2, SL_ERRORS_SKIP);
    assert_int_equal(ids(ds, fail, got, 2 * PER, &end), 3);
    assert_int_equal(end, SL_ECORRUPT);
    assert_int_equal(ids(ds, skip, got, 2 * PER, &end), 2 * PER - 1);
    assert_int_equal(end, SL_EOF);
    assert_int_equal(got[3], 4);
    /* the same file cut short inside record 10 */
    size_t cut = 0;
    for (int i = 0; i < 10; i++)
        cut += rec_len(i) + 16;
    assert_int_equal(truncate(shards[0], (off_t)cut + 5), 0);
    assert_int_equal(ids(ds, skip, got, 2 * PER, &end), 2 * PER - 1 - (PER - 10));
    sl_iterator *it = sl_iterator_create(ds, fail);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0)
        sl_element_release(el);
    assert_int_equal(rc, SL_ECORRUPT);
    if (!strstr(sl_iterator_errmsg(it), shards[0]) ||
        !strstr(sl_iterator_errmsg(it), "byte"))
        fail_msg("%s", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    free(file);

    /* a shard that is not TFRecord, and one cut inside a header */
    write_shards();
    write_text(shards[1], "not a tfrecord file at all");
    assert_null(sl_tfrecord_indexed(shards, NSHARDS, NULL, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    if (!strstr(sl_last_error(), shards[1]) || !strstr(sl_last_error(), "byte 0"))
        fail_msg("%s", sl_last_error());
    write_text(shards[1], "short");
    assert_null(sl_tfrecord_indexed(shards, NSHARDS, NULL, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    assert_null(sl_tfrecord_indexed(shards, 0, NULL, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_options_free(fail);
    sl_options_free(skip);
}

int main(void)
{
    tu_tmpdir(dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_and_index_written),
        cmocka_unit_test(test_shuffle_all_and_resume),
        cmocka_unit_test(test_given_index),
        cmocka_unit_test(test_stale_index_rebuilt),
        cmocka_unit_test(test_bad_records_and_shards),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmdir(dir);
    return rc;
}
