/*
 * TFRecord files (sl_tfrecord): each record is
 *
 *   u64 length, u32 masked CRC-32C of those 8 bytes, data[length],
 *   u32 masked CRC-32C of the data          (all little-endian)
 *
 * read straight from the stream into the output's string tensor (one copy
 * from the I/O chunk, or inflated into it). A bad length cannot be stepped
 * over, so it loses the rest of the file; a bad data CRC or an oversized
 * record loses only that record.
 */
#include <stdio.h>
#include <string.h>
#include "../core/crc32c.h"
#include "../core/le.h"
#include "shards.h"

typedef struct tfrecord_ds {
    sl_dataset base;
    int compression;
    unsigned flags;
} tfrecord_ds;

typedef struct tfrecord_iter {
    sl__iter base;
    sl__shards sh;
} tfrecord_iter;

/* An error that stops reading this file (the message says where). */
static int lose(tfrecord_iter *it, int code)
{
    return sl__shards_lose_file(&it->base, &it->sh, code);
}

static int corrupt(tfrecord_iter *it, const char *what, uint64_t at)
{
    return sl__set_error(SL_ECORRUPT, "%s: %s at byte %llu%s", sl__stream_path(it->sh.s), what,
                         (unsigned long long)at,
                         sl__stream_compressed(it->sh.s) ? " of the uncompressed stream" : "");
}

/* What a bad length CRC means: at the start of a file read as plain, the
 * file is often compressed (tf.data is told the compression, as sluice
 * is, and says no more than that the CRC is wrong). */
static const char *bad_length_crc(const sl__stream *s, const unsigned char *hdr, uint64_t at)
{
    int looks = at == 0 && !sl__stream_compressed(s) ? sl__stream_sniff(hdr, 12)
                                                     : SL_COMPRESSION_NONE;
    return looks == SL_COMPRESSION_GZIP
               ? "bad length CRC (the file begins as gzip does: read it with compression GZIP)"
           : looks == SL_COMPRESSION_ZLIB
               ? "bad length CRC (the file begins as a zlib stream does: read it with "
                 "compression ZLIB)"
               : "bad length CRC (the record's length cannot be trusted)";
}

/* One record from the current file: 0 with *out, 1 when the file is used
 * up or lost (go on with the next), or an error to return. */
static int record(tfrecord_iter *it, sl_element **out)
{
    const tfrecord_ds *d = (const tfrecord_ds *)it->base.ds;
    sl__stream *s = it->sh.s;
    uint64_t at = sl__stream_offset(s);
    unsigned char hdr[12];
    size_t got;
    int rc = sl__stream_read(s, hdr, sizeof hdr, &got);
    if (rc == 0 && got == 0) { /* a clean end of file */
        sl__shards_end_file(&it->base, &it->sh);
        return 1;
    }
    if (rc == 0 && got < sizeof hdr)
        rc = corrupt(it, "file ends inside a record's header", at);
    if (rc == 0 && sl__crc32c_mask(sl__crc32c(0, hdr, 8)) != sl__get_le32(hdr + 8))
        rc = corrupt(it, bad_length_crc(s, hdr, at), at);
    if (rc < 0)
        return (rc = lose(it, rc)) ? rc : 1;
    uint64_t len = sl__get_le64(hdr);
    if (len > (uint64_t)it->sh.max_record) {
        char what[128];
        snprintf(what, sizeof what, "record of %llu bytes, over the limit of %lld "
                 "(SL_OPT_MAX_RECORD_BYTES)", (unsigned long long)len,
                 (long long)it->sh.max_record);
        uint64_t skipped;
        rc = sl__stream_skip(s, len + 4, &skipped);
        if (rc == 0 && skipped < len + 4) { /* a length that lies: the file is lost */
            char why[192];
            snprintf(why, sizeof why, "%s, running past the end of the file", what);
            rc = corrupt(it, why, at);
        }
        if (rc < 0)
            return (rc = lose(it, rc)) ? rc : 1;
        corrupt(it, what, at);
        sl__error_prefix(sl_dataset_name(it->base.ds));
        return (rc = sl__policy(&it->base, SL_ECORRUPT)) ? rc : 2;
    }
    bool paths = d->flags & SL_WITH_PATHS;
    sl_element *el = sl__element_new(paths ? 2 : 1, 0);
    struct sl_tensor *t = el ? sl__element_push(el, SL_STRING, 0, NULL, 16 + (size_t)len) : NULL;
    if (!t) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    uint64_t *off = t->data;
    off[0] = 0;
    off[1] = len;
    unsigned char crc[4];
    size_t got2 = 0;
    bool check = !(d->flags & SL_TFRECORD_NO_DATA_CRC);
    uint32_t sum = 0; /* the data's CRC, computed as it is copied out */
    rc = check ? sl__stream_read_crc(s, off + 2, (size_t)len, &got, &sum)
               : sl__stream_read(s, off + 2, (size_t)len, &got);
    if (rc == 0 && got == len)
        rc = sl__stream_read(s, crc, 4, &got2);
    if (rc == 0 && (got < len || got2 < 4))
        rc = corrupt(it, "file ends inside a record", at);
    if (rc < 0) {
        sl_element_release(el);
        return (rc = lose(it, rc)) ? rc : 1;
    }
    if (check && sl__crc32c_mask(sum) != sl__get_le32(crc)) {
        sl_element_release(el);
        corrupt(it, "bad data CRC in the record", at);
        sl__error_prefix(sl_dataset_name(it->base.ds));
        return (rc = sl__policy(&it->base, SL_ECORRUPT)) ? rc : 2;
    }
    if (paths && (rc = sl_element_add_shared(el, it->sh.path, 0)) < 0) {
        sl_element_release(el);
        return rc;
    }
    sl__element_set_origin(el, it->sh.path);
    it->base.ok_count++;
    *out = el;
    return 0;
}

static int tfrecord_next(sl__iter *base, sl_element **out)
{
    tfrecord_iter *it = (tfrecord_iter *)base;
    for (;;) {
        int rc = sl__shards_stream(base, &it->sh);
        if (rc)
            return rc;
        rc = record(it, out);
        if (rc <= 0)
            return rc;
    }
}

static void tfrecord_destroy(sl__iter *base)
{
    sl__shards_fini(&((tfrecord_iter *)base)->sh);
}

static int tfrecord_save(sl__iter *base, sl__bytes *w)
{
    tfrecord_iter *it = (tfrecord_iter *)base;
    int64_t at = it->sh.s ? (int64_t)sl__stream_offset(it->sh.s) : -1;
    return sl__shards_save(base, &it->sh, w, at);
}

static const sl__iter_ops tfrecord_iter_ops = {
    .next = tfrecord_next,
    .destroy = tfrecord_destroy,
    .save = tfrecord_save,
};

static int tfrecord_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                         sl__iter **out)
{
    tfrecord_iter *it = sl__iter_alloc(&tfrecord_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int rc = sl__shards_init(&it->base, &it->sh, ((const tfrecord_ds *)ds)->compression, epoch);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static uint64_t tfrecord_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const tfrecord_ds *d = (const tfrecord_ds *)ds;
    return sl__hash_u64(sl__hash_u64(h, (uint64_t)d->compression), d->flags);
}

static sl_dataset *tfrecord_rebuild_files(const sl_dataset *ds, sl_dataset *files)
{
    const tfrecord_ds *d = (const tfrecord_ds *)ds;
    return sl_tfrecord(files, d->compression, d->flags);
}

static const sl__node_ops tfrecord_ops = {
    .kind = "tfrecord",
    .make_iter = tfrecord_make,
    .fingerprint = tfrecord_fingerprint,
    .rebuild_files = tfrecord_rebuild_files,
};

SL_API sl_dataset *sl_tfrecord(sl_dataset *paths, int compression, unsigned flags)
{
    tfrecord_ds *d = (tfrecord_ds *)sl__dataset_new(&tfrecord_ops, sizeof *d, paths);
    if (!d)
        return NULL;
    if (compression < SL_COMPRESSION_NONE || compression > SL_COMPRESSION_GZIP)
        return sl__dataset_fail(&d->base, SL_EINVAL, "tfrecord: unknown compression %d",
                                compression);
    if (flags & ~(SL_WITH_PATHS | SL_TFRECORD_NO_DATA_CRC))
        return sl__dataset_fail(&d->base, SL_EINVAL, "tfrecord: unknown flags 0x%x", flags);
#ifdef SLUICE_NO_ZLIB
    if (compression != SL_COMPRESSION_NONE)
        return sl__dataset_fail(&d->base, SL_EUNSUPPORTED, "tfrecord: compressed files need "
                                "zlib, which this build has not (SLUICE_WITH_ZLIB=OFF)");
#endif
    d->compression = compression;
    d->flags = flags;
    return sl__dataset_structured(&d->base, sl_structure_parse(
        flags & SL_WITH_PATHS ? "(string[], string[])" : "string[]"));
}

SL_API sl_dataset *sl_tfrecord_fn(const sl_element *path, void *user)
{
    int compression = user ? *(const int *)user : SL_COMPRESSION_NONE;
    return sl_tfrecord(sl_from_element((sl_element *)path), compression, 0);
}
