/*
 * JPEG decode through libjpeg-turbo's libjpeg API: only the rows and iMCU
 * columns that cover the window, at the DCT scale 1/d (d in 1, 2, 4, 8) that
 * still leaves at least the output size. The TurboJPEG API of the 2.1
 * series (Debian 12) cannot crop, hence the libjpeg API.
 *
 * libjpeg reports errors through error_exit, which must not return: it
 * longjmps back to run(), the one setjmp, which aborts the decompressor so
 * the same object serves the next image. libjpeg's own working memory comes
 * from malloc inside libjpeg (its memory manager cannot be redirected
 * without rebuilding it); our output buffer is ours and is reused.
 */
#ifdef SLUICE_NO_JPEG
/* Built without libjpeg (SLUICE_WITH_JPEG=OFF): every decode is refused;
 * sl_map_image fails when the pipeline is built, before any of these runs. */
#include "../core/error.h"
#include "image.h"

#define NO_JPEG "JPEG decoding is not in this build (SLUICE_WITH_JPEG=OFF)"

sl__jpeg *sl__jpeg_new(void)
{
    sl__set_error(SL_EUNSUPPORTED, NO_JPEG);
    return NULL;
}

void sl__jpeg_free(sl__jpeg *dec)
{
    (void)dec;
}

int sl__jpeg_header(sl__jpeg *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                    sl__jpeg_info *info)
{
    (void)dec, (void)data, (void)n, (void)max_pixels, (void)info;
    return sl__set_error(SL_EUNSUPPORTED, NO_JPEG);
}

int sl__jpeg_decode(sl__jpeg *dec, const uint8_t *data, size_t n, const sl__window *win,
                    int out_w, int out_h, unsigned flags, sl__decoded *out)
{
    (void)dec, (void)data, (void)n, (void)win, (void)out_w, (void)out_h, (void)flags;
    (void)out;
    return sl__set_error(SL_EUNSUPPORTED, NO_JPEG);
}

int sl__jpeg_decode_full(sl__jpeg *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                         unsigned flags, sl__decoded *out)
{
    (void)dec, (void)data, (void)n, (void)max_pixels, (void)flags, (void)out;
    return sl__set_error(SL_EUNSUPPORTED, NO_JPEG);
}

int sl__jpeg_decode_ycc(sl__jpeg *dec, const uint8_t *data, size_t n, const sl__window *win,
                        int out_w, int out_h, unsigned flags, sl__ycc *out)
{
    (void)dec, (void)data, (void)n, (void)win, (void)out_w, (void)out_h, (void)flags;
    (void)out;
    return sl__set_error(SL_EUNSUPPORTED, NO_JPEG);
}
#else
#include <math.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which needs FILE and size_t */
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "image.h"

/* ISLOW, what PIL and torchvision decode with: IFAST is no faster with
 * libjpeg-turbo's SIMD IDCTs. Plain instead of fancy (triangle) chroma
 * upsampling is faster but not what they decode to, so it is the caller's
 * choice (SL__JPEG_FAST_UPSAMPLE, off by default). The figures behind both:
 * bench/README.md, "JPEG decode settings" (bench_decode). */
#define SL__JPEG_DCT JDCT_ISLOW

struct sl__jpeg {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    jmp_buf jb;
    bool stop_on_warning;
    int err_code;                 /* libjpeg's msg_code of the error */
    char err[JMSG_LENGTH_MAX];
    char warn[JMSG_LENGTH_MAX];   /* the first warning of this image */
    const uint8_t *data;          /* the data whose header is parsed, or NULL */
    size_t n;
    size_t scan_at;               /* where its first scan's entropy-coded data starts */
    uint8_t *buf;                 /* decoded rows; grows, never shrinks */
    size_t cap;
};

/* libjpeg's messages start with a capital ("Corrupt JPEG data: ...");
 * ours are lower case, but keep acronyms ("JPEG datastream ..."). */
static void format_msg(j_common_ptr c, char *dst)
{
    c->err->format_message(c, dst);
    if (dst[0] >= 'A' && dst[0] <= 'Z' && dst[1] >= 'a' && dst[1] <= 'z')
        dst[0] = (char)(dst[0] - 'A' + 'a');
}

static void error_exit(j_common_ptr c)
{
    sl__jpeg *dec = c->client_data;
    format_msg(c, dec->err);
    dec->err_code = c->err->msg_code;
    longjmp(dec->jb, 1);
}

static void emit_message(j_common_ptr c, int level)
{
    sl__jpeg *dec = c->client_data;
    if (level >= 0)
        return; /* trace messages */
    if (c->err->num_warnings++ == 0)
        format_msg(c, dec->warn);
    /* TurboJPEG's TJFLAG_STOPONWARNING does the same: a warning is an
     * error_exit the caller asked for. */
    if (dec->stop_on_warning) {
        snprintf(dec->err, sizeof dec->err, "%s", dec->warn);
        dec->err_code = c->err->msg_code;
        longjmp(dec->jb, 1);
    }
}

static void output_message(j_common_ptr c)
{
    (void)c; /* never print: messages go to the error */
}

sl__jpeg *sl__jpeg_new(void)
{
    sl__jpeg *dec = sl__calloc(1, sizeof *dec);
    if (!dec)
        return NULL;
    dec->cinfo.err = jpeg_std_error(&dec->jerr);
    dec->jerr.error_exit = error_exit;
    dec->jerr.emit_message = emit_message;
    dec->jerr.output_message = output_message;
    dec->cinfo.client_data = dec; /* kept by jpeg_create_decompress */
    if (setjmp(dec->jb)) {
        sl__set_error(SL_ENOMEM, "jpeg: cannot create a decoder: %s", dec->err);
        sl__free(dec, sizeof *dec);
        return NULL;
    }
    jpeg_create_decompress(&dec->cinfo);
    return dec;
}

void sl__jpeg_free(sl__jpeg *dec)
{
    if (!dec)
        return;
    jpeg_destroy_decompress(&dec->cinfo);
    sl__free_aligned(dec->buf, dec->cap, SL__ALIGN);
    sl__free(dec, sizeof *dec);
}

static int grow(sl__jpeg *dec, size_t need)
{
    if (need <= dec->cap)
        return 0;
    size_t cap = need + need / 4; /* geometry varies per image: grow ahead */
    uint8_t *p = sl__alloc_aligned(cap, SL__ALIGN);
    if (!p)
        return SL_ENOMEM;
    sl__free_aligned(dec->buf, dec->cap, SL__ALIGN);
    dec->buf = p;
    dec->cap = cap;
    return 0;
}

/* ---- errors ---- */

static const char *magic_name(const uint8_t *d, size_t n)
{
    if (n >= 4 && d[0] == 0x89 && d[1] == 'P' && d[2] == 'N' && d[3] == 'G')
        return "a PNG";
    if (n >= 4 && memcmp(d, "GIF8", 4) == 0)
        return "a GIF";
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return "a WebP";
    if (n >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0))
        return "a TIFF";
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return "a BMP";
    return NULL;
}

static int check_soi(const uint8_t *d, size_t n)
{
    if (n < 4)
        return sl__set_error(SL_ECORRUPT, "not a JPEG (%zu bytes)", n);
    if (d[0] == 0xFF && d[1] == 0xD8)
        return 0;
    const char *name = magic_name(d, n);
    return sl__set_error(SL_ECORRUPT, "not a JPEG (starts with %02X %02X %02X %02X%s%s)", d[0],
                         d[1], d[2], d[3], name ? ", " : "", name ? name : "");
}

static int jpeg_error(sl__jpeg *dec)
{
    int code = dec->err_code == JERR_OUT_OF_MEMORY ? SL_ENOMEM : SL_ECORRUPT;
    /* An error after a warning (a truncated header ends in "no image"):
     * the warning says what went wrong first. */
    if (dec->jerr.num_warnings && strcmp(dec->err, dec->warn) != 0)
        return sl__set_error(code, "%s (after: %s)", dec->err, dec->warn);
    return sl__set_error(code, "%s", dec->err);
}

/* Calls fn under the setjmp that libjpeg's errors return to; fn's own
 * locals live in a deeper frame, so none can be clobbered. On any failure
 * the decompressor is reset for the next image. */
static int run(sl__jpeg *dec, int (*fn)(sl__jpeg *, void *), void *arg)
{
    int rc;
    if (setjmp(dec->jb))
        rc = jpeg_error(dec);
    else
        rc = fn(dec, arg);
    if (rc && rc != SL__JPEG_NOT_YCC) { /* NOT_YCC: nothing started */
        jpeg_abort_decompress(&dec->cinfo);
        dec->data = NULL;
    }
    return rc;
}

/* ---- header ---- */

typedef struct header_req {
    const uint8_t *data;
    size_t n;
    int64_t max_pixels;
    sl__jpeg_info *info;
} header_req;

static int read_header(sl__jpeg *dec, void *arg)
{
    header_req *rq = arg;
    struct jpeg_decompress_struct *ci = &dec->cinfo;
    jpeg_mem_src(ci, rq->data, (unsigned long)rq->n);
    jpeg_read_header(ci, TRUE);
    int64_t px = (int64_t)ci->image_width * ci->image_height;
    if (rq->max_pixels > 0 && px > rq->max_pixels)
        return sl__set_error(SL_ERANGE, "image is %ux%u (%lld pixels), over max_pixels %lld",
                             ci->image_width, ci->image_height, (long long)px,
                             (long long)rq->max_pixels);
    if (ci->num_components != 1 && ci->num_components != 3 && ci->num_components != 4)
        return sl__set_error(SL_ECORRUPT, "unsupported JPEG with %d components",
                             ci->num_components);
    rq->info->width = (int)ci->image_width;
    rq->info->height = (int)ci->image_height;
    rq->info->components = ci->num_components;
    rq->info->progressive = ci->progressive_mode;
    return 0;
}

int sl__jpeg_header(sl__jpeg *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                    sl__jpeg_info *info)
{
    jpeg_abort_decompress(&dec->cinfo); /* a header read but never decoded */
    dec->data = NULL;
    int rc = check_soi(data, n);
    if (rc)
        return rc;
    dec->stop_on_warning = false; /* the decode decides, with allow_warnings */
    dec->jerr.num_warnings = 0;
    dec->warn[0] = '\0';
    header_req rq = {data, n, max_pixels, info};
    rc = run(dec, read_header, &rq);
    if (rc == 0) {
        dec->data = data;
        dec->n = n;
        dec->scan_at = (size_t)(dec->cinfo.src->next_input_byte - data);
    }
    return rc;
}

/* Whether an EOI marker (FF D9) follows the start of the entropy-coded
 * data: inside it FF is always followed by 00 or a restart marker, so an
 * FF D9 there is the end of the image, and garbage after it is fine (as
 * libjpeg and PIL take it). Searched from the end: O(1) for a normal file. */
static bool has_eoi(const uint8_t *data, size_t n, size_t from)
{
    size_t end = n;
    while (end > from + 1) {
        const uint8_t *ff = memrchr(data + from, 0xFF, end - 1 - from);
        if (!ff)
            return false;
        if (ff[1] == 0xD9)
            return true;
        end = (size_t)(ff - data) + 1;
    }
    return false;
}

/* ---- decode ---- */

typedef struct region_req {
    sl__window win;     /* source pixels */
    int d;              /* DCT scale 1/d */
    bool fast_upsample; /* merged (plain) chroma upsampling */
    sl__decoded *out;
} region_req;

/* The largest DCT reduction that still leaves the window at least the
 * output size. Only 1/2, 1/4, 1/8 have fast IDCTs: 3/4, 7/8 and the like
 * decode slower than full size (bench_decode's scale_ rows), so they are
 * never used. */
static int choose_scale(const sl__window *win, int out_w, int out_h)
{
    for (int d = 8; d > 1; d /= 2)
        if (floor(win->w / d) >= out_w && floor(win->h / d) >= out_h)
            return d;
    return 1;
}

/* [lo, hi) of the scaled pixels that the window touches, at least one. */
static void span(double pos, double len, int d, JDIMENSION size, JDIMENSION *lo,
                 JDIMENSION *hi)
{
    double a = floor(pos / d), b = ceil((pos + len) / d);
    if (!(a >= 0)) /* also NaN */
        a = 0;
    if (a > size - 1)
        a = size - 1;
    if (!(b <= size))
        b = size;
    if (b < a + 1)
        b = a + 1;
    *lo = (JDIMENSION)a;
    *hi = (JDIMENSION)b;
}

static inline uint8_t mul255(unsigned a, unsigned b)
{
    unsigned t = a * b + 128;
    return (uint8_t)((t + (t >> 8)) >> 8);
}

/* In place, row by row (RGB is shorter than CMYK, so writes trail reads).
 * Adobe writes CMYK inverted (0 = full ink) and libjpeg hands it over as
 * stored; everyone else stores ink amounts. */
static void cmyk_to_rgb(uint8_t *buf, int width, int rows, size_t stride, bool inverted)
{
    for (int y = 0; y < rows; y++) {
        uint8_t *p = buf + (size_t)y * stride;
        for (int x = 0; x < width; x++) {
            unsigned c = p[4 * x], m = p[4 * x + 1], ye = p[4 * x + 2], k = p[4 * x + 3];
            if (!inverted) {
                c = 255 - c, m = 255 - m, ye = 255 - ye, k = 255 - k;
            }
            p[3 * x] = mul255(c, k);
            p[3 * x + 1] = mul255(m, k);
            p[3 * x + 2] = mul255(ye, k);
        }
    }
}

static int read_rows(struct jpeg_decompress_struct *ci, uint8_t *buf, size_t stride,
                     JDIMENSION y0, JDIMENSION y1)
{
    while (ci->output_scanline < y1) {
        JSAMPROW rows[16];
        JDIMENSION want = y1 - ci->output_scanline;
        if (want > 16)
            want = 16;
        for (JDIMENSION k = 0; k < want; k++)
            rows[k] = buf + (size_t)(ci->output_scanline - y0 + k) * stride;
        if (jpeg_read_scanlines(ci, rows, want) == 0)
            return sl__set_error(SL_EINTERNAL, "jpeg: decoder made no progress");
    }
    return 0;
}

static int decode_region(sl__jpeg *dec, void *arg)
{
    region_req *rq = arg;
    struct jpeg_decompress_struct *ci = &dec->cinfo;
    bool cmyk = ci->num_components == 4;
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)rq->d;
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB; /* gray -> RGB by libjpeg-turbo */
    ci->dct_method = SL__JPEG_DCT;
    ci->do_fancy_upsampling = !rq->fast_upsample;
    jpeg_start_decompress(ci);

    JDIMENSION x0, x1, y0, y1;
    span(rq->win.x, rq->win.w, rq->d, ci->output_width, &x0, &x1);
    span(rq->win.y, rq->win.h, rq->d, ci->output_height, &y0, &y1);
    /* One more column each side: the chroma upsampler treats the edges
     * of a cropped row as image edges, so the outermost columns differ
     * from a full decode. Rows need no margin: libjpeg keeps the context
     * rows across jpeg_skip_scanlines. */
    JDIMENSION xoff = x0 > 0 ? x0 - 1 : 0;
    JDIMENSION width = (x1 < ci->output_width ? x1 + 1 : x1) - xoff;
    jpeg_crop_scanline(ci, &xoff, &width); /* widens left to an iMCU boundary */
    size_t stride = (size_t)width * (size_t)ci->output_components;
    /* libjpeg-turbo 2.1.5's jpeg_skip_scanlines with the merged 4:2:0
     * upsampler (fast_upsample) writes through a stale row pointer now
     * and then (a crash in the pipeline, about one in 10^5 decodes, none
     * with fancy upsampling or without the skip): the rows above are read
     * and dropped instead, two at a time into the region buffer. */
    bool merged2 = rq->fast_upsample && ci->max_v_samp_factor == 2;
    JDIMENSION rows = merged2 && y1 - y0 < 2 ? 2 : y1 - y0; /* room for a dropped pair */
    int rc = grow(dec, stride * rows);
    if (rc)
        return rc;
    if (merged2) {
        while (ci->output_scanline < y0) {
            JSAMPROW r[2] = {dec->buf, dec->buf + stride};
            JDIMENSION want = y0 - ci->output_scanline < 2 ? 1 : 2;
            if (jpeg_read_scanlines(ci, r, want) == 0)
                return sl__set_error(SL_EINTERNAL, "jpeg: decoder made no progress");
        }
    } else if (y0 > 0 && jpeg_skip_scanlines(ci, y0) != y0)
        return sl__set_error(SL_EINTERNAL, "jpeg: cannot skip to row %u", y0);
    rc = read_rows(ci, dec->buf, stride, y0, y1);
    if (rc)
        return rc;
    bool inverted = ci->saw_Adobe_marker;
    jpeg_abort_decompress(ci); /* the rows below are never decoded */
    dec->data = NULL;
    if (cmyk)
        cmyk_to_rgb(dec->buf, (int)width, (int)(y1 - y0), stride, inverted);

    sl__decoded *out = rq->out;
    double d = rq->d;
    out->rgb = dec->buf;
    out->width = (int)width;
    out->height = (int)(y1 - y0);
    out->stride = stride;
    out->win = (sl__window){rq->win.x / d - xoff, rq->win.y / d - y0, rq->win.w / d,
                            rq->win.h / d};
    out->scale_denom = rq->d;
    return 0;
}

/* ---- YCbCr planes ---- */

/* libjpeg's call-sequence states (jpegint.h, unchanged since IJG 6):
 * jpeg_start_decompress leaves raw_data_out at RAW_OK, where
 * jpeg_crop_scanline refuses to run although what it sets up (the iMCU
 * columns the coefficient controller inverse-transforms, and where it puts
 * them) is what raw reads use too. The state is lent as SCANNING for that
 * one call; the upsampler, the only part of the crop that raw mode lacks,
 * is left alone as long as every component keeps 2 or more columns. */
#define SL__DSTATE_SCANNING 205
#define SL__DSTATE_RAW_OK 206
#if defined(__has_include)
#if __has_include(<jpegint.h>)
#include <jpegint.h>
_Static_assert(DSTATE_SCANNING == SL__DSTATE_SCANNING && DSTATE_RAW_OK == SL__DSTATE_RAW_OK,
               "libjpeg's decompressor states moved");
#define SL__HAVE_JPEGINT 1
#endif
#endif
#if JPEG_LIB_VERSION >= 70
#define MIN_SCALED(ci) ((ci)->min_DCT_h_scaled_size)
#define COMP_SCALED(c) ((c)->DCT_h_scaled_size)
#else
#define MIN_SCALED(ci) ((ci)->min_DCT_scaled_size)
#define COMP_SCALED(c) ((c)->DCT_scaled_size)
#endif
#define YCC_MIN_WIDTH 16 /* luma columns: every component keeps >= 2 */

/* Drops the n iMCU rows at the top of the image without inverse
 * transforms: jpeg_skip_scanlines' way with whole iMCU rows, which raw
 * mode cannot call (it reaches for the upsampler and the main buffer
 * controller, which raw mode has not). A single interleaved scan has each
 * MCU entropy-decoded with nowhere to keep it (the decoders take NULL for
 * that); a file of several scans has all its coefficients decoded already
 * and only moves on. The coefficient controller needs no reset: it starts
 * every iMCU row of an interleaved scan in the same state (jdcoefct.h,
 * start_iMCU_row). 0, or SL__JPEG_NOT_YCC when this cannot be done here,
 * before anything is touched: then the rows are read and dropped. */
static int skip_imcu_rows(struct jpeg_decompress_struct *ci, JDIMENSION n, JDIMENSION lines)
{
#ifdef SL__HAVE_JPEGINT
    if (!ci->inputctl->has_multiple_scans) {
        if (ci->comps_in_scan < 2)
            return SL__JPEG_NOT_YCC;
        for (JDIMENSION r = 0; r < n; r++)
            for (JDIMENSION x = 0; x < ci->MCUs_per_row; x++)
                (*ci->entropy->decode_mcu)(ci, NULL);
        ci->input_iMCU_row += n;
    }
    ci->output_iMCU_row += n;
    ci->output_scanline += n * lines;
    return 0;
#else
    (void)ci, (void)n, (void)lines;
    return SL__JPEG_NOT_YCC;
#endif
}

typedef struct ycc_req {
    sl__window win;
    int d;
    sl__ycc *out;
} ycc_req;

static int decode_ycc_region(sl__jpeg *dec, void *arg)
{
    ycc_req *rq = arg;
    struct jpeg_decompress_struct *ci = &dec->cinfo;
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)rq->d;
    ci->out_color_space = JCS_YCbCr;
    ci->dct_method = SL__JPEG_DCT;
    ci->raw_data_out = TRUE;
    ci->do_fancy_upsampling = TRUE; /* no merged upsampler for the crop to update */
    jpeg_start_decompress(ci);
    if (ci->global_state != SL__DSTATE_RAW_OK)
        return sl__set_error(SL_EINTERNAL, "jpeg: raw decode in state %d", ci->global_state);

    JDIMENSION x0, x1, y0, y1;
    span(rq->win.x, rq->win.w, rq->d, ci->output_width, &x0, &x1);
    span(rq->win.y, rq->win.h, rq->d, ci->output_height, &y0, &y1);
    JDIMENSION full_w = ci->output_width, xoff = 0, width = full_w;
    if (x1 - x0 >= YCC_MIN_WIDTH && x1 - x0 < ci->output_width) {
        xoff = x0, width = x1 - x0;
        ci->global_state = SL__DSTATE_SCANNING;
        jpeg_crop_scanline(ci, &xoff, &width); /* widens left to an iMCU boundary */
        ci->global_state = SL__DSTATE_RAW_OK;
    }
    /* iMCU rows: L output rows of luma each; [r0, r1) cover the window */
    int min = MIN_SCALED(ci);
    JDIMENSION L = (JDIMENSION)(ci->max_v_samp_factor * min);
    JDIMENSION align = (JDIMENSION)(ci->max_h_samp_factor * min);
    JDIMENSION r0 = y0 / L, r1 = (y1 + L - 1) / L;
    JDIMENSION cols = (xoff + width + align - 1) / align - xoff / align;
    size_t stride[3], rows[3], at[3], total = 0;
    for (int c = 0; c < 3; c++) {
        jpeg_component_info *cp = &ci->comp_info[c];
        rows[c] = (size_t)cp->v_samp_factor * (size_t)COMP_SCALED(cp);
        stride[c] = ((size_t)cols * cp->h_samp_factor * COMP_SCALED(cp) + 63) & ~(size_t)63;
        at[c] = total;
        total += stride[c] * rows[c] * (r1 - r0);
    }
    int rc = grow(dec, total);
    if (rc)
        return rc;
    JDIMENSION r = 0;
    if (r0 > 0 && skip_imcu_rows(ci, r0, L) == 0)
        r = r0;
    for (; r < r1; r++) {
        /* rows above the window (where they could not be skipped) land in
         * the first slot and are overwritten */
        size_t slot = r < r0 ? 0 : r - r0;
        JSAMPROW ptr[3][4 * DCTSIZE];
        JSAMPARRAY planes[3] = {ptr[0], ptr[1], ptr[2]};
        for (int c = 0; c < 3; c++)
            for (size_t k = 0; k < rows[c]; k++)
                ptr[c][k] = dec->buf + at[c] + (slot * rows[c] + k) * stride[c];
        if (jpeg_read_raw_data(ci, planes, L) == 0)
            return sl__set_error(SL_EINTERNAL, "jpeg: decoder made no progress");
    }
    sl__ycc *out = rq->out;
    double d = rq->d;
    for (int c = 0; c < 3; c++) {
        jpeg_component_info *cp = &ci->comp_info[c];
        /* the component's samples per output pixel, across and down */
        double rx = (double)(cp->h_samp_factor * COMP_SCALED(cp)) / align;
        double ry = (double)(cp->v_samp_factor * COMP_SCALED(cp)) / L;
        size_t first = r0 * rows[c], h = cp->downsampled_height - first;
        if (h > (r1 - r0) * rows[c])
            h = (r1 - r0) * rows[c];
        /* columns from the crop's left edge to the window's right or the
         * image's: computed here, as 2.1.5's jpeg_crop_scanline sets
         * downsampled_width without the DCT scaling of chroma */
        size_t scaled = (size_t)cp->h_samp_factor * COMP_SCALED(cp);
        size_t left = (size_t)xoff / align * scaled;
        size_t right = ((size_t)(xoff + width) * scaled + align - 1) / align;
        size_t edge = ((size_t)full_w * scaled + align - 1) / align;
        sl__plane *pl = &out->plane[c];
        pl->data = dec->buf + at[c];
        pl->width = (int)((right < edge ? right : edge) - left);
        pl->height = (int)h;
        pl->stride = stride[c];
        pl->win = (sl__window){(rq->win.x / d - xoff) * rx, (rq->win.y / d - r0 * L) * ry,
                               rq->win.w / d * rx, rq->win.h / d * ry};
    }
    out->scale_denom = rq->d;
    out->matrix = NULL;
    jpeg_abort_decompress(ci); /* the rows below are never decoded */
    dec->data = NULL;
    return 0;
}

/* Whether the parsed file is YCbCr whose chroma components share one
 * sampling, at most luma's, and at DCT scale 1/d come out at a lower
 * resolution than luma: then libjpeg would upsample them, and resampling
 * them from their own resolution saves that. At full resolution (4:4:4,
 * or 4:2:0 at d >= 2, whose chroma libjpeg-turbo inverse-transforms at
 * twice the scale) there is no upsampling to save, and three planes cost
 * more to resample than libjpeg's colour conversion of the window
 * (bench/README.md, "YCbCr planes"). */
static int ycc_applies(sl__jpeg *dec, void *arg)
{
    struct jpeg_decompress_struct *ci = &dec->cinfo;
    if (ci->num_components != 3 || ci->jpeg_color_space != JCS_YCbCr)
        return SL__JPEG_NOT_YCC;
    const jpeg_component_info *y = &ci->comp_info[0], *cb = &ci->comp_info[1],
                              *cr = &ci->comp_info[2];
    if (y->h_samp_factor != ci->max_h_samp_factor ||
        y->v_samp_factor != ci->max_v_samp_factor || cb->h_samp_factor != cr->h_samp_factor ||
        cb->v_samp_factor != cr->v_samp_factor)
        return SL__JPEG_NOT_YCC;
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)*(const int *)arg;
    ci->raw_data_out = TRUE;
    jpeg_calc_output_dimensions(ci);
    bool lower = cb->h_samp_factor * COMP_SCALED(cb) < ci->max_h_samp_factor * MIN_SCALED(ci) ||
                 cb->v_samp_factor * COMP_SCALED(cb) < ci->max_v_samp_factor * MIN_SCALED(ci);
    ci->raw_data_out = FALSE;
    return lower ? 0 : SL__JPEG_NOT_YCC;
}

typedef int (*decode_fn)(sl__jpeg *, void *);

static int decode_with(sl__jpeg *dec, const uint8_t *data, size_t n, unsigned flags,
                       decode_fn fn, void *req)
{
    bool allow_warnings = flags & SL__JPEG_ALLOW_WARNINGS;
    if (!dec->data || dec->data != data || dec->n != n)
        return sl__set_error(SL_ESTATE, "jpeg: decode without a header for this data");
    if (!allow_warnings && (dec->jerr.num_warnings || !has_eoi(data, n, dec->scan_at))) {
        /* A region decode stops at the window's last row, so without this
         * check a file cut short below the window would decode or fail
         * depending on the crop: the verdict must not change with the seed. */
        jpeg_abort_decompress(&dec->cinfo);
        dec->data = NULL;
        return dec->jerr.num_warnings
                   ? sl__set_error(SL_ECORRUPT, "%s", dec->warn)
                   : sl__set_error(SL_ECORRUPT, "truncated (no end-of-image marker)");
    }
    dec->stop_on_warning = !allow_warnings;
    return run(dec, fn, req);
}

static int decode(sl__jpeg *dec, const uint8_t *data, size_t n, const sl__window *win, int d,
                  unsigned flags, sl__decoded *out)
{
    region_req rq = {*win, d, (flags & SL__JPEG_FAST_UPSAMPLE) != 0, out};
    return decode_with(dec, data, n, flags, decode_region, &rq);
}

int sl__jpeg_decode_ycc(sl__jpeg *dec, const uint8_t *data, size_t n, const sl__window *win,
                        int out_w, int out_h, unsigned flags, sl__ycc *out)
{
    ycc_req rq = {*win, choose_scale(win, out_w, out_h), out};
    if (dec->data == data && dec->n == n) {
        int rc = run(dec, ycc_applies, &rq.d);
        if (rc)
            return rc;
    }
    return decode_with(dec, data, n, flags, decode_ycc_region, &rq);
}

int sl__jpeg_decode(sl__jpeg *dec, const uint8_t *data, size_t n, const sl__window *win,
                    int out_w, int out_h, unsigned flags, sl__decoded *out)
{
    return decode(dec, data, n, win, choose_scale(win, out_w, out_h), flags, out);
}

int sl__jpeg_decode_full(sl__jpeg *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                         unsigned flags, sl__decoded *out)
{
    sl__jpeg_info info;
    int rc = sl__jpeg_header(dec, data, n, max_pixels, &info);
    if (rc)
        return rc;
    sl__window all = {0, 0, info.width, info.height};
    return decode(dec, data, n, &all, 1, flags, out);
}
#endif /* SLUICE_NO_JPEG */
