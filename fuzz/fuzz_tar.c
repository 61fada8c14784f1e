/* The tar shard reader (WebDataset): a shard's headers, names, sizes and
 * member data are input from disk; samples come out whole, or as errors
 * naming the shard and offset, never a crash, a hang or an allocation the
 * file does not justify.
 *
 * Input: byte 0 bit 0: the rest is compressed here (gzip) first, so the
 * fuzzer works on the tar inside a valid stream; clear: the rest is the
 * file as is (a gzip one is detected by its magic). Keys: jpg or png as
 * bytes, cls as an integer, txt as a string. The skip policy reads through
 * every error; members are capped at 1 MiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tests/recordutil.h"
#include "fuzz.h"
#include "sluice.h"

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/sluice-fuzz-tar-%d", (int)getpid());
    ru_buf in = {(unsigned char *)data + 1, size - 1, size - 1};
    if (data[0] & 1) {
        ru_buf z = ru_deflate(&in, 31);
        ru_write(path, z.p, z.n);
        free(z.p);
    } else {
        ru_write(path, in.p, in.n);
    }
    static const char *keys[] = {"jpg;png", "cls", "txt"};
    static const sl_dtype types[] = {SL_UINT8, SL_INT64, SL_STRING};
    const char *paths[] = {path};
    sl_dataset *ds = sl_tar_shards(sl_from_files(paths, NULL, 1), keys, types, 3, SL_WITH_PATHS);
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0);
    sl_options_set(o, SL_OPT_MAX_RECORD_BYTES, 1 << 20);
    sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
    sl_element *el;
    volatile size_t sink = 0;
    while (it && sl_next(it, &el) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        const unsigned char *p = sl_tensor_data(t);
        for (size_t i = 0; i < sl_tensor_nbytes(t); i += 64)
            sink += p[i];
        size_t len;
        const char *s = sl_tensor_string(sl_element_tensor(el, 2), 0, &len);
        sink += len && s ? (unsigned char)s[len - 1] : 0;
        sink += (size_t)sl_tensor_int64(sl_element_tensor(el, 1));
        sl_element_release(el);
    }
    (void)sink;
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    unlink(path);
    return 0;
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    ru_buf b = {0};
    unsigned char m = 0;
    ru_put(&b, &m, 1);
    ru_tar_samples(&b, 3, NULL);
    ru_tar_gnu_long(&b, "a/long/name/of/more/than/one/hundred/bytes/so/that/gnu/tar/needs/an/L/"
                        "header/for/it/x.jpg", "xx", 2);
    ru_tar_file(&b, "a/long/name/of/more/than/one/hundred/bytes/so/that/gnu/tar/needs/an/L/"
                    "header/for/it/x.cls", "7", 1);
    ru_tar_pax(&b, "p/y.png", "yy", 2);
    ru_tar_file(&b, "p/y.cls", "8", 1);
    ru_tar_file(&b, "p/y.txt", "t", 1);
    ru_tar_end(&b);
    add(b.p, b.n);
    b.p[0] = 1;
    add(b.p, b.n);
    /* regressions: a malformed pax record; a gzip stream cut after its
     * magic (the stream's own error, not a walker's) */
    b.n = 1;
    b.p[0] = 0;
    ru_tar_bad_pax(&b);
    ru_tar_end(&b);
    add(b.p, b.n);
    add((const uint8_t *)"\x00\x1f\x8b\x30", 4);
    free(b.p);
}
