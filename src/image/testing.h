/*
 * What only tests use of image/: forcing an instruction-set tier, and the
 * resampler's hooks for running a tier's kernels by hand and checking that
 * tiers agree. The library itself runs the tier chosen once per process
 * (cpu.c); only tests call these.
 */
#ifndef SL_IMAGE_TESTING_H
#define SL_IMAGE_TESTING_H

#include "cpu.h"
#include "image.h"

/* Makes `level` the process's tier (sl__image_tier) for what is chosen
 * from now on: resizers made after, augmentations run after; -1 goes back
 * to the detected one. false, changing nothing, where this build or this
 * CPU lacks it. Not while other threads decode. */
bool sl__image_tier_force(int level);

/* One tier's kernels (resize_kernels.h; opaque here). */
typedef struct sl__resize_kernels sl__resize_kernels;

/* The resampler's kernels of tier `level` (SL__IMAGE_*, cpu.h), or NULL
 * where this build or this CPU lacks it (SLUICE_NO_AVX2 / SLUICE_NO_AVX512
 * and sl__image_tier_force do not apply: they steer only the process's
 * own choice). Any thread. */
const sl__resize_kernels *sl__resize_kernels_for(int level);
/* "c", "sse2", "avx2" or "avx512", for messages. */
const char *sl__resize_kernels_name(const sl__resize_kernels *k);

/* A resizer that runs k's kernels (sl__resizer_new runs the process's
 * choice); free it with sl__resizer_free. NULL: out of memory. */
sl__resizer *sl__resizer_new_with(const sl__resize_kernels *k);

/* Whether k's filter weights for an axis (window pos, len of size pixels
 * to out samples) equal the portable ones: 1, 0, -1 where k builds them
 * with the portable code anyway, or SL_ENOMEM. */
int sl__resize_weights_agree(const sl__resize_kernels *k, double pos, double len, int size,
                             int out);
/* Whether k's YCbCr-to-RGB pass gives the portable integers for every
 * (Y, Cb, Cr) and writes nothing past the row: 1, 0, or SL_ENOMEM. */
int sl__resize_ycc_rgb_agree(const sl__resize_kernels *k);
/* The same for the pass with a colour transform (ycc_rgb_colour), over
 * coefficient sets up to the bounds sl__colour_coef allows. */
int sl__resize_ycc_colour_agree(const sl__resize_kernels *k);

#endif
