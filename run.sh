#!/bin/bash
# Quick start: installs what is missing (see scripts/setup.sh), builds sluice
# into build/ and runs the demo pipeline. Extra arguments go to the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

bash scripts/setup.sh || exit 1

# Configure once; later runs rely on the build re-running CMake as needed
# (and keep the options ./test.sh set, so the two never rebuild each other).
if [ ! -f build/CMakeCache.txt ]; then
    mkdir -p build
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build/configure.log 2>&1 ||
        { cat build/configure.log >&2; exit 1; }
fi
cmake --build build -j "$(nproc)" > /dev/null ||
    { cmake --build build -j 1; exit 1; } # show the error once, unparallel

demo=build/example_demo
if [ ! -x "$demo" ]; then
    echo "run.sh: $demo was not built (is examples/demo.c there?)" >&2
    exit 1
fi
exec "$demo" "$@"
