/* image_folder and file_list: the torchvision label mapping and order,
 * element layout and contents, build-time errors, per-file errors under
 * FAIL and SKIP, shuffle/shard/take over the listing, file list parsing. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

static char root[256];

/* Contents derived from the relative path, so every file differs. */
static size_t content(const char *rel, unsigned char *buf, size_t cap)
{
    size_t n = 1 + strlen(rel) * 37 % 900;
    for (size_t j = 0; j < n && j < cap; j++)
        buf[j] = (unsigned char)(rel[j % strlen(rel)] + j);
    return n;
}

/* Writes dir/rel with the contents that belong to `key`. */
static void put_as(const char *dir, const char *rel, const char *key)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    unsigned char buf[1024];
    size_t n = content(key, buf, sizeof buf);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void put(const char *dir, const char *rel)
{
    put_as(dir, rel, rel);
}

static void mk(const char *dir, const char *rel)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

/* The tree every test reads, created in a scrambled order. Expected
 * listing, in torchvision's order: classes sorted by bytes ("10" < "9" <
 * "Alpha" < "beta" < "linked" < "zeta"), directories by path ("beta/sub"
 * < "beta/sub b" < "beta/sub/deeper"), files by name. */
typedef struct entry {
    const char *rel;
    int64_t label;
} entry;

static const entry expected[] = {
    {"10/a.jpg", 0},
    {"9/z.jpeg", 1},
    {"Alpha/B.JPG", 2},
    {"Alpha/a.Jpeg", 2},
    {"Alpha/c d.jpg", 2},
    {"beta/x.jpg", 3},
    {"beta/sub/m.jpg", 3},
    {"beta/sub b/n.jpg", 3},
    {"beta/sub/deeper/o.jpg", 3},
    {"linked/l1.jpg", 4},
    {"linked/l2.jpg", 4},
    {"zeta/q.jpg", 5},
    {"zeta/r.jpg", 5},
};
#define NEXPECTED (sizeof expected / sizeof *expected)

static char outside[300];

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(root);
    mk(root, "zeta");
    mk(root, "beta");
    mk(root, "Alpha");
    mk(root, "9");
    mk(root, "10");
    mk(root, ".git"); /* hidden: not a class */
    put(root, ".git/h.jpg");
    put(root, "readme.jpg"); /* a file at the top: not a class */
    put(root, "zeta/r.jpg");
    put(root, "zeta/q.jpg");
    put(root, "zeta/notes.txt");
    put(root, "zeta/.hidden.jpg");
    put(root, "zeta/image.bmp"); /* not an extension map_image decodes */
    put(root, "zeta/jpg"); /* no dot */
    put(root, "beta/x.jpg");
    mk(root, "beta/sub");
    mk(root, "beta/sub/deeper");
    mk(root, "beta/sub b");
    put(root, "beta/sub/deeper/o.jpg");
    put(root, "beta/sub b/n.jpg");
    put(root, "beta/sub/m.jpg");
    put(root, "Alpha/c d.jpg");
    put(root, "Alpha/a.Jpeg");
    put(root, "Alpha/B.JPG");
    put(root, "9/z.jpeg");
    put(root, "10/a.jpg");
    /* a class that is a symlink to a directory elsewhere, holding a link
     * back up (a loop the walk must not follow forever) */
    snprintf(outside, sizeof outside, "%s-outside", root);
    assert_int_equal(mkdir(outside, 0755), 0);
    put_as(outside, "l2.jpg", "linked/l2.jpg");
    put_as(outside, "l1.jpg", "linked/l1.jpg");
    char link[600];
    snprintf(link, sizeof link, "%s/linked", root);
    assert_int_equal(symlink(outside, link), 0);
    snprintf(link, sizeof link, "%s/loop", outside);
    assert_int_equal(symlink(outside, link), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(root);
    tu_rmdir(outside);
    return 0;
}

static sl_options *opts_with(int backend, int policy)
{
    sl_options *o = tu_opts(2, 7);
    assert_int_equal(sl_options_set(o, SL_OPT_IO_BACKEND, backend), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    return o;
}

/* Checks one element against the file dir/rel, with the contents of key. */
static void check_element_as(const sl_element *el, const char *dir, const char *rel,
                             const char *key, int64_t label)
{
    /* (bytes, label), and the path with SL_WITH_PATHS */
    int n_tensors = sl_element_size(el);
    assert_in_range(n_tensors, 2, 3);
    const sl_tensor *b = sl_element_tensor(el, 0), *l = sl_element_tensor(el, 1),
                    *p = sl_element_tensor(el, 2);
    unsigned char want[1024];
    size_t n = content(key, want, sizeof want);
    assert_int_equal(sl_tensor_dtype(b), SL_UINT8);
    assert_int_equal(sl_tensor_ndim(b), 1);
    assert_int_equal(sl_tensor_shape(b)[0], (int64_t)n);
    assert_memory_equal(sl_tensor_data(b), want, n);
    assert_int_equal(sl_tensor_dtype(l), SL_INT64);
    assert_int_equal(sl_tensor_ndim(l), 0);
    assert_int_equal(sl_tensor_int64(l), label);
    if (!p)
        return;
    assert_int_equal(sl_tensor_dtype(p), SL_STRING);
    assert_int_equal(sl_tensor_ndim(p), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    size_t len;
    const char *s = sl_tensor_string(p, 0, &len);
    if (len != strlen(path) || memcmp(s, path, len))
        print_error("path \"%.*s\", expected \"%s\"\n", (int)len, s, path);
    assert_int_equal(len, strlen(path));
    assert_memory_equal(s, path, len);
}

static void check_element(const sl_element *el, const char *dir, const char *rel, int64_t label)
{
    check_element_as(el, dir, rel, rel, label);
}

static int64_t expected_bytes(size_t i)
{
    unsigned char buf[1024];
    return (int64_t)content(expected[i].rel, buf, sizeof buf);
}

static void read_in_order(sl_dataset *ds, const sl_options *o)
{
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        print_error("%s\n", sl_last_error());
    assert_non_null(it);
    sl_element *el;
    size_t i = 0;
    int rc;
    int64_t total = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(i < NEXPECTED);
        check_element(el, root, expected[i].rel, expected[i].label);
        total += expected_bytes(i);
        sl_element_release(el);
        i++;
    }
    if (rc != SL_EOF)
        print_error("%d: %s\n", rc, sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(i, NEXPECTED);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BYTES_READ), total);
    sl_iterator_free(it);
}

static bool uring_works(void)
{
    sl_dataset *ds = sl_image_folder(root, NULL, SL_WITH_PATHS);
    sl_options *o = opts_with(SL_IO_URING, SL_ERRORS_FAIL);
    sl_iterator *it = sl_iterator_create(ds, o);
    bool ok = it != NULL;
    if (!ok) {
        assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
        print_message("io_uring cannot be set up here (%s)\n", sl_last_error());
    }
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return ok;
}

static void test_order_and_labels(void **state)
{
    (void)state;
    sl_dataset *ds = sl_image_folder(root, NULL, SL_WITH_PATHS);
    if (!ds)
        print_error("%s\n", sl_last_error());
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), NEXPECTED);
    sl_options *o = opts_with(SL_IO_PREAD, SL_ERRORS_FAIL);
    read_in_order(ds, o);
    sl_dataset_release(ds);
    /* without SL_WITH_PATHS: pairs, as torchvision's ImageFolder yields */
    ds = sl_image_folder(root, NULL, 0);
    assert_non_null(ds);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_element_size(el), 2);
    check_element(el, root, expected[0].rel, expected[0].label);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    o = sl_options_create();
    assert_null(sl_image_folder(root, NULL, 4));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_options_free(o);
}

static void test_uring_same(void **state)
{
    (void)state;
    if (!uring_works())
        skip();
    sl_dataset *ds = sl_image_folder(root, "jpeg,JPG", SL_WITH_PATHS);
    sl_options *o = opts_with(SL_IO_URING, SL_ERRORS_FAIL);
    read_in_order(ds, o);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_trailing_slash_and_extensions(void **state)
{
    (void)state;
    char r[300];
    snprintf(r, sizeof r, "%s//", root);
    /* ".txt" and "bmp": a leading dot and case do not matter */
    sl_dataset *ds = sl_image_folder(r, ".TXT, bmp", SL_WITH_PATHS);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 2);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    check_element(el, root, "zeta/image.bmp", 5);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    check_element(el, root, "zeta/notes.txt", 5);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void expect_build_error(sl_dataset *ds, int code, const char *msg)
{
    assert_null(ds);
    if (strcmp(sl_last_error(), msg))
        print_error("got \"%s\", expected \"%s\"\n", sl_last_error(), msg);
    assert_int_equal(sl_last_error_code(), code);
    assert_string_equal(sl_last_error(), msg);
}

static void test_build_errors(void **state)
{
    (void)state;
    char p[600], msg[1024];
    snprintf(p, sizeof p, "%s/nope", root);
    snprintf(msg, sizeof msg, "image_folder: %s: No such file or directory", p);
    expect_build_error(sl_image_folder(p, NULL, SL_WITH_PATHS), SL_ENOENT, msg);

    snprintf(p, sizeof p, "%s/readme.jpg", root);
    snprintf(msg, sizeof msg, "image_folder: %s: Not a directory", p);
    expect_build_error(sl_image_folder(p, NULL, SL_WITH_PATHS), SL_ENOENT, msg);

    snprintf(p, sizeof p, "%s/zeta", root); /* files, no class folders */
    snprintf(msg, sizeof msg, "image_folder: %s: no class folders (subdirectories)", p);
    expect_build_error(sl_image_folder(p, NULL, SL_WITH_PATHS), SL_ENOENT, msg);

    snprintf(msg, sizeof msg,
             "image_folder: %s: no files with extensions \"gif\" in 6 class folders", root);
    expect_build_error(sl_image_folder(root, "gif", SL_WITH_PATHS), SL_ENOENT, msg);

    expect_build_error(sl_image_folder(root, " , ", SL_WITH_PATHS), SL_EINVAL,
                       "image_folder: no extension in \" , \"");
    expect_build_error(sl_image_folder(NULL, NULL, SL_WITH_PATHS), SL_EINVAL, "image_folder: no root directory");
    /* a NULL listing propagates through the builders above it */
    assert_null(sl_shuffle(sl_image_folder(p, "gif", SL_WITH_PATHS), SL_SHUFFLE_ALL, 1, 0));
    assert_int_equal(sl_last_error_code(), SL_ENOENT);
}

/* shuffle-all moves below the read node and permutes the listing. */
/* Folder paths are built from their parent's in one arena that grows as
 * the walk goes: a long chain of long names makes it grow while a parent's
 * path is being copied (a use after free that fuzz_paths found, ASan
 * checks). The deepest file comes out with its whole path. */
static void test_deep_tree(void **state)
{
    (void)state;
    char dir[256], rel[700] = "c";
    tu_tmpdir(dir);
    mk(dir, "c");
    for (int d = 0; d < 12; d++) {
        size_t n = strlen(rel);
        snprintf(rel + n, sizeof rel - n, "/level%02d_%s", d, "long-enough-to-fill-an-arena");
        mk(dir, rel);
        for (int k = 0; k < 3; k++) { /* siblings, also walked */
            char sib[720];
            snprintf(sib, sizeof sib, "%s_sibling%d", rel, k);
            mk(dir, sib);
        }
    }
    size_t n = strlen(rel);
    snprintf(rel + n, sizeof rel - n, "/deep.jpg");
    put(dir, rel);
    sl_dataset *ds = sl_image_folder(dir, NULL, SL_WITH_PATHS);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    check_element(el, dir, rel, 0);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_shuffle_all(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shuffle(sl_image_folder(root, NULL, SL_WITH_PATHS), SL_SHUFFLE_ALL, 3, 0);
    assert_non_null(ds);
    assert_string_equal(sl_dataset_name(ds), "read");
    assert_int_equal(sl_dataset_cardinality(ds), NEXPECTED);
    sl_options *o = opts_with(SL_IO_AUTO, SL_ERRORS_FAIL);
    sl_iterator *it = sl_iterator_create(ds, o);
    int seen[NEXPECTED] = {0};
    size_t n = 0, moved = 0;
    sl_element *el;
    while (sl_next(it, &el) == 0) {
        size_t len;
        const char *s = sl_tensor_string(sl_element_tensor(el, 2), 0, &len);
        size_t k = 0, skip_root = strlen(root) + 1;
        while (k < NEXPECTED && !(skip_root + strlen(expected[k].rel) == len &&
                                  !memcmp(s + skip_root, expected[k].rel, len - skip_root)))
            k++;
        assert_true(k < NEXPECTED);
        check_element(el, root, expected[k].rel, expected[k].label);
        seen[k]++;
        moved += k != n;
        sl_element_release(el);
        n++;
    }
    assert_int_equal(n, NEXPECTED);
    for (size_t k = 0; k < NEXPECTED; k++)
        assert_int_equal(seen[k], 1);
    assert_true(moved > 0);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* shard and take select on the listing: other files are never read. */
static void test_shard_take_read_less(void **state)
{
    (void)state;
    sl_dataset *ds = sl_take(sl_shard(sl_image_folder(root, NULL, SL_WITH_PATHS), 3, 1), 3);
    assert_string_equal(sl_dataset_name(ds), "read");
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    int64_t total = 0;
    for (size_t k = 1; k <= 7; k += 3) {
        assert_int_equal(sl_next(it, &el), 0);
        check_element(el, root, expected[k].rel, expected[k].label);
        total += expected_bytes(k);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BYTES_READ), total);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_fingerprint(void **state)
{
    (void)state;
    sl_dataset *a = sl_image_folder(root, NULL, SL_WITH_PATHS), *b = sl_image_folder(root, NULL, SL_WITH_PATHS);
    sl_dataset *c = sl_image_folder(root, "jpg", SL_WITH_PATHS);
    assert_int_equal(sl_dataset_fingerprint(a), sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(c));
    sl_dataset_release(a);
    sl_dataset_release(b);
    sl_dataset_release(c);
}

/* ---- per-file errors ---- */

typedef struct bad_file {
    const char *rel;
    int code;
    const char *reason;
} bad_file;

static void test_file_errors(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir);
    mk(dir, "a");
    mk(dir, "b");
    put(dir, "a/0.jpg");
    put(dir, "a/1.jpg");
    put(dir, "a/2.jpg");   /* deleted after listing */
    put(dir, "a/3.jpg");
    /* a directory named like an image is a directory to os.walk: walked,
     * not listed (its "is a directory" error is checked through a list) */
    mk(dir, "a/4.jpg");
    put(dir, "a/4.jpg/inner.jpg");
    put(dir, "b/5.jpg");
    char p[512];
    snprintf(p, sizeof p, "%s/b/6.jpg", dir);
    FILE *f = fopen(p, "wb"); /* empty */
    fclose(f);
    put(dir, "b/7.jpg");
    put(dir, "b/8.jpg");  /* made unreadable */
    put(dir, "b/9.jpg");
    sl_dataset *ds = sl_image_folder(dir, NULL, SL_WITH_PATHS);
    sl_dataset *plain = sl_image_folder(dir, NULL, 0);
    assert_non_null(ds);
    assert_non_null(plain);
    assert_int_equal(sl_dataset_cardinality(ds), 10);
    snprintf(p, sizeof p, "%s/a/2.jpg", dir);
    assert_int_equal(unlink(p), 0);
    snprintf(p, sizeof p, "%s/b/8.jpg", dir);
    assert_int_equal(chmod(p, 0), 0);
    int fd = open(p, O_RDONLY);
    bool can_deny = fd < 0;
    if (fd >= 0) {
        close(fd);
        print_message("running as root: mode 000 does not stop reads; not checking "
                      "unreadable files\n");
    }
    const bad_file bad[] = {
        {"a/2.jpg", SL_ENOENT, "No such file or directory"},
        {"b/6.jpg", SL_ECORRUPT, "empty file"},
        {"b/8.jpg", SL_EACCES, "Permission denied"},
    };
    int nbad = can_deny ? 3 : 2;
    /* as root, b/8.jpg reads fine */
    const char *good[8] = {"a/0.jpg", "a/1.jpg", "a/3.jpg", "a/4.jpg/inner.jpg", "b/5.jpg",
                           "b/7.jpg", "b/8.jpg", "b/9.jpg"};
    int ngood = 8;
    if (can_deny)
        good[6] = good[7], ngood = 7;

    for (int backend = SL_IO_URING; backend <= SL_IO_PREAD; backend++) {
        if (backend == SL_IO_URING && !uring_works())
            continue;
        /* FAIL: each bad file, reached through skip (which moves below the
         * read node), gives its own code and message, which names the file
         * whether or not the elements hold its path */
        sl_options *o = opts_with(backend, SL_ERRORS_FAIL);
        for (int k = 0; k < 2 * nbad; k++) {
            int64_t pos = bad[k % nbad].rel[2] - '0';
            sl_dataset *from = sl_skip(sl_dataset_retain(k < nbad ? ds : plain), pos);
            sl_iterator *it = sl_iterator_create(from, o);
            sl_element *el;
            const bad_file *b = &bad[k % nbad];
            assert_int_equal(sl_next(it, &el), b->code);
            char msg[1024];
            snprintf(msg, sizeof msg, "read: %s/%s: %s", dir, b->rel, b->reason);
            assert_string_equal(sl_iterator_errmsg(it), msg);
            /* the error sticks */
            assert_int_equal(sl_next(it, &el), b->code);
            sl_iterator_free(it);
            sl_dataset_release(from);
        }
        sl_options_free(o);
        /* SKIP: the other files all come, in order */
        o = opts_with(backend, SL_ERRORS_SKIP);
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        int n = 0, rc;
        while ((rc = sl_next(it, &el)) == 0) {
            assert_true(n < ngood);
            check_element(el, dir, good[n], good[n][0] == 'a' ? 0 : 1);
            sl_element_release(el);
            n++;
        }
        assert_int_equal(rc, SL_EOF);
        assert_int_equal(n, ngood);
        assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), nbad);
        assert_int_equal(sl_iterator_stat(it, SL_STAT_ELEMENTS), ngood);
        sl_iterator_free(it);
        sl_options_free(o);

        /* a directory named in a list */
        snprintf(p, sizeof p, "%s/list.txt", dir);
        FILE *lf = fopen(p, "w");
        fputs("a/4.jpg 0\na/0.jpg 0\n", lf);
        fclose(lf);
        sl_dataset *listed = sl_file_list(p, NULL, SL_WITH_PATHS);
        o = opts_with(backend, SL_ERRORS_FAIL);
        it = sl_iterator_create(listed, o);
        assert_int_equal(sl_next(it, &el), SL_EIO);
        char msg[1024];
        snprintf(msg, sizeof msg, "read: %s/a/4.jpg: is a directory", dir);
        assert_string_equal(sl_iterator_errmsg(it), msg);
        sl_iterator_free(it);
        assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP), 0);
        it = sl_iterator_create(listed, o);
        assert_int_equal(sl_next(it, &el), 0);
        check_element(el, dir, "a/0.jpg", 0);
        sl_element_release(el);
        assert_int_equal(sl_next(it, &el), SL_EOF);
        assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 1);
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(listed);
    }
    sl_dataset_release(plain);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

/* ---- file_list ---- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void test_file_list(void **state)
{
    (void)state;
    char list[600], abs_line[700], text[2048];
    snprintf(list, sizeof list, "%s/train.txt", root);
    /* spaces in paths, tabs, CRLF, blank lines, an absolute path, a label
     * that is not a class index */
    snprintf(abs_line, sizeof abs_line, "%s/l1.jpg 42\n", outside);
    snprintf(text, sizeof text,
             "Alpha/c d.jpg 2\n"
             "\n"
             "   \t\n"
             "beta/sub b/n.jpg\t3\r\n"
             "  zeta/q.jpg   5  \n"
             "%s"
             "10/a.jpg -1",
             abs_line);
    write_text(list, text);
    sl_dataset *ds = sl_file_list(list, NULL, SL_WITH_PATHS);
    if (!ds)
        print_error("%s\n", sl_last_error());
    assert_non_null(ds);
    assert_string_equal(sl_dataset_name(ds), "read");
    assert_int_equal(sl_dataset_cardinality(ds), 5);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    const entry want[] = {{"Alpha/c d.jpg", 2}, {"beta/sub b/n.jpg", 3}, {"zeta/q.jpg", 5}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        check_element(el, root, want[i].rel, want[i].label);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), 0);
    check_element_as(el, outside, "l1.jpg", "linked/l1.jpg", 42);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    check_element(el, root, "10/a.jpg", -1);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* an explicit root; the list elsewhere */
    char list2[600];
    snprintf(list2, sizeof list2, "%s/list2.txt", outside);
    write_text(list2, "9/z.jpeg 1\n");
    ds = sl_file_list(list2, root, SL_WITH_PATHS);
    it = sl_iterator_create(ds, NULL);
    assert_int_equal(sl_next(it, &el), 0);
    check_element(el, root, "9/z.jpeg", 1);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    unlink(list2);
    unlink(list);
}

static void test_file_list_errors(void **state)
{
    (void)state;
    char list[600], msg[1024];
    snprintf(list, sizeof list, "%s/bad.txt", root);
    struct {
        const char *text;
        const char *err;
    } cases[] = {
        {"a.jpg 1\n\nb.jpg\n", "3: expected \"<path> <label>\", got \"b.jpg\""},
        {"a.jpg 1\nb.jpg x\n", "2: bad label in \"b.jpg x\""},
        {"a.jpg 1.5\n", "1: bad label in \"a.jpg 1.5\""},
        {"a.jpg 99999999999999999999\n", "1: bad label in \"a.jpg 99999999999999999999\""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        write_text(list, cases[k].text);
        snprintf(msg, sizeof msg, "file_list: %s:%s", list, cases[k].err);
        expect_build_error(sl_file_list(list, NULL, SL_WITH_PATHS), SL_ECORRUPT, msg);
    }
    write_text(list, "\n  \n");
    snprintf(msg, sizeof msg, "file_list: %s: no entries", list);
    expect_build_error(sl_file_list(list, NULL, SL_WITH_PATHS), SL_ENOENT, msg);
    unlink(list);
    snprintf(msg, sizeof msg, "file_list: %s: No such file or directory", list);
    expect_build_error(sl_file_list(list, NULL, SL_WITH_PATHS), SL_ENOENT, msg);
    expect_build_error(sl_file_list(NULL, NULL, SL_WITH_PATHS), SL_EINVAL, "file_list: no list file");
}

/* A bare list name resolves against the working directory. */
static void test_file_list_relative(void **state)
{
    (void)state;
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(root), 0);
    write_text("rel.txt", "zeta/r.jpg 5\n");
    sl_dataset *ds = sl_file_list("rel.txt", NULL, SL_WITH_PATHS);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    check_element(el, ".", "zeta/r.jpg", 5);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    unlink("rel.txt");
    assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_labels),
        cmocka_unit_test(test_uring_same),
        cmocka_unit_test(test_trailing_slash_and_extensions),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_deep_tree),
        cmocka_unit_test(test_shuffle_all),
        cmocka_unit_test(test_shard_take_read_less),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_file_list),
        cmocka_unit_test(test_file_list_errors),
        cmocka_unit_test(test_file_list_relative),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
