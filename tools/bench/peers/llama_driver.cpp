// SPDX-License-Identifier: MIT
// Side-by-side driver for llama.cpp (tools/bench/peers/run.py, vulkan.py), linked against the prebuilt CPU libraries
// that the npm package node-llama-cpp ships (or its Vulkan ones, @node-llama-cpp/linux-x64-vulkan), with llama.h from
// the llama.cpp sources it ships. One llama_decode of the whole
// prompt (n_batch = n_ubatch = n, logits at every position), the first run and WARM more, KV cache cleared before
// each; logits of the last run written as float32 [n, vocab].
// Usage: peer_llama MODEL.gguf IDS.i32 N THREADS WARM LOGITS.f32 FA(0|1) BACKEND_DIR [DEPTH]
// With DEPTH (generation, as llama-bench's tg<N>@d<DEPTH>): each run clears the cache, decodes the first DEPTH ids in
// one batch without logits (untimed), then times N decodes of one id each; the logits are those of the N steps.
// Context defaults otherwise (F16 K/V cache, mmap'd F32 weights). Prints one JSON line; the caller measures peak RSS.
// PEER_LLAMA_GPU=1 in the environment: every layer offloaded (n_gpu_layers = all) to the GPU device the backend
// directory provides (ggml-vulkan: GGML_VK_VISIBLE_DEVICES picks it; a CPU-type device such as lavapipe is used only
// when named there). The driver refuses to report (exit 3) unless llama.cpp says it uses a GPU device and offloaded
// every layer, and prints the device in its JSON line ("device"), so that a CPU fallback is never reported as GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// llama.cpp's own words on where the model went (PEER_LLAMA_GPU): "using device NAME (DESCRIPTION) ..." and
// "offloaded A/B layers to GPU" (llama.cpp's src/llama.cpp and src/llama-model.cpp).
static std::string g_device_line, g_offload_line;

static std::string after(const char* text, const char* marker) {
  const char* at = std::strstr(text, marker);
  if (!at) return "";
  std::string rest(at + std::strlen(marker));
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.pop_back();
  return rest;
}

static void quiet(ggml_log_level level, const char* text, void*) {
  if (g_device_line.empty()) g_device_line = after(text, "using device ");
  if (g_offload_line.empty()) g_offload_line = after(text, "offloaded ");
  if (level >= GGML_LOG_LEVEL_WARN || std::getenv("PEER_LLAMA_VERBOSE")) std::fputs(text, stderr);
}

static std::string json_string(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc != 9 && argc != 10) {
    std::fprintf(stderr, "usage: peer_llama MODEL.gguf IDS.i32 N THREADS WARM LOGITS.f32 FA BACKEND_DIR [DEPTH]\n");
    return 2;
  }
  const int n = std::atoi(argv[3]), threads = std::atoi(argv[4]), warm = std::atoi(argv[5]);
  const bool fa = std::atoi(argv[7]) != 0;
  const bool decode = argc == 10;
  const int depth = decode ? std::atoi(argv[9]) : 0;
  const int total = depth + n;
  std::vector<int32_t> ids(static_cast<size_t>(total));
  FILE* f = std::fopen(argv[2], "rb");
  if (!f || std::fread(ids.data(), sizeof(int32_t), size_t(total), f) != size_t(total)) return 1;
  std::fclose(f);

  llama_log_set(quiet, nullptr);
  const double t0 = now_ms();
  ggml_backend_load_all_from_path(argv[8]);  // the package's CPU variants; the best one for this CPU is picked
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  const char* gpu_env = std::getenv("PEER_LLAMA_GPU");
  const bool gpu = gpu_env && std::atoi(gpu_env) != 0;
  mp.n_gpu_layers = gpu ? 100000 : 0;  // all: more than any model has
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "peer_llama: cannot load %s\n", argv[1]);
    return 1;
  }
  std::string device = "CPU";
  if (gpu) {
    // "A/B layers to GPU": every layer offloaded when A == B.
    int offloaded = -1, layers = -2;
    if (g_device_line.empty() || std::sscanf(g_offload_line.c_str(), "%d/%d", &offloaded, &layers) != 2 ||
        offloaded != layers) {
      std::fprintf(stderr, "peer_llama: llama.cpp did not offload every layer to a GPU device (device: '%s', "
                   "offloaded: '%s'); refusing to report a CPU run as a GPU one\n", g_device_line.c_str(),
                   g_offload_line.c_str());
      return 3;
    }
    device = g_device_line.substr(0, g_device_line.find(" - "));  // "Vulkan0 (llvmpipe (...)) (...)"
  }
  llama_context_params cp = llama_context_default_params();
  const int batch_size = decode ? (depth > 0 ? depth : 1) : n;
  cp.n_ctx = uint32_t(total);
  cp.n_batch = uint32_t(batch_size);
  cp.n_ubatch = uint32_t(batch_size);
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "peer_llama: cannot create a context of %d tokens\n", n);
    return 1;
  }
  const double t1 = now_ms();
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_batch batch = llama_batch_init(batch_size, 0, 1);
  // ids [first, first + count) at their positions, logits at every one of them or at none
  auto fill = [&](int first, int count, bool logits) {
    batch.n_tokens = count;
    for (int i = 0; i < count; ++i) {
      batch.token[i] = ids[size_t(first + i)];
      batch.pos[i] = first + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = logits ? 1 : 0;
    }
  };
  auto run = [&]() {
    const int rc = llama_decode(ctx, batch);
    llama_synchronize(ctx);
    if (rc != 0) {
      std::fprintf(stderr, "peer_llama: llama_decode returned %d\n", rc);
      std::exit(1);
    }
  };
  std::vector<float> out(size_t(n) * size_t(vocab));
  std::vector<double> times;
  for (int r = 0; r <= warm; ++r) {
    llama_memory_clear(llama_get_memory(ctx), true);
    if (!decode) {
      fill(0, n, true);
      const double a = now_ms();
      run();
      times.push_back(now_ms() - a);
      std::copy(llama_get_logits(ctx), llama_get_logits(ctx) + out.size(), out.begin());
      continue;
    }
    if (depth > 0) {
      fill(0, depth, false);
      run();
    }
    const double a = now_ms();
    for (int k = 0; k < n; ++k) {
      fill(depth + k, 1, true);
      run();
      const float* step = llama_get_logits_ith(ctx, 0);
      std::copy(step, step + vocab, out.begin() + size_t(k) * size_t(vocab));
    }
    times.push_back(now_ms() - a);
  }
  FILE* o = std::fopen(argv[6], "wb");
  if (!o || std::fwrite(out.data(), sizeof(float), out.size(), o) != out.size()) return 1;
  std::fclose(o);
  std::printf("{\"load_ms\": %.3f, \"first_ms\": %.3f, \"warm_ms\": [", t1 - t0, times[0]);
  for (size_t i = 1; i < times.size(); ++i) std::printf("%s%.3f", i > 1 ? ", " : "", times[i]);
  std::printf("], \"flash_attn\": %s, \"device\": \"%s\", \"offloaded\": \"%s\"}\n", fa ? "true" : "false",
              json_string(device).c_str(), json_string(g_offload_line).c_str());
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
