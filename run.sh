#!/bin/bash
# Quick start: installs what is missing (see scripts/setup.sh), builds sluice
# into build/, writes a sample image folder to build/sample once, and runs
# sluice-bench on it: the train pipeline for 2 epochs plus the decode
# ceiling, printing the summary table. Extra arguments go to sluice-bench
# (later ones win: ./run.sh --epochs 5 --preset eval); a first argument that
# is not an option is a folder to use instead of the sample:
# ./run.sh /data/imagenet/train --limit 5000
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

bench=build/sluice-bench
if [ ! -x "$bench" ]; then
    echo "run.sh: $bench was not built (is bench/sluice_bench.c there?)" >&2
    exit 1
fi

if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    dir=$1
    shift
else
    dir=build/sample
    # files.txt is written last: without it the folder is incomplete
    if [ ! -f "$dir/files.txt" ]; then
        echo "run.sh: writing a sample image folder to $dir (once)" >&2
        "$bench" --make-sample "$dir" || exit 1
    fi
fi
exec "$bench" "$dir" --preset train --epochs 2 --ceiling "$@"
