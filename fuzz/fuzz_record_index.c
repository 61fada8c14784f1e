/* Random access over TFRecord shards (sl_tfrecord_indexed): an index file
 * and a shard are input from disk, and whatever they hold must give
 * records that passed their CRCs, element errors naming the shard and the
 * offset, or a refusal naming the index line, never a read out of bounds,
 * a crash or a leak.
 *
 * Input: byte 0 picks the mode. Bit 0 clear: the rest is an index (DALI's
 * "offset size" text) given for a fixed valid shard of five records, so
 * the fuzzer works on the index parser and on reads at the offsets it
 * claims. Set: the rest is the shard, indexed by its own pass over the
 * headers (and then read through that index). Bit 1: skip the data CRC. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tests/recordutil.h"
#include "fuzz.h"
#include "sluice.h"

static char shard[64], index_path[80], beside[80];

static ru_buf valid_shard(void)
{
    ru_buf b = {0};
    for (int i = 0; i < 5; i++) {
        char rec[64];
        int n = snprintf(rec, sizeof rec, "record %d: %.*s", i, i * 9,
                         "the quick brown fox jumps over the lazy dog");
        ru_record(&b, rec, (size_t)n);
    }
    return b;
}

static void read_all(const char *const *index, unsigned flags)
{
    const char *paths[] = {shard};
    fuzz_drain(sl_tfrecord_indexed(paths, 1, index, flags), SL_ERRORS_SKIP);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!shard[0]) {
        snprintf(shard, sizeof shard, "/tmp/sluice-fuzz-index-%d", (int)getpid());
        snprintf(index_path, sizeof index_path, "%s.given", shard);
        snprintf(beside, sizeof beside, "%s.idx", shard);
        sl_set_log_level(SL_LOG_ERROR);
    }
    unsigned flags = data[0] & 2 ? SL_TFRECORD_NO_DATA_CRC : 0;
    if (data[0] & 1) {
        ru_write(shard, data + 1, size - 1);
        unlink(beside);
        read_all(NULL, flags);
    } else {
        ru_buf b = valid_shard();
        ru_write(shard, b.p, b.n);
        free(b.p);
        ru_write(index_path, data + 1, size - 1);
        const char *given[] = {index_path};
        read_all(given, flags);
    }
    unlink(shard);
    unlink(index_path);
    unlink(beside);
    return 0;
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    ru_buf b = valid_shard(), text = {0};
    unsigned char m = 0;
    ru_put(&text, &m, 1);
    /* the shard's true index, as tfrecord2idx writes it */
    uint64_t at = 0;
    for (size_t off = 0; off < b.n;) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++)
            len |= (uint64_t)b.p[off + i] << (8 * i);
        char line[64];
        int n = snprintf(line, sizeof line, "%llu %llu\n", (unsigned long long)at,
                         (unsigned long long)(len + 16));
        ru_put(&text, line, (size_t)n);
        off += len + 16;
        at = off;
    }
    add(text.p, text.n);
    ru_buf s = {0};
    m = 1;
    ru_put(&s, &m, 1);
    ru_put(&s, b.p, b.n);
    add(s.p, s.n);
    s.p[0] = 3;
    add(s.p, s.n);
    free(b.p), free(text.p), free(s.p);
}
