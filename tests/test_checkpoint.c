/* Checkpoints: for every op, a pass stopped after k elements, saved, and
 * restored in a fresh iterator (other thread counts, autotune on or off, a
 * fresh dataset object as a new process would build) yields the rest of
 * the uninterrupted pass byte for byte, with the same error-skip count at
 * the end; a state saved in another process restores here; bad states are
 * refused with the reason. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "jpegutil.h"
#include "recordutil.h"
#include "testutil.h"

#define SEED 5
#define EPOCH 1

static char dir[256];         /* scratch: images, lists, caches */
static char folder[320];      /* a clean image folder */
static char damaged[320];     /* one with bad files among good ones */
static char list_path[384];
static char cache_path[384], saved_path[384], snapshot_path[384];

/* ---- what a pass yields ---- */

typedef struct pass {
    uint64_t *h; /* per element: a hash of every tensor's dtype, shape, bytes */
    size_t n, cap;
    int64_t skipped;
    int64_t bytes_read;
} pass;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t el_hash(const sl_element *el)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int j = 0; j < sl_element_size(el); j++) {
        const sl_tensor *t = sl_element_tensor(el, j);
        int d = sl_tensor_dtype(t), nd = sl_tensor_ndim(t);
        h = fnv(h, &d, sizeof d);
        h = fnv(h, sl_tensor_shape(t), (size_t)nd * sizeof(int64_t));
        if (d != SL_STRING) {
            h = fnv(h, sl_tensor_data(t), sl_tensor_nbytes(t));
        } else {
            for (int64_t i = 0; i < sl_tensor_count(t); i++) {
                size_t len;
                const char *s = sl_tensor_string(t, i, &len);
                h = fnv(fnv(h, s, len), "", 1);
            }
        }
    }
    return h;
}

static void push(pass *p, uint64_t h)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->h = realloc(p->h, p->cap * sizeof *p->h);
    }
    p->h[p->n++] = h;
}

static sl_options *opts(int threads, bool autotune, int policy)
{
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_set(o, SL_OPT_THREADS, threads), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_SEED, SEED), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, EPOCH), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE, autotune), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    return o;
}

/* Takes up to k more elements (k < 0: to the end) into p. */
static int take(sl_iterator *it, pass *p, long k)
{
    int rc = 0;
    for (long i = 0; k < 0 || i < k; i++) {
        sl_element *el;
        rc = sl_next(it, &el);
        if (rc)
            break;
        push(p, el_hash(el));
        sl_element_release(el);
    }
    if (rc < 0)
        print_error("sl_next: %s\n", sl_iterator_errmsg(it));
    return rc;
}

static void finish(sl_iterator *it, pass *p)
{
    assert_int_equal(take(it, p, -1), SL_EOF);
    p->skipped = sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED);
    p->bytes_read = sl_iterator_stat(it, SL_STAT_BYTES_READ);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ELEMENTS), (int64_t)p->n);
}

/* The state after k elements (ds borrowed); *len its size. malloc'd. */
static unsigned char *save_after(sl_dataset *ds, const sl_options *o, long k, pass *got,
                                 size_t *len)
{
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        print_error("create: %s\n", sl_last_error());
    assert_non_null(it);
    int rc = take(it, got, k);
    assert_true(rc == 0 || rc == SL_EOF);
    int64_t need = sl_iterator_save(it, NULL, 0);
    if (need < 0)
        print_error("save: %s\n", sl_last_error());
    assert_true(need > 0);
    unsigned char *buf = malloc((size_t)need);
    assert_int_equal(sl_iterator_save(it, buf, (size_t)need), need);
    /* saving again changes nothing */
    unsigned char *again = malloc((size_t)need);
    assert_int_equal(sl_iterator_save(it, again, (size_t)need), need);
    assert_memory_equal(buf, again, (size_t)need);
    free(again);
    sl_iterator_free(it);
    *len = (size_t)need;
    return buf;
}

typedef sl_dataset *(*builder)(void);

static pass reference(builder make, int policy)
{
    sl_dataset *ds = make();
    assert_non_null(ds);
    sl_options *o = opts(2, false, policy);
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        print_error("create: %s\n", sl_last_error());
    assert_non_null(it);
    pass p = {0};
    finish(it, &p);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return p;
}

/* Stops after k, restores into a fresh dataset and iterator, and checks
 * the whole against ref. */
static void resume_at(builder make, const pass *ref, long k, int t_save, int t_restore,
                      bool autotune, int policy)
{
    sl_dataset *a = make(), *b = make();
    sl_options *oa = opts(t_save, autotune, policy), *ob = opts(t_restore, !autotune, policy);
    pass got = {0};
    size_t len;
    unsigned char *state = save_after(a, oa, k, &got, &len);
    sl_iterator *it = sl_iterator_restore(b, state, len, ob);
    if (!it)
        print_error("restore after %ld: %s\n", k, sl_last_error());
    assert_non_null(it);
    finish(it, &got);
    if (got.n != ref->n || memcmp(got.h, ref->h, ref->n * sizeof *ref->h) != 0)
        print_error("resume after %ld of %zu (threads %d -> %d): %zu elements, %s\n", k, ref->n,
                    t_save, t_restore, got.n, got.n == ref->n ? "different ones" : "");
    assert_int_equal(got.n, ref->n);
    assert_memory_equal(got.h, ref->h, ref->n * sizeof *ref->h);
    assert_int_equal(got.skipped, ref->skipped);
    sl_iterator_free(it);
    free(state);
    free(got.h);
    sl_options_free(oa);
    sl_options_free(ob);
    sl_dataset_release(a);
    sl_dataset_release(b);
}

/* Every interesting k (0, 1, 2, the middle, the last, past the end, and
 * `extra` more) under three thread pairs. */
static void check_op(builder make, int policy, const long *extra, int nextra)
{
    pass ref = reference(make, policy);
    long n = (long)ref.n;
    long ks[32] = {0, 1, 2, n / 2, n / 2 + 1, n - 1, n, n + 1};
    int nk = 8;
    for (int i = 0; i < nextra && nk < 32; i++)
        ks[nk++] = extra[i];
    static const int threads[][2] = {{1, 1}, {2, 8}, {8, 1}};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < nk; i++) {
            long k = ks[i] < 0 ? 0 : ks[i];
            resume_at(make, &ref, k, threads[t][0], threads[t][1], t == 1, policy);
        }
    free(ref.h);
}

/* ---- pipelines ---- */

static int draw(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    int64_t x = sl_tensor_int64(sl_element_tensor(in, 0));
    sl_element_add_int64(el, x);
    sl_element_add_int64(el, (int64_t)(sl_map_ctx_random(ctx) >> 1));
    *out = el;
    return 0;
}

static int keep_some(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(el, 0));
    return x % 3 != 1 && (sl_map_ctx_random(ctx) & 3) != 0;
}

static sl_dataset *p_range(void) { return sl_range(3, 60, 1); }

static sl_dataset *p_tensors(void)
{
    sl_element *el = sl_element_create(2);
    int64_t shape[1] = {41};
    int64_t *v = sl_element_add_tensor(el, SL_INT64, 1, shape);
    const char *strs[41];
    char buf[41][16];
    for (int i = 0; i < 41; i++) {
        v[i] = 7 * i;
        snprintf(buf[i], sizeof buf[i], "s%d", i);
        strs[i] = buf[i];
    }
    tu_add_strings(el, 1, shape, strs);
    return sl_from_tensor_slices(el);
}

static sl_dataset *p_map(void)
{
    return sl_map(sl_range(0, 300, 1), "draw", draw, NULL, SL_AUTOTUNE, 0);
}

static sl_dataset *p_filter(void)
{
    return sl_filter(p_map(), "some", keep_some, NULL);
}

static sl_dataset *p_batch(void) { return sl_batch(p_map(), 7, 0); }
static sl_dataset *p_batch_drop(void) { return sl_batch(p_map(), 7, SL_DROP_REMAINDER); }
static sl_dataset *p_unbatch(void) { return sl_unbatch(sl_batch(sl_range(0, 53, 1), 6, 0)); }
static sl_dataset *p_shuffle(void) { return sl_shuffle(p_map(), 16, 9, 0); }
static sl_dataset *p_shuffle_all(void) { return sl_shuffle(sl_range(0, 70, 1), SL_SHUFFLE_ALL, -1, 0); }
static sl_dataset *p_take(void) { return sl_take(p_map(), 37); }
static sl_dataset *p_skip(void) { return sl_skip(p_map(), 250); }

static int keep_all(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el, (void)user;
    return 1;
}

/* a size stated over an input that cannot know it, checked every pass */
static sl_dataset *p_assert(void)
{
    return sl_repeat(sl_assert_cardinality(sl_filter(p_map(), "all", keep_all, NULL), 300), 2);
}
static sl_dataset *p_shard(void) { return sl_shard(p_map(), 3, 2); }
static sl_dataset *p_prefetch(void) { return sl_prefetch(sl_batch(p_map(), 8, 0), SL_AUTOTUNE); }

static sl_dataset *p_repeat(void)
{
    /* each pass reshuffles and redraws: epoch boundaries at 20 and 40 */
    sl_dataset *ds = sl_shuffle(sl_range(0, 20, 1), SL_SHUFFLE_ALL, -1, 0);
    return sl_repeat(sl_map(ds, "draw", draw, NULL, 2, 0), 3);
}

static sl_dataset *p_combo(void)
{
    sl_dataset *ds = sl_shuffle(sl_range(0, 90, 1), SL_SHUFFLE_ALL, -1, 0);
    ds = sl_filter(sl_map(ds, "draw", draw, NULL, SL_AUTOTUNE, 0), "some", keep_some, NULL);
    ds = sl_unbatch(sl_batch(ds, 4, 0));
    ds = sl_shuffle(sl_repeat(ds, 2), 5, 1, 0);
    return sl_prefetch(sl_take(sl_batch(ds, 3, 0), 25), 2);
}

/* ---- combining (test_combine.c has their semantics) ---- */

static sl_dataset *p_zip(void)
{
    sl_dataset *in[3] = {p_map(), sl_shuffle(sl_range(0, 80, 1), 16, 2, 0),
                         sl_batch(sl_range(0, 500, 1), 3, 0)};
    const char *keys[3] = {"m", "s", "b"};
    return sl_zip(in, 3, keys);
}

static sl_dataset *p_concatenate(void)
{
    return sl_concatenate(sl_take(p_map(), 30),
                          sl_shuffle(sl_range(0, 25, 1), SL_SHUFFLE_ALL, -1, 0));
}

/* three inputs, the first ending early, chosen by a shuffled stream */
static sl_dataset *p_choose(void)
{
    sl_dataset *in[3] = {sl_range(0, 6, 1), p_map(), sl_range(1000, 1040, 1)};
    sl_dataset *choice = sl_shuffle(sl_range(0, 3, 1), 3, 1, 0); /* new order each pass */
    return sl_choose_from(sl_repeat(choice, 40), in, 3, 0);
}

static sl_dataset *p_sample(void)
{
    sl_dataset *in[2] = {sl_range(0, 40, 1), sl_filter(p_map(), "some", keep_some, NULL)};
    const double w[2] = {1, 3};
    return sl_sample_from(in, 2, w, 5, 0);
}

static sl_dataset *p_enumerate(void) { return sl_enumerate(p_filter(), 100); }
static sl_dataset *p_counter(void) { return sl_take(sl_counter(5, 3), 50); }
static sl_dataset *p_random(void) { return sl_take(sl_random(-1, 0), 50); }

static int short_of(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)user;
    return sl_tensor_int64(sl_element_tensor(el, 0)) < 140;
}

static sl_dataset *p_take_while(void)
{
    return sl_take_while(sl_range(0, 300, 1), "short", short_of, NULL);
}

/* values that repeat: draw's output modulo 40 */
static int mod40(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    sl_element *el = sl_element_create(1);
    sl_element_add_int64(el, (int64_t)(tu_mix((uint64_t)sl_tensor_int64(
                                 sl_element_tensor(in, 0))) % 40));
    *out = el;
    return 0;
}

static sl_dataset *p_unique(void)
{
    return sl_unique(sl_map(sl_range(0, 200, 1), "mod40", mod40, NULL, 2, 0));
}

/* a running sum that skips every 13th element as an error */
static int sum_fn(sl_map_ctx *ctx, const sl_element *st, const sl_element *in,
                  sl_element **new_state, sl_element **out, void *user)
{
    (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(in, 0));
    if (x % 13 == 12)
        return sl_map_ctx_error(ctx, SL_EINVAL, "thirteenth");
    int64_t s = sl_tensor_int64(sl_element_tensor(st, 0)) + x;
    sl_element *a = sl_element_create(1), *b = sl_element_create(2);
    sl_element_add_int64(a, s);
    sl_element_add_int64(b, s);
    sl_element_add_int64(b, (int64_t)sl_map_ctx_random(ctx));
    *new_state = a;
    *out = b;
    return 0;
}

static sl_dataset *p_scan(void)
{
    sl_element *zero = sl_element_create(1);
    sl_element_add_int64(zero, 0);
    sl_dataset *ds = sl_scan(sl_shuffle(sl_range(0, 120, 1), 10, 3, 0), "sum", zero, sum_fn,
                             NULL);
    sl_element_release(zero);
    return ds;
}

static sl_dataset *p_rebatch(void)
{
    return sl_rebatch(sl_batch(p_map(), 4, 0), 3, 0);
}

/* ---- variable length (test_variable.c has their semantics) ---- */

/* x -> [draw] * (1 + x % 5): rows of varying length */
static int ragged(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    int64_t n = 1 + sl_tensor_int64(sl_element_tensor(in, 0)) % 5;
    sl_element *el = sl_element_create(2);
    int64_t *v = sl_element_add_tensor(el, SL_INT64, 1, &n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (int64_t)(sl_map_ctx_random(ctx) >> 40);
    sl_element_add_int64(el, n);
    *out = el;
    return 0;
}

static sl_dataset *p_ragged(void)
{
    sl_dataset *ds = sl_map(sl_shuffle(sl_range(0, 90, 1), 8, 4, 0), "ragged", ragged, NULL,
                            SL_AUTOTUNE, 0);
    sl_structure *s = sl_structure_parse("(int64[?], int64[])");
    ds = sl_with_structure(ds, s);
    sl_structure_release(s);
    return ds;
}

static sl_dataset *p_padded_batch(void) { return sl_padded_batch(p_ragged(), 4, 0, NULL, NULL, 0); }
static sl_dataset *p_window(void) { return sl_window(p_map(), 5, 3, 2, 0); }

static int ragged_key(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)user;
    *key = sl_tensor_int64(sl_element_tensor(el, 1)) % 3;
    return 0;
}

static sl_dataset *ragged_reduce(int64_t key, sl_dataset *window, void *user)
{
    (void)user;
    return sl_padded_batch(window, 2 + key, 0, NULL, NULL, 0);
}

static sl_dataset *p_group_by_window(void)
{
    return sl_group_by_window(p_ragged(), "rk", ragged_key, ragged_reduce, 4, NULL, NULL);
}

static int ragged_len(sl_map_ctx *ctx, const sl_element *el, int64_t *len, void *user)
{
    (void)ctx, (void)user;
    *len = sl_tensor_int64(sl_element_tensor(el, 1));
    return 0;
}

static sl_dataset *p_bucket(void)
{
    const int64_t bounds[2] = {2, 4}, sizes[3] = {3, 2, 4};
    return sl_bucket_by_sequence_length(p_ragged(), "len", ragged_len, NULL, bounds, 2, sizes,
                                        0, NULL, NULL, 0);
}

static int fail_sevenths(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    if (sl_tensor_int64(sl_element_tensor(in, 0)) % 7 == 3)
        return sl_map_ctx_error(ctx, SL_EINVAL, "a seventh");
    return draw(ctx, in, out, NULL);
}

static sl_dataset *p_ignore_errors(void)
{
    return sl_ignore_errors(sl_map(sl_range(0, 200, 1), "7", fail_sevenths, NULL, 3, 0), 0);
}

static sl_dataset *p_cache_mem(void)
{
    /* pass 0 fills the cache, 1 and 2 are served from it */
    return sl_repeat(sl_cache(p_map(), NULL), 3);
}

static sl_dataset *p_cache_file(void)
{
    return sl_repeat(sl_cache(sl_batch(p_map(), 4, 0), cache_path), 2);
}

/* Elements spread over shards out of order (x * 7 % 5), so the reader
 * merges them back; zlib chunks. */
static int shard_by_mix(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)user;
    *key = sl_tensor_int64(sl_element_tensor(el, 0)) * 7 % 5;
    return 0;
}

static sl_dataset *p_load(void)
{
    return sl_repeat(sl_load(saved_path), 2);
}

static sl_dataset *p_snapshot(void)
{
    return sl_repeat(sl_snapshot(sl_batch(p_map(), 4, 0), snapshot_path, SL_COMPRESSION_GZIP),
                     2);
}

/* x -> range(x % 5): inner datasets of 0 to 4 elements, one open at a time */
static sl_dataset *short_range(const sl_element *el, void *user)
{
    (void)user;
    return sl_range(0, sl_tensor_int64(sl_element_tensor(el, 0)) % 5, 1);
}

static sl_dataset *p_flat_map(void)
{
    return sl_flat_map(sl_shuffle(sl_range(0, 60, 1), 16, 3, 0), short_range, NULL);
}

/* x -> (uint8 [4, 4, 3] of x's bytes, x % 7) */
static int tiny_image(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(in, 0)), shape[3] = {4, 4, 3};
    sl_element *el = sl_element_create(2);
    uint8_t *p = el ? sl_element_add_tensor(el, SL_UINT8, 3, shape) : NULL;
    if (!p)
        return SL_ENOMEM;
    for (int i = 0; i < 48; i++)
        p[i] = (uint8_t)(x * 37 + i * 11);
    sl_element_add_int64(el, x % 7);
    *out = el;
    return 0;
}

static sl_dataset *p_mixup(void)
{
    sl_mixup_spec s;
    sl_mixup_spec_init(&s, sizeof s, 7);
    s.label_smoothing = 0.1;
    sl_dataset *b = sl_batch(sl_map(sl_range(0, 120, 1), "img", tiny_image, NULL, 2, 0), 8, 0);
    return sl_mixup_cutmix(b, &s);
}

static sl_dataset *p_folder(void) { return sl_image_folder(folder, NULL, SL_WITH_PATHS); }
static sl_dataset *p_file_list(void) { return sl_file_list(list_path, NULL, 0); }

static sl_dataset *p_files(void)
{
    static const char *names[] = {"c0/00.jpg", "c1/08.jpg", "c2/15.jpg", "c0/03.jpg",
                                  "c1/09.jpg", "c2/16.jpg", "c0/06.jpg"};
    const char *paths[7];
    char buf[7][512];
    int64_t labels[7];
    for (int i = 0; i < 7; i++) {
        snprintf(buf[i], sizeof buf[i], "%s/%s", folder, names[i]);
        paths[i] = buf[i];
        labels[i] = 10 + i;
    }
    return sl_read_files(sl_from_files(paths, labels, 7), 0);
}

#define SIZE 20

static sl_dataset *images(const char *root, int batch, unsigned flags)
{
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, SIZE), 0);
    sl_dataset *ds = sl_shuffle(sl_image_folder(root, NULL, SL_WITH_PATHS), SL_SHUFFLE_ALL, -1, 0);
    ds = sl_map_image(ds, &spec, SL_AUTOTUNE);
    return batch ? sl_prefetch(sl_batch(ds, batch, flags), SL_AUTOTUNE) : ds;
}

/* shards: three TFRecord files (plain, gzip, plain) and two tars */
static char shard_pat[400], gz_pat[400], tar_pat[400];

static sl_dataset *shard_list(const char *pat)
{
    const char *pats[] = {pat};
    return sl_list_files(pats, 1, 0, -1);
}

static sl_dataset *p_tfrecord(void) { return sl_tfrecord(shard_list(shard_pat), 0, 0); }
static sl_dataset *p_tfrecord_gz(void)
{
    return sl_tfrecord(shard_list(gz_pat), SL_COMPRESSION_GZIP, SL_WITH_PATHS);
}

static sl_dataset *p_tar(void)
{
    static const char *keys[] = {"bin", "cls"};
    static const sl_dtype types[] = {SL_UINT8, SL_INT64};
    return sl_tar_shards(shard_list(tar_pat), keys, types, 2, 0);
}

static sl_dataset *p_interleave(void)
{
    sl_dataset *ds = sl_list_files((const char *const[]){shard_pat}, 1, SL_LIST_SHUFFLE, 3);
    ds = sl_interleave(ds, sl_tfrecord_fn, NULL, 2, 3, SL_AUTOTUNE, 0);
    return sl_prefetch(sl_map(ds, "id", tu_identity, NULL, 2, 0), 3);
}

static void make_shards(void)
{
    snprintf(shard_pat, sizeof shard_pat, "%s/s*.tfrecord", dir);
    snprintf(gz_pat, sizeof gz_pat, "%s/g*.tfrecord.gz", dir);
    snprintf(tar_pat, sizeof tar_pat, "%s/t*.tar", dir);
    for (int f = 0; f < 3; f++) {
        ru_buf b = {0}, t = {0};
        for (int r = 0; r < 30 + 7 * f; r++) {
            char rec[64];
            int n = snprintf(rec, sizeof rec, "file %d record %d", f, r);
            ru_record(&b, rec, (size_t)n);
            char name[64], cls[16];
            snprintf(name, sizeof name, "k%d/%04d.bin", f, r);
            ru_tar_file(&t, name, rec, (size_t)n);
            snprintf(name, sizeof name, "k%d/%04d.cls", f, r);
            snprintf(cls, sizeof cls, "%d", r % 5);
            ru_tar_file(&t, name, cls, strlen(cls));
        }
        ru_tar_end(&t);
        char p[500];
        snprintf(p, sizeof p, "%s/s%d.tfrecord", dir, f);
        ru_write(p, b.p, b.n);
        ru_buf z = ru_deflate(&b, 31);
        snprintf(p, sizeof p, "%s/g%d.tfrecord.gz", dir, f);
        ru_write(p, z.p, z.n);
        if (f < 2) {
            snprintf(p, sizeof p, "%s/t%d.tar", dir, f);
            ru_write(p, t.p, t.n);
        }
        free(b.p), free(z.p), free(t.p);
    }
}

static sl_dataset *p_map_image(void) { return images(folder, 0, 0); }
static sl_dataset *p_image_batch(void) { return images(folder, 5, 0); }
static sl_dataset *p_image_batch_drop(void) { return images(folder, 5, SL_DROP_REMAINDER); }
static sl_dataset *p_damaged(void) { return images(damaged, 4, 0); }
static sl_dataset *p_damaged_single(void) { return images(damaged, 0, 0); }

/* ---- the tests ---- */

static void test_sources(void **state)
{
    (void)state;
    check_op(p_range, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_tensors, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_files, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_folder, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_file_list, SL_ERRORS_FAIL, NULL, 0);
}

static void test_records(void **state)
{
    (void)state;
    long bounds[] = {29, 30, 31, 66, 67, 68};
    check_op(p_tfrecord, SL_ERRORS_FAIL, bounds, 6);
    check_op(p_tfrecord_gz, SL_ERRORS_FAIL, bounds, 6);
    check_op(p_tar, SL_ERRORS_FAIL, bounds, 4);
    check_op(p_interleave, SL_ERRORS_FAIL, bounds, 6);
}

static void test_maps(void **state)
{
    (void)state;
    long chunky[] = {7, 100, 255, 256, 257};
    check_op(p_map, SL_ERRORS_FAIL, chunky, 5);
    check_op(p_filter, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_map_image, SL_ERRORS_FAIL, NULL, 0);
}

/* classes 0..3 of a ragged row by its length, one in 11 an error */
static int ragged_class(sl_map_ctx *ctx, const sl_element *el, int64_t *cls, void *user)
{
    (void)user;
    int64_t n = sl_tensor_int64(sl_element_tensor(el, 1));
    if (sl_tensor_int64(sl_element_tensor(el, 0)) % 11 == 5)
        return sl_map_ctx_error(ctx, SL_EINVAL, "an eleventh");
    *cls = n % 4;
    return 0;
}

static sl_dataset *p_resample_given(void)
{
    const double target[4] = {1, 1, 1, 1}, initial[4] = {0.4, 0.2, 0.2, 0.2};
    return sl_rejection_resample(p_ragged(), "cls", ragged_class, NULL, target, 4, initial,
                                 -1, 0);
}

static sl_dataset *p_resample_estimated(void)
{
    const double target[4] = {0.1, 0.2, 0.3, 0.4};
    return sl_rejection_resample(p_ragged(), "cls", ragged_class, NULL, target, 4, NULL, 5, 0);
}

/* x -> [draw] * (x % 7): token rows for pack, one in 13 a scalar (an
 * element error) */
static int tokens(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    int64_t x = sl_tensor_int64(sl_element_tensor(in, 0)), n = x % 7;
    sl_element *el = sl_element_create(1);
    int64_t *v = sl_element_add_tensor(el, SL_INT64, x % 13 == 6 ? 0 : 1, &n);
    for (int64_t i = 0; i < (x % 13 == 6 ? 1 : n); i++)
        v[i] = (int64_t)(sl_map_ctx_random(ctx) >> 40);
    *out = el;
    return 0;
}

static sl_dataset *p_pack(void)
{
    return sl_pack(sl_map(sl_shuffle(sl_range(0, 150, 1), 8, 4, 0), "tokens", tokens, NULL,
                          SL_AUTOTUNE, 0), 9, 3);
}

static void test_batching(void **state)
{
    (void)state;
    check_op(p_batch, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_batch_drop, SL_ERRORS_FAIL, NULL, 0);
    long mid[] = {5, 6, 7, 11, 12, 13};
    check_op(p_unbatch, SL_ERRORS_FAIL, mid, 6);
    check_op(p_image_batch, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_image_batch_drop, SL_ERRORS_FAIL, NULL, 0);
}

static void test_order(void **state)
{
    (void)state;
    check_op(p_shuffle, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_shuffle_all, SL_ERRORS_FAIL, NULL, 0);
    long bounds[] = {19, 20, 21, 39, 40, 41};
    check_op(p_repeat, SL_ERRORS_FAIL, bounds, 6);
    check_op(p_take, SL_ERRORS_FAIL, NULL, 0);
    long passes[] = {299, 300, 301};
    check_op(p_assert, SL_ERRORS_FAIL, passes, 3);
    check_op(p_skip, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_shard, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_prefetch, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_combo, SL_ERRORS_FAIL, NULL, 0);
}

static void test_combining(void **state)
{
    (void)state;
    check_op(p_zip, SL_ERRORS_FAIL, NULL, 0);
    long seam[] = {29, 30, 31};
    check_op(p_concatenate, SL_ERRORS_FAIL, seam, 3);
    long early[] = {5, 6, 7, 8, 20};
    check_op(p_choose, SL_ERRORS_FAIL, early, 5);
    check_op(p_sample, SL_ERRORS_FAIL, NULL, 0);
}

static void test_variable_length(void **state)
{
    (void)state;
    check_op(p_padded_batch, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_window, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_group_by_window, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_bucket, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_ignore_errors, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_resample_estimated, SL_ERRORS_SKIP, NULL, 0);
    check_op(p_resample_given, SL_ERRORS_SKIP, NULL, 0);
    check_op(p_pack, SL_ERRORS_SKIP, NULL, 0);
}

static void test_restructuring(void **state)
{
    (void)state;
    check_op(p_enumerate, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_counter, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_random, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_take_while, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_unique, SL_ERRORS_FAIL, NULL, 0);
    long thirteens[] = {11, 12, 13, 24, 25};
    check_op(p_scan, SL_ERRORS_SKIP, thirteens, 5);
    check_op(p_rebatch, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_flat_map, SL_ERRORS_FAIL, NULL, 0);
    check_op(p_mixup, SL_ERRORS_FAIL, NULL, 0);
}

static void test_cache(void **state)
{
    (void)state;
    long bounds[] = {299, 300, 301, 599, 600, 601};
    check_op(p_cache_mem, SL_ERRORS_FAIL, bounds, 6);
    /* the file exists after the reference run: resumes read it */
    unlink(cache_path);
    long fb[] = {42, 43, 44, 75, 76, 77};
    check_op(p_cache_file, SL_ERRORS_FAIL, fb, 6);
    /* no file: a resume in the writing pass passes through, one in the
     * reading pass rebuilds the file first */
    pass ref = reference(p_cache_file, SL_ERRORS_FAIL);
    long ks[] = {0, 10, 75, 76, 100};
    for (int i = 0; i < 5; i++) {
        unlink(cache_path);
        resume_at(p_cache_file, &ref, ks[i], 2, 2, false, SL_ERRORS_FAIL);
    }
    free(ref.h);
    /* a memory cache restored where its dataset already holds the pass:
     * served from memory, same output */
    sl_dataset *ds = p_cache_mem();
    sl_options *o = opts(2, false, SL_ERRORS_FAIL);
    pass full = {0}, got = {0};
    sl_iterator *it = sl_iterator_create(ds, o);
    finish(it, &full);
    sl_iterator_free(it);
    size_t len;
    unsigned char *st = save_after(ds, o, 450, &got, &len);
    it = sl_iterator_restore(ds, st, len, o);
    assert_non_null(it);
    finish(it, &got);
    assert_int_equal(got.n, full.n);
    assert_memory_equal(got.h, full.h, full.n * sizeof *full.h);
    sl_iterator_free(it);
    free(st);
    free(full.h);
    free(got.h);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_saved(void **state)
{
    (void)state;
    sl_dataset *src = sl_shuffle(sl_range(0, 300, 1), 64, 9, 0);
    assert_int_equal(sl_save(src, saved_path, NULL, SL_COMPRESSION_ZLIB, shard_by_mix, NULL), 0);
    sl_dataset_release(src);
    long seam[] = {299, 300, 301};
    check_op(p_load, SL_ERRORS_FAIL, seam, 3);
    /* the snapshot exists after the reference run: resumes read it */
    long fb[] = {42, 43, 44, 75, 76, 77};
    check_op(p_snapshot, SL_ERRORS_FAIL, fb, 6);
    /* none yet: a resume in the writing pass passes through unwritten, one
     * in the second pass writes it then */
    pass ref = reference(p_snapshot, SL_ERRORS_FAIL);
    long ks[] = {0, 10, 75, 76, 100};
    for (int i = 0; i < 5; i++) {
        tu_rmdir(snapshot_path);
        resume_at(p_snapshot, &ref, ks[i], 2, 2, false, SL_ERRORS_FAIL);
    }
    free(ref.h);
}

/* With damaged files under the skip policy, the resumed run skips the same
 * files and ends with the same count. */
static void test_skips(void **state)
{
    (void)state;
    pass ref = reference(p_damaged, SL_ERRORS_SKIP);
    assert_true(ref.skipped >= 3);
    long ks[] = {0, 1, 2, 3, (long)ref.n - 1, (long)ref.n};
    for (int i = 0; i < 6; i++)
        for (int t = 1; t <= 2; t++)
            resume_at(p_damaged, &ref, ks[i], t, 3 - t, t == 1, SL_ERRORS_SKIP);
    free(ref.h);
    check_op(p_damaged_single, SL_ERRORS_SKIP, NULL, 0);
}

/* The image pipeline's state is small, and a restored pass reads only the
 * files it returns. */
static void test_small_and_lazy(void **state)
{
    (void)state;
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, SIZE), 0);
    sl_dataset *ds = sl_shuffle(sl_image_folder(folder, NULL, 0), SL_SHUFFLE_ALL, -1, 0);
    ds = sl_prefetch(sl_batch(sl_map_image(ds, &spec, SL_AUTOTUNE), 5, 0), SL_AUTOTUNE);
    sl_options *o = opts(2, true, SL_ERRORS_FAIL);
    pass full = {0}, got = {0};
    sl_iterator *it = sl_iterator_create(ds, o);
    finish(it, &full);
    sl_iterator_free(it);
    size_t len;
    unsigned char *st = save_after(ds, o, 2, &got, &len);
    print_message("image pipeline state: %zu bytes\n", len);
    assert_true(len < 1024);
    it = sl_iterator_restore(ds, st, len, o);
    assert_non_null(it);
    finish(it, &got);
    sl_iterator_free(it);
    assert_int_equal(got.n, full.n);
    assert_memory_equal(got.h, full.h, full.n * sizeof *full.h);
    /* 2 batches of 5 were returned: the resumed pass reads the other 11
     * files, not all 21 */
    assert_true(got.bytes_read > 0);
    assert_true(got.bytes_read < full.bytes_read * 2 / 3);
    free(st);
    free(full.h);
    free(got.h);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* ---- across processes ---- */

static const char *self_path;

static int child_save(const char *path, long k)
{
    sl_dataset *ds = p_combo();
    sl_options *o = opts(3, true, SL_ERRORS_FAIL);
    pass got = {0};
    size_t len;
    unsigned char *st = save_after(ds, o, k, &got, &len);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(st, 1, len, f) == len;
    if (f)
        fclose(f);
    free(st);
    free(got.h);
    sl_options_free(o);
    sl_dataset_release(ds);
    return ok ? 0 : 1;
}

static void test_other_process(void **state)
{
    (void)state;
    pass ref = reference(p_combo, SL_ERRORS_FAIL);
    char path[400];
    snprintf(path, sizeof path, "%s/state.bin", dir);
    long ks[] = {0, 9, (long)ref.n};
    for (int i = 0; i < 3; i++) {
        char karg[32];
        snprintf(karg, sizeof karg, "%ld", ks[i]);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            execl(self_path, self_path, "--save-state", path, karg, (char *)NULL);
            _exit(127);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        unsigned char buf[4096];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        sl_dataset *ds = p_combo();
        sl_options *o = opts(1, false, SL_ERRORS_FAIL);
        sl_iterator *it = sl_iterator_restore(ds, buf, len, o);
        assert_non_null(it);
        pass rest = {0};
        assert_int_equal(take(it, &rest, -1), SL_EOF);
        assert_int_equal(rest.n, ref.n - (size_t)ks[i]);
        assert_memory_equal(rest.h, ref.h + ks[i], rest.n * sizeof *rest.h);
        free(rest.h);
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
    free(ref.h);
}

/* ---- refusals ---- */

static unsigned char *state_of(builder make, long k, size_t *len)
{
    sl_dataset *ds = make();
    sl_options *o = opts(2, false, SL_ERRORS_FAIL);
    pass got = {0};
    unsigned char *st = save_after(ds, o, k, &got, len);
    free(got.h);
    sl_options_free(o);
    sl_dataset_release(ds);
    return st;
}

static void expect_refused(builder make, const void *st, size_t len, const sl_options *o,
                           int code, const char *words)
{
    sl_dataset *ds = make();
    sl_iterator *it = sl_iterator_restore(ds, st, len, o);
    if (it || sl_last_error_code() != code || !strstr(sl_last_error(), words))
        print_error("expected %d \"%s\", got %p %d \"%s\"\n", code, words, (void *)it,
                    sl_last_error_code(), sl_last_error());
    assert_null(it);
    assert_int_equal(sl_last_error_code(), code);
    assert_non_null(strstr(sl_last_error(), words));
    sl_dataset_release(ds);
}

static sl_dataset *p_other(void) { return sl_map(sl_range(0, 301, 1), "draw", draw, NULL, 2, 0); }

static void test_refusals(void **state)
{
    (void)state;
    size_t len;
    unsigned char *st = state_of(p_map, 10, &len);
    sl_options *o = opts(2, false, SL_ERRORS_FAIL);
    expect_refused(p_other, st, len, o, SL_EMISMATCH, "another pipeline");
    expect_refused(p_map, st, len - 1, o, SL_ECORRUPT, "truncated");
    expect_refused(p_map, st, 20, o, SL_ECORRUPT, "shorter than");
    expect_refused(p_map, NULL, 0, o, SL_ECORRUPT, "shorter than");
    unsigned char *bad = malloc(len + 8);
    memcpy(bad, st, len);
    bad[len - 3] ^= 0x40;
    expect_refused(p_map, bad, len, o, SL_ECORRUPT, "checksum");
    memcpy(bad, st, len);
    bad[0] = 'X';
    expect_refused(p_map, bad, len, o, SL_ECORRUPT, "magic");
    memcpy(bad, st, len);
    bad[8] = 2; /* format version 2 */
    expect_refused(p_map, bad, len, o, SL_EUNSUPPORTED, "newer");
    memcpy(bad, st, len);
    memset(bad + len, 0, 8);
    expect_refused(p_map, bad, len + 8, o, SL_ECORRUPT, "header says");
    free(bad);
    sl_options *other = opts(2, false, SL_ERRORS_FAIL);
    assert_int_equal(sl_options_set(other, SL_OPT_SEED, SEED + 1), 0);
    expect_refused(p_map, st, len, other, SL_EMISMATCH, "seed");
    assert_int_equal(sl_options_set(other, SL_OPT_SEED, SEED), 0);
    assert_int_equal(sl_options_set(other, SL_OPT_EPOCH, EPOCH + 1), 0);
    expect_refused(p_map, st, len, other, SL_EMISMATCH, "epoch");
    /* epoch left to the state: fine, and later iterators go on from it */
    assert_int_equal(sl_options_set(other, SL_OPT_EPOCH, -1), 0);
    sl_dataset *ds = p_map();
    sl_iterator *it = sl_iterator_restore(ds, st, len, other);
    assert_non_null(it);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_EPOCH), EPOCH);
    sl_iterator_free(it);
    it = sl_iterator_create(ds, other);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_EPOCH), EPOCH + 1);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    sl_options_free(other);
    free(st);

    /* a buffer too small gets nothing, only the size */
    ds = p_map();
    it = sl_iterator_create(ds, o);
    unsigned char small[16] = {0};
    int64_t need = sl_iterator_save(it, small, sizeof small);
    assert_true(need > (int64_t)sizeof small);
    for (size_t i = 0; i < sizeof small; i++)
        assert_int_equal(small[i], 0);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* no exact position: an unordered map, an op without save */
    ds = sl_map(sl_range(0, 50, 1), "u", tu_identity, NULL, 2, SL_NONDETERMINISTIC);
    it = sl_iterator_create(ds, o);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    assert_int_equal(sl_iterator_save(it, NULL, 0), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "unordered"));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    sl_element *els[2] = {tu_el_i64(1), tu_el_i64(2)};
    ds = sl_prefetch(sl_map(tu_elements(els, 2, -3), "id", tu_identity, NULL, 1, 0), 2);
    it = sl_iterator_create(ds, o);
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    assert_int_equal(sl_iterator_save(it, NULL, 0), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "cannot save"));
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* after a failure there is no position */
    ds = sl_image_folder(damaged, NULL, 0);
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_CENTER, SIZE), 0);
    ds = sl_map_image(ds, &spec, 1);
    it = sl_iterator_create(ds, o);
    int rc;
    while ((rc = sl_next(it, &el)) == 0)
        sl_element_release(el);
    assert_true(rc < 0);
    assert_int_equal(sl_iterator_save(it, NULL, 0), SL_ESTATE);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    sl_options_free(o);
}

/* ---- fixtures ---- */

static void make_images(const char *root, int classes, int per_class, bool bad)
{
    assert_int_equal(mkdir(root, 0755), 0);
    for (int c = 0; c < classes; c++) {
        char sub[400];
        snprintf(sub, sizeof sub, "%s/c%d", root, c);
        assert_int_equal(mkdir(sub, 0755), 0);
        for (int i = 0; i < per_class; i++) {
            size_t n;
            uint8_t *jpg = ju_make(40 + 7 * i, 36 + 5 * c, (unsigned)(c * 31 + i), NULL, &n);
            char path[480];
            snprintf(path, sizeof path, "%s/%02d.jpg", sub, c * per_class + i);
            if (bad && i == 2)
                n /= 3; /* truncated */
            if (bad && i == 4)
                memcpy(jpg, "GIF89a", 6); /* not a JPEG */
            if (bad && i == 5)
                n = 0; /* empty */
            tu_write_file(path, jpg, n);
            free(jpg);
        }
    }
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
    snprintf(folder, sizeof folder, "%s/clean", dir);
    snprintf(damaged, sizeof damaged, "%s/damaged", dir);
    snprintf(list_path, sizeof list_path, "%s/list.txt", dir);
    snprintf(cache_path, sizeof cache_path, "%s/cache.bin", dir);
    snprintf(saved_path, sizeof saved_path, "%s/saved", dir);
    snprintf(snapshot_path, sizeof snapshot_path, "%s/snapshots", dir);
    make_images(folder, 3, 7, false);
    make_images(damaged, 2, 7, true);
    make_shards();
    FILE *f = fopen(list_path, "w");
    for (int i = 0; i < 21; i++)
        fprintf(f, "clean/c%d/%02d.jpg %d\n", i / 7, i, i % 4);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(dir);
    return 0;
}

int main(int argc, char **argv)
{
    self_path = "/proc/self/exe";
    if (argc == 4 && strcmp(argv[1], "--save-state") == 0) {
        /* the child of test_other_process; the fixture is the parent's */
        const char *p = argv[2];
        snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(p, '/') - p), p);
        return child_save(p, atol(argv[3]));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sources),       cmocka_unit_test(test_records),
        cmocka_unit_test(test_maps),
        cmocka_unit_test(test_batching),      cmocka_unit_test(test_order),
        cmocka_unit_test(test_cache),         cmocka_unit_test(test_skips),
        cmocka_unit_test(test_saved),
        cmocka_unit_test(test_combining),     cmocka_unit_test(test_restructuring),
        cmocka_unit_test(test_variable_length),
        cmocka_unit_test(test_small_and_lazy), cmocka_unit_test(test_other_process),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
