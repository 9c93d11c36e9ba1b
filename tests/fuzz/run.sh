#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs each libFuzzer target for SECONDS each, from the build directory TERN_FUZZ_BUILD_DIR (default build-asan/, the
# clang tree that tools/test.sh configures with -DTERN_FUZZ=ON and ASan + UBSan, where `cmake --build` builds them).
#   [TERN_FUZZ_BUILD_DIR=DIR] [TERN_FUZZ_JOBS=N] tests/fuzz/run.sh [SECONDS [TARGET...]]
# default: 60 s, every target, N = the cores (targets run N at a time, each on one core; each one's output goes to
# DIR/fuzz-logs/<target>.log and is printed when it ends).
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

jobs=${TERN_FUZZ_JOBS:-$(nproc)}
logs="$build/fuzz-logs"
mkdir -p "$logs"

fuzz_one() {
  local t=$1
  local work="$build/fuzz-corpus/$t" artifacts="$build/fuzz-artifacts/$t"
  mkdir -p "$work" "$artifacts"
  local seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  local dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  # tern-run prints on every input: its stdout and stderr closed (libFuzzer and the sanitizers keep their own copy).
  local quiet=()
  [ "$t" = tern_run ] && quiet=(-close_fd_mask=3)
  # -timeout: one input taking this long is a hang; -rss_limit_mb: one using this much is a runaway allocation.
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=25 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "${dict[@]}" "${quiet[@]}" "$work" "${seeds[@]}"
}

# Runs the targets `jobs` at a time; the first failure stops the run once the running ones end.
declare -A running=()  # pid -> target
failed=""
finish_one() {
  local pid t status=0
  wait -n -p pid "${!running[@]}" || status=$?
  t=${running[$pid]}
  unset "running[$pid]"
  cat "$logs/$t.log"
  if [ "$status" != 0 ]; then
    echo "fuzz: $t failed; the input is in $build/fuzz-artifacts/$t/" >&2
    failed="$failed $t"
  fi
}
for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$t" ] || { echo "fuzz: $build/tests/fuzz/fuzz_$t is not built" >&2; exit 1; }
done
for t in "${targets[@]}"; do
  while [ ${#running[@]} -ge "$jobs" ]; do finish_one; done
  [ -n "$failed" ] && break
  echo "fuzz: $t for ${seconds} s"
  fuzz_one "$t" > "$logs/$t.log" 2>&1 &
  running[$!]=$t
done
while [ ${#running[@]} -gt 0 ]; do finish_one; done
[ -z "$failed" ] || exit 1
