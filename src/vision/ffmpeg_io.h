/* What map_video and map_audio share of FFmpeg: a file's bytes through an
 * AVIOContext over sluice's reads (the element's bytes, a local file by
 * pread, or a URL by ranges through the calling thread's HTTP engine),
 * the demuxer opened with sluice's whitelists and no way to open another
 * file, one stream's decoder on one thread, and FFmpeg's log kept for the
 * element's message while a worker decodes. Built only with FFmpeg. */
#ifndef SL_VISION_FFMPEG_IO_H
#define SL_VISION_FFMPEG_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include "../core/element.h"
#include "../runtime/io.h"

typedef struct sl__ff_src {
    const uint8_t *mem; /* bytes in the element */
    int fd;             /* or a local file, */
    sl__io *http;       /* or an object of the thread's URL engine */
    int obj;
    uint64_t size, pos; /* size UINT64_MAX: not known yet */
    int code;           /* the first failure (its message set), else 0 */
} sl__ff_src;

typedef struct sl__ff {
    sl__ff_src src;
    AVIOContext *avio;
    AVFormatContext *fc;
    AVCodecContext *cc;
    AVStream *st;
    int si;
} sl__ff;

/* Brackets one element's work on the calling thread: FFmpeg's log goes
 * into the thread's last message instead of stderr. */
void sl__ff_begin(void);
void sl__ff_end(void);

/* Opens tensor t's video or audio (uint8 [n] bytes; a string: its path or
 * URL, or with as_bytes its bytes), its best stream of `type` (a video
 * stream that is a cover picture is none) decoded by one of `codecs`
 * (ncodecs, AV1 by libdav1d first), on one thread, max_pixels and, with
 * strict, corrupt data an error. 0 or a code with the message set; close
 * in any case. */
int sl__ff_open(sl__ff *f, const struct sl_tensor *t, bool as_bytes, enum AVMediaType type,
                const enum AVCodecID *codecs, int ncodecs, int64_t max_pixels, bool strict);
void sl__ff_close(sl__ff *f);

/* An FFmpeg failure `err` during `what`, or the read under it: the code
 * with the message set (FFmpeg's last logged error where there is one). */
int sl__ff_fail(const sl__ff *f, int err, const char *what);

#endif
