#!/bin/bash
# Quick start: installs what the main job needs (scripts/setup.sh run: a
# compiler, CMake, pkg-config, liburing, libjpeg-turbo, zlib), builds the
# library and sluice-bench into build/, writes a sample image folder to
# build/sample once (2048 generated JPEGs of ImageNet-like sizes, ~7 s), and
# runs sluice-bench on it: the train pipeline for 6 epochs beside the decode
# ceiling, printing the summary (whole-run and steady rates, what the first
# epoch cost). Extra arguments go to sluice-bench (later ones win:
# ./run.sh --epochs 10 --preset eval); a first argument that is not an
# option is a folder to use instead of the sample:
# ./run.sh /data/imagenet/train --limit 5000
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

bash scripts/setup.sh run || exit 1

# Configure once; later runs rely on the build re-running CMake as needed
# (and keep the options ./test.sh set, so the two never rebuild each other).
# Without the tests: their cmocka is ./test.sh's to install (it turns them on).
if [ ! -f build/CMakeCache.txt ]; then
    mkdir -p build
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_BUILD_TESTS=OFF \
        > build/configure.log 2>&1 || { cat build/configure.log >&2; exit 1; }
fi
cmake --build build -j "$(nproc)" --target sluice-bench > /dev/null ||
    { cmake --build build -j 1 --target sluice-bench; exit 1; } # the error once, unparallel

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
exec "$bench" "$dir" --preset train --epochs 6 --ceiling --decode-limit "$@"
