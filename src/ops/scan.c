/* scan(initial_state, fn): a map with a state carried from element to
 * element (tf.data's scan): fn(state, element) gives the new state and
 * the output. Runs on the pulling thread, one element at a time. The
 * state is an element, so a saved position holds how many input elements
 * were taken; restored, the skeleton replays them through fn, from the
 * start, to rebuild the state (fn must give the same for the same input,
 * which its per-element random stream does). */
#include "../graph/sync.h"

typedef struct scan_ds {
    sl_dataset base;
    sl_element *initial;
    sl_scan_fn fn;
    void *user;
} scan_ds;

typedef struct scan_iter {
    sl__sync_iter u;
    int64_t pulled;
    bool done;
    uint64_t seed;
    sl_element *state;
} scan_iter;

/* One input element through fn: 0 with the output in *out (NULL: drop it),
 * or the input's or fn's error (the state unchanged). */
static int step(scan_iter *it, sl_element **out)
{
    const scan_ds *d = (const scan_ds *)it->u.base.ds;
    sl_element *el;
    int rc = sl__iter_next(it->u.in, &el);
    if (rc == SL_EOF)
        it->done = true;
    if (rc)
        return rc;
    sl_map_ctx ctx;
    sl__map_ctx_begin(&ctx, it->u.base.ds, it->seed, it->u.base.key, it->u.base.epoch,
                      it->pulled++);
    sl_clear_error();
    sl_element *state = NULL, *result = NULL;
    rc = d->fn(&ctx, it->state, el, &state, &result, d->user);
    sl__map_ctx_end(&ctx);
    if (rc == 0 && (!state || !result))
        rc = sl__set_error(SL_ECALLBACK, "the function returned 0 without a state and a value");
    if (rc < 0) {
        sl_element_release(state);
        sl_element_release(result);
        if (it->u.replaying && rc != SL_ENOMEM)
            rc = 0; /* the policy skipped it before: again */
        else if (!sl__error_msg()[0])
            sl__set_error(rc, "scan function failed: %s", sl_strerror(rc));
        if (rc) {
            sl__element_error_prefix(el);
            sl__error_prefix(sl_dataset_name(it->u.base.ds));
        }
        sl_element_release(el);
        return rc;
    }
    sl_element_release(el);
    sl_element_release(it->state);
    it->state = state;
    if (out)
        *out = result;
    else
        sl_element_release(result);
    return 0;
}

static int scan_next(sl__iter *base, sl_element **out)
{
    scan_iter *it = (scan_iter *)base;
    while (!it->done) {
        int rc = step(it, out);
        if (rc == 0) {
            base->ok_count++;
            return 0;
        }
        if (rc == SL_EOF || rc == SL__AGAIN || (rc = sl__policy(base, rc)) != 0)
            return rc;
    }
    return SL_EOF;
}

static int scan_replay(sl__sync_iter *u)
{
    return step((scan_iter *)u, NULL);
}

static int scan_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    scan_iter *it = (scan_iter *)u;
    it->seed = sl__node_seed(&u->base, -1);
    it->state = sl_element_retain(((const scan_ds *)u->base.ds)->initial);
    return 0;
}

static void scan_fini(sl__sync_iter *u)
{
    sl_element_release(((scan_iter *)u)->state);
}

static int64_t scan_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static void scan_destroy(sl_dataset *ds)
{
    sl_element_release(((scan_ds *)ds)->initial);
}

static const sl__field scan_state[] = {
    SL__FIELD_I64(scan_iter, pulled, 0, INT64_MAX),
    SL__FIELD_BOOL(scan_iter, done),
};

/* No parameters to hash: the name stands for fn and the state. */
static const sl__sync_def scan_def = {
    .node = {.kind = "scan", SL__SYNC_NODE, .cardinality = scan_cardinality,
             .destroy = scan_destroy},
    .iter = {SL__SYNC_ITER(scan_next)},
    .iter_size = sizeof(scan_iter),
    SL__SYNC_STATE(scan_state),
    SL__SYNC_REPLAY(scan_replay, "pulled", "done"),
    .start = scan_start,
    .fini = scan_fini,
};

SL_API sl_dataset *sl_scan(sl_dataset *in, const char *name, sl_element *initial_state,
                           sl_scan_fn fn, void *user)
{
    scan_ds *d = (scan_ds *)sl__dataset_new(&scan_def.node, sizeof *d, in);
    if (!d)
        return NULL;
    if (!fn || !initial_state)
        return sl__dataset_fail(&d->base, SL_EINVAL, "scan: NULL function or state");
    if (sl__dataset_set_name(&d->base, name) < 0)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "scan: out of memory");
    d->initial = sl_element_retain(initial_state);
    d->fn = fn;
    d->user = user;
    return &d->base;
}
