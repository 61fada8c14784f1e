"""C error codes as Python exceptions.

Every failure of the library becomes a ``sluice.Error`` subclass, one per
SL_E* code, carrying the code and the C message, which for element errors
begins with the op and names the file:
``map_image: /data/train/n01/x.jpg: not a JPEG file``.

Each class also derives from the builtin exception a Python program already
catches for that kind of failure, so ``except FileNotFoundError`` or
``except ValueError`` works as it would around ``open()`` or numpy:

=====================  =====================  ==============================
class                  also a                 when
=====================  =====================  ==============================
OutOfMemoryError       MemoryError            an allocation failed
InvalidArgumentError   ValueError             a bad argument or option
InputOutputError       OSError                a read failed
NotFoundError          FileNotFoundError      a file or folder is missing
CorruptDataError       ValueError             a file's bytes are invalid
ShapeError             ValueError             shapes disagree (batch)
DTypeError             TypeError              dtypes disagree
CanceledError          RuntimeError           the pipeline was cancelled
BusyError              BlockingIOError        another writer holds a cache
OutOfRangeError        ValueError             a value is out of range
UnsupportedError       ValueError             not possible on this input
CallbackError          RuntimeError           a map/filter function raised
TooManyErrorsError     RuntimeError           skip_rate's limit was passed
StateError             RuntimeError           wrong state (closed iterator)
InternalError          RuntimeError           a bug in sluice
PermissionDeniedError  PermissionError        a file may not be read
StateMismatchError     ValueError             a saved state of another
                                              pipeline, seed or epoch
=====================  =====================  ==============================

The OSError subclasses carry no errno (``e.errno`` is None): the C message
says what happened.
"""

from ._constants import (SL_EACCES, SL_EBUSY, SL_ECALLBACK, SL_ECANCELED, SL_ECORRUPT, SL_EDTYPE,
                         SL_EINTERNAL, SL_EINVAL, SL_EIO, SL_EMISMATCH, SL_ENOENT, SL_ENOMEM,
                         SL_ERANGE, SL_ESHAPE, SL_ESTATE, SL_ETOO_MANY_ERRORS, SL_EUNSUPPORTED)


class Error(Exception):
    """A failure reported by libsluice. ``code`` is the negative SL_E* value
    and ``message`` the library's text (also ``str(e)``)."""

    code = None

    def __init__(self, code, message):
        # one argument for the builtin bases (OSError would read two as
        # errno and strerror)
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (type(self), (self.code, self.message))


class OutOfMemoryError(Error, MemoryError):
    """SL_ENOMEM (-1): the library could not allocate memory."""
    code = SL_ENOMEM


class InvalidArgumentError(Error, ValueError):
    """SL_EINVAL (-2): an argument or option is out of its domain."""
    code = SL_EINVAL


class InputOutputError(Error, OSError):
    """SL_EIO (-3): reading a file failed (not a regular file, changed size,
    the device failed)."""
    code = SL_EIO


class NotFoundError(Error, FileNotFoundError):
    """SL_ENOENT (-4): a file or folder does not exist."""
    code = SL_ENOENT


class CorruptDataError(Error, ValueError):
    """SL_ECORRUPT (-5): a file's contents are not valid (a damaged JPEG,
    an empty file, a bad list or cache file)."""
    code = SL_ECORRUPT


class ShapeError(Error, ValueError):
    """SL_ESHAPE (-6): shapes that must agree do not (elements of a batch)."""
    code = SL_ESHAPE


class DTypeError(Error, TypeError):
    """SL_EDTYPE (-7): a tensor has the wrong dtype for the op."""
    code = SL_EDTYPE


class CanceledError(Error, RuntimeError):
    """SL_ECANCELED (-8): the pipeline was cancelled."""
    code = SL_ECANCELED


class BusyError(Error, BlockingIOError):
    """SL_EBUSY (-9): a resource is in use (another process writes the
    cache file)."""
    code = SL_EBUSY


class OutOfRangeError(Error, ValueError):
    """SL_ERANGE (-10): a value is outside what the library can represent."""
    code = SL_ERANGE


class UnsupportedError(Error, ValueError):
    """SL_EUNSUPPORTED (-11): the operation is not possible on this input
    (a whole-dataset shuffle of a source without random access) or in this
    build."""
    code = SL_EUNSUPPORTED


class CallbackError(Error, RuntimeError):
    """SL_ECALLBACK (-12): a Python function given to map or filter raised;
    the exception it raised is this one's ``__cause__``."""
    code = SL_ECALLBACK


class TooManyErrorsError(Error, RuntimeError):
    """SL_ETOO_MANY_ERRORS (-13): more elements failed than error_max_ppm
    allows under error_policy="skip_rate"."""
    code = SL_ETOO_MANY_ERRORS


class StateError(Error, RuntimeError):
    """SL_ESTATE (-14): the object is in the wrong state for the call."""
    code = SL_ESTATE


class InternalError(Error, RuntimeError):
    """SL_EINTERNAL (-15): a bug in sluice; please report it."""
    code = SL_EINTERNAL


class PermissionDeniedError(Error, PermissionError):
    """SL_EACCES (-16): the process may not read a file."""
    code = SL_EACCES


class StateMismatchError(Error, ValueError):
    """SL_EMISMATCH (-17): a saved iterator state belongs to another
    pipeline, or was taken with another seed or in another epoch than the
    options ask for."""
    code = SL_EMISMATCH


# SL_ERRNO_MAP in include/sluice.h; codes are ABI and only ever appended.
_CLASSES = (OutOfMemoryError, InvalidArgumentError, InputOutputError, NotFoundError,
            CorruptDataError, ShapeError, DTypeError, CanceledError, BusyError,
            OutOfRangeError, UnsupportedError, CallbackError, TooManyErrorsError, StateError,
            InternalError, PermissionDeniedError, StateMismatchError)
_BY_CODE = {cls.code: cls for cls in _CLASSES}

for _cls in (Error,) + _CLASSES:
    _cls.__module__ = "sluice"
del _cls
__all__ = ["Error"] + [cls.__name__ for cls in _CLASSES]


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
