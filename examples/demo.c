/*
 * demo: a small training-input pipeline on built-in synthetic data, with a
 * printed summary. This is what ./run.sh runs; a good first file to read.
 *
 * The data: 10,000 samples, each 64 float32 features and an int64 label in
 * 0..9, generated deterministically. One sample in a thousand is "corrupt"
 * (a NaN feature): the augment step rejects it and the error policy skips
 * it, the way a real pipeline skips an unreadable file instead of stopping.
 *
 * The pipeline:
 *   from_tensors(features, labels)  one element per sample, sharing memory
 *   shuffle(SL_SHUFFLE_ALL)         a fresh permutation every epoch
 *   repeat(epochs)                  after shuffle, so each epoch reshuffles
 *   map("augment"), in parallel     random scale and noise; rejects NaNs
 *   filter("holdout")               drops class 9, kept back for evaluation
 *   batch(256, drop remainder)      [256, 64] float32 and [256] int64
 *   prefetch(AUTOTUNE)              runs ahead while the consumer works
 *
 * The output is deterministic: the same --seed prints the same checksum,
 * whatever --threads says (parallel maps keep their input order, and each
 * element's random numbers depend on its position, not on the thread).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sluice.h"

#define SAMPLES 10000
#define FEATURES 64
#define CLASSES 10
#define HOLDOUT_CLASS 9
#define CORRUPT_EVERY 1000 /* sample i is corrupt when i % 1000 == 500 */
#define BATCH 256
#define SHOW_LABELS 8

typedef struct args {
    int threads; /* 0: the default runtime, one thread per CPU */
    int64_t seed;
    int epochs;
} args;

/* ---- built-in data ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float unit_float(uint64_t *state) /* uniform in [-1, 1) */
{
    return (float)((double)(splitmix64(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* One element holding all samples: features [SAMPLES, FEATURES] and labels
 * [SAMPLES]. Each class has a centre; a sample is its centre plus noise.
 * The data never changes; --seed changes only order and augmentation. */
static sl_element *make_samples(void)
{
    sl_element *all = sl_element_create(2);
    int64_t fshape[2] = {SAMPLES, FEATURES}, lshape[1] = {SAMPLES};
    float *x = all ? sl_element_add_tensor(all, SL_FLOAT32, 2, fshape) : NULL;
    int64_t *y = x ? sl_element_add_tensor(all, SL_INT64, 1, lshape) : NULL;
    if (!y) {
        sl_element_release(all);
        return NULL;
    }
    uint64_t rng = 2024;
    float centre[CLASSES][FEATURES];
    for (int c = 0; c < CLASSES; c++)
        for (int j = 0; j < FEATURES; j++)
            centre[c][j] = 2.0f * unit_float(&rng);
    for (int64_t i = 0; i < SAMPLES; i++) {
        y[i] = (int64_t)(splitmix64(&rng) % CLASSES);
        for (int j = 0; j < FEATURES; j++)
            x[i * FEATURES + j] = centre[y[i]][j] + 0.5f * unit_float(&rng);
        if (i % CORRUPT_EVERY == CORRUPT_EVERY / 2)
            x[i * FEATURES] = NAN;
    }
    return all;
}

/* ---- pipeline callbacks (they run on worker threads) ---- */

/* Scales the features by a random factor in [0.9, 1.1) and adds noise.
 * The random numbers come from sl_map_ctx_uniform, which is keyed by the
 * element's position: that is what keeps the output deterministic. */
static int augment(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    const float *x = sl_tensor_data(sl_element_tensor(in, 0));
    for (int j = 0; j < FEATURES; j++)
        if (isnan(x[j])) {
            char msg[64];
            snprintf(msg, sizeof msg, "feature %d is NaN", j);
            return sl_map_ctx_error(ctx, SL_ECORRUPT, msg);
        }

    sl_element *el = sl_element_create(2);
    int64_t shape[1] = {FEATURES};
    float *y = el ? sl_element_add_tensor(el, SL_FLOAT32, 1, shape) : NULL;
    /* the label passes through without a copy */
    if (!y || sl_element_add_shared(el, in, 1) < 0) {
        sl_element_release(el);
        return sl_map_ctx_error(ctx, SL_ENOMEM, "out of memory");
    }
    float scale = (float)(0.9 + 0.2 * sl_map_ctx_uniform(ctx));
    for (int j = 0; j < FEATURES; j++)
        y[j] = x[j] * scale + (float)(0.1 * (sl_map_ctx_uniform(ctx) - 0.5));
    *out = el;
    return 0;
}

static int not_holdout(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx;
    (void)user;
    return sl_tensor_int64(sl_element_tensor(el, 1)) != HOLDOUT_CLASS;
}

/* On failure returns NULL with the reason in sl_last_error(). */
static sl_dataset *build_pipeline(int epochs)
{
    sl_element *samples = make_samples();
    if (!samples)
        return NULL;
    /* Each builder consumes its input and passes a NULL along, so one check
     * at the end covers the whole chain. Shuffle's seed -1 derives it from
     * the iterator's SL_OPT_SEED, so one --seed drives order and noise. */
    sl_dataset *ds = sl_from_tensor_slices(samples);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, -1, 0);
    ds = sl_repeat(ds, epochs);
    ds = sl_map(ds, "augment", augment, NULL, SL_AUTOTUNE, 0);
    ds = sl_filter(ds, "holdout", not_holdout, NULL);
    ds = sl_batch(ds, BATCH, SL_DROP_REMAINDER);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    return ds;
}

static sl_options *make_options(const args *a)
{
    sl_options *opts = sl_options_create();
    if (!opts ||
        sl_options_set(opts, SL_OPT_THREADS, a->threads) < 0 ||
        sl_options_set(opts, SL_OPT_SEED, a->seed) < 0 ||
        /* skip bad samples, but fail if more than 1% of them are bad */
        sl_options_set(opts, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP_RATE) < 0 ||
        sl_options_set(opts, SL_OPT_ERROR_MAX_PPM, 10000) < 0 ||
        /* log the first skip only, to show what it looks like */
        sl_options_set(opts, SL_OPT_ERROR_LOG_LIMIT, 1) < 0) {
        sl_options_free(opts);
        return NULL;
    }
    return opts;
}

/* ---- consuming ---- */

typedef struct summary {
    int64_t batches, elements;
    uint64_t checksum;
    int64_t first_labels[SHOW_LABELS];
    int nfirst;
    double seconds;
} summary;

/* FNV-1a: any change in any output byte or in the order changes it. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void consume(summary *s, const sl_element *batch)
{
    const sl_tensor *x = sl_element_tensor(batch, 0), *y = sl_element_tensor(batch, 1);
    if (s->batches == 0) {
        const int64_t *labels = sl_tensor_data(y);
        for (s->nfirst = 0; s->nfirst < SHOW_LABELS && s->nfirst < sl_tensor_count(y); s->nfirst++)
            s->first_labels[s->nfirst] = labels[s->nfirst];
    }
    s->checksum = fnv1a(s->checksum, sl_tensor_data(x), sl_tensor_nbytes(x));
    s->checksum = fnv1a(s->checksum, sl_tensor_data(y), sl_tensor_nbytes(y));
    s->batches++;
    s->elements += sl_tensor_count(y);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs all epochs through one iterator. 0, or 1 after printing why not. */
static int run(sl_dataset *ds, const args *a)
{
    sl_options *opts = make_options(a);
    if (!opts) {
        fprintf(stderr, "demo: options: %s\n", sl_last_error());
        return 1;
    }
    summary s = {.checksum = 0xcbf29ce484222325ull};
    double t0 = now_s();
    sl_iterator *it = sl_iterator_create(ds, opts);
    sl_options_free(opts); /* the iterator copied what it needs */
    if (!it) {
        fprintf(stderr, "demo: cannot start the pipeline: %s\n", sl_last_error());
        return 1;
    }
    sl_element *batch;
    int rc;
    while ((rc = sl_next(it, &batch)) == 0) {
        consume(&s, batch);
        sl_element_release(batch);
    }
    s.seconds = now_s() - t0;
    if (rc < 0) {
        fprintf(stderr, "demo: pipeline failed: %s\n", sl_iterator_errmsg(it));
        sl_iterator_free(it);
        return 1;
    }

    int threads = a->threads ? a->threads : sl_cpu_count();
    printf("sluice %s demo: %d samples x %d float32 features, %d classes\n",
           sl_version_string(), SAMPLES, FEATURES, CLASSES);
    printf("  threads          %d%s\n", threads, a->threads ? "" : " (one per CPU)");
    printf("  seed             %lld\n", (long long)a->seed);
    printf("  epochs           %d\n", a->epochs);
    printf("  batches          %lld of %d (the last partial batch is dropped)\n",
           (long long)s.batches, BATCH);
    printf("  elements         %lld (class %d held out)\n", (long long)s.elements,
           HOLDOUT_CLASS);
    printf("  skipped errors   %lld (corrupt samples)\n",
           (long long)sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED));
    printf("  wall time        %.3f s\n", s.seconds);
    printf("  throughput       %.0f elements/s\n", (double)s.elements / s.seconds);
    printf("  peak buffered    %.1f KiB\n",
           (double)sl_iterator_stat(it, SL_STAT_PEAK_BUFFERED_BYTES) / 1024);
    printf("  checksum         %016llx (same seed, same checksum)\n",
           (unsigned long long)s.checksum);
    printf("  first labels    ");
    for (int i = 0; i < s.nfirst; i++)
        printf(" %lld", (long long)s.first_labels[i]);
    printf("\n");
    sl_iterator_free(it);
    return 0;
}

/* ---- command line ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: example_demo [--threads N] [--seed S] [--epochs E]\n"
            "  --threads N  worker threads (default 0: one per CPU)\n"
            "  --seed S     seed for shuffling and augmentation, >= 0 (default 42)\n"
            "  --epochs E   passes over the data, >= 1 (default 3)\n");
}

static int parse_int(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "demo: %s needs an integer in [%lld, %lld]\n", flag, (long long)lo,
                (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(argv[i], "--threads")) {
            if (parse_int("--threads", v, 0, 1024, &x) < 0)
                return -1;
            a->threads = (int)x;
        } else if (!strcmp(argv[i], "--seed")) {
            if (parse_int("--seed", v, 0, INT64_MAX, &a->seed) < 0)
                return -1;
        } else if (!strcmp(argv[i], "--epochs")) {
            if (parse_int("--epochs", v, 1, 1000, &x) < 0)
                return -1;
            a->epochs = (int)x;
        } else {
            usage(stderr);
            return -1;
        }
        i++;
    }
    return 0;
}

int main(int argc, char **argv)
{
    args a = {.threads = 0, .seed = 42, .epochs = 3};
    if (parse_args(argc, argv, &a) < 0)
        return 2;
    sl_dataset *ds = build_pipeline(a.epochs);
    if (!ds) {
        fprintf(stderr, "demo: cannot build the pipeline: %s\n", sl_last_error());
        return 1;
    }
    int rc = run(ds, &a);
    sl_dataset_release(ds);
    return rc;
}
