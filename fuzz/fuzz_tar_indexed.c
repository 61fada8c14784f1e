/* Random access over tar shards (sl_tar_indexed): the shard and the index
 * beside it are input from disk. Whatever they hold must give samples
 * whose values lie inside the read, element errors naming the shard and
 * the offset, an index built again, or a refusal, never a read out of
 * bounds, a crash, a hang or a leak.
 *
 * Input: byte 0 picks the mode. Bit 0 set: bytes 1-2 (little-endian) are
 * the length of an index text ("offset size" lines) that follows them;
 * the rest is the shard, and the text is written beside it as
 * "<shard>.idx" dated after it, so the source takes it as current and
 * each sample is walked at the offsets it claims; bit 2 dates it before
 * the shard instead (stale: indexed again). Bit 0 clear: the rest is the
 * shard, indexed by its own pass over the headers. Bit 1: read in a full
 * shuffle's order (byte 0 seeds it) rather than in the index's. Keys as
 * fuzz_tar's: jpg or png as bytes, cls an integer, txt a string, and the
 * sample's key; under the skip policy, so every error is read through. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "../tests/recordutil.h"
#include "fuzz.h"
#include "sluice.h"

static char shard[64], beside[80];

/* The index text at beside, dated an hour after the shard (or before). */
static void write_index(const uint8_t *text, size_t n, int stale)
{
    ru_write(beside, text, n);
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec += stale ? -3600 : 3600;
    t[1] = t[0];
    utimensat(AT_FDCWD, beside, t, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!shard[0]) {
        snprintf(shard, sizeof shard, "/tmp/sluice-fuzz-tar-indexed-%d", (int)getpid());
        snprintf(beside, sizeof beside, "%s.idx", shard);
        sl_set_log_level(SL_LOG_ERROR);
    }
    unsigned mode = data[0];
    const uint8_t *rest = data + 1;
    size_t left = size - 1;
    unlink(beside);
    if (mode & 1) {
        size_t n = left >= 2 ? (size_t)rest[0] | (size_t)rest[1] << 8 : 0;
        rest += left >= 2 ? 2 : left;
        left -= left >= 2 ? 2 : left;
        n = n < left ? n : left;
        ru_write(shard, rest + n, left - n);
        write_index(rest, n, mode & 4);
    } else {
        ru_write(shard, rest, left);
    }
    static const char *keys[] = {"jpg;png", "cls", "txt"};
    static const sl_dtype types[] = {SL_UINT8, SL_INT64, SL_STRING};
    const char *paths[] = {shard};
    sl_dataset *ds = sl_tar_indexed(paths, 1, keys, types, 3, SL_WITH_PATHS);
    if (mode & 2)
        ds = sl_shuffle(ds, SL_SHUFFLE_ALL, (int64_t)mode, 0);
    fuzz_drain(ds, SL_ERRORS_SKIP);
    unlink(shard);
    unlink(beside);
    return 0;
}

/* Three plain samples, one named by a GNU long name and one by a pax
 * path; sample i spans [at[i], at[i + 1]). */
static ru_buf seed_shard(uint64_t at[6])
{
    ru_buf b = {0};
    ru_tar_samples(&b, 3, at);
    at[3] = b.n;
    ru_tar_gnu_long(&b, "a/long/name/of/more/than/one/hundred/bytes/so/that/gnu/tar/needs/an/L/"
                        "header/for/it/x.png", "xx", 2);
    ru_tar_gnu_long(&b, "a/long/name/of/more/than/one/hundred/bytes/so/that/gnu/tar/needs/an/L/"
                        "header/for/it/x.cls", " 7 ", 3);
    ru_tar_file(&b, "a/long/name/of/more/than/one/hundred/bytes/so/that/gnu/tar/needs/an/L/"
                    "header/for/it/x.txt", "", 0);
    at[4] = b.n;
    ru_tar_pax(&b, "p/y.png", "yy", 2);
    ru_tar_file(&b, "p/y.cls", "8", 1);
    ru_tar_pax(&b, "p/y.txt", "t", 1);
    at[5] = b.n;
    ru_tar_end(&b);
    return b;
}

static void put_line(ru_buf *b, uint64_t offset, uint64_t size)
{
    char line[64];
    int n = snprintf(line, sizeof line, "%llu %llu\n", (unsigned long long)offset,
                     (unsigned long long)size);
    ru_put(b, line, (size_t)n);
}

/* mode, the index's length, the index, the shard */
static void add_with_index(void (*add)(const uint8_t *, size_t), unsigned char mode,
                           const ru_buf *text, const ru_buf *tar)
{
    ru_buf in = {0};
    unsigned char head[3] = {mode, (unsigned char)text->n, (unsigned char)(text->n >> 8)};
    ru_put(&in, head, 3);
    ru_put(&in, text->p, text->n);
    ru_put(&in, tar->p, tar->n);
    add(in.p, in.n);
    free(in.p);
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    uint64_t at[6];
    ru_buf tar = seed_shard(at), in = {0}, good = {0}, bad = {0};
    unsigned char m = 0;
    ru_put(&in, &m, 1);
    ru_put(&in, tar.p, tar.n);
    add(in.p, in.n); /* indexed by its own pass */
    in.p[0] = 2;
    add(in.p, in.n);
    for (int i = 0; i < 5; i++)
        put_line(&good, at[i], at[i + 1] - at[i]);
    add_with_index(add, 1, &good, &tar); /* the true index, current */
    add_with_index(add, 3, &good, &tar);
    add_with_index(add, 5, &good, &tar); /* stale */
    /* an index of another file: a sample cut short, two samples as one,
     * one starting inside a member, one ending in the end blocks */
    put_line(&bad, at[0], at[1] - at[0] - 512);
    put_line(&bad, at[1], at[3] - at[1]);
    put_line(&bad, at[3] + 512, at[4] - at[3] - 512);
    put_line(&bad, at[4], at[5] - at[4] + 1024);
    add_with_index(add, 1, &bad, &tar);
    add_with_index(add, 3, &bad, &tar);
    in.n = 1; /* a regression: a malformed pax record */
    in.p[0] = 0;
    ru_tar_bad_pax(&in);
    ru_tar_end(&in);
    add(in.p, in.n);
    free(tar.p), free(in.p), free(good.p), free(bad.p);
}
