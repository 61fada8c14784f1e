"""Version of this package and of the C library ABI it was written for."""

from ._constants import SL_VERSION_NUMBER

__version__ = "0.3.0"

# sl_version_number() of the library this package was written against: the
# header's SL_VERSION_NUMBER (MAJOR * 10000 + MINOR * 100 + PATCH). A
# library of the same major version and at least this minor one is accepted;
# while the major version is 0 the minor version must match exactly (the
# stability policy: README.md).
ABI_VERSION = SL_VERSION_NUMBER
