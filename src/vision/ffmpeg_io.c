/*
 * FFmpeg's side shared by map_video and map_audio (ffmpeg_io.h): the
 * AVIOContext over sluice's reads, the whitelisted demuxer, the decoder,
 * and the log kept per thread.
 */
#ifndef SLUICE_NO_FFMPEG

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/error.h"
#include "../remote/remote.h"
#include "../runtime/runtime.h"
#include "ffmpeg_io.h"

/* What sluice opens: demuxers (video and audio containers) and the
 * decoders map_video and map_audio allow, by name. */
#define FORMATS                                                                             \
    "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,flv,ivf,ogg,m4v,wav,flac,mp3,aac," \
    "w64"
#define CODECS                                                                              \
    "h264,hevc,mpeg4,mpeg1video,mpeg2video,vp8,vp9,libdav1d,av1,theora,mjpeg,aac,mp3float," \
    "mp3,flac,vorbis,opus,libopus,pcm_s16le,pcm_s24le,pcm_s32le,pcm_f32le,pcm_u8,pcm_s16be," \
    "pcm_f64le,pcm_mulaw,pcm_alaw"

/* ---- FFmpeg's log ----
 *
 * While a worker decodes for sluice, what FFmpeg logs on that thread is
 * kept (the last warning or error, for the element's message) instead of
 * printed; everything else goes to FFmpeg's own printer, as before. */
static _Thread_local bool capturing;
static _Thread_local char last_log[256];

static void log_hook(void *avcl, int level, const char *fmt, va_list vl)
{
    if (!capturing) {
        av_log_default_callback(avcl, level, fmt, vl);
        return;
    }
    if (level > AV_LOG_WARNING)
        return;
    char line[256];
    int prefix = 0;
    av_log_format_line(avcl, level, fmt, vl, line, sizeof line, &prefix);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
        line[--n] = 0;
    if (n)
        memcpy(last_log, line, n + 1);
}

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_init(void)
{
    av_log_set_callback(log_hook);
}

void sl__ff_begin(void)
{
    pthread_once(&log_once, log_init);
    capturing = true;
    last_log[0] = 0;
}

void sl__ff_end(void)
{
    capturing = false;
}

int sl__ff_fail(const sl__ff *f, int err, const char *what)
{
    if (f->src.code)
        return f->src.code;
    int code = err == AVERROR(ENOMEM) ? SL_ENOMEM : SL_ECORRUPT;
    if (last_log[0])
        return sl__set_error(code, "%s: %s", what, last_log);
    char buf[128];
    av_strerror(err, buf, sizeof buf);
    return sl__set_error(code, "%s: %s", what, buf);
}

/* ---- the bytes ---- */

/* The calling thread's URL engine, made at its first URL. */
static pthread_key_t http_key;
static pthread_once_t http_once = PTHREAD_ONCE_INIT;

static void http_destroy(void *p)
{
    sl__io_close(p);
}

static void http_init(void)
{
    pthread_key_create(&http_key, http_destroy);
}

static int thread_http(sl__io **out)
{
    pthread_once(&http_once, http_init);
    sl__io *io = pthread_getspecific(http_key);
    if (!io) {
        static const sl__http_opts defaults = {8, 120, 30};
        int rc = sl__http_open(1, &defaults, &io);
        if (rc < 0)
            return rc;
        pthread_setspecific(http_key, io);
    }
    *out = io;
    return 0;
}

static int src_fail(sl__ff_src *s, int code)
{
    if (!s->code)
        s->code = code;
    return AVERROR(EIO);
}

static int read_http(sl__ff_src *s, uint8_t *buf, size_t n)
{
    int rc = sl__io_prep(s->http, s->obj, buf, n, s->pos, NULL);
    if (rc == 0)
        rc = sl__io_submit(s->http);
    sl__io_cqe cqe;
    if (rc == 0 && (rc = sl__io_reap(s->http, &cqe, 1, true)) == 1) {
        if (cqe.code)
            return sl__set_error(cqe.code, "%s", cqe.msg);
        s->size = sl__http_size(s->http, s->obj);
        return (int)cqe.res;
    }
    return rc < 0 ? rc : sl__set_error(SL_EIO, "a read returned nothing");
}

static int src_read(void *opaque, uint8_t *buf, int want)
{
    sl__ff_src *s = opaque;
    if (s->code)
        return AVERROR(EIO);
    if (s->pos >= s->size)
        return AVERROR_EOF;
    size_t n = (size_t)want;
    if (s->size != UINT64_MAX && n > s->size - s->pos)
        n = (size_t)(s->size - s->pos);
    int64_t got;
    if (s->mem) {
        memcpy(buf, s->mem + s->pos, n);
        got = (int64_t)n;
    } else {
        /* the worker blocks here: the map node counts it as I/O */
        int64_t t0 = sl__now_ns();
        if (s->http) {
            got = read_http(s, buf, n);
        } else {
            do
                got = pread(s->fd, buf, n, (off_t)s->pos);
            while (got < 0 && errno == EINTR);
            if (got < 0)
                got = sl__set_error(SL_EIO, "read failed at byte %llu: %s",
                                    (unsigned long long)s->pos, strerror(errno));
        }
        sl__thread_blocked.ns += sl__now_ns() - t0;
        sl__thread_blocked.bytes += got > 0 ? got : 0;
    }
    if (got < 0)
        return src_fail(s, (int)got);
    if (got == 0)
        return AVERROR_EOF;
    s->pos += (uint64_t)got;
    return (int)got;
}

static int64_t src_seek(void *opaque, int64_t off, int whence)
{
    sl__ff_src *s = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE)
        return s->size == UINT64_MAX ? -1 : (int64_t)s->size;
    int64_t at = whence == SEEK_SET   ? off
                 : whence == SEEK_CUR ? (int64_t)s->pos + off
                 : whence == SEEK_END && s->size != UINT64_MAX ? (int64_t)s->size + off
                                                               : -1;
    if (at < 0)
        return AVERROR(EINVAL);
    s->pos = (uint64_t)at;
    return at;
}

/* No file or URL besides the one given: HLS playlists, concat lists and
 * the like stop here. */
static int refuse_open(AVFormatContext *fc, AVIOContext **pb, const char *url, int flags,
                       AVDictionary **options)
{
    (void)fc, (void)pb, (void)flags, (void)options;
    snprintf(last_log, sizeof last_log, "the file asks to open another (%.160s): refused", url);
    return AVERROR(EPERM);
}

static int open_source(sl__ff_src *s, const struct sl_tensor *t, bool as_bytes)
{
    *s = (sl__ff_src){.fd = -1, .size = UINT64_MAX, .obj = -1};
    if (t->dtype == SL_UINT8 && t->ndim == 1) {
        s->mem = t->data ? t->data : (const uint8_t *)"";
        s->size = t->nbytes;
        return 0;
    }
    size_t n = 0;
    const char *str = t->dtype == SL_STRING && t->ndim == 0 ? sl_tensor_string(t, 0, &n) : NULL;
    if (!str)
        return sl__set_error(SL_EDTYPE, "the file's bytes (uint8 [n]) or its path (a "
                             "string) expected");
    if (as_bytes) {
        s->mem = (const uint8_t *)str;
        s->size = n;
        return 0;
    }
    char path[4096];
    if (n >= sizeof path || memchr(str, 0, n))
        return sl__set_error(SL_EINVAL, "a path of %zu bytes", n);
    memcpy(path, str, n);
    path[n] = 0;
    if (sl__is_url(path)) {
        int rc = thread_http(&s->http);
        if (rc == 0 && (s->obj = sl__http_add(s->http, path)) < 0)
            rc = s->obj;
        return rc;
    }
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (s->fd < 0 || fstat(s->fd, &sb) < 0)
        return sl__set_error(errno == ENOENT ? SL_ENOENT : SL_EIO, "%s", strerror(errno));
    s->size = (uint64_t)sb.st_size;
    return 0;
}

void sl__ff_close(sl__ff *f)
{
    avcodec_free_context(&f->cc);
    avformat_close_input(&f->fc);
    if (f->avio)
        av_freep(&f->avio->buffer);
    avio_context_free(&f->avio);
    if (f->src.fd >= 0)
        close(f->src.fd);
    if (f->src.obj >= 0)
        sl__http_drop(f->src.http, f->src.obj);
    f->src.fd = f->src.obj = -1;
}

static bool codec_ok(enum AVCodecID id, const enum AVCodecID *codecs, int n)
{
    for (int i = 0; i < n; i++)
        if (codecs[i] == id)
            return true;
    return false;
}

int sl__ff_open(sl__ff *f, const struct sl_tensor *t, bool as_bytes, enum AVMediaType type,
                const enum AVCodecID *codecs, int ncodecs, int64_t max_pixels, bool strict)
{
    *f = (sl__ff){.src = {.fd = -1, .obj = -1}};
    int rc = open_source(&f->src, t, as_bytes);
    if (rc)
        return rc;
    enum { BUF = 1 << 16 };
    uint8_t *buf = av_malloc(BUF);
    if (!buf || !(f->avio = avio_alloc_context(buf, BUF, 0, &f->src, src_read, NULL, src_seek))) {
        av_free(buf);
        return sl__set_error(SL_ENOMEM, "out of memory (FFmpeg)");
    }
    if (!(f->fc = avformat_alloc_context()))
        return sl__set_error(SL_ENOMEM, "out of memory (FFmpeg)");
    f->fc->pb = f->avio;
    f->fc->flags |= AVFMT_FLAG_CUSTOM_IO;
    f->fc->io_open = refuse_open;
    AVDictionary *opt = NULL;
    av_dict_set(&opt, "format_whitelist", FORMATS, 0);
    av_dict_set(&opt, "codec_whitelist", CODECS, 0);
    av_dict_set(&opt, "protocol_whitelist", "none", 0);
    int err = avformat_open_input(&f->fc, NULL, NULL, &opt);
    av_dict_free(&opt);
    const char *kind = type == AVMEDIA_TYPE_VIDEO ? "video" : "audio";
    if (err < 0)
        return sl__ff_fail(f, err, type == AVMEDIA_TYPE_VIDEO ? "not a video sluice reads"
                                                              : "not audio sluice reads");
    int si = av_find_best_stream(f->fc, type, -1, -1, NULL, 0);
    if (si >= 0 && (f->fc->streams[si]->disposition & AV_DISPOSITION_ATTACHED_PIC))
        si = -1;
    /* a container that says too little in its header (Matroska has no
     * start time, raw streams no size): FFmpeg reads the first packets,
     * as PyAV and torchvision always have it do, for the same clock */
    if (si < 0 || f->fc->streams[si]->start_time == AV_NOPTS_VALUE ||
        (type == AVMEDIA_TYPE_VIDEO && f->fc->streams[si]->codecpar->width <= 0)) {
        for (unsigned i = 0; si >= 0 && i < f->fc->nb_streams; i++)
            if ((int)i != si)
                f->fc->streams[i]->discard = AVDISCARD_ALL;
        if ((err = avformat_find_stream_info(f->fc, NULL)) < 0)
            return sl__ff_fail(f, err, "reading the streams");
        si = av_find_best_stream(f->fc, type, -1, -1, NULL, 0);
    }
    if (si < 0 || (f->fc->streams[si]->disposition & AV_DISPOSITION_ATTACHED_PIC))
        return sl__set_error(SL_ECORRUPT, "no %s stream", kind);
    for (unsigned i = 0; i < f->fc->nb_streams; i++)
        if ((int)i != si)
            f->fc->streams[i]->discard = AVDISCARD_ALL;
    f->si = si;
    f->st = f->fc->streams[si];
    const AVCodecParameters *par = f->st->codecpar;
    if (!codec_ok(par->codec_id, codecs, ncodecs))
        return sl__set_error(SL_EUNSUPPORTED, "%s codec %s is not one sluice decodes", kind,
                             avcodec_get_name(par->codec_id));
    const AVCodec *codec = par->codec_id == AV_CODEC_ID_AV1 ? avcodec_find_decoder_by_name("libdav1d")
                                                            : NULL;
    if (!codec)
        codec = avcodec_find_decoder(par->codec_id);
    if (!codec)
        return sl__set_error(SL_EUNSUPPORTED, "this FFmpeg has no %s decoder",
                             avcodec_get_name(par->codec_id));
    if (type == AVMEDIA_TYPE_VIDEO) {
        if (par->width <= 0 || par->height <= 0)
            return sl__set_error(SL_ECORRUPT, "frames of %dx%d", par->width, par->height);
        if ((int64_t)par->width * par->height > max_pixels)
            return sl__set_error(SL_ERANGE, "frames of %dx%d are over max_pixels (%lld)",
                                 par->width, par->height, (long long)max_pixels);
    }
    if (!(f->cc = avcodec_alloc_context3(codec)))
        return sl__set_error(SL_ENOMEM, "out of memory (FFmpeg)");
    if ((err = avcodec_parameters_to_context(f->cc, par)) < 0)
        return sl__ff_fail(f, err, "the decoder");
    f->cc->thread_count = 1; /* one file per worker; the pool is the parallelism */
    f->cc->pkt_timebase = f->st->time_base;
    if (type == AVMEDIA_TYPE_VIDEO)
        f->cc->max_pixels = max_pixels;
    if (strict)
        f->cc->err_recognition |= AV_EF_EXPLODE | AV_EF_CRCCHECK;
    if ((err = avcodec_open2(f->cc, codec, NULL)) < 0)
        return sl__ff_fail(f, err, "opening the decoder");
    return 0;
}

#else
typedef int sl__ffmpeg_io_unused;
#endif
