/*
 * What shuffle(ALL) costs at scale: memory and time per element over a
 * huge index, and the time to resume deep into an epoch.
 *
 *   bench_global_shuffle [--n N] [--at P] [--seed S]
 *
 * range(N) -> shuffle(ALL): takes P elements (timed: ns per element, the
 * permutation's cost plus range's get and the iterator's), saves the
 * state, restores it into a new iterator and takes one element (timed:
 * the resume), and checks that element against the one the first iterator
 * gives next. Peak RSS (getrusage) is the table a permutation keeps, if
 * any. Defaults: N = 10^9 + 7, P = 10^9.
 *
 * The same number of elements from range(N) alone, in the same process,
 * gives the pipeline's cost without the shuffle; the difference is what
 * the permutation costs per index (ns_per_index).
 *
 * One JSON object on stdout. Only the public API: the same source builds
 * against an older libsluice to compare.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "sluice.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static int64_t take_one(sl_iterator *it)
{
    sl_element *el;
    if (sl_next(it, &el) != 0) {
        fprintf(stderr, "bench_global_shuffle: %s\n", sl_iterator_errmsg(it));
        exit(1);
    }
    int64_t v = *(const int64_t *)sl_tensor_data(sl_element_tensor(el, 0));
    sl_element_release(el);
    return v;
}

int main(int argc, char **argv)
{
    int64_t n = 1000000007, at = 1000000000, seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--at"))
            at = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = atoll(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_global_shuffle [--n N] [--at P] [--seed S]\n");
            return 2;
        }
    }
    if (at >= n || at < 0) {
        fprintf(stderr, "bench_global_shuffle: --at must lie in [0, N)\n");
        return 2;
    }
    sl_dataset *ds = sl_shuffle(sl_range(0, n, 1), SL_SHUFFLE_ALL, seed, 0);
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    double t0 = now_s();
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it) {
        fprintf(stderr, "bench_global_shuffle: %s\n", sl_last_error());
        return 1;
    }
    double t_create = now_s() - t0;
    long rss_created = peak_rss_kb();
    t0 = now_s();
    int64_t sum = 0;
    for (int64_t i = 0; i < at; i++)
        sum += take_one(it);
    double t_take = now_s() - t0;

    int64_t size = sl_iterator_save(it, NULL, 0);
    void *state = malloc((size_t)size);
    if (!state || sl_iterator_save(it, state, (size_t)size) != size) {
        fprintf(stderr, "bench_global_shuffle: save: %s\n", sl_iterator_errmsg(it));
        return 1;
    }
    int64_t want = take_one(it);
    sl_iterator_free(it);

    t0 = now_s();
    sl_iterator *again = sl_iterator_restore(ds, state, (size_t)size, o);
    if (!again) {
        fprintf(stderr, "bench_global_shuffle: restore: %s\n", sl_last_error());
        return 1;
    }
    int64_t got = take_one(again);
    double t_resume = now_s() - t0;
    if (got != want) {
        fprintf(stderr, "bench_global_shuffle: resumed at %lld but got %lld\n", (long long)want,
                (long long)got);
        return 1;
    }
    sl_iterator_free(again);
    /* the same elements without the shuffle */
    sl_dataset *plain = sl_range(0, n, 1);
    sl_iterator *pit = sl_iterator_create(plain, o);
    if (!pit) {
        fprintf(stderr, "bench_global_shuffle: %s\n", sl_last_error());
        return 1;
    }
    t0 = now_s();
    for (int64_t i = 0; i < at; i++)
        sum += take_one(pit);
    double t_plain = now_s() - t0;
    sl_iterator_free(pit);
    sl_dataset_release(plain);
    printf("{\"bench\":\"global_shuffle\",\"library\":\"%s\",\"n\":%lld,\"at\":%lld,"
           "\"create_ms\":%.3f,\"ns_per_element\":%.2f,\"ns_per_element_unshuffled\":%.2f,"
           "\"ns_per_index\":%.2f,\"resume_ms\":%.3f,\"peak_rss_mb_after_create\":%.1f,"
           "\"peak_rss_mb\":%.1f,\"state_bytes\":%lld,\"checksum\":%lld}\n",
           sl_version_string(), (long long)n, (long long)at, t_create * 1e3,
           at ? t_take * 1e9 / (double)at : 0.0, at ? t_plain * 1e9 / (double)at : 0.0,
           at ? (t_take - t_plain) * 1e9 / (double)at : 0.0, t_resume * 1e3,
           rss_created / 1024.0, peak_rss_kb() / 1024.0, (long long)size, (long long)sum);
    free(state);
    sl_options_free(o);
    sl_dataset_release(ds);
    return 0;
}
