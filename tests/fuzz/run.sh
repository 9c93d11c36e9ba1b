#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs each libFuzzer target for SECONDS each, from the build directory TERN_FUZZ_BUILD_DIR (default build-asan/, the
# clang tree that tools/test.sh configures with -DTERN_FUZZ=ON and ASan + UBSan, where `cmake --build` builds them).
#   [TERN_FUZZ_BUILD_DIR=DIR] tests/fuzz/run.sh [SECONDS [TARGET...]]      default: 60 s, every target
# New inputs go to DIR/fuzz-corpus/<target>/ (the committed seeds and regressions are read, never written);
# a crash, leak, timeout or out-of-memory stops the run with a non-zero status and leaves the input in
# DIR/fuzz-artifacts/<target>/. Keep such an input under tests/fuzz/regressions/<target>/ once it is fixed.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(model_load safetensors convert_config tern_run tokenizer)
build=${TERN_FUZZ_BUILD_DIR:-build-asan}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

for t in "${targets[@]}"; do
  work="$build/fuzz-corpus/$t"
  artifacts="$build/fuzz-artifacts/$t"
  mkdir -p "$work" "$artifacts"
  seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  # tern-run prints on every input: its stdout and stderr closed (libFuzzer and the sanitizers keep their own copy).
  quiet=()
  [ "$t" = tern_run ] && quiet=(-close_fd_mask=3)
  echo "fuzz: $t for ${seconds} s"
  # -timeout: one input taking this long is a hang; -rss_limit_mb: one using this much is a runaway allocation.
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=25 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 "${dict[@]}" "${quiet[@]}" \
      "$work" "${seeds[@]}"; then
    echo "fuzz: $t failed; the input is in $artifacts/" >&2
    exit 1
  fi
done
