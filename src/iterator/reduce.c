/* Reductions over a whole pass, on the calling thread: tf.data's reduce
 * and get_single_element, for a program that wants one value rather than
 * a stream (an evaluation loop's totals, a dataset of one config). */
#include <stdio.h>
#include "iterator.h"

SL_API int sl_reduce(sl_dataset *ds, const sl_options *opts, sl_element *initial,
                     sl_reduce_fn fn, void *user, sl_element **out)
{
    if (!ds || !initial || !fn || !out)
        return sl__set_error(SL_EINVAL, "reduce: NULL argument");
    *out = NULL;
    sl_iterator *it = sl_iterator_create(ds, opts);
    if (!it)
        return sl_last_error_code();
    sl_element *state = sl_element_retain(initial), *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        sl_element *next = NULL;
        sl_clear_error();
        rc = fn(state, el, &next, user);
        sl_element_release(el);
        if (rc == 0 && !next)
            rc = sl__set_error(SL_ECALLBACK, "reduce: the function returned 0 without a state");
        if (rc < 0) {
            if (!sl__error_msg()[0])
                sl__set_error(rc, "reduce: the function failed: %s", sl_strerror(rc));
            break;
        }
        sl_element_release(state);
        state = next;
    }
    if (rc < 0 && rc != SL_ECALLBACK && sl_iterator_errmsg(it)[0])
        sl__set_error_str(rc, sl_iterator_errmsg(it));
    sl_iterator_free(it);
    if (rc != SL_EOF) {
        sl_element_release(state);
        return rc;
    }
    *out = state;
    return 0;
}

SL_API int sl_get_single_element(sl_dataset *ds, const sl_options *opts,
                                 sl_element **out)
{
    if (!ds || !out)
        return sl__set_error(SL_EINVAL, "get_single_element: NULL argument");
    *out = NULL;
    sl_iterator *it = sl_iterator_create(ds, opts);
    if (!it)
        return sl_last_error_code();
    sl_element *el = NULL, *more = NULL;
    int rc = sl_next(it, &el);
    if (rc == 0)
        rc = sl_next(it, &more);
    if (rc == SL_EOF && !el)
        rc = sl__set_error(SL_EINVAL, "get_single_element: the dataset was empty; it must "
                           "have exactly one element");
    else if (rc == 0)
        rc = sl__set_error(SL_EINVAL, "get_single_element: the dataset had more than one "
                           "element; it must have exactly one");
    else if (rc < 0)
        sl__set_error_str(rc, sl_iterator_errmsg(it));
    sl_element_release(more);
    sl_iterator_free(it);
    if (rc != SL_EOF) {
        sl_element_release(el);
        return rc;
    }
    *out = el;
    return 0;
}
