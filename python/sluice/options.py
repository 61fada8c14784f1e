"""Iterator options (sl_options), as a plain Python value."""

from ._errors import make_error
from ._lib import lib

# sl_option keys, in include/sluice.h order.
_KEYS = {
    "threads": 0,
    "ram_budget": 1,
    "error_policy": 2,
    "error_max_ppm": 3,
    "seed": 4,
    "deterministic": 5,
    "error_log_limit": 6,
    "io_backend": 7,
    "io_depth": 8,
    "autotune": 9,
    "cpu_budget": 10,
    "stall_target_ppm": 11,
    "trace_events": 12,
    "autotune_log": 13,
    "epoch": 14,
    "max_record_bytes": 15,
    "profile": 16,
}

_CHOICES = {
    "error_policy": {"fail": 0, "skip": 1, "skip_rate": 2},
    "io_backend": {"auto": 0, "uring": 1, "io_uring": 1, "pread": 2},
    "profile": {"default": 0, "edge": 1},
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
                rc = lib.sl_options_set(opts, _KEYS[name], self._c_value(name, value))
                if rc < 0:
                    raise make_error(rc, "option %s=%r: %s" % (name, value,
                                                              lib.sl_last_error().decode()))
        except BaseException:
            lib.sl_options_free(opts)
            raise
        return opts
