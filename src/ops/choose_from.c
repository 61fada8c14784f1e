/* choose_from(choice, inputs): for each int64 c the choice dataset gives,
 * the next element of input c (tf.data's choose_from_datasets). An input
 * that ends is let go; a choice of it is passed over (or, with
 * SL_STOP_ON_EMPTY, ends the whole), and when every input has ended, so
 * has this. sl_sample_from is this over a weighted random choice.
 *
 * Input 0 is the choice dataset, inputs 1 to n the ones chosen from. An
 * input that has ended has no iterator and so no saved record: restored,
 * it is not made again. */
#include <stdio.h>
#include <string.h>
#include "../graph/sync.h"

typedef struct choose_from_iter {
    sl__sync_iter u;
    bool done;
    int alive; /* inputs chosen from that have not ended */
} choose_from_iter;

typedef struct choose_from_ds {
    sl_dataset base;
    int64_t flags;
} choose_from_ds;

static void end(choose_from_iter *it)
{
    for (int i = 0; i < it->u.base.ds->ninputs; i++)
        sl__sync_drop_input(&it->u, i);
    it->alive = 0;
    it->done = true;
}

/* The next choice: 0 with an input index in *c, SL_EOF, or an error. */
static int next_choice(choose_from_iter *it, int64_t *c)
{
    int n = it->u.base.ds->ninputs - 1;
    sl_element *el;
    int rc = sl__iter_next(it->u.ins[0], &el);
    if (rc)
        return rc;
    const sl_tensor *t = el->n == 1 ? sl_element_tensor(el, 0) : NULL;
    if (!t || t->ndim != 0 || (t->dtype != SL_INT64 && t->dtype != SL_INT32)) {
        sl_element_release(el);
        return sl__set_error(SL_EDTYPE, "choose_from: the choice dataset must give scalar "
                             "int64 (or int32) elements");
    }
    *c = sl_tensor_int64(t);
    sl_element_release(el);
    if (*c < 0 || *c >= n)
        return sl__set_error(SL_EINVAL, "choose_from: choice %lld is outside [0, %d)",
                             (long long)*c, n);
    return 0;
}

static int choose_from_next(sl__iter *base, sl_element **out)
{
    choose_from_iter *it = (choose_from_iter *)base;
    bool stop = ((const choose_from_ds *)base->ds)->flags & SL_STOP_ON_EMPTY;
    while (!it->done) {
        if (it->alive == 0) {
            end(it);
            break;
        }
        int64_t c = 0;
        int rc = next_choice(it, &c);
        if (rc == SL_EOF) {
            end(it);
            break;
        }
        if (rc)
            return rc;
        sl__iter *in = it->u.ins[1 + c];
        if (!in) { /* ended before */
            if (stop)
                end(it);
            continue;
        }
        rc = sl__iter_next(in, out);
        if (rc != SL_EOF)
            return rc;
        sl__sync_drop_input(&it->u, (int)(1 + c));
        it->alive--;
        if (stop)
            end(it);
    }
    return SL_EOF;
}

/* Every input is made, but on a resume those that had ended. */
static int choose_from_start(sl__sync_iter *u, bool resumed)
{
    choose_from_iter *it = (choose_from_iter *)u;
    const sl_dataset *ds = u->base.ds;
    for (int i = 0; !it->done && i < ds->ninputs; i++) {
        if (resumed && sl__iter_input_saved(&u->base, i) == 0)
            continue;
        int rc = sl__iter_make_input(&u->base, i, u->base.epoch, &u->ins[i]);
        if (rc < 0)
            return rc;
        it->alive += i > 0;
    }
    if (resumed && !it->done && !u->ins[0])
        return sl__set_error(SL_ECORRUPT, "saved state: choose_from has no choice record");
    return 0;
}

static int64_t choose_from_cardinality(const sl_dataset *ds)
{
    /* tf.data's: known only when nothing can end early */
    int64_t c = sl_dataset_cardinality(ds->inputs[0]);
    for (int i = 1; i < ds->ninputs; i++)
        if (sl_dataset_cardinality(ds->inputs[i]) != SL_INFINITE)
            return c == 0 ? 0 : SL_UNKNOWN;
    return c;
}

static sl_structure *choose_from_structure(const sl_dataset *ds)
{
    sl_structure *s = NULL;
    for (int i = 1; i < ds->ninputs; i++) {
        const sl_structure *t = sl_dataset_structure(ds->inputs[i]);
        if (!t) {
            sl_structure_release(s);
            return NULL;
        }
        sl_structure *u = sl__structure_unify(s, t);
        sl_structure_release(s);
        if (!(s = u))
            return NULL;
    }
    return s;
}

static const sl__field choose_from_state[] = {SL__FIELD_BOOL(choose_from_iter, done)};
static const sl__field choose_from_params[] = {SL__PARAM(choose_from_ds, flags)};

static const sl__sync_def choose_from_def = {
    .node = {.kind = "choose_from", SL__SYNC_NODE, .cardinality = choose_from_cardinality,
             .structure = choose_from_structure},
    .iter = {SL__SYNC_ITER(choose_from_next)},
    .iter_size = sizeof(choose_from_iter),
    SL__SYNC_STATE(choose_from_state),
    SL__SYNC_PARAMS(choose_from_params),
    .flags = SL__SYNC_OWN_INPUT,
    .start = choose_from_start,
};

SL_API sl_dataset *sl_choose_from(sl_dataset *choice, sl_dataset *const *inputs, int n,
                                  unsigned flags)
{
    sl_dataset **all = n >= 1 && n < SL__MAX_INPUTS && inputs
                           ? sl__calloc((size_t)n + 1, sizeof *all) : NULL;
    if (!all) {
        sl_dataset_release(choice);
        for (int i = 0; inputs && i < n && i < SL__MAX_INPUTS; i++)
            sl_dataset_release(inputs[i]);
        sl__set_error(n < 1 || n >= SL__MAX_INPUTS || !inputs ? SL_EINVAL : SL_ENOMEM,
                      "choose_from: %d inputs (1 to %d)", n, SL__MAX_INPUTS - 1);
        return NULL;
    }
    all[0] = choice;
    memcpy(all + 1, inputs, (size_t)n * sizeof *all);
    choose_from_ds *d = (choose_from_ds *)sl__dataset_new_n(&choose_from_def.node, sizeof *d,
                                                             all, n + 1);
    sl__free(all, ((size_t)n + 1) * sizeof *all);
    if (!d)
        return NULL;
    if (flags & ~SL_STOP_ON_EMPTY)
        return sl__dataset_fail(&d->base, SL_EINVAL, "choose_from: unknown flags %#x", flags);
    d->flags = flags;
    /* inputs whose elements cannot be one dataset's are refused now */
    sl_structure *s = NULL;
    for (int i = 1; i <= n; i++) {
        const sl_structure *t = sl_dataset_structure(d->base.inputs[i]);
        sl_structure *u = t ? sl__structure_unify(s, t) : sl_structure_retain(s);
        if (t && !u) {
            sl_structure_release(s);
            char msg[512];
            int code = sl_last_error_code();
            snprintf(msg, sizeof msg, "%s", sl__error_msg());
            return sl__dataset_fail(&d->base, code, "choose_from: input %d: %s", i - 1, msg);
        }
        sl_structure_release(s);
        s = u;
    }
    sl_structure_release(s);
    return &d->base;
}
