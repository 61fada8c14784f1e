/*
 * The instruction-set tier of image/ (cpu.c): one choice for every file
 * with kernels in tiers (the resampler's, the augmentations'). A tier is
 * a table of kernels per family, each computing the integers of the
 * portable ones; the families look up their table for the tier this
 * returns, so that one switch (SLUICE_NO_AVX512, SLUICE_NO_AVX2, a test's
 * sl__image_tier_force) moves them all.
 */
#ifndef SL_IMAGE_CPU_H
#define SL_IMAGE_CPU_H

#include <stdbool.h>

/* The x86 tiers a build has: SSE2 where the compiler targets it; AVX2 and
 * AVX-512 on x86-64 with gcc or clang, which compile them with function
 * target attributes and check the CPU at run time. -DSL__IMAGE_PORTABLE
 * builds the portable kernels alone, as off x86. */
#if defined(__SSE2__) && !defined(SL__IMAGE_PORTABLE)
#define SL__IMAGE_HAVE_SSE2 1
#if defined(__GNUC__) && defined(__x86_64__)
#define SL__IMAGE_HAVE_AVX 1
#endif
#endif

/* The tiers, narrowest first. AVX-512 is F and BW; what its CPUs differ
 * in beyond that is a feature (below) that a kernel checks. */
enum { SL__IMAGE_C, SL__IMAGE_SSE2, SL__IMAGE_AVX2, SL__IMAGE_AVX512, SL__IMAGE_TIERS };

/* AVX-512 extensions some of its CPUs lack (Skylake-X: both). */
enum {
    SL__IMAGE_VNNI = 1 << 0, /* VL and VNNI: the resampler's AVX-512 passes */
    SL__IMAGE_VBMI = 1 << 1, /* VBMI's byte permutes */
};

/* The process's tier: the widest this build and this CPU have, less what
 * SLUICE_NO_AVX512 / SLUICE_NO_AVX2 in the environment turn off, unless
 * a test forced another (testing.h). The CPU is read once; later calls
 * are a load. Any thread. */
int sl__image_tier(void);
/* Whether this build and this CPU have tier `level` (the environment
 * aside). Any thread. */
bool sl__image_tier_usable(int level);
/* Whether the CPU has all of `features` (SL__IMAGE_VNNI | ...): false
 * where it lacks the AVX-512 tier. Any thread. */
bool sl__image_cpu_has(int features);
/* "c", "sse2", "avx2" or "avx512", for messages. */
const char *sl__image_tier_name(int level);

#endif
