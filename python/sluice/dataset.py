"""Datasets: immutable descriptions of a pipeline (sl_dataset), tf.data style."""

import ctypes
import itertools
import operator
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
_SL_WITH_PATHS = 1
_CROPS = {"train": 0, "random_resized": 0, "eval": 1, "center": 1, "resize": 2, "decode": 2}
_LAYOUTS = {"HWC": 0, "CHW": 1}
_DTYPES = {"uint8": 0, "float32": 6}


def _check(ptr):
    if not ptr:
        raise make_error(lib.sl_last_error_code() or -2, lib.sl_last_error().decode())
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
    def from_tensor_slices(*tensors):
        """Slices of the tensors along their first dimension (which must
        agree), as tf.data's from_tensor_slices: one array gives elements
        of one value, a tuple of arrays gives tuples. The arrays are copied
        once into the library; the slices share that copy."""
        if len(tensors) == 1 and isinstance(tensors[0], tuple):
            tensors = tensors[0]
        if any(isinstance(t, dict) for t in tensors):
            raise TypeError("from_tensor_slices: sluice elements are tuples; pass a tuple of "
                            "arrays instead of a dict")
        el = _tensor.make_element(tensors)
        return Dataset(_check(lib.sl_from_tensors(el)))

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
    def image_folder(root, extensions=None, with_paths=False):
        """torchvision's ImageFolder: (bytes uint8 [n], label int64) pairs,
        classes from the sorted subdirectory names, files in sorted order;
        with_paths=True adds the path (a str) as a third value. Messages
        about a file name it either way."""
        ext = extensions.encode() if isinstance(extensions, str) else extensions
        flags = _SL_WITH_PATHS if with_paths else 0
        return Dataset(_check(lib.sl_image_folder(os.fsencode(root), ext, flags)))

    @staticmethod
    def file_list(list_path, root=None, with_paths=False):
        """Like image_folder, from "relative/path label" lines (relative to
        root, default the list's folder)."""
        r = os.fsencode(root) if root is not None else None
        flags = _SL_WITH_PATHS if with_paths else 0
        return Dataset(_check(lib.sl_file_list(os.fsencode(list_path), r, flags)))

    # ---- transformations ----

    def read_files(self, with_paths=False):
        """Replaces the path in the first value by the file's contents
        (uint8 [n]), as map(tf.io.read_file) does; with_paths=True keeps
        the path as the last value."""
        return self._derive(lib.sl_read_files, _SL_WITH_PATHS if with_paths else 0)

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
        cb = _Callback(map_func, "map", with_context)
        flags = 0 if deterministic is None else _SL_MAP_ORDERED if deterministic else _SL_MAP_UNORDERED
        label = (name or getattr(map_func, "__name__", None) or "python").encode()
        return self._derive(lib.sl_map, label, cb.c_fn, None, _parallel("map", num_parallel_calls),
                            flags, callback=cb, image_layout=None)

    def map_image(self, preset="train", size=224, *, num_parallel_calls=None, layout="HWC",
                  dtype="uint8", height=None, width=None, scale=None, ratio=None,
                  flip_prob=None, resize_shorter=None, mean=None, std=None, max_pixels=None,
                  allow_warnings=None, fast_upsample=None):
        """Decodes the JPEG in the first value and transforms it (in C, in
        parallel), keeping the other values: preset "train" (random-resized
        crop, flip), "eval" (resize shorter side, centre crop) or "resize";
        output uint8 (or float32 normalised with mean/std) in layout "HWC"
        or "CHW". num_parallel_calls as for map (None: AUTOTUNE).
        fast_upsample=1 replicates subsampled chroma instead of
        interpolating it: faster, pixels differ slightly from PIL's.
        allow_warnings=1 accepts damaged files that libjpeg can recover from
        (a truncated file then decodes with its missing rows grey)."""
        if preset not in _CROPS:
            raise ValueError("map_image: preset must be one of %s" % ", ".join(_CROPS))
        spec = ImageSpec()
        if lib.sl_image_spec_init(spec, ctypes.sizeof(spec), _CROPS[preset], size) < 0:
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
        return self._derive(lib.sl_map_image, spec, _parallel("map_image", num_parallel_calls),
                            image_layout=layout)

    def filter(self, predicate, name=None, *, with_context=False):
        """Keeps the elements for which predicate (called as map calls its
        function) is true. Runs on the thread pulling from it, holding the
        GIL (see map)."""
        cb = _Callback(predicate, "filter", with_context)
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
        ds = self._derive(lib.sl_batch, batch_size, 1 if drop_remainder else 0)
        if num_parallel_calls is not None:
            ds = ds.prefetch(_parallel("batch", num_parallel_calls))
        return ds

    def unbatch(self):
        """Splits each element along its first dimension."""
        return self._derive(lib.sl_unbatch)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None):
        """Shuffles through a buffer of buffer_size elements, or the whole
        dataset with sluice.ALL (needs a source of known size with random
        access: range, from_tensor_slices, the file sources; files are read
        in the shuffled order, so nothing is read twice). seed None derives
        one from Options(seed). reshuffle_each_iteration (default True): a
        new order each epoch; False keeps one order, though random ops after
        the shuffle (map_image's crops) still change each epoch."""
        buffer_size = _count("shuffle", "buffer_size", buffer_size)
        flags = 1 if reshuffle_each_iteration is False else 0
        return self._derive(lib.sl_shuffle, buffer_size, -1 if seed is None else seed, flags)

    def repeat(self, count=None):
        """count passes, or forever (None or -1). Each pass is a new epoch
        for what is below (new order, new crops)."""
        return self._derive(lib.sl_repeat, -1 if count is None else _count("repeat", "count",
                                                                           count))

    def take(self, count):
        """At most count elements (-1: all)."""
        return self._derive(lib.sl_take, _count("take", "count", count))

    def skip(self, count):
        """Drops the first count elements (-1: all)."""
        return self._derive(lib.sl_skip, _count("skip", "count", count))

    def shard(self, num_shards, index):
        """The elements whose position i has i % num_shards == index."""
        return self._derive(lib.sl_shard, _count("shard", "num_shards", num_shards),
                            _count("shard", "index", index))

    def prefetch(self, buffer_size=AUTOTUNE):
        """Keeps buffer_size elements ready ahead, on a background thread
        (sluice.AUTOTUNE: the controller sizes it)."""
        return self._derive(lib.sl_prefetch, _count("prefetch", "buffer_size", buffer_size))

    def cache(self, filename=""):
        """Caches the first complete pass: in memory (filename "", as in
        tf.data; None too) or in a file, reused while the pipeline's
        fingerprint matches."""
        f = os.fsencode(filename) if filename else None
        return self._derive(lib.sl_cache, f)

    def with_options(self, options=None, **kwargs):
        """The same pipeline, iterated with these options on top of the
        current ones (Options(...) and/or keyword arguments). It shares the
        epoch count of this dataset."""
        opts = self.options.merge(options).merge(Options(**kwargs))
        return Dataset(lib.sl_dataset_retain(self._ptr), self._callbacks, opts,
                       self.image_layout)

    # ---- iteration and inspection ----

    def iterator(self, options=None, interruptible=True, epoch=None, state=None):
        """A new pass (see Iterator); options on top of the dataset's.
        epoch: the epoch to run (for processes that must agree); None takes
        the dataset's next one and counts it. state: bytes from
        Iterator.state() to resume a pass where it stopped (the epoch is
        the state's)."""
        return Iterator(self, options, interruptible, epoch, state)

    def __iter__(self):
        return Iterator(self)

    def as_numpy_iterator(self):
        """Iterates as tf.data's as_numpy_iterator does: numpy scalars for
        scalars (np.int64(3), not a 0-d array), plain numpy arrays for
        arrays (read-only views of the library's memory), bytes for strings
        (object arrays of bytes for batches of them)."""
        for value in self:
            yield _numpy_value(value)

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


def _numpy_value(v):
    import numpy as np
    if isinstance(v, tuple):
        return tuple(_numpy_value(x) for x in v)
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, list):
        return np.array([_numpy_value(x) for x in v], dtype=object)
    if isinstance(v, np.ndarray):
        return v[()] if v.ndim == 0 else v.view(np.ndarray)
    return v
