"""Runs one file of the Python binding's tests under pytest, for CTest.

Exit status: pytest's (0 passed, 1 failed), 77 (CTest's "skipped", with the
reason on stdout) when the tests cannot run here, and 1 when pytest
collected nothing (pytest's 5), so a broken file cannot pass silently.
In an ASan build the interpreter runs with the ASan runtime preloaded; in
other sanitizer builds the tests are skipped.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile


def skip(reason):
    print("skipped: " + reason)
    sys.exit(77)


def asan_runtime(library):
    """The path of the ASan runtime `library` was linked with, or None."""
    try:
        out = subprocess.run(["ldd", library], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"^\s*libasan\.so[.\d]* => (\S+)", out, re.M)
    return m.group(1) if m else None


def under_sanitizer(sanitize):
    """An unsanitized interpreter can load an ASan-built libsluice only with
    the ASan runtime preloaded: re-executes this script that way (leak
    detection off: the interpreter keeps memory until exit by design; the
    tests check the library's own accounting). TSan cannot be preloaded into
    an uninstrumented interpreter without false reports, so it skips."""
    if "address" not in sanitize:
        skip("sanitizer build (SLUICE_SANITIZE=%s): %s cannot load this library; the "
             "plain and ASan builds run these tests" % (sanitize, sys.executable))
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        return
    runtime = asan_runtime(os.environ.get("SLUICE_LIBRARY", ""))
    if not runtime:
        skip("ASan build, but no libasan found in `ldd $SLUICE_LIBRARY` to preload")
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [runtime, env.get("LD_PRELOAD")]))
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def main():
    if len(sys.argv) != 2:
        print("usage: run.py tests/python/test_X.py", file=sys.stderr)
        return 2
    if os.environ.get("SLUICE_SANITIZE"):
        under_sanitizer(os.environ["SLUICE_SANITIZE"])
    try:
        import numpy  # noqa: F401
    except ImportError:
        skip("%s has no numpy (apt install python3-numpy)" % sys.executable)
    try:
        import pytest
    except ImportError:
        skip("%s has no pytest (apt install python3-pytest)" % sys.executable)
    here = os.path.dirname(os.path.abspath(__file__))
    # A private temporary root: CTest runs several files at once, and
    # pytest's shared numbered directories would be pruned under each other.
    basetemp = tempfile.mkdtemp(prefix="sluice-pytest-")
    try:
        rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "--rootdir", here,
                          "--basetemp", basetemp, sys.argv[1]])
    finally:
        shutil.rmtree(basetemp, ignore_errors=True)
    if rc == 5:
        print("run.py: pytest collected no tests from %s" % sys.argv[1])
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
