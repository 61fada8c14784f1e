/* The saved-state parser (sl_iterator_restore): a state comes from a file
 * a training job wrote, maybe truncated by a crash or from another run,
 * and must resume exactly, or be refused with a message, never crash,
 * hang or leak.
 *
 * Input: byte 0 picks the pipeline (bits 1-2) and the mode (bit 0). Bit 0
 * set: the rest is a whole state, header included. Clear: the rest is the
 * records, under a header this harness makes valid (the pipeline's
 * fingerprint, seed, epoch, length, crc32), so the fuzzer reaches the
 * record parser and each op's checks of its fields instead of stopping at
 * the checksum. A state that restores is run to its end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "fuzz.h"
#include "sluice.h"

#define HDR 64
#define SEED 11
#define MAX_ELEMENTS 20000

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int draw(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    sl_element_add_int64(el, sl_tensor_int64(sl_element_tensor(in, 0)));
    sl_element_add_int64(el, (int64_t)(sl_map_ctx_random(ctx) & 0xffff));
    *out = el;
    return 0;
}

static int odd(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)user;
    return sl_tensor_int64(sl_element_tensor(el, 0)) % 2;
}

/* Four pipelines that cover every op without files. */
static sl_dataset *pipeline(int which)
{
    sl_dataset *ds;
    switch (which & 3) {
    case 0:
        ds = sl_shuffle(sl_range(0, 40, 1), SL_SHUFFLE_ALL, -1, 0);
        ds = sl_map(ds, "draw", draw, NULL, 2, 0);
        return sl_prefetch(sl_batch(ds, 3, 0), 2);
    case 1:
        ds = sl_filter(sl_map(sl_range(0, 60, 1), "draw", draw, NULL, 1, 0), "odd", odd, NULL);
        ds = sl_unbatch(sl_batch(ds, 4, SL_DROP_REMAINDER));
        return sl_take(sl_skip(ds, 2), 20);
    case 2:
        ds = sl_shuffle(sl_repeat(sl_shard(sl_range(0, 30, 1), 2, 1), 3), 6, 4, 0);
        return sl_cache(ds, NULL);
    default: {
        sl_element *el = sl_element_create(2);
        int64_t shape[1] = {5};
        int64_t *v = sl_element_add_tensor(el, SL_INT64, 1, shape);
        const char *s[5] = {"a", "bb", "", "dddd", "e"};
        for (int i = 0; i < 5; i++)
            v[i] = i * i;
        sl_element_add_strings(el, 1, shape, s, NULL);
        return sl_repeat(sl_from_tensor_slices(el), 2);
    }
    }
}

static sl_options *options(void)
{
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    sl_options_set(o, SL_OPT_SEED, SEED);
    sl_options_set(o, SL_OPT_AUTOTUNE, 0);
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    sl_dataset *ds = pipeline(data[0] >> 1);
    const uint8_t *state = data + 1;
    size_t len = size - 1;
    uint8_t *made = NULL;
    if (!(data[0] & 1)) {
        made = malloc(HDR + len);
        memset(made, 0, HDR);
        memcpy(made, "SLSTATE", 8);
        put_le(made + 8, 1, 4);
        put_le(made + 12, HDR, 4);
        put_le(made + 16, sl_dataset_fingerprint(ds), 8);
        put_le(made + 24, SEED, 8);
        put_le(made + 32, 0, 8);
        put_le(made + 40, 0, 8);
        put_le(made + 48, len, 8);
        if (len)
            memcpy(made + HDR, state, len);
        put_le(made + 56, crc32(crc32(0, NULL, 0), made + HDR, (uInt)len), 4);
        state = made;
        len += HDR;
    }
    sl_options *o = options();
    sl_iterator *it = sl_iterator_restore(ds, state, len, o);
    sl_element *el;
    volatile int64_t sink = 0;
    for (int i = 0; it && i < MAX_ELEMENTS && sl_next(it, &el) == 0; i++) {
        sink += sl_element_size(el);
        sl_element_release(el);
    }
    (void)sink;
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    free(made);
    return 0;
}

/* States sluice writes itself, after several counts, in both modes. */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    static const int ks[] = {0, 1, 5, 13, 100};
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 5; i++) {
            sl_dataset *ds = pipeline(p);
            sl_options *o = options();
            sl_iterator *it = sl_iterator_create(ds, o);
            sl_element *el;
            for (int k = 0; it && k < ks[i] && sl_next(it, &el) == 0; k++)
                sl_element_release(el);
            uint8_t buf[4096];
            int64_t n = it ? sl_iterator_save(it, buf + 1, sizeof buf - 1) : -1;
            if (n > HDR && n < (int64_t)sizeof buf) {
                buf[0] = (uint8_t)(p << 1 | 1); /* the whole state */
                add(buf, (size_t)n + 1);
                buf[HDR] = (uint8_t)(p << 1); /* the records under a made header */
                add(buf + HDR, (size_t)n + 1 - HDR);
            }
            sl_iterator_free(it);
            sl_options_free(o);
            sl_dataset_release(ds);
        }
}
