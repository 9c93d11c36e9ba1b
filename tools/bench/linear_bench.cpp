// A model's linear layers against bare XNNPACK fully-connected operators of the same shapes, in one run:
// how close does Tern's LINEAR come to XNNPACK's own speed? A benchmark that prints numbers, not a test.
//
//   build/tools/bench/linear_bench MODEL.tern [--tokens N] [--threads T] [--repetitions R]
#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "cli.h"
#include "core/model.h"
#include "tern/tern.h"

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A bare XNNPACK fully-connected [n, in] x [out, in]^T with its own random weights and buffers.
struct BareFc {
  BareFc(int64_t n, int64_t in, int64_t out) : n(n) {
    std::mt19937 rng(uint32_t(in * 31 + out));
    std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
    w.resize(size_t(in * out));
    b.resize(size_t(out));
    x.resize(size_t(n * in));
    y.resize(size_t(n * out));
    for (auto* v : {&w, &b, &x})
      for (auto& f : *v) f = dist(rng);
    xnn_create_fully_connected_nc_f32(size_t(in), size_t(out), size_t(in), size_t(out), w.data(), b.data(),
                                      -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                                      0, &op);
  }
  ~BareFc() { xnn_delete_operator(op); }
  double run(pthreadpool_t pool) {
    double t0 = now_s();
    xnn_setup_fully_connected_nc_f32(op, size_t(n), x.data(), y.data(), pool);
    xnn_run_operator(op, pool);
    return now_s() - t0;
  }
  int64_t n;
  std::vector<float> w, b, x, y;
  xnn_operator_t op = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  tern::cli::Args args(argc, argv, {"--tokens", "--threads", "--repetitions"}, {"-h", "--help"});
  if (args.has("-h") || args.has("--help") || args.positional().size() != 1) {
    std::puts("usage: linear_bench MODEL.tern [--tokens 256] [--threads 1] [--repetitions 9]");
    return args.positional().size() == 1 ? 0 : 2;
  }
  const int64_t n = args.get_int("--tokens", 256, 1, 1 << 20);
  const int threads = int(args.get_int("--threads", 1, 1, 256));
  const int reps = int(args.get_int("--repetitions", 9, 1, 1000));
  if (!args.ok()) {
    std::fprintf(stderr, "linear_bench: %s\n", args.error().c_str());
    return 2;
  }
  const std::string path = args.positional()[0];
  auto loaded = tern::Model::load_file(path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "linear_bench: %s\n", loaded.status().message().c_str());
    return 1;
  }
  const tern::Model& m = *loaded.value();
  tern_model* model = nullptr;
  tern_model_load(path.c_str(), &model);
  tern_model_info info{};
  tern_model_get_info(model, &info);
  if (info.max_context > 0 && n > info.max_context) {
    std::fprintf(stderr, "linear_bench: --tokens %lld exceeds the model's context %lld\n", (long long)n,
                 (long long)info.max_context);
    return 2;
  }

  // Tern: the LINEAR ops' share of warm forwards, from the session's per-op profile.
  tern_session* s = tern::bench::open_session(model, threads, n);
  if (!s) {
    std::fprintf(stderr, "linear_bench: %s\n", tern_last_error());
    return 1;
  }
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(i % info.vocab_size);
  std::vector<float> logits(size_t(n * info.vocab_size));
  tern_session_forward(s, ids.data(), n, logits.data());
  size_t count = 0;
  tern_session_get_profile(s, nullptr, 0, &count);
  std::vector<std::vector<uint64_t>> per_op(count);  // per op: ns of each warm run
  std::vector<tern_op_profile> prof(count);
  for (int r = 0; r < reps; ++r) {
    tern_session_set_profiling(s, 1);
    tern_session_forward(s, ids.data(), n, logits.data());
    tern_session_get_profile(s, prof.data(), count, &count);
    for (size_t i = 0; i < count; ++i) per_op[i].push_back(prof[i].total_ns);
  }

  // Bare XNNPACK: one operator per LINEAR op, same shapes and pool size, run in the model's order each repetition
  // (so weights leave the cache between uses as they do in the model). One row per distinct shape.
  pthreadpool_t pool = pthreadpool_create(size_t(threads));
  std::vector<const tern::Node*> linears;
  std::vector<std::unique_ptr<BareFc>> bare;
  for (const tern::Node& node : m.nodes()) {
    if (node.code != tern::fb::OpCode::LINEAR) continue;
    linears.push_back(&node);
    bare.push_back(std::make_unique<BareFc>(n, node.weights[0]->shape[1], node.weights[0]->shape[0]));
  }
  std::vector<std::vector<double>> bare_times(bare.size());
  for (int r = 0; r <= reps; ++r) {
    for (size_t i = 0; i < bare.size(); ++i) {
      double t = bare[i]->run(pool);
      if (r > 0) bare_times[i].push_back(t);  // the first pass warms up
    }
  }
  auto median = [](auto v) {
    std::sort(v.begin(), v.end());
    return double(v[v.size() / 2]);
  };
  std::map<std::pair<int64_t, int64_t>, std::tuple<int, double, double>> shapes;  // (in, out) -> (ops, tern s, bare s)
  for (size_t i = 0; i < linears.size(); ++i) {
    const tern::Node& node = *linears[i];
    auto& [ops, tern_s, bare_s] = shapes[{node.weights[0]->shape[1], node.weights[0]->shape[0]}];
    ops += 1;
    tern_s += median(per_op[size_t(node.index)]) * 1e-9;
    bare_s += median(bare_times[i]);
  }
  std::printf("model: %s, n = %lld tokens, %d thread(s), median of %d runs\n\n", path.c_str(), (long long)n, threads, reps);
  std::printf("| in x out | ops | Tern ms | bare XNNPACK ms | Tern speed / XNNPACK speed |\n|---|---:|---:|---:|---:|\n");
  double tern_total = 0, bare_total = 0;
  for (const auto& [shape, row] : shapes) {
    const auto& [ops, tern_s, bare_s] = row;
    tern_total += tern_s;
    bare_total += bare_s;
    std::printf("| %lld x %lld | %d | %.3f | %.3f | %.1f%% |\n", (long long)shape.first, (long long)shape.second, ops,
                tern_s * 1e3, bare_s * 1e3, 100.0 * bare_s / tern_s);
  }
  std::printf("| all | | %.3f | %.3f | %.1f%% |\n", tern_total * 1e3, bare_total * 1e3, 100.0 * bare_total / tern_total);
  pthreadpool_destroy(pool);
  tern_session_free(s);
  tern_model_free(model);
  return 0;
}
