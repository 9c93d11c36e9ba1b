// SPDX-License-Identifier: MIT
// Side-by-side driver for llama.cpp (tools/bench/peers/run.py), linked against the prebuilt CPU libraries that the
// npm package node-llama-cpp ships, with llama.h from the llama.cpp sources it ships. One llama_decode of the whole
// prompt (n_batch = n_ubatch = n, logits at every position), the first run and WARM more, KV cache cleared before
// each; logits of the last run written as float32 [n, vocab].
// Usage: peer_llama MODEL.gguf IDS.i32 N THREADS WARM LOGITS.f32 FA(0|1) BACKEND_DIR [DEPTH]
// With DEPTH (generation, as llama-bench's tg<N>@d<DEPTH>): each run clears the cache, decodes the first DEPTH ids in
// one batch without logits (untimed), then times N decodes of one id each; the logits are those of the N steps.
// Context defaults otherwise (F16 K/V cache, mmap'd F32 weights). Prints one JSON line; the caller measures peak RSS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void quiet(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_WARN || std::getenv("PEER_LLAMA_VERBOSE")) std::fputs(text, stderr);
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
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "peer_llama: cannot load %s\n", argv[1]);
    return 1;
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
  std::printf("], \"flash_attn\": %s}\n", fa ? "true" : "false");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
