/* The WebP path of map_image: header, crop plan, the cropped and scaled
 * decode, resize. */
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
    sl__decoded d;
    if (sl__webp_decode(dec, data, size, &win, 12, 12, &d) != 0)
        return 0;
    static uint8_t out[12 * 12 * 3];
    sl__resize_out o = {out, 12, 12, SL_LAYOUT_HWC, SL_UINT8, flip, {0, 0, 0}, {1, 1, 1}, NULL};
    sl__resize(rs, d.rgb, d.width, d.height, d.stride, &d.win, &o);
    return 0;
}

/* Seeds: lossy and lossless, from libwebp's encoder. */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    for (int k = 0; k < 3; k++) {
        int w = 41 + 13 * k, h = 37 + 9 * k;
        uint8_t *px = malloc((size_t)w * h * 3);
        for (int i = 0; i < w * h * 3; i++)
            px[i] = (uint8_t)(i * 5 + i / 11 + k * 40);
        uint8_t *webp = NULL;
        size_t n = k == 1 ? WebPEncodeLosslessRGB(px, w, h, w * 3, &webp)
                          : WebPEncodeRGB(px, w, h, w * 3, k == 0 ? 75.f : 20.f, &webp);
        if (n)
            add(webp, n);
        WebPFree(webp);
        free(px);
    }
}
