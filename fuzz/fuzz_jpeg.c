/* The JPEG path of map_image: header, crop plan, region decode, resize. */
#include <stdbool.h>
#include "../tests/jpegutil.h"
#include "fuzz.h"
#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl__jpeg *dec;
    static sl__resizer *rs;
    if (!dec) {
        dec = sl__jpeg_new();
        rs = sl__resizer_new();
    }
    sl__jpeg_info info;
    if (sl__jpeg_header(dec, data, size, (int64_t)1 << 22, &info) != 0)
        return 0;
    sl_image_spec spec;
    SL_IMAGE_SPEC_INIT(&spec, size & 1 ? SL_CROP_RANDOM_RESIZED : SL_CROP_CENTER, 24);
    sl__rng rng = sl__rng_make(size, 1, 0, 0);
    sl__window win;
    bool flip;
    sl__crop_plan(&spec, info.width, info.height, &rng, &win, &flip);
    sl__decoded d;
    if (sl__jpeg_decode(dec, data, size, &win, 24, 24, size & 3, &d) != 0)
        return 0;
    static uint8_t out[24 * 24 * 3];
    sl__resize_out o = {out, 24, 24, SL_LAYOUT_HWC, SL_UINT8, flip, {0, 0, 0}, {1, 1, 1}, NULL};
    sl__resize(rs, d.rgb, d.width, d.height, d.stride, &d.win, &o);
    return 0;
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    ju_opts plain = {0}, prog = {.progressive = 1}, rst = {.restart = 2, .subsample = 1};
    const ju_opts *opts[] = {&plain, &prog, &rst};
    for (int i = 0; i < 3; i++) {
        size_t n;
        uint8_t *j = ju_make(40 + 9 * i, 33 + 5 * i, (unsigned)i, opts[i], &n);
        add(j, n);
        free(j);
    }
}
