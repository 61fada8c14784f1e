/* What map_image (one image per element) and map_image_batch (the node
 * fused with batch) share: the dataset and one image's decode. */
#ifndef SL_VISION_MAP_IMAGE_H
#define SL_VISION_MAP_IMAGE_H

#include "../graph/node.h"
#include "../image/augment.h"
#include "../image/image.h"

typedef struct map_image_ds {
    sl_dataset base;
    sl_image_spec spec; /* loaded and checked: this library's layout */
    sl_image_spec mask; /* spec.with_mask: the mask's own (raw) spec */
    int nviews;          /* sl_map_image_views: its views (spec is views[0]) */
    sl_image_spec *views;
    int parallelism;
    int64_t batch;  /* fused with batch: its size, else 0 */
    unsigned flags; /* batch flags */
} map_image_ds;

/* The output image's shape (3 dimensions, by layout) and size in bytes. */
int sl__image_shape(const sl_image_spec *spec, int64_t *shape);
size_t sl__image_bytes(const sl_image_spec *spec);

/* Decodes tensor spec->image_index of `in` (encoded bytes) through the
 * calling thread's decoder into dst, sl__image_bytes(spec) bytes, drawing
 * the crop, flip and augmentations from rng. An error names the element's
 * file where it has one. The one-view case of sl__image_decode_views. */
int sl__image_decode(const sl_image_spec *spec, sl__rng *rng, const sl_element *in, void *dst);
/* The same for several views of one image (specs[i] into dst[i], nviews
 * at most SL__MAX_VIEWS): each view's crop and augmentations drawn in
 * turn, the union of their windows decoded once at the DCT scale the most
 * demanding view allows (as YCbCr planes or RGB, as the first view's
 * decode fields choose), each view resampled from it. mask (or NULL):
 * tensor mask->image_index decoded by that raw spec into mask_dst, over
 * the first view's window and flip. */
#define SL__MAX_VIEWS 64
int sl__image_decode_views(const sl_image_spec *specs, int nviews, sl__rng *rng,
                           const sl_element *in, void *const *dst, const sl_image_spec *mask,
                           void *mask_dst);

/* One output image: its spec, where it goes, and what was drawn for it
 * (map_video draws one per clip and renders every frame of it). */
typedef struct sl__image_view {
    const sl_image_spec *spec;
    void *dst;
    sl__window win; /* in source pixels */
    bool flip, aug;
    sl__aug plan;
} sl__image_view;

/* The crop, flip and augmentations of an image of width x height (gray:
 * one channel) drawn from rng, to be rendered into dst. */
void sl__image_view_draw(const sl_image_spec *spec, sl__rng *rng, int width, int height,
                         bool gray, void *dst, sl__image_view *v);
/* Renders it through the calling thread's resizer and augmenter: from
 * YCbCr planes (each plane's window the view's part), or from window win
 * of the RGB pixels d. 0 or a code with the message set. */
int sl__image_view_render(sl__image_view *v, const sl__ycc *planes, const sl__decoded *d,
                          const sl__window *win);
/* SL_DECODE_RAW: src's window (the view's part) sampled by nearest
 * neighbour into the view's output. */
int sl__image_view_raw(sl__image_view *v, const sl__raw *src);

/* A small element for the input's tensors besides the encoded bytes
 * (label, path...), so the bytes can be released right after decoding,
 * with extra_slots more; sl__image_add_rest shares the input's tensors
 * [from, to) into it, skipping the image's (spec->image_index). */
sl_element *sl__image_rest(const sl_element *in, int extra_slots);
int sl__image_add_rest(sl_element *el, const sl_element *in, const sl_image_spec *spec, int from,
                       int to);

/* map_image's cardinality and fingerprint, which the fused node shares
 * (a batch's cardinality when batch > 0). */
int64_t sl__map_image_cardinality(const sl_dataset *ds);
sl_structure *sl__map_image_structure(const sl_dataset *ds);
uint64_t sl__map_image_fingerprint(const sl_dataset *ds, uint64_t h);

/* The spec (map_image_spec.c). Load: the caller's layout as this
 * library's; check: every field, as the op is built; check_input: the
 * input's structure, where known, has encoded bytes where the spec looks;
 * mask_spec: the raw spec a mask is decoded by; hash: the spec's part of
 * the fingerprint. 0, or an error with the message set. */
int sl__image_spec_load(const sl_image_spec *in, sl_image_spec *out);
int sl__image_spec_check(const sl_image_spec *s);
int sl__image_check_input(const sl_image_spec *s, const sl_dataset *in);
void sl__image_mask_spec(const sl_image_spec *s, sl_image_spec *mask);
uint64_t sl__image_spec_hash(uint64_t h, const sl_image_spec *s);

/* The fused node (map_image_batch.c): datasets that are map_image_ds with
 * batch > 0. */
extern const sl__node_ops sl__map_image_batch_ops;

#endif
