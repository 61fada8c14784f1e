"""sluice: streaming training-data pipelines in C, driven from Python.

A pure-Python binding (ctypes, no compiled extension) over libsluice:

    import sluice
    ds = (sluice.Dataset.image_folder("/data/train")
          .shuffle(sluice.ALL, seed=0)
          .map_image(preset="train", size=224)
          .batch(256, drop_remainder=True)
          .prefetch(sluice.AUTOTUNE))
    for images, labels, paths in ds:    # uint8 [256, 224, 224, 3], int64 [256], [str]
        ...

Yielded arrays view the C library's memory without a copy (sluice.Array, a
read-only numpy.ndarray subclass; memoryviews when numpy is absent) and
export to torch and other frameworks through DLPack (torch.from_dlpack).
sluice.torch yields torch tensors directly.

The library is found through SLUICE_LIBRARY, next to the package (cmake
--install), or the system loader; see sluice._lib.
"""

from ._errors import *  # noqa: F401,F403  (Error and one subclass per SL_E* code)
from ._errors import __all__ as _error_names
from ._lib import LibraryError, lib as _lib
from ._tensor import Array, DTYPE_NAMES
from ._version import __version__
from .dataset import (ALL, AUTO, AUTOTUNE, INFINITE, UNKNOWN, Dataset, DistributedContext, MapContext,
                      View, distributed_context)
from .dynamic import Queue, TensorSpec
from .iterator import Iterator
from .options import Options
from .records import FixedLenFeature, VarLenFeature

TFRecordDataset = Dataset.tfrecord  # tf.data.TFRecordDataset(filenames, compression_type, ...)

library_path = _lib.sluice_path
library_version = _lib.sl_version_string().decode()


def build_options():
    """The optional parts the loaded C library was built with, as the
    library itself reports them (sl_build_options): {"io_uring": True,
    "jpeg": True, "png": True, "webp": True, "zlib": True, "curl": True,
    "ffmpeg": True}."""
    words = _lib.sl_build_options().decode().split()
    return {name: value == "on" for name, value in (w.split("=", 1) for w in words)}


def memory_in_use():
    """Bytes the C library holds from its allocator (sl_memory_in_use),
    including its buffer caches; release_memory() returns the caches."""
    return _lib.sl_memory_in_use()


def release_memory():
    """Returns cached buffers of this thread and the shared pools to the
    allocator (sl_release_memory)."""
    _lib.sl_release_memory()


def cpu_count():
    """CPUs in this process's affinity mask."""
    return _lib.sl_cpu_count()


__all__ = [
    "ALL", "AUTO", "AUTOTUNE", "INFINITE", "UNKNOWN", "Array", "DTYPE_NAMES", "Dataset",
    "DistributedContext", "distributed_context",
    "FixedLenFeature", "Iterator", "LibraryError", "MapContext", "Options", "TFRecordDataset",
    "VarLenFeature", "View", "__version__", "build_options", "cpu_count", "library_path", "library_version",
    "memory_in_use", "release_memory", "Queue", "TensorSpec",
] + list(_error_names)
