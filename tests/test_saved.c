/* save / load / snapshot: round trips of structured elements (dicts,
 * strings, ragged float rows) with and without compression, shard
 * functions, replacing a save, what a failed save leaves (nothing),
 * damaged and truncated files under each error policy, newer formats,
 * and snapshots: written once, read after, keyed by pipeline, never read
 * partial, a second writer passing through. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

static char dir[256];

static void path_in(char *buf, const char *name)
{
    snprintf(buf, 512, "%s/%s", dir, name);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Element i: {id: int64 i, name: "item-<i>" (string), vec: float32[i % 4]
 * holding i + k / 10}: a dict of three leaves, a ragged one among them. */
static sl_dataset *records(int n)
{
    sl_element **els = malloc(sizeof *els * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        sl_element *el = sl_element_create(3);
        sl_element_add_int64(el, i);
        char name[32];
        snprintf(name, sizeof name, "item-%d", i);
        sl_element_add_string(el, name, strlen(name));
        int64_t len = i % 4;
        float *v = sl_element_add_tensor(el, SL_FLOAT32, 1, &len);
        for (int k = 0; k < len; k++)
            v[k] = (float)i + (float)k / 10;
        els[i] = el;
    }
    sl_dataset *ds = tu_elements(els, n, -3);
    free(els);
    sl_structure *s = sl_structure_parse("{vec: float32[?], id: int64[], name: string[]}");
    ds = sl_with_structure(ds, s);
    sl_structure_release(s);
    return ds;
}

static void check_record(const sl_element *el, int i)
{
    assert_int_equal(sl_element_size(el), 3);
    assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), i);
    char name[32];
    snprintf(name, sizeof name, "item-%d", i);
    tu_check_string(sl_element_tensor(el, 1), 0, name);
    const sl_tensor *v = sl_element_tensor(el, 2);
    assert_int_equal(sl_tensor_dtype(v), SL_FLOAT32);
    assert_int_equal(sl_tensor_count(v), i % 4);
    for (int k = 0; k < i % 4; k++)
        assert_true(((const float *)sl_tensor_data(v))[k] == (float)i + (float)k / 10);
}

/* Reads ds and checks it holds records 0..n-1 in order. */
static void expect_records(sl_dataset *ds, int n)
{
    sl_iterator *it = sl_iterator_create(ds, NULL);
    if (!it)
        fprintf(stderr, "%s\n", sl_last_error());
    assert_non_null(it);
    sl_element *el;
    int i = 0, rc;
    while ((rc = sl_next(it, &el)) == 0) {
        check_record(el, i++);
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        fprintf(stderr, "%s\n", sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(i, n);
    sl_iterator_free(it);
}

static int by_last_digit(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)user;
    /* shard 9 - d: the shards' order is not the elements' */
    *key = 9 - sl_tensor_int64(sl_element_tensor(el, 0)) % 10;
    return 0;
}

static void round_trip(int n, int compression, sl_key_fn fn)
{
    char path[512];
    path_in(path, "rt");
    sl_dataset *src = records(n);
    assert_int_equal(sl_save(src, path, NULL, compression, fn, NULL), 0);
    sl_dataset_release(src);
    assert_false(exists(path) && count_entries(dir) != 1); /* no temporary left */
    sl_dataset *ds = sl_load(path);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), n);
    char text[128];
    sl_structure_format(sl_dataset_structure(ds), text, sizeof text);
    assert_string_equal(text, "{id: int64[], name: string[], vec: float32[?]}");
    expect_records(ds, n);
    expect_records(ds, n); /* a second pass reads it again */
    sl_dataset_release(ds);
    tu_rmdir(path);
}

static void test_round_trip(void **state)
{
    (void)state;
    round_trip(0, SL_COMPRESSION_NONE, NULL);
    round_trip(1, SL_COMPRESSION_NONE, NULL);
    round_trip(1000, SL_COMPRESSION_NONE, NULL);
    round_trip(1000, SL_COMPRESSION_NONE, by_last_digit);
#ifndef SLUICE_NO_ZLIB
    round_trip(1000, SL_COMPRESSION_GZIP, NULL);
    round_trip(777, SL_COMPRESSION_ZLIB, by_last_digit);
#else
    char path[512];
    path_in(path, "rt");
    sl_dataset *src = records(3);
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_GZIP, NULL, NULL), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "SLUICE_WITH_ZLIB=OFF"));
    assert_false(exists(path));
    sl_dataset_release(src);
#endif
}

/* Big elements: each larger than a chunk, several chunks per shard. */
static void test_big_elements(void **state)
{
    (void)state;
    char path[512];
    path_in(path, "big");
    int64_t shape[2] = {700, 1024};
    sl_dataset *src;
    sl_element **els = malloc(sizeof *els * 12);
    for (int i = 0; i < 12; i++) {
        els[i] = sl_element_create(1);
        unsigned char *p = sl_element_add_tensor(els[i], SL_UINT8, 2, shape);
        for (int k = 0; k < 700 * 1024; k++)
            p[k] = (unsigned char)(tu_mix((uint64_t)(i * 1000003 + k)) >> 7);
    }
    src = tu_elements(els, 12, -3);
    free(els);
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_NONE, NULL, NULL), 0);
    sl_dataset *ds = sl_load(path);
    assert_non_null(ds);
    sl_iterator *a = sl_iterator_create(src, NULL), *b = sl_iterator_create(ds, NULL);
    sl_element *x, *y;
    int n = 0;
    while (sl_next(a, &x) == 0) {
        assert_int_equal(sl_next(b, &y), 0);
        tu_check_shape(sl_element_tensor(y, 0), 2, shape);
        assert_memory_equal(sl_tensor_data(sl_element_tensor(x, 0)),
                            sl_tensor_data(sl_element_tensor(y, 0)), 700 * 1024);
        sl_element_release(x);
        sl_element_release(y);
        n++;
    }
    assert_int_equal(n, 12);
    assert_int_equal(sl_next(b, &y), SL_EOF);
    sl_iterator_free(a);
    sl_iterator_free(b);
    sl_dataset_release(src);
    sl_dataset_release(ds);
    tu_rmdir(path);
}

static int fail_at_500(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    if (sl_tensor_int64(sl_element_tensor(in, 0)) == 500)
        return sl_map_ctx_error(ctx, SL_EINVAL, "element 500 is bad");
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static int bad_shard(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)user;
    *key = sl_tensor_int64(sl_element_tensor(el, 0)) == 7 ? -1 : 0;
    return 0;
}

static int failing_shard_fn(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)el, (void)user, (void)key;
    return SL_EIO;
}

static void test_replace_and_failures(void **state)
{
    (void)state;
    char path[512], file[600];
    path_in(path, "target");
    /* a save replaces an earlier one */
    sl_dataset *src = records(10);
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_NONE, NULL, NULL), 0);
    sl_dataset_release(src);
    src = records(25);
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_NONE, NULL, NULL), 0);
    sl_dataset *ds = sl_load(path);
    expect_records(ds, 25);
    sl_dataset_release(ds);
    /* a failed pass leaves the earlier save and no temporary */
    sl_dataset *bad = sl_map(sl_range(0, 1000, 1), "check", fail_at_500, NULL, 2, 0);
    assert_int_equal(sl_save(bad, path, NULL, SL_COMPRESSION_NONE, NULL, NULL), SL_EINVAL);
    assert_non_null(strstr(sl_last_error(), "element 500 is bad"));
    assert_int_equal(count_entries(dir), 1);
    ds = sl_load(path);
    expect_records(ds, 25);
    sl_dataset_release(ds);
    sl_dataset_release(bad);
    /* shard functions that fail or give a bad shard */
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_NONE, bad_shard, NULL), SL_ERANGE);
    assert_non_null(strstr(sl_last_error(), "shard -1"));
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_NONE, failing_shard_fn, NULL),
                     SL_EIO);
    assert_non_null(strstr(sl_last_error(), "shard function"));
    assert_int_equal(count_entries(dir), 1);
    assert_int_equal(sl_save(src, path, NULL, 99, NULL, NULL), SL_EINVAL);
    assert_int_equal(count_entries(dir), 1);
    /* a directory of other files is not replaced; a file neither */
    char other[512];
    path_in(other, "other");
    mkdir(other, 0755);
    snprintf(file, sizeof file, "%s/notes.txt", other);
    FILE *f = fopen(file, "w");
    fputs("mine\n", f);
    fclose(f);
    assert_int_equal(sl_save(src, other, NULL, SL_COMPRESSION_NONE, NULL, NULL), SL_EINVAL);
    assert_non_null(strstr(sl_last_error(), "refusing"));
    assert_true(exists(file));
    assert_int_equal(sl_save(src, file, NULL, SL_COMPRESSION_NONE, NULL, NULL), SL_EINVAL);
    /* "dir/" names dir */
    char slashed[600];
    snprintf(slashed, sizeof slashed, "%s/", path);
    assert_int_equal(sl_save(src, slashed, NULL, SL_COMPRESSION_NONE, NULL, NULL), 0);
    assert_int_equal(count_entries(dir), 2);
    ds = sl_load(slashed);
    expect_records(ds, 25);
    sl_dataset_release(ds);
    /* an empty directory is used */
    char empty[512];
    path_in(empty, "empty");
    mkdir(empty, 0755);
    /* (a save that fails leaves it as it was) */
    assert_int_equal(sl_save(src, empty, NULL, SL_COMPRESSION_NONE, failing_shard_fn, NULL),
                     SL_EIO);
    assert_int_equal(count_entries(empty), 0);
    assert_int_equal(sl_save(src, empty, NULL, SL_COMPRESSION_NONE, NULL, NULL), 0);
    ds = sl_load(empty);
    expect_records(ds, 25);
    sl_dataset_release(ds);
    sl_dataset_release(src);
    tu_rmdir(other);
    tu_rmdir(empty);
    tu_rmdir(path);
}

/* ---- damaged files ---- */

/* Rewrites the manifest with `from` replaced by `to` and a fresh crc. */
static void edit_manifest(const char *path, const char *from, const char *to)
{
    char m[600];
    snprintf(m, sizeof m, "%s/manifest", path);
    unsigned char *p;
    size_t n;
    tu_read_file(m, &p, &n);
    p[n] = 0;
    char *at = strstr((char *)p, from), *crc = strstr((char *)p, "crc32c ");
    assert_non_null(at);
    char *out = malloc(n + 256);
    size_t k = (size_t)(at - (char *)p);
    memcpy(out, p, k);
    strcpy(out + k, to);
    size_t body = (size_t)(crc - (char *)p) - k - strlen(from);
    memcpy(out + k + strlen(to), at + strlen(from), body);
    size_t len = k + strlen(to) + body;
    len += (size_t)sprintf(out + len, "crc32c %08x\n", tu_crc32_bitwise(TU_CRC32C, out, len));
    tu_write_file(m, out, len);
    free(out);
    free(p);
}

/* Runs ds under `policy`: how many elements came and the final code, the
 * message into msg. */
static int drain(sl_dataset *ds, int policy, int *count, char *msg)
{
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_ERROR_POLICY, policy);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_options_free(o);
    *count = 0;
    if (!it) { /* a file that cannot be opened fails the pass at once */
        snprintf(msg, 1024, "%s", sl_last_error());
        return sl_last_error_code();
    }
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        sl_element_release(el);
        ++*count;
    }
    snprintf(msg, 1024, "%s", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    return rc;
}

static void save_records(const char *path, int n)
{
    sl_dataset *src = records(n);
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_NONE, by_last_digit, NULL), 0);
    sl_dataset_release(src);
}

static void test_damaged_manifest(void **state)
{
    (void)state;
    char path[512], m[600];
    path_in(path, "dm");
    snprintf(m, sizeof m, "%s/manifest", path);
    /* none: not a saved dataset, or not finished */
    assert_null(sl_load(path));
    assert_int_equal(sl_last_error_code(), SL_ENOENT);
    assert_non_null(strstr(sl_last_error(), "no saved dataset"));
    save_records(path, 40);
    unsigned char *p;
    size_t n;
    tu_read_file(m, &p, &n);
    /* a flipped byte, a truncation, an empty file */
    p[30] ^= 1;
    tu_write_file(m, p, n);
    assert_null(sl_load(path));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), m));
    p[30] ^= 1;
    tu_write_file(m, p, n - 5);
    assert_null(sl_load(path));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    tu_write_file(m, p, 0);
    assert_null(sl_load(path));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    tu_write_file(m, "GIF89a\n", 7);
    assert_null(sl_load(path));
    assert_non_null(strstr(sl_last_error(), "not a sluice saved dataset"));
    /* a newer format, and checked lines with wrong values */
    tu_write_file(m, p, n);
    edit_manifest(path, "sluice-saved-dataset 1", "sluice-saved-dataset 2");
    assert_null(sl_load(path));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "version 2"));
    tu_write_file(m, p, n);
    edit_manifest(path, "elements 40", "elements 41");
    assert_null(sl_load(path));
    assert_non_null(strstr(sl_last_error(), "do not add up"));
    tu_write_file(m, p, n);
    edit_manifest(path, "structure {", "structure {{");
    assert_null(sl_load(path));
    assert_non_null(strstr(sl_last_error(), "bad structure"));
    /* a shard whose size differs from the manifest's */
    tu_write_file(m, p, n);
    edit_manifest(path, "shard 0 4 ", "shard 0 4 1");
    sl_dataset *ds = sl_load(path);
    assert_non_null(ds); /* the manifest itself is fine */
    int count;
    char msg[1024];
    assert_int_equal(drain(ds, SL_ERRORS_SKIP, &count, msg), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "shard-00000000.sls"));
    assert_non_null(strstr(sl_last_error(), "the manifest says"));
    sl_dataset_release(ds);
    free(p);
    tu_rmdir(path);
}

static void test_damaged_shards(void **state)
{
    (void)state;
    char path[512], shard[600];
    path_in(path, "ds");
    save_records(path, 40); /* shard 9 - d holds the elements ending in d: 4 each */
    snprintf(shard, sizeof shard, "%s/shard-00000003.sls", path);
    unsigned char *p;
    size_t n;
    tu_read_file(shard, &p, &n);
    /* a byte of a record: the chunk's checksum catches it */
    p[n - 3] ^= 0x40;
    tu_write_file(shard, p, n);
    sl_dataset *ds = sl_load(path);
    int count;
    char msg[1024];
    assert_int_equal(drain(ds, SL_ERRORS_FAIL, &count, msg), SL_ECORRUPT);
    assert_non_null(strstr(msg, "shard-00000003.sls"));
    assert_non_null(strstr(msg, "chunk checksum mismatch at offset 16"));
    /* skipping drops that chunk (its 4 elements), the rest comes in order */
    assert_int_equal(drain(ds, SL_ERRORS_SKIP, &count, msg), SL_EOF);
    assert_int_equal(count, 36);
    sl_dataset_release(ds);
    /* a damaged chunk header: the rest of that shard is lost */
    p[n - 3] ^= 0x40;
    p[17] ^= 1;
    tu_write_file(shard, p, n);
    ds = sl_load(path);
    assert_int_equal(drain(ds, SL_ERRORS_FAIL, &count, msg), SL_ECORRUPT);
    assert_non_null(strstr(msg, "chunk header checksum mismatch"));
    assert_int_equal(drain(ds, SL_ERRORS_SKIP, &count, msg), SL_EOF);
    assert_int_equal(count, 36);
    sl_dataset_release(ds);
    /* not a shard file at all */
    p[17] ^= 1;
    memcpy(p, "NOTSHARD", 8);
    tu_write_file(shard, p, n);
    ds = sl_load(path);
    assert_int_equal(drain(ds, SL_ERRORS_SKIP, &count, msg), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "bad magic"));
    sl_dataset_release(ds);
    /* truncated, and missing */
    memcpy(p, "SLSHARD1", 8);
    tu_write_file(shard, p, n - 1);
    ds = sl_load(path);
    assert_int_equal(drain(ds, SL_ERRORS_SKIP, &count, msg), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "truncated or replaced"));
    unlink(shard);
    assert_int_equal(drain(ds, SL_ERRORS_SKIP, &count, msg), SL_ENOENT);
    assert_non_null(strstr(sl_last_error(), "shard-00000003.sls"));
    sl_dataset_release(ds);
    free(p);
    tu_rmdir(path);
}

/* ---- snapshot ---- */

static int counting(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    atomic_fetch_add((atomic_int *)user, 1);
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static sl_dataset *snap_of(int n, atomic_int *calls, const char *path, int compression)
{
    /* (take names n in the fingerprint, which tu_elements' does not hash) */
    sl_dataset *in = sl_map(sl_take(records(n), n), "count", counting, calls, 1, 0);
    sl_structure *s = sl_structure_parse("{id: int64[], name: string[], vec: float32[?]}");
    in = sl_with_structure(in, s);
    sl_structure_release(s);
    return sl_snapshot(in, path, compression);
}

static void test_snapshot(void **state)
{
    (void)state;
    char path[512];
    path_in(path, "snap");
    atomic_int calls = 0;
    sl_dataset *ds = snap_of(30, &calls, path, SL_COMPRESSION_NONE);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 30);
    expect_records(ds, 30); /* writes */
    assert_int_equal(calls, 30);
    assert_int_equal(count_entries(path), 2); /* <fingerprint>/ and its lock */
    expect_records(ds, 30); /* reads: the input does not run */
    assert_int_equal(calls, 30);
    sl_dataset_release(ds);
    /* another dataset object of the same pipeline, another "process": reads */
    ds = snap_of(30, &calls, path, SL_COMPRESSION_NONE);
    expect_records(ds, 30);
    assert_int_equal(calls, 30);
    sl_dataset_release(ds);
    /* a changed pipeline writes its own */
    ds = snap_of(31, &calls, path, SL_COMPRESSION_NONE);
    expect_records(ds, 31);
    assert_int_equal(calls, 61);
    assert_int_equal(count_entries(path), 4);
    sl_dataset_release(ds);
    tu_rmdir(path);
}

static void test_snapshot_partial(void **state)
{
    (void)state;
    char path[512];
    path_in(path, "snap2");
    atomic_int calls = 0;
    /* a pass cut short writes nothing and leaves no partial files */
    sl_dataset *ds = sl_take(snap_of(50, &calls, path, SL_COMPRESSION_NONE), 10);
    expect_records(ds, 10);
    sl_dataset_release(ds);
    assert_int_equal(count_entries(path), 1); /* the lock alone */
    /* an iterator freed mid-pass likewise */
    ds = snap_of(50, &calls, path, SL_COMPRESSION_NONE);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    /* while it writes, a second iterator passes through unwritten (the
     * map runs for both, the first's ahead of its consumer) */
    expect_records(ds, 50);
    assert_int_equal(count_entries(path), 2); /* the lock and the first's partial */
    sl_iterator_free(it);
    assert_int_equal(count_entries(path), 1);
    /* a full pass writes it; a damaged one is rebuilt, with a warning */
    expect_records(ds, 50);
    calls = 0;
    expect_records(ds, 50);
    assert_int_equal(calls, 0);
    char m[1024];
    DIR *d = opendir(path);
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && !strstr(e->d_name, ".lock"))
            snprintf(m, sizeof m, "%s/%s/manifest", path, e->d_name);
    closedir(d);
    tu_write_file(m, "sluice-saved-dataset 1\n", 23);
    expect_records(ds, 50);
    assert_int_equal(calls, 50);
    expect_records(ds, 50);
    assert_int_equal(calls, 50);
    /* a shard gone: rebuilt too */
    char shard[1100];
    snprintf(shard, sizeof shard, "%.*s/shard-00000000.sls", (int)(strlen(m) - 9), m);
    assert_int_equal(unlink(shard), 0);
    expect_records(ds, 50);
    assert_int_equal(calls, 100);
    expect_records(ds, 50);
    assert_int_equal(calls, 100);
    sl_dataset_release(ds);
#ifndef SLUICE_NO_ZLIB
    ds = snap_of(20, &calls, path, SL_COMPRESSION_GZIP);
    expect_records(ds, 20);
    calls = 0;
    expect_records(ds, 20);
    assert_int_equal(calls, 0);
    sl_dataset_release(ds);
#else
    assert_null(snap_of(20, &calls, path, SL_COMPRESSION_GZIP));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
#endif
    tu_rmdir(path);
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
    sl_set_log_level(SL_LOG_ERROR);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(dir);
    return 0;
}

/* load().shuffle(ALL): every record once, in an order the seed fixes
 * whatever the threads, from plain and compressed saves, sharded by a
 * key function or not; a record changed after the index was made is an
 * element error naming the shard file. */
static void test_random_access(void **state)
{
    (void)state;
    const int n = 3000;
#ifndef SLUICE_NO_ZLIB
    const int cases = 2; /* plain, then gzip */
#else
    const int cases = 1;
#endif
    for (int c = 0; c < cases; c++) {
        char path[512];
        path_in(path, "ra");
        sl_dataset *src = records(n);
        int comp = c ? SL_COMPRESSION_GZIP : SL_COMPRESSION_NONE;
        assert_int_equal(sl_save(src, path, NULL, comp, c ? NULL : by_last_digit, NULL), 0);
        sl_dataset_release(src);
        int first[2][8];
        for (int threads = 1; threads <= 2; threads++) {
            sl_dataset *ds = sl_shuffle(sl_load(path), SL_SHUFFLE_ALL, 4, 0);
            assert_non_null(ds);
            assert_int_equal(sl_dataset_cardinality(ds), n);
            sl_options *o = tu_opts(threads, 4);
            sl_iterator *it = sl_iterator_create(ds, o);
            char *seen = calloc((size_t)n, 1);
            sl_element *el;
            int got = 0, in_order = 0;
            while (sl_next(it, &el) == 0) {
                int id = (int)sl_tensor_int64(sl_element_tensor(el, 0));
                assert_true(id >= 0 && id < n && !seen[id]);
                check_record(el, id);
                seen[id] = 1;
                in_order += id == got;
                if (got < 8)
                    first[threads - 1][got] = id;
                got++;
                sl_element_release(el);
            }
            assert_string_equal(sl_iterator_errmsg(it), "");
            assert_int_equal(got, n);
            assert_true(in_order < n / 10);
            free(seen);
            sl_iterator_free(it);
            sl_options_free(o);
            sl_dataset_release(ds);
        }
        assert_memory_equal(first[0], first[1], sizeof first[0]);
        /* uncompressed: one record changed in place after the index was
         * made fails alone; compressed: a damaged chunk is found by the
         * index's pass, and its elements alone are lost, naming the file */
        sl_dataset *ds = sl_load(path);
        sl_dataset *sh = sl_shuffle(sl_dataset_retain(ds), SL_SHUFFLE_ALL, 4, 0);
        sl_iterator *it = sl_iterator_create(sh, NULL);
        sl_element *el;
        if (c == 0) {
            assert_int_equal(sl_next(it, &el), 0); /* the index is made */
            sl_element_release(el);
        }
        char shard[600];
        snprintf(shard, sizeof shard, "%s/shard-%08d.sls", path, c ? 0 : 9);
        unsigned char *p;
        size_t len;
        tu_read_file(shard, &p, &len);
        /* uncompressed: the first record's element index; compressed: a
         * byte in its first chunk's stored bytes */
        size_t at = c ? 16 + 20 + 5 : 16 + 20;
        p[at] ^= 0x40;
        int fd = open(shard, O_WRONLY);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, p + at, 1, (off_t)at), 1);
        close(fd);
        free(p);
        sl_options *o = tu_opts(1, 4);
        sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
        sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0);
        sl_iterator_free(it);
        it = sl_iterator_create(sh, o);
        int got = 0;
        while (sl_next(it, &el) == 0) {
            got++;
            sl_element_release(el);
        }
        if (c ? got == 0 || got >= n : got != n - 1)
            fail_msg("compression %d: %d of %d", c, got, n);
        sl_iterator_free(it);
        it = sl_iterator_create(sh, NULL);
        int rc;
        while ((rc = sl_next(it, &el)) == 0)
            sl_element_release(el);
        assert_int_equal(rc, SL_ECORRUPT);
        assert_non_null(strstr(sl_iterator_errmsg(it), shard));
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(sh);
        sl_dataset_release(ds);
        tu_rmdir(path);
    }
}

static int shard_zero(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)el, (void)user;
    *key = 0;
    return 0;
}

/* A manifest whose element count its shards cannot hold (checksum and
 * sums made right) is refused when the index would be made, before its
 * count is allocated for; the refusal is kept, not made again. */
static void test_random_access_huge_count(void **state)
{
    (void)state;
    char path[512];
    path_in(path, "huge");
    sl_dataset *src = records(40);
    assert_int_equal(sl_save(src, path, NULL, SL_COMPRESSION_NONE, shard_zero, NULL), 0);
    sl_dataset_release(src);
    edit_manifest(path, "elements 40\n", "elements 1537228672809129302\n");
    edit_manifest(path, "shard 0 40 ", "shard 0 1537228672809129302 ");
    sl_dataset *ds = sl_shuffle(sl_load(path), SL_SHUFFLE_ALL, 1, 0);
    assert_non_null(ds);
    sl_options *o = tu_opts(1, 1);
    for (int pass = 0; pass < 2; pass++) { /* the second meets the kept refusal */
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
        assert_non_null(strstr(sl_iterator_errmsg(it), "more than its shards can hold"));
        sl_iterator_free(it);
    }
    sl_options_free(o);
    sl_dataset_release(ds);
    tu_rmdir(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_big_elements),
        cmocka_unit_test(test_replace_and_failures),
        cmocka_unit_test(test_damaged_manifest),
        cmocka_unit_test(test_damaged_shards),
        cmocka_unit_test(test_random_access),
        cmocka_unit_test(test_random_access_huge_count),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_snapshot_partial),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
