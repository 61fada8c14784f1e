"""Sources the program feeds: Dataset.from_generator (tf.data's names) and
Queue / Dataset.from_queue, for samples that arrive while training runs."""

import queue as _queue
import weakref

from . import _structure, _tensor
from ._callbacks import Callback
from ._structure import TensorSpec
from ._constants import SL_EBUSY, SL_EOF
from ._errors import make_error
from ._header import sl_generator_fn
from ._lib import lib

try:
    import numpy as np
except ImportError:  # pragma: no cover (sluice runs without numpy, specs need it)
    np = None


def _zip_specs(types, shapes):
    if isinstance(types, dict):
        return {k: _zip_specs(t, None if shapes is None else shapes[k]) for k, t in types.items()}
    if isinstance(types, (tuple, list)):
        return tuple(_zip_specs(t, None if shapes is None else shapes[i])
                     for i, t in enumerate(types))
    return TensorSpec(shapes, types)


def _check_specs(sig, op):
    if isinstance(sig, dict):
        for v in sig.values():
            _check_specs(v, op)
    elif isinstance(sig, (tuple, list)):
        for v in sig:
            _check_specs(v, op)
    elif not isinstance(sig, TensorSpec):
        raise TypeError("%s: a signature is a sluice.TensorSpec, or tuples and dicts of them; "
                        "not %s" % (op, type(sig).__name__))


def _signature(output_signature, output_types=None, output_shapes=None, op="from_generator"):
    """The signature as given (TensorSpecs nested in tuples and dicts, as
    tf.data takes it), or None when none is."""
    if output_signature is not None:
        if output_types is not None or output_shapes is not None:
            raise TypeError("%s: give output_signature or output_types/output_shapes, not both"
                            % op)
        sig = output_signature
    elif output_types is not None:
        sig = _zip_specs(output_types, output_shapes)
    else:
        return None
    _check_specs(sig, op)
    return sig


def structure_of(sig):
    """The element structure a signature describes."""
    if isinstance(sig, dict):
        return {k: structure_of(v) for k, v in sig.items()}
    if isinstance(sig, (tuple, list)):
        return tuple(structure_of(v) for v in sig)
    return _structure.Leaf(sig.dtype, sig.shape)


def _pair(sig, item, out, what):
    if isinstance(sig, dict):
        if not isinstance(item, dict) or set(item) != set(sig):
            raise TypeError("%s %r where a dict with keys %s was expected"
                            % (what, type(item).__name__ if not isinstance(item, dict)
                               else sorted(item), sorted(sig)))
        for k in sorted(sig):
            _pair(sig[k], item[k], out, what)
    elif isinstance(sig, (tuple, list)):
        if not isinstance(item, (tuple, list)) or len(item) != len(sig):
            raise TypeError("%s %r where a tuple of %d values was expected"
                            % (what, type(item).__name__, len(sig)))
        for s, v in zip(sig, item):
            _pair(s, v, out, what)
    else:
        out.append(sig.convert(item))
    return out


def _values(item, sig, what="`generator` yielded"):
    """The flat values of one element, as make_element takes them:
    converted and checked against sig when there is one."""
    if sig is None:
        return _structure.flatten(item)
    return _pair(sig, item, [], what)


class _Learner:
    """Tells a dataset the structure of the values a Python source gives,
    learned from the first (without a signature), and checks that every
    later one has the same."""

    def __init__(self):
        self.signature = None
        self.text = None

    def learn(self, item, declare):
        sig = _structure.signature(item)
        if self.text is not None:
            if sig != self.signature:
                raise TypeError("the values changed structure: %s after %s"
                                % (_structure.text(_structure.of_value(item)), self.text))
            return
        declare(_structure.of_value(item))
        self.signature, self.text = sig, _structure.text(_structure.of_value(item))


def declare(ptr, structure):
    """sl_dataset_declare_structure(ptr, structure), raising its error."""
    c = _structure.CStructure(structure)
    if lib.sl_dataset_declare_structure(ptr, c.ptr) < 0:
        raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())


class Generator(Callback):
    """The C function of sl_from_generator: one Python iterator per pass
    (generator(*args) when it is callable, iter(it) otherwise), ended when
    C says the pass is over. Exceptions become element errors
    (CallbackError, chained from the exception), as map's do."""

    def __init__(self, generator, args, signature):
        super().__init__()
        self.generator = generator
        self.args = tuple(args or ())
        self.signature = signature
        self.learner = None if signature is not None else _Learner()
        self.dataset_ptr = None  # (set once the dataset is made)
        self.passes = {}
        self.c_fn = sl_generator_fn(self._call)

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
            if self.learner is not None:
                self.learner.learn(item, lambda s: declare(self.dataset_ptr, s))
            out[0] = _tensor.make_element(_values(item, self.signature))
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
        self._signature = _signature(element_spec, op="Queue")
        self._learner = _Learner() if self._signature is None else None
        self._structure = None if element_spec is None else structure_of(self._signature)
        self._readers = weakref.WeakSet()  # the datasets made from it
        self._q = lib.sl_queue_create(int(capacity_bytes))
        if not self._q:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
        self.capacity_bytes = int(capacity_bytes)

    def put(self, item, block=True, timeout=None):
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")
        if self._learner is not None:
            self._learner.learn(item, self._learned)
        el = _tensor.make_element(_values(item, self._signature, "put"))
        try:
            ns = -1 if block and timeout is None else 0 if not block else int(timeout * 1e9)
            rc = lib.sl_queue_push(self._q, el, ns)
        finally:
            lib.sl_element_release(el)
        if rc == SL_EBUSY:
            raise _queue.Full
        if rc < 0:
            raise make_error(rc, lib.sl_last_error().decode("utf-8", "replace"))

    def _learned(self, structure):
        self._structure = structure
        for ds in list(self._readers):
            declare(ds._ptr, structure)

    def _reader(self, ds):
        """ds reads this queue: it learns the structure of the items."""
        if self._structure is not None:
            declare(ds._ptr, self._structure)
        self._readers.add(ds)
        return ds

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
