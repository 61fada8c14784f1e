"""Element structures in Python: how an element's tensors nest into tuples
and dicts (the library's sl_structure, tf.data's nest).

A structure is a tree whose inner nodes are Python tuples and dicts and
whose leaves are ``Leaf`` objects (a dtype name and a shape, either of
them possibly unknown). Dict keys are kept sorted and their leaves come in
that order, as tf.nest flattens a dict; so ``{"label": ..., "image": ...}``
flattens to (image, label) whatever order it was written in.
"""

import ctypes
import re

from ._constants import SL_STRUCTURE_DICT, SL_STRUCTURE_LEAF, SL_STRUCTURE_TUPLE
from ._errors import make_error
from ._lib import lib
from ._tensor import DTYPE_NAMES

try:
    import numpy as np
except ImportError:  # pragma: no cover (structures of numpy values need it)
    np = None

_BARE_KEY = re.compile(r"[A-Za-z0-9_.\-]+\Z")


class Leaf:
    """One tensor of a structure: its dtype name ("uint8" ... "float64",
    "string"; None when not known) and shape (a tuple with None for a
    dimension not known; None when not even the rank is)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype=None, shape=None):
        self.dtype = dtype
        self.shape = shape

    def __repr__(self):
        return "Leaf(%r, %r)" % (self.dtype, self.shape)

    def __eq__(self, other):
        return isinstance(other, Leaf) and (self.dtype, self.shape) == (other.dtype, other.shape)

    __hash__ = None


class TensorSpec:
    """tf.TensorSpec: the shape (None for a dimension of any size) and
    dtype a generator's values must have; values are converted to the
    dtype (numpy's rules) and their shape checked."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype="float32", name=None):
        self.shape = None if shape is None else tuple(None if d is None else int(d)
                                                      for d in shape)
        if dtype is None:  # (in an element_spec: not known)
            self.dtype = None
        elif str(dtype) in ("string", "str", "bytes"):
            self.dtype = "string"
        else:
            self.dtype = np.dtype(dtype).name
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


# ---- from and to the library ----

def from_c(p):
    """The structure behind a C sl_structure pointer (None for NULL: not
    known)."""
    if not p:
        return None
    kind = lib.sl_structure_kind(p)
    if kind == SL_STRUCTURE_LEAF:
        code, ndim = lib.sl_structure_dtype(p), lib.sl_structure_ndim(p)
        shape = None
        if ndim >= 0:
            dims = lib.sl_structure_shape(p)
            shape = tuple(None if dims[i] < 0 else dims[i] for i in range(ndim))
        return Leaf(DTYPE_NAMES[code] if code >= 0 else None, shape)
    n = lib.sl_structure_size(p)
    children = [from_c(lib.sl_structure_child(p, i)) for i in range(n)]
    if kind == SL_STRUCTURE_TUPLE:
        return tuple(children)
    keys = [lib.sl_structure_key(p, i).decode("utf-8", "surrogateescape") for i in range(n)]
    return dict(zip(keys, children))


def of_dataset(ptr):
    """The structure of a C dataset's elements, or None when not known."""
    return from_c(lib.sl_dataset_structure(ptr))


def _key_text(k):
    if _BARE_KEY.match(k):
        return k
    return '"%s"' % k.replace("\\", "\\\\").replace('"', '\\"')


def text(node):
    """The library's text form of a structure."""
    if isinstance(node, Leaf):
        t = node.dtype or "?"
        if node.shape is not None:
            t += "[%s]" % ",".join("?" if d is None else str(d) for d in node.shape)
        return t
    if isinstance(node, tuple):
        return "(%s%s)" % (", ".join(text(x) for x in node), "," if len(node) == 1 else "")
    return "{%s}" % ", ".join("%s: %s" % (_key_text(k), text(node[k])) for k in sorted(node))


class CStructure:
    """An sl_structure made from a Python one, released when collected."""

    __slots__ = ("ptr",)

    def __init__(self, node):
        self.ptr = lib.sl_structure_parse(text(node).encode("utf-8", "surrogateescape"))
        if not self.ptr:
            raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())

    def __del__(self, _release=lib.sl_structure_release):
        p, self.ptr = getattr(self, "ptr", None), None
        if p:
            _release(p)


# ---- Python values ----

def _check_key(k):
    if not isinstance(k, str):
        raise TypeError("sluice structures have string keys; a dict key is %r" % (k,))
    return k


def _leaf_of(v):
    """What a value says of its tensor: its dtype, and its rank with the
    dimensions not known (a later value may have other sizes; sluice does
    not trace functions as tf.data does)."""
    if isinstance(v, (str, bytes, bytearray)):
        return Leaf("string", ())
    if isinstance(v, (bool, int)):
        return Leaf("int64", ())
    if isinstance(v, float):
        return Leaf("float32", ())
    if np is None:
        return Leaf(None, None)
    arr = v if isinstance(v, (np.ndarray, np.generic)) else None
    if arr is None:
        try:
            arr = np.asarray(v)
        except Exception:
            return Leaf(None, None)
    if arr.dtype.kind in "USO":
        name = "string"
    elif arr.dtype == np.bool_:
        name = "uint8"
    else:
        name = arr.dtype.name if arr.dtype.name in DTYPE_NAMES else None
    return Leaf(name, (None,) * arr.ndim)


def of_value(v):
    """The structure of a Python value: tuples and dicts nest, anything
    else is a leaf (see _leaf_of)."""
    if isinstance(v, tuple):
        return tuple(of_value(x) for x in v)
    if isinstance(v, dict):
        return {_check_key(k): of_value(v[k]) for k in sorted(v, key=_check_key)}
    return _leaf_of(v)


def flatten(v, out=None):
    """The leaves of a Python value, in structure order (a dict's by sorted
    key)."""
    if out is None:
        out = []
    if isinstance(v, tuple):
        for x in v:
            flatten(x, out)
    elif isinstance(v, dict):
        for k in sorted(v, key=_check_key):
            flatten(v[k], out)
    else:
        out.append(v)
    return out


def signature(v):
    """What of the structure of a value must stay the same from element to
    element: the nesting and the keys, not the leaves."""
    if isinstance(v, tuple):
        return tuple(signature(x) for x in v)
    if isinstance(v, dict):
        return {k: signature(v[k]) for k in v}
    return None


def tree_signature(node):
    """signature() of the values a structure describes."""
    if isinstance(node, tuple):
        return tuple(tree_signature(x) for x in node)
    if isinstance(node, dict):
        return {k: tree_signature(x) for k, x in node.items()}
    return None


def flatten_up_to(node, value, what):
    """The parts of `value` at node's leaves, in order: value nests as node
    does down to its leaves, and whatever stands at a leaf (a shape, say)
    is taken whole."""
    out = []

    def walk(n, v):
        if isinstance(n, Leaf):
            out.append(v)
        elif isinstance(n, tuple):
            if not isinstance(v, (tuple, list)) or len(v) != len(n):
                raise TypeError("%s: %r does not have the elements' structure %s"
                                % (what, v, text(node)))
            for x, y in zip(n, v):
                walk(x, y)
        else:
            if not isinstance(v, dict) or set(v) != set(n):
                raise TypeError("%s: %r does not have the elements' structure %s"
                                % (what, v, text(node)))
            for k in sorted(n):
                walk(n[k], v[k])

    walk(node, value)
    return out


def nest_like(value, flat):
    """The structure of a Python value with, for its leaves in order, the
    leaves of `flat` (the library's flat structure of the same tensors: a
    Leaf for one, a tuple of Leafs for several)."""
    leaves = iter(flat if isinstance(flat, tuple) else (flat,))

    def build(v):
        if isinstance(v, tuple):
            return tuple(build(x) for x in v)
        if isinstance(v, dict):
            return {k: build(v[k]) for k in sorted(v, key=_check_key)}
        return next(leaves)

    return build(value)


def count(node):
    """How many leaves (tensors) a structure has."""
    if isinstance(node, tuple):
        return sum(count(x) for x in node)
    if isinstance(node, dict):
        return sum(count(x) for x in node.values())
    return 1


def packer(node):
    """A function that nests a flat sequence of values as node says."""
    if node is None:
        return lambda values: values[0] if len(values) == 1 else tuple(values)

    def build(n, at):
        if isinstance(n, Leaf):
            return (lambda vs, i=at: vs[i]), at + 1
        parts, keys = [], None
        if isinstance(n, dict):
            keys = sorted(n)
            items = [n[k] for k in keys]
        else:
            items = list(n)
        for x in items:
            f, at = build(x, at)
            parts.append(f)
        if keys is None:
            return (lambda vs: tuple(f(vs) for f in parts)), at
        return (lambda vs: {k: f(vs) for k, f in zip(keys, parts)}), at

    return build(node, 0)[0]


def arguments(structure):
    """How a function receives an element of `structure`, as tf.data calls
    it: a tuple unpacked into arguments, anything else (a dict, a single
    value) as one argument; an element of unknown structure as its values."""
    pack = packer(structure)
    if structure is None:
        return lambda values: tuple(values)
    if isinstance(structure, tuple):
        return pack
    return lambda values: (pack(values),)


def map_values(fn, value):
    """fn applied to each leaf of a Python value, its nesting kept."""
    if isinstance(value, tuple):
        return tuple(map_values(fn, x) for x in value)
    if isinstance(value, dict):
        return {k: map_values(fn, x) for k, x in value.items()}
    return fn(value)


def leaf_at(node, path):
    """The flat index of the leaf at path (a key, or a tuple of keys and
    indices), or raises KeyError."""
    steps = path if isinstance(path, tuple) else (path,)
    at = 0
    n = node
    for step in steps:
        if isinstance(n, dict) and isinstance(step, str) and step in n:
            for k in sorted(n):
                if k == step:
                    break
                at += count(n[k])
            n = n[step]
        elif isinstance(n, tuple) and isinstance(step, int) and -len(n) <= step < len(n):
            step %= len(n)
            at += sum(count(x) for x in n[:step])
            n = n[step]
        else:
            raise KeyError(path)
    if not isinstance(n, Leaf):
        raise KeyError(path)
    return at


def spec(node):
    """The structure as tf.data's element_spec: the same nest of
    sluice.TensorSpec."""
    if node is None:
        return None
    if isinstance(node, Leaf):
        return TensorSpec(node.shape, node.dtype)
    if isinstance(node, tuple):
        return tuple(spec(x) for x in node)
    return {k: spec(x) for k, x in node.items()}


def buffer_text(ptr):
    """The text form of a C structure (None: "?")."""
    n = lib.sl_structure_format(ptr, None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.sl_structure_format(ptr, buf, n + 1)
    return buf.value.decode("utf-8", "surrogateescape")
