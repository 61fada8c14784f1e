/*
 * A sweep's results, apart from running it (sluice_bench_sweep.c): the
 * summary (best, leanest near it, autotune), each row's name, the text
 * table and the JSON. The plot (sluice_bench_plot.c) reads them too.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "sluice_bench.h"

/* Peaks this close are the same memory (a batch's worth of difference
 * is not noise; a few KiB of pool rounding is). */
#define SAME_MEMORY 0.02

static bool is_auto(const sweep_row *r)
{
    return r->knob[KNOB_IMAGE] == SL_AUTOTUNE;
}

static int64_t units(const sweep_row *r)
{
    int64_t sum = 0;
    for (int k = 0; k < KNOB_PREFETCH; k++)
        sum += r->knob[k];
    return sum;
}

/* Less memory first; on a tie, fewer tasks in flight, then less depth. */
static bool leaner(const sweep_row *a, const sweep_row *b)
{
    double pa = (double)a->peak_buffered, pb = (double)b->peak_buffered;
    if (fabs(pa - pb) > SAME_MEMORY * fmax(pa, pb))
        return pa < pb;
    if (units(a) != units(b))
        return units(a) < units(b);
    return a->knob[KNOB_PREFETCH] < b->knob[KNOB_PREFETCH];
}

sweep_summary sweep_summarize(const sweep_row *rows, int n, double near)
{
    sweep_summary sum = {.best = -1, .smallest = -1, .autotune = -1, .near = near};
    bool confirmed = false;
    for (int i = 0; i < n; i++)
        confirmed |= rows[i].confirmed;
    for (int i = 0; i < n; i++) {
        if (is_auto(&rows[i]))
            sum.autotune = i;
        else if ((rows[i].confirmed || !confirmed) &&
                 (sum.best < 0 || rows[i].images_per_s > rows[sum.best].images_per_s))
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

/* "parse 1, map_image 2, prefetch 4": the knobs the row sets. */
void sweep_row_name(char *buf, size_t size, const sweep_row *r)
{
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < NKNOBS && len < size; k++) {
        if (!r->knob[k])
            continue;
        int n = r->knob[k] == SL_AUTOTUNE
                    ? snprintf(buf + len, size - len, "%s%s auto", len ? ", " : "", knob_label[k])
                    : snprintf(buf + len, size - len, "%s%s %lld", len ? ", " : "", knob_label[k],
                               (long long)r->knob[k]);
        len += n > 0 ? (size_t)n : 0;
    }
}

/* ---- the table ---- */

static void rounds_range(const sweep_row *r, double *lo, double *hi)
{
    *lo = *hi = r->images_per_s;
    for (int q = 0; q < r->rounds; q++) {
        *lo = fmin(*lo, r->round_images_per_s[q]);
        *hi = fmax(*hi, r->round_images_per_s[q]);
    }
}

static void row_line(FILE *out, const sweep_row *r, const bool *shown, const char *mark)
{
    for (int k = 0; k < NKNOBS; k++) {
        if (!shown[k])
            continue;
        if (r->knob[k] == SL_AUTOTUNE)
            fprintf(out, "  %11s", "auto");
        else
            fprintf(out, "  %11lld", (long long)r->knob[k]);
    }
    fprintf(out, "  %10.1f", r->images_per_s);
    if (r->rounds > 1) {
        double lo, hi;
        rounds_range(r, &lo, &hi);
        fprintf(out, "  %6.0f-%-6.0f", lo, hi);
    } else {
        fprintf(out, "  %13s", "");
    }
    fprintf(out, "  %7.1f  %9.1f  %9.1f", 100 * r->stall_fraction, 100 * r->stall_after_first,
            (double)r->peak_buffered / (1 << 20));
    if (isfinite(r->convergence_s))
        fprintf(out, "  %11.1f", r->convergence_s);
    else
        fprintf(out, "  %11s", "-");
    fprintf(out, "  %s\n", mark);
}

static const char *row_mark(const sweep_row *rows, int i, const sweep_summary *sum)
{
    if (i == sum->best)
        return i == sum->smallest ? "<- best static, leanest near it" : "<- best static";
    if (i == sum->smallest)
        return "<- leanest near best";
    return rows[i].confirmed && !is_auto(&rows[i]) ? "<- candidate" : "";
}

void sweep_print_table(FILE *out, const sweep_row *rows, int n, const sweep_summary *sum)
{
    bool shown[NKNOBS] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < NKNOBS; k++)
            shown[k] |= rows[i].knob[k] != 0;
    for (int k = 0; k < NKNOBS; k++)
        if (shown[k])
            fprintf(out, "  %11s", knob_label[k]);
    fprintf(out, "  %10s  %13s  %7s  %9s  %9s  %11s\n", "images/s", "rounds", "stall %",
            "after 1st", "peak MiB", "converged s");
    for (int i = 0; i < n; i++)
        row_line(out, &rows[i], shown, row_mark(rows, i, sum));
    if (sum->best < 0)
        return;
    char name[160];
    const sweep_row *b = &rows[sum->best];
    sweep_row_name(name, sizeof name, b);
    fprintf(out, "  %-22s %s: %.1f images/s, stall %.1f%% (%.1f%% after the first batch), "
            "peak buffered %.1f MiB\n", "best static", name, b->images_per_s,
            100 * b->stall_fraction, 100 * b->stall_after_first,
            (double)b->peak_buffered / (1 << 20));
    if (sum->smallest >= 0) {
        const sweep_row *s = &rows[sum->smallest];
        sweep_row_name(name, sizeof name, s);
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

static void json_knobs(FILE *f, const sweep_row *r)
{
    bool first = true;
    for (int k = 0; k < NKNOBS; k++) {
        if (!r->knob[k])
            continue;
        fprintf(f, "%s\"%s\":", first ? "" : ",", knob_json[k]);
        if (r->knob[k] == SL_AUTOTUNE)
            fputs("\"auto\"", f);
        else
            fprintf(f, "%lld", (long long)r->knob[k]);
        first = false;
    }
}

static void json_config_name(FILE *f, const sweep_row *r)
{
    fputc('{', f);
    json_knobs(f, r);
    fputc('}', f);
}

static void json_row(FILE *f, const sweep_row *r)
{
    fputc('{', f);
    json_knobs(f, r);
    fprintf(f, ",\"confirmed\":%s,\"images\":%lld,\"seconds\":", r->confirmed ? "true" : "false",
            (long long)r->images);
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
