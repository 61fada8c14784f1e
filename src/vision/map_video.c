/*
 * map_video: clips of T frames from video files, through FFmpeg.
 *
 * A parallel map (ops/map.c) whose function opens one video on one worker:
 * libavformat over an AVIOContext that reads the element's bytes, or its
 * file or URL by ranges through sluice's own reads; the clips' start times
 * and crops drawn from the element's stream; the frames each clip needs
 * found by timestamp, decoding forward from the keyframe before them; each
 * frame resampled from its YCbCr planes with the image resampler
 * (map_image.h's views), converted with the stream's matrix and range.
 *
 * How a frame is chosen. Time t of a clip is counted from the stream's
 * start; it becomes the pts tick start_pts + round(t / time_base), and the
 * frame for it is the last one (in presentation order) whose pts is at or
 * before the tick. Every target of every clip is sorted by tick, and one
 * forward pass decodes them all: each decoded frame settles the targets
 * that lie before it with the frame before it. A packet whose frame cannot
 * be the answer (a later frame at or before the next target was already
 * demuxed) is decoded with AVDISCARD_NONREF, so a frame nothing references
 * is skipped; a target past the next keyframe the index knows seeks there.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/hash.h"
#include "../core/versioned.h"
#include "../ops/map.h"
#include "map_image.h"
#include "map_video.h"

#define SPEC_V1_SIZE sizeof(sl_video_spec)

SL_API int sl_video_spec_init(sl_video_spec *spec, size_t struct_size)
{
    sl_video_spec d = {.struct_size = struct_size, .frames = 8, .stride = 1,
                       .clip_sampler = SL_CLIP_RANDOM, .num_clips = 1, .max_frames = 1024};
    return sl__struct_init(spec, struct_size, &d, sizeof d, SPEC_V1_SIZE, "sl_video_spec_init");
}

typedef struct map_video_ds {
    sl_dataset base;
    sl_video_spec video;
    sl_image_spec image;
    int parallelism;
} map_video_ds;

static int check_video(const sl_video_spec *v, const sl_image_spec *im)
{
    if (v->frames < 1 || v->frames > v->max_frames)
        return sl__set_error(SL_EINVAL, "map_video: frames %d (1 to max_frames, %d)", v->frames,
                             v->max_frames);
    if (v->stride < 1 || !(v->fps >= 0) || !isfinite(v->fps))
        return sl__set_error(SL_EINVAL, "map_video: stride %d must be >= 1 and fps %g >= 0",
                             v->stride, v->fps);
    if (v->clip_sampler < SL_CLIP_RANDOM || v->clip_sampler > SL_CLIP_CENTER)
        return sl__set_error(SL_EINVAL, "map_video: bad clip_sampler %d", v->clip_sampler);
    if (v->num_clips < 1 || (int64_t)v->num_clips * v->frames > v->max_frames)
        return sl__set_error(SL_EINVAL, "map_video: %d clips of %d frames are over max_frames "
                             "(%d)", v->num_clips, v->frames, v->max_frames);
    if (v->video_index < 0 || v->input < SL_VIDEO_AUTO || v->input > SL_VIDEO_BYTES ||
        v->short_clips < SL_SHORT_CLIP_PAD || v->short_clips > SL_SHORT_CLIP_ERROR ||
        (v->with_timestamps != 0 && v->with_timestamps != 1))
        return sl__set_error(SL_EINVAL, "map_video: bad video_index, input, short_clips or "
                             "with_timestamps");
    if (im->with_mask)
        return sl__set_error(SL_EINVAL, "map_video: a mask goes with map_image");
    if (im->decode == SL_DECODE_RAW && (im->channels != 1 || im->dtype != SL_UINT8))
        return sl__set_error(SL_EINVAL, "map_video: raw decode gives the luma plane: channels "
                             "1, uint8");
    return 0;
}

/* The clip's shape: [num_clips,] T, then the frame's. */
static int clip_shape(const map_video_ds *d, int64_t *shape)
{
    int n = 0;
    if (d->video.num_clips > 1)
        shape[n++] = d->video.num_clips;
    shape[n++] = d->video.frames;
    return n + sl__image_shape(&d->image, shape + n);
}

static int stamp_shape(const map_video_ds *d, int64_t *shape)
{
    int n = 0;
    if (d->video.num_clips > 1)
        shape[n++] = d->video.num_clips;
    shape[n++] = d->video.frames;
    return n;
}

/* The path of an element, for messages: the video's own string, else its
 * origin or first scalar string. */
static const char *element_path(const sl_element *el, int skip)
{
    size_t len = 0;
    const char *s = sl__element_origin(el, &len);
    for (int j = 0; !s && j < el->n; j++)
        if (j != skip && el->t[j].dtype == SL_STRING && el->t[j].ndim == 0)
            s = sl_tensor_string(&el->t[j], 0, &len);
    if (!s)
        return NULL;
    static _Thread_local char buf[1024];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), s);
    return buf;
}

#ifdef SLUICE_NO_FFMPEG

static int decode_clips(const map_video_ds *d, sl__rng *rng, const sl_element *in, void *clip,
                        double *stamps)
{
    (void)d, (void)rng, (void)in, (void)clip, (void)stamps;
    return sl__set_error(SL_EUNSUPPORTED, "this build has no video decoding "
                         "(SLUICE_WITH_FFMPEG=OFF)");
}

long long sl__video_frames_decoded(void)
{
    return 0;
}

#else

#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include "ffmpeg_io.h"

/* The video decoders sluice opens. */
static const enum AVCodecID codecs[] = {
    AV_CODEC_ID_H264, AV_CODEC_ID_HEVC, AV_CODEC_ID_MPEG4, AV_CODEC_ID_MPEG1VIDEO,
    AV_CODEC_ID_MPEG2VIDEO, AV_CODEC_ID_VP8, AV_CODEC_ID_VP9, AV_CODEC_ID_AV1,
    AV_CODEC_ID_THEORA, AV_CODEC_ID_MJPEG,
};

static atomic_llong frames_decoded;

long long sl__video_frames_decoded(void)
{
    return atomic_load(&frames_decoded);
}

/* ---- per worker thread ---- */

typedef struct vws {
    AVPacket *pkt;
    AVFrame *frame, *prev;
    struct SwsContext *sws;
    uint8_t *rgb;
    size_t rgb_cap;
} vws;

static pthread_key_t vws_key;
static pthread_once_t vws_once = PTHREAD_ONCE_INIT;

static void vws_destroy(void *p)
{
    vws *w = p;
    av_packet_free(&w->pkt);
    av_frame_free(&w->frame);
    av_frame_free(&w->prev);
    sws_freeContext(w->sws);
    sl__free(w->rgb, w->rgb_cap);
    sl__free(w, sizeof *w);
}

static void vws_init(void)
{
    pthread_key_create(&vws_key, vws_destroy);
}

static vws *vws_get(void)
{
    pthread_once(&vws_once, vws_init);
    vws *w = pthread_getspecific(vws_key);
    if (w)
        return w;
    w = sl__calloc(1, sizeof *w);
    if (w && (!(w->pkt = av_packet_alloc()) || !(w->frame = av_frame_alloc()) ||
              !(w->prev = av_frame_alloc()) || pthread_setspecific(vws_key, w))) {
        vws_destroy(w);
        w = NULL;
    }
    if (!w)
        sl__set_error(SL_ENOMEM, "out of memory (video decoder)");
    return w;
}

/* ---- one video ---- */

/* One frame a clip wants: its tick, and where it goes. */
typedef struct target {
    int64_t tick;
    int clip, k;
} target;

typedef struct video {
    const map_video_ds *d;
    vws *w;
    sl__ff ff;
    AVFormatContext *fc; /* ff's, for short */
    AVCodecContext *cc;
    AVStream *st;
    int si;
    int64_t start;         /* the stream's first tick */
    double tb;             /* seconds per tick */
    double duration;       /* s, or < 0 when not known */
    bool stream_duration;  /* the stream's own (not the file's: an audio
                            * track may outlast the video) */
    double step;           /* s between a clip's frames */
    int64_t delay;         /* ticks of frame reordering, and one frame */
    int width, height;     /* as the header says */
    target *t;             /* sorted by tick */
    int nt;
    sl__image_view views[1]; /* one per clip (num_clips of them) */
} video;

static int fail(video *v, int err, const char *what)
{
    return sl__ff_fail(&v->ff, err, what);
}

static void video_close(video *v)
{
    sl__ff_close(&v->ff);
    av_frame_unref(v->w->frame);
    av_frame_unref(v->w->prev);
    av_packet_unref(v->w->pkt);
}

/* Container, stream, decoder (ffmpeg_io.h), then the header's facts. */
static int video_open(video *v, const sl_element *in)
{
    const sl_image_spec *im = &v->d->image;
    int rc = sl__ff_open(&v->ff, &in->t[v->d->video.video_index],
                         v->d->video.input == SL_VIDEO_BYTES, AVMEDIA_TYPE_VIDEO, codecs,
                         (int)(sizeof codecs / sizeof *codecs), im->max_pixels,
                         !im->allow_warnings);
    if (rc)
        return rc;
    v->fc = v->ff.fc, v->cc = v->ff.cc, v->st = v->ff.st, v->si = v->ff.si;
    const AVCodecParameters *par = v->st->codecpar;
    v->width = par->width, v->height = par->height;

    v->tb = av_q2d(v->st->time_base);
    if (!(v->tb > 0))
        return sl__set_error(SL_ECORRUPT, "a stream with no time base");
    v->start = v->st->start_time != AV_NOPTS_VALUE ? v->st->start_time : 0;
    v->duration = -1;
    v->stream_duration = v->st->duration > 0 && v->st->duration != AV_NOPTS_VALUE;
    if (v->stream_duration)
        v->duration = (double)v->st->duration * v->tb;
    else if (v->fc->duration > 0 && v->fc->duration != AV_NOPTS_VALUE)
        v->duration = (double)v->fc->duration / AV_TIME_BASE -
                      (v->fc->start_time != AV_NOPTS_VALUE
                           ? (double)v->start * v->tb - (double)v->fc->start_time / AV_TIME_BASE
                           : 0);
    const sl_video_spec *vs = &v->d->video;
    if (vs->fps > 0) {
        v->step = 1 / vs->fps;
    } else {
        AVRational r = v->st->avg_frame_rate.num > 0 && v->st->avg_frame_rate.den > 0
                           ? v->st->avg_frame_rate
                           : v->st->r_frame_rate;
        if (r.num <= 0 || r.den <= 0)
            return sl__set_error(SL_ECORRUPT, "the stream has no frame rate (set fps)");
        v->step = vs->stride / av_q2d(r);
    }
    AVRational r = v->st->avg_frame_rate.num > 0 ? v->st->avg_frame_rate : v->st->r_frame_rate;
    double frame = r.num > 0 && r.den > 0 ? 1 / av_q2d(r) : v->step;
    int reorder = par->video_delay > v->cc->has_b_frames ? par->video_delay : v->cc->has_b_frames;
    v->delay = (int64_t)ceil((reorder + 1) * frame / v->tb);
    return 0;
}

static int cmp_target(const void *a, const void *b)
{
    const target *x = a, *y = b;
    if (x->tick != y->tick)
        return x->tick < y->tick ? -1 : 1;
    return x->clip != y->clip ? x->clip - y->clip : x->k - y->k;
}

/* Each clip's start (drawn first, clip by clip), then each clip's crop:
 * the targets, sorted. */
static void plan_clips(video *v, sl__rng *rng, uint8_t *clip, size_t frame_bytes)
{
    const sl_video_spec *vs = &v->d->video;
    int n = vs->num_clips, T = vs->frames;
    double span = T * v->step, room = v->duration > span ? v->duration - span : 0;
    for (int c = 0; c < n; c++) {
        double at = vs->clip_sampler == SL_CLIP_RANDOM    ? room * sl__rng_uniform(rng)
                    : vs->clip_sampler == SL_CLIP_UNIFORM ? (n > 1 ? room * c / (n - 1) : 0)
                                                           : room * (c + 1) / (n + 1);
        for (int k = 0; k < T; k++)
            v->t[c * T + k] = (target){v->start + (int64_t)floor((at + k * v->step) / v->tb + 0.5),
                                       c, k};
    }
    for (int c = 0; c < n; c++)
        sl__image_view_draw(&v->d->image, rng, v->width, v->height, false,
                            clip + (size_t)c * T * frame_bytes, &v->views[c]);
    qsort(v->t, (size_t)v->nt, sizeof *v->t, cmp_target);
}

/* The matrix of a frame: its tags, BT.601 where it has none (as swscale,
 * and with it PyAV and torchvision, assume). NULL for JFIF's own. */
static const sl__ycc_matrix *frame_matrix(const AVFrame *f, sl__ycc_matrix *m)
{
    bool full = f->color_range == AVCOL_RANGE_JPEG || f->format == AV_PIX_FMT_YUVJ420P ||
                f->format == AV_PIX_FMT_YUVJ422P || f->format == AV_PIX_FMT_YUVJ444P ||
                f->format == AV_PIX_FMT_YUVJ440P;
    double kr = 0.299, kb = 0.114;
    switch (f->colorspace) {
    case AVCOL_SPC_BT709: kr = 0.2126, kb = 0.0722; break;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL: kr = 0.2627, kb = 0.0593; break;
    case AVCOL_SPC_SMPTE240M: kr = 0.212, kb = 0.087; break;
    default: break;
    }
    if (full && kr == 0.299)
        return NULL;
    sl__ycc_matrix_make(kr, kb, full, m);
    return m;
}

static int swscale_colorspace(const AVFrame *f)
{
    switch (f->colorspace) {
    case AVCOL_SPC_BT709: return SWS_CS_ITU709;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL: return SWS_CS_BT2020;
    case AVCOL_SPC_SMPTE240M: return SWS_CS_SMPTE240M;
    default: return SWS_CS_DEFAULT;
    }
}

/* Frame f into the slot of target t: planes where the format is 8-bit
 * planar YCbCr, else RGB made by swscale at the frame's size. */
static int render(video *v, const AVFrame *f, const target *t, size_t frame_bytes, uint8_t *clip)
{
    sl__image_view view = v->views[t->clip];
    view.dst = clip + ((size_t)t->clip * v->d->video.frames + (size_t)t->k) * frame_bytes;
    if (f->width != v->width || f->height != v->height) { /* the size changed mid-stream */
        if ((int64_t)f->width * f->height > v->d->image.max_pixels)
            return sl__set_error(SL_ERANGE, "a frame of %dx%d is over max_pixels", f->width,
                                 f->height);
        double sx = (double)f->width / v->width, sy = (double)f->height / v->height;
        view.win = (sl__window){view.win.x * sx, view.win.y * sy, view.win.w * sx,
                                view.win.h * sy};
    }
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(f->format);
    bool planar = desc && !(desc->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL |
                                            AV_PIX_FMT_FLAG_BE | AV_PIX_FMT_FLAG_HWACCEL)) &&
                  (desc->flags & AV_PIX_FMT_FLAG_PLANAR) && desc->nb_components >= 3 &&
                  desc->comp[0].depth == 8 && desc->comp[0].plane == 0 &&
                  desc->comp[1].plane == 1 && desc->comp[2].plane == 2;
    bool gray = desc && desc->nb_components <= 2 && !(desc->flags & AV_PIX_FMT_FLAG_RGB) &&
                desc->comp[0].depth == 8 && desc->comp[0].step == 1;
    if (v->d->image.decode == SL_DECODE_RAW) {
        if (!planar && !gray)
            return sl__set_error(SL_EUNSUPPORTED, "raw decode of %s frames (8-bit YCbCr or "
                                 "gray only)", desc ? desc->name : "unknown");
        sl__raw raw = {f->data[0], f->width, f->height, (size_t)f->linesize[0], 1, 1, 1,
                       view.win};
        return sl__image_view_raw(&view, &raw);
    }
    if (planar) {
        int cw = AV_CEIL_RSHIFT(f->width, desc->log2_chroma_w);
        int ch = AV_CEIL_RSHIFT(f->height, desc->log2_chroma_h);
        double sx = (double)cw / f->width, sy = (double)ch / f->height;
        sl__ycc_matrix m;
        sl__ycc p = {.scale_denom = 1, .matrix = frame_matrix(f, &m)};
        for (int c = 0; c < 3; c++) {
            bool luma = c == 0;
            p.plane[c] = (sl__plane){f->data[c], luma ? f->width : cw, luma ? f->height : ch,
                                     (size_t)f->linesize[c], view.win};
            if (!luma)
                p.plane[c].win = (sl__window){view.win.x * sx, view.win.y * sy,
                                              view.win.w * sx, view.win.h * sy};
        }
        return sl__image_view_render(&view, &p, NULL, NULL);
    }
    vws *w = v->w;
    size_t stride = (size_t)f->width * 3, need = stride * (size_t)f->height;
    if (need > w->rgb_cap) {
        sl__free(w->rgb, w->rgb_cap);
        w->rgb_cap = 0;
        if (!(w->rgb = sl__alloc(need)))
            return SL_ENOMEM;
        w->rgb_cap = need;
    }
    w->sws = sws_getCachedContext(w->sws, f->width, f->height, f->format, f->width, f->height,
                                  AV_PIX_FMT_RGB24, SWS_BILINEAR | SWS_ACCURATE_RND, NULL, NULL,
                                  NULL);
    if (!w->sws)
        return sl__set_error(SL_EUNSUPPORTED, "frames of pixel format %s",
                             desc ? desc->name : "unknown");
    const int *coef = sws_getCoefficients(swscale_colorspace(f));
    int src_range = f->color_range == AVCOL_RANGE_JPEG, dst_range = 1;
    sws_setColorspaceDetails(w->sws, coef, src_range, sws_getCoefficients(SWS_CS_DEFAULT),
                             dst_range, 0, 1 << 16, 1 << 16);
    uint8_t *dst[4] = {w->rgb};
    int lines[4] = {(int)stride};
    sws_scale(w->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, lines);
    sl__decoded dec = {w->rgb, f->width, f->height, stride, view.win, 1};
    return sl__image_view_render(&view, NULL, &dec, &view.win);
}

/* The frames and their times: one forward pass over the sorted targets. */
typedef struct pass {
    int j;            /* the next target */
    bool have_prev;   /* w->prev holds the last frame decoded */
    int64_t prev_tick;
    bool sought;      /* the last seek's first frame not seen yet */
    int64_t seek_tick;
    int retries;
    int seeks;
    bool no_forward;  /* a seek went back: decode forward only */
    bool draining;    /* the file has ended: the decoder gives what it holds */
    int64_t recent[16]; /* ticks of the last packets sent */
    int nrecent;
} pass;

static double at_time(const video *v, int64_t tick)
{
    return (double)(tick - v->start) * v->tb;
}

/* Settles every target before `tick` (the frame after prev) with prev. */
static int settle(video *v, pass *p, int64_t tick, size_t fb, uint8_t *clip, double *stamps)
{
    while (p->j < v->nt && v->t[p->j].tick < tick) {
        const target *t = &v->t[p->j++];
        int rc = render(v, v->w->prev, t, fb, clip);
        if (rc)
            return rc;
        if (stamps)
            stamps[t->clip * v->d->video.frames + t->k] = at_time(v, p->prev_tick);
    }
    return 0;
}

static int seek(video *v, pass *p, int64_t tick)
{
    int err = av_seek_frame(v->fc, v->si, tick, AVSEEK_FLAG_BACKWARD);
    if (err < 0 && v->ff.src.code)
        return v->ff.src.code;
    if (err < 0) /* no index, or out of range: from the start */
        err = av_seek_frame(v->fc, v->si, v->start, AVSEEK_FLAG_BACKWARD | AVSEEK_FLAG_ANY);
    if (err < 0 && v->ff.src.code)
        return v->ff.src.code;
    avcodec_flush_buffers(v->cc);
    p->seeks++;
    p->sought = true;
    p->seek_tick = tick;
    p->nrecent = 0;
    return 0;
}

/* Whether the keyframe before the next target lies past frame `tick`:
 * then seeking there skips decoding between. Indexes may hold decode
 * times (MP4) where the demuxer seeks by presentation time, so the entry
 * is looked up a reorder delay before the target: a keyframe shown after
 * the target is then never taken for one before it. */
static bool seek_pays(video *v, const pass *p, int64_t tick, int64_t next)
{
    if (p->draining || p->no_forward || p->seeks >= 2 * v->nt + 8)
        return false;
    const AVIndexEntry *e = avformat_index_get_entry_from_timestamp(
        v->st, next - v->delay, AVSEEK_FLAG_BACKWARD);
    return e && (e->flags & AVINDEX_KEYFRAME) && e->timestamp > tick;
}

/* One decoded frame f (tick). */
static int on_frame(video *v, pass *p, AVFrame *f, size_t fb, uint8_t *clip, double *stamps)
{
    int64_t tick = f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp
                   : f->pts != AV_NOPTS_VALUE                  ? f->pts
                   : p->have_prev                              ? p->prev_tick + 1
                                                               : v->start;
    atomic_fetch_add_explicit(&frames_decoded, 1, memory_order_relaxed);
    if (p->sought) {
        p->sought = false;
        if (tick <= v->t[p->j].tick || p->seek_tick <= v->start)
            p->retries = 0; /* this seek landed: later ones get their own tries */
        if (p->have_prev && tick < p->prev_tick)
            p->no_forward = true; /* the demuxer's keyframe lay behind: no more of that */
        if (tick > p->seek_tick && p->seek_tick > v->start && v->t[p->j].tick < tick) {
            /* landed past the target (a keyframe indexed by decode time,
             * an open GOP): back off further, then from the start */
            if (++p->retries > 3)
                return sl__set_error(SL_ECORRUPT, "at %.3f s: no keyframe before the frame "
                                     "wanted", at_time(v, v->t[p->j].tick));
            int64_t back = (int64_t)(p->retries * 2 / v->tb);
            int rc = seek(v, p, p->retries == 3 ? v->start : p->seek_tick - back);
            av_frame_unref(f);
            return rc;
        }
    }
    if (!p->have_prev) { /* targets before the first frame take it */
        av_frame_ref(v->w->prev, f);
        p->have_prev = true;
        p->prev_tick = tick;
        int rc = settle(v, p, tick + 1, fb, clip, stamps);
        av_frame_unref(f);
        return rc;
    }
    int rc = settle(v, p, tick, fb, clip, stamps);
    av_frame_unref(v->w->prev);
    av_frame_move_ref(v->w->prev, f);
    p->prev_tick = tick;
    if (rc == 0 && p->j < v->nt && v->t[p->j].tick >= tick &&
        seek_pays(v, p, tick, v->t[p->j].tick))
        rc = seek(v, p, v->t[p->j].tick);
    return rc;
}

static const char *decoding_at(const video *v, int64_t tick)
{
    static _Thread_local char what[64];
    if (tick == AV_NOPTS_VALUE)
        return "decoding";
    snprintf(what, sizeof what, "decoding at %.3f s", at_time(v, tick));
    return what;
}

static int receive(video *v, pass *p, size_t fb, uint8_t *clip, double *stamps)
{
    for (;;) {
        int err = avcodec_receive_frame(v->cc, v->w->frame);
        if (err == AVERROR(EAGAIN) || err == AVERROR_EOF)
            return err == AVERROR_EOF;
        if (err == AVERROR_INVALIDDATA && v->d->image.allow_warnings)
            continue;
        if (err < 0)
            return fail(v, err, decoding_at(v, p->recent[(p->nrecent + 15) % 16]));
        int rc = on_frame(v, p, v->w->frame, fb, clip, stamps);
        if (rc)
            return rc;
        if (p->j >= v->nt)
            return 0;
    }
}

/* Whether the packet's frame cannot answer the next target: a packet
 * already sent shows at or before it, later. */
static bool replaced(const pass *p, int64_t pts, int64_t next)
{
    if (pts == AV_NOPTS_VALUE)
        return false;
    for (int i = 0; i < p->nrecent && i < 16; i++)
        if (p->recent[i] > pts && p->recent[i] <= next)
            return true;
    return false;
}

static int decode_frames(video *v, size_t fb, uint8_t *clip, double *stamps)
{
    pass p = {0};
    int rc = 0;
    if (v->t[0].tick > v->start && seek_pays(v, &p, v->start, v->t[0].tick))
        rc = seek(v, &p, v->t[0].tick);
    AVPacket *pkt = v->w->pkt;
    bool eof = false;
    int64_t packets = 0, last_pts = AV_NOPTS_VALUE;
    while (rc == 0 && p.j < v->nt && !eof) {
        int err = av_read_frame(v->fc, pkt);
        if (err == AVERROR_EOF || (err < 0 && !v->ff.src.code && avio_feof(v->fc->pb))) {
            eof = p.draining = true;
            err = avcodec_send_packet(v->cc, NULL);
        } else if (err < 0) {
            return fail(v, err, "reading");
        } else if (pkt->stream_index != v->si) {
            av_packet_unref(pkt);
            continue;
        } else {
            if (++packets > ((int64_t)1 << 24))
                return sl__set_error(SL_ECORRUPT, "over 16 M packets");
            v->cc->skip_frame = replaced(&p, pkt->pts, v->t[p.j].tick) ? AVDISCARD_NONREF
                                                                        : AVDISCARD_DEFAULT;
            if (pkt->pts != AV_NOPTS_VALUE) {
                p.recent[p.nrecent++ % 16] = pkt->pts;
                last_pts = pkt->pts;
            }
            err = avcodec_send_packet(v->cc, pkt);
            av_packet_unref(pkt);
        }
        if (err == AVERROR_INVALIDDATA && v->d->image.allow_warnings)
            err = 0; /* concealed where it can be, else the packet dropped */
        if (err == AVERROR(EAGAIN)) /* never: every frame is received before the next send */
            err = AVERROR_BUG;
        if (err < 0 && err != AVERROR_EOF)
            return fail(v, err, decoding_at(v, last_pts));
        rc = receive(v, &p, fb, clip, stamps);
        if (rc > 0)
            rc = 0;
    }
    if (rc)
        return rc;
    if (!p.have_prev)
        return sl__set_error(SL_ECORRUPT, "no frame decoded");
    if (p.j < v->nt) { /* past the last frame */
        double want = at_time(v, v->t[p.j].tick), end = at_time(v, p.prev_tick) + v->step;
        if (v->stream_duration && want < v->duration && end + 0.5 < v->duration)
            return sl__set_error(SL_ECORRUPT, "truncated: the frames end at %.3f s of %.3f s",
                                 end, v->duration);
        if (v->d->video.short_clips == SL_SHORT_CLIP_ERROR)
            return sl__set_error(SL_ERANGE, "a clip to %.3f s is longer than the video (%.3f s)",
                                 at_time(v, v->t[v->nt - 1].tick), end);
        rc = settle(v, &p, INT64_MAX, fb, clip, stamps);
    }
    return rc;
}

static int decode_clips(const map_video_ds *d, sl__rng *rng, const sl_element *in, void *clip,
                        double *stamps)
{
    vws *w = vws_get();
    if (!w)
        return SL_ENOMEM;
    int n = d->video.num_clips * d->video.frames;
    size_t size = sizeof(video) + (size_t)(d->video.num_clips - 1) * sizeof(sl__image_view);
    video *v = sl__calloc(1, size);
    target *t = sl__alloc((size_t)n * sizeof *t);
    if (!v || !t) {
        sl__free(v, size);
        sl__free(t, (size_t)n * sizeof *t);
        return sl__set_error(SL_ENOMEM, "out of memory (video)");
    }
    *v = (video){.d = d, .w = w, .t = t, .nt = n, .ff = {.src = {.fd = -1, .obj = -1}}};
    sl__ff_begin();
    int rc = video_open(v, in);
    size_t fb = sl__image_bytes(&d->image);
    if (rc == 0) {
        plan_clips(v, rng, clip, fb);
        rc = decode_frames(v, fb, clip, stamps);
    }
    sl__ff_end();
    video_close(v);
    sl__free(t, (size_t)n * sizeof *t);
    sl__free(v, size);
    return rc;
}

#endif /* SLUICE_NO_FFMPEG */


/* ---- the dataset ---- */

static int map_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    const map_video_ds *d = user;
    int k = d->video.video_index, stamps = d->video.with_timestamps;
    if (in->n <= k)
        return sl__set_error(SL_EINVAL, "map_video: an element of %d tensors has no tensor %d",
                             in->n, k);
    sl_element *el = sl__image_rest(in, 1 + stamps);
    if (!el)
        return SL_ENOMEM;
    void *clip = NULL;
    double *times = NULL;
    int rc = 0;
    for (int j = 0; rc == 0 && j < in->n; j++) {
        if (j != k) {
            rc = sl_element_add_shared(el, in, j);
            continue;
        }
        int64_t shape[SL_MAX_DIMS];
        int nd = clip_shape(d, shape);
        size_t bytes = sl__image_bytes(&d->image) * (size_t)d->video.frames *
                       (size_t)d->video.num_clips;
        struct sl_tensor *t = sl__element_push(el, d->image.dtype, nd, shape, bytes);
        rc = t ? 0 : SL_ENOMEM;
        clip = t ? t->data : NULL;
        if (rc == 0 && stamps) {
            nd = stamp_shape(d, shape);
            t = sl__element_push(el, SL_FLOAT64, nd, shape,
                                 (size_t)d->video.frames * d->video.num_clips * sizeof(double));
            rc = t ? 0 : SL_ENOMEM;
            times = t ? t->data : NULL;
        }
    }
    if (rc == 0)
        rc = decode_clips(d, &ctx->rng, in, clip, times);
    if (rc < 0 && rc != SL_ENOMEM) {
        const struct sl_tensor *t = &in->t[k];
        size_t len = 0;
        const char *s = t->dtype == SL_STRING && t->ndim == 0 && d->video.input == SL_VIDEO_AUTO
                            ? sl_tensor_string(t, 0, &len)
                            : NULL;
        char name[1024];
        if (s)
            snprintf(name, sizeof name, "%.*s", (int)(len < 1000 ? len : 1000), s);
        const char *path = s ? name : element_path(in, k);
        if (path)
            sl__error_prefix(path);
    }
    if (rc < 0) {
        sl_element_release(el);
        return rc;
    }
    *out = el;
    return 0;
}

static int map_video_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                          sl__iter **out)
{
    const map_video_ds *d = (const map_video_ds *)ds;
    return sl__map_iter_make(ds, tree, key, epoch, map_fn, (void *)d, d->parallelism, 0, out);
}

static uint64_t map_video_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const map_video_ds *d = (const map_video_ds *)ds;
    const sl_video_spec *v = &d->video;
    h = sl__image_spec_hash(h, &d->image);
    const int64_t f[] = {v->frames, v->stride, v->clip_sampler, v->num_clips, v->video_index,
                         v->input, v->short_clips, v->with_timestamps, v->max_frames};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        h = sl__hash_u64(h, (uint64_t)f[i]);
    uint64_t fps;
    memcpy(&fps, &v->fps, sizeof fps);
    return sl__hash_u64(h, fps);
}

static int64_t map_video_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

/* The video's leaf becomes the clip, followed by its timestamps. */
static void video_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    const map_video_ds *d = arg;
    if (leaf != d->video.video_index) {
        sl__stext_leaf(t, spec);
        return;
    }
    sl__leaf_spec clip = {.dtype = d->image.dtype};
    clip.ndim = clip_shape(d, clip.shape);
    if (!d->video.with_timestamps) {
        sl__stext_leaf(t, &clip);
        return;
    }
    sl__leaf_spec ts = {.dtype = SL_FLOAT64};
    ts.ndim = stamp_shape(d, ts.shape);
    sl__stext_puts(t, "(");
    sl__stext_leaf(t, &clip);
    sl__stext_puts(t, ", ");
    sl__stext_leaf(t, &ts);
    sl__stext_puts(t, ")");
}

static sl_structure *map_video_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, video_leaf, (void *)ds) : NULL;
}

static const sl__node_ops map_video_ops = {
    .kind = "map_video",
    .make_iter = map_video_make,
    .cardinality = map_video_cardinality,
    .fingerprint = map_video_fingerprint,
    .structure = map_video_structure,
};

SL_API sl_dataset *sl_map_video(sl_dataset *in, const sl_video_spec *video,
                                const sl_image_spec *image, int parallelism)
{
    map_video_ds *d = (map_video_ds *)sl__dataset_new(&map_video_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if (!video || !image)
        return sl__dataset_fail(&d->base, SL_EINVAL, "map_video: NULL spec");
    int rc = sl__struct_load(video, &d->video, NULL, sizeof d->video, SPEC_V1_SIZE,
                             "map_video");
    if (rc == 0)
        rc = sl__image_spec_load(image, &d->image);
    if (rc == 0)
        rc = sl__image_spec_check(&d->image);
    if (rc == 0)
        rc = check_video(&d->video, &d->image);
    if (rc < 0) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    if ((parallelism < 1 && parallelism != SL_AUTOTUNE) || parallelism > 4096)
        return sl__dataset_fail(&d->base, SL_EINVAL, "map_video: bad parallelism %d",
                                parallelism);
    d->parallelism = parallelism;
    return &d->base;
}
