#!/usr/bin/env bash
# Installs what is missing, builds Tern and runs the whole test suite (the README's test command, and CI's).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
build=${TERN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
