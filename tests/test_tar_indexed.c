/* sl_tar_indexed: WebDataset tar shards by sample index, built in one pass
 * and kept beside the shard, giving what sl_tar_shards gives (ustar, GNU
 * long names, pax, members outside samples); shuffle(ALL) over them; an
 * index that does not fit and a damaged sample name the shard and offset. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "recordutil.h"
#include "testutil.h"

#define NSHARDS 3
#define PER 30

static char dir[256];
static char shard_path[NSHARDS][512];
static const char *shards[NSHARDS];
static const char *keys[] = {"jpg;png", "cls", "txt"};
static const sl_dtype types[] = {SL_UINT8, SL_INT64, SL_STRING};

static size_t img_len(int id)
{
    return id % 7 == 2 ? 3000 + (size_t)id : (size_t)id * 5 + 1;
}

/* Sample id of shard k: "<dir>/sNNN.jpg" (or .png), ".cls", ".txt", written
 * in the three header forms; directories and extension-less members
 * between them. */
static void write_shards(void)
{
    for (int k = 0; k < NSHARDS; k++) {
        snprintf(shard_path[k], sizeof shard_path[k], "%s/part-%d.tar", dir, k);
        shards[k] = shard_path[k];
        char idx[700];
        snprintf(idx, sizeof idx, "%s.idx", shard_path[k]);
        unlink(idx);
        ru_buf b = {0};
        for (int i = 0; i < PER; i++) {
            int id = k * PER + i;
            char name[300], text[32];
            size_t n = img_len(id);
            unsigned char *p = malloc(n);
            for (size_t j = 0; j < n; j++)
                p[j] = (unsigned char)(id + j);
            snprintf(name, sizeof name, "%s/s%03d.%s", id % 5 == 1 ? "some/deeper/folder/that/"
                     "is/long/enough/to/need/a/gnu/long/name/or/a/pax/record/to/hold/it/whole"
                     : "d", id, id % 4 == 3 ? "png" : "jpg");
            if (id % 5 == 1 && id % 2)
                ru_tar_gnu_long(&b, name, p, n);
            else if (id % 5 == 1)
                ru_tar_pax(&b, name, p, n);
            else
                ru_tar_file(&b, name, p, n);
            free(p);
            if (id % 6 == 0)
                ru_tar_file(&b, "d/LICENSE", "x", 1);
            snprintf(name, sizeof name, "d/s%03d.cls", id);
            int len = snprintf(text, sizeof text, " %d\n", id);
            if (id % 5 != 1)
                ru_tar_file(&b, name, text, (size_t)len);
            else { /* the long-named sample: the other members under it too */
                snprintf(name, sizeof name, "some/deeper/folder/that/is/long/enough/to/need/a/"
                         "gnu/long/name/or/a/pax/record/to/hold/it/whole/s%03d.cls", id);
                ru_tar_pax(&b, name, text, (size_t)len);
            }
            if (id % 9 == 4) {
                unsigned char h[512];
                ru_tar_header(h, "d/sub", 0, '5');
                ru_put(&b, h, 512);
            }
            name[strlen(name) - 3] = 0;
            strcat(name, "txt");
            snprintf(text, sizeof text, "caption %d", id);
            if (id % 5 != 1)
                ru_tar_file(&b, name, text, strlen(text));
            else
                ru_tar_pax(&b, name, text, strlen(text));
        }
        ru_tar_end(&b);
        ru_write(shard_path[k], b.p, b.n);
        free(b.p);
    }
}

static int sample_id(const sl_element *el)
{
    return (int)sl_tensor_int64(sl_element_tensor(el, 1));
}

static void check_sample(const sl_element *el, bool with_key)
{
    int id = sample_id(el);
    assert_true(id >= 0 && id < NSHARDS * PER);
    const sl_tensor *img = sl_element_tensor(el, 0);
    assert_int_equal(sl_tensor_nbytes(img), img_len(id));
    const unsigned char *p = sl_tensor_data(img);
    for (size_t j = 0; j < img_len(id); j++)
        if (p[j] != (unsigned char)(id + j))
            fail_msg("sample %d: byte %zu", id, j);
    char want[32];
    snprintf(want, sizeof want, "caption %d", id);
    tu_check_string(sl_element_tensor(el, 2), 0, want);
    if (with_key) {
        size_t len;
        const char *k = sl_tensor_string(sl_element_tensor(el, 3), 0, &len);
        snprintf(want, sizeof want, "/s%03d", id);
        assert_true(len > strlen(want) && !memcmp(k + len - strlen(want), want, strlen(want)));
    }
}

/* The samples in order, as sl_tar_shards gives them; the index is then
 * beside each shard, and used. */
static void test_same_as_tar_shards(void **state)
{
    (void)state;
    for (int pass = 0; pass < 2; pass++) {
        sl_dataset *ds = sl_tar_indexed(shards, NSHARDS, keys, types, 3, SL_WITH_PATHS);
        assert_non_null(ds);
        assert_int_equal(sl_dataset_cardinality(ds), NSHARDS * PER);
        sl_dataset *seq = sl_tar_shards(sl_from_files(shards, NULL, NSHARDS), keys, types, 3,
                                        SL_WITH_PATHS);
        sl_options *o = tu_opts(2, 1);
        sl_iterator *a = sl_iterator_create(ds, o), *b = sl_iterator_create(seq, o);
        assert_non_null(a);
        assert_non_null(b);
        sl_element *x, *y;
        int n = 0;
        while (sl_next(a, &x) == 0) {
            assert_int_equal(sl_next(b, &y), 0);
            assert_int_equal(sample_id(x), n);
            check_sample(x, true);
            size_t l1, l2;
            const char *k1 = sl_tensor_string(sl_element_tensor(x, 3), 0, &l1);
            const char *k2 = sl_tensor_string(sl_element_tensor(y, 3), 0, &l2);
            assert_true(l1 == l2 && !memcmp(k1, k2, l1));
            sl_element_release(x), sl_element_release(y);
            n++;
        }
        assert_string_equal(sl_iterator_errmsg(a), "");
        assert_int_equal(sl_next(b, &y), SL_EOF);
        assert_int_equal(n, NSHARDS * PER);
        sl_iterator_free(a), sl_iterator_free(b);
        sl_options_free(o);
        sl_dataset_release(ds), sl_dataset_release(seq);
        char idx[600];
        snprintf(idx, sizeof idx, "%s.idx", shards[1]);
        struct stat st;
        assert_int_equal(stat(idx, &st), 0);
    }
}

/* shuffle(ALL): every sample once, in an order a seed fixes whatever the
 * thread count, and a position restored. */
static void test_shuffled(void **state)
{
    (void)state;
    int64_t *order[2];
    for (int threads = 1; threads <= 2; threads++) {
        sl_dataset *ds = sl_shuffle(sl_tar_indexed(shards, NSHARDS, keys, types, 3, 0),
                                    SL_SHUFFLE_ALL, 9, 0);
        sl_options *o = tu_opts(threads, 9);
        sl_iterator *it = sl_iterator_create(ds, o);
        order[threads - 1] = calloc(NSHARDS * PER, sizeof **order);
        int seen[NSHARDS * PER] = {0};
        sl_element *el;
        int n = 0;
        while (sl_next(it, &el) == 0) {
            check_sample(el, false);
            seen[sample_id(el)]++;
            order[threads - 1][n++] = sample_id(el);
            sl_element_release(el);
        }
        assert_int_equal(n, NSHARDS * PER);
        for (int i = 0; i < n; i++)
            assert_int_equal(seen[i], 1);
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
    assert_memory_equal(order[0], order[1], NSHARDS * PER * sizeof **order);
    int moved = 0;
    for (int i = 0; i < NSHARDS * PER; i++)
        moved += order[0][i] != i;
    assert_true(moved > NSHARDS * PER / 2);
    free(order[0]), free(order[1]);
}

static void write_text(const char *path, const char *text)
{
    ru_write(path, text, strlen(text));
}

/* An index of another shard: refused when made (it runs past the end) or
 * found at the read (the sample's members disagree), naming the shard. */
static void test_bad_index_and_samples(void **state)
{
    (void)state;
    char bad[700], copy[600];
    snprintf(copy, sizeof copy, "%s/copy.tar", dir);
    unsigned char *p;
    size_t n;
    tu_read_file(shards[0], &p, &n);
    tu_write_file(copy, p, n);
    snprintf(bad, sizeof bad, "%s.idx", copy);
    /* a span that starts mid-sample: the member's key differs from its
     * neighbour's, or its header is not a header */
    const char *texts[] = {"0 2048\n1024 99999999\n", "512 1024\n"};
    const char *one[] = {copy};
    write_text(bad, texts[0]);
    sl_dataset *ds = sl_tar_indexed(one, 1, keys, types, 3, 0);
    /* stale? no: newer than the copy, and it runs past the end: rebuilt */
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), PER);
    sl_dataset_release(ds);
    write_text(bad, texts[1]);
    ds = sl_tar_indexed(one, 1, keys, types, 3, 0);
    assert_non_null(ds);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
    assert_non_null(strstr(sl_iterator_errmsg(it), copy));
    assert_non_null(strstr(sl_iterator_errmsg(it), "at byte 512"));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    unlink(bad);

    /* damaged samples under the skip policy: a bad checksum in sample 1's
     * first header (where the index says it starts) */
    unlink(bad);
    ds = sl_tar_indexed(one, 1, keys, types, 3, 0);
    assert_non_null(ds);
    sl_dataset_release(ds);
    unsigned char *text;
    size_t tn;
    tu_read_file(bad, &text, &tn);
    unsigned long long second = 0, size;
    assert_int_equal(sscanf(strchr((char *)text, '\n') + 1, "%llu %llu", &second, &size), 2);
    free(text);
    assert_true(second > 0);
    p[second + 148] ^= 1; /* its checksum */
    tu_write_file(copy, p, n);
    unlink(bad);
    assert_null(sl_tar_indexed(one, 1, keys, types, 3, 0)); /* the index pass meets it */
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), copy));
    /* an index made before the damage: the sample alone is lost */
    p[second + 148] ^= 1;
    tu_write_file(copy, p, n);
    ds = sl_tar_indexed(one, 1, keys, types, 3, 0);
    sl_dataset_release(ds);
    p[second + 148] ^= 1;
    tu_write_file(copy, p, n);
    struct timespec later[2] = {{0, UTIME_OMIT}, {time(NULL) + 5, 0}};
    utimensat(AT_FDCWD, bad, later, 0); /* the index stays current */
    free(p);
    ds = sl_tar_indexed(one, 1, keys, types, 3, 0);
    assert_non_null(ds);
    sl_options *o = tu_opts(1, 0);
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0);
    it = sl_iterator_create(ds, o);
    int count = 0;
    while (sl_next(it, &el) == 0) {
        check_sample(el, false);
        assert_int_not_equal(sample_id(el), 1);
        sl_element_release(el);
        count++;
    }
    assert_int_equal(count, PER - 1);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    /* a key no sample has */
    const char *nokey[] = {"jpg;png", "wav"};
    ds = sl_tar_indexed(shards, 1, nokey, NULL, 2, 0);
    it = sl_iterator_create(ds, NULL);
    assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
    assert_non_null(strstr(sl_iterator_errmsg(it), "has no 'wav'"));
    assert_non_null(strstr(sl_iterator_errmsg(it), shards[0]));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    /* not a tar file */
    char junk[1500];
    memset(junk, 'x', sizeof junk - 1);
    junk[sizeof junk - 1] = 0;
    write_text(copy, junk);
    unlink(bad);
    assert_null(sl_tar_indexed(one, 1, keys, types, 3, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "not a tar file"));
    /* bad arguments */
    assert_null(sl_tar_indexed(shards, 1, keys, types, 0, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    assert_null(sl_tar_indexed(NULL, 1, keys, types, 3, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
}

/* A sample of one empty member is one 512-byte header: its index line
 * is kept and read back, not refused and rebuilt each time. */
static void test_small_samples_keep_their_index(void **state)
{
    (void)state;
    char path[600], idx[700];
    snprintf(path, sizeof path, "%s/small.tar", dir);
    snprintf(idx, sizeof idx, "%s.idx", path);
    ru_buf b = {0};
    ru_tar_file(&b, "a.txt", "", 0);
    ru_tar_file(&b, "b.txt", "bee", 3);
    ru_tar_end(&b);
    ru_write(path, b.p, b.n);
    free(b.p);
    unlink(idx);
    const char *one[] = {path};
    const char *keys1[] = {"txt"};
    const sl_dtype t1[] = {SL_STRING};
    sl_dataset *ds = sl_tar_indexed(one, 1, keys1, t1, 1, 0);
    assert_non_null(ds);
    sl_dataset_release(ds);
    struct stat before, after;
    assert_int_equal(stat(idx, &before), 0);
    struct timespec later[2] = {{0, UTIME_OMIT}, {before.st_mtim.tv_sec + 5, 0}};
    utimensat(AT_FDCWD, idx, later, 0);
    ds = sl_tar_indexed(one, 1, keys1, t1, 1, 0);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 2);
    assert_int_equal(stat(idx, &after), 0);
    assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec + 5); /* not written again */
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    tu_check_string(sl_element_tensor(el, 0), 0, "");
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    tu_check_string(sl_element_tensor(el, 0), 0, "bee");
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

int main(void)
{
    tu_tmpdir(dir);
    write_shards();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_tar_shards),
        cmocka_unit_test(test_shuffled),
        cmocka_unit_test(test_bad_index_and_samples),
        cmocka_unit_test(test_small_samples_keep_their_index),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmdir(dir);
    return rc;
}
