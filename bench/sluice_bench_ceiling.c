/*
 * The decode ceiling: what this machine's cores can do when the only work
 * is decoding files that are already in memory, each with its own format's
 * library (the bytes' signature says which): libjpeg-turbo, libspng,
 * libwebp. A pipeline's
 * images/s divided by this says how much the library adds or saves on top
 * of decoding (map_image can beat it: it decodes DCT-scaled and only the
 * crop). The decode limit (a crop_window given) decodes instead only what
 * the run's crops need: each image's window, at the DCT scale map_image
 * picks for it, to RGB, and no more: what decoding alone allows a pipeline
 * that crops, before any resize or hand-off.
 *
 * It runs in a forked child: the preloaded files would otherwise raise the
 * benchmark's peak RSS, which is meant to show the pipeline's memory. The
 * child never calls sluice, so forking a process whose library threads may
 * hold locks is safe for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <jpeglib.h>
#ifndef SLUICE_NO_PNG
#include <spng.h>
#endif
#ifndef SLUICE_NO_WEBP
#include <webp/decode.h>
#endif
#include "crop_window.h"
#include "sluice_bench.h"

#define MIN_TIMED_S 1.0
#define ROWS_PER_READ 8

typedef struct blob {
    unsigned char *data;
    size_t size;
} blob;

typedef struct shared {
    const blob *files;
    size_t n;
    const crop_window *crop; /* NULL: full decodes */
    int pass;
    atomic_size_t next;   /* the next file to decode in this pass */
    atomic_llong decoded; /* successful decodes, all passes */
    atomic_llong failed;  /* failed decodes in this pass */
} shared;

/* ---- one decode ---- */

typedef struct decoder {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    jmp_buf on_error;
    unsigned char *out; /* reused across images */
    size_t out_size;
} decoder;

static void error_exit(j_common_ptr cinfo)
{
    decoder *d = (decoder *)cinfo->client_data;
    longjmp(d->on_error, 1);
}

/* The ceiling counts failures; it does not describe them. */
static void output_message(j_common_ptr cinfo)
{
    (void)cinfo;
}

static int decoder_init(decoder *d)
{
    memset(d, 0, sizeof *d);
    d->cinfo.err = jpeg_std_error(&d->jerr);
    d->jerr.error_exit = error_exit;
    d->jerr.output_message = output_message;
    d->cinfo.client_data = d;
    if (setjmp(d->on_error))
        return -1;
    jpeg_create_decompress(&d->cinfo);
    return 0;
}

static void decoder_fini(decoder *d)
{
    jpeg_destroy_decompress(&d->cinfo);
    free(d->out);
}

static int grow_output(decoder *d, size_t size)
{
    if (size <= d->out_size)
        return 0;
    unsigned char *p = realloc(d->out, size);
    if (!p)
        return -1;
    d->out = p;
    d->out_size = size;
    return 0;
}

static void read_rows(decoder *d, size_t stride)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    while (ci->output_scanline < ci->output_height) {
        JSAMPROW rows[ROWS_PER_READ];
        JDIMENSION want = ci->output_height - ci->output_scanline;
        if (want > ROWS_PER_READ)
            want = ROWS_PER_READ;
        for (JDIMENSION i = 0; i < want; i++)
            rows[i] = d->out + (size_t)(ci->output_scanline + i) * stride;
        jpeg_read_scanlines(ci, rows, want);
    }
}

/* Full-size RGB with the library defaults (ISLOW IDCT, fancy upsampling):
 * what a plain "decode, then transform" loader pays per image. */
static int decode_one(decoder *d, const blob *b)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    if (setjmp(d->on_error)) {
        jpeg_abort_decompress(ci);
        return -1;
    }
    jpeg_mem_src(ci, b->data, (unsigned long)b->size);
    jpeg_read_header(ci, TRUE);
    ci->out_color_space = JCS_RGB;
    jpeg_start_decompress(ci);
    size_t stride = (size_t)ci->output_width * (size_t)ci->output_components;
    if (grow_output(d, stride * ci->output_height) < 0) {
        jpeg_abort_decompress(ci);
        return -1;
    }
    read_rows(d, stride);
    jpeg_finish_decompress(ci);
    return 0;
}

/* [lo, hi) of the scaled pixels a window's [pos, pos + len) touches. */
static void span(double pos, double len, int d, JDIMENSION size, JDIMENSION *lo,
                 JDIMENSION *hi)
{
    double a = fmax(0, floor(pos / d)), b = fmin(size, ceil((pos + len) / d));
    *lo = (JDIMENSION)fmin(a, size - 1);
    *hi = (JDIMENSION)fmax(b, *lo + 1);
}

static void plan(const crop_window *c, int W, int H, uint64_t seed, double win[4])
{
    cw_plan(c, W, H, &seed, win);
}

/* The window's rows and columns at its scale, to RGB with the library
 * defaults, and no more (the rows below are never decoded), as jpeg.c's
 * region decode reads them: a column of margin each side, the columns
 * widened to whole iMCUs by jpeg_crop_scanline. */
static int decode_window(decoder *d, const blob *b, const crop_window *c, uint64_t seed)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    if (setjmp(d->on_error)) {
        jpeg_abort_decompress(ci);
        return -1;
    }
    jpeg_mem_src(ci, b->data, (unsigned long)b->size);
    jpeg_read_header(ci, TRUE);
    double win[4];
    plan(c, (int)ci->image_width, (int)ci->image_height, seed, win);
    int s = cw_scale(win, c->width, c->height);
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)s;
    ci->out_color_space = ci->num_components == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(ci);
    JDIMENSION x0, x1, y0, y1;
    span(win[0], win[2], s, ci->output_width, &x0, &x1);
    span(win[1], win[3], s, ci->output_height, &y0, &y1);
    JDIMENSION xoff = x0 > 0 ? x0 - 1 : 0;
    JDIMENSION width = (x1 < ci->output_width ? x1 + 1 : x1) - xoff;
    jpeg_crop_scanline(ci, &xoff, &width);
    size_t stride = (size_t)width * (size_t)ci->output_components;
    if (grow_output(d, stride * (y1 - y0)) < 0) {
        jpeg_abort_decompress(ci);
        return -1;
    }
    if (y0 > 0)
        jpeg_skip_scanlines(ci, y0);
    while (ci->output_scanline < y1) {
        JSAMPROW rows[ROWS_PER_READ];
        JDIMENSION want = y1 - ci->output_scanline;
        if (want > ROWS_PER_READ)
            want = ROWS_PER_READ;
        for (JDIMENSION i = 0; i < want; i++)
            rows[i] = d->out + (size_t)(ci->output_scanline - y0 + i) * stride;
        if (jpeg_read_scanlines(ci, rows, want) == 0)
            break;
    }
    jpeg_abort_decompress(ci);
    return 0;
}

/* ---- PNG and WebP ---- */

static int sniff(const blob *b)
{
    if (b->size >= 8 && !memcmp(b->data, "\x89PNG\r\n\x1a\n", 8))
        return CEILING_PNG;
    if (b->size >= 12 && !memcmp(b->data, "RIFF", 4) && !memcmp(b->data + 8, "WEBP", 4))
        return CEILING_WEBP;
    return CEILING_JPEG; /* libjpeg judges the rest */
}

/* A PNG to RGB8 with libspng: whole, or (crop given) its rows down to the
 * window's last, as map_image reads them (Adam7: whole). */
static int png_decode(decoder *d, const blob *b, const crop_window *c, uint64_t seed)
{
#ifdef SLUICE_NO_PNG
    (void)d, (void)b, (void)c, (void)seed;
    return -1;
#else
    spng_ctx *ctx = spng_ctx_new(0);
    struct spng_ihdr ih;
    size_t len = 0;
    int e = !ctx || spng_set_png_buffer(ctx, b->data, b->size) || spng_get_ihdr(ctx, &ih) ||
            spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &len) || grow_output(d, len) < 0;
    if (!e) {
        uint32_t rows = ih.height;
        if (c && !ih.interlace_method) {
            double win[4];
            plan(c, (int)ih.width, (int)ih.height, seed, win);
            rows = (uint32_t)fmin(ih.height, ceil(win[1] + win[3]));
        }
        if (rows == ih.height) {
            e = spng_decode_image(ctx, d->out, len, SPNG_FMT_RGB8, 0);
        } else {
            size_t row = (size_t)ih.width * 3;
            e = spng_decode_image(ctx, NULL, 0, SPNG_FMT_RGB8, SPNG_DECODE_PROGRESSIVE);
            for (uint32_t y = 0; !e && y < rows; y++)
                e = spng_decode_row(ctx, d->out + y * row, row);
            e = e == SPNG_EOI ? 0 : e;
        }
    }
    spng_ctx_free(ctx);
    return e ? -1 : 0;
#endif
}

/* A WebP to RGB with libwebp: whole, or (crop given) only the window,
 * cropped and scaled down by the whole factor map_image picks. */
static int webp_decode(decoder *d, const blob *b, const crop_window *c, uint64_t seed)
{
#ifdef SLUICE_NO_WEBP
    (void)d, (void)b, (void)c, (void)seed;
    return -1;
#else
    int w, h;
    if (!WebPGetInfo(b->data, b->size, &w, &h))
        return -1;
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg))
        return -1;
    int ow = w, oh = h;
    if (c) {
        double win[4];
        plan(c, w, h, seed, win);
        int x0 = (int)floor(win[0]) & ~1, y0 = (int)floor(win[1]) & ~1;
        int cw = (int)fmin(w, ceil(win[0] + win[2])) - x0;
        int ch = (int)fmin(h, ceil(win[1] + win[3])) - y0;
        cw = cw > 0 ? cw : 1, ch = ch > 0 ? ch : 1;
        int k = 1;
        while (win[2] / (k + 1) >= c->width && win[3] / (k + 1) >= c->height)
            k++;
        cfg.options.use_cropping = 1;
        cfg.options.crop_left = x0, cfg.options.crop_top = y0;
        cfg.options.crop_width = cw, cfg.options.crop_height = ch;
        ow = (cw + k - 1) / k, oh = (ch + k - 1) / k;
        if (k > 1) {
            cfg.options.use_scaling = 1;
            cfg.options.scaled_width = ow, cfg.options.scaled_height = oh;
        }
    }
    size_t stride = (size_t)ow * 3;
    if (grow_output(d, stride * (size_t)oh) < 0)
        return -1;
    cfg.output.colorspace = MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = d->out;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = stride * (size_t)oh;
    VP8StatusCode st = WebPDecode(b->data, b->size, &cfg);
    WebPFreeDecBuffer(&cfg.output);
    return st == VP8_STATUS_OK ? 0 : -1;
#endif
}

static void *decode_worker(void *arg)
{
    shared *sh = arg;
    decoder d;
    if (decoder_init(&d) < 0)
        return NULL;
    size_t k;
    while ((k = atomic_fetch_add(&sh->next, 1)) < sh->n) {
        /* a new window for every image and pass, as epochs draw them */
        uint64_t seed = ((uint64_t)sh->pass << 32) ^ (uint64_t)k;
        const blob *b = &sh->files[k];
        int f = sniff(b), rc = f == CEILING_PNG    ? png_decode(&d, b, sh->crop, seed)
                               : f == CEILING_WEBP ? webp_decode(&d, b, sh->crop, seed)
                               : sh->crop          ? decode_window(&d, b, sh->crop, seed)
                                                   : decode_one(&d, b);
        if (rc == 0)
            atomic_fetch_add(&sh->decoded, 1);
        else
            atomic_fetch_add(&sh->failed, 1);
    }
    decoder_fini(&d);
    return NULL;
}

/* One pass over all files; files are handed out one at a time, so a thread
 * that drew big images does not leave the others idle at the end. */
static int run_pass(shared *sh, int threads)
{
    pthread_t tid[threads];
    int started = 0;
    atomic_store(&sh->next, 0);
    atomic_store(&sh->failed, 0);
    sh->pass++;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, decode_worker, sh) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    return started == threads ? 0 : -1;
}

/* ---- preload ---- */

static int read_whole(const char *path, blob *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    b->size = (size_t)st.st_size;
    b->data = malloc(b->size ? b->size : 1);
    size_t got = 0;
    while (b->data && got < b->size) {
        ssize_t r = read(fd, b->data + got, b->size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!b->data || got < b->size) {
        free(b->data);
        b->data = NULL;
        return -1;
    }
    return 0;
}

/* Reads the files until CEILING_MAX_BYTES; a file that cannot be read is
 * left out (the pipeline run reports those). Returns how many were kept. */
static size_t preload(char *const *paths, size_t n, blob *files, int64_t *bytes)
{
    size_t kept = 0;
    *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        blob b;
        if (read_whole(paths[i], &b) < 0)
            continue;
        if (*bytes + (int64_t)b.size > CEILING_MAX_BYTES && kept > 0) {
            free(b.data);
            break;
        }
        *bytes += (int64_t)b.size;
        files[kept++] = b;
    }
    return kept;
}

/* ---- the child ---- */

static int measure(char *const *paths, size_t n, int threads, const crop_window *crop,
                   ceiling_result *r)
{
    blob *files = calloc(n ? n : 1, sizeof *files);
    if (!files)
        return -1;
    shared sh = {.files = files, .crop = crop};
    sh.n = preload(paths, n, files, &r->bytes);
    r->files = (int64_t)sh.n;
    for (size_t i = 0; i < sh.n; i++)
        r->formats[sniff(&files[i])]++;
    atomic_init(&sh.next, 0);
    atomic_init(&sh.decoded, 0);
    atomic_init(&sh.failed, 0);
    int rc = 0;
    double t0 = now_s(), t;
    do {
        if (run_pass(&sh, threads) < 0) {
            rc = -1;
            break;
        }
        if (r->passes++ == 0)
            r->failed = atomic_load(&sh.failed);
        t = now_s() - t0;
    } while (t < MIN_TIMED_S && sh.n > 0);
    r->seconds = now_s() - t0;
    long long decoded = atomic_load(&sh.decoded);
    r->images_per_s = r->seconds > 0 ? (double)decoded / r->seconds : 0;
    for (size_t i = 0; i < sh.n; i++)
        free(files[i].data);
    free(files);
    return rc;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int ceiling_measure(char *const *paths, size_t n, int threads, const crop_window *crop,
                    ceiling_result *out)
{
    memset(out, 0, sizeof *out);
    int fds[2];
    if (pipe(fds) < 0) {
        fprintf(stderr, "sluice-bench: ceiling: pipe: %s\n", strerror(errno));
        return -1;
    }
    fflush(NULL); /* or the child's exit would flush our buffers twice */
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "sluice-bench: ceiling: fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        ceiling_result r = {0};
        int rc = measure(paths, n, threads, crop, &r);
        if (rc == 0 && write_all(fds[1], &r, sizeof r) < 0)
            rc = -1;
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    ceiling_result r;
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t k = read(fds[0], (char *)&r + got, sizeof r - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof r) {
        fprintf(stderr, "sluice-bench: ceiling: the measuring process failed "
                "(out of memory or threads?)\n");
        return -1;
    }
    *out = r;
    return 0;
}
