/*
 * The sample image folder for `sluice-bench --make-sample`: generated
 * JPEGs that cost about what photographs cost to decode. Flat colour would
 * compress to almost nothing and white noise to far too much, and both
 * would make the decoder's entropy stage unrepresentative; so each image
 * has smooth low-frequency shading, a few shapes with hard edges and
 * band-limited texture, at ImageNet-like sizes and qualities (long side
 * 300-600, half of them exactly 500; 4:3, 3:2, 1:1; a fifth portrait;
 * quality 75-95, 4:2:0; 2% grayscale).
 *
 * Rendering is per row with separable lattice interpolation and scanline
 * spans for the shapes, so a few hundred images take a second or two.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include "sluice_bench.h"

#define SAMPLE_SEED 0x5a3c1e2dULL
#define MAX_SHAPES 6
#define MAX_VERTS 5
#define BG_CELLS_MAX 6 /* background lattice cells along a side */
#define GRAY_EVERY 50  /* one image in 50 is grayscale */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next_u64(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(rng *r) /* [0, 1) */
{
    return (double)(next_u64(r) >> 11) * 0x1.0p-53;
}

static int uniform_int(rng *r, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(next_u64(r) % (uint64_t)(hi - lo + 1));
}

/* ---- image parameters ---- */

typedef struct shape {
    int ellipse;                   /* else a convex polygon */
    double cx, cy;                 /* centre */
    double rx, ry;                 /* ellipse radii */
    double vx[MAX_VERTS], vy[MAX_VERTS];
    int nverts;
    float color[3];                /* at the centre */
    float shade_x[3], shade_y[3];  /* change per pixel: a lit surface */
} shape;

typedef struct image_plan {
    int width, height, gray, quality;
    int bg_nx, bg_ny; /* background lattice cells */
    int tex_cell;     /* texture lattice spacing, pixels */
    float tex_amp;
    int nshapes;
    shape shapes[MAX_SHAPES];
} image_plan;

static void plan_size(rng *r, image_plan *p)
{
    static const double aspects[] = {4.0 / 3, 4.0 / 3, 4.0 / 3, 4.0 / 3, 4.0 / 3,
                                     3.0 / 2, 3.0 / 2, 3.0 / 2, 1.0, 1.0};
    int long_side = uniform(r) < 0.5 ? 500 : uniform_int(r, 300, 600);
    double aspect = aspects[next_u64(r) % (sizeof aspects / sizeof aspects[0])];
    int short_side = (int)lround(long_side / aspect);
    int portrait = uniform(r) < 0.2;
    p->width = portrait ? short_side : long_side;
    p->height = portrait ? long_side : short_side;
}

static void random_color(rng *r, float c[3])
{
    for (int k = 0; k < 3; k++)
        c[k] = (float)(20 + 215 * uniform(r));
}

static void plan_shape(rng *r, const image_plan *p, shape *s)
{
    double w = p->width, h = p->height, scale = (w < h ? w : h) * (0.1 + 0.3 * uniform(r));
    double cx = w * uniform(r), cy = h * uniform(r);
    s->ellipse = uniform(r) < 0.4;
    s->cx = cx;
    s->cy = cy;
    if (s->ellipse) {
        s->rx = scale * (0.5 + uniform(r));
        s->ry = scale * (0.5 + uniform(r));
    } else {
        /* vertices at increasing angles around the centre: convex */
        s->nverts = uniform_int(r, 3, MAX_VERTS);
        double a0 = 2 * M_PI * uniform(r);
        for (int i = 0; i < s->nverts; i++) {
            double a = a0 + 2 * M_PI * (i + 0.3 * uniform(r)) / s->nverts;
            double rad = scale * (0.7 + 0.6 * uniform(r));
            s->vx[i] = cx + rad * cos(a);
            s->vy[i] = cy + rad * sin(a);
        }
    }
    random_color(r, s->color);
    for (int k = 0; k < 3; k++) {
        s->shade_x[k] = (float)((uniform(r) - 0.5) * 60 / scale);
        s->shade_y[k] = (float)((uniform(r) - 0.5) * 60 / scale);
    }
}

static void plan_image(uint64_t index, image_plan *p)
{
    rng r = {SAMPLE_SEED ^ (index * 0xd1342543de82ef95ull)};
    memset(p, 0, sizeof *p);
    plan_size(&r, p);
    p->gray = index % GRAY_EVERY == GRAY_EVERY / 2;
    p->quality = uniform_int(&r, 75, 95);
    p->bg_nx = uniform_int(&r, 2, BG_CELLS_MAX);
    p->bg_ny = uniform_int(&r, 2, BG_CELLS_MAX);
    p->tex_cell = uniform_int(&r, 2, 8);
    p->tex_amp = (float)(4 + 22 * uniform(&r));
    p->nshapes = uniform_int(&r, 2, MAX_SHAPES);
    for (int i = 0; i < p->nshapes; i++)
        plan_shape(&r, p, &p->shapes[i]);
}

/* ---- lattices: random values at grid points, smoothly interpolated ---- */

typedef struct lattice {
    int nx, ny, channels;
    float cell_w, cell_h;
    float *v;        /* (ny + 1) x (nx + 1) x channels */
    int *ix;         /* per output column: its cell */
    float *wx;       /* per output column: smoothstep weight in the cell */
    float *row;      /* the current output row, interpolated vertically */
} lattice;

static float smoothstep(float t)
{
    return t * t * (3 - 2 * t);
}

static int lattice_init(lattice *l, rng *r, int width, int height, int nx, int ny,
                        int channels, float lo, float hi)
{
    l->nx = nx;
    l->ny = ny;
    l->channels = channels;
    l->cell_w = (float)width / (float)nx;
    l->cell_h = (float)height / (float)ny;
    size_t nv = (size_t)(nx + 1) * (size_t)(ny + 1) * (size_t)channels;
    l->v = malloc(nv * sizeof *l->v);
    l->ix = malloc((size_t)width * sizeof *l->ix);
    l->wx = malloc((size_t)width * sizeof *l->wx);
    l->row = malloc((size_t)(nx + 1) * (size_t)channels * sizeof *l->row);
    if (!l->v || !l->ix || !l->wx || !l->row)
        return -1;
    for (size_t i = 0; i < nv; i++)
        l->v[i] = lo + (hi - lo) * (float)uniform(r);
    for (int x = 0; x < width; x++) {
        float fx = ((float)x + 0.5f) / l->cell_w;
        int c = (int)fx;
        if (c >= nx)
            c = nx - 1;
        l->ix[x] = c;
        l->wx[x] = smoothstep(fx - (float)c);
    }
    return 0;
}

static void lattice_free(lattice *l)
{
    free(l->v);
    free(l->ix);
    free(l->wx);
    free(l->row);
}

/* Interpolates the two lattice rows around output row y into l->row. */
static void lattice_row(lattice *l, int y)
{
    float fy = ((float)y + 0.5f) / l->cell_h;
    int c = (int)fy;
    if (c >= l->ny)
        c = l->ny - 1;
    float w = smoothstep(fy - (float)c);
    size_t stride = (size_t)(l->nx + 1) * (size_t)l->channels;
    const float *a = l->v + (size_t)c * stride, *b = a + stride;
    for (size_t i = 0; i < stride; i++)
        l->row[i] = a[i] + (b[i] - a[i]) * w;
}

/* Output column x of the current row, channel k. */
static inline float lattice_at(const lattice *l, int x, int k)
{
    const float *p = l->row + (size_t)l->ix[x] * (size_t)l->channels + k;
    return p[0] + (p[l->channels] - p[0]) * l->wx[x];
}

/* ---- rendering ---- */

/* The columns [*x0, *x1) that shape s covers on row y (pixel centres). */
static void shape_span(const shape *s, int y, int width, int *x0, int *x1)
{
    double py = y + 0.5, lo = 1e30, hi = -1e30;
    if (s->ellipse) {
        double dy = (py - s->cy) / s->ry;
        if (dy * dy < 1) {
            double half = s->rx * sqrt(1 - dy * dy);
            lo = s->cx - half;
            hi = s->cx + half;
        }
    } else {
        for (int i = 0; i < s->nverts; i++) {
            int j = (i + 1) % s->nverts;
            double ya = s->vy[i], yb = s->vy[j];
            if ((py < ya) == (py < yb))
                continue;
            double x = s->vx[i] + (py - ya) / (yb - ya) * (s->vx[j] - s->vx[i]);
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
        }
    }
    double a = ceil(lo - 0.5), b = ceil(hi - 0.5);
    *x0 = a < 0 ? 0 : a > width ? width : (int)a;
    *x1 = b < 0 ? 0 : b > width ? width : (int)b;
}

static unsigned char clamp_u8(float v)
{
    return v <= 0 ? 0 : v >= 255 ? 255 : (unsigned char)(v + 0.5f);
}

typedef struct renderer {
    const image_plan *p;
    lattice bg, tex, tex_fine;
    float *line; /* one row of colour before texture, width x 3 */
} renderer;

/* Photographs vary far more in brightness than in hue: pull each lattice
 * colour towards its grey, then tint the whole image. */
static void tone_down(lattice *bg, rng *r)
{
    float tint[3];
    for (int k = 0; k < 3; k++)
        tint[k] = (float)(uniform(r) - 0.5) * 50;
    size_t n = (size_t)(bg->nx + 1) * (size_t)(bg->ny + 1);
    for (size_t i = 0; i < n; i++) {
        float *c = bg->v + 3 * i;
        float grey = (c[0] + c[1] + c[2]) / 3;
        for (int k = 0; k < 3; k++)
            c[k] = grey + 0.35f * (c[k] - grey) + tint[k];
    }
}

static int renderer_init(renderer *rd, const image_plan *p, uint64_t index)
{
    rng r = {SAMPLE_SEED + index * 0x9e3779b97f4a7c15ull + 1};
    int w = p->width, h = p->height, c = p->tex_cell;
    memset(rd, 0, sizeof *rd);
    rd->p = p;
    rd->line = malloc((size_t)w * 3 * sizeof *rd->line);
    if (!rd->line ||
        lattice_init(&rd->bg, &r, w, h, p->bg_nx, p->bg_ny, 3, 10, 245) < 0 ||
        lattice_init(&rd->tex, &r, w, h, (w + c - 1) / c, (h + c - 1) / c, 1, -1, 1) < 0 ||
        lattice_init(&rd->tex_fine, &r, w, h, (w + 1) / 2, (h + 1) / 2, 1, -1, 1) < 0)
        return -1;
    tone_down(&rd->bg, &r);
    return 0;
}

static void renderer_free(renderer *rd)
{
    lattice_free(&rd->bg);
    lattice_free(&rd->tex);
    lattice_free(&rd->tex_fine);
    free(rd->line);
}

static void render_row(renderer *rd, int y, unsigned char *out)
{
    const image_plan *p = rd->p;
    int w = p->width;
    lattice_row(&rd->bg, y);
    lattice_row(&rd->tex, y);
    lattice_row(&rd->tex_fine, y);
    for (int x = 0; x < w; x++)
        for (int k = 0; k < 3; k++)
            rd->line[x * 3 + k] = lattice_at(&rd->bg, x, k);
    for (int i = 0; i < p->nshapes; i++) {
        const shape *s = &p->shapes[i];
        int x0, x1;
        shape_span(s, y, w, &x0, &x1);
        float c[3];
        for (int k = 0; k < 3; k++)
            c[k] = s->color[k] + s->shade_y[k] * (float)(y - s->cy);
        for (int x = x0; x < x1; x++)
            for (int k = 0; k < 3; k++) { /* with a little of the background's light */
                float v = c[k] + s->shade_x[k] * (float)(x - s->cx);
                rd->line[x * 3 + k] = 0.8f * v + 0.2f * rd->line[x * 3 + k];
            }
    }
    for (int x = 0; x < w; x++) {
        float t = p->tex_amp * (lattice_at(&rd->tex, x, 0) +
                                0.5f * lattice_at(&rd->tex_fine, x, 0));
        for (int k = 0; k < 3; k++)
            out[x * 3 + k] = clamp_u8(rd->line[x * 3 + k] + t);
    }
}

/* ---- JPEG writing ---- */

typedef struct encoder {
    struct jpeg_compress_struct cinfo;
    struct jpeg_error_mgr jerr;
    jmp_buf on_error;
    char message[JMSG_LENGTH_MAX];
} encoder;

static void error_exit(j_common_ptr cinfo)
{
    encoder *e = (encoder *)cinfo->client_data;
    cinfo->err->format_message(cinfo, e->message);
    longjmp(e->on_error, 1);
}

static void to_gray(unsigned char *row, int width)
{
    for (int x = 0; x < width; x++) {
        const unsigned char *p = row + x * 3;
        row[x] = (unsigned char)((77 * p[0] + 150 * p[1] + 29 * p[2] + 128) >> 8);
    }
}

static void start_jpeg(encoder *e, const image_plan *p, FILE *f)
{
    struct jpeg_compress_struct *ci = &e->cinfo;
    jpeg_stdio_dest(ci, f);
    ci->image_width = (JDIMENSION)p->width;
    ci->image_height = (JDIMENSION)p->height;
    ci->input_components = p->gray ? 1 : 3;
    ci->in_color_space = p->gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(ci);
    jpeg_set_quality(ci, p->quality, TRUE);
    if (!p->gray) { /* 4:2:0 */
        ci->comp_info[0].h_samp_factor = ci->comp_info[0].v_samp_factor = 2;
        for (int k = 1; k < 3; k++)
            ci->comp_info[k].h_samp_factor = ci->comp_info[k].v_samp_factor = 1;
    }
    jpeg_start_compress(ci, TRUE);
}

/* Renders and compresses one image into f; row is width x 3 scratch. */
static int encode(encoder *e, renderer *rd, FILE *f, unsigned char *row)
{
    if (setjmp(e->on_error)) {
        jpeg_abort_compress(&e->cinfo);
        return -1;
    }
    start_jpeg(e, rd->p, f);
    for (int y = 0; y < rd->p->height; y++) {
        render_row(rd, y, row);
        if (rd->p->gray)
            to_gray(row, rd->p->width);
        JSAMPROW rows[1] = {row};
        jpeg_write_scanlines(&e->cinfo, rows, 1);
    }
    jpeg_finish_compress(&e->cinfo);
    return 0;
}

/* ---- the folder ---- */

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
    return -1;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    int rc = 0;
    for (char *s = p + 1; *s && rc == 0; s++)
        if (*s == '/') {
            *s = 0;
            rc = make_dir(p);
            *s = '/';
        }
    if (rc == 0)
        rc = make_dir(p);
    free(p);
    return rc;
}

static void image_name(char *buf, size_t size, const char *dir, int i)
{
    if (dir)
        snprintf(buf, size, "%s/class%02d/%04d.jpg", dir, i % SAMPLE_CLASSES, i);
    else
        snprintf(buf, size, "class%02d/%04d.jpg", i % SAMPLE_CLASSES, i);
}

static int write_image(encoder *e, const char *dir, int index)
{
    image_plan p;
    plan_image((uint64_t)index, &p);
    char path[4096];
    image_name(path, sizeof path, dir, index);
    renderer rd;
    memset(&rd, 0, sizeof rd);
    unsigned char *row = malloc((size_t)p.width * 3);
    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (!f)
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
    else if (!row || renderer_init(&rd, &p, (uint64_t)index) < 0)
        fprintf(stderr, "sluice-bench: out of memory\n");
    else if (encode(e, &rd, f, row) < 0)
        fprintf(stderr, "sluice-bench: %s: %s\n", path, e->message);
    else
        rc = 0;
    renderer_free(&rd);
    if (f && fclose(f) != 0 && rc == 0) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    free(row);
    return rc;
}

/* Sorted like the folder: class by class, files in name order. */
static int write_list(const char *dir, int count)
{
    char path[4096], name[64];
    snprintf(path, sizeof path, "%s/files.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (int c = 0; c < SAMPLE_CLASSES; c++)
        for (int i = c; i < count; i += SAMPLE_CLASSES) {
            image_name(name, sizeof name, NULL, i);
            fprintf(f, "%s %d\n", name, c);
        }
    if (fclose(f) != 0) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int sample_write_folder(const char *dir, int count)
{
    char path[4096];
    if (make_dirs(dir) < 0)
        return -1;
    for (int c = 0; c < SAMPLE_CLASSES; c++) {
        snprintf(path, sizeof path, "%s/class%02d", dir, c);
        if (make_dir(path) < 0)
            return -1;
    }
    encoder e;
    memset(&e, 0, sizeof e);
    e.cinfo.err = jpeg_std_error(&e.jerr);
    e.jerr.error_exit = error_exit;
    e.cinfo.client_data = &e;
    jpeg_create_compress(&e.cinfo);
    int rc = 0;
    for (int i = 0; i < count && rc == 0; i++)
        rc = write_image(&e, dir, i);
    jpeg_destroy_compress(&e.cinfo);
    return rc < 0 ? -1 : write_list(dir, count);
}
