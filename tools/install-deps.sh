#!/usr/bin/env bash
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
  clang-14 libclang-rt-14-dev   # libFuzzer and clang's sanitizer runtimes, for the fuzz targets (tools/test.sh)
  libvulkan-dev glslc spirv-tools        # the Vulkan backend: loader + headers, the shader compiler
  mesa-vulkan-drivers vulkan-validationlayers  # lavapipe (a CPU Vulkan device, for the tests) and the Khronos validation layer
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
