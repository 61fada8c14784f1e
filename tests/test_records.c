/* Sharded record formats: CRC-32C, TFRecord (plain, ZLIB, GZIP), tar
 * shards (ustar, GNU long names, pax, gzip), list_files, and every kind of
 * bad input the formats can carry, each with the file and offset named. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../src/core/crc32c.h"
#include "recordutil.h"
#include "testutil.h"

static char dir[256];

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static sl_options *opts(int policy)
{
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_set(o, SL_OPT_THREADS, 2), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    return o;
}

/* A dataset of the given files' paths (under dir). */
static sl_dataset *files(const char *const *names, int n)
{
    const char *paths[16];
    char buf[16][512];
    for (int i = 0; i < n; i++) {
        path_of(buf[i], sizeof buf[i], names[i]);
        paths[i] = buf[i];
    }
    return sl_from_files(paths, NULL, (size_t)n);
}

/* ---- CRC-32C ---- */

static void test_crc32c(void **state)
{
    (void)state;
    /* the check value of CRC-32C, and RFC 3720's 32 zero bytes */
    assert_int_equal(sl_crc32c(0, "123456789", 9), 0xe3069283u);
    unsigned char zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof ones);
    assert_int_equal(sl_crc32c(0, zeros, 32), 0x8a9136aau);
    assert_int_equal(sl_crc32c(0, ones, 32), 0x62a8ab43u);
    /* every length and alignment: tables, SSE4.2 and pieces agree */
    unsigned char buf[1100];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(tu_mix(i) >> 7);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += n < 40 ? 1 : 37) {
            uint32_t t = sl__crc32c_table(0, buf + off, n);
            assert_int_equal(sl__crc32c(0, buf + off, n), t);
#if defined(__x86_64__)
            if (sl__crc32c_has_sse42())
                assert_int_equal(sl__crc32c_sse42(0, buf + off, n), t);
            if (sl__crc32c_has_avx512())
                assert_int_equal(sl__crc32c_avx512(0, buf + off, n), t);
#endif
            size_t cut = n / 3;
            assert_int_equal(sl__crc32c(sl__crc32c(0, buf + off, cut), buf + off + cut, n - cut), t);
        }
    assert_int_equal(sl_crc32c(7, NULL, 0), 7);
    /* long enough for the three-chain blocks, the folding's 256-byte
     * blocks (each side of its threshold, a block more or less), and the
     * fused copy */
    size_t big = 40000;
    unsigned char *lb = malloc(big + 8), *dst = malloc(big + 8);
    for (size_t i = 0; i < big + 8; i++)
        lb[i] = (unsigned char)(tu_mix(i * 31) >> 9);
    size_t lens[] = {511,  512,  513,  767,  768,        1023,  1024, 1279,
                     3071, 3072, 3073, 6144, 9216 + 77, 33333, big};
    for (size_t off = 0; off < 8; off += 3)
        for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
            size_t n = lens[k];
            uint32_t t = sl__crc32c_table(5, lb + off, n);
            assert_int_equal(sl__crc32c(5, lb + off, n), t);
#if defined(__x86_64__)
            if (sl__crc32c_has_avx512())
                assert_int_equal(sl__crc32c_avx512(5, lb + off, n), t);
#endif
            memset(dst, 0, big + 8);
            assert_int_equal(sl__crc32c_copy(5, dst + (off ^ 1), lb + off, n), t);
            assert_memory_equal(dst + (off ^ 1), lb + off, n);
        }
    free(lb);
    free(dst);
}

/* ---- TFRecord ---- */

#define NREC 40

/* Record i: i bytes of a pattern, some of them big enough to span
 * several of the stream's 128 KiB chunks. */
static size_t rec_len(int i)
{
    return i % 7 == 3 ? 300000 + (size_t)i * 977 : (size_t)i * 13;
}

static unsigned char *rec_data(int i, size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    for (size_t k = 0; k < n; k++)
        p[k] = (unsigned char)(tu_mix((uint64_t)i * 1000003 + k) >> 11);
    return p;
}

static ru_buf tfrecord_file(int first, int count)
{
    ru_buf b = {0};
    for (int i = first; i < first + count; i++) {
        size_t n = rec_len(i);
        unsigned char *p = rec_data(i, n);
        ru_record(&b, p, n);
        free(p);
    }
    return b;
}

/* Runs ds and checks that it yields records first .. first+count-1 (as
 * strings), returning the iterator's skip count. */
static int64_t expect_records(sl_dataset *ds, const int *which, int count, int policy,
                              int expect_rc, char *msg)
{
    sl_options *o = opts(policy);
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        print_error("create: %s\n", sl_last_error());
    assert_non_null(it);
    sl_element *el;
    int got = 0, rc;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(got < count);
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_dtype(t), SL_STRING);
        size_t len;
        const char *s = sl_tensor_string(t, 0, &len);
        size_t n = rec_len(which[got]);
        unsigned char *want = rec_data(which[got], n);
        if (len != n || memcmp(s, want, n) != 0)
            print_error("record %d: %zu bytes, want record %d of %zu\n", got, len, which[got], n);
        assert_int_equal(len, n);
        assert_memory_equal(s, want, n);
        free(want);
        sl_element_release(el);
        got++;
    }
    if (rc != expect_rc)
        print_error("ended with %d (%s), want %d\n", rc, sl_iterator_errmsg(it), expect_rc);
    assert_int_equal(rc, expect_rc);
    if (msg)
        snprintf(msg, 1024, "%s", sl_iterator_errmsg(it));
    if (rc == SL_EOF)
        assert_int_equal(got, count);
    int64_t skipped = sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return skipped;
}

static void test_tfrecord_read(void **state)
{
    (void)state;
    ru_buf a = tfrecord_file(0, NREC / 2), b = tfrecord_file(NREC / 2, NREC / 2);
    char p[512];
    path_of(p, sizeof p, "a.tfrecord");
    ru_write(p, a.p, a.n);
    path_of(p, sizeof p, "b.tfrecord");
    ru_write(p, b.p, b.n);
    ru_buf az = ru_deflate(&a, 15), bz = ru_deflate(&b, 15);
    ru_buf ag = ru_deflate(&a, 31), bg = ru_deflate(&b, 31);
    path_of(p, sizeof p, "a.zlib");
    ru_write(p, az.p, az.n);
    path_of(p, sizeof p, "b.zlib");
    ru_write(p, bz.p, bz.n);
    /* two gzip members in one file read as one stream, as gzip -d does */
    ru_buf cat = {0};
    ru_put(&cat, ag.p, ag.n);
    ru_put(&cat, bg.p, bg.n);
    path_of(p, sizeof p, "ab.gz");
    ru_write(p, cat.p, cat.n);
    int all[NREC];
    for (int i = 0; i < NREC; i++)
        all[i] = i;
    const char *plain[] = {"a.tfrecord", "b.tfrecord"}, *zl[] = {"a.zlib", "b.zlib"},
               *gz[] = {"ab.gz"};
    assert_int_equal(expect_records(sl_tfrecord(files(plain, 2), SL_COMPRESSION_NONE, 0), all,
                                    NREC, SL_ERRORS_FAIL, SL_EOF, NULL), 0);
    assert_int_equal(expect_records(sl_tfrecord(files(zl, 2), SL_COMPRESSION_ZLIB, 0), all,
                                    NREC, SL_ERRORS_FAIL, SL_EOF, NULL), 0);
    assert_int_equal(expect_records(sl_tfrecord(files(gz, 1), SL_COMPRESSION_GZIP,
                                                SL_TFRECORD_NO_DATA_CRC),
                                    all, NREC, SL_ERRORS_FAIL, SL_EOF, NULL), 0);
    /* with paths: the file last; empty file: no records */
    path_of(p, sizeof p, "empty.tfrecord");
    ru_write(p, "", 0);
    const char *two[] = {"empty.tfrecord", "a.tfrecord"};
    sl_dataset *ds = sl_tfrecord(files(two, 2), SL_COMPRESSION_NONE, SL_WITH_PATHS);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_element_size(el), 2);
    path_of(p, sizeof p, "a.tfrecord");
    tu_check_string(sl_element_tensor(el, 1), 0, p);
    sl_element_release(el);
    /* the statistics name the engine the shard's stream reads through */
    int64_t backend = sl_iterator_stat(it, SL_STAT_IO_BACKEND);
    assert_true(backend == SL_IO_URING || backend == SL_IO_PREAD);
    sl_iterator_free(it);
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_set(o, SL_OPT_IO_BACKEND, SL_IO_PREAD), 0);
    it = sl_iterator_create(ds, o);
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_IO_BACKEND), SL_IO_PREAD);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    free(a.p), free(b.p), free(az.p), free(bz.p), free(ag.p), free(bg.p), free(cat.p);
}

/* A file with records 0..9 damaged by `damage`, then records 10..14 in a
 * second, good file. */
typedef void (*damage_fn)(ru_buf *b, size_t rec3_at);

static void run_damaged(const char *name, int comp, damage_fn damage, const int *fail_order,
                        int fail_n, const int *skip_order, int skip_n, int64_t skips,
                        const char *words, int64_t max_record)
{
    ru_buf b = {0};
    size_t rec3 = 0;
    for (int i = 0; i < 10; i++) {
        if (i == 3)
            rec3 = b.n;
        size_t n = rec_len(i);
        unsigned char *p = rec_data(i, n);
        ru_record(&b, p, n);
        free(p);
    }
    damage(&b, rec3);
    if (comp != SL_COMPRESSION_NONE) {
        ru_buf z = ru_deflate(&b, comp == SL_COMPRESSION_GZIP ? 31 : 15);
        free(b.p);
        b = z;
    }
    char p[512];
    path_of(p, sizeof p, name);
    ru_write(p, b.p, b.n);
    free(b.p);
    ru_buf good = {0};
    for (int i = 10; i < 15; i++) {
        size_t n = rec_len(i);
        unsigned char *d = rec_data(i, n);
        ru_record(&good, d, n);
        free(d);
    }
    if (comp != SL_COMPRESSION_NONE) {
        ru_buf z = ru_deflate(&good, comp == SL_COMPRESSION_GZIP ? 31 : 15);
        free(good.p);
        good = z;
    }
    path_of(p, sizeof p, "good.tfrecord");
    ru_write(p, good.p, good.n);
    free(good.p);
    const char *names[] = {name, "good.tfrecord"};
    char msg[1024];
    sl_options *o = sl_options_create();
    if (max_record)
        sl_options_set(o, SL_OPT_MAX_RECORD_BYTES, max_record);
    /* fail: the records before the damage, then the error naming the file */
    sl_dataset *ds = sl_tfrecord(files(names, 2), comp, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    int got = 0, rc;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(got < fail_n);
        size_t len;
        sl_tensor_string(sl_element_tensor(el, 0), 0, &len);
        assert_int_equal(len, rec_len(fail_order[got]));
        sl_element_release(el);
        got++;
    }
    snprintf(msg, sizeof msg, "%s", sl_iterator_errmsg(it));
    if (rc >= 0 || got != fail_n || !strstr(msg, words) || !strstr(msg, name))
        print_error("%s: rc %d after %d records: \"%s\" (want \"%s\")\n", name, rc, got, msg,
                    words);
    assert_true(rc < 0);
    assert_int_equal(got, fail_n);
    assert_non_null(strstr(msg, words));
    assert_non_null(strstr(msg, name));
    assert_non_null(strstr(msg, "tfrecord"));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    /* skip: what the rule keeps, and the count */
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    ds = sl_tfrecord(files(names, 2), comp, 0);
    it = sl_iterator_create(ds, o);
    got = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(got < skip_n);
        size_t len;
        sl_tensor_string(sl_element_tensor(el, 0), 0, &len);
        assert_int_equal(len, rec_len(skip_order[got]));
        sl_element_release(el);
        got++;
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(got, skip_n);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), skips);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    sl_options_free(o);
}

static void bad_length_crc(ru_buf *b, size_t at)
{
    b->p[at + 9] ^= 1;
}

static void bad_data_crc(ru_buf *b, size_t at)
{
    b->p[at + 12 + rec_len(3) / 2] ^= 0x10; /* a data byte: its CRC no longer matches */
}

static void truncate_mid(ru_buf *b, size_t at)
{
    b->n = at + 12 + rec_len(3) / 2;
}

static void huge_length(ru_buf *b, size_t at)
{
    /* a length far past the file, with a CRC that vouches for it */
    unsigned char h[12];
    ru_le(h, (uint64_t)1 << 40, 8);
    ru_le(h + 8, ru_mask(sl_crc32c(0, h, 8)), 4);
    memcpy(b->p + at, h, 12);
}

static void keep(ru_buf *b, size_t at)
{
    (void)b, (void)at;
}

static void test_tfrecord_damaged(void **state)
{
    (void)state;
    int first3[] = {0, 1, 2};
    int all_but3[] = {0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    int lost_rest[] = {0, 1, 2, 10, 11, 12, 13, 14};
    /* a bad length: the rest of that file is lost, the next file is read */
    run_damaged("lcrc.tfrecord", SL_COMPRESSION_NONE, bad_length_crc, first3, 3, lost_rest, 8,
                1, "bad length CRC", 0);
    /* a bad data CRC: only that record */
    run_damaged("dcrc.tfrecord", SL_COMPRESSION_NONE, bad_data_crc, first3, 3, all_but3, 14, 1,
                "bad data CRC in the record at byte", 0);
    run_damaged("dcrc.gz", SL_COMPRESSION_GZIP, bad_data_crc, first3, 3, all_but3, 14, 1,
                "of the uncompressed stream", 0);
    /* cut short in a record's data */
    run_damaged("cut.tfrecord", SL_COMPRESSION_NONE, truncate_mid, first3, 3, lost_rest, 8, 1,
                "file ends inside a record", 0);
    /* a length that claims more than the file holds, and more than the limit */
    run_damaged("huge.tfrecord", SL_COMPRESSION_NONE, huge_length, first3, 3, lost_rest, 8, 1,
                "over the limit", 0);
    /* a record over a lowered limit loses only itself */
    int small_only[] = {0, 1, 2, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14};
    int before_big[] = {0, 1, 2};
    run_damaged("limit.tfrecord", SL_COMPRESSION_NONE, keep, before_big, 3, small_only, 13, 2,
                "SL_OPT_MAX_RECORD_BYTES", 200000);
}

static void test_compressed_damaged(void **state)
{
    (void)state;
    ru_buf b = tfrecord_file(0, 10);
    ru_buf g = ru_deflate(&b, 31);
    char p[512];
    /* a gzip stream with its middle scrambled, and one cut short */
    ru_buf bad = {0};
    ru_put(&bad, g.p, g.n);
    for (size_t i = 10; i < 40; i++) /* the first deflate block's header and codes */
        bad.p[i] ^= 0x5a;
    path_of(p, sizeof p, "scrambled.gz");
    ru_write(p, bad.p, bad.n);
    path_of(p, sizeof p, "cut.gz");
    ru_write(p, g.p, g.n * 2 / 3);
    const char *names[][1] = {{"scrambled.gz"}, {"cut.gz"}};
    const char *words[] = {"corrupt compressed stream", "compressed stream cut short"};
    for (int k = 0; k < 2; k++) {
        sl_dataset *ds = sl_tfrecord(files(names[k], 1), SL_COMPRESSION_GZIP, 0);
        sl_options *o = opts(SL_ERRORS_FAIL);
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        int rc;
        while ((rc = sl_next(it, &el)) == 0)
            sl_element_release(el);
        const char *msg = sl_iterator_errmsg(it);
        if (rc != SL_ECORRUPT || !strstr(msg, words[k]) || !strstr(msg, names[k][0]))
            print_error("%s: %d \"%s\"\n", names[k][0], rc, msg);
        assert_int_equal(rc, SL_ECORRUPT);
        assert_non_null(strstr(msg, words[k]));
        assert_non_null(strstr(msg, names[k][0]));
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
    /* compressed files read as plain: the error says which compression */
    ru_buf z = ru_deflate(&b, 15);
    path_of(p, sizeof p, "plain.zlib");
    ru_write(p, z.p, z.n);
    path_of(p, sizeof p, "plain.gz");
    ru_write(p, g.p, g.n);
    const char *as_plain[][1] = {{"plain.gz"}, {"plain.zlib"}};
    const char *which[] = {"read it with compression GZIP", "read it with compression ZLIB"};
    for (int k = 0; k < 2; k++) {
        sl_dataset *ds = sl_tfrecord(files(as_plain[k], 1), SL_COMPRESSION_NONE, 0);
        sl_iterator *it = sl_iterator_create(ds, NULL);
        sl_element *el;
        assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
        const char *msg = sl_iterator_errmsg(it);
        if (!strstr(msg, which[k]) || !strstr(msg, "at byte 0"))
            print_error("%s: \"%s\"\n", as_plain[k][0], msg);
        assert_non_null(strstr(msg, which[k]));
        assert_non_null(strstr(msg, "at byte 0"));
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    free(z.p);
    /* a missing file is an element error naming it */
    const char *missing[] = {"nope.tfrecord", "a.tfrecord"};
    ru_buf a = tfrecord_file(0, 3);
    path_of(p, sizeof p, "a.tfrecord");
    ru_write(p, a.p, a.n);
    int want[] = {0, 1, 2};
    char msg[1024];
    expect_records(sl_tfrecord(files(missing, 2), 0, 0), want, 0, SL_ERRORS_FAIL, SL_ENOENT, msg);
    assert_non_null(strstr(msg, "nope.tfrecord"));
    assert_int_equal(expect_records(sl_tfrecord(files(missing, 2), 0, 0), want, 3, SL_ERRORS_SKIP,
                                    SL_EOF, NULL), 1);
    free(a.p), free(b.p), free(g.p), free(bad.p);
}

/* ---- tar shards ---- */

static void member_text(char *buf, size_t n, int sample, const char *ext)
{
    snprintf(buf, n, "%s of sample %d", ext, sample);
}

/* Samples 0..n-1 as x/NNNN.{jpg,cls,json}, alternating member kinds. */
static ru_buf tar_file(int first, int n, bool extras)
{
    ru_buf b = {0};
    for (int s = first; s < first + n; s++) {
        char name[320], text[128], cls[16];
        unsigned char *img = rec_data(s, 1000 + (size_t)s * 37);
        if (s % 3 == 1) {
            snprintf(name, sizeof name, "a/very/long/directory/name/that/needs/more/than/a/"
                     "hundred/bytes/of/ustar/name/field/to/hold/it/%04d.jpg", s);
            ru_tar_gnu_long(&b, name, img, 1000 + (size_t)s * 37);
        } else if (s % 3 == 2) {
            snprintf(name, sizeof name, "pax/%04d.jpg", s);
            ru_tar_pax(&b, name, img, 1000 + (size_t)s * 37);
        } else {
            snprintf(name, sizeof name, "x/%04d.jpg", s);
            ru_tar_file(&b, name, img, 1000 + (size_t)s * 37);
        }
        free(img);
        char key[240];
        snprintf(key, sizeof key, "%.*s", (int)(strrchr(name, '.') - name), name);
        snprintf(cls, sizeof cls, " %d\n", s % 10);
        snprintf(name, sizeof name, "%s.cls", key);
        ru_tar_file(&b, name, cls, strlen(cls));
        if (extras) { /* a directory entry and a member nobody asked for */
            unsigned char h[512];
            ru_tar_header(h, "somedir/", 0, '5');
            ru_put(&b, h, 512);
        }
        member_text(text, sizeof text, s, "json");
        snprintf(name, sizeof name, "%s.json", key);
        ru_tar_file(&b, name, text, strlen(text));
    }
    ru_tar_end(&b);
    return b;
}

static int expect_samples(sl_dataset *ds, int first, int policy, int want_rc, int64_t *skips,
                          char *msg)
{
    sl_options *o = opts(policy);
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        print_error("create: %s\n", sl_last_error());
    assert_non_null(it);
    sl_element *el;
    int got = 0, rc;
    while ((rc = sl_next(it, &el)) == 0) {
        int s = first + got;
        const sl_tensor *jpg = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_dtype(jpg), SL_UINT8);
        size_t n = 1000 + (size_t)s * 37;
        unsigned char *want = rec_data(s, n);
        if (sl_tensor_nbytes(jpg) != n)
            print_error("sample %d: %zu bytes\n", s, sl_tensor_nbytes(jpg));
        assert_int_equal(sl_tensor_nbytes(jpg), n);
        assert_memory_equal(sl_tensor_data(jpg), want, n);
        free(want);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 1)), s % 10);
        char text[128];
        member_text(text, sizeof text, s, "json");
        tu_check_string(sl_element_tensor(el, 2), 0, text);
        sl_element_release(el);
        got++;
    }
    if (rc != want_rc)
        print_error("ended %d: %s\n", rc, sl_iterator_errmsg(it));
    assert_int_equal(rc, want_rc);
    if (msg)
        snprintf(msg, 1024, "%s", sl_iterator_errmsg(it));
    if (skips)
        *skips = sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return got;
}

static const char *tar_keys[] = {"jpg;jpeg", "cls", "json"};
static const sl_dtype tar_types[] = {SL_UINT8, SL_INT64, SL_STRING};

static sl_dataset *tars(const char *const *names, int n)
{
    return sl_tar_shards(files(names, n), tar_keys, tar_types, 3, 0);
}

static void test_tar_read(void **state)
{
    (void)state;
    ru_buf a = tar_file(0, 12, true), b = tar_file(12, 9, false);
    ru_buf bg = ru_deflate(&b, 31);
    char p[512];
    path_of(p, sizeof p, "a.tar");
    ru_write(p, a.p, a.n);
    path_of(p, sizeof p, "b.tar.gz");
    ru_write(p, bg.p, bg.n);
    const char *names[] = {"a.tar", "b.tar.gz"};
    assert_int_equal(expect_samples(tars(names, 2), 0, SL_ERRORS_FAIL, SL_EOF, NULL, NULL),
                     21);
    /* without the end blocks (a file some writers make) */
    path_of(p, sizeof p, "noend.tar");
    ru_write(p, a.p, a.n - 1024);
    const char *noend[] = {"noend.tar"};
    assert_int_equal(expect_samples(tars(noend, 1), 0, SL_ERRORS_FAIL, SL_EOF, NULL, NULL),
                     12);
    /* the key with SL_WITH_PATHS, bytes by default */
    sl_dataset *ds = sl_tar_shards(files(names, 1), tar_keys, NULL, 1, SL_WITH_PATHS);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_element_size(el), 2);
    tu_check_string(sl_element_tensor(el, 1), 0, "x/0000");
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    size_t len;
    const char *k = sl_tensor_string(sl_element_tensor(el, 1), 0, &len);
    if (strncmp(k, "a/very/long", 11) || !strstr(k, "/0001"))
        print_error("key of sample 1: %.*s\n", (int)len, k);
    assert_true(len > 90 && !strncmp(k, "a/very/long", 11) && strstr(k, "/0001")); /* GNU */
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    tu_check_string(sl_element_tensor(el, 1), 0, "pax/0002");
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    free(a.p), free(b.p), free(bg.p);
}

/* Header checksums summed as unsigned bytes (POSIX) or as signed chars
 * (some old tars): names with bytes from 128 up tell them apart. */
static void test_tar_checksums(void **state)
{
    (void)state;
    ru_buf b = {0};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "\xc3\xa9t\xc3\xa9/%d.jpg", i);
        unsigned char h[512];
        ru_tar_header(h, name, 3, '0');
        if (i > 0) { /* the signed sum; one off from it for the third */
            memset(h + 148, ' ', 8);
            int sum = 0;
            for (int k = 0; k < 512; k++)
                sum += (signed char)h[k];
            snprintf((char *)h + 148, 8, "%06o", sum + (i == 2));
            h[155] = ' ';
        }
        ru_put(&b, h, 512);
        ru_tar_data(&b, "abc", 3);
    }
    ru_tar_end(&b);
    char p[512];
    path_of(p, sizeof p, "sums.tar");
    ru_write(p, b.p, b.n);
    const char *names[] = {"sums.tar"};
    static const char *keys[] = {"jpg"};
    sl_dataset *ds = sl_tar_shards(files(names, 1), keys, NULL, 1, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_memory_equal(sl_tensor_data(sl_element_tensor(el, 0)), "abc", 3);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
    const char *msg = sl_iterator_errmsg(it);
    if (!strstr(msg, "bad header checksum") || !strstr(msg, "at byte 2048"))
        print_error("%s\n", msg);
    assert_non_null(strstr(msg, "bad header checksum"));
    assert_non_null(strstr(msg, "at byte 2048"));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    free(b.p);
}

static void test_tar_damaged(void **state)
{
    (void)state;
    ru_buf a = tar_file(0, 8, false), good = tar_file(8, 4, false);
    char p[512];
    path_of(p, sizeof p, "good.tar");
    ru_write(p, good.p, good.n);
    /* sample 3's first header has a bad checksum: lose the rest */
    size_t at = 0;
    for (size_t i = 0; i + 512 <= a.n; i += 512)
        if (!memcmp(a.p + i, "x/0003.jpg", 10)) {
            at = i;
            break;
        }
    assert_true(at > 0);
    ru_buf bad = {0};
    ru_put(&bad, a.p, a.n);
    bad.p[at + 5] ^= 0x20;
    path_of(p, sizeof p, "badsum.tar");
    ru_write(p, bad.p, bad.n);
    const char *n1[] = {"badsum.tar", "good.tar"};
    char msg[1024];
    assert_int_equal(expect_samples(tars(n1, 2), 0, SL_ERRORS_FAIL, SL_ECORRUPT, NULL, msg),
                     3);
    assert_non_null(strstr(msg, "bad header checksum"));
    assert_non_null(strstr(msg, "badsum.tar"));
    char where[64];
    snprintf(where, sizeof where, "at byte %zu", at);
    assert_non_null(strstr(msg, where));
    int64_t skips = 0;
    /* under skip: samples 0-2, then the next file */
    sl_options *o = opts(SL_ERRORS_SKIP);
    sl_dataset *ds = tars(n1, 2);
    assert_int_equal(tu_count(ds, o), 7);
    sl_dataset_release(ds);
    sl_options_free(o);
    /* a member running past the end of the file */
    path_of(p, sizeof p, "cut.tar");
    ru_write(p, a.p, at + 512 + 300);
    const char *n2[] = {"cut.tar"};
    assert_int_equal(expect_samples(tars(n2, 1), 0, SL_ERRORS_FAIL, SL_ECORRUPT, NULL, msg),
                     3);
    assert_non_null(strstr(msg, "runs past the end"));
    /* a sample missing a key: that sample only */
    ru_buf miss = {0};
    for (int s = 0; s < 4; s++) {
        char name[64], cls[8], text[64];
        unsigned char *img = rec_data(s, 1000 + (size_t)s * 37);
        snprintf(name, sizeof name, "x/%04d.jpg", s);
        ru_tar_file(&miss, name, img, 1000 + (size_t)s * 37);
        free(img);
        snprintf(cls, sizeof cls, "%d", s % 10);
        snprintf(name, sizeof name, "x/%04d.cls", s);
        if (s != 2)
            ru_tar_file(&miss, name, cls, strlen(cls));
        member_text(text, sizeof text, s, "json");
        snprintf(name, sizeof name, "x/%04d.json", s);
        ru_tar_file(&miss, name, text, strlen(text));
    }
    ru_tar_end(&miss);
    path_of(p, sizeof p, "miss.tar");
    ru_write(p, miss.p, miss.n);
    const char *n3[] = {"miss.tar"};
    assert_int_equal(expect_samples(tars(n3, 1), 0, SL_ERRORS_FAIL, SL_ECORRUPT, NULL, msg), 2);
    assert_non_null(strstr(msg, "sample x/0002"));
    assert_non_null(strstr(msg, "has no 'cls'"));
    o = opts(SL_ERRORS_SKIP);
    ds = tars(n3, 1);
    assert_int_equal(tu_count(ds, o), 3);
    sl_dataset_release(ds);
    sl_options_free(o);
    (void)skips;
    free(a.p), free(good.p), free(bad.p), free(miss.p);
}

/* ---- list_files ---- */

static void test_list_files(void **state)
{
    (void)state;
    char sub[400], p[512];
    snprintf(sub, sizeof sub, "%s/shards", dir);
    mkdir(sub, 0755);
    for (int i = 9; i >= 0; i--) {
        snprintf(p, sizeof p, "%s/train-%05d-of-00010.tfrecord", sub, i);
        ru_write(p, "", 0);
    }
    snprintf(p, sizeof p, "%s/README", sub);
    ru_write(p, "", 0);
    char pat[512], pat2[512];
    snprintf(pat, sizeof pat, "%s/train-*", sub);
    snprintf(pat2, sizeof pat2, "%s/train-0000[0-4]*", sub); /* overlaps: no duplicates */
    const char *pats[] = {pat, pat2};
    sl_dataset *ds = sl_list_files(pats, 2, 0, -1);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 10);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        snprintf(p, sizeof p, "%s/train-%05d-of-00010.tfrecord", sub, i);
        tu_check_string(sl_element_tensor(el, 0), 0, p);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    /* shard: every third, before any file is opened */
    sl_dataset *sh = sl_shard(sl_dataset_retain(ds), 3, 1);
    assert_int_equal(tu_count(sh, NULL), 3);
    sl_dataset_release(sh);
    sl_dataset_release(ds);
    /* shuffled: a new order per epoch, the same for the same epoch */
    ds = sl_list_files(pats, 1, SL_LIST_SHUFFLE, 4);
    int64_t *orders[3];
    for (int e = 0; e < 3; e++) {
        sl_options *o = tu_opts(1, 0);
        sl_options_set(o, SL_OPT_EPOCH, e % 2);
        it = sl_iterator_create(ds, o);
        orders[e] = calloc(10, sizeof(int64_t));
        for (int i = 0; i < 10; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            size_t len;
            const char *s = sl_tensor_string(sl_element_tensor(el, 0), 0, &len);
            orders[e][i] = atoi(strstr(s, "train-") + 6);
            sl_element_release(el);
        }
        sl_iterator_free(it);
        sl_options_free(o);
    }
    assert_memory_equal(orders[0], orders[2], 10 * sizeof(int64_t));
    assert_memory_not_equal(orders[0], orders[1], 10 * sizeof(int64_t));
    for (int e = 0; e < 3; e++)
        free(orders[e]);
    sl_dataset_release(ds);
    /* no match */
    snprintf(pat, sizeof pat, "%s/nothing-*", sub);
    const char *none[] = {pat};
    assert_null(sl_list_files(none, 1, 0, -1));
    assert_int_equal(sl_last_error_code(), SL_ENOENT);
    assert_non_null(strstr(sl_last_error(), "nothing-*"));
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
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
        cmocka_unit_test(test_crc32c),           cmocka_unit_test(test_tfrecord_read),
        cmocka_unit_test(test_tfrecord_damaged), cmocka_unit_test(test_compressed_damaged),
        cmocka_unit_test(test_tar_read),         cmocka_unit_test(test_tar_damaged),
        cmocka_unit_test(test_tar_checksums),
        cmocka_unit_test(test_list_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
