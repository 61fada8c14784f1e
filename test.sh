#!/bin/bash
# Builds sluice into build/ (warnings are errors) and runs every test.
# Extra arguments go to ctest (e.g. ./test.sh -R range). Exit status: ctest's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

bash scripts/setup.sh test || exit 1

# (./run.sh may have configured build/ without the tests)
if ! grep -qx 'SLUICE_WERROR:BOOL=ON' build/CMakeCache.txt 2> /dev/null ||
   ! grep -qx 'SLUICE_BUILD_TESTS:BOOL=ON' build/CMakeCache.txt 2> /dev/null ||
   ! grep -q '^CMAKE_BUILD_TYPE:' build/CMakeCache.txt 2> /dev/null; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_WERROR=ON \
        -DSLUICE_BUILD_TESTS=ON
fi
cmake --build build -j "$(nproc)"

status=0
ctest --test-dir build --output-on-failure -j2 "$@" || status=$?
exit "$status"
