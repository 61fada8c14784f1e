/*
 * ColorJitter and RandomGrayscale as one transform: brightness,
 * contrast, saturation and hue, in the drawn order, fold into a luma gain
 * and offset and a 2x2 chroma matrix (sl__colour_fold). The resampler
 * applies it inside its YCbCr conversion where it can (resize_ycc.c,
 * with sl__colour_coef's fixed point); else it runs here, on the
 * resampled planes (sl__colour_planes), as a gain on the bytes of a gray
 * image (sl__colour_gain), or as a matrix on RGB (sl__colour_rgb).
 */
#include <math.h>
#include <string.h>
#include "augment_kernels.h"

void sl__colour_fold(const sl__colour *c, double mean_y, sl__colour_map *m)
{
    memset(m, 0, sizeof *m);
    double a = 1, o = 0, k[2][2] = {{1, 0}, {0, 1}}, mean = mean_y;
    for (int i = 0; c->jitter && i < 4; i++) {
        double f = c->factor[c->order[i]], t[2][2];
        switch (c->order[i]) {
        case 0: /* brightness: everything scales, the mean with it */
            a *= f, o *= f, mean *= f;
            for (int r = 0; r < 2; r++)
                k[r][0] *= f, k[r][1] *= f;
            break;
        case 1: /* contrast: blend with the mean gray */
            a *= f, o = f * o + (1 - f) * mean;
            for (int r = 0; r < 2; r++)
                k[r][0] *= f, k[r][1] *= f;
            break;
        case 2: /* saturation: blend with gray, which is Y */
            for (int r = 0; r < 2; r++)
                k[r][0] *= f, k[r][1] *= f;
            break;
        case 3: { /* hue: turn (Cb, Cr) by f of a turn; red -> green -> blue
                   * runs counter-clockwise there as it does in HSV */
            double cs = cos(2 * M_PI * f), sn = sin(2 * M_PI * f);
            for (int col = 0; col < 2; col++) {
                t[0][col] = cs * k[0][col] - sn * k[1][col];
                t[1][col] = sn * k[0][col] + cs * k[1][col];
            }
            memcpy(k, t, sizeof k);
            break;
        }
        }
    }
    if (c->gray)
        memset(k, 0, sizeof k);
    m->a = (float)a;
    m->o = (float)o;
    for (int r = 0; r < 2; r++)
        for (int col = 0; col < 2; col++)
            m->k[r][col] = (float)k[r][col];
}

/* Samples [x, n) of the map in float: coefficients too large for the
 * 16-bit blocks (rounded, clamped to bytes). */
static void colour_planes_float(const sl__colour_map *m, uint8_t *y, uint8_t *cb, uint8_t *cr,
                                int x, int n)
{
    for (; x < n; x++) {
        float u = (float)cb[x] - 128, v = (float)cr[x] - 128;
        y[x] = (uint8_t)sl__aug_clamp(m->a * y[x] + m->o + 0.5f);
        cb[x] = (uint8_t)sl__aug_clamp(m->k[0][0] * u + m->k[0][1] * v + 128.5f);
        cr[x] = (uint8_t)sl__aug_clamp(m->k[1][0] * u + m->k[1][1] * v + 128.5f);
    }
}

/* One sample of sl__aug_colour_block, for the samples after the last block. */
static inline void colour_one(int16_t A, int16_t O, const int16_t K[4], uint8_t *y, uint8_t *cb,
                              uint8_t *cr)
{
    int16_t u = (int16_t)((*cb - 128) * 128), v = (int16_t)((*cr - 128) * 128);
    *y = sl__aug_from_q3((int16_t)(sl__aug_mulhi((int16_t)(*y * 128), A) + O), 4);
    *cb = sl__aug_from_q3((int16_t)(sl__aug_mulhi(u, K[0]) + sl__aug_mulhi(v, K[1]) + 1024), 4);
    *cr = sl__aug_from_q3((int16_t)(sl__aug_mulhi(u, K[2]) + sl__aug_mulhi(v, K[3]) + 1024), 4);
}

static void colour_ints(sl__colour_map *m)
{
    float kmax = fabsf(m->a);
    for (int i = 0; i < 4; i++)
        kmax = fmaxf(kmax, fabsf(m->k[i / 2][i % 2]));
    /* the 16-bit blocks while coefficients stay under 7.9 and the offset
     * under 2000 levels (any ColorJitter short of extreme ranges) */
    m->fast = kmax < 7.9f && fabsf(m->o) < 2000;
    if (m->fast) {
        m->a16 = (int16_t)lrintf(m->a * 4096);
        m->o16 = (int16_t)lrintf(m->o * 8);
        for (int i = 0; i < 4; i++)
            m->k16[i] = (int16_t)lrintf(m->k[i / 2][i % 2] * 4096);
    }
    m->ready = true;
}

bool sl__colour_coef(sl__colour_map *m, int16_t c[6])
{
    if (!m->ready)
        colour_ints(m);
    c[0] = m->a16, c[1] = m->o16;
    memcpy(c + 2, m->k16, sizeof m->k16);
    return m->fast;
}

void sl__colour_planes(sl__colour_map *m, uint8_t *y, uint8_t *cb, uint8_t *cr, int n)
{
    if (!m->ready)
        colour_ints(m);
    if (!m->fast) {
        colour_planes_float(m, y, cb, cr, 0, n);
        return;
    }
    int x = sl__aug_kernels()->planes(m->a16, m->o16, m->k16, y, cb, cr, n);
    for (; x < n; x++)
        colour_one(m->a16, m->o16, m->k16, y + x, cb + x, cr + x);
}

/* v -> clamp(a v + o), truncated, on n bytes: brightness and contrast,
 * which act on each channel alike. */
void sl__colour_gain(uint8_t *p, size_t n, float a, float o)
{
    if (!(255 * fabsf(a) + fabsf(o) < 4000)) { /* past the 16-bit lanes: float */
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)sl__aug_clamp(a * p[i] + o);
        return;
    }
    sl__aug_kernels()->gain(p, n, (int16_t)lrintf(a * 4096), (int16_t)floorf(o * 8));
}

/* The fold as a matrix on RGB: RGB -> (Y, Cb, Cr) (JFIF), the map, and
 * back; the offset lands on Y, which every channel carries. */
static void rgb_matrix(const sl__colour_map *m, float M[3][3])
{
    static const double T[3][3] = {{0.299, 0.587, 0.114},
                                   {-0.168735892, -0.331264108, 0.5},
                                   {0.5, -0.418687589, -0.081312411}};
    static const double Ti[3][3] = {{1, 0, 1.402}, {1, -0.344136286, -0.714136286},
                                    {1, 1.772, 0}};
    double J[3][3] = {{m->a, 0, 0}, {0, m->k[0][0], m->k[0][1]}, {0, m->k[1][0], m->k[1][1]}};
    double JT[3][3];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            JT[r][c] = 0;
            for (int k = 0; k < 3; k++)
                JT[r][c] += J[r][k] * T[k][c];
        }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            double v = 0;
            for (int k = 0; k < 3; k++)
                v += Ti[r][k] * JT[k][c];
            M[r][c] = (float)v;
        }
}

/* The matrix on BLOCK pixels: channels into float lanes, nine
 * multiply-adds a pixel in vector blocks, truncated as _blend. */
static inline __attribute__((always_inline)) void
matrix_block(const float M[3][3], float o, uint8_t *p)
{
    float r[BLOCK], g[BLOCK], b[BLOCK], out[3][BLOCK];
    for (int j = 0; j < BLOCK; j++) {
        r[j] = p[3 * j];
        g[j] = p[3 * j + 1];
        b[j] = p[3 * j + 2];
    }
    for (int ch = 0; ch < 3; ch++) {
        float m0 = M[ch][0], m1 = M[ch][1], m2 = M[ch][2];
        for (int j = 0; j < BLOCK; j++)
            out[ch][j] = sl__aug_clamp(m0 * r[j] + m1 * g[j] + m2 * b[j] + o);
    }
    for (int j = 0; j < BLOCK; j++) {
        p[3 * j] = (uint8_t)out[0][j];
        p[3 * j + 1] = (uint8_t)out[1][j];
        p[3 * j + 2] = (uint8_t)out[2][j];
    }
}

void sl__colour_rgb(const sl__colour_map *m, uint8_t *rgb, size_t n)
{
    float M[3][3], o = m->o;
    rgb_matrix(m, M);
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        matrix_block(M, o, rgb + 3 * i);
    for (; i < n; i++) {
        uint8_t *p = rgb + 3 * i;
        float r = p[0], g = p[1], b = p[2];
        for (int ch = 0; ch < 3; ch++)
            p[ch] = (uint8_t)sl__aug_clamp(M[ch][0] * r + M[ch][1] * g + M[ch][2] * b + o);
    }
}
