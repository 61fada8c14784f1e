/* map_image alone and fused with batch: shapes, layouts, dtypes, fusion
 * equals the unfused result, determinism across thread counts, and element
 * errors inside batches (holes are filled, boundaries realign). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include "testutil.h"

/* A JPEG of w x h with smooth gradients, an edge and some texture. */
static unsigned char *make_jpeg(int w, int h, int seed, unsigned long *size)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    *size = 0;
    jpeg_mem_dest(&c, &out, size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    unsigned char *row = malloc((size_t)w * 3);
    unsigned rnd = (unsigned)seed * 2654435761u + 1;
    while (c.next_scanline < c.image_height) {
        int y = (int)c.next_scanline;
        for (int x = 0; x < w; x++) {
            rnd = rnd * 1103515245u + 12345u;
            int tex = (int)(rnd >> 28) - 8;
            int edge = (x * 3 + y * 2 + seed * 17) % (w + h) < (w + h) / 3 ? 60 : 0;
            row[3 * x] = (unsigned char)(40 + (150 * x) / w + edge / 2 + tex);
            row[3 * x + 1] = (unsigned char)(30 + (180 * y) / h + tex);
            row[3 * x + 2] = (unsigned char)(200 - (100 * (x + y)) / (w + h) + edge + tex);
        }
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    free(row);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return out;
}

/* (bytes, label, path) like sl_image_folder's elements; bad[i] marks files
 * replaced by junk. */
static sl_element *image_element(int i, bool bad)
{
    unsigned long n;
    unsigned char *jpg = make_jpeg(120 + (i * 37) % 300, 90 + (i * 53) % 260, i, &n);
    if (bad) /* a PNG signature: not a JPEG */
        memcpy(jpg, "\x89PNG\r\n\x1a\n", 8);
    sl_element *el = sl_element_create(3);
    int64_t shape[1] = {(int64_t)n};
    void *p = sl_element_add_tensor(el, SL_UINT8, 1, shape);
    memcpy(p, jpg, n);
    free(jpg);
    assert_int_equal(sl_element_add_int64(el, i), 0);
    char path[64];
    snprintf(path, sizeof path, "/data/img%03d.jpg", i);
    assert_int_equal(sl_element_add_string(el, path, strlen(path)), 0);
    return el;
}

static sl_dataset *images(int n, const bool *bad)
{
    sl_element **els = malloc((size_t)n * sizeof *els);
    for (int i = 0; i < n; i++)
        els[i] = image_element(i, bad && bad[i]);
    sl_dataset *ds = tu_elements(els, n, -3);
    free(els);
    return ds;
}

/* All output bytes of tensors 0 and 1 of every element, concatenated. */
typedef struct blob {
    unsigned char *p;
    size_t n;
    int64_t elements, batches;
} blob;

static void append(blob *b, const void *p, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static int run(sl_dataset *ds, int threads, int policy, blob *b, char *msg)
{
    sl_options *o = tu_opts(threads, 7);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    memset(b, 0, sizeof *b);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        for (int j = 0; j < 2; j++) {
            const sl_tensor *t = sl_element_tensor(el, j);
            append(b, sl_tensor_data(t), sl_tensor_nbytes(t));
        }
        const sl_tensor *labels = sl_element_tensor(el, 1);
        b->elements += sl_tensor_ndim(labels) ? sl_tensor_shape(labels)[0] : 1;
        b->batches++;
        sl_element_release(el);
    }
    if (msg)
        snprintf(msg, 1024, "%s", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    sl_options_free(o);
    return rc;
}

static sl_image_spec spec_of(int crop, int size)
{
    sl_image_spec s;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&s, crop, size), 0);
    return s;
}

static void test_shapes(void **state)
{
    (void)state;
    for (int layout = 0; layout < 2; layout++)
        for (int f32 = 0; f32 < 2; f32++) {
            sl_image_spec s = spec_of(SL_CROP_CENTER, 32);
            s.layout = layout;
            s.dtype = f32 ? SL_FLOAT32 : SL_UINT8;
            s.height = 24;
            sl_dataset *ds = sl_map_image(images(5, NULL), &s, 2);
            sl_iterator *it = sl_iterator_create(ds, NULL);
            sl_element *el;
            int n = 0;
            while (sl_next(it, &el) == 0) {
                const sl_tensor *t = sl_element_tensor(el, 0);
                assert_int_equal(sl_tensor_ndim(t), 3);
                const int64_t *sh = sl_tensor_shape(t);
                if (layout == SL_LAYOUT_HWC)
                    assert_true(sh[0] == 24 && sh[1] == 32 && sh[2] == 3);
                else
                    assert_true(sh[0] == 3 && sh[1] == 24 && sh[2] == 32);
                assert_int_equal(sl_tensor_dtype(t), f32 ? SL_FLOAT32 : SL_UINT8);
                assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 1)), n);
                size_t len;
                const char *p = sl_tensor_string(sl_element_tensor(el, 2), 0, &len);
                assert_non_null(p);
                assert_true(len > 5 && !memcmp(p, "/data/", 6));
                n++;
                sl_element_release(el);
            }
            assert_int_equal(n, 5);
            sl_iterator_free(it);
            sl_dataset_release(ds);
        }
}

/* With no randomness (centre crop) the fused batch equals map then batch
 * done separately (map_image followed by a map that hides it from batch). */
static int pass(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static void test_fused_equals_unfused(void **state)
{
    (void)state;
    for (int drop = 0; drop < 2; drop++) {
        sl_image_spec s = spec_of(SL_CROP_CENTER, 40);
        sl_dataset *fused = sl_batch(sl_map_image(images(21, NULL), &s, SL_AUTOTUNE), 8,
                                     drop ? SL_DROP_REMAINDER : 0);
        sl_dataset *plain = sl_batch(sl_map(sl_map_image(images(21, NULL), &s, 2), "pass",
                                            pass, NULL, 1, 0),
                                     8, drop ? SL_DROP_REMAINDER : 0);
        assert_string_equal(sl_dataset_name(fused), "map_image_batch");
        assert_int_equal(sl_dataset_cardinality(fused), drop ? 2 : 3);
        blob a, b;
        assert_int_equal(run(fused, 2, SL_ERRORS_FAIL, &a, NULL), SL_EOF);
        assert_int_equal(run(plain, 2, SL_ERRORS_FAIL, &b, NULL), SL_EOF);
        assert_int_equal(a.batches, drop ? 2 : 3);
        assert_int_equal(a.elements, drop ? 16 : 21);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.p, b.p, a.n);
        free(a.p);
        free(b.p);
        sl_dataset_release(fused);
        sl_dataset_release(plain);
    }
}

static int count_pulls(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el;
    atomic_fetch_add((atomic_int *)user, 1);
    return 1;
}

/* A source that cannot know its size (shards), stated with
 * assert_cardinality: a batch that drops its remainder pulls and decodes
 * none of it, as over a source of known size. Unstated, all is pulled. */
static void test_stated_size_skips_dropped_tail(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 32);
    blob out[2];
    for (int stated = 0; stated < 2; stated++) {
        atomic_int pulls = 0;
        sl_element *els[21];
        for (int i = 0; i < 21; i++)
            els[i] = image_element(i, false);
        sl_dataset *ds = sl_filter(tu_elements(els, 21, SL_UNKNOWN), "count", count_pulls, &pulls);
        if (stated)
            ds = sl_assert_cardinality(ds, 21);
        ds = sl_batch(sl_map_image(ds, &s, SL_AUTOTUNE), 8, SL_DROP_REMAINDER);
        assert_non_null(ds);
        assert_string_equal(sl_dataset_name(ds), "map_image_batch");
        assert_int_equal(sl_dataset_cardinality(ds), stated ? 2 : SL_UNKNOWN);
        assert_int_equal(run(ds, 2, SL_ERRORS_FAIL, &out[stated], NULL), SL_EOF);
        assert_int_equal(out[stated].batches, 2);
        assert_int_equal(out[stated].elements, 16);
        assert_int_equal(atomic_load(&pulls), stated ? 16 : 21);
        sl_dataset_release(ds);
    }
    assert_int_equal(out[0].n, out[1].n);
    assert_memory_equal(out[0].p, out[1].p, out[0].n);
    free(out[0].p);
    free(out[1].p);
}

static void test_train_deterministic(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 48);
    sl_dataset *ds = sl_batch(sl_map_image(images(30, NULL), &s, SL_AUTOTUNE), 4, 0);
    blob ref;
    assert_int_equal(run(ds, 1, SL_ERRORS_FAIL, &ref, NULL), SL_EOF);
    int threads[] = {2, 8, 2};
    for (int k = 0; k < 3; k++) {
        blob b;
        assert_int_equal(run(ds, threads[k], SL_ERRORS_FAIL, &b, NULL), SL_EOF);
        assert_int_equal(b.n, ref.n);
        assert_memory_equal(b.p, ref.p, b.n);
        free(b.p);
    }
    free(ref.p);
    sl_dataset_release(ds);
}

/* Bad files among good ones, under skip: every batch but the last is full,
 * and the output is exactly that of the good files alone. */
static void check_holes(int n, int batch, int every, int offset, unsigned flags)
{
    bool *bad = calloc((size_t)n, 1);
    sl_element **good = malloc((size_t)n * sizeof *good);
    int ngood = 0;
    for (int i = 0; i < n; i++) {
        bad[i] = (i % every) == offset;
        if (!bad[i])
            good[ngood++] = image_element(i, false);
    }
    sl_image_spec s = spec_of(SL_CROP_CENTER, 16);
    sl_dataset *ds = sl_batch(sl_map_image(images(n, bad), &s, 3), batch, flags);
    sl_dataset *ref = sl_batch(sl_map_image(tu_elements(good, ngood, -3), &s, 3), batch, flags);
    blob a, b;
    assert_int_equal(run(ds, 2, SL_ERRORS_SKIP, &a, NULL), SL_EOF);
    assert_int_equal(run(ref, 2, SL_ERRORS_FAIL, &b, NULL), SL_EOF);
    bool drop = flags & SL_DROP_REMAINDER;
    assert_int_equal(a.elements, drop ? ngood / batch * batch : ngood);
    assert_int_equal(a.batches, drop ? ngood / batch : (ngood + batch - 1) / batch);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    free(a.p);
    free(b.p);
    free(bad);
    free(good);
    sl_dataset_release(ds);
    sl_dataset_release(ref);
}

static void test_holes_realign(void **state)
{
    (void)state;
    for (unsigned flags = 0; flags <= SL_DROP_REMAINDER; flags += SL_DROP_REMAINDER) {
        check_holes(40, 8, 7, 3, flags);  /* a hole every 7 images */
        check_holes(40, 8, 40, 0, flags); /* the very first image */
        check_holes(33, 4, 2, 1, flags);  /* every other image */
        check_holes(24, 8, 1, 0, flags);  /* all bad: nothing comes out */
        check_holes(37, 8, 9, 8, flags);  /* the tail decides the last batch */
    }
}

static void test_error_names_file(void **state)
{
    (void)state;
    bool bad[10] = {[6] = true};
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 16);
    sl_dataset *ds = sl_batch(sl_map_image(images(10, bad), &s, 2), 4, 0);
    blob b;
    char msg[1024];
    int rc = run(ds, 2, SL_ERRORS_FAIL, &b, msg);
    assert_true(rc < 0);
    assert_int_equal(b.batches, 1); /* the batch before the bad file */
    assert_non_null(strstr(msg, "/data/img006.jpg"));
    assert_non_null(strstr(msg, "map_image"));
    free(b.p);
    sl_dataset_release(ds);

    /* unfused: the same message through the map */
    ds = sl_map_image(images(10, bad), &s, 2);
    rc = run(ds, 2, SL_ERRORS_FAIL, &b, msg);
    assert_true(rc < 0);
    assert_non_null(strstr(msg, "/data/img006.jpg"));
    free(b.p);
    sl_dataset_release(ds);
}

static void test_bad_spec(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_CENTER, 16);
    s.struct_size = 8;
    assert_null(sl_map_image(sl_range(0, 1, 1), &s, 1));
    assert_non_null(strstr(sl_last_error(), "struct_size"));
    s = spec_of(SL_CROP_CENTER, 16);
    s.dtype = SL_INT32;
    assert_null(sl_map_image(sl_range(0, 1, 1), &s, 1));
    s = spec_of(SL_CROP_CENTER, 16);
    s.scale_min = 2;
    assert_null(sl_map_image(sl_range(0, 1, 1), &s, 1));
    assert_int_equal(SL_IMAGE_SPEC_INIT(&s, 9, 16), SL_EINVAL);
    assert_int_equal(SL_IMAGE_SPEC_INIT(&s, SL_CROP_CENTER, 0), SL_EINVAL);
    assert_null(sl_map_image(NULL, &s, 1));
}

/* Struct versioning: a program built against an older header passes a
 * smaller spec (the first layout ends before fast_upsample), one built
 * against a newer header a larger one. Init writes only the caller's
 * bytes; map_image reads either, with defaults for what the older lacks
 * and a refusal for fields it does not know that are set. */
#define OLD_SPEC offsetof(sl_image_spec, fast_upsample)
#define NEW_SPEC (sizeof(sl_image_spec) + 24)

static void test_spec_sizes(void **state)
{
    (void)state;
    sl_image_spec ref = spec_of(SL_CROP_RANDOM_RESIZED, 40);
    sl_dataset *ds = sl_batch(sl_map_image(images(8, NULL), &ref, 2), 4, 0);
    blob want;
    assert_int_equal(run(ds, 2, SL_ERRORS_FAIL, &want, NULL), SL_EOF);
    sl_dataset_release(ds);

    /* older: init leaves the bytes past its struct alone */
    _Alignas(sl_image_spec) unsigned char old[OLD_SPEC + 32];
    memset(old, 0xa5, sizeof old);
    assert_int_equal(sl_image_spec_init((sl_image_spec *)old, OLD_SPEC, SL_CROP_RANDOM_RESIZED,
                                        40), 0);
    for (size_t i = OLD_SPEC; i < sizeof old; i++)
        assert_int_equal(old[i], 0xa5);
    size_t stamped;
    memcpy(&stamped, old, sizeof stamped);
    assert_int_equal(stamped, OLD_SPEC);
    memset(old + OLD_SPEC, 0xff, sizeof old - OLD_SPEC); /* beyond it: not read */
    /* newer: its unknown tail comes zeroed */
    _Alignas(sl_image_spec) unsigned char newer[NEW_SPEC];
    memset(newer, 0xa5, sizeof newer);
    assert_int_equal(sl_image_spec_init((sl_image_spec *)newer, NEW_SPEC,
                                        SL_CROP_RANDOM_RESIZED, 40), 0);
    for (size_t i = sizeof(sl_image_spec); i < NEW_SPEC; i++)
        assert_int_equal(newer[i], 0);
    const sl_image_spec *specs[2] = {(const sl_image_spec *)old, (const sl_image_spec *)newer};
    for (int k = 0; k < 2; k++) {
        ds = sl_batch(sl_map_image(images(8, NULL), specs[k], 2), 4, 0);
        assert_non_null(ds);
        blob got;
        assert_int_equal(run(ds, 2, SL_ERRORS_FAIL, &got, NULL), SL_EOF);
        assert_int_equal(got.n, want.n);
        assert_memory_equal(got.p, want.p, want.n);
        free(got.p);
        sl_dataset_release(ds);
    }
    free(want.p);
    /* a newer program that sets a field this library does not know */
    newer[NEW_SPEC - 1] = 1;
    assert_null(sl_map_image(sl_range(0, 1, 1), (const sl_image_spec *)newer, 1));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "does not know"));
    /* smaller than any layout, or a size no struct has (never initialised) */
    assert_int_equal(sl_image_spec_init((sl_image_spec *)old, 8, SL_CROP_CENTER, 16), SL_EINVAL);
    sl_image_spec junk = spec_of(SL_CROP_CENTER, 16);
    junk.struct_size = (size_t)1 << 40;
    assert_null(sl_map_image(sl_range(0, 1, 1), &junk, 1));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
}

/* Views: one tensor per view in the image's place; the C side's checks
 * of views and of the augmentation fields. */
static void test_views(void **state)
{
    (void)state;
    sl_image_spec v[2] = {spec_of(SL_CROP_CENTER, 16), spec_of(SL_CROP_RANDOM_RESIZED, 8)};
    v[1].dtype = SL_FLOAT32;
    v[1].color_jitter_prob = 1;
    v[1].brightness[0] = 0.5f, v[1].brightness[1] = 1.5f;
    v[1].erasing_prob = 0.5f;
    sl_dataset *ds = sl_map_image_views(images(4, NULL), v, 2, 2);
    assert_non_null(ds);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    int n = 0;
    while (sl_next(it, &el) == 0) {
        assert_int_equal(sl_element_size(el), 4); /* two views, label, path */
        assert_int_equal(sl_tensor_shape(sl_element_tensor(el, 0))[0], 16);
        assert_int_equal(sl_tensor_shape(sl_element_tensor(el, 1))[1], 8);
        assert_int_equal(sl_tensor_dtype(sl_element_tensor(el, 1)), SL_FLOAT32);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 2)), n);
        n++;
        sl_element_release(el);
    }
    assert_int_equal(n, 4);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    assert_null(sl_map_image_views(sl_range(0, 1, 1), v, 0, 1));
    v[1].image_index = 1;
    assert_null(sl_map_image_views(images(1, NULL), v, 2, 1));
    assert_non_null(strstr(sl_last_error(), "image_index"));
    v[1].image_index = 0;
    v[1].blur_prob = 0.5f;
    v[1].blur_kernel = 4;
    assert_null(sl_map_image_views(images(1, NULL), v, 2, 1));
    assert_non_null(strstr(sl_last_error(), "view 1"));
    sl_image_spec s = spec_of(SL_CROP_CENTER, 16);
    s.auto_augment = 9;
    assert_null(sl_map_image(images(1, NULL), &s, 1));
    s = spec_of(SL_CROP_CENTER, 16);
    s.hue[1] = 0.7f;
    assert_null(sl_map_image(images(1, NULL), &s, 1));
    assert_non_null(strstr(sl_last_error(), "hue"));
}

/* Freed with batches in flight; with parallelism 1 or 2 on two workers a
 * task is nearly always staged (inputs pulled, waiting for a worker), so
 * its inputs must be released too (ASan checks). */
static void test_cancel_mid_batch(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 64);
    static const int par[] = {4, 1, 2};
    for (int p = 0; p < 3; p++) {
        sl_dataset *ds =
            sl_batch(sl_map_image(sl_repeat(images(12, NULL), -1), &s, par[p]), 16, 0);
        for (int k = 0; k < 3; k++) {
            sl_options *o = tu_opts(2, 0);
            sl_iterator *it = sl_iterator_create(ds, o);
            sl_element *el;
            for (int i = 0; i < k; i++) {
                assert_int_equal(sl_next(it, &el), 0);
                sl_element_release(el);
            }
            sl_iterator_free(it);
            sl_options_free(o);
        }
        sl_dataset_release(ds);
    }
}

/* An image and its mask (the same JPEG twice: tensor 1 decoded raw,
 * nearest): the same window and flip, so the two outputs agree within
 * the texture the image's filter smooths; far apart were the crops
 * drawn apart (the gradients span 150 levels). A batch after it stacks
 * both (no fused node). */
static void test_mask_paired(void **state)
{
    (void)state;
    enum { N = 12, S = 24 };
    sl_element *els[N];
    for (int i = 0; i < N; i++) {
        sl_element *im = image_element(i, false);
        const sl_tensor *t = sl_element_tensor(im, 0);
        els[i] = sl_element_create(2);
        for (int k = 0; k < 2; k++) {
            int64_t n = (int64_t)sl_tensor_nbytes(t);
            memcpy(sl_element_add_tensor(els[i], SL_UINT8, 1, &n), sl_tensor_data(t), (size_t)n);
        }
        sl_element_release(im);
    }
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, S);
    s.with_mask = 1, s.mask_index = 1, s.mask_channels = 3, s.mask_dtype = SL_UINT8;
    sl_dataset *ds = sl_batch(sl_map_image(tu_elements(els, N, -3), &s, 2), 4, 0);
    assert_non_null(ds);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    int batches = 0;
    while (sl_next(it, &el) == 0) {
        const sl_tensor *img = sl_element_tensor(el, 0), *mask = sl_element_tensor(el, 1);
        assert_int_equal(sl_tensor_ndim(mask), 4);
        assert_int_equal(sl_tensor_shape(mask)[0], 4);
        assert_int_equal(sl_tensor_nbytes(mask), sl_tensor_nbytes(img));
        const uint8_t *a = sl_tensor_data(img), *b = sl_tensor_data(mask);
        for (int k = 0; k < 4; k++) {
            double d = 0;
            for (int i = 0; i < S * S * 3; i++)
                d += abs(a[k * S * S * 3 + i] - b[k * S * S * 3 + i]);
            assert_true(d / (S * S * 3) < 8);
        }
        batches++;
        sl_element_release(el);
    }
    assert_int_equal(batches, N / 4);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    /* refused: the image's own tensor, no channels, with views */
    s.mask_index = 0;
    assert_null(sl_map_image(images(1, NULL), &s, 1));
    assert_non_null(strstr(sl_last_error(), "mask"));
    s.mask_index = 1, s.mask_channels = 0;
    assert_null(sl_map_image(images(1, NULL), &s, 1));
    s.mask_channels = 1;
    assert_null(sl_map_image_views(images(1, NULL), &s, 1, 1));
    assert_non_null(strstr(sl_last_error(), "mask"));
}

/* Decoded pixels in: uint8 [H, W, C]. At the image's own size ("resize",
 * no crop) the output is the pixels themselves, gray replicated and
 * alpha dropped; raw mode keeps every channel; fused with batch too. A
 * bad shape is an element error. */
static void test_decoded_pixels(void **state)
{
    (void)state;
    const int w = 40, h = 30;
    for (int c = 1; c <= 4; c++) {
        sl_element *el = sl_element_create(1);
        int64_t shape[3] = {h, w, c};
        uint8_t *p = sl_element_add_tensor(el, SL_UINT8, 3, shape);
        for (int i = 0; i < w * h * c; i++)
            p[i] = (uint8_t)(tu_mix((uint64_t)i) >> 11);
        for (int raw = 0; raw < 2; raw++)
            for (int fused = 0; fused < 2; fused++) {
                sl_image_spec s = spec_of(SL_CROP_RESIZE, w);
                s.height = h;
                if (raw) {
                    s.decode = SL_DECODE_RAW;
                    s.channels = c;
                }
                sl_dataset *ds = sl_map_image(tu_elements((sl_element *[]){sl_element_retain(el)},
                                                          1, 1), &s, 1);
                if (fused)
                    ds = sl_batch(ds, 1, 0);
                sl_iterator *it = sl_iterator_create(ds, NULL);
                sl_element *out;
                assert_int_equal(sl_next(it, &out), 0);
                const sl_tensor *t = sl_element_tensor(out, 0);
                const int64_t *sh = sl_tensor_shape(t) + fused;
                int oc = raw ? c : 3;
                assert_true(sh[0] == h && sh[1] == w && sh[2] == oc);
                const uint8_t *q = sl_tensor_data(t);
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        for (int k = 0; k < oc; k++) {
                            int from = raw ? k : c >= 3 ? k : 0; /* gray replicated */
                            uint8_t want = p[(y * w + x) * c + from];
                            if (q[(y * w + x) * oc + k] != want)
                                fail_msg("%d channels, raw %d: (%d, %d, %d) is %d, not %d", c,
                                         raw, x, y, k, q[(y * w + x) * oc + k], want);
                        }
                sl_element_release(out);
                assert_int_equal(sl_next(it, &out), SL_EOF);
                sl_iterator_free(it);
                sl_dataset_release(ds);
            }
        sl_element_release(el);
    }
    /* [H, W, 5]: no image */
    sl_element *bad = sl_element_create(1);
    int64_t shape[3] = {4, 4, 5};
    memset(sl_element_add_tensor(bad, SL_UINT8, 3, shape), 0, 80);
    sl_image_spec s = spec_of(SL_CROP_RESIZE, 8);
    sl_dataset *ds = sl_map_image(tu_elements(&bad, 1, 1), &s, 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *out;
    assert_int_equal(sl_next(it, &out), SL_ESHAPE);
    assert_non_null(strstr(sl_iterator_errmsg(it), "[H, W, C]"));
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_fused_equals_unfused),
        cmocka_unit_test(test_stated_size_skips_dropped_tail),
        cmocka_unit_test(test_train_deterministic),
        cmocka_unit_test(test_holes_realign),
        cmocka_unit_test(test_error_names_file),
        cmocka_unit_test(test_bad_spec),
        cmocka_unit_test(test_spec_sizes),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_mask_paired),
        cmocka_unit_test(test_cancel_mid_batch),
        cmocka_unit_test(test_decoded_pixels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
