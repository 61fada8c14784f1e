"""Iterator options (sl_options), as a plain Python value."""

import os

from ._constants import (SL_ERRORS_FAIL, SL_ERRORS_SKIP, SL_ERRORS_SKIP_RATE, SL_IO_AUTO,
                         SL_IO_PREAD, SL_IO_URING, SL_OPT_AUTOTUNE, SL_OPT_AUTOTUNE_LOG,
                         SL_OPT_CPU_BUDGET, SL_OPT_DETERMINISTIC, SL_OPT_EPOCH,
                         SL_OPT_ERROR_LOG_LIMIT, SL_OPT_ERROR_MAX_PPM, SL_OPT_ERROR_POLICY,
                         SL_OPT_IO_BACKEND, SL_OPT_IO_DEPTH, SL_OPT_MAX_RECORD_BYTES,
                         SL_OPT_PROFILE, SL_OPT_RAM_BUDGET, SL_OPT_REMOTE_MAX_ATTEMPTS,
                         SL_OPT_REMOTE_CACHE_BYTES, SL_OPT_REMOTE_RETRY_SECONDS, SL_OPT_SEED, SL_OPT_STALL_TARGET_PPM,
                         SL_OPT_THREADS, SL_OPT_TRACE_EVENTS, SL_PROFILE_DEFAULT, SL_PROFILE_EDGE)
from ._errors import make_error
from ._lib import lib

# sl_option keys, in include/sluice.h order.
_KEYS = {
    "threads": SL_OPT_THREADS,
    "ram_budget": SL_OPT_RAM_BUDGET,
    "error_policy": SL_OPT_ERROR_POLICY,
    "error_max_ppm": SL_OPT_ERROR_MAX_PPM,
    "seed": SL_OPT_SEED,
    "deterministic": SL_OPT_DETERMINISTIC,
    "error_log_limit": SL_OPT_ERROR_LOG_LIMIT,
    "io_backend": SL_OPT_IO_BACKEND,
    "io_depth": SL_OPT_IO_DEPTH,
    "autotune": SL_OPT_AUTOTUNE,
    "cpu_budget": SL_OPT_CPU_BUDGET,
    "stall_target_ppm": SL_OPT_STALL_TARGET_PPM,
    "trace_events": SL_OPT_TRACE_EVENTS,
    "autotune_log": SL_OPT_AUTOTUNE_LOG,
    "epoch": SL_OPT_EPOCH,
    "max_record_bytes": SL_OPT_MAX_RECORD_BYTES,
    "profile": SL_OPT_PROFILE,
    "remote_max_attempts": SL_OPT_REMOTE_MAX_ATTEMPTS,
    "remote_retry_seconds": SL_OPT_REMOTE_RETRY_SECONDS,
    "remote_cache_bytes": SL_OPT_REMOTE_CACHE_BYTES,
    "remote_cache_dir": None,  # a string: its own setter
}

_CHOICES = {
    "error_policy": {"fail": SL_ERRORS_FAIL, "skip": SL_ERRORS_SKIP,
                     "skip_rate": SL_ERRORS_SKIP_RATE},
    "io_backend": {"auto": SL_IO_AUTO, "uring": SL_IO_URING, "io_uring": SL_IO_URING,
                   "pread": SL_IO_PREAD},
    "profile": {"default": SL_PROFILE_DEFAULT, "edge": SL_PROFILE_EDGE},
}


class Options:
    """What an iterator is run with; None leaves the library's default.

    threads         worker threads: 0 shares the process default runtime (one
                    thread per CPU); n > 0 gives the iterator n threads
    ram_budget      cap in bytes on buffered data (0: half of memory)
    error_policy    "fail" (default): a bad element raises from iteration;
                    "skip": drop it, count it, log the first few;
                    "skip_rate": skip while at most error_max_ppm per million
                    elements failed, then raise TooManyErrorsError
    error_max_ppm   for "skip_rate" (default 10000 = 1%)
    seed            global seed; shuffles and crops without their own derive
                    theirs from it
    deterministic   True (default): parallel maps keep input order
    error_log_limit skipped errors logged before going quiet
    io_backend      "auto", "uring" or "pread"
    io_depth        reads in flight per reading node
    autotune        True (default): the controller moves AUTOTUNE knobs
    cpu_budget      worker threads the controller may keep busy at once
    stall_target_ppm consumer stall the controller tolerates (ppm of wall time)
    trace_events    events kept for Iterator.trace() (0: off)
    autotune_log    log every knob change
    epoch           the epoch to run (keys shuffles and crops with the seed);
                    None: each iterator takes its dataset's next epoch
    max_record_bytes the largest TFRecord record or tar member (default 256
                    MiB): a longer one is a corrupt record, refused before
                    anything is allocated
    profile         "default", or "edge" for a small device: one thread
                    (every node runs on the thread that iterates), no
                    autotune, a 64 MiB RAM budget, pread; options given
                    explicitly win over these
    remote_max_attempts  URLs: attempts per request (default 8), counted
                    since it last received a byte; then the error (naming
                    the URL and the status) goes to error_policy
    remote_retry_seconds URLs: how long a request may go without a byte,
                    retries included (default 120)
    remote_cache_dir a folder where shards read from URLs are kept (written
                    whole, then renamed; shared by the processes of a host)
                    and read from at the next epoch; None: no cache
    remote_cache_bytes its size limit (default 0: none); the copies used
                    least recently go first

    Options combine: ``a.merge(b)`` is a with b's non-None fields on top.
    """

    __slots__ = tuple(_KEYS)

    def __init__(self, **kwargs):
        for name in _KEYS:
            setattr(self, name, None)
        for name, value in kwargs.items():
            if name not in _KEYS:
                raise TypeError("unknown option %r (known: %s)" % (name, ", ".join(_KEYS)))
            setattr(self, name, value)

    def items(self):
        return [(n, getattr(self, n)) for n in _KEYS if getattr(self, n) is not None]

    def merge(self, other):
        merged = Options(**dict(self.items()))
        if other is not None:
            for name, value in other.items():
                setattr(merged, name, value)
        return merged

    def __eq__(self, other):
        return isinstance(other, Options) and self.items() == other.items()

    def __repr__(self):
        return "Options(%s)" % ", ".join("%s=%r" % kv for kv in self.items())

    def _c_value(self, name, value):
        choices = _CHOICES.get(name)
        if choices is not None and isinstance(value, str):
            if value not in choices:
                raise ValueError("%s must be one of %s, not %r" % (name, ", ".join(choices), value))
            return choices[value]
        if isinstance(value, bool):
            return int(value)
        if not isinstance(value, int):
            raise TypeError("option %s takes an int, not %r" % (name, value))
        return value

    def to_c(self):
        """A new sl_options (the caller frees it with sl_options_free)."""
        opts = lib.sl_options_create()
        if not opts:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        try:
            for name, value in self.items():
                if name == "remote_cache_dir":
                    rc = lib.sl_options_set_remote_cache_dir(opts, os.fsencode(value))
                else:
                    rc = lib.sl_options_set(opts, _KEYS[name], self._c_value(name, value))
                if rc < 0:
                    raise make_error(rc, "option %s=%r: %s" % (name, value,
                                                              lib.sl_last_error().decode()))
        except BaseException:
            lib.sl_options_free(opts)
            raise
        return opts
