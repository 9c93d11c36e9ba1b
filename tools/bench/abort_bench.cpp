// SPDX-License-Identifier: MIT
// How long a long forward takes to return after the app asks it to stop (tern_session_set_callbacks): one
// tern_session_forward of --tokens ids, a second thread raising the abort flag --after-ms milliseconds into it, the
// time from the flag to the call's return measured --repeat times (docs/generation.md, "Abort and progress").
//   abort_bench MODEL.tern [--tokens 100000] [--after-ms 500] [--repeat 5] [--threads 0] [--backend cpu|vulkan]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "tern/tern.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Abort {
  std::atomic<bool> requested{false};
  std::atomic<int64_t> rows_done{0};
};

int aborted(void* user) { return static_cast<Abort*>(user)->requested.load(std::memory_order_relaxed) ? 1 : 0; }

void progress(int64_t done, int64_t /*total*/, void* user) {
  static_cast<Abort*>(user)->rows_done.store(done, std::memory_order_relaxed);
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  tern::cli::Args args(argc, argv, {"--tokens", "--after-ms", "--repeat", "--threads", "--backend"}, {"-h", "--help"});
  if (!args.ok() || args.positional().size() != 1 || args.has("-h") || args.has("--help")) {
    std::fprintf(stderr,
                 "%s\nusage: abort_bench MODEL.tern [--tokens 100000] [--after-ms 500] [--repeat 5] "
                 "[--threads 0] [--backend cpu|vulkan]\n",
                 args.error().c_str());
    return 2;
  }
  const int64_t n = args.get_int("--tokens", 100000, 1, int64_t(1) << 31);
  const int64_t after_ms = args.get_int("--after-ms", 500, 0, 3600 * 1000);
  const int64_t repeat = args.get_int("--repeat", 5, 1, 1000);
  const int64_t threads = args.get_int("--threads", 0, 0, 1024);
  const std::string backend = args.get("--backend", "cpu");
  if (!args.ok() || (backend != "cpu" && backend != "vulkan")) {
    std::fprintf(stderr, "abort_bench: %s\n", args.ok() ? "--backend takes cpu or vulkan" : args.error().c_str());
    return 2;
  }
  tern_model* model = nullptr;
  if (tern_model_load(args.positional()[0].c_str(), &model) != TERN_OK) {
    std::fprintf(stderr, "abort_bench: %s\n", tern_last_error());
    return 1;
  }
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = backend == "cpu" ? TERN_BACKEND_CPU : TERN_BACKEND_VULKAN;
  so.threads = int(threads);
  so.max_tokens = n;
  so.max_batch = n;
  tern_session* s = nullptr;
  if (tern_session_create(model, &so, &s) != TERN_OK) {
    std::fprintf(stderr, "abort_bench: %s\n", tern_last_error());
    tern_model_free(model);
    return 1;
  }
  const int64_t vocab = tern_session_vocab_size(s);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 7919 + 13) % vocab);
  std::vector<float> logits(size_t(n) * size_t(vocab));
  Abort abort;
  tern_session_set_callbacks(s, aborted, progress, &abort);
  std::vector<double> latencies;
  int rc = 0;
  for (int64_t r = 0; r < repeat && rc == 0; ++r) {
    abort.requested = false;
    abort.rows_done = 0;
    Clock::time_point requested_at;
    std::thread requester([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
      requested_at = Clock::now();
      abort.requested = true;
    });
    const Clock::time_point start = Clock::now();
    const tern_status st = tern_session_forward(s, ids.data(), n, logits.data());
    const Clock::time_point end = Clock::now();
    requester.join();
    if (st == TERN_OK) {
      std::printf("run %lld: the forward of %lld tokens finished in %.1f ms, before the request at %lld ms\n",
                  static_cast<long long>(r), static_cast<long long>(n), ms(end - start),
                  static_cast<long long>(after_ms));
      continue;
    }
    if (st != TERN_ABORTED) {
      std::fprintf(stderr, "abort_bench: %s\n", tern_session_last_error(s));
      rc = 1;
      break;
    }
    latencies.push_back(ms(end - requested_at));
    std::printf("run %lld: aborted at %lld of %lld rows; returned %.2f ms after the request (%.1f ms into the call)\n",
                static_cast<long long>(r), static_cast<long long>(abort.rows_done.load()), static_cast<long long>(n),
                latencies.back(), ms(end - start));
  }
  if (!latencies.empty()) {
    std::sort(latencies.begin(), latencies.end());
    tern_backend_info info{};
    tern_session_get_backend(s, &info);
    std::printf("abort latency over %zu runs on %s (%s): median %.2f ms, max %.2f ms\n", latencies.size(),
                info.device_name, tern_cpu_description(), latencies[latencies.size() / 2], latencies.back());
  }
  tern_session_free(s);
  tern_model_free(model);
  return rc;
}
