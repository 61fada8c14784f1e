/*
 * The instruction-set tier of image/ (cpu.h). The choice is libjpeg-turbo's
 * jsimd one: the CPU read once per process, then calls through the tables
 * of kernels a tier names. No ifuncs or target_clones: their resolvers run
 * before the sanitizers' runtimes are up.
 */
#include <pthread.h>
#include <stdatomic.h>
#include "../core/log.h"
#include "cpu.h"
#include "testing.h"

/* Written once (detect), read-only after; `chosen` also by the test hook,
 * and -1 until detect has run, so that a call per row costs a load. */
static bool usable[SL__IMAGE_TIERS];
static int features;
static int detected;
static atomic_int chosen = -1;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
    usable[SL__IMAGE_C] = true;
#ifdef SL__IMAGE_HAVE_SSE2
    usable[SL__IMAGE_SSE2] = true;
#endif
#ifdef SL__IMAGE_HAVE_AVX
    usable[SL__IMAGE_AVX2] = __builtin_cpu_supports("avx2");
    usable[SL__IMAGE_AVX512] = usable[SL__IMAGE_AVX2] && __builtin_cpu_supports("avx512f") &&
                               __builtin_cpu_supports("avx512bw");
    if (usable[SL__IMAGE_AVX512]) {
        if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
            features |= SL__IMAGE_VNNI;
        if (__builtin_cpu_supports("avx512vbmi"))
            features |= SL__IMAGE_VBMI;
    }
#endif
    int top = SL__IMAGE_AVX512;
    if (sl__env_on("SLUICE_NO_AVX2"))
        top = SL__IMAGE_SSE2;
    else if (sl__env_on("SLUICE_NO_AVX512"))
        top = SL__IMAGE_AVX2;
    while (!usable[top])
        top--;
    detected = top;
    atomic_store_explicit(&chosen, top, memory_order_relaxed);
}

int sl__image_tier(void)
{
    int t = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (t < 0) {
        pthread_once(&detect_once, detect);
        t = atomic_load_explicit(&chosen, memory_order_relaxed);
    }
    return t;
}

bool sl__image_tier_usable(int level)
{
    pthread_once(&detect_once, detect);
    return level >= 0 && level < SL__IMAGE_TIERS && usable[level];
}

bool sl__image_cpu_has(int f)
{
    pthread_once(&detect_once, detect);
    return (features & f) == f;
}

const char *sl__image_tier_name(int level)
{
    static const char *const names[SL__IMAGE_TIERS] = {"c", "sse2", "avx2", "avx512"};
    return level >= 0 && level < SL__IMAGE_TIERS ? names[level] : "?";
}

bool sl__image_tier_force(int level)
{
    pthread_once(&detect_once, detect);
    if (level < 0)
        level = detected;
    else if (!sl__image_tier_usable(level))
        return false;
    atomic_store_explicit(&chosen, level, memory_order_relaxed);
    return true;
}
