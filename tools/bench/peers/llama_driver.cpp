// Side-by-side driver for llama.cpp (tools/bench/peers/run.py), linked against the prebuilt CPU libraries that the
// npm package node-llama-cpp ships, with llama.h from the llama.cpp sources it ships. One llama_decode of the whole
// prompt (n_batch = n_ubatch = n, logits at every position), the first run and WARM more, KV cache cleared before
// each; logits of the last run written as float32 [n, vocab].
// Usage: peer_llama MODEL.gguf IDS.i32 N THREADS WARM LOGITS.f32 FA(0|1) BACKEND_DIR
// Context defaults otherwise (F16 K/V cache, mmap'd F32 weights). Prints one JSON line; the caller measures peak RSS.
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
  if (argc != 9) {
    std::fprintf(stderr, "usage: peer_llama MODEL.gguf IDS.i32 N THREADS WARM LOGITS.f32 FA BACKEND_DIR\n");
    return 2;
  }
  const int n = std::atoi(argv[3]), threads = std::atoi(argv[4]), warm = std::atoi(argv[5]);
  const bool fa = std::atoi(argv[7]) != 0;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  FILE* f = std::fopen(argv[2], "rb");
  if (!f || std::fread(ids.data(), sizeof(int32_t), size_t(n), f) != size_t(n)) return 1;
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
  cp.n_ctx = uint32_t(n);
  cp.n_batch = uint32_t(n);
  cp.n_ubatch = uint32_t(n);
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
  llama_batch batch = llama_batch_init(n, 0, 1);
  batch.n_tokens = n;
  for (int i = 0; i < n; ++i) {
    batch.token[i] = ids[size_t(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  std::vector<double> times;
  for (int r = 0; r <= warm; ++r) {
    llama_memory_clear(llama_get_memory(ctx), true);
    const double a = now_ms();
    const int rc = llama_decode(ctx, batch);
    llama_synchronize(ctx);
    times.push_back(now_ms() - a);
    if (rc != 0) {
      std::fprintf(stderr, "peer_llama: llama_decode returned %d\n", rc);
      return 1;
    }
  }
  const float* logits = llama_get_logits(ctx);
  FILE* o = std::fopen(argv[6], "wb");
  if (!o || std::fwrite(logits, sizeof(float), size_t(n) * size_t(vocab), o) != size_t(n) * size_t(vocab)) return 1;
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
