/* Test JPEGs made on the fly with libjpeg's compressor, from synthetic
 * content that looks enough like a photograph for the codec (smooth
 * gradients, a few hard edges, some texture). Header-only: static inline functions
 * for the tests that include it. Buffers are malloc'd; free() them. */
#ifndef SLUICE_TESTS_JPEGUTIL_H
#define SLUICE_TESTS_JPEGUTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h> /* before jpeglib.h */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jpeglib.h>

typedef struct ju_opts {
    int quality;     /* 0: 95 */
    int progressive;
    int restart;     /* restart interval in MCUs, 0: none */
    int subsample;   /* 0: libjpeg's default 4:2:0, 1: 4:4:4, 2: 4:2:2 */
} ju_opts;

static inline uint32_t ju_hash(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* w x h RGB: gradients, a disc and a bar with hard edges, a textured
 * patch and mild noise. Different seeds move things around. */
static inline uint8_t *ju_synth(int w, int h, unsigned seed)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    double cx = w * (0.3 + 0.4 * (seed % 7) / 7.0), cy = h * (0.4 + 0.2 * (seed % 3) / 3.0);
    double rad = 0.25 * (w < h ? w : h) + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double u = (double)x / w, v = (double)y / h;
            double r = 60 + 120 * u + 30 * sin(6.0 * v + seed);
            double g = 40 + 150 * v + 20 * cos(5.0 * u + 0.5 * seed);
            double b = 90 + 80 * (1 - u) * v + 25 * sin(9.0 * (u + v));
            if ((x - cx) * (x - cx) + (y - cy) * (y - cy) < rad * rad) {
                r = 220 - 40 * v, g = 60 + 30 * u, b = 40;
            }
            if (x > w / 2 && x < w / 2 + 1 + w / 10) {
                r = 20, g = 30 + 20 * v, b = 160;
            }
            if (x < w / 3 && y > 2 * h / 3) { /* texture: stripes and grain */
                double t = 25 * sin(x * 0.9) * cos(y * 0.7);
                r += t, g += t, b += t;
            }
            double n = (double)(ju_hash((unsigned)(y * w + x) ^ (seed * 2654435761U)) % 9) - 4;
            double c[3] = {r + n, g + n, b + n};
            for (int k = 0; k < 3; k++)
                p[((size_t)y * w + x) * 3 + k] = (uint8_t)(c[k] < 0 ? 0 : c[k] > 255 ? 255 : c[k] + 0.5);
        }
    return p;
}

/* BT.601 luma, as libjpeg computes it. */
static inline uint8_t *ju_gray(const uint8_t *rgb, int w, int h)
{
    uint8_t *g = malloc((size_t)w * h);
    for (size_t i = 0; i < (size_t)w * h; i++)
        g[i] = (uint8_t)(0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2] +
                         0.5);
    return g;
}

/* CMYK in Adobe's inverted convention (what libjpeg writes with an Adobe
 * marker and what Photoshop files hold): R = C * K / 255. */
static inline uint8_t *ju_cmyk(const uint8_t *rgb, int w, int h)
{
    uint8_t *c = malloc((size_t)w * h * 4);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        int r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
        int k = r > g ? (r > b ? r : b) : (g > b ? g : b);
        for (int j = 0; j < 3; j++) {
            int v = rgb[3 * i + j];
            c[4 * i + j] = (uint8_t)(k ? (v * 255 + k / 2) / k : 0);
        }
        c[4 * i + 3] = (uint8_t)k;
    }
    return c;
}

/* Encodes w x h pixels of `comps` components (1 gray, 3 RGB, 4 CMYK). */
static inline uint8_t *ju_encode(const uint8_t *pix, int w, int h, int comps, const ju_opts *o,
                          size_t *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buf, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, o && o->quality ? o->quality : 95, TRUE);
    if (o && o->subsample == 1 && comps == 3)
        c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 1;
    if (o && o->subsample == 2 && comps == 3)
        c.comp_info[0].v_samp_factor = 1; /* h 2, v 1 */
    if (o && o->progressive)
        jpeg_simple_progression(&c);
    if (o && o->restart)
        c.restart_interval = (unsigned)o->restart;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pix + (size_t)c.next_scanline * w * comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *n = size;
    return buf;
}

/* Plain libjpeg full decode to RGB with libjpeg's defaults (ISLOW DCT,
 * fancy upsampling), the reference for bit-exact comparisons. */
static inline uint8_t *ju_decode(const uint8_t *jpg, size_t n, int *w, int *h)
{
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr e;
    d.err = jpeg_std_error(&e);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, jpg, (unsigned long)n);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    *w = (int)d.output_width;
    *h = (int)d.output_height;
    uint8_t *p = malloc((size_t)*w * *h * 3);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = p + (size_t)d.output_scanline * *w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return p;
}

/* A synthetic RGB image of w x h encoded with o (NULL: quality 95, 4:2:0). */
static inline uint8_t *ju_make(int w, int h, unsigned seed, const ju_opts *o, size_t *n)
{
    uint8_t *rgb = ju_synth(w, h, seed);
    uint8_t *jpg = ju_encode(rgb, w, h, 3, o, n);
    free(rgb);
    return jpg;
}

/* An image folder under root (which exists): root/c0 .. c<classes-1>,
 * each with per_class JPEGs 00.jpg, 01.jpg, ... of assorted sizes
 * (80 + 13 i by 60 + 17 c), seeded by their position. 0 or -1. */
static inline int ju_write_folder(const char *root, int classes, int per_class)
{
    for (int c = 0; c < classes; c++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/c%d", root, c);
        if (mkdir(dir, 0755) != 0)
            return -1;
        for (int i = 0; i < per_class; i++) {
            size_t n;
            uint8_t *jpg = ju_make(80 + 13 * i, 60 + 17 * c, (unsigned)(c * per_class + i),
                                   NULL, &n);
            char path[1100];
            snprintf(path, sizeof path, "%s/%02d.jpg", dir, i);
            FILE *f = fopen(path, "wb");
            bool ok = f && fwrite(jpg, 1, n, f) == n;
            if (f)
                fclose(f);
            free(jpg);
            if (!ok)
                return -1;
        }
    }
    return 0;
}

#endif
