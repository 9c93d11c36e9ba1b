// SPDX-License-Identifier: MIT
// Side-by-side driver for Tern (tools/bench/peers/run.py): one forward of N ids, the first run and WARM more, and the
// logits of the last run. Usage: peer_tern MODEL.tern IDS.i32 N THREADS WARM LOGITS.f32 [DEPTH]
// With DEPTH (generation, as llama-bench's tg<N>@d<DEPTH>): each run resets, appends the first DEPTH ids in one call
// (untimed), then times N appends of one id each; the logits are those of the N steps [N, vocab].
// Prints one JSON line: load + session creation, first run, warm runs (ms). The caller measures peak RSS.
// TERN_PEER_KV=f16 in the environment: the session keeps its KV state as float16 (kv_storage F16, as llama.cpp's
// default cache); otherwise float32. TERN_PEER_BACKEND=vulkan: the session runs on the Vulkan device (the best one, as
// tern-bench --backend vulkan; a CPU implementation such as lavapipe counts when it is the only one), and
// TERN_PEER_WEIGHTS=f16 stores its LINEAR weights and EMBEDDING tables as float16 (tern-bench --f16-weights).
// The JSON line names where the session ran: "backend", "device", "driver" (tern_session_get_backend).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tern/tern.h"

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A name as the inside of a JSON string: quotes and backslashes escaped, control characters dropped.
static std::string json_text(const char* text) {
  std::string out;
  for (const char* c = text ? text : ""; *c; ++c) {
    if (*c == '"' || *c == '\\') out += '\\';
    if (static_cast<unsigned char>(*c) >= 0x20) out += *c;
  }
  return out;
}

// An environment switch between two settings: 0 when unset, empty or `off`, 1 when `on`, -1 (after a message)
// for anything else.
static int env_switch(const char* name, const char* off, const char* on) {
  const char* value = std::getenv(name);
  if (!value || !*value || std::string(value) == off) return 0;
  if (std::string(value) == on) return 1;
  std::fprintf(stderr, "peer_tern: %s=%s: expected %s or %s\n", name, value, on, off);
  return -1;
}

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: peer_tern MODEL.tern IDS.i32 N THREADS WARM LOGITS.f32 [DEPTH]\n");
    return 2;
  }
  const long n = std::atol(argv[3]);
  const int threads = std::atoi(argv[4]), warm = std::atoi(argv[5]);
  const bool decode = argc == 8;
  const long depth = decode ? std::atol(argv[7]) : 0;
  const long total = depth + n;
  std::vector<int32_t> ids(size_t(total > 0 ? total : 1));
  FILE* f = std::fopen(argv[2], "rb");
  if (!f || std::fread(ids.data(), sizeof(int32_t), size_t(total), f) != size_t(total)) {
    std::fprintf(stderr, "peer_tern: cannot read %ld ids from %s\n", total, argv[2]);
    return 1;
  }
  std::fclose(f);
  const double t0 = now_ms();
  tern_model* model = nullptr;
  if (tern_model_load(argv[1], &model) != TERN_OK) {
    std::fprintf(stderr, "peer_tern: %s\n", tern_last_error());
    return 1;
  }
  tern_session_options opt;
  tern_session_options_init(&opt);
  opt.threads = threads;
  opt.max_tokens = total;  // size the arena and state for this n, as the peers size theirs
  opt.max_batch = decode ? (depth > 0 ? depth : 1) : n;
  const int f16_kv = env_switch("TERN_PEER_KV", "f32", "f16");
  const int vulkan = env_switch("TERN_PEER_BACKEND", "cpu", "vulkan");
  const int f16_weights = env_switch("TERN_PEER_WEIGHTS", "f32", "f16");
  if (f16_kv < 0 || vulkan < 0 || f16_weights < 0) return 2;
  if (f16_kv) opt.kv_storage = TERN_KV_STORAGE_F16;
  if (vulkan) opt.backend = TERN_BACKEND_VULKAN;
  opt.weight_storage = f16_weights ? TERN_WEIGHT_STORAGE_F16 : TERN_WEIGHT_STORAGE_F32;  // never the default AUTO
  tern_session* s = nullptr;
  if (tern_session_create(model, &opt, &s) != TERN_OK) {
    std::fprintf(stderr, "peer_tern: %s\n", tern_last_error());
    return 1;
  }
  const double t1 = now_ms();
  const size_t vocab = size_t(tern_session_vocab_size(s));
  std::vector<float> logits(size_t(n) * vocab);
  std::vector<double> times;
  for (int r = 0; r <= warm; ++r) {
    bool ok = true;
    double a = now_ms();
    if (!decode) {
      ok = tern_session_forward(s, ids.data(), n, logits.data()) == TERN_OK;
    } else {
      tern_session_reset(s);
      if (depth > 0) ok = tern_session_append(s, ids.data(), depth, nullptr) == TERN_OK;
      a = now_ms();
      for (long k = 0; k < n && ok; ++k) {
        ok = tern_session_append(s, ids.data() + depth + k, 1, logits.data() + size_t(k) * vocab) == TERN_OK;
      }
    }
    if (!ok) {
      std::fprintf(stderr, "peer_tern: %s\n", tern_session_last_error(s));
      return 1;
    }
    times.push_back(now_ms() - a);
  }
  FILE* o = std::fopen(argv[6], "wb");
  if (!o || std::fwrite(logits.data(), sizeof(float), logits.size(), o) != logits.size()) return 1;
  std::fclose(o);
  std::printf("{\"load_ms\": %.3f, \"first_ms\": %.3f, \"warm_ms\": [", t1 - t0, times[0]);
  for (size_t i = 1; i < times.size(); ++i) std::printf("%s%.3f", i > 1 ? ", " : "", times[i]);
  tern_backend_info where{};
  tern_session_get_backend(s, &where);
  std::printf("], \"backend\": \"%s\", \"device\": \"%s\", \"driver\": \"%s\"}\n",
              where.backend == TERN_BACKEND_VULKAN ? "vulkan" : "cpu", json_text(where.device_name).c_str(),
              json_text(where.driver).c_str());
  tern_session_free(s);
  tern_model_free(model);
  return 0;
}
