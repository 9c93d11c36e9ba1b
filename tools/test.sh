#!/usr/bin/env bash
# Installs what is missing, builds Tern and runs the whole test suite (the README's test command, and CI's):
#   1. the Release build (build/) and every test;
#   2. one clang tree with AddressSanitizer + UndefinedBehaviorSanitizer and the libFuzzer targets (build-asan/): the
#      same suite, which must be clean, then each libFuzzer target for TERN_FUZZ_SECONDS (default 60) seconds,
#      failing on any crash;
#   3. the aarch64 cross build (build-aarch64/) and its CI subset under qemu, with the logits of every golden and
#      the shipped model compared with step 1's (tools/cross/aarch64.sh --ci). TERN_CROSS=0 leaves it out.
# TERN_QUICK=1 stops after step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=$(nproc)
build=${TERN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j"$jobs"
[ "${TERN_QUICK:-0}" = 1 ] && exit 0

echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
# One tree for the sanitized suite and the fuzz targets: clang (libFuzzer needs it), -O1 to keep the suite fast enough
# for CI while leaving stack traces readable. TERN_FUZZ adds the coverage instrumentation and the fuzz executables.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
  "-DTERN_SANITIZE=address;undefined" -DTERN_FUZZ=ON >/dev/null
cmake --build build-asan -j"$jobs"  # everything, the fuzz targets included
# No suppressions: the prebuilt libraries (XNNPACK, pthreadpool) are not instrumented and report nothing here.
ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

echo "== libFuzzer targets, ${TERN_FUZZ_SECONDS:-60} s each"
TERN_FUZZ_BUILD_DIR=build-asan bash tests/fuzz/run.sh "${TERN_FUZZ_SECONDS:-60}"

[ "${TERN_CROSS:-1}" = 0 ] && exit 0
echo "== aarch64: cross build, the CI subset under qemu, logits against x86-64"
TERN_X86_BUILD="$build" bash tools/cross/aarch64.sh --ci
