#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds Tern for 64-bit ARM Linux on a Debian 12 x86-64 machine, and with --test runs the CPU suite under qemu:
#   tools/cross/aarch64.sh [--test | --ci]
# 1. installs what is missing (root or sudo): Debian's cross toolchain, qemu-user, the host's cmake, ninja, flatc,
#    glslc, and the arm64 architecture for apt;
# 2. assembles a sysroot (BUILD_DIR/sysroot) from arm64 .debs unpacked with dpkg -x: libxnnpack-dev and
#    libpthreadpool-dev are not Multi-Arch: same, so installing them as arm64 packages would remove the host's;
# 3. configures BUILD_DIR (default build-aarch64) with cmake/toolchains/aarch64-linux-gnu.cmake, Release, Ninja,
#    and builds the library, the tools and the tests;
# 4. --test: ctest under qemu-aarch64 (the toolchain's emulator), CPU only: no Vulkan device runs under user-mode
#    emulation, so the Vulkan-only test cases are left out by name and the others run their CPU halves
#    (TERN_TESTS_CPU_ONLY, tests/support/test_support.h).
#    --ci: what CI runs, in about a third of the time: builds tern-run and the test executables of the subset
#    below only, runs that subset under qemu, compares the logits of every golden and the shipped model with the
#    x86-64 build's (tools/cross/compare_logits.py; needs build/, tools/test.sh's first step), and checks that a
#    configure given a build-machine library fails naming it.
# Idempotent: a second run reuses the sysroot (rebuilt only when the package list or versions change) and the build.
# Environment: BUILD_DIR, JOBS (default: the CPU count), TERN_CROSS_TEST_TIMEOUT (seconds per test, default 3000),
# TERN_X86_BUILD (--ci: the x86-64 build to compare with, default build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-aarch64}
mkdir -p "$build"
build=$(cd "$build" && pwd)
sysroot=$build/sysroot
jobs=${JOBS:-$(nproc)}
run_tests=0
ci=0
for arg in "$@"; do
  case $arg in
    --test) run_tests=1 ;;
    --ci) ci=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "tools/cross/aarch64.sh: unknown option '$arg' (usage: tools/cross/aarch64.sh [--test | --ci])" >&2; exit 2 ;;
  esac
done
if [ $run_tests -eq 1 ] && [ $ci -eq 1 ]; then
  echo "tools/cross/aarch64.sh: --test runs the whole CPU suite, --ci a subset of it: give one" >&2
  exit 2
fi
# The CI subset: every per-op test (the CPU cases of test_backend_ops, the op, attention-pattern, LSH, routing,
# adaptive-span and Transformer-XL op tests, the kernel-variant checks) and the golden tests of every attention
# family (reference family: dense, sliding, chunked, strided, fixed, mixed; Reformer LSH; routing; adaptive span;
# Transformer-XL; compressive), the compressed-weight kernels (NEON) with every golden in f16, int8 and int4, the
# float16 KV state's kernels, and the tokenizers (SentencePiece against libsentencepiece, tokenizer.json's pipeline,
# models and decoders against tokenizers' fixtures, the regular expressions and Unicode tables; char is unsigned
# there), and attention sinks and context shift against their PyTorch goldens.
ci_executables=(test_backend_ops test_ops test_attention test_cpu_isa test_lsh test_routing test_transfo_xl_ops
                test_adaptive_span test_models test_reformer test_transfo_xl test_compressive test_quant_kernels
                test_compressed_weights test_kv_storage test_sentencepiece test_tokenizers test_hf_pipeline test_hf_model
                test_hf_regex test_unicode test_sinks)
ci_tests='^(test_backend_ops:.* on CPU$|test_ops:|test_attention:|test_cpu_isa:|test_lsh:|test_routing:|test_transfo_xl_ops:|test_adaptive_span:|test_models:reference family: full forward|test_reformer:reformer goldens|test_transfo_xl:transfo-xl goldens|test_compressive:compressive goldens|test_quant_kernels:|test_compressed_weights:|test_kv_storage:|test_sentencepiece:|test_tokenizers:|test_hf_pipeline:|test_hf_model:|test_hf_regex:|test_unicode:|test_sinks:attention sinks and context shift match)'
# Vulkan-only test cases, left out of the runs under qemu (the others run their CPU halves).
vulkan_only='^test_vulkan_|on Vulkan$|on Vulkan matches the CPU path|Vulkan rejects'
# The subset's two longest entries under qemu are cut to what the ARM build can get wrong: the SentencePiece check
# reads 2,000 of its 10,000 lines (TERN_SENTENCEPIECE_LINES; 200 s of the subset's 360 otherwise), and the float16 KV
# golden models (130 s) are left out: their kernels' own tests stay, and the goldens' float32 logits are compared below.
ci_skip='|^test_kv_storage:float16 KV: golden models'
ci_sentencepiece_lines=2000
step() { echo "aarch64: $*"; }

# The target's packages in the sysroot: Tern's libraries (-dev and runtime; libsentencepiece for tern-convert), the C and C++ runtime that qemu
# loads the binaries with (the cross toolchain's copy is for linking), catch2 (it ships a static library too),
# and nlohmann-json (Architecture: all).
arm64_packages=(libxnnpack-dev libxnnpack0 libpthreadpool-dev libpthreadpool0 libcpuinfo-dev libcpuinfo0
                libflatbuffers-dev libflatbuffers2 libvulkan-dev libvulkan1 libsentencepiece-dev libsentencepiece0
                libc6 libgcc-s1 libstdc++6 catch2)
all_packages=(nlohmann-json3-dev)

# 1. Host packages.
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
host_packages=(crossbuild-essential-arm64 qemu-user cmake ninja-build pkg-config flatbuffers-compiler glslc python3)
missing=()
for p in "${host_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
need_update=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  step "adding the arm64 architecture to dpkg"
  $sudo dpkg --add-architecture arm64
  need_update=1
fi
apt-cache show libxnnpack-dev:arm64 >/dev/null 2>&1 || need_update=1
if [ ${#missing[@]} -gt 0 ] || [ $need_update -eq 1 ]; then
  step "apt-get update"
  $sudo apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The sysroot, keyed by the exact versions apt would download now.
wanted=$( (for p in "${arm64_packages[@]}"; do echo "$p:arm64"; done; printf '%s\n' "${all_packages[@]}") |
          xargs apt-cache policy | awk '/^[^ ]/ {p=$1} /Candidate:/ {print p, $2}')
if [ -f "$sysroot/.tern-packages" ] && [ "$(cat "$sysroot/.tern-packages")" = "$wanted" ]; then
  step "sysroot $sysroot is up to date"
else
  step "assembling the sysroot in $sysroot"
  debs=$build/sysroot-debs
  rm -rf "$sysroot" "$debs"
  mkdir -p "$sysroot" "$debs"
  # apt-get download writes into the current directory (as root it warns that _apt cannot: harmless).
  step "downloading ${#arm64_packages[@]} arm64 packages and ${#all_packages[@]} of all architectures"
  (cd "$debs" && apt-get download -q "${arm64_packages[@]/%/:arm64}" "${all_packages[@]}") >"$build/download.log" 2>&1 ||
    { cat "$build/download.log"; exit 1; }
  for deb in "$debs"/*.deb; do
    step "  unpacking $(basename "$deb")"
    dpkg -x "$deb" "$sysroot"
  done
  # dpkg -x keeps absolute links (libXNNPACK.so -> /usr/lib/aarch64-linux-gnu/...): they would point at the
  # build machine's files. Make each relative, to the same path inside the sysroot.
  find "$sysroot" -type l | while read -r link; do
    target=$(readlink "$link")
    case $target in
      /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot$target")" "$link" ;;
    esac
  done
  echo "$wanted" >"$sysroot/.tern-packages"
  rm -rf "$debs"
fi

# 3. Configure and build.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
step "configuring $build"
start=$(date +%s)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" -DTERN_SYSROOT="$sysroot" \
      "${launcher[@]}" >"$build/configure.log" || { cat "$build/configure.log"; exit 1; }
grep -E "CPU kernel variants|Vulkan backend" "$build/configure.log" | sed 's/^-- /aarch64:   /'
if [ $ci -eq 1 ]; then
  step "building tern-run and the CI subset's tests (-j$jobs)"
  cmake --build "$build" -j "$jobs" --target tern-run "${ci_executables[@]}"
else
  step "building (-j$jobs)"
  cmake --build "$build" -j "$jobs"
fi
step "built in $(( $(date +%s) - start )) s: $(file -b "$build/examples/tern-run" 2>/dev/null | cut -d, -f1-2)"

# 4. The suite (or CI's subset) under qemu.
if [ $run_tests -eq 1 ] || [ $ci -eq 1 ]; then
  select=()
  what="the CPU suite"
  skip=$vulkan_only
  lines=10000
  [ $ci -eq 1 ] && select=(-R "$ci_tests") && what="the CI subset" && skip+=$ci_skip && lines=$ci_sentencepiece_lines
  step "ctest under qemu-aarch64: $what, CPU only (-j$jobs)"
  start=$(date +%s)
  status=0
  TERN_TESTS_CPU_ONLY=1 TERN_SENTENCEPIECE_LINES=$lines ctest --test-dir "$build" -j "$jobs" "${select[@]}" -E "$skip" \
        --timeout "${TERN_CROSS_TEST_TIMEOUT:-3000}" --output-on-failure || status=$?
  step "tests ran in $(( $(date +%s) - start )) s (exit $status)"
  [ $status -eq 0 ] || exit $status
fi
if [ $ci -eq 1 ]; then
  x86_build=${TERN_X86_BUILD:-$root/build}
  step "logits of every golden and the shipped model against the x86-64 build ($x86_build)"
  start=$(date +%s)
  /usr/bin/python3 "$root/tools/cross/compare_logits.py" --x86 "$x86_build" --arm "$build"
  step "compared in $(( $(date +%s) - start )) s"
  # A library of the build machine handed to the cross build must stop the configure, naming it.
  host_xnnpack=$(ls /usr/lib/x86_64-linux-gnu/libXNNPACK.so* 2>/dev/null | head -1)
  if [ -n "$host_xnnpack" ]; then
    step "a configure given the build machine's $host_xnnpack must fail naming it"
    probe=$build/confinement-probe
    rm -rf "$probe"
    if cmake -S "$root" -B "$probe" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" \
         -DTERN_SYSROOT="$sysroot" -DXNNPACK_LIBRARY="$host_xnnpack" >"$build/confinement.log" 2>&1; then
      echo "aarch64: the configure accepted $host_xnnpack" >&2
      exit 1
    fi
    grep -q "XNNPACK: found $host_xnnpack" "$build/confinement.log" ||
      { cat "$build/confinement.log"; echo "aarch64: the configure failed without naming $host_xnnpack" >&2; exit 1; }
    grep -m1 "XNNPACK: found" "$build/confinement.log" | sed 's/^/aarch64:   /'
    rm -rf "$probe"
  fi
fi
