#!/usr/bin/env bash
# Installs what is missing, builds Tern, converts the shipped model, generates text and scores held-out text.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
build=${TERN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target tern-convert tern-run
model=examples/models/kjv-byte
mkdir -p out
"$build"/converter/tern-convert "$model" -o out/kjv-byte.tern
echo
"$build"/examples/tern-run out/kjv-byte.tern --prompt "And God said, " -n 300 --seed 7 --threads 1
echo
"$build"/examples/tern-run out/kjv-byte.tern --score "$model"/heldout.txt --threads 1
# The same model on a Vulkan device when one exists (a GPU, or Mesa's lavapipe on the CPU, which is much slower:
# a short generation). Without a loader or device the line says why and the demo ends here.
echo
if "$build"/examples/tern-run out/kjv-byte.tern --backend vulkan --prompt "And God said, " -n 40 --seed 7; then :; else
  echo "(no Vulkan device: the demo ran on the CPU only)"
fi
