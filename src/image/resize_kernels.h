/*
 * The resampler's files share this header (nothing else includes it):
 *
 *   resize.c         filter taps, the RGB driver (sl__resize), writing the
 *                    output, and the choice of tier
 *   resize_ycc.c     the YCbCr-plane driver (sl__resize_ycc) and its
 *                    colour stage
 *   resize_c.c       portable kernels: the reference, and all there is
 *                    off x86 or with -DSL__IMAGE_PORTABLE
 *   resize_sse2.c    SSE2 kernels (x86-64's baseline)
 *   resize_ssse3.c   the SSSE3 colour pass that the AVX2 and AVX-512
 *                    tiers share
 *   resize_avx2.c    AVX2 kernels
 *   resize_avx512.c  AVX-512 kernels (BW, VL, VNNI; VBMI for colour)
 *
 * A tier is a table of kernels (sl__resize_kernels); which tier the
 * process runs is image/'s one choice (cpu.h). Each resizer holds the
 * table of the tier it was made under, so the per-row loops call through
 * it and never ask the CPU again. Every tier computes the integers of the
 * portable one; a tier may hand a case its own code cannot do (short
 * rows, wide filters) to a narrower tier's kernel.
 */
#ifndef SL_IMAGE_RESIZE_KERNELS_H
#define SL_IMAGE_RESIZE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "cpu.h"     /* the tiers, and which of them this build has */
#include "image.h"
#include "testing.h" /* the hooks resize*.c define */

#define WBITS 14 /* weights: fixed point, summing to exactly 1 << WBITS */
#define IBITS 6  /* fraction bits of the intermediate row (255 << 6 fits int16) */
#define VSHIFT (WBITS - IBITS)
#define HSHIFT (WBITS + IBITS)
#define ROW_PAD 64 /* int16 after the intermediate row that SIMD reads may touch */

/* Filter taps of one axis; rebuilt only when the geometry changes. */
typedef struct sl__axis {
    double pos, len; /* key: window, source size and output size */
    int size, out;
    bool valid;
    int lo, hi;      /* source pixels used: [lo, hi) */
    int taps;        /* per output sample: the widest filter */
    int pitch;       /* weights per sample: taps rounded up to even (pairs) */
    int32_t *start;  /* first source pixel of each output sample */
    int16_t *w;      /* out x pitch, zero-padded */
    double *t;       /* taps: one sample's filter values, while building */
    size_t start_cap, w_cap, t_cap; /* bytes */
    /* What a tier's horizontal passes read besides w, built by its
     * horizontal_for once per geometry (reset when the taps change).
     * AVX-512, RGB: per group of 4 samples, its first pixel and per pair
     * of taps a word permutation and the matching weights. */
    int g_state;     /* 0: not built, 1: built, -1: a group spans too far */
    int32_t *g_base;
    int16_t *g_tab;  /* groups x pitch/2 x (32 indices, 32 weights) */
    size_t g_base_cap, g_tab_cap;
    /* SSE2, one plane: the weights again with a pitch of whole 8-word
     * vectors */
    bool w8_valid;
    int p8;
    int16_t *w8;
    size_t w8_cap;
    /* AVX-512, one plane: groups of 16 samples, as g_* for RGB */
    int g1_state;
    int32_t *g1_base;
    int16_t *g1_tab;
    size_t g1_base_cap, g1_tab_cap;
} sl__axis;

/* dst[x] = sum_k w[k] * src[k * stride + x] for x in [0, n), keeping IBITS
 * of fraction: the vertical pass over one output row's source rows. */
typedef void (*sl__vpass)(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                          int16_t *dst, int n);
/* One output row from the intermediate row (first pixel = a->lo), columns
 * reversed when flipping: RGB pixels, or one plane's samples. */
typedef void (*sl__hpass)(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip);
/* n pixels of Y, Cb and Cr rows to RGB bytes (BT.601 full range, as JFIF). */
typedef void (*sl__ycc_rgb_pass)(const uint8_t *y, const uint8_t *cb, const uint8_t *cr,
                                 uint8_t *rgb, int n);
/* The same after a colour transform of the samples in 16-bit lanes
 * (augment.h, sl__colour_coef): Y' = (Y * 128 *h A + O + 4) >> 3 and
 * (Cb', Cr') = (K (Cb - 128, Cr - 128) * 128 *h + 4) >> 3, where *h keeps
 * the high 16 bits of the product, kept unclamped into the conversion, so
 * that only R, G and B clip. c: A, O, K00, K01, K10, K11. */
typedef void (*sl__ycc_rgb_colour_pass)(const uint8_t *y, const uint8_t *cb, const uint8_t *cr,
                                        uint8_t *rgb, int n, const int16_t c[6]);

struct sl__resize_kernels {
    const char *name;
    int level; /* SL__IMAGE_C ... SL__IMAGE_AVX512 */
    sl__vpass vertical;
    /* The horizontal pass for axis a, RGB (horizontal_for) or one plane
     * (horizontal1_for): called once per image after the taps are built,
     * it builds what the pass reads (once per geometry) and returns the
     * pass, this tier's own or a narrower tier's where its own cannot do
     * the geometry. NULL: out of memory. */
    sl__hpass (*horizontal_for)(sl__axis *a);
    sl__hpass (*horizontal1_for)(sl__axis *a);
    sl__ycc_rgb_pass ycc_rgb;
    sl__ycc_rgb_colour_pass ycc_rgb_colour;
    /* The weights of samples i .. i + 7 of an axis of at most 8 taps, equal
     * to sl__axis_sample's; false, with nothing written, for samples it
     * leaves to that. NULL where the portable builder is all. */
    bool (*weights8)(sl__axis *a, int i, double scale, double fs, double inv_fs);
    /* Whether the YCbCr planes (sl__resize_ycc) beat the RGB window with
     * these kernels (bench/README.md, "YCbCr planes"). */
    bool planes_pay;
};

struct sl__resizer {
    const sl__resize_kernels *k; /* fixed at creation */
    sl__axis ax, ay;
    sl__axis cx, cy; /* sl__resize_ycc: the chroma planes' (ax, ay: luma's) */
    int16_t *row;    /* vertical pass result: (hi - lo) RGB pixels */
    uint8_t *line;   /* one output row, RGB, before layout/dtype */
    size_t row_cap, line_cap;
    uint8_t *planes; /* sl__resize_ycc: one output row of Y, Cb, Cr */
    size_t planes_cap;
    bool lut_valid;
    float lut_mean[3], lut_std[3];
    float lut[3][256];
};

/* ---- shared by the drivers and the tiers (resize.c) ---- */

/* Grows an aligned buffer to at least need bytes (contents not kept). */
int sl__resize_reserve(void **p, size_t *cap, size_t need);
/* Builds a's taps for a window (pos, len) of size pixels to out samples
 * with k's weight builder, unless they are already those. 0 or SL_ENOMEM. */
int sl__axis_build(sl__axis *a, const sl__resize_kernels *k, double pos, double len, int size,
                   int out);
/* The portable weights of sample i (what weights8 must equal). */
void sl__axis_sample(sl__axis *a, int i, double scale, double fs, double inv_fs);
/* Output: readies the float lookup of out's normalisation, and writes
 * output row y from line (RGB) in out's layout and dtype. */
void sl__resize_lut(sl__resizer *r, const sl__resize_out *out);
void sl__resize_store(const sl__resizer *r, const sl__resize_out *out, int y,
                      const uint8_t *line);

/* Taps k and k + 1 as one int32 for pmaddwd / vpdpwssd (w[k] low,
 * w[k + 1] high); an odd last tap pairs with 0. */
static inline int32_t sl__tap_pair(const int16_t *w, int k, int taps)
{
    int32_t v;
    if (k + 1 < taps)
        memcpy(&v, w + k, sizeof v); /* little-endian */
    else
        v = (uint16_t)w[k];
    return v;
}

/* BT.601 full range (JFIF) in Q15, applied as pmulhrsw does:
 * R = Y + Cr + 0.402 Cr, G = Y - 0.34414 Cb - 0.71414 Cr,
 * B = Y + Cb + 0.772 Cb, with Cb and Cr centred on 0. */
#define K_CR_R 13173
#define K_CB_G 11277
#define K_CR_G 23401
#define K_CB_B 25297

/* ---- the tiers' tables, and the kernels one tier lends another ---- */

extern const sl__resize_kernels sl__resize_c;
void sl__vertical_c(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                    int16_t *dst, int n);
void sl__horizontal1_c(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip, int o0,
                       int o1); /* output columns [o0, o1) */
void sl__ycc_rgb_c(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint8_t *rgb, int n);
void sl__ycc_rgb_colour_c(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint8_t *rgb,
                          int n, const int16_t c[6]);

#ifdef SL__IMAGE_HAVE_SSE2
extern const sl__resize_kernels sl__resize_sse2;
void sl__horizontal_sse2(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip,
                         int o0, int o1); /* output columns [o0, o1) */
sl__hpass sl__horizontal1_sse2_for(sl__axis *a);
#endif

#ifdef SL__IMAGE_HAVE_AVX
void sl__ycc_rgb_ssse3(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint8_t *rgb,
                       int n);
extern const sl__resize_kernels sl__resize_avx2;
void sl__vertical_avx2(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                       int16_t *dst, int n);
void sl__horizontal_avx2(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip);
extern const sl__resize_kernels sl__resize_avx512; /* colour pass: VBMI's */
#endif

#endif
