/* map_audio from C, over WAV files the test writes itself: exact samples
 * where nothing is resampled, the clip's place, resampling and mixing,
 * zeros past a short file's end, mel features of a pure tone, the spec's
 * checks, bad files as named errors, and a build without FFmpeg saying
 * so. tests/python/test_audio.py compares the features with torchaudio. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static char dir[256];

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, unsigned v)
{
    put16(p, v & 0xffff), put16(p + 2, v >> 16);
}

/* A 16-bit PCM WAV of `channels` x n samples at `rate`: channel c at
 * sample i is sample(c, i). */
static void write_wav(const char *name, int rate, int channels, int n,
                      short (*sample)(int c, int i))
{
    size_t data = (size_t)n * channels * 2;
    unsigned char *w = malloc(44 + data);
    memcpy(w, "RIFF", 4);
    put32(w + 4, (unsigned)(36 + data));
    memcpy(w + 8, "WAVEfmt ", 8);
    put32(w + 16, 16);
    put16(w + 20, 1);
    put16(w + 22, (unsigned)channels);
    put32(w + 24, (unsigned)rate);
    put32(w + 28, (unsigned)(rate * channels * 2));
    put16(w + 32, (unsigned)(channels * 2));
    put16(w + 34, 16);
    memcpy(w + 36, "data", 4);
    put32(w + 40, (unsigned)data);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < channels; c++)
            put16(w + 44 + ((size_t)i * channels + c) * 2, (unsigned short)sample(c, i));
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    tu_write_file(p, w, 44 + data);
    free(w);
}

static short ramp(int c, int i)
{
    return (short)((i * 37 + c * 1000) % 20000 - 10000);
}

/* 440 Hz for half a second, then 1760 Hz, 2 s at 16 kHz; the right
 * channel silent. */
static short steps(int c, int i)
{
    double f = i < 8000 ? 440 : 1760;
    return c ? 0 : (short)lround(12000 * sin(2 * M_PI * f * i / 16000.0));
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
    write_wav("ramp.wav", 16000, 1, 12345, ramp);
    write_wav("steps.wav", 16000, 2, 32000, steps);
    char p[512];
    snprintf(p, sizeof p, "%s/junk.wav", dir);
    tu_write_file(p, "RIFF\0\0\0\0WAVEjunkjunkjunkjunk", 28);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(dir);
    return 0;
}

static sl_dataset *one(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    sl_element *els[1] = {tu_el_str(p)};
    return tu_elements(els, 1, 1);
}

/* The single element of ds's pass (seed 1, one thread): its tensor 0. */
static sl_element *first(sl_dataset *ds, int *rc)
{
    sl_options *o = tu_opts(1, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el = NULL;
    *rc = sl_next(it, &el);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return *rc == 0 ? el : NULL;
}

static void test_exact_samples_and_padding(void **state)
{
    (void)state;
    sl_audio_spec s;
    SL_AUDIO_SPEC_INIT(&s);
    s.seconds = 0; /* the whole file */
    int rc;
    sl_element *el = first(sl_map_audio(one("ramp.wav"), &s, 1), &rc);
#ifdef SLUICE_NO_FFMPEG
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "SLUICE_WITH_FFMPEG"));
    (void)el;
    skip();
#else
    assert_int_equal(rc, 0);
    const sl_tensor *t = sl_element_tensor(el, 0);
    tu_check_shape(t, 2, (int64_t[]){1, 12345});
    const float *x = sl_tensor_data(t);
    for (int i = 0; i < 12345; i++)
        assert_true(x[i] == ramp(0, i) / 32768.0f);
    sl_element_release(el);
    /* a 2 s clip of a 0.77 s file: the file, then zeros */
    s.seconds = 2;
    el = first(sl_map_audio(one("ramp.wav"), &s, 1), &rc);
    t = sl_element_tensor(el, 0);
    tu_check_shape(t, 2, (int64_t[]){1, 32000});
    x = sl_tensor_data(t);
    assert_true(x[100] == ramp(0, 100) / 32768.0f);
    for (int i = 12345; i < 32000; i++)
        assert_true(x[i] == 0);
    sl_element_release(el);
#endif
}

/* The strongest of n samples' frequencies, by a plain DFT over 10 Hz steps. */
static double peak_hz(const float *x, int n, int rate)
{
    double best = 0, at = 0;
    for (double f = 100; f < rate / 2.0; f += 10) {
        double re = 0, im = 0;
        for (int i = 0; i < n; i++)
            re += x[i] * cos(2 * M_PI * f * i / rate), im += x[i] * sin(2 * M_PI * f * i / rate);
        if (re * re + im * im > best)
            best = re * re + im * im, at = f;
    }
    return at;
}

static void test_clip_place_resample_and_mix(void **state)
{
    (void)state;
#ifdef SLUICE_NO_FFMPEG
    skip();
#endif
    sl_audio_spec s;
    SL_AUDIO_SPEC_INIT(&s);
    s.seconds = 0.25;
    s.sample_rate = 8000;
    s.clip_sampler = SL_CLIP_UNIFORM; /* the start: 440 Hz */
    int rc;
    sl_element *el = first(sl_map_audio(one("steps.wav"), &s, 1), &rc);
    assert_int_equal(rc, 0);
    const sl_tensor *t = sl_element_tensor(el, 0);
    tu_check_shape(t, 2, (int64_t[]){1, 2000});
    /* mono from stereo with one side silent: the tone, lower */
    assert_true(fabs(peak_hz(sl_tensor_data(t), 2000, 8000) - 440) <= 10);
    sl_element_release(el);
    s.clip_sampler = SL_CLIP_CENTER; /* 0.95 s to 1.05 s: past the step, 1760 Hz */
    s.seconds = 0.1;
    s.channels = 2;
    el = first(sl_map_audio(one("steps.wav"), &s, 1), &rc);
    assert_int_equal(rc, 0);
    t = sl_element_tensor(el, 0);
    tu_check_shape(t, 2, (int64_t[]){2, 800});
    const float *x = sl_tensor_data(t);
    assert_true(fabs(peak_hz(x, 800, 8000) - 1760) <= 10);
    float right = 0;
    for (int i = 0; i < 800; i++)
        right = fmaxf(right, fabsf(x[800 + i]));
    assert_true(right < 1e-3f);
    sl_element_release(el);
}

static void test_mel_of_a_tone(void **state)
{
    (void)state;
#ifdef SLUICE_NO_FFMPEG
    skip();
#endif
    sl_audio_spec s;
    SL_AUDIO_SPEC_INIT(&s);
    s.seconds = 0.4;
    s.clip_sampler = SL_CLIP_UNIFORM; /* 440 Hz */
    s.n_mels = 40;
    s.hop_length = 160;
    int rc;
    sl_element *el = first(sl_map_audio(one("steps.wav"), &s, 1), &rc);
    assert_int_equal(rc, 0);
    const sl_tensor *t = sl_element_tensor(el, 0);
    tu_check_shape(t, 3, (int64_t[]){1, 40, 41});
    const float *m = sl_tensor_data(t);
    /* the loudest band in a middle frame holds 440 Hz: HTK mel centres
     * over 0-8 kHz, 40 bands */
    int best = 0, frame = 20;
    for (int b = 1; b < 40; b++)
        if (m[b * 41 + frame] > m[best * 41 + frame])
            best = b;
    double lo = 2595 * log10(1 + 0 / 700.0), hi = 2595 * log10(1 + 8000 / 700.0);
    double centre = 700 * (pow(10, (lo + (hi - lo) * (best + 1) / 41) / 2595) - 1);
    print_message("loudest band %d, centre %.0f Hz, %.1f dB\n", best, centre,
                  m[best * 41 + frame]);
    assert_true(centre > 330 && centre < 560);
    sl_element_release(el);
}

static void test_checks_and_bad_files(void **state)
{
    (void)state;
    sl_audio_spec s;
    SL_AUDIO_SPEC_INIT(&s);
    assert_int_equal(s.sample_rate, 16000);
    assert_int_equal(s.n_fft, 400);
    struct {
        int *field;
        int value;
    } bad[] = {{&s.sample_rate, 10}, {&s.channels, 0}, {&s.clip_sampler, 7}, {&s.n_mels, -1}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_audio_spec keep = s;
        *bad[i].field = bad[i].value;
        assert_null(sl_map_audio(one("ramp.wav"), &s, 1));
        assert_int_equal(sl_last_error_code(), SL_EINVAL);
        s = keep;
    }
    s.n_mels = 8;
    s.n_fft = 1;
    assert_null(sl_map_audio(one("ramp.wav"), &s, 1));
    SL_AUDIO_SPEC_INIT(&s);
    int rc;
    sl_element *el = first(sl_map_audio(one("junk.wav"), &s, 1), &rc);
    assert_null(el);
    assert_true(rc < 0);
    assert_non_null(strstr(sl_last_error(), "junk.wav"));
    el = first(sl_map_audio(one("missing.wav"), &s, 1), &rc);
    assert_true(rc < 0);
    assert_non_null(strstr(sl_last_error(), "missing.wav"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_samples_and_padding),
        cmocka_unit_test(test_clip_place_resample_and_mix),
        cmocka_unit_test(test_mel_of_a_tone),
        cmocka_unit_test(test_checks_and_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
