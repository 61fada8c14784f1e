"""The in-tree PEP 517 / PEP 660 build backend of the sluice package.

`pip install ./python` (and `pip wheel ./python`) builds the C library with
CMake in this directory's build/ (not the checkout's build/, which belongs to
whoever runs cmake there) and puts libsluice.so.0 inside the package, where
sluice/_lib.py looks first; the wheel is then tagged py3-none-<platform>:
any CPython, this machine's architecture. With `--config-settings
library=system` the wheel carries no library (py3-none-any) and the package
loads one that is installed (SLUICE_LIBRARY, cmake --install, the system
loader).

An editable install (`pip install -e ./python`) points a .pth file at this
checkout; the package then loads the checkout's build/ library when there is
one (so a C change is picked up by rebuilding it), and this directory's
build/ otherwise, which the editable install builds when neither exists.

No dependencies beyond the standard library, so pip needs no index. An
sdist cannot carry the C sources in ../src: building one is refused.
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
ROOT = os.path.dirname(HERE)                                         # the checkout
BUILD = os.path.join(HERE, "_backend", "build")
NAME = "sluice"
SONAME = "libsluice.so.0"


def _fail(message):
    """Stop the build with one line that says what to do; pip shows it."""
    sys.stderr.write("sluice: %s\n" % message)
    sys.stderr.flush()
    raise SystemExit(1)


def _version():
    with open(os.path.join(HERE, NAME, "_version.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _platform_tag():
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def _metadata(version):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: tf.data-style streaming training-data pipelines in C, driven from Python\n"
            "License: Apache-2.0\nRequires-Python: >=3.8\n"
            "Provides-Extra: numpy\nRequires-Dist: numpy; extra == \"numpy\"\n"
            "Provides-Extra: torch\nRequires-Dist: torch; extra == \"torch\"\n" % (NAME, version))


def _sources():
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        # _install.py is written by cmake --install only, never shipped.
        if name.endswith(".py") and name != "_install.py":
            yield os.path.join(pkg, name), "%s/%s" % (NAME, name)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(wheel_directory, files, tag):
    """files: (arcname, bytes, mode) triples."""
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    purelib = "true" if tag.endswith("-any") else "false"
    files = list(files) + [
        ("%s/METADATA" % dist_info, _metadata(version).encode(), 0o644),
        ("%s/WHEEL" % dist_info, ("Wheel-Version: 1.0\nGenerator: sluice_backend\n"
                                  "Root-Is-Purelib: %s\nTag: %s\n" % (purelib, tag)).encode(),
         0o644),
        ("%s/top_level.txt" % dist_info, (NAME + "\n").encode(), 0o644),
    ]
    record = [_record_line(a, d) for a, d, _ in files] + ["%s/RECORD,," % dist_info]
    files.append(("%s/RECORD" % dist_info, ("\n".join(record) + "\n").encode(), 0o644))
    filename = "%s-%s-%s.whl" % (NAME, version, tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arcname, data, mode in files:
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return filename


# ---------------------------------------------------------------------------
# The C library

def _library_mode(config_settings):
    mode = (config_settings or {}).get("library", "build")
    if mode not in ("build", "system"):
        _fail("--config-settings library=%s: expected build (the default: the wheel "
              "carries the library it builds) or system (the package loads an installed "
              "one)" % mode)
    return mode


def _debian_missing():
    """The Debian packages ./run.sh's set-up names that are not installed, or
    None when this is not Debian (dpkg-query missing)."""
    if not shutil.which("dpkg-query"):
        return None
    try:
        with open(os.path.join(ROOT, "scripts", "setup.sh"), encoding="utf-8") as f:
            want = re.search(r'^SLUICE_APT_RUN="([^"]*)"', f.read(), re.M).group(1).split()
    except (OSError, AttributeError):
        return None
    missing = []
    for pkg in want:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if r.stdout.strip() != "install ok installed":
            missing.append(pkg)
    return missing


def _last_errors(log_path, log):
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    errors = [l for l in lines if "Error" in l or "error:" in l] or lines[-3:]
    return "%s (the whole log: %s)" % ("; ".join(errors[:3])[:600], log_path)


def _run_logged(cmd, log_name, what):
    log_path = os.path.join(BUILD, log_name)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log_path, "w", encoding="utf-8") as f:
        f.write(r.stdout)
    if r.returncode != 0:
        _fail("%s failed: %s" % (what, _last_errors(log_path, r.stdout)))


def build_library():
    """Configures (once) and builds libsluice in BUILD; returns its path."""
    if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")) or \
            not os.path.isdir(os.path.join(ROOT, "src")):
        _fail("the C sources (%s/src and CMakeLists.txt) are not beside this package; install "
              "from a sluice checkout: pip install <checkout>/python" % ROOT)
    missing = _debian_missing()
    if missing:
        _fail("cannot build libsluice: missing Debian packages; install them with: "
              "sudo apt-get install -y %s (or pip install --config-settings library=system "
              "to use an installed libsluice)" % " ".join(missing))
    if not shutil.which("cmake"):
        _fail("cannot build libsluice: cmake is not on PATH; install CMake 3.20 or newer and a "
              "C11 compiler (or pip install --config-settings library=system to use an "
              "installed libsluice)")
    os.makedirs(BUILD, exist_ok=True)
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        # the README's build, without the tests, benches and examples
        _run_logged(["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                     "-DSLUICE_BUILD_TESTS=OFF", "-DSLUICE_BUILD_BENCH=OFF",
                     "-DSLUICE_BUILD_EXAMPLES=OFF"], "configure.log", "configuring libsluice")
    _run_logged(["cmake", "--build", BUILD, "--target", "sluice", "-j", str(os.cpu_count() or 1)],
                "build.log", "building libsluice")
    path = os.path.join(BUILD, SONAME)
    if not os.path.exists(path):
        _fail("the build finished without %s" % path)
    return path


# ---------------------------------------------------------------------------
# PEP 517 / PEP 660 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for path, arcname in _sources():
        with open(path, "rb") as f:
            files.append((arcname, f.read(), 0o644))
    if _library_mode(config_settings) == "system":
        return _write_wheel(wheel_directory, files, "py3-none-any")
    with open(build_library(), "rb") as f:  # follows the soname link
        files.append(("%s/%s" % (NAME, SONAME), f.read(), 0o755))
    return _write_wheel(wheel_directory, files, "py3-none-" + _platform_tag())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    if _library_mode(config_settings) == "build" and \
            not os.path.exists(os.path.join(ROOT, "build", SONAME)):
        build_library()
    pth = [("%s.pth" % NAME, (HERE + "\n").encode(), 0o644)]
    return _write_wheel(wheel_directory, pth, "py3-none-any")


def build_sdist(sdist_directory, config_settings=None):
    _fail("no sdist: the package builds its C library from the checkout's src/, which an sdist "
          "cannot carry; install from the source tree: pip install <checkout>/python")
