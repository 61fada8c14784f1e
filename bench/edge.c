/*
 * The edge profile against the default profile held to one thread, on an
 * image folder: train preset (random-resized crop, flip), batch 32, a
 * shuffle of the whole folder, prefetch(AUTOTUNE):
 *
 *   bench_edge DIR [--size 112] [--batch 32] [--epochs 3] [--rounds 3]
 *
 * Each run is a child process of its own, so peak RSS (VmHWM) is the run's;
 * the parent samples the child's thread count (/proc/PID/status) every 5 ms
 * while it runs. The two configurations alternate, rounds times; one JSON
 * line per run, then one with the medians and the ratio of images/s.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "sluice.h"

#define MAX_ROUNDS 16

typedef struct result {
    double images_per_s;
    long peak_rss_kib;
    int max_threads;
    long images;
} result;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long status_field(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) {
            v = atol(line + n);
            break;
        }
    fclose(f);
    return v;
}

/* The child: runs the pipeline, writes its result to fd. */
static int child(const char *dir, int edge, int size, int batch, int epochs, int fd)
{
    sl_image_spec spec;
    sl_image_spec_init(&spec, sizeof spec, SL_CROP_RANDOM_RESIZED, size);
    sl_dataset *ds = sl_prefetch(
        sl_batch(sl_map_image(sl_shuffle(sl_image_folder(dir, NULL, 0), SL_SHUFFLE_ALL, 1, 0),
                              &spec, SL_AUTOTUNE),
                 batch, 0),
        SL_AUTOTUNE);
    sl_options *o = sl_options_create();
    if (!ds || !o) {
        fprintf(stderr, "bench_edge: %s\n", sl_last_error());
        return 1;
    }
    if (edge)
        sl_options_set(o, SL_OPT_PROFILE, SL_PROFILE_EDGE);
    else
        sl_options_set(o, SL_OPT_THREADS, 1);
    result r = {0};
    double t0 = now_s();
    for (int e = 0; e < epochs; e++) {
        sl_iterator *it = sl_iterator_create(ds, o);
        if (!it) {
            fprintf(stderr, "bench_edge: %s\n", sl_last_error());
            return 1;
        }
        sl_element *el;
        int rc;
        while ((rc = sl_next(it, &el)) == 0) {
            r.images += (long)sl_tensor_shape(sl_element_tensor(el, 0))[0];
            sl_element_release(el);
        }
        if (rc != SL_EOF) {
            fprintf(stderr, "bench_edge: %s\n", sl_iterator_errmsg(it));
            return 1;
        }
        sl_iterator_free(it);
    }
    r.images_per_s = (double)r.images / (now_s() - t0);
    r.peak_rss_kib = status_field("/proc/self/status", "VmHWM:");
    sl_options_free(o);
    sl_dataset_release(ds);
    return write(fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
}

static int run(const char *dir, int edge, int size, int batch, int epochs, result *out)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(p[0]);
        _exit(child(dir, edge, size, batch, epochs, p[1]));
    }
    close(p[1]);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int max_threads = 0, status;
    struct timespec tick = {0, 5000000};
    while (waitpid(pid, &status, WNOHANG) == 0) {
        long t = status_field(path, "Threads:");
        if (t > max_threads)
            max_threads = (int)t;
        nanosleep(&tick, NULL);
    }
    ssize_t n = read(p[0], out, sizeof *out);
    close(p[0]);
    if (n != (ssize_t)sizeof *out || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
    out->max_threads = max_threads;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_edge DIR [--size N] [--batch N] [--epochs N] "
                        "[--rounds N]\n");
        return 2;
    }
    const char *dir = argv[1];
    int size = 112, batch = 32, epochs = 3, rounds = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--size"))
            size = v;
        else if (!strcmp(argv[i], "--batch"))
            batch = v;
        else if (!strcmp(argv[i], "--epochs"))
            epochs = v;
        else if (!strcmp(argv[i], "--rounds"))
            rounds = v < MAX_ROUNDS ? v : MAX_ROUNDS;
        else {
            fprintf(stderr, "bench_edge: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    const char *names[2] = {"default_1_thread", "edge"};
    double ips[2][MAX_ROUNDS], rss[2][MAX_ROUNDS], thr[2][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) {
            result res;
            if (run(dir, k, size, batch, epochs, &res) < 0) {
                fprintf(stderr, "bench_edge: the %s run failed\n", names[k]);
                return 1;
            }
            ips[k][r] = res.images_per_s;
            rss[k][r] = (double)res.peak_rss_kib / 1024;
            thr[k][r] = res.max_threads;
            printf("{\"bench\":\"edge\",\"profile\":\"%s\",\"round\":%d,\"images_per_s\":%.1f,"
                   "\"peak_rss_mib\":%.1f,\"max_threads\":%d,\"images\":%ld}\n",
                   names[k], r, res.images_per_s, (double)res.peak_rss_kib / 1024,
                   res.max_threads, res.images);
        }
    double m[2][3];
    for (int k = 0; k < 2; k++) {
        m[k][0] = median(ips[k], rounds);
        m[k][1] = median(rss[k], rounds);
        m[k][2] = median(thr[k], rounds);
    }
    printf("{\"bench\":\"edge\",\"summary\":true,\"size\":%d,\"batch\":%d,\"epochs\":%d,"
           "\"rounds\":%d,\"default_1_thread_images_per_s\":%.1f,\"edge_images_per_s\":%.1f,"
           "\"ratio\":%.3f,\"default_peak_rss_mib\":%.1f,\"edge_peak_rss_mib\":%.1f,"
           "\"default_threads\":%.0f,\"edge_threads\":%.0f}\n",
           size, batch, epochs, rounds, m[0][0], m[1][0], m[1][0] / m[0][0], m[0][1], m[1][1],
           m[0][2], m[1][2]);
    return 0;
}
