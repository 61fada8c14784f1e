"""Elements to Python values without copying, and Python values to elements.

A yielded element becomes the value of its only tensor, or a tuple with one
value per tensor:

- numeric tensors: a read-only ``sluice.Array`` (a numpy.ndarray subclass
  that adds ``__dlpack__``) viewing the element's memory; without numpy, a
  read-only memoryview of the same memory;
- string tensors: ``str`` for a scalar, nested lists of ``str`` otherwise
  (bytes decoded as UTF-8 with surrogateescape, like os.fsdecode, so
  ``s.encode("utf-8", "surrogateescape")`` gives the exact bytes back);
  ``bytes`` instead for the datasets of binary records (tfrecord,
  webdataset, parse_example's bytes features: ``Dataset.strings`` is
  "bytes"), as tf.data yields them.

Every view holds an ``ElementRef`` (through the ctypes buffer it is built
on), and the element is released when the last view is garbage collected.
"""

import ctypes
import struct

from . import _dlpack
from ._constants import SL_INT32, SL_INT64, SL_STRING, SL_UINT8
from ._errors import make_error, pending_interrupt
from ._lib import lib

try:
    import numpy as np
except ImportError:  # memoryviews instead
    np = None

# sl_dtype order: uint8 int8 uint16 int16 int32 int64 float32 float64.
DTYPE_NAMES = ("uint8", "int8", "uint16", "int16", "int32", "int64", "float32", "float64",
               "string")
_FORMATS = ("B", "b", "H", "h", "i", "q", "f", "d")
_CODE_OF_FORMAT = {f: i for i, f in enumerate(_FORMATS)}
_CODE_OF_FORMAT["l"] = SL_INT64 if struct.calcsize("l") == 8 else SL_INT32

if np is not None:
    _NP_DTYPES = tuple(np.dtype(n) for n in DTYPE_NAMES[:SL_STRING])
    _CODE_OF_NP = {d: i for i, d in enumerate(_NP_DTYPES)}
    _CODE_OF_NP[np.dtype(np.bool_)] = SL_UINT8  # stored as 0/1


class ElementRef:
    """Owns one reference to a C element; releases it when collected.

    holder (an Iterator) hands its pending element over: the reference
    moves from holder._pending to holder._handing inside this call, with
    no point between where Python could raise a KeyboardInterrupt (it
    raises as a call starts or ends, not between plain attribute stores),
    so an interrupt leaves the element in one of the two, never in both or
    neither."""

    __slots__ = ("ptr", "__weakref__")

    def __init__(self, ptr, holder=None):
        self.ptr = ptr
        if holder is not None:
            holder._handing = self
            holder._pending = None

    def __del__(self, _release=lib.sl_element_release, _pending=pending_interrupt):
        # (no ptr: an interrupt came as __init__ began; its caller kept it)
        p, self.ptr = getattr(self, "ptr", None), None
        if p:
            try:
                _release(p)
            except KeyboardInterrupt:  # raised after the call: the release is done
                _pending[0] = True


def _buffer(data, nbytes, owner):
    buf = (ctypes.c_uint8 * nbytes).from_address(data)
    buf._sluice_element = owner  # the view's base chain ends here
    return buf


def element_of(arr):
    """The ElementRef whose memory a numpy array views, or None: follows the
    array's bases down to the ctypes buffer an element's value is built on."""
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    return getattr(base, "_sluice_element", None)


if np is not None:

    class Array(np.ndarray):
        """A read-only numpy array over sluice memory (or derived from one),
        exportable to torch and others through DLPack without a copy.

        The memory stays alive while this array, a view of it, or a tensor
        made from it through DLPack exists. Do not write to it: the library
        may hand the same memory out again (cache, shared tensors)."""

        def __dlpack__(self, stream=None):
            _dlpack.check_stream(stream)
            owner = element_of(self)
            if owner is None or owner.ptr is None:
                # memory numpy owns (the result of arithmetic on an Array)
                if self.flags.writeable:
                    return np.asarray(self).__dlpack__()
                raise BufferError("this read-only array does not view sluice memory; "
                                  "DLPack cannot export it")
            code = _CODE_OF_NP.get(self.dtype)
            item = self.itemsize
            if code is None or not self.dtype.isnative:
                raise BufferError("DLPack cannot describe dtype %s" % self.dtype)
            if any(s % item or s < 0 for s in self.strides):
                raise BufferError("DLPack export needs non-negative strides that are whole "
                                  "items (torch cannot take others); copy the array first")
            strides = None if self.flags.c_contiguous else [s // item for s in self.strides]
            return _dlpack.view_capsule(owner.ptr, self.ctypes.data, self.shape, strides, code)

        def __dlpack_device__(self):
            return (_dlpack.KDL_CPU, 0)

    def _numeric(code, ndim, shape_p, data, nbytes, owner):
        shape = tuple(shape_p[i] for i in range(ndim))
        if nbytes == 0:
            arr = np.zeros(shape, _NP_DTYPES[code]).view(Array)
        else:
            arr = Array(shape, _NP_DTYPES[code], _buffer(data, nbytes, owner))
        arr.flags.writeable = False
        return arr
else:
    Array = None

    def _numeric(code, ndim, shape_p, data, nbytes, owner):
        shape = [shape_p[i] for i in range(ndim)]
        if nbytes == 0:
            return memoryview(b"").cast(_FORMATS[code])
        mv = memoryview(_buffer(data, nbytes, owner)).cast("B").cast(_FORMATS[code], shape)
        return mv.toreadonly()


def _nest(items, shape):
    if len(shape) <= 1:
        return items
    step = len(items) // shape[0] if shape[0] else 0
    return [_nest(items[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _strings(ndim, shape_p, data, nbytes, count, as_bytes):
    if ndim == 0 and as_bytes:  # one record: copy only its bytes
        off = ctypes.cast(data, ctypes.POINTER(ctypes.c_uint64))
        return ctypes.string_at(data + 16 + off[0], off[1] - off[0])
    raw = ctypes.string_at(data, nbytes) if nbytes else b""
    offs = struct.unpack_from("=%dQ" % (count + 1), raw)
    base = 8 * (count + 1)
    items = [raw[base + offs[i]:base + offs[i + 1]] for i in range(count)]
    if not as_bytes:
        items = [b.decode("utf-8", "surrogateescape") for b in items]
    if ndim == 0:
        return items[0]
    return _nest(items, [shape_p[i] for i in range(ndim)])


def tensor_value(t, owner, as_bytes=False):
    """The Python value of tensor `t` (an address) of the element `owner`;
    strings as bytes when as_bytes."""
    code = lib.sl_tensor_dtype(t)
    ndim = lib.sl_tensor_ndim(t)
    shape_p = lib.sl_tensor_shape(t)
    data = lib.sl_tensor_data(t)
    nbytes = lib.sl_tensor_nbytes(t)
    if code == SL_STRING:
        return _strings(ndim, shape_p, data, nbytes, lib.sl_tensor_count(t), as_bytes)
    return _numeric(code, ndim, shape_p, data, nbytes, owner)


def element_values(owner, as_bytes=False):
    """A tuple with the value of each tensor of owner's element."""
    el = owner.ptr
    n = lib.sl_element_size(el)
    return tuple(tensor_value(lib.sl_element_tensor(el, i), owner, as_bytes) for i in range(n))


def element_value(owner, as_bytes=False):
    """What iterating yields for owner's element: the value of its only
    tensor, or a tuple with one value per tensor (tf.data's structure for
    single- and multi-component elements)."""
    values = element_values(owner, as_bytes)
    return values[0] if len(values) == 1 else values


# ---- Python values to a new element ----

def _add_string(el, b):
    if lib.sl_element_add_string(el, b, len(b)) < 0:
        raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())


def _add_bytes(el, code, shape, src, nbytes):
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    p = lib.sl_element_add_tensor(el, code, len(shape), shape_arr)
    if not p:
        raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
    if nbytes:
        ctypes.memmove(p, src, nbytes)


def _encode(x):
    if isinstance(x, str):
        return x.encode("utf-8", "surrogateescape")
    if isinstance(x, (bytes, bytearray, np.bytes_)):
        return bytes(x)
    raise TypeError("sluice cannot store a %s in a string tensor" % type(x).__name__)


def _add_strings(el, arr):
    items = [_encode(x) for x in arr.reshape(-1).tolist()]
    n = max(len(items), 1)
    ptrs = (ctypes.c_char_p * n)(*items)
    lens = (ctypes.c_size_t * n)(*(len(b) for b in items))
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    if lib.sl_element_add_strings(el, arr.ndim, shape, ptrs, lens) < 0:
        raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())


def _add_numpy(el, v):
    arr = np.asarray(v)
    if arr.dtype.kind in "USO":
        if arr.ndim == 0:
            _add_string(el, _encode(arr.item()))
        else:
            _add_strings(el, arr)
        return
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    code = _CODE_OF_NP.get(arr.dtype)
    if code is None:
        raise TypeError("sluice has no dtype for numpy %s (use uint8/int8/uint16/int16/int32/"
                        "int64/float32/float64)" % arr.dtype)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    _add_bytes(el, code, arr.shape, arr.ctypes.data, arr.nbytes)


def _add_buffer(el, v):
    mv = memoryview(v)
    code = _CODE_OF_FORMAT.get(mv.format.lstrip("@="))
    if code is None:
        raise TypeError("sluice has no dtype for buffer format %r" % mv.format)
    data = mv.tobytes()  # contiguous copy; numpy avoids this one
    _add_bytes(el, code, mv.shape, data, len(data))


def _add_value(el, v, src, src_values):
    if src_values is not None:
        for j, s in enumerate(src_values):
            if v is s and not isinstance(v, (int, float)):
                # An input passed through unchanged: share, do not copy.
                if lib.sl_element_add_shared(el, src, j) < 0:
                    raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
                return
    if isinstance(v, str):
        _add_string(el, v.encode("utf-8", "surrogateescape"))
    elif isinstance(v, (bytes, bytearray)):
        _add_string(el, bytes(v))
    elif isinstance(v, int):  # bool included
        if lib.sl_element_add_int64(el, v) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
    elif isinstance(v, float):
        if lib.sl_element_add_float32(el, v) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
    elif np is not None and not isinstance(v, memoryview):
        _add_numpy(el, v)
    else:
        _add_buffer(el, v)


def make_element(values, src=None, src_values=None):
    """A new C element (an address, one reference) holding `values`: str/bytes
    become scalar strings, int int64, float float32, arrays (anything numpy
    takes) their own dtype; a value that is one of `src_values` (the Python
    values of element `src`) is shared with src rather than copied."""
    el = lib.sl_element_create(len(values))
    if not el:
        raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
    try:
        for v in values:
            _add_value(el, v, src, src_values)
    except BaseException:
        lib.sl_element_release(el)
        raise
    return el
