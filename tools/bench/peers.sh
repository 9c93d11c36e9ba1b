#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Tern side by side with ONNX Runtime, llama.cpp (with and without flash attention) and PyTorch eager, on the same
# random-init weights of two models, on this machine: the GPT-2-like model, and a Llama-architecture one (d 768,
# 12 layers, grouped-query attention 12:3, SwiGLU, RoPE, vocab 32000; about 123 M parameters), which Tern reads
# through its Hugging Face Llama importer and llama.cpp as a `llama` GGUF. From a clean checkout, as root (or sudo):
#
#   tools/bench/peers.sh [--quick] [--model gpt2|llama|both] [--json FILE] [--chart FILE]
#                        [--json-llama FILE] [--chart-llama FILE] [--vulkan [--json-vulkan FILE]]
#
# 1. installs what is missing: Tern's build dependencies (tools/install-deps.sh), then Debian's python3-torch,
#    python3-numpy, python3-matplotlib, libopenblas0-pthread, time (GNU time, which measures each run's own peak
#    RSS), and nodejs, npm, git unless present. Installing OpenBLAS makes Debian point the system's libblas.so.3 at
#    it; the script puts the BLAS alternatives back as it found them and hands OpenBLAS to PyTorch through
#    LD_LIBRARY_PATH only (the driver reports the BLAS it mapped).
# 2. builds Tern (build/: tern-convert, peer_tern, linear_bench);
# 3. installs npm onnxruntime-node@1.30.0 and node-llama-cpp (+ its prebuilt linux-x64 CPU libraries) into
#    $TERN_PEERS_WORK/npm (default /tmp/tern-peers), with --ignore-scripts: nothing is downloaded or built by
#    their install scripts;
# 4. unpacks the llama.cpp sources that node-llama-cpp ships (a git bundle) for llama.h and gguf-py, and compiles
#    tools/bench/peers/llama_driver.cpp against the package's libllama / libggml;
# 5. makes the models (tools/bench/peers/make_model.py, fixed seed; --arch llama for the second): safetensors ->
#    .tern (tern-convert; the dense model also with --weights f16, int8 and int4), ONNX (torch.onnx.export), GGUF
#    F32, F16, Q8_0 and Q4_0 (gguf-py, the tensor types llama-quantize would pick);
# 6. runs tools/bench/peers/run.py: each runtime, n and thread count in its own process (prefill: one forward of n
#    tokens; generation: tg128@d0, d512, d2048 for Tern (float32 and F16 KV state) and llama.cpp with and without
#    flash attention; compressed weights: Tern f16 / int8 / int4 (float32 and F16 KV state) against llama.cpp
#    F16 / Q8_0 / Q4_0 with and without flash attention (its default F16 cache; ratios against the faster) and both
#    float32 files, pp512, tg128@d0 and @d512:
#    file size, peak RSS, speed and the logits' error against each runtime's float32 run and Tern's); prints
#    markdown tables and writes the JSON; then draws the chart (tools/bench/peers/chart.py). The Llama model runs
#    n in {512, 2048}, generation at d0, d2048 and d8192, the compressed phase and the linear layers, without
#    PyTorch (its driver runs the GPT-2-like reference) and without a windowed twin; JSON and chart beside the
#    first model's (peers-llama.json, peers-llama.png); its compressed phase generates at d0, d2048 and d8192.
#    Generation after 8192 tokens runs on 1 thread with one warm run, as prefill at n = 8192 (each run fills the
#    cache again). Below d 8192, generation and the compressed phase run in two rounds (run.py --rounds): every
#    runtime's process once per round, the runtimes alternated, each keeping its fastest round's median, so that a
#    slow spell of a shared machine that falls on one runtime's process does not decide a ratio.
#
# The full run: n in {512, 2048} on 1 and 2 threads with three warm runs, n = 8192 on 1 thread with one warm run,
# Tern's windowed model at n in {8192, 16384, 32768}, then generation and the compressed-weights phase: 12.5 min on
# the 2-core VM when quiet, 55 min when shared with other builds (most of it at n = 8192). --quick: n in
# {512, 2048}, two warm runs, windowed n up to 8192.
#
# --vulkan: instead of the CPU phases, the Vulkan phase on the GPT-2-like model (tools/bench/peers/vulkan.py): Tern
# --backend vulkan (tern_driver.cpp, TERN_PEER_BACKEND=vulkan) against llama.cpp's prebuilt Vulkan backend (npm
# @node-llama-cpp/linux-x64-vulkan at node-llama-cpp's version, installed as the CPU package is; its own driver
# build, peer_llama_vulkan), every layer offloaded, with and without flash attention, on the same device (the first
# of the Vulkan loader's list unless TERN_PEERS_VK_DEVICE says otherwise: GGML_VK_VISIBLE_DEVICES for llama.cpp,
# which otherwise skips a CPU device such as lavapipe; Tern takes the best device, so name the same one), F32
# weights then F16 (llama.cpp's F16 GGUF against Tern's --f16-weights), pp512, tg128@d0 and tg128@d512, each
# result's logits against Tern's CPU float32 run; each driver prints its device, and a llama.cpp run that did not
# offload every layer to a GPU device is refused, never reported. One warm run after the first for both (llama.cpp's
# first run builds its pipelines; Tern builds them at session creation, but one run of Tern alone swung by 2.8x on
# lavapipe). Not part of the default run: on Mesa lavapipe on the quiet 2-core VM it takes about 5 min (66 min beside
# other builds with the shaders of before, when Tern generated 0.2 tokens/s).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
work=${TERN_PEERS_WORK:-/tmp/tern-peers}
json=$work/peers.json
chart=$work/peers.png
json_llama=$work/peers-llama.json
chart_llama=$work/peers-llama.png
json_vulkan=$work/peers-vulkan.json
quick=0
which=both
vulkan=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --model) which=$2; shift
      case "$which" in gpt2|llama|both) ;; *) echo "peers.sh: --model $which: expected gpt2, llama or both" >&2; exit 2 ;; esac ;;
    --json) json=$2; shift ;;
    --chart) chart=$2; shift ;;
    --json-llama) json_llama=$2; shift ;;
    --chart-llama) chart_llama=$2; shift ;;
    --vulkan) vulkan=1 ;;
    --json-vulkan) json_vulkan=$2; shift ;;
    -h|--help) sed -n 2,52p "$0"; exit 0 ;;
    *) echo "peers.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$work"
say() { echo "== $*" >&2; }

# ---- 1. Debian packages
bash tools/install-deps.sh
packages=(python3-torch python3-numpy python3-matplotlib libopenblas0-pthread time)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node, npm and git: any installation will do (a NodeSource nodejs brings its own npm and conflicts with Debian's)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v git >/dev/null || missing+=(git)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  saved=()
  for alt in libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu; do
    cur=$(update-alternatives --query "$alt" 2>/dev/null | sed -n 's/^Value: //p' || true)
    [ -n "$cur" ] && saved+=("$alt=$cur")
  done
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for s in "${saved[@]}"; do $sudo update-alternatives --set "${s%%=*}" "${s#*=}" >/dev/null; done
fi
openblas_dir=/usr/lib/x86_64-linux-gnu/openblas-pthread

# ---- 2. Tern
say "building Tern"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tern-convert peer_tern linear_bench >/dev/null

# ---- 3. npm packages (never in the repository)
npm_dir=$work/npm
nlc_version=3.22.1
if [ ! -d "$npm_dir/node_modules/onnxruntime-node" ] || [ ! -d "$npm_dir/node_modules/@node-llama-cpp/linux-x64" ]; then
  say "npm: onnxruntime-node@1.30.0, node-llama-cpp@$nlc_version into $npm_dir"
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && [ -f package.json ] || echo '{"name": "tern-peers", "private": true}' > "$npm_dir/package.json")
  (cd "$npm_dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts --omit=optional --no-audit --no-fund \
    onnxruntime-node@1.30.0 "node-llama-cpp@$nlc_version" "@node-llama-cpp/linux-x64@$nlc_version" >&2)
fi
llama_bins=$npm_dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
llama_vulkan_bins=$npm_dir/node_modules/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan
if [ "$vulkan" = 1 ] && [ ! -d "$llama_vulkan_bins" ]; then
  say "npm: @node-llama-cpp/linux-x64-vulkan@$nlc_version into $npm_dir"
  (cd "$npm_dir" && npm install --ignore-scripts --omit=optional --no-audit --no-fund \
    "@node-llama-cpp/linux-x64-vulkan@$nlc_version" >&2)
fi

# ---- 4. llama.cpp sources (llama.h, gguf-py) and the driver
llama_src=$work/llama.cpp
if [ ! -f "$llama_src/include/llama.h" ]; then
  say "unpacking the llama.cpp sources shipped in node-llama-cpp"
  rm -rf "$llama_src"
  git -c advice.detachedHead=false clone -q "$npm_dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$llama_src"
fi
peer_llama=$work/peer_llama
if [ ! -x "$peer_llama" ] || [ tools/bench/peers/llama_driver.cpp -nt "$peer_llama" ]; then
  say "compiling the llama.cpp driver"
  g++ -O2 -std=c++17 -o "$peer_llama" tools/bench/peers/llama_driver.cpp -I"$llama_src/include" \
    -I"$llama_src/ggml/include" -L"$llama_bins" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
    -Wl,-rpath,"$llama_bins"
fi
peer_llama_vulkan=$work/peer_llama_vulkan
if [ "$vulkan" = 1 ] && { [ ! -x "$peer_llama_vulkan" ] || [ tools/bench/peers/llama_driver.cpp -nt "$peer_llama_vulkan" ]; }; then
  say "compiling the llama.cpp driver against its Vulkan libraries"
  g++ -O2 -std=c++17 -o "$peer_llama_vulkan" tools/bench/peers/llama_driver.cpp -I"$llama_src/include" \
    -I"$llama_src/ggml/include" -L"$llama_vulkan_bins" -l:libllama.vulkan.v0.5.0.so -l:libggml.vulkan.v0.5.0.so \
    -l:libggml-base.so -Wl,-rpath,"$llama_vulkan_bins"
fi

# ---- 5. models, 6. runs: the GPT-2-like model (models/) and the Llama-architecture one (models-llama/)
ids=$work/ids.i32
/usr/bin/python3 -c "import numpy as np; np.random.default_rng(7).integers(0, 256, 65536).astype(np.int32).tofile('$ids')"
ids_llama=$work/ids-llama.i32
/usr/bin/python3 -c "import numpy as np; np.random.default_rng(7).integers(0, 32000, 65536).astype(np.int32).tofile('$ids_llama')"

# make_models DIR ARCH: make_model.py's files (when missing or older than the scripts), then Tern's conversions
make_models() {
  local models=$1 arch=$2
  if [ ! -f "$models/dense-q4_0.gguf" ] || [ tools/bench/peers/make_model.py -nt "$models/dense-q4_0.gguf" ] ||
     [ tools/bench/peers/llama_model.py -nt "$models/dense-q4_0.gguf" ]; then
    say "making the $arch models"
    /usr/bin/python3 tools/bench/peers/make_model.py --arch "$arch" --out "$models" --gguf-py "$llama_src/gguf-py" \
      2>/dev/null >&2
  fi
  local m w
  for m in dense windowed; do
    [ -d "$models/$m" ] || continue
    [ "$models/$m.tern" -nt "$models/$m/model.safetensors" ] ||
      build/converter/tern-convert "$models/$m" -o "$models/$m.tern" --quiet
  done
  for w in f16 int8 int4; do  # the compressed-weights phase: Tern's f16 / int8 / int4 against llama.cpp's F16 / Q8_0 / Q4_0
    [ "$models/dense-$w.tern" -nt "$models/dense/model.safetensors" ] ||
      build/converter/tern-convert "$models/dense" -o "$models/dense-$w.tern" --weights "$w" --quiet
  done
}

# run_models DIR IDS JSON CHART [run.py arguments]
run_models() {
  local models=$1 model_ids=$2 out_json=$3 out_chart=$4
  shift 4
  /usr/bin/python3 tools/bench/peers/run.py --models "$models" --ids "$model_ids" --build "$root/build" \
    --node-modules "$npm_dir/node_modules" --peer-llama "$peer_llama" --llama-bins "$llama_bins" \
    --openblas-dir "$openblas_dir" --json "$out_json" --tmp "$work" "$@"
  /usr/bin/python3 tools/bench/peers/chart.py "$out_json" "$out_chart"
}

if [ "$vulkan" = 1 ]; then
  make_models "$work/models" gpt2
  say "GPT-2-like model on Vulkan: running (progress on stderr, tables on stdout)"
  /usr/bin/python3 tools/bench/peers/vulkan.py --models "$work/models" --ids "$ids" \
    --peer-tern "$root/build/tools/bench/peer_tern" --peer-llama "$peer_llama_vulkan" \
    --llama-bins "$llama_vulkan_bins" --vk-device "${TERN_PEERS_VK_DEVICE:-0}" --json "$json_vulkan" --tmp "$work" \
    --warm 1
  echo
  echo "GPT-2-like model on Vulkan: JSON $json_vulkan"
  exit 0
fi

args=()
if [ "$quick" = 1 ]; then args=(--ns 512,2048 --warm 2 --decode-warm 2 --windowed-ns 2048,4096,8192); fi
if [ "$which" != llama ]; then
  make_models "$work/models" gpt2
  say "GPT-2-like model: running (progress on stderr, tables on stdout)"
  run_models "$work/models" "$ids" "$json" "$chart" "${args[@]}"
fi
if [ "$which" != gpt2 ]; then
  make_models "$work/models-llama" llama
  # No PyTorch eager (its driver runs tools/reference/model.py, the GPT-2-like family) and no windowed twin; the
  # generation depths up to 8192.
  llama_args=(--ns 512,2048 --decode-depths 0,2048,8192 --quant-depths 0,2048,8192 --phases dense,decode,quant,linear
              --runtimes tern,ort,llama-fa,llama)
  [ "$quick" = 1 ] && llama_args+=(--warm 2 --decode-warm 2 --decode-depths 0,2048 --quant-depths 0,2048)
  say "Llama-architecture model: running (progress on stderr, tables on stdout)"
  run_models "$work/models-llama" "$ids_llama" "$json_llama" "$chart_llama" "${llama_args[@]}"
fi
echo
if [ "$which" != llama ]; then echo "GPT-2-like model: JSON $json   chart $chart"; fi
if [ "$which" != gpt2 ]; then echo "Llama-architecture model: JSON $json_llama   chart $chart_llama"; fi
