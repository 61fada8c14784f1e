"""A minimal PEP 517 / PEP 660 build backend for the pure-Python sluice
package: it zips sluice/*.py into a wheel (or points a .pth file at this
directory for an editable install). No dependencies, so pip needs no index.
"""

import base64
import hashlib
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "sluice"
TAG = "py3-none-any"


def _version():
    with open(os.path.join(HERE, NAME, "_version.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


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


def _write_wheel(wheel_directory, files):
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    files = list(files) + [
        ("%s/METADATA" % dist_info, _metadata(version).encode()),
        ("%s/WHEEL" % dist_info, ("Wheel-Version: 1.0\nGenerator: sluice_backend\n"
                                  "Root-Is-Purelib: true\nTag: %s\n" % TAG).encode()),
        ("%s/top_level.txt" % dist_info, (NAME + "\n").encode()),
    ]
    record = [_record_line(a, d) for a, d in files] + ["%s/RECORD,," % dist_info]
    files.append(("%s/RECORD" % dist_info, ("\n".join(record) + "\n").encode()))
    filename = "%s-%s-%s.whl" % (NAME, version, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            z.writestr(arcname, data)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for path, arcname in _sources():
        with open(path, "rb") as f:
            files.append((arcname, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("%s.pth" % NAME, (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (NAME, version)
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        for rel in ["pyproject.toml", "_backend/sluice_backend.py"]:
            tar.add(os.path.join(HERE, rel), "%s/%s" % (base, rel))
        for path, arcname in _sources():
            tar.add(path, "%s/%s" % (base, arcname))
        pkg_info = os.path.join(sdist_directory, "PKG-INFO.tmp")
        with open(pkg_info, "w", encoding="utf-8") as f:
            f.write(_metadata(version))
        tar.add(pkg_info, "%s/PKG-INFO" % base)
        os.unlink(pkg_info)
    return filename
