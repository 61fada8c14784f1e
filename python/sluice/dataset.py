"""Datasets: immutable descriptions of a pipeline (sl_dataset), tf.data style."""

import ctypes
import itertools
import os

from . import _tensor
from ._errors import make_error, pending_interrupt
from ._lib import MAP_FN, PREDICATE_FN, ImageSpec, lib
from .iterator import Iterator
from .options import Options

AUTOTUNE = -1  # SL_AUTOTUNE: the library picks parallelism / depth
ALL = -1  # SL_SHUFFLE_ALL: the whole dataset is the shuffle buffer
INFINITE = -1  # SL_INFINITE cardinality
UNKNOWN = -2  # SL_UNKNOWN cardinality

SL_ECALLBACK = -12
_SL_MAP_UNORDERED, _SL_MAP_ORDERED = 1, 2
_CROPS = {"train": 0, "random_resized": 0, "eval": 1, "center": 1, "resize": 2, "decode": 2}
_LAYOUTS = {"HWC": 0, "CHW": 1}
_DTYPES = {"uint8": 0, "float32": 6}


def _check(ptr):
    if not ptr:
        raise make_error(lib.sl_last_error_code() or -2, lib.sl_last_error().decode())
    return ptr


class _Callback:
    """A Python function called from C, kept alive as long as any dataset
    built on it. Exceptions become element errors (SL_ECALLBACK, message
    "TypeName: text"); the last one is kept to chain onto the Error that
    iteration raises. A KeyboardInterrupt is kept aside and re-raised."""

    _seq = itertools.count()

    def __init__(self, fn, kind, with_context):
        self.fn = fn
        self.with_context = with_context
        self.interrupt = None
        self.last_exception = None
        self.last_seq = -1
        self.c_fn = (MAP_FN if kind == "map" else PREDICATE_FN)(
            self._map if kind == "map" else self._predicate)

    def _fail(self, ctx, e):
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            self.interrupt = e
            text = "interrupted"
        else:
            self.last_exception, self.last_seq = e, next(self._seq)
            text = "%s: %s" % (type(e).__name__, e)
        return lib.sl_map_ctx_error(ctx, SL_ECALLBACK, text.encode("utf-8", "replace"))

    def _call(self, ctx, el):
        owner = _tensor.ElementRef(lib.sl_element_retain(el))
        args = _tensor.element_values(owner)
        if self.with_context:
            mc = MapContext(ctx)
            try:
                return self.fn(mc, *args), args
            finally:
                mc._ctx = None
        return self.fn(*args), args

    def _map(self, ctx, el, out, user):
        try:
            result, args = self._call(ctx, el)
            values = result if isinstance(result, tuple) else (result,)
            out[0] = _tensor.make_element(values, el, args)
            return 0
        except BaseException as e:
            return self._fail(ctx, e)

    def _predicate(self, ctx, el, user):
        try:
            return 1 if self._call(ctx, el)[0] else 0
        except BaseException as e:
            return self._fail(ctx, e)


class MapContext:
    """Passed first to functions given with ``with_context=True``: the
    element's position and its own random stream, the same on any thread
    count (keyed by seed, op, epoch and index). Valid during the call only."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx):
        self._ctx = ctx

    def _p(self):
        if self._ctx is None:
            raise make_error(-14, "a MapContext is valid only during its call")
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


class Dataset:
    """An immutable pipeline description. Build one from a source
    (``Dataset.range``, ``image_folder``, ``file_list``, ``from_files``,
    ``from_tensor_slices``), chain ops (each returns a new Dataset), then
    iterate: every ``iter(ds)`` is a fresh pass with its own threads.

    >>> ds = (sluice.Dataset.image_folder("/data/train")
    ...       .shuffle(sluice.ALL, seed=0)
    ...       .map_image(preset="train", size=224)
    ...       .batch(256, drop_remainder=True)
    ...       .prefetch(sluice.AUTOTUNE))
    >>> for images, labels, paths in ds: ...

    Datasets may be shared between threads; each iterator is used by one
    thread at a time.
    """

    def __init__(self, ptr, callbacks=(), options=None, image_layout=None):
        self._ptr = ptr
        self._callbacks = tuple(callbacks)
        self.options = options if options is not None else Options()
        self.image_layout = image_layout  # "HWC"/"CHW" after map_image (for sluice.torch)

    def __del__(self, _free=lib.sl_dataset_free, _pending=pending_interrupt):
        p, self._ptr = getattr(self, "_ptr", None), None
        if p:
            try:
                _free(p)
            except KeyboardInterrupt:  # see sluice._errors.pending_interrupt
                _pending[0] = True

    def _derive(self, builder, *args, callback=None, image_layout=False):
        ptr = _check(builder(lib.sl_dataset_retain(self._ptr), *args))
        cbs = self._callbacks + ((callback,) if callback else ())
        layout = self.image_layout if image_layout is False else image_layout
        return Dataset(ptr, cbs, self.options, layout)

    # ---- sources ----

    @staticmethod
    def range(start, stop=None, step=1):
        """Scalar int64 elements, like Python's range: range(n) or
        range(start, stop[, step])."""
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("range: step must not be 0")
        return Dataset(_check(lib.sl_range(start, stop, step)))

    @staticmethod
    def from_files(paths, labels=None):
        """Elements (path,) or, with labels, (path, label); paths are str or
        bytes. Files are read by ``read_files()`` or named for a map."""
        paths = [os.fsencode(p) for p in paths]
        n = len(paths)
        arr = (ctypes.c_char_p * max(n, 1))(*paths)
        lab = None
        if labels is not None:
            labels = list(labels)
            if len(labels) != n:
                raise ValueError("from_files: %d paths but %d labels" % (n, len(labels)))
            lab = (ctypes.c_int64 * max(n, 1))(*labels)
        return Dataset(_check(lib.sl_from_files(arr, lab, n)))

    @staticmethod
    def from_tensor_slices(*tensors):
        """Slices of the tensors along their first dimension (which must
        agree), like tf.data's from_tensor_slices. The tensors are copied
        once into the library; the slices share that copy."""
        if len(tensors) == 1 and isinstance(tensors[0], tuple):
            tensors = tensors[0]
        el = _tensor.make_element(tensors)
        return Dataset(_check(lib.sl_from_tensors(el)))

    @staticmethod
    def image_folder(root, extensions=None):
        """torchvision ImageFolder: (bytes uint8 [n], label int64, path str),
        classes from the sorted subdirectory names, files in sorted order."""
        ext = extensions.encode() if isinstance(extensions, str) else extensions
        return Dataset(_check(lib.sl_image_folder(os.fsencode(root), ext)))

    @staticmethod
    def file_list(list_path, root=None):
        """Like image_folder, from "relative/path label" lines."""
        r = os.fsencode(root) if root is not None else None
        return Dataset(_check(lib.sl_file_list(os.fsencode(list_path), r)))

    # ---- transformations ----

    def read_files(self):
        """Prepends the contents (uint8 [n]) of the file named by tensor 0."""
        return self._derive(lib.sl_read_files)

    def map(self, fn, name=None, parallelism=AUTOTUNE, deterministic=None, with_context=False):
        """Applies a Python function to each element: fn(*tensors) returns a
        value or a tuple of values (numpy arrays, str/bytes, int -> int64,
        float -> float32); returning an input value unchanged shares it.

        Slow by nature: the function holds the GIL, so calls do not overlap
        and each costs a Python call plus conversions. Prefer map_image and
        the other C ops for per-element work; use this for light glue.
        Inputs are read-only views that stay valid after the call.

        with_context=True passes a MapContext first (index, epoch, and a
        per-element random stream that is the same on any thread count).
        deterministic: None follows Options(deterministic), True keeps input
        order, False emits in completion order."""
        cb = _Callback(fn, "map", with_context)
        flags = 0 if deterministic is None else _SL_MAP_ORDERED if deterministic else _SL_MAP_UNORDERED
        label = (name or getattr(fn, "__name__", None) or "python").encode()
        return self._derive(lib.sl_map, label, cb.c_fn, None, parallelism, flags,
                            callback=cb, image_layout=None)

    def map_image(self, preset="train", size=224, *, layout="HWC", dtype="uint8", height=None,
                  width=None, scale=None, ratio=None, flip_prob=None, resize_shorter=None,
                  mean=None, std=None, max_pixels=None, allow_warnings=None,
                  fast_upsample=None, parallelism=AUTOTUNE):
        """Decodes the JPEG in tensor 0 and transforms it (in C, in
        parallel): preset "train" (random-resized crop, flip), "eval"
        (resize shorter side, centre crop) or "resize"; output uint8 (or
        float32 normalised with mean/std) in layout "HWC" or "CHW".
        fast_upsample=1 replicates subsampled chroma instead of
        interpolating it: faster, pixels differ slightly from PIL's."""
        if preset not in _CROPS:
            raise ValueError("map_image: preset must be one of %s" % ", ".join(_CROPS))
        spec = ImageSpec()
        if lib.sl_image_spec_init(spec, _CROPS[preset], size) < 0:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        try:
            spec.layout = _LAYOUTS[layout]
            spec.dtype = _DTYPES[dtype]
        except KeyError as e:
            raise ValueError("map_image: bad layout or dtype %s" % e) from None
        if height is not None:
            spec.height = height
        if width is not None:
            spec.width = width
        if scale is not None:
            spec.scale_min, spec.scale_max = scale
        if ratio is not None:
            spec.ratio_min, spec.ratio_max = ratio
        for field, value in (("flip_prob", flip_prob), ("resize_shorter", resize_shorter),
                             ("max_pixels", max_pixels), ("allow_warnings", allow_warnings),
                             ("fast_upsample", fast_upsample)):
            if value is not None:
                setattr(spec, field, value)
        if mean is not None:
            spec.mean[:] = list(mean)
        if std is not None:
            spec.std[:] = list(std)
        return self._derive(lib.sl_map_image, spec, parallelism, image_layout=layout)

    def filter(self, predicate, name=None, with_context=False):
        """Keeps the elements for which predicate(*tensors) is true. Runs on
        the thread pulling from it, holding the GIL (see map)."""
        cb = _Callback(predicate, "filter", with_context)
        label = (name or getattr(predicate, "__name__", None) or "python").encode()
        return self._derive(lib.sl_filter, label, cb.c_fn, None, callback=cb)

    def batch(self, batch_size, drop_remainder=False):
        """Stacks consecutive elements; each tensor gains a leading
        dimension (strings become lists)."""
        return self._derive(lib.sl_batch, batch_size, 1 if drop_remainder else 0)

    def unbatch(self):
        """Splits each element along its first dimension."""
        return self._derive(lib.sl_unbatch)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        """Shuffles through a buffer of buffer_size elements, or the whole
        dataset with sluice.ALL (needs a source of known size with random
        access). seed None derives one from Options(seed)."""
        flags = 0 if reshuffle_each_iteration else 1
        return self._derive(lib.sl_shuffle, buffer_size, -1 if seed is None else seed, flags)

    def repeat(self, count=None):
        """count passes, or forever (None / -1)."""
        return self._derive(lib.sl_repeat, -1 if count is None else count)

    def take(self, count):
        """At most count elements (-1: all)."""
        return self._derive(lib.sl_take, count)

    def skip(self, count):
        """Drops the first count elements (-1: all)."""
        return self._derive(lib.sl_skip, count)

    def shard(self, num_shards, index):
        """The elements whose position i has i % num_shards == index."""
        return self._derive(lib.sl_shard, num_shards, index)

    def prefetch(self, buffer_size=AUTOTUNE):
        """Keeps buffer_size elements ready ahead, on a background thread."""
        return self._derive(lib.sl_prefetch, buffer_size)

    def cache(self, filename=None):
        """Caches the first complete pass: in memory (None) or in a file,
        reused while the pipeline's fingerprint matches."""
        f = os.fsencode(filename) if filename is not None else None
        return self._derive(lib.sl_cache, f)

    def with_options(self, options=None, **kwargs):
        """The same pipeline, iterated with these options on top of the
        current ones (Options(...) and/or keyword arguments)."""
        opts = self.options.merge(options).merge(Options(**kwargs))
        return Dataset(lib.sl_dataset_retain(self._ptr), self._callbacks, opts,
                       self.image_layout)

    # ---- iteration and inspection ----

    def iterator(self, options=None, interruptible=True):
        """A new pass (see Iterator); options on top of the dataset's."""
        return Iterator(self, options, interruptible)

    def __iter__(self):
        return Iterator(self)

    def cardinality(self):
        """Elements per pass, INFINITE (-1) or UNKNOWN (-2)."""
        return lib.sl_dataset_cardinality(self._ptr)

    def __len__(self):
        n = self.cardinality()
        if n < 0:
            raise TypeError("the dataset's length is %s" % ("infinite" if n == INFINITE else
                                                            "unknown"))
        return n

    @property
    def name(self):
        return lib.sl_dataset_name(self._ptr).decode()

    def fingerprint(self):
        """64-bit fingerprint of the pipeline (ops and parameters)."""
        return lib.sl_dataset_fingerprint(self._ptr)

    def __repr__(self):
        return "<sluice.Dataset %s, cardinality %d>" % (self.name, self.cardinality())

