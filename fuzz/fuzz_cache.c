/* The cache file reader: a cache file is input from disk, and whatever it
 * holds must be served as elements whose every byte is in bounds, rebuilt,
 * or refused with a message naming the offset, never a crash or a leak.
 *
 * Input: byte 0 picks the mode. Bit 0 set: the rest is the whole file,
 * header included (the header checks). Clear: byte 1 is the element count
 * and the rest the payload, under a header this harness makes valid
 * (fingerprint of the pipeline, length, crc32), so the fuzzer reaches the
 * record parser instead of stopping at the checksum. Bit 1: the elements
 * are batched in twos. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "fuzz.h"
#include "sluice.h"

#define HDR 48

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static char path[64], partial[80];

static void paths(void)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/sluice-fuzz-cache-%d", (int)getpid());
        snprintf(partial, sizeof partial, "%s.partial", path);
        sl_set_log_level(SL_LOG_ERROR); /* "rebuilding it" on every input otherwise */
    }
}

static sl_dataset *upstream(void)
{
    return sl_range(0, 3, 1);
}

static int write_input(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    if (data[0] & 1) {
        fwrite(data + 1, 1, size - 1, f);
    } else {
        unsigned char h[HDR] = "SLCACHE1";
        sl_dataset *up = upstream();
        const uint8_t *payload = data + 2;
        size_t len = size - 2;
        put_le(h + 8, 1, 4);
        put_le(h + 12, HDR, 4);
        put_le(h + 16, sl_dataset_fingerprint(up), 8);
        put_le(h + 24, data[1], 8);
        put_le(h + 32, len, 8);
        put_le(h + 40, crc32(crc32(0, NULL, 0), payload, (uInt)len), 4);
        sl_dataset_release(up);
        fwrite(h, 1, HDR, f);
        fwrite(payload, 1, len, f);
    }
    return fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    paths();
    if (size < 2 || write_input(data, size) != 0)
        return 0;
    sl_dataset *ds = sl_cache(upstream(), path);
    if (data[0] & 2) /* elements of several shapes meet in a batch */
        ds = sl_batch(ds, 2, 0);
    fuzz_drain(ds, SL_ERRORS_FAIL);
    unlink(path);
    unlink(partial);
    return 0;
}

/* Cache files sluice writes itself, of elements with numbers, shapes and
 * strings, in both modes. */
static void add_cached(void (*add)(const uint8_t *, size_t), sl_dataset *ds)
{
    paths();
    sl_dataset *c = sl_cache(ds, path);
    sl_iterator *it = sl_iterator_create(c, NULL);
    sl_element *el;
    while (it && sl_next(it, &el) == 0)
        sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(c);
    FILE *f = fopen(path, "rb");
    uint8_t buf[1 << 16];
    size_t n = f ? fread(buf + 1, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    unlink(path);
    if (n <= HDR)
        return;
    buf[0] = 1; /* the whole file */
    add(buf, n + 1);
    buf[HDR - 1] = 0; /* the payload under a made header */
    buf[HDR] = buf[1 + 24]; /* the count, low byte */
    add(buf + HDR - 1, n + 1 - HDR + 1);
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    add_cached(add, sl_range(0, 5, 1));
    sl_element *el = sl_element_create(3);
    int64_t shape[2] = {3, 2};
    float *f = sl_element_add_tensor(el, SL_FLOAT32, 2, shape);
    for (int i = 0; i < 6; i++)
        f[i] = (float)i / 3;
    const char *s[3] = {"alpha", "", "gamma/delta.jpg"};
    int64_t three = 3;
    sl_element_add_strings(el, 1, &three, s, NULL);
    uint8_t *b = sl_element_add_tensor(el, SL_UINT8, 2, shape);
    memset(b, 7, 6);
    add_cached(add, sl_from_tensor_slices(el));
}
