/* The PNG path of map_image: chunk checks and header, crop plan, the
 * decode down to the window's last row, then the resize, or the alpha
 * blend, or raw mode's decode and nearest resampling (the input's size
 * picks which). */
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
    if (size & 4) { /* raw: 1 to 4 channels, uint16 */
        static uint16_t raw[24 * 24 * 4];
        static int cols[24];
        int ch = 1 + (int)(size >> 3 & 3);
        sl__raw r;
        if (sl__png_decode_raw(dec, data, size, &win, ch, &r) == 0)
            sl__raw_resample(&r, &r.win, raw, 24, 24, ch, SL_UINT16, SL_LAYOUT_CHW, flip, cols);
        return 0;
    }
    static const int white[3] = {255, 255, 255};
    sl__decoded d;
    if (sl__png_decode(dec, data, size, &win, size & 8 ? white : NULL, &d) != 0)
        return 0;
    static uint8_t out[24 * 24 * 3];
    sl__resize_out o = {out, 24, 24, SL_LAYOUT_HWC, SL_UINT8, flip, {0, 0, 0}, {1, 1, 1}, NULL};
    sl__resize(rs, d.rgb, d.width, d.height, d.stride, &d.win, &o);
    return 0;
}

/* Seeds: libspng's encoder, several colour types and bit depths (one
 * Adam7, one a 2-bit palette with tRNS). */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    static const struct { uint8_t type, depth; } kinds[] = {
        {SPNG_COLOR_TYPE_TRUECOLOR, 8}, {SPNG_COLOR_TYPE_GRAYSCALE, 8},
        {SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8}, {SPNG_COLOR_TYPE_GRAYSCALE, 16},
        {SPNG_COLOR_TYPE_TRUECOLOR, 16}, {SPNG_COLOR_TYPE_INDEXED, 2},
        {SPNG_COLOR_TYPE_GRAYSCALE_ALPHA, 16}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        uint32_t w = 29 + 7 * (uint32_t)k, h = 23 + 5 * (uint32_t)k;
        int ch = kinds[k].type == SPNG_COLOR_TYPE_TRUECOLOR ? 3
                 : kinds[k].type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4
                 : kinds[k].type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2 : 1;
        size_t n = kinds[k].depth < 8 ? (w * kinds[k].depth + 7) / 8 * (size_t)h
                                      : (size_t)w * h * (size_t)ch * (kinds[k].depth / 8);
        uint8_t *px = malloc(n);
        for (size_t i = 0; i < n; i++)
            px[i] = (uint8_t)(i * 7 + i / 13);
        spng_ctx *c = spng_ctx_new(SPNG_CTX_ENCODER);
        struct spng_ihdr ih = {w, h, kinds[k].depth, kinds[k].type, 0, 0, (uint8_t)(k == 2)};
        spng_set_option(c, SPNG_ENCODE_TO_BUFFER, 1);
        spng_set_ihdr(c, &ih);
        if (kinds[k].type == SPNG_COLOR_TYPE_INDEXED) {
            struct spng_plte plte = {4, {{0}}};
            struct spng_trns trns = {.n_type3_entries = 2, .type3_alpha = {0, 128}};
            for (int i = 0; i < 4; i++)
                plte.entries[i] = (struct spng_plte_entry){(uint8_t)(60 * i), 9, (uint8_t)i, 255};
            spng_set_plte(c, &plte);
            spng_set_trns(c, &trns);
        }
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
