"""DLPack export (the v0.x "legacy" ABI that torch 1.x and numpy consume).

Structs from https://github.com/dmlc/dlpack/blob/main/include/dlpack/dlpack.h:
DLDevice, DLDataType, DLTensor and DLManagedTensor, handed over in a
PyCapsule named "dltensor". The consumer renames the capsule to
"used_dltensor" and calls the managed tensor's deleter when it is done with
the memory; a capsule that nobody consumed calls the deleter itself when it
is destroyed. Either way the deleter drops the reference that kept the
sluice element (or array) alive, so the memory is never copied and never
freed early.
"""

import ctypes
import itertools
import threading

from ._errors import pending_interrupt

c_int32, c_int64, c_uint8, c_uint16, c_uint64 = (
    ctypes.c_int32, ctypes.c_int64, ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint64)

KDL_CPU = 1  # DLDeviceType
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_COMPLEX, KDL_BOOL = 0, 1, 2, 5, 6  # DLDataTypeCode


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(c_int64)),
        ("strides", ctypes.POINTER(c_int64)),  # in items; NULL = compact row-major
        ("byte_offset", c_uint64),
    ]


# The deleter takes a DLManagedTensor*; declared with void* so that the
# callback gets the bare address to look up.
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _DELETER),
    ]


# Exported tensors not yet deleted: id -> (struct, shape, strides, keepalive).
# The consumer holds only the raw pointer, so Python must hold the rest.
_live = {}
_ids = itertools.count(1)
_lock = threading.Lock()  # deleters may run on any thread


def _delete(addr, _live=_live, _lock=_lock, _cast=ctypes.cast,
            _P=ctypes.POINTER(DLManagedTensor), _pending=pending_interrupt):
    # Default arguments keep the objects reachable during interpreter
    # teardown, when torch may free its last tensors after module globals
    # are gone.
    if not addr:
        return
    try:
        key = _cast(addr, _P).contents.manager_ctx
        with _lock:
            entry = _live.pop(key, None)
        del entry  # drops the element here, inside the try
    except KeyboardInterrupt:
        _pending[0] = True


_deleter = _DELETER(_delete)

_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# The capsule keeps a pointer to its name: it must outlive every capsule.
_NAME = b"dltensor"
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capsule_destroyed(capsule, _name=_NAME, _pyapi=_pyapi, _delete=_delete):
    # Takes the capsule as a bare address: it is being deallocated, so it
    # must not be turned into a new reference.
    if _pyapi.PyCapsule_IsValid(capsule, _name):  # not consumed
        _delete(_pyapi.PyCapsule_GetPointer(capsule, _name))


_capsule_destructor = _CAPSULE_DESTRUCTOR(_capsule_destroyed)
_capsule_destructor_addr = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def capsule(data, shape, strides, code, bits, keepalive):
    """A "dltensor" capsule over `data` (an address) of the given shape,
    strides (in items, or None for compact) and DLPack type; `keepalive`
    stays referenced until the consumer deletes the tensor."""
    ndim = len(shape)
    shape_arr = (c_int64 * max(ndim, 1))(*shape)
    strides_arr = (c_int64 * max(ndim, 1))(*strides) if strides is not None else None
    m = DLManagedTensor()
    t = m.dl_tensor
    t.data = data
    t.device = DLDevice(KDL_CPU, 0)
    t.ndim = ndim
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(c_int64))
    if strides_arr is not None:
        t.strides = ctypes.cast(strides_arr, ctypes.POINTER(c_int64))
    t.byte_offset = 0
    key = next(_ids)
    m.manager_ctx = key
    m.deleter = _deleter
    with _lock:
        _live[key] = (m, shape_arr, strides_arr, keepalive)
    try:
        return _pyapi.PyCapsule_New(ctypes.addressof(m), _NAME, _capsule_destructor_addr)
    except BaseException:
        with _lock:
            _live.pop(key, None)
        raise


def live_count():
    """Exported tensors whose consumer has not deleted them yet (tests)."""
    return len(_live)


def numpy_type(dtype):
    """(code, bits) of a numpy dtype, or BufferError."""
    kind = dtype.kind
    code = {"i": KDL_INT, "u": KDL_UINT, "f": KDL_FLOAT, "c": KDL_COMPLEX, "b": KDL_BOOL}.get(kind)
    if code is None or not dtype.isnative:
        raise BufferError("DLPack cannot describe dtype %s" % dtype)
    return code, dtype.itemsize * 8


def from_numpy(arr):
    """Capsule over a numpy array's memory, keeping the array alive."""
    code, bits = numpy_type(arr.dtype)
    item = arr.itemsize
    if any(s % item for s in arr.strides) or any(s < 0 for s in arr.strides):
        raise BufferError("DLPack needs non-negative strides that are whole items")
    strides = None if arr.flags.c_contiguous else [s // item for s in arr.strides]
    return capsule(arr.ctypes.data, arr.shape, strides, code, bits, arr)
