/*
 * JPEG decode speed per libjpeg-turbo setting, on a real folder of JPEGs:
 *
 *   bench_decode DIR [--max N] [--runs R]
 *
 * Every *.jpg / *.jpeg under DIR is read into memory first, then each mode
 * decodes all of them on one thread: full size (ISLOW DCT, fancy chroma
 * upsampling: what PIL, torchvision and src/image/jpeg.c use), full size
 * with IFAST or without fancy upsampling, the DCT scales 7/8, 3/4, 1/2,
 * 1/4, 1/8, and the region-of-interest decode of src/image/jpeg.c for the
 * centre (256 -> 224) and random-resized (to 224) crops: iMCU columns cut
 * with jpeg_crop_scanline, rows above skipped, rows below never decoded,
 * at the largest DCT reduction that keeps 224 pixels. Modes are
 * interleaved across --runs runs and the median is reported, so noise from
 * other processes lands on all of them alike.
 *
 * Last, the same two crops through sl_map_image itself (one worker thread,
 * autotune off, files in memory): decode plus resize to 224x224 uint8, the
 * most a pipeline can do per core. The resampler's time per image is the
 * difference from the matching roi_ mode; run with SLUICE_NO_AVX512=1 or
 * SLUICE_NO_AVX2=1 to time the narrower resampler passes ("resize_isa").
 *
 * One JSON object per mode on stdout: images/s, output megapixels/s, and
 * the speed relative to "full".
 *
 * libjpeg is reached through dlopen: this program links only libsluice.so,
 * which keeps libjpeg a private dependency, and the library's internal
 * decoder (sl__jpeg_*) is hidden there. The region logic below therefore
 * mirrors jpeg.c/crop.c rather than calling them.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <jpeglib.h>
#include "crop_window.h"
#include "sluice.h"

#define MAX_RUNS 15

#define JPEG_FUNCS(X)                                                                      \
    X(jpeg_std_error) X(jpeg_CreateDecompress) X(jpeg_destroy_decompress) X(jpeg_mem_src) \
    X(jpeg_read_header) X(jpeg_start_decompress) X(jpeg_read_scanlines)                   \
    X(jpeg_skip_scanlines) X(jpeg_crop_scanline) X(jpeg_abort_decompress)
#define DECLARE(f) static __typeof__(f) *p_##f;
JPEG_FUNCS(DECLARE)

static int load_libjpeg(void)
{
    void *h = dlopen("libjpeg.so.62", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "bench_decode: %s\n", dlerror());
        return -1;
    }
#define RESOLVE(f)                                                            \
    if (!(p_##f = (__typeof__(f) *)dlsym(h, #f))) {                           \
        fprintf(stderr, "bench_decode: libjpeg has no %s\n", #f);             \
        return -1;                                                            \
    }
    JPEG_FUNCS(RESOLVE)
    return 0;
}

/* ---- the files ---- */

typedef struct file {
    unsigned char *data;
    size_t n;
} file;

typedef struct files {
    file *v;
    size_t n, cap, max;
    size_t bytes;
} files;

static int has_jpeg_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

static int read_file(const char *path, files *fs)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = n > 0 ? malloc((size_t)n) : NULL;
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        fclose(f);
        return -1;
    }
    fclose(f);
    if (fs->n == fs->cap) {
        fs->cap = fs->cap ? 2 * fs->cap : 256;
        fs->v = realloc(fs->v, fs->cap * sizeof *fs->v);
    }
    fs->v[fs->n++] = (file){p, (size_t)n};
    fs->bytes += (size_t)n;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, so --max picks the same files every time. */
static void scan(const char *dir, files *fs)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap)
            names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (fs->n < fs->max && stat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode))
                scan(path, fs);
            else if (S_ISREG(st.st_mode) && has_jpeg_ext(names[i]))
                read_file(path, fs);
        }
        free(names[i]);
    }
    free(names);
}

/* ---- decoding ---- */

typedef enum kind { FULL, SCALED, ROI_CENTER, ROI_RANDOM, MAP_CENTER, MAP_RANDOM } kind;

typedef struct mode {
    const char *name;
    kind kind;
    int num, denom;
    J_DCT_METHOD dct;
    boolean fancy;
    double s[MAX_RUNS]; /* seconds per run */
    double mpix;        /* output megapixels of one run */
    long errors;        /* files libjpeg refused, in one run */
} mode;

typedef struct decoder {
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr jerr;
    jmp_buf jb;
    unsigned char *buf;
    size_t cap;
    uint64_t rng;
} decoder;

static void on_error(j_common_ptr c)
{
    longjmp(((decoder *)c->client_data)->jb, 1);
}

static void on_message(j_common_ptr c, int level)
{
    (void)c, (void)level; /* warnings do not stop a bench */
}

/* The windows crop.c plans for the eval (Resize 256 + CenterCrop 224) and
 * train (RandomResizedCrop 224, scale 0.08-1, ratio 3/4-4/3) presets. */
static void plan(decoder *d, kind k, int W, int H, double win[4])
{
    crop_window c = {k == ROI_CENTER ? CROP_CENTER : CROP_RANDOM, 224, 224, 0.08, 1,
                     3 / 4.0, 4 / 3.0, 256};
    cw_plan(&c, W, H, &d->rng, win);
}

static int grow(decoder *d, size_t need)
{
    if (need <= d->cap)
        return 0;
    free(d->buf);
    d->cap = need + need / 4;
    d->buf = malloc(d->cap);
    return d->buf ? 0 : -1;
}

/* Decodes rows [y0, y1) of columns [x0, x1) at the current scale. */
static double decode_rows(decoder *d, JDIMENSION x0, JDIMENSION x1, JDIMENSION y0,
                          JDIMENSION y1)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    JDIMENSION xoff = x0, width = x1 - x0;
    if (width < ci->output_width)
        p_jpeg_crop_scanline(ci, &xoff, &width);
    size_t stride = (size_t)ci->output_width * (size_t)ci->output_components;
    if (grow(d, stride * (y1 - y0)))
        return 0;
    if (y0)
        p_jpeg_skip_scanlines(ci, y0);
    while (ci->output_scanline < y1) {
        JSAMPROW rows[16];
        JDIMENSION want = y1 - ci->output_scanline > 16 ? 16 : y1 - ci->output_scanline;
        for (JDIMENSION k = 0; k < want; k++)
            rows[k] = d->buf + (ci->output_scanline - y0 + k) * stride;
        if (p_jpeg_read_scanlines(ci, rows, want) == 0)
            break;
    }
    return (double)ci->output_width * (y1 - y0);
}

static double decode_one(decoder *d, const file *f, const mode *m)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    if (setjmp(d->jb)) {
        p_jpeg_abort_decompress(ci);
        return -1;
    }
    p_jpeg_mem_src(ci, f->data, (unsigned long)f->n);
    p_jpeg_read_header(ci, TRUE);
    ci->out_color_space = ci->num_components == 4 ? JCS_CMYK : JCS_RGB;
    ci->dct_method = m->dct;
    ci->do_fancy_upsampling = m->fancy;
    double win[4] = {0, 0, ci->image_width, ci->image_height};
    int dn = 1;
    if (m->kind == SCALED) {
        ci->scale_num = (unsigned)m->num;
        ci->scale_denom = (unsigned)m->denom;
    } else if (m->kind != FULL) {
        plan(d, m->kind, (int)ci->image_width, (int)ci->image_height, win);
        dn = cw_scale(win, 224, 224);
        ci->scale_num = 1;
        ci->scale_denom = (unsigned)dn;
    }
    p_jpeg_start_decompress(ci);
    JDIMENSION x0 = 0, x1 = ci->output_width, y0 = 0, y1 = ci->output_height;
    if (m->kind == ROI_CENTER || m->kind == ROI_RANDOM) {
        double a = floor(win[0] / dn), b = ceil((win[0] + win[2]) / dn);
        x0 = a > 0 ? (JDIMENSION)a - 1 : 0; /* one column margin, as jpeg.c */
        x1 = b + 1 < x1 ? (JDIMENSION)b + 1 : x1;
        y0 = (JDIMENSION)floor(win[1] / dn);
        b = ceil((win[1] + win[3]) / dn);
        y1 = b < y1 ? (JDIMENSION)b : y1;
    }
    double px = decode_rows(d, x0, x1, y0, y1);
    p_jpeg_abort_decompress(ci); /* skip the rest, as jpeg.c does */
    return px;
}

/* ---- through sl_map_image ---- */

typedef struct preloaded {
    sl_element **el; /* one uint8 [n] tensor each */
    size_t n;
} preloaded;

static int preload(const files *fs, preloaded *p)
{
    p->el = calloc(fs->n, sizeof *p->el);
    p->n = fs->n;
    for (size_t i = 0; p->el && i < fs->n; i++) {
        int64_t shape[1] = {(int64_t)fs->v[i].n};
        sl_element *el = sl_element_create(1);
        void *dst = el ? sl_element_add_tensor(el, SL_UINT8, 1, shape) : NULL;
        if (!dst) {
            sl_element_release(el);
            return -1;
        }
        memcpy(dst, fs->v[i].data, fs->v[i].n);
        p->el[i] = el;
    }
    return p->el ? 0 : -1;
}

/* index -> file i's bytes, shared, not copied */
static int pick(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    const preloaded *p = user;
    int64_t i = sl_tensor_int64(sl_element_tensor(in, 0));
    sl_element *el = sl_element_create(1);
    if (!el || sl_element_add_shared(el, p->el[i], 0) < 0) {
        sl_element_release(el);
        return -1;
    }
    *out = el;
    return 0;
}

/* One pass of map_image over the files on one worker; errors counted. */
static double map_image_pass(const preloaded *p, kind k, long *errors)
{
    sl_image_spec spec;
    SL_IMAGE_SPEC_INIT(&spec, k == MAP_CENTER ? SL_CROP_CENTER : SL_CROP_RANDOM_RESIZED, 224);
    spec.flip_prob = 0; /* the roi_ modes do not flip either */
    sl_dataset *ds = sl_range(0, (int64_t)p->n, 1);
    ds = sl_map(ds, "pick", pick, (void *)p, 1, 0);
    ds = sl_map_image(ds, &spec, 1);
    sl_options *o = sl_options_create();
    sl_iterator *it = NULL;
    if (ds && o && sl_options_set(o, SL_OPT_THREADS, 1) == 0 &&
        sl_options_set(o, SL_OPT_AUTOTUNE, 0) == 0 &&
        sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP) == 0)
        it = sl_iterator_create(ds, o);
    double px = -1;
    if (it) {
        sl_element *el;
        int rc;
        px = 0;
        while ((rc = sl_next(it, &el)) == 0) {
            px += 224.0 * 224.0;
            sl_element_release(el);
        }
        if (rc != SL_EOF) {
            fprintf(stderr, "bench_decode: map_image: %s\n", sl_iterator_errmsg(it));
            px = -1;
        }
        *errors = (long)sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED);
    } else {
        fprintf(stderr, "bench_decode: map_image: %s\n", sl_last_error());
    }
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return px;
}

/* What the resampler will pick, as src/image/resize.c decides it. */
static const char *resize_isa(void)
{
    const char *no2 = getenv("SLUICE_NO_AVX2"), *no512 = getenv("SLUICE_NO_AVX512");
    if (!__builtin_cpu_supports("avx2") || (no2 && *no2 && *no2 != '0'))
        return "sse2";
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni") ||
        (no512 && *no512 && *no512 != '0'))
        return "avx2";
    return "avx512";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double t[MAX_RUNS];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    files fs = {0};
    fs.max = SIZE_MAX;
    int runs = 3;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max") == 0 && i + 1 < argc)
            fs.max = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else
            dir = argv[i];
    }
    if (!dir || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: bench_decode DIR [--max N] [--runs 1-%d]\n", MAX_RUNS);
        return 2;
    }
    if (load_libjpeg())
        return 1;
    scan(dir, &fs);
    if (fs.n == 0) {
        fprintf(stderr, "bench_decode: no JPEG files under %s\n", dir);
        return 1;
    }
    mode modes[] = {
        {"full", FULL, 1, 1, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"full_ifast", FULL, 1, 1, JDCT_IFAST, TRUE, {0}, 0, 0},
        {"full_nofancy", FULL, 1, 1, JDCT_ISLOW, FALSE, {0}, 0, 0},
        {"scale_7/8", SCALED, 7, 8, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"scale_3/4", SCALED, 3, 4, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"scale_1/2", SCALED, 1, 2, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"scale_1/4", SCALED, 1, 4, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"scale_1/8", SCALED, 1, 8, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"roi_center_224", ROI_CENTER, 1, 1, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"roi_random_224", ROI_RANDOM, 1, 1, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"roi_center_224_nofancy", ROI_CENTER, 1, 1, JDCT_ISLOW, FALSE, {0}, 0, 0},
        {"roi_random_224_nofancy", ROI_RANDOM, 1, 1, JDCT_ISLOW, FALSE, {0}, 0, 0},
        {"map_image_center_224", MAP_CENTER, 1, 1, JDCT_ISLOW, TRUE, {0}, 0, 0},
        {"map_image_random_224", MAP_RANDOM, 1, 1, JDCT_ISLOW, TRUE, {0}, 0, 0},
    };
    preloaded pre = {0};
    if (preload(&fs, &pre)) {
        fprintf(stderr, "bench_decode: out of memory\n");
        return 1;
    }
    int nmodes = (int)(sizeof modes / sizeof modes[0]);
    decoder *d = calloc(1, sizeof *d);
    d->ci.err = p_jpeg_std_error(&d->jerr);
    d->jerr.error_exit = on_error;
    d->jerr.emit_message = on_message;
    d->ci.client_data = d;
    p_jpeg_CreateDecompress(&d->ci, JPEG_LIB_VERSION, sizeof d->ci);

    for (size_t i = 0; i < fs.n && i < 50; i++) /* warm caches and buffers */
        decode_one(d, &fs.v[i], &modes[0]);
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < nmodes; k++) {
            d->rng = 12345; /* the same random windows in every run */
            double px = 0, t0 = now_s();
            long errors = 0;
            bool sl = modes[k].kind == MAP_CENTER || modes[k].kind == MAP_RANDOM;
            if (sl && (px = map_image_pass(&pre, modes[k].kind, &errors)) < 0)
                return 1;
            for (size_t i = 0; !sl && i < fs.n; i++) {
                double p = decode_one(d, &fs.v[i], &modes[k]);
                px += p > 0 ? p : 0;
                errors += p < 0;
            }
            modes[k].s[r] = now_s() - t0;
            modes[k].mpix = px / 1e6;
            modes[k].errors = errors;
        }
    double full = median(modes[0].s, runs);
    for (int k = 0; k < nmodes; k++) {
        double s = median(modes[k].s, runs);
        printf("{\"bench\":\"decode\",\"dir\":\"%s\",\"mode\":\"%s\",\"images\":%zu,"
               "\"runs\":%d,\"seconds\":%.4f,\"images_per_s\":%.1f,\"out_mpix_per_s\":%.1f,"
               "\"speed_vs_full\":%.3f,\"errors\":%ld,\"resize_isa\":\"%s\"}\n",
               dir, modes[k].name, fs.n, runs, s, fs.n / s, modes[k].mpix / s, full / s,
               modes[k].errors, modes[k].kind >= MAP_CENTER ? resize_isa() : "none");
    }
    p_jpeg_destroy_decompress(&d->ci);
    free(d->buf);
    free(d);
    for (size_t i = 0; i < fs.n; i++) {
        sl_element_release(pre.el[i]);
        free(fs.v[i].data);
    }
    free(pre.el);
    free(fs.v);
    return 0;
}
