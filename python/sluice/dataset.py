"""Datasets: immutable descriptions of a pipeline (sl_dataset), tf.data style."""

import ctypes
import inspect
import operator
import os

from . import _structure, _tensor, dynamic as _dynamic, records as _records
from ._constants import (SL_AUTOTUNE, SL_COMPRESSION_GZIP, SL_COMPRESSION_NONE,
                         SL_COMPRESSION_ZLIB, SL_CROP_CENTER, SL_CROP_RANDOM_RESIZED,
                         SL_CROP_RESIZE, SL_DISTRIBUTE_BY_DATA, SL_DISTRIBUTE_BY_FILE,
                         SL_DISTRIBUTE_DROP, SL_DISTRIBUTE_PAD, SL_DROP_REMAINDER, SL_ECALLBACK,
                         SL_DECODE_RAW, SL_DECODE_RGB, SL_EINVAL,
                         SL_ESTATE, SL_FLOAT32, SL_FOLDER_RESCAN, SL_INFINITE,
                         SL_INT64, SL_LAYOUT_CHW, SL_LAYOUT_HWC, SL_LIST_SHUFFLE, SL_LOG_ERRORS,
                         SL_MAX_DIMS,
                         SL_MAP_ORDERED, SL_NO_PADDING, SL_NONDETERMINISTIC,
                         SL_PAD_TO_BUCKET_BOUNDARY, SL_SHUFFLE_ALL,
                         SL_SAME_EACH_EPOCH, SL_SHUFFLE_NO_RESHUFFLE, SL_STOP_ON_EMPTY,
                         SL_STRING,
                         SL_TFRECORD_NO_DATA_CRC, SL_TOKENS_DOCUMENTS, SL_UINT8, SL_UINT16,
                         SL_UNKNOWN, SL_WITH_PATHS, SL_SERVICE_AT_MOST_ONCE)
from . import _callbacks
from ._callbacks import Callback
from ._errors import Error, make_error, pending_interrupt
from ._header import (sl_audio_spec, sl_dist_context, sl_image_spec, sl_video_spec, sl_key_fn, sl_length_fn, sl_map_fn,
                      sl_mixup_spec, sl_predicate_fn, sl_scan_fn, sl_service_spec,
                      sl_window_reduce_fn, sl_window_size_fn)
from ._lib import lib
from .iterator import Iterator
from .options import Options

AUTOTUNE = SL_AUTOTUNE  # the library picks parallelism / depth
ALL = SL_SHUFFLE_ALL  # the whole dataset is the shuffle buffer
INFINITE = SL_INFINITE  # cardinality


class _Auto:
    """sluice.AUTO: let the library choose (Dataset.cache's place)."""

    __slots__ = ()

    def __repr__(self):
        return "sluice.AUTO"


AUTO = _Auto()
UNKNOWN = SL_UNKNOWN  # cardinality

_CROPS = {"train": SL_CROP_RANDOM_RESIZED, "random_resized": SL_CROP_RANDOM_RESIZED,
          "eval": SL_CROP_CENTER, "center": SL_CROP_CENTER,
          "resize": SL_CROP_RESIZE, "decode": SL_CROP_RESIZE}
_LAYOUTS = {"HWC": SL_LAYOUT_HWC, "CHW": SL_LAYOUT_CHW}
_DTYPES = {"uint8": SL_UINT8, "uint16": SL_UINT16, "float32": SL_FLOAT32}
_COMPRESSIONS = {None: SL_COMPRESSION_NONE, "": SL_COMPRESSION_NONE,
                 "NONE": SL_COMPRESSION_NONE, "ZLIB": SL_COMPRESSION_ZLIB,
                 "GZIP": SL_COMPRESSION_GZIP}
_DISTRIBUTE_POLICIES = {"auto": 0,  # neither flag
                        "file": SL_DISTRIBUTE_BY_FILE, "data": SL_DISTRIBUTE_BY_DATA}


def _as_window(value):
    """One value of a window() element (the window's values stacked) as
    tf.data gives it: a dataset of them."""
    return Dataset.from_tensor_slices(value)


def _sliceable(v):
    """A value from_tensor_slices slices: lists become arrays (of strings
    too); arrays and buffers stay as they are."""
    if isinstance(v, (list, range)):
        import numpy as np
        return np.asarray(v)
    return v


def _datasets(op, datasets):
    datasets = list(datasets)
    if not datasets or not all(isinstance(d, Dataset) for d in datasets):
        raise TypeError("%s: datasets must be a non-empty list of sluice.Dataset" % op)
    return datasets


def _nesting(spec):
    """How a structure nests (dicts' keys, tuples' lengths), leaves aside."""
    if isinstance(spec, dict):
        return ("dict", tuple((k, _nesting(spec[k])) for k in sorted(spec)))
    if isinstance(spec, (tuple, list)):
        return ("tuple", tuple(_nesting(v) for v in spec))
    return "leaf"


def _check(ptr):
    if not ptr:
        raise make_error(lib.sl_last_error_code() or SL_EINVAL, lib.sl_last_error().decode())
    return ptr


def _parallel(op, num_parallel_calls):
    """tf.data's num_parallel_calls as a C parallelism: AUTOTUNE (-1) or a
    count >= 1; None is sluice's default, AUTOTUNE (see Dataset.map)."""
    if num_parallel_calls is None:
        return AUTOTUNE
    n = int(num_parallel_calls)
    if n == AUTOTUNE or n >= 1:
        return n
    raise ValueError("%s: num_parallel_calls must be >= 1 or sluice.AUTOTUNE, not %r"
                     % (op, num_parallel_calls))


def _count(op, name, value):
    """value as an int (numpy ints too); TypeError otherwise, as tf.data's."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s: %s must be an int, not %s"
                        % (op, name, type(value).__name__)) from None


_UNSET = object()
# Ops that pass elements on as they are: after window() their elements
# still stand for datasets.
_SAME_ELEMENTS = frozenset(("sl_assert_cardinality", "sl_cache", "sl_cache_auto",
                            "sl_distribute", "sl_ignore_errors", "sl_prefetch", "sl_repeat",
                            "sl_shard", "sl_shuffle", "sl_skip", "sl_snapshot", "sl_take"))


class _Callback(Callback):
    """The Python function of a map or filter, called from C, kept alive as
    long as any dataset built on it. An exception becomes the element's
    error (sluice._callbacks). A map's first result tells the library the
    structure of its output (sl_map_ctx_set_structure); every later result
    must have the same."""

    def __init__(self, fn, kind, with_context, as_bytes=False):
        super().__init__()
        self.fn = fn
        self.with_context = with_context
        self.as_bytes = as_bytes
        self._args_of = {}  # input structure (C pointer) -> how to pass its values
        self._signature = _UNSET  # of the results, once the first is in
        self.c_fn = (sl_map_fn if kind == "map" else sl_predicate_fn)(
            self._map if kind == "map" else self._predicate)

    def _call(self, ctx, el):
        owner = _tensor.ElementRef(lib.sl_element_retain(el))
        values = _tensor.element_values(owner, self.as_bytes)
        p = lib.sl_map_ctx_structure(ctx)
        args_of = self._args_of.get(p)
        if args_of is None:
            args_of = self._args_of[p] = _structure.arguments(_structure.from_c(p))
        args = args_of(values)
        if self.with_context:
            mc = MapContext(ctx)
            try:
                return self.fn(mc, *args), values
            finally:
                mc._ctx = None
        return self.fn(*args), values

    def _learn(self, ctx, result):
        sig = _structure.signature(result)
        if sig == self._signature:
            return
        if self._signature is not _UNSET:
            raise TypeError("map: the function returned %s after returning %s; every result "
                            "must have the same structure" % (_structure.text(
                                _structure.of_value(result)), self._structure_text))
        c = _structure.CStructure(_structure.of_value(result))
        if lib.sl_map_ctx_set_structure(ctx, c.ptr) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        self._structure_text = _structure.text(_structure.of_value(result))
        self._signature = sig

    def _map(self, ctx, el, out, user):
        try:
            result, args = self._call(ctx, el)
            self._learn(ctx, result)
            out[0] = _tensor.make_element(_structure.flatten(result), el, args)
            return 0
        except BaseException as e:
            return self.element_error(ctx, e)

    def _predicate(self, ctx, el, user):
        try:
            return 1 if self._call(ctx, el)[0] else 0
        except BaseException as e:
            return self.element_error(ctx, e)


class _Scan(Callback):
    """scan's function, called from C: the state goes back and forth as an
    element of the initial state's structure."""

    def __init__(self, initial_state, fn, as_bytes):
        super().__init__()
        self.fn = fn
        self.as_bytes = as_bytes
        self.state_structure = _structure.of_value(initial_state)
        self.state_signature = _structure.signature(initial_state)
        self.pack_state = _structure.packer(self.state_structure)
        self.output = _Callback(None, "map", False, as_bytes)  # learns the output's structure
        self._args_of = {}
        self.initial = _tensor.make_element(_structure.flatten(initial_state))
        self.c_fn = sl_scan_fn(self._scan)

    def _scan(self, ctx, state, el, new_state, out, user):
        try:
            s_owner = _tensor.ElementRef(lib.sl_element_retain(state))
            s = self.pack_state(_tensor.element_values(s_owner, self.as_bytes))
            owner = _tensor.ElementRef(lib.sl_element_retain(el))
            values = _tensor.element_values(owner, self.as_bytes)
            p = lib.sl_map_ctx_structure(ctx)
            pack = self._args_of.get(p)
            if pack is None:
                pack = self._args_of[p] = _structure.packer(_structure.from_c(p))
            result = self.fn(s, pack(values))
            if not isinstance(result, tuple) or len(result) != 2:
                raise TypeError("scan: scan_func must return (new_state, output), not %s"
                                % type(result).__name__)
            if _structure.signature(result[0]) != self.state_signature:
                raise TypeError("scan: the new state is %s; the state is %s" % (
                    _structure.text(_structure.of_value(result[0])),
                    _structure.text(self.state_structure)))
            self.output._learn(ctx, result[1])
            ns = _tensor.make_element(_structure.flatten(result[0]))
            try:
                out[0] = _tensor.make_element(_structure.flatten(result[1]), el, values)
            except BaseException:
                lib.sl_element_release(ns)
                raise
            new_state[0] = ns
            return 0
        except BaseException as e:
            return self.element_error(ctx, e)


class _Keyed(Callback):
    """A function of an element that gives an int (group_by_window's key,
    rejection_resample's class, bucket_by_sequence_length's length),
    called from C on the pulling thread as map calls its function."""

    def __init__(self, key_func, as_bytes, fn_type=sl_key_fn):
        super().__init__()
        self.key_func = key_func
        self.as_bytes = as_bytes
        self._args_of = {}
        self.c_key = fn_type(self._key)

    def _key(self, ctx, el, key, user):
        try:
            owner = _tensor.ElementRef(lib.sl_element_retain(el))
            values = _tensor.element_values(owner, self.as_bytes)
            p = lib.sl_map_ctx_structure(ctx)
            args = self._args_of.get(p)
            if args is None:
                args = self._args_of[p] = _structure.arguments(_structure.from_c(p))
            key[0] = int(self.key_func(*args(values)))
            return 0
        except BaseException as e:
            return self.element_error(ctx, e)


class _Grouping(_Keyed):
    """group_by_window's functions: the key of an element, the dataset a
    window reduces to, a key's window size. Windows come as sluice
    Datasets over the grouped elements."""

    def __init__(self, key_func, reduce_func, size_func, as_bytes, dataset):
        super().__init__(key_func, as_bytes)
        self.reduce_func, self.size_func = reduce_func, size_func
        self.options, self.strings = dataset.options, dataset._strings
        self._kept = []
        self.c_reduce = sl_window_reduce_fn(self._reduce)
        self.c_size = sl_window_size_fn(self._size)

    def _reduce(self, key, window, user):
        try:
            w = Dataset(window, (), self.options, None, self.strings)
            ds = self.reduce_func(key, w)
            if not isinstance(ds, Dataset):
                raise TypeError("group_by_window: reduce_func must return a sluice.Dataset, "
                                "not %s" % type(ds).__name__)
            self._kept.extend(cb for cb in ds._callbacks if cb not in self._kept)
            return lib.sl_dataset_retain(ds._ptr)
        except BaseException as e:
            self.last_error(e)
            return None

    def _size(self, key, user):
        try:
            return int(self.size_func(key))
        except BaseException as e:
            return self.last_error(e)


class MapContext:
    """Passed first to functions given with ``with_context=True``: the
    element's position and its own random stream, the same on any thread
    count (keyed by seed, op, epoch and index). Valid during the call only."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx):
        self._ctx = ctx

    def _p(self):
        if self._ctx is None:
            raise make_error(SL_ESTATE, "a MapContext is valid only during its call")
        return self._ctx

    def random(self):
        """A uniform 64-bit int."""
        return lib.sl_map_ctx_random(self._p())

    def uniform(self):
        """A float in [0, 1)."""
        return lib.sl_map_ctx_uniform(self._p())

    @property
    def index(self):
        return lib.sl_map_ctx_index(self._p())

    @property
    def epoch(self):
        return lib.sl_map_ctx_epoch(self._p())



_AUTO_AUGMENT = {None: 0, "trivial_augment_wide": 1, "rand_augment": 2, "auto_augment": 3}
_INTERPOLATION = {"nearest": 0, "bilinear": 1}


def _pair(name, value, center=1.0, lo_bound=0.0):
    """torchvision's _check_input: a number v means (center - v, center + v)
    (the low end kept at lo_bound); a pair is taken as it is."""
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("map_image: %s %r must be non-negative" % (name, value))
        return (max(center - value, lo_bound), center + value)
    lo, hi = value
    if lo > hi:
        raise ValueError("map_image: %s range %r must have lo <= hi" % (name, value))
    return (float(lo), float(hi))


def _augment_spec(spec, color_jitter, color_jitter_prob, grayscale_prob, gaussian_blur,
                  blur_prob, solarize_prob, solarize_threshold, random_erasing_prob,
                  erasing_scale, erasing_ratio, erasing_value, rotate, affine,
                  interpolation, auto_augment, num_ops, magnitude, bins):
    """map_image's augmentation keywords into the spec's fields."""
    if color_jitter is not None:
        values = tuple(color_jitter) + (0,) * (4 - len(tuple(color_jitter)))
        if len(values) != 4:
            raise ValueError("map_image: color_jitter is (brightness, contrast, saturation, "
                             "hue)")
        for field, value in zip(("brightness", "contrast", "saturation"), values[:3]):
            if value not in (None, 0):
                lo, hi = _pair(field, value)
                # an explicit (0, 0) is factor 0 in torchvision; the spec
                # reads [0, 0] as "left out", so the least float stands in
                getattr(spec, field)[:] = (lo or 1e-30, hi or 1e-30)
        if values[3] not in (None, 0):
            hue = _pair("hue", values[3], center=0.0, lo_bound=-0.5)
            if not -0.5 <= hue[0] <= hue[1] <= 0.5:
                raise ValueError("map_image: hue %r must be within [-0.5, 0.5]" % (values[3],))
            spec.hue[:] = hue
        spec.color_jitter_prob = 1.0 if color_jitter_prob is None else color_jitter_prob
    elif color_jitter_prob:
        raise ValueError("map_image: color_jitter_prob needs color_jitter")
    spec.grayscale_prob = grayscale_prob
    if gaussian_blur is not None:
        kernel, sigma = gaussian_blur
        if not isinstance(kernel, int):
            kx, ky = kernel
            if kx != ky:
                raise ValueError("map_image: gaussian_blur kernels are square")
            kernel = kx
        if kernel < 1 or kernel % 2 == 0:
            raise ValueError("map_image: gaussian_blur kernel_size %r must be odd and "
                             "positive" % (kernel,))
        sigma = (sigma, sigma) if isinstance(sigma, (int, float)) else tuple(sigma)
        if not 0 < sigma[0] <= sigma[1]:
            raise ValueError("map_image: gaussian_blur sigma %r must be 0 < lo <= hi" % (sigma,))
        spec.blur_kernel = kernel
        spec.blur_sigma[:] = sigma
        spec.blur_prob = 1.0 if blur_prob is None else blur_prob
    elif blur_prob:
        raise ValueError("map_image: blur_prob needs gaussian_blur")
    spec.solarize_prob = solarize_prob
    spec.solarize_threshold = solarize_threshold
    spec.erasing_prob = random_erasing_prob
    spec.erasing_scale[:] = tuple(erasing_scale)
    spec.erasing_ratio[:] = tuple(erasing_ratio)
    if isinstance(erasing_value, str):
        if erasing_value != "random":
            raise ValueError("map_image: erasing_value is a number, one per channel, or "
                             "\"random\"")
        spec.erasing_random = 1
    elif isinstance(erasing_value, (int, float)):
        spec.erasing_value[:] = (erasing_value,) * 3
    else:
        spec.erasing_value[:] = tuple(erasing_value)
    if rotate is not None:
        spec.rotate[:] = (-rotate, rotate) if isinstance(rotate, (int, float)) else tuple(rotate)
    if affine is not None:
        unknown = set(affine) - {"translate", "scale", "shear"}
        if unknown:
            raise ValueError("map_image: affine takes translate, scale, shear; not %s"
                             % ", ".join(sorted(unknown)))
        if affine.get("translate") is not None:
            spec.translate[:] = tuple(affine["translate"])
        if affine.get("scale") is not None:
            spec.affine_scale[:] = tuple(affine["scale"])
        shear = affine.get("shear")
        if shear is not None:
            if isinstance(shear, (int, float)):
                shear = (-shear, shear)
            shear = tuple(shear) + (0.0, 0.0) * (len(tuple(shear)) == 2)
            if len(shear) != 4:
                raise ValueError("map_image: shear is a number, (lo, hi) or 4 values")
            spec.shear[:] = shear
    try:
        spec.interpolation = _INTERPOLATION[interpolation]
        spec.auto_augment = _AUTO_AUGMENT[auto_augment]
    except KeyError as e:
        raise ValueError("map_image: bad interpolation or auto_augment %s (auto_augment: "
                         "trivial_augment_wide, rand_augment or auto_augment)" % e) from None
    spec.rand_augment_num_ops = num_ops
    spec.rand_augment_magnitude = magnitude
    spec.num_magnitude_bins = bins



_CLIP_SAMPLERS = {"random": 0, "uniform": 1, "center": 2}


def _image_spec(preset, size, kw, image_index, mask_index=None):
    """One sl_image_spec from map_image's keywords (kw: name -> value)."""
    if preset not in _CROPS:
        raise ValueError("map_image: preset must be one of %s" % ", ".join(_CROPS))
    spec = sl_image_spec()
    if lib.sl_image_spec_init(spec, ctypes.sizeof(spec), _CROPS[preset], size) < 0:
        raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
    try:
        spec.layout = _LAYOUTS[kw["layout"]]
        spec.dtype = _DTYPES[kw["dtype"]]
    except KeyError as e:
        raise ValueError("map_image: bad layout or dtype %s" % e) from None
    if kw["height"] is not None:
        spec.height = kw["height"]
    if kw["width"] is not None:
        spec.width = kw["width"]
    if kw["scale"] is not None:
        spec.scale_min, spec.scale_max = kw["scale"]
    if kw["ratio"] is not None:
        spec.ratio_min, spec.ratio_max = kw["ratio"]
    for field in ("flip_prob", "resize_shorter", "max_pixels", "allow_warnings",
                  "exact_pixels", "fast_upsample"):
        if kw[field] is not None:
            setattr(spec, field, kw[field])
    if kw["mean"] is not None:
        spec.mean[:] = list(kw["mean"])
    if kw["std"] is not None:
        spec.std[:] = list(kw["std"])
    spec.image_index = image_index
    if kw["decode"] not in ("rgb", "raw"):
        raise ValueError("map_image: decode must be \"rgb\" or \"raw\", not %r"
                         % (kw["decode"],))
    spec.decode = SL_DECODE_RAW if kw["decode"] == "raw" else SL_DECODE_RGB
    if mask_index is not None:
        if kw["mask_dtype"] not in ("uint8", "uint16"):
            raise ValueError("map_image: mask_dtype must be \"uint8\" or \"uint16\"")
        spec.with_mask, spec.mask_index = 1, mask_index
        spec.mask_channels = kw["mask_channels"]
        spec.mask_dtype = _DTYPES[kw["mask_dtype"]]
    if kw["channels"] is not None:
        spec.channels = kw["channels"]
    if kw["background"] is not None:
        bg = kw["background"]
        bg = (bg,) * 3 if isinstance(bg, (int, float)) else tuple(bg)
        if len(bg) != 3:
            raise ValueError("map_image: background is one gray level or (r, g, b)")
        spec.blend_alpha = 1
        spec.background[:] = [int(round(c)) for c in bg]
    _augment_spec(spec, kw["color_jitter"], kw["color_jitter_prob"], kw["grayscale_prob"],
                  kw["gaussian_blur"], kw["blur_prob"], kw["solarize_prob"],
                  kw["solarize_threshold"], kw["random_erasing_prob"], kw["erasing_scale"],
                  kw["erasing_ratio"], kw["erasing_value"], kw["rotate"], kw["affine"],
                  kw["interpolation"], kw["auto_augment"], kw["rand_augment_num_ops"],
                  kw["rand_augment_magnitude"], kw["num_magnitude_bins"])
    return spec


class View:
    """One kind of crop for map_image(views=[...]): size (default: map_image's),
    count (how many such crops), preset, and any map_image keyword (scale,
    ratio, flip_prob, color_jitter, gaussian_blur, ..., dtype, layout) for
    these crops; what it leaves out comes from map_image's own keywords.

        sluice.View(size=224, scale=(0.4, 1.0), count=2, gaussian_blur=(23, (0.1, 2.0)))
    """

    _KEYWORDS = None

    def __init__(self, size=None, count=1, preset=None, **options):
        if View._KEYWORDS is None:
            import inspect
            params = inspect.signature(Dataset.map_image).parameters
            View._KEYWORDS = set(params) - {"self", "preset", "size", "num_parallel_calls",
                                            "image_key", "views", "mask_key", "mask_channels",
                                            "mask_dtype"}
        unknown = set(options) - View._KEYWORDS
        if unknown:
            raise TypeError("View: unknown keyword %s" % ", ".join(sorted(unknown)))
        if not isinstance(count, int) or count < 1:
            raise ValueError("View: count must be a positive int, not %r" % (count,))
        self.size, self.count, self.preset, self.options = size, count, preset, options

    def __repr__(self):
        opts = "".join(", %s=%r" % kv for kv in sorted(self.options.items()))
        return "View(size=%r, count=%r%s)" % (self.size, self.count, opts)


class Dataset:
    """An immutable pipeline description with tf.data's names and keywords.
    Build one from a source (``Dataset.range``, ``image_folder``,
    ``file_list``, ``from_files``, ``from_tensor_slices``), chain ops (each
    returns a new Dataset), then iterate:

    >>> ds = (sluice.Dataset.image_folder("/data/train")
    ...       .shuffle(sluice.ALL, seed=0)
    ...       .map_image(preset="train", size=224)
    ...       .batch(256, drop_remainder=True)
    ...       .prefetch(sluice.AUTOTUNE))
    >>> for epoch in range(3):
    ...     for images, labels in ds:    # a new order and new crops each epoch
    ...         ...

    Elements come out as tf.data shapes them: the value of a one-tensor
    element, a tuple for several. Each ``iter(ds)`` is a new pass with its
    own threads and the dataset's next epoch (0, 1, 2, ...): shuffles
    reshuffle and random crops change, and the same seed and epoch replay
    byte for byte; ``ds.iterator(epoch=n)`` runs a chosen one.

    Datasets may be shared between threads; each iterator is used by one
    thread at a time.
    """

    def __init__(self, ptr, callbacks=(), options=None, image_layout=None, strings="str"):
        self._ptr = ptr
        lib.sl_dataset_structure(ptr)  # worked out now, not as the first element passes
        self._callbacks = tuple(callbacks)
        self.options = options if options is not None else Options()
        self.image_layout = image_layout  # "HWC"/"CHW" after map_image (for sluice.torch)
        self._image_leaf = 0  # ... and which tensor the image is
        self._mask_leaf = None  # ... and its mask's (map_image(mask_key=...))
        self._window = None  # window(): value -> the dataset it stands for
        # how string values come out: "str" (paths, labels: os.fsdecode's
        # surrogateescape) or "bytes" (records: tfrecord, webdataset); an
        # Interleaver in place of either: whatever its map_func's datasets
        # have (known once it has run, before the first element comes out)
        self._strings = strings
        self.distributed = None  # (rank, world_size) once distribute() is in the pipeline

    @property
    def strings(self):
        """How string values come out: "str" (paths; os.fsdecode's
        surrogateescape) or "bytes" (records, as tf.data yields them)."""
        s = self._strings
        return s if isinstance(s, str) else (s.strings or "str")

    def __del__(self, _free=lib.sl_dataset_release, _pending=pending_interrupt):
        p, self._ptr = getattr(self, "_ptr", None), None
        if p:
            try:
                _free(p)
            except KeyboardInterrupt:  # see sluice._errors.pending_interrupt
                _pending[0] = True

    def _derive(self, builder, *args, callback=None, image_layout=False, strings=None):
        ptr = _check(builder(lib.sl_dataset_retain(self._ptr), *args))
        cbs = self._callbacks + ((callback,) if callback else ())
        layout = self.image_layout if image_layout is False else image_layout
        ds = Dataset(ptr, cbs, self.options, layout, strings or self._strings)
        ds._image_leaf, ds._mask_leaf = self._image_leaf, self._mask_leaf
        ds.distributed = self.distributed
        if builder.__name__ in _SAME_ELEMENTS:
            ds._window = self._window
        return ds

    # ---- sources ----

    @staticmethod
    def counter(start=0, step=1, dtype=None, name=None):
        """tf.data's Dataset.counter: start, start + step, ... without end
        (int64; dtype is accepted for tf.data's signature)."""
        del dtype, name
        return Dataset(_check(lib.sl_counter(_count("counter", "start", start),
                                             _count("counter", "step", step))))

    @staticmethod
    def random(seed=None, rerandomize_each_iteration=None, name=None):
        """tf.data's Dataset.random: endless int64 values from seed's stream
        (None: the iterator's seed), the same on any thread count. Each
        epoch draws anew unless rerandomize_each_iteration=False (tf.data
        repeats them unless it is True: sluice's default follows its other
        random ops)."""
        del name
        seed = -1 if seed is None else _count("random", "seed", seed)
        flags = SL_SAME_EACH_EPOCH if rerandomize_each_iteration is False else 0
        return Dataset(_check(lib.sl_random(seed, flags)))

    @staticmethod
    def range(start, stop=None, step=1):
        """Scalar int64 elements, like Python's range: range(stop) or
        range(start, stop[, step])."""
        if stop is None:
            start, stop = 0, start
        start, stop, step = (_count("range", n, v) for n, v in
                             (("start", start), ("stop", stop), ("step", step)))
        if step == 0:
            raise ValueError("range: step must not be 0")
        return Dataset(_check(lib.sl_range(start, stop, step)))

    @staticmethod
    def from_tensor_slices(tensors, *more):
        """Slices of the tensors along their first dimension (which must
        agree), as tf.data's from_tensor_slices: an array gives elements of
        one value, a tuple of arrays tuples, a dict of arrays dicts (and
        nestings of them the same nestings). The arrays are copied once
        into the library; the slices share that copy."""
        value = (tensors,) + more if more else tensors
        el = _tensor.make_element([_sliceable(v) for v in _structure.flatten(value)])
        ds = Dataset(_check(lib.sl_from_tensor_slices(el)))
        return ds._nested(_structure.nest_like(value, ds._structure(probe=False)))

    @staticmethod
    def from_tensors(tensors, *more):
        """A dataset of one element, the tensors as given (tf.data's
        from_tensors): an interleave's map_func often wraps its input so.
        Tuples and dicts nest as in from_tensor_slices."""
        value = (tensors,) + more if more else tensors
        el = _tensor.make_element(_structure.flatten(value))
        try:
            ds = Dataset(_check(lib.sl_from_element(el)))
        finally:
            lib.sl_element_release(el)
        return ds._nested(_structure.nest_like(value, ds._structure(probe=False)))

    def _nested(self, structure):
        """self read as `structure` where it nests deeper than the flat tuple
        the library made of its tensors (sl_with_structure)."""
        if isinstance(structure, _structure.Leaf) or (
                isinstance(structure, tuple) and len(structure) != 1 and
                all(isinstance(x, _structure.Leaf) for x in structure)):
            return self
        c = _structure.CStructure(structure)
        return self._derive(lib.sl_with_structure, c.ptr)

    # ---- structure ----

    def _arguments_of(self):
        """values -> the arguments of a function called with an element of
        self (interleave's map_func): its structure's, looked up when the
        first element comes (a map above may have learned it by then);
        after window(), each value a dataset of the window's elements."""
        ptr, window, cache = self._ptr, self._window, {}

        def args_of(values):
            p = lib.sl_dataset_structure(ptr)
            f = cache.get(p)
            if f is None:
                args = _structure.arguments(_structure.from_c(p))
                f = cache[p] = ((lambda vs: args([window(v) for v in vs])) if window
                                else args)
            return f(values)

        return args_of

    def _declare(self, structure):
        """Tells the library the structure of self's elements, which it
        learns otherwise only as they come (an interleave, a generator)."""
        c = _structure.CStructure(structure)
        if lib.sl_dataset_declare_structure(self._ptr, c.ptr) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())

    def _structure(self, probe=True):
        """The structure of the elements (sluice._structure), or None when
        the library does not know it: after a map that has not run yet.
        probe=True then takes one element through a pass of its own, as
        tf.data traces a function, to learn it."""
        s = _structure.of_dataset(self._ptr)
        if s is None and probe:
            it = Iterator(self.take(1), Options(autotune=False), interruptible=False)
            try:
                next(it, None)
            finally:
                it.close()
            s = _structure.of_dataset(self._ptr)
        return s

    @property
    def element_spec(self):
        """tf.data's element_spec: the structure of the elements (tuples and
        dicts as they nest) with a sluice.TensorSpec for each value: its
        shape (None for a dimension not known, shape None when not even the
        rank is) and dtype ("string" for str/bytes values). After a Python
        map that has not run, one element is taken through to learn it;
        None for an empty dataset whose structure no op states."""
        return _structure.spec(self._structure())

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None,
                       output_signature=None, name=None):
        """tf.data's from_generator: the values a Python generator yields.
        generator: a callable returning an iterator (called with *args at
        the start of every pass: each epoch, each repeat) or an iterable
        (iter() of it each pass). output_signature: a sluice.TensorSpec, or
        tuples and dicts of them as the elements nest; values are converted
        to its dtypes and their shapes checked (a mismatch is an element
        error, CallbackError from the TypeError). Without a signature,
        values go in as they are (as Dataset.map's results do), and the
        first one tells the structure every later one must have. Calls never overlap;
        cardinality is unknown; map, batch, prefetch and autotune work over
        it as over any source."""
        sig = _dynamic._signature(output_signature, output_types, output_shapes)
        gen = _dynamic.Generator(generator, args, sig)
        ds = Dataset(_check(lib.sl_from_generator(gen.c_fn, None, 0)), (gen,))
        gen.dataset_ptr = ds._ptr
        if sig is not None:
            ds._declare(_dynamic.structure_of(sig))
        return ds

    @staticmethod
    def from_queue(q):
        """The samples other threads put into a sluice.Queue, in order,
        until it is closed: a source for online training."""
        if not isinstance(q, _dynamic.Queue):
            raise TypeError("from_queue: q must be a sluice.Queue, not %s" % type(q).__name__)
        return q._reader(Dataset(_check(lib.sl_from_queue(q._q))))

    @staticmethod
    def from_files(paths, labels=None, with_paths=False):
        """The files' contents, as DALI's file reader gives them: elements
        (bytes,) or, with labels, (bytes, label) as uint8 [n] and int64,
        plus the path (a str) with with_paths=True. Paths are str or bytes.
        A file that cannot be read is an element error naming it."""
        paths = [os.fsencode(p) for p in paths]
        n = len(paths)
        arr = (ctypes.c_char_p * max(n, 1))(*paths)
        lab = None
        if labels is not None:
            labels = list(labels)
            if len(labels) != n:
                raise ValueError("from_files: %d paths but %d labels" % (n, len(labels)))
            lab = (ctypes.c_int64 * max(n, 1))(*labels)
        return Dataset(_check(lib.sl_from_files(arr, lab, n))).read_files(with_paths)

    @staticmethod
    def image_folder(root, extensions=None, with_paths=False, rescan=False):
        """torchvision's ImageFolder: (bytes uint8 [n], label int64) pairs,
        classes from the sorted subdirectory names, files in sorted order
        (extensions: comma-separated, default "jpg,jpeg,png,webp", what
        map_image decodes; the format comes from the bytes, not the name);
        with_paths=True adds the path (a str) as a third value. Messages
        about a file name it either way. rescan=True lists the folder again
        at the start of every epoch (and every repeat) after the first:
        new files come after the known ones, a new class folder takes the
        next label (existing labels never move), and a file deleted since
        it was listed is skipped with a warning."""
        ext = extensions.encode() if isinstance(extensions, str) else extensions
        flags = (SL_WITH_PATHS if with_paths else 0) | (SL_FOLDER_RESCAN if rescan else 0)
        return Dataset(_check(lib.sl_image_folder(os.fsencode(root), ext, flags)))

    @staticmethod
    def file_list(list_path, root=None, with_paths=False):
        """Like image_folder, from "relative/path label" lines (relative to
        root, default the list's folder)."""
        r = os.fsencode(root) if root is not None else None
        flags = SL_WITH_PATHS if with_paths else 0
        return Dataset(_check(lib.sl_file_list(os.fsencode(list_path), r, flags)))

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None):
        """The paths (str) matching a glob pattern or a list of them, as
        tf.data.Dataset.list_files: sorted and without duplicates, so every
        process lists the same files; shuffled (the default, as in tf.data;
        shuffle=False keeps them sorted) with a new order each epoch from
        seed (None: Options(seed)). Nothing is opened: ``.shard()`` or
        ``.distribute()`` right after it splits files between workers. A
        pattern matching nothing is a NotFoundError naming it."""
        pats = _records.path_list(file_pattern, "list_files")
        arr = (ctypes.c_char_p * len(pats))(*pats)
        flags = 0 if shuffle is False else SL_LIST_SHUFFLE
        return Dataset(_check(lib.sl_list_files(arr, len(pats), flags,
                                                -1 if seed is None else seed)))

    @staticmethod
    def _paths(filenames, op):
        """A dataset of paths: a Dataset as is, else the given files in order."""
        if isinstance(filenames, Dataset):
            return filenames
        paths = _records.path_list(filenames, op)
        arr = (ctypes.c_char_p * len(paths))(*paths)
        return Dataset(_check(lib.sl_from_files(arr, None, len(paths))))

    @staticmethod
    def tfrecord(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None,
                 *, with_paths=False, check_crc=True, deterministic=None):
        """tf.data.TFRecordDataset: the records of TFRecord files as bytes,
        in file order. filenames: a path, a list of paths or a Dataset of
        them (list_files). compression_type None or "" (none), "ZLIB" or
        "GZIP", inflated as the file streams. num_parallel_reads: read that
        many files at a time (interleaved record by record, in a fixed
        order unless deterministic=False; sluice.AUTOTUNE: one per CPU);
        None reads them one after another. buffer_size is accepted for
        tf.data's signature: sluice reads in large chunks ahead anyway.
        Both CRCs are checked; check_crc=False skips the data's. A bad
        record is a CorruptDataError naming the file and the byte offset,
        which Options(error_policy="skip") skips. with_paths=True yields
        (record, path)."""
        del buffer_size
        comp = _COMPRESSIONS.get(
            compression_type.upper() if isinstance(compression_type, str) else compression_type)
        if comp is None:
            raise ValueError("tfrecord: compression_type must be None, 'ZLIB' or 'GZIP', not %r"
                             % (compression_type,))
        flags = ((SL_WITH_PATHS if with_paths else 0)
                 | (0 if check_crc else SL_TFRECORD_NO_DATA_CRC))
        paths = Dataset._paths(filenames, "tfrecord")
        if num_parallel_reads is None:
            return paths._derive(lib.sl_tfrecord, comp, flags, strings="bytes")
        n = _count("tfrecord", "num_parallel_reads", num_parallel_reads)
        if n != AUTOTUNE and n < 1:
            raise ValueError("tfrecord: num_parallel_reads must be >= 1 or sluice.AUTOTUNE")
        if flags == 0:  # the reader in C, never through Python
            keep = ctypes.c_int(comp)
            cycle = lib.sl_cpu_count() if n == AUTOTUNE else n
            ds = paths._derive(lib.sl_interleave, _records.TFRECORD_FN,
                               ctypes.c_void_p(ctypes.addressof(keep)), cycle, 1,
                               n, SL_NONDETERMINISTIC if deterministic is False else 0,
                               strings="bytes")
            ds._callbacks += (_records.KeepAlive(keep),)
            ds._declare(_structure.Leaf("string", ()))  # (what every file's reader gives)
            return ds
        return paths.interleave(
            lambda p: Dataset.tfrecord(p, compression_type, with_paths=with_paths,
                                       check_crc=check_crc),
            cycle_length=n, block_length=1, num_parallel_calls=n, deterministic=deterministic)

    @staticmethod
    def tfrecord_indexed(filenames, index_paths=None, *, with_paths=False, check_crc=True):
        """TFRecord shards with random access by record, as DALI's
        readers.tfrecord(path, index_path) reads them: the records of the
        shards in order, as bytes, with a known cardinality, so
        shuffle(sluice.ALL) permutes every record with no buffer and a
        saved state seeks. index_paths: one DALI tfrecord2idx file per
        shard ("offset size" lines), or None (or a None entry) to use
        "<shard>.idx" beside the shard when it is current, else to index
        the shard in one pass and write that file (kept in memory where
        the folder is read-only). Uncompressed shards only. A bad record
        is a CorruptDataError naming the shard and the byte offset; an
        index that does not fit its shard fails here, naming the line."""
        if isinstance(filenames, (str, bytes, os.PathLike)):
            filenames = [filenames]
        paths = [os.fsencode(p) for p in filenames]
        n = len(paths)
        if n < 1:
            raise ValueError("tfrecord_indexed: no shards")
        arr = (ctypes.c_char_p * n)(*paths)
        idx = None
        if index_paths is not None:
            index_paths = list(index_paths)
            if len(index_paths) != n:
                raise ValueError("tfrecord_indexed: %d shards but %d index paths"
                                 % (n, len(index_paths)))
            idx = (ctypes.c_char_p * n)(*[None if p is None else os.fsencode(p)
                                          for p in index_paths])
        flags = ((SL_WITH_PATHS if with_paths else 0)
                 | (0 if check_crc else SL_TFRECORD_NO_DATA_CRC))
        return Dataset(_check(lib.sl_tfrecord_indexed(arr, n, idx, flags)), strings="bytes")

    @staticmethod
    def megatron(prefix, documents=False):
        """Megatron-LM's indexed dataset (PREFIX.idx and PREFIX.bin, as
        megatron.core.datasets.indexed_dataset writes them), memory-mapped:
        element i is sequence i's tokens as a 1-D array in the file's dtype,
        or with documents=True document i (its sequences joined). Random
        access: shuffle(sluice.ALL) and a saved state seek. An index that
        does not fit its files is a CorruptDataError naming it."""
        flags = SL_TOKENS_DOCUMENTS if documents else 0
        return Dataset(_check(lib.sl_megatron(os.fsencode(prefix), flags)))

    @staticmethod
    def npy(path, seq_len=0):
        """A NumPy .npy file, memory-mapped: a 2-D array's rows (seq_len 0
        or the row length), or a 1-D token array cut into elements of
        seq_len tokens (the last may be shorter). Little-endian integer and
        float dtypes; random access as Dataset.megatron."""
        return Dataset(_check(lib.sl_npy(os.fsencode(path),
                                         _count("npy", "seq_len", seq_len), 0)))

    @staticmethod
    def _wds_keys(keys, op):
        """webdataset's keys as C arrays: the names, and their types ("cls",
        "cls2", "index", "inx" and "id" parsed as int64, the rest bytes)."""
        if isinstance(keys, str):
            keys = keys.split()
        keys = [k.encode() if isinstance(k, str) else bytes(k) for k in keys]
        if not keys:
            raise ValueError("%s: give at least one key" % op)
        ints = {b"cls", b"cls2", b"index", b"inx", b"id"}
        types = [SL_INT64 if k in ints else SL_STRING for k in keys]
        return (ctypes.c_char_p * len(keys))(*keys), (ctypes.c_int * len(keys))(*types)

    @staticmethod
    def webdataset(urls, keys=("jpg", "cls"), *, with_keys=False):
        """WebDataset tar shards (plain or .tar.gz): members grouped into
        samples by key (the path up to the first "." of the base name), each
        sample yielding the values of `keys` as a tuple in that order, like
        webdataset's ``.to_tuple("jpg", "cls")``: "cls", "cls2", "index",
        "inx" and "id" as int64 (the text parsed), everything else as bytes
        (feed map_image directly). A key may list alternatives, "jpg;png".
        urls: a path, "shard-{000000..000015}.tar" brace notation, a list,
        or a Dataset of paths. with_keys=True adds the sample's key (str,
        webdataset's "__key__"). A sample without a requested key, a bad
        header checksum or a member running past the end is a
        CorruptDataError naming the shard and the byte offset."""
        karr, tarr = Dataset._wds_keys(keys, "webdataset")
        if isinstance(urls, Dataset):
            paths = urls
        else:
            expanded = [u for url in _records.path_list(urls, "webdataset")
                        for u in _records.brace_expand(os.fsdecode(url))]
            paths = Dataset._paths(expanded, "webdataset")
        return paths._derive(lib.sl_tar_shards, karr, tarr, len(karr),
                             SL_WITH_PATHS if with_keys else 0, strings="bytes")

    @staticmethod
    def webdataset_indexed(urls, keys=("jpg", "cls"), *, with_keys=False):
        """webdataset() with random access by sample, as wids reads tar
        shards: the same samples in the same order and the same element
        layout, but a known cardinality, so shuffle(sluice.ALL) permutes
        every sample of every shard with no buffer, distribute() splits
        samples rather than shards, and a saved state seeks. Each shard's
        index ("<shard>.idx": one "offset size" line per sample) is used
        when current, else built in one pass over the headers and written
        beside it; a URL shard is read one ranged GET per sample. Plain
        (uncompressed) tar only. urls: a path, brace notation or a list."""
        karr, tarr = Dataset._wds_keys(keys, "webdataset_indexed")
        paths = [os.fsencode(u) for url in _records.path_list(urls, "webdataset_indexed")
                 for u in _records.brace_expand(os.fsdecode(url))]
        if not paths:
            raise ValueError("webdataset_indexed: no shards")
        arr = (ctypes.c_char_p * len(paths))(*paths)
        return Dataset(_check(lib.sl_tar_indexed(arr, len(paths), karr, tarr, len(karr),
                                                 SL_WITH_PATHS if with_keys else 0)),
                       strings="bytes")

    # ---- transformations ----

    # ---- combining ----

    @staticmethod
    def _combined(builder, inputs, *args, strings=None):
        """A dataset built in C from several inputs (each retained for it)."""
        arr = (ctypes.c_void_p * len(inputs))(*(lib.sl_dataset_retain(d._ptr) for d in inputs))
        ptr = _check(builder(arr, len(inputs), *args))
        cbs = tuple(cb for d in inputs for cb in d._callbacks)
        ds = Dataset(ptr, cbs, inputs[0].options, None, strings or inputs[0]._strings)
        return ds

    @staticmethod
    def zip(*datasets, name=None):
        """tf.data's zip: element i is the tuple (or dict, or nesting) of
        element i of each dataset; it ends with the shortest. Takes a tuple
        or dict of datasets (nested as deep as you like), or the datasets
        as arguments: Dataset.zip(a, b) is Dataset.zip((a, b))."""
        del name
        value = datasets[0] if len(datasets) == 1 else datasets
        if isinstance(value, Dataset):
            raise TypeError("zip: give several datasets, or a tuple or dict of them")

        def build(v):
            if isinstance(v, Dataset):
                return v
            if isinstance(v, dict):
                keys = sorted(v)
                if not all(isinstance(k, str) for k in keys):
                    raise TypeError("zip: dict keys must be str")
                kc = (ctypes.c_char_p * len(keys))(*(k.encode() for k in keys))
                return Dataset._combined(lib.sl_zip, [build(v[k]) for k in keys], kc)
            if isinstance(v, (tuple, list)):
                return Dataset._combined(lib.sl_zip, [build(x) for x in v], None)
            raise TypeError("zip: a %s is not a dataset" % type(v).__name__)

        return build(value)

    def concatenate(self, dataset, name=None):
        """tf.data's concatenate: this dataset's elements, then dataset's;
        their structures must fit one dataset's (TypeError from
        ShapeError/DTypeError otherwise)."""
        del name
        if not isinstance(dataset, Dataset):
            raise TypeError("concatenate: not a sluice.Dataset: %s" % type(dataset).__name__)
        try:
            p = _check(lib.sl_concatenate(lib.sl_dataset_retain(self._ptr),
                                          lib.sl_dataset_retain(dataset._ptr)))
        except Error as e:  # tf.data's error for elements of other structures
            raise TypeError(str(e)) from e
        ds = Dataset(p, self._callbacks + dataset._callbacks, self.options, None, self._strings)
        if (self.image_layout == dataset.image_layout and self._image_leaf == dataset._image_leaf
                and self._mask_leaf == dataset._mask_leaf):
            ds.image_layout, ds._image_leaf = self.image_layout, self._image_leaf
            ds._mask_leaf = self._mask_leaf
        return ds

    @staticmethod
    def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True):
        """tf.data's choose_from_datasets: for each int64 c choice_dataset
        gives, the next element of datasets[c]. stop_on_empty_dataset
        (True, as tf.data's): end when a chosen dataset has ended; False
        passes over it, ending when all have."""
        datasets = _datasets("choose_from_datasets", datasets)
        arr = (ctypes.c_void_p * len(datasets))(*(lib.sl_dataset_retain(d._ptr)
                                                  for d in datasets))
        p = _check(lib.sl_choose_from(lib.sl_dataset_retain(choice_dataset._ptr), arr,
                                      len(datasets),
                                      SL_STOP_ON_EMPTY if stop_on_empty_dataset else 0))
        cbs = choice_dataset._callbacks + tuple(cb for d in datasets for cb in d._callbacks)
        return Dataset(p, cbs, datasets[0].options, None, datasets[0]._strings)

    @staticmethod
    def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False,
                             rerandomize_each_iteration=None):
        """tf.data's sample_from_datasets: each element from datasets[i]
        with probability weights[i] / sum(weights) (None: equal), drawn
        from seed's stream (None: the iterator's), the same on any thread
        count; each epoch draws anew (rerandomize_each_iteration is
        accepted; False keeps one draw for every epoch).
        stop_on_empty_dataset=False (as tf.data's): a dataset that ends is
        passed over."""
        datasets = _datasets("sample_from_datasets", datasets)
        w = None
        if weights is not None:
            weights = [float(x) for x in weights]
            if len(weights) != len(datasets):
                raise ValueError("sample_from_datasets: %d weights for %d datasets"
                                 % (len(weights), len(datasets)))
            w = (ctypes.c_double * len(weights))(*weights)
        return Dataset._combined(lib.sl_sample_from, datasets, w,
                                 -1 if seed is None else _count("sample_from_datasets", "seed",
                                                                seed),
                                 (SL_STOP_ON_EMPTY if stop_on_empty_dataset else 0) |
                                 (SL_SAME_EACH_EPOCH if rerandomize_each_iteration is False
                                  else 0))

    def read_files(self, with_paths=False):
        """Replaces the path in the first value by the file's contents
        (uint8 [n]), as map(tf.io.read_file) does; with_paths=True keeps
        the path as the last value."""
        return self._derive(lib.sl_read_files, SL_WITH_PATHS if with_paths else 0)

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None, *,
            with_context=False):
        """Applies a Python function to each element, called as tf.data
        calls it: map_func(x) for one value, map_func(*values) for a tuple.
        It returns a value or a tuple of values (numpy arrays, str/bytes,
        int -> int64, float -> float32); returning an input value unchanged
        shares it.

        num_parallel_calls: elements in flight, >= 1 or sluice.AUTOTUNE.
        None (tf.data's sequential default) also means AUTOTUNE here: the
        output is the same in either case (ordered unless deterministic is
        False), and the calls hold the GIL one at a time anyway.
        deterministic: None follows Options(deterministic), True keeps input
        order, False emits in completion order.

        Slow by nature: each call holds the GIL and converts its inputs and
        outputs. Prefer map_image and the other C ops for per-element work.
        with_context=True passes a MapContext first (index, epoch, and a
        per-element random stream that is the same on any thread count).
        name shows in messages and statistics and is part of the pipeline's
        fingerprint (default: the function's name)."""
        cb = _Callback(map_func, "map", with_context, self.strings == "bytes")
        flags = (0 if deterministic is None else
                 SL_MAP_ORDERED if deterministic else SL_NONDETERMINISTIC)
        label = (name or getattr(map_func, "__name__", None) or "python").encode()
        return self._derive(lib.sl_map, label, cb.c_fn, None, _parallel("map", num_parallel_calls),
                            flags, callback=cb, image_layout=None)

    def map_image(self, preset="train", size=224, *, num_parallel_calls=None, layout="HWC",
                  dtype="uint8", height=None, width=None, scale=None, ratio=None,
                  flip_prob=None, resize_shorter=None, mean=None, std=None, max_pixels=None,
                  allow_warnings=None, exact_pixels=None, fast_upsample=None, image_key=None,
                  color_jitter=None, color_jitter_prob=None, grayscale_prob=0.0,
                  gaussian_blur=None, blur_prob=None, solarize_prob=0.0,
                  solarize_threshold=128.0, random_erasing_prob=0.0,
                  erasing_scale=(0.02, 0.33), erasing_ratio=(0.3, 3.3), erasing_value=0,
                  rotate=None, affine=None, interpolation="nearest", auto_augment=None,
                  rand_augment_num_ops=2, rand_augment_magnitude=9, num_magnitude_bins=31,
                  decode="rgb", channels=None, background=None, mask_key=None,
                  mask_channels=1, mask_dtype="uint8", views=None):
        """Decodes a JPEG and transforms it (in C, in parallel), leaving the
        element's other values in place: the value under image_key of a
        dict element ("image" by default, or "image/encoded" as
        tf.train.Example names it; a key, an index, or a tuple of them into
        nested elements), else the first value. preset "train"
        (random-resized crop, flip), "eval" (resize shorter side, centre
        crop) or "resize";
        output uint8 (or float32 normalised with mean/std) in layout "HWC"
        or "CHW". num_parallel_calls as for map (None: AUTOTUNE).
        YCbCr files are resampled plane by plane from their own chroma
        resolution and converted to RGB per output pixel (faster, under 1
        level mean error); exact_pixels=1 decodes the window to RGB with
        libjpeg's fancy upsampling first, PIL/torchvision's pixels.
        fast_upsample=1 replicates subsampled chroma instead of
        interpolating it: faster, pixels differ slightly from PIL's.
        allow_warnings=1 accepts damaged files that libjpeg can recover from
        (a truncated file then decodes with its missing rows grey).

        JPEG, PNG and WebP files all decode (the format from the bytes).
        The image may also be decoded pixels, uint8 [H, W, C] with C 1 to 4
        (a numpy array, a frame, a cache of an earlier map_image): they get
        what a lossless PNG of them would, so map_image("resize", 256)
        .cache().map_image("train", 224) decodes each file once and later
        epochs only crop and resize (new crops every epoch).
        A PNG or WebP with alpha loses it, as PIL's convert("RGB"), unless
        background=(r, g, b) (or one gray level) is given: then it is
        composited over that colour. decode="raw" is for label maps and
        depth: the file's own samples, no colour conversion, resampled by
        nearest neighbour, so every value is one the file holds; a palette
        PNG gives its indices (PIL's np.array(Image.open(mask))), a 16-bit
        PNG uint16 values (dtype="uint16"). channels= (1 to 4) is then
        required: gray is replicated and an opaque alpha added to fill it,
        alpha dropped to fit; colour into 1 or 2 channels, or 16-bit into
        uint8, is an element error. Crop and flip apply; augmentations and
        normalisation do not.

        mask_key= names a second encoded image in the element (a
        segmentation mask, a depth map; a key or index as image_key): it is
        cropped and flipped exactly as the image (the same window, scaled
        if its size differs) and decoded as decode="raw" with mask_channels
        and mask_dtype, into the image's size and layout, in its own place:

            ds.map_image("train", 480, mask_key="mask")  # {"image", "mask"}

        Augmentations, with torchvision's meanings and defaults, drawn per
        image from the seed (new each epoch), in this order after the crop
        and flip: rotate (RandomRotation's degrees: d or (lo, hi)) and
        affine (dict of RandomAffine's translate, scale, shear), with
        interpolation "nearest" or "bilinear"; auto_augment
        ("trivial_augment_wide", "rand_augment" with rand_augment_num_ops and
        rand_augment_magnitude, or "auto_augment", the ImageNet policy);
        color_jitter=(brightness, contrast, saturation, hue) as ColorJitter
        (a number or a (lo, hi) pair each) with color_jitter_prob;
        grayscale_prob; gaussian_blur=(kernel_size, sigma or (lo, hi)) with
        blur_prob; solarize_prob with solarize_threshold; then, on the
        normalised output, RandomErasing: random_erasing_prob, erasing_scale,
        erasing_ratio, erasing_value (a number, one per channel, or
        "random").

        views=[sluice.View(...), ...]: several crops of each image (DINO's
        multi-crop), each View with its own size, count and any of the
        keywords above (the rest from these); the file is decoded once and
        the image becomes a tuple of the views' tensors, in order."""
        kw = dict(locals())
        for name in ("self", "preset", "size", "num_parallel_calls", "image_key", "views",
                     "mask_key"):
            del kw[name]
        index = self._image_index(image_key)
        parallel = _parallel("map_image", num_parallel_calls)
        mask = None
        if mask_key is not None:
            if views is not None:
                raise ValueError("map_image: mask_key goes with one view, not views=")
            structure = self._structure()
            try:
                mask = _structure.leaf_at(structure, mask_key)
            except KeyError:
                raise KeyError("map_image: the elements (%s) have no mask at %r"
                               % (_structure.text(structure) if structure is not None
                                  else "of a structure not known", mask_key)) from None
        if views is None:
            spec = _image_spec(preset, size, kw, index, mask)
            ds = self._derive(lib.sl_map_image, spec, parallel, image_layout=layout)
        else:
            specs = []
            for v in views:
                if not isinstance(v, View):
                    raise TypeError("map_image: views must be sluice.View objects, not %s"
                                    % type(v).__name__)
                specs += [_image_spec(v.preset or preset, v.size or size, {**kw, **v.options},
                                      index)] * v.count
            if not specs:
                raise ValueError("map_image: views is empty")
            array = (sl_image_spec * len(specs))(*specs)
            layouts = {v.options.get("layout", layout) for v in views}
            ds = self._derive(lib.sl_map_image_views, array, len(specs), parallel,
                              image_layout=layouts.pop() if len(layouts) == 1 else None)
        ds._image_leaf, ds._mask_leaf = index, mask
        return ds

    def map_video(self, frames=8, preset="train", size=224, *, stride=1, fps=None,
                  clip_sampler="random", num_clips=1, video_key=None, input="auto",
                  short_clips="pad", with_timestamps=False, max_frames=1024,
                  num_parallel_calls=None, **image_options):
        """Decodes clips of `frames` frames from videos with FFmpeg (in C, a
        video per worker), leaving the element's other values in place.
        The video is the value under video_key (for a dict element
        "video", else the first value): its bytes (uint8 [n]) or its path
        or URL (a string, read by ranges; input="bytes" reads a string as
        the bytes). It becomes the clip, uint8 or float32 [T, H, W, 3]
        (layout "HWC") or [T, 3, H, W] ("CHW"), [num_clips, T, ...] with
        several clips; with_timestamps=True adds each frame's time in
        seconds (float64 [T]) after it, as a (clip, times) pair.

        Sampling as PyTorchVideo's: a clip's frames are stride frames of
        the stream's rate apart, or 1 / fps seconds with fps=; its start
        is clip_sampler's: "random" (uniform in [0, duration - clip], new
        each epoch), "uniform" (num_clips evenly spaced from 0 to the end)
        or "center" (num_clips evenly spaced with equal margins; one clip:
        the middle). The frame at time t is the one shown at t (the last
        whose timestamp is <= t), so variable frame rates give the right
        frames. A clip longer than the video is padded by repeating its
        last frame (short_clips="error": an element error instead).

        preset, size and the keywords of map_image (layout, dtype, mean,
        std, scale, ratio, flip_prob, the augmentations, max_pixels,
        allow_warnings, decode="raw" with channels=1 for the luma plane)
        apply to every frame, drawn once per clip so its frames move
        together. Corrupt, truncated or unreadable videos are element
        errors naming the file and the time, under the error policy."""
        if clip_sampler not in _CLIP_SAMPLERS:
            raise ValueError("map_video: clip_sampler must be one of %s, not %r"
                             % (", ".join(_CLIP_SAMPLERS), clip_sampler))
        if input not in ("auto", "bytes") or short_clips not in ("pad", "error"):
            raise ValueError("map_video: input must be \"auto\" or \"bytes\", short_clips "
                             "\"pad\" or \"error\"")
        unknown = set(image_options) - set(_IMAGE_DEFAULTS)
        if unknown:
            raise TypeError("map_video: unexpected keyword %s" % ", ".join(sorted(unknown)))
        kw = {**_IMAGE_DEFAULTS, **image_options}
        spec = _image_spec(preset, size, kw, 0)
        video = sl_video_spec()
        if lib.sl_video_spec_init(video, ctypes.sizeof(video)) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        video.frames = _count("map_video", "frames", frames)
        video.stride = _count("map_video", "stride", stride)
        video.fps = 0.0 if fps is None else float(fps)
        video.clip_sampler = _CLIP_SAMPLERS[clip_sampler]
        video.num_clips = _count("map_video", "num_clips", num_clips)
        video.video_index = self._image_index(video_key, "video")
        video.input = 1 if input == "bytes" else 0
        video.short_clips = 1 if short_clips == "error" else 0
        video.with_timestamps = 1 if with_timestamps else 0
        video.max_frames = _count("map_video", "max_frames", max_frames)
        parallel = _parallel("map_video", num_parallel_calls)
        return self._derive(lib.sl_map_video, video, spec, parallel, image_layout=None)

    def map_audio(self, sample_rate=16000, seconds=1.0, *, channels=1, clip_sampler="random",
                  audio_key=None, input="auto", n_mels=0, n_fft=400, win_length=None,
                  hop_length=None, f_min=0.0, f_max=None, power=2.0, log_mel=True,
                  num_parallel_calls=None):
        """Decodes audio clips with FFmpeg (in C, a file per worker): the
        value under audio_key (for a dict element "audio", else the first
        value), an audio file or a video's audio track, as bytes (uint8
        [n]) or a path or URL (a string; input="bytes" reads a string as
        the bytes), becomes `seconds` of it (0: the whole file) resampled
        to sample_rate and mixed to `channels`, float32 [channels, samples]
        (full scale 1, not clipped). clip_sampler "random" (new each epoch), "center" or
        "uniform" (the start) places the clip; a file shorter than it is
        padded with zeros.

        n_mels > 0 gives mel features instead, float32 [channels, n_mels,
        frames], with torchaudio.transforms.MelSpectrogram's meanings
        (n_fft, win_length, hop_length, f_min, f_max, power; HTK scale, no
        norm, centred frames) and, with log_mel, AmplitudeToDB("power")'s
        10 log10(max(x, 1e-10))."""
        if clip_sampler not in _CLIP_SAMPLERS:
            raise ValueError("map_audio: clip_sampler must be one of %s, not %r"
                             % (", ".join(_CLIP_SAMPLERS), clip_sampler))
        if input not in ("auto", "bytes"):
            raise ValueError("map_audio: input must be \"auto\" or \"bytes\"")
        spec = sl_audio_spec()
        if lib.sl_audio_spec_init(spec, ctypes.sizeof(spec)) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        spec.sample_rate = _count("map_audio", "sample_rate", sample_rate)
        spec.seconds = float(seconds)
        spec.channels = _count("map_audio", "channels", channels)
        spec.clip_sampler = _CLIP_SAMPLERS[clip_sampler]
        spec.audio_index = self._image_index(audio_key, "audio")
        spec.input = 1 if input == "bytes" else 0
        spec.n_mels = _count("map_audio", "n_mels", n_mels)
        spec.n_fft = _count("map_audio", "n_fft", n_fft)
        spec.win_length = 0 if win_length is None else _count("map_audio", "win_length",
                                                              win_length)
        spec.hop_length = 0 if hop_length is None else _count("map_audio", "hop_length",
                                                              hop_length)
        spec.f_min = float(f_min)
        spec.f_max = 0.0 if f_max is None else float(f_max)
        spec.power = float(power)
        spec.log_mel = 1 if log_mel else 0
        parallel = _parallel("map_audio", num_parallel_calls)
        return self._derive(lib.sl_map_audio, spec, parallel, image_layout=None)

    def mixup_cutmix(self, num_classes, mixup_alpha=0.2, cutmix_alpha=1.0, prob=1.0,
                     switch_prob=0.5, label_smoothing=0.0, *, seed=None, image_key=None,
                     label_key=None, reshuffle_each_iteration=True):
        """timm's Mixup (mode "batch", its names and meanings), after batch:
        with probability prob each batch is mixed with itself reversed, by
        MixUp (lam ~ Beta(mixup_alpha, mixup_alpha)) or CutMix (a box of
        the reversed batch pasted in; lam from Beta(cutmix_alpha) and then
        the box's area), CutMix with switch_prob when both alphas are > 0.
        The images (uint8 or float32, the layout map_image gave) are mixed
        in C; the labels (int64) become float32 [batch, num_classes] soft
        targets with label_smoothing. The images are image_key's leaf (for
        a dict: "image"; else the first value), the labels label_key's
        ("label"; else the second value). Draws depend on the seed, the
        epoch and the batch's position only."""
        structure = self._structure()
        image = (self._image_index(image_key)
                 if image_key is not None or isinstance(structure, dict) else self._image_leaf)
        if label_key is None and isinstance(structure, dict):
            label_key = "label"
        label = 1 if label_key is None else _structure.leaf_at(structure, label_key)
        spec = sl_mixup_spec()
        if lib.sl_mixup_spec_init(ctypes.byref(spec), ctypes.sizeof(spec), int(num_classes)):
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        spec.mixup_alpha, spec.cutmix_alpha = float(mixup_alpha), float(cutmix_alpha)
        spec.prob, spec.switch_prob = float(prob), float(switch_prob)
        spec.label_smoothing = float(label_smoothing)
        spec.image_index, spec.label_index = image, label
        spec.layout = SL_LAYOUT_CHW if self.image_layout == "CHW" else SL_LAYOUT_HWC
        spec.seed = -1 if seed is None else int(seed)
        spec.flags = 0 if reshuffle_each_iteration else SL_SAME_EACH_EPOCH
        return self._derive(lib.sl_mixup_cutmix, ctypes.byref(spec))

    def _image_index(self, image_key, what="image"):
        """The tensor map_image decodes: image_key's leaf, or for a dict
        element without one its "image"; else tensor 0 (map_video: the
        same with "video")."""
        structure = self._structure()
        if image_key is None:
            if not isinstance(structure, dict):
                return 0
            # torchvision-style "image", else tf.train.Example's "image/encoded"
            image_key = what if what in structure or what + "/encoded" not in structure \
                else what + "/encoded"
        try:
            return _structure.leaf_at(structure, image_key)
        except KeyError:
            raise KeyError("map_%s: the elements (%s) have no %s at %r; pass %s_key="
                           % (what, _structure.text(structure) if structure is not None
                              else "of a structure not known", what, image_key,
                              what)) from None

    def interleave(self, map_func, cycle_length=None, block_length=None,
                   num_parallel_calls=None, deterministic=None):
        """tf.data's interleave: map_func(element) returns a Dataset (a
        path -> sluice.Dataset.tfrecord(path), say); cycle_length of them
        are open at a time, block_length elements (default 1) taken from
        each in turn, and one that ends is replaced by the next input's.
        The order is tf.data's and does not depend on threads or timing
        (deterministic=False: completion order, faster on uneven inputs).
        cycle_length None or AUTOTUNE: one per CPU. num_parallel_calls:
        threads pulling ahead from the open inputs, up to cycle_length
        (AUTOTUNE or None: the controller picks). map_func is called on a
        library thread holding the GIL, once per input; keep Python maps
        after the interleave rather than inside map_func."""
        cycle = AUTOTUNE if cycle_length is None else _count("interleave", "cycle_length",
                                                             cycle_length)
        if cycle == AUTOTUNE:
            cycle = lib.sl_cpu_count()
        block = 1 if block_length is None else _count("interleave", "block_length",
                                                      block_length)
        par = _parallel("interleave", num_parallel_calls)

        def datasets(*values):
            ds = map_func(*values)
            if not isinstance(ds, Dataset):
                raise TypeError("interleave: map_func must return a sluice.Dataset, not %s"
                                % type(ds).__name__)
            return ds

        cb = _records.Interleaver(datasets, self.strings == "bytes", self._arguments_of())
        flags = SL_NONDETERMINISTIC if deterministic is False else 0
        return self._derive(lib.sl_interleave, cb.c_fn, None, cycle, block, par, flags,
                            callback=cb, image_layout=None, strings=cb)

    def parse_example(self, features, num_parallel_calls=1):
        """tf.io.parse_single_example on the first value of each element (a
        serialized tf.train.Example, as tfrecord yields): features is a dict
        key -> FixedLenFeature / VarLenFeature; the record becomes a dict
        of the parsed values by key, as tf.data gives (a tfrecord element
        becomes the dict; with with_paths, (dict, path)). Until 0.3 it was a
        tuple in the features' order. string features come
        out as bytes (uint8 arrays after map_image), int64 and float32 as
        arrays of the feature's shape; a VarLenFeature as a 1-D array of
        all its values. Reads the Examples that TensorFlow's
        build_imagenet_data.py writes ("image/encoded",
        "image/class/label", ...). A malformed Example or a feature of
        another type or shape is a CorruptDataError naming the file.
        num_parallel_calls: records parsed at a time, >= 1 or
        sluice.AUTOTUNE (as tf.data's map(parse_single_example,
        num_parallel_calls=...)); the output is the same either way. The
        default is 1: parsing is cheap next to decoding, and the autotune
        controller gives an AUTOTUNE parse only the workers its share of
        the work needs."""
        arr, keep = _records.features_array(features)
        par = 1 if num_parallel_calls is None else _parallel("parse_example", num_parallel_calls)
        ds = self._derive(lib.sl_parse_example_parallel, arr, len(arr), 0, par, strings="bytes")
        return ds

    def take_while(self, predicate, name=None):
        """tf.data's take_while: the elements up to the first for which
        predicate (called as filter calls it) is false."""
        cb = _Callback(predicate, "filter", False, self.strings == "bytes")
        label = (name or getattr(predicate, "__name__", None) or "python").encode()
        return self._derive(lib.sl_take_while, label, cb.c_fn, None, callback=cb)

    def enumerate(self, start=0, name=None):
        """tf.data's enumerate: (index, element) pairs, counting from start."""
        del name
        return self._derive(lib.sl_enumerate, _count("enumerate", "start", start),
                            image_layout=None)

    def unique(self, name=None):
        """tf.data's unique: the elements less repeats of an earlier one
        (elements of one value: an int or a str, or an array compared
        whole)."""
        del name
        return self._derive(lib.sl_unique)

    def scan(self, initial_state, scan_func, name=None):
        """tf.data's scan: scan_func(state, element) returns (new_state,
        output); the outputs are the elements, the state (any structure,
        starting at initial_state) carries from one to the next. Runs on
        the thread pulling from it, holding the GIL (see map)."""
        cb = _Scan(initial_state, scan_func, self.strings == "bytes")
        label = (name or getattr(scan_func, "__name__", None) or "python").encode()
        try:
            return self._derive(lib.sl_scan, label, cb.initial, cb.c_fn, None, callback=cb,
                                image_layout=None)
        finally:
            lib.sl_element_release(cb.initial)
            cb.initial = None

    def rebatch(self, batch_size, drop_remainder=False, name=None):
        """tf.data's rebatch: the rows of this dataset's batches in batches
        of batch_size."""
        del name
        return self._derive(lib.sl_rebatch, _count("rebatch", "batch_size", batch_size),
                            SL_DROP_REMAINDER if drop_remainder else 0)

    def flat_map(self, map_func, name=None):
        """tf.data's flat_map: the elements of map_func(element) (a
        Dataset) for each element in turn; interleave with one input open
        at a time."""
        del name
        return self.interleave(map_func, cycle_length=1, block_length=1, num_parallel_calls=1)

    def apply(self, transformation_func):
        """tf.data's apply: transformation_func(self), for chaining
        transformations written as functions of a dataset."""
        return transformation_func(self)

    def reduce(self, initial_state, reduce_func, name=None):
        """tf.data's reduce: state = reduce_func(state, element) over one
        pass, from initial_state; returns the last state."""
        del name
        state = initial_state
        it = self.iterator()
        try:
            for element in it:
                state = reduce_func(state, element)
        finally:
            it.close()
        return state

    def get_single_element(self, name=None):
        """tf.data's get_single_element: the dataset's only element;
        InvalidArgumentError (a ValueError) when it has none or several."""
        del name
        it = self.iterator()
        try:
            first = next(it, _UNSET)
            if first is _UNSET:
                raise make_error(SL_EINVAL, "get_single_element: the dataset was empty; it "
                                 "must have exactly one element")
            if next(it, _UNSET) is not _UNSET:
                raise make_error(SL_EINVAL, "get_single_element: the dataset had more than "
                                 "one element; it must have exactly one")
            return first
        finally:
            it.close()

    def filter(self, predicate, name=None, *, with_context=False):
        """Keeps the elements for which predicate (called as map calls its
        function) is true. Runs on the thread pulling from it, holding the
        GIL (see map)."""
        cb = _Callback(predicate, "filter", with_context, self.strings == "bytes")
        label = (name or getattr(predicate, "__name__", None) or "python").encode()
        return self._derive(lib.sl_filter, label, cb.c_fn, None, callback=cb)

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None,
              deterministic=None):
        """Stacks batch_size consecutive elements; each value gains a
        leading dimension (strings become lists). drop_remainder drops a
        last, smaller batch. num_parallel_calls (tf.data's parallel batch):
        when given, batches are assembled ahead of the consumer on a
        background thread, that many at most (AUTOTUNE: the controller
        decides), as a prefetch after the batch would; after map_image the
        images are decoded in parallel straight into the batch either way.
        Batches always come in order; deterministic is accepted for
        tf.data's signature."""
        batch_size = _count("batch", "batch_size", batch_size)
        ds = self._derive(lib.sl_batch, batch_size, SL_DROP_REMAINDER if drop_remainder else 0)
        if num_parallel_calls is not None:
            ds = ds.prefetch(_parallel("batch", num_parallel_calls))
        return ds

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False, name=None):
        """tf.data's padded_batch: batches of elements whose values differ
        in shape, each padded to padded_shapes (a shape per value, nested
        as the elements are; None or a None dimension: the longest of the
        batch) with padding_values (nested likewise, or one for every value;
        0, or "" for strings, by default)."""
        del name
        batch_size = _count("padded_batch", "batch_size", batch_size)
        flags = SL_DROP_REMAINDER if drop_remainder else 0
        if padded_shapes is None and padding_values is None:
            return self._derive(lib.sl_padded_batch, batch_size, 0, None, None, flags)
        n, shapes, values = self._padding("padded_batch", padded_shapes, padding_values)
        try:
            return self._derive(lib.sl_padded_batch, batch_size, n, shapes, values, flags)
        finally:
            if values:
                lib.sl_element_release(values)

    def _padding(self, op, padded_shapes, padding_values):
        """padded_batch's padded_shapes and padding_values as C takes them:
        (n, the n x SL_MAX_DIMS shapes or None, an element of n padding
        values or None: the caller releases it)."""
        structure = self._structure()
        if structure is None:
            raise ValueError("%s: the elements' structure is not known (an empty "
                             "dataset?), so padded_shapes cannot be matched to them" % op)
        leaves = _structure.flatten_up_to(structure, structure, op)
        n = len(leaves)
        shapes = None
        if padded_shapes is not None:
            shapes = (ctypes.c_int64 * (n * SL_MAX_DIMS))(*([-1] * (n * SL_MAX_DIMS)))
            for j, shape in enumerate(_structure.flatten_up_to(structure, padded_shapes, op)):
                dims = ([] if shape is None else [shape] if isinstance(shape, int)
                        else list(shape))
                if len(dims) > SL_MAX_DIMS:
                    raise ValueError("%s: padded shape %r has too many dimensions"
                                     % (op, shape))
                for k, dim in enumerate(dims):
                    shapes[j * SL_MAX_DIMS + k] = -1 if dim is None else int(dim)
        values = None
        if padding_values is not None:
            import numpy as np
            pads = (_structure.flatten_up_to(structure, padding_values, op)
                    if isinstance(padding_values, (tuple, list, dict))
                    else [padding_values] * n)  # one value for every component
            arrs = []
            for leaf, v in zip(leaves, pads):
                if v is None:
                    v = "" if leaf.dtype == "string" else 0
                if leaf.dtype == "string" or isinstance(v, (str, bytes)):
                    arrs.append(v)
                else:
                    arrs.append(np.asarray(v, dtype=leaf.dtype) if leaf.dtype else np.asarray(v))
            values = _tensor.make_element(arrs)
        return n, shapes, values

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None):
        """tf.data's window: window k holds up to size elements stride
        apart from position k * shift (shift None: size); every window
        starting before the end comes, those the end cuts short too unless
        drop_remainder. Iterating, flat_map and interleave see each window
        as tf.data gives it, a dataset of its elements (a tuple or dict of
        datasets for tuple or dict elements: one per value); other ops see
        it stacked, as batch would stack it (so the values of a window must
        agree in shape)."""
        del name
        size = _count("window", "size", size)
        shift = size if shift is None else _count("window", "shift", shift)
        ds = self._derive(lib.sl_window, size, shift, _count("window", "stride", stride),
                          SL_DROP_REMAINDER if drop_remainder else 0, image_layout=None)
        ds._window = _as_window
        return ds

    def group_by_window(self, key_func, reduce_func, window_size=None, window_size_func=None,
                        name=None):
        """tf.data's group_by_window: key_func(element) (called as map
        calls its function) gives each element's int key; a group that
        reaches window_size (or window_size_func(key)) elements becomes a
        window, reduce_func(key, window_dataset) a Dataset whose elements
        come out. At the end the groups left are reduced in key order."""
        if (window_size is None) == (window_size_func is None):
            raise ValueError("group_by_window: give window_size or window_size_func")
        cb = _Grouping(key_func, reduce_func, window_size_func, self.strings == "bytes", self)
        label = (name or getattr(key_func, "__name__", None) or "python").encode()
        size = 0 if window_size is None else _count("group_by_window", "window_size",
                                                       window_size)
        return self._derive(lib.sl_group_by_window, label, cb.c_key, cb.c_reduce, size,
                            cb.c_size if window_size_func else sl_window_size_fn(), None,
                            callback=cb, image_layout=None)

    def bucket_by_sequence_length(self, element_length_func, bucket_boundaries,
                                  bucket_batch_sizes, padded_shapes=None, padding_values=None,
                                  pad_to_bucket_boundary=False, no_padding=False,
                                  drop_remainder=False, name=None):
        """tf.data's bucket_by_sequence_length: elements grouped into
        buckets by element_length_func(element) (an int, called as map
        calls its function; bucket i holds lengths in
        [bucket_boundaries[i - 1], bucket_boundaries[i])), each batched
        bucket_batch_sizes[i] at a time as padded_batch batches (padded_shapes
        and padding_values as its own; batch with no_padding).
        pad_to_bucket_boundary pads open dimensions to the bucket's
        boundary less one, and a length past the last boundary is then an
        error. The C op sl_bucket_by_sequence_length: group_by_window over
        padded_batch, as tf.data builds it."""
        op = "bucket_by_sequence_length"
        bounds = [int(b) for b in bucket_boundaries]
        sizes = [int(b) for b in bucket_batch_sizes]
        if len(sizes) != len(bounds) + 1:
            raise ValueError("bucket_by_sequence_length: len(bucket_batch_sizes) must equal "
                             "len(bucket_boundaries) + 1")
        if any(b <= a for a, b in zip(bounds, bounds[1:])) or (bounds and bounds[0] < 1):
            raise ValueError("bucket_by_sequence_length: bucket_boundaries must rise from 1")
        if any(b < 1 for b in sizes):
            raise ValueError("bucket_by_sequence_length: bucket_batch_sizes must be >= 1")
        flags = ((SL_DROP_REMAINDER if drop_remainder else 0) |
                 (SL_PAD_TO_BUCKET_BOUNDARY if pad_to_bucket_boundary else 0) |
                 (SL_NO_PADDING if no_padding else 0))
        given = padded_shapes is not None or padding_values is not None
        n, shapes, values = 0, None, None
        if not no_padding and (given or pad_to_bucket_boundary):
            # The C op pads by the input's structure: learn it now when it
            # is a Python function's output. None: no element to pad.
            if self._structure() is not None and given:
                n, shapes, values = self._padding(op, padded_shapes, padding_values)
        cb = _Keyed(element_length_func, self.strings == "bytes", sl_length_fn)
        c_bounds = (ctypes.c_int64 * max(len(bounds), 1))(*bounds)
        c_sizes = (ctypes.c_int64 * len(sizes))(*sizes)
        try:
            return self._derive(lib.sl_bucket_by_sequence_length,
                                name.encode() if name else None, cb.c_key, None, c_bounds,
                                len(bounds), c_sizes, n, shapes, values, flags,
                                callback=cb, image_layout=None)
        finally:
            if values:
                lib.sl_element_release(values)

    def rejection_resample(self, class_func, target_dist, initial_dist=None, seed=None,
                           name=None):
        """tf.data's rejection_resample: the elements resampled so that
        class_func(element) (an int in [0, len(target_dist)), called as
        map calls its function) follows target_dist, each kept element as
        (class, element). initial_dist: the input's class distribution, or
        None to estimate it from the classes seen so far in the pass, as
        tf.data does. One pass over the input, kept by exact rejection
        (tf.data also mixes in a second, unfiltered pass of the input,
        which repeats elements); the same output for a seed on any thread
        count, a new draw each epoch."""
        import numpy as np
        target = np.asarray(target_dist, dtype=np.float64).ravel()
        n = len(target)
        if n < 1:
            raise ValueError("rejection_resample: target_dist is empty")
        initial = None
        if initial_dist is not None:
            initial = np.asarray(initial_dist, dtype=np.float64).ravel()
            if len(initial) != n:
                raise ValueError("rejection_resample: initial_dist has %d classes, "
                                 "target_dist %d" % (len(initial), n))
            initial = (ctypes.c_double * n)(*initial)
        cb = _Keyed(class_func, self.strings == "bytes")
        label = (name or getattr(class_func, "__name__", None) or "python").encode()
        seed = -1 if seed is None else _count("rejection_resample", "seed", seed)
        return self._derive(lib.sl_rejection_resample, label, cb.c_key, None,
                            (ctypes.c_double * n)(*target), n, initial, seed, 0,
                            callback=cb, image_layout=None)

    def pack(self, sequence_length, num_packing_bins=8, name=None):
        """Packs variable-length sequences into rows of sequence_length
        items (Grain's first-fit packing; not in tf.data): each value of an
        element is a sequence along its first dimension; an element goes
        whole into the first of num_packing_bins open rows where all its
        values fit, the oldest row coming out when none has room. Yields
        (values, segment_ids, positions), each nested as the elements:
        values [sequence_length, ...] zero-padded at the end; segment_ids
        int32, 1, 2, ... for the row's sequences, 0 for padding; positions
        int32, each item's index in its sequence. Sequences longer than a
        row are cut. Feed segment_ids to the attention mask and positions
        to the position embedding, as packed LLM training does."""
        del name
        return self._derive(lib.sl_pack, _count("pack", "sequence_length", sequence_length),
                            _count("pack", "num_packing_bins", num_packing_bins),
                            image_layout=None)

    def ignore_errors(self, log_warning=False, name=None):
        """tf.data's ignore_errors: element errors below this point (a
        corrupt file, a failing map, a bad record) drop their element,
        whatever Options(error_policy) says; log_warning logs them."""
        del name
        return self._derive(lib.sl_ignore_errors, SL_LOG_ERRORS if log_warning else 0)

    def unbatch(self):
        """Splits each element along its first dimension."""
        return self._derive(lib.sl_unbatch)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None):
        """Shuffles through a buffer of buffer_size elements, or the whole
        dataset with sluice.ALL (needs a source of known size with random
        access: range, from_tensor_slices, the file sources; files are read
        in the shuffled order, so nothing is read twice; the order is
        computed per position, with no table, and resumes at once). seed
        None derives one from Options(seed). reshuffle_each_iteration
        (default True): a new order each epoch; False keeps one order,
        though random ops after the shuffle (map_image's crops) still change
        each epoch."""
        buffer_size = _count("shuffle", "buffer_size", buffer_size)
        flags = SL_SHUFFLE_NO_RESHUFFLE if reshuffle_each_iteration is False else 0
        return self._derive(lib.sl_shuffle, buffer_size, -1 if seed is None else seed, flags)

    def shuffle_windowed(self, block, window, seed=None, reshuffle_each_iteration=None):
        """A whole-dataset order that keeps reads near each other (sharded
        data, object storage): the index in blocks of `block` consecutive
        elements (about a shard's records), the blocks permuted, then each
        run of `window` permuted blocks shuffled within. Reads touch at most
        `window` blocks at a time. Each element's position is still uniform
        over the pass, but two elements of one block land at most
        block * window positions apart. Needs what shuffle(sluice.ALL)
        needs; seed and reshuffle_each_iteration as shuffle's."""
        flags = SL_SHUFFLE_NO_RESHUFFLE if reshuffle_each_iteration is False else 0
        return self._derive(lib.sl_shuffle_windowed, _count("shuffle_windowed", "block", block),
                            _count("shuffle_windowed", "window", window),
                            -1 if seed is None else seed, flags)

    def repeat(self, count=None):
        """count passes, or forever (None or -1). Each pass is a new epoch
        for what is below (new order, new crops)."""
        return self._derive(lib.sl_repeat, -1 if count is None else _count("repeat", "count",
                                                                           count))

    def take(self, count):
        """At most count elements (-1: all)."""
        return self._derive(lib.sl_take, _count("take", "count", count))

    def assert_cardinality(self, expected_cardinality):
        """This dataset with its size per pass stated (tf.data's
        assert_cardinality): for inputs that cannot know it (tfrecord,
        webdataset, filter), so that len() works, a batch that drops its
        remainder decodes none of it, and distribute gives equal steps
        (splitting the elements: each rank reads every file). A pass that
        ends early, or goes on past it where something pulls that far (a
        shuffle does; a drop-remainder batch, take and distribute stop at
        the size stated), raises CorruptDataError naming both counts; a
        size the input knows and that differs raises InvalidArgumentError
        here."""
        return self._derive(lib.sl_assert_cardinality,
                            _count("assert_cardinality", "expected_cardinality",
                                   expected_cardinality))

    def skip(self, count):
        """Drops the first count elements (-1: all)."""
        return self._derive(lib.sl_skip, _count("skip", "count", count))

    def shard(self, num_shards, index):
        """The elements whose position i has i % num_shards == index."""
        return self._derive(lib.sl_shard, _count("shard", "num_shards", num_shards),
                            _count("shard", "index", index))

    def distribute(self, rank=None, world_size=None, drop_last=False, policy="auto"):
        """This process's part of the dataset in data-parallel training, as
        torch's DistributedSampler gives it, with the rank read from the
        launcher (torchrun, mpirun, srun; see distributed_context()) unless
        rank and world_size are given. Every rank gets the same number of
        elements: ceil(n / world_size), the last ranks wrapping around to
        the start (counted in stats()["padded"]), or floor(n / world_size)
        with drop_last=True; with a batch after it, the same number of
        steps. Put it after shuffle(sluice.ALL) (or a shuffled list_files)
        with the same seed on every rank: each epoch is then one global
        permutation split between the ranks, a new one every epoch.

        policy (tf.data's AutoShardPolicy): "auto" splits the files under a
        record reader (tfrecord, webdataset, interleave) when there are at
        least as many as ranks, else the elements; "file" or "data" forces
        one; "off" returns the dataset as is. Reads move below the split,
        so a rank never reads another's files."""
        if policy == "off":
            return self
        flags = _DISTRIBUTE_POLICIES.get(policy)
        if flags is None:
            raise ValueError("distribute: policy must be 'auto', 'file', 'data' or 'off', not %r"
                             % (policy,))
        flags |= SL_DISTRIBUTE_DROP if drop_last else SL_DISTRIBUTE_PAD
        if (rank is None) != (world_size is None):
            raise ValueError("distribute: give both rank and world_size, or neither")
        ctx = None
        if rank is not None:
            rank = _count("distribute", "rank", rank)
            world_size = _count("distribute", "world_size", world_size)
            ctx = sl_dist_context(rank=rank, world_size=world_size, local_rank=rank,
                                  local_world_size=world_size)
        else:
            ctx = distributed_context()._c
        ds = self._derive(lib.sl_distribute, ctx, flags)
        ds.distributed = (ctx.rank, ctx.world_size)
        return ds

    def service(self, address=None, version=None, *, split_batches=2, max_bytes=256 << 20,
                heartbeat_ms=500, timeout_ms=5000, at_most_once=False):
        """The same batches, computed by worker processes (on this host or
        others) and received over UCX: tf.data's distribute(service)
        without a dispatcher process of its own. Each worker runs
        ``python3 -m sluice.worker module:function --address HOST:PORT``
        (or sluice-worker for a C pipeline), where the function builds this
        very pipeline (before service()). Listens at once on address
        ("host:port"; port 0: any, see service_port; None:
        $SLUICE_SERVICE_ADDRESS or "0.0.0.0:7780"); workers prove
        SLUICE_SERVICE_SECRET and must give the same version. The batches,
        their order and bytes are those of iterating the pipeline itself,
        whatever the workers do: a worker that dies or stops answering for
        timeout_ms has its unfinished splits (split_batches batches each)
        computed again by others; with at_most_once its missing batches
        are skipped instead. max_bytes bounds what the trainer holds ahead.
        The pipeline must end in batch and be a pure function of position
        below it (shuffle(sluice.ALL) or an indexed source, maps); other
        ops raise UnsupportedError (a ValueError) naming them."""
        spec = sl_service_spec()
        if lib.sl_service_spec_init(ctypes.byref(spec), ctypes.sizeof(spec)) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        keep = []
        if address is not None:
            keep.append(os.fsencode(address))
            spec.address = keep[-1]
        if version is not None:
            keep.append(str(version).encode())
            spec.version = keep[-1]
        spec.split_batches = _count("service", "split_batches", split_batches)
        spec.max_bytes = _count("service", "max_bytes", max_bytes)
        spec.heartbeat_ms = _count("service", "heartbeat_ms", heartbeat_ms)
        spec.timeout_ms = _count("service", "timeout_ms", timeout_ms)
        spec.flags = SL_SERVICE_AT_MOST_ONCE if at_most_once else 0
        return self._derive(lib.sl_service, ctypes.byref(spec))

    @property
    def service_port(self):
        """The port a service() dataset listens on."""
        rc = lib.sl_service_port(self._ptr)
        if rc < 0:
            raise make_error(rc, lib.sl_last_error().decode())
        return rc

    def prefetch(self, buffer_size=AUTOTUNE):
        """Keeps buffer_size elements ready ahead, on a background thread
        (sluice.AUTOTUNE: the controller sizes it)."""
        return self._derive(lib.sl_prefetch, _count("prefetch", "buffer_size", buffer_size))

    def cache(self, filename="", spill_dir=None):
        """Caches the first complete pass: in memory (filename "", as in
        tf.data; None too) or in a file, reused while the pipeline's
        fingerprint matches. filename=sluice.AUTO: the first pass chooses
        (memory while it fits half the RAM budget, else a spill file in
        spill_dir, default $TMPDIR; nothing when producing the stream is
        cheaper than reading it back); Iterator.stats() says what it chose
        ("cache_placement", "cache_bytes")."""
        if filename is AUTO:
            d = os.fsencode(spill_dir) if spill_dir else None
            return self._derive(lib.sl_cache_auto, d)
        if spill_dir is not None:
            raise ValueError("cache: spill_dir is for filename=sluice.AUTO")
        f = os.fsencode(filename) if filename else None
        return self._derive(lib.sl_cache, f)

    # ---- persistence ----

    @staticmethod
    def _compression(op, compression, auto=None):
        if compression == "AUTO" and auto is not None:
            return auto
        comp = _COMPRESSIONS.get(
            compression.upper() if isinstance(compression, str) else compression)
        if comp is None:
            raise ValueError("%s: compression must be None, 'ZLIB' or 'GZIP', not %r"
                             % (op, compression))
        return comp

    @staticmethod
    def _unsupported(op, **given):
        for k, v in given.items():
            if v is not None:
                raise NotImplementedError(
                    "%s: %s is not supported: sluice reads a saved dataset back in the order "
                    "it was saved, whatever its shards" % (op, k))

    def save(self, path, compression=None, shard_func=None, checkpoint_args=None):
        """tf.data's save: one pass of this dataset (with its options)
        written to the directory path in sluice's format (shard files of
        CRC-checked chunks and a manifest with the element structure),
        compression None, "ZLIB" or "GZIP". shard_func(element) -> int
        picks each element's shard (at most 4096 of them); by default the
        elements are spread over one shard per writer thread. Shards are
        written by up to 8 threads in parallel. The directory appears only
        once complete and replaces an earlier save there; Dataset.load
        reads the elements back in this pass's order, whatever the shards.
        checkpoint_args (a resumable save) is not supported."""
        self._unsupported("save", checkpoint_args=checkpoint_args)
        comp = self._compression("save", compression)
        key, cbs = sl_key_fn(), self._callbacks
        if shard_func is not None:
            cb = _Keyed(shard_func, self.strings == "bytes")
            key, cbs = cb.c_key, cbs + (cb,)
        c_opts = self.options.to_c()
        try:
            rc = lib.sl_save(self._ptr, os.fsencode(path), c_opts, comp, key, None)
        finally:
            lib.sl_options_free(c_opts)
        if rc < 0:
            _callbacks.raise_interrupt(cbs)
            msg = lib.sl_last_error().decode("utf-8", "replace")
            err = make_error(rc, msg)
            if rc == SL_ECALLBACK:
                err.__cause__ = _callbacks.cause(cbs, msg)
            raise err

    @staticmethod
    def load(path, element_spec=None, compression=None, reader_func=None):
        """tf.data's load: the dataset Dataset.save wrote at path, its
        elements in saved order, with the saved structure (element_spec)
        and an exact cardinality. NotFoundError (a FileNotFoundError) when
        no finished save is there; CorruptDataError for a damaged manifest,
        and, as iteration reaches it, for a damaged chunk (naming the file
        and offset; Options(error_policy="skip") drops that chunk). The
        manifest says how the shards are compressed, so compression and
        element_spec are accepted for tf.data's signature and checked
        only for their form; strings come out as bytes, as from tf.data.
        reader_func is not supported: the order is always the saved one.
        Random access: shuffle(sluice.ALL) and distribute() take elements by
        position, from an index the first such read builds in one pass over
        the shards (compressed shards inflate a chunk per element read; the
        last few chunks are kept)."""
        Dataset._unsupported("load", reader_func=reader_func)
        Dataset._compression("load", compression)
        ds = Dataset(_check(lib.sl_load(os.fsencode(path))), strings="bytes")
        if element_spec is not None and _nesting(element_spec) != _nesting(ds.element_spec):
            raise ValueError("load: element_spec %r does not match the saved structure %r"
                             % (element_spec, ds.element_spec))
        return ds

    def snapshot(self, path, compression="AUTO", reader_func=None, shard_func=None,
                 name=None):
        """tf.data's snapshot: the first complete pass is written under the
        directory path (keyed by this pipeline's fingerprint) while it is
        served, and every later pass, here or in another process, reads it
        back instead of running the pipeline; a changed pipeline writes a
        new one. A partial snapshot is never read: a pass cut short removes
        what it wrote, and a second writer at the same time passes through.
        compression "AUTO" (none: images are compressed already), None,
        "ZLIB" or "GZIP". reader_func and shard_func are not supported."""
        del name
        self._unsupported("snapshot", reader_func=reader_func, shard_func=shard_func)
        comp = self._compression("snapshot", compression, auto=SL_COMPRESSION_NONE)
        return self._derive(lib.sl_snapshot, os.fsencode(path), comp)

    def with_options(self, options=None, **kwargs):
        """The same pipeline, iterated with these options on top of the
        current ones (Options(...) and/or keyword arguments). It shares the
        epoch count of this dataset."""
        opts = self.options.merge(options).merge(Options(**kwargs))
        ds = Dataset(lib.sl_dataset_retain(self._ptr), self._callbacks, opts,
                     self.image_layout, self._strings)
        ds._image_leaf, ds._mask_leaf = self._image_leaf, self._mask_leaf
        ds.distributed = self.distributed
        ds._window = self._window
        return ds

    # ---- iteration and inspection ----

    def iterator(self, options=None, interruptible=True, epoch=None, state=None):
        """A new pass (see Iterator); options on top of the dataset's.
        epoch: the epoch to run (for processes that must agree); None takes
        the dataset's next one and counts it. state: bytes from
        Iterator.state() to resume a pass where it stopped (the epoch is
        the state's), or the list of every rank's states of one checkpoint
        to resume on another world size (see Iterator)."""
        return Iterator(self, options, interruptible, epoch, state)

    def __iter__(self):
        return Iterator(self)

    def as_numpy_iterator(self):
        """Iterates as tf.data's as_numpy_iterator does: numpy scalars for
        scalars (np.int64(3), not a 0-d array), plain numpy arrays for
        arrays (read-only views of the library's memory), bytes for strings
        (object arrays of bytes for batches of them)."""
        if self._window:
            raise TypeError("as_numpy_iterator: the elements of window() are datasets; "
                            "iterate them, or batch() in place of window()")
        for value in self:
            yield _numpy_value(value)

    def cardinality(self):
        """Elements per pass, INFINITE (-1) or UNKNOWN (-2)."""
        return lib.sl_dataset_cardinality(self._ptr)

    def __len__(self):
        n = self.cardinality()
        if n < 0:
            raise TypeError("the dataset's length is %s" % (
                "infinite" if n == INFINITE else
                "unknown (state it with .assert_cardinality(n) where you know it)"))
        return n

    @property
    def name(self):
        return lib.sl_dataset_name(self._ptr).decode()

    def fingerprint(self):
        """64-bit fingerprint of the pipeline (ops and parameters)."""
        return lib.sl_dataset_fingerprint(self._ptr)

    def __repr__(self):
        return "<sluice.Dataset %s, cardinality %d>" % (self.name, self.cardinality())


def _numpy_value(v):
    import numpy as np
    if isinstance(v, tuple):
        return tuple(_numpy_value(x) for x in v)
    if isinstance(v, dict):
        return {k: _numpy_value(x) for k, x in v.items()}
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, list):
        return np.array([_numpy_value(x) for x in v], dtype=object)
    if isinstance(v, np.ndarray):
        return v[()] if v.ndim == 0 else v.view(np.ndarray)
    return v


class DistributedContext:
    """Where this process stands in a data-parallel job (sl_dist_context):
    rank, world_size, local_rank, local_world_size, node, and source, the
    launcher whose variables said so ("torchrun", "openmpi", "pmi",
    "slurm", "sluice" for SLUICE_RANK / SLUICE_WORLD_SIZE, or "none")."""

    __slots__ = ("_c",)

    def __init__(self, c):
        self._c = c

    rank = property(lambda self: self._c.rank)
    world_size = property(lambda self: self._c.world_size)
    local_rank = property(lambda self: self._c.local_rank)
    local_world_size = property(lambda self: self._c.local_world_size)
    node = property(lambda self: self._c.node)
    source = property(lambda self: self._c.source.decode())

    def __repr__(self):
        return ("DistributedContext(rank=%d, world_size=%d, local_rank=%d, "
                "local_world_size=%d, node=%d, source=%r)"
                % (self.rank, self.world_size, self.local_rank, self.local_world_size,
                   self.node, self.source))


def distributed_context():
    """This process's rank and world from its launcher's environment
    (torchrun, Open MPI, MPICH/Intel MPI, Slurm; SLUICE_RANK and
    SLUICE_WORLD_SIZE override). Launchers that disagree about one job
    raise InvalidArgumentError naming both variables."""
    c = sl_dist_context()
    rc = lib.sl_distributed_context(ctypes.byref(c))
    if rc < 0:
        raise make_error(rc, lib.sl_last_error().decode())
    return DistributedContext(c)


# map_image's keywords and their defaults: what map_video takes for its frames.
_IMAGE_DEFAULTS = {name: p.default for name, p in
                   inspect.signature(Dataset.map_image).parameters.items()
                   if p.kind == p.KEYWORD_ONLY and name not in
                   ("num_parallel_calls", "image_key", "views", "mask_key", "mask_channels",
                    "mask_dtype")}
