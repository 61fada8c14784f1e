/* The WebP path of map_image: header, crop plan, the cropped and scaled
 * decode, then the resize (alpha dropped or blended), or raw mode's decode
 * and nearest resampling. */
#include <stdbool.h>
#include <stdlib.h>
#include <webp/encode.h>
#include "fuzz.h"
#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl__webp *dec;
    static sl__resizer *rs;
    if (!dec) {
        dec = sl__webp_new();
        rs = sl__resizer_new();
    }
    sl__jpeg_info info;
    if (sl__webp_header(dec, data, size, (int64_t)1 << 22, &info) != 0)
        return 0;
    sl_image_spec spec;
    SL_IMAGE_SPEC_INIT(&spec, size & 1 ? SL_CROP_RANDOM_RESIZED : SL_CROP_CENTER, 12);
    sl__rng rng = sl__rng_make(size, 1, 0, 0);
    sl__window win;
    bool flip;
    sl__crop_plan(&spec, info.width, info.height, &rng, &win, &flip);
    if (size & 4) { /* raw: RGB or RGBA into 3 or 4 channels */
        static uint8_t raw[12 * 12 * 4];
        static int cols[12];
        sl__raw r;
        if (sl__webp_decode_raw(dec, data, size, &win, &r) == 0)
            sl__raw_resample(&r, &r.win, raw, 12, 12, 3 + (int)(size >> 3 & 1), SL_UINT8,
                             SL_LAYOUT_HWC, flip, cols);
        return 0;
    }
    static const int gray[3] = {128, 128, 128};
    sl__decoded d;
    if (sl__webp_decode(dec, data, size, &win, 12, 12, size & 8 ? gray : NULL, &d) != 0)
        return 0;
    static uint8_t out[12 * 12 * 3];
    sl__resize_out o = {out, 12, 12, SL_LAYOUT_HWC, SL_UINT8, flip, {0, 0, 0}, {1, 1, 1}, NULL};
    sl__resize(rs, d.rgb, d.width, d.height, d.stride, &d.win, &o);
    return 0;
}

/* Seeds: lossy and lossless, from libwebp's encoder; the last with alpha. */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    for (int k = 0; k < 4; k++) {
        int w = 41 + 13 * k, h = 37 + 9 * k, bpp = k == 3 ? 4 : 3;
        uint8_t *px = malloc((size_t)w * h * bpp);
        for (int i = 0; i < w * h * bpp; i++)
            px[i] = (uint8_t)(i * 5 + i / 11 + k * 40);
        uint8_t *webp = NULL;
        size_t n = k == 3   ? WebPEncodeLosslessRGBA(px, w, h, w * 4, &webp)
                   : k == 1 ? WebPEncodeLosslessRGB(px, w, h, w * 3, &webp)
                            : WebPEncodeRGB(px, w, h, w * 3, k == 0 ? 75.f : 20.f, &webp);
        if (n)
            add(webp, n);
        WebPFree(webp);
        free(px);
    }
}
