"""Iterators: one running pass of a dataset (sl_iterator)."""

import _thread
import atexit
import ctypes
import json
import threading
import weakref

from . import _callbacks, _structure, _tensor
from ._constants import SL_AGAIN, SL_ECALLBACK, SL_ENOMEM, SL_EOF, SL_ESTATE, SL_STAT_EPOCH
from ._errors import make_error, pending_interrupt, raise_pending_interrupt
from ._lib import lib, optional
from .options import Options

_MAIN_THREAD = threading.main_thread().ident
_live = weakref.WeakSet()  # open iterators, closed at exit
# On the main thread the wait for an element is cut into slices: Python runs
# signal handlers (Ctrl-C) only between bytecodes, so a thread blocked in one
# long sl_next would not see Ctrl-C until the element is ready; between two
# sl_next_timeout calls it does, with the iterator idle and whole.
_WAIT_SLICE_NS = 50 * 1000 * 1000


class Iterator:
    """A pass over a Dataset: one epoch of it (``epoch``). Iterating yields
    the value of a one-tensor element, or a tuple with one value per tensor
    (see sluice.Array); ``stats()``, ``report()`` and ``trace()`` tell how
    the pipeline is doing. One thread at a time; ``close()`` (or the end
    of a ``with`` block, or garbage collection) cancels in-flight work and
    frees the pipeline; values already yielded stay valid.

    interruptible (default True): when iterating on the main thread, wait for
    each element in slices of 50 ms (sl_next_timeout), so that Ctrl-C raises
    KeyboardInterrupt within one (the iterator stays whole: close it, or
    even go on). False waits in one sl_next call, which Ctrl-C cannot cut
    short; no thread is added either way.

    state: bytes from ``state()`` of an iterator over the same pipeline
    (in this process or another): the pass resumes right after the last
    element that iterator yielded, with the same output from there on.
    StateMismatchError for another pipeline, seed or epoch, CorruptDataError
    for a damaged or truncated state. A list of states (every rank's, from
    one checkpoint of a job with ``distribute``) resumes on any world size
    (sl_iterator_restore_ranks): the new ranks, each passing the same list,
    split what no old rank consumed, so every element of the epoch is
    consumed once across the change; ops above distribute start afresh."""

    def __init__(self, dataset, options=None, interruptible=True, epoch=None, state=None):
        opts = dataset.options.merge(options)
        if epoch is not None:
            opts = opts.merge(Options(epoch=epoch))
        states = None
        if isinstance(state, (list, tuple)):
            states = [bytes(x) for x in state]
            if not states:
                raise ValueError("state: an empty list of states")
        elif state is not None and not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError("state must be bytes (from Iterator.state()) or a list of every "
                            "rank's, not %s" % type(state).__name__)
        c_opts = opts.to_c()
        try:
            if state is None:
                it = lib.sl_iterator_create(dataset._ptr, c_opts)
            elif states is not None:
                n = len(states)
                bufs = (ctypes.c_void_p * n)(*[ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p)
                                               for b in states])
                lens = (ctypes.c_size_t * n)(*[len(b) for b in states])
                it = lib.sl_iterator_restore_ranks(dataset._ptr, bufs, lens, n, c_opts)
            else:
                state = bytes(state)
                it = lib.sl_iterator_restore(dataset._ptr, state, len(state), c_opts)
        finally:
            lib.sl_options_free(c_opts)
        if not it:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        self._it = it
        self._dataset = dataset  # keeps Python callbacks alive
        self._bytes = None  # strings as bytes? (known at the first element)
        self._pack = None  # flat values -> the element's structure (ditto)
        self._interruptible = interruptible
        self._out = ctypes.c_void_p()
        self._out_ref = ctypes.byref(self._out)
        self._pending = None  # an element a KeyboardInterrupt kept from its caller
        self._handing = None  # ... once wrapped, until its value is made
        self.epoch = lib.sl_iterator_stat(it, SL_STAT_EPOCH)
        _live.add(self)

    def __iter__(self):
        return self

    def _pull(self):
        """The code of sl_next, or of sl_next_timeout slices; with 0, the
        element is self._handing. A KeyboardInterrupt raised as a call
        returns an element keeps it (self._pending) for the next call: the
        iterator has passed it, so going on after the interrupt gets it."""
        if self._pending is None:
            out = self._out
            out.value = None
            try:
                if self._interruptible and _thread.get_ident() == _MAIN_THREAD:
                    next_timeout = lib.sl_next_timeout
                    rc = SL_AGAIN
                    while rc == SL_AGAIN:  # a pending Ctrl-C is raised between calls
                        it = self._it
                        if it is None:  # closed by a signal handler meanwhile
                            return SL_EOF
                        rc = next_timeout(it, self._out_ref, _WAIT_SLICE_NS)
                else:
                    rc = lib.sl_next(self._it, self._out_ref)
            except BaseException:
                self._pending, out.value = out.value, None
                raise
            if rc != 0:
                return rc
            self._pending, out.value = out.value, None
        _tensor.ElementRef(self._pending, self)  # moves it to self._handing
        return 0

    def next_element(self):
        """The next element as an ElementRef (for converters such as
        sluice.torch); StopIteration at the end."""
        ref = self._next_ref()
        self._handing = None
        return ref

    def _next_ref(self):
        """The next element, kept as self._handing until the caller has
        made what it returns of it: a KeyboardInterrupt before then leaves
        it for the next call, so iterating on after an interrupt skips no
        element and state() counts none that was not yielded."""
        raise_pending_interrupt()
        if self._it is None:
            raise StopIteration
        if self._handing is None:
            rc = self._pull()
            if rc != 0:
                _callbacks.raise_interrupt(self._dataset._callbacks)
                if rc == SL_EOF:
                    raise StopIteration
                raise self._error(rc)
        _callbacks.raise_interrupt(self._dataset._callbacks)
        return self._handing

    def __next__(self):
        owner = self._next_ref()
        if self._pack is None:  # set last: an interrupt before then redoes it all
            self._bytes = self._dataset.strings == "bytes"
            pack = _structure.packer(_structure.of_dataset(self._dataset._ptr))
            wrap = self._dataset._window  # window(): each value a dataset
            self._pack = (lambda vs: pack([wrap(v) for v in vs])) if wrap else pack
        try:
            value = self._pack(_tensor.element_values(owner, self._bytes))
        except KeyboardInterrupt:
            raise  # the element stays for the next call
        except BaseException:
            self._handing = None
            raise
        self._handing = None
        return value

    def _error(self, rc):
        msg = lib.sl_iterator_errmsg(self._it).decode("utf-8", "replace")
        err = make_error(rc, msg or lib.sl_strerror(rc).decode())
        if rc == SL_ECALLBACK:
            err.__cause__ = _callbacks.cause(self._dataset._callbacks, msg)
        return err

    # ---- checkpoints ----

    def state(self):
        """The position after the last element yielded, as bytes (a few
        hundred): give it to ``Dataset.iterator(state=...)``, here or in a
        later process, to go on from there. Elements computed ahead and not
        yet yielded are not counted. Not while another thread iterates, nor
        right after a KeyboardInterrupt cut a wait short (StateError: take
        the next element first)."""
        it = self._live_it()
        if self._pending is not None or self._handing is not None:
            raise make_error(SL_ESTATE, "state: an element arrived as KeyboardInterrupt was "
                             "raised and has not been yielded yet: iterate once more, then save")
        size = 1024
        while True:
            buf = ctypes.create_string_buffer(size)
            n = lib.sl_iterator_save(it, buf, size)
            if n < 0:
                raise make_error(n, lib.sl_last_error().decode("utf-8", "replace"))
            if n <= size:
                return buf.raw[:n]
            size = n

    # ---- statistics ----

    def _live_it(self):
        if self._it is None:
            raise make_error(SL_ESTATE, "the iterator is closed")
        return self._it

    def stat(self, key):
        """One sl_stat counter by number (sl_iterator_stat)."""
        return lib.sl_iterator_stat(self._live_it(), key)

    def stats(self):
        """A snapshot of the pipeline's statistics: a dict parsed from
        sl_stats_json (per-node elements, busy and wait fractions, buffer
        occupancy, knobs; global stall fraction, throughput, memory)."""
        it = self._live_it()
        s = optional(lib, "sl_iterator_stats")(it)
        if not s:
            raise make_error(lib.sl_last_error_code() or SL_ENOMEM,
                             "sl_iterator_stats failed: %s" % lib.sl_last_error().decode())
        try:
            text = optional(lib, "sl_stats_json")(s)
            if text is None:
                raise make_error(SL_ENOMEM, "sl_stats_json failed")
            return json.loads(text.decode("utf-8", "replace"))
        finally:
            optional(lib, "sl_stats_free")(s)

    def report(self):
        """The readable table of nodes that names the bottleneck
        (sl_iterator_report), as a str."""
        it = self._live_it()
        fn = optional(lib, "sl_iterator_report_buf")
        size = 4096
        while True:
            buf = ctypes.create_string_buffer(size)
            n = fn(it, buf, size)
            if n < 0:
                raise make_error(n, "report: %s" % lib.sl_strerror(n).decode())
            if n < size:
                return buf.value.decode("utf-8", "replace")
            size = n + 1

    def trace(self, path):
        """Writes the recorded events (Options(trace_events=N)) as Chrome
        trace-event JSON for Perfetto / chrome://tracing."""
        import os
        rc = optional(lib, "sl_iterator_trace")(self._live_it(), os.fsencode(path))
        if rc < 0:
            raise make_error(rc, "trace %s: %s" % (path, lib.sl_strerror(rc).decode()))

    # ---- lifetime ----

    def close(self):
        """Cancels and frees the pipeline (idempotent)."""
        it, self._it = self._it, None
        if not it:
            return
        _live.discard(self)
        pending, self._pending, self._handing = self._pending, None, None
        if pending:
            lib.sl_element_release(pending)
        lib.sl_iterator_free(it)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except KeyboardInterrupt:  # see sluice._errors.pending_interrupt
            pending_interrupt[0] = True
        except Exception:
            pass


@atexit.register
def _close_all():
    # Worker threads must not call into Python callbacks once the interpreter
    # is being torn down: free every pipeline while it still runs.
    for it in list(_live):
        it.close()
