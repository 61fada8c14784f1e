/*
 * map_image: decode + crop + resize + flip + normalise, one op.
 *
 * Alone it is a parallel map (ops/map.c) with a built-in function: each
 * worker decodes one image into a fresh element. Followed by batch it
 * becomes the fused node of map_image_batch.c, which decodes every image
 * straight into its slot of the batch tensor. This file holds what both
 * share: the per-thread decoders, one image's decode, the dataset and its
 * fingerprint; map_image_spec.c holds the spec's defaults and checks.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "../ops/map.h"
#include "map_image.h"


/* ---- per-thread decoders ---- */

typedef struct workspace {
    sl__jpeg *dec;  /* each decoder made at its format's first image */
    sl__png *png;
    sl__webp *webp;
    sl__resizer *rs;
    sl__augmenter *aug;
    int *cols;      /* raw mode's column table */
    int ncols;
    uint8_t *rgb;   /* decoded pixels made RGB (gray, alpha dropped or blended) */
    size_t rgb_cap;
} workspace;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;

static void ws_destroy(void *p)
{
    workspace *ws = p;
    sl__jpeg_free(ws->dec);
    sl__png_free(ws->png);
    sl__webp_free(ws->webp);
    sl__resizer_free(ws->rs);
    sl__augmenter_free(ws->aug);
    sl__free(ws->cols, (size_t)ws->ncols * sizeof *ws->cols);
    sl__free(ws->rgb, ws->rgb_cap);
    sl__free(ws, sizeof *ws);
}

static void ws_init(void)
{
    pthread_key_create(&ws_key, ws_destroy);
}

/* The calling thread's resizer and augmenter, made on first use and freed
 * when the thread exits; read_header adds its decoders. */
static workspace *ws_get(void)
{
    pthread_once(&ws_once, ws_init);
    workspace *ws = pthread_getspecific(ws_key);
    if (ws)
        return ws;
    ws = sl__calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    ws->rs = sl__resizer_new();
    ws->aug = sl__augmenter_new();
    if (!ws->rs || !ws->aug || pthread_setspecific(ws_key, ws)) {
        ws_destroy(ws);
        sl__set_error(SL_ENOMEM, "out of memory (image decoder)");
        return NULL;
    }
    return ws;
}

/* ---- one image ---- */

static int image_channels(const sl_image_spec *spec)
{
    return spec->decode == SL_DECODE_RAW ? spec->channels : 3;
}

int sl__image_shape(const sl_image_spec *spec, int64_t *shape)
{
    if (spec->layout == SL_LAYOUT_CHW) {
        shape[0] = image_channels(spec);
        shape[1] = spec->height;
        shape[2] = spec->width;
    } else {
        shape[0] = spec->height;
        shape[1] = spec->width;
        shape[2] = image_channels(spec);
    }
    return 3;
}

size_t sl__image_bytes(const sl_image_spec *spec)
{
    return (size_t)spec->height * (size_t)spec->width * (size_t)image_channels(spec) *
           sl_dtype_size(spec->dtype);
}

/* The path of an element from an image source, for messages: its origin
 * (what read_files recorded), else its first scalar string after tensor 0. */
static const char *element_path(const sl_element *el)
{
    size_t len = 0;
    const char *s = sl__element_origin(el, &len);
    for (int j = 1; !s && j < el->n; j++)
        if (el->t[j].dtype == SL_STRING && el->t[j].ndim == 0)
            s = sl_tensor_string(&el->t[j], 0, &len);
    if (!s)
        return NULL;
    static _Thread_local char buf[1024];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), s);
    return buf;
}

/* What an element's image tensor holds: a file's encoded bytes, or pixels
 * already decoded (uint8 [H, W, C], C 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA:
 * a numpy array, a cached decode, a video frame). */
#define FMT_PIXELS (-1)
typedef struct image_in {
    const uint8_t *data;
    size_t n;
    int fmt; /* SL__FMT_*, or FMT_PIXELS */
    int w, h, c;
} image_in;

/* Tensor spec->image_index of in, or an error. */
static int image_input(const sl_image_spec *spec, const sl_element *in, image_in *img)
{
    const struct sl_tensor *t = spec->image_index < in->n ? &in->t[spec->image_index] : NULL;
    *img = (image_in){0};
    if (t && t->dtype == SL_UINT8 && t->ndim == 1) {
        img->data = t->data;
        img->n = t->nbytes;
    } else if (t && t->dtype == SL_STRING && t->ndim == 0) {
        img->data = (const uint8_t *)sl_tensor_string(t, 0, &img->n);
    } else if (t && t->dtype == SL_UINT8 && t->ndim == 3) {
        if (t->shape[2] < 1 || t->shape[2] > 4 || t->shape[0] < 1 || t->shape[1] < 1 ||
            t->shape[0] > INT32_MAX || t->shape[1] > INT32_MAX)
            return sl__set_error(SL_ESHAPE, "map_image: decoded pixels of shape [%lld, %lld, "
                                 "%lld]: an image is [H, W, C] with H, W >= 1 and C 1 to 4",
                                 (long long)t->shape[0], (long long)t->shape[1],
                                 (long long)t->shape[2]);
        *img = (image_in){t->data, t->nbytes, FMT_PIXELS, (int)t->shape[1], (int)t->shape[0],
                          (int)t->shape[2]};
        return 0;
    } else {
        return sl__set_error(SL_EDTYPE, "map_image: tensor %d must be encoded bytes (uint8 [n] "
                             "or a string) or decoded pixels (uint8 [H, W, C])",
                             spec->image_index);
    }
    img->fmt = sl__image_format(img->data, img->n);
    return 0;
}

/* Pixels as the RGB rows a decoder gives (sl__decoded): rows to the
 * window's last, as a PNG of them decodes (gray replicated; alpha
 * blended over the background when asked, else dropped). RGB pixels are
 * used where they lie. */
static int pixels_rgb(workspace *ws, const image_in *img, const sl__window *win,
                      const int *background, sl__decoded *out)
{
    int rows = (int)(win->y + win->h + 0.999999);
    if (rows > img->h)
        rows = img->h;
    size_t in_row = (size_t)img->w * (size_t)img->c;
    if (img->c == 3) {
        *out = (sl__decoded){img->data, img->w, rows, in_row, *win, 1};
        return 0;
    }
    bool blend = background && (img->c == 2 || img->c == 4);
    size_t row = (size_t)img->w * (blend ? 4 : 3), need = row * (size_t)rows;
    if (need > ws->rgb_cap) {
        sl__free(ws->rgb, ws->rgb_cap);
        ws->rgb_cap = 0;
        if (!(ws->rgb = sl__alloc(need)))
            return sl__set_error(SL_ENOMEM, "out of memory (%zu bytes of pixels)", need);
        ws->rgb_cap = need;
    }
    for (int y = 0; y < rows; y++) {
        const uint8_t *p = img->data + (size_t)y * in_row;
        uint8_t *q = ws->rgb + (size_t)y * row;
        for (int x = 0; x < img->w; x++, p += img->c) {
            uint8_t g = p[0];
            q[0] = g, q[1] = img->c >= 3 ? p[1] : g, q[2] = img->c >= 3 ? p[2] : g;
            if (blend)
                q[3] = p[img->c - 1];
            q += blend ? 4 : 3;
        }
    }
    if (blend)
        sl__blend_rows(ws->rgb, img->w, rows, row, background);
    *out = (sl__decoded){ws->rgb, img->w, rows, row, *win, 1}; /* blended: RGB in each row's first 3w */
    return 0;
}

typedef sl__image_view view;

static void view_draw(const sl_image_spec *spec, sl__rng *rng, const sl__jpeg_info *info,
                      void *dst, view *v)
{
    v->spec = spec;
    v->dst = dst;
    sl__crop_plan(spec, info->width, info->height, rng, &v->win, &v->flip);
    v->aug = sl__aug_any(spec);
    if (v->aug) {
        sl__aug_draw(spec, rng, &v->plan);
        v->plan.gray_source = info->components == 1;
    }
}

/* Resamples the view from YCbCr planes (planes) or from window win of the
 * decoded RGB region d, then carries out its augmentations. Pixel ops work
 * on uint8 RGB HWC: the output itself when it is that, else the
 * augmenter's image, stored into the output after. */
static int view_render(workspace *ws, view *v, const sl__ycc *planes, const sl__decoded *d,
                       const sl__window *win)
{
    const sl_image_spec *spec = v->spec;
    sl__resize_out out = {v->dst, spec->width, spec->height, spec->layout, spec->dtype, v->flip,
                          {spec->mean[0], spec->mean[1], spec->mean[2]},
                          {spec->std[0], spec->std[1], spec->std[2]}, NULL};
    sl__resize_out to = out;
    bool pixels = v->aug && sl__aug_pixels(&v->plan), folded = false;
    if (pixels) {
        bool direct = spec->dtype == SL_UINT8 && spec->layout == SL_LAYOUT_HWC;
        to.data = direct ? v->dst : sl__augmenter_image(ws->aug, spec->width, spec->height);
        to.dtype = SL_UINT8;
        to.layout = SL_LAYOUT_HWC;
        if (!to.data)
            return SL_ENOMEM;
    }
    int rc;
    if (planes) {
        /* the colour transform rides on the conversion when it comes first */
        if (pixels && v->plan.colour.on && !v->plan.affine && !v->plan.nops &&
            !planes->matrix) {
            to.colour = &v->plan.colour;
            folded = true;
        }
        rc = sl__resize_ycc(ws->rs, planes, &to);
    } else {
        rc = sl__resize(ws->rs, d->rgb, d->width, d->height, d->stride, win, &to);
    }
    if (rc == 0 && pixels)
        rc = sl__aug_apply(ws->aug, spec, &v->plan, folded, to.data, spec->width, spec->height);
    if (rc == 0 && pixels && to.data != v->dst)
        sl__resize_store_image(ws->rs, to.data, &out);
    if (rc == 0 && v->aug)
        sl__aug_erase(spec, &v->plan, v->dst);
    return rc;
}

void sl__image_view_draw(const sl_image_spec *spec, sl__rng *rng, int width, int height,
                         bool gray, void *dst, sl__image_view *v)
{
    sl__jpeg_info info = {width, height, gray ? 1 : 3, false};
    view_draw(spec, rng, &info, dst, v);
}

int sl__image_view_render(sl__image_view *v, const sl__ycc *planes, const sl__decoded *d,
                          const sl__window *win)
{
    workspace *ws = ws_get();
    return ws ? view_render(ws, v, planes, d, win) : SL_ENOMEM;
}

int sl__image_view_raw(sl__image_view *v, const sl__raw *src)
{
    workspace *ws = ws_get();
    const sl_image_spec *s = v->spec;
    if (!ws)
        return SL_ENOMEM;
    if (s->width > ws->ncols) {
        sl__free(ws->cols, (size_t)ws->ncols * sizeof *ws->cols);
        ws->ncols = 0;
        if (!(ws->cols = sl__alloc((size_t)s->width * sizeof *ws->cols)))
            return SL_ENOMEM;
        ws->ncols = s->width;
    }
    return sl__raw_resample(src, &src->win, v->dst, s->width, s->height, s->channels, s->dtype,
                            s->layout, v->flip, ws->cols);
}

static unsigned jpeg_flags(const sl_image_spec *spec)
{
    return (spec->allow_warnings ? SL__JPEG_ALLOW_WARNINGS : 0) |
           (spec->fast_upsample ? SL__JPEG_FAST_UPSAMPLE : 0);
}

static int name_file(int rc, const sl_element *in)
{
    if (rc < 0 && rc != SL_ENOMEM) {
        const char *path = element_path(in);
        if (path)
            sl__error_prefix(path);
    }
    return rc;
}

/* Window w of the source (inside the union u) in the decoded pixels,
 * where u became `region`; the union itself exactly as decoded. */
static sl__window narrow(const sl__window *region, const sl__window *u, const sl__window *w)
{
    if (w->x == u->x && w->y == u->y && w->w == u->w && w->h == u->h)
        return *region;
    double sx = region->w / u->w, sy = region->h / u->h;
    return (sl__window){region->x + (w->x - u->x) * sx, region->y + (w->y - u->y) * sy,
                        w->w * sx, w->h * sy};
}

/* Raw mode (SL_DECODE_RAW): the union u in the file's own samples, each
 * view sampled from it by nearest neighbour. JPEG at full scale (a DCT
 * scale would average samples). */
static int decode_raw(workspace *ws, const image_in *img, const sl__jpeg_info *info,
                      const sl__window *u, view *v, int nviews)
{
    const sl_image_spec *spec = v[0].spec;
    int fmt = img->fmt;
    const uint8_t *data = img->data;
    size_t n = img->n;
    sl__raw src;
    int rc = 0;
    if (fmt == FMT_PIXELS) {
        src = (sl__raw){data, img->w, img->h, (size_t)img->w * (size_t)img->c, img->c, 1,
                        img->c, *u};
    } else if (fmt == SL__FMT_PNG) {
        rc = sl__png_decode_raw(ws->png, data, n, u, spec->channels, &src);
    } else if (fmt == SL__FMT_WEBP) {
        rc = sl__webp_decode_raw(ws->webp, data, n, u, &src);
    } else {
        sl__decoded d;
        rc = sl__jpeg_decode(ws->dec, data, n, u, (int)ceil(u->w), (int)ceil(u->h),
                             jpeg_flags(spec), &d);
        src = (sl__raw){d.rgb, d.width, d.height, d.stride, info->components == 1 ? 1 : 3,
                        1, 3, d.win};
    }
    for (int i = 0; rc == 0 && i < nviews; i++) {
        const sl_image_spec *s = v[i].spec;
        if (s->width > ws->ncols) {
            sl__free(ws->cols, (size_t)ws->ncols * sizeof *ws->cols);
            ws->ncols = 0;
            ws->cols = sl__alloc((size_t)s->width * sizeof *ws->cols);
            if (!ws->cols)
                return SL_ENOMEM;
            ws->ncols = s->width;
        }
        sl__window mine = narrow(&src.win, u, &v[i].win);
        rc = sl__raw_resample(&src, &mine, v[i].dst, s->width, s->height, s->channels, s->dtype,
                              s->layout, v[i].flip, ws->cols);
    }
    return rc;
}

/* A JPEG's views: from the union u's YCbCr planes where they pay, else
 * from its RGB decode. */
static int decode_jpeg(workspace *ws, const uint8_t *data, size_t n, const sl_image_spec *spec,
                       const sl__window *u, int need_w, int need_h, view *v, int nviews)
{
    unsigned flags = jpeg_flags(spec);
    int rc = SL__JPEG_NOT_YCC;
    if (!spec->exact_pixels && !spec->fast_upsample && sl__resize_ycc_pays(ws->rs)) {
        sl__ycc planes;
        rc = sl__jpeg_decode_ycc(ws->dec, data, n, u, need_w, need_h, flags, &planes);
        for (int i = 0; rc == 0 && i < nviews; i++) {
            sl__ycc mine = planes; /* each plane's window, the view's part */
            for (int c = 0; c < 3; c++)
                mine.plane[c].win = narrow(&planes.plane[c].win, u, &v[i].win);
            rc = view_render(ws, &v[i], &mine, NULL, NULL);
        }
    }
    if (rc == SL__JPEG_NOT_YCC) {
        sl__decoded d;
        rc = sl__jpeg_decode(ws->dec, data, n, u, need_w, need_h, flags, &d);
        for (int i = 0; rc == 0 && i < nviews; i++) {
            sl__window mine = narrow(&d.win, u, &v[i].win);
            rc = view_render(ws, &v[i], NULL, &d, &mine);
        }
    }
    return rc;
}

/* The header of an image in format fmt (the bytes' signature; JPEG's
 * header names the others), with spec's limits. The format's decoder is
 * made here at its first image, so a build without one of them still
 * decodes the others, and a thread that meets only PNGs holds no JPEG
 * decoder. */
static int read_header(workspace *ws, const image_in *img, const sl_image_spec *spec,
                       sl__jpeg_info *info)
{
    int fmt = img->fmt;
    const uint8_t *data = img->data;
    size_t n = img->n;
    if (fmt == FMT_PIXELS) {
        if ((int64_t)img->w * img->h > spec->max_pixels)
            return sl__set_error(SL_ERANGE, "decoded pixels of %dx%d are over max_pixels "
                                 "(%lld)", img->w, img->h, (long long)spec->max_pixels);
        *info = (sl__jpeg_info){img->w, img->h, img->c >= 3 ? 3 : 1, false};
        return 0;
    }
    const char *missing = sl__image_missing(fmt);
    if (missing)
        return sl__set_error(SL_EUNSUPPORTED, "%s", missing);
    if (fmt == SL__FMT_PNG) {
        if (!ws->png && !(ws->png = sl__png_new()))
            return sl__set_error(SL_ENOMEM, "out of memory (PNG decoder)");
        return sl__png_header(ws->png, data, n, spec->max_pixels, jpeg_flags(spec), info);
    }
    if (fmt == SL__FMT_WEBP) {
        if (!ws->webp && !(ws->webp = sl__webp_new()))
            return sl__set_error(SL_ENOMEM, "out of memory (WebP decoder)");
        return sl__webp_header(ws->webp, data, n, spec->max_pixels, info);
    }
    if (!ws->dec && !(ws->dec = sl__jpeg_new()))
        return sl__set_error(SL_ENOMEM, "out of memory (JPEG decoder)");
    return sl__jpeg_header(ws->dec, data, n, spec->max_pixels, info);
}

/* The mask of an image (sl_image_spec.with_mask): its tensor decoded raw
 * over the image's window, scaled from the image's size (img) to its own,
 * flipped as the image was. */
static int decode_mask(workspace *ws, const sl_image_spec *mask, const sl_element *in,
                       const sl__jpeg_info *img, const view *image, void *dst)
{
    image_in m;
    int rc = image_input(mask, in, &m);
    sl__jpeg_info info;
    if (rc == 0)
        rc = read_header(ws, &m, mask, &info);
    if (rc == 0) {
        double sx = (double)info.width / img->width, sy = (double)info.height / img->height;
        const sl__window *w = &image->win;
        view v = {.spec = mask, .dst = dst, .flip = image->flip,
                  .win = {w->x * sx, w->y * sy, w->w * sx, w->h * sy}};
        rc = decode_raw(ws, &m, &info, &v.win, &v, 1);
    }
    if (rc < 0 && rc != SL_ENOMEM)
        sl__error_prefix("its mask");
    return rc;
}

int sl__image_decode_views(const sl_image_spec *specs, int nviews, sl__rng *rng,
                           const sl_element *in, void *const *dst, const sl_image_spec *mask,
                           void *mask_dst)
{
    image_in img;
    int rc = image_input(&specs[0], in, &img);
    if (rc)
        return rc;
    workspace *ws = ws_get();
    if (!ws)
        return SL_ENOMEM;
    int fmt = img.fmt;
    const uint8_t *data = img.data;
    size_t n = img.n;
    sl__jpeg_info info;
    rc = read_header(ws, &img, &specs[0], &info);
    if (rc)
        return name_file(rc, in);
    /* every view's draws first, in order; then the union of their windows,
     * decoded once at the DCT scale the most demanding view allows */
    view v[SL__MAX_VIEWS];
    double x0 = info.width, y0 = info.height, x1 = 0, y1 = 0, r = INFINITY;
    for (int i = 0; i < nviews; i++) {
        view_draw(&specs[i], rng, &info, dst[i], &v[i]);
        const sl__window *w = &v[i].win;
        x0 = fmin(x0, w->x), y0 = fmin(y0, w->y);
        x1 = fmax(x1, w->x + w->w), y1 = fmax(y1, w->y + w->h);
        r = fmin(r, fmin(w->w / specs[i].width, w->h / specs[i].height));
    }
    sl__window u = {x0, y0, x1 - x0, y1 - y0};
    r = fmax(r, 1); /* a scale of 1/r or finer serves them all */
    int need_w = (int)fmax(1, ceil(u.w / r - 1e-9)), need_h = (int)fmax(1, ceil(u.h / r - 1e-9));
    if (nviews == 1) /* one view: its own size picks the scale, as always */
        need_w = specs[0].width, need_h = specs[0].height;
    if (specs[0].decode == SL_DECODE_RAW) {
        rc = decode_raw(ws, &img, &info, &u, v, nviews);
    } else if (fmt == SL__FMT_PNG || fmt == SL__FMT_WEBP || fmt == FMT_PIXELS) {
        const int *bg = specs[0].blend_alpha ? specs[0].background : NULL;
        sl__decoded d;
        rc = fmt == FMT_PIXELS  ? pixels_rgb(ws, &img, &u, bg, &d)
             : fmt == SL__FMT_PNG ? sl__png_decode(ws->png, data, n, &u, bg, &d)
                                  : sl__webp_decode(ws->webp, data, n, &u, need_w, need_h, bg, &d);
        for (int i = 0; rc == 0 && i < nviews; i++) {
            sl__window mine = narrow(&d.win, &u, &v[i].win);
            rc = view_render(ws, &v[i], NULL, &d, &mine);
        }
    } else {
        rc = decode_jpeg(ws, data, n, &specs[0], &u, need_w, need_h, v, nviews);
    }
    if (rc == 0 && mask)
        rc = decode_mask(ws, mask, in, &info, &v[0], mask_dst);
    return name_file(rc, in);
}

int sl__image_decode(const sl_image_spec *spec, sl__rng *rng, const sl_element *in, void *dst)
{
    return sl__image_decode_views(spec, 1, rng, in, &dst, NULL, NULL);
}

sl_element *sl__image_rest(const sl_element *in, int extra_slots)
{
    return sl__element_new(in->n - 1 + extra_slots, 256);
}

int sl__image_add_rest(sl_element *el, const sl_element *in, const sl_image_spec *spec, int from,
                       int to)
{
    for (int j = from; j < to && j < in->n; j++) {
        if (j == spec->image_index)
            continue;
        int rc = sl_element_add_shared(el, in, j);
        if (rc < 0)
            return rc;
    }
    return 0;
}


/* ---- the dataset ---- */

/* The image's tensor becomes the decoded image, or with views one tensor
 * per view. */
static int map_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    const map_image_ds *d = user;
    const sl_image_spec *specs = d->nviews ? d->views : &d->spec;
    int nviews = d->nviews ? d->nviews : 1;
    int k = d->spec.image_index, m = d->spec.with_mask ? d->spec.mask_index : -1;
    if (in->n <= (k > m ? k : m))
        return sl__set_error(SL_EINVAL, "map_image: an element of %d tensors has no tensor %d",
                             in->n, k > m ? k : m);
    sl_element *el = sl__image_rest(in, nviews + (m >= 0));
    if (!el)
        return SL_ENOMEM;
    void *dst[SL__MAX_VIEWS], *mask = NULL;
    int rc = 0;
    for (int j = 0; rc == 0 && j < in->n; j++) {
        if (j != k && j != m) {
            rc = sl_element_add_shared(el, in, j);
            continue;
        }
        /* the image's views in its place, or the mask in its own */
        for (int i = 0; rc == 0 && i < (j == k ? nviews : 1); i++) {
            const sl_image_spec *s = j == k ? &specs[i] : &d->mask;
            int64_t shape[3];
            sl__image_shape(s, shape);
            struct sl_tensor *t = sl__element_push(el, s->dtype, 3, shape, sl__image_bytes(s));
            rc = t ? 0 : SL_ENOMEM;
            *(j == k ? &dst[i] : &mask) = t ? t->data : NULL;
        }
    }
    if (rc == 0)
        rc = sl__image_decode_views(specs, nviews, &ctx->rng, in, dst, m >= 0 ? &d->mask : NULL,
                                    mask);
    if (rc < 0) {
        sl_element_release(el);
        return rc;
    }
    *out = el;
    return 0;
}

static int map_image_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    const map_image_ds *d = (const map_image_ds *)ds;
    return sl__map_iter_make(ds, tree, key, epoch, map_fn, (void *)d, d->parallelism, 0, out);
}

static void map_image_destroy(sl_dataset *ds)
{
    map_image_ds *d = (map_image_ds *)ds;
    sl__free(d->views, (size_t)d->nviews * sizeof *d->views);
}

int64_t sl__map_image_cardinality(const sl_dataset *ds)
{
    const map_image_ds *d = (const map_image_ds *)ds;
    int64_t in = sl_dataset_cardinality(ds->inputs[0]);
    if (!d->batch || in < 0)
        return in;
    return in / d->batch + (!(d->flags & SL_DROP_REMAINDER) && in % d->batch);
}

uint64_t sl__map_image_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const map_image_ds *d = (const map_image_ds *)ds;
    if (d->nviews) {
        h = sl__hash_u64(h, 0x76696577u + (uint64_t)d->nviews); /* "view" */
        for (int i = 0; i < d->nviews; i++)
            h = sl__image_spec_hash(h, &d->views[i]);
    } else {
        h = sl__image_spec_hash(h, &d->spec);
    }
    return sl__hash_u64(sl__hash_u64(h, (uint64_t)d->batch), d->flags);
}

static sl_dataset *map_image_fuse_batch(sl_dataset *ds, int64_t size, unsigned flags);

/* The image takes its input tensor's leaf; fused with batch, every leaf
 * then gains the batch's dimension, as batch gives. */
static void image_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    const map_image_ds *d = arg;
    sl__leaf_spec out = *spec;
    if (leaf == d->spec.image_index && d->nviews) { /* a tuple of the views */
        sl__stext_puts(t, "(");
        for (int i = 0; i < d->nviews; i++) {
            sl__leaf_spec v = {.dtype = d->views[i].dtype};
            v.ndim = sl__image_shape(&d->views[i], v.shape);
            if (i)
                sl__stext_puts(t, ", ");
            sl__stext_leaf(t, &v);
        }
        sl__stext_puts(t, ")");
        return;
    }
    if (leaf == d->spec.image_index) {
        out.dtype = d->spec.dtype;
        out.ndim = sl__image_shape(&d->spec, out.shape);
    } else if (d->spec.with_mask && leaf == d->spec.mask_index) {
        out.dtype = d->mask.dtype;
        out.ndim = sl__image_shape(&d->mask, out.shape);
    }
    if (d->batch && out.ndim >= 0 && out.ndim < SL_MAX_DIMS) {
        memmove(out.shape + 1, out.shape, (size_t)out.ndim * sizeof *out.shape);
        out.shape[0] = d->flags & SL_DROP_REMAINDER ? d->batch : -1;
        out.ndim++;
    } else if (d->batch) {
        out.ndim = -1;
    }
    sl__stext_leaf(t, &out);
}

sl_structure *sl__map_image_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, image_leaf, (void *)ds) : NULL;
}

static const sl__node_ops map_image_ops = {
    .kind = "map_image",
    .make_iter = map_image_make,
    .cardinality = sl__map_image_cardinality,
    .fingerprint = sl__map_image_fingerprint,
    .fuse_batch = map_image_fuse_batch,
    .structure = sl__map_image_structure,
};

/* With a mask: a batch after it is the plain one, stacking both. */
static const sl__node_ops map_image_mask_ops = {
    .kind = "map_image",
    .make_iter = map_image_make,
    .cardinality = sl__map_image_cardinality,
    .fingerprint = sl__map_image_fingerprint,
    .structure = sl__map_image_structure,
};

/* With views: a batch after it is the plain one, stacking each view. */
static const sl__node_ops map_image_views_ops = {
    .kind = "map_image",
    .make_iter = map_image_make,
    .cardinality = sl__map_image_cardinality,
    .fingerprint = sl__map_image_fingerprint,
    .destroy = map_image_destroy,
    .structure = sl__map_image_structure,
};

static sl_dataset *map_image_fuse_batch(sl_dataset *ds, int64_t size, unsigned flags)
{
    const map_image_ds *d = (const map_image_ds *)ds;
    if (size > (1 << 20)) {
        sl_dataset_release(ds);
        sl__set_error(SL_EINVAL, "batch: size %lld is too large for images", (long long)size);
        return NULL;
    }
    map_image_ds *f = (map_image_ds *)sl__dataset_new(&sl__map_image_batch_ops, sizeof *f,
                                              sl_dataset_retain(ds->inputs[0]));
    if (f) {
        f->spec = d->spec;
        f->parallelism = d->parallelism;
        f->batch = size;
        f->flags = flags;
    }
    sl_dataset_release(ds);
    return f ? &f->base : NULL;
}

SL_API sl_dataset *sl_map_image(sl_dataset *in, const sl_image_spec *spec, int parallelism)
{
    map_image_ds *d = (map_image_ds *)sl__dataset_new(&map_image_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if (!spec)
        return sl__dataset_fail(&d->base, SL_EINVAL, "map_image: NULL spec");
    int rc = sl__image_spec_load(spec, &d->spec);
    if (rc == 0)
        rc = sl__image_spec_check(&d->spec);
    if (rc == 0)
        rc = sl__image_check_input(&d->spec, d->base.inputs[0]);
    if (rc < 0) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    if ((parallelism < 1 && parallelism != SL_AUTOTUNE) || parallelism > 4096)
        return sl__dataset_fail(&d->base, SL_EINVAL, "map_image: bad parallelism %d",
                                parallelism);
    d->parallelism = parallelism;
    if (d->spec.with_mask) { /* known only now: the node is one without a fused batch */
        sl__image_mask_spec(&d->spec, &d->mask);
        d->base.ops = &map_image_mask_ops;
    }
    return &d->base;
}

SL_API sl_dataset *sl_map_image_views(sl_dataset *in, const sl_image_spec *specs, int nviews,
                                      int parallelism)
{
    map_image_ds *d = (map_image_ds *)sl__dataset_new(&map_image_views_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if (!specs || nviews < 1 || nviews > SL__MAX_VIEWS)
        return sl__dataset_fail(&d->base, SL_EINVAL, "map_image: %d views (1 to %d)", nviews,
                                SL__MAX_VIEWS);
    if ((parallelism < 1 && parallelism != SL_AUTOTUNE) || parallelism > 4096)
        return sl__dataset_fail(&d->base, SL_EINVAL, "map_image: bad parallelism %d",
                                parallelism);
    d->views = sl__calloc((size_t)nviews, sizeof *d->views);
    if (!d->views)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "out of memory (map_image views)");
    d->nviews = nviews;
    d->parallelism = parallelism;
    /* the caller's array has the caller's struct layout: its stride is
     * the first spec's struct_size */
    size_t stride = specs->struct_size;
    int rc = 0;
    for (int i = 0; rc == 0 && i < nviews; i++) {
        const sl_image_spec *s = (const sl_image_spec *)((const char *)specs + (size_t)i * stride);
        rc = s->struct_size == stride ? sl__image_spec_load(s, &d->views[i])
                                      : sl__set_error(SL_EINVAL, "map_image: views of different "
                                                      "struct_size");
        if (rc == 0)
            rc = sl__image_spec_check(&d->views[i]);
        if (rc == 0 && d->views[i].image_index != d->views[0].image_index)
            rc = sl__set_error(SL_EINVAL, "map_image: views read different image_index");
        if (rc == 0 && d->views[i].with_mask)
            rc = sl__set_error(SL_EINVAL, "map_image: a mask goes with one view (sl_map_image)");
        if (rc == 0 && (d->views[i].decode != d->views[0].decode ||
                        d->views[i].blend_alpha != d->views[0].blend_alpha ||
                        memcmp(d->views[i].background, d->views[0].background,
                               sizeof d->views[0].background)))
            rc = sl__set_error(SL_EINVAL, "map_image: views decode the file once: the same "
                               "decode, blend_alpha and background for all");
        if (rc < 0) {
            char what[32];
            snprintf(what, sizeof what, "view %d", i);
            sl__error_prefix(what);
        }
    }
    if (rc == 0) {
        d->spec = d->views[0];
        rc = sl__image_check_input(&d->spec, d->base.inputs[0]);
    }
    if (rc < 0) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    return &d->base;
}
