/*
 * sluice-bench: images per second through a real image pipeline, and how
 * that compares with the machine's decode limit.
 *
 *   image_folder(DIR) | file_list(--list)   files, read by the I/O engine
 *   take(--limit)                           the same N files every epoch
 *   shuffle(SL_SHUFFLE_ALL, seed)           train only
 *   repeat(epochs)                          one iterator for all epochs
 *   map(--map-us of CPU)                    only with --map-us
 *   map_image(preset, size)                 not for --preset read
 *   batch(--batch)                          drop remainder for train
 *   prefetch(--prefetch)
 *
 * Presets: train (random-resized crop + flip), eval (resize shorter side,
 * centre crop), decode (whole image resized), read (files or records only,
 * no decode, no batching). Output is uint8 HWC size x size. The consumer
 * checks each batch's shape and releases it, so the number is what the
 * pipeline can feed, not what a model would take.
 *
 * --cold evicts every file from the page cache before each epoch, so each
 * epoch runs on its own iterator (epoch k shuffles with seed + k). Without
 * it one iterator runs all epochs, and per-epoch rates are cut where the
 * image count passes a multiple of the file count (interpolated inside the
 * batch that passes it).
 *
 * --ceiling measures the decode limit (see sluice_bench_ceiling.c) once
 * before and once after the pipeline epochs, on the same files and thread
 * count, and reports the better of the two. The files are listed by one
 * untimed read pass through the library, which is also what --cold needs.
 *
 * A consumer can stand in for a training step: --consumer-ms sleeps that
 * long after each batch, --consumer-schedule changes the sleep at given
 * seconds. A sampler thread snapshots the iterator's statistics every
 * 100 ms (sluice_bench_series.c), so every run also reports the consumer's
 * stall, peak buffered bytes, every knob over time and how long throughput
 * took to settle (convergence). --sweep runs a grid of static
 * configurations (every knob of the pipeline, autotune off), then the
 * autotune controller and the grid's fastest configurations alternately,
 * each for the same time on the dataset repeated, and compares them
 * (sluice_bench_sweep.c); --sweep-rounds repeats that comparison and keeps
 * the median runs, so that load from other processes drifting over the
 * minutes lands on all of them alike. --plot draws that as SVG
 * (sluice_bench_plot.c). --map-us adds a C map of a stated cost before
 * map_image: a pipeline with two parallel stages.
 *
 * Summary table and one JSON object on stdout (JSON last); --json FILE
 * writes the same object plus the time series. Exit status: 0, 1 on a pipeline or measurement
 * error, 2 on bad usage. `sluice-bench --make-sample DIR` writes a folder of
 * generated JPEGs to try it on (sluice_bench_sample.c).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "crop_window.h"
#include "sluice_bench.h"

#define MAX_EPOCHS 10000
#define SWEEP_SECONDS 4.0

typedef struct ceilings {
    ceiling_result before, after;
    double best;
    /* --decode-limit: the windows' decode, before and after the run */
    ceiling_result limit_before, limit_after;
    double limit;
} ceilings;

static void json_ceiling(FILE *f, const run_state *st, const ceilings *c)
{
    fprintf(f, ",\"ceiling_images_per_s\":");
    json_number(f, c->best);
    fprintf(f, ",\"ratio_to_ceiling\":");
    json_number(f, c->best > 0 ? rate((double)st->images, st->seconds) / c->best : NAN);
    fprintf(f, ",\"steady_ratio_to_ceiling\":");
    json_number(f, c->best > 0 ? run_convergence(st).steady / c->best : NAN);
    fprintf(f, ",\"ceiling_before_images_per_s\":");
    json_number(f, c->before.images_per_s);
    fprintf(f, ",\"ceiling_after_images_per_s\":");
    json_number(f, c->after.images_per_s);
    fprintf(f, ",\"ceiling_files\":%lld,\"ceiling_failed\":%lld",
            (long long)c->before.files, (long long)c->before.failed);
    const int64_t *k = c->before.formats;
    fprintf(f, ",\"ceiling_formats\":{\"jpeg\":%lld,\"png\":%lld,\"webp\":%lld}",
            (long long)k[CEILING_JPEG], (long long)k[CEILING_PNG], (long long)k[CEILING_WEBP]);
}

static void json_limit(FILE *f, const run_state *st, const ceilings *c)
{
    fprintf(f, ",\"limit_images_per_s\":");
    json_number(f, c->limit);
    fprintf(f, ",\"ratio_to_limit\":");
    json_number(f, c->limit > 0 ? rate((double)st->images, st->seconds) / c->limit : NAN);
    fprintf(f, ",\"steady_ratio_to_limit\":");
    json_number(f, c->limit > 0 ? run_convergence(st).steady / c->limit : NAN);
    fprintf(f, ",\"limit_before_images_per_s\":");
    json_number(f, c->limit_before.images_per_s);
    fprintf(f, ",\"limit_after_images_per_s\":");
    json_number(f, c->limit_after.images_per_s);
    fprintf(f, ",\"limit_failed\":%lld", (long long)c->limit_before.failed);
}

/* The whole object, in a malloc'd string (NULL when out of memory); with
 * the time series for the --json file. */
static char *make_json(const run_state *st, const path_list *pl, const ceilings *c,
                       bool with_series)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    json_config(f, st->cfg);
    json_results(f, st, pl);
    if (st->cfg->ceiling)
        json_ceiling(f, st, c);
    if (st->cfg->decode_limit)
        json_limit(f, st, c);
    if (with_series)
        series_json(f, &st->series);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void print_knob(const char *name, int64_t v)
{
    if (v == SL_AUTOTUNE)
        printf("  %-20s auto\n", name);
    else
        printf("  %-20s %lld\n", name, (long long)v);
}

/* The controller's moves as the samples saw them: how many samples show an
 * autotuned knob changed since the one before, and when the last did (s
 * after the run's first arrival; NaN if none). */
static double knobs_settled(const series *s, int *moves)
{
    double last = NAN;
    *moves = 0;
    for (size_t i = 1; i < s->n; i++)
        for (int k = 0; k < s->nknobs; k++) {
            double a = s->knobs[k].v[i - 1], b = s->knobs[k].v[i];
            if (s->knobs[k].autotuned && isfinite(a) && isfinite(b) && a != b) {
                ++*moves;
                last = s->t[i] - series_start(s);
                break;
            }
        }
    return last;
}

/* The slowest and fastest 1-s throughput after the first second. */
static void rate_range(const series *s, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (double a = series_start(s) + 1; a + 1 <= series_end(s); a += 0.1) {
        double r = series_rate(s, a, a + 1);
        *lo = fmin(*lo, r);
        *hi = fmax(*hi, r);
    }
}

static void print_convergence(const run_state *st)
{
    convergence c = run_convergence(st);
    double lo, hi;
    rate_range(&st->series, &lo, &hi);
    if (isfinite(c.seconds))
        printf("  %-20s %.1f s (1-s throughput within 5%% of %.1f images/s from then on)\n",
               "converged after", c.seconds, c.steady);
    else if (isfinite(c.steady) && lo <= hi)
        printf("  %-20s no: 1-s throughput kept moving more than 5%% around %.1f "
               "(%.0f to %.0f images/s)\n", "converged after", c.steady, lo, hi);
    else
        printf("  %-20s not measured: the run is too short\n", "converged after");
    int moves;
    double settled = knobs_settled(&st->series, &moves);
    if (!st->cfg->autotune)
        ;
    else if (st->knob_changes == 0)
        printf("  %-20s kept its starting knobs\n", "controller");
    else if (moves == 0)
        printf("  %-20s %lld knob change%s, all in the first %.1f s\n", "controller",
               (long long)st->knob_changes, st->knob_changes > 1 ? "s" : "", SERIES_PERIOD_S);
    else
        printf("  %-20s %lld knob change%s, the last %.1f s after the first batch\n",
               "controller", (long long)st->knob_changes, st->knob_changes > 1 ? "s" : "",
               settled);
    if (!st->cfg->nsched)
        return;
    double at[MAX_SCHEDULE + 1];
    int n = segments(st, at);
    for (int k = 1; k < n; k++) {
        convergence ck = segment_convergence(st, at, n, k);
        printf("  %-20s ", "");
        if (isfinite(ck.seconds))
            printf("%.1f s", ck.seconds);
        else
            printf("not settled");
        printf(" after the change at %.1f s to %g ms", at[k], step_ms(st->cfg, at[k]));
        if (isfinite(ck.steady))
            printf(" (steady %.1f images/s)", ck.steady);
        printf("\n");
    }
}

static void print_observations(const run_state *st)
{
    print_consumer(st->cfg);
    printf("  %-20s %.1f%% of wall time inside sl_next (%.1f%% by this program's clock)\n",
           "consumer stall", 100 * stall_fraction(st),
           st->seconds > 0 ? 100 * stall_clock_read(&st->clock) / st->seconds
                           : NAN);
    print_convergence(st);
    print_final_knobs(&st->series);
}

static int cmp_rate(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What the first epoch cost against the others, and the reasons this run
 * can show: the wait for the first batch (nothing comes out before a whole
 * batch is decoded, and the controller starts small) and the page faults
 * of buffers that later epochs reuse. */
static void print_first_epoch(const run_state *st)
{
    int n = st->cfg->epochs;
    if (n < 2 || !st->epoch_faults)
        return;
    int m = n - 1;
    double later[m];
    memcpy(later, st->epoch_rate + 1, (size_t)m * sizeof *later);
    qsort(later, (size_t)m, sizeof *later, cmp_rate);
    double med = m % 2 ? later[m / 2] : (later[m / 2 - 1] + later[m / 2]) / 2;
    int64_t faults_later = 0;
    for (int e = 1; e < n; e++)
        faults_later += st->epoch_faults[e];
    faults_later /= m;
    printf("\n  %-20s %.1f images/s, %.2fx the later epochs' median (%.1f)", "first epoch",
           st->epoch_rate[0], med > 0 ? st->epoch_rate[0] / med : NAN, med);
    bool ramp = st->cfg->autotune && st->cfg->knob[KNOB_IMAGE] == SL_AUTOTUNE;
    printf("\n  %-20s %.3f s waiting for the first batch (a whole batch is read and decoded\n"
           "  %-20s before one comes out%s);\n"
           "  %-20s %lld page faults for new buffers that later epochs reuse (%lld each after)",
           "  why", st->first_wait_s, "",
           ramp ? ", and the controller starts from parallelism 1" : "", "",
           (long long)st->epoch_faults[0], (long long)faults_later);
}

/* The libraries a ceiling ran, by the formats of its files. */
static const char *decoders(const ceiling_result *r)
{
    static char buf[64];
    static const char *names[CEILING_FORMATS] = {"libjpeg", "libspng", "libwebp"};
    buf[0] = 0;
    for (int f = 0; f < CEILING_FORMATS; f++)
        if (r->formats[f] > 0)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", buf[0] ? "/" : "",
                     names[f]);
    return buf[0] ? buf : "libjpeg";
}

static void print_summary(const run_state *st, const path_list *pl, const ceilings *c)
{
    const config *cfg = st->cfg;
    double ips = rate((double)st->images, st->seconds);
    printf("sluice-bench %s: %s on %s", sl_version_string(), preset_names[cfg->preset],
           cfg->list ? cfg->list : cfg->dir);
    if (cfg->preset != PRESET_READ)
        printf(", %dx%d uint8 HWC, batch %lld", cfg->size, cfg->size, (long long)cfg->batch);
    if (st->files >= 0)
        printf("\n  %-20s %lld", "files", (long long)st->files);
    else
        printf("\n  %-20s unknown", "files");
    if (pl->n)
        printf(" (%.1f MB)", (double)pl->bytes / 1e6);
    printf("\n  %-20s %d%s\n", "epochs", cfg->epochs,
           cfg->cold        ? " (page cache emptied before each)"
           : cfg->per_epoch ? " (an iterator each)"
                            : "");
    printf("  %-20s %lld\n", "images", (long long)st->images);
    printf("  %-20s %.3f\n", "seconds", st->seconds);
    printf("  %-20s %.1f (the whole run, its start included)\n", "images/s", ips);
    double steady = run_convergence(st).steady;
    if (isfinite(steady))
        printf("  %-20s %.1f (median 1-s throughput over the run's second half)\n",
               "steady images/s", steady);
    else
        printf("  %-20s not measured: the run is too short (it takes 2 s; add --epochs)\n",
               "steady images/s");
    printf("  %-20s", "per epoch images/s");
    for (int e = 0; e < cfg->epochs; e++)
        printf(" %.1f", st->epoch_rate[e]);
    print_first_epoch(st);
    printf("\n  %-20s %.1f (%.1f MB read)\n", "MB/s", rate((double)st->bytes_read / 1e6,
           st->seconds), (double)st->bytes_read / 1e6);
    if (cfg->preset == PRESET_READ)
        printf("  %-20s %.1f MB\n", "file bytes delivered", (double)st->bytes_seen / 1e6);
    printf("  %-20s %d\n", "threads", cfg->threads);
    for (int k = 0; k < NKNOBS; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s%s", knob_label[k],
                 k == KNOB_PREFETCH ? "" : " parallelism");
        if (knob_in_pipeline(cfg, (knob_id)k))
            print_knob(name, cfg->knob[k]);
    }
    if (cfg->map_us > 0)
        printf("  %-20s %g us of CPU per element\n", "map work", cfg->map_us);
    printf("  %-20s %s\n", "io backend", io_name(st->io_backend));
    if (cfg->cold)
        printf("  %-20s %.1f%% of file pages%s\n", "left cached (cold)",
               100 * st->cold_resident,
               st->cold_resident > 0.05 ? " (eviction failed: tmpfs? mapped elsewhere?)" : "");
    printf("  %-20s %.1f MiB\n", "peak RSS", (double)peak_rss_bytes() / (1 << 20));
    printf("  %-20s %.1f MiB\n", "peak buffered", (double)st->peak_buffered / (1 << 20));
    printf("  %-20s %lld\n", "errors skipped", (long long)st->errors_skipped);
    print_observations(st);
    if (cfg->ceiling) {
        printf("  %-20s %.1f (full-size %s decode of %lld preloaded files, %d threads; "
               "before %.1f, after %.1f)\n", "ceiling images/s", c->best,
               decoders(&c->before), (long long)c->before.files, cfg->threads,
               c->before.images_per_s, c->after.images_per_s);
        if (c->best > 0 && isfinite(steady))
            printf("  %-20s %.2f whole run, %.2f steady%s\n", "ratio to ceiling", ips / c->best,
                   steady / c->best,
                   cfg->preset == PRESET_READ ? " (this preset does not decode)" : "");
        else if (c->best > 0)
            printf("  %-20s %.2f%s\n", "ratio to ceiling", ips / c->best,
                   cfg->preset == PRESET_READ ? " (this preset does not decode)" : "");
    }
    if (cfg->decode_limit) {
        double ips_l = c->limit > 0 ? ips / c->limit : NAN;
        printf("  %-20s %.1f (%s decoding only each crop's window, at the scale\n"
               "  %-20s map_image takes, %d threads; before %.1f, after %.1f)\n", "limit images/s",
               c->limit, decoders(&c->limit_before), "", cfg->threads,
               c->limit_before.images_per_s, c->limit_after.images_per_s);
        if (isfinite(steady) && c->limit > 0)
            printf("  %-20s %.2f whole run, %.2f steady\n", "ratio to limit", ips_l,
                   steady / c->limit);
        else
            printf("  %-20s %.2f\n", "ratio to limit", ips_l);
    }
}

/* The SVG of a single run: its series only. */
static int plot_run(const run_state *st)
{
    const config *cfg = st->cfg;
    char title[256], subtitle[256];
    double at[MAX_SCHEDULE + 1], ms[MAX_SCHEDULE + 1];
    int n = segments(st, at);
    for (int k = 0; k < n; k++)
        ms[k] = step_ms(cfg, at[k]);
    snprintf(title, sizeof title, "sluice-bench %s: %s on %s", sl_version_string(),
             preset_names[cfg->preset], cfg->list ? cfg->list : cfg->dir);
    snprintf(subtitle, sizeof subtitle, "%d threads, batch %lld, %.0f images/s, stall %.1f%%, "
             "peak buffered %.1f MiB", cfg->threads, (long long)cfg->batch,
             rate((double)st->images, st->seconds), 100 * stall_fraction(st),
             (double)st->peak_buffered / (1 << 20));
    plot_input in = {.title = title, .subtitle = subtitle, .best_static = NAN,
                     .s = &st->series, .run_name = "the run", .changes = at + 1,
                     .change_ms = ms + 1, .nchanges = n - 1,
                     .convergence_s = run_convergence(st).seconds};
    return plot_write(cfg->plot_path, &in);
}

static int report(const run_state *st, const path_list *pl, const ceilings *c)
{
    const config *cfg = st->cfg;
    char *json = make_json(st, pl, c, false);
    char *full = cfg->json_path ? make_json(st, pl, c, true) : NULL;
    if (!json || (cfg->json_path && !full)) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        free(json);
        free(full);
        return -1;
    }
    if (st->report_text)
        printf("%s\n", st->report_text);
    print_summary(st, pl, c);
    printf("%s\n", json);
    fflush(stdout);
    int rc = full ? write_file(cfg->json_path, full) : 0;
    if (rc == 0 && cfg->plot_path)
        rc = plot_run(st);
    free(json);
    free(full);
    return rc;
}

/* The windows the run's crops decode (--decode-limit), from its spec. */
static crop_window crop_of(const config *cfg)
{
    sl_image_spec spec;
    int policy = cfg->preset == PRESET_TRAIN  ? SL_CROP_RANDOM_RESIZED
                 : cfg->preset == PRESET_EVAL ? SL_CROP_CENTER
                                              : SL_CROP_RESIZE;
    SL_IMAGE_SPEC_INIT(&spec, policy, cfg->size);
    return (crop_window){cfg->preset == PRESET_TRAIN  ? CROP_RANDOM
                         : cfg->preset == PRESET_EVAL ? CROP_CENTER
                                                      : CROP_WHOLE,
                         spec.width, spec.height, spec.scale_min, spec.scale_max,
                         spec.ratio_min, spec.ratio_max, spec.resize_shorter};
}

/* The ceiling, or with crop the decode limit. */
static int measure_ceiling(const config *cfg, const path_list *pl, const crop_window *crop,
                           ceiling_result *r)
{
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r  measuring the decode %s...\033[K", crop ? "limit" : "ceiling");
    int rc = ceiling_measure(pl->paths, pl->n, cfg->threads, crop, r);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    return rc;
}

static int bench(const config *cfg)
{
    sl_dataset *src = open_source(cfg, 0);
    if (!src) {
        fprintf(stderr, "sluice-bench: %s\n", sl_last_error());
        return 1;
    }
    if (cfg->sweep)
        return bench_sweep(cfg, src);
    run_state st = {.cfg = cfg, .files = sl_dataset_cardinality(src), .first_wait_s = -1};
    if (cfg->format != FORMAT_FOLDER && (st.files = shards_count(cfg)) < 0) {
        sl_dataset_release(src);
        return 1;
    }
    path_list pl = {0};
    ceilings c = {0};
    st.epoch_rate = calloc((size_t)cfg->epochs, sizeof *st.epoch_rate);
    st.epoch_faults = calloc((size_t)cfg->epochs, sizeof *st.epoch_faults);
    int rc = 0;
    if (!st.epoch_rate || !st.epoch_faults) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        rc = -1;
    }
    if (rc == 0 && (cfg->cold || cfg->ceiling || cfg->decode_limit))
        rc = list_files(cfg, &pl);
    if (rc == 0 && st.files < 0 && pl.n)
        st.files = (int64_t)pl.n;
    st.expected = expected_images(cfg, st.files);
    crop_window crop = crop_of(cfg);
    if (rc == 0 && cfg->ceiling)
        rc = measure_ceiling(cfg, &pl, NULL, &c.before);
    if (rc == 0 && cfg->decode_limit)
        rc = measure_ceiling(cfg, &pl, &crop, &c.limit_before);
    if (rc == 0)
        rc = run_epochs(&st, src, &pl);
    if (rc == 0 && cfg->ceiling)
        rc = measure_ceiling(cfg, &pl, NULL, &c.after);
    if (rc == 0 && cfg->decode_limit)
        rc = measure_ceiling(cfg, &pl, &crop, &c.limit_after);
    c.best = fmax(c.before.images_per_s, c.after.images_per_s);
    c.limit = fmax(c.limit_before.images_per_s, c.limit_after.images_per_s);
    if (rc == 0)
        rc = report(&st, &pl, &c);
    path_list_free(&pl);
    run_state_free(&st);
    sl_dataset_release(src);
    return rc < 0 ? 1 : 0;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: sluice-bench DIR [options]\n"
        "       sluice-bench --list FILE [DIR] [options]\n"
        "       sluice-bench --make-sample DIR [--count N]\n"
        "       sluice-bench DIR --make-shards OUT --format tfrecord|tar\n"
        "                    [--compression gzip] [--shard-size N]\n"
        "  DIR                  an ImageFolder (DIR/class/image.jpg); with --list, the\n"
        "                       root its paths are relative to (default: the list's folder)\n"
        "  --list FILE          read 'relative/path label' lines instead of scanning DIR\n"
        "  --preset P           train (random-resized crop, flip), eval (centre crop),\n"
        "                       decode (whole image resized), read (files or records\n"
        "                       only); default train\n"
        "  --size S             output images are S x S x 3 uint8 (default 224)\n"
        "  --batch B            images per batch (default 256)\n"
        "  --threads N          worker threads (default: one per CPU)\n"
        "  --epochs E           passes over the files (default 1)\n"
        "  --limit N            only the first N files\n"
        "  --parallelism P|auto decodes in flight (default auto)\n"
        "  --prefetch D|auto    batches ready ahead (default auto)\n"
        "  --map-us X           a C map before map_image that burns X us of CPU per\n"
        "                       element (a user's own map); --map-parallelism P|auto\n"
        "  --parse-parallelism P|auto  TFRecord: records parse_example parses at a time\n"
        "  --interleave-parallelism P|auto  shards: interleave's fetchers\n"
        "  --cache auto|none    cache(AUTO) on the read files, or no cache; both shuffle\n"
        "                       the train preset through a buffer (a cache has no random access)\n"
        "  --io uring|pread     file reading backend (default: io_uring where available)\n"
        "  --cold               empty the page cache of the files before each epoch\n"
        "  --per-epoch          one iterator per epoch over the same dataset, as a\n"
        "                       training loop does (default: one for all epochs)\n"
        "  --format F           what DIR holds: folder (default), or tfrecord / tar shards\n"
        "                       (read with list_files -> interleave -> the reader)\n"
        "  --cycle N            shards read at a time (interleave's cycle_length, default 4)\n"
        "  --cardinality N      the images the shards hold, stated (assert_cardinality): a\n"
        "                       train batch's dropped remainder is then not decoded, as on\n"
        "                       a folder, whose size is known; a wrong N fails the run\n"
        "                       (the train preset's shuffle reads every pass to its end)\n"
        "  --make-shards OUT    write DIR's images as --format shards into OUT, --shard-size\n"
        "                       images each (default 125), --compression gzip or none\n"
        "  --fast-upsample      replicate chroma instead of interpolating it (faster;\n"
        "                       pixels differ slightly from PIL's)\n"
        "  --exact-pixels       decode the window to RGB first (fancy upsampling), not\n"
        "                       as YCbCr planes resampled separately (the default)\n"
        "  --ceiling            also measure a full-size decode of the same files, each\n"
        "                       with its format's library (libjpeg-turbo, libspng, libwebp)\n"
        "  --decode-limit       also measure decoding only each crop's window (JPEG at the\n"
        "                       DCT scale, WebP at the whole factor map_image takes, PNG\n"
        "                       down to the window's last row): what decoding alone allows\n"
        "  --on-error fail|skip stop at a bad file (default) or skip it\n"
        "  --json FILE          write the result object to FILE\n"
        "  --seed S             shuffle and crop seed (default 0)\n"
        "  --count N            --make-sample: images to write (default %d)\n"
        "the consumer (a stand-in for a training step):\n"
        "  --consumer-ms X      sleep X ms after each batch (default 0)\n"
        "  --consumer-schedule T:X,T:X...  from second T on, sleep X ms (e.g. 0:40,15:10)\n"
        "the controller and what it saw:\n"
        "  --autotune on|off    SL_OPT_AUTOTUNE (default on)\n"
        "  --cpu-budget N       worker threads the controller may keep busy (default: CPUs)\n"
        "  --ram-budget MIB     cap on buffered data (default: half of available memory)\n"
        "  --report             print sl_iterator_report at the end\n"
        "  --trace FILE         record events and write a Chrome/Perfetto trace to FILE\n"
        "  --plot FILE.svg      draw the run over time (with --sweep, the sweep too)\n"
        "  --sweep              a grid of static values of every knob of the pipeline (the\n"
        "                       parallelism of each parallel stage, the prefetch depth),\n"
        "                       then autotune and the grid's two fastest alternately\n"
        "  --sweep-seconds X    each for X seconds (default %g) of the files repeated\n"
        "  --sweep-images N     or each for N images\n"
        "  --sweep-rounds R     rounds of autotune against the two fastest (default 1)\n",
        SAMPLE_DEFAULT_COUNT, SWEEP_SECONDS);
}

static int parse_int(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "sluice-bench: %s needs an integer in [%lld, %lld]\n", flag,
                (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno || !(x >= lo && x <= hi)) {
        fprintf(stderr, "sluice-bench: %s needs a number in [%g, %g]\n", flag, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* "T:X,T:X...": seconds increasing, milliseconds >= 0. */
static int parse_schedule(config *cfg, const char *v)
{
    const char *p = v;
    cfg->nsched = 0;
    while (p && *p) {
        char *end;
        double t = strtod(p, &end), ms = *end == ':' ? strtod(end + 1, &end) : -1;
        bool ok = cfg->nsched < MAX_SCHEDULE && (*end == ',' || !*end) && t >= 0 && ms >= 0 &&
                  isfinite(t) && isfinite(ms) &&
                  (cfg->nsched == 0 || t > cfg->sched_t[cfg->nsched - 1]);
        if (!ok) {
            fprintf(stderr, "sluice-bench: --consumer-schedule wants up to %d SECONDS:MS pairs "
                    "with increasing seconds, like 0:40,15:10: %s\n", MAX_SCHEDULE, v);
            return -1;
        }
        cfg->sched_t[cfg->nsched] = t;
        cfg->sched_ms[cfg->nsched++] = ms;
        p = *end ? end + 1 : end;
    }
    if (!v || !cfg->nsched) {
        fprintf(stderr, "sluice-bench: --consumer-schedule: empty\n");
        return -1;
    }
    return 0;
}

static int parse_knob(const char *flag, const char *v, int64_t *out)
{
    if (v && !strcmp(v, "auto")) {
        *out = SL_AUTOTUNE;
        return 0;
    }
    return parse_int(flag, v, 1, 1 << 20, out);
}

static int parse_choice(const char *flag, const char *v, const char *const *names, int n)
{
    for (int i = 0; v && i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    fprintf(stderr, "sluice-bench: %s: not one of the choices: %s\n", flag, v ? v : "(none)");
    return -1;
}

/* An option taking a value; 0, or -1 when it is bad (after saying why,
 * unless the option itself is unknown). */
static int parse_option(config *cfg, const char *a, const char *v)
{
    static const char *const io_names[] = {"uring", "pread"};
    static const char *const policies[] = {"fail", "skip"};
    static const char *const switches[] = {"off", "on"};
    int64_t x = 0;
    int rc = 0;
    static const char *const compressions[] = {"none", "gzip"};
    static const char *const cache_names[] = {"none", "auto"};
    if (!strcmp(a, "--list") || !strcmp(a, "--json") || !strcmp(a, "--make-sample") ||
        !strcmp(a, "--trace") || !strcmp(a, "--plot") || !strcmp(a, "--make-shards")) {
        const char **dst = a[2] == 'l'                ? &cfg->list
                         : a[2] == 'j'                ? &cfg->json_path
                         : !strcmp(a, "--make-shards") ? &cfg->shards_out
                         : a[2] == 'm'                ? &cfg->sample_dir
                         : a[2] == 't'                ? &cfg->trace_path
                                                      : &cfg->plot_path;
        *dst = v;
        rc = v ? 0 : -1;
    } else if (!strcmp(a, "--format")) {
        rc = parse_choice(a, v, format_names, 3);
        cfg->format = (format)rc;
    } else if (!strcmp(a, "--compression")) {
        rc = parse_choice(a, v, compressions, 2);
        cfg->compression = rc == 1;
    } else if (!strcmp(a, "--shard-size")) {
        rc = parse_int(a, v, 1, INT64_MAX, &cfg->shard_size);
    } else if (!strcmp(a, "--cardinality")) {
        rc = parse_int(a, v, 0, INT64_MAX, &cfg->cardinality);
    } else if (!strcmp(a, "--cycle")) {
        rc = parse_int(a, v, 1, 1024, &x);
        cfg->cycle = (int)x;
    } else if (!strcmp(a, "--consumer-ms")) {
        rc = parse_double(a, v, 0, 3.6e6, &cfg->consumer_ms);
    } else if (!strcmp(a, "--consumer-schedule")) {
        rc = parse_schedule(cfg, v);
    } else if (!strcmp(a, "--sweep-seconds")) {
        rc = parse_double(a, v, 0.5, 86400, &cfg->sweep_seconds);
    } else if (!strcmp(a, "--sweep-rounds")) {
        rc = parse_int(a, v, 1, SWEEP_MAX_ROUNDS, &x);
        cfg->sweep_rounds = (int)x;
    } else if (!strcmp(a, "--sweep-images")) {
        rc = parse_int(a, v, 1, INT64_MAX, &cfg->sweep_images);
    } else if (!strcmp(a, "--autotune")) {
        rc = parse_choice(a, v, switches, 2);
        cfg->autotune = rc;
    } else if (!strcmp(a, "--cpu-budget")) {
        rc = parse_int(a, v, 1, 4096, &cfg->cpu_budget);
    } else if (!strcmp(a, "--ram-budget")) {
        rc = parse_int(a, v, 1, INT64_MAX >> 20, &cfg->ram_budget);
        cfg->ram_budget <<= 20;
    } else if (!strcmp(a, "--preset")) {
        rc = parse_choice(a, v, preset_names, 4);
        cfg->preset = (preset)rc;
    } else if (!strcmp(a, "--cache")) {
        rc = parse_choice(a, v, cache_names, 2);
        cfg->cache = rc == 1 ? CACHE_AUTO : CACHE_NONE;
    } else if (!strcmp(a, "--io")) {
        rc = parse_choice(a, v, io_names, 2);
        cfg->io = rc == 0 ? SL_IO_URING : SL_IO_PREAD;
    } else if (!strcmp(a, "--on-error")) {
        rc = parse_choice(a, v, policies, 2);
        cfg->policy = rc == 0 ? SL_ERRORS_FAIL : SL_ERRORS_SKIP;
    } else if (!strcmp(a, "--size")) {
        rc = parse_int(a, v, 1, 16384, &x);
        cfg->size = (int)x;
    } else if (!strcmp(a, "--batch")) {
        rc = parse_int(a, v, 1, 1 << 20, &cfg->batch);
    } else if (!strcmp(a, "--threads")) {
        rc = parse_int(a, v, 1, 1024, &x);
        cfg->threads = (int)x;
    } else if (!strcmp(a, "--epochs")) {
        rc = parse_int(a, v, 1, MAX_EPOCHS, &x);
        cfg->epochs = (int)x;
    } else if (!strcmp(a, "--limit")) {
        rc = parse_int(a, v, 0, INT64_MAX, &cfg->limit);
    } else if (!strcmp(a, "--seed")) {
        rc = parse_int(a, v, 0, INT64_MAX, &cfg->seed);
    } else if (!strcmp(a, "--count")) {
        rc = parse_int(a, v, 1, 1000000, &x);
        cfg->sample_count = (int)x;
    } else if (!strcmp(a, "--parallelism")) {
        rc = parse_knob(a, v, &cfg->knob[KNOB_IMAGE]);
    } else if (!strcmp(a, "--prefetch")) {
        rc = parse_knob(a, v, &cfg->knob[KNOB_PREFETCH]);
    } else if (!strcmp(a, "--map-parallelism")) {
        rc = parse_knob(a, v, &cfg->knob[KNOB_MAP]);
    } else if (!strcmp(a, "--parse-parallelism")) {
        rc = parse_knob(a, v, &cfg->knob[KNOB_PARSE]);
    } else if (!strcmp(a, "--interleave-parallelism")) {
        rc = parse_knob(a, v, &cfg->knob[KNOB_INTERLEAVE]);
    } else if (!strcmp(a, "--map-us")) {
        rc = parse_double(a, v, 0, 1e7, &cfg->map_us);
    } else {
        fprintf(stderr, "sluice-bench: unknown option: %s\n", a);
        return -1;
    }
    return rc < 0 ? -1 : 0;
}

/* 0 to run, 1 after --help, -1 on bad usage. */
static int parse_args(int argc, char **argv, config *cfg)
{
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--cold")) {
            cfg->cold = true;
        } else if (!strcmp(a, "--per-epoch")) {
            cfg->per_epoch = true;
        } else if (!strcmp(a, "--fast-upsample")) {
            cfg->fast_upsample = true;
        } else if (!strcmp(a, "--exact-pixels")) {
            cfg->exact_pixels = true;
        } else if (!strcmp(a, "--ceiling")) {
            cfg->ceiling = true;
        } else if (!strcmp(a, "--decode-limit")) {
            cfg->decode_limit = true;
        } else if (!strcmp(a, "--sweep")) {
            cfg->sweep = true;
        } else if (!strcmp(a, "--report")) {
            cfg->report = true;
        } else if (a[0] == '-' && a[1] == '-') {
            if (parse_option(cfg, a, i + 1 < argc ? argv[i + 1] : NULL) < 0)
                return -1;
            i++;
        } else if (positional++ == 0) {
            cfg->dir = a;
        } else {
            fprintf(stderr, "sluice-bench: one folder only: %s\n", a);
            return -1;
        }
    }
    if (!cfg->sample_dir && !cfg->dir && !cfg->list) {
        fprintf(stderr, "sluice-bench: which folder?\n");
        return -1;
    }
    if (cfg->shards_out && (!cfg->dir || cfg->format == FORMAT_FOLDER)) {
        fprintf(stderr, "sluice-bench: --make-shards OUT needs the image folder and "
                "--format tfrecord|tar\n");
        return -1;
    }
    if (!cfg->shards_out && cfg->format != FORMAT_FOLDER &&
        (cfg->ceiling || cfg->decode_limit || cfg->list)) {
        fprintf(stderr, "sluice-bench: --ceiling, --decode-limit and --list are for image "
                "folders; run the "
                "folder the shards came from for the ceiling\n");
        return -1;
    }
    if (cfg->decode_limit && cfg->preset == PRESET_READ) {
        fprintf(stderr, "sluice-bench: --decode-limit is for a decoding preset\n");
        return -1;
    }
    if (cfg->sweep && (cfg->cold || cfg->per_epoch || cfg->ceiling || cfg->decode_limit ||
                       cfg->preset == PRESET_READ)) {
        fprintf(stderr, "sluice-bench: --sweep runs a decoding preset, warm, without "
                "--cold, --per-epoch or --ceiling\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    config cfg = {
        .preset = PRESET_TRAIN, .size = 224, .batch = 256, .threads = sl_cpu_count(),
        .epochs = 1, .limit = -1,
        .knob = {SL_AUTOTUNE, SL_AUTOTUNE, SL_AUTOTUNE, SL_AUTOTUNE, SL_AUTOTUNE},
        .io = SL_IO_AUTO, .policy = SL_ERRORS_FAIL, .sample_count = SAMPLE_DEFAULT_COUNT,
        .autotune = 1, .sweep_seconds = SWEEP_SECONDS, .sweep_rounds = 1,
        .shard_size = 125, .cycle = 4, .cardinality = -1,
    };
    int rc = parse_args(argc, argv, &cfg);
    if (rc != 0) {
        if (rc < 0)
            usage(stderr);
        return rc < 0 ? 2 : 0;
    }
    if (cfg.sample_dir)
        return sample_write_folder(cfg.sample_dir, cfg.sample_count) < 0 ? 1 : 0;
    if (cfg.shards_out)
        return shards_write(&cfg) < 0 ? 1 : 0;
    rc = bench(&cfg);
    bench_runtime_free();
    return rc;
}
