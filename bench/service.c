/*
 * The preprocessing service's costs (sl_service, sl_worker_run), each
 * against its local counterpart in the same run, rounds alternating,
 * medians reported.
 *
 *   bench_service images DIR [--rounds R] [--batch B] [--threads T] [--split S]
 *   bench_service transport [--tls tcp|sm] [--mb M] [--batches N] [--rounds R]
 *
 * images: DIR as an image folder -> shuffle(ALL) -> map_image (train,
 *   224, uint8 HWC) -> batch(B). "local" iterates it in this process on T
 *   threads; "service" iterates sl_service of it, one worker process
 *   (this program, --worker) computing on T threads, the second of two
 *   passes (the first connects and warms up). Figures: batches/s
 *   of each, and the trainer's CPU time per batch (this process's
 *   getrusage, the worker not counted): what a received batch costs the
 *   trainer against producing it.
 * transport: a worker sends batches of M MiB made by a map that only
 *   fills them (so the worker is not the limit) over UCX_TLS=tcp or
 *   sm,tcp; received MB/s against memcpy of the same size in this
 *   process (one thread, through 256 MiB of buffers: not cache-resident).
 *
 * One JSON line per round and case, then a summary line.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define SLUICE_EXPERIMENTAL
#include "sluice.h"

#define MAX_ROUNDS 31

static const char *g_dir;
static int g_batch = 64, g_threads = 2, g_mb = 4, g_batches = 200, g_split = 4;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the pipelines (the worker builds the same) -------------------------- */

static sl_dataset *images(void *arg)
{
    (void)arg;
    sl_image_spec spec;
    SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, 224);
    sl_dataset *ds = sl_image_folder(g_dir, NULL, 0);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, 5, 0);
    ds = sl_map_image(ds, &spec, SL_AUTOTUNE);
    return sl_batch(ds, g_batch, SL_DROP_REMAINDER);
}

static int fill(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    sl_element *el = sl_element_create(1);
    int64_t shape[1] = {(int64_t)g_mb << 20};
    void *p = el ? sl_element_add_tensor(el, SL_UINT8, 1, shape) : NULL;
    if (!p) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    memset(p, (int)sl_tensor_int64(sl_element_tensor(in, 0)), (size_t)shape[0]);
    *out = el;
    return 0;
}

static sl_dataset *blobs(void *arg)
{
    (void)arg;
    sl_dataset *ds = sl_range(0, g_batches, 1);
    ds = sl_map(ds, "fill", fill, NULL, 1, 0);
    return sl_batch(ds, 1, 0);
}

/* ---- processes ------------------------------------------------------------ */

static const char *g_self;

static pid_t spawn_worker(const char *mode, int port)
{
    char addr[64], th[16], b[16], mb[16], nb[16];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    snprintf(th, sizeof th, "%d", g_threads);
    snprintf(b, sizeof b, "%d", g_batch);
    snprintf(mb, sizeof mb, "%d", g_mb);
    snprintf(nb, sizeof nb, "%d", g_batches);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl(g_self, g_self, "--worker", mode, addr, g_dir ? g_dir : "-", th, b, mb, nb,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int worker_main(char **argv)
{
    const char *mode = argv[2], *addr = argv[3];
    g_dir = strcmp(argv[4], "-") ? argv[4] : NULL;
    g_threads = atoi(argv[5]);
    g_batch = atoi(argv[6]);
    g_mb = atoi(argv[7]);
    g_batches = atoi(argv[8]);
    sl_worker_spec spec;
    SL_WORKER_SPEC_INIT(&spec);
    spec.address = addr;
    spec.threads = g_threads;
    int rc = sl_worker_run(strcmp(mode, "images") ? blobs : images, NULL, &spec);
    if (rc < 0)
        fprintf(stderr, "worker: %s\n", sl_last_error());
    return rc < 0;
}

/* Iterates ds once (epoch `epoch`): batches, seconds, this process's CPU
 * seconds, bytes. */
static int drain(sl_dataset *ds, int64_t epoch, int64_t *n, double *secs, double *cpu,
                 double *bytes)
{
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, g_threads);
    sl_options_set(o, SL_OPT_EPOCH, epoch);
    double t0 = now_s(), c0 = cpu_s();
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_options_free(o);
    if (!it)
        return fprintf(stderr, "%s\n", sl_last_error()), -1;
    sl_element *el;
    int rc;
    *n = 0;
    *bytes = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        (*n)++;
        for (int i = 0; i < sl_element_size(el); i++)
            *bytes += (double)sl_tensor_nbytes(sl_element_tensor(el, i));
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        fprintf(stderr, "%s\n", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    *secs = now_s() - t0;
    *cpu = cpu_s() - c0;
    return rc == SL_EOF ? 0 : -1;
}

static sl_dataset *service_of(sl_dataset *ds)
{
    sl_service_spec spec;
    SL_SERVICE_SPEC_INIT(&spec);
    spec.address = "127.0.0.1:0";
    spec.split_batches = g_split;
    sl_dataset *s = sl_service(ds, &spec);
    if (!s)
        fprintf(stderr, "service: %s\n", sl_last_error());
    return s;
}

static int bench_images(int rounds)
{
    double lrate[MAX_ROUNDS], srate[MAX_ROUNDS], lcpu[MAX_ROUNDS], scpu[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        int64_t n;
        double secs, cpu, bytes;
        sl_dataset *ds = images(NULL);
        if (!ds || drain(ds, r, &n, &secs, &cpu, &bytes) < 0)
            return 1;
        sl_dataset_release(ds);
        lrate[r] = (double)n / secs;
        lcpu[r] = 1e3 * cpu / (double)n;
        printf("{\"case\":\"local\",\"round\":%d,\"batches\":%lld,\"seconds\":%.3f,"
               "\"batches_per_s\":%.2f,\"trainer_cpu_ms_per_batch\":%.3f}\n",
               r, (long long)n, secs, lrate[r], lcpu[r]);
        sl_dataset *svc = service_of(images(NULL));
        if (!svc)
            return 1;
        pid_t w = spawn_worker("images", sl_service_port(svc));
        /* a first pass connects the worker and warms both up, as the local
         * case's runtime is warm: the second pass is measured */
        if (drain(svc, 100 + r, &n, &secs, &cpu, &bytes) < 0 ||
            drain(svc, r, &n, &secs, &cpu, &bytes) < 0)
            return 1;
        sl_dataset_release(svc);
        waitpid(w, NULL, 0);
        srate[r] = (double)n / secs;
        scpu[r] = 1e3 * cpu / (double)n;
        printf("{\"case\":\"service\",\"round\":%d,\"batches\":%lld,\"seconds\":%.3f,"
               "\"batches_per_s\":%.2f,\"trainer_cpu_ms_per_batch\":%.3f,\"MB\":%.1f}\n",
               r, (long long)n, secs, srate[r], scpu[r], bytes / 1e6);
        fflush(stdout);
    }
    double lr = median(lrate, rounds), sr = median(srate, rounds);
    double lc = median(lcpu, rounds), sc = median(scpu, rounds);
    printf("{\"summary\":\"service_images\",\"batch\":%d,\"threads\":%d,\"split\":%d,\"rounds\":%d,"
           "\"local_batches_per_s\":%.2f,\"service_batches_per_s\":%.2f,"
           "\"service_vs_local\":%.3f,\"local_cpu_ms_per_batch\":%.3f,"
           "\"service_cpu_ms_per_batch\":%.3f,\"trainer_cpu_share\":%.4f}\n",
           g_batch, g_threads, g_split, rounds, lr, sr, sr / lr, lc, sc, sc / lc);
    return 0;
}

/* memcpy of `size` bytes, reps times, through buffers larger than the
 * caches together (256 MiB), as received batches are: fresh memory each. */
static double memcpy_mbps(size_t size, int reps)
{
    int nbuf = (int)((256u << 20) / size) + 2;
    unsigned char **b = malloc((size_t)nbuf * sizeof *b);
    for (int i = 0; i < nbuf; i++) {
        b[i] = malloc(size);
        memset(b[i], i, size);
    }
    double t0 = now_s();
    for (int i = 0; i < reps; i++) {
        memcpy(b[(2 * i + 1) % nbuf], b[(2 * i) % nbuf], size);
        __asm__ volatile("" ::"r"(b) : "memory");
    }
    double secs = now_s() - t0;
    for (int i = 0; i < nbuf; i++)
        free(b[i]);
    free(b);
    return (double)size * reps / secs / 1e6;
}

static int bench_transport(const char *tls, int rounds)
{
    setenv("UCX_TLS", strcmp(tls, "sm") ? "tcp" : "sm,tcp", 1);
    if (!strcmp(tls, "sm"))
        setenv("UCX_RNDV_SCHEME", "am", 1);
    double net[MAX_ROUNDS], mem[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        sl_dataset *svc = service_of(blobs(NULL));
        if (!svc)
            return 1;
        pid_t w = spawn_worker("blobs", sl_service_port(svc));
        int64_t n;
        double secs, cpu, bytes;
        /* the first pass connects and warms up; the second is measured */
        if (drain(svc, 2 * r, &n, &secs, &cpu, &bytes) < 0 ||
            drain(svc, 2 * r + 1, &n, &secs, &cpu, &bytes) < 0)
            return 1;
        sl_dataset_release(svc);
        waitpid(w, NULL, 0);
        net[r] = bytes / secs / 1e6;
        mem[r] = memcpy_mbps((size_t)g_mb << 20, g_batches);
        printf("{\"case\":\"transport\",\"tls\":\"%s\",\"round\":%d,\"MB\":%.0f,"
               "\"received_MB_per_s\":%.0f,\"trainer_cpu_s\":%.3f,\"memcpy_MB_per_s\":%.0f}\n",
               tls, r, bytes / 1e6, net[r], cpu, mem[r]);
        fflush(stdout);
    }
    double nm = median(net, rounds), mm = median(mem, rounds);
    printf("{\"summary\":\"service_transport\",\"tls\":\"%s\",\"batch_MiB\":%d,\"rounds\":%d,"
           "\"received_MB_per_s\":%.0f,\"memcpy_MB_per_s\":%.0f,\"vs_memcpy\":%.3f}\n",
           tls, g_mb, rounds, nm, mm, nm / mm);
    return 0;
}

int main(int argc, char **argv)
{
    g_self = argv[0];
    signal(SIGPIPE, SIG_IGN);
    if (argc == 9 && !strcmp(argv[1], "--worker"))
        return worker_main(argv);
    if (!getenv("SLUICE_SERVICE_SECRET"))
        setenv("SLUICE_SERVICE_SECRET", "bench", 1);
    if (argc < 2)
        goto usage;
    const char *mode = argv[1], *tls = "tcp";
    int rounds = 3, i = 2;
    if (!strcmp(mode, "images")) {
        if (argc < 3)
            goto usage;
        g_dir = argv[2];
        i = 3;
    }
    for (; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            g_batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            g_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tls"))
            tls = argv[i + 1];
        else if (!strcmp(argv[i], "--mb"))
            g_mb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batches"))
            g_batches = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--split"))
            g_split = atoi(argv[i + 1]);
        else
            goto usage;
    }
    if (rounds < 1 || rounds > MAX_ROUNDS)
        goto usage;
    if (!strcmp(mode, "images"))
        return bench_images(rounds);
    if (!strcmp(mode, "transport"))
        return bench_transport(tls, rounds);
usage:
    fprintf(stderr, "usage: bench_service images DIR [--rounds R] [--batch B] [--threads T]\n"
                    "       bench_service transport [--tls tcp|sm] [--mb M] [--batches N] "
                    "[--rounds R]\n");
    return 2;
}
