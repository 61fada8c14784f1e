# Thin driver around CMake. Targets:
#   make                 configure (once) and build into build/
#   make test            build, then ctest
#   make asan / tsan     build and test under sanitizers (build-asan/, build-tsan/)
#   make install PREFIX=/opt/sluice
#   make clean
PREFIX ?= /usr/local
JOBS   ?= $(shell nproc)
BUILD_TYPE ?= RelWithDebInfo
CTEST  := ctest --output-on-failure -j2

.PHONY: all build test asan tsan install clean

all: build

build/CMakeCache.txt:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: build/CMakeCache.txt
	cmake --build build -j $(JOBS)

test: build
	$(CTEST) --test-dir build

build-asan/CMakeCache.txt:
	cmake -S . -B build-asan -DSLUICE_SANITIZE=address,undefined

asan: build-asan/CMakeCache.txt
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(CTEST) --test-dir build-asan

build-tsan/CMakeCache.txt:
	cmake -S . -B build-tsan -DSLUICE_SANITIZE=thread

tsan: build-tsan/CMakeCache.txt
	cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	$(CTEST) --test-dir build-tsan

install: build
	cmake --install build --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-tsan
