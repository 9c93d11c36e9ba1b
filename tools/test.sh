#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds Tern and runs the whole test suite (the README's test command, and CI's):
#   1. the Release build (build/) and every test;
#   2. one clang tree with AddressSanitizer + UndefinedBehaviorSanitizer and the libFuzzer targets (build-asan/): the
#      suite but for the heavy entries named below (sanitized_skip), which must be clean, then each libFuzzer target
#      for TERN_FUZZ_SECONDS (default 45) seconds, failing on any crash;
#   3. the aarch64 cross build (build-aarch64/) and its CI subset under qemu, with the logits of every golden and
#      the shipped model compared with step 1's (tools/cross/aarch64.sh --ci). TERN_CROSS=0 leaves it out.
# TERN_QUICK=1 stops after step 1. Each stage ends with its wall time and the run's so far (CI's budget is 45 min).
set -euo pipefail
cd "$(dirname "$0")/.."
stage_start=$SECONDS
stage_done() {
  echo "== $1: $(( SECONDS - stage_start )) s (total $(( SECONDS / 60 )) min $(( SECONDS % 60 )) s)"
  stage_start=$SECONDS
}
bash tools/install-deps.sh
stage_done "dependencies"
jobs=$(nproc)
build=${TERN_BUILD_DIR:-build}
# The tests' test_*.cpp at -O1 (tests/CMakeLists.txt, TERN_TEST_COMPILE_OPTIONS): the rest stays at -O3.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERN_TEST_COMPILE_OPTIONS=-O1 >/dev/null
cmake --build "$build" -j"$jobs"
stage_done "Release build"
ctest --test-dir "$build" --output-on-failure -j"$jobs"
stage_done "Release suite"
[ "${TERN_QUICK:-0}" = 1 ] && exit 0

echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
# One tree for the sanitized suite and the fuzz targets: clang (libFuzzer needs it), -O1 to keep the suite fast enough
# for CI, -g1 (line tables: every frame of a report has its file and line, at a fraction of -g's build time).
# TERN_FUZZ adds the coverage instrumentation and the fuzz executables; the benchmark programs (no test runs them) are
# left out. LLVM's linker: about a third of GNU ld's time on these instrumented executables with line tables.
lld=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 "${lld[@]}" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  "-DTERN_SANITIZE=address;undefined" -DTERN_FUZZ=ON -DTERN_BENCHMARKS=OFF >/dev/null
cmake --build build-asan -j"$jobs"  # the library, tools, tests and fuzz targets
stage_done "sanitized build"
# No suppressions: the prebuilt libraries (XNNPACK, pthreadpool) are not instrumented and report nothing here.
# The sanitized run leaves out the entries that repeat, on more data, code the rest of the suite already runs under
# it, and that take half of the suite's time (step 1 runs them all): every op group on Vulkan (their time is
# lavapipe's compiling and running shaders, which is not instrumented; the Vulkan tests and the goldens' Vulkan halves
# keep the backend's host code in this run), every golden family in every compressed format (the compressed kernels'
# own tests stay), the float16 KV golden models (the float16 KV kernel tests stay), 10,000 lines against
# libsentencepiece per trained model (the hostile SentencePiece tests and the tokenizer fuzz target stay), the op
# groups run again under each kernel variant by name (the plain entries run the widest; every variant's kernel tests,
# test_cpu_isa_kernels_* and test_quant_kernels_*, stay), the long-document examples and the
# kjv-stream test (test_streaming and test_generation run the same streaming code on smaller models), and the
# Hugging Face goldens' compressed twins on Vulkan (test_vulkan_compressed_weights runs that host code).
sanitized_skip='^(test_backend_ops:.* on Vulkan|test_compressed_weights:compressed weights: every family and format.*'
sanitized_skip+='|test_kv_storage:float16 KV: golden models.*|test_sentencepiece:sentencepiece encode and decode match'
sanitized_skip+=' libsentencepiece on every line and model|test_backend_ops_cpu_cases_kernels_.*'
sanitized_skip+='|example_long_document_kjv_stream|example_long_document|test_kjv_stream:.*'
sanitized_skip+='|test_vulkan_hf_goldens:hf goldens on Vulkan: f16, int8 and int4 weights.*)$'
ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "$sanitized_skip"
stage_done "sanitized suite"

echo "== libFuzzer targets, ${TERN_FUZZ_SECONDS:-45} s each"
TERN_FUZZ_BUILD_DIR=build-asan bash tests/fuzz/run.sh "${TERN_FUZZ_SECONDS:-45}"
stage_done "fuzzing"

[ "${TERN_CROSS:-1}" = 0 ] && exit 0
echo "== aarch64: cross build, the CI subset under qemu, logits against x86-64"
TERN_X86_BUILD="$build" bash tools/cross/aarch64.sh --ci
stage_done "aarch64"
