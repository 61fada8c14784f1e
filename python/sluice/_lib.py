"""Finds libsluice, checks its version and declares the C functions.

Search order (the first that exists wins):

1. ``SLUICE_LIBRARY``: a path to the shared library. When it is set it is the
   only candidate, so a wrong value is an error rather than a silent fallback.
2. Next to the package: ``libsluice.so*`` inside the package directory (what
   ``pip install ./python`` puts there).
3. In a checkout (the package is ``<checkout>/python/sluice``: PYTHONPATH or
   an editable install): the checkout's ``build/`` library, then the one the
   build backend made in ``python/_backend/build/``.
4. The library that ``cmake --install`` put under the package's prefix (its
   path relative to the package is written into ``_install.py`` at install
   time).
5. The system loader: ``libsluice.so.0`` through ``LD_LIBRARY_PATH``, the
   ld.so cache and the default directories.

Every function of the header is declared with the argtypes/restype that
``_header.py`` (generated from include/sluice.h) gives it, so that pointers
are never truncated to int and Python values are checked before they reach
C. The stable functions must all be there; the experimental ones are
declared where the library has them.
"""

import ctypes
import os

from ._constants import SL_EUNSUPPORTED
from ._header import EXPERIMENTAL_FUNCTIONS, FUNCTIONS
from ._version import ABI_VERSION, __version__

SONAME = "libsluice.so.0"


class LibraryError(ImportError):
    """The shared library is missing, unloadable or of another version."""


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
    python_dir = os.path.dirname(pkg)
    checkout = os.path.dirname(python_dir)
    if os.path.exists(os.path.join(python_dir, "_backend", "sluice_backend.py")) and \
            os.path.exists(os.path.join(checkout, "CMakeLists.txt")):
        for path, where in ((os.path.join(checkout, "build", SONAME), "the checkout's build/"),
                            (os.path.join(python_dir, "_backend", "build", SONAME),
                             "the build backend's build/")):
            if os.path.exists(path):
                found.append((path, where))
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
    fn.restype, fn.argtypes = FUNCTIONS["sl_version_number"]
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
    _declare(lib, FUNCTIONS, True)
    _declare(lib, EXPERIMENTAL_FUNCTIONS, False)
    lib.sluice_path = _loaded_path(lib, path)
    lib.sluice_origin = origin
    return lib


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _loaded_path(lib, path):
    """The file the loader opened (a bare soname says nothing of where it
    was found): dladdr of one of its functions, made absolute."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes, dladdr.restype = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)], ctypes.c_int
        info = _DlInfo()
        if dladdr(ctypes.cast(lib.sl_version_number, ctypes.c_void_p), ctypes.byref(info)) \
                and info.dli_fname:
            return os.path.realpath(os.fsdecode(info.dli_fname))
    except (AttributeError, OSError):
        pass
    return os.path.realpath(path) if os.sep in path else path


def optional(lib, name):
    """lib.name, or a clear error naming the missing function."""
    fn = getattr(lib, name, None)
    if fn is None or fn.argtypes is None and name in EXPERIMENTAL_FUNCTIONS:
        from ._errors import Error
        raise Error(SL_EUNSUPPORTED, "%s is not in the loaded library (%s); it is older than this "
                    "package" % (name, lib.sluice_path))
    return fn


lib = load()
