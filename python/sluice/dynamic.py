"""Sources the program feeds: Dataset.from_generator (tf.data's names) and
Queue / Dataset.from_queue, for samples that arrive while training runs."""

import queue as _queue

from . import _tensor
from ._callbacks import Callback
from ._constants import SL_EBUSY, SL_EOF
from ._errors import make_error
from ._lib import GENERATOR_FN, lib

try:
    import numpy as np
except ImportError:  # pragma: no cover (sluice runs without numpy, specs need it)
    np = None


class TensorSpec:
    """tf.TensorSpec: the shape (None for a dimension of any size) and
    dtype a generator's values must have; values are converted to the
    dtype (numpy's rules) and their shape checked."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype="float32", name=None):
        self.shape = None if shape is None else tuple(None if d is None else int(d)
                                                      for d in shape)
        self.dtype = "string" if str(dtype) in ("string", "str", "bytes") else np.dtype(dtype).name
        self.name = name

    def __repr__(self):
        return "TensorSpec(shape=%r, dtype=%r)" % (self.shape, self.dtype)

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and self.shape == other.shape
                and self.dtype == other.dtype)

    __hash__ = None

    def is_compatible_with(self, value):
        shape = np.shape(value)
        return self.shape is None or (len(shape) == len(self.shape) and all(
            w is None or w == h for w, h in zip(self.shape, shape)))

    def convert(self, value):
        if self.dtype == "string":
            arr = np.asarray(value, dtype=object)
        else:
            arr = np.asarray(value, dtype=self.dtype)
        if not self.is_compatible_with(arr):
            raise TypeError("`generator` yielded an element of shape %s where an element of "
                            "shape %s was expected" % (_shape_text(arr.shape),
                                                       _shape_text(self.shape)))
        return arr


def _shape_text(shape):
    return "(%s%s)" % (", ".join("None" if d is None else str(d) for d in shape),
                       "," if len(shape) == 1 else "")


def _specs(output_signature, output_types, output_shapes):
    """The per-value specs (a tuple) and whether elements are tuples."""
    if output_signature is not None:
        if output_types is not None or output_shapes is not None:
            raise TypeError("from_generator: give output_signature or output_types/"
                            "output_shapes, not both")
        sig = output_signature
    elif output_types is not None:
        if isinstance(output_types, (tuple, list)):
            shapes = output_shapes if output_shapes is not None else [None] * len(output_types)
            sig = tuple(TensorSpec(s, t) for t, s in zip(output_types, shapes))
        else:
            sig = TensorSpec(output_shapes, output_types)
    else:
        return None, False
    if isinstance(sig, dict):
        raise TypeError("from_generator: sluice elements are tuples; give a tuple of "
                        "TensorSpecs instead of a dict")
    if isinstance(sig, TensorSpec):
        return (sig,), False
    sig = tuple(sig)
    if not all(isinstance(s, TensorSpec) for s in sig):
        raise TypeError("from_generator: output_signature must be a sluice.TensorSpec or a "
                        "tuple of them")
    return sig, True


def _values(item, specs, is_tuple):
    """The Python values of one element, as make_element takes them."""
    if specs is None:
        return item if isinstance(item, tuple) else (item,)
    if is_tuple:
        if not isinstance(item, (tuple, list)) or len(item) != len(specs):
            raise TypeError("`generator` yielded %r where a tuple of %d values was expected"
                            % (type(item).__name__, len(specs)))
        return tuple(s.convert(v) for s, v in zip(specs, item))
    return (specs[0].convert(item),)


class Generator(Callback):
    """The C function of sl_from_generator: one Python iterator per pass
    (generator(*args) when it is callable, iter(it) otherwise), ended when
    C says the pass is over. Exceptions become element errors
    (CallbackError, chained from the exception), as map's do."""

    def __init__(self, generator, args, specs, is_tuple):
        super().__init__()
        self.generator = generator
        self.args = tuple(args or ())
        self.specs = specs
        self.is_tuple = is_tuple
        self.passes = {}
        self.c_fn = GENERATOR_FN(self._call)

    def _open(self):
        if callable(self.generator):
            return iter(self.generator(*self.args))
        return iter(self.generator)

    def _call(self, user, pass_, out):
        if not out:
            it = self.passes.pop(pass_, None)
            close = getattr(it, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass
            return 0
        try:
            it = self.passes.get(pass_)
            if it is None:
                it = self.passes[pass_] = self._open()
            try:
                item = next(it)
            except StopIteration:
                return SL_EOF
            out[0] = _tensor.make_element(_values(item, self.specs, self.is_tuple))
            return 0
        except BaseException as e:
            return self.last_error(e)


class Queue:
    """A bounded queue of samples for online training: other threads
    ``put`` what they receive (an array, or a tuple of values for a tuple
    element), ``Dataset.from_queue(q)`` reads them in order, and ``close``
    ends the stream. Bounded by bytes, so a fast producer waits instead of
    growing memory. Python's queue.Queue names: put(item, block=True,
    timeout=None) raises queue.Full when it could not enter in time.
    element_spec (a TensorSpec or a tuple of them) converts and checks
    each item."""

    def __init__(self, capacity_bytes=64 << 20, element_spec=None):
        self._specs, self._is_tuple = _specs(element_spec, None, None)
        self._q = lib.sl_queue_create(int(capacity_bytes))
        if not self._q:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        self.capacity_bytes = int(capacity_bytes)

    def put(self, item, block=True, timeout=None):
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")
        el = _tensor.make_element(_values(item, self._specs, self._is_tuple))
        try:
            ns = -1 if block and timeout is None else 0 if not block else int(timeout * 1e9)
            rc = lib.sl_queue_push(self._q, el, ns)
        finally:
            lib.sl_element_release(el)
        if rc == SL_EBUSY:
            raise _queue.Full
        if rc < 0:
            raise make_error(rc, lib.sl_last_error().decode("utf-8", "replace"))

    def put_nowait(self, item):
        self.put(item, block=False)

    def qsize(self):
        return lib.sl_queue_length(self._q)

    def close(self):
        """No more puts: readers get what is queued, then the end."""
        lib.sl_queue_close(self._q)

    def __del__(self, _free=lib.sl_queue_free):
        q, self._q = getattr(self, "_q", None), None
        if q:
            _free(q)
