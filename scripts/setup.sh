#!/bin/bash
# Makes sure the Debian packages a job needs are installed. Executed (or
# sourced) by ./run.sh and ./test.sh with the job's name:
#
#   setup.sh run    what building the library and running sluice-bench needs
#   setup.sh test   that, plus what the tests need (cmocka, Python with
#                   numpy, PIL, pytest, PyTorch and torchvision, pip and venv
#                   (the install tests build a fresh virtual environment), and
#                   pycparser for the binding's generator; Open MPI for the
#                   mpirun tests, which link it: the library does not; libcurl
#                   and libssl (libcrypto signs the requests), nginx and
#                   openssl for the object-store tests, s3rver from npm
#                   into build-node/, and FFmpeg's libraries, its command
#                   line tool (it makes the test videos), PyAV and
#                   torchaudio for the video and audio tests; UCX for the
#                   preprocessing service)
#
#   - everything present: silent, status 0;
#   - something missing and we are root: apt-get installs it;
#   - something missing otherwise: prints the one apt line to run, status 1.
#
# SLUICE_SKIP_SETUP=1 skips the check (non-Debian systems, custom toolchains).
# Without PyTorch (python3-torch) the tests that need it skip, saying so.

# The lists; extend them here.
SLUICE_APT_RUN="build-essential cmake pkg-config liburing-dev libjpeg62-turbo-dev zlib1g-dev"
SLUICE_APT_TEST="$SLUICE_APT_RUN libspng-dev libwebp-dev libcurl4-openssl-dev libssl-dev nginx-light openssl libcmocka-dev python3 python3-numpy python3-pil python3-pycparser python3-pytest python3-torch python3-torchvision python3-pip python3-venv openmpi-bin libopenmpi-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libswresample-dev ffmpeg python3-av python3-torchaudio libucx-dev"

sluice_setup() {
    local job=${1:-test} want pkg missing=""
    case $job in
        run) want=$SLUICE_APT_RUN ;;
        test) want=$SLUICE_APT_TEST ;;
        *) echo "setup: unknown job '$job' (run or test)" >&2; return 2 ;;
    esac
    [ "${SLUICE_SKIP_SETUP:-0}" = 1 ] && return 0
    if ! command -v dpkg-query > /dev/null 2>&1; then
        echo "setup: dpkg-query not found (not Debian?); not checking packages;" \
             "need: $want" >&2
        return 0
    fi
    for pkg in $want; do
        if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2> /dev/null)" != "install ok installed" ]; then
            missing="$missing $pkg"
        fi
    done
    missing=${missing# }
    [ -z "$missing" ] && return 0

    if [ "$(id -u)" -eq 0 ]; then
        echo "setup: installing missing packages: $missing" >&2
        # shellcheck disable=SC2086 # one word per package
        if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
               DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
                   --no-install-recommends $missing; } >&2; then
            echo "setup: apt-get failed; install these packages and retry: $missing" >&2
            return 1
        fi
        return 0
    fi

    echo "setup: missing Debian packages; install them with:" >&2
    echo "sudo apt-get install -y $missing"
    return 1
}

# The object-store tests' S3 server: s3rver from the npm registry, into
# build-node/ (ignored by git). Node and npm from apt where neither is
# there. Never fatal: without them those tests skip, saying so.
sluice_setup_node() {
    [ "${SLUICE_SKIP_SETUP:-0}" = 1 ] && return 0
    local dir=${SLUICE_NODE_DIR:-build-node}
    [ -x "$dir/node_modules/.bin/s3rver" ] && return 0
    if ! command -v npm > /dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
        echo "setup: installing nodejs and npm (for the S3 server of the tests)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            nodejs npm >&2 || echo "setup: no npm; the s3rver tests will skip" >&2
    fi
    if command -v npm > /dev/null 2>&1; then
        echo "setup: npm install s3rver into $dir/" >&2
        mkdir -p "$dir"
        (cd "$dir" && npm install --no-audit --no-fund --loglevel=error s3rver@3 >&2) ||
            echo "setup: npm install s3rver failed; the s3rver tests will skip" >&2
    fi
    return 0
}

# Sourced: return the status; executed: exit with it.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    sluice_setup "$@" || return $?
    [ "${1:-test}" = test ] && sluice_setup_node
    return 0
fi
sluice_setup "$@" || exit $?
[ "${1:-test}" = test ] && sluice_setup_node
exit 0
