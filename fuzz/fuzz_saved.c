/* The saved-dataset reader (sl_load): a saved dataset is input from disk
 * (another job's save, a copied or damaged directory), and whatever its
 * manifest and shard files hold must be served as whole elements or
 * refused with a message naming the file, never a crash, a leak or a hang.
 *
 * Input: bits 0-1 of byte 0 pick the mode.
 *   0: the rest is the manifest, written as is next to the shard files of
 *      a real save (bits 2-3 pick which: int64s over shards 0 and 3,
 *      uncompressed or zlib; strings, floats and bytes in shard 0,
 *      uncompressed or gzip).
 *   1: the same, with a crc32c line the harness computes in place of the
 *      last line (when that is one) or after it, so the fuzzer reaches the
 *      manifest's body.
 *   2: byte 1 is an element count and the rest is shard 0's file, under a
 *      manifest the harness makes valid for it (the file's size, that
 *      count, the compression its header names, the checksum), so the
 *      fuzzer reaches the chunks instead of stopping at the manifest.
 *   3: the same, and the harness also makes each chunk's framing valid
 *      (its stored length within the file, raw length = stored length
 *      when uncompressed, both CRCs), so the fuzzer reaches the records.
 *   In modes 2 and 3, bit 2 writes the file again as shard 1: every index
 *   repeats another shard's, which the merge must refuse.
 * Bit 4: the error policy skips, so the reader goes on past a damaged
 * chunk. Bit 5: after 1 element (bit 7: 3) the position is saved and the
 * rest read by a restored iterator, which skips chunks by their headers.
 * Bit 6: the elements are batched in twos. Then the same directory is read
 * by position (load().shuffle(ALL)): its index built in one pass, each
 * element fetched alone, under the skip policy.
 *
 * After each input, with everything released, the library must hold what
 * it held before: every free gave back the size its allocation took. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz.h"
#include "sluice.h"

#define FILE_HDR 16
#define CHUNK_HDR 20
#define MAX_FILE 4096

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* CRC-32C (Castagnoli, reflected), bit by bit: written apart from the
 * library's, so a harness that agrees with its files checks it too. */
static uint32_t crc32c(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = c >> 1 ^ (0x82f63b78u & (0u - (c & 1)));
    }
    return ~c;
}

typedef struct file {
    unsigned char p[MAX_FILE];
    size_t n;
    long long index, elements; /* a shard's */
} file;

/* A real save: its manifest and its shard files. */
typedef struct saved {
    file manifest;
    file shards[2];
    int nshards;
} saved;

static char dir[64];
static saved saves[4];
static file empty_manifest; /* of a save of nothing: no shards */
static int64_t baseline = -1;

static void remove_dir(const char *d)
{
    DIR *h = opendir(d);
    if (!h)
        return;
    char path[512];
    for (struct dirent *e; (e = readdir(h)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", d, e->d_name);
            unlink(path);
        }
    closedir(h);
    rmdir(d);
}

static int write_file(const char *d, const char *name, const void *p, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", d, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    return fclose(f) != 0 || w != n ? -1 : 0;
}

static void read_file(const char *d, const char *name, file *out)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", d, name);
    FILE *f = fopen(path, "rb");
    out->n = f ? fread(out->p, 1, sizeof out->p - 1, f) : 0; /* a NUL after it */
    if (f)
        fclose(f);
}

static int split(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)el;
    *key = (*(int64_t *)user)++ % 2 ? 3 : 0;
    return 0;
}

static int one(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)el, (void)user;
    *key = 0;
    return 0;
}

/* Saves ds (consumed) with one private thread, so that no default runtime
 * holds memory between inputs; keeps the files in out. */
static void save(sl_dataset *ds, int compression, sl_key_fn shard_fn, saved *out)
{
    char d[80];
    snprintf(d, sizeof d, "%s-seed", dir);
    remove_dir(d);
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    int64_t calls = 0;
    int rc = ds ? sl_save(ds, d, o, compression, shard_fn, &calls) : SL_ENOMEM;
    sl_options_free(o);
    sl_dataset_release(ds);
    if (rc == 0) {
        read_file(d, "manifest", &out->manifest);
        const char *line = (const char *)out->manifest.p;
        const char *end = line + out->manifest.n;
        while (line < end && out->nshards < 2) {
            file *s = &out->shards[out->nshards];
            if (sscanf(line, "shard %lld %lld", &s->index, &s->elements) == 2) {
                char name[32];
                snprintf(name, sizeof name, "shard-%08lld.sls", s->index);
                read_file(d, name, s);
                out->nshards++;
            }
            const char *nl = memchr(line, '\n', (size_t)(end - line));
            line = nl ? nl + 1 : end;
        }
    }
    remove_dir(d);
}

/* Three elements of a float32 [2], a string and a uint8 [2]. */
static sl_dataset *mixed(void)
{
    sl_element *el = sl_element_create(3);
    int64_t shape[2] = {3, 2}, three = 3;
    float *f = sl_element_add_tensor(el, SL_FLOAT32, 2, shape);
    for (int i = 0; i < 6; i++)
        f[i] = (float)i / 3;
    const char *s[3] = {"alpha", "", "gamma/delta.jpg"};
    sl_element_add_strings(el, 1, &three, s, NULL);
    unsigned char *b = sl_element_add_tensor(el, SL_UINT8, 2, shape);
    memset(b, 7, 6);
    return sl_from_tensor_slices(el);
}

static void init(void)
{
    if (dir[0])
        return;
    snprintf(dir, sizeof dir, "/tmp/sluice-fuzz-saved-%d", (int)getpid());
    sl_set_log_level(SL_LOG_ERROR); /* damaged chunks skipped, logged otherwise */
    save(sl_range(0, 7, 1), SL_COMPRESSION_NONE, split, &saves[0]);
    save(sl_range(0, 7, 1), SL_COMPRESSION_ZLIB, split, &saves[1]);
    save(mixed(), SL_COMPRESSION_NONE, one, &saves[2]);
    save(mixed(), SL_COMPRESSION_GZIP, one, &saves[3]);
    saved empty = {0};
    save(sl_range(0, 0, 1), SL_COMPRESSION_NONE, one, &empty);
    empty_manifest = empty.manifest;
    remove_dir(dir);
    sl_release_memory();
    baseline = sl_memory_in_use();
}

/* text[0..n) with its last line, when that is a crc32c line, replaced by
 * the right one (appended otherwise), into out (n + 18 bytes). */
static size_t with_crc(const unsigned char *text, size_t n, char *out)
{
    size_t end = n && text[n - 1] == '\n' ? n - 1 : n, start = end;
    while (start && text[start - 1] != '\n')
        start--;
    size_t body = end - start >= 7 && memcmp(text + start, "crc32c ", 7) == 0 ? start : n;
    memcpy(out, text, body);
    if (body && out[body - 1] != '\n')
        out[body++] = '\n';
    return body + (size_t)snprintf(out + body, 17, "crc32c %08x\n", crc32c(out, body));
}

/* Modes 0 and 1: a real save's shard files under the input's manifest. */
static int write_manifest_mode(const uint8_t *data, size_t size)
{
    const saved *s = &saves[(data[0] >> 2) & 3];
    for (int i = 0; i < s->nshards; i++) {
        char name[32];
        snprintf(name, sizeof name, "shard-%08lld.sls", s->shards[i].index);
        if (write_file(dir, name, s->shards[i].p, s->shards[i].n) != 0)
            return -1;
    }
    if ((data[0] & 3) == 0)
        return write_file(dir, "manifest", data + 1, size - 1);
    char *text = malloc(size + 18);
    int rc = text ? write_file(dir, "manifest", text, with_crc(data + 1, size - 1, text)) : -1;
    free(text);
    return rc;
}

/* Mode 3: every chunk's lengths and CRCs made to agree with its bytes. */
static void fix_chunks(unsigned char *p, size_t n, int compression)
{
    for (size_t off = FILE_HDR; off <= n && n - off >= CHUNK_HDR;) {
        size_t room = n - off - CHUNK_HDR, stored = get_le32(p + off);
        if (stored > room)
            stored = room;
        put_le(p + off, stored, 4);
        if (compression == SL_COMPRESSION_NONE)
            put_le(p + off + 4, stored, 4);
        put_le(p + off + 12, crc32c(p + off + CHUNK_HDR, stored), 4);
        put_le(p + off + 16, crc32c(p + off, 16), 4);
        off += CHUNK_HDR + stored;
    }
}

/* Modes 2 and 3: the input's shard (once or twice) under a manifest made
 * for it. */
static int write_shard_mode(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"none", "zlib", "gzip"};
    size_t n = size - 2;
    unsigned char *p = malloc(n ? n : 1);
    if (!p)
        return -1;
    memcpy(p, data + 2, n);
    uint32_t compression = n >= FILE_HDR ? get_le32(p + 12) : 0;
    if (compression > SL_COMPRESSION_GZIP)
        compression = SL_COMPRESSION_NONE;
    if ((data[0] & 3) == 3)
        fix_chunks(p, n, (int)compression);
    int copies = data[0] & 4 ? 2 : 1;
    int rc = write_file(dir, "shard-00000000.sls", p, n);
    if (!rc && copies == 2)
        rc = write_file(dir, "shard-00000001.sls", p, n);
    free(p);
    char text[512];
    int len = snprintf(text, sizeof text, "sluice-saved-dataset 1\nfingerprint 0123456789abcdef\n"
                       "compression %s\nstructure ?\nelements %u\nshards %d\n",
                       names[compression], copies * (unsigned)data[1], copies);
    for (int i = 0; i < copies; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "shard %d %u %zu\n", i,
                        (unsigned)data[1], n);
    len += snprintf(text + len, sizeof text - (size_t)len, "crc32c %08x\n",
                    crc32c(text, (size_t)len));
    return rc ? rc : write_file(dir, "manifest", text, (size_t)len);
}

/* Up to `limit` elements of it (-1: all): 0 when it stopped at the
 * limit, or what sl_next returned. */
static int drain(sl_iterator *it, int64_t limit)
{
    sl_element *el;
    volatile unsigned sink = 0;
    for (int64_t k = 0; it && k != limit; k++) {
        int rc = sl_next(it, &el);
        if (rc != 0)
            return rc;
        sink += fuzz_touch(el);
        sl_element_release(el);
    }
    (void)sink;
    return 0;
}

static void load(unsigned flags)
{
    static unsigned char state[1 << 16]; /* a position per shard: 4096 at most */
    sl_dataset *ds = sl_load(dir);
    if (ds && flags & 0x40) /* elements of several shapes meet in a batch */
        ds = sl_batch(ds, 2, 0);
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    sl_options_set(o, SL_OPT_ERROR_POLICY, flags & 0x10 ? SL_ERRORS_SKIP : SL_ERRORS_FAIL);
    sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
    int64_t limit = flags & 0x20 ? (flags & 0x80 ? 3 : 1) : -1;
    if (drain(it, limit) == 0 && it && limit > 0) {
        int64_t n = sl_iterator_save(it, state, sizeof state);
        sl_iterator_free(it);
        it = n > 0 && (size_t)n <= sizeof state ? sl_iterator_restore(ds, state, (size_t)n, o)
                                                : NULL;
        drain(it, -1);
    }
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    fuzz_drain(sl_shuffle(sl_load(dir), SL_SHUFFLE_ALL, 1, 0), SL_ERRORS_SKIP);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init();
    if (size < 2)
        return 0;
    remove_dir(dir);
    if (mkdir(dir, 0755) != 0)
        return 0;
    int rc = data[0] & 2 ? write_shard_mode(data, size) : write_manifest_mode(data, size);
    if (rc == 0)
        load(data[0]);
    remove_dir(dir);
    sl_release_memory();
    int64_t held = sl_memory_in_use();
    if (held != baseline) {
        fprintf(stderr, "fuzz_saved: the library holds %lld bytes after the input, %lld "
                "before\n", (long long)held, (long long)baseline);
        abort();
    }
    return 0;
}

static void add_with(void (*add)(const uint8_t *, size_t), unsigned flags, unsigned count,
                     const file *f)
{
    static uint8_t buf[2 + MAX_FILE];
    size_t at = 0;
    buf[at++] = (uint8_t)flags;
    if (flags & 2)
        buf[at++] = (uint8_t)count;
    memcpy(buf + at, f->p, f->n);
    add(buf, at + f->n);
}

/* Each real save's manifest in modes 0 and 1 (plainly, and skipping,
 * resuming, batching), and its shard 0 in modes 2 and 3 (also twice). */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    init();
    for (unsigned k = 0; k < 4; k++) {
        const saved *s = &saves[k];
        if (!s->manifest.n)
            continue; /* a build without zlib */
        add_with(add, k << 2, 0, &s->manifest);
        add_with(add, k << 2 | 1, 0, &s->manifest);
        add_with(add, k << 2 | 0x10 | 0x20 | 0x80, 0, &s->manifest);
        add_with(add, k << 2 | 1 | 0x20 | 0x40, 0, &s->manifest);
        if (s->nshards && s->shards[0].index == 0) {
            unsigned count = (unsigned)s->shards[0].elements;
            add_with(add, 2, count, &s->shards[0]);
            add_with(add, 3, count, &s->shards[0]);
            add_with(add, 3 | 0x10 | 0x20, count, &s->shards[0]);
            add_with(add, 2 | 0x20 | 0x40 | 0x80, count, &s->shards[0]);
            add_with(add, 2 | 4 | 0x10, count, &s->shards[0]);
        }
    }
    if (empty_manifest.n)
        add_with(add, 0, 0, &empty_manifest);
}
