/* map_video from C: decoding only what a clip needs (frames decoded
 * counted on long-GOP files), the same clips on any thread count, bad
 * files as bounded element errors, the spec's checks, and a build without
 * FFmpeg saying so. The videos are made by Debian's ffmpeg (skipped
 * without it); tests/python/test_video.py holds the comparisons with
 * PyAV. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "vision/map_video.h"

static char dir[256];
static bool have_ffmpeg;

/* ffmpeg making a 160x120 pan over a gradient, `seconds` long at 25 fps
 * with the given x264 GOP and B-frames. */
static bool make_video(const char *name, double seconds, int gop, int bframes)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "ffmpeg -hide_banner -loglevel error -y -f lavfi -i "
             "\"testsrc2=size=160x120:rate=25:duration=%g\" -c:v libx264 -preset veryfast "
             "-pix_fmt yuv420p -bf %d -x264-params keyint=%d:min-keyint=%d:scenecut=0 "
             "%s/%s",
             seconds, bframes, gop, gop, dir, name);
    return system(cmd) == 0;
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
#ifdef SLUICE_NO_FFMPEG
    have_ffmpeg = false; /* nothing to decode them with: those tests skip */
#else
    have_ffmpeg = system("ffmpeg -hide_banner -version > /dev/null 2>&1") == 0;
#endif
    if (have_ffmpeg)
        have_ffmpeg = make_video("gop250.mp4", 10, 250, 3) && make_video("gop25.mp4", 10, 25, 2);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(dir);
    return 0;
}

static sl_dataset *paths(const char *const *names, int n)
{
    sl_element *els[16];
    for (int i = 0; i < n; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        els[i] = tu_el_str(p);
    }
    return tu_elements(els, n, n);
}

static sl_dataset *clips(sl_dataset *in, int frames, int stride, int sampler, int size)
{
    sl_video_spec v;
    sl_image_spec im;
    assert_int_equal(SL_VIDEO_SPEC_INIT(&v), 0);
    assert_int_equal(SL_IMAGE_SPEC_INIT(&im, SL_CROP_RESIZE, size), 0);
    v.frames = frames;
    v.stride = stride;
    v.clip_sampler = sampler;
    v.with_timestamps = 1;
    return sl_map_video(in, &v, &im, 1);
}

/* Frames decoded for one pass over ds (one thread). */
static long long decoded_by(sl_dataset *ds, double *first_time)
{
    sl_options *o = tu_opts(1, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    long long before = sl__video_frames_decoded();
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        if (first_time)
            *first_time = ((const double *)sl_tensor_data(sl_element_tensor(el, 1)))[0];
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        fail_msg("%s", sl_last_error());
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return sl__video_frames_decoded() - before;
}

static void test_long_gop_decodes_only_to_the_clip(void **state)
{
    (void)state;
    if (!have_ffmpeg)
        skip();
    /* one keyframe in 250 frames: the clip in the middle (frames 123-129
     * or so) needs every reference from frame 0 on, never the 120 after
     * it, and the B-frames nothing references are skipped */
    const char *name[] = {"gop250.mp4"};
    double t = 0;
    long long n = decoded_by(clips(paths(name, 1), 4, 2, SL_CLIP_CENTER, 32), &t);
    int last = (int)(t * 25) + 6;
    print_message("gop 250, clip from %.2f s: %lld frames decoded (clip ends at frame %d)\n", t,
                  n, last);
    assert_true(t > 4.5 && t < 5.5);
    assert_true(n >= 4);
    assert_true(n <= last + 4);
    assert_true(n < last * 3 / 4); /* skipped B-frames */
    /* a keyframe each second: from the one before the clip, not from 0 */
    const char *name25[] = {"gop25.mp4"};
    n = decoded_by(clips(paths(name25, 1), 4, 2, SL_CLIP_CENTER, 32), &t);
    print_message("gop 25, clip from %.2f s: %lld frames decoded\n", t, n);
    assert_true(n <= 25 + 8 + 4);
    /* the whole video for a clip that spans it: every frame once */
    n = decoded_by(clips(paths(name25, 1), 250, 1, SL_CLIP_UNIFORM, 16), NULL);
    assert_true(n <= 250 && n >= 200);
}

static void test_clips_far_apart_seek_between(void **state)
{
    (void)state;
    if (!have_ffmpeg)
        skip();
    /* 4 clips of 2 frames spread over 10 s, keyframes each second: about
     * a GOP per clip, not the whole file */
    sl_video_spec v;
    sl_image_spec im;
    SL_VIDEO_SPEC_INIT(&v);
    SL_IMAGE_SPEC_INIT(&im, SL_CROP_RESIZE, 16);
    v.frames = 2;
    v.num_clips = 4;
    v.clip_sampler = SL_CLIP_CENTER;
    const char *name[] = {"gop25.mp4"};
    long long n = decoded_by(sl_map_video(paths(name, 1), &v, &im, 1), NULL);
    print_message("4 clips over 10 s, gop 25: %lld frames decoded\n", n);
    assert_true(n <= 4 * (25 + 4));
}

static void test_same_clips_on_any_thread_count(void **state)
{
    (void)state;
    if (!have_ffmpeg)
        skip();
    const char *names[] = {"gop25.mp4", "gop250.mp4", "gop25.mp4", "gop250.mp4"};
    sl_video_spec v;
    sl_image_spec im;
    SL_VIDEO_SPEC_INIT(&v);
    SL_IMAGE_SPEC_INIT(&im, SL_CROP_RANDOM_RESIZED, 24);
    v.frames = 3;
    v.stride = 4;
    v.num_clips = 2;
    uint64_t sums[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        sl_dataset *ds = sl_map_video(paths(names, 4), &v, &im, SL_AUTOTUNE);
        sl_options *o = tu_opts(k ? 2 : 1, 5);
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        int count = 0;
        while (sl_next(it, &el) == 0) {
            const sl_tensor *t = sl_element_tensor(el, 0);
            tu_check_shape(t, 5, (int64_t[]){2, 3, 24, 24, 3});
            const uint8_t *p = sl_tensor_data(t);
            for (size_t i = 0; i < sl_tensor_nbytes(t); i++)
                sums[k] = sums[k] * 1099511628211ull + p[i] + (uint64_t)count;
            sl_element_release(el);
            count++;
        }
        assert_int_equal(count, 4);
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
    assert_true(sums[0] == sums[1]);
}

/* The file reads a map_video worker waits for are the node's I/O, apart
 * from its work: read_wait_ns and bytes_read in the statistics. */
static void test_reads_count_as_io(void **state)
{
    (void)state;
    if (!have_ffmpeg)
        skip();
    const char *names[] = {"gop25.mp4", "gop250.mp4"};
    sl_dataset *ds = clips(paths(names, 2), 2, 1, SL_CLIP_CENTER, 16);
    sl_options *o = tu_opts(1, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    while (sl_next(it, &el) == 0)
        sl_element_release(el);
    sl_stats *st = sl_iterator_stats(it);
    const char *json = sl_stats_json(st);
    const char *node = strstr(json, "\"map_video");
    assert_non_null(node);
    const char *wait = strstr(node, "\"read_wait_ns\":"), *bytes = strstr(node, "\"bytes_read\":");
    assert_non_null(wait);
    assert_non_null(bytes);
    long long w = atoll(wait + strlen("\"read_wait_ns\":"));
    long long b = atoll(bytes + strlen("\"bytes_read\":"));
    print_message("map_video: read_wait_ns %lld, bytes_read %lld\n", w, b);
    assert_true(w > 0);
    assert_true(b > 1000);
    sl_stats_free(st);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_bad_files_fail_fast_and_named(void **state)
{
    (void)state;
    char p[512];
    /* empty, text, and a playlist pointing at a local file */
    const char *body[] = {"", "just some text, no video\n",
                          "#EXTM3U\n#EXTINF:10,\nfile:///etc/hostname\n#EXT-X-ENDLIST\n"};
    const char *names[] = {"empty.mp4", "text.mkv", "list.m3u8"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        tu_write_file(p, body[i], strlen(body[i]));
        sl_dataset *ds = clips(paths(&names[i], 1), 2, 1, SL_CLIP_RANDOM, 16);
        int64_t t0 = tu_now_ns();
        char err[1024] = "";
        int64_t *vals;
        size_t n;
        int rc = tu_collect(ds, NULL, &vals, &n, err);
        assert_true(rc < 0);
        free(vals);
        assert_non_null(strstr(err, names[i]));
#ifdef SLUICE_NO_FFMPEG
        assert_int_equal(rc, SL_EUNSUPPORTED);
        assert_non_null(strstr(err, "SLUICE_WITH_FFMPEG"));
#endif
        assert_true(tu_now_ns() - t0 < 5000000000ll);
        sl_dataset_release(ds);
    }
    /* missing file */
    const char *gone[] = {"no-such.mp4"};
    sl_dataset *ds = clips(paths(gone, 1), 2, 1, SL_CLIP_RANDOM, 16);
    char err[1024] = "";
    int64_t *vals;
    size_t n;
    assert_true(tu_collect(ds, NULL, &vals, &n, err) < 0);
    free(vals);
    assert_non_null(strstr(err, "no-such.mp4"));
    sl_dataset_release(ds);
}

static void test_spec_checks(void **state)
{
    (void)state;
    sl_video_spec v;
    sl_image_spec im;
    SL_VIDEO_SPEC_INIT(&v);
    SL_IMAGE_SPEC_INIT(&im, SL_CROP_RESIZE, 16);
    assert_int_equal(v.frames, 8);
    assert_int_equal(v.stride, 1);
    assert_int_equal(v.num_clips, 1);
    const char *name[] = {"x.mp4"};
    struct {
        int field, value;
    } bad[] = {{0, 0}, {1, 0}, {2, 9}, {3, 0}, {4, 2000}, {5, 7}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_video_spec w = v;
        int *f[] = {&w.frames, &w.stride, &w.clip_sampler, &w.num_clips, &w.frames, &w.short_clips};
        *f[bad[i].field] = bad[i].value;
        assert_null(sl_map_video(paths(name, 1), &w, &im, 1));
        assert_int_equal(sl_last_error_code(), SL_EINVAL);
    }
    sl_video_spec w = v;
    w.fps = -1;
    assert_null(sl_map_video(paths(name, 1), &w, &im, 1));
    sl_image_spec raw = im;
    raw.decode = SL_DECODE_RAW;
    raw.channels = 3;
    assert_null(sl_map_video(paths(name, 1), &v, &raw, 1));
    assert_non_null(strstr(sl_last_error(), "luma"));
    /* a newer caller's larger struct with unknown fields set: refused */
    struct {
        sl_video_spec v;
        int more;
    } big = {.v = v, .more = 1};
    big.v.struct_size = sizeof big;
    assert_null(sl_map_video(paths(name, 1), &big.v, &im, 1));
    assert_int_equal(sl_last_error_code(), SL_EUNSUPPORTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_gop_decodes_only_to_the_clip),
        cmocka_unit_test(test_clips_far_apart_seek_between),
        cmocka_unit_test(test_same_clips_on_any_thread_count),
        cmocka_unit_test(test_reads_count_as_io),
        cmocka_unit_test(test_bad_files_fail_fast_and_named),
        cmocka_unit_test(test_spec_checks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
