#!/bin/bash
# Usage: check_layers.sh [SOURCE_DIR]
# Fails when a file under src/ includes a header of a layer it may not use
# (src/README.md has the picture), or when bench/ or examples/ include
# anything but the public header and their own.
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"

# What each directory may include besides itself and "sluice.h".
allowed() {
    case $1 in
        core) echo "" ;;
        remote) echo "core" ;;
        runtime) echo "core remote" ;;
        image) echo "core" ;;
        graph) echo "core remote runtime" ;;
        store) echo "core runtime" ;;
        ops) echo "core remote runtime graph store" ;;
        vision) echo "core remote runtime graph image ops" ;;
        sources) echo "core remote runtime graph ops" ;;
        autotune) echo "core runtime graph" ;;
        obs) echo "core runtime graph" ;;
        service) echo "core remote runtime graph store ops" ;;
        iterator) echo "core remote runtime graph image store ops vision sources autotune obs service" ;;
        *) echo "?" ;;
    esac
}

bad=0
while IFS= read -r file; do
    layer=${file#src/}
    layer=${layer%%/*}
    ok=$(allowed "$layer")
    if [ "$ok" = "?" ]; then
        echo "check_layers: $file: directory src/$layer is not in the layer list" >&2
        bad=1
        continue
    fi
    while IFS= read -r inc; do
        [ "$inc" = sluice.h ] && continue
        case $inc in
            ../*/*) target=${inc#../}; target=${target%%/*} ;;
            */*) echo "check_layers: $file includes \"$inc\": use a path relative to its folder" >&2
                 bad=1; continue ;;
            *) continue ;; # its own folder
        esac
        [ "$target" = "$layer" ] && continue
        case " $ok " in
            *" $target "*) ;;
            *) echo "check_layers: $file includes \"$inc\": $layer may not use $target" >&2
               bad=1 ;;
        esac
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find src -name '*.[ch]' | sort)

# Programs on the public API: the header and their own files only (a
# header beside them, no path).
while IFS= read -r file; do
    while IFS= read -r inc; do
        case $inc in
            sluice.h) ;;
            */*) echo "check_layers: $file includes \"$inc\": bench and examples use the public header only" >&2
                 bad=1 ;;
            *) [ -f "$(dirname "$file")/$inc" ] && continue
               echo "check_layers: $file includes \"$inc\": bench and examples use the public header only" >&2
               bad=1 ;;
        esac
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find bench examples -name '*.[ch]' | sort)

if [ "$bad" -ne 0 ]; then
    echo "check_layers: layers broken (see src/README.md)" >&2
    exit 1
fi
echo "check_layers: every include goes down the layers"
