// SPDX-License-Identifier: MIT
// A model's linear layers against bare XNNPACK fully-connected operators of the same shapes, in one run: how close
// does Tern's LINEAR, on the model's weights as converted (f32, f16, int8 or int4), come to XNNPACK's f32, f16 and
// qs8 operators? For N = 1 row (generation) and N = --tokens rows, one line per distinct shape: ms per call and
// GFLOP/s of each. The implementations take turns within every repetition (the first one rotating), so machine noise
// hits all alike. XNNPACK's inputs are prepared beforehand, not timed: converted to f16, or quantised to int8 with one
// static scale (qs8 has no dynamic quantisation, which Tern's int8/int4 LINEAR does per block of 32 inside its time).
// An operator XNNPACK can't create on this CPU is reported as such. A benchmark that prints numbers, not a test.
//
//   build/tools/bench/linear_bench MODEL.tern [--tokens N] [--threads T] [--repetitions R]
#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "cli.h"
#include "format/half.h"
#include "format/model.h"
#include "tern/tern.h"

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

const char* status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
  }
  return "unknown status";
}

enum Kind { F32, F16, QS8 };
const char* const kKindNames[] = {"f32", "f16", "qs8"};

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A bare XNNPACK fully-connected [n, in] x [out, in]^T of one kind with its own random weights and buffers; the
// inputs are converted (f16) or quantised (qs8, scale 0.1 / 127 for inputs and weights) here, before any timing.
struct BareFc {
  BareFc(Kind kind, int64_t n, int64_t in, int64_t out) : kind(kind), n(n) {
    std::mt19937 rng(uint32_t(in * 31 + out));
    std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
    std::vector<float> w(static_cast<size_t>(in * out)), b(static_cast<size_t>(out));
    std::vector<float> xf(static_cast<size_t>(n * in));
    for (auto* v : {&w, &b, &xf})
      for (auto& f : *v) f = dist(rng);
    const float inf = std::numeric_limits<float>::infinity();
    if (kind == F32) {
      x = bytes_of(xf);
      y.resize(size_t(n * out) * sizeof(float));
      status = xnn_create_fully_connected_nc_f32(size_t(in), size_t(out), size_t(in), size_t(out), w.data(), b.data(),
                                                 -inf, inf, 0, &op);
    } else if (kind == F16) {
      auto halves = [](const std::vector<float>& v) {
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) h[i] = tern::float_to_half(v[i]);
        return h;
      };
      x = bytes_of(halves(xf));
      y.resize(size_t(n * out) * sizeof(uint16_t));
      status = xnn_create_fully_connected_nc_f16(size_t(in), size_t(out), size_t(in), size_t(out), halves(w).data(),
                                                 halves(b).data(), -inf, inf, 0, &op);
    } else {
      const float scale = 0.1f / 127;  // inputs and weights
      auto quantise = [scale](const std::vector<float>& v) {
        std::vector<int8_t> q(v.size());
        for (size_t i = 0; i < v.size(); ++i) q[i] = int8_t(std::clamp(std::lround(v[i] / scale), -127L, 127L));
        return q;
      };
      std::vector<int32_t> b32(b.size());
      for (size_t i = 0; i < b.size(); ++i) b32[i] = int32_t(std::lround(b[i] / (scale * scale)));
      x = bytes_of(quantise(xf));
      y.resize(size_t(n * out));
      const float out_scale = 0.02f * std::sqrt(float(in)) / 127;  // a few standard deviations of a random output
      status = xnn_create_fully_connected_nc_qs8(size_t(in), size_t(out), size_t(in), size_t(out), 0, scale, scale,
                                                 quantise(w).data(), b32.data(), 0, out_scale, -128, 127, 0, &op);
    }
    if (status != xnn_status_success) op = nullptr;
  }
  ~BareFc() { xnn_delete_operator(op); }
  double run(pthreadpool_t pool) {
    double t0 = now_s();
    if (kind == F32)
      xnn_setup_fully_connected_nc_f32(op, size_t(n), reinterpret_cast<const float*>(x.data()),
                                       reinterpret_cast<float*>(y.data()), pool);
    else if (kind == F16)
      xnn_setup_fully_connected_nc_f16(op, size_t(n), x.data(), y.data(), pool);
    else
      xnn_setup_fully_connected_nc_qs8(op, size_t(n), reinterpret_cast<const int8_t*>(x.data()),
                                       reinterpret_cast<int8_t*>(y.data()), pool);
    xnn_run_operator(op, pool);
    return now_s() - t0;
  }
  Kind kind;
  int64_t n;
  std::vector<uint8_t> x, y;
  xnn_status status = xnn_status_success;
  xnn_operator_t op = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  tern::cli::Args args(argc, argv, {"--tokens", "--threads", "--repetitions"}, {"-h", "--help"});
  if (args.has("-h") || args.has("--help") || args.positional().size() != 1) {
    std::puts("usage: linear_bench MODEL.tern [--tokens 256] [--threads 1] [--repetitions 9]");
    return args.positional().size() == 1 ? 0 : 2;
  }
  const int64_t tokens = args.get_int("--tokens", 256, 1, 1 << 20);
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
  if (info.max_context > 0 && tokens > info.max_context) {
    std::fprintf(stderr, "linear_bench: --tokens %lld exceeds the model's context %lld\n", (long long)tokens,
                 (long long)info.max_context);
    return 2;
  }
  xnn_initialize(nullptr);  // Tern's CPU backend does it too; once is enough, twice is harmless
  pthreadpool_t pool = pthreadpool_create(size_t(threads));
  std::vector<const tern::Node*> linears;
  for (const tern::Node& node : m.nodes())
    if (node.code == tern::fb::OpCode::LINEAR) linears.push_back(&node);

  std::vector<int64_t> row_counts = {1};
  if (tokens != 1) row_counts.push_back(tokens);
  for (int64_t n : row_counts) {
    // Tern: the LINEAR ops' share of a forward of n tokens, from the session's per-op profile.
    tern_session* s = tern::bench::open_session(model, threads, n);
    if (!s) {
      std::fprintf(stderr, "linear_bench: %s\n", tern_last_error());
      return 1;
    }
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(i % info.vocab_size);
    std::vector<float> logits(size_t(n * info.vocab_size));
    size_t count = 0;
    tern_session_get_profile(s, nullptr, 0, &count);
    std::vector<tern_op_profile> prof(count);

    // Bare XNNPACK: per LINEAR op one operator of each kind, same shapes and pool size, run in the model's order
    // (so weights leave the cache between uses as they do in the model).
    std::vector<std::array<std::unique_ptr<BareFc>, 3>> bare(linears.size());
    for (size_t i = 0; i < linears.size(); ++i)
      for (Kind k : {F32, F16, QS8})
        bare[i][k] = std::make_unique<BareFc>(k, n, linears[i]->weights[0]->shape[1], linears[i]->weights[0]->shape[0]);

    // times[impl][i]: seconds of linears[i] in each repetition; impl 0 is Tern, 1 + k bare XNNPACK of kind k.
    std::vector<std::vector<std::vector<double>>> times(4, std::vector<std::vector<double>>(linears.size()));
    for (int r = 0; r <= reps; ++r) {  // r = 0 warms everything up
      for (int turn = 0; turn < 4; ++turn) {
        const int impl = (r + turn) % 4;
        for (size_t i = 0; i < linears.size(); ++i) {
          if (impl == 0) {
            if (i == 0) {
              tern_session_set_profiling(s, 1);
              tern_session_forward(s, ids.data(), n, logits.data());
              tern_session_get_profile(s, prof.data(), count, &count);
            }
            if (r > 0) times[0][i].push_back(double(prof[size_t(linears[i]->index)].total_ns) * 1e-9);
          } else if (BareFc& fc = *bare[i][impl - 1]; fc.op) {
            const double t = fc.run(pool);
            if (r > 0) times[size_t(impl)][i].push_back(t);
          }
        }
      }
    }

    // One row per distinct shape: (in, out) -> ops, the weights' format, and per implementation the summed medians.
    struct Row {
      int ops = 0;
      std::string format;
      std::array<double, 4> s{};
    };
    std::map<std::pair<int64_t, int64_t>, Row> shapes;
    Row all;
    for (size_t i = 0; i < linears.size(); ++i) {
      const tern::TensorInfo& w = *linears[i]->weights[0];
      Row& row = shapes[{w.shape[1], w.shape[0]}];
      for (Row* r : {&row, &all}) {
        const std::string format = tern::dtype_name(w.dtype);
        if (r->format.find(format) == std::string::npos) r->format += (r->format.empty() ? "" : "/") + format;
        r->ops += 1;
        for (size_t impl = 0; impl < 4; ++impl) r->s[impl] += times[impl][i].empty() ? 0.0 : median(times[impl][i]);
      }
    }
    std::printf("model: %s, n = %lld row(s), %d thread(s), median of %d runs\n\n", path.c_str(), (long long)n, threads,
                reps);
    std::printf("| in x out | ops | Tern weights | Tern ms | GFLOP/s | XNNPACK f32 ms | GFLOP/s | XNNPACK f16 ms | "
                "GFLOP/s | XNNPACK qs8 ms | GFLOP/s |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    auto print_row = [&](const std::string& label, const Row& row, double flops) {
      std::printf("| %s | %d | %s |", label.c_str(), row.ops, row.format.c_str());
      for (size_t impl = 0; impl < 4; ++impl) {
        if (row.s[impl] > 0)
          std::printf(" %.3f | %.1f |", row.s[impl] * 1e3, flops / row.s[impl] * 1e-9);
        else
          std::printf(" n/a | n/a |");
      }
      std::printf("\n");
    };
    double all_flops = 0;
    for (const auto& [shape, row] : shapes) {
      const double flops = 2.0 * double(n) * double(shape.first) * double(shape.second) * row.ops;
      all_flops += flops;
      print_row(std::to_string(shape.first) + " x " + std::to_string(shape.second), row, flops);
    }
    print_row("all", all, all_flops);
    for (Kind k : {F32, F16, QS8})
      if (!linears.empty() && !bare[0][k]->op)
        std::printf("\nXNNPACK %s: no operator on this CPU (xnn_create_fully_connected_nc_%s: %s)\n", kKindNames[k],
                    kKindNames[k], status_name(bare[0][k]->status));
    std::printf("\n");
    tern_session_free(s);
  }
  pthreadpool_destroy(pool);
  tern_model_free(model);
  return 0;
}
