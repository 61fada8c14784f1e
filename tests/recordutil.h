/* Writers for the record-format tests: TFRecord framing, tar members
 * (ustar, GNU long names, pax), and zlib/gzip wrapping of whole files.
 * Header-only, written from the formats' definitions (TFRecord: u64
 * length, masked CRC-32C of it, data, masked CRC-32C of the data). */
#ifndef SLUICE_TESTS_RECORDUTIL_H
#define SLUICE_TESTS_RECORDUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "sluice.h"

typedef struct ru_buf {
    unsigned char *p;
    size_t n, cap;
} ru_buf;

static inline void ru_put(ru_buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static inline uint32_t ru_mask(uint32_t c)
{
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static inline void ru_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One TFRecord record. */
static inline void ru_record(ru_buf *b, const void *data, size_t n)
{
    unsigned char h[12], t[4];
    ru_le(h, n, 8);
    ru_le(h + 8, ru_mask(sl_crc32c(0, h, 8)), 4);
    ru_le(t, ru_mask(sl_crc32c(0, data, n)), 4);
    ru_put(b, h, 12);
    ru_put(b, data, n);
    ru_put(b, t, 4);
}

/* A ustar header for `name` (split into prefix/name when long enough to
 * need it and short enough to fit) of `size` bytes and type. */
static inline void ru_tar_header(unsigned char *h, const char *name, uint64_t size, char type)
{
    memset(h, 0, 512);
    size_t len = strlen(name);
    if (len <= 100) {
        memcpy(h, name, len);
    } else {
        const char *cut = name + len - 100;
        while (*cut && *cut != '/')
            cut++;
        size_t pl = (size_t)(cut - name);
        memcpy(h + 345, name, pl < 155 ? pl : 155);
        memcpy(h, cut + 1, strlen(cut + 1) < 100 ? strlen(cut + 1) : 100);
    }
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (unsigned char)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static inline void ru_tar_data(ru_buf *b, const void *data, size_t n)
{
    static const unsigned char zero[512];
    ru_put(b, data, n);
    ru_put(b, zero, (512 - n % 512) % 512);
}

/* A regular member. */
static inline void ru_tar_file(ru_buf *b, const char *name, const void *data, size_t n)
{
    unsigned char h[512];
    ru_tar_header(h, name, n, '0');
    ru_put(b, h, 512);
    ru_tar_data(b, data, n);
}

/* A member named by a GNU 'L' header before it. */
static inline void ru_tar_gnu_long(ru_buf *b, const char *name, const void *data, size_t n)
{
    unsigned char h[512];
    ru_tar_header(h, "././@LongLink", strlen(name) + 1, 'L');
    memcpy(h + 257, "ustar  ", 8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    ru_put(b, h, 512);
    ru_tar_data(b, name, strlen(name) + 1);
    ru_tar_header(h, "truncated-name", n, '0');
    ru_put(b, h, 512);
    ru_tar_data(b, data, n);
}

/* A member whose path comes from a pax 'x' header. */
static inline void ru_tar_pax(ru_buf *b, const char *name, const void *data, size_t n)
{
    char rec[4096];
    size_t body = strlen(name) + strlen(" path=\n");
    size_t len = body + 1;
    while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
        len = body + (size_t)snprintf(NULL, 0, "%zu", len);
    int k = snprintf(rec, sizeof rec, "%zu path=%s\n", len, name);
    unsigned char h[512];
    ru_tar_header(h, "PaxHeader/x", (uint64_t)k, 'x');
    ru_put(b, h, 512);
    ru_tar_data(b, rec, (size_t)k);
    ru_tar_header(h, "short", n, '0');
    ru_put(b, h, 512);
    ru_tar_data(b, data, n);
}

/* Samples "d/NNN.jpg" (not really a JPEG), ".cls" (N) and ".txt" for N
 * in [0, n): the fuzz targets' plain seed samples. Sample N starts at
 * at[N] when at is not NULL. */
static inline void ru_tar_samples(ru_buf *b, int n, uint64_t *at)
{
    for (int s = 0; s < n; s++) {
        char name[32], cls[16];
        if (at)
            at[s] = b->n;
        snprintf(name, sizeof name, "d/%03d.jpg", s);
        ru_tar_file(b, name, "\xff\xd8 not really a jpeg", 20);
        snprintf(name, sizeof name, "d/%03d.cls", s);
        snprintf(cls, sizeof cls, "%d\n", s);
        ru_tar_file(b, name, cls, strlen(cls));
        snprintf(name, sizeof name, "d/%03d.txt", s);
        ru_tar_file(b, name, "a caption", 9);
    }
}

/* A pax record whose length digits follow newlines ("\n\n\n\n\n5 abc"):
 * strtoull would skip them and find a record that ends before its key
 * (a regression case of the pax parser), then one sample after it. */
static inline void ru_tar_bad_pax(ru_buf *b)
{
    static const char rec[] = "\n\n\n\n\n5 abc";
    unsigned char h[512];
    ru_tar_header(h, "PaxHeader/x", sizeof rec - 1, 'x');
    ru_put(b, h, 512);
    ru_tar_data(b, rec, sizeof rec - 1);
    ru_tar_file(b, "s/a.jpg", "xx", 2);
    ru_tar_file(b, "s/a.cls", "1", 1);
    ru_tar_file(b, "s/a.txt", "t", 1);
}

static inline void ru_tar_end(ru_buf *b)
{
    static const unsigned char zero[1024];
    ru_put(b, zero, 1024);
}

/* b compressed whole: zlib format (windowBits 15) or gzip (31). */
static inline ru_buf ru_deflate(const ru_buf *b, int window_bits)
{
    ru_buf out = {0};
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
    out.cap = deflateBound(&z, (uLong)b->n) + 64;
    out.p = malloc(out.cap);
    z.next_in = b->p;
    z.avail_in = (uInt)b->n;
    z.next_out = out.p;
    z.avail_out = (uInt)out.cap;
    deflate(&z, Z_FINISH);
    out.n = out.cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static inline void ru_write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        if (n) /* (an empty file's buffer may be NULL) */
            fwrite(p, 1, n, f);
        fclose(f);
    }
}

#endif
