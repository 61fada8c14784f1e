/*
 * What resuming costs: the time from sl_iterator_restore to the first batch
 * of a pass stopped mid-epoch, against sl_iterator_create to the first
 * batch of a fresh pass (normal start-up). Rounds alternate the two;
 * medians are reported.
 *
 *   bench_checkpoint DIR [--rounds R] [--batch B] [--list-entries N] [--threads T]
 *
 * folder: DIR as an image folder, folder -> shuffle(ALL) -> map_image
 *   (train, 224) -> batch(B) -> prefetch, stopped after half its batches.
 * list: a file list of N entries (default 1,000,000), file_list (which
 *   reads the files) -> shuffle(ALL) -> batch(B) -> prefetch, stopped at
 *   N/2. Reaching that position means reading half a million files, so
 *   every entry names one small file and nothing is decoded: this case
 *   measures what the list's size costs a restore (the listing's seek and
 *   shuffle(ALL)'s replay of its swaps), the folder case what decoding
 *   the first batch again costs.
 *
 * One JSON object per case on stdout: fresh and restored milliseconds to
 * the first batch (medians), the difference, the state's size.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sluice.h"

#define MAX_ROUNDS 31

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_checkpoint: %s: %s\n", what, sl_last_error());
    exit(1);
}

static int threads = 0, batch = 256;

static sl_options *options(void)
{
    sl_options *o = sl_options_create();
    if (!o || (threads && sl_options_set(o, SL_OPT_THREADS, threads) < 0) ||
        sl_options_set(o, SL_OPT_SEED, 1) < 0 || sl_options_set(o, SL_OPT_EPOCH, 0) < 0)
        die("options");
    return o;
}

static sl_dataset *folder_pipeline(const char *dir)
{
    sl_image_spec spec;
    if (SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, 224) < 0)
        die("spec");
    sl_dataset *ds = sl_shuffle(sl_image_folder(dir, NULL, 0), SL_SHUFFLE_ALL, -1, 0);
    ds = sl_prefetch(sl_batch(sl_map_image(ds, &spec, SL_AUTOTUNE), batch, 0), SL_AUTOTUNE);
    if (!ds)
        die(dir);
    return ds;
}

static const char *list_file;

static sl_dataset *list_pipeline(const char *dir)
{
    (void)dir;
    sl_dataset *ds = sl_shuffle(sl_file_list(list_file, NULL, 0), SL_SHUFFLE_ALL, -1, 0);
    ds = sl_prefetch(sl_batch(ds, batch, 0), SL_AUTOTUNE);
    if (!ds)
        die(list_file);
    return ds;
}

/* Milliseconds from making the iterator (fresh, or from state) to its
 * first element. */
static double first_batch(sl_dataset *ds, const void *state, size_t len)
{
    sl_options *o = options();
    double t0 = now_ms();
    sl_iterator *it = state ? sl_iterator_restore(ds, state, len, o) : sl_iterator_create(ds, o);
    if (!it)
        die(state ? "restore" : "create");
    sl_element *el;
    if (sl_next(it, &el) != 0)
        die("first batch");
    double ms = now_ms() - t0;
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    return ms;
}

/* The state after `elements` elements of tensor 0's first dimension. */
static void *state_after(sl_dataset *ds, int64_t images, size_t *len)
{
    sl_options *o = options();
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        die("create");
    int64_t got = 0;
    sl_element *el;
    while (got < images && sl_next(it, &el) == 0) {
        got += sl_tensor_shape(sl_element_tensor(el, 0))[0];
        sl_element_release(el);
    }
    int64_t n = sl_iterator_save(it, NULL, 0);
    void *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (!buf || sl_iterator_save(it, buf, (size_t)n) != n)
        die("save");
    sl_iterator_free(it);
    sl_options_free(o);
    *len = (size_t)n;
    return buf;
}

static void run_case(const char *name, const char *dir, sl_dataset *ds, int64_t entries,
                     int rounds)
{
    size_t len;
    double t0 = now_ms();
    void *state = state_after(ds, entries / 2, &len);
    double reach = now_ms() - t0;
    double fresh[MAX_ROUNDS], restored[MAX_ROUNDS], diff[MAX_ROUNDS];
    first_batch(ds, NULL, 0); /* warm the page cache and the pools */
    for (int r = 0; r < rounds; r++) {
        fresh[r] = first_batch(ds, NULL, 0);
        restored[r] = first_batch(ds, state, len);
        diff[r] = restored[r] - fresh[r];
    }
    double f = median(fresh, rounds), s = median(restored, rounds), d = median(diff, rounds);
    printf("{\"bench\":\"checkpoint\",\"case\":\"%s\",\"dir\":\"%s\",\"entries\":%lld,"
           "\"batch\":%d,\"threads\":%d,\"rounds\":%d,\"state_bytes\":%zu,"
           "\"fresh_first_batch_ms\":%.2f,\"restored_first_batch_ms\":%.2f,"
           "\"restore_extra_ms\":%.2f,\"seconds_to_reach_position\":%.2f}\n",
           name, dir, (long long)entries, batch, threads ? threads : sl_cpu_count(), rounds,
           len, f, s, d, reach / 1e3);
    fflush(stdout);
    free(state);
}

/* The JPEGs under dir, relative to it, sorted. */
static int list_jpegs(const char *root, const char *rel, char ***out, size_t *n, size_t *cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            list_jpegs(root, sub, out, n, cap);
        } else {
            const char *dot = strrchr(e->d_name, '.');
            if (dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"))) {
                if (*n == *cap)
                    *out = realloc(*out, (*cap = *cap ? 2 * *cap : 1024) * sizeof **out);
                (*out)[(*n)++] = strdup(sub);
            }
        }
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int rounds = 5;
    long long entries = 1000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--list-entries") && i + 1 < argc)
            entries = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else
            dir = argv[i];
    }
    if (!dir || rounds < 1 || rounds > MAX_ROUNDS || batch < 1 || entries < 2) {
        fprintf(stderr, "usage: bench_checkpoint DIR [--rounds 1-%d] [--batch B] "
                "[--list-entries N] [--threads T]\n", MAX_ROUNDS);
        return 2;
    }
    sl_dataset *ds = folder_pipeline(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    if (list_jpegs(dir, "", &names, &n, &cap) != 0 || n == 0) {
        fprintf(stderr, "bench_checkpoint: no JPEGs under %s\n", dir);
        return 1;
    }
    run_case("folder", dir, ds, (int64_t)n, rounds);
    sl_dataset_release(ds);

    char tmpl[] = "/tmp/sluice-bench-list-XXXXXX", small[64];
    int fd = mkstemp(tmpl);
    snprintf(small, sizeof small, "%s.bin", tmpl);
    FILE *f = fopen(small, "wb"), *l = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || !l || fwrite(tmpl, 1, sizeof tmpl, f) != sizeof tmpl || fclose(f) != 0) {
        perror("bench_checkpoint: list file");
        return 1;
    }
    for (long long i = 0; i < entries; i++)
        fprintf(l, "%s %lld\n", small, i % 1000);
    fclose(l);
    list_file = tmpl;
    ds = list_pipeline(dir);
    run_case("list", dir, ds, entries, rounds);
    sl_dataset_release(ds);
    unlink(tmpl);
    unlink(small);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return 0;
}
