"""Sharded records: tf.train.Example feature specs and the helpers behind
Dataset.list_files, tfrecord, interleave, parse_example and webdataset.

The specs follow tf.io's names so that a feature dict moves over unchanged:

    features = {
        "image/encoded": sluice.FixedLenFeature([], "string"),
        "image/class/label": sluice.FixedLenFeature([], "int64"),
        "image/object/bbox/xmin": sluice.VarLenFeature("float32"),
    }
    ds = sluice.TFRecordDataset(files).parse_example(features)
    for encoded, label, xmin in ds: ...     # a tuple, in the dict's order
"""

import ctypes
import operator
import os
import re

from ._callbacks import Callback
from ._constants import SL_FEATURE_BYTES, SL_FEATURE_FLOAT, SL_FEATURE_INT64, SL_MAX_DIMS
from ._header import sl_feature, sl_interleave_fn
from ._lib import lib

_SL_FEATURE = {"bytes": SL_FEATURE_BYTES, "string": SL_FEATURE_BYTES, "str": SL_FEATURE_BYTES,
               "int64": SL_FEATURE_INT64, "int": SL_FEATURE_INT64,
               "float32": SL_FEATURE_FLOAT, "float": SL_FEATURE_FLOAT}
_FEATURE_NAMES = {SL_FEATURE_BYTES: "string", SL_FEATURE_INT64: "int64",
                  SL_FEATURE_FLOAT: "float32"}


def _feature_type(dtype):
    name = {bytes: "string", str: "string", int: "int64", float: "float32"}.get(dtype, dtype)
    if not isinstance(name, str):
        try:
            import numpy as np
            name = np.dtype(name).name  # numpy types and dtypes
        except (ImportError, TypeError):
            name = str(getattr(name, "name", name))  # tf.int64 and the like
    name = name.replace("tf.", "")
    if name not in _SL_FEATURE:
        raise TypeError("feature dtype must be string (bytes), int64 or float32, not %r"
                        % (dtype,))
    return _SL_FEATURE[name]


class FixedLenFeature:
    """tf.io.FixedLenFeature: a feature with a fixed shape (``[]`` for a
    scalar). default_value fills it when an Example lacks the feature (a
    scalar, or an array whose values are all that scalar); without one a
    missing feature is a CorruptDataError naming the record's file."""

    __slots__ = ("shape", "dtype", "default_value")

    def __init__(self, shape, dtype, default_value=None):
        self.shape = tuple(operator.index(d) for d in shape)
        if len(self.shape) > SL_MAX_DIMS or any(d < 0 for d in self.shape):
            raise ValueError("FixedLenFeature: shape must have 0 to %d dimensions >= 0, not %r"
                             % (SL_MAX_DIMS, shape))
        self.dtype = _FEATURE_NAMES[_feature_type(dtype)]
        self.default_value = default_value

    def __repr__(self):
        return "FixedLenFeature(shape=%r, dtype=%r, default_value=%r)" % (
            list(self.shape), self.dtype, self.default_value)


class VarLenFeature:
    """tf.io.VarLenFeature: every value of the feature, as a 1-D array (tf
    gives a SparseTensor; this is its ``values``); absent means empty."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = _FEATURE_NAMES[_feature_type(dtype)]

    def __repr__(self):
        return "VarLenFeature(dtype=%r)" % (self.dtype,)


def _scalar_default(key, value):
    """The one value a default fills its shape with."""
    try:
        import numpy as np
        arr = np.asarray(value, dtype=object if isinstance(value, (bytes, str)) else None)
        flat = arr.reshape(-1)
        if flat.size == 0:
            raise ValueError
        first = flat[0]
        if any(x != first for x in flat[1:]):
            raise ValueError
        return first.item() if hasattr(first, "item") else first
    except ImportError:
        if isinstance(value, (list, tuple)):
            if not value or any(x != value[0] for x in value):
                raise ValueError("parse_example: %s: a default must be one value repeated"
                                 % key) from None
            return value[0]
        return value
    except ValueError:
        raise ValueError("parse_example: %s: sluice fills a missing feature with one value; "
                         "a default of different values is not supported" % key) from None


def features_array(features):
    """(ctypes array of sl_feature, keep-alive list) from a {key: spec} dict."""
    if not isinstance(features, dict) or not features:
        raise TypeError("parse_example: features must be a non-empty dict of key -> "
                        "FixedLenFeature / VarLenFeature")
    arr = (sl_feature * len(features))()
    keep = []
    for f, (key, spec) in zip(arr, features.items()):
        k = key.encode() if isinstance(key, str) else bytes(key)
        keep.append(k)
        f.key = k
        if isinstance(spec, VarLenFeature):
            f.type, f.ndim = _SL_FEATURE[spec.dtype], -1
            continue
        if not isinstance(spec, FixedLenFeature):
            raise TypeError("parse_example: %s: expected FixedLenFeature or VarLenFeature, "
                            "not %s" % (key, type(spec).__name__))
        f.type, f.ndim = _SL_FEATURE[spec.dtype], len(spec.shape)
        for i, d in enumerate(spec.shape):
            f.shape[i] = d
        if spec.default_value is not None:
            v = _scalar_default(key, spec.default_value)
            f.has_default = 1
            if f.type == SL_FEATURE_BYTES:
                b = v.encode() if isinstance(v, str) else bytes(v)
                keep.append(b)
                f.default_bytes = ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p)
                f.default_len = len(b)
            elif f.type == SL_FEATURE_INT64:
                f.default_int64 = operator.index(v)
            else:
                f.default_float = float(v)
    return arr, keep


_BRACE = re.compile(r"\{([^{}]*)\}")


def brace_expand(url):
    """webdataset's shard notation: "train-{000000..000015}.tar" (zero
    padding kept) and "{a,b}" alternatives, expanded left to right."""
    m = _BRACE.search(url)
    if not m:
        return [url]
    body, head, tail = m.group(1), url[:m.start()], url[m.end():]
    r = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if r:
        lo, hi = r.group(1), r.group(2)
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        step = 1 if int(hi) >= int(lo) else -1
        items = ["%0*d" % (width, i) for i in range(int(lo), int(hi) + step, step)]
    else:
        items = body.split(",")
    return [x for item in items for x in brace_expand(head + item + tail)]


def path_list(paths, op):
    """Paths (str, bytes, os.PathLike, or a list of them) as a list of bytes."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    out = [os.fsencode(p) for p in paths]
    if not out:
        raise ValueError("%s: no files given" % op)
    return out


class Interleaver(Callback):
    """The Python function of Dataset.interleave, called from C (the
    interleave's thread, one call at a time, holding the GIL):
    fn(*args_of(values)) returns a Dataset (Dataset.interleave checks that it does), returned
    to C as a new reference. An exception becomes the element's error
    (sluice._callbacks).

    The Python callbacks of each returned dataset (a map(python_fn) inside
    map_func) are kept as long as this interleave lives: C may still run
    them. Put Python maps after the interleave, not inside it."""

    def __init__(self, fn, as_bytes, args_of=tuple):
        from ._tensor import ElementRef, element_values
        super().__init__()
        self.fn = fn
        self.as_bytes = as_bytes
        self.args_of = args_of  # an element's values -> fn's arguments
        self.strings = None  # the returned datasets' ("str" / "bytes"), once seen
        self._kept = []
        self._keys = set()
        self._values = element_values
        self._ref = ElementRef
        self.c_fn = sl_interleave_fn(self._call)

    def _call(self, el, user):
        try:
            owner = self._ref(lib.sl_element_retain(el))
            args = self.args_of(self._values(owner, self.as_bytes))
            ds = self.fn(*args)
            self.strings = ds.strings
            for cb in ds._callbacks:
                if id(cb) not in self._keys:
                    self._keys.add(id(cb))
                    self._kept.append(cb)
            return lib.sl_dataset_retain(ds._ptr)
        except BaseException as e:
            self.last_error(e)
            return None


class KeepAlive(Callback):
    """Holds a C argument (the compression int of sl_tfrecord_fn) as long
    as the dataset, among its callbacks; C never calls it, so it never
    fails."""

    def __init__(self, obj):
        super().__init__()
        self.obj = obj


# sl_tfrecord_fn's address, for interleaves over TFRecord files that never
# enter Python
TFRECORD_FN = sl_interleave_fn(ctypes.cast(lib.sl_tfrecord_fn, ctypes.c_void_p).value)
