"""python3 -m sluice: what this installation is.

Prints the package's version, the C library it loaded (the file, where it
was found, its version) and the options that library was built with, as
the library reports them. Exits 1 with the loader's message when no
library can be loaded.
"""

import os
import sys


def main():
    try:
        import sluice
        from sluice._lib import lib
    except ImportError as e:  # sluice.LibraryError is one
        print("sluice: %s" % e, file=sys.stderr)
        return 1
    options = sluice.build_options()
    print("sluice %s (Python package: %s)" % (sluice.__version__,
                                              os.path.dirname(sluice.__file__)))
    print("library: %s (version %s, found in %s)" % (sluice.library_path, sluice.library_version,
                                                    lib.sluice_origin))
    print("built with: %s" % " ".join(n for n, on in options.items() if on))
    off = [n for n, on in options.items() if not on]
    print("built without: %s" % (" ".join(off) if off else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
