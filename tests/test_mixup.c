/* mixup_cutmix: every batch against a model of timm's Mixup (the lam each
 * batch drew is read back from its soft targets), uint8 HWC and float32
 * CHW; the draw statistics over many batches (Beta's mean and variance,
 * prob, switch_prob); the same output on any thread count and new draws
 * each epoch; batches another node still holds are mixed in a copy; bad
 * batches under the error policies. */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define B 6
#define H 10
#define W 12
#define NCLS 5

/* Batch k: images [B, H, W, 3] (or [B, 3, H, W]) of pseudo-random bytes
 * (or floats), labels k + i mod NCLS. */
static sl_element *make_batch(int k, bool f32, bool chw)
{
    sl_element *el = sl_element_create(3);
    int64_t shape[4] = {B, H, W, 3};
    if (chw) {
        shape[1] = 3;
        shape[2] = H;
        shape[3] = W;
    }
    size_t n = (size_t)B * H * W * 3;
    void *p = sl_element_add_tensor(el, f32 ? SL_FLOAT32 : SL_UINT8, 4, shape);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_mix((uint64_t)k * 1000003u + i);
        if (f32)
            ((float *)p)[i] = (float)(r % 1000) / 100.0f - 5.0f;
        else
            ((uint8_t *)p)[i] = (uint8_t)r;
    }
    int64_t lshape[1] = {B};
    int64_t *y = sl_element_add_tensor(el, SL_INT64, 1, lshape);
    for (int i = 0; i < B; i++)
        y[i] = (k + i) % NCLS;
    sl_element_add_int64(el, k); /* a tensor passed through */
    return el;
}

static sl_dataset *batches(int n, bool f32, bool chw)
{
    sl_element **els = malloc(sizeof *els * (size_t)n);
    for (int k = 0; k < n; k++)
        els[k] = make_batch(k, f32, chw);
    sl_dataset *ds = tu_elements(els, n, -3);
    free(els);
    return ds;
}

static sl_mixup_spec spec_of(double mixup, double cutmix, double prob, double smoothing)
{
    sl_mixup_spec s;
    assert_int_equal(sl_mixup_spec_init(&s, sizeof s, NCLS), 0);
    s.mixup_alpha = mixup;
    s.cutmix_alpha = cutmix;
    s.prob = prob;
    s.label_smoothing = smoothing;
    return s;
}

typedef struct stats {
    int batches, mixed, cut;
    double sum, sum2; /* of lam over mixed batches */
} stats;

/* One output batch against the model: lam from the targets of a pair of
 * different labels, then every pixel as MixUp or CutMix would make it. */
static void check_batch(const sl_element *out, int k, const sl_mixup_spec *s, bool f32, bool chw,
                        stats *st)
{
    sl_element *in = make_batch(k, f32, chw);
    const sl_tensor *t = sl_element_tensor(out, 1);
    int64_t tshape[2] = {B, NCLS};
    tu_check_shape(t, 2, tshape);
    assert_int_equal(sl_tensor_dtype(t), SL_FLOAT32);
    const float *soft = sl_tensor_data(t);
    const int64_t *y = sl_tensor_data(sl_element_tensor(in, 1));
    double off = s->label_smoothing / NCLS, on = 1.0 - s->label_smoothing;
    /* pair (0, B-1) has labels k and k+5: the same class mod 5; (1, B-2) differ */
    double lam = (soft[1 * NCLS + y[1]] - off) / on;
    for (int i = 0; i < B; i++) {
        double rowsum = 0;
        for (int c = 0; c < NCLS; c++) {
            double want = off + on * (lam * (c == y[i]) + (1 - lam) * (c == y[B - 1 - i]));
            assert_true(fabs(soft[i * NCLS + c] - want) < 1e-5);
            rowsum += soft[i * NCLS + c];
        }
        assert_true(fabs(rowsum - 1.0) < 1e-5);
    }
    size_t n = (size_t)H * W * 3;
    const void *xo = sl_tensor_data(sl_element_tensor(out, 0));
    const void *xi = sl_tensor_data(sl_element_tensor(in, 0));
    int from_b = 0, mixed_px = 0;
    for (int i = 0; i < B; i++) {
        int j = B - 1 - i, cut_here = 0;
        for (size_t p = 0; p < n; p++) {
            double a, b, o;
            if (f32) {
                a = ((const float *)xi)[i * n + p];
                b = ((const float *)xi)[j * n + p];
                o = ((const float *)xo)[i * n + p];
            } else {
                a = ((const uint8_t *)xi)[i * n + p];
                b = ((const uint8_t *)xi)[j * n + p];
                o = ((const uint8_t *)xo)[i * n + p];
            }
            double m = a * lam + b * (1 - lam);
            bool as_mix = fabs(o - (f32 ? m : nearbyint(m))) <= (f32 ? 1e-4 : 1.0);
            bool as_a = o == a, as_b = o == b;
            assert_true(as_mix || as_a || as_b);
            if (as_b && !as_a && !as_mix)
                cut_here++;
            if (!as_a && !as_b)
                mixed_px++;
        }
        if (i == 1)
            from_b = cut_here;
    }
    /* the passed-through tensor */
    assert_int_equal(sl_tensor_int64(sl_element_tensor(out, 2)), k);
    st->batches++;
    if (lam < 1.0) {
        st->mixed++;
        st->sum += lam;
        st->sum2 += lam * lam;
    }
    if (from_b > 0 && mixed_px == 0) {
        /* CutMix: image 1 took 1 - lam of its pixels from image B-2 (those
         * equal in both count as its own) */
        st->cut++;
        assert_true((double)from_b <= (1 - lam) * (double)(H * W * 3) + 0.01);
    }
    sl_element_release(in);
}

static void run(sl_mixup_spec *s, int n, bool f32, bool chw, int threads, stats *st)
{
    sl_dataset *ds = sl_mixup_cutmix(batches(n, f32, chw), s);
    assert_non_null(ds);
    sl_options *o = tu_opts(threads, 11);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int k = 0;
    while (sl_next(it, &el) == 0) {
        check_batch(el, k++, s, f32, chw, st);
        sl_element_release(el);
    }
    assert_int_equal(k, n);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_mixup_model(void **state)
{
    (void)state;
    stats st = {0};
    sl_mixup_spec s = spec_of(0.2, 0, 1.0, 0.0);
    run(&s, 400, false, false, 2, &st);
    assert_int_equal(st.cut, 0);
    /* Beta(0.2, 0.2): mean 1/2, variance 1/(4 (2a + 1)) = 0.1786 */
    double mean = st.sum / st.mixed, var = st.sum2 / st.mixed - mean * mean;
    assert_true(fabs(mean - 0.5) < 0.05);
    assert_true(fabs(var - 0.1786) < 0.03);
    stats f = {0};
    s = spec_of(0.4, 0, 1.0, 0.1);
    s.layout = SL_LAYOUT_CHW;
    run(&s, 100, true, true, 2, &f);
    assert_int_equal(f.mixed, 100);
}

static void test_cutmix_model(void **state)
{
    (void)state;
    stats st = {0};
    sl_mixup_spec s = spec_of(0, 1.0, 1.0, 0.1);
    run(&s, 300, false, false, 1, &st);
    /* Beta(1, 1) is uniform; the clipped box makes lam larger: mean 0.5-0.7 */
    double mean = st.sum / st.mixed;
    assert_true(st.cut > 250);
    assert_true(mean > 0.45 && mean < 0.75);
    stats c = {0};
    s.layout = SL_LAYOUT_CHW;
    run(&s, 50, true, true, 1, &c);
    assert_true(c.cut > 40);
}

static void test_draw_statistics(void **state)
{
    (void)state;
    stats st = {0};
    sl_mixup_spec s = spec_of(0.2, 1.0, 0.5, 0.0);
    s.switch_prob = 0.3;
    run(&s, 1000, false, false, 2, &st);
    /* prob 0.5 of mixing at all; of those, 0.3 CutMix */
    assert_true(st.mixed > 440 && st.mixed < 560);
    double cut = (double)st.cut / st.mixed;
    assert_true(cut > 0.22 && cut < 0.38);
    /* prob 0: only the targets change (one-hot, smoothed) */
    stats none = {0};
    s = spec_of(0.2, 1.0, 0.0, 0.2);
    run(&s, 20, false, false, 1, &none);
    assert_int_equal(none.mixed, 0);
}

/* Hash of everything a pass gives. */
static uint64_t pass_hash(sl_dataset *ds, int threads, int64_t epoch)
{
    sl_options *o = tu_opts(threads, 5);
    sl_options_set(o, SL_OPT_EPOCH, epoch);
    sl_iterator *it = sl_iterator_create(ds, o);
    uint64_t h = 1469598103934665603ull;
    sl_element *el;
    while (sl_next(it, &el) == 0) {
        for (int i = 0; i < sl_element_size(el); i++) {
            const sl_tensor *t = sl_element_tensor(el, i);
            const unsigned char *p = sl_tensor_data(t);
            for (size_t k = 0; k < sl_tensor_nbytes(t); k++)
                h = (h ^ p[k]) * 1099511628211ull;
        }
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_options_free(o);
    return h;
}

static void test_determinism(void **state)
{
    (void)state;
    sl_mixup_spec s = spec_of(0.2, 1.0, 1.0, 0.1);
    /* a prefetch puts the mixing on another thread than the consumer */
    sl_dataset *ds = sl_prefetch(sl_mixup_cutmix(batches(40, false, false), &s), 3);
    uint64_t a = pass_hash(ds, 1, 0), b = pass_hash(ds, 4, 0), c = pass_hash(ds, 2, 1);
    assert_true(a == b);
    assert_true(a != c);
    sl_dataset_release(ds);
    s.flags = SL_SAME_EACH_EPOCH;
    ds = sl_mixup_cutmix(batches(40, false, false), &s);
    assert_true(pass_hash(ds, 1, 0) == pass_hash(ds, 2, 3));
    sl_dataset_release(ds);
}

/* A cache below keeps the batches: mixing must not write into them. */
static void test_shared_batches_are_copied(void **state)
{
    (void)state;
    sl_mixup_spec s = spec_of(0.2, 1.0, 1.0, 0.0);
    sl_dataset *cached = sl_cache(batches(10, false, false), NULL);
    sl_dataset *ds = sl_mixup_cutmix(sl_dataset_retain(cached), &s);
    uint64_t before = pass_hash(cached, 1, 0);
    stats st = {0};
    for (int e = 0; e < 3; e++) {
        sl_options *o = tu_opts(1, 11 + e);
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        int k = 0;
        while (sl_next(it, &el) == 0) {
            check_batch(el, k++, &s, false, false, &st);
            sl_element_release(el);
        }
        sl_iterator_free(it);
        sl_options_free(o);
    }
    assert_true(pass_hash(cached, 1, 0) == before);
    sl_dataset_release(ds);
    sl_dataset_release(cached);
}

static void test_bad_batches(void **state)
{
    (void)state;
    sl_mixup_spec s = spec_of(0.2, 1.0, 1.0, 0.0);
    s.num_classes = 3; /* labels reach 4 */
    sl_dataset *ds = sl_mixup_cutmix(batches(4, false, false), &s);
    int64_t *v;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, NULL, &v, &n, msg), SL_ERANGE);
    assert_non_null(strstr(msg, "mixup_cutmix"));
    assert_non_null(strstr(msg, "outside [0, 3)"));
    free(v);
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    assert_int_equal(tu_count(ds, o), 0);
    sl_options_free(o);
    sl_dataset_release(ds);
    /* not a batch of images */
    s = spec_of(0.2, 1.0, 1.0, 0.0);
    ds = sl_mixup_cutmix(sl_range(0, 3, 1), &s);
    assert_int_equal(tu_collect(ds, NULL, &v, &n, msg), SL_ESHAPE);
    free(v);
    sl_dataset_release(ds);
    /* bad specs */
    sl_mixup_spec bad = spec_of(-1, 1.0, 1.0, 0.0);
    assert_null(sl_mixup_cutmix(sl_range(0, 3, 1), &bad));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    bad = spec_of(0.2, 1.0, 1.5, 0.0);
    assert_null(sl_mixup_cutmix(sl_range(0, 3, 1), &bad));
    bad = spec_of(0.2, 1.0, 1.0, 0.0);
    bad.label_index = 0;
    assert_null(sl_mixup_cutmix(sl_range(0, 3, 1), &bad));
    assert_int_equal(sl_mixup_spec_init(&bad, 8, 3), SL_EINVAL);
    /* the structure: labels become float32 [B, num_classes] */
    s = spec_of(0.2, 1.0, 1.0, 0.0);
    sl_structure *st = sl_structure_parse("(uint8[?, 4, 4, 3], int64[?], int64[])");
    ds = sl_mixup_cutmix(sl_with_structure(batches(2, false, false), st), &s);
    sl_structure_release(st);
    char text[128];
    sl_structure_format(sl_dataset_structure(ds), text, sizeof text);
    assert_string_equal(text, "(uint8[?,4,4,3], float32[?,5], int64[])");
    sl_dataset_release(ds);
}

/* The same versioning rule as sl_image_spec's (core/versioned.h): a newer
 * program's larger struct works while its unknown bytes are zero and is
 * refused once one is set; a size no layout has is refused. */
static void test_spec_sizes(void **state)
{
    (void)state;
    enum { NEWER = sizeof(sl_mixup_spec) + 16 };
    _Alignas(sl_mixup_spec) unsigned char newer[NEWER];
    memset(newer, 0xa5, sizeof newer);
    assert_int_equal(sl_mixup_spec_init((sl_mixup_spec *)newer, NEWER, 5), 0);
    for (size_t i = sizeof(sl_mixup_spec); i < NEWER; i++)
        assert_int_equal(newer[i], 0);
    sl_mixup_spec *s = (sl_mixup_spec *)newer;
    s->mixup_alpha = 0.2, s->cutmix_alpha = 1.0, s->prob = 1.0, s->switch_prob = 0.0;
    s->seed = 7;
    sl_dataset *ds = sl_mixup_cutmix(batches(2, false, false), s);
    assert_non_null(ds);
    assert_int_equal(tu_count(ds, NULL), 2);
    sl_dataset_release(ds);
    newer[NEWER - 1] = 1;
    assert_null(sl_mixup_cutmix(batches(2, false, false), s));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "does not know"));
    /* too large to be any layout: an uninitialised struct */
    sl_mixup_spec junk = spec_of(0.2, 1.0, 1.0, 0.0);
    junk.struct_size = 5000;
    assert_null(sl_mixup_cutmix(sl_range(0, 3, 1), &junk));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    assert_int_equal(sl_mixup_spec_init(&junk, 5000, 3), SL_EINVAL);
    assert_null(sl_mixup_cutmix(sl_range(0, 3, 1), NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixup_model),    cmocka_unit_test(test_cutmix_model),
        cmocka_unit_test(test_draw_statistics), cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_shared_batches_are_copied), cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_spec_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
