/*
 * Sharded formats for sluice-bench: writing TFRecord or WebDataset tar
 * shards from an image folder (--make-shards), and reading them as the
 * benchmark's source (--format).
 *
 * TFRecord shards hold tf.train.Example records with the features
 * TensorFlow's build_imagenet_data.py writes (image/encoded,
 * image/class/label, image/filename, image/format), framed with masked
 * CRC-32C; tar shards hold KEY.jpg and KEY.cls members, as WebDataset's
 * writers make them. Files are named train-NNNNN-of-MMMMM.{tfrecord,tar}
 * (.gz added when compressed). The images go in a seeded shuffled order,
 * so every shard holds every class.
 */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "sluice_bench.h"

const char *const format_names[3] = {"folder", "tfrecord", "tar"};

/* ---- output: a file, gzip-compressed on the way or not ---- */

typedef struct out {
    FILE *f;
    bool gz;
    z_stream z;
    unsigned char buf[1 << 16];
    int64_t bytes; /* uncompressed */
    char path[4096];
    FILE *idx;     /* uncompressed: "<shard>.idx", one "offset size" line per record */
} out;

static int out_open(out *o, const char *path, bool gz)
{
    memset(o, 0, sizeof *o);
    o->f = fopen(path, "wb");
    if (!o->f) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    snprintf(o->path, sizeof o->path, "%s", path);
    if (!gz) /* written beside after the shard, so the readers take it as current */
        o->idx = tmpfile();
    o->gz = gz;
    if (gz && deflateInit2(&o->z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    return 0;
}

static int out_deflate(out *o, int flush)
{
    int zr;
    do {
        o->z.next_out = o->buf;
        o->z.avail_out = sizeof o->buf;
        zr = deflate(&o->z, flush);
        size_t n = sizeof o->buf - o->z.avail_out;
        if (n && fwrite(o->buf, 1, n, o->f) != n)
            return -1;
    } while (o->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
    return 0;
}

static int out_write(out *o, const void *p, size_t n)
{
    o->bytes += (int64_t)n;
    if (!o->gz)
        return fwrite(p, 1, n, o->f) == n ? 0 : -1;
    o->z.next_in = (unsigned char *)p;
    o->z.avail_in = (uInt)n;
    return out_deflate(o, Z_NO_FLUSH);
}

/* A record (or sample) from `start` to where the shard is now. */
static void out_index(out *o, int64_t start)
{
    if (o->idx)
        fprintf(o->idx, "%lld %lld\n", (long long)start, (long long)(o->bytes - start));
}

static int out_close(out *o)
{
    int rc = 0;
    if (o->gz) {
        rc = out_deflate(o, Z_FINISH);
        deflateEnd(&o->z);
    }
    if (fclose(o->f) != 0)
        rc = -1;
    if (o->idx) { /* the index, once the shard is whole */
        char path[4200];
        snprintf(path, sizeof path, "%s.idx", o->path);
        FILE *f = rc == 0 ? fopen(path, "w") : NULL;
        char buf[1 << 16];
        size_t n;
        rewind(o->idx);
        while (f && (n = fread(buf, 1, sizeof buf, o->idx)) > 0)
            if (fwrite(buf, 1, n, f) != n)
                rc = -1;
        if (!f || fclose(f) != 0)
            rc = -1;
        fclose(o->idx);
    }
    return rc;
}

/* ---- tf.train.Example, by hand ---- */

static size_t varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

static size_t varint_len(uint64_t v)
{
    unsigned char t[10];
    return varint(t, v);
}

typedef struct pb {
    unsigned char *p;
    size_t n, cap;
} pb;

static void pb_put(pb *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void pb_tag_len(pb *b, int field, uint64_t len)
{
    unsigned char t[20];
    size_t n = varint(t, (uint64_t)field << 3 | 2);
    n += varint(t + n, len);
    pb_put(b, t, n);
}

/* One map entry of Features: key -> Feature{bytes_list or int64_list}. */
static void feature(pb *b, const char *key, const void *bytes, size_t blen, const int64_t *iv)
{
    size_t klen = strlen(key);
    size_t list; /* BytesList{value=1} or Int64List{value=1 packed} */
    if (iv)
        list = 1 + varint_len(varint_len((uint64_t)*iv)) + varint_len((uint64_t)*iv);
    else
        list = 1 + varint_len(blen) + blen;
    size_t feat = 1 + varint_len(list) + list;       /* Feature{bytes_list=1 | int64_list=3} */
    size_t entry = 1 + varint_len(klen) + klen + 1 + varint_len(feat) + feat;
    pb_tag_len(b, 1, entry);
    pb_tag_len(b, 1, klen);
    pb_put(b, key, klen);
    pb_tag_len(b, 2, feat);
    pb_tag_len(b, iv ? 3 : 1, list);
    if (iv) {
        unsigned char t[10];
        size_t n = varint(t, (uint64_t)*iv);
        pb_tag_len(b, 1, n);
        pb_put(b, t, n);
    } else {
        pb_tag_len(b, 1, blen);
        pb_put(b, bytes, blen);
    }
}

/* Example{features=1: Features{feature: ...}} */
static void example(pb *out, const void *jpg, size_t n, int64_t label, const char *name)
{
    pb f = {0};
    feature(&f, "image/encoded", jpg, n, NULL);
    feature(&f, "image/class/label", NULL, 0, &label);
    feature(&f, "image/filename", name, strlen(name), NULL);
    feature(&f, "image/format", "JPEG", 4, NULL);
    out->n = 0;
    pb_tag_len(out, 1, f.n);
    pb_put(out, f.p, f.n);
    free(f.p);
}

static uint32_t masked(uint32_t c)
{
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static int tfrecord_put(out *o, const void *p, size_t n)
{
    unsigned char h[12], t[4];
    for (int i = 0; i < 8; i++)
        h[i] = (unsigned char)((uint64_t)n >> (8 * i));
    uint32_t lc = masked(sl_crc32c(0, h, 8)), dc = masked(sl_crc32c(0, p, n));
    for (int i = 0; i < 4; i++) {
        h[8 + i] = (unsigned char)(lc >> (8 * i));
        t[i] = (unsigned char)(dc >> (8 * i));
    }
    return out_write(o, h, 12) || out_write(o, p, n) || out_write(o, t, 4) ? -1 : 0;
}

/* ---- tar members ---- */

static int tar_put(out *o, const char *name, const void *p, size_t n)
{
    unsigned char h[512] = {0};
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)n);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    static const unsigned char zero[512];
    size_t pad = (512 - n % 512) % 512;
    return out_write(o, h, 512) || out_write(o, p, n) || out_write(o, zero, pad) ? -1 : 0;
}

/* ---- writing ---- */

static void shard_name(char *buf, size_t n, const config *cfg, const char *dir, int64_t i,
                       int64_t count)
{
    snprintf(buf, n, "%s/train-%05lld-of-%05lld.%s%s", dir, (long long)i, (long long)count,
             cfg->format == FORMAT_TAR ? "tar" : "tfrecord", cfg->compression ? ".gz" : "");
}

int shards_write(const config *cfg)
{
    if (mkdir(cfg->shards_out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "sluice-bench: %s: %s\n", cfg->shards_out, strerror(errno));
        return -1;
    }
    sl_dataset *ds = sl_image_folder(cfg->dir, NULL, SL_WITH_PATHS);
    int64_t files = ds ? sl_dataset_cardinality(ds) : -1;
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, cfg->seed, SL_SHUFFLE_NO_RESHUFFLE);
    sl_iterator *it = ds ? sl_iterator_create(ds, NULL) : NULL;
    if (!it) {
        fprintf(stderr, "sluice-bench: %s: %s\n", cfg->dir, sl_last_error());
        sl_dataset_release(ds);
        return -1;
    }
    int64_t per = cfg->shard_size, count = (files + per - 1) / per, i = 0;
    out o;
    bool open = false;
    pb rec = {0};
    int rc = 0;
    sl_element *el;
    int64_t bytes = 0;
    while (rc == 0 && (rc = sl_next(it, &el)) == 0) {
        char path[4096];
        if (i % per == 0) {
            if (open) {
                if (cfg->format == FORMAT_TAR)
                    rc = out_write(&o, (unsigned char[1024]){0}, 1024);
                bytes += o.bytes;
                rc = out_close(&o) || rc ? -1 : 0;
            }
            shard_name(path, sizeof path, cfg, cfg->shards_out, i / per, count);
            rc = rc ? rc : out_open(&o, path, cfg->compression);
            open = rc == 0;
        }
        const sl_tensor *img = sl_element_tensor(el, 0);
        int64_t label = sl_tensor_int64(sl_element_tensor(el, 1));
        size_t plen;
        const char *p = sl_tensor_string(sl_element_tensor(el, 2), 0, &plen);
        const char *base = p;
        for (size_t k = 0; k < plen; k++)
            if (p[k] == '/')
                base = p + k + 1;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(plen - (size_t)(base - p)), base);
        int64_t start = o.bytes;
        if (rc == 0 && cfg->format == FORMAT_TFRECORD) {
            example(&rec, sl_tensor_data(img), sl_tensor_nbytes(img), label, name);
            rc = tfrecord_put(&o, rec.p, rec.n);
        } else if (rc == 0) {
            char key[64], cls[32];
            snprintf(key, sizeof key, "%08lld.jpg", (long long)i);
            rc = tar_put(&o, key, sl_tensor_data(img), sl_tensor_nbytes(img));
            snprintf(key, sizeof key, "%08lld.cls", (long long)i);
            snprintf(cls, sizeof cls, "%lld", (long long)label);
            rc = rc ? rc : tar_put(&o, key, cls, strlen(cls));
        }
        if (rc == 0)
            out_index(&o, start);
        sl_element_release(el);
        i++;
    }
    if (rc == SL_EOF)
        rc = 0;
    else if (rc < 0)
        fprintf(stderr, "sluice-bench: %s\n", rc == -1 ? "writing a shard failed"
                                                       : sl_iterator_errmsg(it));
    if (open) {
        if (rc == 0 && cfg->format == FORMAT_TAR)
            rc = out_write(&o, (unsigned char[1024]){0}, 1024);
        bytes += o.bytes;
        if (out_close(&o) != 0)
            rc = -1;
    }
    free(rec.p);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    if (rc == 0)
        printf("wrote %lld images into %lld %s shards in %s (%.1f MB uncompressed)\n",
               (long long)i, (long long)count, format_names[cfg->format], cfg->shards_out,
               (double)bytes / 1e6);
    return rc < 0 ? -1 : 0;
}

/* ---- reading ---- */

/* The shards: *.tfrecord or *.tar, *.gz with --compression (not the
 * .idx indexes --make-shards writes beside uncompressed ones). */
static char *pattern(const config *cfg, char *buf, size_t n)
{
    snprintf(buf, n, "%s/*.%s%s", cfg->dir, cfg->format == FORMAT_TAR ? "tar" : "tfrecord",
             cfg->compression ? ".gz" : "");
    return buf;
}

static sl_dataset *tar_fn(const sl_element *path, void *user)
{
    (void)user;
    static const char *keys[] = {"jpg;jpeg", "cls"};
    static const sl_dtype types[] = {SL_UINT8, SL_INT64};
    return sl_tar_shards(sl_from_element((sl_element *)path), keys, types, 2, 0);
}

/* An interleave's elements are what its function's datasets give, which
 * it learns only when it opens the first: said here, so that what follows
 * knows it when built (parse_example's dict, map_image's image). */
static sl_dataset *declare(sl_dataset *ds, const char *structure)
{
    sl_structure *s = sl_structure_parse(structure);
    int rc = ds && s ? sl_dataset_declare_structure(ds, s) : -1;
    sl_structure_release(s);
    if (rc < 0 && ds) {
        sl_dataset_release(ds);
        ds = NULL;
    }
    return ds;
}

sl_dataset *shards_source(const config *cfg, unsigned flags)
{
    char pat[4096];
    const char *pats[] = {pattern(cfg, pat, sizeof pat)};
    /* training reads the shards in a new order each epoch */
    sl_dataset *ds = sl_list_files(pats, 1, cfg->preset == PRESET_TRAIN ? SL_LIST_SHUFFLE : 0,
                                   cfg->seed);
    if (cfg->format == FORMAT_TFRECORD) {
        static int gzip = SL_COMPRESSION_GZIP, none = SL_COMPRESSION_NONE;
        ds = sl_interleave(ds, sl_tfrecord_fn, cfg->compression ? &gzip : &none, cfg->cycle, 1,
                           (int)cfg->knob[KNOB_INTERLEAVE], 0);
        ds = declare(ds, "string[]");
        sl_feature f[2] = {{.key = "image/encoded", .type = SL_FEATURE_BYTES},
                           {.key = "image/class/label", .type = SL_FEATURE_INT64}};
        ds = sl_parse_example_parallel(ds, f, 2, 0, (int)cfg->knob[KNOB_PARSE]);
    } else {
        ds = sl_interleave(ds, tar_fn, NULL, cfg->cycle, 1, (int)cfg->knob[KNOB_INTERLEAVE], 0);
        ds = declare(ds, "(uint8[?], int64[])");
    }
    (void)flags;
    if (cfg->cardinality >= 0)
        ds = sl_assert_cardinality(ds, cfg->cardinality);
    if (cfg->limit >= 0)
        ds = sl_take(ds, cfg->limit);
    return ds;
}

/* A bucket's shards (s3://, gs://): listed, then read once for their
 * sizes, as the folder's files are. */
static int remote_paths(const config *cfg, path_list *pl)
{
    char pat[4096];
    const char *pats[] = {pattern(cfg, pat, sizeof pat)};
    sl_dataset *ds = sl_read_files(sl_list_files(pats, 1, 0, -1), SL_WITH_PATHS);
    sl_iterator *it = ds ? sl_iterator_create(ds, NULL) : NULL;
    int rc = it ? 0 : -1;
    if (!it)
        fprintf(stderr, "sluice-bench: listing %s: %s\n", pat, sl_last_error());
    sl_element *el;
    while (it && (rc = sl_next(it, &el)) == 0) {
        size_t len;
        const char *s = sl_tensor_string(sl_element_tensor(el, 1), 0, &len);
        pl->bytes += (int64_t)sl_tensor_nbytes(sl_element_tensor(el, 0));
        rc = s ? path_list_add(pl, s, len) : -1;
        sl_element_release(el);
        if (rc < 0)
            break;
    }
    if (it && rc != SL_EOF)
        fprintf(stderr, "sluice-bench: reading %s: %s\n", pat, sl_iterator_errmsg(it));
    sl_iterator_free(it);
    sl_dataset_release(ds);
    return rc == SL_EOF ? 0 : -1;
}

int shards_paths(const config *cfg, path_list *pl)
{
    if (!strncmp(cfg->dir, "s3://", 5) || !strncmp(cfg->dir, "gs://", 5))
        return remote_paths(cfg, pl);
    char pat[4096];
    glob_t g;
    if (glob(pattern(cfg, pat, sizeof pat), 0, NULL, &g) != 0) {
        fprintf(stderr, "sluice-bench: no shards match %s\n", pat);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) == 0)
            pl->bytes += st.st_size;
        rc = path_list_add(pl, g.gl_pathv[i], strlen(g.gl_pathv[i]));
    }
    globfree(&g);
    return rc;
}

int64_t shards_count(const config *cfg)
{
    config c = *cfg;
    c.preset = PRESET_READ; /* sorted, no shuffle */
    char pat[4096];
    const char *pats[] = {pattern(&c, pat, sizeof pat)};
    sl_dataset *ds = sl_list_files(pats, 1, 0, -1);
    if (c.format == FORMAT_TFRECORD) {
        static int gzip = SL_COMPRESSION_GZIP, none = SL_COMPRESSION_NONE;
        ds = sl_interleave(ds, sl_tfrecord_fn, c.compression ? &gzip : &none, c.cycle, 1,
                           SL_AUTOTUNE, 0);
    } else {
        ds = sl_interleave(ds, tar_fn, NULL, c.cycle, 1, SL_AUTOTUNE, 0);
    }
    sl_iterator *it = ds ? sl_iterator_create(ds, NULL) : NULL;
    int64_t n = 0;
    sl_element *el;
    int rc = it ? 0 : -1;
    while (it && (rc = sl_next(it, &el)) == 0) {
        sl_element_release(el);
        n++;
    }
    if (rc != SL_EOF)
        fprintf(stderr, "sluice-bench: counting the shards' samples: %s\n",
                it ? sl_iterator_errmsg(it) : sl_last_error());
    sl_iterator_free(it);
    sl_dataset_release(ds);
    if (c.limit >= 0 && n > c.limit)
        n = c.limit;
    return rc == SL_EOF ? n : -1;
}
