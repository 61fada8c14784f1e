"""How a Python function called from C reports that it failed.

C cannot take a Python exception: one raised in a map or filter function,
a generator or an interleave's map_func becomes the element's error,
SL_ECALLBACK with "TypeName: text" as its message, and iteration raises a
CallbackError. The callback object keeps what iteration needs on top of
that: the exception itself, to chain as the CallbackError's ``__cause__``,
and a KeyboardInterrupt or SystemExit, to re-raise as what it is rather
than as an element error.

The writer is ``Callback.note_failure``, run inside the C call; the readers
are ``raise_interrupt`` and ``cause``, run by the iterator on its thread
over the dataset's callbacks.
"""

import collections
import itertools

from ._constants import SL_ECALLBACK
from ._lib import lib

_seq = itertools.count()  # orders the failures of every callback


class Callback:
    """Base of the objects a dataset keeps for C to call (Dataset._callbacks).

    interrupt       a KeyboardInterrupt or SystemExit a call caught, until
                    raise_interrupt re-raises it
    last_exception  the latest other exception a call raised, and its
    last_seq        place among the failures of every callback
    recent          (message text, exception) of the latest 16
    """

    def __init__(self):
        self.interrupt = None
        self.last_exception = None
        self.last_seq = -1
        self.recent = collections.deque(maxlen=16)

    def note_failure(self, e):
        """Records exception e and returns the C message for it, as bytes."""
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            self.interrupt = e
            return b"interrupted"
        text = "%s: %s" % (type(e).__name__, e)
        self.last_exception, self.last_seq = e, next(_seq)
        self.recent.append((text, e))
        return text.encode("utf-8", "replace")

    def element_error(self, ctx, e):
        """For a map or filter function: e as the element's error
        (sl_map_ctx_error); returns what the function returns to C."""
        return lib.sl_map_ctx_error(ctx, SL_ECALLBACK, self.note_failure(e))

    def last_error(self, e):
        """For functions that report through sl_last_error (a generator,
        an interleave's map_func): e as this thread's last error; returns
        SL_ECALLBACK."""
        return lib.sl_set_last_error(SL_ECALLBACK, self.note_failure(e))


def raise_interrupt(callbacks):
    """Re-raises a KeyboardInterrupt that hit a callback run on this thread
    (a filter without an async node above it runs on the thread calling
    sl_next), rather than letting it pass for an element error."""
    for cb in callbacks:
        if cb.interrupt is not None:
            exc, cb.interrupt = cb.interrupt, None
            raise exc


def cause(callbacks, msg=""):
    """The exception behind the SL_ECALLBACK error whose message is msg:
    the one whose text the message carries (calls run ahead of the
    consumer: the latest may belong to a later element), else the latest."""
    for cb in callbacks:
        for text, exc in reversed(cb.recent):
            if text in msg:
                return exc
    latest = None
    for cb in callbacks:
        if cb.last_exception is not None and (latest is None or cb.last_seq > latest.last_seq):
            latest = cb
    return latest.last_exception if latest else None
