/*
 * Listing speed of sl_image_folder: the time to scan a folder of classes
 * (construction only; no file is read).
 *
 *   bench_scan [DIR]
 *
 * Without DIR it creates 1000 classes x 200 empty .jpg files under /tmp (or
 * $TMPDIR), scans that and removes it afterwards. Prints the median of 3
 * scans as one JSON line on stdout:
 *   {"bench":"scan","files":N,"seconds":S,"files_per_s":R}
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sluice.h"

#define CLASSES 1000
#define PER_CLASS 200
#define RUNS 3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void class_path(char *buf, size_t n, const char *root, int c)
{
    snprintf(buf, n, "%s/n%08d", root, c);
}

static void file_path(char *buf, size_t n, const char *root, int c, int f)
{
    snprintf(buf, n, "%s/n%08d/n%08d_%06d.jpg", root, c, c, f);
}

static int create_tree(const char *root)
{
    char p[512];
    for (int c = 0; c < CLASSES; c++) {
        class_path(p, sizeof p, root, c);
        if (mkdir(p, 0755) < 0) {
            perror(p);
            return -1;
        }
        for (int f = 0; f < PER_CLASS; f++) {
            file_path(p, sizeof p, root, c, f);
            int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0) {
                perror(p);
                return -1;
            }
            close(fd);
        }
    }
    return 0;
}

/* Removes exactly what create_tree made (as far as it got). */
static void remove_tree(const char *root)
{
    char p[512];
    for (int c = 0; c < CLASSES; c++) {
        for (int f = 0; f < PER_CLASS; f++) {
            file_path(p, sizeof p, root, c, f);
            unlink(p);
        }
        class_path(p, sizeof p, root, c);
        rmdir(p);
    }
    rmdir(root);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [DIR]\n", argv[0]);
        return 2;
    }
    char made[512] = "";
    const char *root = argc == 2 ? argv[1] : NULL;
    if (!root) {
        const char *tmp = getenv("TMPDIR");
        snprintf(made, sizeof made, "%s/sluice-scan-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(made)) {
            perror(made);
            return 1;
        }
        root = made;
        fprintf(stderr, "creating %d files under %s\n", CLASSES * PER_CLASS, root);
        if (create_tree(root) < 0) {
            remove_tree(root);
            return 1;
        }
    }
    double t[RUNS];
    int64_t files = 0;
    int rc = 0;
    for (int r = 0; r < RUNS && rc == 0; r++) {
        double t0 = now_s();
        sl_dataset *ds = sl_image_folder(root, NULL, 0);
        t[r] = now_s() - t0;
        if (!ds) {
            fprintf(stderr, "sl_image_folder: %s\n", sl_last_error());
            rc = 1;
            break;
        }
        files = sl_dataset_cardinality(ds);
        sl_dataset_release(ds);
        fprintf(stderr, "run %d: %.3f s\n", r + 1, t[r]);
    }
    if (made[0])
        remove_tree(made);
    if (rc)
        return rc;
    qsort(t, RUNS, sizeof *t, by_value);
    double med = t[RUNS / 2];
    printf("{\"bench\":\"scan\",\"files\":%lld,\"seconds\":%.4f,\"files_per_s\":%.0f}\n",
           (long long)files, med, med > 0 ? (double)files / med : 0.0);
    return 0;
}
