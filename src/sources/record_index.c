#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "../core/crc32c.h"
#include "../core/error.h"
#include "../core/fileio.h"
#include "../core/le.h"
#include "record_index.h"

#define TFRECORD_FRAMING 16 /* u64 length, u32 its CRC, ..., u32 the data's CRC */

static int push(sl__record_index *x, uint64_t offset, uint32_t size)
{
    if (sl__bytes_append(&x->offsets, &offset, sizeof offset) ||
        sl__bytes_append(&x->sizes, &size, sizeof size))
        return sl__set_error(SL_ENOMEM, "record index: out of memory");
    x->count++;
    return 0;
}

void sl__record_index_free(sl__record_index *x)
{
    sl__bytes_free(&x->offsets);
    sl__bytes_free(&x->sizes);
    x->count = 0;
}

/* A decimal number at *p (digits only, no sign, below 2^63). */
static bool number(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (x > (UINT64_C(1) << 62) / 5)
            return false;
        x = x * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s == *p)
        return false;
    *p = s;
    *v = x;
    return true;
}

int sl__record_index_parse(const char *text, size_t len, uint64_t shard_size, uint32_t min_size,
                           const char *name, sl__record_index *out)
{
    memset(out, 0, sizeof *out);
    const char *p = len ? text : "", *end = p + len; /* an empty file's text may be NULL */
    uint64_t next = 0; /* where the next record may start */
    int64_t line = 0;
    int rc = 0;
    while (p < end && rc == 0) {
        line++;
        uint64_t offset, size;
        const char *why = NULL;
        if (!number(&p, end, &offset))
            why = "expected \"offset size\"";
        else {
            const char *gap = p;
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if (p == gap || !number(&p, end, &size))
                why = "expected \"offset size\"";
            else {
                while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
                    p++;
                if (p < end && *p != '\n')
                    why = "unexpected text after \"offset size\"";
                else if (p < end)
                    p++;
            }
        }
        if (!why && offset < next)
            why = "the record overlaps the one before (offsets must increase)";
        else if (!why && (size < min_size || size > UINT32_MAX))
            why = "a record size out of range";
        else if (!why && (offset > shard_size || size > shard_size - offset))
            why = "the record runs past the end of the shard";
        if (why) {
            rc = sl__set_error(SL_ECORRUPT, "%s: line %lld: %s", name, (long long)line, why);
            break;
        }
        rc = push(out, offset, (uint32_t)size);
        next = offset + size;
    }
    if (rc == 0 && next != shard_size)
        rc = sl__set_error(SL_ECORRUPT, "%s: its records end at byte %llu, the shard has %llu "
                           "(an index of another file, or of an older version of it)",
                           name, (unsigned long long)next, (unsigned long long)shard_size);
    if (rc)
        sl__record_index_free(out);
    return rc;
}

int sl__tfrecord_index_build(int fd, uint64_t size, const char *path, sl__record_index *out)
{
    memset(out, 0, sizeof *out);
    uint64_t at = 0;
    int rc = 0;
    while (at < size && rc == 0) {
        unsigned char hdr[12];
        ssize_t got = sl__pread_full(fd, hdr, sizeof hdr, at);
        if (got < 0) {
            rc = sl__set_error(SL_EIO, "%s: read at byte %llu: %s", path, (unsigned long long)at,
                               strerror(errno));
            break;
        }
        uint64_t len = sl__get_le64(hdr);
        const char *why = NULL;
        if ((size_t)got < sizeof hdr)
            why = "the file ends inside a record's header";
        else if (sl__crc32c_mask(sl__crc32c(0, hdr, 8)) != sl__get_le32(hdr + 8))
            why = "bad length CRC (not a TFRecord file, or a compressed one: random access "
                  "needs an uncompressed shard)";
        else if (len > UINT32_MAX - TFRECORD_FRAMING || len + TFRECORD_FRAMING > size - at)
            why = "a record runs past the end of the file";
        if (why) {
            rc = sl__set_error(SL_ECORRUPT, "%s: %s at byte %llu", path, why,
                               (unsigned long long)at);
            break;
        }
        rc = push(out, at, (uint32_t)(len + TFRECORD_FRAMING));
        at += len + TFRECORD_FRAMING;
    }
    if (rc)
        sl__record_index_free(out);
    return rc;
}

int sl__record_index_write(const sl__record_index *x, const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof tmp)
        return sl__set_error(SL_EINVAL, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sl__set_error(SL_EIO, "%s: %s", tmp, strerror(errno));
    char line[48];
    sl__bytes text = {0};
    int rc = 0;
    for (int64_t i = 0; i < x->count && rc == 0; i++) {
        int n = snprintf(line, sizeof line, "%llu %u\n",
                         (unsigned long long)sl__record_offset(x, i), sl__record_size(x, i));
        rc = sl__bytes_append(&text, line, (size_t)n) ? SL_ENOMEM : 0;
    }
    if (rc == 0 && sl__write_all(fd, text.p, text.n) != 0)
        rc = sl__set_error(SL_EIO, "%s: %s", tmp, strerror(errno));
    sl__bytes_free(&text);
    if (close(fd) != 0 && rc == 0)
        rc = sl__set_error(SL_EIO, "%s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = sl__set_error(SL_EIO, "%s: %s", path, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}
