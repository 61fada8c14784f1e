"""Finds libsluice, checks its version and declares the C functions.

Search order (the first that exists wins):

1. ``SLUICE_LIBRARY``: a path to the shared library. When it is set it is the
   only candidate, so a wrong value is an error rather than a silent fallback.
2. Next to the package: ``libsluice.so*`` inside the package directory, then
   the library that ``cmake --install`` put under the same prefix (its path
   relative to the package is written into ``_install.py`` at install time).
3. The system loader: ``libsluice.so.0`` through ``LD_LIBRARY_PATH``, the
   ld.so cache and the default directories.

Every function is declared with argtypes/restype so that pointers are never
truncated to int and Python values are checked before they reach C.
"""

import ctypes
import os

from ._constants import SL_EUNSUPPORTED, SL_MAX_DIMS
from ._version import ABI_VERSION, __version__

c_int, c_int64, c_uint64, c_size_t = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t
c_void_p, c_char_p, c_double, c_float = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double, ctypes.c_float
c_unsigned = ctypes.c_uint
P = ctypes.POINTER

SONAME = "libsluice.so.0"


class LibraryError(ImportError):
    """The shared library is missing, unloadable or of another version."""


class ImageSpec(ctypes.Structure):
    """sl_image_spec, field for field (include/sluice.h)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("crop", c_int),
        ("height", c_int),
        ("width", c_int),
        ("resize_shorter", c_int),
        ("scale_min", c_float),
        ("scale_max", c_float),
        ("ratio_min", c_float),
        ("ratio_max", c_float),
        ("flip_prob", c_float),
        ("layout", c_int),
        ("dtype", c_int),
        ("mean", c_float * 3),
        ("std", c_float * 3),
        ("max_pixels", c_int64),
        ("allow_warnings", c_int),
        ("fast_upsample", c_int),
        ("exact_pixels", c_int),
        ("image_index", c_int),
        ("reserved", c_int * 5),
        ("auto_augment", c_int),
        ("rand_augment_num_ops", c_int),
        ("rand_augment_magnitude", c_int),
        ("num_magnitude_bins", c_int),
        ("color_jitter_prob", c_float),
        ("brightness", c_float * 2),
        ("contrast", c_float * 2),
        ("saturation", c_float * 2),
        ("hue", c_float * 2),
        ("grayscale_prob", c_float),
        ("blur_prob", c_float),
        ("blur_kernel", c_int),
        ("blur_sigma", c_float * 2),
        ("solarize_prob", c_float),
        ("solarize_threshold", c_float),
        ("rotate", c_float * 2),
        ("translate", c_float * 2),
        ("affine_scale", c_float * 2),
        ("shear", c_float * 4),
        ("interpolation", c_int),
        ("erasing_prob", c_float),
        ("erasing_scale", c_float * 2),
        ("erasing_ratio", c_float * 2),
        ("erasing_value", c_float * 3),
        ("erasing_random", c_int),
        ("decode", c_int),
        ("channels", c_int),
        ("blend_alpha", c_int),
        ("background", c_int * 3),
        ("with_mask", c_int),
        ("mask_index", c_int),
        ("mask_channels", c_int),
        ("mask_dtype", c_int),
    ]


class MixupSpec(ctypes.Structure):
    """sl_mixup_spec, field for field (include/sluice.h)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("num_classes", c_int64),
        ("mixup_alpha", ctypes.c_double),
        ("cutmix_alpha", ctypes.c_double),
        ("prob", ctypes.c_double),
        ("switch_prob", ctypes.c_double),
        ("label_smoothing", ctypes.c_double),
        ("image_index", c_int),
        ("label_index", c_int),
        ("layout", c_int),
        ("seed", c_int64),
        ("flags", ctypes.c_uint),
    ]


class Feature(ctypes.Structure):
    """sl_feature, field for field (include/sluice.h)."""

    _fields_ = [
        ("key", c_char_p),
        ("type", c_int),
        ("ndim", c_int),
        ("shape", c_int64 * SL_MAX_DIMS),
        ("has_default", c_int),
        ("default_int64", c_int64),
        ("default_float", c_float),
        ("default_bytes", c_void_p),
        ("default_len", c_size_t),
    ]


class DistContext(ctypes.Structure):
    """sl_dist_context, field for field (include/sluice.h)."""

    _fields_ = [
        ("rank", c_int),
        ("world_size", c_int),
        ("local_rank", c_int),
        ("local_world_size", c_int),
        ("node", c_int),
        ("source", ctypes.c_char * 12),
    ]


# Callback types (sl_map_fn, sl_predicate_fn, sl_interleave_fn, sl_generator_fn). ctypes takes the GIL around
# the Python function, whichever library thread calls it.
MAP_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, P(c_void_p), c_void_p)
PREDICATE_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
INTERLEAVE_FN = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_void_p)
GENERATOR_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_int64, P(c_void_p))
KEY_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, P(c_int64), c_void_p)
WINDOW_REDUCE_FN = ctypes.CFUNCTYPE(c_void_p, c_int64, c_void_p, c_void_p)
WINDOW_SIZE_FN = ctypes.CFUNCTYPE(c_int64, c_int64, c_void_p)
SCAN_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, P(c_void_p), P(c_void_p),
                           c_void_p)

# name: (restype, argtypes). Functions that may be absent from an older
# library are in _OPTIONAL and looked up on first use.
_PROTOTYPES = {
    "sl_version_number": (c_unsigned, []),
    "sl_version_string": (c_char_p, []),
    "sl_strerror": (c_char_p, [c_int]),
    "sl_last_error": (c_char_p, []),
    "sl_last_error_code": (c_int, []),
    "sl_clear_error": (None, []),
    "sl_release_memory": (None, []),
    "sl_memory_in_use": (c_int64, []),
    "sl_set_log_level": (None, [c_int]),
    "sl_dtype_size": (c_size_t, [c_int]),
    "sl_element_create": (c_void_p, [c_int]),
    "sl_element_retain": (c_void_p, [c_void_p]),
    "sl_element_release": (None, [c_void_p]),
    "sl_element_add_tensor": (c_void_p, [c_void_p, c_int, c_int, P(c_int64)]),
    "sl_element_add_string": (c_int, [c_void_p, c_void_p, c_size_t]),
    "sl_element_add_strings": (c_int, [c_void_p, c_int, P(c_int64), P(c_char_p), P(c_size_t)]),
    "sl_element_add_int64": (c_int, [c_void_p, c_int64]),
    "sl_element_add_float32": (c_int, [c_void_p, c_float]),
    "sl_element_add_shared": (c_int, [c_void_p, c_void_p, c_int]),
    "sl_element_size": (c_int, [c_void_p]),
    "sl_element_tensor": (c_void_p, [c_void_p, c_int]),
    "sl_tensor_dtype": (c_int, [c_void_p]),
    "sl_tensor_ndim": (c_int, [c_void_p]),
    "sl_tensor_shape": (P(c_int64), [c_void_p]),
    "sl_tensor_count": (c_int64, [c_void_p]),
    "sl_tensor_data": (c_void_p, [c_void_p]),
    "sl_tensor_nbytes": (c_size_t, [c_void_p]),
    "sl_element_dlpack": (c_void_p, [c_void_p, c_int]),
    "sl_element_dlpack_view": (c_void_p, [c_void_p, c_void_p, c_int, P(c_int64), P(c_int64),
                                          c_int]),
    "sl_dlpack_capsule_api": (None, [c_void_p, c_void_p]),
    "sl_cpu_count": (c_int, []),
    "sl_options_create": (c_void_p, []),
    "sl_options_free": (None, [c_void_p]),
    "sl_options_set": (c_int, [c_void_p, c_int, c_int64]),
    "sl_options_set_remote_cache_dir": (c_int, [c_void_p, c_char_p]),
    "sl_options_get": (c_int64, [c_void_p, c_int]),
    "sl_option_bounds": (c_int, [c_int, P(c_int64), P(c_int64)]),
    "sl_dataset_retain": (c_void_p, [c_void_p]),
    "sl_dataset_release": (None, [c_void_p]),
    "sl_dataset_cardinality": (c_int64, [c_void_p]),
    "sl_dataset_name": (c_char_p, [c_void_p]),
    "sl_dataset_fingerprint": (c_uint64, [c_void_p]),
    "sl_dataset_structure": (c_void_p, [c_void_p]),
    "sl_dataset_declare_structure": (c_int, [c_void_p, c_void_p]),
    "sl_with_structure": (c_void_p, [c_void_p, c_void_p]),
    "sl_structure_parse": (c_void_p, [c_char_p]),
    "sl_structure_retain": (c_void_p, [c_void_p]),
    "sl_structure_release": (None, [c_void_p]),
    "sl_structure_format": (c_int, [c_void_p, c_char_p, c_size_t]),
    "sl_structure_kind": (c_int, [c_void_p]),
    "sl_structure_size": (c_int, [c_void_p]),
    "sl_structure_child": (c_void_p, [c_void_p, c_int]),
    "sl_structure_key": (c_char_p, [c_void_p, c_int]),
    "sl_structure_get": (c_void_p, [c_void_p, c_char_p]),
    "sl_structure_leaves": (c_int, [c_void_p]),
    "sl_structure_leaf_index": (c_int, [c_void_p]),
    "sl_structure_dtype": (c_int, [c_void_p]),
    "sl_structure_ndim": (c_int, [c_void_p]),
    "sl_structure_shape": (P(c_int64), [c_void_p]),
    "sl_map_ctx_structure": (c_void_p, [c_void_p]),
    "sl_map_ctx_set_structure": (c_int, [c_void_p, c_void_p]),
    "sl_zip": (c_void_p, [P(c_void_p), c_int, P(c_char_p)]),
    "sl_concatenate": (c_void_p, [c_void_p, c_void_p]),
    "sl_choose_from": (c_void_p, [c_void_p, P(c_void_p), c_int, c_unsigned]),
    "sl_sample_from": (c_void_p, [P(c_void_p), c_int, P(c_double), c_int64, c_unsigned]),
    "sl_enumerate": (c_void_p, [c_void_p, c_int64]),
    "sl_take_while": (c_void_p, [c_void_p, c_char_p, PREDICATE_FN, c_void_p]),
    "sl_counter": (c_void_p, [c_int64, c_int64]),
    "sl_random": (c_void_p, [c_int64, c_unsigned]),
    "sl_scan": (c_void_p, [c_void_p, c_char_p, c_void_p, SCAN_FN, c_void_p]),
    "sl_unique": (c_void_p, [c_void_p]),
    "sl_rebatch": (c_void_p, [c_void_p, c_int64, c_unsigned]),
    "sl_padded_batch": (c_void_p, [c_void_p, c_int64, c_int, P(c_int64), c_void_p, c_unsigned]),
    "sl_window": (c_void_p, [c_void_p, c_int64, c_int64, c_int64, c_unsigned]),
    "sl_group_by_window": (c_void_p, [c_void_p, c_char_p, KEY_FN, WINDOW_REDUCE_FN, c_int64,
                                      WINDOW_SIZE_FN, c_void_p]),
    "sl_ignore_errors": (c_void_p, [c_void_p, c_unsigned]),
    "sl_pack": (c_void_p, [c_void_p, c_int64, c_int64]),
    "sl_rejection_resample": (c_void_p, [c_void_p, c_char_p, KEY_FN, c_void_p, P(c_double), c_int,
                                         P(c_double), c_int64, c_unsigned]),
    "sl_range": (c_void_p, [c_int64, c_int64, c_int64]),
    "sl_from_tensors": (c_void_p, [c_void_p]),
    "sl_from_files": (c_void_p, [P(c_char_p), P(c_int64), c_size_t]),
    "sl_map": (c_void_p, [c_void_p, c_char_p, MAP_FN, c_void_p, c_int, c_unsigned]),
    "sl_map_ctx_random": (c_uint64, [c_void_p]),
    "sl_map_ctx_uniform": (c_double, [c_void_p]),
    "sl_map_ctx_index": (c_int64, [c_void_p]),
    "sl_map_ctx_epoch": (c_int64, [c_void_p]),
    "sl_map_ctx_error": (c_int, [c_void_p, c_int, c_char_p]),
    "sl_filter": (c_void_p, [c_void_p, c_char_p, PREDICATE_FN, c_void_p]),
    "sl_batch": (c_void_p, [c_void_p, c_int64, c_unsigned]),
    "sl_unbatch": (c_void_p, [c_void_p]),
    "sl_shuffle": (c_void_p, [c_void_p, c_int64, c_int64, c_unsigned]),
    "sl_repeat": (c_void_p, [c_void_p, c_int64]),
    "sl_take": (c_void_p, [c_void_p, c_int64]),
    "sl_assert_cardinality": (c_void_p, [c_void_p, c_int64]),
    "sl_skip": (c_void_p, [c_void_p, c_int64]),
    "sl_shard": (c_void_p, [c_void_p, c_int64, c_int64]),
    "sl_prefetch": (c_void_p, [c_void_p, c_int64]),
    "sl_cache": (c_void_p, [c_void_p, c_char_p]),
    "sl_cache_auto": (c_void_p, [c_void_p, c_char_p]),
    "sl_save": (c_int, [c_void_p, c_char_p, c_void_p, c_int, KEY_FN, c_void_p]),
    "sl_load": (c_void_p, [c_char_p]),
    "sl_snapshot": (c_void_p, [c_void_p, c_char_p, c_int]),
    "sl_image_folder": (c_void_p, [c_char_p, c_char_p, c_unsigned]),
    "sl_file_list": (c_void_p, [c_char_p, c_char_p, c_unsigned]),
    "sl_read_files": (c_void_p, [c_void_p, c_unsigned]),
    "sl_image_spec_init": (c_int, [P(ImageSpec), c_size_t, c_int, c_int]),
    "sl_map_image": (c_void_p, [c_void_p, P(ImageSpec), c_int]),
    "sl_map_image_views": (c_void_p, [c_void_p, P(ImageSpec), c_int, c_int]),
    "sl_mixup_spec_init": (c_int, [P(MixupSpec), c_size_t, c_int64]),
    "sl_mixup_cutmix": (c_void_p, [c_void_p, P(MixupSpec)]),
    "sl_iterator_create": (c_void_p, [c_void_p, c_void_p]),
    "sl_next": (c_int, [c_void_p, P(c_void_p)]),
    "sl_next_timeout": (c_int, [c_void_p, P(c_void_p), c_int64]),
    "sl_iterator_errmsg": (c_char_p, [c_void_p]),
    "sl_iterator_free": (None, [c_void_p]),
    "sl_iterator_save": (c_int64, [c_void_p, c_void_p, c_size_t]),
    "sl_iterator_restore": (c_void_p, [c_void_p, c_char_p, c_size_t, c_void_p]),
    "sl_iterator_stat": (c_int64, [c_void_p, c_int]),
    "sl_set_last_error": (c_int, [c_int, c_char_p]),
    "sl_list_files": (c_void_p, [P(c_char_p), c_int, c_unsigned, c_int64]),
    "sl_interleave": (c_void_p, [c_void_p, INTERLEAVE_FN, c_void_p, c_int, c_int, c_int,
                                 c_unsigned]),
    "sl_from_element": (c_void_p, [c_void_p]),
    "sl_from_generator": (c_void_p, [GENERATOR_FN, c_void_p, c_unsigned]),
    "sl_queue_create": (c_void_p, [c_int64]),
    "sl_queue_push": (c_int, [c_void_p, c_void_p, c_int64]),
    "sl_queue_close": (None, [c_void_p]),
    "sl_queue_length": (c_int64, [c_void_p]),
    "sl_queue_free": (None, [c_void_p]),
    "sl_from_queue": (c_void_p, [c_void_p]),
    "sl_tfrecord": (c_void_p, [c_void_p, c_int, c_unsigned]),
    "sl_parse_example": (c_void_p, [c_void_p, P(Feature), c_int, c_unsigned]),
    "sl_parse_example_parallel": (c_void_p, [c_void_p, P(Feature), c_int, c_unsigned, c_int]),
    "sl_tar_shards": (c_void_p, [c_void_p, P(c_char_p), P(c_int), c_int, c_unsigned]),
    "sl_crc32c": (ctypes.c_uint32, [ctypes.c_uint32, c_char_p, c_size_t]),
    "sl_distributed_context": (c_int, [P(DistContext)]),
    "sl_distribute": (c_void_p, [c_void_p, P(DistContext), c_unsigned]),
}

_OPTIONAL = {
    "sl_iterator_stats": (c_void_p, [c_void_p]),
    "sl_stats_free": (None, [c_void_p]),
    "sl_stats_json": (c_char_p, [c_void_p]),
    "sl_iterator_report_buf": (c_int, [c_void_p, c_char_p, c_size_t]),
    "sl_iterator_trace": (c_int, [c_void_p, c_char_p]),
}


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """(path or soname, where it came from), in search order."""
    env = os.environ.get("SLUICE_LIBRARY")
    if env:
        return [(env, "SLUICE_LIBRARY")]
    found = []
    pkg = _package_dir()
    for name in (SONAME, "libsluice.so"):
        path = os.path.join(pkg, name)
        if os.path.exists(path):
            found.append((path, "the package directory"))
    try:
        from ._install import LIBRARY  # written by cmake --install
    except ImportError:
        LIBRARY = None
    if LIBRARY:
        path = os.path.normpath(os.path.join(pkg, LIBRARY))
        if os.path.exists(path):
            found.append((path, "the cmake --install prefix"))
    # dlopen searches LD_LIBRARY_PATH, the ld.so cache and the default
    # directories for a bare soname (find_library would run compilers).
    found.append((SONAME, "the system loader"))
    return found


def _version_text(n):
    return "%d.%d.%d" % (n // 10000, n // 100 % 100, n % 100)


def _compatible(n):
    have, want = (n // 10000, n // 100 % 100), (ABI_VERSION // 10000, ABI_VERSION // 100 % 100)
    if have[0] != want[0]:
        return False
    return have[1] == want[1] if want[0] == 0 else have[1] >= want[1]


def _open(path, origin):
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise LibraryError(
            "sluice: cannot load the C library %r (from %s): %s. Build it (cmake) and set "
            "SLUICE_LIBRARY to the path of libsluice.so, or install it with cmake --install."
            % (path, origin, e)) from None
    try:
        fn = lib.sl_version_number
    except AttributeError:
        raise LibraryError("sluice: %r (from %s) is not libsluice: it has no sl_version_number"
                           % (path, origin)) from None
    fn.restype, fn.argtypes = c_unsigned, []
    n = fn()
    if not _compatible(n):
        raise LibraryError(
            "sluice: the C library %r (from %s) is version %s, but this Python package (%s) "
            "was written for library version %s; use the library and package from the same "
            "release" % (path, origin, _version_text(n), __version__, _version_text(ABI_VERSION)))
    return lib


def _declare(lib, table, required):
    for name, (res, args) in table.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if required:
                raise LibraryError("sluice: %s lacks %s; it is older than this package"
                                   % (lib._name, name)) from None
            continue
        fn.restype, fn.argtypes = res, args


def load():
    """The loaded library (ctypes.CDLL) with every known function declared.

    Only the first candidate is tried: one that exists but fails to load or
    has the wrong version is an error, never skipped for the next."""
    path, origin = _candidates()[0]
    lib = _open(path, origin)
    _declare(lib, _PROTOTYPES, True)
    _declare(lib, _OPTIONAL, False)
    lib.sluice_path = path
    return lib


def optional(lib, name):
    """lib.name, or a clear error naming the missing function."""
    fn = getattr(lib, name, None)
    if fn is None or fn.argtypes is None and name in _OPTIONAL:
        from ._errors import Error
        raise Error(SL_EUNSUPPORTED, "%s is not in the loaded library (%s); it is older than this "
                    "package" % (name, lib.sluice_path))
    return fn


lib = load()
