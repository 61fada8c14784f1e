/* Saved states, cache files, snapshots and saves written by an earlier
 * build still restore and read, giving what they gave then.
 *
 * Each case is a pipeline built the same way in every version: from
 * generated values, or from files this test writes under a fixed relative
 * folder of the working directory (paths go into fingerprints). The
 * fixtures in tests/fixtures/ were written by the library before the
 * refactor that rewrote the sources, the replaying ops and the record
 * codec (`test_state_fixtures --write DIR` writes them; run it with the old
 * build to make new ones): per case, the state after K elements and a
 * digest of every element after them. The test restores each state,
 * saves it again at once (the same bytes: the records' format has not
 * moved), checks the rest against those digests, and checks that a fresh
 * pass gives the same elements after K (what a state means has not
 * moved).
 * The cache file, snapshot and save are read back whole and by a state
 * saved mid-way. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

#define WORK "state-fixtures"
#define MAX_REST 512

static const char *fixtures; /* the folder of the fixtures */

/* ---- element digests ---- */

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t digest(const sl_element *el)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < sl_element_size(el); i++) {
        const sl_tensor *t = sl_element_tensor(el, i);
        int32_t head[2] = {(int32_t)sl_tensor_dtype(t), sl_tensor_ndim(t)};
        h = mix_bytes(h, head, sizeof head);
        h = mix_bytes(h, sl_tensor_shape(t), (size_t)sl_tensor_ndim(t) * sizeof(int64_t));
        if (sl_tensor_dtype(t) == SL_STRING) {
            for (int64_t k = 0; k < sl_tensor_count(t); k++) {
                size_t len;
                const char *s = sl_tensor_string(t, k, &len);
                h = mix_bytes(h, &len, sizeof len);
                h = mix_bytes(h, s, len);
            }
        } else {
            h = mix_bytes(h, sl_tensor_data(t), sl_tensor_nbytes(t));
        }
    }
    return h;
}

/* ---- the pipelines' functions ---- */

static int running_sum(sl_map_ctx *ctx, const sl_element *state, const sl_element *in,
                       sl_element **new_state, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t s = sl_tensor_int64(sl_element_tensor(state, 0)) +
                sl_tensor_int64(sl_element_tensor(in, 0));
    *new_state = sl_element_create(1);
    *out = sl_element_create(1);
    if (!*new_state || !*out || sl_element_add_int64(*new_state, s) ||
        sl_element_add_int64(*out, s * 2)) {
        sl_element_release(*new_state);
        sl_element_release(*out);
        return SL_ENOMEM;
    }
    return 0;
}

static int mod_key(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx;
    *key = sl_tensor_int64(sl_element_tensor(el, 0)) % *(const int64_t *)user;
    return 0;
}

static sl_dataset *batch_window(int64_t key, sl_dataset *window, void *user)
{
    (void)key, (void)user;
    return sl_batch(window, 8, 0);
}

/* x -> x % m (a duplicate-rich input for unique) */
static int mod_map(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    sl_element *el = sl_element_create(1);
    if (!el || sl_element_add_int64(el, sl_tensor_int64(sl_element_tensor(in, 0)) %
                                              *(const int64_t *)user)) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    *out = el;
    return 0;
}

/* x -> int32 sequence of x % 5 + 1 items (for pack) */
static int sequence(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(in, 0)), n = x % 5 + 1;
    sl_element *el = sl_element_create(1);
    int32_t *p = el ? sl_element_add_tensor(el, SL_INT32, 1, &n) : NULL;
    if (!p) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)(x * 10 + i);
    *out = el;
    return 0;
}

static sl_dataset *three_of(const sl_element *el, void *user)
{
    (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(el, 0));
    return sl_range(x * 100, x * 100 + 3, 1);
}

static sl_element *tensor_of_range(int64_t n)
{
    sl_element *el = sl_element_create(1);
    int64_t *p = el ? sl_element_add_tensor(el, SL_INT64, 1, &n) : NULL;
    for (int64_t i = 0; p && i < n; i++)
        p[i] = i * 7 - 3;
    return el;
}

/* ---- files of a fixed relative path ---- */

static const char *const file_names[] = {
    WORK "/tree/a/01.jpg", WORK "/tree/a/02.jpg", WORK "/tree/a/03.jpg",
    WORK "/tree/b/04.jpg", WORK "/tree/b/05.jpg", WORK "/tree/c/06.jpg",
    WORK "/tree/c/07.jpg", WORK "/tree/c/08.jpg",
};
#define NFILES (int)(sizeof file_names / sizeof *file_names)

static void write_tree(void)
{
    mkdir(WORK, 0755);
    mkdir(WORK "/tree", 0755);
    mkdir(WORK "/tree/a", 0755);
    mkdir(WORK "/tree/b", 0755);
    mkdir(WORK "/tree/c", 0755);
    for (int i = 0; i < NFILES; i++) {
        unsigned char buf[300];
        size_t n = 50 + (size_t)i * 31;
        for (size_t j = 0; j < n; j++)
            buf[j] = (unsigned char)(i * 17 + j * 3);
        tu_write_file(file_names[i], buf, n);
    }
}

/* ---- the cases ---- */

static const int64_t three = 3, seven = 7;

static sl_dataset *build(const char *name)
{
    if (!strcmp(name, "range"))
        return sl_range(5, 300, 3);
    if (!strcmp(name, "counter"))
        return sl_take(sl_counter(-4, 9), 60);
    if (!strcmp(name, "from_tensors"))
        return sl_from_tensor_slices(tensor_of_range(50));
    if (!strcmp(name, "from_element")) {
        sl_element *el = tensor_of_range(4);
        sl_dataset *ds = sl_repeat(sl_from_element(el), 6);
        sl_element_release(el);
        return ds;
    }
    if (!strcmp(name, "from_files")) {
        static const int64_t labels[] = {3, 1, 4, 1, 5, 9, 2, 6};
        return sl_from_files(file_names, labels, NFILES);
    }
    if (!strcmp(name, "list_files")) {
        const char *patterns[] = {WORK "/tree/*/*.jpg"};
        return sl_list_files(patterns, 1, 0, 11);
    }
    if (!strcmp(name, "image_folder"))
        return sl_image_folder(WORK "/tree", NULL, SL_WITH_PATHS);
    if (!strcmp(name, "scan")) {
        sl_element *zero = sl_element_create(1);
        sl_element_add_int64(zero, 0);
        sl_dataset *ds = sl_scan(sl_range(0, 40, 1), "sum", zero, running_sum, NULL);
        sl_element_release(zero);
        return ds;
    }
    if (!strcmp(name, "unique"))
        return sl_unique(sl_map(sl_range(0, 60, 1), "mod", mod_map, (void *)&seven, 1, 0));
    if (!strcmp(name, "rejection_resample")) {
        static const double target[] = {0.5, 0.25, 0.25};
        return sl_rejection_resample(sl_range(0, 90, 1), "resample", mod_key, (void *)&three,
                                     target, 3, NULL, 5, 0);
    }
    if (!strcmp(name, "group_by_window"))
        return sl_group_by_window(sl_range(0, 50, 1), "groups", mod_key, batch_window, 4, NULL,
                                  (void *)&three);
    if (!strcmp(name, "pack"))
        return sl_pack(sl_map(sl_range(0, 40, 1), "seq", sequence, NULL, 1, 0), 8, 2);
    if (!strcmp(name, "window"))
        return sl_window(sl_range(0, 30, 1), 4, 3, 2, 0);
    if (!strcmp(name, "shuffle"))
        return sl_shuffle(sl_range(0, 80, 1), 16, 3, 0);
    if (!strcmp(name, "shuffle_all"))
        return sl_shuffle(sl_range(0, 80, 1), SL_SHUFFLE_ALL, 3, 0);
    if (!strcmp(name, "map_batch_prefetch"))
        return sl_prefetch(sl_batch(sl_map(sl_range(0, 70, 1), "mod", mod_map, (void *)&seven,
                                           2, 0),
                                    4, 0),
                           2);
    if (!strcmp(name, "interleave"))
        return sl_interleave(sl_range(0, 9, 1), three_of, NULL, 3, 2, 1, 0);
    if (!strcmp(name, "cache"))
        return sl_cache(sl_map(sl_range(0, 30, 1), "mod", mod_map, (void *)&seven, 1, 0),
                        WORK "/cache.bin");
    if (!strcmp(name, "snapshot"))
        return sl_snapshot(sl_range(0, 30, 1), WORK "/snapshot", 0);
    if (!strcmp(name, "load"))
        return sl_load(WORK "/saved");
    fail_msg("no case %s", name);
    return NULL;
}

typedef struct fx_case {
    const char *name;
    int64_t k;    /* elements taken before the state was saved */
    int refused; /* its order changed on purpose since: the old state is
                  * refused (SL_EMISMATCH), never misread */
} fx_case;

static const fx_case cases[] = {
    {"range", 11, 0}, {"counter", 9, 0}, {"from_tensors", 13, 0}, {"from_element", 4, 0},
    {"from_files", 3, 0}, {"list_files", 5, 0}, {"image_folder", 2, 0}, {"scan", 17, 0},
    {"unique", 4, 0}, {"rejection_resample", 12, 0}, {"group_by_window", 5, 0}, {"pack", 6, 0},
    {"window", 4, 0}, {"shuffle", 23, 0}, {"shuffle_all", 19, 1}, {"map_batch_prefetch", 7, 0},
    {"interleave", 8, 0}, {"cache", 12, 0}, {"snapshot", 10, 0}, {"load", 9, 0},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

static sl_options *opts(void)
{
    sl_options *o = tu_opts(2, 21);
    return o;
}

/* The elements after the first k of a fresh pass, as digests. */
static int rest_of_pass(sl_dataset *ds, int64_t k, uint64_t *out)
{
    sl_options *o = opts();
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        fail_msg("%s", sl_last_error());
    int n = 0;
    sl_element *el;
    int rc;
    for (int64_t i = 0; (rc = sl_next(it, &el)) == 0; i++) {
        if (i >= k) {
            assert_true(n < MAX_REST);
            out[n++] = digest(el);
        }
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        fail_msg("%s", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    sl_options_free(o);
    return n;
}

/* Files the cases read (a cache file, a snapshot, a save) at their fixed
 * paths: copies of the fixtures, or made by this build when writing. */
static void run(const char *cmd)
{
    if (system(cmd) != 0)
        fail_msg("%s failed", cmd);
}

static void place_fixture_files(bool writing)
{
    char cmd[8192];
    run("rm -rf " WORK);
    write_tree();
    if (writing) {
        /* the cache file and the snapshot fill on their first full pass */
        const char *filled[] = {"cache", "snapshot"};
        for (int i = 0; i < 2; i++) {
            sl_dataset *ds = build(filled[i]);
            uint64_t sink[MAX_REST];
            rest_of_pass(ds, 0, sink);
            sl_dataset_release(ds);
        }
        sl_dataset *src = sl_map(sl_range(0, 45, 1), "mod", mod_map, (void *)&seven, 1, 0);
        sl_options *o = opts();
        assert_int_equal(sl_save(src, WORK "/saved", o, 0, NULL, NULL), 0);
        sl_options_free(o);
        sl_dataset_release(src);
        return;
    }
    snprintf(cmd, sizeof cmd, "cp -R '%s/files/cache.bin' '%s/files/snapshot' '%s/files/saved' "
             WORK "/", fixtures, fixtures, fixtures);
    run(cmd);
}

/* ---- the fixture file: "SLFX1", k, state, digests of the rest ---- */

static void write_case(const char *dir, const fx_case *c)
{
    sl_dataset *ds = build(c->name);
    if (!ds)
        fail_msg("%s: %s", c->name, sl_last_error());
    sl_options *o = opts();
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        fail_msg("%s: %s", c->name, sl_last_error());
    for (int64_t i = 0; i < c->k; i++) {
        sl_element *el;
        if (sl_next(it, &el))
            fail_msg("%s: %s", c->name, sl_iterator_errmsg(it));
        sl_element_release(el);
    }
    int64_t n = sl_iterator_save(it, NULL, 0);
    assert_true(n > 0);
    unsigned char *state = malloc((size_t)n);
    assert_int_equal(sl_iterator_save(it, state, (size_t)n), n);
    uint64_t rest[MAX_REST];
    int nrest = 0;
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(nrest < MAX_REST);
        rest[nrest++] = digest(el);
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_EOF);
    char *path = malloc(strlen(dir) + strlen(c->name) + 8);
    sprintf(path, "%s/%s.state", dir, c->name);
    FILE *f = fopen(path, "wb");
    free(path);
    assert_non_null(f);
    uint32_t len = (uint32_t)n, count = (uint32_t)nrest;
    fwrite("SLFX1", 1, 5, f);
    fwrite(&c->k, sizeof c->k, 1, f);
    fwrite(&len, sizeof len, 1, f);
    fwrite(state, 1, len, f);
    fwrite(&count, sizeof count, 1, f);
    fwrite(rest, sizeof *rest, count, f);
    assert_int_equal(fclose(f), 0);
    free(state);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void check_case(const fx_case *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/states/%s.state", fixtures, c->name);
    unsigned char *file;
    size_t size;
    tu_read_file(path, &file, &size);
    int64_t k;
    uint32_t len, count;
    assert_true(size >= 5 + sizeof k + sizeof len);
    assert_memory_equal(file, "SLFX1", 5);
    memcpy(&k, file + 5, sizeof k);
    memcpy(&len, file + 5 + sizeof k, sizeof len);
    const unsigned char *state = file + 5 + sizeof k + sizeof len;
    memcpy(&count, state + len, sizeof count);
    const unsigned char *want = state + len + sizeof count;
    assert_int_equal(k, c->k);

    sl_dataset *ds = build(c->name);
    if (!ds)
        fail_msg("%s: %s", c->name, sl_last_error());
    sl_options *o = opts();
    sl_iterator *it = sl_iterator_restore(ds, state, len, o);
    if (c->refused) {
        /* shuffle(ALL) computes its order per index since issue 39 */
        assert_null(it);
        assert_int_equal(sl_last_error_code(), SL_EMISMATCH);
        if (!strstr(sl_last_error(), "order version"))
            fail_msg("%s: %s", c->name, sl_last_error());
        sl_options_free(o);
        sl_dataset_release(ds);
        free(file);
        return;
    }
    if (!it)
        fail_msg("%s: the old state does not restore: %s", c->name, sl_last_error());
    /* saved again where it stands, it is the same state, byte for byte */
    unsigned char again[4096];
    if (sl_iterator_save(it, again, sizeof again) != (int64_t)len ||
        memcmp(again, state, len) != 0)
        fail_msg("%s: the state saved again differs from the old one", c->name);
    uint32_t n = 0;
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        uint64_t d = digest(el), w;
        sl_element_release(el);
        if (n >= count)
            fail_msg("%s: more elements after the state than before (%u)", c->name, count);
        memcpy(&w, want + (size_t)n * sizeof w, sizeof w);
        if (d != w)
            fail_msg("%s: element %lld after the state differs", c->name,
                     (long long)(c->k + n));
        n++;
    }
    if (rc != SL_EOF)
        fail_msg("%s: %s", c->name, sl_iterator_errmsg(it));
    if (n != count)
        fail_msg("%s: %u elements after the state, %u before", c->name, n, count);
    sl_iterator_free(it);

    uint64_t fresh[MAX_REST];
    int nfresh = rest_of_pass(ds, c->k, fresh);
    assert_int_equal(nfresh, (int)count);
    assert_memory_equal(fresh, want, (size_t)count * sizeof *fresh);
    sl_options_free(o);
    sl_dataset_release(ds);
    free(file);
}

static void test_old_fixtures(void **state)
{
    (void)state;
    place_fixture_files(false);
    for (int i = 0; i < NCASES; i++)
        check_case(&cases[i]);
    run("rm -rf " WORK);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        /* the files under WORK/ go to DIR/files, the states to DIR/states */
        char cmd[8192];
        place_fixture_files(true);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/states' '%s/files' && cp -R " WORK
                 "/cache.bin " WORK "/snapshot " WORK "/saved '%s/files/'", argv[2], argv[2],
                 argv[2]);
        run(cmd);
        snprintf(cmd, sizeof cmd, "%s/states", argv[2]);
        for (int i = 0; i < NCASES; i++)
            write_case(cmd, &cases[i]);
        run("rm -rf " WORK);
        return 0;
    }
#ifdef SLUICE_SOURCE_DIR
    fixtures = SLUICE_SOURCE_DIR "/tests/fixtures";
#endif
    if (argc == 2)
        fixtures = argv[1];
    if (!fixtures)
        return TU_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_old_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
