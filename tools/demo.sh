#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds Tern, converts the shipped models, generates text, scores held-out text, and
# streams the whole held-out text through the bounded-state model in the memory of one window.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
build=${TERN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target tern-convert tern-run long_document
model=examples/models/kjv-byte
mkdir -p out
"$build"/converter/tern-convert "$model" -o out/kjv-byte.tern
echo
"$build"/examples/tern-run out/kjv-byte.tern --prompt "And God said, " -n 300 --seed 7 --threads 1
echo
"$build"/examples/tern-run out/kjv-byte.tern --score "$model"/heldout.txt --threads 1
# kjv-llama: the same text learnt by a Llama-architecture model in Hugging Face's layout (config.json, safetensors,
# tokenizer.json: RMS norms, rotary positions, grouped-query attention, SwiGLU); its generation ends at its
# end-of-sequence token.
echo
"$build"/converter/tern-convert examples/models/kjv-llama -o out/kjv-llama.tern
"$build"/examples/tern-run out/kjv-llama.tern --prompt "And God said" -n 200 --seed 7 --threads 1
# kjv-stream: sliding-window attention and computed positions, so a session keeps one window of keys per layer and
# reads a text of any length in one pass; long_document says what dense attention would have needed for it.
echo
"$build"/converter/tern-convert examples/models/kjv-stream -o out/kjv-stream.tern
"$build"/examples/long_document out/kjv-stream.tern "$model"/heldout.txt --threads 1
# The same model on a Vulkan device when one exists (a GPU, or Mesa's lavapipe on the CPU, which is much slower:
# a short generation). Without a loader or device the line says why and the demo ends here.
echo
if "$build"/examples/tern-run out/kjv-byte.tern --backend vulkan --prompt "And God said, " -n 40 --seed 7; then :; else
  echo "(no Vulkan device: the demo ran on the CPU only)"
fi
