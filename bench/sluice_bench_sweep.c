/*
 * --sweep: a grid of static configurations (map parallelism x prefetch
 * depth, autotune off), then the autotune controller, each for the same
 * time on the dataset repeated, --sweep-rounds times; and what it found:
 * the best static configuration, the leanest one that comes close to it,
 * and how the autotune run compares with both, as a table, JSON and SVG.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sluice_bench.h"

#define SWEEP_NEAR_BEST 0.97 /* "as good as the best" for the smallest static config */

static bool is_auto(const sweep_row *r)
{
    return r->parallelism == SL_AUTOTUNE;
}

/* Peaks this close are the same memory (a batch's worth of difference
 * is not noise; a few KiB of pool rounding is). */
#define SAME_MEMORY 0.02

/* Less memory first; on a tie, fewer decodes in flight, then less depth. */
static bool leaner(const sweep_row *a, const sweep_row *b)
{
    double pa = (double)a->peak_buffered, pb = (double)b->peak_buffered;
    if (fabs(pa - pb) > SAME_MEMORY * fmax(pa, pb))
        return pa < pb;
    if (a->parallelism != b->parallelism)
        return a->parallelism < b->parallelism;
    return a->depth < b->depth;
}

sweep_summary sweep_summarize(const sweep_row *rows, int n, double near)
{
    sweep_summary sum = {.best = -1, .smallest = -1, .autotune = -1, .near = near};
    for (int i = 0; i < n; i++) {
        if (is_auto(&rows[i]))
            sum.autotune = i;
        else if (sum.best < 0 || rows[i].images_per_s > rows[sum.best].images_per_s)
            sum.best = i;
    }
    if (sum.best < 0)
        return sum;
    double bar = near * rows[sum.best].images_per_s;
    for (int i = 0; i < n; i++)
        if (!is_auto(&rows[i]) && rows[i].images_per_s >= bar &&
            (sum.smallest < 0 || leaner(&rows[i], &rows[sum.smallest])))
            sum.smallest = i;
    return sum;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

double sweep_autotune_vs_best(const sweep_row *rows, const sweep_summary *sum)
{
    if (sum->best < 0 || sum->autotune < 0)
        return NAN;
    return ratio(rows[sum->autotune].images_per_s, rows[sum->best].images_per_s);
}

double sweep_memory_ratio(const sweep_row *rows, const sweep_summary *sum)
{
    if (sum->smallest < 0 || sum->autotune < 0)
        return NAN;
    return ratio((double)rows[sum->autotune].peak_buffered,
                 (double)rows[sum->smallest].peak_buffered);
}

/* ---- the table ---- */

static void knob_cell(FILE *out, int64_t v)
{
    if (v == SL_AUTOTUNE)
        fprintf(out, "  %11s", "auto");
    else
        fprintf(out, "  %11lld", (long long)v);
}

static void rounds_range(const sweep_row *r, double *lo, double *hi)
{
    *lo = *hi = r->images_per_s;
    for (int q = 0; q < r->rounds; q++) {
        *lo = fmin(*lo, r->round_images_per_s[q]);
        *hi = fmax(*hi, r->round_images_per_s[q]);
    }
}

static void row_line(FILE *out, const sweep_row *r, const char *mark)
{
    knob_cell(out, r->parallelism);
    knob_cell(out, r->depth);
    fprintf(out, "  %10.1f", r->images_per_s);
    if (r->rounds > 1) {
        double lo, hi;
        rounds_range(r, &lo, &hi);
        fprintf(out, "  %6.0f-%-6.0f", lo, hi);
    }
    fprintf(out, "  %7.1f  %9.1f  %9.1f", 100 * r->stall_fraction, 100 * r->stall_after_first,
            (double)r->peak_buffered / (1 << 20));
    if (isfinite(r->convergence_s))
        fprintf(out, "  %11.1f", r->convergence_s);
    else
        fprintf(out, "  %11s", "-");
    fprintf(out, "  %s\n", mark);
}

static void config_name(char *buf, size_t size, const sweep_row *r)
{
    snprintf(buf, size, "parallelism %lld, depth %lld", (long long)r->parallelism,
             (long long)r->depth);
}

void sweep_print_table(FILE *out, const sweep_row *rows, int n, const sweep_summary *sum)
{
    fprintf(out, "  %11s  %11s  %10s", "parallelism", "depth", "images/s");
    if (n > 0 && rows[0].rounds > 1)
        fprintf(out, "  %13s", "range");
    fprintf(out, "  %7s  %9s  %9s  %11s\n", "stall %", "after 1st", "peak MiB", "converged s");
    for (int i = 0; i < n; i++)
        row_line(out, &rows[i], i == sum->best       ? "<- best static"
                                : i == sum->smallest ? "<- leanest near best"
                                                     : "");
    if (sum->best < 0)
        return;
    char name[64];
    const sweep_row *b = &rows[sum->best];
    config_name(name, sizeof name, b);
    fprintf(out, "  %-22s %s: %.1f images/s, stall %.1f%% (%.1f%% after the first batch), "
            "peak buffered %.1f MiB\n", "best static", name, b->images_per_s,
            100 * b->stall_fraction, 100 * b->stall_after_first,
            (double)b->peak_buffered / (1 << 20));
    if (sum->smallest >= 0) {
        const sweep_row *s = &rows[sum->smallest];
        config_name(name, sizeof name, s);
        fprintf(out, "  leanest >= %2.0f%% of best %s: %.1f images/s, peak buffered %.1f MiB\n",
                100 * sum->near, name, s->images_per_s, (double)s->peak_buffered / (1 << 20));
    }
    if (sum->autotune < 0)
        return;
    const sweep_row *a = &rows[sum->autotune];
    fprintf(out, "  %-22s %.1f images/s = %.3fx best static, stall %.1f%% (%.1f%% after the "
            "first batch), peak buffered %.1f MiB = %.2fx the leanest\n", "autotune",
            a->images_per_s, sweep_autotune_vs_best(rows, sum), 100 * a->stall_fraction,
            100 * a->stall_after_first, (double)a->peak_buffered / (1 << 20),
            sweep_memory_ratio(rows, sum));
    if (isfinite(a->convergence_s))
        fprintf(out, "  %-22s %.1f s (1-s throughput within 5%% of %.1f images/s from then on)\n",
                "autotune converged", a->convergence_s, a->steady);
    else
        fprintf(out, "  %-22s not within the run\n", "autotune converged");
}

/* ---- JSON ---- */

static void json_config_name(FILE *f, const sweep_row *r)
{
    fprintf(f, "{\"parallelism\":%lld,\"depth\":%lld}", (long long)r->parallelism,
            (long long)r->depth);
}

static void json_row(FILE *f, const sweep_row *r)
{
    fputs("{\"parallelism\":", f);
    if (is_auto(r))
        fputs("\"auto\",\"depth\":\"auto\"", f);
    else
        fprintf(f, "%lld,\"depth\":%lld", (long long)r->parallelism, (long long)r->depth);
    fprintf(f, ",\"images\":%lld,\"seconds\":", (long long)r->images);
    json_number(f, r->seconds);
    fputs(",\"images_per_s\":", f);
    json_number(f, r->images_per_s);
    fputs(",\"stall_fraction\":", f);
    json_number(f, r->stall_fraction);
    fputs(",\"stall_fraction_after_first_batch\":", f);
    json_number(f, r->stall_after_first);
    fprintf(f, ",\"peak_buffered_bytes\":%lld,\"convergence_seconds\":",
            (long long)r->peak_buffered);
    json_number(f, r->convergence_s);
    fputs(",\"steady_images_per_s\":", f);
    json_number(f, r->steady);
    fputs(",\"images_per_s_rounds\":[", f);
    for (int q = 0; q < r->rounds; q++) {
        fputs(q ? "," : "", f);
        json_number(f, r->round_images_per_s[q]);
    }
    fputs("]}", f);
}

void sweep_json(FILE *f, const sweep_row *rows, int n, const sweep_summary *sum)
{
    if (sum->best >= 0) {
        fputs(",\"best_static_images_per_s\":", f);
        json_number(f, rows[sum->best].images_per_s);
        fputs(",\"best_static_config\":", f);
        json_config_name(f, &rows[sum->best]);
        fprintf(f, ",\"best_static_peak_buffered_bytes\":%lld",
                (long long)rows[sum->best].peak_buffered);
    }
    fputs(",\"autotune_vs_best_static\":", f);
    json_number(f, sweep_autotune_vs_best(rows, sum));
    fputs(",\"near_best_fraction\":", f);
    json_number(f, sum->near);
    if (sum->smallest >= 0) {
        fputs(",\"smallest_near_best_config\":", f);
        json_config_name(f, &rows[sum->smallest]);
        fputs(",\"smallest_near_best_images_per_s\":", f);
        json_number(f, rows[sum->smallest].images_per_s);
        fprintf(f, ",\"smallest_near_best_peak_buffered_bytes\":%lld",
                (long long)rows[sum->smallest].peak_buffered);
    }
    if (sum->autotune >= 0)
        fprintf(f, ",\"autotune_peak_buffered_bytes\":%lld",
                (long long)rows[sum->autotune].peak_buffered);
    fputs(",\"autotune_vs_smallest_near_best_memory\":", f);
    json_number(f, sweep_memory_ratio(rows, sum));
    fputs(",\"sweep\":[", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? "," : "", f);
        json_row(f, &rows[i]);
    }
    fputc(']', f);
}

/* ---- running it ---- */

static const int64_t sweep_parallelism[] = {1, 2, 3, 4, 6, 8};

static const int64_t sweep_depth[] = {1, 2, 4, 8};

#define NPAR (sizeof sweep_parallelism / sizeof *sweep_parallelism)

#define NDEPTH (sizeof sweep_depth / sizeof *sweep_depth)

typedef struct sweep {
    sweep_row runs[SWEEP_MAX_ROUNDS][NPAR * NDEPTH + 1]; /* each round's */
    sweep_row rows[NPAR * NDEPTH + 1];                   /* each one's median run */
    int n, rounds;
    config auto_cfg;
    run_state autotune[SWEEP_MAX_ROUNDS];
    int auto_median; /* the round whose autotune run is reported and drawn */
    char label[64];
} sweep;

/* One configuration for the sweep's time (or image count), on the files
 * repeated for as long as that takes. 0, or -1 after printing why. */
static int sweep_run(run_state *st, sl_dataset *src, sweep_row *row)
{
    const config *cfg = st->cfg;
    st->files = st->expected = -1;
    st->stop_seconds = cfg->sweep_images > 0 ? 0 : cfg->sweep_seconds;
    st->stop_images = cfg->sweep_images;
    st->epoch_rate = calloc(1, sizeof *st->epoch_rate);
    sl_dataset *ds = build_pipeline(cfg, src, -1, cfg->seed);
    sl_options *opts = ds ? make_options(cfg, cfg->seed) : NULL;
    int rc = -1;
    if (!ds)
        fprintf(stderr, "sluice-bench: cannot build the pipeline: %s\n", sl_last_error());
    else if (opts && !st->epoch_rate)
        fprintf(stderr, "sluice-bench: out of memory\n");
    else if (opts)
        rc = run_live(st, ds, opts);
    sl_options_free(opts);
    sl_dataset_free(ds);
    convergence c = run_convergence(st);
    *row = (sweep_row){
        .parallelism = cfg->parallelism, .depth = cfg->prefetch, .images = st->images,
        .peak_buffered = st->peak_buffered, .seconds = st->seconds,
        .images_per_s = rate((double)st->images, st->seconds),
        .stall_fraction = stall_fraction(st), .stall_after_first = stall_after_first(st),
        .convergence_s = c.seconds, .steady = c.steady,
    };
    return rc;
}

static int sweep_static(const config *cfg, sl_dataset *src, sweep *sw, int round, int j,
                        int total, int64_t p, int64_t d)
{
    config c = *cfg;
    c.parallelism = (int)p;
    c.prefetch = d;
    c.autotune = 0;
    c.trace_path = NULL;
    c.report = false;
    char label[64];
    snprintf(label, sizeof label, "[%d/%d] parallelism %lld, depth %lld",
             round * total + j + 1, sw->rounds * total, (long long)p, (long long)d);
    run_state st = {.cfg = &c, .label = label, .first_wait_s = -1};
    int rc = sweep_run(&st, src, &sw->runs[round][j]);
    run_state_free(&st);
    return rc;
}

/* One round: the static grid, then the autotune run, each for the same
 * time. */
static int sweep_round(const config *cfg, sl_dataset *src, sweep *sw, int round)
{
    size_t npar = 0;
    while (npar < NPAR && sweep_parallelism[npar] <= 4 * cfg->threads)
        npar++;
    int j = 0, total = (int)(npar * NDEPTH) + 1;
    for (size_t i = 0; i < npar; i++)
        for (size_t k = 0; k < NDEPTH; k++, j++)
            if (sweep_static(cfg, src, sw, round, j, total, sweep_parallelism[i],
                             sweep_depth[k]) < 0)
                return -1;
    snprintf(sw->label, sizeof sw->label, "[%d/%d] autotune", (round + 1) * total,
             sw->rounds * total);
    sw->autotune[round] = (run_state){.cfg = &sw->auto_cfg, .label = sw->label, .first_wait_s = -1};
    sw->n = total;
    return sweep_run(&sw->autotune[round], src, &sw->runs[round][j]);
}

/* The round whose run of configuration j has the median images/s (the
 * lower one of an even count), so a row stays one real run. */
static int median_round(const sweep *sw, int j)
{
    int best = 0;
    for (int r = 0; r < sw->rounds; r++) {
        int below = 0, equal_before = 0;
        for (int q = 0; q < sw->rounds; q++) {
            double a = sw->runs[q][j].images_per_s, b = sw->runs[r][j].images_per_s;
            below += a < b;
            equal_before += a == b && q < r;
        }
        if (below + equal_before == (sw->rounds - 1) / 2)
            best = r;
    }
    return best;
}

static void sweep_medians(sweep *sw)
{
    for (int j = 0; j < sw->n; j++) {
        int r = median_round(sw, j);
        sw->rows[j] = sw->runs[r][j];
        sw->rows[j].rounds = sw->rounds;
        for (int q = 0; q < sw->rounds; q++)
            sw->rows[j].round_images_per_s[q] = sw->runs[q][j].images_per_s;
        if (j == sw->n - 1)
            sw->auto_median = r;
    }
}

static int run_sweep(const config *cfg, sl_dataset *src, sweep *sw)
{
    sw->rounds = cfg->sweep_rounds;
    sw->auto_cfg = *cfg;
    sw->auto_cfg.parallelism = SL_AUTOTUNE;
    sw->auto_cfg.prefetch = SL_AUTOTUNE;
    sw->auto_cfg.autotune = 1;
    for (int r = 0; r < sw->rounds; r++)
        if (sweep_round(cfg, src, sw, r) < 0)
            return -1;
    sweep_medians(sw);
    return 0;
}

/* The autotune run that stands for all rounds. */
static run_state *auto_run(sweep *sw)
{
    return &sw->autotune[sw->auto_median];
}

static char *make_sweep_json(sweep *sw, const path_list *pl, const sweep_summary *sum,
                             bool with_series)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    json_config(f, &sw->auto_cfg);
    fputs(",\"mode\":\"sweep\",\"sweep_seconds\":", f);
    json_number(f, sw->auto_cfg.sweep_images > 0 ? NAN : sw->auto_cfg.sweep_seconds);
    fprintf(f, ",\"sweep_images\":%lld,\"sweep_rounds\":%d", (long long)sw->auto_cfg.sweep_images,
            sw->rounds);
    json_results(f, auto_run(sw), pl);
    sweep_json(f, sw->rows, sw->n, sum);
    if (with_series)
        series_json(f, &auto_run(sw)->series);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int plot_sweep(sweep *sw, const sweep_summary *sum)
{
    const config *cfg = &sw->auto_cfg;
    char title[256], subtitle[256];
    const run_state *a = auto_run(sw);
    double at[MAX_SCHEDULE + 1], ms[MAX_SCHEDULE + 1];
    int n = segments(a, at);
    for (int k = 0; k < n; k++)
        ms[k] = step_ms(cfg, at[k]);
    snprintf(title, sizeof title, "sluice-bench %s sweep: %s on %s", sl_version_string(),
             preset_names[cfg->preset], cfg->list ? cfg->list : cfg->dir);
    char each[32];
    if (cfg->sweep_images > 0)
        snprintf(each, sizeof each, "%lld images", (long long)cfg->sweep_images);
    else
        snprintf(each, sizeof each, "%g s", cfg->sweep_seconds);
    snprintf(subtitle, sizeof subtitle, "%dx%d uint8, batch %lld, %d threads, %s per "
             "configuration, consumer step %g ms; autotune = %.3fx best static, "
             "%.2fx the leanest near-best config's memory", cfg->size, cfg->size,
             (long long)cfg->batch, cfg->threads, each, cfg->consumer_ms,
             sweep_autotune_vs_best(sw->rows, sum), sweep_memory_ratio(sw->rows, sum));
    plot_input in = {
        .title = title, .subtitle = subtitle, .rows = sw->rows, .nrows = sw->n,
        .best_static = sum->best >= 0 ? sw->rows[sum->best].images_per_s : NAN,
        .s = &a->series, .run_name = "autotune run", .changes = at + 1, .change_ms = ms + 1,
        .nchanges = n - 1, .convergence_s = run_convergence(a).seconds,
    };
    return plot_write(cfg->plot_path, &in);
}

static void print_sweep(sweep *sw, const path_list *pl, const sweep_summary *sum)
{
    const config *cfg = &sw->auto_cfg;
    if (auto_run(sw)->report_text)
        printf("%s\n", auto_run(sw)->report_text);
    printf("sluice-bench %s sweep: %s on %s, %dx%d uint8 HWC, batch %lld, %d threads\n",
           sl_version_string(), preset_names[cfg->preset], cfg->list ? cfg->list : cfg->dir,
           cfg->size, cfg->size, (long long)cfg->batch, cfg->threads);
    if (cfg->sweep_images > 0)
        printf("  each configuration for %lld images", (long long)cfg->sweep_images);
    else
        printf("  each configuration for %g s", cfg->sweep_seconds);
    printf(" of the %lld files (%.1f MB) repeated; the io backend was %s\n",
           (long long)pl->n, (double)pl->bytes / 1e6, io_name(auto_run(sw)->io_backend));
    if (sw->rounds > 1)
        printf("  %d rounds; each row is its configuration's median run (range: all rounds)\n",
               sw->rounds);
    print_consumer(cfg);
    sweep_print_table(stdout, sw->rows, sw->n, sum);
    print_final_knobs(&auto_run(sw)->series);
}

static int report_sweep(sweep *sw, const path_list *pl)
{
    const config *cfg = &sw->auto_cfg;
    sweep_summary sum = sweep_summarize(sw->rows, sw->n, SWEEP_NEAR_BEST);
    char *json = make_sweep_json(sw, pl, &sum, false);
    char *full = cfg->json_path ? make_sweep_json(sw, pl, &sum, true) : NULL;
    if (!json || (cfg->json_path && !full)) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        free(json);
        free(full);
        return -1;
    }
    print_sweep(sw, pl, &sum);
    printf("%s\n", json);
    fflush(stdout);
    int rc = full ? write_file(cfg->json_path, full) : 0;
    if (rc == 0 && cfg->plot_path)
        rc = plot_sweep(sw, &sum);
    free(json);
    free(full);
    return rc;
}

/* The files are read once, untimed, first: the first configuration should
 * not be the one that pays for a cold page cache. */
int bench_sweep(const config *cfg, sl_dataset *src)
{
    path_list pl = {0};
    sweep *sw = calloc(1, sizeof *sw);
    int rc = sw ? list_files(cfg, &pl) : -1;
    if (!sw)
        fprintf(stderr, "sluice-bench: out of memory\n");
    if (rc == 0)
        rc = run_sweep(cfg, src, sw);
    if (rc == 0)
        auto_run(sw)->files = (int64_t)pl.n;
    if (rc == 0)
        rc = report_sweep(sw, &pl);
    for (int r = 0; sw && r < sw->rounds; r++)
        run_state_free(&sw->autotune[r]);
    free(sw);
    path_list_free(&pl);
    sl_dataset_free(src);
    return rc < 0 ? 1 : 0;
}
