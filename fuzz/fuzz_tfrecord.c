/* The TFRecord reader: a shard is input from disk (or object storage), and
 * whatever it holds must come out as records that passed their CRCs, or
 * errors naming the file and offset, never a crash, a hang or an
 * allocation the file does not justify.
 *
 * Input: byte 0 picks the mode. Bits 0-1: 0 the rest is the file as is;
 * 1 the rest is a gzip file (read with GZIP); 2 the rest is compressed
 * here (gzip) first, so the fuzzer works on the records inside a valid
 * stream; 3 as 0, without the data CRC check. The skip policy reads
 * through every error; records are capped at 1 MiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tests/recordutil.h"
#include "fuzz.h"
#include "sluice.h"

static char path[64];

static int run_file(int compression, unsigned flags)
{
    const char *paths[] = {path};
    sl_dataset *ds = sl_tfrecord(sl_from_files(paths, NULL, 1), compression, flags);
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0);
    sl_options_set(o, SL_OPT_MAX_RECORD_BYTES, 1 << 20);
    sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
    sl_element *el;
    volatile size_t sink = 0;
    while (it && sl_next(it, &el) == 0) {
        size_t len;
        const char *s = sl_tensor_string(sl_element_tensor(el, 0), 0, &len);
        for (size_t i = 0; i < len; i += 64)
            sink += (unsigned char)s[i];
        sl_element_release(el);
    }
    (void)sink;
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/sluice-fuzz-tfrecord-%d", (int)getpid());
    int mode = data[0] & 3;
    ru_buf in = {(unsigned char *)data + 1, size - 1, size - 1};
    if (mode == 2) {
        ru_buf z = ru_deflate(&in, 31);
        ru_write(path, z.p, z.n);
        free(z.p);
    } else {
        ru_write(path, in.p, in.n);
    }
    run_file(mode == 1 || mode == 2 ? SL_COMPRESSION_GZIP : SL_COMPRESSION_NONE,
             mode == 3 ? SL_TFRECORD_NO_DATA_CRC : 0);
    unlink(path);
    return 0;
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    ru_buf b = {0};
    unsigned char m = 0;
    ru_put(&b, &m, 1);
    for (int i = 0; i < 5; i++) {
        char rec[64];
        int n = snprintf(rec, sizeof rec, "record %d: %.*s", i, i * 7, "abcdefghijklmnopqrstuvwxyz0123456789");
        ru_record(&b, rec, (size_t)n);
    }
    ru_record(&b, "", 0);
    add(b.p, b.n);
    b.p[0] = 2; /* the same records, gzip-compressed by the harness */
    add(b.p, b.n);
    b.p[0] = 3;
    add(b.p, b.n);
    ru_buf body = {b.p + 1, b.n - 1, b.n - 1};
    ru_buf z = ru_deflate(&body, 31);
    ru_buf g = {0};
    m = 1;
    ru_put(&g, &m, 1);
    ru_put(&g, z.p, z.n);
    add(g.p, g.n);
    free(z.p), free(g.p), free(b.p);
}
