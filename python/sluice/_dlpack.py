"""DLPack export: sluice memory into torch (and numpy, JAX...) without a copy.

The C library builds the DLManagedTensor (DLPack's v0.x ABI, which torch
1.x/2.x and numpy consume) and holds a reference to the element in it; the
tensor's deleter is C code that drops that reference. Python only wraps the
pointer in a PyCapsule named "dltensor", whose destructor is also C
(sl_dlpack_capsule_destructor): it deletes a tensor that no consumer took.

No Python runs when a consumer lets go of the memory, so that may happen on
any thread, while an exception unwinds the loop that holds the tensor
(a ctypes callback would then fail and lose the exception), or while the
interpreter shuts down.
"""

import ctypes

from ._lib import lib

KDL_CPU = 1  # DLDeviceType

_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# The capsule keeps a pointer to its name: it must outlive every capsule.
_NAME = b"dltensor"
_DESTRUCTOR = ctypes.cast(lib.sl_dlpack_capsule_destructor, ctypes.c_void_p).value
# Where the C destructor finds the capsule functions, also when this
# interpreter's symbols are not visible to the process (an embedder's
# RTLD_LOCAL libpython).
lib.sl_dlpack_capsule_api(ctypes.cast(_pyapi.PyCapsule_IsValid, ctypes.c_void_p),
                          ctypes.cast(_pyapi.PyCapsule_GetPointer, ctypes.c_void_p))


def _wrap(managed):
    if not managed:
        raise BufferError(lib.sl_last_error().decode("utf-8", "replace"))
    cap = None
    try:
        cap = _pyapi.PyCapsule_New(managed, _NAME, _DESTRUCTOR)
    finally:
        if cap is None:  # no capsule came to own it: delete it as a consumer would
            _Managed.from_address(managed).deleter(managed)
    return cap


class _Managed(ctypes.Structure):
    """DLManagedTensor as far as its deleter: the DLTensor (48 bytes on
    LP64), manager_ctx, deleter."""
    _fields_ = [("dl_tensor", ctypes.c_byte * 48), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


def element_capsule(el, index):
    """A capsule over tensor `index` of element `el` (an address); the
    capsule's tensor holds its own reference to the element."""
    return _wrap(lib.sl_element_dlpack(el, index))


def view_capsule(el, data, shape, strides, code):
    """A capsule over a strided view (`strides` in items, or None) of
    sl_dtype `code` at address `data`, inside one of el's tensors."""
    n = len(shape)
    sh = (ctypes.c_int64 * max(n, 1))(*shape)
    st = (ctypes.c_int64 * max(n, 1))(*strides) if strides is not None else None
    managed = lib.sl_element_dlpack_view(el, data, n, sh, st, code)
    if not managed:
        raise BufferError("DLPack: %s" % lib.sl_last_error().decode("utf-8", "replace"))
    return _wrap(managed)


def check_stream(stream):
    if stream is not None and stream != -1:
        raise BufferError("sluice arrays live in CPU memory; no stream applies")
