"""The package installs without a compiler or an index: by cmake --install
(finding the installed library next to it) and by pip install ./python."""

import os
import shutil
import subprocess
import sys

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


def test_pip_install_offline(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("%s has no pip (apt install python3-pip)" % sys.executable)
    src = tmp_path / "src"
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "_install.py"))
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir",
                        "--disable-pip-version-check", "--target", str(target), str(src)],
                       capture_output=True, text=True, env=clean_env(), timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "sluice" / "dataset.py").exists()
    assert list(target.glob("sluice-*.dist-info"))
    lib = os.environ.get("SLUICE_LIBRARY")
    if not lib:
        return
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                       env=clean_env(PYTHONPATH=str(target), SLUICE_LIBRARY=lib),
                       cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "[0, 1, 2, 3]"
