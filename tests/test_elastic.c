/* Resuming on another world size (sl_iterator_restore_ranks): the old
 * ranks stop at different points, their states are merged, and the new
 * ranks, W' of them, consume the rest: across the change every element of
 * the epoch exactly once, plus only the padding that equal steps need.
 * Then again from the new ranks' states onto yet another world size, over
 * a shuffled range, a windowed order, range itself, shuffled .npy and
 * Megatron token files, and shuffled TFRecord shards (indexed by their own
 * pass, and by DALI index files). */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "recordutil.h"
#include "testutil.h"

#define N 103
#define BATCH 3
#define MAX_STATE 4096

static char dir[256], npy_path[300], megatron_prefix[300];

/* The same N values as token files: a .npy of int64 cut into elements of
 * one, and a Megatron index of N one-token int64 sequences. */
static void write_token_files(void)
{
    int64_t v[N];
    for (int i = 0; i < N; i++)
        v[i] = i;
    snprintf(npy_path, sizeof npy_path, "%s/values.npy", dir);
    ru_buf b = {0};
    const char *dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (103,), }";
    unsigned char h[8];
    ru_put(&b, "\x93NUMPY\x01\x00", 8);
    ru_le(h, strlen(dict) + 1, 2), ru_put(&b, h, 2);
    ru_put(&b, dict, strlen(dict)), ru_put(&b, "\n", 1);
    ru_put(&b, v, sizeof v);
    ru_write(npy_path, b.p, b.n);
    b.n = 0;
    snprintf(megatron_prefix, sizeof megatron_prefix, "%s/values", dir);
    char path[320];
    snprintf(path, sizeof path, "%s.bin", megatron_prefix);
    ru_write(path, v, sizeof v);
    ru_put(&b, "MMIDIDX\0\0", 9);
    ru_le(h, 1, 8), ru_put(&b, h, 8);
    h[0] = 5, ru_put(&b, h, 1); /* int64 */
    ru_le(h, N, 8), ru_put(&b, h, 8);
    ru_le(h, 2, 8), ru_put(&b, h, 8);
    for (int i = 0; i < N; i++)
        ru_le(h, 1, 4), ru_put(&b, h, 4);
    for (int i = 0; i < N; i++)
        ru_le(h, 8 * (uint64_t)i, 8), ru_put(&b, h, 8);
    ru_le(h, 0, 8), ru_put(&b, h, 8);
    ru_le(h, N, 8), ru_put(&b, h, 8);
    snprintf(path, sizeof path, "%s.idx", megatron_prefix);
    ru_write(path, b.p, b.n);
    free(b.p);
}

/* The same values as TFRecord records (8 bytes each) in 3 shards, and
 * DALI index files for them under other names. */
static char shard_path[3][300], dali_path[3][300];
static const char *shards[3], *dali[3];

static void write_shards(void)
{
    for (int k = 0; k < 3; k++) {
        snprintf(shard_path[k], sizeof shard_path[k], "%s/part-%d.tfrecord", dir, k);
        snprintf(dali_path[k], sizeof dali_path[k], "%s/part-%d.dali-idx", dir, k);
        shards[k] = shard_path[k], dali[k] = dali_path[k];
        ru_buf b = {0}, idx = {0};
        for (int64_t v = k * 40; v < N && v < (k + 1) * 40; v++) {
            char line[64];
            int len = snprintf(line, sizeof line, "%zu %d\n", b.n, 8 + 16);
            ru_put(&idx, line, (size_t)len);
            unsigned char le[8];
            ru_le(le, (uint64_t)v, 8);
            ru_record(&b, le, 8);
        }
        ru_write(shard_path[k], b.p, b.n);
        ru_write(dali_path[k], idx.p, idx.n);
        free(b.p), free(idx.p);
    }
}

/* The same values as WebDataset samples in 3 tar shards: "sNNN.cls" (the
 * value as text) and "sNNN.txt", a directory and a member with no
 * extension between some of them. */
static char tar_path[3][300];
static const char *tars[3];

static void write_tars(void)
{
    for (int k = 0; k < 3; k++) {
        snprintf(tar_path[k], sizeof tar_path[k], "%s/part-%d.tar", dir, k);
        tars[k] = tar_path[k];
        ru_buf b = {0};
        for (int64_t v = k * 40; v < N && v < (k + 1) * 40; v++) {
            char name[32], text[32];
            snprintf(name, sizeof name, "s%03lld.cls", (long long)v);
            int len = snprintf(text, sizeof text, "%lld\n", (long long)v);
            ru_tar_file(&b, name, text, (size_t)len);
            if (v % 7 == 3)
                ru_tar_file(&b, "README", "x", 1);
            snprintf(name, sizeof name, "s%03lld.txt", (long long)v);
            ru_tar_file(&b, name, "some text", 9);
            if (v % 11 == 5) {
                unsigned char h[512];
                ru_tar_header(h, "a-directory", 0, '5');
                ru_put(&b, h, 512);
            }
        }
        ru_tar_end(&b);
        ru_write(tar_path[k], b.p, b.n);
        free(b.p);
    }
}

/* The same values saved (sl_save), gzip (where the build has zlib), in 3
 * shards by value % 3, so a shard holds every third element of the saved
 * order. */
static char saved_path[300];

static int mod3(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)user;
    *key = sl_tensor_int64(sl_element_tensor(el, 0)) % 3;
    return 0;
}

static void write_saved(void)
{
    snprintf(saved_path, sizeof saved_path, "%s/saved", dir);
    sl_dataset *ds = sl_range(0, N, 1);
#ifndef SLUICE_NO_ZLIB
    const int compression = SL_COMPRESSION_GZIP;
#else
    const int compression = SL_COMPRESSION_NONE;
#endif
    assert_int_equal(sl_save(ds, saved_path, NULL, compression, mod3, NULL), 0);
    sl_dataset_release(ds);
}

static int record_value(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    size_t len;
    const unsigned char *p =
        (const unsigned char *)sl_tensor_string(sl_element_tensor(in, 0), 0, &len);
    assert_int_equal(len, 8);
    int64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (int64_t)p[i] << (8 * i);
    *out = sl_element_create(1);
    return sl_element_add_int64(*out, v);
}

#define SOURCES 9

static sl_dataset *pipeline(int world, int rank, int source)
{
    sl_dist_context ctx = {.rank = rank, .world_size = world};
    sl_dataset *in = sl_range(0, N, 1);
    if (source == 0)
        in = sl_shuffle(in, SL_SHUFFLE_ALL, 5, 0);
    else if (source == 1)
        in = sl_shuffle_windowed(in, 8, 3, 5, 0);
    /* source 2: range's own order (an indexed source, no shuffle) */
    if (source == 3) { /* token files, shuffled: int64 [1] elements */
        sl_dataset_release(in);
        in = sl_shuffle(sl_npy(npy_path, 1, 0), SL_SHUFFLE_ALL, 5, 0);
    } else if (source == 4) {
        sl_dataset_release(in);
        in = sl_shuffle(sl_megatron(megatron_prefix, 0), SL_SHUFFLE_ALL, 5, 0);
    }
    if (source == 5 || source == 6) { /* TFRecord shards, built or DALI index */
        sl_dataset_release(in);
        in = sl_shuffle(sl_tfrecord_indexed(shards, 3, source == 6 ? dali : NULL, 0),
                        SL_SHUFFLE_ALL, 5, 0);
        return sl_batch(sl_map(sl_distribute(in, &ctx, 0), "value", record_value, NULL, 1, 0),
                        BATCH, 0);
    }
    if (source == 7) { /* tar shards: int64 scalars from "cls" */
        sl_dataset_release(in);
        static const char *keys[] = {"cls"};
        static const sl_dtype types[] = {SL_INT64};
        in = sl_shuffle(sl_tar_indexed(tars, 3, keys, types, 1, 0), SL_SHUFFLE_ALL, 5, 0);
    } else if (source == 8) { /* a saved dataset */
        sl_dataset_release(in);
        in = sl_shuffle(sl_load(saved_path), SL_SHUFFLE_ALL, 5, 0);
    }
    return sl_batch(sl_distribute(in, &ctx, 0), BATCH, 0);
}

typedef struct rank_run {
    unsigned char state[MAX_STATE];
    size_t len;
} rank_run;

/* Takes `batches` batches from it (all of them if < 0), counting each
 * element in count[]; returns the elements taken. */
static int64_t take(sl_iterator *it, int64_t batches, int *count)
{
    sl_element *el;
    int64_t got = 0;
    for (int64_t b = 0; batches < 0 || b < batches; b++) {
        int rc = sl_next(it, &el);
        if (rc == SL_EOF)
            break;
        if (rc)
            fail_msg("%s", sl_iterator_errmsg(it));
        const sl_tensor *t = sl_element_tensor(el, 0); /* [B] or [B, 1] */
        for (int64_t i = 0; i < sl_tensor_shape(t)[0]; i++) {
            int64_t v = ((const int64_t *)sl_tensor_data(t))[i];
            assert_true(v >= 0 && v < N);
            count[v]++;
            got++;
        }
        sl_element_release(el);
    }
    return got;
}

static void save(sl_iterator *it, rank_run *r)
{
    int64_t n = sl_iterator_save(it, r->state, sizeof r->state);
    if (n <= 0 || n > MAX_STATE)
        fail_msg("save: %s", sl_last_error());
    r->len = (size_t)n;
}

/* Every element counted once, and at most `pad` counted twice. */
static void exactly_once(const int *count, int64_t pad, const char *what)
{
    int64_t twice = 0;
    for (int v = 0; v < N; v++) {
        if (count[v] < 1 || count[v] > 2)
            fail_msg("%s: element %d taken %d times", what, v, count[v]);
        twice += count[v] - 1;
    }
    if (twice > pad)
        fail_msg("%s: %lld elements taken twice, padding allows %lld", what, (long long)twice,
                 (long long)pad);
}

/* Old ranks of W at different paces -> W' ranks part way -> W'' to the end. */
static void resume_twice(int source, int W, int W2, int W3)
{
    int count[N] = {0};
    sl_options *o = tu_opts(2, 9);
    rank_run old[5], mid[5];
    for (int r = 0; r < W; r++) { /* rank r stops after r % 3 * 4 + 1 batches */
        sl_dataset *ds = pipeline(W, r, source);
        sl_iterator *it = sl_iterator_create(ds, o);
        assert_non_null(it);
        take(it, r % 3 * 4 + 1, count);
        save(it, &old[r]);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    const void *states[5];
    size_t lens[5];
    for (int r = 0; r < W; r++)
        states[r] = old[r].state, lens[r] = old[r].len;
    /* W2 ranks take two batches each and save */
    for (int r = 0; r < W2; r++) {
        sl_dataset *ds = pipeline(W2, r, source);
        sl_iterator *it = sl_iterator_restore_ranks(ds, states, lens, W, o);
        if (!it)
            fail_msg("%d -> %d, rank %d: %s", W, W2, r, sl_last_error());
        take(it, 2, count);
        save(it, &mid[r]);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    for (int r = 0; r < W2; r++)
        states[r] = mid[r].state, lens[r] = mid[r].len;
    /* W3 ranks to the end of the epoch */
    int64_t padded = 0;
    for (int r = 0; r < W3; r++) {
        sl_dataset *ds = pipeline(W3, r, source);
        sl_iterator *it = sl_iterator_restore_ranks(ds, states, lens, W2, o);
        if (!it)
            fail_msg("%d -> %d, rank %d: %s", W2, W3, r, sl_last_error());
        take(it, -1, count);
        padded += sl_iterator_stat(it, SL_STAT_PADDED);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    char what[64];
    snprintf(what, sizeof what, "source %d, %d -> %d -> %d", source, W, W2, W3);
    /* the old and middle ranks may have padded too, when they reached the
     * end: at most one element a rank */
    exactly_once(count, padded + W + W2, what);
    sl_options_free(o);
}

static void test_world_sizes(void **state)
{
    (void)state;
    const int sizes[] = {1, 2, 3, 5};
    for (int source = 0; source < SOURCES; source++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                resume_twice(source, sizes[a], sizes[b], sizes[(a + b + 1) % 4]);
}

/* Ranks one batch apart restore on the same world size: the same split. */
static void test_same_world_and_plain_restore(void **state)
{
    (void)state;
    int count[N] = {0};
    sl_options *o = tu_opts(1, 9);
    rank_run run[2];
    for (int r = 0; r < 2; r++) {
        sl_dataset *ds = pipeline(2, r, 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        take(it, 3 + r, count);
        save(it, &run[r]);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    const void *states[2] = {run[0].state, run[1].state};
    size_t lens[2] = {run[0].len, run[1].len};
    /* after a merge, a rank's own state restores with sl_iterator_restore */
    for (int r = 0; r < 2; r++) {
        sl_dataset *ds = pipeline(2, r, 0);
        sl_iterator *it = sl_iterator_restore_ranks(ds, states, lens, 2, o);
        assert_non_null(it);
        take(it, 1, count);
        rank_run again;
        save(it, &again);
        sl_iterator_free(it);
        it = sl_iterator_restore(ds, again.state, again.len, o);
        if (!it)
            fail_msg("%s", sl_last_error());
        take(it, -1, count);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    exactly_once(count, 2, "2 -> 2");
    sl_options_free(o);
}

/* A mixture of two sources, each distributed on its own (as a global
 * order per source), resumed on another world size with new weights:
 * every element of both sources once, none repeated or skipped. */
static sl_dataset *mixture(int world, int rank, double wa)
{
    sl_dist_context ctx = {.rank = rank, .world_size = world};
    sl_dataset *in[2] = {
        sl_distribute(sl_shuffle(sl_range(0, 60, 1), SL_SHUFFLE_ALL, 1, 0), &ctx, 0),
        sl_distribute(sl_shuffle(sl_range(1000, 1040, 1), SL_SHUFFLE_ALL, 2, 0), &ctx, 0)};
    const double w[2] = {wa, 1 - wa};
    return sl_batch(sl_sample_from(in, 2, w, 4, 0), BATCH, 0);
}

static void take_mixed(sl_iterator *it, int64_t batches, int *count)
{
    sl_element *el;
    for (int64_t b = 0; batches < 0 || b < batches; b++) {
        int rc = sl_next(it, &el);
        if (rc == SL_EOF)
            break;
        if (rc)
            fail_msg("%s", sl_iterator_errmsg(it));
        const sl_tensor *t = sl_element_tensor(el, 0);
        for (int64_t i = 0; i < sl_tensor_shape(t)[0]; i++) {
            int64_t v = ((const int64_t *)sl_tensor_data(t))[i];
            assert_true((v >= 0 && v < 60) || (v >= 1000 && v < 1040));
            count[v]++;
        }
        sl_element_release(el);
    }
}

/* Three ranks of mixture(wa) take batches[r] each and checkpoint (what
 * they took copied into before[], when given); two ranks of mixture(wb)
 * resume from the three states and take the rest. Every element of both
 * sources must be taken once, at most the resume's padding plus `slack`
 * of them twice. */
static void mixture_resume(const int *batches, double wa, double wb, int *before, int slack)
{
    static int count[1040];
    memset(count, 0, sizeof count);
    sl_options *o = tu_opts(1, 9);
    rank_run run[3];
    const void *states[3];
    size_t lens[3];
    for (int r = 0; r < 3; r++) {
        sl_dataset *ds = mixture(3, r, wa);
        sl_iterator *it = sl_iterator_create(ds, o);
        take_mixed(it, batches[r], count);
        save(it, &run[r]);
        states[r] = run[r].state, lens[r] = run[r].len;
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    if (before)
        memcpy(before, count, sizeof count);
    int64_t padded = 0;
    for (int r = 0; r < 2; r++) {
        sl_dataset *ds = mixture(2, r, wb);
        sl_iterator *it = sl_iterator_restore_ranks(ds, states, lens, 3, o);
        if (!it)
            fail_msg("%s", sl_last_error());
        take_mixed(it, -1, count);
        padded += sl_iterator_stat(it, SL_STAT_PADDED);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    int64_t twice = 0;
    for (int v = 0; v < 1040; v++) {
        if (v >= 60 && v < 1000)
            continue;
        if (count[v] < 1 || count[v] > 2)
            fail_msg("element %d taken %d times", v, count[v]);
        twice += count[v] - 1;
    }
    assert_true(twice <= padded + slack);
    sl_options_free(o);
}

static void test_mixture_new_weights(void **state)
{
    (void)state;
    mixture_resume((const int[]){2, 3, 4}, 0.5, 0.9, NULL, 0);
}

/* A rank on which the mixture ran out of one source (and let it go, its
 * record with it) counts that source's share as taken: the resume repeats
 * and loses nothing. b (40 elements, 14 a rank) is drawn first; the old
 * ranks' own padding of b (42 of 40) may come twice. */
static void test_mixture_source_ended_on_a_rank(void **state)
{
    (void)state;
    static int before[1040];
    static const int one[3] = {1, 6, 1}, all[3] = {6, 6, 6};
    mixture_resume(one, 0.05, 0.5, before, 2); /* on rank 1 */
    int b = 0; /* what the ranks took of b: rank 1 all of its share */
    for (int v = 1000; v < 1040; v++)
        b += before[v];
    assert_true(b >= 14 + 2);
    mixture_resume(all, 0.05, 0.5, NULL, 2); /* on every rank: none has its record */
}

static int fail_17(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t v = *(const int64_t *)sl_tensor_data(sl_element_tensor(in, 0));
    if (v % 17 == 0)
        return sl__set_error(SL_ECORRUPT, "element %lld is bad", (long long)v);
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

/* Elements the error policy skipped count as consumed: never read again. */
static void test_skipped_count_as_consumed(void **state)
{
    (void)state;
    int count[N] = {0};
    sl_options *o = tu_opts(1, 9);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    rank_run run[3];
    const void *states[3];
    size_t lens[3];
    for (int r = 0; r < 3; r++) {
        sl_dist_context ctx = {.rank = r, .world_size = 3};
        sl_dataset *ds = sl_batch(sl_map(sl_distribute(sl_shuffle(sl_range(0, N, 1),
                                                                  SL_SHUFFLE_ALL, 5, 0),
                                                       &ctx, 0),
                                         "fail_17", fail_17, NULL, 1, 0),
                                  BATCH, 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        take(it, 2 + 2 * r, count);
        save(it, &run[r]);
        states[r] = run[r].state, lens[r] = run[r].len;
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    for (int r = 0; r < 2; r++) {
        sl_dist_context ctx = {.rank = r, .world_size = 2};
        sl_dataset *ds = sl_batch(sl_map(sl_distribute(sl_shuffle(sl_range(0, N, 1),
                                                                  SL_SHUFFLE_ALL, 5, 0),
                                                       &ctx, 0),
                                         "fail_17", fail_17, NULL, 1, 0),
                                  BATCH, 0);
        sl_iterator *it = sl_iterator_restore_ranks(ds, states, lens, 3, o);
        if (!it)
            fail_msg("%s", sl_last_error());
        take(it, -1, count);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    for (int v = 0; v < N; v++)
        if (v % 17 == 0)
            count[v]++; /* skipped once, wherever it fell */
    exactly_once(count, 1, "3 -> 2 with skips");
    sl_options_free(o);
}

/* The pipelines of the review cases: 40 elements below distribute (a
 * buffered shuffle, a repeat above it, DROP), for rank r of world. */
enum { BUFFERED, REPEATED, DROPPED };

static sl_dataset *review_pipeline(int kind, int world, int rank)
{
    sl_dist_context ctx = {.rank = rank, .world_size = world};
    sl_dataset *in = sl_shuffle(sl_range(0, 40, 1), kind == BUFFERED ? 8 : SL_SHUFFLE_ALL, 1, 0);
    sl_dataset *ds = sl_distribute(in, &ctx, kind == DROPPED ? SL_DISTRIBUTE_DROP : 0);
    return kind == REPEATED ? sl_repeat(ds, 3) : ds;
}

/* Every rank of `world` takes `steps` elements and saves. */
static void checkpoint_ranks(int kind, int world, int steps, sl_options *o, rank_run *run,
                             const void **states, size_t *lens)
{
    for (int r = 0; r < world; r++) {
        sl_dataset *ds = review_pipeline(kind, world, r);
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        for (int i = 0; i < steps; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            sl_element_release(el);
        }
        save(it, &run[r]);
        states[r] = run[r].state, lens[r] = run[r].len;
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
}

/* Found in review: what a merge must refuse, and edges it must get right. */
static void test_review_cases(void **state)
{
    (void)state;
    sl_options *o = tu_opts(1, 9);
    rank_run run[3];
    const void *states[3];
    size_t lens[3];
    /* a buffered shuffle below distribute gives no position: refused */
    checkpoint_ranks(BUFFERED, 2, 1, o, run, states, lens);
    sl_dataset *ds = review_pipeline(BUFFERED, 3, 0);
    assert_null(sl_iterator_restore_ranks(ds, states, lens, 2, o));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    sl_dataset_release(ds);

    /* repeat above distribute, saved in its second pass: refused, not
     * merged into the first pass's order */
    checkpoint_ranks(REPEATED, 2, 25, o, run, states, lens);
    ds = review_pipeline(REPEATED, 3, 0);
    assert_null(sl_iterator_restore_ranks(ds, states, lens, 2, o));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    sl_dataset_release(ds);

    /* DROP, every rank at the end of its share: nothing is left */
    checkpoint_ranks(DROPPED, 3, 13, o, run, states, lens);
    ds = review_pipeline(DROPPED, 1, 0);
    sl_iterator *it = sl_iterator_restore_ranks(ds, states, lens, 3, o);
    if (!it)
        fail_msg("%s", sl_last_error());
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* a window past the blocks there are is the whole pass, a permutation */
    ds = sl_shuffle_windowed(sl_range(0, 100, 1), 10, INT64_MAX, 3, 0);
    int64_t *v;
    size_t nv;
    assert_int_equal(tu_collect(ds, o, &v, &nv, NULL), SL_EOF);
    assert_int_equal(nv, 100);
    char seen[100] = {0};
    for (size_t i = 0; i < nv; i++) {
        assert_true(v[i] >= 0 && v[i] < 100 && !seen[v[i]]);
        seen[v[i]] = 1;
    }
    free(v);
    sl_dataset_release(ds);
    sl_options_free(o);
}

/* A record skipped by the error policy below distribute is a position
 * consumed like any other: the ranks stay on the order's positions. */
static void test_skip_below_distribute(void **state)
{
    (void)state;
    /* shards whose record of value 50 has a damaged data CRC */
    char bad[3][300];
    const char *bad_shards[3];
    for (int k = 0; k < 3; k++) {
        snprintf(bad[k], sizeof bad[k], "%s/bad-%d.tfrecord", dir, k);
        bad_shards[k] = bad[k];
        unsigned char *p;
        size_t n;
        tu_read_file(shards[k], &p, &n);
        if (k == 1)
            p[(50 - 40) * 24 + 12] ^= 1; /* value 50: shard 1's 11th record */
        ru_write(bad[k], p, n);
        free(p);
    }
    sl_options *o = tu_opts(1, 9);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    int count[N] = {0};
    rank_run run[2];
    const void *states[2];
    size_t lens[2];
    for (int r = 0; r < 2; r++) {
        sl_dist_context ctx = {.rank = r, .world_size = 2};
        sl_dataset *in = sl_shuffle(sl_tfrecord_indexed(bad_shards, 3, NULL, 0),
                                    SL_SHUFFLE_ALL, 5, 0);
        sl_dataset *ds = sl_batch(sl_map(sl_distribute(in, &ctx, 0), "value", record_value,
                                         NULL, 1, 0), BATCH, 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        take(it, 4 + 3 * r, count);
        save(it, &run[r]);
        states[r] = run[r].state, lens[r] = run[r].len;
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    int64_t padded = 0;
    for (int r = 0; r < 3; r++) {
        sl_dist_context ctx = {.rank = r, .world_size = 3};
        sl_dataset *in = sl_shuffle(sl_tfrecord_indexed(bad_shards, 3, NULL, 0),
                                    SL_SHUFFLE_ALL, 5, 0);
        sl_dataset *ds = sl_batch(sl_map(sl_distribute(in, &ctx, 0), "value", record_value,
                                         NULL, 1, 0), BATCH, 0);
        sl_iterator *it = sl_iterator_restore_ranks(ds, states, lens, 2, o);
        if (!it)
            fail_msg("%s", sl_last_error());
        take(it, -1, count);
        padded += sl_iterator_stat(it, SL_STAT_PADDED);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    assert_true(count[50] <= 1); /* skipped (a pad may repeat it) */
    count[50] += count[50] == 0;
    exactly_once(count, padded + 2, "skip below distribute, 2 -> 3");
    sl_options_free(o);
}

static void test_refusals(void **state)
{
    (void)state;
    sl_options *o = tu_opts(1, 9), *other = tu_opts(1, 10);
    rank_run run[3];
    int count[N] = {0};
    for (int r = 0; r < 3; r++) {
        sl_dataset *ds = pipeline(3, r, 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        take(it, 1, count);
        save(it, &run[r]);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    const void *states[3] = {run[0].state, run[1].state, run[2].state};
    size_t lens[3] = {run[0].len, run[1].len, run[2].len};
    sl_dataset *ds = pipeline(2, 0, 0);
    /* a rank missing; a rank twice; another seed; another pipeline */
    assert_null(sl_iterator_restore_ranks(ds, states, lens, 2, o));
    assert_int_equal(sl_last_error_code(), SL_EMISMATCH);
    const void *twice[3] = {run[0].state, run[0].state, run[2].state};
    assert_null(sl_iterator_restore_ranks(ds, twice, lens, 3, o));
    assert_int_equal(sl_last_error_code(), SL_EMISMATCH);
    assert_null(sl_iterator_restore_ranks(ds, states, lens, 3, other));
    assert_int_equal(sl_last_error_code(), SL_EMISMATCH);
    sl_dataset *windowed = pipeline(2, 0, 1);
    assert_null(sl_iterator_restore_ranks(windowed, states, lens, 3, o));
    assert_int_equal(sl_last_error_code(), SL_EMISMATCH);
    sl_dataset_release(windowed);
    sl_dataset_release(ds);
    /* no distribute: n > 1 refused, n = 1 an ordinary restore */
    sl_dataset *plain = sl_batch(sl_shuffle(sl_range(0, N, 1), SL_SHUFFLE_ALL, 5, 0), BATCH, 0);
    assert_null(sl_iterator_restore_ranks(plain, states, lens, 3, o));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_iterator *it = sl_iterator_create(plain, o);
    take(it, 1, count);
    rank_run one;
    save(it, &one);
    sl_iterator_free(it);
    const void *s1[1] = {one.state};
    it = sl_iterator_restore_ranks(plain, s1, &one.len, 1, o);
    assert_non_null(it);
    sl_iterator_free(it);
    sl_dataset_release(plain);
    sl_options_free(o);
    sl_options_free(other);
}

int main(void)
{
    tu_tmpdir(dir);
    write_token_files();
    write_shards();
    write_tars();
    write_saved();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_world_sizes),
        cmocka_unit_test(test_same_world_and_plain_restore),
        cmocka_unit_test(test_skipped_count_as_consumed),
        cmocka_unit_test(test_mixture_new_weights),
        cmocka_unit_test(test_mixture_source_ended_on_a_rank),
        cmocka_unit_test(test_review_cases),
        cmocka_unit_test(test_skip_below_distribute),
        cmocka_unit_test(test_refusals),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmdir(dir);
    return rc;
}
