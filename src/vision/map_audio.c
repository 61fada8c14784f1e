/*
 * map_audio: clips of audio through FFmpeg, as waveforms or mel features.
 *
 * A parallel map (ops/map.c): each worker opens one file (ffmpeg_io.h),
 * draws the clip's start, seeks before it, decodes forward and resamples
 * with libswresample to the output's rate and channels, keeping the
 * samples inside the clip and stopping at its end. Mel features follow
 * torchaudio's MelSpectrogram: centred frames with reflect padding, a
 * periodic Hann window, the power spectrum of each frame by a direct DFT
 * against a table of the window's cosines and sines (n_fft is often not
 * a power of two: 400 at 16 kHz), HTK mel filters with no norm, then
 * AmplitudeToDB's 10 log10(max(x, 1e-10)).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "../core/hash.h"
#include "../core/versioned.h"
#include "../ops/map.h"
#include "map_image.h"

#define SPEC_V1_SIZE sizeof(sl_audio_spec)
#define MAX_FFT 8192

SL_API int sl_audio_spec_init(sl_audio_spec *spec, size_t struct_size)
{
    sl_audio_spec d = {.struct_size = struct_size, .sample_rate = 16000, .channels = 1,
                       .seconds = 1.0, .clip_sampler = SL_CLIP_RANDOM, .n_fft = 400,
                       .power = 2.0f, .log_mel = 1};
    return sl__struct_init(spec, struct_size, &d, sizeof d, SPEC_V1_SIZE, "sl_audio_spec_init");
}

typedef struct map_audio_ds {
    sl_dataset base;
    sl_audio_spec spec; /* loaded, with win_length, hop_length, f_max filled in */
    int parallelism;
    int64_t samples;    /* per clip, or 0 for whole files */
    /* mel features (n_mels > 0): the windowed DFT's rows, [n_freq][n_fft]
     * cosines then sines, and the filters, [n_mels][n_freq] */
    int n_freq;
    float *dft;
    float *fb;
} map_audio_ds;

static int check_audio(sl_audio_spec *s)
{
    if (s->sample_rate < 1000 || s->sample_rate > 384000 || s->channels < 1 || s->channels > 8)
        return sl__set_error(SL_EINVAL, "map_audio: sample_rate %d (1000 to 384000) or "
                             "channels %d (1 to 8)", s->sample_rate, s->channels);
    if (!(s->seconds >= 0) || s->seconds > 86400 ||
        (s->seconds > 0 && llround(s->seconds * s->sample_rate) < 1))
        return sl__set_error(SL_EINVAL, "map_audio: seconds %g (0, or at least a sample)",
                             s->seconds);
    if (s->clip_sampler < SL_CLIP_RANDOM || s->clip_sampler > SL_CLIP_CENTER ||
        s->audio_index < 0 || s->input < SL_VIDEO_AUTO || s->input > SL_VIDEO_BYTES ||
        (s->log_mel != 0 && s->log_mel != 1))
        return sl__set_error(SL_EINVAL, "map_audio: bad clip_sampler, audio_index, input or "
                             "log_mel");
    if (s->n_mels < 0 || s->n_mels > 1024)
        return sl__set_error(SL_EINVAL, "map_audio: n_mels %d (0 to 1024)", s->n_mels);
    if (!s->n_mels)
        return 0;
    if (s->win_length == 0)
        s->win_length = s->n_fft;
    if (s->hop_length == 0)
        s->hop_length = s->win_length / 2;
    if (s->f_max == 0)
        s->f_max = s->sample_rate / 2.0f;
    if (s->n_fft < 2 || s->n_fft > MAX_FFT || s->win_length < 1 || s->win_length > s->n_fft ||
        s->hop_length < 1)
        return sl__set_error(SL_EINVAL, "map_audio: n_fft %d (2 to %d), win_length %d (to "
                             "n_fft) or hop_length %d", s->n_fft, MAX_FFT, s->win_length,
                             s->hop_length);
    if (!(s->f_min >= 0 && s->f_min < s->f_max && s->f_max <= s->sample_rate / 2.0f) ||
        !(s->power > 0))
        return sl__set_error(SL_EINVAL, "map_audio: f_min %g, f_max %g (within [0, "
                             "sample_rate / 2]) or power %g", s->f_min, s->f_max, s->power);
    int64_t samples = (int64_t)llround(s->seconds * s->sample_rate);
    if (s->seconds > 0 && samples <= s->n_fft / 2)
        return sl__set_error(SL_EINVAL, "map_audio: a clip of %g s is shorter than half a "
                             "frame (n_fft %d)", s->seconds, s->n_fft);
    return 0;
}

static double hz_to_mel(double f)
{
    return 2595.0 * log10(1.0 + f / 700.0);
}

static double mel_to_hz(double m)
{
    return 700.0 * (pow(10.0, m / 2595.0) - 1.0);
}

/* The DFT rows with the window folded in, and the triangular filters of
 * torchaudio's melscale_fbanks (HTK, norm None): for bin frequency f and
 * corner frequencies p[m], p[m+1], p[m+2], max(0, min(rising, falling)). */
static int mel_tables(map_audio_ds *d)
{
    const sl_audio_spec *s = &d->spec;
    int N = s->n_fft, K = N / 2 + 1, M = s->n_mels, W = s->win_length;
    d->n_freq = K;
    d->dft = sl__alloc((size_t)2 * K * N * sizeof *d->dft);
    d->fb = sl__alloc((size_t)M * K * sizeof *d->fb);
    double *f = sl__alloc((size_t)(M + 2) * sizeof *f);
    if (!d->dft || !d->fb || !f) {
        sl__free(f, (size_t)(M + 2) * sizeof *f);
        return sl__set_error(SL_ENOMEM, "out of memory (mel tables)");
    }
    int left = (N - W) / 2; /* a shorter window sits in the middle of the frame */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int i = n - left;
            double w = i >= 0 && i < W ? 0.5 - 0.5 * cos(2 * M_PI * i / W) : 0;
            double a = 2 * M_PI * (double)((int64_t)k * n % N) / N;
            d->dft[(size_t)k * N + n] = (float)(w * cos(a));
            d->dft[(size_t)(K + k) * N + n] = (float)(w * sin(a));
        }
    double lo = hz_to_mel(s->f_min), hi = hz_to_mel(s->f_max);
    for (int m = 0; m < M + 2; m++)
        f[m] = mel_to_hz(lo + (hi - lo) * m / (M + 1));
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double hz = (double)s->sample_rate / 2 * k / (K - 1);
            double up = (hz - f[m]) / (f[m + 1] - f[m]);
            double down = (f[m + 2] - hz) / (f[m + 2] - f[m + 1]);
            double v = fmin(up, down);
            d->fb[(size_t)m * K + k] = (float)(v > 0 ? v : 0);
        }
    sl__free(f, (size_t)(M + 2) * sizeof *f);
    return 0;
}

static int64_t mel_frames(const sl_audio_spec *s, int64_t samples)
{
    /* torch.stft, centred: the signal padded by n_fft / 2 on each side */
    return 1 + (samples + 2 * (s->n_fft / 2) - s->n_fft) / s->hop_length;
}

/* x . a and x . b over n, four lanes at a time in two accumulators each
 * (GCC's vector extension: SSE on x86-64, NEON on arm64; a float sum in
 * one accumulator is one the compiler may not reorder into lanes). */
typedef float v4f __attribute__((vector_size(16)));

static inline v4f load4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void dot2(const float *x, const float *a, const float *b, int n, float *ra, float *rb)
{
    v4f sa0 = {0}, sa1 = {0}, sb0 = {0}, sb1 = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        v4f x0 = load4(x + i), x1 = load4(x + i + 4);
        sa0 += x0 * load4(a + i), sa1 += x1 * load4(a + i + 4);
        sb0 += x0 * load4(b + i), sb1 += x1 * load4(b + i + 4);
    }
    v4f sa = sa0 + sa1, sb = sb0 + sb1;
    float ta = sa[0] + sa[1] + sa[2] + sa[3], tb = sb[0] + sb[1] + sb[2] + sb[3];
    for (; i < n; i++)
        ta += x[i] * a[i], tb += x[i] * b[i];
    *ra = ta, *rb = tb;
}

/* One channel's features, out [n_mels][frames], from x[0 .. n) (n > n_fft
 * / 2, for the reflection); scratch: BLOCK x (n_fft + n_freq) floats. */
enum { BLOCK = 8 }; /* frames per pass over the DFT table */

static void mel_channel(const map_audio_ds *d, const float *x, int64_t n, float *out,
                        float *scratch)
{
    const sl_audio_spec *s = &d->spec;
    int N = s->n_fft, K = d->n_freq, M = s->n_mels, pad = N / 2;
    int64_t frames = mel_frames(s, n);
    float *seg = scratch, *spec = scratch + (size_t)BLOCK * N;
    /* BLOCK frames at a time, so each table row (2 N floats: 3 KB at
     * n_fft 400, the table 640 KB) is read once for all of them */
    for (int64_t t0 = 0; t0 < frames; t0 += BLOCK) {
        int nb = frames - t0 < BLOCK ? (int)(frames - t0) : BLOCK;
        for (int b = 0; b < nb; b++) {
            int64_t at = (t0 + b) * s->hop_length - pad;
            for (int i = 0; i < N; i++) { /* reflect padding, as torch.stft's centre */
                int64_t j = at + i;
                if (j < 0)
                    j = -j;
                if (j >= n)
                    j = 2 * (n - 1) - j;
                seg[(size_t)b * N + i] = j >= 0 && j < n ? x[j] : 0;
            }
        }
        for (int k = 0; k < K; k++)
            for (int b = 0; b < nb; b++) {
                float re, im;
                dot2(seg + (size_t)b * N, d->dft + (size_t)k * N, d->dft + (size_t)(K + k) * N,
                     N, &re, &im);
                float p = re * re + im * im;
                spec[(size_t)b * K + k] = s->power == 2 ? p : powf(p, s->power / 2);
            }
        for (int b = 0; b < nb; b++)
            for (int m = 0; m < M; m++) {
                const float *w = d->fb + (size_t)m * K, *sp = spec + (size_t)b * K;
                float v = 0;
                for (int k = 0; k < K; k++)
                    v += w[k] * sp[k];
                out[(size_t)m * frames + t0 + b] =
                    s->log_mel ? 10 * log10f(v > 1e-10f ? v : 1e-10f) : v;
            }
    }
}

#ifdef SLUICE_NO_FFMPEG

static int decode_audio(const map_audio_ds *d, sl__rng *rng, const sl_element *in, float **pcm,
                        int64_t *n, size_t *stride)
{
    (void)d, (void)rng, (void)in, (void)pcm, (void)n, (void)stride;
    return sl__set_error(SL_EUNSUPPORTED, "this build has no audio decoding "
                         "(SLUICE_WITH_FFMPEG=OFF)");
}

#else

#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>
#include "ffmpeg_io.h"

static const enum AVCodecID codecs[] = {
    AV_CODEC_ID_AAC, AV_CODEC_ID_MP3, AV_CODEC_ID_FLAC, AV_CODEC_ID_VORBIS, AV_CODEC_ID_OPUS,
    AV_CODEC_ID_PCM_S16LE, AV_CODEC_ID_PCM_S24LE, AV_CODEC_ID_PCM_S32LE, AV_CODEC_ID_PCM_F32LE,
    AV_CODEC_ID_PCM_F64LE, AV_CODEC_ID_PCM_U8, AV_CODEC_ID_PCM_S16BE, AV_CODEC_ID_PCM_MULAW,
    AV_CODEC_ID_PCM_ALAW,
};

/* The calling thread's buffers: the clip's planar samples (channels x
 * cap), and swresample's output of one frame. */
typedef struct aws {
    float *pcm;
    size_t pcm_cap; /* bytes */
    float *chunk;
    size_t chunk_cap;
    AVPacket *pkt;
    AVFrame *frame;
} aws;

static pthread_key_t aws_key;
static pthread_once_t aws_once = PTHREAD_ONCE_INIT;

static void aws_destroy(void *p)
{
    aws *w = p;
    sl__free(w->pcm, w->pcm_cap);
    sl__free(w->chunk, w->chunk_cap);
    av_packet_free(&w->pkt);
    av_frame_free(&w->frame);
    sl__free(w, sizeof *w);
}

static void aws_init(void)
{
    pthread_key_create(&aws_key, aws_destroy);
}

static aws *aws_get(void)
{
    pthread_once(&aws_once, aws_init);
    aws *w = pthread_getspecific(aws_key);
    if (w)
        return w;
    w = sl__calloc(1, sizeof *w);
    if (w && (!(w->pkt = av_packet_alloc()) || !(w->frame = av_frame_alloc()) ||
              pthread_setspecific(aws_key, w))) {
        aws_destroy(w);
        w = NULL;
    }
    if (!w)
        sl__set_error(SL_ENOMEM, "out of memory (audio decoder)");
    return w;
}

static int reserve(float **p, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return 0;
    size_t want = *cap ? *cap : 1 << 16;
    while (want < bytes)
        want *= 2;
    float *q = sl__alloc(want);
    if (!q)
        return sl__set_error(SL_ENOMEM, "out of memory (%zu bytes of audio)", want);
    sl__free(*p, *cap);
    *p = q;
    *cap = want;
    return 0;
}

/* The clip being filled: output samples [from, from + want) of the
 * stream's timeline (want < 0: to the end), channel c at pcm[c * cap]. */
typedef struct clip {
    aws *w;
    int channels;
    int64_t from, want, pos; /* pos: the next output sample's index */
    int64_t got;             /* samples stored */
    size_t cap;              /* samples per channel the buffer holds */
} clip;

static int store(clip *c, float *const *planes, int n)
{
    int64_t lo = c->from - c->pos, hi = c->want < 0 ? n : c->from + c->want - c->pos;
    if (lo < 0)
        lo = 0;
    if (hi > n)
        hi = n;
    int64_t k = hi - lo;
    if (k > 0) {
        size_t need = (size_t)(c->got + k);
        if (need > c->cap) { /* a whole file: the buffer grows, channels moved */
            size_t cap = c->cap ? c->cap : 1 << 14;
            while (cap < need)
                cap *= 2;
            float *old = c->w->pcm;
            size_t old_bytes = c->w->pcm_cap, old_cap = c->cap;
            c->w->pcm = NULL, c->w->pcm_cap = 0;
            int rc = reserve(&c->w->pcm, &c->w->pcm_cap, cap * c->channels * sizeof(float));
            if (rc) {
                c->w->pcm = old, c->w->pcm_cap = old_bytes;
                return rc;
            }
            for (int ch = 0; ch < c->channels && c->got; ch++)
                memcpy(c->w->pcm + ch * cap, old + ch * old_cap, (size_t)c->got * sizeof(float));
            sl__free(old, old_bytes);
            c->cap = cap;
        }
        for (int ch = 0; ch < c->channels; ch++)
            memcpy(c->w->pcm + ch * c->cap + c->got, planes[ch] + lo, (size_t)k * sizeof(float));
        c->got += k;
    }
    c->pos += n;
    return 0;
}

static bool full(const clip *c)
{
    return c->want >= 0 && c->got >= c->want;
}

/* swresample's output of `in` (NULL: what it still holds) into the clip. */
static int convert(SwrContext *swr, clip *c, const AVFrame *in)
{
    if (!swr) /* none made yet: nothing held */
        return 0;
    int room = swr_get_out_samples(swr, in ? in->nb_samples : 0);
    if (room < 0)
        return sl__set_error(SL_EINTERNAL, "swresample: no output size");
    if (room == 0)
        return 0;
    int rc = reserve(&c->w->chunk, &c->w->chunk_cap, (size_t)room * c->channels * sizeof(float));
    if (rc)
        return rc;
    float *planes[8];
    for (int ch = 0; ch < c->channels; ch++)
        planes[ch] = c->w->chunk + (size_t)ch * room;
    int n = swr_convert(swr, (uint8_t **)planes, room,
                        in ? (const uint8_t **)in->extended_data : NULL, in ? in->nb_samples : 0);
    if (n < 0)
        return sl__set_error(SL_ECORRUPT, "swresample failed");
    return n ? store(c, planes, n) : 0;
}

/* (Re)makes *swr for input of `layout`, `fmt` and `rate` into the
 * spec's planar float at its rate and channels; the input's facts kept. */
static int resampler(const sl__ff *ff, SwrContext **swr, const sl_audio_spec *s,
                     const AVChannelLayout *layout, int fmt, int rate, int *in_rate,
                     int *in_fmt, int *in_channels)
{
    AVChannelLayout out = {0}, inl = {0};
    av_channel_layout_default(&out, s->channels);
    if (layout->order == AV_CHANNEL_ORDER_UNSPEC)
        av_channel_layout_default(&inl, layout->nb_channels);
    else if (av_channel_layout_copy(&inl, layout) < 0)
        return sl__set_error(SL_ENOMEM, "out of memory (channel layout)");
    swr_free(swr);
    int err = inl.nb_channels < 1 || rate <= 0
                  ? AVERROR_INVALIDDATA
                  : swr_alloc_set_opts2(swr, &out, AV_SAMPLE_FMT_FLTP, s->sample_rate, &inl,
                                        fmt, rate, 0, NULL);
    *in_channels = inl.nb_channels;
    av_channel_layout_uninit(&inl);
    av_channel_layout_uninit(&out);
    if (err >= 0)
        err = swr_init(*swr);
    if (err < 0)
        return sl__ff_fail(ff, err, "the resampler");
    *in_rate = rate, *in_fmt = fmt;
    return 0;
}

/* Decodes tensor audio_index of `in` into the thread's buffer: the clip's
 * samples (*n per channel, zeros after the file's end for a fixed clip)
 * at *pcm, channel c at (*pcm)[c * stride]: returned in *n and the
 * stride as the samples' count for a fixed clip. */
static int decode_audio(const map_audio_ds *d, sl__rng *rng, const sl_element *in, float **pcm,
                        int64_t *n, size_t *stride)
{
    const sl_audio_spec *s = &d->spec;
    aws *w = aws_get();
    if (!w)
        return SL_ENOMEM;
    sl__ff ff;
    SwrContext *swr = NULL;
    sl__ff_begin();
    int rc = sl__ff_open(&ff, &in->t[s->audio_index], s->input == SL_VIDEO_BYTES,
                         AVMEDIA_TYPE_AUDIO, codecs, (int)(sizeof codecs / sizeof *codecs), 0,
                         true);
    double tb = rc == 0 ? av_q2d(ff.st->time_base) : 0;
    int64_t start = 0;
    double duration = -1;
    if (rc == 0) {
        start = ff.st->start_time != AV_NOPTS_VALUE ? ff.st->start_time : 0;
        if (ff.st->duration > 0 && ff.st->duration != AV_NOPTS_VALUE)
            duration = (double)ff.st->duration * tb;
        else if (ff.fc->duration > 0 && ff.fc->duration != AV_NOPTS_VALUE)
            duration = (double)ff.fc->duration / AV_TIME_BASE;
        if (!(tb > 0) || ff.cc->sample_rate <= 0)
            rc = sl__set_error(SL_ECORRUPT, "a stream with no time base or sample rate");
    }
    /* the clip: drawn on the output's sample grid */
    double at = 0;
    if (s->seconds > 0 && duration > s->seconds)
        at = s->clip_sampler == SL_CLIP_RANDOM   ? (duration - s->seconds) * sl__rng_uniform(rng)
             : s->clip_sampler == SL_CLIP_CENTER ? (duration - s->seconds) / 2
                                                 : 0;
    clip c = {.w = w, .channels = s->channels, .from = (int64_t)floor(at * s->sample_rate),
              .want = s->seconds > 0 ? d->samples : -1};
    if (rc == 0) {
        c.cap = c.want > 0 ? (size_t)c.want : 0;
        if (c.cap)
            rc = reserve(&w->pcm, &w->pcm_cap, c.cap * c.channels * sizeof(float));
    }
    /* the resampler: for the decoder's parameters now, and again for a
     * frame that brings others (MP3 and AAC streams may change layout
     * or rate from frame to frame) */
    int in_rate = 0, in_fmt = -1, in_channels = 0;
    if (rc == 0 && ff.cc->ch_layout.nb_channels > 0 && ff.cc->sample_rate > 0)
        rc = resampler(&ff, &swr, s, &ff.cc->ch_layout, ff.cc->sample_fmt, ff.cc->sample_rate,
                       &in_rate, &in_fmt, &in_channels);
    /* a seek a little before the clip: decoders need a few frames in */
    bool sought = false, resought = false;
    if (rc == 0 && at > 1.0) {
        sought = av_seek_frame(ff.fc, ff.si, start + (int64_t)((at - 0.5) / tb),
                               AVSEEK_FLAG_BACKWARD) >= 0;
        if (!sought && ff.src.code)
            rc = ff.src.code;
    }
    bool placed = false, eof = false;
    int64_t packets = 0;
    while (rc == 0 && !full(&c) && !eof) {
        int err = av_read_frame(ff.fc, w->pkt);
        if (err == AVERROR_EOF || (err < 0 && !ff.src.code && avio_feof(ff.fc->pb))) {
            eof = true;
            err = avcodec_send_packet(ff.cc, NULL);
        } else if (err < 0) {
            rc = sl__ff_fail(&ff, err, "reading");
            break;
        } else if (w->pkt->stream_index != ff.si) {
            av_packet_unref(w->pkt);
            continue;
        } else {
            if (++packets > ((int64_t)1 << 26)) {
                rc = sl__set_error(SL_ECORRUPT, "over 64 M packets");
                break;
            }
            err = avcodec_send_packet(ff.cc, w->pkt);
            av_packet_unref(w->pkt);
        }
        if (err == AVERROR(EAGAIN)) /* never: every frame is received before the next send */
            err = AVERROR_BUG;
        if (err < 0 && err != AVERROR_EOF) {
            char what[48];
            snprintf(what, sizeof what, "decoding near %.3f s", (double)c.pos / s->sample_rate);
            rc = sl__ff_fail(&ff, err, what);
            break;
        }
        while (rc == 0 && !full(&c)) {
            err = avcodec_receive_frame(ff.cc, w->frame);
            if (err == AVERROR(EAGAIN) || err == AVERROR_EOF)
                break;
            if (err < 0) {
                rc = sl__ff_fail(&ff, err, "decoding");
                break;
            }
            const AVFrame *f = w->frame;
            if (f->sample_rate != in_rate || f->format != in_fmt ||
                f->ch_layout.nb_channels != in_channels) { /* the stream changed */
                rc = convert(swr, &c, NULL);
                if (rc == 0)
                    rc = resampler(&ff, &swr, s, &f->ch_layout, f->format, f->sample_rate,
                                   &in_rate, &in_fmt, &in_channels);
                if (rc)
                    break;
            }
            if (!placed) { /* the first frame's time places the output's timeline */
                int64_t pts = f->best_effort_timestamp;
                double t = pts != AV_NOPTS_VALUE ? (double)(pts - start) * tb : 0;
                c.pos = (int64_t)llround(t * s->sample_rate);
                placed = true;
                if (c.pos > c.from && sought && !resought) {
                    /* the seek landed past the clip's start (a VBR file
                     * without a table): from the start instead */
                    resought = true;
                    placed = false;
                    av_frame_unref(w->frame);
                    if (av_seek_frame(ff.fc, ff.si, start, AVSEEK_FLAG_BACKWARD) < 0 &&
                        ff.src.code) {
                        rc = ff.src.code;
                        break;
                    }
                    avcodec_flush_buffers(ff.cc);
                    rc = resampler(&ff, &swr, s, &ff.cc->ch_layout, ff.cc->sample_fmt,
                                   ff.cc->sample_rate, &in_rate, &in_fmt, &in_channels);
                    break;
                }
            }
            rc = convert(swr, &c, w->frame);
            av_frame_unref(w->frame);
        }
    }
    if (rc == 0 && !full(&c))
        rc = convert(swr, &c, NULL);
    if (rc == 0 && !placed)
        rc = sl__set_error(SL_ECORRUPT, "no audio decoded");
    swr_free(&swr);
    sl__ff_end();
    sl__ff_close(&ff);
    av_packet_unref(w->pkt);
    av_frame_unref(w->frame);
    if (rc)
        return rc;
    if (c.want >= 0) { /* zeros past the file's end */
        for (int ch = 0; ch < c.channels; ch++)
            memset(w->pcm + ch * c.cap + c.got, 0, (size_t)(c.want - c.got) * sizeof(float));
        c.got = c.want;
    }
    *pcm = w->pcm;
    *n = c.got;
    *stride = c.cap;
    return 0;
}

#endif /* SLUICE_NO_FFMPEG */

/* ---- the dataset ---- */

static int map_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    const map_audio_ds *d = user;
    const sl_audio_spec *s = &d->spec;
    int k = s->audio_index;
    if (in->n <= k)
        return sl__set_error(SL_EINVAL, "map_audio: an element of %d tensors has no tensor %d",
                             in->n, k);
    float *pcm = NULL;
    int64_t n = 0;
    size_t stride = 0;
    int rc = decode_audio(d, &ctx->rng, in, &pcm, &n, &stride);
    if (rc == 0 && s->n_mels && n <= s->n_fft / 2)
        rc = sl__set_error(SL_ECORRUPT, "%lld samples: shorter than half a frame (n_fft %d)",
                           (long long)n, s->n_fft);
    sl_element *el = NULL;
    if (rc == 0 && !(el = sl__element_new(in->n, 256)))
        rc = SL_ENOMEM;
    for (int j = 0; rc == 0 && j < in->n; j++) {
        if (j != k) {
            rc = sl_element_add_shared(el, in, j);
            continue;
        }
        int64_t shape[3] = {s->channels, s->n_mels ? s->n_mels : n, 0};
        int nd = 2;
        if (s->n_mels)
            shape[nd++] = mel_frames(s, n);
        size_t count = (size_t)shape[0] * (size_t)shape[1] * (size_t)(nd == 3 ? shape[2] : 1);
        struct sl_tensor *t = sl__element_push(el, SL_FLOAT32, nd, shape, count * sizeof(float));
        if (!t) {
            rc = SL_ENOMEM;
            break;
        }
        float *o = t->data;
        if (!s->n_mels) {
            for (int ch = 0; ch < s->channels && n > 0; ch++)
                memcpy(o + (size_t)ch * n, pcm + ch * stride, (size_t)n * sizeof(float));
            continue;
        }
        size_t scratch = (size_t)BLOCK * (size_t)(s->n_fft + d->n_freq) * sizeof(float);
        float *tmp = sl__alloc(scratch);
        if (!tmp) {
            rc = SL_ENOMEM;
            break;
        }
        size_t per = (size_t)shape[1] * (size_t)shape[2];
        for (int ch = 0; ch < s->channels; ch++)
            mel_channel(d, pcm + ch * stride, n, o + ch * per, tmp);
        sl__free(tmp, scratch);
    }
    if (rc < 0) {
        sl_element_release(el);
        if (rc != SL_ENOMEM) {
            const struct sl_tensor *t = &in->t[k];
            size_t len = 0;
            const char *str = t->dtype == SL_STRING && t->ndim == 0 && s->input == SL_VIDEO_AUTO
                                  ? sl_tensor_string(t, 0, &len)
                                  : sl__element_origin(in, &len);
            if (str) {
                char name[1024];
                snprintf(name, sizeof name, "%.*s", (int)(len < 1000 ? len : 1000), str);
                sl__error_prefix(name);
            }
        }
        return rc;
    }
    *out = el;
    return 0;
}

static int map_audio_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                          sl__iter **out)
{
    const map_audio_ds *d = (const map_audio_ds *)ds;
    return sl__map_iter_make(ds, tree, key, epoch, map_fn, (void *)d, d->parallelism, 0, out);
}

static void map_audio_destroy(sl_dataset *ds)
{
    map_audio_ds *d = (map_audio_ds *)ds;
    size_t K = (size_t)d->n_freq, N = (size_t)d->spec.n_fft;
    if (d->dft)
        sl__free(d->dft, 2 * K * N * sizeof *d->dft);
    if (d->fb)
        sl__free(d->fb, (size_t)d->spec.n_mels * K * sizeof *d->fb);
}

static uint64_t map_audio_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const map_audio_ds *d = (const map_audio_ds *)ds;
    const sl_audio_spec *s = &d->spec;
    const int64_t f[] = {s->sample_rate, s->channels, s->clip_sampler, s->audio_index, s->input,
                         s->n_mels, s->n_fft, s->win_length, s->hop_length, s->log_mel};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        h = sl__hash_u64(h, (uint64_t)f[i]);
    double g[] = {s->seconds, s->f_min, s->f_max, s->power};
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        uint64_t u;
        memcpy(&u, &g[i], sizeof u);
        h = sl__hash_u64(h, u);
    }
    return h;
}

static int64_t map_audio_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static void audio_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    const map_audio_ds *d = arg;
    const sl_audio_spec *s = &d->spec;
    if (leaf != s->audio_index) {
        sl__stext_leaf(t, spec);
        return;
    }
    sl__leaf_spec o = {.dtype = SL_FLOAT32, .ndim = s->n_mels ? 3 : 2};
    o.shape[0] = s->channels;
    o.shape[1] = s->n_mels ? s->n_mels : d->samples ? d->samples : -1;
    if (s->n_mels)
        o.shape[2] = d->samples ? mel_frames(s, d->samples) : -1;
    sl__stext_leaf(t, &o);
}

static sl_structure *map_audio_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, audio_leaf, (void *)ds) : NULL;
}

static const sl__node_ops map_audio_ops = {
    .kind = "map_audio",
    .make_iter = map_audio_make,
    .cardinality = map_audio_cardinality,
    .fingerprint = map_audio_fingerprint,
    .destroy = map_audio_destroy,
    .structure = map_audio_structure,
};

SL_API sl_dataset *sl_map_audio(sl_dataset *in, const sl_audio_spec *spec, int parallelism)
{
    map_audio_ds *d = (map_audio_ds *)sl__dataset_new(&map_audio_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if (!spec)
        return sl__dataset_fail(&d->base, SL_EINVAL, "map_audio: NULL spec");
    int rc = sl__struct_load(spec, &d->spec, NULL, sizeof d->spec, SPEC_V1_SIZE, "map_audio");
    if (rc == 0)
        rc = check_audio(&d->spec);
    if (rc == 0 && ((parallelism < 1 && parallelism != SL_AUTOTUNE) || parallelism > 4096))
        rc = sl__set_error(SL_EINVAL, "map_audio: bad parallelism %d", parallelism);
    d->samples = (int64_t)llround(d->spec.seconds * d->spec.sample_rate);
    if (rc == 0 && d->spec.n_mels)
        rc = mel_tables(d);
    if (rc < 0) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    d->parallelism = parallelism;
    return &d->base;
}
