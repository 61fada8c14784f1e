/*
 * mixup_cutmix(spec): timm's Mixup on batches (mode "batch"). Each batch,
 * with probability prob, is mixed with itself reversed: image i with image
 * B-1-i, by MixUp (x*lam + x_rev*(1-lam), lam ~ Beta(mixup_alpha)) or by
 * CutMix (a box of x_rev pasted into x, lam ~ Beta(cutmix_alpha), then
 * lam = 1 - box area / image area), CutMix chosen with switch_prob when
 * both alphas are on. Labels (int64 [B]) become soft targets, float32
 * [B, num_classes]: lam * smooth(y) + (1 - lam) * smooth(y_rev), where
 * smooth gives label_smoothing / num_classes to every class and the rest
 * to the true one.
 *
 * The images are mixed in their own buffer when the batch holds the only
 * reference to it (what a batch or map_image's batch node hands on), else
 * in a copy; both are pooled, so no page is faulted per batch. Each pair
 * (i, B-1-i) is read once and written once. uint8 images mix in 15-bit
 * fixed point, rounding to nearest (timm rounds the float result; the two
 * differ by at most one level, at exact halves). The pass runs at about
 * memory bandwidth (bench/README), the limit for a pass over every pixel.
 */
#include <math.h>
#include <string.h>
#include "../core/versioned.h"
#include "../graph/sync.h"

typedef struct mixup_ds {
    sl_dataset base;
    sl_mixup_spec spec;
    bool same; /* SL_SAME_EACH_EPOCH */
} mixup_ds;

typedef struct mixup_iter {
    sl__sync_iter u;
    int64_t pos; /* batches returned */
    uint64_t seed;
} mixup_iter;

/* What one batch draws. */
typedef struct draw {
    bool cutmix;
    double lam;
    int64_t y1, y2, x1, x2; /* CutMix's box */
} draw;

/* timm's rand_bbox: a box of side sqrt(1 - lam) of each dimension, centred
 * anywhere in the image and clipped to it; lam then follows its area. */
static void cut_box(sl__rng *r, int64_t h, int64_t w, draw *d)
{
    double rat = sqrt(1.0 - d->lam);
    int64_t ch = (int64_t)((double)h * rat), cw = (int64_t)((double)w * rat);
    int64_t cy = (int64_t)sl__rng_below(r, (uint64_t)h), cx = (int64_t)sl__rng_below(r, (uint64_t)w);
    d->y1 = cy - ch / 2 < 0 ? 0 : cy - ch / 2;
    d->y2 = cy + ch / 2 > h ? h : cy + ch / 2;
    d->x1 = cx - cw / 2 < 0 ? 0 : cx - cw / 2;
    d->x2 = cx + cw / 2 > w ? w : cx + cw / 2;
    d->lam = 1.0 - (double)((d->y2 - d->y1) * (d->x2 - d->x1)) / (double)(h * w);
}

static draw draw_batch(const sl_mixup_spec *s, sl__rng *r, int64_t h, int64_t w)
{
    draw d = {.lam = 1.0};
    if (sl__rng_uniform(r) >= s->prob)
        return d;
    if (s->mixup_alpha > 0 && s->cutmix_alpha > 0)
        d.cutmix = sl__rng_uniform(r) < s->switch_prob;
    else
        d.cutmix = s->cutmix_alpha > 0;
    double alpha = d.cutmix ? s->cutmix_alpha : s->mixup_alpha;
    d.lam = sl__rng_beta(r, alpha, alpha);
    if (d.cutmix)
        cut_box(r, h, w, &d);
    return d;
}

/* ---- pixels ---- */

/* The loops run over fixed blocks so that gcc's -O2 vectorizes them (its
 * cheapest cost model takes no loop that needs a remainder or alias
 * checks); the images of a pair never overlap. */
#define BLOCK 32

/* a' = v + round((u - v) lam), b' = u - round((u - v) lam): timm's
 * rint(u lam + v (1 - lam)) and its mirror, up to ties. */
#define MIX_U8(k)                                                 \
    do {                                                          \
        int32_t u_ = a[k], v_ = b[k];                             \
        int32_t m_ = ((u_ - v_) * w + 16384) >> 15;               \
        a[k] = (uint8_t)(v_ + m_);                                \
        b[k] = (uint8_t)(u_ - m_);                                \
    } while (0)

static void mix_u8(uint8_t *restrict a, uint8_t *restrict b, size_t n, double lam)
{
    int32_t w = (int32_t)lrint(lam * 32768.0);
    size_t k = 0;
    for (; k + BLOCK <= n; k += BLOCK)
        for (size_t j = k; j < k + BLOCK; j++)
            MIX_U8(j);
    for (; k < n; k++)
        MIX_U8(k);
}

#define MIX_F32(k)                                                \
    do {                                                          \
        float u_ = a[k], v_ = b[k];                               \
        a[k] = u_ * wa + v_ * wb;                                 \
        b[k] = v_ * wa + u_ * wb;                                 \
    } while (0)

static void mix_f32(float *restrict a, float *restrict b, size_t n, double lam)
{
    float wa = (float)lam, wb = (float)(1.0 - lam);
    size_t k = 0;
    for (; k + BLOCK <= n; k += BLOCK)
        for (size_t j = k; j < k + BLOCK; j++)
            MIX_F32(j);
    for (; k < n; k++)
        MIX_F32(k);
}

#define SWAP(k)                                                   \
    do {                                                          \
        unsigned char t_ = a[k];                                  \
        a[k] = b[k];                                              \
        b[k] = t_;                                                \
    } while (0)

static void swap_bytes(unsigned char *restrict a, unsigned char *restrict b, size_t n)
{
    size_t k = 0;
    for (; k + BLOCK <= n; k += BLOCK)
        for (size_t j = k; j < k + BLOCK; j++)
            SWAP(j);
    for (; k < n; k++)
        SWAP(k);
}

/* Swaps the box between images a and b: per row of the box, one run of
 * bytes (HWC), or one per channel (CHW). */
static void swap_box(unsigned char *a, unsigned char *b, const int64_t dims[3], bool chw,
                     size_t item, const draw *d)
{
    int64_t h = chw ? dims[1] : dims[0], w = chw ? dims[2] : dims[1];
    int64_t c = chw ? dims[0] : dims[2];
    size_t run = (size_t)(d->x2 - d->x1) * item * (chw ? 1 : (size_t)c);
    for (int64_t ch = 0; ch < (chw ? c : 1); ch++)
        for (int64_t y = d->y1; y < d->y2; y++) {
            size_t off = chw ? ((size_t)(ch * h + y) * (size_t)w + (size_t)d->x1) * item
                             : ((size_t)(y * w + d->x1) * (size_t)c) * item;
            swap_bytes(a + off, b + off, run);
        }
}

static void mix_images(unsigned char *x, int64_t batch, const int64_t dims[3], bool chw,
                       sl_dtype dtype, const draw *d)
{
    size_t item = sl_dtype_size(dtype), n = (size_t)(dims[0] * dims[1] * dims[2]);
    for (int64_t i = 0; i < batch / 2; i++) {
        unsigned char *a = x + (size_t)i * n * item, *b = x + (size_t)(batch - 1 - i) * n * item;
        if (d->cutmix)
            swap_box(a, b, dims, chw, item, d);
        else if (dtype == SL_UINT8)
            mix_u8(a, b, n, d->lam);
        else
            mix_f32((float *)(void *)a, (float *)(void *)b, n, d->lam);
    }
}

/* ---- the element ---- */

/* The image tensor's bytes to write: its own buffer when nothing else can
 * see it, else a copy appended to out (whose index *at then names it). */
static unsigned char *writable(sl_element *el, int index, sl_element *out)
{
    const struct sl_tensor *t = &el->t[index];
    bool own = atomic_load(&el->refs) == 1 && t->buf &&
               atomic_load(&t->buf->refs) == 1;
    if (own) {
        sl_element_add_shared(out, el, index);
        return out->t[out->n - 1].data;
    }
    struct sl_tensor *c = sl__element_push(out, t->dtype, t->ndim, t->shape, t->nbytes);
    if (!c)
        return NULL;
    memcpy(c->data, t->data, t->nbytes);
    return c->data;
}

/* What is wrong with the batch for this spec (an element error, code in
 * *code, message set), or 0. */
static int check(const sl_element *el, const sl_mixup_spec *s)
{
    int k = s->image_index > s->label_index ? s->image_index : s->label_index;
    if (k >= el->n)
        return sl__set_error(SL_ESHAPE, "the batch has %d tensors; the spec names tensor %d",
                             el->n, k);
    const struct sl_tensor *x = &el->t[s->image_index], *y = &el->t[s->label_index];
    if (x->ndim != 4 || (x->dtype != SL_UINT8 && x->dtype != SL_FLOAT32))
        return sl__set_error(SL_ESHAPE, "images must be a batch, uint8 or float32 of rank 4; "
                             "tensor %d is %s of rank %d", s->image_index,
                             sl_dtype_name(x->dtype), x->ndim);
    if (y->ndim != 1 || y->dtype != SL_INT64 || y->shape[0] != x->shape[0])
        return sl__set_error(SL_ESHAPE, "labels must be int64 [batch]; tensor %d is %s of "
                             "rank %d", s->label_index, sl_dtype_name(y->dtype), y->ndim);
    const int64_t *v = y->data;
    for (int64_t i = 0; i < y->shape[0]; i++)
        if (v[i] < 0 || v[i] >= s->num_classes)
            return sl__set_error(SL_ERANGE, "label %lld is outside [0, %lld)",
                                 (long long)v[i], (long long)s->num_classes);
    return 0;
}

static void soft_targets(float *out, const int64_t *y, int64_t batch, const sl_mixup_spec *s,
                         double lam)
{
    double off = s->label_smoothing / (double)s->num_classes, on = 1.0 - s->label_smoothing;
    for (int64_t i = 0; i < batch; i++) {
        float *row = out + i * s->num_classes;
        for (int64_t c = 0; c < s->num_classes; c++)
            row[c] = (float)off;
        row[y[i]] += (float)(on * lam);
        row[y[batch - 1 - i]] += (float)(on * (1.0 - lam));
    }
}

static int mixup_next(sl__iter *base, sl_element **out)
{
    mixup_iter *it = (mixup_iter *)base;
    const mixup_ds *d = (const mixup_ds *)base->ds;
    const sl_mixup_spec *s = &d->spec;
    sl_element *el;
    int rc;
    for (;;) {
        if ((rc = sl__iter_next(it->u.in, &el)) != 0)
            return rc;
        if ((rc = check(el, s)) == 0)
            break;
        sl__error_prefix(sl_dataset_name(base->ds));
        sl_element_release(el);
        if ((rc = sl__policy(base, rc)) != 0)
            return rc;
    }
    const struct sl_tensor *img = &el->t[s->image_index];
    bool chw = s->layout == SL_LAYOUT_CHW;
    int64_t batch = img->shape[0], h = img->shape[chw ? 2 : 1], w = img->shape[chw ? 3 : 2];
    sl__rng r = sl__rng_make(it->seed, base->key, d->same ? 0 : base->epoch, it->pos);
    draw dr = h > 0 && w > 0 ? draw_batch(s, &r, h, w) : (draw){.lam = 1.0};
    sl_element *o = sl__element_new(el->n, 0);
    bool ok = o != NULL;
    for (int i = 0; i < el->n && ok; i++) {
        if (i == s->image_index) {
            unsigned char *x = writable(el, i, o);
            ok = x != NULL;
            if (ok && dr.lam < 1.0)
                mix_images(x, batch, img->shape + 1, chw, img->dtype, &dr);
        } else if (i == s->label_index) {
            int64_t shape[2] = {batch, s->num_classes};
            struct sl_tensor *t = sl__element_push(o, SL_FLOAT32, 2, shape,
                                                   (size_t)(batch * s->num_classes) * 4);
            ok = t != NULL;
            if (ok)
                soft_targets(t->data, el->t[i].data, batch, s, dr.lam);
        } else {
            ok = sl_element_add_shared(o, el, i) >= 0;
        }
    }
    sl_element_release(el);
    if (!ok) {
        sl_element_release(o);
        return sl__set_error(SL_ENOMEM, "%s: out of memory", sl_dataset_name(base->ds));
    }
    it->pos++;
    *out = o;
    return 0;
}

static int mixup_start(sl__sync_iter *u, bool resumed)
{
    mixup_iter *it = (mixup_iter *)u;
    it->seed = sl__node_seed(&u->base, ((const mixup_ds *)u->base.ds)->spec.seed);
    (void)resumed;
    return 0;
}

static int64_t mixup_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

/* The labels' leaf becomes float32 [batch, num_classes]. */
static void label_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    const mixup_ds *d = arg;
    sl__leaf_spec out = *spec;
    if (leaf == d->spec.label_index) {
        out.dtype = SL_FLOAT32;
        out.shape[0] = spec->ndim >= 1 ? spec->shape[0] : -1;
        out.shape[1] = d->spec.num_classes;
        out.ndim = 2;
    }
    sl__stext_leaf(t, &out);
}

static sl_structure *mixup_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, label_leaf, (void *)ds) : NULL;
}

static uint64_t mixup_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const mixup_ds *d = (const mixup_ds *)ds;
    const sl_mixup_spec *s = &d->spec;
    double v[5] = {s->mixup_alpha, s->cutmix_alpha, s->prob, s->switch_prob,
                   s->label_smoothing};
    h = sl__hash_bytes(h, v, sizeof v);
    int64_t w[6] = {s->num_classes, s->image_index, s->label_index, s->layout, s->seed, d->same};
    return sl__hash_bytes(h, w, sizeof w);
}

static const sl__field mixup_state[] = {SL__FIELD_I64(mixup_iter, pos, 0, INT64_MAX)};

static const sl__sync_def mixup_def = {
    .node = {.kind = "mixup_cutmix", .make_iter = sl__sync_make, .fingerprint = mixup_fingerprint,
             .cardinality = mixup_cardinality, .structure = mixup_structure},
    .iter = {SL__SYNC_ITER(mixup_next)},
    .iter_size = sizeof(mixup_iter),
    SL__SYNC_STATE(mixup_state),
    .start = mixup_start,
};

/* sl_mixup_spec has had one layout; its versioning is versioned.h's. */
#define SPEC_V1_SIZE sizeof(sl_mixup_spec)

SL_API int sl_mixup_spec_init(sl_mixup_spec *spec, size_t struct_size, int64_t num_classes)
{
    sl_mixup_spec d = {
        .struct_size = struct_size, .num_classes = num_classes, .mixup_alpha = 0.2,
        .cutmix_alpha = 1.0, .prob = 1.0, .switch_prob = 0.5, .image_index = 0,
        .label_index = 1, .layout = SL_LAYOUT_HWC, .seed = -1,
    };
    return sl__struct_init(spec, struct_size, &d, sizeof d, SPEC_V1_SIZE, "sl_mixup_spec_init");
}

static const char *invalid(const sl_mixup_spec *s)
{
    if (s->num_classes < 1 || s->num_classes > (1 << 24))
        return "num_classes must be in [1, 2^24]";
    if (!(s->mixup_alpha >= 0) || !(s->cutmix_alpha >= 0) || s->mixup_alpha > 1e6 ||
        s->cutmix_alpha > 1e6)
        return "the alphas must be >= 0";
    if (!(s->prob >= 0 && s->prob <= 1) || !(s->switch_prob >= 0 && s->switch_prob <= 1))
        return "prob and switch_prob must be in [0, 1]";
    if (!(s->label_smoothing >= 0 && s->label_smoothing < 1))
        return "label_smoothing must be in [0, 1)";
    if (s->image_index < 0 || s->label_index < 0 || s->image_index == s->label_index ||
        s->image_index >= SL__MAX_INPUTS || s->label_index >= SL__MAX_INPUTS)
        return "image_index and label_index must be two tensors of the batch";
    if (s->layout != SL_LAYOUT_HWC && s->layout != SL_LAYOUT_CHW)
        return "layout must be SL_LAYOUT_HWC or SL_LAYOUT_CHW";
    if (s->seed < -1)
        return "seed must be >= 0, or -1";
    if (s->flags & ~SL_SAME_EACH_EPOCH)
        return "unknown flags";
    return NULL;
}

SL_API sl_dataset *sl_mixup_cutmix(sl_dataset *in, const sl_mixup_spec *spec)
{
    mixup_ds *d = (mixup_ds *)sl__dataset_new(&mixup_def.node, sizeof *d, in);
    if (!d)
        return NULL;
    if (sl__struct_load(spec, &d->spec, NULL, sizeof d->spec, SPEC_V1_SIZE, "mixup_cutmix") < 0) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    const char *why = invalid(&d->spec);
    if (why)
        return sl__dataset_fail(&d->base, SL_EINVAL, "mixup_cutmix: %s", why);
    d->same = d->spec.flags & SL_SAME_EACH_EPOCH;
    return &d->base;
}
