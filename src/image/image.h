/*
 * Internal interfaces of the image layer: crop planning, region-of-interest
 * JPEG decode and the resampler. The map_image op (vision/map_image.c)
 * composes them:
 *
 *   header -> sl__crop_plan (window in source pixels, flip)
 *          -> sl__jpeg_decode (only the window, DCT-scaled when the scaled
 *             window still covers the output)
 *          -> sl__resize (window -> output, flip, layout, dtype, normalise)
 */
#ifndef SL_IMAGE_IMAGE_H
#define SL_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../core/rng.h"
#include "sluice.h"

/* ---- crop planning (crop.c) ---- */

typedef struct sl__window {
    double x, y, w, h; /* in source pixels; inside [0, W] x [0, H] */
} sl__window;

/* The source window for an image of w x h under spec, and whether to flip.
 * RandomResizedCrop follows torchvision exactly (10 attempts with area
 * fraction uniform in [scale_min, scale_max] and log-uniform ratio, integer
 * sizes rounded as torchvision does, then the centre fallback clamping the
 * ratio); centre: Resize(shorter -> resize_shorter) + CenterCrop expressed
 * in source pixels; resize: the whole image. Draws from rng only what the
 * policy needs, flip last. */
void sl__crop_plan(const sl_image_spec *spec, int w, int h, sl__rng *rng, sl__window *win,
                   bool *flip);

/* ---- JPEG decode (jpeg.c) ---- */

typedef struct sl__jpeg sl__jpeg; /* a decoder with reusable scratch; one per thread */

sl__jpeg *sl__jpeg_new(void);
void sl__jpeg_free(sl__jpeg *dec);

typedef struct sl__jpeg_info {
    int width, height;
    int components; /* 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK */
    bool progressive;
} sl__jpeg_info;

/* Reads the header. Returns 0, or a negative code with the thread's error
 * message set to the reason (no file name: the caller prefixes it):
 * SL_ECORRUPT for "not a JPEG (...)", truncation, corrupt data;
 * SL_ERANGE when width*height > max_pixels (checked before any pixel
 * buffer is allocated). */
int sl__jpeg_header(sl__jpeg *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                    sl__jpeg_info *info);

typedef struct sl__decoded {
    const uint8_t *rgb;   /* interleaved RGB, owned by dec, valid until its next call */
    int width, height;    /* of the decoded region */
    size_t stride;        /* bytes per row */
    sl__window win;       /* the requested window in the region's pixels */
    int scale_denom;      /* DCT scale used: 1, 2, 4 or 8 */
} sl__decoded;

/* Decodes the part of the image that covers `win` (source pixels), at the
 * smallest DCT scale 1/d (d in 1, 2, 4, 8) for which the scaled window is
 * still at least out_w x out_h; columns limited with jpeg_crop_scanline,
 * rows above skipped with jpeg_skip_scanlines, rows below never decoded.
 * Always RGB (gray and CMYK/YCCK converted). flags: SL__JPEG_ALLOW_WARNINGS
 * (otherwise warnings are errors), SL__JPEG_FAST_UPSAMPLE (plain chroma
 * upsampling, merged with colour conversion). Must follow a successful
 * sl__jpeg_header on the same data (it reuses the parsed header). Errors as
 * for sl__jpeg_header. */
enum { SL__JPEG_ALLOW_WARNINGS = 1, SL__JPEG_FAST_UPSAMPLE = 2 };
int sl__jpeg_decode(sl__jpeg *dec, const uint8_t *data, size_t n, const sl__window *win,
                    int out_w, int out_h, unsigned flags, sl__decoded *out);

/* One component of a YCbCr decode: samples at its own resolution. */
typedef struct sl__plane {
    const uint8_t *data; /* owned by dec, valid until its next call */
    int width, height;
    size_t stride;
    sl__window win;      /* the requested window in this plane's samples */
} sl__plane;

/* How Y, Cb and Cr become R, G and B when they are not JFIF's (BT.601,
 * full range): a video stream's matrix and range. Q16 fixed point, the
 * range's chroma gain in the chroma weights: y' = (y - y_off) * y_gain,
 * R = y' + cr_r (cr - 128), G = y' - cb_g (cb - 128) - cr_g (cr - 128),
 * B = y' + cb_b (cb - 128). */
typedef struct sl__ycc_matrix {
    int32_t y_off, y_gain;
    int32_t cr_r, cb_g, cr_g, cb_b;
} sl__ycc_matrix;

/* The matrix of luma weights kr and kb (BT.601: 0.299, 0.114; BT.709:
 * 0.2126, 0.0722; BT.2020: 0.2627, 0.0593), limited range (Y 16-235,
 * chroma 16-240) or full. */
void sl__ycc_matrix_make(double kr, double kb, bool full_range, sl__ycc_matrix *m);

typedef struct sl__ycc {
    sl__plane plane[3];  /* Y, Cb, Cr; Cb and Cr sampled alike */
    int scale_denom;
    /* NULL: JFIF's conversion (the kernels' own); else this one, in the
     * portable pass (a colour transform is then not folded in) */
    const sl__ycc_matrix *matrix;
} sl__ycc;

/* The window as raw YCbCr planes (jpeg_read_raw_data): no upsampling and
 * no colour conversion, so that the resize reads chroma at its own
 * resolution and converts once per output pixel (sl__resize_ycc). The
 * same DCT scale and iMCU columns as sl__jpeg_decode; rows above the
 * window are inverse-transformed and dropped (raw mode cannot skip), rows
 * below never decoded. Returns SL__JPEG_NOT_YCC (positive, nothing done:
 * sl__jpeg_decode still works on the parsed header) for files that are
 * not YCbCr with luma at the highest sampling and both chroma components
 * alike (gray, CMYK, RGB-coded), otherwise as sl__jpeg_decode. */
enum { SL__JPEG_NOT_YCC = 1 };
int sl__jpeg_decode_ycc(sl__jpeg *dec, const uint8_t *data, size_t n, const sl__window *win,
                        int out_w, int out_h, unsigned flags, sl__ycc *out);

/* Full-size RGB decode (the --ceiling reference and tests). */
int sl__jpeg_decode_full(sl__jpeg *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                         unsigned flags, sl__decoded *out);

/* ---- other formats (png.c, webp.c) ---- */

/* What the bytes' signature says: never the file's name. */
enum { SL__FMT_OTHER, SL__FMT_JPEG, SL__FMT_PNG, SL__FMT_WEBP };
int sl__image_format(const uint8_t *data, size_t n);
/* NULL when this build decodes format fmt (JPEG's decoder also judges
 * SL__FMT_OTHER), else why not, for the error. */
const char *sl__image_missing(int fmt);

typedef struct sl__png sl__png;   /* reusable scratch; one per thread */
typedef struct sl__webp sl__webp;

/* NULL: out of memory, or a build without the decoder (then the header
 * call says so). */
sl__png *sl__png_new(void);
void sl__png_free(sl__png *dec);
/* The header, after checking every chunk's CRC and the IEND (without it:
 * truncated, unless flags has SL__JPEG_ALLOW_WARNINGS), so that the verdict
 * does not depend on the window; SL_ERANGE past max_pixels, before any
 * pixel is allocated. Errors as sl__jpeg_header's. */
int sl__png_header(sl__png *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                   unsigned flags, sl__jpeg_info *info);
/* RGB rows from the top to the window's last (Adam7: all), full width,
 * after a successful sl__png_header on the same data. background: NULL
 * drops alpha; else {r, g, b} the image is composited over. */
int sl__png_decode(sl__png *dec, const uint8_t *data, size_t n, const sl__window *win,
                   const int *background, sl__decoded *out);

sl__webp *sl__webp_new(void);
void sl__webp_free(sl__webp *dec);
int sl__webp_header(sl__webp *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                    sl__jpeg_info *info);
/* Only the window (libwebp's cropping), scaled down by the largest whole
 * factor that keeps it at least out_w x out_h. background as for PNG. */
int sl__webp_decode(sl__webp *dec, const uint8_t *data, size_t n, const sl__window *win,
                    int out_w, int out_h, const int *background, sl__decoded *out);

/* Rows of RGBA (stride apart) become RGB in place, each pixel composited
 * over background {r, g, b}: the first 3 * w bytes of each row. */
void sl__blend_rows(uint8_t *rows, int w, int h, size_t stride, const int *background);

/* ---- raw decode (SL_DECODE_RAW; raw.c resamples) ---- */

/* A decode in the file's own terms. */
typedef struct sl__raw {
    const uint8_t *data;  /* owned by the decoder, valid until its next call */
    int width, height;
    size_t stride;        /* bytes per row */
    int channels;         /* 1 gray (or palette indices), 2 gray+alpha, 3 RGB, 4 RGBA */
    int bytes;            /* per sample: 1, or 2 (uint16, host order) */
    int step;             /* bytes from a pixel to the next */
    sl__window win;       /* the requested window in these pixels */
} sl__raw;

/* PNG: rows to the window's last, as sl__png_decode, in the file's own
 * channels and depth, except that a palette is looked up (RGB or RGBA,
 * its tRNS the alpha) when `channels` (the output's) is 3 or 4. */
int sl__png_decode_raw(sl__png *dec, const uint8_t *data, size_t n, const sl__window *win,
                       int channels, sl__raw *out);
/* WebP: the window, unscaled, RGB or (a file with alpha) RGBA. */
int sl__webp_decode_raw(sl__webp *dec, const uint8_t *data, size_t n, const sl__window *win,
                        sl__raw *out);

/* Nearest-neighbour resampling of window win of src into dst: out_w x
 * out_h pixels of `channels` samples, dtype SL_UINT8 or SL_UINT16, layout
 * sl_layout, mirrored when flip. Each output pixel takes the source pixel
 * under its centre (PIL's NEAREST). Channels are matched as sl_image_decode
 * says (SL_EUNSUPPORTED for colour into gray; SL_ERANGE for 16-bit samples
 * into uint8). cols: scratch of out_w ints. */
int sl__raw_resample(const sl__raw *src, const sl__window *win, void *dst, int out_w, int out_h,
                     int channels, int dtype, int layout, bool flip, int *cols);

/* ---- resampling (resize.c, resize_ycc.c; resize_kernels.h lists the rest) ---- */

typedef struct sl__resize_out {
    void *data;       /* where the image goes (a batch slot) */
    int width, height;
    int layout;       /* sl_layout */
    int dtype;        /* SL_UINT8 or SL_FLOAT32 */
    bool flip;        /* mirror horizontally */
    float mean[3], std[3]; /* SL_FLOAT32: out = (v / 255 - mean) / std */
    /* sl__resize_ycc: a colour transform (augment.h) to fold into the
     * conversion, or NULL; sl__resize ignores it */
    const struct sl__colour *colour;
} sl__resize_out;

typedef struct sl__resizer sl__resizer; /* reusable scratch and weight tables; one per thread */

/* A resizer running the kernels chosen for this process (the widest
 * instruction set the CPU has, chosen on first use). NULL: out of memory. */
sl__resizer *sl__resizer_new(void);
void sl__resizer_free(sl__resizer *r);

/* Resamples window `win` of the RGB image src (w x h, stride) to out:
 * antialiased (triangle filter widened by the scale factor) when
 * shrinking, bilinear when growing, separable, fixed-point. Returns 0 or
 * SL_ENOMEM. */
int sl__resize(sl__resizer *r, const uint8_t *src, int w, int h, size_t stride,
               const sl__window *win, const sl__resize_out *out);
/* The same from YCbCr planes: each plane resampled from its own window
 * and resolution (chroma upsampling and the resize are one filter), then
 * converted to RGB per output pixel (BT.601 full range, as JFIF, or
 * src->matrix). */
int sl__resize_ycc(sl__resizer *r, const sl__ycc *src, const sl__resize_out *out);
/* Writes a whole uint8 RGB HWC image of out's size in out's layout and
 * dtype (flip not applied: the image has it). */
void sl__resize_store_image(sl__resizer *r, const uint8_t *rgb, const sl__resize_out *out);
/* Whether the planes beat the RGB window with r's kernels: only the
 * AVX-512 plane pass is fast enough (with SSE2's, the resize costs more
 * than the decode saves; bench/README.md, "YCbCr planes"). */
bool sl__resize_ycc_pays(const sl__resizer *r);

#endif
