#!/bin/bash
# Usage: install_consumer.sh <build-dir> <source-dir> [sanitizers]
# Installs the build into a temporary prefix, then builds and runs
# tests/consumer against it twice: through find_package(sluice) and through
# pkg-config. Exit 77 (skipped) for sanitizer builds, whose library needs the
# sanitizer runtime the consumer would not link.
set -euo pipefail

build=${1:?usage: install_consumer.sh <build-dir> <source-dir> [sanitizers]}
src=${2:?usage: install_consumer.sh <build-dir> <source-dir> [sanitizers]}
sanitize=${3:-}

if [ -n "$sanitize" ]; then
    echo "install_consumer: skipped under SLUICE_SANITIZE=$sanitize"
    exit 77
fi

build=$(cd "$build" && pwd)
src=$(cd "$src" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

step() { echo "== install_consumer: $*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" ||
    { cat "$tmp/install.log"; exit 1; }

pcfile=$(find "$prefix" -name sluice.pc -print -quit)
[ -n "$pcfile" ] || { echo "install_consumer: sluice.pc not installed" >&2; exit 1; }
libdir=$(dirname "$(dirname "$pcfile")")

step "find_package(sluice) consumer"
cmake -S "$src/tests/consumer" -B "$tmp/cbuild" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/cbuild" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/cbuild/consumer"

step "pkg-config consumer"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs sluice)
echo "pkg-config --cflags --libs sluice: $flags"
# shellcheck disable=SC2086 # word splitting of the flags is intended
cc -o "$tmp/consumer_pc" "$src/tests/consumer/consumer.c" $flags
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/consumer_pc"

step "ok"
