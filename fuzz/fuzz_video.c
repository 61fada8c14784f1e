/* map_video's demux and decode path: a video's bytes (uint8 [n]) through
 * the whitelisted demuxers and decoders, the clip planner, the seeks and
 * the frame picking, the plane resampler, under the skip policy. The
 * input's size picks the clip's shape and sampler. */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_element *el = sl_element_create(1);
    int64_t shape[1] = {(int64_t)size};
    void *p = sl_element_add_tensor(el, SL_UINT8, 1, shape);
    if (p && size)
        memcpy(p, data, size);
    sl_dataset *src = sl_from_element(el); /* retains it */
    sl_element_release(el);
    sl_video_spec v;
    sl_image_spec im;
    SL_VIDEO_SPEC_INIT(&v);
    SL_IMAGE_SPEC_INIT(&im, size & 1 ? SL_CROP_RANDOM_RESIZED : SL_CROP_RESIZE, 8);
    im.max_pixels = (int64_t)1 << 20;
    v.frames = 2 + (int)(size % 3);
    v.stride = 1 + (int)(size >> 2) % 3;
    v.num_clips = 1 + (int)(size >> 4 & 1);
    v.clip_sampler = (int)(size >> 5) % 3;
    v.short_clips = (int)(size >> 7 & 1);
    fuzz_drain(sl_map_video(src, &v, &im, 1), SL_ERRORS_SKIP);
    return 0;
}

/* A few frames of a moving gradient, encoded by libavcodec's own MPEG-4
 * encoder (no outside library) with a B-frame, into one container. */
static size_t make_video(const char *muxer, uint8_t **out)
{
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_MPEG4);
    const AVOutputFormat *of = av_guess_format(muxer, NULL, NULL);
    AVFormatContext *fc = NULL;
    AVCodecContext *cc = codec ? avcodec_alloc_context3(codec) : NULL;
    AVFrame *f = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    size_t n = 0;
    *out = NULL;
    if (!cc || !of || !f || !pkt || avformat_alloc_output_context2(&fc, of, NULL, NULL) < 0)
        goto done;
    cc->width = 32, cc->height = 24, cc->pix_fmt = AV_PIX_FMT_YUV420P;
    cc->time_base = (AVRational){1, 10};
    cc->framerate = (AVRational){10, 1};
    cc->gop_size = 4, cc->max_b_frames = 1;
    if (fc->oformat->flags & AVFMT_GLOBALHEADER)
        cc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVStream *st = avformat_new_stream(fc, NULL);
    if (!st || avcodec_open2(cc, codec, NULL) < 0 ||
        avcodec_parameters_from_context(st->codecpar, cc) < 0 ||
        avio_open_dyn_buf(&fc->pb) < 0)
        goto done;
    st->time_base = cc->time_base;
    AVDictionary *opt = NULL;
    av_dict_set(&opt, "movflags", "frag_keyframe+empty_moov", 0); /* MP4 with no seek back */
    int err = avformat_write_header(fc, &opt);
    av_dict_free(&opt);
    if (err < 0)
        goto done;
    for (int i = 0; i <= 8; i++) {
        if (i < 8) {
            f->width = 32, f->height = 24, f->format = AV_PIX_FMT_YUV420P;
            if (av_frame_get_buffer(f, 0) < 0)
                break;
            for (int y = 0; y < 24; y++)
                for (int x = 0; x < 32; x++)
                    f->data[0][y * f->linesize[0] + x] = (uint8_t)(x * 6 + y * 3 + i * 9);
            for (int c = 1; c < 3; c++)
                for (int y = 0; y < 12; y++)
                    memset(f->data[c] + y * f->linesize[c], 100 + 20 * c + i * 3, 16);
            f->pts = i;
        }
        if (avcodec_send_frame(cc, i < 8 ? f : NULL) < 0)
            break;
        av_frame_unref(f);
        while (avcodec_receive_packet(cc, pkt) == 0) {
            av_packet_rescale_ts(pkt, cc->time_base, st->time_base);
            pkt->stream_index = 0;
            av_interleaved_write_frame(fc, pkt);
        }
    }
    av_write_trailer(fc);
    uint8_t *buf = NULL;
    int len = avio_close_dyn_buf(fc->pb, &buf);
    fc->pb = NULL;
    if (len > 0 && (*out = malloc((size_t)len))) {
        memcpy(*out, buf, (size_t)len);
        n = (size_t)len;
    }
    av_free(buf);
done:
    if (fc && fc->pb) {
        uint8_t *buf = NULL;
        avio_close_dyn_buf(fc->pb, &buf);
        av_free(buf);
    }
    avformat_free_context(fc);
    avcodec_free_context(&cc);
    av_frame_free(&f);
    av_packet_free(&pkt);
    return n;
}

/* Seeds: the same frames in Matroska, fragmented MP4 and MPEG-TS (ways
 * to write them that need no seekable output). */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    const char *muxers[] = {"matroska", "mp4", "mpegts"};
    for (int i = 0; i < 3; i++) {
        uint8_t *v;
        size_t n = make_video(muxers[i], &v);
        if (n)
            add(v, n);
        free(v);
    }
}
