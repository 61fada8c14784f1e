#!/bin/bash
# Usage: check_exports.sh <libsluice.so> [SOURCE_DIR]
# Fails if the shared library exports anything but the public sl_* symbols,
# if a function include/sluice.h declares is not exported, or is exported
# under the wrong version node (the stable core under SLUICE_<x.y>, the
# SLUICE_EXPERIMENTAL section under SLUICE_EXPERIMENTAL_<x.y>), or if
# src/sluice.map names a symbol the header does not declare.
set -euo pipefail

lib=${1:?usage: check_exports.sh <libsluice.so> [SOURCE_DIR]}
src=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
[ -f "$lib" ] || { echo "check_exports: no such file: $lib" >&2; exit 1; }
header=$src/include/sluice.h
map=$src/src/sluice.map

# name@@NODE for every defined dynamic symbol
exported=$(nm -D --defined-only "$lib" | awk 'NF >= 2 { print $NF }' | sort -u)

bad=
count=0
while IFS= read -r s; do
    [ -n "$s" ] || continue
    name=${s%%@*}
    case $name in
        sl__*) bad="$bad $s" ;;
        sl_*) count=$((count + 1)) ;;
        _init | _fini | __bss_start | _edata | _end) ;;
        SLUICE_* | GLIBC_* | GCC_*) ;; # version nodes
        *) bad="$bad $s" ;;
    esac
done <<< "$exported"
if [ -n "$bad" ]; then
    echo "check_exports: unexpected exported symbols in $lib:" >&2
    for s in $bad; do echo "  $s" >&2; done
    exit 1
fi
if [ "$count" -eq 0 ]; then
    echo "check_exports: $lib exports no sl_* symbol at all" >&2
    exit 1
fi

# The functions the header declares, per tier.
declared() { # $1: stable | experimental
    awk -v want="$1" '
        /^#if defined\(SLUICE_EXPERIMENTAL\)/ { tier = "experimental" }
        /^#endif \/\* SLUICE_EXPERIMENTAL \*\// { tier = "" }
        { if (tier == "") t = "stable"; else t = tier }
        t == want { print }' "$header" |
        tr '\n' ' ' | grep -o 'SL_API[^;{]*' | grep -o 'sl_[a-z0-9_]*[[:space:]]*(' |
        tr -d ' (' | sort -u
}

missing=
for name in $(declared stable); do
    grep -qE "^$name@@SLUICE_[0-9]+\.[0-9]+$" <<< "$exported" ||
        missing="$missing $name[stable:SLUICE_x.y]"
done
for name in $(declared experimental); do
    grep -qE "^$name@@SLUICE_EXPERIMENTAL_[0-9]+\.[0-9]+$" <<< "$exported" ||
        missing="$missing $name[experimental:SLUICE_EXPERIMENTAL_x.y]"
done
if [ -n "$missing" ]; then
    echo "check_exports: declared in $header but not exported under the right node" \
         "(list it in $map):" >&2
    for s in $missing; do echo "  $s" >&2; done
    exit 1
fi

# No stale names in the map.
stale=
all=$( (declared stable; declared experimental) | sort -u)
for name in $(grep -oE '^[[:space:]]+sl_[a-z0-9_]+;' "$map" | tr -d ' ;'); do
    grep -qx "$name" <<< "$all" || stale="$stale $name"
done
if [ -n "$stale" ]; then
    echo "check_exports: $map lists symbols the header does not declare:$stale" >&2
    exit 1
fi
echo "check_exports: $count public sl_* symbols, each under its version node, nothing else"
