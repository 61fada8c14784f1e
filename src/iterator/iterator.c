/*
 * The public iterator: the top of the library, and the only place that
 * wires the layers together. Creating one sets up the tree (graph/),
 * makes the root node iterator, starts the autotune controller
 * (autotune/); sl_next keeps the consumer's counters and trace; the entry
 * points of statistics, report and trace hand the tree to obs/.
 */
#include <stdio.h>
#include <string.h>
#include "../autotune/autotune.h"
#include "../core/clock.h"
#include "../graph/node.h"
#include "../obs/obs.h"
#include "../ops/distribute.h"
#include "iterator.h"

struct sl_iterator {
    sl__tree tree;
    sl__iter *root;
    sl_dataset *ds;
    sl__bytes saved;      /* the last state written, reused */
    int err;
    int64_t last_return_ns; /* when sl_next last returned; 0 before the first call;
                             * negated after SL_AGAIN (the wait goes on) */
    int64_t wait_since_ns;  /* after SL_AGAIN: when the wait began (its trace span) */
    char errmsg[SL__ERRMSG_MAX];
};

/* Consumer waits shorter than this are hand-offs, not stalls: no span. */
#define STALL_SPAN_NS 20000
/* Counter samples for the trace when no controller ticks. */
#define TRACE_SAMPLE_NS 100000000

/* A new iterator; with `restore` (consumed), one that resumes the saved
 * position `info` describes. */
static sl_iterator *create(sl_dataset *ds, const sl_options *opts, sl__restore *restore,
                           const sl__state_info *info)
{
    sl_iterator *it = sl__calloc(1, sizeof *it);
    if (!it) {
        sl__restore_free(restore);
        return NULL;
    }
    int rc = sl__tree_init(&it->tree, opts);
    it->tree.restore = restore;
    if (rc < 0) {
        sl__tree_fini(&it->tree);
        sl__free(it, sizeof *it);
        return NULL;
    }
    it->ds = sl_dataset_retain(ds);
    int64_t epoch = sl_options_get(opts, SL_OPT_EPOCH);
    if (info) { /* a restore, or an elastic one (its records merged, none kept) */
        epoch = info->epoch;
        /* the iterators made after this one go on from its epoch */
        long long next = atomic_load(&ds->next_epoch);
        while (next <= epoch && !atomic_compare_exchange_weak(&ds->next_epoch, &next, epoch + 1)) {
        }
    } else if (epoch < 0) {
        epoch = atomic_fetch_add_explicit(&ds->next_epoch, 1, memory_order_relaxed);
    }
    sl__tree *t = &it->tree;
    if (t->autotune) /* start where the dataset's last iterator ended */
        t->learned = sl__dataset_learned_get(ds, sl_runtime_threads(t->rt), t->cpu_budget);
    if (restore)
        sl__restore_begin(&it->tree);
    rc = sl__iter_make_root(ds, &it->tree, epoch, &it->root);
    sl__restore_end();
    if (rc == 0 && restore) {
        rc = sl__restore_check(&it->tree);
        sl__restore_free(it->tree.restore);
        it->tree.restore = NULL;
        atomic_store(&it->tree.elements, info->elements);
    }
    if (rc == 0)
        rc = sl__autotune_start(&it->tree);
    if (rc < 0) {
        char msg[SL__ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", sl__error_msg());
        sl_iterator_free(it);
        sl__set_error_str(rc, msg);
        return NULL;
    }
    return it;
}

SL_API sl_iterator *sl_iterator_create(sl_dataset *ds, const sl_options *opts)
{
    if (!ds) {
        if (!sl__error_msg()[0])
            sl__set_error(SL_EINVAL, "sl_iterator_create: NULL dataset");
        return NULL;
    }
    return create(ds, opts, NULL, NULL);
}

SL_API int64_t sl_iterator_save(sl_iterator *it, void *buf, size_t cap)
{
    if (!it)
        return sl__set_error(SL_EINVAL, "sl_iterator_save: NULL iterator");
    if (!buf && cap)
        return sl__set_error(SL_EINVAL, "sl_iterator_save: NULL buffer of %zu bytes", cap);
    if (it->err)
        return sl__set_error(SL_ESTATE, "sl_iterator_save: the iterator failed (%s); it has "
                             "no position to save", it->errmsg);
    if (it->last_return_ns < 0) /* nodes hold what they pulled for the element to come */
        return sl__set_error(SL_ESTATE, "sl_iterator_save: sl_next_timeout returned SL_AGAIN "
                             "and the element it waits for has not come: call it until it "
                             "returns that element (or the end), then save");
    /* computed on the first save, then kept by the dataset */
    sl__state_info info = {sl_dataset_fingerprint(it->ds), it->tree.seed_option, it->tree.epoch,
                           atomic_load(&it->tree.elements)};
    int rc = sl__state_write(&it->saved, &info, it->root);
    if (rc < 0) {
        char msg[SL__ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", sl__error_msg());
        return sl__set_error(rc, "sl_iterator_save: %s", msg);
    }
    if (it->saved.n <= cap)
        memcpy(buf, it->saved.p, it->saved.n);
    return (int64_t)it->saved.n;
}

SL_API sl_iterator *sl_iterator_restore(sl_dataset *ds, const void *state, size_t len,
                                        const sl_options *opts)
{
    if (!ds) {
        if (!sl__error_msg()[0])
            sl__set_error(SL_EINVAL, "sl_iterator_restore: NULL dataset");
        return NULL;
    }
    sl__state_info info;
    sl__restore *r;
    if (sl__restore_parse(state, len, &info, &r) < 0)
        return NULL;
    uint64_t fp = sl_dataset_fingerprint(ds);
    int64_t seed = sl_options_get(opts, SL_OPT_SEED), epoch = sl_options_get(opts, SL_OPT_EPOCH);
    int rc = 0;
    if (info.fingerprint != fp)
        rc = sl__set_error(SL_EMISMATCH, "saved state belongs to another pipeline (its "
                           "fingerprint %016llx, this pipeline's %016llx)",
                           (unsigned long long)info.fingerprint, (unsigned long long)fp);
    else if (info.seed != seed)
        rc = sl__set_error(SL_EMISMATCH, "saved state was taken with seed %lld, these "
                           "options have seed %lld", (long long)info.seed, (long long)seed);
    else if (epoch >= 0 && epoch != info.epoch)
        rc = sl__set_error(SL_EMISMATCH, "saved state is in epoch %lld, these options ask "
                           "for epoch %lld", (long long)info.epoch, (long long)epoch);
    if (rc < 0) {
        sl__restore_free(r);
        return NULL;
    }
    return create(ds, opts, r, &info);
}

SL_API sl_iterator *sl_iterator_restore_ranks(sl_dataset *ds, const void *const *states,
                                              const size_t *lens, int n,
                                              const sl_options *opts)
{
    if (!ds || !states || !lens || n < 1) {
        if (ds || !sl__error_msg()[0])
            sl__set_error(SL_EINVAL, "sl_iterator_restore_ranks: %s",
                          !ds ? "NULL dataset" : "no states");
        return NULL;
    }
    enum { MAX_NODES = 64 };
    const sl_dataset *dist[MAX_NODES];
    uint64_t key[MAX_NODES];
    int nd = sl__distribute_find(ds, dist, MAX_NODES);
    if (nd < 0)
        return NULL;
    if (nd > MAX_NODES) {
        sl__set_error(SL_EUNSUPPORTED, "sl_iterator_restore_ranks: %d distribute nodes, at "
                      "most %d", nd, MAX_NODES);
        return NULL;
    }
    for (int k = 0; k < nd; k++)
        sl__node_key(ds, dist[k], &key[k]);
    if (nd == 0) {
        if (n == 1) /* one state, nothing to merge: an ordinary restore */
            return sl_iterator_restore(ds, states[0], lens[0], opts);
        sl__set_error(SL_EINVAL, "sl_iterator_restore_ranks: %d states, but the pipeline has "
                      "no distribute node over a dataset of known size to split them again",
                      n);
        return NULL;
    }
    sl__restore **r = sl__calloc((size_t)n, sizeof *r);
    const int64_t **recs = sl__calloc((size_t)n, sizeof *recs);
    int *nf = sl__calloc((size_t)n, sizeof *nf);
    sl__distribute_base base[MAX_NODES] = {{0}};
    sl__state_info info = {0}, first = {0};
    int64_t seed = sl_options_get(opts, SL_OPT_SEED), epoch = sl_options_get(opts, SL_OPT_EPOCH);
    int rc = r && recs && nf ? 0 : sl__set_error(SL_ENOMEM, "restore_ranks: out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        if ((rc = sl__restore_parse(states[i], lens[i], &info, &r[i])) < 0)
            break;
        if (i == 0)
            first = info;
        if (info.seed != seed)
            rc = sl__set_error(SL_EMISMATCH, "state %d was taken with seed %lld, these options "
                               "have seed %lld", i, (long long)info.seed, (long long)seed);
        else if (info.epoch != first.epoch || (epoch >= 0 && epoch != info.epoch))
            rc = sl__set_error(SL_EMISMATCH, "state %d is in epoch %lld, state 0 in %lld%s", i,
                               (long long)info.epoch, (long long)first.epoch,
                               epoch >= 0 ? " (or the options ask for another)" : "");
    }
    /* each distribute node: its record in every state, merged */
    /* a state without a node's record: a mixture let that input go when it
     * ended on that rank (the merge counts its share consumed); a state
     * with none of this pipeline's is another pipeline's */
    for (int i = 0; rc == 0 && i < n; i++) {
        int found = 0;
        for (int k = 0; k < nd; k++)
            found += sl__restore_record(r[i], key[k], &nf[i]) != NULL;
        if (!found)
            rc = sl__set_error(SL_EMISMATCH, "state %d has no record of this pipeline's "
                               "distribute nodes (another pipeline's, or other ops above "
                               "distribute)", i);
    }
    for (int k = 0; rc == 0 && k < nd; k++) {
        for (int i = 0; i < n; i++)
            if (!(recs[i] = sl__restore_record(r[i], key[k], &nf[i])))
                nf[i] = 0;
        rc = sl__distribute_merge(dist[k], recs, nf, n, &base[k]);
    }
    for (int i = 0; r && i < n; i++)
        sl__restore_free(r[i]);
    sl__free(r, (size_t)n * sizeof *r);
    sl__free(recs, (size_t)n * sizeof *recs);
    sl__free(nf, (size_t)n * sizeof *nf);
    sl_iterator *it = NULL;
    bool taken = true;
    if (rc == 0) {
        first.elements = 0;
        sl__distribute_pending(base, nd);
        it = create(ds, opts, NULL, &first);
        taken = sl__distribute_pending(NULL, 0);
    }
    for (int k = 0; k < nd; k++)
        sl__distribute_base_free(&base[k]);
    if (it && !taken) {
        sl_iterator_free(it);
        sl__set_error(SL_EINTERNAL, "sl_iterator_restore_ranks: a distribute node was not "
                      "made with the iterator");
        return NULL;
    }
    return it;
}

static void trace_consumer(sl__tree *t, int64_t t0, int64_t t1)
{
    sl__trace_consumer(t);
    if (t1 - t0 >= STALL_SPAN_NS)
        sl__trace_span_named(t, "stall", t0, t1);
    /* the controller samples the counters at each tick; without it, the
     * consumer does, now and then */
    if (!t->at)
        sl__trace_sample(t, t1, TRACE_SAMPLE_NS);
}

/* sl_next with a deadline for this thread's waits (0: none). A call that
 * returns SL_AGAIN is one wait with the call after it: the time between
 * them is the consumer's wait, not its step, and they count as one call. */
static int next(sl_iterator *it, sl_element **out, int64_t deadline)
{
    *out = NULL;
    if (!it)
        return sl__set_error(SL_EINVAL, "sl_next: NULL iterator");
    if (it->err)
        return it->err;
    sl__tree *t = &it->tree;
    int64_t t0 = sl__now_ns();
    atomic_store_explicit(&t->consumer_since_ns, t0, memory_order_release);
    if (it->last_return_ns > 0)
        sl__stat_add_single(&t->consumer_step_ns, t0 - it->last_return_ns);
    else if (it->last_return_ns < 0)
        sl__stat_add_single(&t->consumer_wait_ns, t0 + it->last_return_ns);
    /* (a callback on this thread may iterate another pipeline: its call
     * leaves this one's deadline as it found it) */
    int64_t outer = sl__wait_deadline_ns;
    sl__wait_deadline_ns = deadline;
    int rc = sl__iter_next(it->root, out);
    sl__wait_deadline_ns = outer;
    int64_t t1 = sl__now_ns();
    /* one thread at a time uses the iterator: single writer */
    sl__stat_add_single(&t->consumer_wait_ns, t1 - t0);
    atomic_store_explicit(&t->consumer_since_ns, 0, memory_order_release);
    if (it->last_return_ns >= 0)
        it->wait_since_ns = t0;
    if (rc == SL__AGAIN) {
        it->last_return_ns = -t1;
        return SL_AGAIN;
    }
    it->last_return_ns = t1;
    sl__stat_add_single(&t->consumer_calls, 1);
    if (t->trace)
        trace_consumer(t, it->wait_since_ns, t1);
    if (rc != 0 && !atomic_load_explicit(&t->end_ns, memory_order_relaxed))
        atomic_store_explicit(&t->end_ns, t1, memory_order_relaxed);
    if (rc == 0) {
        atomic_fetch_add_explicit(&it->tree.elements, 1, memory_order_relaxed);
    } else if (rc < 0) {
        it->err = rc;
        snprintf(it->errmsg, sizeof it->errmsg, "%s", sl__error_msg());
        if (!it->errmsg[0])
            snprintf(it->errmsg, sizeof it->errmsg, "%s", sl_strerror(rc));
    }
    return rc;
}

SL_API int sl_next(sl_iterator *it, sl_element **out)
{
    return next(it, out, 0);
}

SL_API int sl_next_timeout(sl_iterator *it, sl_element **out, int64_t timeout_ns)
{
    if (timeout_ns < 0) {
        *out = NULL;
        return sl__set_error(SL_EINVAL, "sl_next_timeout: timeout %lld ns < 0",
                             (long long)timeout_ns);
    }
    int64_t now = sl__now_ns();
    /* a timeout past the clock's range waits as sl_next does */
    return next(it, out, timeout_ns > INT64_MAX - now ? 0 : now + timeout_ns);
}

SL_API const char *sl_iterator_errmsg(const sl_iterator *it)
{
    return it ? it->errmsg : "";
}

SL_API void sl_iterator_free(sl_iterator *it)
{
    if (!it)
        return;
    /* before the nodes whose knobs it moves go; what it learned stays with
     * the dataset for its next iterator */
    sl__learned *learned = NULL;
    sl__autotune_stop(&it->tree, it->err ? NULL : &learned);
    if (learned)
        sl__dataset_learned_keep(it->ds, learned);
    sl__tree_cancel(&it->tree);
    sl__iter_free(it->root);
    sl_dataset_release(it->ds);
    sl__tree_fini(&it->tree);
    sl__bytes_free(&it->saved);
    sl__free(it, sizeof *it);
}

SL_API int64_t sl_iterator_stat(const sl_iterator *it, sl_stat key)
{
    return it ? sl__tree_stat(&it->tree, key) : -1;
}

/* ---- statistics, report, trace: the tree to obs/ ---- */

sl__tree *sl__iterator_tree(const sl_iterator *it)
{
    return (sl__tree *)&it->tree;
}

SL_API sl_stats *sl_iterator_stats(const sl_iterator *it)
{
    if (!it) {
        sl__set_error(SL_EINVAL, "sl_iterator_stats: NULL iterator");
        return NULL;
    }
    return sl__obs_snapshot(sl__iterator_tree(it));
}

SL_API int sl_iterator_report(const sl_iterator *it, FILE *out)
{
    if (!it || !out)
        return sl__set_error(SL_EINVAL, "sl_iterator_report: NULL %s", it ? "stream" : "iterator");
    return sl__obs_report_file(sl__iterator_tree(it), out);
}

SL_API int sl_iterator_report_buf(const sl_iterator *it, char *buf, size_t size)
{
    if (!it)
        return sl__set_error(SL_EINVAL, "sl_iterator_report: NULL iterator");
    if (!buf && size)
        return sl__set_error(SL_EINVAL, "sl_iterator_report_buf: NULL buffer");
    return sl__obs_report_buf(sl__iterator_tree(it), buf, size);
}

SL_API int sl_iterator_trace(const sl_iterator *it, const char *path)
{
    if (!it || !path)
        return sl__set_error(SL_EINVAL, "sl_iterator_trace: NULL %s", it ? "path" : "iterator");
    return sl__obs_trace_write(sl__iterator_tree(it), path);
}
