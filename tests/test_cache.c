/* cache: in memory across repeat passes, and on disk (write, serve, reject
 * stale/corrupt/truncated files, partial files, abandoned passes, locking,
 * round-trips of strings and multi-dimensional tensors). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

/* ---- helpers ---- */

static int count_calls(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el;
    atomic_fetch_add((atomic_int *)user, 1);
    return 1;
}

/* range(0, n) -> filter(counting) -> cache(path) */
static sl_dataset *counted(int64_t n, atomic_int *calls, const char *path)
{
    return sl_cache(sl_filter(sl_range(0, n, 1), "count", count_calls, calls), path);
}

static void expect_range(sl_dataset *ds, int64_t n, int passes)
{
    int64_t *e = malloc(sizeof *e * (size_t)(n * passes) + 1);
    for (int p = 0; p < passes; p++)
        for (int64_t i = 0; i < n; i++)
            e[p * n + i] = i;
    tu_expect(ds, e, (size_t)(n * passes));
    free(e);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void partial_of(char *buf, const char *path)
{
    snprintf(buf, 512, "%s.partial", path);
}

/* Warnings captured through the log callback. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[8192];

static void capture(void *user, sl_log_level level, const char *msg)
{
    (void)user;
    pthread_mutex_lock(&log_mu);
    if (level <= SL_LOG_WARN && strlen(log_text) + strlen(msg) + 2 < sizeof log_text) {
        strcat(log_text, msg);
        strcat(log_text, "\n");
    }
    pthread_mutex_unlock(&log_mu);
}

static void log_start(void)
{
    log_text[0] = '\0';
    sl_set_log_callback(capture, NULL);
}

static void log_stop(void)
{
    sl_set_log_callback(NULL, NULL);
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    int c = fgetc(f);
    assert_true(c != EOF);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static void le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Writes a cache file with a correct header (fingerprint of `input`,
 * crc) around `payload`, so that only its records are wrong. */
static void write_cache(const char *path, const sl_dataset *input, uint64_t count,
                        const unsigned char *payload, size_t n)
{
    unsigned char *f = calloc(1, 48 + n);
    memcpy(f, "SLCACHE1", 8);
    le32(f + 8, 1);
    le32(f + 12, 48);
    le64(f + 16, sl_dataset_fingerprint(input));
    le64(f + 24, count);
    le64(f + 32, n);
    le32(f + 40, tu_crc32_bitwise(TU_CRC32, payload, n));
    memcpy(f + 48, payload, n);
    tu_write_file(path, f, 48 + n);
    free(f);
}

/* ---- in memory ---- */

/* Fails the k-th allocation for k = 1, 2, ... until a run needs fewer
 * allocations than k: every run must end in SL_EOF (with all `expect`
 * elements) or SL_ENOMEM, and leave nothing allocated. Runs before anything
 * creates the process default runtime, which would hold memory for good. */
static void with_failing_allocations(sl_dataset *(*build)(void *), void *arg, int64_t expect)
{
    tu_alloc_install();
    for (int64_t k = 1;; k++) {
        tu_alloc_fail_at(k);
        int64_t n = 0;
        int rc = SL_ENOMEM;
        sl_options *o = sl_options_create();
        if (o && sl_options_set(o, SL_OPT_THREADS, 1) == 0) {
            sl_dataset *ds = build(arg);
            sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
            sl_element *el;
            while (it && (rc = sl_next(it, &el)) == 0) {
                n++;
                sl_element_release(el);
            }
            sl_iterator_free(it);
            sl_dataset_release(ds);
        }
        sl_options_free(o);
        bool done = tu_alloc_calls() < k;
        tu_alloc_fail_at(0);
        sl_release_memory();
        assert_int_equal(tu_alloc_live_bytes(), 0);
        if (rc != SL_EOF)
            assert_int_equal(rc, SL_ENOMEM);
        else
            assert_int_equal(n, expect);
        if (done) {
            assert_int_equal(rc, SL_EOF);
            break;
        }
    }
    tu_alloc_uninstall();
}

static sl_dataset *build_cached(void *path)
{
    return sl_repeat(sl_cache(sl_batch(sl_range(0, 300, 1), 7, 0), path), 3);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    char dir[256], path[300], partial[512];
    with_failing_allocations(build_cached, NULL, 3 * 43);
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    partial_of(partial, path);
    with_failing_allocations(build_cached, path, 3 * 43); /* writes */
    assert_true(exists(path));
    assert_false(exists(partial));
    with_failing_allocations(build_cached, path, 3 * 43); /* reads */
    tu_rmdir(dir);
}


static void test_memory_cache_runs_input_once(void **state)
{
    (void)state;
    atomic_int calls = 0;
    sl_dataset *ds = sl_repeat(counted(10, &calls, NULL), 3);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN); /* the filter's */
    expect_range(ds, 10, 3);
    assert_int_equal(atomic_load(&calls), 10);
    /* the cache lives with the dataset: a later iterator (the next epoch)
     * is served from it too */
    expect_range(ds, 10, 3);
    assert_int_equal(atomic_load(&calls), 10);
    sl_dataset_release(ds);
}

/* Served the same whatever the epoch, and a shuffle after it reshuffles. */
static void test_memory_cache_across_epochs(void **state)
{
    (void)state;
    atomic_int calls = 0, calls2 = 0;
    /* shuffled, then cached: epoch 0's order every epoch */
    sl_dataset *cached = sl_cache(
        sl_shuffle(sl_filter(sl_range(0, 50, 1), "count", count_calls, &calls), 50, 9, 0), NULL);
    /* cached, then shuffled: a new order each epoch, the input read once */
    sl_dataset *ds = sl_shuffle(counted(50, &calls2, NULL), 50, 10, 0);
    size_t n0, n1, m0, m1;
    int64_t *a0, *a1, *b0, *b1;
    assert_int_equal(tu_collect(cached, NULL, &a0, &n0, NULL), SL_EOF);
    assert_int_equal(tu_collect(cached, NULL, &a1, &n1, NULL), SL_EOF); /* epoch 1 */
    assert_int_equal(n0, 50);
    assert_int_equal(n1, 50);
    assert_memory_equal(a0, a1, n0 * sizeof *a0);
    assert_int_equal(atomic_load(&calls), 50);
    assert_int_equal(tu_collect(ds, NULL, &b0, &m0, NULL), SL_EOF);
    assert_int_equal(tu_collect(ds, NULL, &b1, &m1, NULL), SL_EOF);
    assert_int_equal(m0, 50);
    assert_true(memcmp(b0, b1, m0 * sizeof *b0) != 0);
    assert_int_equal(atomic_load(&calls2), 50);
    /* whichever epoch fills it, the cache holds the input's epoch 0 */
    sl_dataset *late = sl_cache(
        sl_shuffle(sl_filter(sl_range(0, 50, 1), "count", count_calls, &calls), 50, 9, 0), NULL);
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, 5), 0);
    int64_t *c5;
    size_t n5;
    assert_int_equal(tu_collect(late, o, &c5, &n5, NULL), SL_EOF);
    assert_int_equal(n5, 50);
    assert_memory_equal(c5, a0, n5 * sizeof *c5);
    free(c5);
    sl_options_free(o);
    sl_dataset_release(late);
    free(a0);
    free(a1);
    free(b0);
    free(b1);
    sl_dataset_release(ds);
    sl_dataset_release(cached);
}

static void test_memory_cache_accounting(void **state)
{
    (void)state;
    sl_dataset *ds = sl_repeat(sl_cache(sl_range(0, 10, 1), NULL), 2);
    assert_int_equal(sl_dataset_cardinality(ds), 20);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    for (int i = 0; i < 13; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), i % 10);
        sl_element_release(el);
    }
    /* ten int64 scalars are cached and count as buffered */
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES), 80);
    int rc;
    while ((rc = sl_next(it, &el)) == 0)
        sl_element_release(el);
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    /* an iterator served from the cache counts it too, until it goes */
    it = sl_iterator_create(ds, NULL);
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES), 80);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* A pass cut short by take leaves the cache incomplete: the next pass
 * starts over from the input (tf.data). */
static void test_memory_cache_partial_pass_discarded(void **state)
{
    (void)state;
    atomic_int calls = 0;
    sl_dataset *ds = sl_repeat(sl_take(counted(10, &calls, NULL), 3), 2);
    const int64_t e[] = {0, 1, 2, 0, 1, 2};
    tu_expect(ds, e, 6);
    assert_int_equal(atomic_load(&calls), 6);
    sl_dataset_release(ds);

    /* an iterator freed mid-pass releases what was collected (ASan) */
    ds = sl_cache(sl_range(0, 10, 1), NULL);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* The passes run on prefetch threads, one after another. */
static void test_memory_cache_under_prefetch(void **state)
{
    (void)state;
    atomic_int calls = 0;
    sl_dataset *ds = sl_repeat(sl_prefetch(counted(100, &calls, NULL), 4), 3);
    expect_range(ds, 100, 3);
    assert_int_equal(atomic_load(&calls), 100);
    sl_dataset_release(ds);
}

static void test_arguments_and_fingerprint(void **state)
{
    (void)state;
    sl_clear_error();
    assert_null(sl_cache(sl_range(0, 3, 1), ""));
    assert_non_null(strstr(sl_last_error(), "cache"));

    sl_clear_error();
    assert_null(sl_range(0, 1, 0));
    char before[1024];
    strcpy(before, sl_last_error());
    assert_null(sl_cache(NULL, "/tmp/x"));
    assert_string_equal(sl_last_error(), before);

    sl_dataset *a = sl_cache(sl_range(0, 10, 1), NULL);
    sl_dataset *b = sl_cache(sl_range(0, 10, 1), "/tmp/a");
    sl_dataset *c = sl_cache(sl_range(0, 10, 1), "/tmp/b");
    sl_dataset *d = sl_cache(sl_range(0, 10, 1), "/tmp/a");
    assert_int_equal(sl_dataset_cardinality(a), 10);
    assert_int_equal(sl_dataset_cardinality(b), 10);
    assert_string_equal(sl_dataset_name(a), "cache");
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(b) != sl_dataset_fingerprint(c));
    assert_true(sl_dataset_fingerprint(b) == sl_dataset_fingerprint(d));
    sl_dataset_release(a);
    sl_dataset_release(b);
    sl_dataset_release(c);
    sl_dataset_release(d);
}

/* ---- on disk ---- */

static void test_file_cache_write_then_serve(void **state)
{
    (void)state;
    char dir[256], path[300], partial[512];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    partial_of(partial, path);
    atomic_int calls = 0;
    sl_dataset *ds = counted(10, &calls, path);

    expect_range(ds, 10, 1);
    assert_int_equal(atomic_load(&calls), 10);
    assert_true(exists(path));
    assert_false(exists(partial));

    /* the header says what the format comment says */
    unsigned char h[48];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(h, 1, 48, f), 48);
    fclose(f);
    assert_memory_equal(h, "SLCACHE1", 8);
    assert_int_equal(h[8], 1);
    assert_int_equal(h[24], 10);
    assert_int_equal(file_size(path), 48 + 10 * 28);

    /* a new iterator serves the file: the input does not run */
    expect_range(ds, 10, 1);
    assert_int_equal(atomic_load(&calls), 10);

    /* and so do later epochs of one iterator */
    sl_dataset *rep = sl_repeat(sl_dataset_retain(ds), 3);
    expect_range(rep, 10, 3);
    assert_int_equal(atomic_load(&calls), 10);
    sl_dataset_release(rep);
    sl_dataset_release(ds);

    /* written and served within one iterator under repeat + prefetch */
    snprintf(path, sizeof path, "%s/d", dir);
    atomic_store(&calls, 0);
    ds = sl_repeat(sl_prefetch(counted(100, &calls, path), 3), 3);
    expect_range(ds, 100, 3);
    assert_int_equal(atomic_load(&calls), 100);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_fingerprint_mismatch(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    atomic_int calls = 0;
    sl_dataset *ds = counted(10, &calls, path);
    expect_range(ds, 10, 1);
    sl_dataset_release(ds);

    log_start();
    atomic_store(&calls, 0);
    ds = counted(11, &calls, path);
    expect_range(ds, 11, 1);
    assert_int_equal(atomic_load(&calls), 11);
    assert_non_null(strstr(log_text, path));
    assert_non_null(strstr(log_text, "different pipeline"));
    /* the file now belongs to the new pipeline */
    log_text[0] = '\0';
    expect_range(ds, 11, 1);
    assert_int_equal(atomic_load(&calls), 11);
    assert_string_equal(log_text, "");
    log_stop();
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_corrupt_is_rebuilt(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    atomic_int calls = 0;
    sl_dataset *ds = counted(10, &calls, path);
    expect_range(ds, 10, 1);
    flip_byte(path, 48 + 3 * 28 + 20); /* the value of element 3 */

    log_start();
    expect_range(ds, 10, 1);
    assert_int_equal(atomic_load(&calls), 20);
    assert_non_null(strstr(log_text, "checksum"));
    assert_non_null(strstr(log_text, path));
    log_text[0] = '\0';
    expect_range(ds, 10, 1); /* rebuilt file is good */
    assert_int_equal(atomic_load(&calls), 20);
    assert_string_equal(log_text, "");

    /* header damage is caught too */
    flip_byte(path, 2);
    expect_range(ds, 10, 1);
    assert_int_equal(atomic_load(&calls), 30);
    assert_non_null(strstr(log_text, "magic"));
    log_stop();
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_truncated_is_rebuilt(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    atomic_int calls = 0;
    sl_dataset *ds = counted(10, &calls, path);
    expect_range(ds, 10, 1);
    off_t size = file_size(path);

    log_start();
    const off_t cuts[] = {size - 5, 48, 20, 0};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(truncate(path, cuts[i]), 0);
        log_text[0] = '\0';
        expect_range(ds, 10, 1);
        assert_int_equal(atomic_load(&calls), 10 * (i + 2));
        assert_non_null(strstr(log_text, "truncated"));
        assert_int_equal(file_size(path), size);
    }
    log_stop();
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_discards_stale_partial(void **state)
{
    (void)state;
    char dir[256], path[300], partial[512];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    partial_of(partial, path);
    char junk[5000];
    memset(junk, 'j', sizeof junk);
    tu_write_file(partial, junk, sizeof junk);

    log_start();
    atomic_int calls = 0;
    sl_dataset *ds = counted(10, &calls, path);
    expect_range(ds, 10, 1);
    assert_non_null(strstr(log_text, "abandoned"));
    assert_non_null(strstr(log_text, partial));
    log_stop();
    assert_false(exists(partial));
    assert_int_equal(file_size(path), 48 + 10 * 28);
    expect_range(ds, 10, 1);
    assert_int_equal(atomic_load(&calls), 10);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_abandoned_pass_leaves_nothing(void **state)
{
    (void)state;
    char dir[256], path[300], partial[512];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    partial_of(partial, path);
    atomic_int calls = 0;

    sl_dataset *ds = sl_take(counted(10, &calls, path), 3);
    const int64_t e[] = {0, 1, 2};
    tu_expect(ds, e, 3);
    assert_false(exists(path));
    assert_false(exists(partial));
    sl_dataset_release(ds);

    ds = counted(10, &calls, path);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        sl_element_release(el);
    }
    assert_true(exists(partial)); /* being written */
    sl_iterator_free(it);
    assert_false(exists(path));
    assert_false(exists(partial));
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_second_writer_is_busy(void **state)
{
    (void)state;
    char dir[256], path[300], partial[512];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    partial_of(partial, path);
    atomic_int calls = 0;
    sl_dataset *ds = counted(10, &calls, path);

    sl_iterator *a = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_next(a, &el), 0);
        sl_element_release(el);
    }
    sl_iterator *b = sl_iterator_create(ds, NULL);
    assert_non_null(b);
    assert_int_equal(sl_next(b, &el), SL_EBUSY);
    assert_null(el);
    assert_non_null(strstr(sl_iterator_errmsg(b), "another writer"));
    assert_non_null(strstr(sl_iterator_errmsg(b), partial));
    assert_int_equal(sl_next(b, &el), SL_EBUSY); /* stays failed */
    sl_iterator_free(b);

    /* the first writer is unaffected and finishes the file */
    int rc, n = 3;
    while ((rc = sl_next(a, &el)) == 0) {
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), n++);
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(n, 10);
    sl_iterator_free(a);
    assert_true(exists(path));
    assert_false(exists(partial));
    expect_range(ds, 10, 1);
    assert_int_equal(atomic_load(&calls), 10);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_bad_directory(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/missing/c", dir);
    sl_dataset *ds = sl_cache(sl_range(0, 3, 1), path);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_ENOENT);
    assert_non_null(strstr(sl_iterator_errmsg(it), path));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_file_cache_empty_input(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    sl_dataset *ds = sl_cache(sl_range(0, 0, 1), path);
    assert_int_equal(tu_count(ds, NULL), 0);
    assert_int_equal(file_size(path), 48);
    log_start();
    assert_int_equal(tu_count(ds, NULL), 0);
    assert_string_equal(log_text, ""); /* served, not rebuilt */
    log_stop();
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

/* Collects retained elements of a whole pass. */
static sl_element **collect_elements(sl_dataset *ds, size_t *n)
{
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    size_t cap = 16;
    sl_element **v = malloc(cap * sizeof *v);
    sl_element *el;
    int rc;
    *n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        if (*n == cap)
            v = realloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = el;
    }
    if (rc != SL_EOF)
        print_error("%s\n", sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    sl_iterator_free(it);
    return v;
}

static void assert_elements_equal(sl_element **a, sl_element **b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sl_element_size(a[i]), sl_element_size(b[i]));
        for (int k = 0; k < sl_element_size(a[i]); k++) {
            const sl_tensor *x = sl_element_tensor(a[i], k), *y = sl_element_tensor(b[i], k);
            assert_int_equal(sl_tensor_dtype(x), sl_tensor_dtype(y));
            assert_int_equal(sl_tensor_ndim(x), sl_tensor_ndim(y));
            assert_memory_equal(sl_tensor_shape(x), sl_tensor_shape(y),
                                sizeof(int64_t) * (size_t)sl_tensor_ndim(x));
            assert_int_equal(sl_tensor_nbytes(x), sl_tensor_nbytes(y));
            if (sl_tensor_nbytes(x))
                assert_memory_equal(sl_tensor_data(x), sl_tensor_data(y), sl_tensor_nbytes(x));
        }
    }
}

static void free_elements(sl_element **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sl_element_release(v[i]);
    free(v);
}

/* Plain, first (written) and second (served) pass agree element for
 * element. */
static void check_round_trip(sl_dataset *plain, const char *path)
{
    sl_dataset *cached = sl_cache(sl_dataset_retain(plain), path);
    assert_non_null(cached);
    size_t n0, n1, n2;
    sl_element **e0 = collect_elements(plain, &n0);
    sl_element **e1 = collect_elements(cached, &n1);
    assert_true(exists(path));
    log_start();
    sl_element **e2 = collect_elements(cached, &n2);
    assert_string_equal(log_text, "");
    log_stop();
    assert_true(n0 > 0);
    assert_int_equal(n0, n1);
    assert_int_equal(n0, n2);
    assert_elements_equal(e0, e1, n0);
    assert_elements_equal(e0, e2, n0);
    free_elements(e0, n0);
    free_elements(e1, n1);
    free_elements(e2, n2);
    sl_dataset_release(cached);
}

static void test_file_cache_round_trips_strings_and_shapes(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);

    /* scalar strings with labels, then [3] string and [3] int64 batches */
    const char *names[] = {"a", "", "hello world", "/data/img/0001.jpg", "x", "ünïcode",
                           "seven", "8"};
    const int64_t labels[] = {1, 2, 3, 4, 5, 6, 7, 8};
    snprintf(path, sizeof path, "%s/s", dir);
    sl_dataset *files = sl_from_files(names, labels, 8);
    check_round_trip(files, path);
    snprintf(path, sizeof path, "%s/sb", dir);
    sl_dataset *batched = sl_batch(sl_dataset_retain(files), 3, 0);
    check_round_trip(batched, path);
    sl_dataset_release(batched);
    sl_dataset_release(files);

    /* [2, 3] float32 and [2] uint8 slices */
    sl_element *t = sl_element_create(2);
    int64_t shape[3] = {4, 2, 3};
    float *f = sl_element_add_tensor(t, SL_FLOAT32, 3, shape);
    for (int i = 0; i < 24; i++)
        f[i] = (float)i * 0.5f - 3.0f;
    int64_t shape2[2] = {4, 2};
    unsigned char *u = sl_element_add_tensor(t, SL_UINT8, 2, shape2);
    for (int i = 0; i < 8; i++)
        u[i] = (unsigned char)(200 + i);
    snprintf(path, sizeof path, "%s/t", dir);
    sl_dataset *slices = sl_from_tensor_slices(t);
    check_round_trip(slices, path);
    sl_dataset_release(slices);

    /* [2, 3] int64 through a double batch */
    snprintf(path, sizeof path, "%s/b", dir);
    sl_dataset *b2 = sl_batch(sl_batch(sl_range(0, 24, 1), 3, 0), 2, 0);
    check_round_trip(b2, path);
    sl_dataset_release(b2);
    tu_rmdir(dir);
}

/* Elements bigger than the 1 MiB I/O buffer and many that straddle it. */
static void test_file_cache_large_elements(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    const struct {
        int64_t n, batch;
    } cases[] = {{400000, 200000}, {300000, 1000}, {200000, 199999}};
    for (int c = 0; c < 3; c++) {
        snprintf(path, sizeof path, "%s/l%d", dir, c);
        atomic_int calls = 0;
        sl_dataset *ds = sl_batch(counted(cases[c].n, &calls, path), cases[c].batch, 0);
        sl_dataset *plain = sl_batch(sl_range(0, cases[c].n, 1), cases[c].batch, 0);
        for (int pass = 0; pass < 2; pass++) {
            int64_t *v;
            size_t n;
            char msg[1024];
            assert_int_equal(tu_collect(ds, NULL, &v, &n, msg), SL_EOF);
            assert_int_equal(n, cases[c].n);
            for (size_t i = 0; i < n; i++)
                if (v[i] != (int64_t)i)
                    assert_int_equal(v[i], (int64_t)i);
            free(v);
            assert_int_equal(atomic_load(&calls), cases[c].n);
        }
        sl_dataset_release(ds);
        sl_dataset_release(plain);
    }
    /* a single tensor larger than the buffer, below the batch */
    snprintf(path, sizeof path, "%s/big", dir);
    sl_dataset *big = sl_batch(sl_range(0, 300000, 1), 300000, 0);
    check_round_trip(big, path);
    sl_dataset_release(big);
    tu_rmdir(dir);
}

/* Records that pass the checksum but make no sense are refused with
 * SL_ECORRUPT and their offset, never turned into elements. */
static void expect_corrupt(const char *path, const unsigned char *payload, size_t n,
                           uint64_t count, const char *what)
{
    sl_dataset *input = sl_range(0, 2, 1);
    write_cache(path, input, count, payload, n);
    sl_dataset *ds = sl_cache(input, path);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0)
        sl_element_release(el);
    if (rc != SL_ECORRUPT || !strstr(sl_iterator_errmsg(it), what))
        print_error("rc %d: %s (wanted %s)\n", rc, sl_iterator_errmsg(it), what);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_non_null(strstr(sl_iterator_errmsg(it), what));
    assert_non_null(strstr(sl_iterator_errmsg(it), path));
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static size_t scalar_record(unsigned char *p, uint32_t dtype, uint64_t nbytes, int64_t v)
{
    le32(p, 1);
    le32(p + 4, dtype);
    le32(p + 8, 0);
    le64(p + 12, nbytes);
    le64(p + 20, (uint64_t)v);
    return 28;
}

static void test_file_cache_corrupt_records(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/c", dir);
    unsigned char p[256];
    size_t n;

    n = scalar_record(p, 99, 8, 0);
    expect_corrupt(path, p, n, 1, "bad dtype at offset 52");

    n = scalar_record(p, SL_INT64, 8, 0);
    expect_corrupt(path, p, n, 2, "truncated record at offset 76");

    n = scalar_record(p, SL_INT64, 4, 0);
    expect_corrupt(path, p, n, 1, "bad tensor size");

    n = scalar_record(p, SL_INT64, 8, 0);
    n += scalar_record(p + n, SL_INT64, 8, 1);
    expect_corrupt(path, p, n, 1, "trailing bytes");

    /* a string whose offsets point past its bytes */
    le32(p, 1);
    le32(p + 4, SL_STRING);
    le32(p + 8, 0);
    le64(p + 12, 20);
    le64(p + 20, 0);
    le64(p + 28, 50);
    memcpy(p + 36, "abcd", 4);
    expect_corrupt(path, p, 40, 1, "bad string offsets");

    le32(p, 70000);
    expect_corrupt(path, p, 4, 1, "bad tensor count");
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocation_failures), /* first: see the helper */
        cmocka_unit_test(test_memory_cache_runs_input_once),
        cmocka_unit_test(test_memory_cache_across_epochs),
        cmocka_unit_test(test_memory_cache_accounting),
        cmocka_unit_test(test_memory_cache_partial_pass_discarded),
        cmocka_unit_test(test_memory_cache_under_prefetch),
        cmocka_unit_test(test_arguments_and_fingerprint),
        cmocka_unit_test(test_file_cache_write_then_serve),
        cmocka_unit_test(test_file_cache_fingerprint_mismatch),
        cmocka_unit_test(test_file_cache_corrupt_is_rebuilt),
        cmocka_unit_test(test_file_cache_truncated_is_rebuilt),
        cmocka_unit_test(test_file_cache_discards_stale_partial),
        cmocka_unit_test(test_file_cache_abandoned_pass_leaves_nothing),
        cmocka_unit_test(test_file_cache_second_writer_is_busy),
        cmocka_unit_test(test_file_cache_bad_directory),
        cmocka_unit_test(test_file_cache_empty_input),
        cmocka_unit_test(test_file_cache_round_trips_strings_and_shapes),
        cmocka_unit_test(test_file_cache_large_elements),
        cmocka_unit_test(test_file_cache_corrupt_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
