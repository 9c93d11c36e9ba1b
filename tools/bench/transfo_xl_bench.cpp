// SPDX-License-Identifier: MIT
// Streams a converted Transformer-XL model segment by segment through its memory and prints tokens/s and the
// process's peak resident memory after each stage: it must stay flat after the first segment (the state is
// mem_len x d_model per layer, the arena one segment). A benchmark that prints numbers, not a test.
//
//   build/tools/bench/transfo_xl_bench MODEL.tern [--segments 100] [--segment 128] [--threads N] [--seed S]
//
// tools/bench/transfo_xl_wt103.sh makes a random-init model with transfo-xl-wt103's config, converts it and runs this.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cli.h"
#include "tern/tern.h"

namespace {

// Resident set now (VmRSS), in bytes; 0 where /proc is missing.
uint64_t current_rss() {
  std::ifstream f("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

std::string mib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  tern::cli::Args args(argc, argv, {"--segments", "--segment", "--threads", "--seed"}, {"-h", "--help"});
  if (args.has("-h") || args.has("--help") || args.positional().size() != 1) {
    std::fprintf(stderr, "usage: transfo_xl_bench MODEL.tern [--segments 100] [--segment 128] [--threads N] [--seed S]\n");
    return args.has("-h") || args.has("--help") ? 0 : 2;
  }
  const int64_t segments = args.get_int("--segments", 100, 1, 1 << 20);
  const int64_t T = args.get_int("--segment", 128, 1, 1 << 20);
  const int64_t threads = args.get_int("--threads", 0, 0, 1024);
  const int64_t seed = args.get_int("--seed", 1, 0, INT64_MAX);
  if (!args.ok()) {
    std::fprintf(stderr, "transfo_xl_bench: %s\n", args.error().c_str());
    return 2;
  }
  tern::cli::Timer load_timer;
  tern_model* model = nullptr;
  if (tern_model_load(args.positional()[0].c_str(), &model) != TERN_OK) {
    std::fprintf(stderr, "transfo_xl_bench: %s\n", tern_last_error());
    return 1;
  }
  tern_model_info info{};
  tern_model_get_info(model, &info);
  const double load_s = load_timer.seconds();
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = int(threads);
  so.max_tokens = segments * T;  // the stream; the state does not depend on it
  so.max_batch = T;
  tern::cli::Timer create_timer;
  tern_session* s = nullptr;
  if (tern_session_create(model, &so, &s) != TERN_OK) {
    std::fprintf(stderr, "transfo_xl_bench: %s\n", tern_last_error());
    return 1;
  }
  const double create_s = create_timer.seconds();
  tern_memory_plan plan2{}, plan_all{}, mem{};
  tern_session_plan(s, 2 * T, &plan2);
  tern_session_plan(s, segments * T, &plan_all);
  tern_session_memory(s, &mem);
  std::printf("model: %s\n  %s\n  vocab %lld, %lld ops, %s of weights (mapped)\n", args.positional()[0].c_str(),
              info.description, static_cast<long long>(info.vocab_size), static_cast<long long>(info.n_ops),
              mib(mem.weight_bytes).c_str());
  std::printf("load %.3f s, session %.3f s (packs weights, precomputes r_net . pe); %lld segments of %lld tokens\n",
              load_s, create_s, static_cast<long long>(segments), static_cast<long long>(T));
  std::printf("planner: state %s after 2 segments, %s after %lld; allocated: state %s, arena %s, packed %s\n",
              mib(plan2.state_bytes).c_str(), mib(plan_all.state_bytes).c_str(), static_cast<long long>(segments),
              mib(mem.state_bytes).c_str(), mib(mem.arena_bytes).c_str(), mib(mem.packed_weight_bytes).c_str());

  const int64_t V = info.vocab_size;
  std::vector<float> log_probs(size_t(T * V));
  std::vector<int32_t> ids(static_cast<size_t>(T));
  std::mt19937_64 rng{uint64_t(seed)};
  double first_s = 0, rest_s = 0;
  uint64_t peak_after_first = 0;
  std::printf("%8s %10s %12s %14s %14s\n", "segment", "seconds", "tokens/s", "peak RSS", "RSS now");
  for (int64_t k = 0; k < segments; ++k) {
    for (auto& id : ids) id = int32_t(rng() % uint64_t(V));
    tern::cli::Timer t;
    if (tern_session_append(s, ids.data(), T, log_probs.data()) != TERN_OK) {
      std::fprintf(stderr, "transfo_xl_bench: segment %lld: %s\n", static_cast<long long>(k), tern_session_last_error(s));
      return 1;
    }
    const double sec = t.seconds();
    (k == 0 ? first_s : rest_s) += sec;
    if (k == 0) peak_after_first = tern::cli::peak_rss_bytes();
    if (k < 3 || (k + 1) % 10 == 0 || k + 1 == segments) {
      std::printf("%8lld %10.3f %12.1f %14s %14s\n", static_cast<long long>(k + 1), sec, double(T) / sec,
                  mib(tern::cli::peak_rss_bytes()).c_str(), mib(current_rss()).c_str());
      std::fflush(stdout);
    }
  }
  double total = 0;  // the last row is a distribution
  for (int64_t v = 0; v < V; ++v) total += std::exp(double(log_probs[size_t((T - 1) * V + v)]));
  tern_memory_plan after{};
  tern_session_memory(s, &after);
  const uint64_t peak_end = tern::cli::peak_rss_bytes();
  std::printf("\nfirst segment: %.3f s (%.1f tokens/s); segments 2..%lld: %.1f tokens/s; all: %.1f tokens/s\n", first_s,
              double(T) / first_s, static_cast<long long>(segments),
              segments > 1 ? double((segments - 1) * T) / rest_s : 0.0, double(segments * T) / (first_s + rest_s));
  std::printf("peak RSS: %s after the first segment, %s after %lld (growth %s); state %s before and %s after\n",
              mib(peak_after_first).c_str(), mib(peak_end).c_str(), static_cast<long long>(segments),
              mib(peak_end - peak_after_first).c_str(), mib(mem.state_bytes).c_str(), mib(after.state_bytes).c_str());
  std::printf("last row: sum of probabilities %.6f\n", total);
  tern_session_free(s);
  tern_model_free(model);
  return 0;
}
