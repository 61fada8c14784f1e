/*
 * What a sweep found: the best static configuration, the leanest one that
 * comes close to it, and how the autotune run compares with both, as a
 * table and as JSON. Also the JSON of a time series, which a sweep and a
 * single run both write.
 */
#include <math.h>
#include <stdio.h>
#include "sluice_bench.h"

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

static void json_column(FILE *f, const char *name, const series *s,
                        double (*value)(const series *, size_t))
{
    fprintf(f, ",\"%s\":[", name);
    for (size_t i = 0; i < s->n; i++) {
        fputs(i ? "," : "", f);
        json_number(f, value(s, i));
    }
    fputc(']', f);
}

static double column_t(const series *s, size_t i)
{
    return s->t[i];
}

static double column_buffered(const series *s, size_t i)
{
    return s->buffered[i];
}

void series_json(FILE *f, const series *s)
{
    fprintf(f, ",\"series\":{\"period_s\":%.3f", SERIES_PERIOD_S);
    json_column(f, "t", s, column_t);
    json_column(f, "images_per_s", s, series_sample_rate);
    json_column(f, "stall_fraction", s, series_sample_stall);
    json_column(f, "measured_stall_fraction", s, series_sample_measured_stall);
    json_column(f, "buffered_bytes", s, column_buffered);
    fputs(",\"knobs\":{", f);
    for (int k = 0; k < s->nknobs; k++) {
        fputs(k ? "," : "", f);
        json_string(f, s->knobs[k].label);
        fputs(":[", f);
        for (size_t i = 0; i < s->n; i++) {
            fputs(i ? "," : "", f);
            json_number(f, s->knobs[k].v[i]);
        }
        fputc(']', f);
    }
    fprintf(f, "},\"incomplete\":%s}", s->arrivals_lost || s->samples_lost ? "true" : "false");
}
