/* The PNG path of map_image: chunk checks and header, crop plan, the
 * decode down to the window's last row, resize. */
#include <stdbool.h>
#include <stdlib.h>
#include <spng.h>
#include "fuzz.h"
#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl__png *dec;
    static sl__resizer *rs;
    if (!dec) {
        dec = sl__png_new();
        rs = sl__resizer_new();
    }
    sl__jpeg_info info;
    if (sl__png_header(dec, data, size, (int64_t)1 << 22, size & 2, &info) != 0)
        return 0;
    sl_image_spec spec;
    SL_IMAGE_SPEC_INIT(&spec, size & 1 ? SL_CROP_RANDOM_RESIZED : SL_CROP_CENTER, 24);
    sl__rng rng = sl__rng_make(size, 1, 0, 0);
    sl__window win;
    bool flip;
    sl__crop_plan(&spec, info.width, info.height, &rng, &win, &flip);
    sl__decoded d;
    if (sl__png_decode(dec, data, size, &win, &d) != 0)
        return 0;
    static uint8_t out[24 * 24 * 3];
    sl__resize_out o = {out, 24, 24, SL_LAYOUT_HWC, SL_UINT8, flip, {0, 0, 0}, {1, 1, 1}, NULL};
    sl__resize(rs, d.rgb, d.width, d.height, d.stride, &d.win, &o);
    return 0;
}

/* Seeds: libspng's encoder, several colour types and bit depths. */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    static const struct { uint8_t type, depth; } kinds[] = {
        {SPNG_COLOR_TYPE_TRUECOLOR, 8}, {SPNG_COLOR_TYPE_GRAYSCALE, 8},
        {SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8}, {SPNG_COLOR_TYPE_GRAYSCALE, 16},
        {SPNG_COLOR_TYPE_TRUECOLOR, 16}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        uint32_t w = 29 + 7 * (uint32_t)k, h = 23 + 5 * (uint32_t)k;
        int ch = kinds[k].type == SPNG_COLOR_TYPE_TRUECOLOR ? 3
                 : kinds[k].type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4 : 1;
        size_t n = (size_t)w * h * (size_t)ch * (kinds[k].depth / 8);
        uint8_t *px = malloc(n);
        for (size_t i = 0; i < n; i++)
            px[i] = (uint8_t)(i * 7 + i / 13);
        spng_ctx *c = spng_ctx_new(SPNG_CTX_ENCODER);
        struct spng_ihdr ih = {w, h, kinds[k].depth, kinds[k].type, 0, 0, (uint8_t)(k == 2)};
        spng_set_option(c, SPNG_ENCODE_TO_BUFFER, 1);
        spng_set_ihdr(c, &ih);
        if (spng_encode_image(c, px, n, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE) == 0) {
            size_t len;
            int err;
            void *png = spng_get_png_buffer(c, &len, &err);
            if (png) {
                add(png, len);
                free(png);
            }
        }
        spng_ctx_free(c);
        free(px);
    }
}
