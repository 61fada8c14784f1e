"""C error codes as Python exceptions.

Every failure of the library becomes an ``sluice.Error`` (or one of its
subclasses, one per SL_E* code) carrying the code and the C message, which
for element errors begins with the op and names the file:
``map_image: /data/train/n01/x.jpg: not a JPEG file``.
"""


class Error(Exception):
    """A failure reported by libsluice. ``code`` is the negative SL_E* value."""

    code = None

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


# SL_ERRNO_MAP in include/sluice.h; codes are ABI and only ever appended.
_CODES = [
    (-1, "OutOfMemoryError"),
    (-2, "InvalidArgumentError"),
    (-3, "InputOutputError"),
    (-4, "NotFoundError"),
    (-5, "CorruptDataError"),
    (-6, "ShapeError"),
    (-7, "DTypeError"),
    (-8, "CanceledError"),
    (-9, "BusyError"),
    (-10, "OutOfRangeError"),
    (-11, "UnsupportedError"),
    (-12, "CallbackError"),
    (-13, "TooManyErrorsError"),
    (-14, "StateError"),
    (-15, "InternalError"),
]

_BY_CODE = {}
for _code, _name in _CODES:
    _cls = type(_name, (Error,), {"__doc__": "SL_E error %d." % _code, "__module__": "sluice"})
    _cls.code = _code
    globals()[_name] = _cls
    _BY_CODE[_code] = _cls
del _code, _name, _cls

Error.__module__ = "sluice"
__all__ = ["Error"] + [name for _, name in _CODES]


# Python prints and drops an exception raised inside __del__ or a ctypes
# callback, so a Ctrl-C that lands while an array's element is being released
# would be lost. Those places set this flag instead, and the next iteration
# step raises the KeyboardInterrupt.
pending_interrupt = [False]


def raise_pending_interrupt():
    if pending_interrupt[0]:
        pending_interrupt[0] = False
        raise KeyboardInterrupt


def make_error(code, message):
    """The exception for a negative code (Error itself for an unknown one)."""
    return _BY_CODE.get(code, Error)(code, message)
