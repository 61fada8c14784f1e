#!/bin/bash
# Usage: check_exports.sh <path-to-libsluice.so>
# Fails if the shared library exports an internal sl__* symbol or anything
# outside the public sl_* prefix.
set -euo pipefail

lib=${1:?usage: check_exports.sh <libsluice.so>}
[ -f "$lib" ] || { echo "check_exports: no such file: $lib" >&2; exit 1; }

syms=$(nm -D --defined-only "$lib" | awk 'NF >= 2 { print $NF }' | sed 's/@.*//' | sort -u)

bad=
count=0
while IFS= read -r s; do
    [ -n "$s" ] || continue
    case $s in
        sl__*) bad="$bad $s" ;;
        sl_*) count=$((count + 1)) ;;
        _init | _fini | __bss_start | _edata | _end) ;;
        SLUICE_[0-9]* | GLIBC_* | GCC_*) ;; # version nodes
        *) bad="$bad $s" ;;
    esac
done <<< "$syms"

if [ -n "$bad" ]; then
    echo "check_exports: unexpected exported symbols in $lib:" >&2
    for s in $bad; do echo "  $s" >&2; done
    exit 1
fi
if [ "$count" -eq 0 ]; then
    echo "check_exports: $lib exports no sl_* symbol at all" >&2
    exit 1
fi
echo "check_exports: $count public sl_* symbols, nothing else"
