/*
 * PNG through libspng (image.h, sl__png_*): RGB8 out of every colour type
 * and bit depth, alpha dropped as PIL's convert("RGB") drops it, 16-bit
 * samples to their high byte as PIL reads them.
 *
 * Rows below the window are never inflated: the decode stops at its last
 * row (Adam7 images, whose passes spread every row across the file, are
 * decoded whole). So that a damaged file gets the same verdict whatever
 * the crop, the whole chunk structure is checked first, cheaply: every
 * chunk's CRC, and an IEND at the end (a file without one is truncated,
 * refused unless allow_warnings).
 */
#include <stdio.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/crc32c.h"
#include "../core/error.h"
#include "image.h"

#ifdef SLUICE_NO_PNG

sl__png *sl__png_new(void)
{
    return NULL;
}
void sl__png_free(sl__png *dec)
{
    (void)dec;
}
int sl__png_header(sl__png *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                   unsigned flags, sl__jpeg_info *info)
{
    (void)dec, (void)data, (void)n, (void)max_pixels, (void)flags, (void)info;
    return sl__set_error(SL_EUNSUPPORTED, "a PNG, and this build has no PNG decoder "
                         "(SLUICE_WITH_PNG=OFF)");
}
int sl__png_decode(sl__png *dec, const uint8_t *data, size_t n, const sl__window *win,
                   const int *background, sl__decoded *out)
{
    (void)dec, (void)data, (void)n, (void)win, (void)background, (void)out;
    return SL_EUNSUPPORTED;
}
int sl__png_decode_raw(sl__png *dec, const uint8_t *data, size_t n, const sl__window *win,
                       int channels, sl__raw *out)
{
    (void)dec, (void)data, (void)n, (void)win, (void)channels, (void)out;
    return SL_EUNSUPPORTED;
}

#else

#include <spng.h>

struct sl__png {
    uint8_t *buf;
    size_t cap;
    struct spng_ihdr ihdr;
    bool trns; /* the file has a tRNS chunk (check_chunks saw it) */
};

sl__png *sl__png_new(void)
{
    return sl__calloc(1, sizeof(sl__png));
}

void sl__png_free(sl__png *dec)
{
    if (!dec)
        return;
    sl__free(dec->buf, dec->cap);
    sl__free(dec, sizeof *dec);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Every chunk's length and CRC, and the IEND: the verdict's part that does
 * not depend on the window. Notes a tRNS chunk in *trns on the way. */
static int check_chunks(const uint8_t *d, size_t n, unsigned flags, bool *trns)
{
    size_t off = 8;
    *trns = false;
    while (off + 12 <= n) {
        uint32_t len = be32(d + off);
        if (len > n - off - 12)
            break; /* runs past the end: truncated */
        uint32_t want = be32(d + off + 8 + len);
        if (sl__crc32(0, d + off + 4, len + 4) != want)
            return sl__set_error(SL_ECORRUPT, "PNG chunk %.4s at byte %zu: bad CRC",
                                 (const char *)d + off + 4, off);
        if (!memcmp(d + off + 4, "IEND", 4))
            return 0;
        *trns |= !memcmp(d + off + 4, "tRNS", 4);
        off += (size_t)len + 12;
    }
    if (flags & SL__JPEG_ALLOW_WARNINGS)
        return 0;
    return sl__set_error(SL_ECORRUPT, "PNG truncated at byte %zu of %zu (no IEND chunk)", off,
                         n);
}

static int spng_fail(int e, const char *what)
{
    int code = e == SPNG_EMEM ? SL_ENOMEM : SL_ECORRUPT;
    return sl__set_error(code, "PNG %s: %s", what, spng_strerror(e));
}

int sl__png_header(sl__png *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                   unsigned flags, sl__jpeg_info *info)
{
    if (!dec)
        return sl__set_error(SL_ENOMEM, "out of memory (PNG decoder)");
    int rc = check_chunks(data, n, flags, &dec->trns);
    if (rc < 0)
        return rc;
    spng_ctx *c = spng_ctx_new(0);
    if (!c)
        return SL_ENOMEM;
    int e = spng_set_png_buffer(c, data, n);
    if (!e)
        e = spng_get_ihdr(c, &dec->ihdr);
    spng_ctx_free(c);
    if (e)
        return spng_fail(e, "header");
    int64_t px = (int64_t)dec->ihdr.width * dec->ihdr.height;
    if (max_pixels > 0 && px > max_pixels)
        return sl__set_error(SL_ERANGE, "PNG of %ux%u = %lld pixels, over max_pixels %lld",
                             dec->ihdr.width, dec->ihdr.height, (long long)px,
                             (long long)max_pixels);
    int t = dec->ihdr.color_type;
    *info = (sl__jpeg_info){(int)dec->ihdr.width, (int)dec->ihdr.height,
                            t == SPNG_COLOR_TYPE_GRAYSCALE || t == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA
                                ? 1 : 3,
                            dec->ihdr.interlace_method != 0};
    return 0;
}

/* Rows 0 .. rows-1 of the image in spng format fmt, `stride` bytes apart
 * (at least the format's row), into dec->buf; Adam7: every row, whatever
 * rows says, and packed (*pitch says how far apart). flags: spng decode
 * flags. */
static int decode_rows(sl__png *dec, const uint8_t *data, size_t n, int fmt, int flags,
                       size_t stride, uint32_t rows, size_t *pitch)
{
    /* sl__png_header checked every chunk's CRC: libspng need not again,
     * nor the deflate stream's Adler-32, which guards the same bytes
     * (browsers skip it too); a damaged stream still fails to inflate */
    spng_ctx *c = spng_ctx_new(SPNG_CTX_IGNORE_ADLER32);
    if (!c)
        return SL_ENOMEM;
    size_t len = 0;
    int e = spng_set_crc_action(c, SPNG_CRC_USE, SPNG_CRC_USE);
    if (!e)
        e = spng_set_png_buffer(c, data, n);
    if (!e)
        e = spng_decoded_image_size(c, fmt, &len);
    size_t row = dec->ihdr.height ? len / dec->ihdr.height : 0;
    size_t need = stride * dec->ihdr.height > len ? stride * dec->ihdr.height : len;
    *pitch = dec->ihdr.interlace_method ? row : stride;
    if (!e && need > dec->cap) {
        sl__free(dec->buf, dec->cap);
        dec->cap = 0;
        dec->buf = sl__alloc(need);
        if (!dec->buf) {
            spng_ctx_free(c);
            return sl__set_error(SL_ENOMEM, "PNG: out of memory for %zu bytes", need);
        }
        dec->cap = need;
    }
    if (!e && dec->ihdr.interlace_method) {
        /* packed samples are merged into their bytes pass by pass: those
         * bytes must start at zero */
        if (fmt == SPNG_FMT_PNG && dec->ihdr.bit_depth < 8)
            memset(dec->buf, 0, len);
        e = spng_decode_image(c, dec->buf, len, fmt, flags);
    } else if (!e) {
        e = spng_decode_image(c, NULL, 0, fmt, flags | SPNG_DECODE_PROGRESSIVE);
        for (uint32_t y = 0; !e && y < rows; y++)
            e = spng_decode_row(c, dec->buf + y * stride, row);
        if (e == SPNG_EOI)
            e = 0;
    }
    spng_ctx_free(c);
    return e ? spng_fail(e, "data") : 0;
}

/* The rows the window needs: to its last, never past the image. */
static uint32_t window_rows(const sl__png *dec, const sl__window *win)
{
    uint32_t rows = (uint32_t)(win->y + win->h + 0.999999);
    return dec->ihdr.interlace_method || rows > dec->ihdr.height ? dec->ihdr.height : rows;
}

/* Whether the file carries alpha: an alpha channel, or a tRNS chunk. */
static bool has_alpha(const sl__png *dec)
{
    int t = dec->ihdr.color_type;
    return dec->trns || t == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ||
           t == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA;
}

int sl__png_decode(sl__png *dec, const uint8_t *data, size_t n, const sl__window *win,
                   const int *background, sl__decoded *out)
{
    uint32_t rows = window_rows(dec, win);
    size_t row = (size_t)dec->ihdr.width * 3, pitch;
    int rc;
    if (background && has_alpha(dec)) {
        size_t wide = (size_t)dec->ihdr.width * 4;
        rc = decode_rows(dec, data, n, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS, wide, rows, &pitch);
        if (rc == 0)
            sl__blend_rows(dec->buf, (int)dec->ihdr.width, (int)rows, wide, background);
        row = wide;
    } else {
        rc = decode_rows(dec, data, n, SPNG_FMT_RGB8, 0, row, rows, &pitch);
    }
    if (rc)
        return rc;
    *out = (sl__decoded){dec->buf, (int)dec->ihdr.width, (int)rows, row, *win, 1};
    return 0;
}

int sl__png_decode_raw(sl__png *dec, const uint8_t *data, size_t n, const sl__window *win,
                       int channels, sl__raw *out)
{
    uint32_t rows = window_rows(dec, win), w = dec->ihdr.width;
    int t = dec->ihdr.color_type, depth = dec->ihdr.bit_depth;
    int fmt = SPNG_FMT_PNG, flags = 0, ch, bytes = depth == 16 ? 2 : 1;
    switch (t) {
    case SPNG_COLOR_TYPE_GRAYSCALE: ch = 1, fmt = depth < 16 ? SPNG_FMT_G8 : fmt; break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: ch = 2; break;
    case SPNG_COLOR_TYPE_TRUECOLOR: ch = 3; break;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: ch = 4; break;
    default: /* indexed: the indices, or the colours looked up */
        ch = channels >= 3 ? channels : 1;
        fmt = ch == 4 ? SPNG_FMT_RGBA8 : ch == 3 ? SPNG_FMT_RGB8 : fmt;
        flags = ch == 4 ? SPNG_DECODE_TRNS : 0;
        bytes = 1;
        break;
    }
    size_t stride = (size_t)w * ch * bytes, pitch;
    int rc = decode_rows(dec, data, n, fmt, flags, stride, rows, &pitch);
    if (rc)
        return rc;
    if (fmt == SPNG_FMT_PNG && t == SPNG_COLOR_TYPE_INDEXED && depth < 8) {
        /* packed indices (rows pitch apart), unpacked in place from the
         * last row's end: every write lands at or past what is left to read */
        unsigned mask = (1u << depth) - 1, per = 8 / (unsigned)depth;
        for (uint32_t y = dec->ihdr.interlace_method ? dec->ihdr.height : rows; y-- > 0;) {
            const uint8_t *from = dec->buf + y * pitch;
            uint8_t *to = dec->buf + y * stride;
            for (uint32_t x = w; x-- > 0;) {
                unsigned shift = 8 - (unsigned)depth * (x % per + 1);
                to[x] = (uint8_t)(from[x / per] >> shift & mask);
            }
        }
    }
    *out = (sl__raw){dec->buf, (int)w, (int)rows, stride, ch, bytes, ch * bytes, *win};
    return 0;
}

#endif
