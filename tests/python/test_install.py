"""The package installs with no index: by cmake --install (finding the
installed library next to it) and by pip install ./python in a fresh virtual
environment, which builds the C library and carries it in the package."""

import glob
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import SOURCE_DIR

BUILD_DIR = os.environ.get("SLUICE_BUILD_DIR")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


CHECK = ("import sluice, os; print(sluice.library_path); "
         "print(sorted(int(x) for x in sluice.Dataset.range(4).shuffle(sluice.ALL, seed=1)))")


def test_cmake_install(tmp_path):
    if not BUILD_DIR or not shutil.which("cmake"):
        pytest.skip("needs SLUICE_BUILD_DIR (CTest sets it) and cmake")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)], check=True,
                   capture_output=True, timeout=120)
    pydir = prefix / os.environ.get("SLUICE_PYTHON_INSTALL_DIR", "lib/python3/dist-packages")
    assert (pydir / "sluice" / "__init__.py").exists()
    assert (pydir / "sluice" / "_install.py").exists()
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                       env=clean_env(PYTHONPATH=str(pydir)), cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    lib_path, values = r.stdout.splitlines()
    assert lib_path.startswith(str(prefix)) and values == "[0, 1, 2, 3]"
    # relocatable: the prefix moved
    moved = tmp_path / "moved"
    shutil.move(str(prefix), str(moved))
    pydir = moved / os.path.relpath(pydir, prefix)
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                       env=clean_env(PYTHONPATH=str(pydir)), cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith(str(moved))


PIP = ["--no-index", "--no-cache-dir", "--disable-pip-version-check"]
PACKAGE = os.path.join(SOURCE_DIR, "python")

# the three lines a newcomer writes
PIPELINE = """
import sluice
ds = sluice.Dataset.range(10).shuffle(sluice.ALL, seed=1).batch(4)
print(sorted(int(x) for b in ds for x in b.tolist()))
print(sluice.__file__)
print(sluice.library_path)
"""


def make_venv(path):
    """A virtual environment with Debian's site packages (numpy, torch)."""
    r = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(path)],
                       capture_output=True, text=True, env=clean_env(), timeout=120)
    if r.returncode != 0 and "ensurepip" in r.stdout + r.stderr:
        pytest.skip("no venv with pip here (apt install python3-venv): %s" % r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    return path / "bin" / "python"


def pip(python, *args, ok=True, timeout=900):
    r = subprocess.run([str(python), "-m", "pip"] + list(args), capture_output=True, text=True,
                       env=clean_env(), timeout=timeout)
    if ok:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_pip_install_in_a_fresh_venv(tmp_path):
    """pip install ./python: the wheel carries the library it built, and a
    pipeline runs from another directory with nothing set."""
    venv = tmp_path / "venv"
    python = make_venv(venv)
    pip(python, "install", *PIP, PACKAGE)
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run([str(python), "-c", PIPELINE], capture_output=True, text=True,
                       env=clean_env(), cwd=str(work), timeout=120)
    assert r.returncode == 0, r.stderr
    values, module, library = r.stdout.splitlines()
    assert values == str(list(range(10)))
    assert module.startswith(str(venv) + os.sep), module
    assert library.startswith(str(venv) + os.sep), library
    assert os.path.dirname(library) == os.path.dirname(module)
    # the tag says what it is: any CPython 3, this machine's architecture
    wheel = glob.glob(str(venv / "lib" / "python3*" / "site-packages" / "sluice-*.dist-info"
                          / "WHEEL"))
    assert len(wheel) == 1
    tag = [l for l in open(wheel[0]).read().splitlines() if l.startswith("Tag: ")]
    assert tag == ["Tag: py3-none-linux_" + os.uname().machine], tag
    # python3 -m sluice says what this installation is
    r = subprocess.run([str(python), "-m", "sluice"], capture_output=True, text=True,
                       env=clean_env(), cwd=str(work), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "library: %s (version " % library in r.stdout
    assert "found in the package directory" in r.stdout
    built = [l for l in r.stdout.splitlines() if l.startswith("built with: ")]
    assert built and "jpeg" in built[0].split() and "io_uring" in built[0].split(), r.stdout


def test_pip_install_editable(tmp_path):
    """pip install -e ./python: the package is the checkout's, and so is the
    library (the checkout's build/, else the one the backend built)."""
    python = make_venv(tmp_path / "venv")
    pip(python, "install", *PIP, "-e", PACKAGE)
    r = subprocess.run([str(python), "-c", PIPELINE], capture_output=True, text=True,
                       env=clean_env(), cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    values, module, library = r.stdout.splitlines()
    assert values == str(list(range(10)))
    assert module == os.path.join(PACKAGE, "sluice", "__init__.py")
    candidates = [os.path.join(SOURCE_DIR, "build", "libsluice.so.0"),
                  os.path.join(PACKAGE, "_backend", "build", "libsluice.so.0")]
    have = [os.path.realpath(c) for c in candidates if os.path.exists(c)]
    assert have and library == have[0], (library, have)


def test_pip_wheel_with_and_without_the_library(tmp_path):
    python = make_venv(tmp_path / "venv")
    pip(python, "wheel", *PIP, "--no-deps", "-w", str(tmp_path / "w1"), PACKAGE)
    [built] = os.listdir(tmp_path / "w1")
    assert built.endswith("-py3-none-linux_%s.whl" % os.uname().machine), built
    with zipfile.ZipFile(tmp_path / "w1" / built) as z:
        info = z.getinfo("sluice/libsluice.so.0")
        assert info.file_size > 100000 and "sluice/_header.py" in z.namelist()
        assert "Root-Is-Purelib: false" in z.read(
            [n for n in z.namelist() if n.endswith("/WHEEL")][0]).decode()
    pip(python, "wheel", *PIP, "--no-deps", "-w", str(tmp_path / "w2"),
        "--config-settings", "library=system", PACKAGE)
    [plain] = os.listdir(tmp_path / "w2")
    assert plain.endswith("-py3-none-any.whl"), plain
    with zipfile.ZipFile(tmp_path / "w2" / plain) as z:
        assert not [n for n in z.namelist() if ".so" in n]


def test_pip_refuses_what_it_cannot_build(tmp_path):
    """Away from the checkout (a copy, as an sdist would be) the build says
    in one line what to do; --config-settings library=system still installs
    the pure package, which loads an installed library."""
    python = make_venv(tmp_path / "venv")
    copy = tmp_path / "copy"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "_install.py",
                                                                  "build"))
    r = pip(python, "install", *PIP, str(copy), ok=False)
    assert r.returncode != 0
    assert "sluice: the C sources" in r.stdout + r.stderr and \
        "install from a sluice checkout" in r.stdout + r.stderr, r.stdout + r.stderr
    pip(python, "install", *PIP, "--config-settings", "library=system", str(copy))
    lib = os.environ.get("SLUICE_LIBRARY")
    if lib:
        r = subprocess.run([str(python), "-c", PIPELINE], capture_output=True, text=True,
                           env=clean_env(SLUICE_LIBRARY=lib), cwd=str(tmp_path), timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[2] == os.path.realpath(lib)
    # an sdist cannot carry ../src: refused, saying so
    r = subprocess.run([sys.executable, "-c", "import sluice_backend as b; b.build_sdist(%r)"
                        % str(tmp_path)], capture_output=True, text=True, timeout=60,
                       cwd=os.path.join(PACKAGE, "_backend"), env=clean_env())
    assert r.returncode == 1 and r.stderr.startswith("sluice: no sdist:"), r.stderr
